/* Benchmark: the FP8 GEMMs of the published FP8 rows, as the planner prices them and as a GPU runs
 * them.
 *
 * For each FP8 row of validation/published/published-cases.json (dense and MoE), the planner's
 * best layout under the row's pins (planner/published.h ts_published_visit) gives a rank's layer
 * recipe (program/recipe.h); its FP8 GEMMs (QKV, the projection, the MLP or the local experts, the
 * shared experts) are taken as Transformer Engine runs each weight's three: the forward
 * Y(m×n) = X(m×k)·W with fast accumulation, the input gradient (m × k over n) and the weight
 * gradient (k × n over the m tokens) with split accumulation (module/base.py _2X_ACC_FPROP = False,
 * _2X_ACC_DGRAD = _2X_ACC_WGRAD = True).
 *
 *   planner   seconds for the layer's FP8 GEMMs in bf16 and in fp8 on h100-sxm-dgx
 *             (planner/cost.h ts_gemm_s; backward ones scaled by ts_gemm_bwd_scale, as the
 *             closed form does; its weight-gradient floor at main_grad's traffic, which binds
 *             only for few tokens, is left out), one micro-batch, the local experts counted;
 *             their ratio is the speed-up the planner's FP8 curve gives these shapes;
 *   measured  the same GEMMs timed on this machine's GPU (exec/gpu_bench.h: cublasGemmEx in bf16;
 *             cublasLtMatmul E4M3 -> bf16 as Transformer Engine issues it), and their ratio.
 *
 * The closing lines give the two speed-ups' medians by family (dense, MoE): whether the FP8 curve,
 * a function of FLOPs alone, rewards one family's shapes more than the GPU does. Without a GPU (or
 * in a build without CUDA) the measured columns read "-" and one line says why; exit 0.
 * Options: --min-s S (timing per GEMM, default 0.05), --row SUBSTR (rows whose id contains it),
 * --gemms (a line per GEMM under its row: part, which of the three, m n k, local copies, the same
 * columns, ms of one copy).
 *
 * --wgrad: what accumulating a weight gradient into main_grad adds, on every NVIDIA row (BF16 and
 * FP8, dense and MoE). Megatron-Core's gradient-accumulation fusion has each weight-gradient GEMM
 * add into the weight's main_grad (beta = 1: read and written, 2 + 2 bytes a weight in bf16, 4 + 4
 * in fp32) where a plain GEMM writes its output once. How much of that shows is what this measures
 * (planner/wgrad_accum.h prices the curve fitted to it; before, the closed form took the traffic
 * as a floor under the GEMM, free at these rows' thousands of tokens, and the additive reading
 * would have charged all of it, per micro-batch, to the rows' many-expert and few-token layers:
 * docs/moe.md, "FP8 on the Grok-1 rows"). Per row, one layer
 * and micro-batch, ms: the rank's weight-gradient GEMMs as priced (plan), the main_grad traffic
 * at HBM speed in bf16 and fp32 (additive: what the additive reading adds), and on the GPU the
 * same GEMMs plain (beta = 0, bf16 out), then what beta = 1 into a bf16 and an fp32 main_grad add
 * (exec/gpu_bench.h ts_gpu_time_wgrad); the closing line gives the medians over rows of the GPU's
 * addition over the additive one: near 1, the traffic adds; near 0, it hides under the compute.
 *
 * --wgrad --sweep: the same measurement on a grid of shapes rather than the rows' (six weights,
 * 1536×6144 to 7168×18432, each over 128 to 16384 tokens, bf16 and fp8): whether what beta = 1 adds
 * is a share of main_grad's traffic or shrinks as the GEMM's compute grows over it. Per shape, ms:
 * the planner's compute, main_grad's bf16 traffic at HBM speed (on --system NAME, default
 * h100-sxm-dgx: the GPU's own, for another GPU), the GPU's plain GEMM and its two additions, and
 * their ratios to the additive reading. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_args.h"
#include "common/stats.h"
#include "common/status.h"
#include "exec/gpu_bench.h"
#include "models/system.h"
#include "planner/cost.h"
#include "planner/op_cost.h"
#include "planner/published.h"
#include "planner/wgrad_accum.h"
#include "program/program.h" /* ts_part_names */
#include "program/recipe.h"

#define MAX_ROWS 64
#define MAX_TIMED 512

/* One timed GEMM (bf16, or fp8 with or without fast accumulation), kept so that rows sharing a
 * shape time it once. */
typedef struct {
    int m, n, k, kind; /* kind: 0 bf16, 1 fp8 fast accumulation, 2 fp8 split */
    int acc;           /* 0 writes a bf16 output; 1, 2 add into a bf16, an fp32 main_grad (--wgrad) */
    double s;
} timed;

typedef struct {
    double min_s;
    const char *row;
    int detail;           /* --gemms: a line per GEMM */
    int wgrad;            /* --wgrad: main_grad's accumulation on every row */
    int sweep;            /* --sweep (with --wgrad): on a grid of shapes instead */
    const char *system;   /* --system: the zoo system pricing the sweep's columns */
    int gpu;              /* 1: a GPU answered ts_gpu_describe */
    int failed[3][3];     /* [kind][acc]: that timer failed once (why says why); not tried again */
    char why[256];        /* why a measured column is missing */
    timed memo[MAX_TIMED];
    int n_memo;
    int n_rows;
    double speedup_plan[MAX_ROWS], speedup_gpu[MAX_ROWS];
    int moe[MAX_ROWS];
    double added16[MAX_ROWS], added32[MAX_ROWS]; /* --wgrad: GPU's addition over the additive one */
} bench;

/* Seconds of one GEMM on the GPU (memoised); NAN without a GPU or once this kind of timing has
 * failed (b->why says why: an fp32 main_grad the GPU's cuBLASLt has no fp8 algorithm for leaves
 * the other columns measured). */
static double gpu_s(bench *b, int m, int n, int k, int kind, int acc) {
    for (int i = 0; i < b->n_memo; i++) {
        const timed *t = &b->memo[i];
        if (t->m == m && t->n == n && t->k == k && t->kind == kind && t->acc == acc) return t->s;
    }
    if (!b->gpu || b->failed[kind][acc]) return NAN;
    ts_gpu_gemm_shape g = {m, n, k, "row"};
    double s = 0;
    int calls = 0;
    ts_dtype dt = kind == 0 ? TS_DTYPE_BF16 : TS_DTYPE_FP8;
    ts_status st = acc ? ts_gpu_time_wgrad(dt, &g, acc == 1 ? TS_DTYPE_BF16 : TS_DTYPE_FP32, 1, b->min_s, &s)
                   : kind == 0 ? ts_gpu_time_gemm(TS_DTYPE_BF16, &g, b->min_s, &s)
                               : ts_gpu_time_gemm_fp8(&g, kind == 1, b->min_s, &s, &calls);
    if (st != TS_OK) {
        snprintf(b->why, sizeof b->why, "%s", ts_error_message());
        b->failed[kind][acc] = 1;
        return NAN;
    }
    if (b->n_memo < MAX_TIMED) b->memo[b->n_memo++] = (timed){m, n, k, kind, acc, s};
    return s;
}

/* The four sums of a row: planner bf16 / fp8, GPU bf16 / fp8, seconds for one micro-batch. */
typedef struct {
    double plan16, plan8, gpu16, gpu8;
} sums;

/* Adds a recipe GEMM's three (forward, input gradient, weight gradient) if it runs FP8. */
static void add_gemm(bench *b, const ts_problem *pb, const ts_gemm_shape *g, void *acc) {
    sums *out = acc;
    if (g->count <= 0 || g->m <= 0 || ts_gemm_dtype(pb, g->part) != TS_DTYPE_FP8) return;
    const ts_system *s = &pb->sys;
    double bwd = ts_gemm_bwd_scale(s, TS_DTYPE_FP8);
    /* (m, n, k) of the three, each C(m×n) over k */
    double d[3][3] = {{g->m, g->n, g->k}, {g->m, g->k, g->n}, {g->k, g->n, g->m}};
    static const char *const which[3] = {"fwd", "dgrad", "wgrad"};
    for (int i = 0; i < 3; i++) {
        double m = d[i][0], n = d[i][1], k = d[i][2];
        double p16 = ts_gemm_s(s, TS_DTYPE_BF16, m, n, k), p8 = (i ? bwd : 1.0) * ts_gemm_s(s, TS_DTYPE_FP8, m, n, k);
        int mi = (int)lround(m), ni = (int)lround(n), ki = (int)lround(k);
        double g16 = gpu_s(b, mi, ni, ki, 0, 0), g8 = gpu_s(b, mi, ni, ki, i ? 2 : 1, 0);
        out->plan16 += g->count * p16;
        out->plan8 += g->count * p8;
        out->gpu16 += g->count * g16;
        out->gpu8 += g->count * g8;
        if (!b->detail) continue;
        char gpu[64] = "        -        -      -";
        if (isfinite(g16 / g8)) snprintf(gpu, sizeof gpu, "%9.3f %8.3f %6.3f", 1e3 * g16, 1e3 * g8, g16 / g8);
        printf("  %-10s %-5s %6d %6d %6d x%-3g %9.3f %8.3f %6.3f %s\n", ts_part_names[g->part], which[i], mi, ni, ki,
               g->count, 1e3 * p16, 1e3 * p8, p16 / p8, gpu);
    }
}

typedef void (*gemm_fn)(bench *b, const ts_problem *pb, const ts_gemm_shape *g, void *acc);

/* Calls fn on each weight GEMM of the layer (the first: MoE where the model's first layer is) at
 * layout l: QKV, the projection, the MLP or the local experts, the shared experts. */
static void each_gemm(bench *b, const ts_problem *pb, const ts_layout *l, gemm_fn fn, void *acc) {
    ts_shard sh = {l->tp, l->cp, l->ep, l->sp, l->mbs, l->recompute, l->etp};
    ts_attn_recipe a;
    ts_mlp_recipe f;
    ts_attn_recipe_of(pb, &sh, &a);
    ts_mlp_recipe_of(pb, &sh, ts_recipe_layer_is_moe(pb, 0), &f);
    for (int i = 0; i < a.n_qkv; i++) fn(b, pb, &a.qkv[i], acc);
    fn(b, pb, &a.proj, acc);
    fn(b, pb, &f.fc1, acc);
    fn(b, pb, &f.fc2, acc);
    if (f.shared) {
        fn(b, pb, &f.shared_fc1, acc);
        fn(b, pb, &f.shared_fc2, acc);
    }
}

static ts_status visit_row(const ts_pub_case *c, const ts_problem *pb, const ts_layout *l, void *ctx) {
    bench *b = ctx;
    int moe = c->kind == TS_PUB_NVIDIA_MOE_STEP_FP8;
    if (!(moe || c->kind == TS_PUB_NVIDIA_STEP_FP8) || (b->row && !strstr(c->id, b->row))) return TS_OK;
    sums s = {0};
    if (b->detail) printf("%s: its GEMMs, then the row\n", c->id);
    each_gemm(b, pb, l, add_gemm, &s);
    double up_plan = s.plan16 / s.plan8, up_gpu = s.gpu16 / s.gpu8; /* NAN without both */
    char gpu[64] = "        -        -      -";
    if (isfinite(up_gpu)) snprintf(gpu, sizeof gpu, "%9.3f %8.3f %6.3f", 1e3 * s.gpu16, 1e3 * s.gpu8, up_gpu);
    printf("%-44s %-4s %9.3f %8.3f %6.3f %s\n", c->id, moe ? "moe" : "dense", 1e3 * s.plan16, 1e3 * s.plan8, up_plan,
           gpu);
    if (b->n_rows < MAX_ROWS) {
        b->speedup_plan[b->n_rows] = up_plan;
        b->speedup_gpu[b->n_rows] = up_gpu;
        b->moe[b->n_rows++] = moe;
    }
    fflush(stdout);
    return TS_OK;
}

/* --wgrad sums of a row, seconds of one layer and micro-batch: the weight-gradient GEMMs as priced,
 * main_grad's read and write at HBM speed (bf16, fp32), and on the GPU the GEMMs plain and what
 * adding into a bf16 and an fp32 main_grad adds. */
typedef struct {
    double plan, add16, add32, gpu, gpu16, gpu32;
} wsums;

static void add_wgrad(bench *b, const ts_problem *pb, const ts_gemm_shape *g, void *acc) {
    wsums *out = acc;
    ts_dtype dt = ts_gemm_dtype(pb, g->part);
    if (g->count <= 0 || g->m <= 0 || (dt != TS_DTYPE_BF16 && dt != TS_DTYPE_FP8)) return;
    const ts_system *s = &pb->sys;
    double m = g->k, n = g->n, k = g->m; /* W(m×n) over the layer's k tokens */
    double compute = ts_gemm_bwd_scale(s, dt) * ts_gemm_compute_s(s, dt, m, n, k);
    double plan = ts_wgrad_op_s(pb, g->part, compute, m, n, k, 1);
    double add16 = ts_memory_s(s, 4.0 * m * n, 0), add32 = ts_memory_s(s, 8.0 * m * n, 0);
    int mi = (int)lround(m), ni = (int)lround(n), ki = (int)lround(k), kind = dt == TS_DTYPE_FP8 ? 2 : 0;
    double g0 = gpu_s(b, mi, ni, ki, kind, 0), g16 = gpu_s(b, mi, ni, ki, kind, 1), g32 = gpu_s(b, mi, ni, ki, kind, 2);
    *out = (wsums){out->plan + g->count * plan, out->add16 + g->count * add16, out->add32 + g->count * add32,
                   out->gpu + g->count * g0, out->gpu16 + g->count * (g16 - g0), out->gpu32 + g->count * (g32 - g0)};
    if (!b->detail) return;
    char gpu[64] = "       -        -        -";
    if (isfinite(g0)) snprintf(gpu, sizeof gpu, "%8.3f %8.3f %8.3f", 1e3 * g0, 1e3 * (g16 - g0), 1e3 * (g32 - g0));
    printf("  %-10s %-4s %6d %6d %6d x%-3g %8.3f %8.3f %8.3f %s\n", ts_part_names[g->part], ts_dtype_names[dt], mi, ni,
           ki, g->count, 1e3 * plan, 1e3 * add16, 1e3 * add32, gpu);
}

static ts_status visit_wgrad(const ts_pub_case *c, const ts_problem *pb, const ts_layout *l, void *ctx) {
    bench *b = ctx;
    if (b->row && !strstr(c->id, b->row)) return TS_OK; /* visited rows are priced NVIDIA step rows */
    int moe = c->kind == TS_PUB_NVIDIA_MOE_STEP || c->kind == TS_PUB_NVIDIA_MOE_STEP_FP8;
    wsums w = {0};
    if (b->detail) printf("%s: its weight-gradient GEMMs (m n k, copies), then the row\n", c->id);
    each_gemm(b, pb, l, add_wgrad, &w);
    /* published minus predicted, per layer and micro-batch of a rank (layers/pp, micro-batches) */
    double per = (double)pb->model.layers / l->pp * l->microbatches, gap = (c->measured - c->predicted) / per;
    char gpu[96] = "       -        -        -      -      -";
    int row = b->n_rows < MAX_ROWS ? b->n_rows++ : -1;
    if (row >= 0) b->moe[row] = moe, b->added16[row] = b->added32[row] = NAN;
    if (isfinite(w.gpu)) {
        snprintf(gpu, sizeof gpu, "%8.3f %8.3f %8.3f %6.2f %6.2f", 1e3 * w.gpu, 1e3 * w.gpu16, 1e3 * w.gpu32,
                 w.gpu16 / w.add16, w.gpu32 / w.add32); /* printf writes a missing column as nan */
        if (row >= 0) b->added16[row] = w.gpu16 / w.add16, b->added32[row] = w.gpu32 / w.add32;
    }
    printf("%-42s %-5s %-4s %7.3f %8.3f %8.3f %8.3f %s\n", c->id, moe ? "moe" : "dense",
           ts_dtype_names[pb->train.dtype], 1e3 * gap, 1e3 * w.plan, 1e3 * w.add16, 1e3 * w.add32, gpu);
    fflush(stdout);
    return TS_OK;
}

/* Median of the rows of one family (moe 0 or 1) of `v` (NAN: no value); NAN when none has one. */
static double family_median(const bench *b, const double *v, int moe) {
    double xs[MAX_ROWS];
    int n = 0;
    for (int i = 0; i < b->n_rows; i++)
        if (b->moe[i] == moe && isfinite(v[i])) xs[n++] = v[i];
    return n ? ts_median(xs, n) : NAN;
}

/* "%.3f" of v, or "-" where it is NAN. */
static const char *fmt3(double v, char *buf, size_t size) {
    if (isfinite(v)) snprintf(buf, size, "%.3f", v);
    else snprintf(buf, size, "-");
    return buf;
}

/* --wgrad --sweep: beta = 1's addition on a grid of weights and token counts (the file's comment). */
static ts_status sweep_wgrad(bench *b, const char *gpu) {
    static const int weights[][2] = {{1536, 6144}, {2048, 7168}, {4096, 4096}, {6144, 16384}, {8192, 8192}, {7168, 18432}};
    static const int tokens[] = {128, 256, 384, 512, 768, 1024, 1536, 2048, 4096, 8192, 16384};
    ts_system s;
    TS_CHECK_CTX(ts_system_load(b->system, &s), "fp8_gemms --sweep: the planner's system");
    printf("# fp8_gemms --wgrad --sweep: W(m×n) over k tokens, ms; planner: %s's compute; additive: "
           "main_grad read and written at its HBM speed; gpu: %s (beta 0, then what beta 1 adds)\n", b->system, gpu);
    printf("%-4s %6s %6s %6s %8s %8s %8s %8s %8s %8s %6s %6s\n", "dt", "m", "n", "k", "compute", "add bf16",
           "add fp32", "gpu", "+bf16", "+fp32", "x16", "x32");
    for (int d = 0; d < 2; d++)
        for (size_t w = 0; w < sizeof weights / sizeof weights[0]; w++)
            for (size_t t = 0; t < sizeof tokens / sizeof tokens[0]; t++) {
                int m = weights[w][0], n = weights[w][1], k = tokens[t], kind = d ? 2 : 0;
                ts_dtype dt = d ? TS_DTYPE_FP8 : TS_DTYPE_BF16;
                double compute = ts_gemm_bwd_scale(&s, dt) * ts_gemm_compute_s(&s, dt, m, n, k);
                double add16 = ts_memory_s(&s, 4.0 * m * n, 0), add32 = ts_memory_s(&s, 8.0 * m * n, 0);
                double g0 = gpu_s(b, m, n, k, kind, 0), g16 = gpu_s(b, m, n, k, kind, 1) - g0,
                       g32 = gpu_s(b, m, n, k, kind, 2) - g0;
                printf("%-4s %6d %6d %6d %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %6.2f %6.2f\n", ts_dtype_names[dt], m, n,
                       k, 1e3 * compute, 1e3 * add16, 1e3 * add32, 1e3 * g0, 1e3 * g16, 1e3 * g32, g16 / add16,
                       g32 / add32); /* printf writes a missing column as nan */
                fflush(stdout);
            }
    return TS_OK;
}

/* --fit: planner/wgrad_accum.h's curve fitted to the sweeps in `fit`, for a bf16 and an fp32
 * main_grad, then each file of `check` (GEMMs the fit did not see) against it (ts_accum_totals_of). */
static ts_status fit_curves(char **fit, int n_fit, char **check, int n_check) {
    printf("# fp8_gemms --fit: x(r) = x_inf + (x0 - x_inf) / (1 + (r / r_half)^power), r = plain GEMM / main_grad"
           " traffic (planner/wgrad_accum.h)\n");
    for (int bytes = 2; bytes <= 4; bytes += 2) {
        ts_accum_points p;
        ts_accum_points_init(&p);
        ts_accum_curve c;
        double rms = 0;
        ts_status st = TS_OK;
        for (int i = 0; i < n_fit && st == TS_OK; i++) st = ts_accum_points_read(&p, fit[i], bytes);
        if (st == TS_OK) st = ts_accum_fit(&p, &c, &rms);
        if (st == TS_OK)
            printf("%s main_grad: x0 %.3f x_inf %.3f r_half %.2f power %.2f over %d GEMMs, rms %.4f ms; in the tree:"
                   " x0 %.3f x_inf %.3f r_half %.2f power %.2f\n", bytes > 2 ? "fp32" : "bf16", c.x0, c.x_inf, c.r_half,
                   c.power, p.n, 1e3 * rms, ts_accum_curve_for(bytes)->x0, ts_accum_curve_for(bytes)->x_inf,
                   ts_accum_curve_for(bytes)->r_half, ts_accum_curve_for(bytes)->power);
        for (int i = 0; i < n_check && st == TS_OK; i++) {
            ts_accum_points q;
            ts_accum_points_init(&q);
            st = ts_accum_points_read(&q, check[i], bytes);
            ts_accum_totals t;
            ts_accum_totals_of(&q, &c, &t);
            if (st == TS_OK)
                printf("  check %s: %d GEMMs, added in all %.3f ms; curve %.3f, floor %.3f, additive %.3f\n", check[i],
                       q.n, 1e3 * t.measured_s, 1e3 * t.curve_s, 1e3 * t.floor_s, 1e3 * t.additive_s);
            ts_accum_points_free(&q);
        }
        ts_accum_points_free(&p);
        TS_CHECK(st);
    }
    return TS_OK;
}

static void header(const bench *b, const char *gpu) {
    if (b->wgrad) {
        printf("# fp8_gemms --wgrad: a rank's weight-gradient GEMMs of one layer and micro-batch, ms; gap: published"
               " minus predicted step over the rank's layers and micro-batches;\n"
               "# planner: h100-sxm-dgx; additive: main_grad read and written at its HBM speed; gpu: %s (beta 0,"
               " then what beta 1 adds)\n", gpu);
        printf("%-42s %-5s %-4s %7s %8s %8s %8s %8s %8s %8s %6s %6s\n", "row", "kind", "dt", "gap", "plan",
               "add bf16", "add fp32", "gpu", "+bf16", "+fp32", "x16", "x32");
        return;
    }
    printf("# fp8_gemms: a rank's FP8 GEMMs of one layer and micro-batch (forward, input and weight gradients), ms;\n"
           "# planner: h100-sxm-dgx's curves; gpu: %s%s\n",
           gpu, b->gpu ? " (cublasGemmEx bf16; cublasLtMatmul E4M3 -> bf16, TE's accumulation)" : "");
    printf("%-44s %-4s %9s %8s %6s %9s %8s %6s\n", "row", "kind", "plan bf16", "plan fp8", "x", "gpu bf16",
           "gpu fp8", "x");
}

static void closing(const bench *b) {
    char t1[32], t2[32], t3[32];
    for (int moe = 0; moe < 2; moe++) {
        const char *fam = moe ? "moe" : "dense";
        if (b->wgrad)
            printf("# %-5s median over rows of the GPU's addition over the additive: bf16 main_grad %s, fp32 %s\n", fam,
                   fmt3(family_median(b, b->added16, moe), t1, sizeof t1),
                   fmt3(family_median(b, b->added32, moe), t2, sizeof t2));
        else
            printf("# %-5s median FP8 speed-up of the GEMMs: planner %s, gpu %s\n", fam,
                   fmt3(family_median(b, b->speedup_plan, moe), t3, sizeof t3),
                   fmt3(family_median(b, b->speedup_gpu, moe), t1, sizeof t1));
    }
    if (b->why[0]) printf("fp8_gemms: %s GPU figures (%s)\n", b->gpu ? "missing some" : "no", b->why);
}

int main(int argc, char **argv) {
    static bench b;
    static char *fit[16], *check[16];
    int n_fit = 0, n_check = 0;
    b.min_s = 0.05;
    b.system = "h100-sxm-dgx";
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "--fit") || !strcmp(argv[i], "--check")) && i + 1 < argc) {
            int is_fit = argv[i][2] == 'f';
            if ((is_fit ? n_fit : n_check) == 16) {
                fprintf(stderr, "fp8_gemms: at most 16 %s files\n", argv[i]);
                return 2;
            }
            if (is_fit) fit[n_fit++] = argv[++i];
            else check[n_check++] = argv[++i];
            continue;
        }
        if (!strcmp(argv[i], "--min-s") && i + 1 < argc) {
            if (!bench_parse_min_s("fp8_gemms", argv[++i], &b.min_s)) return 2;
        } else if (!strcmp(argv[i], "--gemms")) {
            b.detail = 1;
        } else if (!strcmp(argv[i], "--wgrad")) {
            b.wgrad = 1;
        } else if (!strcmp(argv[i], "--sweep")) {
            b.sweep = 1;
        } else if (!strcmp(argv[i], "--system") && i + 1 < argc) {
            b.system = argv[++i];
        } else if (!strcmp(argv[i], "--row") && i + 1 < argc) {
            b.row = argv[++i];
        } else {
            fprintf(stderr, "fp8_gemms: unknown argument \"%s\" (--min-s S, --row SUBSTR, --gemms, --wgrad, --sweep,"
                    " --system NAME, --fit FILE, --check FILE)\n",
                    argv[i]);
            return 2;
        }
    }
    if (n_check && !n_fit) {
        fprintf(stderr, "fp8_gemms: --check goes with --fit\n");
        return 2;
    }
    if (n_fit) {
        if (fit_curves(fit, n_fit, check, n_check) == TS_OK) return 0;
        fprintf(stderr, "fp8_gemms: %s\n", ts_error_message());
        return ts_exit_code(ts_error_status());
    }
    char name[128] = "";
    int major = 0, minor = 0;
    b.gpu = ts_gpu_describe(name, sizeof name, &major, &minor) == TS_OK;
    if (!b.gpu) snprintf(b.why, sizeof b.why, "%s", ts_error_message());
    ts_error_clear(); /* kept in b.why; an error after it is reported as its own */
    if (b.sweep && !b.wgrad) {
        fprintf(stderr, "fp8_gemms: --sweep goes with --wgrad\n");
        return 2;
    }
    if (b.sweep) {
        if (sweep_wgrad(&b, b.gpu ? name : "none") != TS_OK) {
            fprintf(stderr, "fp8_gemms: %s\n", ts_error_message());
            return ts_exit_code(ts_error_status());
        }
        if (b.why[0]) printf("fp8_gemms: %s GPU figures (%s)\n", b.gpu ? "missing some" : "no", b.why);
        return 0;
    }
    const char *data = getenv("TESSERA_DATA");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/validation/published", data ? data : ".");
    header(&b, b.gpu ? name : "none");
    if (ts_published_visit(dir, b.wgrad ? visit_wgrad : visit_row, &b) != TS_OK) {
        fprintf(stderr, "fp8_gemms: %s\n", ts_error_message());
        return 1;
    }
    closing(&b);
    return 0;
}
