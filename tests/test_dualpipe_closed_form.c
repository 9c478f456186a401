/* The planner's closed form for DualPipe and ZB-V against the simulator (planner/stages.c,
 * sim/engine.c), each computed here:
 *  - the pairs the closed form counts are the order's (program/sched_dualpipe.c), fewest on the
 *    end stages;
 *  - closed form and simulation agree within 5% on DualPipe layouts (DeepSeek-V3 on its stack,
 *    where the stage pairs, the mirror-gradient exchange and the SM share dominate; dense and
 *    MoE layouts with TP traffic the pairs hide) and on ZB-V layouts;
 *  - the SM share of hidden EP traffic (DeepSeek-V3 §3.2.2) costs the simulated step what it
 *    costs the closed form: charged to computation, never hidden under a pairing. */
#include <criterion/criterion.h>
#include <math.h>

#include "models/stack.h"
#include "planner/stack_rules.h"
#include "program/schedule.h"
#include "sim/engine.h"
#include "tests/helpers.h"

Test(dualpipe_closed_form, pairs_are_the_orders) {
    for (int p = 2; p <= 16; p += 2)
        for (int m = 2 * p; m <= 3 * p + 4; m += 2) {
            int fewest = m;
            for (int s = 0; s < p; s++) {
                ts_slot out[3 * 64 * 2];
                int n = ts_schedules[TS_SCHED_DUALPIPE].order(p, 2, m, s, out), pairs = 0;
                for (int i = 0; i < n; i++) pairs += out[i].pair != 0;
                cr_expect_eq(ts_dualpipe_pairs(p, m, s), pairs, "p=%d m=%d stage %d: %d pairs, order has %d", p, m, s,
                             ts_dualpipe_pairs(p, m, s), pairs);
                fewest = pairs < fewest ? pairs : fewest;
            }
            cr_expect_eq(ts_dualpipe_pairs(p, m, 0), fewest, "p=%d m=%d: stage 0 has the fewest pairs", p, m);
        }
}

/* `model` on `gpus` of `sys` under `stack` (its training defaults: overlap, not its dtype); an
 * sm_frac of 0 or more replaces the stack's comm_sm_frac, 0 also the system's SM count (no SMs
 * charged for DeepEP either). */
static ts_problem on_stack(const char *model, const char *sys, int gpus, int64_t batch, const char *stack,
                           double sm_frac) {
    ts_problem base = test_problem(model, sys, gpus, batch, 4096, 1);
    ts_train t = base.train;
    ts_error_clear();
    cr_assert_eq(ts_stack_load(stack, ts_schedule_names, ts_recompute_names, &t.stack), TS_OK, "%s",
                 ts_error_message());
    cr_assert_eq(ts_stack_train_defaults(&t.stack, TS_GIVEN_DTYPE, &t), TS_OK, "%s", ts_error_message());
    if (sm_frac >= 0) t.stack.comm_sm_frac = sm_frac;
    ts_system s = base.sys;
    if (sm_frac == 0) s.sms = 0;
    ts_problem pb;
    cr_assert_eq(ts_problem_init(&pb, &base.model, &s, &t, gpus), TS_OK, "%s", ts_error_message());
    return pb;
}

/* The simulated and closed-form step of `text` on `pb`. */
static void both(const ts_problem *pb, const char *text, double *sim_s, double *closed_s) {
    ts_layout l;
    ts_error_clear();
    cr_assert_eq(ts_layout_parse("test", text, &l), TS_OK, "%s: %s", text, ts_error_message());
    ts_eval e;
    cr_assert_eq(ts_evaluate(pb, &l, &e), TS_OK, "%s", ts_error_message());
    ts_program prog;
    ts_sim_result r;
    cr_assert_eq(ts_program_build(pb, &l, NULL, &prog), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_simulate(pb, &prog, NULL, &r), TS_OK, "%s", ts_error_message());
    *sim_s = r.step_s, *closed_s = e.step_s;
    ts_sim_result_free(&r);
    ts_program_free(&prog);
}

static const struct {
    const char *model, *sys, *stack, *layout;
    int64_t batch;
} cases[] = {
    /* DeepSeek-V3 as its stack runs it: 61 layers + MTP, so the end stages are unlike the rest */
    {"deepseek-v3", "h800-dgx", "deepseek-v3",
     "dp=128,tp=1,pp=8,cp=1,ep=64,sp=0,zero=1,mbs=1,vpp=2,sched=dualpipe,recompute=full", 4096},
    {"mixtral-8x22b", "h100-sxm-dgx", "deepseek-v3",
     "dp=64,tp=1,pp=4,cp=1,ep=8,sp=0,zero=1,mbs=1,vpp=2,sched=dualpipe,recompute=full", 1024},
    /* TP traffic the pairs hide */
    {"mixtral-8x7b", "h100-sxm-dgx", "megatron-core",
     "dp=8,tp=2,pp=4,cp=1,ep=8,sp=1,zero=1,mbs=1,vpp=2,sched=dualpipe,recompute=none", 128},
    {"llama3-70b", "h100-sxm-dgx", "megatron-core",
     "dp=8,tp=8,pp=8,cp=1,ep=1,sp=1,zero=1,mbs=1,vpp=2,sched=dualpipe,recompute=none", 512},
    /* ZB-V */
    {"llama3-8b", "h100-sxm-dgx", "torchtitan",
     "dp=8,tp=2,pp=4,cp=1,ep=1,sp=1,zero=0,mbs=1,vpp=2,sched=zb-v,recompute=none", 256},
    {"mixtral-8x7b", "h100-sxm-dgx", "torchtitan",
     "dp=32,tp=1,pp=4,cp=1,ep=8,sp=0,zero=1,mbs=1,vpp=2,sched=zb-v,recompute=full", 512},
};

Test(dualpipe_closed_form, agrees_with_the_simulator_within_5_percent, .timeout = 120) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ts_layout l;
        cr_assert_eq(ts_layout_parse("test", cases[i].layout, &l), TS_OK);
        ts_problem pb = on_stack(cases[i].model, cases[i].sys, ts_rank_count(&l), cases[i].batch, cases[i].stack, -1);
        double sim_s, closed_s;
        both(&pb, cases[i].layout, &sim_s, &closed_s);
        double err = (sim_s - closed_s) / closed_s;
        cr_expect(fabs(err) <= 0.05, "%s %s: simulated %.4f s, closed form %.4f s (%+.2f%%)", cases[i].model,
                  cases[i].layout, sim_s, closed_s, 100 * err);
    }
}

/* DeepSeek-V3's 20 of 132 SMs: what they add to the step, simulated and in closed form, against
 * the same layout with the communication's SMs free. Hidden under the pairs, the simulator's
 * share would vanish; charged to computation it is the closed form's m × (share per micro-batch). */
Test(dualpipe_closed_form, sm_share_costs_the_simulation_what_it_costs_the_closed_form, .timeout = 120) {
    const char *text = cases[0].layout;
    ts_layout l;
    cr_assert_eq(ts_layout_parse("test", text, &l), TS_OK);
    ts_problem with = on_stack("deepseek-v3", "h800-dgx", ts_rank_count(&l), cases[0].batch, "deepseek-v3", -1);
    ts_problem without = on_stack("deepseek-v3", "h800-dgx", ts_rank_count(&l), cases[0].batch, "deepseek-v3", 0);
    cr_assert_gt(with.train.stack.comm_sm_frac, 0.1, "the stack states 20/132");
    cr_assert_eq(with.train.moe_a2a_overlap, 1.0, "and the all-to-all hidden");
    double sim_with, closed_with, sim_without, closed_without;
    both(&with, text, &sim_with, &closed_with);
    both(&without, text, &sim_without, &closed_without);
    double sim_cost = sim_with - sim_without, closed_cost = closed_with - closed_without;
    cr_assert_gt(closed_cost, 0.02 * closed_with, "the share is a visible part of the step");
    cr_expect(fabs(sim_cost - closed_cost) <= 0.15 * closed_cost,
              "SM share: simulated +%.3f s, closed form +%.3f s", sim_cost, closed_cost);
}
