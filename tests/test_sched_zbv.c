/* ZB-V (program/sched_zbv.c) against its sources:
 *  - placement: stage s holds chunks s and 2p-1-s, one copy of each (Qi et al. 2024 §6);
 *  - the order: every micro-batch once forward, once through its input gradients and once through
 *    its weight gradients on each chunk, W after B; its peak activations are 1F1B's p stage
 *    micro-batches (Qi et al. 2024b Table 4, V-ZB);
 *  - the bubble: with equal chunk times T the order idles (p-1)·T, the first micro-batch's way to
 *    the last stage (the paper's "zero bubble" steady state, the fill it cannot avoid), below
 *    ZB-H1's and 1F1B's; it does not depend on m from 2p - 1 on; the closed form is the order's
 *    timeline and the simulator, communication free, idles exactly that on the program's F, B, W;
 *  - the refusals (too few micro-batches, layers that do not split into 2p chunks). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "planner/cost.h"
#include "program/schedule.h"
#include "sim/engine.h"
#include "tests/helpers.h"

static ts_layout zbv(int pp) {
    return (ts_layout){.dp = 1, .tp = 1, .pp = pp, .cp = 1, .ep = 1, .mbs = 1, .vpp = 2, .schedule = TS_SCHED_ZB_V,
                       .recompute = TS_RECOMPUTE_NONE};
}

Test(sched_zbv, placement_is_a_v) {
    for (int p = 2; p <= 16; p++) {
        ts_layout l = zbv(p);
        cr_expect_eq(ts_model_chunks(&l), 2 * p);
        for (int s = 0; s < p; s++) {
            cr_expect_eq(ts_chunk_global(&l, s, 0), s);
            cr_expect_eq(ts_chunk_global(&l, s, 1), 2 * p - 1 - s);
            cr_expect(!ts_chunk_is_copy(&l, s, 0) && !ts_chunk_is_copy(&l, s, 1), "one copy of each chunk");
        }
        for (int g = 0; g < 2 * p; g++) cr_expect_eq(ts_chunk_global(&l, ts_chunk_stage(&l, g), ts_chunk_local(&l, g)), g);
        /* The V turns on the last stage and ends on the first: embedding and head both there. */
        cr_expect(ts_stage_opens(&l, 0) && ts_stage_closes(&l, 0));
        cr_expect_eq(ts_chunk_stage(&l, p - 1), p - 1);
        cr_expect_eq(ts_chunk_stage(&l, p), p - 1);
    }
}

Test(sched_zbv, order_runs_every_micro_batch_once) {
    for (int p = 2; p <= 8; p++)
        for (int m = 2 * p - 1; m <= 3 * p; m += p)
            for (int s = 0; s < p; s++) {
                ts_slot out[3 * 32 * 2];
                int n = ts_schedules[TS_SCHED_ZB_V].order(p, 2, m, s, out);
                int f[2][32] = {{0}}, b[2][32] = {{0}}, w[2][32] = {{0}}, held = 0, peak = 0;
                for (int i = 0; i < n; i++) {
                    const ts_slot *sl = &out[i];
                    cr_assert(sl->mb >= 0 && sl->mb < m && sl->chunk >= 0 && sl->chunk < 2 && !sl->pair);
                    if (sl->kind == TS_SLOT_F) f[sl->chunk][sl->mb]++, held++;
                    if (sl->kind == TS_SLOT_B) {
                        cr_expect_eq(f[sl->chunk][sl->mb], 1, "B before F");
                        b[sl->chunk][sl->mb]++;
                    }
                    if (sl->kind == TS_SLOT_W) {
                        cr_expect_eq(b[sl->chunk][sl->mb], 1, "W before B");
                        w[sl->chunk][sl->mb]++, held--;
                    }
                    peak = held > peak ? held : peak;
                }
                for (int c = 0; c < 2; c++)
                    for (int mb = 0; mb < m; mb++)
                        cr_expect(f[c][mb] == 1 && b[c][mb] == 1 && w[c][mb] == 1, "p=%d m=%d s=%d c%d mb %d", p, m, s,
                                  c, mb);
                /* Chunk micro-batches held until their W, two per stage micro-batch: at most 1F1B's
                 * p, the in-flight the planner charges. */
                cr_expect_leq(peak, 2 * p, "p=%d m=%d s=%d: peak %d chunk micro-batches", p, m, s, peak);
                if (s == 0) cr_expect_eq(peak, 2 * p, "stage 0 reaches 1F1B's peak");
                cr_expect_eq(ts_schedules[TS_SCHED_ZB_V].in_flight(p, s, m, 2), p);
            }
}

Test(sched_zbv, bubble_is_the_fill_and_beats_zb_h1) {
    for (int p = 2; p <= 16; p++) {
        ts_layout l = zbv(p);
        for (int m = 2 * p - 1; m <= 4 * p; m += p) {
            /* Equal chunk times T = 1: (p-1)·T. */
            double idle = ts_sched_timeline_s(&l, m, 1, 1, 1) - m * 2 * 3.0;
            cr_expect_eq(idle, p - 1, "p=%d m=%d: bubble %g, (p-1)·T = %d", p, m, idle, p - 1);
            /* Unequal: the same at every m (the closed form evaluates m = 2p). */
            double a = ts_sched_timeline_s(&l, m, 1.5, 1, 0.5) - m * 2 * 3.0;
            cr_expect(fabs(a - ts_schedules[TS_SCHED_ZB_V].bubble_s(p, 2, 3, 3, 1)) < 1e-12, "p=%d m=%d: %g", p, m, a);
        }
        /* Stage times F = B = W = 2 (chunks of 1): ZB-H1 (p-1)(F + B_input - W), 1F1B (p-1)(F + B). */
        double zbv_s = ts_schedules[TS_SCHED_ZB_V].bubble_s(p, 2, 2, 4, 2);
        cr_expect_eq(zbv_s, p - 1);
        if (p > 1) {
            cr_expect_lt(zbv_s, ts_schedules[TS_SCHED_ZB_H1].bubble_s(p, 1, 2, 4, 2));
            cr_expect_lt(zbv_s, ts_schedules[TS_SCHED_1F1B].bubble_s(p, 1, 2, 4, 2));
        }
    }
}

/* The simulator with communication free idles the closed form, on the program's own slot times
 * (a stage's are both its chunks'). */
Test(sched_zbv, simulated_bubble_is_the_closed_form) {
    for (int batch = 3; batch <= 12; batch += 9) {
        ts_layout l = zbv(2);
        ts_problem pb = test_problem("tiny", "h100-sxm-dgx", ts_rank_count(&l), batch, 256, 1);
        pb.sys.hbm_bytes_per_s = INFINITY; /* memory-bound kernels free */
        ts_program prog;
        ts_sim_result r;
        ts_program_opts po = {.skip_edges = 1};
        ts_sim_opts so = {.free_comm = 1};
        cr_assert_eq(ts_program_build(&pb, &l, &po, &prog), TS_OK, "%s", ts_error_message());
        cr_assert_eq(ts_simulate(&pb, &prog, &so, &r), TS_OK, "%s", ts_error_message());
        double tf, tbi, tw;
        test_slot_costs(&pb, &prog, &tf, &tbi, &tw);
        double want = ts_schedules[TS_SCHED_ZB_V].bubble_s(2, 2, 2 * tf, 2 * (tbi + tw), 2 * tw);
        cr_expect_gt(want, 0);
        for (int st = 0; st < l.pp; st++)
            cr_expect(fabs(r.stages[st].bubble_s - want) <= 1e-9 * r.step_s, "m=%d stage %d: simulated %.9g s, closed form %.9g s",
                      prog.layout.microbatches, st, r.stages[st].bubble_s, want);
        ts_sim_result_free(&r);
        ts_program_free(&prog);
    }
}

Test(sched_zbv, refusals_are_one_line) {
    static const struct {
        const char *gpus, *batch, *fix, *says;
    } cases[] = {
        {"2", "2", "pp=2,dp=1,mbs=1,sched=zb-v", "micro-batches >= 2·pp - 1 = 3 (got 2)"},
        {"4", "8", "pp=4,sched=zb-v", "needs 8 chunks of at least one of 4 layers"},
        {"4", "8", "pp=4,vpp=3,sched=zb-v", "vpp=2 expected (got 3)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_tiny_sim_refused(cases[i].gpus, cases[i].batch, cases[i].fix, cases[i].says);
}

/* Per-chunk slot times (ts_sched_timeline_chunks_s, the planner's bubble of uneven interleaved
 * splits): equal chunk times give the fixed-time timeline exactly; one chunk a layer longer on
 * every stage (Llama 3 405B's 126 layers on 16×7: most stages 2+1+1+1+1+1+1) idles more than the
 * same work spread evenly. */
Test(sched_zbv, chunk_timeline_matches_the_fixed_one_and_sees_uneven_chunks) {
    ts_layout l = {.dp = 1, .tp = 1, .pp = 4, .cp = 1, .ep = 1, .mbs = 1, .vpp = 3, .microbatches = 8,
                   .schedule = TS_SCHED_INTERLEAVED};
    int n_g = l.pp * l.vpp, m = l.microbatches;
    double f[12], b[12];
    for (int g = 0; g < n_g; g++) f[g] = 1.0, b[g] = 2.0;
    double even = ts_sched_timeline_s(&l, m, 1.0, 2.0, 0.0);
    cr_assert_gt(even, 0);
    cr_assert_float_eq(ts_sched_timeline_chunks_s(&l, m, f, b), even, 1e-12 * even);
    /* the first chunk of every stage twice as long; the stage's work the same as 4/3 each */
    for (int g = 0; g < n_g; g++) {
        int first = ts_chunk_global(&l, ts_sched_stage(l.schedule, l.pp, l.vpp, g), 0) == g;
        f[g] = first ? 2.0 : 1.0, b[g] = first ? 4.0 : 2.0;
    }
    double uneven = ts_sched_timeline_chunks_s(&l, m, f, b), spread = ts_sched_timeline_s(&l, m, 4.0 / 3, 8.0 / 3, 0.0);
    double work = m * (4.0 + 8.0);
    cr_assert_gt(uneven - work, spread - work, "uneven idle %.3f, even idle %.3f", uneven - work, spread - work);
    l.schedule = TS_SCHED_ZB_H1;
    l.vpp = 1;
    cr_assert_eq(ts_sched_timeline_chunks_s(&l, m, f, b), -1, "weight-gradient slots have no per-chunk time");
}
