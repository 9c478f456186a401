/* DualPipe (program/sched_dualpipe.c) against its sources:
 *  - placement: stage s holds chunk s of the forward direction and p-1-s of the reverse one;
 *  - the order: every micro-batch once forward and once backward on its direction's chunk, every
 *    weight gradient split off once and run after its input gradients;
 *  - the bubble: the order's slot-level timeline (the schedule's dependencies, each slot a fixed
 *    time, F&B one unit: ts_sched_timeline_s) reproduces DeepSeek-V3 Table 2's (PP/2 - 1)(F&B + B - 3W) exactly in the
 *    setting of its Fig. 5 (a forward as long as an input gradient), and the simulator, with
 *    communication free, idles exactly as that reference on the program's own F, B, W;
 *  - the refusals (pp even, micro-batches even and >= 2·pp, as DeepSeek's DualPipe.step asserts),
 *    the doubled parameters in the planner's memory, and the paired forward/backward in the
 *    program (a forward's ops between its partner backward's). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/cost.h"
#include "program/schedule.h"
#include "sim/engine.h"
#include "tests/helpers.h"

static ts_layout dualpipe(int pp, int dp) {
    return (ts_layout){.dp = dp, .tp = 1, .pp = pp, .cp = 1, .ep = 1, .mbs = 1, .vpp = 2,
                       .schedule = TS_SCHED_DUALPIPE, .recompute = TS_RECOMPUTE_NONE};
}

Test(sched_dualpipe, placement_is_two_directions) {
    for (int p = 2; p <= 16; p += 2) {
        ts_layout l = dualpipe(p, 1);
        cr_expect_eq(ts_model_chunks(&l), p);
        int held[64] = {0};
        for (int s = 0; s < p; s++) {
            int fwd = ts_chunk_global(&l, s, 0), rev = ts_chunk_global(&l, s, 1);
            cr_expect_eq(ts_chunk_model(&l, fwd), s, "p=%d stage %d runs forward chunk %d", p, s, s);
            cr_expect_eq(ts_chunk_model(&l, rev), p - 1 - s, "p=%d stage %d runs reverse chunk %d", p, s, p - 1 - s);
            cr_expect_eq(ts_chunk_stage(&l, fwd), s);
            cr_expect_eq(ts_chunk_stage(&l, rev), s);
            cr_expect_eq(ts_chunk_local(&l, rev), 1);
            held[ts_chunk_model(&l, fwd)]++, held[ts_chunk_model(&l, rev)]++;
        }
        for (int c = 0; c < p; c++) cr_expect_eq(held[c], 2, "p=%d: model chunk %d held %d times", p, c, held[c]);
        /* Both directions open at one end and close at the other: the embedding and the head
         * sit on stages 0 and p-1. */
        cr_expect(ts_chunk_opens(&l, 0) && ts_chunk_opens(&l, p) && ts_chunk_stage(&l, p) == p - 1);
        cr_expect(ts_chunk_closes(&l, p - 1) && ts_chunk_closes(&l, 2 * p - 1) && ts_chunk_stage(&l, 2 * p - 1) == 0);
        if (p >= 4) cr_expect(!ts_chunk_opens(&l, 1) && !ts_chunk_closes(&l, p - 2));
    }
}

Test(sched_dualpipe, order_runs_every_micro_batch_once) {
    for (int p = 2; p <= 8; p += 2)
        for (int m = 2 * p; m <= 3 * p + 2; m += 2)
            for (int s = 0; s < p; s++) {
                ts_slot out[3 * 64 * 2];
                int n = ts_schedules[TS_SCHED_DUALPIPE].order(p, 2, m, s, out);
                int f[64] = {0}, b[64] = {0}, w[64] = {0}, bi[64] = {0};
                for (int i = 0; i < n; i++) {
                    const ts_slot *sl = &out[i];
                    cr_assert(sl->mb >= 0 && sl->mb < m && sl->chunk >= 0 && sl->chunk < 2);
                    cr_expect_eq(sl->chunk, sl->mb >= m / 2, "p=%d m=%d s=%d: mb %d on local chunk %d", p, m, s, sl->mb,
                                 sl->chunk);
                    if (sl->kind == TS_SLOT_F) f[sl->mb]++;
                    if (sl->kind == TS_SLOT_B || sl->kind == TS_SLOT_BI) {
                        cr_expect_eq(f[sl->mb], 1, "backward of mb %d before its forward", sl->mb);
                        b[sl->mb]++;
                        bi[sl->mb] += sl->kind == TS_SLOT_BI;
                    }
                    if (sl->kind == TS_SLOT_W) {
                        cr_expect_eq(bi[sl->mb], 1, "p=%d m=%d s=%d: W of mb %d without its input-only backward", p, m,
                                     s, sl->mb);
                        w[sl->mb]++;
                    }
                    if (sl->pair) cr_expect(i + 1 < n && sl->kind == TS_SLOT_F && out[i + 1].kind == TS_SLOT_B);
                }
                /* DeepSeek-V3 Table 2's activations per device, PP + 1 (micro-batches on a chunk),
                 * reached on every stage: forwards whose backward has not run. */
                int held = 0, peak = 0;
                for (int i = 0; i < n; i++) {
                    held += out[i].kind == TS_SLOT_F ? 1 : out[i].kind == TS_SLOT_W ? 0 : -1;
                    peak = held > peak ? held : peak;
                }
                cr_expect_eq(peak, p + 1, "p=%d m=%d s=%d: peak %d", p, m, s, peak);
                cr_expect_eq(ts_schedules[TS_SCHED_DUALPIPE].in_flight(p, s, m, 2), peak);
                for (int mb = 0; mb < m; mb++)
                    cr_expect(f[mb] == 1 && b[mb] == 1 && w[mb] == bi[mb], "p=%d m=%d s=%d mb %d: F %d B %d W %d", p, m,
                              s, mb, f[mb], b[mb], w[mb]);
            }
}

/* The order's slot-level timeline (program/schedule.h ts_sched_timeline_s: fixed slot times, F&B
 * one unit) less the work: the schedule's own bubble with communication free. */
static double reference_bubble(const ts_layout *l, int m, double tf, double tbi, double tw) {
    double step = ts_sched_timeline_s(l, m, tf, tbi, tw);
    cr_assert_geq(step, 0, "the order of pp=%d m=%d cannot finish", l->pp, m);
    return step - m * (tf + tbi + tw);
}

/* DeepSeek-V3 Table 2: (PP/2 - 1)(F&B + B - 3W), F&B = F + B with nothing to overlap, B full. */
static double table2_bubble(int p, double tf, double tbi, double tw) {
    double b = tbi + tw;
    return (p / 2 - 1) * ((tf + b) + b - 3 * tw);
}

Test(sched_dualpipe, bubble_is_table2_exactly) {
    /* Fig. 5's setting: a forward chunk as long as an input-gradient chunk, W no longer. */
    static const double costs[][3] = {{1, 1, 1}, {2, 2, 1}, {1, 1, 0.25}, {3, 3, 2.5}};
    for (int p = 2; p <= 16; p += 2)
        for (int m = 2 * p; m <= 2 * p + 8; m += 4)
            for (size_t c = 0; c < sizeof costs / sizeof costs[0]; c++) {
                ts_layout l = dualpipe(p, 1);
                double tf = costs[c][0], tbi = costs[c][1], tw = costs[c][2];
                double bubble = reference_bubble(&l, m, tf, tbi, tw);
                double want = table2_bubble(p, tf, tbi, tw);
                cr_expect(fabs(bubble - want) <= 1e-12 * want + 1e-12,
                          "p=%d m=%d F=%g B=%g W=%g: reference bubble %.12g, Table 2 %.12g", p, m, tf, tbi + tw, tw,
                          bubble, want);
                cr_expect_eq(ts_schedules[TS_SCHED_DUALPIPE].bubble_s(p, 2, tf, tbi + tw, tw), want,
                             "the closed form is Table 2's");
            }
    /* Against 1F1B (p-1)(F+B) and ZB1P (p-1)(F+B-2W), the same table's other rows. */
    cr_expect_eq(ts_schedules[TS_SCHED_1F1B].bubble_s(8, 1, 1, 2, 1), 7 * 3);
    cr_expect_eq(ts_schedules[TS_SCHED_ZB_H1].bubble_s(8, 1, 1, 2, 1), 7 * 1);
    cr_expect_eq(ts_schedules[TS_SCHED_DUALPIPE].bubble_s(8, 2, 1, 2, 1), 3 * 2);
}

/* The simulator with communication free idles as the reference on the program's own slot times
 * (F, input and weight gradients of a chunk, read off the program). */
Test(sched_dualpipe, simulated_bubble_is_the_schedules) {
    static const struct {
        int pp, batch;
    } cases[] = {{2, 4}, {2, 10}, {4, 8}, {4, 12}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ts_layout l = dualpipe(cases[i].pp, 1);
        ts_problem pb = test_problem("tiny", "h100-sxm-dgx", ts_rank_count(&l), cases[i].batch, 256, 1);
        pb.sys.hbm_bytes_per_s = INFINITY; /* memory-bound kernels free */
        ts_program prog;
        ts_sim_result r;
        ts_program_opts po = {.skip_edges = 1};
        ts_sim_opts so = {.free_comm = 1};
        ts_error_clear();
        cr_assert_eq(ts_program_build(&pb, &l, &po, &prog), TS_OK, "%s", ts_error_message());
        cr_assert_eq(ts_simulate(&pb, &prog, &so, &r), TS_OK, "%s", ts_error_message());
        double tf, tbi, tw;
        test_slot_costs(&pb, &prog, &tf, &tbi, &tw);
        int m = prog.layout.microbatches;
        double want = reference_bubble(&l, m, tf, tbi, tw);
        for (int s = 0; s < l.pp; s++)
            cr_expect(fabs(r.stages[s].bubble_s - want) <= 1e-9 * r.step_s,
                      "pp=%d m=%d stage %d: simulated bubble %.9g s, the schedule's %.9g s", l.pp, m, s,
                      r.stages[s].bubble_s, want);
        ts_sim_result_free(&r);
        ts_program_free(&prog);
    }
}

/* DeepSeek's DualPipe.step asserts an even number of ranks and an even number of micro-batches of
 * at least twice the ranks; the CLI refuses the rest with exit 2 and one line. */
Test(sched_dualpipe, refusals_are_one_line) {
    static const struct {
        const char *gpus, *batch, *fix, *says;
    } cases[] = {
        {"3", "12", "pp=3,sched=dualpipe", "needs an even pp >= 2 (got pp=3)"},
        {"4", "4", "pp=4,sched=dualpipe", "micro-batches >= 2·pp = 8 (got 4)"},
        {"2", "6", "pp=2,dp=1,mbs=2,sched=dualpipe", "an even number of micro-batches >= 2·pp = 4 (got 3)"},
        {"4", "8", "pp=4,vpp=1,sched=dualpipe", "vpp=2 expected (got 1)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_tiny_sim_refused(cases[i].gpus, cases[i].batch, cases[i].fix, cases[i].says);
}

/* The planner holds two copies of the parameters, their gradients and optimizer states
 * (DeepSeek-V3 Table 2, "Parameter 2×"; the executor's memory agrees, tests/test_exec_parity.c),
 * and prices the bubble with Table 2's formula. */
Test(sched_dualpipe, planner_memory_doubles_the_parameters) {
    ts_model m;
    ts_system s;
    ts_error_clear();
    cr_assert_eq(ts_model_load("llama2-7b", &m), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_system_load("h100-sxm-dgx", &s), TS_OK, "%s", ts_error_message());
    ts_problem pb = test_problem_on(&m, &s, 16, 64, 4096, 1);
    ts_layout dual = {.dp = 2, .tp = 2, .pp = 4, .cp = 1, .ep = 1, .sp = 1, .zero = 1, .mbs = 1, .vpp = 2,
                      .schedule = TS_SCHED_DUALPIPE, .recompute = TS_RECOMPUTE_SELECTIVE};
    ts_layout one = dual;
    one.vpp = 1, one.schedule = TS_SCHED_1F1B;
    ts_eval a, b;
    cr_assert_eq(ts_evaluate(&pb, &dual, &a), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_evaluate(&pb, &one, &b), TS_OK, "%s", ts_error_message());
    /* The worst stages differ (the embedding's first, the head's last): equal to 0.1%. */
    cr_expect(fabs(a.mem.weights / (2 * b.mem.weights) - 1) < 1e-3, "weights %g vs 1F1B's %g", a.mem.weights,
              b.mem.weights);
    cr_expect(fabs(a.mem.grads / (2 * b.mem.grads) - 1) < 1e-3);
    cr_expect(fabs(a.mem.optimizer / (2 * b.mem.optimizer) - 1) < 1e-3);
    cr_expect_gt(a.time.pp_bubble, 0);
    cr_expect_lt(a.time.pp_bubble, b.time.pp_bubble, "DualPipe's bubble %g s below 1F1B's %g s", a.time.pp_bubble,
                 b.time.pp_bubble);
}

/* The pairs in the program (and so in the trace, whose events carry the tag): each run of ops of
 * one pair holds a forward and a backward of two micro-batches, and with TP collectives to switch
 * at the forward's ops come back after the backward's began. */
Test(sched_dualpipe, program_interleaves_each_pair) {
    ts_layout l = dualpipe(2, 1);
    l.tp = 2, l.sp = 1;
    ts_problem pb = test_problem("tiny", "h100-sxm-dgx", ts_rank_count(&l), 8, 256, 1);
    ts_program prog;
    ts_error_clear();
    cr_assert_eq(ts_program_build(&pb, &l, NULL, &prog), TS_OK, "%s", ts_error_message());
    for (int s = 0; s < l.pp; s++) {
        const ts_stage_program *sp = &prog.stages[s];
        int runs = 0, interleaved = 0;
        for (int i = 0; i < sp->n_ops;) {
            int tag = sp->ops[i].pair, end = i + 1;
            if (tag == 0) {
                i++;
                continue;
            }
            while (end < sp->n_ops && sp->ops[end].pair == tag) end++;
            int fwd_mb = -1, bwd_mb = -1, switches = 0;
            for (int k = i; k < end; k++) {
                int fwd = sp->ops[k].phase == TS_PHASE_FWD;
                if (fwd) fwd_mb = sp->ops[k].mb;
                else if (sp->ops[k].mb >= 0) bwd_mb = sp->ops[k].mb;
                switches += k > i && fwd != (sp->ops[k - 1].phase == TS_PHASE_FWD);
            }
            cr_expect(fwd_mb >= 0 && bwd_mb >= 0 && fwd_mb != bwd_mb, "stage %d: pair of mb %d and %d", s, fwd_mb,
                      bwd_mb);
            runs++;
            interleaved += switches > 1;
            i = end;
        }
        /* Every stage of p = 2 pairs m - 3 of its m = 8 forwards (sched_dualpipe.c, steps 4-5). */
        cr_expect_eq(runs, 5, "stage %d: %d pairs", s, runs);
        cr_expect_eq(interleaved, runs, "stage %d: %d of %d pairs interleaved", s, interleaved, runs);
    }
    ts_program_free(&prog);
}
