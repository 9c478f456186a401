/* The buffers of a plan for CPU ranks, as the CPU executor holds them (see memory_exec_buffers.h). */
#include "planner/memory_exec_buffers.h"

#include <stdlib.h>

#include "program/schedule.h"

void ts_exec_work_floats(const ts_exec_dims *d, size_t ring_rows, size_t out[TS_EXEC_WORK_TENSORS]) {
    size_t T = d->T, C = d->C, KVD = (d->QKVr - d->Qr) / 2;
    size_t TK = T * (d->K > 0 ? d->K : 1), R = d->K > 0 ? TK * d->ep : T; /* rows an expert set gets */
    size_t Fmax = d->Fr > d->Fer ? d->Fr : d->Fer, rows = R > T ? R : T;
    size_t ring = ring_rows > 0 ? T * 4 * KVD : 0; /* a member's keys and values, then their gradients */
    /* cur, dcur, dmid, dfull, dln, proj, rows; datt, dqkv; ring[2], ring_out, ring_lse; dact, dgate,
     * dup; dxe, dye, dxr, dyr, dweight, dlogits_r; dlogits, scratch, norm_grad; router_grad, the
     * router's weight gradient before its TP sum with the experts apart from TP, where the MoE
     * block routes Tm = Tl < T rows (exec/op_ctx.h) */
    const size_t sizes[TS_EXEC_WORK_TENSORS] = {
        T * C, T * C, T * C, T * C, T * C, T * C, T * C,
        T * d->Qr, T * d->QKVr,
        ring, ring, ring_rows * d->Qr, ring_rows * d->Hr,
        rows * Fmax, rows * Fmax, rows * Fmax,
        TK * C, TK * C, rows * C, rows * C, TK, T * (d->E > 0 ? d->E : 1),
        T * d->Vr, T, C, d->Tm < T ? d->E * C : 0};
    for (int i = 0; i < TS_EXEC_WORK_TENSORS; i++) out[i] = sizes[i] ? sizes[i] : 1;
}

size_t ts_exec_seg_floats(const ts_exec_dims *d, ts_exec_seg kind, int moe, int tied) {
    size_t C = d->C;
    switch (kind) {
    case TS_EXEC_SEG_SHARED: /* attention norm, QKV, output projection, MLP norm; router or MLP */
        return C + d->QKVr * C + C * d->Qr + C + (moe ? d->E * C : 3 * d->Fr * C);
    case TS_EXEC_SEG_EXPERTS: return moe ? 3 * d->El * d->Fer * C : 0;
    case TS_EXEC_SEG_EMBED: return d->Vr * C;
    case TS_EXEC_SEG_HEAD: return C + (tied ? 0 : d->Vr * C);
    }
    return 0;
}

/* A segment's elements, its per-member share and the ZeRO stage that applies to it
 * (exec/param_store.c segment_init: none when alone in its group). */
typedef struct {
    size_t n, part, padded;
    int zero;
} seg_size;

static seg_size seg_sized(size_t n, int members, int zero) {
    seg_size s = {.n = n, .zero = members == 1 ? 0 : zero};
    s.part = (n + (size_t)members - 1) / (size_t)members;
    s.padded = s.part * (size_t)members;
    return s;
}

/* One stage's segments and the walk's state. Layers are indexed by global layer; only those of
 * the stage (seg->local_of >= 0) are sized. */
typedef struct {
    const ts_stage_program *sp;
    const ts_layout *l;
    const ts_stage_segments *seg;
    int stage;
    seg_size *sh, *ex; /* (layers) */
    seg_size embed, head;
    double fixed;      /* bytes held throughout: workspace, landing shard, one-layer gradients */
    double z3, sends;  /* bytes of ZeRO-3's gathered copies and of the step's send copies */
    double peak;
    double *copy;      /* (n_seg) ZeRO-3: bytes of each segment's gathered copy, 0 when none */
    int *layer_of;     /* (n_local) the global layer of each local one */
} stage_bufs;

static ts_status bufs_size(stage_bufs *b, const ts_problem *pb, const ts_exec_dims *d) {
    const ts_layout *l = b->l;
    int layers = b->seg->layers, dpcp = l->dp * l->cp, edp = dpcp * l->tp / (ts_layout_etp(l) * l->ep);
    int tied = pb->model.tied_embeddings, edge_zero = l->zero > 1 ? 1 : l->zero;
    b->sh = calloc((size_t)layers + 1, sizeof *b->sh);
    b->ex = calloc((size_t)layers + 1, sizeof *b->ex);
    b->copy = calloc((size_t)b->seg->n_seg, sizeof *b->copy);
    b->layer_of = calloc((size_t)b->seg->n_local + 1, sizeof *b->layer_of);
    if (!b->sh || !b->ex || !b->copy || !b->layer_of)
        return TS_FAIL(TS_ERR_NOMEM, "out of memory sizing stage %d's segments", b->stage);
    size_t max_part = 1, biggest = 0;
    for (int g = 0; g < layers; g++) {
        if (b->seg->local_of[g] < 0) continue;
        b->layer_of[b->seg->local_of[g]] = g;
        int moe = ts_model_layer_is_moe(&pb->model, g);
        b->sh[g] = seg_sized(ts_exec_seg_floats(d, TS_EXEC_SEG_SHARED, moe, tied), dpcp, l->zero);
        b->ex[g] = seg_sized(ts_exec_seg_floats(d, TS_EXEC_SEG_EXPERTS, moe, tied), edp, l->zero);
        if (b->sh[g].part > max_part) max_part = b->sh[g].part;
        if (b->ex[g].part > max_part) max_part = b->ex[g].part;
        if (b->sh[g].padded + b->ex[g].padded > biggest) biggest = b->sh[g].padded + b->ex[g].padded;
    }
    if (ts_stage_opens(l, b->stage))
        b->embed = seg_sized(ts_exec_seg_floats(d, TS_EXEC_SEG_EMBED, 0, tied), dpcp, edge_zero);
    if (ts_stage_closes(l, b->stage))
        b->head = seg_sized(ts_exec_seg_floats(d, TS_EXEC_SEG_HEAD, 0, tied), dpcp, edge_zero);
    if (b->embed.part > max_part) max_part = b->embed.part;
    if (b->head.part > max_part) max_part = b->head.part;
    size_t work[TS_EXEC_WORK_TENSORS], floats = max_part; /* the reduce-scatter's landing shard */
    ts_exec_work_floats(d, l->cp > 1 ? (size_t)(pb->train.seq / l->cp) : 0, work);
    for (int i = 0; i < TS_EXEC_WORK_TENSORS; i++) floats += work[i];
    int n_local = b->seg->n_local;
    if (l->zero >= 2 && biggest > 0) floats += (size_t)(n_local < 2 ? n_local : 2) * biggest;
    b->fixed = 4.0 * (double)floats; /* fp32 throughout the executor */
    return TS_OK;
}

/* ZeRO-3: the bytes of segment i's gathered copy (exec/param_store.c tr_store_gather_copy),
 * 0 for a segment it does not shard. */
static double copy_bytes(const stage_bufs *b, int32_t i) {
    if (i < 0 || i >= 2 * b->seg->n_local) return 0;
    int g = b->layer_of[i / 2];
    const seg_size *s = i % 2 ? &b->ex[g] : &b->sh[g];
    return s->n > 0 && s->zero >= 3 ? 4.0 * (double)s->padded : 0;
}

static void release_copy(stage_bufs *b, int32_t i) {
    if (i < 0 || i >= b->seg->n_seg) return;
    b->z3 -= b->copy[i];
    b->copy[i] = 0;
}

/* ZeRO-3's gather op i: the copies its list names after its own go, its own comes
 * (program/data.h). */
static void gather_copy(stage_bufs *b, int i) {
    const int32_t *segs = b->sp->segs + b->sp->seg_start[i];
    int n = (int)(b->sp->seg_start[i + 1] - b->sp->seg_start[i]);
    if (n < 1) return;
    for (int k = 1; k < n; k++) release_copy(b, segs[k]);
    b->copy[segs[0]] = copy_bytes(b, segs[0]);
    b->z3 += b->copy[segs[0]];
}

static void count_segment(double n, double *all, double *largest) {
    *all += n;
    if (n > *largest) *largest = n;
}

/* DualPipe's mirror op (exec/ops_comm.c tr_mirror_op): the segments of the local chunk running
 * model chunk `chunk`; their elements in all, and the largest one's in *largest. */
static double mirror_floats(const stage_bufs *b, int chunk, double *largest) {
    const ts_layout *l = b->l;
    int model = ts_chunk_model(l, chunk), local = -1;
    for (int k = 0; k < l->vpp; k++)
        if (ts_chunk_model(l, ts_chunk_global(l, b->stage, k)) == model) local = k;
    double all = 0;
    *largest = 0;
    if (local < 0) return 0;
    for (int j = b->seg->chunk_lo[local]; j < b->seg->chunk_hi[local]; j++) {
        count_segment((double)b->sh[j].n, &all, largest);
        count_segment((double)b->ex[j].n, &all, largest);
    }
    int g = ts_chunk_global(l, b->stage, local);
    if (ts_chunk_opens(l, g)) count_segment((double)b->embed.n, &all, largest);
    if (ts_chunk_closes(l, g)) count_segment((double)b->head.n, &all, largest);
    return all;
}

/* Op i's change to the buffers; `extra`: bytes it holds only while it runs. */
static void walk_op(stage_bufs *b, int i, const ts_exec_dims *d, double *extra) {
    const ts_op *op = &b->sp->ops[i];
    *extra = 0;
    switch (op->part) {
    case TS_PART_PARAM_GATHER:
        if (op->phase != TS_PHASE_STEP) gather_copy(b, i);
        return;
    case TS_PART_OPTIMIZER: /* the gathered copies are stale: released (exec/ops_optim.c) */
        for (int k = 0; k < b->seg->n_seg; k++) release_copy(b, k);
        return;
    case TS_PART_PP_ACT:
    case TS_PART_PP_GRAD:
        if (op->kind == TS_OP_SEND) b->sends += 4.0 * (double)(d->Tl * d->C);
        return;
    case TS_PART_MIRROR_GRAD: {
        double largest, all = mirror_floats(b, op->chunk, &largest);
        if (op->kind == TS_OP_SEND) b->sends += 4.0 * all;
        else *extra = 4.0 * largest;
        return;
    }
    default: return;
    }
}

ts_status ts_memory_exec_buffers(const ts_program *prog, const ts_problem *pb, const ts_exec_dims *d, int stage,
                                 double *peak_bytes) {
    const ts_stage_program *sp = &prog->stages[stage];
    stage_bufs b = {.sp = sp, .l = &prog->layout, .seg = &sp->seg, .stage = stage};
    ts_status res = bufs_size(&b, pb, d);
    b.peak = b.fixed;
    for (int step = 0; step < 2 && res == TS_OK; step++) {
        for (int i = 0; i < sp->n_ops; i++) {
            double extra;
            walk_op(&b, i, d, &extra);
            double now = b.fixed + b.z3 + b.sends + extra;
            if (now > b.peak) b.peak = now;
        }
        b.sends = 0; /* waited for at the step's end (exec/trainer.c) */
    }
    free(b.sh);
    free(b.ex);
    free(b.copy);
    free(b.layer_of);
    TS_CHECK_CTX(res, "pricing stage %d's buffers", stage);
    *peak_bytes = b.peak;
    return TS_OK;
}
