/* CPU ranks sharing a node's cores (system.h node.cores), for the event engine (engine.h).
 *
 * When a node's ranks outnumber its cores, the operating system shares the cores among the
 * ranks that are running: a compute op that would take w seconds with a core to itself
 * progresses at min(1, cores / load), load being how many ranks of its node compute at that
 * moment (processor sharing; Kleinrock, "Queueing Systems" vol. 2, §4.4). Ranks waiting for a
 * collective or a transfer do not count: an oversubscribed Open MPI job runs in its degraded
 * mode (mpi_yield_when_idle), whose waits yield the core to runnable ranks (tessera run binds
 * each rank past the cores to one core, round-robin, cli/cli.c, so that the yield reaches the
 * ranks bound beside it rather than leaving a core idle while they queue on another). So a pipeline stage
 * in its bubble leaves its core to the others, which the static ranks/cores stretch of
 * planner/cost.h (ts_compute_scale) cannot see; the two agree when every rank computes at once.
 *
 * Each simulated rank runs at most one compute op at a time (its compute stream is in order) and
 * may stand for several ranks of its node (`weight`: the representative of a stage stands for
 * the stage's ranks there). The API mirrors network.h: start and end mark the node, reshare brings
 * the marked nodes' ops up to date, lists in `changed` the ranks whose finish moved and bumps
 * their `version`, so an end event scheduled earlier can be recognised as stale.
 *
 * ts_cores_init / ts_cores_free pair; the struct owns every array. */
#ifndef TS_CORES_H
#define TS_CORES_H

#include <stdint.h>

#include "common/status.h"

typedef struct {
    int node;           /* the node it computes on */
    double weight;      /* ranks of that node it stands for */
    int running;        /* a compute op in progress */
    int fresh;          /* started since the last reshare: not scheduled yet */
    double remaining_s; /* one-core work left, as of since_s */
    double since_s;
    double rate;        /* share of a core, (0, 1] */
    uint32_t version;   /* bumped whenever its finish time changes */
    int slot;           /* position in its node's `run` */
} ts_core_user;

typedef struct {
    int *run;     /* (n_run) ranks computing on the node */
    int n_run;
    double load;  /* Σ weights of `run` */
    int marked;   /* touched since the last reshare */
} ts_core_node;

typedef struct {
    double cores;          /* per node */
    ts_core_user *users;   /* (n_users) one per simulated rank */
    int n_users;
    ts_core_node *nodes;   /* (n_nodes) */
    int *runs;             /* (n_users) the nodes' `run` slices */
    int n_nodes;
    int *marked;           /* (n_marked) nodes touched since the last reshare */
    int n_marked;
    int *changed;          /* after ts_cores_reshare: ranks whose finish time moved */
    int n_changed;
} ts_cores;

/* `n_users` simulated ranks, rank r on node[r] (< n_nodes) standing for weight[r] ranks there,
 * on nodes of `cores` cores (> 0). */
ts_status ts_cores_init(ts_cores *c, int n_users, const int *node, const double *weight, int n_nodes,
                        double cores);
void ts_cores_free(ts_cores *c);

/* Rank r starts an op of `work_s` one-core seconds at `now_s` (it runs none). */
void ts_cores_start(ts_cores *c, int r, double work_s, double now_s);
/* Rank r's op has finished at `now_s`. */
void ts_cores_end(ts_cores *c, int r, double now_s);

/* Whether starts or ends happened since the last reshare. */
static inline int ts_cores_dirty(const ts_cores *c) { return c->n_marked > 0; }

/* Recomputes the rates on the marked nodes as of `now_s` (no earlier than the marking calls);
 * fills `changed`. */
void ts_cores_reshare(ts_cores *c, double now_s);

/* When rank r's op finishes if rates stay as they are. */
double ts_cores_finish_s(const ts_cores *c, int r);

#endif
