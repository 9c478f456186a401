/* The CPU table in BF16 mixed precision (see kernel_table.h, ts_kernels_cpu_bf16): the fp32 CPU
 * kernels with bf16 rounding (common/bf16.h) at the points where Megatron-Core's bf16 training
 * keeps a tensor in bf16 memory, so the GPU's bf16 losses have a CPU reference.
 *
 * What Megatron-Core does with --bf16 (megatron/core/optimizer/optimizer.py,
 * Float16OptimizerWithFloat16Params; megatron/core/distributed/param_and_grad_buffer.py): the model's
 * parameters are bf16 copies of fp32 master weights, which the optimizer updates in fp32 and copies
 * back; activations, the residual stream (fp32_residual_connection off) and activation gradients are
 * bf16; GEMMs read bf16 and accumulate in fp32 (cuBLAS CUBLAS_COMPUTE_32F); weight gradients
 * accumulate into fp32 main_grad buffers (accumulate_allreduce_grads_in_fp32, with gradient
 * accumulation fusion writing the wgrad GEMM's fp32 result there); norms, softmax statistics and the
 * cross-entropy compute in fp32. Here the fp32 master weights are the trainer's parameters; each
 * kernel reads weights rounded to bf16, computes in fp32 (as the GPU accumulates), and rounds the
 * activations and activation gradients it writes; weight gradients, the optimizer, norm rstd,
 * attention lse, router probabilities and the loss stay fp32.
 *
 * Not mimicked: rounding inside a kernel (FlashAttention-2 rounds P to bf16 before P·V; cuBLAS's
 * summation order), which the stated tolerance covers (exec/bf16_ref.h). `add` rounds: it is the
 * residual add, but the trainer also sums fp32 gradient shards with it under ZeRO-2/3 and sequence
 * parallelism, which this table then rounds too (the reference is for one-rank plans). */
#include <stdlib.h>

#include "common/bf16.h"
#include "exec/kernel_table.h"

static void round_rows(float *x, size_t rows, size_t cols, size_t ld) {
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) x[r * ld + c] = ts_bf16_round(x[r * ld + c]);
}

static void round_n(float *x, size_t n) { round_rows(x, 1, n, n); }

/* A bf16-rounded copy of n floats (what a bf16 parameter copy or a bf16 tensor holds). */
static ts_status rounded_copy(const float *src, size_t n, float **out) {
    *out = malloc((n ? n : 1) * sizeof **out);
    if (*out == NULL) return TS_FAIL(TS_ERR_NOMEM, "cpu-bf16 kernels: out of memory for a %zu-float bf16 copy", n);
    for (size_t i = 0; i < n; i++) (*out)[i] = ts_bf16_round(src[i]);
    return TS_OK;
}

/* The rows a slot array reaches (its largest entry + 1; 0 when empty). */
static size_t rows_reached(const int *idx, size_t n) {
    size_t rows = 0;
    for (size_t i = 0; i < n; i++)
        if (idx[i] >= 0 && (size_t)idx[i] + 1 > rows) rows = (size_t)idx[i] + 1;
    return rows;
}

static const ts_kernels *fp32(void) { return ts_kernels_cpu(); }

static ts_status b_add(float *out, const float *a, const float *b, size_t n) {
    TS_CHECK(fp32()->add(out, a, b, n));
    round_n(out, n);
    return TS_OK;
}

/* ---- linear: bf16 operands, fp32 accumulation ---------------------------------------------------- */

typedef ts_status (*linear_fn)(float *out, const float *x, const float *y, int T, int IC, int OC);

/* The fp32 entry f on bf16-rounded copies of its operands x (nx floats) and y (ny), then its
 * output (n_out floats; 0: left fp32, a weight gradient's main_grad) rounded. */
static ts_status linear_rounded(linear_fn f, float *out, size_t n_out, const float *x, size_t nx, const float *y,
                                size_t ny, int T, int IC, int OC) {
    ts_status res = TS_OK;
    float *rx = NULL, *ry = NULL;
    TS_CHECK_GOTO(rounded_copy(x, nx, &rx), res, exit);
    TS_CHECK_GOTO(rounded_copy(y, ny, &ry), res, exit);
    TS_CHECK_GOTO(f(out, rx, ry, T, IC, OC), res, exit);
    round_n(out, n_out);
exit:
    free(rx);
    free(ry);
    return res;
}

static ts_status b_linear_fwd(float *out, const float *in, const float *w, int T, int IC, int OC) {
    return linear_rounded(fp32()->linear_fwd, out, (size_t)T * OC, in, (size_t)T * IC, w, (size_t)OC * IC, T, IC, OC);
}

static ts_status b_linear_bwd_input(float *din, const float *dout, const float *w, int T, int IC, int OC) {
    return linear_rounded(fp32()->linear_bwd_input, din, (size_t)T * IC, dout, (size_t)T * OC, w, (size_t)OC * IC, T,
                          IC, OC);
}

/* The wgrad GEMM reads bf16 and accumulates into the fp32 main_grad: dw is not rounded. */
static ts_status b_linear_bwd_weight(float *dw, const float *dout, const float *in, int T, int IC, int OC) {
    return linear_rounded(fp32()->linear_bwd_weight, dw, 0, dout, (size_t)T * OC, in, (size_t)T * IC, T, IC, OC);
}

/* ---- norm, embedding, rotary --------------------------------------------------------------------- */

static ts_status b_rmsnorm_fwd(float *out, float *rstd, const float *x, const float *w, int T, int C, float eps) {
    float *rw = NULL;
    TS_CHECK(rounded_copy(w, (size_t)C, &rw));
    ts_status res = fp32()->rmsnorm_fwd(out, rstd, x, rw, T, C, eps);
    free(rw);
    round_n(out, (size_t)T * C);
    return res;
}

static ts_status b_rmsnorm_bwd(float *dx, float *dw, const float *dout, const float *x, const float *w,
                               const float *rstd, int T, int C) {
    float *rw = NULL;
    TS_CHECK(rounded_copy(w, (size_t)C, &rw));
    ts_status res = fp32()->rmsnorm_bwd(dx, dw, dout, x, rw, rstd, T, C);
    free(rw);
    round_n(dx, (size_t)T * C);
    return res;
}

static ts_status b_embedding_fwd(float *out, const int *tokens, const float *wte, int v0, int Vs, int T, int C) {
    TS_CHECK(fp32()->embedding_fwd(out, tokens, wte, v0, Vs, T, C));
    round_n(out, (size_t)T * C);
    return TS_OK;
}

static ts_status b_rope_fwd(float *x, int ldx, const int *pos, int T, int H, int D, float theta) {
    TS_CHECK(fp32()->rope_fwd(x, ldx, pos, T, H, D, theta));
    round_rows(x, (size_t)T, (size_t)H * D, (size_t)ldx);
    return TS_OK;
}

static ts_status b_rope_bwd(float *dx, int ldx, const int *pos, int T, int H, int D, float theta) {
    TS_CHECK(fp32()->rope_bwd(dx, ldx, pos, T, H, D, theta));
    round_rows(dx, (size_t)T, (size_t)H * D, (size_t)ldx);
    return TS_OK;
}

/* ---- attention: bf16 in and out, fp32 statistics ------------------------------------------------- */

static ts_status b_attention_fwd(float *out, float *lse, const float *q, const float *k, const float *v,
                                 const ts_attn_shape *s, float *scratch) {
    TS_CHECK(fp32()->attention_fwd(out, lse, q, k, v, s, scratch));
    round_rows(out, (size_t)ts_attn_batch(s) * s->Tq, (size_t)s->H * s->D, (size_t)s->ldo);
    return TS_OK;
}

static ts_status b_attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                                 const float *v, const float *out, const float *lse, const ts_attn_shape *s) {
    TS_CHECK(fp32()->attention_bwd(dq, dk, dv, dout, q, k, v, out, lse, s));
    size_t nq = (size_t)ts_attn_batch(s) * s->Tq, nk = (size_t)ts_attn_batch(s) * s->Tk;
    /* The backward's gradients have the strides of the tensors they differentiate. */
    round_rows(dq, nq, (size_t)s->H * s->D, (size_t)s->ldq);
    round_rows(dk, nk, (size_t)s->KV * s->D, (size_t)s->ldk);
    round_rows(dv, nk, (size_t)s->KV * s->D, (size_t)s->ldv);
    return TS_OK;
}

static ts_status b_attention_merge(float *out, float *lse, const float *out2, const float *lse2, int Tq, int H, int D,
                                   int ldo) {
    TS_CHECK(fp32()->attention_merge(out, lse, out2, lse2, Tq, H, D, ldo));
    round_rows(out, (size_t)Tq, (size_t)H * D, (size_t)ldo);
    return TS_OK;
}

/* ---- MLP and mixture of experts ------------------------------------------------------------------ */

static ts_status b_swiglu_fwd(float *act, const float *gate, const float *up, size_t n) {
    TS_CHECK(fp32()->swiglu_fwd(act, gate, up, n));
    round_n(act, n);
    return TS_OK;
}

static ts_status b_swiglu_bwd(float *dgate, float *dup, const float *dact, const float *gate, const float *up,
                              size_t n) {
    TS_CHECK(fp32()->swiglu_bwd(dgate, dup, dact, gate, up, n));
    round_n(dgate, n);
    round_n(dup, n);
    return TS_OK;
}

static ts_status b_router_bwd(float *dlogits, const float *dweight, const float *probs, const int *expert, int T,
                              int E, int K) {
    TS_CHECK(fp32()->router_bwd(dlogits, dweight, probs, expert, T, E, K));
    round_n(dlogits, (size_t)T * E);
    return TS_OK;
}

static ts_status b_moe_gather_fwd(float *xe, const float *x, const int *slot_token, int n_slots, int C) {
    TS_CHECK(fp32()->moe_gather_fwd(xe, x, slot_token, n_slots, C));
    round_n(xe, (size_t)n_slots * C);
    return TS_OK;
}

static ts_status b_moe_gather_bwd(float *dx, const float *dxe, const int *slot_token, int n_slots, int C) {
    TS_CHECK(fp32()->moe_gather_bwd(dx, dxe, slot_token, n_slots, C));
    round_n(dx, rows_reached(slot_token, (size_t)n_slots) * C);
    return TS_OK;
}

static ts_status b_moe_combine_fwd(float *out, const float *ye, const float *weight, const int *slot, int T, int K,
                                   int C) {
    TS_CHECK(fp32()->moe_combine_fwd(out, ye, weight, slot, T, K, C));
    round_n(out, (size_t)T * C);
    return TS_OK;
}

static ts_status b_moe_combine_bwd(float *dye, float *dweight, const float *dout, const float *ye,
                                   const float *weight, const int *slot, int T, int K, int C) {
    TS_CHECK(fp32()->moe_combine_bwd(dye, dweight, dout, ye, weight, slot, T, K, C));
    round_n(dye, rows_reached(slot, (size_t)T * K) * C);
    return TS_OK;
}

/* ---- cross-entropy: bf16 logits in, fp32 statistics, bf16 gradient out --------------------------- */

static ts_status b_ce_bwd(float *dlogits, const float *logits, const float *max, const float *sumexp,
                          const int *targets, int v0, int T, int Vs, float dloss) {
    TS_CHECK(fp32()->ce_bwd(dlogits, logits, max, sumexp, targets, v0, T, Vs, dloss));
    round_n(dlogits, (size_t)T * Vs);
    return TS_OK;
}

const ts_kernels *ts_kernels_cpu_bf16(void) {
    static ts_kernels t;
    if (t.name) return &t;
    t = *fp32(); /* memory ops, the fp32 statistics, weight gradients and the optimizer as they are */
#define SET(e) t.e = b_##e;
    TS_KERNELS_BF16_ENTRIES(SET)
#undef SET
    t.name = "cpu-bf16"; /* last: marks the table filled */
    return &t;
}
