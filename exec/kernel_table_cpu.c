/* The CPU kernel table (see kernel_table.h): each entry calls the exec/kernels.h function of the
 * same name on host memory and returns TS_OK, so the trainer's CPU results are those of the
 * kernels themselves. */
#include <string.h>

#include "exec/kernel_table.h"

static ts_status cpu_zero(void *p, size_t bytes) {
    if (bytes) memset(p, 0, bytes);
    return TS_OK;
}

/* Host and device are one memory here: every copy is a memcpy. */
static ts_status cpu_copy(void *dst, const void *src, size_t bytes) {
    if (bytes) memcpy(dst, src, bytes);
    return TS_OK;
}

static ts_status cpu_copy_rows(float *dst, size_t ld_dst, const float *src, size_t ld_src, size_t rows,
                               size_t cols) {
    for (size_t r = 0; r < rows; r++) memcpy(dst + r * ld_dst, src + r * ld_src, cols * sizeof *dst);
    return TS_OK;
}

static ts_status cpu_add(float *out, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
    return TS_OK;
}

/* Wrappers that relay to the kernels.h function of the same name. */
#define WRAP(name, params, args)                                                                   \
    static ts_status cpu_##name params {                                                           \
        ts_##name args;                                                                            \
        return TS_OK;                                                                              \
    }

WRAP(linear_fwd, (float *out, const float *in, const float *w, int T, int IC, int OC), (out, in, w, T, IC, OC))
WRAP(linear_bwd_input, (float *din, const float *dout, const float *w, int T, int IC, int OC),
     (din, dout, w, T, IC, OC))
WRAP(linear_bwd_weight, (float *dw, const float *dout, const float *in, int T, int IC, int OC),
     (dw, dout, in, T, IC, OC))
WRAP(rmsnorm_fwd, (float *out, float *rstd, const float *x, const float *w, int T, int C, float eps),
     (out, rstd, x, w, T, C, eps))
WRAP(rmsnorm_bwd,
     (float *dx, float *dw, const float *dout, const float *x, const float *w, const float *rstd, int T, int C),
     (dx, dw, dout, x, w, rstd, T, C))
WRAP(embedding_fwd, (float *out, const int *tokens, const float *wte, int v0, int Vs, int T, int C),
     (out, tokens, wte, v0, Vs, T, C))
WRAP(embedding_bwd, (float *dwte, const float *dout, const int *tokens, int v0, int Vs, int T, int C),
     (dwte, dout, tokens, v0, Vs, T, C))
WRAP(rope_fwd, (float *x, int ldx, const int *pos, int T, int H, int D, float theta), (x, ldx, pos, T, H, D, theta))
WRAP(rope_bwd, (float *dx, int ldx, const int *pos, int T, int H, int D, float theta),
     (dx, ldx, pos, T, H, D, theta))
WRAP(attention_fwd,
     (float *out, float *lse, const float *q, const float *k, const float *v, const ts_attn_shape *s,
      float *scratch),
     (out, lse, q, k, v, s, scratch))
WRAP(attention_bwd,
     (float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k, const float *v,
      const float *out, const float *lse, const ts_attn_shape *s),
     (dq, dk, dv, dout, q, k, v, out, lse, s))
WRAP(attention_merge, (float *out, float *lse, const float *out2, const float *lse2, int Tq, int H, int D, int ldo),
     (out, lse, out2, lse2, Tq, H, D, ldo))
WRAP(swiglu_fwd, (float *act, const float *gate, const float *up, size_t n), (act, gate, up, n))
WRAP(swiglu_bwd, (float *dgate, float *dup, const float *dact, const float *gate, const float *up, size_t n),
     (dgate, dup, dact, gate, up, n))
WRAP(router_fwd, (float *probs, int *expert, float *weight, const float *logits, int T, int E, int K, int G, int M),
     (probs, expert, weight, logits, T, E, K, G, M))
WRAP(router_bwd,
     (float *dlogits, const float *dweight, const float *probs, const int *expert, int T, int E, int K),
     (dlogits, dweight, probs, expert, T, E, K))
WRAP(moe_gather_fwd, (float *xe, const float *x, const int *slot_token, int n_slots, int C),
     (xe, x, slot_token, n_slots, C))
WRAP(moe_gather_bwd, (float *dx, const float *dxe, const int *slot_token, int n_slots, int C),
     (dx, dxe, slot_token, n_slots, C))
WRAP(moe_combine_fwd, (float *out, const float *ye, const float *weight, const int *slot, int T, int K, int C),
     (out, ye, weight, slot, T, K, C))
WRAP(moe_combine_bwd,
     (float *dye, float *dweight, const float *dout, const float *ye, const float *weight, const int *slot, int T,
      int K, int C),
     (dye, dweight, dout, ye, weight, slot, T, K, C))
WRAP(ce_max, (float *max, const float *logits, int T, int Vs), (max, logits, T, Vs))
WRAP(ce_sums,
     (float *sumexp, float *target_logit, const float *logits, const float *max, const int *targets, int v0, int T,
      int Vs),
     (sumexp, target_logit, logits, max, targets, v0, T, Vs))
WRAP(ce_loss, (float *loss, const float *max, const float *sumexp, const float *target_logit, int T),
     (loss, max, sumexp, target_logit, T))
WRAP(ce_bwd,
     (float *dlogits, const float *logits, const float *max, const float *sumexp, const int *targets, int v0,
      int T, int Vs, float dloss),
     (dlogits, logits, max, sumexp, targets, v0, T, Vs, dloss))
WRAP(adamw,
     (float *param, float *m, float *v, const float *grad, size_t n, float lr, float beta1, float beta2, float eps,
      float weight_decay, int step),
     (param, m, v, grad, n, lr, beta1, beta2, eps, weight_decay, step))

#undef WRAP

const ts_kernels *ts_kernels_cpu(void) {
    static const ts_kernels cpu = {
        .name = "cpu",
        .zero = cpu_zero,
        .copy = cpu_copy,
        .copy_rows = cpu_copy_rows,
        .to_host = cpu_copy,
        .to_device = cpu_copy,
        .add = cpu_add,
        .linear_fwd = cpu_linear_fwd,
        .linear_bwd_input = cpu_linear_bwd_input,
        .linear_bwd_weight = cpu_linear_bwd_weight,
        .rmsnorm_fwd = cpu_rmsnorm_fwd,
        .rmsnorm_bwd = cpu_rmsnorm_bwd,
        .embedding_fwd = cpu_embedding_fwd,
        .embedding_bwd = cpu_embedding_bwd,
        .rope_fwd = cpu_rope_fwd,
        .rope_bwd = cpu_rope_bwd,
        .attention_fwd = cpu_attention_fwd,
        .attention_bwd = cpu_attention_bwd,
        .attention_merge = cpu_attention_merge,
        .swiglu_fwd = cpu_swiglu_fwd,
        .swiglu_bwd = cpu_swiglu_bwd,
        .router_fwd = cpu_router_fwd,
        .router_bwd = cpu_router_bwd,
        .moe_gather_fwd = cpu_moe_gather_fwd,
        .moe_gather_bwd = cpu_moe_gather_bwd,
        .moe_combine_fwd = cpu_moe_combine_fwd,
        .moe_combine_bwd = cpu_moe_combine_bwd,
        .ce_max = cpu_ce_max,
        .ce_sums = cpu_ce_sums,
        .ce_loss = cpu_ce_loss,
        .ce_bwd = cpu_ce_bwd,
        .adamw = cpu_adamw,
    };
    return &cpu;
}
