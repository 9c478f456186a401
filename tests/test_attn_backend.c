/* The attention backend (program/problem.h ts_attn_backend): FlashAttention-2 priced at the
 * system's efficiency.attention_flash, cuDNN's fused attention at efficiency.attention, the choice
 * carried by plans and written into the exports. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "planner/layer.h"
#include "planner/search.h"
#include "tests/helpers.h"

/* `test_problem`'s problem again with the backend set, as ts_problem_init applies it. */
static ts_problem with_backend(const char *model, const char *sys, ts_attn_backend b) {
    ts_problem base = test_problem(model, sys, 64, 256, 8192, 1);
    ts_train t = base.train;
    t.attn_backend = b;
    ts_problem pb;
    cr_assert_eq(ts_problem_init(&pb, &base.model, &base.sys, &t, 64), TS_OK, "%s", ts_error_message());
    return pb;
}

Test(attn_backend, flash_attention_2_runs_at_the_systems_flash_efficiency) {
    ts_problem fused = with_backend("llama3-70b", "h100-sxm-dgx", TS_ATTN_FUSED);
    ts_problem fa2 = with_backend("llama3-70b", "h100-sxm-dgx", TS_ATTN_FLASH);
    cr_assert_gt(fa2.sys.attention_flash_eff, 0, "the H100 spec states FA2's efficiency");
    cr_expect_eq(fused.sys.attention_eff, 0.5);
    cr_expect_eq(fa2.sys.attention_eff, fa2.sys.attention_flash_eff);
    ts_shard sh = {.tp = 8, .cp = 1, .ep = 1, .sp = 1, .mbs = 1, .recompute = TS_RECOMPUTE_NONE};
    ts_layer_fwd a, b;
    ts_layer_attention_of(&fused, &sh, &a);
    ts_layer_attention_of(&fa2, &sh, &b);
    double want = fused.sys.attention_eff / fa2.sys.attention_flash_eff;
    cr_expect(fabs(b.attn_fwd_s / a.attn_fwd_s - want) < 1e-9, "forward %g, want ×%g", b.attn_fwd_s / a.attn_fwd_s, want);
    cr_expect(fabs(b.attn_bwd_s / a.attn_bwd_s - want) < 1e-9, "backward %g, want ×%g", b.attn_bwd_s / a.attn_bwd_s, want);
    cr_expect_eq(b.gemm_s, a.gemm_s, "the GEMMs do not depend on the attention kernel");
}

/* Llama-3-70B at tp8 pp4 on `sys` priced with cuDNN's fused attention (*a) and FlashAttention-2 (*b). */
static void both_backends(const char *sys, ts_eval *a, ts_eval *b) {
    ts_problem fused = with_backend("llama3-70b", sys, TS_ATTN_FUSED);
    ts_problem fa2 = with_backend("llama3-70b", sys, TS_ATTN_FLASH);
    ts_layout l;
    cr_assert_eq(ts_layout_parse("test", "dp=2,tp=8,pp=4,cp=1,ep=1,sp=1,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none", &l),
                 TS_OK);
    cr_assert_eq(ts_evaluate(&fused, &l, a), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_evaluate(&fa2, &l, b), TS_OK, "%s", ts_error_message());
}

Test(attn_backend, a_system_without_a_flash_figure_prices_both_alike) {
    /* On an A100 FlashAttention-2 is the fused kernel the spec's attention efficiency stands for. */
    cr_assert_eq(with_backend("llama3-70b", "a100-80g-dgx", TS_ATTN_FLASH).sys.attention_flash_eff, 0);
    ts_eval a, b;
    both_backends("a100-80g-dgx", &a, &b);
    cr_expect_eq(a.step_s, b.step_s);
}

Test(attn_backend, the_step_is_slower_by_the_attention_alone) {
    ts_eval a, b;
    both_backends("h100-sxm-dgx", &a, &b);
    cr_expect_gt(b.time.compute, a.time.compute);
    cr_expect_eq(b.time.tp_comm, a.time.tp_comm);
    cr_expect_eq(b.time.dp_comm, a.time.dp_comm);
    cr_expect_eq(b.mem.total, a.mem.total, "the same activations: both keep no scores");
}

/* plan -> JSON request -> sim and export: the backend travels with the plan. */
Test(attn_backend, plans_carry_the_backend_into_sim_and_exports) {
    char *dir = make_temp_dir();
    char plan[4200];
    snprintf(plan, sizeof plan, "%s/p.json", dir);
    cli_result r = run_cli("plan", "--model", "llama3-8b", "--system", "h100-sxm-dgx", "--gpus", "8", "--global-batch",
                           "64", "--seq", "8192", "--attention-backend", "flash", "--top", "1", "-o", plan, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    test_plan_carries(plan, "attention_backend", "flash", "the plan's step, re-priced with FlashAttention-2");
    r = test_export_plan(plan, "megatron");
    cr_expect(strstr(r.out, "--attention-backend flash") != NULL, "%s", r.out);
    cli_result_free(&r);
    r = test_export_plan(plan, "megatron-bridge");
    cr_expect(strstr(r.out, "attention_backend=AttnBackend.flash") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "from megatron.core.transformer.enums import AttnBackend") != NULL);
    cli_result_free(&r);
    remove_dir(dir);
}

Test(attn_backend, unfused_is_the_no_flash_flag) {
    cli_result a = run_cli("plan", "--model", "llama2-7b", "--system", "a100-80g-dgx", "--gpus", "8", "--global-batch",
                           "64", "--seq", "2048", "--attention-backend", "unfused", "--top", "1", "--json", NULL);
    cli_result b = run_cli("plan", "--model", "llama2-7b", "--system", "a100-80g-dgx", "--gpus", "8", "--global-batch",
                           "64", "--seq", "2048", "--no-flash-attn", "--top", "1", "--json", NULL);
    cJSON *x = parse_json_output(&a, "plan --attention-backend unfused");
    cJSON *y = parse_json_output(&b, "plan --no-flash-attn");
    const cJSON *bx = cJSON_GetArrayItem(cJSON_GetObjectItem(x, "layouts"), 0);
    const cJSON *by = cJSON_GetArrayItem(cJSON_GetObjectItem(y, "layouts"), 0);
    cr_expect_eq(json_num(bx, "step_s", "x"), json_num(by, "step_s", "y"));
    cr_expect_eq(cJSON_IsFalse(cJSON_GetObjectItem(json_obj(x, "request", "$"), "flash_attention")), 1);
    cJSON_Delete(x);
    cJSON_Delete(y);
    cli_result_free(&a);
    cli_result_free(&b);
}
