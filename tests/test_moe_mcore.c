/* MoE as Megatron-Core runs it (program/recipe_moe.c, program/program.c, planner/layer.c):
 * SequentialMLP against the grouped GEMM, the alltoall dispatcher's reorders of the routed rows,
 * its TP gather and reduce-scatter on the backward's critical path, and the published recipes'
 * expert settings (planner/published.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/published.h"
#include "program/program.h"
#include "program/recipe.h"
#include "tests/helpers.h"

static ts_layout layout(const char *text) {
    ts_layout l;
    cr_assert_eq(ts_layout_parse("test", text, &l), TS_OK, "%s: %s", text, ts_error_message());
    return l;
}

static ts_shard shard_of(const ts_layout *l) {
    return (ts_shard){.tp = l->tp, .cp = l->cp, .ep = l->ep, .etp = l->etp, .sp = l->sp, .mbs = l->mbs,
                      .recompute = l->recompute};
}

Test(moe_mcore, reorders_copy_the_routed_rows_with_more_than_one_local_expert) {
    ts_problem pb = test_problem("mixtral-8x7b", "h100-sxm-dgx", 64, 256, 4096, 1);
    ts_layout one = layout("dp=32,tp=2,pp=1,cp=1,ep=8,sp=1,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none");
    ts_layout two = layout("dp=32,tp=2,pp=1,cp=1,ep=4,sp=1,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none");
    ts_shard s1 = shard_of(&one), s2 = shard_of(&two);
    ts_mlp_recipe r;
    ts_mlp_recipe_of(&pb, &s1, 1, &r);
    cr_expect_eq(r.copy_bytes, 0, "one local expert: nothing to reorder");
    ts_mlp_recipe_of(&pb, &s2, 1, &r);
    double h = (double)pb.model.hidden;
    cr_expect(fabs(r.copy_bytes - 2 * 2.0 * 2.0 * r.routed_tokens * h) < 1e-6 * r.copy_bytes,
              "two reorders, each read and written at 16 bits: %g", r.copy_bytes);
    pb.train.moe_grouped_gemm = 0;
    ts_mlp_recipe_of(&pb, &s2, 1, &r);
    cr_expect(fabs(r.copy_bytes - 3 * 2.0 * 2.0 * r.routed_tokens * h) < 1e-6 * r.copy_bytes,
              "SequentialMLP concatenates its outputs too");
    pb.train.moe_grouped_gemm = 1;
    pb.train.moe_dispatcher = TS_MOE_DISPATCH_DEEPEP;
    ts_mlp_recipe_of(&pb, &s2, 1, &r);
    cr_expect_eq(r.copy_bytes, 0, "DeepEP's layout needs no reorder");
    /* the CPU executor reorders after every all-to-all (exec/ops_moe.c reorder_rows) */
    ts_problem cpu = test_problem("tiny-moe", "cpu-localhost", 2, 8, 256, 1);
    ts_layout c = layout("dp=2,tp=1,pp=1,cp=1,ep=2,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none");
    ts_shard sc = shard_of(&c);
    ts_mlp_recipe_of(&cpu, &sc, 1, &r);
    cr_expect_gt(r.copy_bytes, 0);
}

Test(moe_mcore, sequential_experts_cost_their_own_gemms) {
    ts_problem pb = test_problem("mixtral-8x7b", "h100-sxm-dgx", 16, 64, 4096, 1);
    ts_layout l = layout("dp=8,tp=2,pp=1,cp=1,ep=2,sp=1,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none");
    ts_eval grouped, seq;
    cr_assert_eq(ts_evaluate(&pb, &l, &grouped), TS_OK, "%s", ts_error_message());
    pb.train.moe_grouped_gemm = 0;
    cr_assert_eq(ts_evaluate(&pb, &l, &seq), TS_OK, "%s", ts_error_message());
    cr_expect_gt(seq.time.compute, grouped.time.compute, "four GEMMs of a quarter the rows, and a concatenation");
    cr_expect_eq(seq.time.ep_comm, grouped.time.ep_comm);
}

/* The op of `part` and `phase` in an MoE layer's backward, the first at or after index `from`. */
static int find_op(const ts_stage_program *sp, int from, int part, int phase) {
    for (int i = from; i < sp->n_ops; i++)
        if (sp->ops[i].part == part && sp->ops[i].phase == phase) return i;
    return -1;
}

static int depends_on(const ts_program *p, const ts_stage_program *sp, int op, int on) {
    const ts_op *o = &sp->ops[op];
    for (uint32_t k = 0; k < o->ndeps; k++)
        if ((int)sp->deps[o->dep0 + k] == on) return 1;
    (void)p;
    return 0;
}

Test(moe_mcore, dispatcher_collectives_sit_on_the_backward_path) {
    ts_problem pb = test_problem("mixtral-8x7b", "h100-sxm-dgx", 8, 64, 4096, 1);
    ts_layout l = layout("dp=4,tp=2,pp=1,cp=1,ep=2,sp=1,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none");
    ts_program p;
    cr_assert_eq(ts_program_build(&pb, &l, NULL, &p), TS_OK, "%s", ts_error_message());
    const ts_stage_program *sp = &p.stages[0];
    int gather = find_op(sp, 0, TS_PART_SP_GATHER_MLP, TS_PHASE_BWD);
    cr_assert_geq(gather, 0);
    int combine = find_op(sp, gather, TS_PART_COMBINE, TS_PHASE_BWD);
    int fc2 = find_op(sp, gather, TS_PART_EXPERT_FC2, TS_PHASE_BWD);
    cr_assert(combine > gather && fc2 > combine);
    cr_expect_eq(sp->ops[combine].stream, sp->ops[gather].stream, "the all-to-all queues behind the gather");
    cr_expect(depends_on(&p, sp, fc2, combine), "the experts' output gradients arrive before their GEMMs");
    int close = find_op(sp, gather, TS_PART_TP_MLP, TS_PHASE_BWD);
    int wgrad = find_op(sp, gather, TS_PART_EXPERT_FC2, TS_PHASE_WGRAD);
    cr_assert(close >= 0 && wgrad > close);
    cr_expect(depends_on(&p, sp, wgrad, close), "the weight gradients wait for the reduce-scatter");
    ts_program_free(&p);

    /* a dense layer's gather stays beside the GEMMs (Korthikanti et al. 2022 §4.2.2) */
    ts_problem dense = test_problem("llama3-8b", "h100-sxm-dgx", 8, 64, 4096, 1);
    ts_layout d = layout("dp=4,tp=2,pp=1,cp=1,ep=1,sp=1,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none");
    cr_assert_eq(ts_program_build(&dense, &d, NULL, &p), TS_OK, "%s", ts_error_message());
    sp = &p.stages[0];
    gather = find_op(sp, 0, TS_PART_SP_GATHER_MLP, TS_PHASE_BWD);
    int dfc2 = find_op(sp, gather, TS_PART_FC2, TS_PHASE_BWD);
    int dw = find_op(sp, gather, TS_PART_FC2, TS_PHASE_WGRAD);
    cr_assert(gather >= 0 && dfc2 >= 0 && dw >= 0);
    cr_expect(!depends_on(&p, sp, dfc2, gather));
    cr_expect(depends_on(&p, sp, dw, gather), "the re-gathered input feeds the weight gradients alone");
    ts_program_free(&p);
}

Test(moe_mcore, closed_form_follows_the_exposed_dispatcher_collectives) {
    ts_problem pb = test_problem("mixtral-8x7b", "h100-sxm-dgx", 16, 64, 4096, 1);
    ts_layout l = layout("dp=4,tp=4,pp=1,cp=1,ep=4,sp=1,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none");
    double ratio = test_sim_over_closed_form(&pb, &l);
    cr_expect(fabs(ratio - 1) < 0.02, "simulated over closed form %g", ratio);
    ts_eval e;
    cr_assert_eq(ts_evaluate(&pb, &l, &e), TS_OK, "%s", ts_error_message());
    /* with the experts apart from TP (etp = 1) the block has no dispatcher collective: less TP */
    ts_layout l1 = layout("dp=4,tp=4,pp=1,cp=1,ep=4,sp=1,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none,etp=1");
    ts_eval e1;
    cr_assert_eq(ts_evaluate(&pb, &l1, &e1), TS_OK, "%s", ts_error_message());
    cr_expect_lt(e1.time.tp_comm, e.time.tp_comm);
}

/* The published reader over one Grok-1 row (2 layers, 8 GPUs) with `training_extra` added: its
 * status, the prediction in *s. */
static ts_status read_row(const char *training_extra, double *s) {
    char rows[1024];
    snprintf(rows, sizeof rows,
             "[{\"id\": \"nvidia-dgxc-grok1-314b-bf16-8gpu\", \"source\": \"test\", \"kind\": \"throughput\",\n"
             " \"model\": {\"zoo\": \"grok-1\", \"layers\": 2, \"seq_len\": 4096},\n"
             " \"hardware\": {\"count\": 8, \"system\": \"h100-sxm-dgx\"},\n"
             " \"layout\": {\"tp\": 4, \"pp\": 1, \"cp\": 1, \"ep\": 2, \"dp\": 2},\n"
             " \"training\": {\"global_batch_seqs\": 64, \"micro_batch\": 1, \"seq_len\": 4096%s},\n"
             " \"measured\": {\"train_step_s\": 2.0}}]\n",
             training_extra);
    return test_published_rows(rows, s);
}

static double predicted(const char *training_extra) {
    double s = 0;
    cr_assert_eq(read_row(training_extra, &s), TS_OK, "%s", ts_error_message());
    return s;
}

Test(moe_mcore, published_rows_carry_their_recipes_expert_settings) {
    double plain = predicted("");
    double capacity = predicted(", \"moe_capacity_factor\": 1.0, \"moe_pad_to_capacity\": true");
    double sequential = predicted(", \"moe_grouped_gemm\": false");
    double allgather = predicted(", \"moe_dispatcher\": \"allgather\"");
    cr_expect_lt(capacity, plain, "capacity 1.0 padded: no routing imbalance");
    cr_expect_gt(sequential, plain, "SequentialMLP: one GEMM per local expert");
    cr_expect_neq(allgather, plain);
    double s = 0;
    cr_expect_eq(read_row(", \"moe_dispatcher\": \"nccl\"", &s), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "training.moe_dispatcher") != NULL, "%s", ts_error_message());
}

/* --no-moe-grouped-gemm: in the plan's request, re-priced by sim, and the exports say which
 * expert kernel the plan priced (Megatron-LM's --moe-grouped-gemm, Bridge's moe_grouped_gemm). */
Test(moe_mcore, plans_and_exports_carry_the_expert_kernel) {
    char *dir = make_temp_dir();
    char seq[4200], grp[4200];
    snprintf(seq, sizeof seq, "%s/seq.json", dir);
    snprintf(grp, sizeof grp, "%s/grp.json", dir);
    const char *base[] = {"plan", "--model", "mixtral-8x7b", "--system", "h100-sxm-dgx", "--gpus", "16",
                          "--global-batch", "64", "--fix", "tp=2,ep=4,pp=1", "--top", "1", "-o"};
    const char *argv[24];
    int n = 0;
    for (size_t i = 0; i < sizeof base / sizeof *base; i++) argv[n++] = base[i];
    argv[n] = grp, argv[n + 1] = NULL;
    cli_result r = run_argv(argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    argv[n] = seq, argv[n + 1] = "--no-moe-grouped-gemm", argv[n + 2] = NULL;
    r = run_argv(argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    char *text = read_file(seq);
    cJSON *p = cJSON_Parse(text);
    cr_assert_not_null(p);
    cr_expect(cJSON_IsFalse(cJSON_GetObjectItem(json_obj(p, "request", "$"), "moe_grouped_gemm")));
    const cJSON *best = cJSON_GetArrayItem(cJSON_GetObjectItem(p, "layouts"), 0);
    test_expect_sim_reprices(seq, best, "SequentialMLP's plan");
    r = test_export_plan(seq, "megatron");
    cr_expect(strstr(r.out, "--moe-grouped-gemm") == NULL, "SequentialMLP is Megatron's default");
    cli_result_free(&r);
    r = test_export_plan(grp, "megatron");
    cr_expect(strstr(r.out, "--moe-grouped-gemm") != NULL, "%s", r.out);
    cli_result_free(&r);
    r = test_export_plan(grp, "megatron-bridge");
    cr_expect(strstr(r.out, "moe_grouped_gemm=True") != NULL);
    cli_result_free(&r);
    cJSON_Delete(p);
    free(text);
    remove_dir(dir);
}
