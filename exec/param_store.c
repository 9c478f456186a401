/* The parameter store: segments, their initial values, ZeRO reductions and gathers, and the
 * assembly of the full parameters (see param_store.h). */
#include <stdlib.h>

#include "exec/param_store.h"
#include "program/schedule.h"

/* ---- Segments ---------------------------------------------------------------------------- */

static ts_status segment_init(tr_store *st, tr_segment *s, size_t n, int group, int zero) {
    s->n = n;
    s->group = group;
    s->members = ts_comm_size(st->comm[group]);
    s->index = ts_comm_rank(st->comm[group]);
    /* Alone in its group, a segment has nothing to shard (and the program no ops to reduce it). */
    s->zero = s->members == 1 ? 0 : zero;
    zero = s->zero;
    s->part = (n + (size_t)s->members - 1) / (size_t)s->members;
    size_t padded = s->part * (size_t)s->members;
    if (n == 0) return TS_OK;
    const ts_backend *be = st->be;
    if (zero >= 3) TS_CHECK(tr_alloc_floats(be, st->tally, TR_MEM_WEIGHTS, s->part, &s->param_shard));
    else TS_CHECK(tr_alloc_floats(be, st->tally, TR_MEM_WEIGHTS, padded, &s->param));
    if (zero <= 1) {
        TS_CHECK(tr_alloc_floats(be, st->tally, TR_MEM_GRADS, padded, &s->grad));
        s->owns_grad = 1;
    }
    /* ZeRO-1 reduce-scatters in place: the shard is the start of the gradient buffer, as
     * Megatron's distributed optimizer reuses its gradient buffer. */
    if (zero == 1) s->grad_shard = s->grad;
    if (zero >= 2) TS_CHECK(tr_alloc_floats(be, st->tally, TR_MEM_GRADS, s->part, &s->grad_shard));
    size_t state = zero >= 1 ? s->part : n;
    TS_CHECK(tr_alloc_floats(be, st->tally, TR_MEM_OPTIMIZER, state, &s->adam_m));
    TS_CHECK(tr_alloc_floats(be, st->tally, TR_MEM_OPTIMIZER, state, &s->adam_v));
    return TS_OK;
}

static void segment_free(const ts_backend *be, tr_segment *s) {
    be->free(s->param);
    if (s->owns_grad) be->free(s->grad);
    be->free(s->param_shard);
    if (s->grad_shard != s->grad) be->free(s->grad_shard);
    be->free(s->adam_m);
    be->free(s->adam_v);
}

/* What segment i holds, and of which global layer (0 for the embedding and head). */
static tr_seg_kind seg_kind(const tr_store *st, int i, int *global) {
    *global = 0;
    if (i == st->seg_embed) return TR_SEG_EMBED;
    if (i == st->seg_head) return TR_SEG_HEAD;
    *global = st->s->global_of[i / 2];
    return i % 2 ? TR_SEG_EXPERTS : TR_SEG_SHARED;
}

/* Initial values are written on the host from the full layout, then copied into the segment's
 * backend memory (ZeRO-3: each member its shard only; a segment alone in its group, zero forced
 * to 0, keeps its parameters whole). */
static ts_status segment_init_values(tr_store *st, int i, uint64_t seed) {
    tr_segment *s = &st->seg[i];
    int global;
    tr_seg_kind kind = seg_kind(st, i, &global);
    float *full = calloc(s->part * s->members + 1, sizeof(float));
    if (full == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory initialising parameter segment %d", i);
    tr_seg_init_values(st->s, kind, global, seed, full);
    ts_status res;
    if (s->zero >= 3) res = st->k->to_device(s->param_shard, full + s->index * s->part, s->part * sizeof(float));
    else res = st->k->to_device(s->param, full, s->n * sizeof(float));
    free(full);
    return res;
}

/* ZeRO-2/3: the layers' gradients in two one-layer buffers of `biggest` floats, alternate layers
 * in alternate buffers. Counted as buffers, as the planner prices them for CPU ranks
 * (planner/memory_exec_buffers.h): the gradients are the shard each rank keeps. */
static ts_status share_layer_grads(tr_store *st, size_t biggest) {
    int n_local = st->s->n_local;
    for (int b = 0; b < 2 && b < n_local; b++)
        TS_CHECK(tr_alloc_floats(st->be, st->tally, TR_MEM_BUFFERS, biggest, &st->grad_layer[b]));
    for (int j = 0; j < n_local; j++) {
        tr_segment *sh = &st->seg[2 * j], *ex = &st->seg[2 * j + 1];
        if (sh->zero >= 2) sh->grad = st->grad_layer[j % 2];
        if (ex->zero >= 2) ex->grad = st->grad_layer[j % 2] + sh->part * sh->members;
    }
    return TS_OK;
}

/* Two segments per layer, then the embedding and the head where a chunk of the stage opens or
 * closes a pipeline (stage 0 and the last; under DualPipe both, each holding a copy). Returns the
 * largest pair of a layer's segments, padded, in `biggest`. */
static ts_status segments_init(tr_store *st, int zero, size_t *biggest) {
    const tr_shape *s = st->s;
    *biggest = 0;
    for (int j = 0; j < s->n_local; j++) {
        int g = s->global_of[j];
        tr_segment *sh = &st->seg[2 * j], *ex = &st->seg[2 * j + 1];
        TS_CHECK(segment_init(st, sh, tr_seg_size(s, TR_SEG_SHARED, g), TS_GROUP_DPCP, zero));
        TS_CHECK(segment_init(st, ex, tr_seg_size(s, TR_SEG_EXPERTS, g), TS_GROUP_EDP, zero));
        size_t both = sh->part * sh->members + ex->part * ex->members;
        if (both > *biggest) *biggest = both;
    }
    int edge_zero = zero > 1 ? 1 : zero;
    if (ts_stage_opens(s->l, s->stage)) {
        st->seg_embed = 2 * s->n_local;
        TS_CHECK(segment_init(st, &st->seg[st->seg_embed], tr_seg_size(s, TR_SEG_EMBED, 0), TS_GROUP_DPCP,
                              edge_zero));
    }
    if (ts_stage_closes(s->l, s->stage)) {
        st->seg_head = 2 * s->n_local + 1;
        TS_CHECK(segment_init(st, &st->seg[st->seg_head], tr_seg_size(s, TR_SEG_HEAD, 0), TS_GROUP_DPCP,
                              edge_zero));
    }
    return TS_OK;
}

ts_status tr_store_init(tr_store *st, const tr_shape *s, int zero, const ts_backend *be, ts_comm *const *comm,
                        tr_tally *tally, uint64_t seed) {
    *st = (tr_store){.s = s, .be = be, .k = be->kernels, .comm = comm, .tally = tally, .seg_embed = -1,
                     .seg_head = -1};
    st->n_seg = 2 * s->n_local + 2;
    st->seg = calloc((size_t)st->n_seg, sizeof *st->seg);
    st->grad_buffer = malloc((size_t)st->n_seg * sizeof *st->grad_buffer);
    if (!st->seg || !st->grad_buffer)
        return TS_FAIL(TS_ERR_NOMEM, "out of memory for %d parameter segments", st->n_seg);
    size_t biggest;
    TS_CHECK(segments_init(st, zero, &biggest));
    if (zero >= 2 && biggest) TS_CHECK(share_layer_grads(st, biggest));
    for (int i = 0; i < st->n_seg; i++)
        if (st->seg[i].n) TS_CHECK(segment_init_values(st, i, seed));
    size_t max_part = 1;
    for (int i = 0; i < st->n_seg; i++) { /* layer segments under ZeRO-2/3: grad_layer[j % 2] */
        int layered = i < 2 * s->n_local && st->grad_layer[0] && st->seg[i].zero >= 2;
        st->grad_buffer[i] = (int8_t)(layered ? i / 2 % 2 : -1);
        if (st->seg[i].part > max_part) max_part = st->seg[i].part;
    }
    return tr_alloc_floats(be, tally, TR_MEM_BUFFERS, max_part, &st->shard_tmp);
}

void tr_store_free(tr_store *st) {
    if (st->be == NULL) return;
    for (int i = 0; st->seg && i < st->n_seg; i++) segment_free(st->be, &st->seg[i]);
    st->be->free(st->grad_layer[0]);
    st->be->free(st->grad_layer[1]);
    st->be->free(st->shard_tmp);
    free(st->seg);
    free(st->grad_buffer);
    *st = (tr_store){0};
}

tr_layer tr_store_params(const tr_store *st, int local) {
    return tr_layer_views(st->s, st->s->global_of[local], st->seg[2 * local].param, st->seg[2 * local + 1].param);
}

tr_layer tr_store_grads(const tr_store *st, int local) {
    return tr_layer_views(st->s, st->s->global_of[local], st->seg[2 * local].grad, st->seg[2 * local + 1].grad);
}

tr_edge tr_store_edge_params(const tr_store *st) {
    return tr_edge_views(st->s, st->seg_embed >= 0 ? st->seg[st->seg_embed].param : NULL,
                         st->seg_head >= 0 ? st->seg[st->seg_head].param : NULL);
}

tr_edge tr_store_edge_grads(const tr_store *st) {
    return tr_edge_views(st->s, st->seg_embed >= 0 ? st->seg[st->seg_embed].grad : NULL,
                         st->seg_head >= 0 ? st->seg[st->seg_head].grad : NULL);
}

ts_status tr_store_zero_grads(tr_store *st) {
    for (int i = 0; i < st->n_seg; i++) {
        tr_segment *s = &st->seg[i];
        if (s->n == 0) continue;
        if (s->owns_grad) TS_CHECK(st->k->zero(s->grad, s->part * (size_t)s->members * sizeof(float)));
        if (s->grad_shard && s->grad_shard != s->grad) TS_CHECK(st->k->zero(s->grad_shard, s->part * sizeof(float)));
    }
    return TS_OK;
}

/* ---- ZeRO: reductions and gathers ----------------------------------------------------------- */

ts_status tr_store_reduce(tr_store *st, int i) {
    tr_segment *s = &st->seg[i];
    if (s->n == 0) return TS_OK;
    ts_comm *c = st->comm[s->group];
    if (s->zero == 0) return st->be->all_reduce(c, s->grad, s->grad, s->n);
    if (s->zero == 1) return st->be->reduce_scatter(c, s->grad, s->grad, s->part);
    TS_CHECK(st->be->reduce_scatter(c, s->grad, st->shard_tmp, s->part));
    TS_CHECK(st->k->add(s->grad_shard, s->grad_shard, st->shard_tmp, s->part));
    return st->k->zero(s->grad, s->part * (size_t)s->members * sizeof(float));
}

ts_status tr_store_gather(tr_store *st, int i) {
    tr_segment *s = &st->seg[i];
    if (s->n == 0 || s->zero == 0) return TS_OK;
    return st->be->all_gather(st->comm[s->group], s->param + (size_t)s->index * s->part, s->param, s->part);
}

/* ZeRO-3: segment i's gathered copy released (none held: nothing to do). */
static void release_copy(tr_store *st, int i) {
    tr_segment *s = &st->seg[i];
    if (s->zero < 3 || s->param == NULL) return;
    tr_tally_add(st->tally, TR_MEM_BUFFERS, -((double)s->part * s->members * sizeof(float)));
    st->be->free(s->param);
    s->param = NULL;
}

void tr_store_release_copies(tr_store *st) {
    for (int i = 0; i < st->n_seg; i++) release_copy(st, i);
}

ts_status tr_store_gather_copy(tr_store *st, const int32_t *segs, int n) {
    if (n < 1) return TS_FAIL(TS_ERR_INPUT, "a ZeRO-3 parameter gather lists no segment");
    for (int k = 1; k < n; k++) release_copy(st, segs[k]);
    tr_segment *s = &st->seg[segs[0]];
    if (s->n == 0 || s->zero < 3) return TS_OK;
    if (s->param != NULL) /* the program's list names a held copy of its own: a builder's bug */
        return TS_FAIL(TS_ERR_INPUT, "ZeRO-3 gather of segment %d while a copy of it is held", (int)segs[0]);
    /* Buffers, as the planner counts ZeRO-3's gathered layers (planner/stages.c, and for CPU
     * ranks planner/memory_exec_buffers.h): the weights are the shard each rank keeps. */
    TS_CHECK(tr_alloc_floats(st->be, st->tally, TR_MEM_BUFFERS, s->part * s->members, &s->param));
    return st->be->all_gather(st->comm[s->group], s->param_shard, s->param, s->part);
}

/* ---- Assembling the parameters --------------------------------------------------------------- */

/* Segment i's whole parameters put in `full` by one member of its group, from a host copy. */
int tr_store_is_copy(const tr_store *st, int i) {
    const tr_shape *s = st->s;
    if (i == st->seg_embed) return ts_chunk_stage(s->l, 0) != s->stage;
    if (i == st->seg_head) return ts_chunk_stage(s->l, ts_model_chunks(s->l) - 1) != s->stage;
    return ts_chunk_is_copy(s->l, s->stage, s->chunk_of[i / 2]);
}

static ts_status assemble_segment(tr_store *st, int i, float *full) {
    tr_segment *s = &st->seg[i];
    ts_status res = TS_OK;
    size_t len = s->part * s->members;
    float *whole = s->param, *gathered = NULL, *host = NULL;
    if (s->zero >= 3) {
        TS_CHECK_GOTO(st->be->alloc(len * sizeof(float), (void **)&gathered), res, exit);
        TS_CHECK_GOTO(st->be->all_gather(st->comm[s->group], s->param_shard, gathered, s->part), res, exit);
        whole = gathered;
    } else {
        TS_CHECK_GOTO(tr_store_gather(st, i), res, exit);
    }
    if (s->index == 0 && !tr_store_is_copy(st, i)) {
        host = malloc(len * sizeof *host);
        TS_ALLOC_GOTO(host, res, exit);
        TS_CHECK_GOTO(st->k->to_host(host, whole, len * sizeof *host), res, exit);
        int global;
        tr_seg_kind kind = seg_kind(st, i, &global);
        tr_seg_place(st->s, kind, global, host, full);
    }
exit:
    free(host);
    st->be->free(gathered);
    return res;
}

ts_status tr_store_assemble(tr_store *st, ts_comm *world, size_t n, float *out) {
    ts_status res = TS_OK;
    float *full = calloc(n, sizeof *full), *sum = NULL;
    if (!full) return TS_FAIL(TS_ERR_NOMEM, "out of memory assembling %zu parameters", n);
    for (int i = 0; i < st->n_seg; i++)
        if (st->seg[i].n) TS_CHECK_GOTO(assemble_segment(st, i, full), res, exit);
    /* Summed over the ranks in backend memory: the backend's collectives take no host buffers. */
    TS_CHECK_GOTO(st->be->alloc(n * sizeof *sum, (void **)&sum), res, exit);
    TS_CHECK_GOTO(st->k->to_device(sum, full, n * sizeof *sum), res, exit);
    TS_CHECK_GOTO(st->be->all_reduce(world, sum, sum, n), res, exit);
    if (out) TS_CHECK_GOTO(st->k->to_host(out, sum, n * sizeof *out), res, exit);
exit:
    free(full);
    st->be->free(sum);
    return res;
}
