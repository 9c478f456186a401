/* One layer's work, written once (see recipe.h).
 *
 * FLOPs. A GEMM of (m×k)·(k×n) is 2mnk. Per layer forward: QKV 2T·h·(a+2g)d/t, output projection
 * 2T·a·d·h/t, MLP 2T·h·f·(2 or 3)/t, attention core QKᵀ and AV 2·2·T·s·a·d/t (model FLOPs count
 * the full s² as Megatron-LM and NVIDIA's recipes do, Korthikanti et al. 2022 eq. 7; fused
 * attention computes the causal half, which its readers take). MLA (DeepSeek-V2 §2.1):
 * down-projections are replicated over TP, up-projections and the output projection are sharded
 * by heads; the core is approximated as MHA with q/k dim nope+rope and v dim v_dim (the
 * absorbed-weights trick is not modelled).
 *
 * MoE: the routed experts, their dispatch and combine and the token permutation are in
 * recipe_moe.c; the router and the shared experts (an MLP of shared_ffn·shared_experts over TP)
 * here.
 *
 * Element-wise HBM traffic: norms (2 × read + write) and the fused bias-dropout-add after
 * attention and MLP (2 × two reads + one write, plus a 1-byte mask each with dropout), on T·h,
 * SP-split; with these fused passes SP saves what Korthikanti et al. 2022 Table 4 measures
 * (0.5 ms of 7.7 ms). Rotary reads and writes q and k; the activation reads gate and up and
 * writes their product (gated) or reads and writes the hidden (GeLU).
 *
 * Local attention (sliding window, Mistral / Gemma 2 / gpt-oss; chunked, Llama 4) computes part of
 * the causal attention: of the s²/2 query-key pairs, a window of w < s leaves s·w − w²/2 (each
 * query its w predecessors), a chunk of w leaves s·w/2 (each query the earlier keys of its
 * chunk). The core's FLOPs, model FLOPs included, take that fraction averaged over the layers
 * (ts_local_attention_fraction: a stage holds local and full layers alike when they alternate,
 * as Gemma 2's do); the unfused kernels' s×s scores are computed whole, masked or not.
 *
 * Collectives. TP (Megatron, Shoeybi et al. 2019): a block closes with an all-reduce of T·h
 * (SP: reduce-scatter, opened by an all-gather; Korthikanti §4.2.2). CP: see below. EP: recipe_moe.c. Pipeline: a stage sends T·h/t activations (Megatron's
 * scatter/gather over TP). All activations are 16-bit.
 *
 * FP8 (Transformer Engine; Micikevicius et al. 2022 "FP8 formats for deep learning"; TE's
 * "Using FP8 with Transformer Engine" and its recipe API). The linear layers' GEMMs run FP8
 * (ts_gemm_dtype), attention stays BF16. Each FP8 GEMM casts its BF16 input X (m×k) to FP8 in
 * forward, and in backward the BF16 gradient of its output dY (m×n). Hopper's FP8 GEMMs take only
 * the TN layout, so each cast also writes the transposed FP8 copy the other GEMM of the backward
 * needs (Xᵀ for the weight gradient, dYᵀ likewise: TE's fused cast_transpose), with the amax
 * recorded in the same pass. On GPUs whose FP8 GEMMs take any layout (gpu.fp8_any_layout,
 * Blackwell) tensor-scaled FP8 writes no transposed copy (TE pytorch/csrc/quantizer.cpp:
 * create_transpose = columnwise_usage && !nvte_is_non_tn_fp8_gemm_supported()); block-scaled
 * recipes still write both, their scales running along different axes. Bytes per element cast:
 *   delayed (DelayedScaling; the scale from the amax history): read 2 + write 1 + 1 = 4 (3
 *     without the transpose);
 *   tensorwise (Float8CurrentScaling; the tensor's own amax first): 2 more to read it, 6 (5);
 *   mxfp8 (MXFP8BlockScaling; one E8M0 scale per 32 elements, row- and column-wise copies,
 *     no global amax): 2 + 2·(1 + 1/32) = 4.0625;
 *   blockwise (DeepSeek-V3 §3.3.2, TE Float8BlockScaling: the amax and an fp32 scale per 1×128
 *     tile, found in the pass that casts the tile, row- and column-wise copies): 2 + 2·(1 +
 *     4/128) = 4.0625, the weights' 128×128 blocks 2·(1 + 4/128²) per weight.
 * So a GEMM adds c·m·k bytes of element-wise work in forward and c·m·n in backward (× count).
 * The cast of the weights (4 bytes per FP8 weight, once per step: TE keeps the FP8 weights
 * across micro-batches) and the scale updates (a few floats per tensor) are below 0.5% of a step
 * and not charged; delayed scaling's amax reductions are (ts_amax_reduce_bytes below). Memory:
 * the FP8 weight and its transposed copy, 2 bytes per weight (1 without the transpose; MXFP8:
 * 2·(1 + 1/32)) beside the
 * 16-bit weights and the fp32 master copy in the optimizer states (ts_fp8_weight_copy_bytes;
 * planner/stages.c). With FP8 primary weights (Megatron-Core --fp8-param-gather) the FP8 weight
 * is the weight, held and all-gathered at 1 byte, and only its transpose is a copy
 * (ts_weight_elem_bytes, ts_fp8_weight_copy_bytes). */
#include "program/recipe.h"

#include "program/program.h"

/* Context parallelism. Every kind splits each sequence into 2·cp chunks and gives rank i chunks i
 * and 2·cp−1−i (load-balanced causal chunking: Megatron-LM's context parallelism docs; Llama 3
 * §3.3.2), so every rank holds T = b·s/cp tokens and does the same causal attention work, and
 * every step of a ring the same T²/2 query-key pairs. B is one rank's K and V block, 2·T·(2·g·d)
 * bytes (MLA: its full per-head K and V).
 *   ring (ring attention, Liu et al. 2023; Megatron-LM cp_comm_type=p2p): the core runs as cp
 *     kernels, the local block first, and beside each kernel the next block arrives from the
 *     previous rank: forward cp−1 transfers of B; backward cp−1 transfers of B and the dK/dV
 *     accumulator (2B), then one exposed hop of the accumulator (B) home. A step is exposed by
 *     max(0, transfer − the attention of the block in flight) (planner/cost.h ts_cp_ring_exposed_s).
 *   allgather (Llama 3 §3.3.2): K, V all-gathered (cp·B) before the core, exposed; backward
 *     gathers them again (they are not kept) and reduce-scatters dK, dV (cp·B) after the core.
 *   a2a (DeepSpeed-Ulysses, Jacobs et al. 2023): Q, K, V go from sequence to head sharding by an
 *     all-to-all of 2·T·(a+2g)·d bytes before the core, the output back by one of 2·T·a·d after
 *     it; backward the same in reverse (dO before, dQ, dK, dV after). The core then runs as one
 *     kernel over the whole sequence on a/cp heads: the same FLOPs per rank. */
static void cp_passes(const ts_problem *pb, const ts_shard *sh, double qkv_bytes, double out_bytes,
                      ts_attn_recipe *r) {
    ts_cp_pass none = {{{-1, 0, 0, 0}, {-1, 0, 0, 0}}};
    r->cp_fwd = r->cp_bwd = none;
    if (sh->cp <= 1) return;
    double B = r->kv_block_bytes, all = sh->cp * B;
    switch (pb->train.cp_kind) {
    case TS_CP_ALLGATHER:
        r->cp_fwd.around[0] = (ts_cp_coll){TS_COLL_ALLGATHER, all, 0, 0};
        r->cp_bwd.around[0] = (ts_cp_coll){TS_COLL_ALLGATHER, all, 0, 0};
        r->cp_bwd.around[1] = (ts_cp_coll){TS_COLL_REDUCE_SCATTER, all, 0, 0};
        break;
    case TS_CP_A2A:
        r->core_kernels = 1;
        r->cp_fwd.around[0] = (ts_cp_coll){TS_COLL_ALLTOALL, qkv_bytes, 0, 0};
        r->cp_fwd.around[1] = (ts_cp_coll){TS_COLL_ALLTOALL, out_bytes, 0, 0};
        r->cp_bwd.around[0] = (ts_cp_coll){TS_COLL_ALLTOALL, out_bytes, 0, 0};
        r->cp_bwd.around[1] = (ts_cp_coll){TS_COLL_ALLTOALL, qkv_bytes, 0, 0};
        break;
    case TS_CP_RING:
    case TS_CP_KIND_COUNT:
        /* In effect an all-gather of the blocks (forward, and backward with the accumulators)
         * and a reduce-scatter of dK, dV to their owners, run as ring steps. */
        r->cp_fwd.around[0] = (ts_cp_coll){TS_COLL_ALLGATHER, all, sh->cp - 1, B};
        r->cp_bwd.around[0] = (ts_cp_coll){TS_COLL_ALLGATHER, 2.0 * all, sh->cp - 1, 2.0 * B};
        r->cp_bwd.around[1] = (ts_cp_coll){TS_COLL_REDUCE_SCATTER, all, 1, B};
        break;
    }
}

static ts_gemm_shape shape(int part, double m, double n, double k, double count) {
    return (ts_gemm_shape){part, m, n, k, count};
}

ts_dtype ts_gemm_dtype(const ts_problem *pb, int part) {
    if (pb->train.dtype != TS_DTYPE_FP8) return pb->train.dtype;
    switch (part) {
    case TS_PART_QKV:
    case TS_PART_PROJ:
    case TS_PART_FC1:
    case TS_PART_FC2:
    case TS_PART_EXPERT_FC1:
    case TS_PART_EXPERT_FC2: return TS_DTYPE_FP8;
    default: return TS_DTYPE_BF16;
    }
}

ts_dtype ts_attention_dtype(const ts_problem *pb) {
    if (pb->train.dtype != TS_DTYPE_FP8) return pb->train.dtype;
    return pb->train.fp8_attention ? TS_DTYPE_FP8 : TS_DTYPE_BF16;
}

/* Whether the recipe's FP8 tensors carry a transposed copy: tensor scaling on a GPU whose FP8
 * GEMMs are TN only (formulas above); block scaling always (its column-wise copy). */
static int fp8_transposed_copy(const ts_problem *pb) {
    ts_fp8_recipe r = pb->train.fp8_recipe;
    return r == TS_FP8_MXFP8 || r == TS_FP8_BLOCKWISE || !pb->sys.fp8_any_layout;
}

/* HBM bytes per element an FP8 cast moves under the problem's recipe and GPU (formulas above). */
static double fp8_cast_per_elem(const ts_problem *pb) {
    switch (pb->train.fp8_recipe) {
    case TS_FP8_MXFP8: return 2.0 + 2.0 * (1.0 + 1.0 / 32.0);
    case TS_FP8_BLOCKWISE: return 2.0 + 2.0 * (1.0 + 4.0 / 128.0);
    default: /* delayed: read 2, write 1 and the transpose's 1; tensorwise: 2 more for its amax */
        return (pb->train.fp8_recipe == TS_FP8_TENSORWISE ? 5.0 : 3.0) + fp8_transposed_copy(pb);
    }
}

/* One FP8 copy of a weight, per weight: 1 byte and the recipe's scales. */
static double fp8_weight_one_bytes(ts_fp8_recipe r) {
    switch (r) {
    case TS_FP8_MXFP8: return 1.0 + 1.0 / 32.0;
    case TS_FP8_BLOCKWISE: return 1.0 + 4.0 / (128.0 * 128.0);
    default: return 1.0;
    }
}

double ts_fp8_weight_copy_bytes(const ts_problem *pb) {
    if (pb->train.dtype != TS_DTYPE_FP8) return 0;
    /* the weight and its transpose (where one is kept); with FP8 primary weights the first is
     * the weight itself */
    double copies = 1.0 + fp8_transposed_copy(pb) - (pb->train.fp8_param_gather ? 1.0 : 0.0);
    return copies * fp8_weight_one_bytes(pb->train.fp8_recipe);
}

double ts_weight_elem_bytes(const ts_problem *pb) {
    if (pb->train.dtype != TS_DTYPE_FP8 || !pb->train.fp8_param_gather) return pb->train.weight_bytes;
    return fp8_weight_one_bytes(pb->train.fp8_recipe);
}

double ts_gemm_input_saved_bytes(const ts_problem *pb) {
    if (pb->train.dtype != TS_DTYPE_FP8) return 2.0;
    switch (pb->train.fp8_recipe) {
    case TS_FP8_MXFP8: return 1.0 + 1.0 / 32.0;
    case TS_FP8_BLOCKWISE: return 1.0 + 4.0 / 128.0;
    default: return 1.0;
    }
}

double ts_gemm_operand_bytes(const ts_problem *pb, int part) {
    ts_dtype dt = ts_gemm_dtype(pb, part);
    if (dt == TS_DTYPE_FP8) return ts_gemm_input_saved_bytes(pb);
    return dt == TS_DTYPE_FP32 ? 4.0 : 2.0;
}

/* Amax reductions (Transformer Engine's DelayedScaling, reduce_amax=True by default). Each FP8
 * module records the amax of every tensor it casts; TE keeps one buffer of them per autocast key
 * (recipe and group) for all modules of a rank, forward and backward apart, and all-reduces it
 * (MAX, async_op=False: on the compute stream, blocking the kernels after it) over the
 * fp8_autocast's group: the forward's when the outermost fp8_autocast exits, the backward's at
 * the end of the backward of the region's first FP8 module (TE v1.11, c27ee60e,
 * transformer_engine/pytorch/fp8.py FP8GlobalStateManager.fp8_autocast_exit and
 * reduce_and_update_fp8_tensors; module/linear.py, layernorm_linear.py, layernorm_mlp.py,
 * grouped_linear.py reduce_and_update_bwd_fp8_tensors; since v1.6, one buffer per key; v2.5
 * fp8.py: "delayed scaling only function, for other recipes ... this is noop"). Megatron-Core
 * wraps each model chunk's TransformerBlock forward in one fp8_autocast with fp8_group =
 * get_amax_reduction_group(with_context_parallel=True), the TP×DP×CP ranks of a pipeline stage
 * (core_r0.8.0 baf94af3 to core_r0.11.0 59055868 transformer_block.py; Megatron-LM main
 * d98e8a64 keeps the outer context for the delayed recipe alone: "if we are using other fp8
 * recipes, then the context manager enter&exit are free"). So per chunk and micro-batch two
 * reductions, each of every amax the rank holds. TE sizes a module's metadata by its GEMMs,
 * 3 tensors a GEMM in forward (input, weight, output) and 2 in backward (grad output, grad
 * input) (module/base.py set_meta_tensor, "Max. number of fp8 tensors per GEMM"); GroupedLinear
 * holds one GEMM per local expert (num_gemms = len(m_splits)), SequentialMLP a module per
 * expert, the same count; TE's DotProductAttention joins with num_gemms=3 whether or not its
 * kernel runs FP8 (attention.py, prepare_forward under fp8_autocast). Recompute reuses the
 * forward's scales and reduces nothing (copy_forward_fp8_meta_tensors_for_recompute). */
int ts_fp8_amax_reduced(const ts_problem *pb) {
    return pb->train.dtype == TS_DTYPE_FP8 && pb->train.fp8_recipe == TS_FP8_DELAYED;
}

double ts_amax_reduce_bytes(double gemms, int forward) { return 4.0 * (forward ? 3.0 : 2.0) * gemms; }

/* Adds GEMM g's FP8 casts, forward input and backward output gradient, and its amax GEMMs, when
 * it runs FP8. */
static void add_fp8_casts(const ts_problem *pb, const ts_gemm_shape *g, double *fwd, double *bwd, double *amax) {
    if (ts_gemm_dtype(pb, g->part) != TS_DTYPE_FP8) return;
    double c = fp8_cast_per_elem(pb);
    *fwd += c * g->m * g->k * g->count;
    *bwd += c * g->m * g->n * g->count;
    if (ts_fp8_amax_reduced(pb)) *amax += g->count;
}

static double tokens_of(const ts_problem *pb, const ts_shard *sh) {
    return (double)sh->mbs * pb->train.seq / sh->cp;
}

/* The MLA projections (DeepSeek-V2 §2.1). */
static void mla_gemms(const ts_model *m, double T, double ar, ts_attn_recipe *r) {
    const ts_mla *a = &m->mla;
    double h = (double)m->hidden, qk = a->qk_nope_dim + a->qk_rope_dim;
    /* the GEMMs that make q, k and v (Megatron-Core's qkv_up_proj_and_rope_apply: the q
     * up-projection, or the q projection without a q latent, and the kv up-projection) are what
     * mla_up_proj recomputes: bits of qkv_up */
    if (a->q_lora_rank > 0) {
        r->qkv[r->n_qkv++] = shape(TS_PART_QKV, T, a->q_lora_rank, h, 1);
        r->qkv_up |= 1u << r->n_qkv;
        r->qkv[r->n_qkv++] = shape(TS_PART_QKV, T, ar * qk, a->q_lora_rank, 1);
    } else {
        r->qkv_up |= 1u << r->n_qkv;
        r->qkv[r->n_qkv++] = shape(TS_PART_QKV, T, ar * qk, h, 1);
    }
    r->qkv[r->n_qkv++] = shape(TS_PART_QKV, T, a->kv_lora_rank + a->qk_rope_dim, h, 1);
    r->qkv_up |= 1u << r->n_qkv;
    r->qkv[r->n_qkv++] = shape(TS_PART_QKV, T, ar * (a->qk_nope_dim + a->v_dim), a->kv_lora_rank, 1);
    r->proj = shape(TS_PART_PROJ, T, h, ar * a->v_dim, 1);
    r->qk_dim = qk;
    r->v_dim = a->v_dim;
}

double ts_local_attention_fraction(const ts_model *m, double seq) {
    if (m->window.tokens <= 0 || m->layers <= 0) return 1.0;
    double sum = 0;
    for (int i = 0; i < m->layers; i++) {
        double w = (double)ts_model_layer_window(m, i), f = 1.0;
        if (w > 0 && w < seq) f = m->window.chunked ? w / seq : 2.0 * w / seq - (w / seq) * (w / seq);
        sum += f;
    }
    return sum / m->layers;
}

void ts_attn_recipe_of(const ts_problem *pb, const ts_shard *sh, ts_attn_recipe *out) {
    const ts_model *m = &pb->model;
    double T = tokens_of(pb, sh), h = (double)m->hidden, seq = (double)pb->train.seq;
    /* kv heads are replicated when t > g (Megatron-LM). */
    double ar = (double)m->heads / sh->tp, gr = m->kv_heads >= sh->tp ? (double)m->kv_heads / sh->tp : 1.0;
    ts_attn_recipe *r = out;
    *r = (ts_attn_recipe){.tokens = T, .q_heads = ar, .kv_heads = gr, .core_kernels = sh->cp};
    double kv_width, qkv_width;
    if (m->mla.kv_lora_rank > 0) {
        mla_gemms(m, T, ar, r);
        kv_width = ar * (r->qk_dim + r->v_dim);
        qkv_width = ar * (2.0 * r->qk_dim + r->v_dim);
    } else {
        double d = m->head_dim, gate = m->attn_gate ? ar : 0;
        /* the output gate's projection rides in the QKV GEMM (Megatron-Core's linear_qkv); its
         * sigmoid-and-multiply reads the gate and the core's output and writes the product */
        r->qkv[r->n_qkv++] = shape(TS_PART_QKV, T, (ar + gate + 2 * gr) * d, h, 1);
        r->proj = shape(TS_PART_PROJ, T, h, ar * d, 1);
        r->qk_dim = r->v_dim = d;
        r->rotary_bytes = 2.0 * 2.0 * T * (ar + gr) * d;
        r->gate_bytes = 3.0 * 2.0 * T * gate * d;
        kv_width = 2.0 * gr * d;
        qkv_width = (ar + 2.0 * gr) * d;
    }
    for (int i = 0; i < r->n_qkv; i++) r->matmul_params += r->qkv[i].n * r->qkv[i].k;
    r->matmul_params += r->proj.n * r->proj.k;
    r->core_flops = 2.0 * T * seq * ar * (r->qk_dim + r->v_dim);
    if (m->window.tokens > 0) r->core_flops *= ts_local_attention_fraction(m, seq);
    /* Unfused: batched GEMMs over the full s×s scores, which are written, soft-maxed, dropped out
     * and read back through HBM (2 bytes each, ~3 passes, 6 with dropout). */
    r->scores_qk = shape(TS_PART_ATTN, T * ar, seq, r->qk_dim, 1);
    r->scores_av = shape(TS_PART_ATTN, T * ar, r->v_dim, seq, 1);
    r->scores_bytes = 2.0 * (m->dropout ? 6.0 : 3.0) * (T * seq * ar);
    r->kv_block_bytes = 2.0 * T * kv_width;
    cp_passes(pb, sh, 2.0 * T * qkv_width, 2.0 * T * ar * r->v_dim, r);
    if (pb->train.dtype != TS_DTYPE_FP8) return;
    for (int i = 0; i < r->n_qkv; i++)
        add_fp8_casts(pb, &r->qkv[i], &r->fp8_cast_bytes[0], &r->fp8_cast_bwd_bytes, &r->amax_gemms);
    add_fp8_casts(pb, &r->proj, &r->fp8_cast_bytes[1], &r->fp8_cast_bwd_bytes, &r->amax_gemms);
    /* TE's DotProductAttention (the fused kernels) registers 3 GEMMs' metadata (above) */
    if (ts_fp8_amax_reduced(pb) && pb->train.flash_attention) r->amax_gemms += 3;
}

/* Bytes of the activation pass over `tokens` tokens of an MLP of f_rank hidden per rank. */
static double act_pass_bytes(const ts_model *m, double tokens, double f_rank) {
    return 2.0 * (m->activation == TS_ACT_SWIGLU ? 3.0 : 2.0) * tokens * f_rank;
}

static void mlp_fp8_casts(const ts_problem *pb, ts_mlp_recipe *r) {
    if (pb->train.dtype != TS_DTYPE_FP8) return;
    add_fp8_casts(pb, &r->fc1, &r->fp8_cast_bytes[0], &r->fp8_cast_bwd_bytes[0], &r->amax_gemms);
    add_fp8_casts(pb, &r->fc2, &r->fp8_cast_bytes[1], &r->fp8_cast_bwd_bytes[1], &r->amax_gemms);
    if (!r->shared) return;
    add_fp8_casts(pb, &r->shared_fc1, &r->fp8_cast_bytes[0], &r->fp8_cast_bwd_bytes[0], &r->amax_gemms);
    add_fp8_casts(pb, &r->shared_fc2, &r->fp8_cast_bytes[1], &r->fp8_cast_bwd_bytes[1], &r->amax_gemms);
}

void ts_mlp_recipe_of(const ts_problem *pb, const ts_shard *sh, int moe, ts_mlp_recipe *out) {
    const ts_model *m = &pb->model;
    double T = tokens_of(pb, sh), h = (double)m->hidden, rep = sh->sp ? 1.0 / sh->tp : 1.0;
    int mats = m->activation == TS_ACT_SWIGLU ? 3 : 2;
    double in_mats = mats - 1; /* matrices h -> f */
    *out = (ts_mlp_recipe){
        .moe = moe,
        .norm_bytes = (2.0 * 2 * (2 + 2) / 2 + 2.0 * 2 * 3 + (m->dropout ? 2.0 : 0.0)) * T * h * rep / 2,
        .tp_bytes = 2.0 * T * h,
        .tp_block = 1,
    };
    if (!moe) {
        double fr = (double)m->ffn_hidden / sh->tp;
        out->fc1 = shape(TS_PART_FC1, T, in_mats * fr, h, 1);
        out->fc2 = shape(TS_PART_FC2, T, h, fr, 1);
        out->act_bytes = act_pass_bytes(m, T, fr);
        out->matmul_params = mats * h * fr;
        mlp_fp8_casts(pb, out);
        return;
    }
    const ts_moe *x = &m->moe;
    ts_moe_recipe_fill(pb, sh, T, out);
    out->act_bytes = act_pass_bytes(m, out->routed_tokens, out->fc2.k) + out->permute_bytes;
    if (x->shared_experts > 0) {
        double sr = (double)x->shared_ffn * x->shared_experts / sh->tp;
        out->shared = 1;
        out->shared_fc1 = shape(TS_PART_FC1, T, in_mats * sr, h, 1);
        out->shared_fc2 = shape(TS_PART_FC2, T, h, sr, 1);
        out->shared_act_bytes = act_pass_bytes(m, T, sr);
        out->matmul_params += mats * h * sr;
    }
    mlp_fp8_casts(pb, out);
}

/* The loss: Megatron-Core's vocab-parallel cross entropy over the rank's T × v/t logits
 * (tensor_parallel/cross_entropy.py, core_r0.9.0), bytes per logit. Unfused, each step is a
 * kernel: forward the fp32 copy of the 16-bit logits (2 read + 4 written), max (4), subtract (8),
 * exp (8), sum (4), divide into the softmax kept for backward (8): 38; backward scales the
 * softmax by the loss gradient (8) and casts it to 16 bits for the head (6): 14. Fused
 * (--cross-entropy-loss-fusion, fusions/fused_cross_entropy.py: each of its four functions one
 * compiled kernel): the fp32 copy with its max (6), subtract, exp and sum (8), divide (8): 22;
 * backward one pass from the fp32 softmax to the 16-bit gradient (6).
 * Multi-token prediction (DeepSeek-V3 §2.2; Megatron-Core MultiTokenPredictionLayer): each depth
 * projects the concatenated normed hidden state and next-token embedding, 2h -> h (eh_proj,
 * column-parallel), runs its transformer layer (priced as a layer of the last stage), and
 * computes its logits through the shared output head and its own cross entropy: the head and the
 * loss once more per depth, on T tokens (T - k predict, a negligible difference). */
void ts_edge_recipe_of(const ts_problem *pb, const ts_shard *sh, ts_edge_recipe *out) {
    double T = tokens_of(pb, sh), h = (double)pb->model.hidden, vr = (double)pb->model.vocab / sh->tp;
    int fused = ts_train_ce_fused(&pb->train), heads = 1 + pb->model.mtp_layers;
    *out = (ts_edge_recipe){
        .embed_bytes = 2.0 * 2.0 * T * h,
        .embed_tp_bytes = 2.0 * T * h,
        .head = shape(TS_PART_HEAD, T, vr, h, heads),
        .mtp_proj = shape(TS_PART_HEAD, T, h / sh->tp, 2.0 * h, pb->model.mtp_layers),
        .loss_fwd_bytes = (fused ? 22.0 : 38.0) * T * vr * heads,
        .loss_bwd_bytes = (fused ? 6.0 : 14.0) * T * vr * heads,
        /* Split across the TP ranks and gathered after the send (Narayanan et al. SC'21 §4.1)
         * where the stack does so; else every TP rank sends the whole tensor (DeepSpeed's pipeline
         * engine). */
        .p2p_bytes = 2.0 * T * h / (pb->train.stack.pp_scatter_gather ? sh->tp : 1),
    };
}

int ts_recipe_layer_is_moe(const ts_problem *pb, int layer) {
    if (layer >= pb->model.layers) return pb->model.moe.experts > 0;
    return ts_model_layer_is_moe(&pb->model, layer);
}

void ts_layer_params_rank(const ts_problem *pb, int tp, int ep, int etp, int layer, double *shared, double *experts) {
    const ts_param_count *pc = &pb->params;
    double all_experts = pb->model.moe.experts > 0 ? pb->model.moe.experts * pc->expert : 0;
    if (ts_recipe_layer_is_moe(pb, layer)) {
        *shared = (pc->per_layer_moe - all_experts) / tp;
        *experts = all_experts / ((etp > 0 ? etp : tp) * ep);
    } else {
        *shared = pc->per_layer_dense / tp;
        *experts = 0;
    }
}
