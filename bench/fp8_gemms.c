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
 * columns, ms of one copy). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_args.h"
#include "common/stats.h"
#include "common/status.h"
#include "exec/gpu_bench.h"
#include "planner/cost.h"
#include "planner/published.h"
#include "program/program.h" /* ts_part_names */
#include "program/recipe.h"

#define MAX_ROWS 64
#define MAX_TIMED 512

/* One timed GEMM (bf16, or fp8 with or without fast accumulation), kept so that rows sharing a
 * shape time it once. */
typedef struct {
    int m, n, k, kind; /* kind: 0 bf16, 1 fp8 fast accumulation, 2 fp8 split */
    double s;
} timed;

typedef struct {
    double min_s;
    const char *row;
    int detail;           /* --gemms: a line per GEMM */
    int gpu;              /* 1 while the GPU answers */
    char why[256];        /* why there is no measured column */
    timed memo[MAX_TIMED];
    int n_memo;
    int n_rows;
    double speedup_plan[MAX_ROWS], speedup_gpu[MAX_ROWS];
    int moe[MAX_ROWS];
} bench;

/* Seconds of one GEMM on the GPU (memoised); 0 once the GPU has failed (b->why says why). */
static double gpu_s(bench *b, int m, int n, int k, int kind) {
    for (int i = 0; i < b->n_memo; i++)
        if (b->memo[i].m == m && b->memo[i].n == n && b->memo[i].k == k && b->memo[i].kind == kind) return b->memo[i].s;
    if (!b->gpu) return 0;
    ts_gpu_gemm_shape g = {m, n, k, "row"};
    double s = 0;
    int calls = 0;
    ts_status st = kind == 0 ? ts_gpu_time_gemm(TS_DTYPE_BF16, &g, b->min_s, &s)
                             : ts_gpu_time_gemm_fp8(&g, kind == 1, b->min_s, &s, &calls);
    if (st != TS_OK) {
        snprintf(b->why, sizeof b->why, "%s", ts_error_message());
        b->gpu = 0;
        return 0;
    }
    if (b->n_memo < MAX_TIMED) b->memo[b->n_memo++] = (timed){m, n, k, kind, s};
    return s;
}

/* The four sums of a row: planner bf16 / fp8, GPU bf16 / fp8, seconds for one micro-batch. */
typedef struct {
    double plan16, plan8, gpu16, gpu8;
} sums;

/* Adds a recipe GEMM's three (forward, input gradient, weight gradient) if it runs FP8. */
static void add_gemm(bench *b, const ts_problem *pb, const ts_gemm_shape *g, sums *out) {
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
        double g16 = gpu_s(b, mi, ni, ki, 0), g8 = gpu_s(b, mi, ni, ki, i ? 2 : 1);
        out->plan16 += g->count * p16;
        out->plan8 += g->count * p8;
        out->gpu16 += g->count * g16;
        out->gpu8 += g->count * g8;
        if (!b->detail) continue;
        char gpu[64] = "        -        -      -";
        if (g8 > 0) snprintf(gpu, sizeof gpu, "%9.3f %8.3f %6.3f", 1e3 * g16, 1e3 * g8, g16 / g8);
        printf("  %-10s %-5s %6d %6d %6d x%-3g %9.3f %8.3f %6.3f %s\n", ts_part_names[g->part], which[i], mi, ni, ki,
               g->count, 1e3 * p16, 1e3 * p8, p16 / p8, gpu);
    }
}

static ts_status visit_row(const ts_pub_case *c, const ts_problem *pb, const ts_layout *l, void *ctx) {
    bench *b = ctx;
    int moe = c->kind == TS_PUB_NVIDIA_MOE_STEP_FP8;
    if (!(moe || c->kind == TS_PUB_NVIDIA_STEP_FP8) || (b->row && !strstr(c->id, b->row))) return TS_OK;
    ts_shard sh = {l->tp, l->cp, l->ep, l->sp, l->mbs, l->recompute, l->etp};
    ts_attn_recipe a;
    ts_mlp_recipe f;
    ts_attn_recipe_of(pb, &sh, &a);
    ts_mlp_recipe_of(pb, &sh, ts_recipe_layer_is_moe(pb, 0), &f);
    sums s = {0};
    if (b->detail) printf("%s: its GEMMs, then the row\n", c->id);
    for (int i = 0; i < a.n_qkv; i++) add_gemm(b, pb, &a.qkv[i], &s);
    add_gemm(b, pb, &a.proj, &s);
    add_gemm(b, pb, &f.fc1, &s);
    add_gemm(b, pb, &f.fc2, &s);
    if (f.shared) {
        add_gemm(b, pb, &f.shared_fc1, &s);
        add_gemm(b, pb, &f.shared_fc2, &s);
    }
    double up_plan = s.plan16 / s.plan8, up_gpu = b->gpu && s.gpu8 > 0 ? s.gpu16 / s.gpu8 : 0;
    char gpu[64] = "        -        -      -";
    if (up_gpu > 0) snprintf(gpu, sizeof gpu, "%9.3f %8.3f %6.3f", 1e3 * s.gpu16, 1e3 * s.gpu8, up_gpu);
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

/* Median of the rows of one family (moe 0 or 1) of `v`; 0 when none has a value. */
static double family_median(const bench *b, const double *v, int moe) {
    double xs[MAX_ROWS];
    int n = 0;
    for (int i = 0; i < b->n_rows; i++)
        if (b->moe[i] == moe && v[i] > 0) xs[n++] = v[i];
    return n ? ts_median(xs, n) : 0;
}

int main(int argc, char **argv) {
    static bench b;
    b.min_s = 0.05;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--min-s") && i + 1 < argc) {
            if (!bench_parse_min_s("fp8_gemms", argv[++i], &b.min_s)) return 2;
        } else if (!strcmp(argv[i], "--gemms")) {
            b.detail = 1;
        } else if (!strcmp(argv[i], "--row") && i + 1 < argc) {
            b.row = argv[++i];
        } else {
            fprintf(stderr, "fp8_gemms: unknown argument \"%s\" (--min-s S, --row SUBSTR, --gemms)\n", argv[i]);
            return 2;
        }
    }
    char name[128] = "";
    int major = 0, minor = 0;
    b.gpu = ts_gpu_describe(name, sizeof name, &major, &minor) == TS_OK;
    if (!b.gpu) snprintf(b.why, sizeof b.why, "%s", ts_error_message());
    const char *data = getenv("TESSERA_DATA");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/validation/published", data ? data : ".");
    printf("# fp8_gemms: a rank's FP8 GEMMs of one layer and micro-batch (forward, input and weight gradients), ms;\n"
           "# planner: h100-sxm-dgx's curves; gpu: %s%s\n",
           b.gpu ? name : "none", b.gpu ? " (cublasGemmEx bf16; cublasLtMatmul E4M3 -> bf16, TE's accumulation)" : "");
    printf("%-44s %-4s %9s %8s %6s %9s %8s %6s\n", "row", "kind", "plan bf16", "plan fp8", "x", "gpu bf16",
           "gpu fp8", "x");
    if (ts_published_visit(dir, visit_row, &b) != TS_OK) {
        fprintf(stderr, "fp8_gemms: %s\n", ts_error_message());
        return 1;
    }
    for (int moe = 0; moe < 2; moe++) {
        double gpu = family_median(&b, b.speedup_gpu, moe);
        char gpu_txt[32] = "-";
        if (gpu > 0) snprintf(gpu_txt, sizeof gpu_txt, "%.3f", gpu);
        printf("# %-5s median FP8 speed-up of the GEMMs: planner %.3f, gpu %s\n", moe ? "moe" : "dense",
               family_median(&b, b.speedup_plan, moe), gpu_txt);
    }
    if (b.why[0]) printf("fp8_gemms: no GPU figures (%s)\n", b.why);
    return 0;
}
