/* The discrete-event simulator of one training step (see engine.h).
 *
 * Per stage program, once (shared by every simulated rank of the stage): each op's successors
 * (the ops that list it as a dependency, then the next op of its stream — one stream for all but
 * pipeline sends under serial_ops) as a compressed list, its count of predecessors, its
 * contention-free cost (ts_op_cost_s) and the SEND/RECV pairing, in one op_plan per op. Per
 * simulated rank and op: the count of finished predecessors (zeroed memory, so nothing is copied
 * per rank up front); an op whose count reaches its plan's count is ready, at the time of the
 * event that finished its last predecessor. Events queue per distinct time (heap.h), so the whole
 * step costs O(ops + deps + instants · log instants), plus the flow resharing below.
 *
 * An op that becomes ready:
 *   compute      runs for cost × ts_lockstep_scale (planner/cost.h: ranks in step run at the
 *                slowest's pace on a noisy machine; the span between synchronisations is the
 *                stage's compute time over its collectives and receives) × compute_scale[rank] × (1 + overlap_slowdown
 *                if a communication op of the rank is in flight as it starts; if one is an EP
 *                collective, 1 + the larger of that and the SMs its dispatcher's kernels hold,
 *                planner/moe_cost.h ts_moe_comm_sm_frac) + the SM seconds of
 *                the hidden EP transfers begun on the rank since its last compute op started
 *                (plan_sm: DeepSeek-V3 §3.2.2's SMs given to communication), decided once every
 *                event of that instant is done, so simultaneous events may come in any order; on
 *                CPU ranks (node.cores) that is one-core work, shared with the node's other
 *                computing ranks (sim/cores.h) and re-planned whenever one starts or ends;
 *   COLL         full mode: counted at its group's lowest member; when the last member arrives,
 *                the collective starts for all at that (the latest) time and ends for all
 *                together. Representative mode: the rank stands for its peers and starts alone;
 *   SEND         starts its transfer to the matching RECV (key: source stage, destination stage,
 *                phase, micro-batch, chunk; k-th SEND of a key to the k-th RECV of it) and ends
 *                when the transfer ends;
 *   RECV         ends at max(ready, transfer end); its span starts at max(ready, transfer start).
 * A transfer or collective pays its latency, then runs as a flow (network.h) of cost − latency
 * seconds of contention-free work over, for every simulated participant, both directions (a
 * collective's ring) or one direction (a transfer: out at the sender, in at the receiver) of the
 * link its group crosses (ts_group_link), and above a fabric's leaf of the NIC as well. The latency part comes from the cost function itself:
 * ts_coll_s is affine in the bytes (volume / bus bandwidth + latency terms, cost.h), so
 * latency = 2·c(B) − c(2B). Ring CP's steps beside the attention (planner/op_cost.h) run as a
 * fixed span of their cost, sharing no link.
 *
 * Statistics of a stage come from its first simulated rank: busy = compute-stream time (an
 * in-order stream, so its spans are disjoint) but for a collective there (FP8's amax reduction,
 * which blocks the stream: communication), exposed communication = the union of its
 * communication spans minus busy time, bubble = the rest of the step. A run ending with ops left
 * is a deadlock, reported with the first stuck op of the first stuck rank. */
#include "sim/engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "planner/cost.h"
#include "planner/moe_cost.h"
#include "sim/cores.h"
#include "sim/heap.h"
#include "sim/network.h"

enum { EV_END, EV_LATENCY, EV_FLOW, EV_COMM_DONE, EV_RANK_START, EV_MEMBER_DONE };

enum { DIR_OUT, DIR_IN };

/* How far ahead of the op that ends end_op prefetches its rank's arrays: two cache lines (on a
 * 1024-rank step one to four lines ahead measured about alike, eight worse). The rank-op arrays
 * have this much slack at their end. */
enum { PREFETCH_BYTES = 128 };

/* What the event loop reads of one op of a stage program, together (it reads them for every op
 * of every simulated rank; ts_op itself is 72 bytes). */
typedef struct {
    double cost_s;          /* ts_op_cost_s */
    double lat_s;           /* COLL/SEND: latency part of cost_s */
    uint32_t succ0, n_succ; /* its successors: the stage plan's succ[succ0 .. succ0 + n_succ) */
    uint32_t pending0;      /* dependencies + stream predecessor */
    int32_t match;          /* SEND/RECV: the paired op of the peer stage, else -1 */
    uint8_t kind;           /* ts_op_kind */
    uint8_t group;          /* COLL: ts_group */
    uint8_t link;           /* COLL/SEND: the ts_link it crosses */
    uint8_t dp;             /* on the DP stream (its flow capped while the rank computes) */
} op_plan;

typedef struct {
    op_plan *ops;    /* (n_ops) */
    uint32_t *succ;  /* ops waiting for each op */
    uint32_t *roots; /* (n_roots) the ops ready from the start (no predecessor), ascending */
    double *sm_s;    /* NULL, or (n_ops) compute seconds the SMs of each op's hidden EP transfer
                        take from the computation beside it (ts_moe_op_sm_s) */
    int n_roots;
    double lockstep; /* the factor on its compute ops (ts_lockstep_scale, plan_stage) */
} stage_plan;

typedef struct {
    int rank, op;
} op_ref;

/* One op on one simulated rank, touched once per predecessor that finishes (4 bytes: the state of
 * a full-rank step is tens of millions of these). Whether an op is done is not stored: deadlock()
 * derives it. */
typedef struct {
    uint16_t preds_done; /* finished predecessors: ready once it reaches the plan's pending0 */
    uint16_t count;      /* COLL, full mode, at its group's lowest member: members that reached
                            it (groups have at most UINT16_MAX members: ts_simulate checks);
                            RECV: 1 once its transfer has ended */
} op_state;

/* A simulated rank as the event loop sees it: views into its plan, the state and the result.
 * 32 bytes, two to a cache line: every event reads one, and a thousand of them outgrow L1 at
 * any size; what fewer events read (compute scales, group leads) lies in `sim` apart. */
typedef struct {
    const stage_plan *plan; /* its stage's */
    op_state *state;        /* (n_ops) */
    ts_op_span *spans;      /* the result's, or NULL (stats_spans_only) */
    int computing;          /* sharing cores: its compute op in progress */
    int active;             /* communication ops in flight */
    int ep_active;          /* of them, EP collectives */
} sim_rank;

typedef struct {
    const ts_problem *pb;
    const ts_layout *l;
    const ts_program *prog;
    int full, free_comm;
    int n_ranks;
    int group_size[TS_GROUP_COUNT], group_stride[TS_GROUP_COUNT];
    double slowdown;    /* 1 + overlap_slowdown */
    double ep_slowdown; /* with an EP collective in flight: 1 + the larger of it and the SMs the
                           dispatcher's kernels hold (planner/moe_cost.h ts_moe_comm_sm_frac) */
    double *sm_owed;   /* NULL, or (n_ranks) SM seconds of hidden EP transfers begun on the rank
                          that its next compute op pays */
    stage_plan *plans; /* (pp) */
    ts_rank_spans *ranks; /* the result's (n_ranks) */
    sim_rank *rk;      /* (n_ranks) */
    double *scale;     /* NULL, or (n_ranks) compute_scale of each simulated rank's global rank */
    const ts_cost_override *ovr; /* NULL, or durations replacing compute costs (full mode) */
    int *lead;         /* (n_ranks × TS_GROUP_COUNT) full mode: each rank's groups' lowest
                          members (ts_group_id) */
    op_state *state;   /* (rank-ops) the ranks' views in rank order */
    int *links;        /* scratch: the links of a flow */
    int link_kinds;    /* links per rank and direction: ts_link_kinds (2 on a flat fabric) */
    op_ref *starts;    /* compute ops that became ready at `now` */
    int n_starts, cap_starts;
    ts_event_heap heap;
    ts_net net;
    int share_cores;   /* CPU ranks: compute shares the node's cores (cores.h) */
    ts_cores cores;
    double dp_cap;     /* system dp_comm_overlap: the share of its links a DP-stream flow gets
                          while its rank computes (below 1, else the arrays below are NULL) */
    int *dp_flow;      /* (n_ranks) the DP-stream flow in flight on each rank, -1: none */
    uint8_t *busy;     /* (n_ranks) a compute op of the rank is running */
    uint8_t *listed;   /* (n_ranks) the rank is in `touched` */
    int *touched;      /* (n_ranks) ranks whose compute started or ended this instant with a DP
                          flow in flight: their caps are settled once the instant is done */
    int n_touched;
    double now;
    double step_s;     /* the latest end of an op */
    int64_t done, total, events;
} sim;

static int is_comm(int kind) {
    return kind == TS_OP_COLL || kind == TS_OP_SEND || kind == TS_OP_RECV;
}

/* Records when op `i` of a rank started, where the rank keeps spans. */
static inline void span_start(const sim_rank *R, int i, double t_s) {
    if (R->spans) R->spans[i].start_s = t_s;
}

/* The latency part of a COLL or SEND's cost: c(B) = a·B + latency, so latency = 2c(B) − c(2B). */
static double latency_s(const ts_problem *pb, const ts_layout *l, const ts_op *op, double cost) {
    if (cost <= 0) return 0;
    /* Ring CP's steps paced by the attention beside them (op_cost.h) are a fixed span: no flow. */
    if (op->kind == TS_OP_COLL && op->flops > 0) return cost;
    ts_op twice = *op;
    twice.bytes = 2.0 * op->bytes;
    twice.n = 2.0 * op->n; /* ring CP's step bytes */
    double lat = 2.0 * cost - ts_op_cost_s(pb, l, &twice);
    return lat < 0 ? 0 : lat > cost ? cost : lat;
}

static ts_link op_link(const ts_problem *pb, const ts_layout *l, const ts_op *op) {
    ts_group g = op->kind == TS_OP_COLL ? (ts_group)op->group : TS_GROUP_PP;
    int n = op->kind == TS_OP_COLL ? ts_group_size(l, g) : 2;
    return ts_group_link(&pb->sys, ts_group_stride(l, g), n);
}

/* ------------------------------------------------------------------------------------------ */
/* Checking and planning the program                                                          */

static ts_status check_program(const ts_program *prog) {
    char label[128];
    if (prog->pp < 1 || prog->stages == NULL || prog->pp != prog->layout.pp)
        return TS_FAIL(TS_ERR_INPUT, "step program has %d stages for a layout with pp=%d", prog->pp,
                       prog->layout.pp);
    for (int s = 0; s < prog->pp; s++) {
        const ts_stage_program *sp = &prog->stages[s];
        for (int i = 0; i < sp->n_ops; i++) {
            const ts_op *op = &sp->ops[i];
            if (op->kind >= TS_OP_KIND_COUNT || op->phase >= TS_PHASE_COUNT ||
                op->part >= TS_PART_COUNT || op->stream >= TS_STREAM_COUNT)
                return TS_FAIL(TS_ERR_INPUT,
                               "step program stage %d op %d: kind %d, phase %d, part %d or stream "
                               "%d out of range",
                               s, i, op->kind, op->phase, op->part, op->stream);
            const char *why = NULL;
            if (op->kind == TS_OP_COLL &&
                (op->group >= TS_GROUP_COUNT || op->coll >= TS_COLL_COUNT))
                why = "unknown collective or group";
            else if ((op->kind == TS_OP_SEND || op->kind == TS_OP_RECV) &&
                     (op->peer < 0 || op->peer >= prog->pp))
                why = "peer stage out of range";
            else if ((uint64_t)op->dep0 + op->ndeps > (uint64_t)sp->n_deps)
                why = "dependency list out of range";
            else if (op->ndeps >= UINT16_MAX) /* op_state counts them and a stream predecessor */
                why = "more than 65534 dependencies";
            for (uint32_t d = 0; why == NULL && d < op->ndeps; d++)
                if (sp->deps[op->dep0 + d] >= (uint32_t)i) why = "depends on itself or a later op";
            if (why != NULL)
                return TS_FAIL(TS_ERR_INPUT, "step program stage %d op %d (%s): %s", s, i,
                               ts_op_label(op, label, sizeof label), why);
        }
    }
    return TS_OK;
}

static void plan_free(stage_plan *p) {
    free(p->sm_s);
    free(p->ops);
    free(p->succ);
    free(p->roots);
}

/* The stream an op queues on: its own, or under serial_ops (system.h) the compute stream for
 * everything but the non-blocking pipeline sends, so that a rank runs its ops one at a time in
 * program order, as the CPU executor does. */
static int queue_of(const ts_problem *pb, const ts_op *op) {
    if (pb->sys.serial_ops && op->stream != TS_STREAM_PP_SEND) return TS_STREAM_COMPUTE;
    return op->stream;
}

/* The SMs an EP collective's hidden transfer holds are computation lost beside it (DeepSeek-V3
 * §3.2.2, §3.5.1: 20 of the H800's 132 SMs run the all-to-all, "which will limit the
 * computational throughput"): charged to the rank's next compute op to start, the one running
 * beside the transfer when a schedule pairs micro-batches (DualPipe), else the one after it,
 * and never hidden under the pairing as the transfer is. */
static ts_status plan_sm(const ts_problem *pb, const ts_layout *l, const ts_op *op, size_t i, size_t n, stage_plan *p) {
    ts_group g = (ts_group)op->group;
    double sm = ts_moe_op_sm_s(pb, ts_group_size(l, g), ts_group_stride(l, g), (ts_coll)op->coll, op->bytes);
    if (sm <= 0) return TS_OK;
    if (p->sm_s == NULL) {
        p->sm_s = calloc(n, sizeof *p->sm_s);
        if (p->sm_s == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for the SM shares of %zu ops", n);
    }
    p->sm_s[i] = sm;
    return TS_OK;
}

/* Fills `p` for stage program `sp`; on failure the caller frees what was allocated (plan_free). */
static ts_status plan_stage(const ts_problem *pb, const ts_layout *l, const ts_stage_program *sp,
                            stage_plan *p) {
    ts_status res = TS_OK;
    size_t n = (size_t)sp->n_ops;
    int32_t last[TS_STREAM_COUNT];
    p->ops = calloc(n + 1, sizeof *p->ops);
    p->succ = malloc(((size_t)sp->n_deps + n + 1) * sizeof *p->succ);
    p->roots = malloc((n + 1) * sizeof *p->roots);
    TS_ALLOC_GOTO(p->ops, res, exit);
    TS_ALLOC_GOTO(p->succ, res, exit);
    TS_ALLOC_GOTO(p->roots, res, exit);

    /* Successor counts first, with the contention-free costs (compute then carries the lockstep
     * factor, planner/cost.h ts_lockstep_scale, over the stage's span between synchronisations:
     * its compute time over the collectives and receives it waits on); then each list starts
     * where the previous one ends and fills up in op order. */
    double compute_s = 0;
    int syncs = 0;
    for (int s = 0; s < TS_STREAM_COUNT; s++) last[s] = -1;
    for (size_t i = 0; i < n; i++) {
        const ts_op *op = &sp->ops[i];
        for (uint32_t d = 0; d < op->ndeps; d++) p->ops[sp->deps[op->dep0 + d]].n_succ++;
        p->ops[i].pending0 = op->ndeps;
        int q = queue_of(pb, op);
        if (last[q] >= 0) {
            p->ops[last[q]].n_succ++;
            p->ops[i].pending0++;
        }
        last[q] = (int32_t)i;
        p->ops[i].cost_s = ts_op_cost_s(pb, l, op);
        if (op->kind == TS_OP_COLL && op->group == TS_GROUP_EP) TS_CHECK_GOTO(plan_sm(pb, l, op, i, n, p), res, exit);
        if (!is_comm(op->kind)) compute_s += p->ops[i].cost_s;
        syncs += op->kind == TS_OP_COLL || op->kind == TS_OP_RECV;
    }
    for (size_t i = 0, at = 0; i < n; i++) {
        if (p->ops[i].pending0 == 0) p->roots[p->n_roots++] = (uint32_t)i;
        p->ops[i].succ0 = (uint32_t)at;
        at += p->ops[i].n_succ;
        p->ops[i].n_succ = 0;
    }
    for (int s = 0; s < TS_STREAM_COUNT; s++) last[s] = -1;
    for (size_t i = 0; i < n; i++) {
        const ts_op *op = &sp->ops[i];
        for (uint32_t d = 0; d < op->ndeps; d++) {
            op_plan *dep = &p->ops[sp->deps[op->dep0 + d]];
            p->succ[dep->succ0 + dep->n_succ++] = (uint32_t)i;
        }
        int q = queue_of(pb, op);
        if (last[q] >= 0) p->succ[p->ops[last[q]].succ0 + p->ops[last[q]].n_succ++] = (uint32_t)i;
        last[q] = (int32_t)i;
    }

    p->lockstep = ts_lockstep_scale(&pb->sys, ts_rank_count(l), syncs > 0 ? compute_s / syncs : compute_s);
    for (size_t i = 0; i < n; i++) {
        const ts_op *op = &sp->ops[i];
        op_plan *o = &p->ops[i];
        o->kind = op->kind;
        o->group = op->group;
        o->match = -1;
        if (!is_comm(op->kind)) o->cost_s *= p->lockstep;
        int flow = op->kind == TS_OP_COLL || op->kind == TS_OP_SEND;
        o->lat_s = flow ? latency_s(pb, l, op, o->cost_s) : 0;
        o->link = (uint8_t)(flow ? op_link(pb, l, op) : TS_LINK_NVLINK);
        o->dp = op->stream == TS_STREAM_DP;
    }
exit:
    return res;
}

/* A SEND or RECV as its transfer's key: (source, destination, phase, mb, chunk), then order. */
typedef struct {
    int src, dst, phase, mb, chunk, op;
} p2p_key;

static int p2p_cmp(const void *a, const void *b) {
    const p2p_key *x = a, *y = b;
    int dx[6] = {x->src, x->dst, x->phase, x->mb, x->chunk, x->op};
    int dy[6] = {y->src, y->dst, y->phase, y->mb, y->chunk, y->op};
    for (int i = 0; i < 6; i++)
        if (dx[i] != dy[i]) return dx[i] < dy[i] ? -1 : 1;
    return 0;
}

/* Pairs the k-th SEND of each key with the k-th RECV of it (plans[].match). */
static ts_status match_p2p(const ts_program *prog, stage_plan *plans) {
    size_t n_send = 0, n_recv = 0;
    for (int s = 0; s < prog->pp; s++)
        for (int i = 0; i < prog->stages[s].n_ops; i++) {
            n_send += prog->stages[s].ops[i].kind == TS_OP_SEND;
            n_recv += prog->stages[s].ops[i].kind == TS_OP_RECV;
        }
    p2p_key *sends = malloc((n_send + 1) * sizeof *sends),
            *recvs = malloc((n_recv + 1) * sizeof *recvs);
    if (sends == NULL || recvs == NULL) {
        free(sends);
        free(recvs);
        return TS_FAIL(TS_ERR_NOMEM, "out of memory pairing %zu sends", n_send);
    }
    n_send = n_recv = 0;
    for (int s = 0; s < prog->pp; s++)
        for (int i = 0; i < prog->stages[s].n_ops; i++) {
            const ts_op *op = &prog->stages[s].ops[i];
            if (op->kind == TS_OP_SEND)
                sends[n_send++] = (p2p_key){s, op->peer, op->phase, op->mb, op->chunk, i};
            else if (op->kind == TS_OP_RECV)
                recvs[n_recv++] = (p2p_key){op->peer, s, op->phase, op->mb, op->chunk, i};
        }
    qsort(sends, n_send, sizeof *sends, p2p_cmp);
    qsort(recvs, n_recv, sizeof *recvs, p2p_cmp);
    size_t a = 0, b = 0;
    while (a < n_send && b < n_recv) {
        p2p_key x = sends[a], y = recvs[b];
        x.op = y.op = 0;
        int c = p2p_cmp(&x, &y);
        if (c == 0) {
            plans[sends[a].src].ops[sends[a].op].match = recvs[b].op;
            plans[recvs[b].dst].ops[recvs[b].op].match = sends[a].op;
        }
        if (c <= 0) a++;
        if (c >= 0) b++;
    }
    free(sends);
    free(recvs);
    return TS_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* The event loop                                                                             */

static int stage_of(const sim *S, int r) { return S->ranks[r].stage; }

static const ts_op *op_of(const sim *S, int r, int i) {
    return &S->prog->stages[stage_of(S, r)].ops[i];
}

/* The simulated rank of stage `stage` that exchanges with rank `r` (same TP/CP/DP position:
 * full mode, the rank `stage − its stage` PP strides away). */
static int peer_rank(const sim *S, int r, int stage) {
    if (!S->full) return stage;
    return r + (stage - stage_of(S, r)) * S->group_stride[TS_GROUP_PP];
}

/* The participants of COLL or SEND op `i` owned by rank `r` (its group's lowest member, or the
 * sender): `*n` ranks r, r + stride, ... (a SEND: the sender, then the receiver). */
static int participants(const sim *S, int r, int i, int *stride) {
    const op_plan *o = &S->rk[r].plan->ops[i];
    if (o->kind == TS_OP_SEND) {
        *stride = peer_rank(S, r, op_of(S, r, i)->peer) - r;
        return 2;
    }
    *stride = S->group_stride[o->group];
    return S->full ? S->group_size[o->group] : 1;
}

static ts_status push(sim *S, int type, double t_s, int a, int b, uint32_t version) {
    return ts_event_heap_push(
        &S->heap, (ts_event){.t_s = t_s, .type = type, .a = a, .b = b, .version = version});
}

static int comm_counts(const sim *S, const op_plan *o) { return !S->free_comm && o->cost_s > 0; }

/* Op `i` of rank `R` has started: its end will touch its successors' states, which lie anywhere
 * in the rank's program (a forward op's backward), so fetch them now, while other ranks' events
 * run until then. */
static inline void prefetch_succ(const sim_rank *R, int i) {
    const op_plan *o = &R->plan->ops[i];
    const uint32_t *succ = R->plan->succ + o->succ0;
    for (uint32_t k = 0, n = o->n_succ; k < n; k++) __builtin_prefetch(&R->state[succ[k]], 1);
}

/* Whether op `o` is an EP collective (the compute beside it slows by ep_slowdown). */
static int is_ep(const op_plan *o) { return o->kind == TS_OP_COLL && o->group == TS_GROUP_EP; }

/* A collective (all members ready) or transfer (SEND ready) owned by `r` starts now. */
static ts_status comm_begin(sim *S, int r, int i) {
    const op_plan *o = &S->rk[r].plan->ops[i];
    const double *sm_s = S->rk[r].plan->sm_s;
    int stride, n = participants(S, r, i, &stride);
    if (S->sm_owed && sm_s && sm_s[i] > 0)
        for (int k = 0; k < n; k++) S->sm_owed[r + k * stride] += sm_s[i];
    if (!comm_counts(S, o)) return push(S, EV_COMM_DONE, S->now, r, i, 0);
    int ep = is_ep(o);
    for (int k = 0; k < n; k++) {
        sim_rank *P = &S->rk[r + k * stride];
        P->active++;
        P->ep_active += ep;
        prefetch_succ(P, o->kind == TS_OP_SEND && k == 1 ? o->match : i);
    }
    /* A replayed transfer takes its measured time, sharing no link; each member of a replayed
     * collective leaves it when it left it in the run. */
    double d;
    if (S->ovr && !isnan(d = ts_cost_override_get(S->ovr, r, i))) {
        if (o->kind != TS_OP_COLL) return push(S, EV_COMM_DONE, S->now + d, r, i, 0);
        for (int k = 0; k < n; k++) {
            double dk = ts_cost_override_get(S->ovr, r + k * stride, i);
            TS_CHECK(push(S, EV_MEMBER_DONE, S->now + (isnan(dk) ? d : dk), r + k * stride, i, 0));
        }
        return TS_OK;
    }
    return push(S, EV_LATENCY, S->now + o->lat_s, r, i, 0);
}

static ts_status grow_starts(sim *S) {
    int cap = S->cap_starts ? 2 * S->cap_starts : 256;
    op_ref *st = realloc(S->starts, (size_t)cap * sizeof *st);
    if (st == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for %d starting ops", cap);
    S->starts = st;
    S->cap_starts = cap;
    return TS_OK;
}

static ts_status start_comm(sim *S, int r, int i);

/* Op `i` of rank `r` is ready now. Inline, so that end_op starts the common case, a compute op,
 * without a call: it waits in `starts` for the end of the instant (flush_starts). */
static inline ts_status start_op(sim *S, int r, int i) {
    sim_rank *R = &S->rk[r];
    span_start(R, i, S->now);
    if (is_comm(R->plan->ops[i].kind)) return start_comm(S, r, i);
    if (S->n_starts == S->cap_starts) TS_CHECK(grow_starts(S));
    S->starts[S->n_starts++] = (op_ref){r, i};
    return TS_OK;
}

static ts_status end_op(sim *S, int r, int i) {
    const sim_rank *R = &S->rk[r];
    const op_plan *ops = R->plan->ops;
    op_state *state = R->state;
    if (S->now > S->step_s) S->step_s = S->now;
    S->done++;
    /* A rank walks its ops roughly in order and a thousand ranks interleave, too many streams
     * for the hardware prefetcher: fetch the state and spans of its next ops now. */
    __builtin_prefetch(&state[i + PREFETCH_BYTES / sizeof *state], 1);
    if (R->spans) {
        R->spans[i].end_s = S->now;
        __builtin_prefetch(&R->spans[i + PREFETCH_BYTES / sizeof *R->spans], 1);
    }
    const uint32_t *succ = R->plan->succ + ops[i].succ0;
    for (uint32_t k = 0, n = ops[i].n_succ; k < n; k++) {
        uint32_t j = succ[k];
        if (++state[j].preds_done == ops[j].pending0) TS_CHECK(start_op(S, r, (int)j));
    }
    return TS_OK;
}

/* A communication op that became ready (start_op). */
static ts_status start_comm(sim *S, int r, int i) {
    sim_rank *R = &S->rk[r];
    const op_plan *o = &R->plan->ops[i];
    switch ((ts_op_kind)o->kind) {
    case TS_OP_COLL: {
        if (S->ovr && S->ovr->alone[S->ovr->first[r] + i]) {
            /* Replay: the run went on without waiting for the peers here. */
            double d = ts_cost_override_get(S->ovr, r, i);
            R->active++;
            R->ep_active += is_ep(o);
            return push(S, EV_MEMBER_DONE, S->now + (isnan(d) ? 0 : d), r, i, 0);
        }
        if (!S->full) return comm_begin(S, r, i);
        int lead = S->lead[r * TS_GROUP_COUNT + o->group];
        if (++S->rk[lead].state[i].count < S->group_size[o->group]) return TS_OK;
        /* The last member is here: the collective starts now for all of them. */
        int stride, n = participants(S, lead, i, &stride);
        for (int k = 0; k < n; k++) span_start(&S->rk[lead + k * stride], i, S->now);
        return comm_begin(S, lead, i);
    }
    case TS_OP_SEND:
        if (o->match < 0) return TS_OK; /* never matched: reported as a deadlock */
        /* The receiver's span starts now unless its RECV becomes ready later. */
        span_start(&S->rk[peer_rank(S, r, op_of(S, r, i)->peer)], o->match, S->now);
        return comm_begin(S, r, i);
    case TS_OP_RECV:
        /* The span started now unless the transfer starts later (the SEND then moves it). */
        if (R->state[i].count) {
            /* Replay: a receive posted after its data arrived still copies it, as measured. */
            double d = S->ovr ? ts_cost_override_get(S->ovr, r, i) : NAN;
            return push(S, EV_END, S->now + (isnan(d) ? 0 : d), r, i, 0);
        }
        return TS_OK;
    default: return TS_OK;
    }
}

/* The collective or transfer owned by `r` has ended for every participant. */
static ts_status comm_done(sim *S, int r, int i) {
    const op_plan *o = &S->rk[r].plan->ops[i];
    int stride, n = participants(S, r, i, &stride);
    if (comm_counts(S, o)) {
        int ep = is_ep(o);
        for (int k = 0; k < n; k++) S->rk[r + k * stride].active--, S->rk[r + k * stride].ep_active -= ep;
    }
    if (o->kind == TS_OP_SEND) {
        sim_rank *Q = &S->rk[r + stride];
        int waiting = Q->state[o->match].preds_done == Q->plan->ops[o->match].pending0;
        Q->state[o->match].count = 1;
        if (waiting) TS_CHECK(end_op(S, r + stride, o->match));
        return end_op(S, r, i);
    }
    for (int k = 0; k < n; k++) TS_CHECK(end_op(S, r + k * stride, i));
    return TS_OK;
}

/* Rank r's compute starts (busy) or ends: the DP-stream flow in flight on it, if any, gets
 * dp_cap of its links while the rank computes and all of them otherwise, settled once the
 * instant is done (dp_caps_settle), so that back-to-back compute ops leave it alone. */
static inline void dp_busy(sim *S, int r, uint8_t busy) {
    S->busy[r] = busy;
    if (S->dp_flow[r] < 0 || S->listed[r]) return;
    S->listed[r] = 1;
    S->touched[S->n_touched++] = r;
}

static ts_status dp_caps_settle(sim *S) {
    for (int k = 0; k < S->n_touched; k++) {
        int r = S->touched[k], id = S->dp_flow[r];
        S->listed[r] = 0;
        if (id >= 0) TS_CHECK(ts_net_set_cap(&S->net, id, S->busy[r] ? S->dp_cap : 1.0));
    }
    S->n_touched = 0;
    return TS_OK;
}

/* A DP-stream flow `id` of op i owned by r starts (on) or ends on its participants. */
static ts_status dp_flow_mark(sim *S, int r, int i, int id, int on) {
    if (S->dp_flow == NULL || !S->rk[r].plan->ops[i].dp) return TS_OK;
    int stride, n = participants(S, r, i, &stride);
    for (int k = 0; k < n; k++) S->dp_flow[r + k * stride] = on ? id : -1;
    return on && S->busy[r] ? ts_net_set_cap(&S->net, id, S->dp_cap) : TS_OK;
}

static ts_status start_flow(sim *S, int r, int i) {
    const op_plan *o = &S->rk[r].plan->ops[i];
    double work = o->cost_s - o->lat_s;
    if (work <= 0) return comm_done(S, r, i);
    int stride, n = participants(S, r, i, &stride), n_links = 0, K = S->link_kinds;
    /* Over fabric tiers a flow crosses its tier's link and its NIC (every tier's traffic leaves
     * through the NIC), so a rank's flows contend per tier and at the NIC. */
    int nic = o->link > TS_LINK_NIC ? TS_LINK_NIC : -1;
    if (o->kind == TS_OP_SEND) {
        S->links[n_links++] = (r * K + o->link) * 2 + DIR_OUT;
        S->links[n_links++] = ((r + stride) * K + o->link) * 2 + DIR_IN;
        if (nic >= 0) {
            S->links[n_links++] = (r * K + nic) * 2 + DIR_OUT;
            S->links[n_links++] = ((r + stride) * K + nic) * 2 + DIR_IN;
        }
    } else {
        for (int k = 0; k < n; k++) {
            int base = (r + k * stride) * K;
            S->links[n_links++] = (base + o->link) * 2 + DIR_OUT;
            S->links[n_links++] = (base + o->link) * 2 + DIR_IN;
            if (nic < 0) continue;
            S->links[n_links++] = (base + nic) * 2 + DIR_OUT;
            S->links[n_links++] = (base + nic) * 2 + DIR_IN;
        }
    }
    int id;
    TS_CHECK(ts_net_add(&S->net, S->now, work, S->links, n_links, ((int64_t)r << 32) | (uint32_t)i, &id));
    return dp_flow_mark(S, r, i, id, 1);
}

/* Compute ops that became ready this instant get their durations once every event of the
 * instant is done, so whether communication of their rank is in flight does not depend on the
 * order of simultaneous events (a collective starting as its members' GEMMs end). */
static ts_status flush_starts(sim *S) {
    double now = S->now;
    for (int k = 0, n = S->n_starts; k < n; k++) {
        op_ref st = S->starts[k];
        sim_rank *R = &S->rk[st.rank];
        prefetch_succ(R, st.op);
        double d;
        /* A replayed duration already holds the lockstep, overlap and core sharing it met. */
        if (S->ovr && !isnan(d = ts_cost_override_get(S->ovr, st.rank, st.op))) {
            TS_CHECK(push(S, EV_END, now + d, st.rank, st.op, 0));
            continue;
        }
        d = R->plan->ops[st.op].cost_s;
        if (S->scale) d *= S->scale[st.rank];
        if (R->active > 0) d *= R->ep_active > 0 ? S->ep_slowdown : S->slowdown;
        if (S->sm_owed) d += S->sm_owed[st.rank], S->sm_owed[st.rank] = 0;
        if (S->share_cores) {
            R->computing = st.op;
            ts_cores_start(&S->cores, st.rank, d, now);
            continue;
        }
        if (S->busy) dp_busy(S, st.rank, 1);
        TS_CHECK(push(S, EV_END, now + d, st.rank, st.op, 0));
    }
    S->n_starts = 0;
    return TS_OK;
}

static ts_status start_rank(sim *S, int r) {
    const stage_plan *p = &S->plans[stage_of(S, r)];
    for (int k = 0; k < p->n_roots; k++) TS_CHECK(start_op(S, r, (int)p->roots[k]));
    return TS_OK;
}

static ts_status run(sim *S) {
    for (int r = 0; r < S->n_ranks; r++) {
        /* Replay: a rank begins when it began in the run. */
        if (S->ovr && S->ovr->start_s[r] > 0) TS_CHECK(push(S, EV_RANK_START, S->ovr->start_s[r], r, 0, 0));
        else TS_CHECK(start_rank(S, r));
    }
    for (;;) {
        const ts_event *top = ts_event_heap_top(&S->heap);
        /* Compute durations, then rates, are settled once per instant, after its events. */
        if (top == NULL || top->t_s > S->now) {
            if (S->n_starts > 0) {
                TS_CHECK(flush_starts(S));
                continue;
            }
            if (S->n_touched > 0) TS_CHECK(dp_caps_settle(S));
            if (ts_net_dirty(&S->net)) {
                TS_CHECK(ts_net_reshare(&S->net, S->now));
                for (int k = 0; k < S->net.n_changed; k++) {
                    int id = S->net.changed[k];
                    TS_CHECK(push(S, EV_FLOW, ts_net_finish_s(&S->net, id), id, 0,
                                  S->net.flows[id].version));
                }
            }
            if (S->share_cores && ts_cores_dirty(&S->cores)) {
                ts_cores_reshare(&S->cores, S->now);
                for (int k = 0; k < S->cores.n_changed; k++) {
                    int r = S->cores.changed[k];
                    TS_CHECK(push(S, EV_END, ts_cores_finish_s(&S->cores, r), r, S->rk[r].computing,
                                  S->cores.users[r].version));
                }
            }
        }
        ts_event ev;
        if (!ts_event_heap_pop(&S->heap, &ev)) break;
        if (ev.type == EV_FLOW) {
            const ts_flow *f = &S->net.flows[ev.a];
            if (!f->active || f->version != ev.version) continue; /* rescheduled since */
        }
        int shared_end = ev.type == EV_END && S->share_cores && !is_comm(S->rk[ev.a].plan->ops[ev.b].kind);
        if (shared_end) {
            const ts_core_user *u = &S->cores.users[ev.a];
            if (!u->running || u->version != ev.version) continue; /* rescheduled since */
        }
        S->now = ev.t_s;
        S->events++;
        if (shared_end) ts_cores_end(&S->cores, ev.a, S->now);
        switch (ev.type) {
        case EV_END:
            if (S->busy && !is_comm(S->rk[ev.a].plan->ops[ev.b].kind)) dp_busy(S, ev.a, 0);
            TS_CHECK(end_op(S, ev.a, ev.b));
            break;
        case EV_LATENCY: TS_CHECK(start_flow(S, ev.a, ev.b)); break;
        case EV_COMM_DONE: TS_CHECK(comm_done(S, ev.a, ev.b)); break;
        case EV_RANK_START: TS_CHECK(start_rank(S, ev.a)); break;
        case EV_MEMBER_DONE: /* a replayed collective's member (comm_begin) */
            S->rk[ev.a].active--;
            S->rk[ev.a].ep_active -= is_ep(&S->rk[ev.a].plan->ops[ev.b]);
            TS_CHECK(end_op(S, ev.a, ev.b));
            break;
        case EV_FLOW: {
            int64_t tag = S->net.flows[ev.a].tag;
            TS_CHECK(dp_flow_mark(S, (int)(tag >> 32), (int)(uint32_t)tag, ev.a, 0));
            TS_CHECK(ts_net_remove(&S->net, ev.a));
            TS_CHECK(comm_done(S, (int)(tag >> 32), (int)(uint32_t)tag));
            break;
        }
        default: break;
        }
    }
    return TS_OK;
}

/* Whether op `i` of rank `r` finished, once the event queue has run dry: every op whose
 * predecessors all finished did, unless it waits on another rank — a collective whose group never
 * all arrived, an unmatched SEND, a RECV whose transfer never ended. */
static int op_done(const sim *S, int r, int i) {
    const sim_rank *R = &S->rk[r];
    const op_plan *o = &R->plan->ops[i];
    if (R->state[i].preds_done != o->pending0) return 0;
    switch ((ts_op_kind)o->kind) {
    case TS_OP_COLL:
        return !S->full ||
               S->rk[S->lead[r * TS_GROUP_COUNT + o->group]].state[i].count == S->group_size[o->group];
    case TS_OP_SEND: return o->match >= 0;
    case TS_OP_RECV: return R->state[i].count;
    default: return 1;
    }
}

/* The deadlock report: the first unfinished op of the first rank with one. Its predecessors are
 * done (they come earlier in its program), so it waits on another rank: a RECV for its SEND, a
 * SEND for a RECV to pair with, or a collective for its group. */
static ts_status deadlock(const sim *S) {
    int r, i = 0; /* some op is unfinished (S->done < S->total), so the search stops at it */
    for (r = 0; r < S->n_ranks; r++) {
        int n_ops = S->prog->stages[stage_of(S, r)].n_ops;
        for (i = 0; i < n_ops && op_done(S, r, i); i++) continue;
        if (i < n_ops) break;
    }
    int s = stage_of(S, r);
    const ts_op *op = op_of(S, r, i);
    char label[128], why[160];
    if (op->kind == TS_OP_RECV && S->rk[r].plan->ops[i].match < 0)
        snprintf(why, sizeof why, "no SEND from stage %d matches it", op->peer);
    else if (op->kind == TS_OP_RECV)
        snprintf(why, sizeof why, "its SEND on stage %d never ran", op->peer);
    else if (op->kind == TS_OP_SEND)
        snprintf(why, sizeof why, "no RECV on stage %d matches it", op->peer);
    else
        snprintf(why, sizeof why, "%d of %d members of its %s group reached it",
                 (int)S->rk[S->lead[r * TS_GROUP_COUNT + op->group]].state[i].count,
                 S->group_size[op->group],
                 ts_group_names[op->group]);
    return TS_FAIL(
        TS_ERR_INPUT,
        "step program deadlocks: rank %d (stage %d) op %d \"%s\" (%s) never completes: %s",
        S->ranks[r].rank, s, i, ts_op_label(op, label, sizeof label), ts_op_kind_names[op->kind],
        why);
}

/* ------------------------------------------------------------------------------------------ */
/* Statistics                                                                                 */

static int span_before(const ts_op_span *x, const ts_op_span *y) {
    return x->start_s < y->start_s || (x->start_s == y->start_s && x->end_s < y->end_s);
}

/* The n spans of `a` by start, then end, with `tmp` (n) as scratch; returns whichever of the two
 * holds them sorted. Spans equal in both are equal, so any sort gives this order. Short runs by
 * insertion, then a bottom-up merge, with the comparison inline (the spans come nearly sorted):
 * qsort's call per comparison made it a tenth of a 16-rank simulation. */
static ts_op_span *sort_spans(ts_op_span *a, ts_op_span *tmp, size_t n) {
    enum { RUN = 16 }; /* first runs of this many by insertion, cheap on spans nearly in order */
    for (size_t lo = 0; lo < n; lo += RUN) {
        size_t hi = lo + RUN < n ? lo + RUN : n;
        for (size_t i = lo + 1; i < hi; i++) {
            ts_op_span x = a[i];
            size_t j = i;
            for (; j > lo && span_before(&x, &a[j - 1]); j--) a[j] = a[j - 1];
            a[j] = x;
        }
    }
    for (size_t w = RUN; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            if (mid < hi && span_before(&a[mid], &a[mid - 1])) {
                while (i < mid && j < hi) tmp[k++] = span_before(&a[j], &a[i]) ? a[j++] : a[i++];
            }
            while (i < mid) tmp[k++] = a[i++];
            while (j < hi) tmp[k++] = a[j++];
        }
        ts_op_span *t = a;
        a = tmp;
        tmp = t;
    }
    return a;
}

/* Busy, exposed-communication and bubble time of rank `r`; adds its op time by kind. */
static ts_status rank_stats(const sim *S, int r, double step_s, ts_stage_stats *st,
                            double *kind_s) {
    const ts_stage_program *sp = &S->prog->stages[stage_of(S, r)];
    const ts_op_span *spans = S->ranks[r].spans;
    ts_op_span *all = malloc(2 * ((size_t)sp->n_ops + 1) * sizeof *all), *comm = all; /* and sort_spans' scratch */
    if (all == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for stage statistics");
    size_t n_comm = 0;
    double busy = 0;
    for (int i = 0; i < sp->n_ops; i++) {
        double d = spans[i].end_s - spans[i].start_s;
        kind_s[sp->ops[i].kind] += d;
        if (sp->ops[i].stream == TS_STREAM_COMPUTE && !is_comm(sp->ops[i].kind)) busy += d;
        if (is_comm(sp->ops[i].kind) && d > 0) comm[n_comm++] = spans[i];
    }
    comm = sort_spans(comm, all + sp->n_ops + 1, n_comm);
    /* Walk the union of communication intervals against the compute stream's sorted, disjoint
     * spans; what no compute span covers is exposed. */
    double exposed = 0;
    int c = 0;
    size_t k = 0;
    while (k < n_comm) {
        double a = comm[k].start_s, b = comm[k].end_s;
        for (k++; k < n_comm && comm[k].start_s <= b; k++)
            if (comm[k].end_s > b) b = comm[k].end_s;
        double covered = 0;
        for (; c < sp->n_ops; c++) {
            if (sp->ops[c].stream != TS_STREAM_COMPUTE || is_comm(sp->ops[c].kind) || spans[c].end_s <= a) continue;
            if (spans[c].start_s >= b) break;
            double lo = spans[c].start_s > a ? spans[c].start_s : a;
            double hi = spans[c].end_s < b ? spans[c].end_s : b;
            covered += hi - lo;
            if (spans[c].end_s > b) break; /* reaches into the next interval too */
        }
        exposed += (b - a) - covered;
    }
    free(all);
    st->busy_s = busy;
    st->lockstep_scale = S->plans[stage_of(S, r)].lockstep;
    st->exposed_comm_s = exposed;
    st->bubble_s = step_s - busy - exposed;
    if (st->bubble_s < 0) st->bubble_s = 0;
    return TS_OK;
}

/* ------------------------------------------------------------------------------------------ */

static void sim_free(sim *S) {
    for (int s = 0; S->plans && s < S->prog->pp; s++) plan_free(&S->plans[s]);
    free(S->plans);
    free(S->rk);
    free(S->scale);
    free(S->sm_owed);
    free(S->lead);
    free(S->state);
    free(S->links);
    free(S->starts);
    free(S->dp_flow);
    free(S->busy);
    free(S->listed);
    free(S->touched);
    ts_event_heap_free(&S->heap);
    ts_net_free(&S->net);
    ts_cores_free(&S->cores);
}

ts_step_spans ts_sim_spans(const ts_sim_result *r) {
    return (ts_step_spans){.n_ranks = r->n_ranks, .ranks = r->ranks, .step_s = r->step_s,
                           .gauge_flops_per_s = r->gauge_flops_per_s};
}

void ts_sim_result_free(ts_sim_result *r) {
    free(r->span_block);
    free(r->ranks);
    free(r->stages);
    memset(r, 0, sizeof *r);
}

/* calloc for the arrays indexed by rank-op (tens of millions of entries in a full-rank step),
 * advised onto transparent huge pages: the event loop works at every rank's frontier at once, and
 * with 4 KiB pages nearly every access misses the TLB (a quarter of a 1024-rank step's time).
 * madvise's result is ignored on purpose: where the kernel declines, the memory is plain calloc
 * memory and only slower. Slack at the end for end_op's prefetches. */
static void *rank_ops_calloc(size_t n, size_t size) {
    void *p = calloc(n + PREFETCH_BYTES / size + 1, size);
#ifdef MADV_HUGEPAGE
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)p, hi = lo + n * size;
    if (p != NULL && page > 0) {
        lo = (lo + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
        if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
    }
#endif
    return p;
}

/* The simulated rank whose spans give stage `s`'s statistics (and which always keeps them). */
static int stats_rank(const sim *S, int s) {
    return S->full ? ts_rank_of(S->l, (ts_coords){0, 0, 0, s}) : s;
}

static int keeps_spans(const sim *S, const ts_sim_opts *o, int r) {
    return !o->stats_spans_only || stats_rank(S, S->ranks[r].stage) == r;
}

/* Lays out the simulated ranks: the result's ranks and spans, the state and the loop's views. */
static ts_status sim_ranks_init(sim *S, const ts_sim_opts *o, ts_sim_result *out) {
    const ts_layout *l = S->l;
    int64_t n_spans = 0;
    for (int r = 0; r < S->n_ranks; r++) {
        ts_rank_spans *R = &out->ranks[r];
        R->rank = o->full ? r : ts_rank_of(l, (ts_coords){0, 0, 0, r});
        R->stage = o->full ? ts_rank_coords(l, r).pp : r;
        int n_ops = S->prog->stages[R->stage].n_ops;
        S->total += n_ops;
        if (keeps_spans(S, o, r)) n_spans += n_ops;
    }
    out->span_block = rank_ops_calloc((size_t)n_spans, sizeof *out->span_block);
    S->state = rank_ops_calloc((size_t)S->total, sizeof *S->state);
    if (out->span_block == NULL || S->state == NULL)
        return TS_FAIL(TS_ERR_NOMEM, "out of memory for %lld rank-ops", (long long)S->total);
    int64_t base = 0, span_base = 0;
    for (int r = 0; r < S->n_ranks; r++) {
        ts_rank_spans *R = &out->ranks[r];
        sim_rank *V = &S->rk[r];
        int n_ops = S->prog->stages[R->stage].n_ops;
        if (keeps_spans(S, o, r)) {
            R->spans = out->span_block + span_base;
            span_base += n_ops;
        }
        V->plan = &S->plans[R->stage];
        V->state = S->state + base;
        V->spans = R->spans;
        if (S->scale) S->scale[r] = o->compute_scale[R->rank];
        for (int g = 0; g < TS_GROUP_COUNT; g++)
            S->lead[r * TS_GROUP_COUNT + g] = o->full ? ts_group_id(l, (ts_group)g, r) : r;
        base += n_ops;
    }
    return TS_OK;
}

/* CPU ranks: each simulated rank's node and the ranks of that node it stands for (itself, or in
 * representative mode its stage's ranks on the node holding most of them). */
static ts_status cores_init(sim *S) {
    const ts_layout *l = S->l;
    int gpn = S->pb->sys.gpus_per_node, world = ts_rank_count(l), n_nodes = (world + gpn - 1) / gpn;
    int *count = calloc((size_t)n_nodes, sizeof *count), *node = calloc((size_t)S->n_ranks, sizeof *node);
    double *weight = malloc((size_t)S->n_ranks * sizeof *weight);
    ts_status res = TS_OK;
    if (count == NULL || node == NULL || weight == NULL) {
        res = TS_FAIL(TS_ERR_NOMEM, "out of memory for %d nodes", n_nodes);
        goto exit;
    }
    for (int r = 0; r < S->n_ranks; r++) {
        if (S->full) {
            node[r] = r / gpn;
            weight[r] = 1;
            continue;
        }
        for (int n = 0; n < n_nodes; n++) count[n] = 0;
        for (int g = 0; g < world; g++) count[g / gpn] += ts_rank_coords(l, g).pp == r;
        for (int n = 0; n < n_nodes; n++)
            if (count[n] > count[node[r]]) node[r] = n;
        weight[r] = count[node[r]];
    }
    res = ts_cores_init(&S->cores, S->n_ranks, node, weight, n_nodes, S->pb->sys.cores_per_node);
    S->share_cores = res == TS_OK;
exit:
    free(count);
    free(node);
    free(weight);
    return res;
}

/* DP traffic beside computation gets only dp_comm_overlap of its links (the closed form's
 * window, planner/stages.c exposed: the share of a window DP/ZeRO traffic can use), so a
 * DP-bound step is as slow in both. Not on CPU ranks (blocking MPI, shared cores: nothing
 * overlaps) nor in a replay, whose durations hold what they met. */
static ts_status dp_cap_init(sim *S) {
    double ovl = S->pb->sys.dp_comm_overlap;
    if (!(ovl > 0 && ovl < 1) || S->free_comm || S->ovr || S->share_cores || S->pb->sys.serial_ops) return TS_OK;
    S->dp_cap = ovl;
    S->dp_flow = malloc((size_t)S->n_ranks * sizeof *S->dp_flow);
    S->busy = calloc((size_t)S->n_ranks, sizeof *S->busy);
    S->listed = calloc((size_t)S->n_ranks, sizeof *S->listed);
    S->touched = malloc((size_t)S->n_ranks * sizeof *S->touched);
    if (S->dp_flow == NULL || S->busy == NULL || S->listed == NULL || S->touched == NULL)
        return TS_FAIL(TS_ERR_NOMEM, "out of memory for the DP flows of %d ranks", S->n_ranks);
    for (int r = 0; r < S->n_ranks; r++) S->dp_flow[r] = -1;
    return TS_OK;
}

static double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

ts_status ts_simulate(const ts_problem *pb, const ts_program *prog, const ts_sim_opts *opts,
                      ts_sim_result *out) {
    double t0 = seconds_now();
    memset(out, 0, sizeof *out);
    ts_sim_opts o = opts ? *opts : (ts_sim_opts){0};
    if (o.compute_scale && !o.full)
        return TS_FAIL(TS_ERR_INPUT, "per-rank compute scales need full simulation (every rank)");
    if (o.cost_override && (!o.full || o.cost_override->n_ranks != ts_rank_count(&prog->layout)))
        return TS_FAIL(TS_ERR_INPUT, "op durations to replay need full simulation (every rank) of their layout");
    TS_CHECK(check_program(prog));

    ts_status res = TS_OK;
    const ts_layout *l = &prog->layout;
    sim S = {.pb = pb, .l = l, .prog = prog, .full = o.full, .free_comm = o.free_comm, .ovr = o.cost_override,
             .slowdown = 1.0 + pb->sys.overlap_slowdown,
             .ep_slowdown = 1.0 + fmax(pb->sys.overlap_slowdown, ts_moe_comm_sm_frac(pb))};
    ts_event_heap_init(&S.heap);
    S.n_ranks = o.full ? ts_rank_count(l) : prog->pp;
    int max_group = 2;
    for (int g = 0; g < TS_GROUP_COUNT; g++) {
        S.group_size[g] = ts_group_size(l, (ts_group)g);
        S.group_stride[g] = ts_group_stride(l, (ts_group)g);
        if (S.group_size[g] > max_group) max_group = S.group_size[g];
    }
    if (o.full && max_group > UINT16_MAX)
        return TS_FAIL(TS_ERR_INPUT,
                       "a group of %d ranks is too large to simulate every rank (at most %d)",
                       max_group, UINT16_MAX);
    S.plans = calloc((size_t)prog->pp, sizeof *S.plans);
    /* Line-aligned, so that no rank straddles two cache lines. */
    size_t rk_bytes = ((size_t)S.n_ranks * sizeof *S.rk + 63) & ~(size_t)63;
    S.rk = aligned_alloc(64, rk_bytes);
    if (S.rk) memset(S.rk, 0, rk_bytes);
    S.lead = malloc((size_t)S.n_ranks * TS_GROUP_COUNT * sizeof *S.lead);
    if (o.compute_scale) {
        S.scale = malloc((size_t)S.n_ranks * sizeof *S.scale);
        TS_ALLOC_GOTO(S.scale, res, fail);
    }
    S.link_kinds = ts_link_kinds(&pb->sys);
    S.links = malloc((size_t)4 * max_group * sizeof *S.links);
    out->ranks = calloc((size_t)S.n_ranks, sizeof *out->ranks);
    out->stages = calloc((size_t)prog->pp, sizeof *out->stages);
    TS_ALLOC_GOTO(S.plans, res, fail);
    TS_ALLOC_GOTO(S.rk, res, fail);
    TS_ALLOC_GOTO(S.lead, res, fail);
    TS_ALLOC_GOTO(S.links, res, fail);
    TS_ALLOC_GOTO(out->ranks, res, fail);
    TS_ALLOC_GOTO(out->stages, res, fail);
    out->n_ranks = S.n_ranks;
    S.ranks = out->ranks;

    for (int s = 0; s < prog->pp; s++)
        TS_CHECK_GOTO(plan_stage(pb, l, &prog->stages[s], &S.plans[s]), res, fail);
    TS_CHECK_GOTO(match_p2p(prog, S.plans), res, fail);
    for (int s = 0; s < prog->pp && !S.sm_owed && !o.free_comm; s++)
        if (S.plans[s].sm_s) {
            S.sm_owed = calloc((size_t)S.n_ranks, sizeof *S.sm_owed);
            TS_ALLOC_GOTO(S.sm_owed, res, fail);
        }
    TS_CHECK_GOTO(sim_ranks_init(&S, &o, out), res, fail);
    TS_CHECK_GOTO(ts_net_init(&S.net, S.n_ranks * S.link_kinds * 2), res, fail);
    /* Replayed durations already hold the core sharing they met. */
    if (pb->sys.cores_per_node > 0 && !S.ovr) TS_CHECK_GOTO(cores_init(&S), res, fail);
    TS_CHECK_GOTO(dp_cap_init(&S), res, fail);

    TS_CHECK_GOTO(run(&S), res, fail);
    if (S.done < S.total) {
        res = deadlock(&S);
        goto fail;
    }

    out->step_s = S.step_s;
    out->gauge_flops_per_s = pb->sys.gauge_flops_per_s;
    for (int s = 0; s < prog->pp; s++) {
        int r = stats_rank(&S, s);
        TS_CHECK_GOTO(rank_stats(&S, r, out->step_s, &out->stages[s], out->kind_s), res, fail);
        if (out->step_s > 0)
            out->bubble_fraction += out->stages[s].bubble_s / out->step_s / prog->pp;
    }
    out->events = S.events;
    sim_free(&S);
    out->sim_s = seconds_now() - t0;
    return TS_OK;
fail:
    sim_free(&S);
    ts_sim_result_free(out);
    return res;
}
