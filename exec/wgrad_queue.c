/* Deferred weight-gradient GEMMs (see wgrad_queue.h). */
#include <stdlib.h>

#include "exec/wgrad_queue.h"

void tr_wgrad_init(tr_wgrad_queue *q, const ts_backend *be, tr_tally *tally) {
    *q = (tr_wgrad_queue){.be = be, .tally = tally};
}

void tr_wgrad_free(tr_wgrad_queue *q) {
    for (int i = 0; i < q->n; i++) {
        for (int k = 0; k < q->e[i].n; k++) q->be->free(q->e[i].w[k].dout);
        free(q->e[i].w);
    }
    free(q->e);
    q->e = NULL;
    q->n = q->cap = 0;
}

/* The entry of (layer, mb, part), made if absent. */
static ts_status entry_of(tr_wgrad_queue *q, int layer, int mb, int part, tr_wgrad_entry **out) {
    for (int i = 0; i < q->n; i++)
        if (q->e[i].layer == layer && q->e[i].mb == mb && q->e[i].part == part) {
            *out = &q->e[i];
            return TS_OK;
        }
    if (q->n == q->cap) {
        int cap = q->cap ? 2 * q->cap : 16;
        tr_wgrad_entry *g = realloc(q->e, (size_t)cap * sizeof *g);
        if (g == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for deferred weight gradients");
        q->e = g;
        q->cap = cap;
    }
    *out = &q->e[q->n++];
    **out = (tr_wgrad_entry){.layer = layer, .mb = mb, .part = part};
    return TS_OK;
}

ts_status tr_wgrad_stash(tr_wgrad_queue *q, int layer, int mb, int part, float *dw, const float *dout,
                         const float *in, int T, int IC, int OC) {
    tr_wgrad_entry *e = NULL;
    TS_CHECK(entry_of(q, layer, mb, part, &e));
    if (e->n == e->cap) {
        int cap = e->cap ? 2 * e->cap : 4;
        tr_wgrad *w = realloc(e->w, (size_t)cap * sizeof *w);
        if (w == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for deferred weight gradients");
        e->w = w;
        e->cap = cap;
    }
    size_t n = (size_t)T * OC;
    float *copy = NULL;
    TS_CHECK(q->be->alloc(n * sizeof *copy, (void **)&copy));
    ts_status st = q->be->kernels->copy(copy, dout, n * sizeof(float));
    if (st != TS_OK) {
        q->be->free(copy);
        return st;
    }
    tr_tally_add(q->tally, TR_MEM_ACTIVATIONS, (double)n * sizeof *copy);
    e->w[e->n++] = (tr_wgrad){dw, copy, in, T, IC, OC};
    return TS_OK;
}

ts_status tr_wgrad_run(tr_wgrad_queue *q, int layer, int mb, int part) {
    ts_status res = TS_OK;
    for (int i = 0; i < q->n; i++) {
        tr_wgrad_entry *e = &q->e[i];
        if (e->layer != layer || e->mb != mb || e->part != part) continue;
        for (int k = 0; k < e->n; k++) {
            tr_wgrad *w = &e->w[k];
            if (res == TS_OK) res = q->be->kernels->linear_bwd_weight(w->dw, w->dout, w->in, w->T, w->IC, w->OC);
            tr_tally_add(q->tally, TR_MEM_ACTIVATIONS, -((double)w->T * w->OC * sizeof(float)));
            q->be->free(w->dout);
        }
        free(e->w);
        q->e[i] = q->e[--q->n];
        return res;
    }
    return res;
}
