/* The kernel tables of exec/kernel_table.h, suite `kernel_table` (no MPI, no GPU needed): every
 * entry is filled in each table this build has, the CPU backend points at the CPU table, and each
 * CPU entry gives bit for bit what the exec/kernels.h function it wraps gives on the same inputs
 * (so the trainer's CPU results do not depend on going through the table; the trainer itself is
 * held to the one-rank reference by tests/test_exec_parity.c). The CUDA table's entries are
 * diffed against these on a GPU in tests/test_cuda.c, suite `cuda_gpu`. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec/backend.h"
#include "exec/kernel_table.h"
#include "exec/kernels.h"
#include "tests/helpers.h"

/* Every entry of ts_kernels, for the completeness check. */
#define KERNEL_ENTRIES(X)                                                                          \
    X(zero) X(copy) X(copy_rows) X(to_host) X(to_device) X(add) X(linear_fwd) X(linear_bwd_input)  \
    X(linear_bwd_weight) X(rmsnorm_fwd) X(rmsnorm_bwd) X(embedding_fwd) X(embedding_bwd)           \
    X(rope_fwd) X(rope_bwd) X(attention_fwd) X(attention_bwd) X(attention_merge) X(swiglu_fwd)     \
    X(swiglu_bwd)                                                                                  \
    X(router_fwd) X(router_bwd) X(moe_gather_fwd) X(moe_gather_bwd) X(moe_combine_fwd)             \
    X(moe_combine_bwd) X(ce_max) X(ce_sums) X(ce_loss) X(ce_bwd) X(adamw)

static void expect_filled(const ts_kernels *k) {
    cr_assert_not_null(k->name);
#define CHECK_ENTRY(e) cr_expect(k->e != NULL, "%s table: %s is NULL", k->name, #e);
    KERNEL_ENTRIES(CHECK_ENTRY)
#undef CHECK_ENTRY
}

Test(kernel_table, tables_are_filled) {
    const ts_kernels *cpu = ts_kernels_cpu();
    expect_filled(cpu);
    cr_expect_str_eq(cpu->name, "cpu");
    cr_expect_eq(ts_backend_cpu(1)->kernels, cpu, "the CPU backend runs the CPU table");
    const ts_kernels *cpu_bf16 = ts_kernels_cpu_bf16();
    expect_filled(cpu_bf16);
    cr_expect_str_eq(cpu_bf16->name, "cpu-bf16");
#ifdef TS_CUDA
    /* Filling the table launches nothing, so this runs without a GPU too. */
    const ts_kernels *cuda = ts_kernels_cuda(), *cuda_bf16 = ts_kernels_cuda_bf16();
    cr_assert_not_null(cuda);
    expect_filled(cuda);
    cr_expect_str_eq(cuda->name, "cuda");
    cr_assert_not_null(cuda_bf16);
    expect_filled(cuda_bf16);
    cr_expect_str_eq(cuda_bf16->name, "cuda-bf16");
    cr_expect(cuda_bf16->attention_fwd != cuda->attention_fwd && cuda_bf16->linear_fwd != cuda->linear_fwd,
              "the bf16 table has its own attention (tiled) and linear layers (bf16 GEMMs)");
    cr_expect_eq(cuda_bf16->adamw, cuda->adamw, "the optimizer stays fp32");
#else
    cr_expect_null(ts_kernels_cuda(), "builds without CUDA have the CPU table only");
    cr_expect_null(ts_kernels_cuda_bf16(), "builds without CUDA have no CUDA bf16 table");
#endif
}


/* A copy: the direct call and the table's entry each get their own output. */
static float *dup(const float *p, size_t n) {
    float *q = malloc((n ? n : 1) * sizeof *q);
    cr_assert(q);
    memcpy(q, p, n * sizeof *q);
    return q;
}

static void expect_same(const char *what, const void *a, const void *b, size_t bytes) {
    cr_expect(memcmp(a, b, bytes) == 0, "%s: the table's result differs from the direct call's", what);
}

/* Shapes small enough to run in milliseconds, with tokens repeated and outside the slice. */
enum { T = 13, C = 12, IC = 12, OC = 10, VS = 17, V0 = 5, E = 5, K = 2, H = 4, KV = 2, D = 6 };

/* Inputs the kernels share: token ids (repeated, some outside the vocabulary slice), positions,
 * activations x, norm weights, an upstream gradient g and two output buffers. */
typedef struct {
    int tokens[T], pos[T];
    float *x, *nw, *g, *o1, *o2;
} kt_inputs;

static kt_inputs kt_inputs_make(void) {
    kt_inputs in;
    size_t TC = (size_t)T * C;
    for (int t = 0; t < T; t++) in.tokens[t] = (t * 7) % (VS + 2 * V0), in.pos[t] = t;
    in.x = test_random_floats(TC, 7), in.nw = test_random_floats(C, 8), in.g = test_random_floats(TC, 9);
    in.o1 = test_random_floats(TC, 10), in.o2 = dup(in.o1, TC);
    return in;
}

static void kt_inputs_free(kt_inputs *in) { free(in->x), free(in->nw), free(in->g), free(in->o1), free(in->o2); }

/* Each test: every CPU table entry against the plain kernel on the same inputs, bit for bit. */
#define KT_BEGIN                                                                                   \
    const ts_kernels *k = ts_kernels_cpu();                                                        \
    size_t TC = (size_t)T * C, TK = (size_t)T * K;                                                 \
    (void)TC, (void)TK;                                                                            \
    kt_inputs kin = kt_inputs_make();                                                              \
    int *tokens = kin.tokens, *pos = kin.pos;                                                      \
    float *x = kin.x, *nw = kin.nw, *g = kin.g, *o1 = kin.o1, *o2 = kin.o2;                        \
    (void)tokens, (void)pos, (void)x, (void)nw, (void)g, (void)o1, (void)o2

Test(kernel_table, cpu_linear_equals_the_kernels) {
    KT_BEGIN;
    /* linear */
    float *in = test_random_floats((size_t)T * IC, 1), *w = test_random_floats((size_t)OC * IC, 2), *dout = test_random_floats((size_t)T * OC, 3);
    float *a = test_random_floats((size_t)T * OC, 4), *b = dup(a, (size_t)T * OC);
    ts_linear_fwd(a, in, w, T, IC, OC);
    cr_assert_eq(k->linear_fwd(b, in, w, T, IC, OC), TS_OK);
    expect_same("linear_fwd", a, b, (size_t)T * OC * sizeof *a);
    free(a), free(b);
    a = test_random_floats((size_t)T * IC, 5), b = dup(a, (size_t)T * IC);
    ts_linear_bwd_input(a, dout, w, T, IC, OC);
    cr_assert_eq(k->linear_bwd_input(b, dout, w, T, IC, OC), TS_OK);
    expect_same("linear_bwd_input", a, b, (size_t)T * IC * sizeof *a);
    free(a), free(b);
    a = test_random_floats((size_t)OC * IC, 6), b = dup(a, (size_t)OC * IC);
    ts_linear_bwd_weight(a, dout, in, T, IC, OC);
    cr_assert_eq(k->linear_bwd_weight(b, dout, in, T, IC, OC), TS_OK);
    expect_same("linear_bwd_weight", a, b, (size_t)OC * IC * sizeof *a);
    free(a), free(b), free(in), free(w), free(dout);

    kt_inputs_free(&kin);
}

Test(kernel_table, cpu_norm_and_embedding_equal_the_kernels) {
    KT_BEGIN;
    /* rmsnorm */
    float r1[T], r2[T];
    ts_rmsnorm_fwd(o1, r1, x, nw, T, C, 1e-5f);
    cr_assert_eq(k->rmsnorm_fwd(o2, r2, x, nw, T, C, 1e-5f), TS_OK);
    expect_same("rmsnorm_fwd out", o1, o2, TC * sizeof *o1);
    expect_same("rmsnorm_fwd rstd", r1, r2, sizeof r1);
    float *dw1 = test_random_floats(C, 11), *dw2 = dup(dw1, C);
    memcpy(o2, o1, TC * sizeof *o1);
    ts_rmsnorm_bwd(o1, dw1, g, x, nw, r1, T, C);
    cr_assert_eq(k->rmsnorm_bwd(o2, dw2, g, x, nw, r1, T, C), TS_OK);
    expect_same("rmsnorm_bwd dx", o1, o2, TC * sizeof *o1);
    expect_same("rmsnorm_bwd dw", dw1, dw2, C * sizeof *dw1);
    free(dw1), free(dw2);

    /* embedding */
    float *wte = test_random_floats((size_t)VS * C, 12);
    ts_embedding_fwd(o1, tokens, wte, V0, VS, T, C);
    cr_assert_eq(k->embedding_fwd(o2, tokens, wte, V0, VS, T, C), TS_OK);
    expect_same("embedding_fwd", o1, o2, TC * sizeof *o1);
    float *dwte = dup(wte, (size_t)VS * C);
    ts_embedding_bwd(wte, g, tokens, V0, VS, T, C);
    cr_assert_eq(k->embedding_bwd(dwte, g, tokens, V0, VS, T, C), TS_OK);
    expect_same("embedding_bwd", wte, dwte, (size_t)VS * C * sizeof *wte);
    free(wte), free(dwte);

    kt_inputs_free(&kin);
}

Test(kernel_table, cpu_rope_and_attention_equal_the_kernels) {
    KT_BEGIN;
    /* rotary, with a padded row stride */
    int ld = (H + 2 * KV) * D + 3; /* q, k, v heads and padding */
    float *q1 = test_random_floats((size_t)T * ld, 13), *q2 = dup(q1, (size_t)T * ld);
    ts_rope_fwd(q1, ld, pos, T, H + KV, D, 10000.0f);
    cr_assert_eq(k->rope_fwd(q2, ld, pos, T, H + KV, D, 10000.0f), TS_OK);
    expect_same("rope_fwd", q1, q2, (size_t)T * ld * sizeof *q1);
    ts_rope_bwd(q1, ld, pos, T, H, D, 10000.0f);
    cr_assert_eq(k->rope_bwd(q2, ld, pos, T, H, D, 10000.0f), TS_OK);
    expect_same("rope_bwd", q1, q2, (size_t)T * ld * sizeof *q1);

    /* attention: q, k, v interleaved in one row as the trainer holds them */
    ts_attn_shape s = {T, T, H, KV, D, ld, ld, ld, H * D, pos, pos, 1};
    const float *qq = q1, *kk = q1 + H * D, *vv = q1 + H * D + KV * D;
    float *att1 = test_random_floats((size_t)T * H * D, 14), *att2 = dup(att1, (size_t)T * H * D), lse1[T * H], lse2[T * H],
          scratch[T];
    ts_attention_fwd(att1, lse1, qq, kk, vv, &s, scratch);
    cr_assert_eq(k->attention_fwd(att2, lse2, qq, kk, vv, &s, scratch), TS_OK);
    expect_same("attention_fwd out", att1, att2, (size_t)T * H * D * sizeof *att1);
    expect_same("attention_fwd lse", lse1, lse2, sizeof lse1);
    float *dq1 = test_random_floats((size_t)T * ld, 15), *dq2 = dup(dq1, (size_t)T * ld), *go = test_random_floats((size_t)T * H * D, 16);
    ts_attention_bwd(dq1, dq1 + H * D, dq1 + H * D + KV * D, go, qq, kk, vv, att1, lse1, &s);
    cr_assert_eq(k->attention_bwd(dq2, dq2 + H * D, dq2 + H * D + KV * D, go, qq, kk, vv, att1, lse1, &s), TS_OK);
    expect_same("attention_bwd", dq1, dq2, (size_t)T * ld * sizeof *dq1);
    /* merge: the same rows over keys shifted by 2 positions (some queries see none: lse2 = -inf) */
    int shifted[T];
    for (int t = 0; t < T; t++) shifted[t] = pos[t] + 2;
    ts_attn_shape later = s;
    later.k_pos = shifted;
    float *part = test_random_floats((size_t)T * H * D, 18), lse3[T * H];
    ts_attention_fwd(part, lse3, qq, kk, vv, &later, scratch);
    ts_attention_merge(att1, lse1, part, lse3, T, H, D, H * D);
    cr_assert_eq(k->attention_merge(att2, lse2, part, lse3, T, H, D, H * D), TS_OK);
    expect_same("attention_merge out", att1, att2, (size_t)T * H * D * sizeof *att1);
    expect_same("attention_merge lse", lse1, lse2, sizeof lse1);
    free(part);
    free(q1), free(q2), free(att1), free(att2), free(dq1), free(dq2), free(go);

    kt_inputs_free(&kin);
}

Test(kernel_table, cpu_swiglu_and_moe_equal_the_kernels) {
    KT_BEGIN;
    /* swiglu (dup aliasing dact, as ts_mlp_bwd uses it) */
    float *up = test_random_floats(TC, 17);
    ts_swiglu_fwd(o1, x, up, TC);
    cr_assert_eq(k->swiglu_fwd(o2, x, up, TC), TS_OK);
    expect_same("swiglu_fwd", o1, o2, TC * sizeof *o1);
    float *da1 = dup(g, TC), *da2 = dup(g, TC);
    ts_swiglu_bwd(o1, da1, da1, x, up, TC);
    cr_assert_eq(k->swiglu_bwd(o2, da2, da2, x, up, TC), TS_OK);
    expect_same("swiglu_bwd dgate", o1, o2, TC * sizeof *o1);
    expect_same("swiglu_bwd dup", da1, da2, TC * sizeof *da1);
    free(up), free(da1), free(da2);

    /* routing, dispatch, combine */
    float *logits = test_random_floats((size_t)T * E, 18), p1[T * E], p2[T * E], w1[T * K], w2[T * K];
    int e1[T * K], e2[T * K];
    ts_router_fwd(p1, e1, w1, logits, T, E, K, 0, 0);
    cr_assert_eq(k->router_fwd(p2, e2, w2, logits, T, E, K, 0, 0), TS_OK);
    expect_same("router_fwd probs", p1, p2, sizeof p1);
    expect_same("router_fwd expert", e1, e2, sizeof e1);
    expect_same("router_fwd weight", w1, w2, sizeof w1);
    float *dwt = test_random_floats(TK, 19), *dz1 = test_random_floats((size_t)T * E, 20), *dz2 = dup(dz1, (size_t)T * E);
    ts_router_bwd(dz1, dwt, p1, e1, T, E, K);
    cr_assert_eq(k->router_bwd(dz2, dwt, p1, e1, T, E, K), TS_OK);
    expect_same("router_bwd", dz1, dz2, (size_t)T * E * sizeof *dz1);
    int offset[E + 1], slot_token[T * K], slot[T * K];
    ts_moe_plan(offset, slot_token, slot, e1, T, E, K);
    float *xe1 = test_random_floats(TK * C, 21), *xe2 = dup(xe1, TK * C);
    ts_moe_gather_fwd(xe1, x, slot_token, (int)TK, C);
    cr_assert_eq(k->moe_gather_fwd(xe2, x, slot_token, (int)TK, C), TS_OK);
    expect_same("moe_gather_fwd", xe1, xe2, TK * C * sizeof *xe1);
    memcpy(o2, o1, TC * sizeof *o1);
    ts_moe_gather_bwd(o1, xe1, slot_token, (int)TK, C);
    cr_assert_eq(k->moe_gather_bwd(o2, xe1, slot_token, (int)TK, C), TS_OK);
    expect_same("moe_gather_bwd", o1, o2, TC * sizeof *o1);
    ts_moe_combine_fwd(o1, xe1, w1, slot, T, K, C);
    cr_assert_eq(k->moe_combine_fwd(o2, xe1, w1, slot, T, K, C), TS_OK);
    expect_same("moe_combine_fwd", o1, o2, TC * sizeof *o1);
    float *dw3 = dup(dwt, TK), *dye2 = dup(xe2, TK * C);
    float *dye1 = dup(dye2, TK * C);
    ts_moe_combine_bwd(dye1, dwt, g, xe1, w1, slot, T, K, C);
    cr_assert_eq(k->moe_combine_bwd(dye2, dw3, g, xe2, w1, slot, T, K, C), TS_OK);
    expect_same("moe_combine_bwd dye", dye1, dye2, TK * C * sizeof *dye1);
    expect_same("moe_combine_bwd dweight", dwt, dw3, TK * sizeof *dwt);
    free(logits), free(dwt), free(dz1), free(dz2), free(xe1), free(xe2), free(dw3), free(dye1), free(dye2);

    kt_inputs_free(&kin);
}

Test(kernel_table, cpu_cross_entropy_and_adamw_equal_the_kernels) {
    KT_BEGIN;
    /* cross-entropy over a slice, targets in and out of it */
    float *z = test_random_floats((size_t)T * VS, 22), m1[T], m2[T], s1[T], s2[T], t1[T], t2[T], l1[T], l2[T];
    ts_ce_max(m1, z, T, VS);
    cr_assert_eq(k->ce_max(m2, z, T, VS), TS_OK);
    expect_same("ce_max", m1, m2, sizeof m1);
    ts_ce_sums(s1, t1, z, m1, tokens, V0, T, VS);
    cr_assert_eq(k->ce_sums(s2, t2, z, m1, tokens, V0, T, VS), TS_OK);
    expect_same("ce_sums sumexp", s1, s2, sizeof s1);
    expect_same("ce_sums target", t1, t2, sizeof t1);
    ts_ce_loss(l1, m1, s1, t1, T);
    cr_assert_eq(k->ce_loss(l2, m1, s1, t1, T), TS_OK);
    expect_same("ce_loss", l1, l2, sizeof l1);
    float *dz3 = dup(z, (size_t)T * VS);
    ts_ce_bwd(z, z, m1, s1, tokens, V0, T, VS, 0.125f);
    cr_assert_eq(k->ce_bwd(dz3, dz3, m1, s1, tokens, V0, T, VS, 0.125f), TS_OK);
    expect_same("ce_bwd (in place)", z, dz3, (size_t)T * VS * sizeof *z);
    free(z), free(dz3);

    /* adamw, two steps */
    float *pa = test_random_floats(TC, 23), *pb = dup(pa, TC), ma[T * C] = {0}, mb[T * C] = {0}, va[T * C] = {0}, vb[T * C] = {0};
    for (int step = 1; step <= 2; step++) {
        ts_adamw(pa, ma, va, g, TC, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step);
        cr_assert_eq(k->adamw(pb, mb, vb, g, TC, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step), TS_OK);
    }
    expect_same("adamw param", pa, pb, TC * sizeof *pa);
    expect_same("adamw m", ma, mb, sizeof ma);
    expect_same("adamw v", va, vb, sizeof va);
    free(pa), free(pb);
    kt_inputs_free(&kin);
}

Test(kernel_table, cpu_memory_ops) {
    const ts_kernels *k = ts_kernels_cpu();
    float src[6 * 7], dst[6 * 5], sum[4];
    for (int i = 0; i < 6 * 7; i++) src[i] = (float)i;
    for (int i = 0; i < 6 * 5; i++) dst[i] = -1;
    cr_assert_eq(k->copy_rows(dst, 5, src + 2, 7, 6, 3), TS_OK);
    for (int r = 0; r < 6; r++)
        for (int c = 0; c < 5; c++)
            cr_expect_eq(dst[r * 5 + c], c < 3 ? (float)(r * 7 + 2 + c) : -1.0f, "row %d col %d", r, c);
    cr_assert_eq(k->add(sum, src, src + 4, 4), TS_OK);
    for (int i = 0; i < 4; i++) cr_expect_eq(sum[i], (float)(2 * i + 4));
    cr_assert_eq(k->add(sum, sum, sum, 4), TS_OK); /* aliased */
    cr_expect_eq(sum[3], 20.0f);
    cr_assert_eq(k->zero(dst, sizeof dst), TS_OK);
    for (int i = 0; i < 6 * 5; i++) cr_expect_eq(dst[i], 0.0f);
    cr_assert_eq(k->to_device(dst, src, 3 * sizeof *src), TS_OK);
    cr_assert_eq(k->to_host(sum, dst, 3 * sizeof *src), TS_OK);
    cr_assert_eq(k->copy(dst + 3, dst, 3 * sizeof *dst), TS_OK);
    cr_expect(sum[2] == 2.0f && dst[5] == 2.0f);
    cr_expect_eq(k->copy(NULL, NULL, 0), TS_OK, "empty copies touch nothing");
}

/* The bf16 CPU table keeps Megatron-Core's fp32 parts as the fp32 table's own entries (memory ops,
 * the weight gradients of the embedding, the cross-entropy statistics, the router's softmax and the
 * optimizer) and replaces every entry that writes a bf16 activation or activation gradient. */
Test(kernel_table, bf16_table_keeps_fp32_parts) {
    const ts_kernels *f = ts_kernels_cpu(), *b = ts_kernels_cpu_bf16();
#define SAME(e) cr_expect_eq((void *)b->e, (void *)f->e, "%s should stay fp32", #e);
#define OWN(e) cr_expect_neq((void *)b->e, (void *)f->e, "%s should round to bf16", #e);
    SAME(zero) SAME(copy) SAME(copy_rows) SAME(to_host) SAME(to_device) SAME(embedding_bwd) SAME(ce_max)
    SAME(ce_sums) SAME(ce_loss) SAME(router_fwd) SAME(adamw)
    TS_KERNELS_BF16_ENTRIES(OWN)
#undef SAME
#undef OWN
}
