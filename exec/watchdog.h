/* The job watchdog of `tessera run --timeout S`: a rank whose current phase (start-up, a training
 * step, gathering the results) has not finished after S seconds — a peer stalled or died inside
 * a collective — ends the job, and the message says where each rank of its node was.
 *
 * Why node-shared memory: the rank that holds the others up cannot speak (it is stopped, or stuck
 * outside MPI), and the waiting ranks cannot call MPI from a signal handler. So each rank stores
 * its phase, step and current op in a slot of an MPI shared-memory window of its node
 * (MPI_Win_allocate_shared), with plain stores the trainer makes as it goes (ts_trainer_watch);
 * when SIGALRM fires, the first rank of the node to fire reads every slot — plain loads, only
 * write() and _exit() otherwise: async-signal-safe — and names the ranks that are not waiting
 * inside a communication op: those are the ones holding the job up. Ranks on other nodes are
 * not visible; the message says so when every rank here is waiting.
 *
 * ts_watchdog_init / ts_watchdog_free pair (both collective over the world); one watchdog per
 * process (the signal handler finds it through a static pointer). */
#ifndef TS_WATCHDOG_H
#define TS_WATCHDOG_H

#include <signal.h>

#include "exec/runtime.h"
#include "program/program.h"

typedef enum { TS_WATCH_STARTUP, TS_WATCH_STEP, TS_WATCH_RESULTS, TS_WATCH_PHASE_COUNT } ts_watch_phase;

/* One rank's progress, in node-shared memory; every field a whole sig_atomic_t, so a reader in a
 * signal handler sees each one either old or new. */
typedef struct {
    volatile sig_atomic_t rank;  /* its world rank */
    volatile sig_atomic_t phase; /* ts_watch_phase */
    volatile sig_atomic_t step;  /* TS_WATCH_STEP: which */
    volatile sig_atomic_t op;    /* the op of its stage program it runs, or TS_WATCH_* below */
    volatile sig_atomic_t claim; /* slot 0 only: set by the first rank that reports */
} ts_watch_slot;

enum {
    TS_WATCH_BETWEEN = -1, /* between ops (or before the step's first) */
    TS_WATCH_SENDS = -2,   /* the step's ops done, waiting for its pipeline sends to complete */
};

typedef struct ts_watchdog ts_watchdog;

/* Before MPI is up (start-up): SIGALRM after `timeout_s` (0: none) ends this process with
 * "tessera run: rank R: start-up did not finish within S s (--timeout) ...". `rank` is the
 * launcher's (ts_local_rank-style guess) or -1. */
void ts_watchdog_arm_startup(int rank, double timeout_s);

/* The node's shared slots for the runtime's world, and this rank's slot. Collective. With
 * timeout_s 0 nothing is made and the calls below do nothing. `prog` (the step program every
 * rank walks) names the op each rank was in. */
ts_status ts_watchdog_init(ts_watchdog **out, const ts_runtime *rt, const ts_program *prog, double timeout_s);
/* Records the phase and step and restarts the alarm. */
void ts_watchdog_arm(ts_watchdog *w, ts_watch_phase phase, int step);
/* Where the trainer stores the op it runs (ts_trainer_watch); NULL without a watchdog. */
volatile sig_atomic_t *ts_watchdog_op_slot(ts_watchdog *w);
/* Stops the alarm and frees the window. Collective; NULL is ignored. */
void ts_watchdog_free(ts_watchdog *w);

/* The report the first firing rank of a node prints, into buf (at most cap bytes, always
 * terminated); async-signal-safe (no stdio, no allocation). Exposed for the tests. `slots` are
 * the node's n ranks, `self` the reporting rank's index among them. */
size_t ts_watchdog_report(char *buf, size_t cap, const ts_watch_slot *slots, int n, int self,
                          const ts_program *prog, const ts_layout *l, double timeout_s);

#endif
