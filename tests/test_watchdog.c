/* The watchdog's report (exec/watchdog.h), built from node slots by hand: it names the ranks that
 * are not inside a communication op, says when every rank of the node waits (the culprit is on
 * another node), and names each phase. The whole path under mpirun (a SIGSTOPped rank named) is
 * in test_run_faults.c. */
#include <criterion/criterion.h>
#include <string.h>

#include "exec/watchdog.h"
#include "tests/helpers.h"

/* tiny on 2 ranks, dp=2: one stage, whose program has GEMMs and a gradient all-reduce. */
static ts_program two_rank_program(ts_layout *l) {
    ts_problem pb = test_problem("tiny", "cpu-localhost", 2, 8, 64, 1);
    *l = (ts_layout){.dp = 2, .tp = 1, .pp = 1, .cp = 1, .ep = 1, .mbs = 1, .microbatches = 4, .vpp = 1,
                     .schedule = TS_SCHED_1F1B, .recompute = TS_RECOMPUTE_NONE};
    ts_program p;
    cr_assert_eq(ts_program_build(&pb, l, NULL, &p), TS_OK, "%s", ts_error_message());
    return p;
}

/* The first op of the stage program of `kind`. */
static int first_of(const ts_program *p, int kind) {
    for (int i = 0; i < p->stages[0].n_ops; i++)
        if (p->stages[0].ops[i].kind == kind) return i;
    cr_assert_fail("no op of kind %d", kind);
    return -1;
}

Test(watchdog, names_the_rank_outside_communication) {
    ts_layout l;
    ts_program p = two_rank_program(&l);
    int coll = first_of(&p, TS_OP_COLL), gemm = first_of(&p, TS_OP_GEMM);
    ts_watch_slot slots[2] = {{.rank = 0, .phase = TS_WATCH_STEP, .step = 3, .op = coll},
                              {.rank = 1, .phase = TS_WATCH_STEP, .step = 3, .op = TS_WATCH_BETWEEN}};
    char msg[2048], want[512];
    size_t n = ts_watchdog_report(msg, sizeof msg, slots, 2, 0, &p, &l, 2.5);
    cr_expect_eq(n, strlen(msg));
    snprintf(want, sizeof want,
             "tessera run: rank 0: step 3 did not finish within 2.5 s (--timeout): rank 1 is not in a "
             "communication op (step 3, between ops); on this node: rank 0 step 3, op %d (collective), rank 1 "
             "step 3, between ops; ending the job\n",
             coll);
    cr_expect_str_eq(msg, want);

    /* A rank stuck in a compute op is named with it; a rank waiting for its sends is not. */
    slots[1].op = gemm;
    slots[0].op = TS_WATCH_SENDS;
    ts_watchdog_report(msg, sizeof msg, slots, 2, 0, &p, &l, 3);
    snprintf(want, sizeof want, "within 3 s (--timeout): rank 1 is not in a communication op (step 3, op %d (gemm));",
             gemm);
    cr_expect(strstr(msg, want) != NULL, "%s", msg);
    cr_expect(strstr(msg, "rank 0 step 3, waiting for its pipeline sends") != NULL, "%s", msg);
    ts_program_free(&p);
}

Test(watchdog, every_rank_waiting_points_off_the_node) {
    ts_layout l;
    ts_program p = two_rank_program(&l);
    int coll = first_of(&p, TS_OP_COLL);
    ts_watch_slot slots[2] = {{.rank = 4, .phase = TS_WATCH_STEP, .step = 0, .op = coll},
                              {.rank = 5, .phase = TS_WATCH_STEP, .step = 0, .op = coll}};
    l.dp = 8; /* ranks 4 and 5 of an 8-rank job, this node holding two of them */
    char msg[2048];
    ts_watchdog_report(msg, sizeof msg, slots, 2, 1, &p, &l, 0.25);
    cr_expect(strncmp(msg, "tessera run: rank 5: step 0 did not finish within 0.25 s (--timeout): every rank of "
                           "this node waits in a communication op: the rank holding them up is on another node;",
                      150) == 0,
              "%s", msg);
    ts_program_free(&p);
}

Test(watchdog, phases_and_a_short_buffer) {
    ts_watch_slot one = {.rank = 2, .phase = TS_WATCH_STARTUP, .op = TS_WATCH_BETWEEN};
    char msg[2048];
    ts_watchdog_report(msg, sizeof msg, &one, 1, 0, NULL, NULL, 10);
    cr_expect_str_eq(msg, "tessera run: rank 2: start-up did not finish within 10 s (--timeout): rank 2 is not in "
                          "a communication op (start-up); ending the job\n");
    one.phase = TS_WATCH_RESULTS;
    ts_watchdog_report(msg, sizeof msg, &one, 1, 0, NULL, NULL, 1.125);
    cr_expect(strncmp(msg, "tessera run: rank 2: gathering the results did not finish within 1.125 s", 72) == 0,
              "%s", msg);
    /* Cut short, always terminated. */
    char small[16];
    size_t n = ts_watchdog_report(small, sizeof small, &one, 1, 0, NULL, NULL, 1);
    cr_expect_eq(n, 15);
    cr_expect_str_eq(small, "tessera run: ra");
}
