/* FP8 delayed scaling's amax reductions (program/recipe.c "Amax reductions", program/program.c
 * amax_reduce, planner/stages.c amax_times): at the end of each chunk's forward and of its
 * backward, per micro-batch, every amax the rank holds is all-reduced over TP and then over DP×CP
 * on the compute stream; only the delayed recipe does it; the closed form charges what the ops
 * cost; the simulator agrees. */
#include <criterion/criterion.h>
#include <math.h>

#include "planner/layer.h"
#include "planner/op_cost.h"
#include "planner/stages.h"
#include "program/program.h"
#include "program/recipe.h"
#include "sim/engine.h"
#include "tests/helpers.h"

/* Llama-2-7B (32 layers) on 32 H100, FP8 under the given recipe. */
static ts_problem llama7b(ts_fp8_recipe recipe) {
    ts_problem pb = test_problem("llama2-7b", "h100-sxm-dgx", 32, 128, 4096, 1);
    ts_train_set_dtype(&pb.train, TS_DTYPE_FP8);
    pb.train.fp8_recipe = recipe;
    return pb;
}

/* Interleaved, two chunks of 8 layers per stage, 64 micro-batches, every group of the amax
 * reduction wider than one rank. */
#define VPP2 "dp=2,tp=4,pp=2,cp=2,ep=1,sp=1,zero=1,mbs=1,vpp=2,sched=interleaved,recompute=none"

/* The closed form's stages of VPP2's shard, two of them. */
static void stages_of(const ts_problem *pb, ts_stages *st) {
    ts_shard sh = {.tp = 4, .cp = 2, .ep = 1, .sp = 1, .mbs = 1, .recompute = TS_RECOMPUTE_NONE};
    ts_shard_costs c[TS_RECOMPUTE_COUNT];
    ts_shard_costs_all(pb, &sh, c);
    cr_assert_eq(ts_stages_init(st, 2), TS_OK);
    ts_stages_build(st, pb, &c[TS_RECOMPUTE_NONE], 2);
}

static int count_amax(const ts_program *p) {
    int n = 0;
    for (int s = 0; s < p->pp; s++)
        for (int i = 0; i < p->stages[s].n_ops; i++) n += p->stages[s].ops[i].part == TS_PART_AMAX_REDUCE;
    return n;
}

/* A dense Llama layer reduces the amaxes of 7 GEMMs' metadata (QKV, projection, the MLP's two,
 * TE's attention's 3); an MoE layer's local experts count one each, the router none. */
Test(fp8_amax, gemms_a_layer_counts) {
    ts_problem pb = llama7b(TS_FP8_DELAYED);
    ts_shard sh = {.tp = 4, .cp = 2, .ep = 1, .sp = 1, .mbs = 1};
    ts_attn_recipe a;
    ts_mlp_recipe r;
    ts_attn_recipe_of(&pb, &sh, &a);
    ts_mlp_recipe_of(&pb, &sh, 0, &r);
    cr_expect_eq(a.amax_gemms, 5);
    cr_expect_eq(r.amax_gemms, 2);
    cr_expect_eq(ts_amax_reduce_bytes(7, 1), 84, "3 fp32 amaxes a GEMM in forward");
    cr_expect_eq(ts_amax_reduce_bytes(7, 0), 56, "2 in backward");

    ts_problem moe = test_problem("mixtral-8x7b", "h100-sxm-dgx", 16, 16, 4096, 1);
    ts_train_set_dtype(&moe.train, TS_DTYPE_FP8);
    sh.ep = 2;
    ts_mlp_recipe_of(&moe, &sh, 1, &r);
    cr_expect_eq(r.amax_gemms, 2 * 4, "4 local experts' two GEMMs, no router: %g", r.amax_gemms);
    pb.train.flash_attention = 0;
    ts_attn_recipe_of(&pb, &sh, &a);
    cr_expect_eq(a.amax_gemms, 2, "unfused attention is no TE module");
}

/* One TP and one DP×CP all-reduce per chunk, micro-batch and direction, on the compute stream,
 * of every amax the stage holds; the pipeline send waits for them. */
Test(fp8_amax, one_pair_per_chunk_micro_batch_and_direction) {
    ts_problem pb = llama7b(TS_FP8_DELAYED);
    ts_layout l = test_layout(VPP2);
    ts_program p;
    cr_assert_eq(ts_program_build(&pb, &l, NULL, &p), TS_OK, "%s", ts_error_message());
    int m = p.layout.microbatches;
    cr_assert_eq(m, 64);
    double gemms = 16 * 7; /* 16 layers a stage, both chunks */
    for (int s = 0; s < p.pp; s++) {
        const ts_stage_program *sp = &p.stages[s];
        int seen[2][64][2][2] = {{{{0}}}}; /* [phase][mb][chunk][group TP, DPCP] */
        for (int i = 0; i < sp->n_ops; i++) {
            const ts_op *op = &sp->ops[i];
            if (op->part != TS_PART_AMAX_REDUCE) continue;
            int fwd = op->phase == TS_PHASE_FWD;
            cr_assert(fwd || op->phase == TS_PHASE_BWD, "stage %d op %d: phase %d", s, i, op->phase);
            cr_expect(op->kind == TS_OP_COLL && op->coll == TS_COLL_ALLREDUCE && op->stream == TS_STREAM_COMPUTE);
            cr_assert(op->group == TS_GROUP_TP || op->group == TS_GROUP_DPCP, "group %d", op->group);
            cr_expect_eq(op->bytes, ts_amax_reduce_bytes(gemms, fwd), "%g bytes", op->bytes);
            seen[fwd][op->mb][op->chunk][op->group == TS_GROUP_DPCP]++;
            if (op->group == TS_GROUP_TP) {
                cr_expect(i + 1 < sp->n_ops && sp->ops[i + 1].part == TS_PART_AMAX_REDUCE, "DP×CP's follows");
                continue;
            }
            /* what follows on this chunk's way out (the send, the head) comes after it */
            for (int j = i + 1; j < sp->n_ops; j++) {
                const ts_op *o = &sp->ops[j];
                if (o->kind != TS_OP_SEND || o->phase != op->phase || o->mb != op->mb) continue;
                cr_expect(o->ndeps > 0 && sp->deps[o->dep0] == (uint32_t)i, "stage %d: the send waits for it", s);
                break;
            }
        }
        for (int f = 0; f < 2; f++)
            for (int mb = 0; mb < m; mb++)
                for (int c = 0; c < 2; c++)
                    for (int g = 0; g < 2; g++)
                        cr_expect_eq(seen[f][mb][c][g], 1, "stage %d %s mb %d chunk %d group %d: %d", s,
                                     f ? "fwd" : "bwd", mb, c, g, seen[f][mb][c][g]);
    }
    ts_program_free(&p);
}

/* An MoE stage's reductions carry its local experts' amaxes: Mixtral 8x7B (32 MoE layers) at
 * ep = 2, 16 layers a stage of 5 (QKV, projection, attention's 3) + 2 × 4 local experts. */
Test(fp8_amax, moe_stage_carries_its_local_experts) {
    ts_problem pb = test_problem("mixtral-8x7b", "h100-sxm-dgx", 16, 64, 4096, 1);
    ts_train_set_dtype(&pb.train, TS_DTYPE_FP8);
    ts_layout l = test_layout("dp=4,tp=2,pp=2,cp=1,ep=2,sp=1,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none");
    ts_program p;
    cr_assert_eq(ts_program_build(&pb, &l, NULL, &p), TS_OK, "%s", ts_error_message());
    int n = 0;
    for (int i = 0; i < p.stages[1].n_ops; i++) {
        const ts_op *op = &p.stages[1].ops[i];
        if (op->part != TS_PART_AMAX_REDUCE) continue;
        n++;
        cr_expect_eq(op->bytes, ts_amax_reduce_bytes(16 * (5 + 2 * 4), op->phase == TS_PHASE_FWD), "%g bytes", op->bytes);
    }
    cr_expect_eq(n, 2 * 2 * p.layout.microbatches, "TP and DP×CP, each way, every micro-batch: %d", n);
    ts_program_free(&p);
}

/* A group of one member reduces nothing: tp = 1 leaves the DP×CP one alone. */
Test(fp8_amax, groups_of_one_are_left_out) {
    ts_problem pb = llama7b(TS_FP8_DELAYED);
    ts_layout l = test_layout("dp=16,tp=1,pp=2,cp=1,ep=1,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none");
    ts_program p;
    cr_assert_eq(ts_program_build(&pb, &l, NULL, &p), TS_OK, "%s", ts_error_message());
    cr_expect_eq(count_amax(&p), 2 * 2 * p.layout.microbatches, "two stages, one each way a micro-batch");
    for (int i = 0; i < p.stages[0].n_ops; i++)
        if (p.stages[0].ops[i].part == TS_PART_AMAX_REDUCE) cr_expect_eq(p.stages[0].ops[i].group, TS_GROUP_DPCP);
    ts_program_free(&p);
}

/* BF16 and the recipes that scale from the tensor itself reduce nothing per region. */
Test(fp8_amax, none_without_delayed_scaling) {
    ts_layout l = test_layout(VPP2);
    ts_problem none[4] = {llama7b(TS_FP8_TENSORWISE), llama7b(TS_FP8_BLOCKWISE), llama7b(TS_FP8_DELAYED),
                          test_problem("llama2-7b", "b200-dgx", 32, 128, 4096, 1)};
    ts_train_set_dtype(&none[2].train, TS_DTYPE_BF16);
    ts_train_set_dtype(&none[3].train, TS_DTYPE_FP8);
    none[3].train.fp8_recipe = TS_FP8_MXFP8;
    for (int k = 0; k < 4; k++) {
        ts_program p;
        cr_assert_eq(ts_program_build(&none[k], &l, NULL, &p), TS_OK, "%s", ts_error_message());
        cr_expect_eq(count_amax(&p), 0, "case %d", k);
        ts_program_free(&p);
        ts_stages st;
        stages_of(&none[k], &st);
        cr_expect(st.slow.amax_gemms == 0 && st.slow.amax_tp_s == 0 && st.slow.amax_dp_s == 0, "case %d", k);
        ts_stages_free(&st);
    }
}

/* The closed form charges, per micro-batch, each chunk's two reductions at what the program's
 * ops cost (planner/op_cost.h), the TP ones in tp_comm and the DP×CP ones in dp_comm. */
Test(fp8_amax, closed_form_charges_what_the_ops_cost) {
    ts_problem pb = llama7b(TS_FP8_DELAYED);
    pb.sys.tp_comm_overlap = 0.5; /* userbuffers hide no amax reduction */
    ts_layout l = test_layout(VPP2);
    ts_program p;
    cr_assert_eq(ts_program_build(&pb, &l, NULL, &p), TS_OK, "%s", ts_error_message());
    l.microbatches = p.layout.microbatches;
    double ops_s[2] = {0, 0}; /* TP, DP×CP, stage 0 */
    const ts_stage_program *sp = &p.stages[0];
    for (int i = 0; i < sp->n_ops; i++)
        if (sp->ops[i].part == TS_PART_AMAX_REDUCE)
            ops_s[sp->ops[i].group == TS_GROUP_DPCP] += ts_op_cost_s(&pb, &p.layout, &sp->ops[i]);
    cr_assert_gt(ops_s[0], 0);
    cr_assert_gt(ops_s[1], ops_s[0], "DP×CP crosses the NIC");

    ts_stages st;
    stages_of(&pb, &st);
    int mv = l.microbatches * l.vpp;
    cr_expect(fabs(mv * st.slow.amax_tp_s / ops_s[0] - 1) < 1e-9, "TP: %g s vs the ops' %g s", mv * st.slow.amax_tp_s, ops_s[0]);
    cr_expect(fabs(mv * st.slow.amax_dp_s / ops_s[1] - 1) < 1e-9, "DP×CP: %g s vs %g s", mv * st.slow.amax_dp_s, ops_s[1]);

    ts_time_split with, without;
    double step = ts_stages_step(&st, &pb, &l, &with);
    st.slow.amax_tp_s = st.slow.amax_dp_s = 0;
    double bare = ts_stages_step(&st, &pb, &l, &without);
    cr_expect(fabs((with.tp_comm - without.tp_comm) / ops_s[0] - 1) < 1e-9);
    cr_expect(fabs((with.dp_comm - without.dp_comm) / ops_s[1] - 1) < 1e-9);
    cr_expect_gt(step - bare, ops_s[0] + ops_s[1], "and the bubble grows with the stage's time");
    ts_stages_free(&st);
    ts_program_free(&p);
}

/* The simulator runs the ops as the closed form prices them: the whole step within 5%, and what
 * the reductions add within a fifth of the closed form's figure; they count as exposed
 * communication, not busy time. */
Test(fp8_amax, simulation_against_the_closed_form) {
    ts_problem pb = llama7b(TS_FP8_DELAYED);
    ts_layout l = test_layout(VPP2);
    double ratio = test_sim_over_closed_form(&pb, &l);
    cr_expect(fabs(ratio - 1) < 0.05, "simulated over closed form %g", ratio);

    ts_program p;
    ts_sim_result with, without;
    cr_assert_eq(ts_program_build(&pb, &l, NULL, &p), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_simulate(&pb, &p, NULL, &with), TS_OK, "%s", ts_error_message());
    for (int s = 0; s < p.pp; s++)
        for (int i = 0; i < p.stages[s].n_ops; i++)
            if (p.stages[s].ops[i].part == TS_PART_AMAX_REDUCE) p.stages[s].ops[i].bytes = 0;
    cr_assert_eq(ts_simulate(&pb, &p, NULL, &without), TS_OK, "%s", ts_error_message());

    l.microbatches = p.layout.microbatches;
    ts_stages st;
    stages_of(&pb, &st);
    double cf_with = ts_stages_step(&st, &pb, &l, NULL);
    st.slow.amax_tp_s = st.slow.amax_dp_s = 0;
    double cf_added = cf_with - ts_stages_step(&st, &pb, &l, NULL), sim_added = with.step_s - without.step_s;
    cr_expect_gt(cf_added, 0);
    cr_expect(fabs(sim_added / cf_added - 1) < 0.2, "simulated %g s more, closed form %g s", sim_added, cf_added);
    cr_expect(fabs(with.stages[0].busy_s / without.stages[0].busy_s - 1) < 1e-3, "busy %g s vs %g s",
              with.stages[0].busy_s, without.stages[0].busy_s);
    cr_expect_gt(with.stages[0].exposed_comm_s, without.stages[0].exposed_comm_s);
    ts_stages_free(&st);
    ts_sim_result_free(&with);
    ts_sim_result_free(&without);
    ts_program_free(&p);
}
