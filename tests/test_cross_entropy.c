/* The LM loss's cross entropy, fused or unfused (program/recipe.c ts_edge_recipe_of): its bytes per
 * logit, who decides (the stack, --cross-entropy, a published row), what the head costs, and the
 * plan carrying it into sim and the Megatron-LM export. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/paths.h"
#include "planner/cost.h"
#include "planner/layer.h"
#include "planner/published.h"
#include "program/program.h"
#include "program/recipe.h"
#include "program/schedule.h"
#include "tests/helpers.h"

static ts_stack load_stack(const char *name) {
    ts_stack st;
    cr_assert_eq(ts_stack_load(name, ts_schedule_names, ts_recompute_names, &st), TS_OK, "%s: %s", name,
                 ts_error_message());
    return st;
}

/* Megatron-Core's passes per logit: unfused 38 bytes forward and 14 backward, fused 22 and 6, over
 * the rank's T × v/t logits. */
Test(cross_entropy, bytes_per_logit) {
    ts_problem pb = test_problem("llama3-8b", "h100-sxm-dgx", 8, 64, 4096, 1);
    ts_shard sh = {.tp = 2, .cp = 1, .ep = 1, .sp = 1, .mbs = 1, .recompute = TS_RECOMPUTE_NONE};
    double logits = 4096.0 * (double)pb.model.vocab / 2;
    ts_edge_recipe e;
    pb.train.ce_fusion = 1;
    ts_edge_recipe_of(&pb, &sh, &e);
    cr_expect_float_eq(e.loss_fwd_bytes, 22 * logits, 1e-9 * logits);
    cr_expect_float_eq(e.loss_bwd_bytes, 6 * logits, 1e-9 * logits);
    pb.train.ce_fusion = 0;
    ts_edge_recipe_of(&pb, &sh, &e);
    cr_expect_float_eq(e.loss_fwd_bytes, 38 * logits, 1e-9 * logits);
    cr_expect_float_eq(e.loss_bwd_bytes, 14 * logits, 1e-9 * logits);
}

/* The stack states the default (megatron-core fused; Megatron-LM before core_r0.8.0 unfused); a
 * given choice overrides it either way. */
Test(cross_entropy, the_stack_states_it_and_the_flag_overrides) {
    ts_train t;
    ts_train_defaults(&t);
    cr_expect_eq(t.ce_fusion, -1);
    cr_expect_eq(ts_train_ce_fused(&t), 1, "the unrestricted stack: fused");
    t.stack = load_stack("megatron-core");
    cr_expect_eq(ts_train_ce_fused(&t), 1);
    t.ce_fusion = 0;
    cr_expect_eq(ts_train_ce_fused(&t), 0, "--cross-entropy unfused on megatron-core");
    t.ce_fusion = -1;
    const char *unfused[] = {"megatron-lm-2021", "megatron-lm-2023", "megatron-deepspeed", "deepspeed", "megatron-zb"};
    for (size_t i = 0; i < sizeof unfused / sizeof unfused[0]; i++) {
        t.stack = load_stack(unfused[i]);
        cr_expect_eq(ts_train_ce_fused(&t), 0, "%s states the unfused loss", unfused[i]);
    }
    t.ce_fusion = 1;
    cr_expect_eq(ts_train_ce_fused(&t), 1, "--cross-entropy fused on an older stack");
}

/* The closed form's head and the step program's loss ops carry the same bytes: the unfused loss
 * costs 16 bytes a logit more forward and 8 more backward. */
Test(cross_entropy, head_and_program_price_the_same_passes) {
    ts_problem f = test_problem("llama3-8b", "h100-sxm-dgx", 8, 64, 4096, 1), u = f;
    f.train.ce_fusion = 1;
    u.train.ce_fusion = 0;
    ts_shard sh = {.tp = 2, .cp = 1, .ep = 1, .sp = 1, .mbs = 1, .recompute = TS_RECOMPUTE_NONE};
    ts_layer_cost a, b;
    ts_head_cost_of(&f, &sh, &a);
    ts_head_cost_of(&u, &sh, &b);
    double logits = 4096.0 * (double)f.model.vocab / 2;
    cr_expect_float_eq(b.fwd_s - a.fwd_s, ts_memory_s(&f.sys, 16 * logits, 1), 1e-12);
    cr_expect_float_eq(b.bwd_s - a.bwd_s, ts_memory_s(&f.sys, 8 * logits, 1), 1e-12);
    cr_expect_eq(b.model_flops, a.model_flops);

    ts_layout l = test_layout("dp=4,tp=2,pp=1,cp=1,ep=1,sp=1,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none");
    ts_program p;
    cr_assert_eq(ts_program_build(&u, &l, NULL, &p), TS_OK, "%s", ts_error_message());
    int fwd = 0, bwd = 0;
    const ts_stage_program *sp = &p.stages[0];
    for (int i = 0; i < sp->n_ops; i++) {
        const ts_op *op = &sp->ops[i];
        if (op->part != TS_PART_LOSS || op->mb != 0) continue;
        double want = op->phase == TS_PHASE_FWD ? 38 * logits : 14 * logits;
        cr_expect_float_eq(op->bytes, want, 1e-9 * logits, "%s loss op", ts_phase_names[op->phase]);
        fwd += op->phase == TS_PHASE_FWD;
        bwd += op->phase == TS_PHASE_BWD;
    }
    cr_expect_eq(fwd, 1);
    cr_expect_eq(bwd, 1);
    ts_program_free(&p);
}

/* plan --cross-entropy unfused -> the request keeps it -> sim re-prices the plan's step, and the
 * Megatron-LM export leaves --cross-entropy-loss-fusion out; the default plan exports it. */
Test(cross_entropy, plans_carry_it_into_sim_and_exports) {
    char *dir = make_temp_dir();
    char plan[4200], fused[4200];
    snprintf(plan, sizeof plan, "%s/u.json", dir);
    snprintf(fused, sizeof fused, "%s/f.json", dir);
    cli_result r = run_cli("plan", "--model", "llama3-8b", "--system", "h100-sxm-dgx", "--gpus", "8", "--global-batch",
                           "64", "--seq", "4096", "--cross-entropy", "unfused", "--top", "1", "-o", plan, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    r = run_cli("plan", "--model", "llama3-8b", "--system", "h100-sxm-dgx", "--gpus", "8", "--global-batch", "64",
                "--seq", "4096", "--top", "1", "-o", fused, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    test_plan_carries(plan, "cross_entropy", "unfused", "the plan's step, re-priced with the unfused loss");
    r = test_export_plan(plan, "megatron");
    cr_expect(strstr(r.out, "--cross-entropy-loss-fusion") == NULL, "%s", r.out);
    cli_result_free(&r);
    r = test_export_plan(fused, "megatron");
    cr_expect(strstr(r.out, "--cross-entropy-loss-fusion") != NULL, "%s", r.out);
    cli_result_free(&r);
    remove_dir(dir);
}

/* The published reader over `row` alone: its status, the prediction in *s. */
static ts_status read_row(const cJSON *row, double *s) {
    char *text = cJSON_PrintUnformatted(row), rows[8192];
    cr_assert_not_null(text);
    snprintf(rows, sizeof rows, "[%s]", text);
    free(text);
    return test_published_rows(rows, s);
}

/* The Grok-1 and GPT-3 rows ran NeMo 1.0 recipes without the fusion, the Llama 3.1 and Nemotron-4
 * ones with it: the rows say so, the reader takes it (a Grok-1 row is slower unfused), and a value
 * not true or false is refused. */
Test(cross_entropy, published_rows_state_their_loss) {
    char path[4096];
    snprintf(path, sizeof path, "%s/validation/published/published-cases.json", ts_data_dir());
    char *text = read_file(path);
    cJSON *rows = cJSON_Parse(text);
    cr_assert(cJSON_IsArray(rows));
    int unfused = 0, fused = 0;
    cJSON *grok = NULL, *row;
    cJSON_ArrayForEach(row, rows) {
        const char *id = cJSON_GetObjectItem(row, "id")->valuestring;
        const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(row, "training"), "cross_entropy_fusion");
        if (strstr(id, "grok1") || strstr(id, "dgxc-gpt3-175b")) {
            unfused++;
            cr_expect(cJSON_IsFalse(v), "%s", id);
        }
        if (strstr(id, "dgxc-llama3.1") || strstr(id, "dgxc-nemotron4")) {
            fused++;
            cr_expect(cJSON_IsTrue(v), "%s", id);
        }
        if (strcmp(id, "nvidia-dgxc-grok1-314b-bf16-8gpu") == 0) grok = row;
    }
    cr_expect_eq(unfused, 28);
    cr_expect_gt(fused, 0);
    cr_assert_not_null(grok);
    cJSON *training = cJSON_GetObjectItem(grok, "training");
    double slow = 0, fast = 0;
    cr_assert_eq(read_row(grok, &slow), TS_OK, "%s", ts_error_message());
    cJSON_ReplaceItemInObject(training, "cross_entropy_fusion", cJSON_CreateTrue());
    cr_assert_eq(read_row(grok, &fast), TS_OK, "%s", ts_error_message());
    cr_expect_lt(fast, slow, "the fused loss is faster");
    cJSON_ReplaceItemInObject(training, "cross_entropy_fusion", cJSON_CreateString("yes"));
    cr_expect_eq(read_row(grok, &fast), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "training.cross_entropy_fusion: expected true or false") != NULL, "%s",
              ts_error_message());
    cJSON_Delete(rows);
    free(text);
}

/* DeepSeek-V3's MTP depth computes its own logits through the shared head and its own loss, after
 * projecting 2h -> h: the head's GEMM FLOPs and the loss's bytes double, the projection adds
 * 2·T·2h·h/t, in the closed form and in the step program's head ops alike. */
Test(cross_entropy, mtp_depths_add_a_head_and_a_loss) {
    ts_problem with = test_problem("deepseek-v3", "h800-dgx", 2048, 4096, 4096, 1), without = with;
    cr_assert_eq(with.model.mtp_layers, 1);
    without.model.mtp_layers = 0;
    ts_shard sh = {.tp = 1, .cp = 1, .ep = 64, .sp = 0, .mbs = 1, .recompute = TS_RECOMPUTE_NONE};
    double T = 4096, h = (double)with.model.hidden, v = (double)with.model.vocab;
    ts_edge_recipe a, b;
    ts_edge_recipe_of(&without, &sh, &a);
    ts_edge_recipe_of(&with, &sh, &b);
    cr_expect_eq(a.head.count, 1);
    cr_expect_eq(a.mtp_proj.count, 0);
    cr_expect_eq(b.head.count, 2);
    cr_expect_float_eq(b.loss_fwd_bytes, 2 * a.loss_fwd_bytes, 1e-9 * a.loss_fwd_bytes);
    cr_expect_float_eq(b.loss_bwd_bytes, 2 * a.loss_bwd_bytes, 1e-9 * a.loss_bwd_bytes);
    ts_layer_cost x, y;
    ts_head_cost_of(&without, &sh, &x);
    ts_head_cost_of(&with, &sh, &y);
    double head_flops = 2 * T * v * h, proj_flops = 2 * T * 2 * h * h;
    cr_expect_float_eq(x.model_flops, 3 * head_flops, 1e-9 * head_flops);
    cr_expect_float_eq(y.model_flops, 3 * (2 * head_flops + proj_flops), 1e-9 * head_flops);
    cr_expect_gt(y.fwd_s, 1.9 * x.fwd_s);

    ts_layout l = test_layout("dp=32,tp=1,pp=16,cp=4,ep=64,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none");
    ts_program p;
    cr_assert_eq(ts_program_build(&with, &l, NULL, &p), TS_OK, "%s", ts_error_message());
    const ts_stage_program *last = &p.stages[p.pp - 1];
    double fwd_flops = 0;
    for (int i = 0; i < last->n_ops; i++)
        if (last->ops[i].part == TS_PART_HEAD && last->ops[i].mb == 0 && last->ops[i].phase == TS_PHASE_FWD)
            fwd_flops += last->ops[i].flops;
    double T_cp = T / 4;
    cr_expect_float_eq(fwd_flops, 2 * T_cp * v * h * 2 + 2 * T_cp * 2 * h * h, 1e-9 * fwd_flops);
    ts_program_free(&p);
}
