/* The parameter store: this rank's weights, gradients and AdamW moments, in segments reduced and
 * sharded together (exec/param_layout.h carves them into tensors), and the ZeRO sharding of
 * them: the gradient reductions, the parameter gathers and which shard each member updates.
 *
 * Segments: [2·j] the non-expert tensors of local layer j (reduced over DP×CP), [2·j+1] its local
 * experts (over EP's data-parallel group; empty for a dense layer), then the embedding (stage 0)
 * and the head (last stage), each over DP×CP. ZeRO >= 1 gives each member `part` elements of the
 * optimizer state; ZeRO >= 2 of the gradients; ZeRO-3 of the parameters. The embedding and head
 * keep whole gradients and parameters (ZeRO-1 at most): no per-micro-batch op reduces them.
 *
 * Memory. Tensors are the backend's memory (be->alloc), counted in the tally under weights, grads
 * and optimizer (the reduce-scatter's landing buffer under buffers). The store owns all of it;
 * tr_store_free releases it. */
#ifndef TS_PARAM_STORE_H
#define TS_PARAM_STORE_H

#include "exec/kernel_table.h"
#include "exec/param_layout.h"

typedef struct {
    size_t n, part;      /* elements; per-member share (n padded to a multiple of members) */
    int group;           /* ts_group reduced over */
    int members, index;  /* group size and this rank's place in it */
    int zero;            /* the ZeRO stage that applies to this segment (0 when alone in its group) */
    float *param;        /* (n), or under ZeRO-3 the last gathered copy (NULL when released) */
    float *grad;         /* (n); under ZeRO-2/3 a one-layer buffer shared by all segments */
    int owns_grad;       /* grad is this segment's own allocation */
    float *param_shard;  /* (part) ZeRO-3 */
    float *grad_shard;   /* (part) ZeRO >= 1 */
    float *adam_m, *adam_v; /* (part) under ZeRO >= 1, else (n) */
} tr_segment;

typedef struct {
    const tr_shape *s;
    const ts_backend *be;
    const ts_kernels *k;      /* be->kernels */
    ts_comm *const *comm;     /* the runtime's group communicators, by ts_group */
    tr_tally *tally;

    int n_seg;               /* 2·n_local + 2 */
    tr_segment *seg;
    int seg_embed, seg_head; /* -1 when not on this stage */
    float *grad_layer[2];    /* ZeRO-2/3: one layer's gradients (the largest segment pair) each;
                                local layer j's in grad_layer[j % 2], so that on a GPU layer j's
                                reduction overlaps layer j - 1's backward (exec/op_streams.h) */
    int8_t *grad_buffer;     /* (n_seg) which grad_layer a segment's gradients are in; -1: its own */
    float *shard_tmp;        /* (largest part) a reduce-scatter's result before it is added */
} tr_store;

/* Allocates this rank's segments for shape `s` under ZeRO stage `zero` and writes the initial
 * parameters from exec/reference.h's generator with `seed` (ZeRO-3: each member its shard).
 * `s`, `be`, `comm` and `tally` must outlive the store. tr_store_free releases it (also after a
 * failure). */
ts_status tr_store_init(tr_store *st, const tr_shape *s, int zero, const ts_backend *be, ts_comm *const *comm,
                        tr_tally *tally, uint64_t seed);
void tr_store_free(tr_store *st);

/* The views of local layer j's parameters and gradients. */
tr_layer tr_store_params(const tr_store *st, int local);
tr_layer tr_store_grads(const tr_store *st, int local);

/* The views of the embedding's and head's parameters and gradients (NULL off their stages). */
tr_edge tr_store_edge_params(const tr_store *st);
tr_edge tr_store_edge_grads(const tr_store *st);

/* Zeroes every gradient and gradient shard (the start of a step). */
ts_status tr_store_zero_grads(tr_store *st);

/* Sums segment i's gradients over its group: all-reduce, or under ZeRO >= 1 reduce-scatter into
 * (ZeRO >= 2: added to) this member's shard. */
ts_status tr_store_reduce(tr_store *st, int i);
/* ZeRO-1/2: the members' updated shards of segment i back into its whole parameters. */
ts_status tr_store_gather(tr_store *st, int i);
/* ZeRO-3: the gathered copies a parameter gather op releases, then its segment's whole
 * parameters gathered into a fresh buffer: `segs` is the op's list (program/data.h), its own
 * segment first, then those whose copies go; a copy of its own held before goes too. */
ts_status tr_store_gather_copy(tr_store *st, const int32_t *segs, int n);
/* ZeRO-3: every gathered copy released (stale once the optimizer updated the shards; the next
 * step gathers afresh, as its program lists). */
void tr_store_release_copies(tr_store *st);

/* Whether segment i is a second copy (DualPipe keeps two of every chunk, program/schedule.h
 * ts_chunk_is_copy; the embedding and head of the reverse direction): equal to the first, left
 * out of tr_store_assemble. */
int tr_store_is_copy(const tr_store *st, int i);
/* The full parameters in exec/reference.h's layout (`n` floats) summed over the world into `out`
 * on every rank that passes one (NULL: none); a collective call over `world`. */
ts_status tr_store_assemble(tr_store *st, ts_comm *world, size_t n, float *out);

#endif
