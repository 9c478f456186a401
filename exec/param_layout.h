/* Where this rank's parameters sit: a layer's tensors carved out of its two segment buffers (the
 * non-expert tensors, reduced over DP×CP, and the local experts, reduced over EP's data-parallel
 * group), the embedding and head segments, and every element's place in the full model of
 * exec/reference.h. The one mapping from the shard to the model, used to initialise the
 * parameters and to assemble them again; it holds no memory. */
#ifndef TS_PARAM_LAYOUT_H
#define TS_PARAM_LAYOUT_H

#include <stdint.h>

#include "exec/trainer_shape.h"

/* One layer's tensors on this rank (parameters or gradients). */
typedef struct {
    float *attn_norm; /* (C) */
    float *qkv;       /* (QKVr, C): local query heads, then their keys, then values */
    float *attn_out;  /* (C, Qr) */
    float *mlp_norm;  /* (C) */
    float *router;    /* (E, C), MoE layers */
    float *gate, *up; /* (El, Fr or Fer, C); a dense layer is El = 1 */
    float *down;      /* (El, C, Fr or Fer) */
} tr_layer;

/* The embedding's and head's tensors on this rank (parameters or gradients; NULL where the
 * stage has none). */
typedef struct {
    float *embed;      /* (Vr, C) this rank's vocabulary rows */
    float *final_norm; /* (C) */
    float *lm_head;    /* (Vr, C); with tied embeddings, the embedding */
} tr_edge;

/* What a segment holds: a layer's non-expert tensors, its local experts, the embedding rows of
 * this rank's vocabulary slice, or the head (the final norm, then the untied LM head's rows). */
typedef enum { TR_SEG_SHARED, TR_SEG_EXPERTS, TR_SEG_EMBED, TR_SEG_HEAD } tr_seg_kind;

/* Elements of a segment of kind `kind` (of global layer `global` for the first two; 0 for a dense
 * layer's experts). */
size_t tr_seg_size(const tr_shape *s, tr_seg_kind kind, int global);

/* Views of global layer `global`'s tensors in its segments' buffers (either may be NULL: its
 * views stay NULL, except a dense layer's MLP, which sits in the shared segment). */
tr_layer tr_layer_views(const tr_shape *s, int global, float *shared, float *experts);

/* Views of the embedding and head tensors in their segments' buffers (either may be NULL). */
tr_edge tr_edge_views(const tr_shape *s, float *embed, float *head);

/* A segment's initial values (exec/reference.h's generator) written into `host`, its whole
 * tr_seg_size floats, on ts_par_threads() threads (common/parallel.h); the same values on any
 * number of `threads` (_on). */
void tr_seg_init_values(const tr_shape *s, tr_seg_kind kind, int global, uint64_t seed, float *host);
void tr_seg_init_values_on(const tr_shape *s, tr_seg_kind kind, int global, uint64_t seed, float *host, int threads);

/* A segment's values `host` put in their places in `full`, the model's parameters in
 * exec/reference.h's layout; tensors every TP rank holds whole are put by TP rank 0 only, so that
 * summed over the ranks every element is written once. */
void tr_seg_place(const tr_shape *s, tr_seg_kind kind, int global, float *host, float *full);

#endif
