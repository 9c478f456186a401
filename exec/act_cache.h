/* The activation cache: what the forward of each layer (and of the head) keeps for one
 * micro-batch until its backward, its recompute and its weight gradients are done with it.
 * Entries are made on first use (the forward, or a recompute that rebuilds them) and released by
 * the layer's last weight-gradient op.
 *
 * Memory. Each entry is one backend allocation carved into the tensors below (counted in the
 * tally under activations), and one host allocation: the struct, then the MoE counts the host
 * plans the expert dispatch with. The cache owns both; tr_cache_free releases what is left. */
#ifndef TS_ACT_CACHE_H
#define TS_ACT_CACHE_H

#include "exec/trainer_shape.h"

/* Activations of one layer (or the head) for one micro-batch. */
typedef struct {
    size_t bytes;             /* of both allocations */
    void *dev;
    float *x;                 /* (Tl, C) layer input */
    float *ln1, *rstd1;       /* (T, C), (Tl) */
    float *qkv;               /* (T, QKVr) after rotary */
    float *att, *lse;         /* (T, Qr), (T, Hr) */
    float *mid;               /* (Tl, C) */
    float *ln2, *rstd2;       /* (T, C), (Tl); a MoE layer (Tm, C) */
    float *gate, *up, *act;   /* (T, Fr) dense; MoE (rows, Fer) */
    float *out;               /* (Tl, C) */
    /* MoE */
    float *logits, *probs, *weight;  /* (Tm, E), (Tm, E), (Tm, K) */
    int *expert, *slot, *slot_token; /* device: (Tm, K), (Tm, K), (Tm·K) */
    int *offset;              /* host: (E + 1) */
    float *xe, *ye;           /* (Tm·K, C) rows in slot order (by expert), at the source */
    float *xr, *yr;           /* (rows, C) rows this rank's experts process, by local expert */
    int rows;
    int *send_rows, *recv_rows; /* host: (ep) rows to / from each EP peer */
    int *src_expert_rows;     /* host: (ep, El) rows each peer sent for each of our experts */
    /* head (last chunk) */
    float *xf;                /* (Tl, C) the final norm's input */
    float *lnf, *rstdf, *logits_v, *ce_max, *ce_sum, *ce_tgt; /* (T, C), (Tl), (T, Vr), (T)... */
} tr_acts;

typedef struct {
    const tr_shape *s;
    const ts_backend *be;
    tr_tally *tally;
    tr_acts ***acts; /* (n_local + 1) × (m_mb); [n_local] the head */
} tr_cache;

/* An empty cache for shape `s`; `s`, `be` and `tally` must outlive it. */
ts_status tr_cache_init(tr_cache *c, const tr_shape *s, const ts_backend *be, tr_tally *tally);
void tr_cache_free(tr_cache *c);

/* The entry of local layer `local` (n_local: the head) for micro-batch `mb`, made if absent. */
ts_status tr_cache_get(tr_cache *c, int local, int mb, tr_acts **out);
/* Frees that entry (none: nothing happens). */
void tr_cache_release(tr_cache *c, int local, int mb);

#endif
