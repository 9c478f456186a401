/* The stage's segments, the DP ops' segment lists, what each op touches and the data edges (see
 * data.h). */
#include "program/data.h"

#include <stdlib.h>
#include <string.h>

#include "program/schedule.h"

static int on_dp(const ts_op *op) { return op->stream == TS_STREAM_DP; }

/* --- the stage's segments ------------------------------------------------------------------- */

static ts_status segments_build(const ts_problem *pb, const ts_layout *l, int stage, const ts_stage_program *sp,
                                ts_stage_segments *g) {
    int L = pb->model.layers + pb->model.mtp_layers, v = l->vpp;
    *g = (ts_stage_segments){.layers = L, .vpp = v, .head_uses_embed = pb->model.tied_embeddings};
    g->local_of = malloc((size_t)L * sizeof *g->local_of);
    g->chunk_lo = malloc((size_t)v * sizeof *g->chunk_lo);
    g->chunk_hi = calloc((size_t)v, sizeof *g->chunk_hi);
    if (!g->local_of || !g->chunk_lo || !g->chunk_hi) return TS_FAIL(TS_ERR_NOMEM, "out of memory for the segments of stage %d", stage);
    for (int j = 0; j < L; j++) g->local_of[j] = -1;
    for (int c = 0; c < v; c++) g->chunk_lo[c] = L;
    for (int i = 0; i < sp->n_ops; i++) {
        const ts_op *op = &sp->ops[i];
        if (op->layer < 0 || op->layer >= L) continue;
        g->local_of[op->layer] = 0;
        if (op->phase != TS_PHASE_FWD) continue;
        if (op->layer < g->chunk_lo[op->chunk]) g->chunk_lo[op->chunk] = op->layer;
        if (op->layer + 1 > g->chunk_hi[op->chunk]) g->chunk_hi[op->chunk] = op->layer + 1;
    }
    for (int j = 0; j < L; j++)
        if (g->local_of[j] == 0) g->local_of[j] = g->n_local++;
    g->n_seg = 2 * g->n_local + 2;
    /* The embedding and the head live where a chunk opens or closes a pipeline (both ends of
     * both directions under DualPipe). */
    g->seg_embed = ts_stage_opens(l, stage) ? 2 * g->n_local : -1;
    g->seg_head = ts_stage_closes(l, stage) ? 2 * g->n_local + 1 : -1;
    g->grad_buffer = malloc((size_t)g->n_seg * sizeof *g->grad_buffer);
    if (!g->grad_buffer) return TS_FAIL(TS_ERR_NOMEM, "out of memory for the segments of stage %d", stage);
    /* ZeRO-2/3 keep a layer's gradients in one of two one-layer buffers, alternate layers; a
     * segment alone in its group (DP×CP for the shared part, the EDP group for experts) has
     * nothing to shard and keeps its own. */
    for (int s = 0; s < g->n_seg; s++) {
        int members = ts_group_size(l, s % 2 ? TS_GROUP_EDP : TS_GROUP_DPCP);
        g->grad_buffer[s] = (int8_t)(s < 2 * g->n_local && l->zero >= 2 && members > 1 ? s / 2 % 2 : -1);
    }
    return TS_OK;
}

/* --- the DP ops' segments --------------------------------------------------------------------- */

static ts_status local_seg(const ts_stage_segments *g, int layer, int expert, int32_t *seg) {
    if (layer < 0 || layer >= g->layers || g->local_of[layer] < 0)
        return TS_FAIL(TS_ERR_INPUT, "step program: layer %d is not on this stage", layer);
    *seg = 2 * g->local_of[layer] + expert;
    return TS_OK;
}

/* Appends the segments DP op `op` reduces or gathers to `segs`; `reduce_hi` and `gather_lo`
 * (vpp) are the bucket cursors, walked as the ops come. */
static ts_status dp_segments(const ts_stage_segments *g, const ts_op *op, int32_t *reduce_hi, int32_t *gather_lo,
                             int32_t *segs, uint32_t *n) {
    int32_t s = -1;
    int lo, hi;
    if (op->chunk < 0 || op->chunk >= g->vpp)
        return TS_FAIL(TS_ERR_INPUT, "step program: chunk %d of a DP op, expected 0 to %d", op->chunk, g->vpp - 1);
    if (op->part == TS_PART_GRAD_REDUCE) {
        if (op->group == TS_GROUP_EDP || op->phase != TS_PHASE_STEP) {
            /* Experts over their DP group; ZeRO-2/3's per-layer reduce-scatter. */
            TS_CHECK(local_seg(g, op->layer, op->group == TS_GROUP_EDP, &s));
            segs[(*n)++] = s;
            return TS_OK;
        }
        /* A bucket: layers [op->layer, the previous bucket's first) of its chunk. */
        lo = op->layer;
        hi = reduce_hi[op->chunk];
        reduce_hi[op->chunk] = lo;
    } else {
        if (op->phase == TS_PHASE_STEP && op->group == TS_GROUP_EDP) { /* a MoE layer's experts */
            TS_CHECK(local_seg(g, op->layer, 1, &s));
            segs[(*n)++] = s;
            return TS_OK;
        }
        if (op->phase != TS_PHASE_STEP) { /* ZeRO-3: the layer's shared or expert segment */
            TS_CHECK(local_seg(g, op->layer, op->group == TS_GROUP_EDP, &s));
            segs[(*n)++] = s;
            return TS_OK;
        }
        /* A bucket in forward order: layers [the previous bucket's end, op->layer]. */
        lo = gather_lo[op->chunk];
        hi = op->layer + 1;
        gather_lo[op->chunk] = hi;
    }
    for (int j = lo; j < hi; j++) {
        TS_CHECK(local_seg(g, j, 0, &s));
        segs[(*n)++] = s;
    }
    /* The embedding travels with the bucket holding layer 0, the head with the one holding the
     * model's last layer. */
    int last = g->layers - 1;
    if (g->seg_embed >= 0 && lo <= 0 && hi > 0) segs[(*n)++] = g->seg_embed;
    if (g->seg_head >= 0 && lo <= last && hi > last) segs[(*n)++] = g->seg_head;
    return TS_OK;
}

/* ZeRO-3 holds at most two gathered copies of each kind of segment, shared and expert (the
 * layer running and the one prefetched). A gather lists its own segment, then the copies it
 * releases first: its own segment's older copy, else the older of two held of its kind. */
typedef struct {
    int32_t held[2][2]; /* [kind][k]: the segments held, oldest first */
    int n[2];
} zero3_held;

static void zero3_release(zero3_held *z, int32_t *segs, uint32_t *n) {
    int32_t s = segs[*n - 1];
    int kind = s % 2, *held = &z->n[kind];
    int32_t *h = z->held[kind];
    for (int k = 0; k < *held; k++)
        if (h[k] == s) {
            segs[(*n)++] = s;
            h[k] = h[--*held];
            break;
        }
    if (*held == 2) {
        segs[(*n)++] = h[0];
        h[0] = h[1];
        *held = 1;
    }
    h[(*held)++] = s;
}

static ts_status segs_build(ts_stage_program *sp) {
    const ts_stage_segments *g = &sp->seg;
    /* Grown as DP ops come: one op lists at most n_seg segments (a bucket of every layer and both
     * edges), a ZeRO-3 gather two. Sized up front by n_seg per DP op, a ZeRO-3 step of many
     * layers and micro-batches would ask for tens of megabytes it never uses. */
    size_t cap = 1024;
    ts_status res = TS_OK;
    int32_t *reduce_hi = malloc((size_t)g->vpp * sizeof *reduce_hi);
    int32_t *gather_lo = malloc((size_t)g->vpp * sizeof *gather_lo);
    sp->seg_start = calloc((size_t)sp->n_ops + 1, sizeof *sp->seg_start);
    sp->segs = malloc(cap * sizeof *sp->segs);
    if (!reduce_hi || !gather_lo || !sp->seg_start || !sp->segs) {
        res = TS_FAIL(TS_ERR_NOMEM, "out of memory for the DP segments of %d ops", sp->n_ops);
        goto exit;
    }
    memcpy(reduce_hi, g->chunk_hi, (size_t)g->vpp * sizeof *reduce_hi);
    memcpy(gather_lo, g->chunk_lo, (size_t)g->vpp * sizeof *gather_lo);
    zero3_held z3 = {.n = {0, 0}};
    uint32_t used = 0;
    for (int i = 0; i < sp->n_ops; i++) {
        sp->seg_start[i] = used;
        const ts_op *op = &sp->ops[i];
        if (!on_dp(op)) continue;
        if (used + (size_t)g->n_seg + 2 > cap) {
            cap = 2 * cap + (size_t)g->n_seg + 2;
            int32_t *grown = realloc(sp->segs, cap * sizeof *grown);
            if (!grown) {
                res = TS_FAIL(TS_ERR_NOMEM, "out of memory for the DP segments of %d ops", sp->n_ops);
                goto exit;
            }
            sp->segs = grown;
        }
        TS_CHECK_GOTO(dp_segments(g, op, reduce_hi, gather_lo, sp->segs, &used), res, exit);
        if (op->part == TS_PART_PARAM_GATHER && op->phase != TS_PHASE_STEP) zero3_release(&z3, sp->segs, &used);
    }
    sp->seg_start[sp->n_ops] = used;
exit:
    free(reduce_hi);
    free(gather_lo);
    return res;
}

/* --- what an op touches ------------------------------------------------------------------------ */

/* The latest op of each side (0: the compute streams, 1: DP) to write and to read each resource,
 * as data_edges walks the ops, and the walk's op: its side and the latest conflicting op of the
 * other side found so far. */
typedef struct {
    int32_t *last_w[2], *last_r[2];
    int side;
    int32_t op, need;
} edge_walk;

/* An access of the walk's op: what of the other side it must follow, and it is now the latest of
 * its side (reads come from the other side's lists, writes go to its own: an op's accesses
 * commute). */
static inline void walk_access(edge_walk *w, int32_t res, int write) {
    int other = !w->side;
    int32_t need = w->last_w[other][res];
    if (write && w->last_r[other][res] > need) need = w->last_r[other][res];
    if (need > w->need) w->need = need;
    (write ? w->last_w : w->last_r)[w->side][res] = w->op;
}

/* An op's accesses go to `out` (ts_op_accesses) or straight to `walk` (data_edges, which thereby
 * lists none: a list would cost it as much as the rest of the pass). */
typedef struct {
    const ts_stage_segments *g;
    ts_access *out;
    edge_walk *walk;
    int n;
} touches;

static inline void add(touches *t, int32_t res, int write) {
    if (t->walk) walk_access(t->walk, res, write);
    else t->out[t->n++] = (ts_access){res, (uint8_t)write};
}

static inline void params(touches *t, int s, int write) {
    if (s >= 0) add(t, s, write);
}

static inline void grads(touches *t, int s) {
    if (s < 0) return;
    add(t, t->g->n_seg + s, 1);
    if (t->g->grad_buffer[s] >= 0) add(t, 2 * t->g->n_seg + t->g->grad_buffer[s], 1);
}

static inline void compute_touches(touches *t, const ts_op *op) {
    const ts_stage_segments *g = t->g;
    int writes = op->phase == TS_PHASE_BWD || op->phase == TS_PHASE_WGRAD;
    if (op->kind == TS_OP_OPTIMIZER) {
        for (int s = 0; s < g->n_seg; s++) {
            params(t, s, 1);
            grads(t, s);
        }
        return;
    }
    if (op->part == TS_PART_ZERO_GRAD) { /* writes every gradient the step accumulates into */
        for (int s = 0; s < g->n_seg; s++) grads(t, s);
        return;
    }
    int seg[2] = {-1, -1};
    if (op->layer >= 0 && op->layer < g->layers && g->local_of[op->layer] >= 0) {
        seg[0] = 2 * g->local_of[op->layer];
        seg[1] = seg[0] + 1;
    } else if (op->part == TS_PART_EMBED || op->part == TS_PART_TP_EMBED) {
        seg[0] = g->seg_embed;
    } else if (op->part == TS_PART_HEAD || op->part == TS_PART_LOSS) { /* the final norm is the head's */
        seg[0] = g->seg_head;
        if (g->head_uses_embed) seg[1] = g->seg_embed;
    }
    for (int k = 0; k < 2; k++) {
        params(t, seg[k], 0);
        if (writes) grads(t, seg[k]);
    }
}

static inline void op_touches(const ts_stage_program *sp, int i, touches *t) {
    const ts_op *op = &sp->ops[i];
    if (!on_dp(op)) {
        compute_touches(t, op);
        return;
    }
    const int32_t *segs = sp->segs + sp->seg_start[i];
    uint32_t n = sp->seg_start[i + 1] - sp->seg_start[i];
    if (op->part == TS_PART_GRAD_REDUCE) {
        for (uint32_t k = 0; k < n; k++) grads(t, segs[k]);
    } else {
        for (uint32_t k = 0; k < n; k++) params(t, segs[k], 1);
    }
}

int ts_op_accesses(const ts_stage_program *sp, int i, ts_access *out) {
    touches t = {.g = &sp->seg, .out = out};
    op_touches(sp, i, &t);
    return t.n;
}

/* --- data edges -------------------------------------------------------------------------------- */

static int32_t max32(int32_t a, int32_t b) { return a > b ? a : b; }

/* For each op, the latest conflicting op of the other stream (-1: none) beyond what is already
 * ordered before it, into `extra`. Ops of one stream (the simulator's, a sub-order of the
 * executor's) run in issue order, so what an earlier op of the op's stream waited for is ordered
 * before it too: one edge per stream and conflict, not one per op that touches the data. Counts
 * the edges into *added. */
static ts_status data_edges(const ts_stage_program *sp, int32_t *extra, int *added) {
    int n_res = 2 * sp->seg.n_seg + 2;
    int32_t *last = malloc(4 * (size_t)n_res * sizeof *last); /* writer, reader per side */
    if (!last) return TS_FAIL(TS_ERR_NOMEM, "out of memory for the data edges of %d ops", sp->n_ops);
    for (int r = 0; r < 4 * n_res; r++) last[r] = -1;
    edge_walk w = {.last_w = {last, last + n_res}, .last_r = {last + 2 * n_res, last + 3 * n_res}};
    touches t = {.g = &sp->seg, .walk = &w};
    int32_t covered[TS_STREAM_COUNT];
    for (int k = 0; k < TS_STREAM_COUNT; k++) covered[k] = -1;
    for (int i = 0; i < sp->n_ops; i++) {
        const ts_op *op = &sp->ops[i];
        int other = !on_dp(op);
        int32_t ordered = covered[op->stream];
        for (uint32_t d = 0; d < op->ndeps; d++) {
            uint32_t j = sp->deps[op->dep0 + d];
            if (on_dp(&sp->ops[j]) == other) ordered = max32(ordered, (int32_t)j);
        }
        w.side = !other;
        w.op = i;
        w.need = -1;
        op_touches(sp, i, &t);
        extra[i] = w.need > ordered ? w.need : -1;
        *added += extra[i] >= 0;
        covered[op->stream] = max32(ordered, w.need);
    }
    free(last);
    return TS_OK;
}

/* The dependencies with each op's data edge (`added` in all) appended. */
static ts_status deps_extend(ts_stage_program *sp, const int32_t *extra, int added) {
    if (added == 0) return TS_OK;
    uint32_t *deps = malloc(((size_t)sp->n_deps + added) * sizeof *deps);
    if (!deps) return TS_FAIL(TS_ERR_NOMEM, "out of memory for the data edges of %d ops", sp->n_ops);
    uint32_t n = 0;
    for (int i = 0; i < sp->n_ops; i++) {
        ts_op *op = &sp->ops[i];
        uint32_t dep0 = n;
        for (uint32_t d = 0; d < op->ndeps; d++) deps[n++] = sp->deps[op->dep0 + d];
        if (extra[i] >= 0) deps[n++] = (uint32_t)extra[i];
        op->dep0 = dep0;
        op->ndeps = n - dep0;
    }
    free(sp->deps);
    sp->deps = deps;
    sp->n_deps = sp->cap_deps = (int)n;
    return TS_OK;
}

ts_status ts_stage_data_build(const ts_problem *pb, const ts_layout *l, int stage, ts_stage_program *sp) {
    TS_CHECK(segments_build(pb, l, stage, sp, &sp->seg));
    TS_CHECK(segs_build(sp));
    int32_t *extra = malloc(((size_t)sp->n_ops + 1) * sizeof *extra);
    if (!extra) return TS_FAIL(TS_ERR_NOMEM, "out of memory for the data edges of %d ops", sp->n_ops);
    int added = 0;
    ts_status res = data_edges(sp, extra, &added);
    if (res == TS_OK) res = deps_extend(sp, extra, added);
    free(extra);
    return res;
}

void ts_stage_data_free(ts_stage_program *sp) {
    ts_stage_segments *g = &sp->seg;
    free(g->local_of);
    free(g->chunk_lo);
    free(g->chunk_hi);
    free(g->grad_buffer);
    free(sp->segs);
    free(sp->seg_start);
    memset(g, 0, sizeof *g);
    sp->segs = NULL;
    sp->seg_start = NULL;
}
