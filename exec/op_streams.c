/* The executor's two streams: DP segment lists, waits and issue order (see op_streams.h). */
#include <stdlib.h>
#include <string.h>

#include "exec/op_streams.h"

const char *const ts_stream_order_names[] = {"program", "dp-early", "dp-late"};

ts_status ts_stream_order_parse(const char *text, ts_stream_order *out) {
    for (int i = 0; i < TS_ORDER_COUNT; i++)
        if (strcmp(text, ts_stream_order_names[i]) == 0) {
            *out = (ts_stream_order)i;
            return TS_OK;
        }
    return TS_FAIL(TS_ERR_INPUT, "stream order '%s': expected program, dp-early or dp-late", text);
}

/* One resource an op touches: parameters P(s) = s, gradients G(s) = n_seg + s, one-layer gradient
 * buffer b (ZeRO-2/3) 2·n_seg + b. */
typedef struct {
    int32_t res;
    uint8_t write;
} touch;

typedef struct {
    const ts_seg_map *m;
    int n_seg;
    touch *t; /* (2·(2·n_seg + 2)) the current op's touches */
    int n;
    int32_t *last_w[2], *last_r[2]; /* (2·n_seg + 2) last writer and reader per stream */
    int *reduce_hi, *gather_lo;     /* (vpp) bucket cursors, as the trainer walks them */
} walk;

static void add(walk *w, int32_t res, int write) { w->t[w->n++] = (touch){res, (uint8_t)write}; }

static void params(walk *w, int s, int write) {
    if (s >= 0) add(w, s, write);
}

static void grads(walk *w, int s) {
    if (s < 0) return;
    add(w, w->n_seg + s, 1);
    if (w->m->grad_buffer[s] >= 0) add(w, 2 * w->n_seg + w->m->grad_buffer[s], 1);
}

static ts_status local_seg(const walk *w, int layer, int expert, int32_t *seg) {
    if (layer < 0 || layer >= w->m->layers || w->m->local_of[layer] < 0)
        return TS_FAIL(TS_ERR_INPUT, "op streams: layer %d is not on this stage", layer);
    *seg = 2 * w->m->local_of[layer] + expert;
    return TS_OK;
}

/* The embedding travels with the bucket holding layer 0, the head with the one holding L - 1. */
static int holds_first(const walk *w, int lo, int hi) { return w->m->seg_embed >= 0 && lo <= 0 && hi > 0; }
static int holds_last(const walk *w, int lo, int hi) {
    int L = w->m->layers;
    return w->m->seg_head >= 0 && lo <= L - 1 && hi > L - 1;
}

/* The segments DP op `op` reduces or gathers, in the trainer's order, appended to `segs`. */
static ts_status dp_segments(walk *w, const ts_op *op, int32_t *segs, uint32_t *n) {
    int32_t s;
    int lo, hi;
    if (op->chunk < 0 || op->chunk >= w->m->vpp)
        return TS_FAIL(TS_ERR_INPUT, "op streams: chunk %d of a DP op, expected 0 to %d", op->chunk, w->m->vpp - 1);
    if (op->part == TS_PART_GRAD_REDUCE) {
        if (op->group == TS_GROUP_EDP || op->phase != TS_PHASE_STEP) {
            /* Experts over their DP group; ZeRO-2/3's per-layer reduce-scatter. */
            TS_CHECK(local_seg(w, op->layer, op->group == TS_GROUP_EDP, &s));
            segs[(*n)++] = s;
            return TS_OK;
        }
        /* A bucket: layers [op->layer, the previous bucket's first) of its chunk. */
        lo = op->layer;
        hi = w->reduce_hi[op->chunk];
        w->reduce_hi[op->chunk] = lo;
    } else {
        if (op->phase != TS_PHASE_STEP) { /* ZeRO-3: the layer's two segments */
            TS_CHECK(local_seg(w, op->layer, 0, &s));
            segs[(*n)++] = s;
            segs[(*n)++] = s + 1;
            return TS_OK;
        }
        /* A bucket in forward order: layers [the previous bucket's end, op->layer]. */
        lo = w->gather_lo[op->chunk];
        hi = op->layer + 1;
        w->gather_lo[op->chunk] = hi;
    }
    for (int g = lo; g < hi; g++) {
        TS_CHECK(local_seg(w, g, 0, &s));
        segs[(*n)++] = s;
        if (op->part == TS_PART_PARAM_GATHER) segs[(*n)++] = s + 1;
    }
    if (holds_first(w, lo, hi)) segs[(*n)++] = w->m->seg_embed;
    if (holds_last(w, lo, hi)) segs[(*n)++] = w->m->seg_head;
    return TS_OK;
}

/* The touches of compute op `op`. */
static ts_status compute_touches(walk *w, const ts_op *op) {
    const ts_seg_map *m = w->m;
    int writes = op->phase == TS_PHASE_BWD || op->phase == TS_PHASE_WGRAD;
    if (op->kind == TS_OP_OPTIMIZER) {
        for (int s = 0; s < w->n_seg; s++) {
            params(w, s, 1);
            grads(w, s);
        }
        return TS_OK;
    }
    if (op->layer >= 0) {
        int32_t s;
        TS_CHECK(local_seg(w, op->layer, 0, &s));
        for (int e = 0; e < 2; e++) {
            params(w, s + e, 0);
            if (writes) grads(w, s + e);
        }
        return TS_OK;
    }
    int seg[2] = {-1, -1};
    switch (op->part) {
    case TS_PART_EMBED:
    case TS_PART_TP_EMBED: seg[0] = m->seg_embed; break;
    case TS_PART_HEAD:
    case TS_PART_LOSS: /* the final norm is the head's */
        seg[0] = m->seg_head;
        if (m->head_uses_embed) seg[1] = m->seg_embed;
        break;
    default: break;
    }
    for (int k = 0; k < 2; k++) {
        params(w, seg[k], 0);
        if (writes) grads(w, seg[k]);
    }
    return TS_OK;
}

/* The touches of DP op `op`, whose segments are segs[0 .. n). */
static void dp_touches(walk *w, const ts_op *op, const int32_t *segs, uint32_t n) {
    if (op->part == TS_PART_GRAD_REDUCE) {
        for (uint32_t k = 0; k < n; k++) grads(w, segs[k]);
    } else if (op->phase != TS_PHASE_STEP) {
        /* A ZeRO-3 gather releases the oldest gathered layer, whichever it is. */
        for (int s = 0; s < 2 * w->m->n_local; s++) params(w, s, 1);
    } else {
        for (uint32_t k = 0; k < n; k++) params(w, segs[k], 1);
    }
}

static int32_t max32(int32_t a, int32_t b) { return a > b ? a : b; }

/* after[i]: the latest conflicting op of the other stream, then the op's touches recorded. */
static int32_t wait_and_record(walk *w, int32_t i, const ts_stage_program *sp) {
    const ts_op *op = &sp->ops[i];
    int side = ts_op_on_dp(op), other = !side;
    int32_t need = -1;
    for (uint32_t d = 0; d < op->ndeps; d++) {
        uint32_t j = sp->deps[op->dep0 + d];
        if (ts_op_on_dp(&sp->ops[j]) == other) need = max32(need, (int32_t)j);
    }
    for (int k = 0; k < w->n; k++) {
        int32_t r = w->t[k].res;
        need = max32(need, w->last_w[other][r]);
        if (w->t[k].write) need = max32(need, w->last_r[other][r]);
    }
    for (int k = 0; k < w->n; k++) {
        int32_t r = w->t[k].res;
        if (w->t[k].write) w->last_w[side][r] = i;
        else w->last_r[side][r] = i;
    }
    return need;
}

/* A greedy interleaving: each stream in issue order, an op once its wait has been issued,
 * preferring the DP stream (early) or the compute stream (late). */
static void interleave(ts_op_streams *s, const ts_stage_program *sp, ts_stream_order order) {
    int n = s->n_ops, pos = 0;
    int next[2] = {0, 0}; /* per side: its first op not yet issued (those before it are) */
    if (order == TS_ORDER_PROGRAM) {
        for (int i = 0; i < n; i++) s->order[i] = i;
        return;
    }
    int prefer = order == TS_ORDER_DP_EARLY ? 1 : 0;
    while (pos < n) {
        int took = 0;
        for (int pass = 0; pass < 2 && !took; pass++) {
            int side = pass == 0 ? prefer : !prefer;
            int i = next[side];
            while (i < n && ts_op_on_dp(&sp->ops[i]) != side) i++;
            next[side] = i;
            if (i >= n) continue;
            int32_t a = s->after[i];
            /* Its wait, an op of the other side, is issued once that side has passed it. */
            if (a >= 0 && a >= next[!side]) continue;
            s->order[pos++] = i;
            next[side] = i + 1;
            took = 1;
        }
        if (!took) break; /* cannot happen: after[i] < i, so the lower of the two is free */
    }
}

ts_status ts_op_streams_init(ts_op_streams *s, const ts_stage_program *sp, const ts_seg_map *m,
                             ts_stream_order order) {
    memset(s, 0, sizeof *s);
    ts_status res = TS_OK;
    int n = sp->n_ops, n_seg = 2 * m->n_local + 2, n_res = 2 * n_seg + 2;
    walk w = {.m = m, .n_seg = n_seg};
    s->n_ops = n;
    s->after = malloc(((size_t)n + 1) * sizeof *s->after);
    s->seg_start = calloc((size_t)n + 1, sizeof *s->seg_start);
    s->order = malloc(((size_t)n + 1) * sizeof *s->order);
    w.t = malloc(2 * (size_t)n_res * sizeof *w.t);
    for (int k = 0; k < 2; k++) {
        w.last_w[k] = malloc((size_t)n_res * sizeof *w.last_w[k]);
        w.last_r[k] = malloc((size_t)n_res * sizeof *w.last_r[k]);
    }
    w.reduce_hi = malloc((size_t)m->vpp * sizeof *w.reduce_hi);
    w.gather_lo = malloc((size_t)m->vpp * sizeof *w.gather_lo);
    /* A bucket holds at most every local layer's two segments and both edges. */
    size_t seg_cap = 0;
    for (int i = 0; i < n; i++)
        if (ts_op_on_dp(&sp->ops[i])) seg_cap += (size_t)n_seg;
    s->segs = malloc((seg_cap + 1) * sizeof *s->segs);
    if (!s->after || !s->seg_start || !s->order || !w.t || !w.last_w[0] || !w.last_w[1] ||
        !w.last_r[0] || !w.last_r[1] || !w.reduce_hi || !w.gather_lo || !s->segs) {
        res = TS_FAIL(TS_ERR_NOMEM, "out of memory for the streams of %d ops", n);
        goto exit;
    }
    for (int k = 0; k < 2; k++)
        for (int r = 0; r < n_res; r++) w.last_w[k][r] = w.last_r[k][r] = -1;
    for (int c = 0; c < m->vpp; c++) {
        w.reduce_hi[c] = m->chunk_hi[c];
        w.gather_lo[c] = m->chunk_lo[c];
    }
    uint32_t used = 0;
    for (int i = 0; i < n; i++) {
        const ts_op *op = &sp->ops[i];
        s->seg_start[i] = used;
        w.n = 0;
        if (ts_op_on_dp(op)) {
            TS_CHECK_GOTO(dp_segments(&w, op, s->segs, &used), res, exit);
            dp_touches(&w, op, s->segs + s->seg_start[i], used - s->seg_start[i]);
        } else {
            TS_CHECK_GOTO(compute_touches(&w, op), res, exit);
        }
        s->after[i] = wait_and_record(&w, i, sp);
    }
    s->seg_start[n] = used;
    interleave(s, sp, order);
exit:
    free(w.t);
    for (int k = 0; k < 2; k++) {
        free(w.last_w[k]);
        free(w.last_r[k]);
    }
    free(w.reduce_hi);
    free(w.gather_lo);
    return res;
}

void ts_op_streams_free(ts_op_streams *s) {
    free(s->after);
    free(s->seg_start);
    free(s->segs);
    free(s->order);
    memset(s, 0, sizeof *s);
}
