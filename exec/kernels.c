/* The transformer kernels declared in kernels.h: plain loops and OpenBLAS GEMMs, written to be
 * read and checked (tests/test_exec_kernels.c holds each backward against finite differences and
 * each sharded call against the unsharded one). */
#include "exec/kernels.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "common/bf16.h"
#include "exec/router_token.h"

void ts_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* ---- Linear ---------------------------------------------------------------------------------- */

void ts_linear_fwd(float *out, const float *in, const float *w, int T, int IC, int OC) {
    ts_sgemm(0, 1, T, OC, IC, 1.0f, in, IC, w, IC, 0.0f, out, OC);
}

void ts_linear_bwd_input(float *din, const float *dout, const float *w, int T, int IC, int OC) {
    ts_sgemm(0, 0, T, IC, OC, 1.0f, dout, OC, w, IC, 1.0f, din, IC);
}

void ts_linear_bwd_weight(float *dw, const float *dout, const float *in, int T, int IC, int OC) {
    ts_sgemm(1, 0, OC, IC, T, 1.0f, dout, OC, in, IC, 1.0f, dw, IC);
}

void ts_linear_bwd(float *din, float *dw, const float *dout, const float *in, const float *w, int T,
                   int IC, int OC) {
    ts_linear_bwd_input(din, dout, w, T, IC, OC);
    ts_linear_bwd_weight(dw, dout, in, T, IC, OC);
}

/* ---- RMSNorm --------------------------------------------------------------------------------- */
/* y_i = x_i r w_i with r = (mean x^2 + eps)^(-1/2), so dr/dx_j = -r^3 x_j / C and
 * dL/dx_j = r (w_j g_j - x_j r^2 mean_i(g_i w_i x_i)) for upstream g. */

void ts_rmsnorm_fwd(float *out, float *rstd, const float *x, const float *w, int T, int C,
                    float eps) {
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * C;
        float *ot = out + (size_t)t * C;
        double ss = 0;
        for (int c = 0; c < C; c++) ss += (double)xt[c] * xt[c];
        float r = (float)(1.0 / sqrt(ss / C + eps));
        for (int c = 0; c < C; c++) ot[c] = xt[c] * r * w[c];
        rstd[t] = r;
    }
}

void ts_rmsnorm_bwd(float *dx, float *dw, const float *dout, const float *x, const float *w,
                    const float *rstd, int T, int C) {
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * C, *gt = dout + (size_t)t * C;
        float *dxt = dx + (size_t)t * C;
        float r = rstd[t];
        double dot = 0;
        for (int c = 0; c < C; c++) dot += (double)gt[c] * w[c] * xt[c];
        float mean = (float)(dot / C);
        for (int c = 0; c < C; c++) {
            dxt[c] += r * (w[c] * gt[c] - xt[c] * r * r * mean);
            dw[c] += gt[c] * xt[c] * r;
        }
    }
}

/* ---- Vocab-parallel embedding ---------------------------------------------------------------- */

void ts_embedding_fwd(float *out, const int *tokens, const float *wte, int v0, int Vs, int T,
                      int C) {
    for (int t = 0; t < T; t++) {
        float *ot = out + (size_t)t * C;
        int row = tokens[t] - v0;
        if (row >= 0 && row < Vs)
            memcpy(ot, wte + (size_t)row * C, (size_t)C * sizeof *ot);
        else
            memset(ot, 0, (size_t)C * sizeof *ot);
    }
}

void ts_embedding_bwd(float *dwte, const float *dout, const int *tokens, int v0, int Vs, int T,
                      int C) {
    for (int t = 0; t < T; t++) {
        int row = tokens[t] - v0;
        if (row < 0 || row >= Vs) continue;
        float *dw = dwte + (size_t)row * C;
        const float *g = dout + (size_t)t * C;
        for (int c = 0; c < C; c++) dw[c] += g[c];
    }
}

/* ---- Rotary position embedding --------------------------------------------------------------- */
/* Pairs (i, i + D/2) turn by angle pos * theta^(-2i/D) (Llama's rotate_half). The angle is formed
 * in double so large positions keep their precision. `sign` = +1 rotates forward, -1 back. */

static void rope_rotate(float *x, int ldx, const int *pos, int T, int H, int D, float theta,
                        float sign) {
    int half = D / 2;
    for (int t = 0; t < T; t++) {
        float *xt = x + (size_t)t * ldx;
        for (int i = 0; i < half; i++) {
            double angle = pos[t] * pow(theta, -2.0 * i / D);
            float c = (float)cos(angle), s = sign * (float)sin(angle);
            for (int h = 0; h < H; h++) {
                float *xh = xt + (size_t)h * D;
                float a = xh[i], b = xh[i + half];
                xh[i] = a * c - b * s;
                xh[i + half] = b * c + a * s;
            }
        }
    }
}

void ts_rope_fwd(float *x, int ldx, const int *pos, int T, int H, int D, float theta) {
    rope_rotate(x, ldx, pos, T, H, D, theta, 1.0f);
}

void ts_rope_bwd(float *dx, int ldx, const int *pos, int T, int H, int D, float theta) {
    rope_rotate(dx, ldx, pos, T, H, D, theta, -1.0f);
}

/* ---- Causal attention ------------------------------------------------------------------------ */
/* Forward per (query i, head h), scores s_j = q_i.k_j / sqrt(D) over visible keys:
 *   lse_i = log sum_j exp(s_j),  p_j = exp(s_j - lse_i),  out_i = sum_j p_j v_j.
 * Backward (Dao 2023, FlashAttention-2 Alg. 2), with g = dout_i and delta_i = g . out_i:
 *   dv_j += p_j g,  ds_j = p_j (g . v_j - delta_i),  dq_i += ds_j k_j / sqrt(D),
 *   dk_j += ds_j q_i / sqrt(D).
 * p is rebuilt from the stored lse, so nothing of size Tq x Tk is kept. */

static float dot(const float *a, const float *b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static void axpy(float *y, float a, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

static void attention_fwd_one(float *out, float *lse, const float *q, const float *k, const float *v,
                              const ts_attn_shape *s, float *scratch) {
    int D = s->D, group = s->H / s->KV;
    float scale = 1.0f / sqrtf((float)D);
    for (int i = 0; i < s->Tq; i++) {
        for (int h = 0; h < s->H; h++) {
            const float *qi = q + (size_t)i * s->ldq + (size_t)h * D;
            const float *kh = k + (size_t)(h / group) * D, *vh = v + (size_t)(h / group) * D;
            float *oi = out + (size_t)i * s->ldo + (size_t)h * D;
            memset(oi, 0, (size_t)D * sizeof *oi);
            float smax = -INFINITY;
            int seen = 0;
            for (int j = 0; j < s->Tk; j++) {
                if (s->k_pos[j] > s->q_pos[i]) continue;
                scratch[j] = scale * dot(qi, kh + (size_t)j * s->ldk, D);
                smax = fmaxf(smax, scratch[j]);
                seen++;
            }
            float *lse_ih = lse + (size_t)i * s->H + h;
            if (seen == 0) {
                *lse_ih = -INFINITY;
                continue;
            }
            float sum = 0.0f;
            for (int j = 0; j < s->Tk; j++) {
                if (s->k_pos[j] > s->q_pos[i]) continue;
                scratch[j] = expf(scratch[j] - smax);
                sum += scratch[j];
            }
            for (int j = 0; j < s->Tk; j++) {
                if (s->k_pos[j] > s->q_pos[i]) continue;
                axpy(oi, scratch[j] / sum, vh + (size_t)j * s->ldv, D);
            }
            *lse_ih = smax + logf(sum);
        }
    }
}

static void attention_bwd_one(float *dq, float *dk, float *dv, const float *dout, const float *q,
                              const float *k, const float *v, const float *out, const float *lse,
                              const ts_attn_shape *s) {
    int D = s->D, group = s->H / s->KV;
    float scale = 1.0f / sqrtf((float)D);
    for (int i = 0; i < s->Tq; i++) {
        for (int h = 0; h < s->H; h++) {
            float l = lse[(size_t)i * s->H + h];
            if (l == -INFINITY) continue;
            size_t kv_off = (size_t)(h / group) * D;
            const float *qi = q + (size_t)i * s->ldq + (size_t)h * D;
            const float *gi = dout + (size_t)i * s->ldo + (size_t)h * D;
            float *dqi = dq + (size_t)i * s->ldq + (size_t)h * D;
            float delta = dot(gi, out + (size_t)i * s->ldo + (size_t)h * D, D);
            for (int j = 0; j < s->Tk; j++) {
                if (s->k_pos[j] > s->q_pos[i]) continue;
                const float *kj = k + (size_t)j * s->ldk + kv_off;
                const float *vj = v + (size_t)j * s->ldv + kv_off;
                float p = expf(scale * dot(qi, kj, D) - l);
                float ds = p * (dot(gi, vj, D) - delta);
                axpy(dv + (size_t)j * s->ldv + kv_off, p, gi, D);
                axpy(dqi, ds * scale, kj, D);
                axpy(dk + (size_t)j * s->ldk + kv_off, ds * scale, qi, D);
            }
        }
    }
}

/* Sequence b of a batched shape as a shape of its own, and its row offsets. */
static ts_attn_shape attn_sequence(const ts_attn_shape *s, int b, size_t *q0, size_t *k0) {
    *q0 = (size_t)b * s->Tq, *k0 = (size_t)b * s->Tk;
    ts_attn_shape one = *s;
    one.q_pos = s->q_pos + *q0, one.k_pos = s->k_pos + *k0, one.batch = 1;
    return one;
}

void ts_attention_fwd(float *out, float *lse, const float *q, const float *k, const float *v,
                      const ts_attn_shape *s, float *scratch) {
    for (int b = 0; b < ts_attn_batch(s); b++) {
        size_t q0, k0;
        ts_attn_shape one = attn_sequence(s, b, &q0, &k0);
        attention_fwd_one(out + q0 * s->ldo, lse + q0 * s->H, q + q0 * s->ldq, k + k0 * s->ldk, v + k0 * s->ldv,
                          &one, scratch);
    }
}

void ts_attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q,
                      const float *k, const float *v, const float *out, const float *lse,
                      const ts_attn_shape *s) {
    for (int b = 0; b < ts_attn_batch(s); b++) {
        size_t q0, k0;
        ts_attn_shape one = attn_sequence(s, b, &q0, &k0);
        attention_bwd_one(dq + q0 * s->ldq, dk + k0 * s->ldk, dv + k0 * s->ldv, dout + q0 * s->ldo, q + q0 * s->ldq,
                          k + k0 * s->ldk, v + k0 * s->ldv, out + q0 * s->ldo, lse + q0 * s->H, &one);
    }
}

void ts_attention_merge(float *out, float *lse, const float *out2, const float *lse2, int Tq, int H,
                        int D, int ldo) {
    for (int i = 0; i < Tq; i++) {
        for (int h = 0; h < H; h++) {
            float *l1 = lse + (size_t)i * H + h;
            float l2 = lse2[(size_t)i * H + h];
            if (l2 == -INFINITY) continue;
            float *o1 = out + (size_t)i * ldo + (size_t)h * D;
            const float *o2 = out2 + (size_t)i * ldo + (size_t)h * D;
            float m = fmaxf(*l1, l2);
            float lnew = m + logf(expf(*l1 - m) + expf(l2 - m));
            float a = expf(*l1 - lnew), b = expf(l2 - lnew);
            for (int d = 0; d < D; d++) o1[d] = a * o1[d] + b * o2[d];
            *l1 = lnew;
        }
    }
}

/* ---- SwiGLU MLP ------------------------------------------------------------------------------ */
/* act = silu(g) u with silu(g) = g sigmoid(g), silu'(g) = sigmoid(g) (1 + g (1 - sigmoid(g))). */

void ts_swiglu_fwd(float *act, const float *gate, const float *up, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        act[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

void ts_swiglu_bwd(float *dgate, float *dup, const float *dact, const float *gate, const float *up,
                   size_t n) {
    for (size_t i = 0; i < n; i++) {
        float g = gate[i], sig = 1.0f / (1.0f + expf(-g)), da = dact[i];
        dgate[i] = da * up[i] * sig * (1.0f + g * (1.0f - sig));
        dup[i] = da * g * sig;
    }
}

void ts_mlp_fwd(float *out, float *gate, float *up, float *act, const float *x, const float *w_gate,
                const float *w_up, const float *w_down, int T, int C, int F) {
    ts_linear_fwd(gate, x, w_gate, T, C, F);
    ts_linear_fwd(up, x, w_up, T, C, F);
    ts_swiglu_fwd(act, gate, up, (size_t)T * F);
    ts_linear_fwd(out, act, w_down, T, F, C);
}

void ts_mlp_bwd(float *dx, float *dw_gate, float *dw_up, float *dw_down, const float *dout,
                const float *x, const float *gate, const float *up, const float *act,
                const float *w_gate, const float *w_up, const float *w_down, int T, int C, int F,
                float *scratch) {
    float *dup = scratch, *dgate = scratch + (size_t)T * F;
    ts_sgemm(0, 0, T, F, C, 1.0f, dout, C, w_down, F, 0.0f, dup, F); /* d act */
    ts_linear_bwd_weight(dw_down, dout, act, T, F, C);
    ts_swiglu_bwd(dgate, dup, dup, gate, up, (size_t)T * F);
    ts_linear_bwd(dx, dw_gate, dgate, x, w_gate, T, C, F);
    ts_linear_bwd(dx, dw_up, dup, x, w_up, T, C, F);
}

/* ---- Mixture of experts ---------------------------------------------------------------------- */
/* Routing: p = softmax(z); for the selected set S, w_a = p_a / P with P = sum_S p. Backward:
 * dL/dp_a = (dw_a - sum_S dw_b w_b) / P for a in S (0 elsewhere), then the softmax's
 * dL/dz_e = p_e (dL/dp_e - sum_S p_a dL/dp_a). */

void ts_router_fwd(float *probs, int *expert, float *weight, const float *logits, int T, int E,
                   int K, int G, int M) {
    for (int t = 0; t < T; t++)
        ts_router_token(logits + (size_t)t * E, probs + (size_t)t * E, expert + (size_t)t * K,
                        weight + (size_t)t * K, E, K, G, M);
}

void ts_router_bwd(float *dlogits, const float *dweight, const float *probs, const int *expert,
                   int T, int E, int K) {
    for (int t = 0; t < T; t++) {
        ts_router_token_bwd(dlogits + (size_t)t * E, dweight + (size_t)t * K, probs + (size_t)t * E,
                            expert + (size_t)t * K, E, K);
    }
}

/* A counting sort: offset[e] first counts, then becomes a cursor that walks expert e's slots, and
 * is shifted back to the start positions at the end. */
void ts_moe_plan(int *offset, int *slot_token, int *slot, const int *expert, int T, int E, int K) {
    memset(offset, 0, (size_t)(E + 1) * sizeof *offset);
    for (size_t i = 0; i < (size_t)T * K; i++) offset[expert[i] + 1]++;
    for (int e = 0; e < E; e++) offset[e + 1] += offset[e];
    for (int t = 0; t < T; t++) {
        for (int a = 0; a < K; a++) {
            int s = offset[expert[(size_t)t * K + a]]++;
            slot[(size_t)t * K + a] = s;
            slot_token[s] = t;
        }
    }
    for (int e = E; e > 0; e--) offset[e] = offset[e - 1];
    offset[0] = 0;
}

void ts_moe_gather_fwd(float *xe, const float *x, const int *slot_token, int n_slots, int C) {
    for (int s = 0; s < n_slots; s++)
        memcpy(xe + (size_t)s * C, x + (size_t)slot_token[s] * C, (size_t)C * sizeof *xe);
}

void ts_moe_gather_bwd(float *dx, const float *dxe, const int *slot_token, int n_slots, int C) {
    for (int s = 0; s < n_slots; s++)
        axpy(dx + (size_t)slot_token[s] * C, 1.0f, dxe + (size_t)s * C, C);
}

void ts_moe_combine_fwd(float *out, const float *ye, const float *weight, const int *slot, int T,
                        int K, int C) {
    for (int t = 0; t < T; t++) {
        float *ot = out + (size_t)t * C;
        memset(ot, 0, (size_t)C * sizeof *ot);
        for (int a = 0; a < K; a++)
            axpy(ot, weight[(size_t)t * K + a], ye + (size_t)slot[(size_t)t * K + a] * C, C);
    }
}

void ts_moe_combine_bwd(float *dye, float *dweight, const float *dout, const float *ye,
                        const float *weight, const int *slot, int T, int K, int C) {
    for (int t = 0; t < T; t++) {
        const float *g = dout + (size_t)t * C;
        for (int a = 0; a < K; a++) {
            size_t ta = (size_t)t * K + a, s = (size_t)slot[ta];
            axpy(dye + s * C, weight[ta], g, C);
            dweight[ta] += dot(g, ye + s * C, C);
        }
    }
}

/* ---- Vocab-parallel cross-entropy ------------------------------------------------------------ */

void ts_ce_max(float *max, const float *logits, int T, int Vs) {
    for (int t = 0; t < T; t++) {
        const float *z = logits + (size_t)t * Vs;
        float m = -INFINITY;
        for (int j = 0; j < Vs; j++) m = fmaxf(m, z[j]);
        max[t] = m;
    }
}

void ts_ce_sums(float *sumexp, float *target_logit, const float *logits, const float *max,
                const int *targets, int v0, int T, int Vs) {
    for (int t = 0; t < T; t++) {
        const float *z = logits + (size_t)t * Vs;
        double sum = 0;
        for (int j = 0; j < Vs; j++) sum += exp((double)z[j] - max[t]);
        sumexp[t] = (float)sum;
        int j = targets[t] - v0;
        target_logit[t] = (j >= 0 && j < Vs) ? z[j] : 0.0f;
    }
}

void ts_ce_loss(float *loss, const float *max, const float *sumexp, const float *target_logit,
                int T) {
    for (int t = 0; t < T; t++) loss[t] = max[t] + logf(sumexp[t]) - target_logit[t];
}

void ts_ce_bwd(float *dlogits, const float *logits, const float *max, const float *sumexp,
               const int *targets, int v0, int T, int Vs, float dloss) {
    for (int t = 0; t < T; t++) {
        const float *z = logits + (size_t)t * Vs;
        float *dz = dlogits + (size_t)t * Vs;
        for (int j = 0; j < Vs; j++) {
            float p = expf(z[j] - max[t]) / sumexp[t];
            dz[j] = dloss * (p - (v0 + j == targets[t] ? 1.0f : 0.0f));
        }
    }
}

/* ---- AdamW ----------------------------------------------------------------------------------- */

void ts_adamw(float *param, float *m, float *v, const float *grad, size_t n, float lr, float beta1,
              float beta2, float eps, float weight_decay, int step) {
    float c1 = 1.0f - powf(beta1, (float)step), c2 = 1.0f - powf(beta2, (float)step);
    for (size_t i = 0; i < n; i++) {
        float g = grad[i];
        m[i] = beta1 * m[i] + (1.0f - beta1) * g;
        v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
        float mhat = m[i] / c1, vhat = v[i] / c2;
        param[i] -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * param[i]);
    }
}

uint16_t ts_bf16_bits(float x) { return ts_bf16_from_float(x).bits; }
