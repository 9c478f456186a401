/* The wait for the replicas' last rank at a blocking collective (planner/cost.h ts_sync_wait_s):
 * σ · (E[max of the ranks waited on] − E[max of a rank's TP×CP group]), charged on FP8 delayed
 * scaling's amax reduction over DP×CP (planner/op_cost.c, planner/stages.c amax_times) and on the
 * expert all-to-alls (planner/moe_cost.c), by the closed form and the simulator alike. */
#include <criterion/criterion.h>
#include <math.h>

#include "planner/cost.h"
#include "planner/problem.h"
#include "planner/moe_cost.h"
#include "planner/op_cost.h"
#include "program/program.h"
#include "program/ranks.h"
#include "sim/engine.h"
#include "tests/helpers.h"

/* E[max of n standard normals], five places (n·x·φ(x)·Φ(x)^(n−1) integrated; Harter 1961's table) */
#define E2 0.56419
#define E8 1.42360
#define E16 1.76599
#define E64 2.34373

static int near(double a, double b) { return fabs(a - b) <= 1e-4 * fmax(fabs(a), fabs(b)); }

/* Llama-2-7B on 128 H100 in FP8: tp 4, cp 2, dp 8, two stages of two chunks. The amax group's DP×CP
 * part is 16 ranks 4 apart (64 ranks waited on); a rank's TP×CP group is 8. */
#define DP8 "dp=8,tp=4,pp=2,cp=2,ep=1,sp=1,zero=1,mbs=1,vpp=2,sched=interleaved,recompute=none"

static ts_problem llama7b_fp8(ts_fp8_recipe recipe) {
    ts_problem pb = test_problem("llama2-7b", "h100-sxm-dgx", 128, 256, 4096, 1);
    ts_train_set_dtype(&pb.train, TS_DTYPE_FP8);
    pb.train.fp8_recipe = recipe;
    return pb;
}

Test(sync_wait, expected_max_beyond_the_lockstep_group) {
    ts_system s;
    cr_assert_eq(ts_system_load("h100-sxm-dgx", &s), TS_OK, "%s", ts_error_message());
    double sg = s.sync_jitter_s;
    cr_expect_eq(sg, 1.54e-4, "the H100 file's fitted spread (scripts/fit_sync_jitter.py)");
    cr_expect(near(ts_sync_wait_s(&s, 64, 8), sg * (E64 - E8)), "%g", ts_sync_wait_s(&s, 64, 8));
    cr_expect(near(ts_sync_wait_s(&s, 16, 2), sg * (E16 - E2)));
    cr_expect(near(ts_sync_wait_s(&s, 8, 1), sg * E8), "one rank alone is its own lockstep group");
    cr_expect_eq(ts_sync_wait_s(&s, 8, 8), 0, "inside the lockstep group: nothing more to wait for");
    cr_expect_eq(ts_sync_wait_s(&s, 4, 8), 0);
    double wide = ts_sync_wait_s(&s, 16384, 8);
    cr_expect_gt(wide, ts_sync_wait_s(&s, 4096, 8));
    cr_expect_eq(ts_sync_wait_s(&s, 16384, 8), wide, "a wide group's figure, asked again");
    s.sync_jitter_s = 0;
    cr_expect_eq(ts_sync_wait_s(&s, 64, 8), 0, "no spread, no wait");
}

/* Each DP×CP amax reduction costs its all-reduce plus the wait; the TP one, inside the lockstep
 * group, only its all-reduce. */
Test(sync_wait, amax_reduction_over_dp_cp_waits_for_the_replicas) {
    ts_problem pb = llama7b_fp8(TS_FP8_DELAYED), calm = pb;
    calm.sys.sync_jitter_s = 0;
    ts_layout l = test_layout(DP8);
    ts_program p;
    cr_assert_eq(ts_program_build(&pb, &l, NULL, &p), TS_OK, "%s", ts_error_message());
    double wait = pb.sys.sync_jitter_s * (E64 - E8);
    int dpcp = 0, tp = 0;
    for (int i = 0; i < p.stages[0].n_ops; i++) {
        const ts_op *op = &p.stages[0].ops[i];
        if (op->part != TS_PART_AMAX_REDUCE) continue;
        double added = ts_op_cost_s(&pb, &p.layout, op) - ts_op_cost_s(&calm, &p.layout, op);
        if (op->group == TS_GROUP_DPCP) {
            dpcp++;
            cr_expect(near(added, wait), "DP×CP: %g s more, want %g", added, wait);
        } else if (op->group == TS_GROUP_TP) {
            tp++;
            cr_expect_eq(added, 0, "TP: %g s more", added);
        }
    }
    cr_expect(dpcp > 0 && dpcp == tp, "%d DP×CP and %d TP reductions", dpcp, tp);
    ts_program_free(&p);
}

/* The step grows by at least the stage's own waits (two a chunk and micro-batch), in the closed
 * form and in the simulator alike; tensor-wise scaling reduces nothing, so waits for nothing. */
Test(sync_wait, the_step_waits_in_closed_form_and_simulation) {
    ts_layout l = test_layout(DP8);
    double cf[2], sim[2];
    int m = 0;
    for (int calm = 0; calm < 2; calm++) {
        ts_problem pb = llama7b_fp8(TS_FP8_DELAYED);
        if (calm) pb.sys.sync_jitter_s = 0;
        ts_eval e;
        cr_assert_eq(ts_evaluate(&pb, &l, &e), TS_OK, "%s", ts_error_message());
        ts_program p;
        ts_sim_result r;
        cr_assert_eq(ts_program_build(&pb, &l, NULL, &p), TS_OK, "%s", ts_error_message());
        cr_assert_eq(ts_simulate(&pb, &p, NULL, &r), TS_OK, "%s", ts_error_message());
        cf[calm] = e.step_s, sim[calm] = r.step_s, m = p.layout.microbatches;
        ts_sim_result_free(&r);
        ts_program_free(&p);
    }
    ts_problem pb = llama7b_fp8(TS_FP8_DELAYED);
    double own = 2.0 * m * 2 * pb.sys.sync_jitter_s * (E64 - E8); /* both directions, both chunks */
    double cf_added = cf[0] - cf[1], sim_added = sim[0] - sim[1];
    cr_expect_geq(cf_added, 0.999 * own, "closed form %g s more, the stage's own waits %g s", cf_added, own);
    cr_expect(fabs(sim_added / cf_added - 1) < 0.1, "simulated %g s more, closed form %g s", sim_added, cf_added);

    ts_problem tw = llama7b_fp8(TS_FP8_TENSORWISE), tw_calm = tw;
    tw_calm.sys.sync_jitter_s = 0;
    ts_eval a, b;
    cr_assert_eq(ts_evaluate(&tw, &l, &a), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_evaluate(&tw_calm, &l, &b), TS_OK, "%s", ts_error_message());
    cr_expect_eq(a.step_s, b.step_s, "tensor-wise scaling: %g s against %g s", a.step_s, b.step_s);
}

/* An EP group waits on its members' TP×CP groups: EP8 over etp 1 at tp 2 spans 8 ranks, at etp 2
 * 16; EP2 inside a TP2 group waits for no one. What is hidden of the collective is hidden of its
 * wait; the SMs a hidden transfer holds are the transfer's alone. */
Test(sync_wait, expert_all_to_alls_wait_where_the_group_leaves_tp_cp) {
    ts_problem pb = test_problem("mixtral-8x7b", "h100-sxm-dgx", 64, 64, 4096, 1);
    pb.train.moe_dispatcher = TS_MOE_DISPATCH_ALLTOALL;
    double B = 1e8, sg = pb.sys.sync_jitter_s;
    double alone8 = ts_moe_coll_alone_s(&pb, 8, 1, TS_COLL_ALLTOALL, B);
    double alone16 = ts_moe_coll_alone_s(&pb, 8, 2, TS_COLL_ALLTOALL, B);
    double alone2 = ts_moe_coll_alone_s(&pb, 2, 1, TS_COLL_ALLTOALL, B);
    cr_expect(near(ts_moe_op_s(&pb, 8, 1, 2, TS_COLL_ALLTOALL, B), alone8 + sg * (E8 - E2)));
    cr_expect(near(ts_moe_op_s(&pb, 8, 2, 2, TS_COLL_ALLTOALL, B), alone16 + sg * (E16 - E2)));
    cr_expect(near(ts_moe_op_s(&pb, 2, 1, 2, TS_COLL_ALLTOALL, B), alone2), "EP inside the TP group");
    pb.train.moe_a2a_overlap = 0.5;
    pb.train.stack.comm_sm_frac = 0.1;
    double op = ts_moe_op_s(&pb, 8, 1, 2, TS_COLL_ALLTOALL, B);
    cr_expect(near(op, 0.5 * (alone8 + sg * (E8 - E2))), "half hidden: %g", op);
    cr_expect(near(ts_moe_coll_s(&pb, 8, 1, 2, TS_COLL_ALLTOALL, B), op + 0.5 * 0.1 * alone8));
}

/* node.sync_jitter_s: seconds in [0, 1], refused with its path otherwise; written with the
 * system (plans carry it) and read back; every GPU system states it, CPU ranks do not. */
Test(sync_wait, system_file_field) {
    ts_system s, back;
    cr_assert_eq(ts_system_load("h100-sxm-dgx", &s), TS_OK, "%s", ts_error_message());
    cJSON *doc = ts_system_to_json(&s);
    cr_assert_not_null(doc);
    cr_assert_eq(ts_system_from_json("inline", doc, &back), TS_OK, "%s", ts_error_message());
    cr_expect_eq(back.sync_jitter_s, s.sync_jitter_s);
    static const double bad[] = {-1e-6, 2};
    for (int i = 0; i < 2; i++) {
        cJSON_ReplaceItemInObject(cJSON_GetObjectItemCaseSensitive(doc, "node"), "sync_jitter_s",
                                  cJSON_CreateNumber(bad[i]));
        cr_expect_eq(ts_system_from_json("inline", doc, &back), TS_ERR_INPUT);
        cr_expect(strstr(ts_error_message(), "sync_jitter_s: expected a number in [0, 1]") != NULL, "%s",
                  ts_error_message());
        ts_error_clear();
    }
    cJSON_Delete(doc);
    ts_system b200, cpu;
    cr_assert_eq(ts_system_load("b200-dgx", &b200), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_system_load("cpu-localhost", &cpu), TS_OK, "%s", ts_error_message());
    cr_expect_eq(b200.sync_jitter_s, s.sync_jitter_s, "the H100's figure, assumed on the other GPUs");
    cr_expect_eq(cpu.sync_jitter_s, 0, "CPU ranks: node.speed_cv prices their spread");
}
