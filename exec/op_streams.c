/* The executor's two streams: waits and issue order from the program's data edges, and the check
 * that they order every conflict (see op_streams.h). */
#include <stdlib.h>
#include <string.h>

#include "exec/op_streams.h"

#include "program/data.h"

const char *const ts_stream_order_names[] = {"program", "dp-early", "dp-late"};

ts_status ts_stream_order_parse(const char *text, ts_stream_order *out) {
    for (int i = 0; i < TS_ORDER_COUNT; i++)
        if (strcmp(text, ts_stream_order_names[i]) == 0) {
            *out = (ts_stream_order)i;
            return TS_OK;
        }
    return TS_FAIL(TS_ERR_INPUT, "stream order '%s': expected program, dp-early or dp-late", text);
}

/* The trainer's segments must be the program's (program/data.h): the DP ops' lists and the
 * data edges were derived from those. */
static ts_status check_map(const ts_stage_segments *g, const ts_seg_map *m) {
    if (m->n_local != g->n_local || m->seg_embed != g->seg_embed || m->seg_head != g->seg_head)
        return TS_FAIL(TS_ERR_INPUT,
                       "op streams: the trainer holds %d layers (embedding segment %d, head %d), the step program "
                       "%d (%d, %d)", m->n_local, m->seg_embed, m->seg_head, g->n_local, g->seg_embed, g->seg_head);
    for (int j = 0; j < m->layers && j < g->layers; j++)
        if (m->local_of[j] != g->local_of[j])
            return TS_FAIL(TS_ERR_INPUT, "op streams: layer %d is local layer %d to the trainer, %d to the step program", j,
                           m->local_of[j], g->local_of[j]);
    for (int s = 0; s < g->n_seg; s++)
        if (m->grad_buffer[s] != g->grad_buffer[s])
            return TS_FAIL(TS_ERR_INPUT, "op streams: segment %d's gradients in buffer %d for the trainer, %d for the "
                           "step program", s, m->grad_buffer[s], g->grad_buffer[s]);
    return TS_OK;
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
    int n = sp->n_ops;
    uint32_t n_segs = sp->seg_start ? sp->seg_start[n] : 0;
    TS_CHECK(check_map(&sp->seg, m));
    s->n_ops = n;
    s->after = malloc(((size_t)n + 1) * sizeof *s->after);
    s->seg_start = malloc(((size_t)n + 1) * sizeof *s->seg_start);
    s->order = malloc(((size_t)n + 1) * sizeof *s->order);
    s->segs = malloc(((size_t)n_segs + 1) * sizeof *s->segs);
    if (!s->after || !s->seg_start || !s->order || !s->segs)
        return TS_FAIL(TS_ERR_NOMEM, "out of memory for the streams of %d ops", n);
    memcpy(s->seg_start, sp->seg_start, ((size_t)n + 1) * sizeof *s->seg_start);
    memcpy(s->segs, sp->segs, (size_t)n_segs * sizeof *s->segs);
    /* An op waits for its latest dependency on the other stream: the program's dependencies
     * include the data edges. */
    for (int i = 0; i < n; i++) {
        const ts_op *op = &sp->ops[i];
        s->after[i] = -1;
        for (uint32_t d = 0; d < op->ndeps; d++) {
            uint32_t j = sp->deps[op->dep0 + d];
            if (ts_op_on_dp(&sp->ops[j]) != ts_op_on_dp(op) && (int32_t)j > s->after[i]) s->after[i] = (int32_t)j;
        }
    }
    interleave(s, sp, order);
    TS_CHECK(ts_unpair_order(sp, s->order, s->n_ops));
    return TS_OK;
}

ts_status ts_op_streams_check(const ts_stage_program *sp, const ts_op_streams *s) {
    int n_res = 2 * sp->seg.n_seg + 2;
    ts_status res = TS_OK;
    ts_access *acc = malloc((size_t)TS_ACCESS_MAX(sp->seg.n_seg) * sizeof *acc);
    int32_t *last = malloc(4 * (size_t)n_res * sizeof *last);
    if (!acc || !last) {
        res = TS_FAIL(TS_ERR_NOMEM, "out of memory checking the streams of %d ops", sp->n_ops);
        goto exit;
    }
    for (int r = 0; r < 4 * n_res; r++) last[r] = -1;
    int32_t *last_w[2] = {last, last + n_res}, *last_r[2] = {last + 2 * n_res, last + 3 * n_res};
    int32_t waited[2] = {-1, -1}; /* per stream: the latest op of the other that it waited for */
    for (int i = 0; i < sp->n_ops && res == TS_OK; i++) {
        int side = ts_op_on_dp(&sp->ops[i]), n = ts_op_accesses(sp, i, acc);
        if (s->after[i] > waited[side]) waited[side] = s->after[i];
        for (int k = 0; k < n && res == TS_OK; k++) {
            int32_t w = last_w[!side][acc[k].res], r = acc[k].write ? last_r[!side][acc[k].res] : -1;
            int32_t conflict = w > r ? w : r;
            if (conflict > waited[side]) {
                char a[128], b[128];
                res = TS_FAIL(TS_ERR_INPUT, "op streams: op %d \"%s\" touches resource %d after op %d \"%s\" of the "
                              "other stream, which its dependencies do not order before it", i,
                              ts_op_label(&sp->ops[i], a, sizeof a), acc[k].res, conflict,
                              ts_op_label(&sp->ops[conflict], b, sizeof b));
            }
        }
        for (int k = 0; k < n; k++) (acc[k].write ? last_w : last_r)[side][acc[k].res] = i;
    }
exit:
    free(acc);
    free(last);
    return res;
}

void ts_op_streams_free(ts_op_streams *s) {
    free(s->after);
    free(s->seg_start);
    free(s->segs);
    free(s->order);
    memset(s, 0, sizeof *s);
}
