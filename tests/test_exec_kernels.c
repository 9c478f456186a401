/* The executor's math (exec/kernels.h) and the one-process reference model (exec/reference.h):
 *  - every backward against central finite differences, as directional derivatives along random
 *    directions (the objective sum(g . out) is accumulated in double, so fp32 noise stays far
 *    below the signal and the tolerances stay tight);
 *  - every sharded call reassembles to the unsharded one: attention over head ranges, query
 *    chunks (contiguous and load-balanced context parallelism) and key chunks merged by
 *    log-sum-exp (ring attention); column/row-sliced SwiGLU MLPs; vocab-parallel embedding and
 *    cross-entropy;
 *  - the reference model: parameter count against models/count.c, index-addressable init,
 *    finite-difference gradients of tiny and tiny-moe (shrunk to seq 16, batch 2), micro-batch
 *    accumulation, 20 AdamW steps that lower the loss, bit-for-bit determinism, data sources. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels.h"
#include "exec/reference.h"
#include "tests/helpers.h"

/* ---- Helpers --------------------------------------------------------------------------------- */

static float randn(uint64_t *s) {
    uint64_t h = test_next_u64(s);
    double u1 = ((double)(h >> 32) + 1.0) / 4294967296.0;
    double u2 = (double)(h & 0xFFFFFFFFu) / 4294967296.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

static float *zeros(size_t n) {
    float *p = calloc(n ? n : 1, sizeof *p);
    cr_assert_not_null(p, "calloc %zu floats", n);
    return p;
}

static float *randn_buf(size_t n, uint64_t *s, float scale) {
    float *p = zeros(n);
    for (size_t i = 0; i < n; i++) p[i] = scale * randn(s);
    return p;
}

static float *copy_buf(const float *x, size_t n) {
    float *p = zeros(n);
    memcpy(p, x, n * sizeof *p);
    return p;
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

static double dot_d(const float *a, const float *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

static double rel_err(double a, double b) {
    double scale = fmax(fabs(a), fabs(b));
    return scale == 0 ? 0 : fabs(a - b) / scale;
}

/* A scalar function of some inputs, evaluated by running a forward pass. */
typedef double (*objective)(void *ctx);

/* Relative error between <grad, u> and the central difference of f along u at x (n floats),
 * for a random direction u ~ N(0, 1), zero where `mask` (n, or NULL for none) is 0; x is restored
 * afterwards. */
static double directional_error_masked(objective f, void *ctx, float *x, const float *grad,
                                       size_t n, float eps, uint64_t *rng, const float *mask) {
    float *u = randn_buf(n, rng, 1.0f), *x0 = copy_buf(x, n);
    if (mask)
        for (size_t i = 0; i < n; i++) u[i] *= mask[i];
    double analytic = dot_d(grad, u, n);
    for (size_t i = 0; i < n; i++) x[i] = x0[i] + eps * u[i];
    double fp = f(ctx);
    for (size_t i = 0; i < n; i++) x[i] = x0[i] - eps * u[i];
    double fm = f(ctx);
    memcpy(x, x0, n * sizeof *x);
    free(u);
    free(x0);
    return rel_err(analytic, (fp - fm) / (2.0 * eps));
}

static double directional_error(objective f, void *ctx, float *x, const float *grad, size_t n,
                                float eps, uint64_t *rng) {
    return directional_error_masked(f, ctx, x, grad, n, eps, rng, NULL);
}

#define FD_TOL 1e-3 /* kernels: inputs O(1), eps 1e-2 */

/* ---- GEMM and linear ------------------------------------------------------------------------- */

Test(exec_kernels, sgemm_matches_naive_for_every_transpose_and_stride) {
    uint64_t rng = 1;
    enum { M = 5, N = 7, K = 3, LD = 9 };
    float *A = randn_buf(LD * LD, &rng, 1), *B = randn_buf(LD * LD, &rng, 1);
    float *C0 = randn_buf(M * LD, &rng, 1);
    for (int ta = 0; ta < 2; ta++) {
        for (int tb = 0; tb < 2; tb++) {
            float *C = copy_buf(C0, M * LD);
            ts_sgemm(ta, tb, M, N, K, 0.5f, A, LD, B, LD, 2.0f, C, LD);
            for (int i = 0; i < M; i++) {
                for (int j = 0; j < N; j++) {
                    double want = 2.0 * C0[i * LD + j];
                    for (int k = 0; k < K; k++)
                        want += 0.5 * (ta ? A[k * LD + i] : A[i * LD + k]) *
                                (tb ? B[j * LD + k] : B[k * LD + j]);
                    cr_assert(fabs(C[i * LD + j] - want) < 1e-5, "ta=%d tb=%d C[%d,%d]=%g want %g",
                              ta, tb, i, j, C[i * LD + j], want);
                }
                for (int j = N; j < LD; j++)
                    cr_assert_eq(C[i * LD + j], C0[i * LD + j], "wrote past N at ldc");
            }
            free(C);
        }
    }
    free(A);
    free(B);
    free(C0);
}

typedef struct {
    int T, IC, OC;
    float *in, *w, *out, *g;
} linear_case;

static double linear_objective(void *ctx) {
    linear_case *c = ctx;
    ts_linear_fwd(c->out, c->in, c->w, c->T, c->IC, c->OC);
    return dot_d(c->g, c->out, (size_t)c->T * c->OC);
}

/* bf16 words: exact values keep their upper half, ties go to the even word, NaN stays NaN-like. */
static float bits_float(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

Test(exec_kernels, bf16_rounds_to_nearest_even) {
    cr_expect_eq(ts_bf16_bits(1.0f), 0x3F80);
    cr_expect_eq(ts_bf16_bits(-2.0f), 0xC000);
    cr_expect_eq(ts_bf16_bits(bits_float(0x3F808000u)), 0x3F80, "a tie below an even word stays");
    cr_expect_eq(ts_bf16_bits(bits_float(0x3F818000u)), 0x3F82, "a tie above an odd word goes up");
    cr_expect_eq(ts_bf16_bits(bits_float(0x3F808001u)), 0x3F81, "past the tie rounds up");
    cr_expect_eq(ts_bf16_bits(bits_float(0x3F807FFFu)), 0x3F80, "below the tie rounds down");
}

Test(exec_kernels, linear_backward_matches_finite_differences) {
    uint64_t rng = 2;
    linear_case c = {.T = 5, .IC = 6, .OC = 4};
    c.in = randn_buf(30, &rng, 1), c.w = randn_buf(24, &rng, 1), c.out = zeros(20);
    c.g = randn_buf(20, &rng, 1);
    float *din = zeros(30), *dw = zeros(24);
    ts_linear_bwd(din, dw, c.g, c.in, c.w, c.T, c.IC, c.OC);
    double e_in = directional_error(linear_objective, &c, c.in, din, 30, 1e-2f, &rng);
    double e_w = directional_error(linear_objective, &c, c.w, dw, 24, 1e-2f, &rng);
    cr_expect(e_in < 1e-4 && e_w < 1e-4, "linear: FD rel error in %.2e w %.2e", e_in, e_w);
    free(c.in), free(c.w), free(c.out), free(c.g), free(din), free(dw);
}

/* ---- RMSNorm --------------------------------------------------------------------------------- */

typedef struct {
    int T, C;
    float *x, *w, *out, *rstd, *g;
} norm_case;

static double norm_objective(void *ctx) {
    norm_case *c = ctx;
    ts_rmsnorm_fwd(c->out, c->rstd, c->x, c->w, c->T, c->C, 1e-5f);
    return dot_d(c->g, c->out, (size_t)c->T * c->C);
}

Test(exec_kernels, rmsnorm_forward_and_backward) {
    uint64_t rng = 3;
    norm_case c = {.T = 4, .C = 16};
    size_t n = 64;
    c.x = randn_buf(n, &rng, 2), c.w = randn_buf(16, &rng, 1), c.out = zeros(n), c.rstd = zeros(4);
    c.g = randn_buf(n, &rng, 1);
    norm_objective(&c);
    for (int t = 0; t < c.T; t++) {
        double ss = 0;
        for (int i = 0; i < c.C; i++) ss += (double)c.x[t * c.C + i] * c.x[t * c.C + i];
        double r = 1.0 / sqrt(ss / c.C + 1e-5);
        cr_expect(fabs(c.rstd[t] - r) < 1e-6 * r, "rstd[%d] %g want %g", t, c.rstd[t], r);
        for (int i = 0; i < c.C; i++)
            cr_expect(fabs(c.out[t * c.C + i] - c.x[t * c.C + i] * r * c.w[i]) < 1e-5);
    }
    float *dx = zeros(n), *dw = zeros(16);
    ts_rmsnorm_bwd(dx, dw, c.g, c.x, c.w, c.rstd, c.T, c.C);
    double e_x = directional_error(norm_objective, &c, c.x, dx, n, 1e-2f, &rng);
    double e_w = directional_error(norm_objective, &c, c.w, dw, 16, 1e-2f, &rng);
    cr_expect(e_x < FD_TOL && e_w < FD_TOL, "rmsnorm: FD rel error x %.2e w %.2e", e_x, e_w);
    free(c.x), free(c.w), free(c.out), free(c.rstd), free(c.g), free(dx), free(dw);
}

/* ---- Vocab-parallel embedding ---------------------------------------------------------------- */

Test(exec_kernels, embedding_vocab_shards_sum_to_the_full_lookup) {
    uint64_t rng = 4;
    enum { V = 10, C = 3, T = 6, V0 = 4 }; /* shards [0, 4) and [4, 10) */
    const int tokens[T] = {0, 9, 4, 3, 4, 7};
    float *wte = randn_buf(V * C, &rng, 1), *full = zeros(T * C), *sum = zeros(T * C);
    float *part = zeros(T * C), *dout = randn_buf(T * C, &rng, 1);
    ts_embedding_fwd(full, tokens, wte, 0, V, T, C);
    for (int t = 0; t < T; t++)
        cr_assert(memcmp(full + t * C, wte + tokens[t] * C, C * sizeof(float)) == 0);
    ts_embedding_fwd(part, tokens, wte, 0, V0, T, C);
    for (int i = 0; i < T * C; i++) sum[i] = part[i];
    ts_embedding_fwd(part, tokens, wte + V0 * C, V0, V - V0, T, C);
    for (int i = 0; i < T * C; i++) sum[i] += part[i];
    cr_expect(memcmp(full, sum, sizeof(float) * T * C) == 0, "shards do not sum to the lookup");

    float *dfull = zeros(V * C), *dshard = zeros(V * C), *want = zeros(V * C);
    ts_embedding_bwd(dfull, dout, tokens, 0, V, T, C);
    ts_embedding_bwd(dshard, dout, tokens, 0, V0, T, C);
    ts_embedding_bwd(dshard + V0 * C, dout, tokens, V0, V - V0, T, C);
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) want[tokens[t] * C + c] += dout[t * C + c];
    cr_expect(max_abs_diff(dfull, want, V * C) == 0, "embedding backward is not a scatter-add");
    cr_expect(max_abs_diff(dshard, want, V * C) == 0, "sharded backward differs");
    free(wte), free(full), free(sum), free(part), free(dout), free(dfull), free(dshard), free(want);
}

/* ---- Rotary ---------------------------------------------------------------------------------- */

Test(exec_kernels, rope_is_llama_rotate_half) {
    /* D = 4: pair (0, 2) turns by pos * 1, pair (1, 3) by pos * theta^(-1/2). */
    float x[4] = {1, 2, 3, 4};
    const int pos[1] = {3};
    ts_rope_fwd(x, 4, pos, 1, 1, 4, 10000.0f);
    double a0 = 3.0, a1 = 3.0 / 100.0;
    double want[4] = {1 * cos(a0) - 3 * sin(a0), 2 * cos(a1) - 4 * sin(a1),
                      3 * cos(a0) + 1 * sin(a0), 4 * cos(a1) + 2 * sin(a1)};
    for (int i = 0; i < 4; i++)
        cr_expect(fabs(x[i] - want[i]) < 1e-6, "x[%d] %g want %g", i, x[i], want[i]);
}

Test(exec_kernels, rope_scores_depend_on_relative_position_and_backward_inverts) {
    uint64_t rng = 5;
    enum { D = 16, H = 2, T = 3, LD = 40 }; /* strided rows: 2 heads of 16 in rows of 40 */
    float *q = randn_buf(D, &rng, 1), *k = randn_buf(D, &rng, 1);
    /* <rope(q, m), rope(k, n)> depends on m - n only. */
    double s[2];
    const int shifts[2][2] = {{7, 4}, {103, 100}};
    for (int c = 0; c < 2; c++) {
        float *qq = copy_buf(q, D), *kk = copy_buf(k, D);
        ts_rope_fwd(qq, D, &shifts[c][0], 1, 1, D, 10000.0f);
        ts_rope_fwd(kk, D, &shifts[c][1], 1, 1, D, 10000.0f);
        s[c] = dot_d(qq, kk, D);
        free(qq), free(kk);
    }
    cr_expect(fabs(s[0] - s[1]) < 1e-4, "scores %g vs %g at the same offset", s[0], s[1]);

    float *x = randn_buf(T * LD, &rng, 1), *x0 = copy_buf(x, T * LD);
    const int pos[T] = {0, 5, 1000};
    ts_rope_fwd(x, LD, pos, T, H, D, 10000.0f);
    cr_expect(memcmp(x, x0, H * D * sizeof(float)) == 0, "position 0 must be the identity");
    for (int t = 0; t < T; t++)
        cr_expect(memcmp(x + t * LD + H * D, x0 + t * LD + H * D, (LD - H * D) * sizeof(float)) ==
                      0,
                  "rotary wrote outside its heads");
    /* rope is orthogonal: its backward (the transpose) is its inverse. */
    ts_rope_bwd(x, LD, pos, T, H, D, 10000.0f);
    cr_expect(max_abs_diff(x, x0, T * LD) < 1e-5, "bwd(fwd(x)) != x: %g",
              max_abs_diff(x, x0, T * LD));
    free(q), free(k), free(x), free(x0);
}

/* ---- Attention ------------------------------------------------------------------------------- */

/* qkv rows (T, (H + 2 KV) D): q heads, k heads, v heads, as the reference lays them out. */
enum { AT = 8, AH = 4, AKV = 2, AD = 8, AQ = AH * AD, ALD = (AH + 2 * AKV) * AD };

typedef struct {
    float *qkv, *out, *lse, *g, *scratch;
    int pos[AT];
} attn_case;

static ts_attn_shape attn_full_shape(const attn_case *c) {
    return (ts_attn_shape){.Tq = AT,
                           .Tk = AT,
                           .H = AH,
                           .KV = AKV,
                           .D = AD,
                           .ldq = ALD,
                           .ldk = ALD,
                           .ldv = ALD,
                           .ldo = AQ,
                           .q_pos = c->pos,
                           .k_pos = c->pos};
}

static double attn_objective(void *ctx) {
    attn_case *c = ctx;
    ts_attn_shape s = attn_full_shape(c);
    ts_attention_fwd(c->out, c->lse, c->qkv, c->qkv + AQ, c->qkv + AQ + AKV * AD, &s, c->scratch);
    return dot_d(c->g, c->out, AT * AQ);
}

static attn_case attn_setup(uint64_t seed) {
    uint64_t rng = seed;
    attn_case c;
    c.qkv = randn_buf(AT * ALD, &rng, 1), c.out = zeros(AT * AQ), c.lse = zeros(AT * AH);
    c.g = randn_buf(AT * AQ, &rng, 1), c.scratch = zeros(AT);
    for (int t = 0; t < AT; t++) c.pos[t] = t;
    attn_objective(&c);
    return c;
}

static void attn_teardown(attn_case *c) {
    free(c->qkv), free(c->out), free(c->lse), free(c->g), free(c->scratch);
}

/* dqkv (T, ALD) += the full backward. */
static void attn_full_bwd(const attn_case *c, float *dqkv) {
    ts_attn_shape s = attn_full_shape(c);
    ts_attention_bwd(dqkv, dqkv + AQ, dqkv + AQ + AKV * AD, c->g, c->qkv, c->qkv + AQ,
                     c->qkv + AQ + AKV * AD, c->out, c->lse, &s);
}

Test(exec_kernels, attention_forward_matches_naive_softmax) {
    attn_case c = attn_setup(6);
    double scale = 1.0 / sqrt(AD);
    for (int i = 0; i < AT; i++) {
        for (int h = 0; h < AH; h++) {
            int kvh = h / (AH / AKV);
            double sc[AT], m = -INFINITY, sum = 0;
            for (int j = 0; j <= i; j++) {
                sc[j] =
                    scale * dot_d(c.qkv + i * ALD + h * AD, c.qkv + j * ALD + AQ + kvh * AD, AD);
                m = fmax(m, sc[j]);
            }
            for (int j = 0; j <= i; j++) sum += exp(sc[j] - m);
            cr_expect(fabs(c.lse[i * AH + h] - (m + log(sum))) < 1e-5, "lse[%d,%d]", i, h);
            for (int d = 0; d < AD; d++) {
                double o = 0;
                for (int j = 0; j <= i; j++)
                    o += exp(sc[j] - m) / sum * c.qkv[j * ALD + AQ + AKV * AD + kvh * AD + d];
                cr_expect(fabs(c.out[i * AQ + h * AD + d] - o) < 1e-5, "out[%d,%d,%d] %g want %g",
                          i, h, d, c.out[i * AQ + h * AD + d], o);
            }
        }
    }
    attn_teardown(&c);
}

Test(exec_kernels, attention_backward_matches_finite_differences) {
    attn_case c = attn_setup(7);
    uint64_t rng = 70;
    float *dqkv = zeros(AT * ALD);
    attn_full_bwd(&c, dqkv);
    /* the q, k and v columns of qkv, one at a time */
    const char *names[3] = {"q", "k", "v"};
    const int col0[3] = {0, AQ, AQ + AKV * AD}, width[3] = {AQ, AKV * AD, AKV * AD};
    for (int part = 0; part < 3; part++) {
        float *mask = zeros(AT * ALD);
        for (int t = 0; t < AT; t++)
            for (int i = col0[part]; i < col0[part] + width[part]; i++) mask[t * ALD + i] = 1;
        double e =
            directional_error_masked(attn_objective, &c, c.qkv, dqkv, AT * ALD, 1e-2f, &rng, mask);
        cr_expect(e < FD_TOL, "attention d%s: FD rel error %.2e", names[part], e);
        free(mask);
    }
    free(dqkv);
    attn_teardown(&c);
}

/* Tensor parallelism: each shard holds `per` query heads and their kv heads (per = 1 is the case
 * tp > kv_heads, where shards of one group share a replicated kv head). */
Test(exec_kernels, attention_head_shards_reassemble) {
    attn_case c = attn_setup(8);
    float *dfull = zeros(AT * ALD);
    attn_full_bwd(&c, dfull);
    for (int per = 1; per <= 2; per++) {
        float *out = zeros(AT * AQ), *lse = zeros(AT * per), *dqkv = zeros(AT * ALD);
        for (int h0 = 0; h0 < AH; h0 += per) {
            int kv0 = h0 / (AH / AKV), kvn = per >= AH / AKV ? per / (AH / AKV) : 1;
            ts_attn_shape s = {.Tq = AT,
                               .Tk = AT,
                               .H = per,
                               .KV = kvn,
                               .D = AD,
                               .ldq = ALD,
                               .ldk = ALD,
                               .ldv = ALD,
                               .ldo = AQ,
                               .q_pos = c.pos,
                               .k_pos = c.pos};
            const float *q = c.qkv + h0 * AD, *k = c.qkv + AQ + kv0 * AD;
            const float *v = c.qkv + AQ + AKV * AD + kv0 * AD;
            ts_attention_fwd(out + h0 * AD, lse, q, k, v, &s, c.scratch);
            for (int t = 0; t < AT; t++)
                for (int h = 0; h < per; h++)
                    cr_expect_eq(lse[t * per + h], c.lse[t * AH + h0 + h], "lse per=%d", per);
            float *dq = dqkv + h0 * AD, *dk = dqkv + AQ + kv0 * AD;
            float *dv = dqkv + AQ + AKV * AD + kv0 * AD;
            ts_attention_bwd(dq, dk, dv, c.g + h0 * AD, q, k, v, out + h0 * AD, lse, &s);
        }
        cr_expect(max_abs_diff(out, c.out, AT * AQ) == 0, "head shards of %d: out differs", per);
        cr_expect(max_abs_diff(dqkv, dfull, AT * ALD) < 1e-5, "head shards of %d: dqkv off by %g",
                  per, max_abs_diff(dqkv, dfull, AT * ALD));
        free(out), free(lse), free(dqkv);
    }
    free(dfull);
    attn_teardown(&c);
}

/* Context parallelism with K/V all-gathered: each rank's queries, at their own positions, attend
 * all keys. Contiguous halves, and Megatron's load-balanced split (chunks {0, 3} and {1, 2} of 4).
 */
Test(exec_kernels, attention_query_chunks_with_positions_reassemble) {
    attn_case c = attn_setup(9);
    float *dfull = zeros(AT * ALD);
    attn_full_bwd(&c, dfull);
    const int splits[2][2][AT / 2] = {{{0, 1, 2, 3}, {4, 5, 6, 7}}, {{0, 1, 6, 7}, {2, 3, 4, 5}}};
    for (int sp = 0; sp < 2; sp++) {
        float *out = zeros(AT * AQ), *dqkv = zeros(AT * ALD);
        for (int rank = 0; rank < 2; rank++) {
            const int *rows = splits[sp][rank];
            enum { TQ = AT / 2 };
            float *q = zeros(TQ * AQ), *o = zeros(TQ * AQ), *g = zeros(TQ * AQ),
                  *lse = zeros(TQ * AH);
            float *dq = zeros(TQ * AQ);
            for (int i = 0; i < TQ; i++) {
                memcpy(q + i * AQ, c.qkv + rows[i] * ALD, AQ * sizeof(float));
                memcpy(g + i * AQ, c.g + rows[i] * AQ, AQ * sizeof(float));
            }
            /* keys up to the last query: the K/V prefix [0, q_last] */
            ts_attn_shape s = {.Tq = TQ,
                               .Tk = rows[TQ - 1] + 1,
                               .H = AH,
                               .KV = AKV,
                               .D = AD,
                               .ldq = AQ,
                               .ldk = ALD,
                               .ldv = ALD,
                               .ldo = AQ,
                               .q_pos = rows,
                               .k_pos = c.pos};
            ts_attention_fwd(o, lse, q, c.qkv + AQ, c.qkv + AQ + AKV * AD, &s, c.scratch);
            ts_attention_bwd(dq, dqkv + AQ, dqkv + AQ + AKV * AD, g, q, c.qkv + AQ,
                             c.qkv + AQ + AKV * AD, o, lse, &s);
            for (int i = 0; i < TQ; i++) {
                memcpy(out + rows[i] * AQ, o + i * AQ, AQ * sizeof(float));
                memcpy(dqkv + rows[i] * ALD, dq + i * AQ, AQ * sizeof(float));
            }
            free(q), free(o), free(g), free(lse), free(dq);
        }
        cr_expect(max_abs_diff(out, c.out, AT * AQ) == 0, "split %d: out differs", sp);
        cr_expect(max_abs_diff(dqkv, dfull, AT * ALD) < 1e-5, "split %d: dqkv off by %g", sp,
                  max_abs_diff(dqkv, dfull, AT * ALD));
        free(out), free(dqkv);
    }
    free(dfull);
    attn_teardown(&c);
}

/* One call over a batch of sequences gives what one call per sequence gives, bit for bit, and a
 * query sees only its own sequence's keys (unbatched, rows at equal positions would see each
 * other's keys). */
Test(exec_kernels, attention_batch_is_its_sequences) {
    attn_case c = attn_setup(12);
    enum { TS = AT / 2 };
    int pos[AT];
    for (int t = 0; t < AT; t++) pos[t] = t % TS;
    const float *q = c.qkv, *k = c.qkv + AQ, *v = c.qkv + AQ + AKV * AD;
    ts_attn_shape s = {.Tq = TS, .Tk = TS, .H = AH, .KV = AKV, .D = AD, .ldq = ALD, .ldk = ALD, .ldv = ALD,
                       .ldo = AQ, .q_pos = pos, .k_pos = pos, .batch = 2};
    float *out = zeros(AT * AQ), *lse = zeros(AT * AH), *dqkv = zeros(AT * ALD);
    ts_attention_fwd(out, lse, q, k, v, &s, c.scratch);
    ts_attention_bwd(dqkv, dqkv + AQ, dqkv + AQ + AKV * AD, c.g, q, k, v, out, lse, &s);
    float *out1 = zeros(AT * AQ), *lse1 = zeros(AT * AH), *dqkv1 = zeros(AT * ALD);
    ts_attn_shape one = s;
    one.batch = 1;
    for (int b = 0; b < 2; b++) {
        size_t r = (size_t)b * TS;
        one.q_pos = one.k_pos = pos + r;
        ts_attention_fwd(out1 + r * AQ, lse1 + r * AH, q + r * ALD, k + r * ALD, v + r * ALD, &one, c.scratch);
        float *d = dqkv1 + r * ALD;
        ts_attention_bwd(d, d + AQ, d + AQ + AKV * AD, c.g + r * AQ, q + r * ALD, k + r * ALD, v + r * ALD,
                         out1 + r * AQ, lse1 + r * AH, &one);
    }
    cr_expect(max_abs_diff(out, out1, AT * AQ) == 0 && max_abs_diff(lse, lse1, AT * AH) == 0, "forward differs");
    cr_expect(max_abs_diff(dqkv, dqkv1, AT * ALD) == 0, "backward differs by %g", max_abs_diff(dqkv, dqkv1, AT * ALD));
    ts_attn_shape flat = s;
    flat.Tq = flat.Tk = AT, flat.batch = 0; /* 0 counts as 1: all 8 rows one sequence */
    ts_attention_fwd(out1, lse1, q, k, v, &flat, c.scratch);
    cr_expect(max_abs_diff(out + TS * AQ, out1 + TS * AQ, TS * AQ) > 1e-3, "the second sequence saw the first's keys");
    free(out), free(lse), free(dqkv), free(out1), free(lse1), free(dqkv1);
    attn_teardown(&c);
}

/* Ring attention: keys in two chunks, each attended separately, merged by log-sum-exp; the
 * backward of each chunk, given the merged out and lse, is that chunk's share of the full one. */
Test(exec_kernels, attention_key_chunks_merge_by_lse) {
    attn_case c = attn_setup(10);
    float *dfull = zeros(AT * ALD);
    attn_full_bwd(&c, dfull);
    enum { TK = AT / 2 };
    float *out = zeros(AT * AQ), *lse = zeros(AT * AH), *out2 = zeros(AT * AQ),
          *lse2 = zeros(AT * AH);
    ts_attn_shape s = {.Tq = AT,
                       .Tk = TK,
                       .H = AH,
                       .KV = AKV,
                       .D = AD,
                       .ldq = ALD,
                       .ldk = ALD,
                       .ldv = ALD,
                       .ldo = AQ,
                       .q_pos = c.pos,
                       .k_pos = c.pos};
    ts_attention_fwd(out, lse, c.qkv, c.qkv + AQ, c.qkv + AQ + AKV * AD, &s, c.scratch);
    s.k_pos = c.pos + TK;
    ts_attention_fwd(out2, lse2, c.qkv, c.qkv + TK * ALD + AQ, c.qkv + TK * ALD + AQ + AKV * AD, &s,
                     c.scratch);
    cr_expect(lse2[0] == -INFINITY && out2[0] == 0, "a query that sees no key: lse -inf, out 0");
    ts_attention_merge(out, lse, out2, lse2, AT, AH, AD, AQ);
    cr_expect(max_abs_diff(out, c.out, AT * AQ) < 1e-6, "merged out off by %g",
              max_abs_diff(out, c.out, AT * AQ));
    cr_expect(max_abs_diff(lse, c.lse, AT * AH) < 1e-6, "merged lse off by %g",
              max_abs_diff(lse, c.lse, AT * AH));

    float *dqkv = zeros(AT * ALD);
    for (int chunk = 0; chunk < 2; chunk++) {
        s.k_pos = c.pos + chunk * TK;
        float *kv = c.qkv + chunk * TK * ALD, *dkv = dqkv + chunk * TK * ALD;
        ts_attention_bwd(dqkv, dkv + AQ, dkv + AQ + AKV * AD, c.g, c.qkv, kv + AQ,
                         kv + AQ + AKV * AD, c.out, c.lse, &s);
    }
    cr_expect(max_abs_diff(dqkv, dfull, AT * ALD) < 1e-5, "chunked backward off by %g",
              max_abs_diff(dqkv, dfull, AT * ALD));
    free(dfull), free(out), free(lse), free(out2), free(lse2), free(dqkv);
    attn_teardown(&c);
}

/* ---- SwiGLU MLP ------------------------------------------------------------------------------ */

enum { MT = 5, MC = 6, MF = 10, MF1 = 4 }; /* shards: columns [0, 4) and [4, 10) */

typedef struct {
    float *x, *wg, *wu, *wd, *gate, *up, *act, *out, *g;
} mlp_case;

static double mlp_objective(void *ctx) {
    mlp_case *c = ctx;
    ts_mlp_fwd(c->out, c->gate, c->up, c->act, c->x, c->wg, c->wu, c->wd, MT, MC, MF);
    return dot_d(c->g, c->out, MT * MC);
}

Test(exec_kernels, mlp_backward_and_column_shards) {
    uint64_t rng = 11;
    mlp_case c = {.x = randn_buf(MT * MC, &rng, 1),
                  .wg = randn_buf(MF * MC, &rng, 0.5f),
                  .wu = randn_buf(MF * MC, &rng, 0.5f),
                  .wd = randn_buf(MC * MF, &rng, 0.5f),
                  .gate = zeros(MT * MF),
                  .up = zeros(MT * MF),
                  .act = zeros(MT * MF),
                  .out = zeros(MT * MC),
                  .g = randn_buf(MT * MC, &rng, 1)};
    mlp_objective(&c);
    float *dx = zeros(MT * MC), *dwg = zeros(MF * MC), *dwu = zeros(MF * MC), *dwd = zeros(MC * MF);
    float *scratch = zeros(2 * MT * MF);
    ts_mlp_bwd(dx, dwg, dwu, dwd, c.g, c.x, c.gate, c.up, c.act, c.wg, c.wu, c.wd, MT, MC, MF,
               scratch);
    double e[4] = {directional_error(mlp_objective, &c, c.x, dx, MT * MC, 1e-2f, &rng),
                   directional_error(mlp_objective, &c, c.wg, dwg, MF * MC, 1e-2f, &rng),
                   directional_error(mlp_objective, &c, c.wu, dwu, MF * MC, 1e-2f, &rng),
                   directional_error(mlp_objective, &c, c.wd, dwd, MC * MF, 1e-2f, &rng)};
    cr_expect(e[0] < FD_TOL && e[1] < FD_TOL && e[2] < FD_TOL && e[3] < FD_TOL,
              "mlp: FD rel error x %.2e gate %.2e up %.2e down %.2e", e[0], e[1], e[2], e[3]);

    /* Megatron's split: gate/up rows [f0, f0+F), down columns [f0, f0+F); partial outputs and
     * input gradients sum, weight gradients are slices. */
    mlp_objective(&c);
    float *sum = zeros(MT * MC), *dxsum = zeros(MT * MC);
    const int f0s[2] = {0, MF1}, fs[2] = {MF1, MF - MF1};
    for (int r = 0; r < 2; r++) {
        int f0 = f0s[r], F = fs[r];
        float *wd = zeros(MC * F), *dwd_s = zeros(MC * F), *dwg_s = zeros(F * MC),
              *dwu_s = zeros(F * MC);
        for (int i = 0; i < MC; i++) memcpy(wd + i * F, c.wd + i * MF + f0, F * sizeof(float));
        float *gate = zeros(MT * F), *up = zeros(MT * F), *act = zeros(MT * F),
              *out = zeros(MT * MC);
        ts_mlp_fwd(out, gate, up, act, c.x, c.wg + f0 * MC, c.wu + f0 * MC, wd, MT, MC, F);
        for (int i = 0; i < MT * MC; i++) sum[i] += out[i];
        ts_mlp_bwd(dxsum, dwg_s, dwu_s, dwd_s, c.g, c.x, gate, up, act, c.wg + f0 * MC,
                   c.wu + f0 * MC, wd, MT, MC, F, scratch);
        cr_expect(max_abs_diff(dwg_s, dwg + f0 * MC, F * MC) < 1e-5, "shard %d: dw_gate", r);
        cr_expect(max_abs_diff(dwu_s, dwu + f0 * MC, F * MC) < 1e-5, "shard %d: dw_up", r);
        for (int i = 0; i < MC; i++)
            cr_expect(max_abs_diff(dwd_s + i * F, dwd + i * MF + f0, F) < 1e-5, "shard %d: dw_down",
                      r);
        free(wd), free(dwd_s), free(dwg_s), free(dwu_s), free(gate), free(up), free(act), free(out);
    }
    cr_expect(max_abs_diff(sum, c.out, MT * MC) < 1e-5, "shard outputs do not sum to the MLP's");
    cr_expect(max_abs_diff(dxsum, dx, MT * MC) < 1e-5, "shard dx do not sum to the MLP's");
    free(c.x), free(c.wg), free(c.wu), free(c.wd), free(c.gate), free(c.up), free(c.act),
        free(c.out);
    free(c.g), free(dx), free(dwg), free(dwu), free(dwd), free(scratch), free(sum), free(dxsum);
}

/* ---- MoE ------------------------------------------------------------------------------------- */

enum { RT = 6, RE = 5, RK = 2 };

typedef struct {
    float *logits, *probs, *weight, *g;
    int *expert;
} router_case;

static double router_objective(void *ctx) {
    router_case *c = ctx;
    ts_router_fwd(c->probs, c->expert, c->weight, c->logits, RT, RE, RK, 0, 0);
    return dot_d(c->g, c->weight, RT * RK);
}

Test(exec_kernels, router_selects_top_k_and_backward_matches_fd) {
    uint64_t rng = 12;
    int expert[RT * RK];
    router_case c = {.logits = randn_buf(RT * RE, &rng, 1),
                     .probs = zeros(RT * RE),
                     .weight = zeros(RT * RK),
                     .g = randn_buf(RT * RK, &rng, 1),
                     .expert = expert};
    router_objective(&c);
    for (int t = 0; t < RT; t++) {
        const float *p = c.probs + t * RE;
        double psum = 0;
        for (int e = 0; e < RE; e++) psum += p[e];
        cr_expect(fabs(psum - 1) < 1e-6, "probs row %d sums to %g", t, psum);
        int a = expert[t * RK], b = expert[t * RK + 1];
        cr_expect(a != b && p[a] >= p[b], "row %d: experts %d %d not in order", t, a, b);
        for (int e = 0; e < RE; e++)
            if (e != a && e != b)
                cr_expect(p[e] <= p[b], "row %d: expert %d beats the top-k", t, e);
        cr_expect(fabs(c.weight[t * RK] - p[a] / (p[a] + p[b])) < 1e-6, "row %d weight", t);
        cr_expect(fabs(c.weight[t * RK] + c.weight[t * RK + 1] - 1) < 1e-6, "row %d weights", t);
    }
    float *dlogits = zeros(RT * RE);
    ts_router_bwd(dlogits, c.g, c.probs, expert, RT, RE, RK);
    double e = directional_error(router_objective, &c, c.logits, dlogits, RT * RE, 1e-3f, &rng);
    cr_expect(e < FD_TOL, "router: FD rel error %.2e", e);

    float tie[4] = {0.5f, 1.0f, 1.0f, 1.0f}, tp[4], tw[2];
    int te[2];
    ts_router_fwd(tp, te, tw, tie, 1, 4, 2, 0, 0);
    cr_expect(te[0] == 1 && te[1] == 2, "ties go to the lower index: got %d %d", te[0], te[1]);
    free(c.logits), free(c.probs), free(c.weight), free(c.g), free(dlogits);
}

Test(exec_kernels, moe_plan_gather_combine) {
    enum { T = 5, E = 3, K = 2, C = 4 };
    const int expert[T * K] = {2, 0, 0, 1, 2, 1, 0, 2, 1, 0};
    int offset[E + 1], slot_token[T * K], slot[T * K];
    ts_moe_plan(offset, slot_token, slot, expert, T, E, K);
    const int want_off[E + 1] = {0, 4, 7, 10}, want_tok[T * K] = {0, 1, 3, 4, 1, 2, 4, 0, 2, 3};
    cr_assert(memcmp(offset, want_off, sizeof offset) == 0, "offsets %d %d %d %d", offset[0],
              offset[1], offset[2], offset[3]);
    cr_assert(memcmp(slot_token, want_tok, sizeof slot_token) == 0, "slot tokens");
    for (int i = 0; i < T * K; i++) {
        int s = slot[i];
        cr_expect(slot_token[s] == i / K && s >= offset[expert[i]] && s < offset[expert[i] + 1],
                  "assignment %d in slot %d", i, s);
    }

    uint64_t rng = 13;
    float *x = randn_buf(T * C, &rng, 1), *xe = zeros(T * K * C), *dx = zeros(T * C);
    ts_moe_gather_fwd(xe, x, slot_token, T * K, C);
    for (int s = 0; s < T * K; s++)
        cr_expect(memcmp(xe + s * C, x + slot_token[s] * C, C * sizeof(float)) == 0);
    ts_moe_gather_bwd(dx, xe, slot_token, T * K, C); /* each token appears K times */
    for (int i = 0; i < T * C; i++) cr_expect(fabs(dx[i] - K * x[i]) < 1e-6, "gather bwd");

    float *ye = randn_buf(T * K * C, &rng, 1), *w = randn_buf(T * K, &rng, 1);
    float *out = zeros(T * C), *g = randn_buf(T * C, &rng, 1);
    float *dye = zeros(T * K * C), *dw = zeros(T * K);
    ts_moe_combine_fwd(out, ye, w, slot, T, K, C);
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) {
            double want = 0;
            for (int a = 0; a < K; a++) want += (double)w[t * K + a] * ye[slot[t * K + a] * C + c];
            cr_expect(fabs(out[t * C + c] - want) < 1e-6, "combine out[%d,%d]", t, c);
        }
    ts_moe_combine_bwd(dye, dw, g, ye, w, slot, T, K, C);
    /* gather and combine are linear in each input: their gradients have closed forms */
    for (int t = 0; t < T; t++)
        for (int a = 0; a < K; a++) {
            int s = slot[t * K + a];
            cr_expect(fabs(dw[t * K + a] - dot_d(g + t * C, ye + s * C, C)) < 1e-5, "dweight");
            for (int c = 0; c < C; c++)
                cr_expect(fabs(dye[s * C + c] - w[t * K + a] * g[t * C + c]) < 1e-6, "dye");
        }
    free(x), free(xe), free(dx), free(ye), free(w), free(out), free(g), free(dye), free(dw);
}

/* ---- Vocab-parallel cross-entropy ------------------------------------------------------------ */

enum { CT = 4, CV = 11 };

typedef struct {
    float *logits, *max, *sumexp, *target, *loss;
    const int *targets;
} ce_case;

static double ce_objective(void *ctx) {
    ce_case *c = ctx;
    ts_ce_max(c->max, c->logits, CT, CV);
    ts_ce_sums(c->sumexp, c->target, c->logits, c->max, c->targets, 0, CT, CV);
    ts_ce_loss(c->loss, c->max, c->sumexp, c->target, CT);
    double s = 0;
    for (int t = 0; t < CT; t++) s += c->loss[t];
    return s / CT;
}

Test(exec_kernels, cross_entropy_vocab_shards_and_backward) {
    uint64_t rng = 14;
    const int targets[CT] = {0, 10, 4, 7};
    ce_case c = {.logits = randn_buf(CT * CV, &rng, 3),
                 .max = zeros(CT),
                 .sumexp = zeros(CT),
                 .target = zeros(CT),
                 .loss = zeros(CT),
                 .targets = targets};
    ce_objective(&c);
    for (int t = 0; t < CT; t++) {
        double s = 0;
        for (int j = 0; j < CV; j++) s += exp((double)c.logits[t * CV + j]);
        double want = log(s) - c.logits[t * CV + targets[t]];
        cr_expect(fabs(c.loss[t] - want) < 1e-5, "loss[%d] %g want %g", t, c.loss[t], want);
    }
    float *dlogits = zeros(CT * CV);
    ts_ce_bwd(dlogits, c.logits, c.max, c.sumexp, targets, 0, CT, CV, 1.0f / CT);
    double e = directional_error(ce_objective, &c, c.logits, dlogits, CT * CV, 1e-2f, &rng);
    cr_expect(e < FD_TOL, "cross-entropy: FD rel error %.2e", e);
    ce_objective(&c);

    /* Three shards [0, 3), [3, 8), [8, 11), reduced as the executor would. */
    const int v0[4] = {0, 3, 8, CV};
    float gmax[CT], gsum[CT] = {0}, gtarget[CT] = {0}, part_max[CT], part_sum[CT], part_tgt[CT];
    float *shard = zeros(CT * CV), *dshard = zeros(CT * CV);
    for (int t = 0; t < CT; t++) gmax[t] = -INFINITY;
    for (int r = 0; r < 3; r++) {
        int Vs = v0[r + 1] - v0[r];
        for (int t = 0; t < CT; t++)
            memcpy(shard + t * Vs, c.logits + t * CV + v0[r], Vs * sizeof(float));
        ts_ce_max(part_max, shard, CT, Vs);
        for (int t = 0; t < CT; t++) gmax[t] = fmaxf(gmax[t], part_max[t]);
    }
    for (int r = 0; r < 3; r++) {
        int Vs = v0[r + 1] - v0[r];
        for (int t = 0; t < CT; t++)
            memcpy(shard + t * Vs, c.logits + t * CV + v0[r], Vs * sizeof(float));
        ts_ce_sums(part_sum, part_tgt, shard, gmax, targets, v0[r], CT, Vs);
        for (int t = 0; t < CT; t++) gsum[t] += part_sum[t], gtarget[t] += part_tgt[t];
    }
    float loss[CT];
    ts_ce_loss(loss, gmax, gsum, gtarget, CT);
    cr_expect(max_abs_diff(loss, c.loss, CT) < 1e-5, "sharded loss off by %g",
              max_abs_diff(loss, c.loss, CT));
    for (int r = 0; r < 3; r++) {
        int Vs = v0[r + 1] - v0[r];
        for (int t = 0; t < CT; t++)
            memcpy(shard + t * Vs, c.logits + t * CV + v0[r], Vs * sizeof(float));
        ts_ce_bwd(shard, shard, gmax, gsum, targets, v0[r], CT, Vs, 1.0f / CT); /* in place */
        for (int t = 0; t < CT; t++)
            memcpy(dshard + t * CV + v0[r], shard + t * Vs, Vs * sizeof(float));
    }
    cr_expect(max_abs_diff(dshard, dlogits, CT * CV) < 1e-6, "sharded dlogits off by %g",
              max_abs_diff(dshard, dlogits, CT * CV));
    free(c.logits), free(c.max), free(c.sumexp), free(c.target), free(c.loss), free(dlogits);
    free(shard), free(dshard);
}

/* ---- AdamW ----------------------------------------------------------------------------------- */

Test(exec_kernels, adamw_matches_double_precision_formula) {
    uint64_t rng = 15;
    enum { N = 50, STEPS = 3 };
    float *p = randn_buf(N, &rng, 1), *m = zeros(N), *v = zeros(N);
    double pd[N], md[N] = {0}, vd[N] = {0};
    for (int i = 0; i < N; i++) pd[i] = p[i];
    const double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
    for (int step = 1; step <= STEPS; step++) {
        float *g = randn_buf(N, &rng, 1);
        ts_adamw(p, m, v, g, N, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd, step);
        for (int i = 0; i < N; i++) {
            md[i] = b1 * md[i] + (1 - b1) * g[i];
            vd[i] = b2 * vd[i] + (1 - b2) * (double)g[i] * g[i];
            double mh = md[i] / (1 - pow(b1, step)), vh = vd[i] / (1 - pow(b2, step));
            pd[i] -= lr * (mh / (sqrt(vh) + eps) + wd * pd[i]);
        }
        free(g);
    }
    for (int i = 0; i < N; i++)
        cr_expect(fabs(p[i] - pd[i]) < 1e-6, "p[%d] %g want %g", i, p[i], pd[i]);
    free(p), free(m), free(v);
}

/* ---- Reference model ------------------------------------------------------------------------- */

static ts_model zoo_model(const char *name) {
    ts_model m;
    ts_error_clear();
    cr_assert_eq(ts_model_load(name, &m), TS_OK, "%s: %s", name, ts_error_message());
    return m;
}

static void ref_init_ok(ts_ref *r, const ts_model *m, int seq, int batch, uint64_t seed) {
    ts_error_clear();
    cr_assert_eq(ts_ref_init(r, m, seq, batch, seed), TS_OK, "%s: %s", m->name, ts_error_message());
}

Test(exec_reference, parameter_count_matches_the_model_count) {
    const char *names[2] = {"tiny", "tiny-moe"};
    for (int i = 0; i < 2; i++) {
        for (int tied = 0; tied < 2; tied++) {
            ts_model m = zoo_model(names[i]);
            m.tied_embeddings = tied;
            ts_param_count pc;
            ts_model_params(&m, &pc);
            ts_ref r;
            ref_init_ok(&r, &m, 4, 1, 1);
            cr_expect_eq((double)r.n_params, pc.total, "%s tied=%d: %zu parameters, count.c %.0f",
                         names[i], tied, r.n_params, pc.total);
            ts_ref_free(&r);
        }
    }
}

Test(exec_reference, init_is_index_addressable) {
    ts_model m = zoo_model("tiny-moe");
    m.tied_embeddings = 1;
    ts_ref r;
    ref_init_ok(&r, &m, 4, 1, 99);
    for (int l = 0; l < m.layers; l += m.layers - 1) {
        for (int k = TS_REF_ATTN_NORM; k < TS_REF_KIND_COUNT; k++) {
            int64_t shape[3];
            int dims = ts_ref_tensor_shape(&m, l, (ts_ref_kind)k, shape);
            cr_assert(dims > 0, "layer %d %s missing", l, ts_ref_kind_names[k]);
            int64_t n = 1;
            for (int d = 0; d < dims; d++) n *= shape[d];
            const float *w = ts_ref_tensor(&r.params, l, (ts_ref_kind)k);
            for (int64_t i = 0; i < n; i += n / 7 + 1)
                cr_expect_eq(w[i], ts_ref_init_value(99, l, (ts_ref_kind)k, i), "%s[%ld]",
                             ts_ref_kind_names[k], (long)i);
        }
    }
    const float *e = r.params.embed;
    size_t n = (size_t)m.vocab * m.hidden;
    double s = 0, ss = 0;
    for (size_t i = 0; i < n; i++) s += e[i], ss += (double)e[i] * e[i];
    double mean = s / n, sd = sqrt(ss / n - mean * mean);
    cr_expect(fabs(mean) < 1e-3 && fabs(sd - TS_REF_INIT_STD) < 1e-3, "embed mean %g sd %g", mean,
              sd);
    cr_expect(r.params.lm_head == r.params.embed, "tied head is the embedding");
    cr_expect(r.params.layer[0].attn_norm[0] == 1.0f, "norms start at 1");
    cr_expect(ts_ref_init_value(99, 0, TS_REF_QKV, 5) != ts_ref_init_value(100, 0, TS_REF_QKV, 5));
    ts_ref_free(&r);
}

Test(exec_reference, init_rejects_unsupported_architectures) {
    ts_model m = zoo_model("tiny");
    m.activation = TS_ACT_GELU;
    ts_ref r;
    ts_error_clear();
    cr_assert_eq(ts_ref_init(&r, &m, 4, 1, 1), TS_ERR_INPUT);
    cr_expect_str_eq(ts_error_message(),
                     "model tiny: the reference cannot run it: activation must be swiglu");
    cr_expect_null(r.param_mem);
    m = zoo_model("tiny");
    m.attn_gate = 1; /* planned and counted, not executed */
    ts_error_clear();
    cr_assert_eq(ts_ref_init(&r, &m, 4, 1, 1), TS_ERR_INPUT);
    cr_expect_str_eq(ts_error_message(),
                     "model tiny: the reference cannot run it: the attention output gate is not supported by the "
                     "executor");
    m = zoo_model("tiny");
    ts_error_clear();
    cr_assert_eq(ts_ref_init(&r, &m, 0, 1, 1), TS_ERR_INPUT);
    cr_expect_str_eq(ts_error_message(),
                     "reference: seq and batch must be positive, got seq 0 batch 1");
}

/* The mean loss of a forward pass, summed in double from the per-token losses. The loss of an
 * MoE model is smooth only while the top-k routing stays put, so the forward also notes whether
 * any token's experts differ from `routing` (the unperturbed choice). */
typedef struct {
    ts_ref *r;
    const int *tokens;
    int *routing; /* the experts of every token in every MoE layer, layer by layer */
    int rerouted;
} ref_case;

static size_t routing_size(const ts_ref *r) {
    size_t n = 0;
    for (int l = 0; l < r->model.layers; l++)
        if (ts_model_layer_is_moe(&r->model, l))
            n += (size_t)r->batch * r->seq * r->model.moe.top_k;
    return n;
}

/* Writes the current routing to `out` (compare = 0) or returns whether it differs (compare = 1). */
static int routing_pass(const ts_ref *r, int *out, int compare) {
    size_t at = 0, per = (size_t)r->batch * r->seq * r->model.moe.top_k;
    int differs = 0;
    for (int l = 0; l < r->model.layers; l++) {
        if (!ts_model_layer_is_moe(&r->model, l)) continue;
        if (compare)
            differs |= memcmp(out + at, r->acts[l].expert, per * sizeof *out) != 0;
        else
            memcpy(out + at, r->acts[l].expert, per * sizeof *out);
        at += per;
    }
    return differs;
}

static double ref_objective(void *ctx) {
    ref_case *c = ctx;
    ts_ref_forward(c->r, c->tokens);
    c->rerouted |= routing_pass(c->r, c->routing, 1);
    size_t n = (size_t)c->r->batch * c->r->seq;
    double s = 0;
    for (size_t i = 0; i < n; i++) s += c->r->losses[i];
    return s / (double)n;
}

/* The error of the directional derivative of the loss along u at w (n floats, gradient g),
 * relative to max(|<g, u>|, |central difference|, |g| |u| / sqrt(n)) -- the last being the typical
 * size of <g, u> for a random u, so a direction nearly orthogonal to g by chance does not inflate
 * the error. eps halves (at most 12 times) while the perturbation changes the routing. */
static double model_fd_error(ref_case *c, float *w, const float *g, const float *u, size_t n,
                             float eps) {
    float *w0 = copy_buf(w, n);
    double analytic = dot_d(g, u, n), numeric = 0;
    int tries = 0;
    do {
        c->rerouted = 0;
        for (size_t i = 0; i < n; i++) w[i] = w0[i] + eps * u[i];
        double fp = ref_objective(c);
        for (size_t i = 0; i < n; i++) w[i] = w0[i] - eps * u[i];
        double fm = ref_objective(c);
        numeric = (fp - fm) / (2.0 * (double)eps);
        eps /= 2;
    } while (c->rerouted && ++tries < 12);
    memcpy(w, w0, n * sizeof *w);
    free(w0);
    cr_assert(!c->rerouted, "no step keeps the routing fixed");
    double typical = sqrt(dot_d(g, g, n) * dot_d(u, u, n) / (double)n);
    return fabs(analytic - numeric) / fmax(typical, fmax(fabs(analytic), fabs(numeric)));
}

/* Finite differences on tiny-sized models shrunk to seq 16, batch 2: the directional derivative
 * of the loss along a random direction in each tensor of the first and last layers and each
 * model-wide tensor (steps of 1% of the tensor's rms), and single coordinates: the largest
 * gradient of several layer-0 tensors. The router's whole-tensor gradient is ~100x smaller than
 * the matrices' and its step is capped by the routing, so fp32 rounding of the loss sets its
 * error floor near 1e-2; its single coordinate is held to the common 1e-2. */
static void check_model_gradients(ts_model m) {
    enum { SEQ = 16, BATCH = 2 };
    ts_ref r;
    ref_init_ok(&r, &m, SEQ, BATCH, 5);
    uint64_t rng = 17;
    int tokens[BATCH * (SEQ + 1)];
    for (int i = 0; i < BATCH * (SEQ + 1); i++)
        tokens[i] = (int)(test_next_u64(&rng) % (uint64_t)m.vocab);
    int *routing = calloc(routing_size(&r) + 1, sizeof *routing);
    cr_assert_not_null(routing);
    ref_case c = {&r, tokens, routing, 0};
    ts_ref_forward(&r, tokens);
    routing_pass(&r, routing, 0);
    ts_ref_zero_grad(&r);
    ts_ref_backward(&r, 1.0f);

    for (int l = 0; l < m.layers; l += m.layers - 1) {
        for (int k = 0; k < TS_REF_KIND_COUNT; k++) {
            int64_t shape[3];
            int dims = ts_ref_tensor_shape(&m, l, (ts_ref_kind)k, shape);
            if (dims == 0 || (k <= TS_REF_LM_HEAD && l != 0)) continue;
            size_t n = 1;
            for (int d = 0; d < dims; d++) n *= (size_t)shape[d];
            float *w = ts_ref_tensor(&r.params, l, (ts_ref_kind)k);
            const float *g = ts_ref_tensor(&r.grads, l, (ts_ref_kind)k);
            float *u = randn_buf(n, &rng, 1.0f);
            float eps = (float)(1e-2 * sqrt(dot_d(w, w, n) / (double)n));
            double e = model_fd_error(&c, w, g, u, n, eps);
            double tol = k == TS_REF_ROUTER ? 2e-2 : 5e-3;
            cr_expect(e < tol, "%s layer %d %s: FD rel error %.2e", m.name, l, ts_ref_kind_names[k],
                      e);
            free(u);
        }
    }

    const ts_ref_kind singles[6] = {TS_REF_EMBED, TS_REF_QKV,  TS_REF_ATTN_OUT,
                                    TS_REF_GATE,  TS_REF_DOWN, TS_REF_ROUTER};
    for (int k = 0; k < 6; k++) {
        int64_t shape[3];
        int dims = ts_ref_tensor_shape(&m, 0, singles[k], shape);
        if (dims == 0) continue;
        size_t n = 1, best = 0;
        for (int d = 0; d < dims; d++) n *= (size_t)shape[d];
        float *w = ts_ref_tensor(&r.params, 0, singles[k]);
        const float *g = ts_ref_tensor(&r.grads, 0, singles[k]);
        for (size_t i = 0; i < n; i++)
            if (fabsf(g[i]) > fabsf(g[best])) best = i;
        const float one = 1.0f;
        double e = model_fd_error(&c, w + best, g + best, &one, 1, 1e-2f);
        cr_expect(e < 1e-2, "%s layer 0 %s[%zu]: grad %.4e, FD rel error %.2e", m.name,
                  ts_ref_kind_names[singles[k]], best, g[best], e);
    }
    free(routing);
    ts_ref_free(&r);
}

Test(exec_reference, dense_gradients_match_finite_differences) {
    check_model_gradients(zoo_model("tiny"));
}

Test(exec_reference, tied_gradients_match_finite_differences) {
    ts_model m = zoo_model("tiny");
    m.tied_embeddings = 1;
    m.layers = 2;
    check_model_gradients(m);
}

Test(exec_reference, moe_gradients_match_finite_differences) {
    check_model_gradients(zoo_model("tiny-moe"));
}

Test(exec_reference, micro_batches_accumulate_to_the_full_batch_gradient) {
    enum { SEQ = 16 };
    ts_model m = zoo_model("tiny-moe");
    ts_ref full, half;
    ref_init_ok(&full, &m, SEQ, 4, 3);
    ref_init_ok(&half, &m, SEQ, 2, 3);
    int tokens[4 * (SEQ + 1)];
    ts_synthetic_batch(1, 0, 4, SEQ, (int)m.vocab, tokens);
    float loss = ts_ref_forward(&full, tokens);
    ts_ref_zero_grad(&full);
    ts_ref_backward(&full, 1.0f);
    ts_ref_zero_grad(&half);
    float l0 = ts_ref_forward(&half, tokens);
    ts_ref_backward(&half, 0.5f);
    float l1 = ts_ref_forward(&half, tokens + 2 * (SEQ + 1));
    ts_ref_backward(&half, 0.5f);
    cr_expect(fabsf(loss - (l0 + l1) / 2) < 1e-5f, "loss %g vs micro-batches %g", loss,
              (l0 + l1) / 2);
    double gmax = 0;
    for (size_t i = 0; i < full.n_params; i++) gmax = fmax(gmax, fabs(full.grad_mem[i]));
    double diff = max_abs_diff(full.grad_mem, half.grad_mem, full.n_params);
    cr_expect(diff < 1e-4 * gmax, "accumulated gradients off by %g (max |g| %g)", diff, gmax);
    ts_ref_free(&full);
    ts_ref_free(&half);
}

/* Losses of `steps` AdamW steps on synthetic data (seq 32, batch 4, lr 3e-3). */
static void train(const ts_model *m, uint64_t seed, int steps, float *losses, ts_ref *r) {
    enum { SEQ = 32, BATCH = 4 };
    int tokens[BATCH * (SEQ + 1)];
    ref_init_ok(r, m, SEQ, BATCH, seed);
    for (int s = 0; s < steps; s++) {
        ts_synthetic_batch(seed, s, BATCH, SEQ, (int)m->vocab, tokens);
        losses[s] = ts_ref_forward(r, tokens);
        ts_ref_zero_grad(r);
        ts_ref_backward(r, 1.0f);
        cr_assert_eq(ts_ref_adamw(r, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, s + 1), TS_OK);
    }
}

static void check_training(const char *name) {
    ts_model m = zoo_model(name);
    float losses[20];
    ts_ref r;
    train(&m, 42, 20, losses, &r);
    cr_expect(fabsf(losses[0] - logf((float)m.vocab)) < 0.2f, "%s: initial loss %g, ln V %g", name,
              losses[0], logf((float)m.vocab));
    cr_expect(losses[19] < 0.7f * losses[0], "%s: loss %g -> %g after 20 steps", name, losses[0],
              losses[19]);
    ts_ref_free(&r);
}

Test(exec_reference, dense_training_lowers_the_loss) { check_training("tiny"); }

Test(exec_reference, moe_training_lowers_the_loss) { check_training("tiny-moe"); }

Test(exec_reference, same_seed_gives_identical_bits) {
    ts_model m = zoo_model("tiny-moe");
    float a[3], b[3], c[3];
    ts_ref ra, rb, rc;
    train(&m, 7, 3, a, &ra);
    train(&m, 7, 3, b, &rb);
    train(&m, 8, 3, c, &rc);
    cr_expect(memcmp(a, b, sizeof a) == 0, "losses differ: %.9g %.9g %.9g vs %.9g %.9g %.9g", a[0],
              a[1], a[2], b[0], b[1], b[2]);
    cr_expect(memcmp(ra.param_mem, rb.param_mem, ra.n_params * sizeof(float)) == 0,
              "parameters differ after 3 steps");
    cr_expect(a[0] != c[0], "another seed gives the same loss");
    ts_ref_free(&ra);
    ts_ref_free(&rb);
    ts_ref_free(&rc);
}

/* ---- Data ------------------------------------------------------------------------------------ */

Test(exec_reference, synthetic_batches_are_deterministic_progressions) {
    enum { B = 6, T = 20, V = 512 };
    int a[B * (T + 1)], b[B * (T + 1)], c[B * (T + 1)];
    ts_synthetic_batch(3, 5, B, T, V, a);
    ts_synthetic_batch(3, 5, B, T, V, b);
    ts_synthetic_batch(3, 6, B, T, V, c);
    cr_expect(memcmp(a, b, sizeof a) == 0, "same (seed, step) must give the same batch");
    cr_expect(memcmp(a, c, sizeof a) != 0, "another step must give another batch");
    for (int s = 0; s < B; s++) {
        const int *x = a + s * (T + 1);
        int stride = ((x[1] - x[0]) % 64 + 64) % 64;
        cr_expect(stride >= 1 && stride <= 4, "sequence %d: stride %d", s, stride);
        for (int t = 0; t <= T; t++) {
            cr_expect(x[t] >= 0 && x[t] < 64, "token %d out of range", x[t]);
            if (t > 0)
                cr_expect_eq(x[t], (x[t - 1] + stride) % 64, "sequence %d position %d", s, t);
        }
    }
}

Test(exec_reference, text_source_windows_and_errors) {
    const char *text = "the quick brown fox jumps over the lazy dog";
    char *path = test_write_temp(text);
    ts_text_source src;
    ts_error_clear();
    cr_assert_eq(ts_text_source_init(&src, path), TS_OK, "%s", ts_error_message());
    cr_expect_eq(src.n, strlen(text));
    enum { B = 3, T = 8, V = 100 };
    int tokens[B * (T + 1)];
    cr_assert_eq(ts_text_batch(&src, 1, 0, B, T, V, tokens), TS_OK);
    for (int b = 0; b < B; b++) {
        int found = 0;
        for (size_t off = 0; off + T + 1 <= src.n && !found; off++) {
            int same = 1;
            for (int t = 0; t <= T; t++)
                same &= tokens[b * (T + 1) + t] == (unsigned char)text[off + t] % V;
            found = same;
        }
        cr_expect(found, "row %d is not a window of the file (mod vocab)", b);
    }
    ts_error_clear();
    cr_expect_eq(ts_text_batch(&src, 1, 0, 1, 100, V, tokens), TS_ERR_INPUT);
    cr_expect_str_eq(ts_error_message(), "text source: 43 bytes, need at least seq + 1 = 101");
    ts_text_source_free(&src);
    test_remove_temp(path);
    ts_error_clear();
    cr_expect_eq(ts_text_source_init(&src, "/nonexistent/tessera.txt"), TS_ERR_IO);
    cr_expect_str_eq(ts_error_message(), "/nonexistent/tessera.txt: No such file or directory");
}
