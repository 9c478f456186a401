/* The activation cache (see act_cache.h). */
#include <stdlib.h>

#include "exec/act_cache.h"
#include "planner/memory_exec.h"

ts_status tr_cache_init(tr_cache *c, const tr_shape *s, const ts_backend *be, tr_tally *tally) {
    *c = (tr_cache){.s = s, .be = be, .tally = tally};
    c->acts = calloc((size_t)(s->n_local + 1), sizeof *c->acts);
    if (c->acts == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for the activation cache");
    for (int j = 0; j <= s->n_local; j++) {
        c->acts[j] = calloc((size_t)s->m_mb, sizeof **c->acts);
        if (c->acts[j] == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for the activation cache");
    }
    return TS_OK;
}

void tr_cache_free(tr_cache *c) {
    if (c->acts == NULL) return;
    for (int j = 0; j <= c->s->n_local; j++) {
        for (int mb = 0; mb < c->s->m_mb && c->acts[j]; mb++) tr_cache_release(c, j, mb);
        free(c->acts[j]);
    }
    free(c->acts);
    c->acts = NULL;
}

/* The sizes of an entry (planner/memory_exec.h: the planner prices CPU-rank plans with the same
 * sizes): floats and device ints in the backend allocation, host ints after the struct. */
typedef ts_exec_entry entry_size;

static entry_size size_of(const tr_shape *s, int head, int moe) {
    ts_exec_dims d;
    tr_shape_dims(s, &d);
    return ts_exec_entry_of(&d, head, moe);
}

#define TAKE(ptr, n) ((ptr) = f, f += (n))

static void carve_head(tr_acts *a, const tr_shape *s, float *f) {
    size_t T = (size_t)s->T, Tl = (size_t)s->Tl, C = (size_t)s->C;
    TAKE(a->xf, Tl * C);
    TAKE(a->lnf, T * C);
    TAKE(a->rstdf, Tl);
    TAKE(a->logits_v, T * s->Vr);
    TAKE(a->ce_max, T);
    TAKE(a->ce_sum, T);
    TAKE(a->ce_tgt, T);
}

/* A MoE layer's router outputs and expert rows after the dense tensors, its device ints after
 * them, and its host counts after the struct. */
static void carve_moe(tr_acts *a, const tr_shape *s, const entry_size *z, float *f) {
    size_t Tm = (size_t)s->Tm, C = (size_t)s->C, TK = Tm * z->K, ep = (size_t)s->l->ep;
    TAKE(a->logits, Tm * s->E);
    TAKE(a->probs, Tm * s->E);
    TAKE(a->weight, TK);
    TAKE(a->xe, TK * C);
    TAKE(a->ye, TK * C);
    TAKE(a->xr, z->R * C);
    TAKE(a->yr, z->R * C);
    int *n = (int *)f;
    a->expert = n, n += TK;
    a->slot = n, n += TK;
    a->slot_token = n;
    n = (int *)(a + 1);
    a->offset = n, n += s->E + 1;
    a->send_rows = n, n += ep;
    a->recv_rows = n, n += ep;
    a->src_expert_rows = n;
}

static void carve_layer(tr_acts *a, const tr_shape *s, const entry_size *z, float *f) {
    size_t T = (size_t)s->T, Tl = (size_t)s->Tl, C = (size_t)s->C;
    TAKE(a->x, Tl * C);
    TAKE(a->ln1, T * C);
    TAKE(a->rstd1, Tl);
    TAKE(a->qkv, T * s->QKVr);
    TAKE(a->att, T * s->Qr);
    TAKE(a->lse, T * s->Hr);
    TAKE(a->mid, Tl * C);
    TAKE(a->ln2, (z->K ? (size_t)s->Tm : T) * C); /* a MoE layer's: the rows it routes */
    TAKE(a->rstd2, Tl);
    TAKE(a->gate, z->R * z->F);
    TAKE(a->up, z->R * z->F);
    TAKE(a->act, z->R * z->F);
    TAKE(a->out, Tl * C);
    if (z->K) carve_moe(a, s, z, f);
}

#undef TAKE

ts_status tr_cache_get(tr_cache *c, int local, int mb, tr_acts **out) {
    tr_acts **slot = &c->acts[local][mb];
    if (*slot) {
        *out = *slot;
        return TS_OK;
    }
    const tr_shape *s = c->s;
    int head = local == s->n_local;
    entry_size z = size_of(s, head, !head && tr_shape_is_moe(s, s->global_of[local]));
    size_t host_bytes = sizeof(tr_acts) + z.host_ints * sizeof(int);
    size_t dev_bytes = (z.floats + z.dev_ints) * sizeof(float);
    tr_acts *a = calloc(1, host_bytes);
    if (a == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for activations (%zu bytes)", host_bytes);
    ts_status st = c->be->alloc(dev_bytes, &a->dev);
    if (st != TS_OK) {
        free(a);
        return st;
    }
    if (head) carve_head(a, s, a->dev);
    else carve_layer(a, s, &z, a->dev);
    a->bytes = host_bytes + dev_bytes;
    tr_tally_add(c->tally, TR_MEM_ACTIVATIONS, (double)a->bytes);
    *slot = a;
    *out = a;
    return TS_OK;
}

void tr_cache_release(tr_cache *c, int local, int mb) {
    tr_acts *a = c->acts[local][mb];
    if (a == NULL) return;
    tr_tally_add(c->tally, TR_MEM_ACTIVATIONS, -(double)a->bytes);
    c->be->free(a->dev);
    free(a);
    c->acts[local][mb] = NULL;
}
