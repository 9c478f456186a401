/* Views of the segments' tensors and their elements' places in the full model (param_layout.h). */
#include "exec/param_layout.h"

#include <stdint.h>

#include "common/parallel.h"
#include "exec/reference.h"
#include "planner/memory_exec_buffers.h"

size_t tr_seg_size(const tr_shape *s, tr_seg_kind kind, int global) {
    /* Sized by the planner's function, which prices CPU-rank plans' buffers with the same sizes. */
    _Static_assert((int)TR_SEG_SHARED == (int)TS_EXEC_SEG_SHARED && (int)TR_SEG_EXPERTS == (int)TS_EXEC_SEG_EXPERTS &&
                       (int)TR_SEG_EMBED == (int)TS_EXEC_SEG_EMBED && (int)TR_SEG_HEAD == (int)TS_EXEC_SEG_HEAD,
                   "one order of segment kinds");
    ts_exec_dims d;
    tr_shape_dims(s, &d);
    return ts_exec_seg_floats(&d, (ts_exec_seg)kind, tr_shape_is_moe(s, global), s->m->tied_embeddings);
}

tr_layer tr_layer_views(const tr_shape *s, int global, float *shared, float *experts) {
    size_t C = (size_t)s->C;
    tr_layer v = {0};
    int moe = tr_shape_is_moe(s, global);
    if (shared) {
        float *p = shared;
        v.attn_norm = p, p += C;
        v.qkv = p, p += (size_t)s->QKVr * C;
        v.attn_out = p, p += C * s->Qr;
        v.mlp_norm = p, p += C;
        if (moe) {
            v.router = p;
        } else {
            v.gate = p, p += (size_t)s->Fr * C;
            v.up = p, p += (size_t)s->Fr * C;
            v.down = p;
        }
    }
    if (experts && moe) {
        size_t per = (size_t)s->El * s->Fer * C;
        v.gate = experts;
        v.up = experts + per;
        v.down = experts + 2 * per;
    }
    return v;
}

tr_edge tr_edge_views(const tr_shape *s, float *embed, float *head) {
    tr_edge v = {.embed = embed, .final_norm = head};
    if (head) v.lm_head = s->m->tied_embeddings ? embed : head + s->C;
    return v;
}

/* ---- Every element with its index in the full tensor ------------------------------------------ */

/* Called for every element of a segment with its tensor, layer and index in the full tensor
 * (exec/reference.h's layout); `replicated` is set for tensors every TP rank holds whole. */
typedef void (*element_fn)(void *ctx, ts_ref_kind kind, int layer, size_t global_index, float *elem,
                           int replicated);

/* The attention block's tensors and a MoE layer's router (the shared segment's own tensors). */
static void map_attention(const tr_shape *s, int global, tr_layer p, element_fn fn, void *ctx) {
    size_t C = (size_t)s->C, D = (size_t)s->D, Q = (size_t)s->H * D, KVD_all = (size_t)s->KV * D;
    for (size_t c = 0; c < C; c++) {
        fn(ctx, TS_REF_ATTN_NORM, global, c, &p.attn_norm[c], 1);
        fn(ctx, TS_REF_MLP_NORM, global, c, &p.mlp_norm[c], 1);
    }
    for (int r = 0; r < s->QKVr; r++) {
        size_t grow;
        if (r < s->Qr) grow = (size_t)s->tp_i * s->Qr + (size_t)r;
        else if (r < s->Qr + s->KVD) grow = Q + (size_t)s->tp_i * s->KVD + (size_t)(r - s->Qr);
        else grow = Q + KVD_all + (size_t)s->tp_i * s->KVD + (size_t)(r - s->Qr - s->KVD);
        for (size_t c = 0; c < C; c++) fn(ctx, TS_REF_QKV, global, grow * C + c, &p.qkv[(size_t)r * C + c], 0);
    }
    for (size_t o = 0; o < C; o++)
        for (int q = 0; q < s->Qr; q++)
            fn(ctx, TS_REF_ATTN_OUT, global, o * Q + (size_t)s->tp_i * s->Qr + (size_t)q,
               &p.attn_out[o * s->Qr + (size_t)q], 0);
    if (p.router)
        for (size_t i = 0; i < (size_t)s->E * C; i++) fn(ctx, TS_REF_ROUTER, global, i, &p.router[i], 1);
}

/* The MLP's gate, up and down: a dense layer's TP slice, or a MoE layer's local experts' ETP
 * slices (whole experts when etp = 1). */
static void map_mlp(const tr_shape *s, int global, tr_layer p, element_fn fn, void *ctx) {
    size_t C = (size_t)s->C;
    int moe = tr_shape_is_moe(s, global);
    int El = moe ? s->El : 1, e0 = moe ? s->e0 : 0, slice = moe ? s->etp_i : s->tp_i;
    size_t Fl = moe ? (size_t)s->Fer : (size_t)s->Fr, Fg = moe ? (size_t)s->Fe : (size_t)s->F;
    for (int el = 0; el < El; el++) {
        size_t e = (size_t)(e0 + el);
        for (size_t f = 0; f < Fl; f++) {
            size_t gf = (size_t)slice * Fl + f;
            for (size_t c = 0; c < C; c++) {
                size_t li = ((size_t)el * Fl + f) * C + c, gi = (e * Fg + gf) * C + c;
                fn(ctx, TS_REF_GATE, global, gi, &p.gate[li], 0);
                fn(ctx, TS_REF_UP, global, gi, &p.up[li], 0);
            }
        }
        for (size_t o = 0; o < C; o++)
            for (size_t f = 0; f < Fl; f++)
                fn(ctx, TS_REF_DOWN, global, (e * C + o) * Fg + (size_t)slice * Fl + f,
                   &p.down[((size_t)el * C + o) * Fl + f], 0);
    }
}

/* The embedding or LM head rows of this rank's vocabulary slice. */
static void map_vocab_rows(const tr_shape *s, float *rows, ts_ref_kind kind, element_fn fn, void *ctx) {
    size_t C = (size_t)s->C;
    for (size_t r = 0; r < (size_t)s->Vr; r++)
        for (size_t c = 0; c < C; c++) fn(ctx, kind, 0, ((size_t)s->v0 + r) * C + c, &rows[r * C + c], 0);
}

static void map_segment(const tr_shape *s, tr_seg_kind kind, int global, float *seg, element_fn fn, void *ctx) {
    switch (kind) {
    case TR_SEG_SHARED: {
        tr_layer p = tr_layer_views(s, global, seg, NULL);
        map_attention(s, global, p, fn, ctx);
        if (!tr_shape_is_moe(s, global)) map_mlp(s, global, p, fn, ctx);
        return;
    }
    case TR_SEG_EXPERTS:
        if (tr_shape_is_moe(s, global)) map_mlp(s, global, tr_layer_views(s, global, NULL, seg), fn, ctx);
        return;
    case TR_SEG_EMBED: map_vocab_rows(s, seg, TS_REF_EMBED, fn, ctx); return;
    case TR_SEG_HEAD: /* the final norm (replicated) and, untied, the LM head rows */
        for (int c = 0; c < s->C; c++) fn(ctx, TS_REF_FINAL_NORM, 0, (size_t)c, &seg[c], 1);
        if (!s->m->tied_embeddings) map_vocab_rows(s, seg + s->C, TS_REF_LM_HEAD, fn, ctx);
        return;
    }
}

/* One thread's share of a segment's initial values: the elements map_segment visits
 * [lo, hi)-th (the visit order is fixed, so the split changes no value). */
typedef struct {
    const tr_shape *s;
    tr_seg_kind kind;
    int global;
    uint64_t seed;
    float *host;
    size_t n; /* tr_seg_size */
} seg_fill;

typedef struct {
    uint64_t seed;
    size_t next, lo, hi;
} init_range_ctx;

static void init_element(void *ctx, ts_ref_kind kind, int layer, size_t gi, float *elem, int replicated) {
    (void)replicated;
    init_range_ctx *c = ctx;
    size_t i = c->next++;
    if (i >= c->lo && i < c->hi) *elem = ts_ref_init_value(c->seed, layer, kind, (int64_t)gi);
}

static void init_range(void *ctx, size_t lo, size_t hi) {
    const seg_fill *f = ctx;
    init_range_ctx c = {f->seed, 0, lo, hi == f->n ? SIZE_MAX : hi}; /* the last range takes any rest */
    map_segment(f->s, f->kind, f->global, f->host, init_element, &c);
}

void tr_seg_init_values_on(const tr_shape *s, tr_seg_kind kind, int global, uint64_t seed, float *host, int threads) {
    seg_fill f = {s, kind, global, seed, host, tr_seg_size(s, kind, global)};
    ts_par_ranges(f.n, threads, init_range, &f);
}

void tr_seg_init_values(const tr_shape *s, tr_seg_kind kind, int global, uint64_t seed, float *host) {
    tr_seg_init_values_on(s, kind, global, seed, host, ts_par_threads());
}

/* Offset of tensor (layer, kind) in the reference's flat parameters. */
static size_t ref_offset(const ts_model *m, int layer, ts_ref_kind kind) {
    size_t off = 0;
    int64_t shape[3];
    for (int k = TS_REF_EMBED; k <= TS_REF_LM_HEAD; k++) {
        if (layer == 0 && k == (int)kind && kind <= TS_REF_LM_HEAD) return off;
        if (k == TS_REF_LM_HEAD && m->tied_embeddings) continue;
        int dims = ts_ref_tensor_shape(m, 0, (ts_ref_kind)k, shape);
        size_t n = dims ? 1 : 0;
        for (int d = 0; d < dims; d++) n *= (size_t)shape[d];
        off += n;
    }
    for (int l = 0; l < m->layers; l++)
        for (int k = TS_REF_ATTN_NORM; k < TS_REF_KIND_COUNT; k++) {
            if (l == layer && k == (int)kind) return off;
            int dims = ts_ref_tensor_shape(m, l, (ts_ref_kind)k, shape);
            size_t n = dims ? 1 : 0;
            for (int d = 0; d < dims; d++) n *= (size_t)shape[d];
            off += n;
        }
    return off;
}

typedef struct {
    const ts_model *m;
    float *full;
    int tp_i;
} place_ctx;

static void place_element(void *ctx, ts_ref_kind kind, int layer, size_t gi, float *elem, int replicated) {
    place_ctx *a = ctx;
    if (replicated && a->tp_i != 0) return;
    if (kind == TS_REF_LM_HEAD && a->m->tied_embeddings) return;
    a->full[ref_offset(a->m, layer, kind) + gi] = *elem;
}

void tr_seg_place(const tr_shape *s, tr_seg_kind kind, int global, float *host, float *full) {
    place_ctx a = {s->m, full, s->tp_i};
    map_segment(s, kind, global, host, place_element, &a);
}
