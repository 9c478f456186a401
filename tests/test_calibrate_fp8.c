/* `tessera calibrate --device cuda`'s FP8 GEMM grid, suite `calibrate_fp8` (no GPU needed): the
 * measurement runs on a GPU (exec/calibrate.c, exec/gpu_bench.cu), the fit and the profile are
 * plain C (exec/calibrate_fit.c), so these tests feed the fit fp8 rows timed on a known curve
 * (h100-sxm-dgx's gemm_fp8 at its FP8 peak, through planner/cost.h ts_gemm_s) and check:
 *   - the fit gives that curve back (rate / best rate) and prices every row at its time;
 *   - the profile holds it as efficiency.gemm_fp8 with peak_flops.fp8, in the zoo's schema, with
 *     sources, and loads back through ts_system_load unchanged;
 *   - `tessera plan --dtype fp8` on the profile prices FP8 GEMMs from it: a curve lower at small
 *     GEMMs makes an FP8 plan's compute slower, a BF16 plan's not;
 *   - a GPU below compute capability 8.9 measures no fp8 rows: the profile keeps the template's
 *     curve, has no FP8 peak, and says so in one line; plans in fp8 are refused;
 *   - rows that no curve can fit (equal FLOPs, times far apart) fail the fit-quality check that
 *     `calibrate --strict` refuses on. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/calibrate.h"
#include "exec/calibrate_quality.h"
#include "exec/gpu_bench.h"
#include "models/system.h"
#include "planner/cost.h"
#include "tests/helpers.h"

/* The truth the rows are timed on: h100-sxm-dgx (FP8 peak and gemm_fp8 curve, FP32 figures). */
static ts_system truth_system(void) {
    ts_system s;
    cr_assert_eq(ts_system_load("h100-sxm-dgx", &s), TS_OK, "h100-sxm-dgx: %s", ts_error_message());
    cr_assert(s.gemm_eff_fp8.n > 0 && s.peak_flops[TS_DTYPE_FP8] > 0, "h100-sxm-dgx has an FP8 curve");
    return s;
}

/* A one-GPU CUDA calibration: fp32 rows on the quick GPU dims, fp8 rows on the quick fp8 grid
 * (gpu_bench.h: 33 shapes), each fp8 time ts_gemm_s on `truth` divided by slow(flops). The grid's
 * 15 FLOP counts fit the schema's 16 points, so the curve comes back exactly. */
#define FP8_ROWS 33
#define FP8_FLOP_COUNTS 15
static void synthetic_gpu_calib(ts_calib *c, const ts_system *truth, int cc, double (*slow)(double flops)) {
    memset(c, 0, sizeof *c);
    c->device = TS_DEVICE_CUDA;
    c->ranks = c->compute_ranks = c->threads = c->quick = 1;
    c->gpu_cc = cc;
    snprintf(c->gpu, sizeof c->gpu, "%s", cc >= 89 ? "NVIDIA H100 80GB HBM3" : "NVIDIA A100-SXM4-80GB");
    c->gpu_memory_bytes = 80e9;
    snprintf(c->host, sizeof c->host, "gpuhost");
    snprintf(c->date, sizeof c->date, "2026-11-26T00:00:00Z");
    const int *d;
    int nd = ts_gpu_calib_dims(1, &d);
    for (int i = 0; i < nd; i++)
        for (int j = 0; j < nd; j++)
            for (int l = 0; l < nd; l++) {
                ts_calib_gemm *g = &c->gemm[c->n_gemm++];
                *g = (ts_calib_gemm){.m = d[i], .n = d[j], .k = d[l], .reps = 1, .flops = 2.0 * d[i] * d[j] * d[l]};
                g->time_s = ts_gemm_compute_s(truth, TS_DTYPE_FP32, g->m, g->n, g->k);
            }
    if (!ts_calib_fp8_capable(cc)) return;
    static ts_gpu_gemm_shape grid[TS_GPU_FP8_GRID_MAX];
    int n = ts_gpu_fp8_grid(1, grid);
    for (int i = 0; i < n; i++) {
        ts_calib_gemm *g = &c->gemm_fp8[c->n_gemm_fp8++];
        *g = (ts_calib_gemm){.m = grid[i].m, .n = grid[i].n, .k = grid[i].k, .reps = 1,
                             .flops = ts_gpu_gemm_flops(&grid[i])};
        g->time_s = ts_gemm_compute_s(truth, TS_DTYPE_FP8, g->m, g->n, g->k) / (slow ? slow(g->flops) : 1.0);
    }
}

/* Half the rate below 1e11 FLOPs: a curve lower at small GEMMs, the same best rate. */
static double slow_small(double flops) { return flops < 1e11 ? 0.5 : 1.0; }

/* Writes c's profile to `path` (a fresh file in a test folder). */
static void write_profile(const ts_calib *c, const char *path) {
    cJSON *doc = NULL;
    cr_assert_eq(ts_calib_profile(c, &doc), TS_OK, "%s", ts_error_message());
    char *text = cJSON_Print(doc);
    cJSON_Delete(doc);
    FILE *f = fopen(path, "w");
    cr_assert(f != NULL && text != NULL, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
    free(text);
}

static cJSON *load_json(const char *path) {
    char *text = read_file(path);
    cr_assert(text != NULL, "cannot read %s", path);
    cJSON *doc = cJSON_Parse(text);
    free(text);
    cr_assert(doc != NULL, "%s is not JSON", path);
    return doc;
}

Test(calibrate_fp8, grid_is_the_bf16_shapes_and_the_layer_gemms) {
    static ts_gpu_gemm_shape g[TS_GPU_FP8_GRID_MAX];
    for (int quick = 0; quick <= 1; quick++) {
        const int *d;
        int nd = ts_gpu_calib_dims(quick, &d), n = ts_gpu_fp8_grid(quick, g), lm_head = 0;
        cr_assert(n > nd * nd * nd && n <= TS_GPU_FP8_GRID_MAX, "quick %d: %d shapes", quick, n);
        cr_expect(n <= TS_CALIB_MAX_GEMM, "every shape has a row");
        for (int i = 0; i < n; i++) {
            cr_expect(g[i].m % 16 == 0 && g[i].n % 16 == 0 && g[i].k % 16 == 0, "cuBLASLt fp8 needs multiples of 16");
            for (int j = 0; j < i; j++)
                cr_expect(g[i].m != g[j].m || g[i].n != g[j].n || g[i].k != g[j].k, "shape %d repeats %d", i, j);
            lm_head += g[i].n == 128256;
        }
        cr_expect_eq(lm_head, 1, "the Llama-3.2-1B LM head is in the grid");
        cr_expect(g[0].m == d[0] && g[nd * nd * nd - 1].k == d[nd - 1], "the cube comes first");
    }
}

Test(calibrate_fp8, capability_needs_8_9) {
    cr_expect(!ts_calib_fp8_capable(80), "A100 (8.0)");
    cr_expect(!ts_calib_fp8_capable(86), "RTX 30x0 (8.6)");
    cr_expect(ts_calib_fp8_capable(89), "Ada (8.9)");
    cr_expect(ts_calib_fp8_capable(90), "Hopper (9.0)");
    cr_expect(ts_calib_fp8_capable(100), "Blackwell (10.0)");
}

/* The fit gives the truth's curve back as rate / best rate, the best rate as the FP8 peak, and the
 * spec prices every fp8 row at its measured time. */
Test(calibrate_fp8, fit_recovers_the_curve) {
    ts_system truth = truth_system();
    static ts_calib c;
    synthetic_gpu_calib(&c, &truth, 90, NULL);
    cr_assert_eq(c.n_gemm_fp8, FP8_ROWS, "the quick fp8 grid: %d shapes", c.n_gemm_fp8);
    cr_assert_eq(ts_calib_fit(&c, &truth), TS_OK, "%s", ts_error_message());
    const ts_system *s = &c.system;
    double best = 0, best_eff = 0;
    for (int i = 0; i < c.n_gemm_fp8; i++) {
        best = fmax(best, c.gemm_fp8[i].flops / c.gemm_fp8[i].time_s);
        best_eff = fmax(best_eff, ts_eff_at(&truth.gemm_eff_fp8, c.gemm_fp8[i].flops));
    }
    cr_expect(fabs(s->peak_flops[TS_DTYPE_FP8] / best - 1) < 1e-12, "fp8 peak %g, best rate %g", s->peak_flops[TS_DTYPE_FP8], best);
    cr_expect(fabs(s->peak_flops[TS_DTYPE_FP8] / (truth.peak_flops[TS_DTYPE_FP8] * best_eff) - 1) < 1e-9);
    cr_expect_eq(s->gemm_eff_fp8.n, FP8_FLOP_COUNTS);
    for (int i = 0; i < s->gemm_eff_fp8.n; i++) {
        double f = s->gemm_eff_fp8.flops[i], want = ts_eff_at(&truth.gemm_eff_fp8, f) / best_eff;
        cr_expect(fabs(s->gemm_eff_fp8.eff[i] / want - 1) < 1e-9, "eff at %g: %g, expected %g", f, s->gemm_eff_fp8.eff[i], want);
    }
    for (int i = 0; i < c.n_gemm_fp8; i++)
        cr_expect(fabs(c.gemm_fp8[i].model_s / c.gemm_fp8[i].time_s - 1) < 1e-9, "row %d: model %g s, measured %g s", i,
                  c.gemm_fp8[i].model_s, c.gemm_fp8[i].time_s);
    cr_expect(c.gemm_fp8_rms_error < 1e-9, "rms %g", c.gemm_fp8_rms_error);
    /* the grid timed the backward's split accumulation: no template factor on the curve */
    cr_expect_gt(truth.gemm_fp8_bwd_eff, 0, "the H100 template states one");
    cr_expect_eq(s->gemm_fp8_bwd_eff, 0);
    /* FP8 and the other dtypes are priced apart: the fp32 curve is the fp32 rows'. */
    cr_expect(c.gemm_rms_error < 1e-9, "fp32 rms %g", c.gemm_rms_error);
    char note[320];
    ts_calib_fp8_note(&c, note, sizeof note);
    cr_expect(strstr(note, "fp8: measured on 33 shapes") != NULL && strstr(note, "9.0") != NULL, "%s", note);
    char *dir = make_temp_dir(), tables[512];
    snprintf(tables, sizeof tables, "%s/tables.txt", dir);
    FILE *f = fopen(tables, "w");
    cr_assert(f != NULL);
    cr_assert_eq(ts_calib_print(f, &c), TS_OK, "%s", ts_error_message());
    fclose(f);
    char *text = read_file(tables), first[64];
    snprintf(first, sizeof first, "#   efficiency.gemm_fp8: %.3g:%.3f", s->gemm_eff_fp8.flops[0], s->gemm_eff_fp8.eff[0]);
    cr_expect(strstr(text, "# GEMM fp8: cublasLtMatmul") != NULL && strstr(text, first) != NULL, "%s", text);
    free(text);
    remove_dir(dir);
    c.gemm_fp8[5].time_s = 0;
    ts_error_clear();
    cr_expect_eq(ts_calib_fit(&c, &truth), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "fp8 GEMM row 5") != NULL, "%s", ts_error_message());
}

/* The profile holds the curve in the zoo's form, with sources and the rows, and loads back. */
Test(calibrate_fp8, profile_holds_the_curve_and_loads_back) {
    ts_system truth = truth_system();
    static ts_calib c;
    synthetic_gpu_calib(&c, &truth, 90, NULL);
    cr_assert_eq(ts_calib_fit(&c, &truth), TS_OK, "%s", ts_error_message());
    char *dir = make_temp_dir(), path[512];
    snprintf(path, sizeof path, "%s/h100.json", dir);
    write_profile(&c, path);
    cJSON *doc = load_json(path);
    const cJSON *eff = json_obj(doc, "efficiency", "profile");
    const cJSON *curve = json_obj(eff, "gemm_fp8", "efficiency");
    const cJSON *points = cJSON_GetObjectItemCaseSensitive(curve, "points");
    cr_expect(cJSON_IsArray(points) && cJSON_GetArraySize(points) == FP8_FLOP_COUNTS, "efficiency.gemm_fp8.points");
    cr_expect(strstr(json_str(curve, "source", "gemm_fp8"), "tessera calibrate: fp8 GEMM rate / peak_flops.fp8") != NULL);
    const cJSON *fp8 = json_obj(json_obj(json_obj(doc, "gpu", "profile"), "peak_flops", "gpu"), "fp8", "peak_flops");
    cr_expect(strstr(json_str(fp8, "source", "peak_flops.fp8"), "best per-rank fp8 GEMM rate over 33") != NULL);
    const cJSON *measured = json_obj(doc, "measured", "profile");
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(measured, "gemm_fp8");
    cr_expect(cJSON_IsArray(rows) && cJSON_GetArraySize(rows) == FP8_ROWS, "measured.gemm_fp8 rows");
    cr_expect_float_eq(json_num(measured, "gpu_compute_capability", "measured"), 9.0, 1e-12);
    cJSON_Delete(doc);

    ts_system back;
    cr_assert_eq(ts_system_load(path, &back), TS_OK, "%s", ts_error_message());
    cr_expect(fabs(back.peak_flops[TS_DTYPE_FP8] / c.system.peak_flops[TS_DTYPE_FP8] - 1) < 1e-14, "fp8 peak");
    cr_assert_eq(back.gemm_eff_fp8.n, c.system.gemm_eff_fp8.n);
    for (int i = 0; i < back.gemm_eff_fp8.n; i++)
        cr_expect(fabs(back.gemm_eff_fp8.flops[i] / c.system.gemm_eff_fp8.flops[i] - 1) < 1e-14 &&
                      fabs(back.gemm_eff_fp8.eff[i] / c.system.gemm_eff_fp8.eff[i] - 1) < 1e-14,
                  "point %d: (%.17g, %.17g) loaded back as (%.17g, %.17g)", i, c.system.gemm_eff_fp8.flops[i],
                  c.system.gemm_eff_fp8.eff[i], back.gemm_eff_fp8.flops[i], back.gemm_eff_fp8.eff[i]);
    remove_dir(dir);
}

/* layouts[0].time_s.compute of `tessera plan` for tiny on `profile` in `dtype`; also checks that
 * an fp8 plan carries the profile's curve (system.efficiency.gemm_fp8). */
static double plan_compute_s(const char *profile, const char *dtype, const ts_eff_curve *curve) {
    cli_result r = run_cli("plan", "-m", "tiny", "-s", profile, "--gpus", "1", "--global-batch", "8", "--seq", "128",
                           "--dtype", dtype, "--fix", "mbs=1", "--json", NULL);
    cJSON *doc = parse_json_output(&r, "plan --json");
    const cJSON *layouts = cJSON_GetObjectItemCaseSensitive(doc, "layouts");
    cr_assert(cJSON_IsArray(layouts) && cJSON_GetArraySize(layouts) > 0, "plan found no layout: %s", r.out);
    double s = json_num(json_obj(cJSON_GetArrayItem(layouts, 0), "time_s", "layout"), "compute", "time_s");
    if (curve) {
        const cJSON *eff = json_obj(json_obj(doc, "system", "plan"), "efficiency", "system");
        const cJSON *points = cJSON_GetObjectItemCaseSensitive(json_obj(eff, "gemm_fp8", "efficiency"), "points");
        cr_assert(cJSON_IsArray(points) && cJSON_GetArraySize(points) == curve->n, "the plan's gemm_fp8 points");
        for (int i = 0; i < curve->n; i++) {
            const cJSON *p = cJSON_GetArrayItem(points, i);
            cr_expect(fabs(cJSON_GetArrayItem(p, 1)->valuedouble / curve->eff[i] - 1) < 1e-12, "point %d", i);
        }
    }
    cJSON_Delete(doc);
    cli_result_free(&r);
    return s;
}

/* Planning in fp8 on the profile prices FP8 GEMMs from its curve: a curve half as high below 1e11
 * FLOPs (tiny's GEMMs are all below) gives the same peak and a slower FP8 plan; BF16 plans do not
 * move. In process, one such GEMM takes exactly twice as long. */
Test(calibrate_fp8, fp8_plans_are_priced_on_the_fitted_curve, .timeout = 120) {
    ts_system truth = truth_system();
    static ts_calib fast, slow;
    synthetic_gpu_calib(&fast, &truth, 90, NULL);
    synthetic_gpu_calib(&slow, &truth, 90, slow_small);
    cr_assert_eq(ts_calib_fit(&fast, &truth), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_calib_fit(&slow, &truth), TS_OK, "%s", ts_error_message());
    char *dir = make_temp_dir(), a[512], b[512];
    snprintf(a, sizeof a, "%s/fast.json", dir);
    snprintf(b, sizeof b, "%s/slow.json", dir);
    write_profile(&fast, a);
    write_profile(&slow, b);
    ts_system sa, sb;
    cr_assert_eq(ts_system_load(a, &sa), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_system_load(b, &sb), TS_OK, "%s", ts_error_message());
    cr_expect_eq(sa.peak_flops[TS_DTYPE_FP8], sb.peak_flops[TS_DTYPE_FP8], "the same best rate");
    double ga = ts_gemm_s(&sa, TS_DTYPE_FP8, 1024, 256, 256), gb = ts_gemm_s(&sb, TS_DTYPE_FP8, 1024, 256, 256);
    cr_expect(fabs(gb / ga - 2) < 1e-9, "an FP8 GEMM of 1.3e8 FLOPs: %g s vs %g s, expected twice", gb, ga);
    cr_expect_eq(ts_gemm_s(&sa, TS_DTYPE_BF16, 1024, 256, 256), ts_gemm_s(&sb, TS_DTYPE_BF16, 1024, 256, 256));

    double fa = plan_compute_s(a, "fp8", &sa.gemm_eff_fp8), fb = plan_compute_s(b, "fp8", &sb.gemm_eff_fp8);
    cr_expect(fb > fa * 1.05, "fp8 plan compute %g s on the slower curve vs %g s", fb, fa);
    double ba = plan_compute_s(a, "bf16", NULL), bb = plan_compute_s(b, "bf16", NULL);
    cr_expect_eq(ba, bb, "bf16 plans do not read the fp8 curve: %g vs %g s", ba, bb);
    remove_dir(dir);
}

/* A GPU below 8.9 measures no fp8 rows: the template's curve stays, the FP8 peak is 0, the note,
 * the profile's sources and the tables say so in one line, and fp8 plans are refused. */
Test(calibrate_fp8, gpu_without_fp8_keeps_the_template_curve, .timeout = 60) {
    ts_system truth = truth_system();
    static ts_calib c;
    synthetic_gpu_calib(&c, &truth, 80, NULL);
    cr_assert_eq(c.n_gemm_fp8, 0);
    cr_assert_eq(ts_calib_fit(&c, &truth), TS_OK, "%s", ts_error_message());
    const ts_system *s = &c.system;
    cr_expect_eq(s->peak_flops[TS_DTYPE_FP8], 0, "no FP8 peak");
    cr_assert_eq(s->gemm_eff_fp8.n, truth.gemm_eff_fp8.n);
    cr_expect(memcmp(&s->gemm_eff_fp8, &truth.gemm_eff_fp8, sizeof s->gemm_eff_fp8) == 0, "the template's curve");
    char note[320];
    ts_calib_fp8_note(&c, note, sizeof note);
    cr_expect(strstr(note, "NVIDIA A100-SXM4-80GB has compute capability 8.0, FP8 needs 8.9: the profile keeps the "
                           "template's FP8 curve") != NULL, "%s", note);
    cr_expect(strchr(note, '\n') == NULL, "one line");

    char *dir = make_temp_dir(), path[512], tables[512];
    snprintf(path, sizeof path, "%s/a100.json", dir);
    write_profile(&c, path);
    cJSON *doc = load_json(path);
    const cJSON *curve = json_obj(json_obj(doc, "efficiency", "profile"), "gemm_fp8", "efficiency");
    cr_expect(strstr(json_str(curve, "source", "gemm_fp8"), "the template's curve, not measured here") != NULL);
    const cJSON *fp8 = json_obj(json_obj(json_obj(doc, "gpu", "profile"), "peak_flops", "gpu"), "fp8", "peak_flops");
    cr_expect(strstr(json_str(fp8, "source", "peak_flops.fp8"), "compute capability 8.0") != NULL);
    cr_expect(cJSON_GetObjectItemCaseSensitive(json_obj(doc, "measured", "profile"), "gemm_fp8") == NULL, "no rows");
    cJSON_Delete(doc);
    ts_system back;
    cr_assert_eq(ts_system_load(path, &back), TS_OK, "%s", ts_error_message());
    cr_assert_eq(back.gemm_eff_fp8.n, truth.gemm_eff_fp8.n, "kept through the file");
    for (int i = 0; i < back.gemm_eff_fp8.n; i++)
        cr_expect(fabs(back.gemm_eff_fp8.eff[i] / truth.gemm_eff_fp8.eff[i] - 1) < 1e-14, "point %d", i);

    snprintf(tables, sizeof tables, "%s/tables.txt", dir);
    FILE *f = fopen(tables, "w");
    cr_assert(f != NULL);
    cr_assert_eq(ts_calib_print(f, &c), TS_OK, "%s", ts_error_message());
    fclose(f);
    char *text = read_file(tables);
    cr_expect(strstr(text, "#   fp8: not measured: NVIDIA A100-SXM4-80GB has compute capability 8.0") != NULL, "%s", text);
    cr_expect(strstr(text, "# GEMM fp8") == NULL, "no fp8 table");
    free(text);

    cli_result r = run_cli("plan", "-m", "tiny", "-s", path, "--gpus", "1", "--global-batch", "8", "--seq", "128",
                           "--dtype", "fp8", NULL);
    cr_expect_eq(r.status, 2, "fp8 on a GPU without FP8: exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, "has no fp8 peak") != NULL && one_line_error(r.err, "plan"), "%s", r.err);
    cli_result_free(&r);
    remove_dir(dir);
}

/* Equal FLOPs timed far apart (here alternately 2.5x slower and faster than the curve) leave any
 * curve far off its points: a warning, which `calibrate --strict` refuses to write the profile on;
 * the good rows pass. */
Test(calibrate_fp8, bad_points_fail_the_strict_check) {
    ts_system truth = truth_system();
    static ts_calib c;
    synthetic_gpu_calib(&c, &truth, 90, NULL);
    cr_assert_eq(ts_calib_fit(&c, &truth), TS_OK, "%s", ts_error_message());
    ts_calib_quality q;
    ts_calib_quality_judge_at(&c, -1, 16, &q);
    cr_expect_eq(q.warnings, 0, "exact rows: %s", q.n > 1 ? q.lines[1] : "");
    int ok_line = 0;
    for (int i = 0; i < q.n; i++) ok_line += strstr(q.lines[i], "ok: fp8 GEMM fit 0.0% rms (limit 15%)") != NULL;
    cr_expect_eq(ok_line, 1, "an ok line for the fp8 fit");

    /* The cube's shapes with the same FLOPs (m, n, k permuted): alternately 2.5x slower and faster. */
    int flip = 0;
    for (int i = 0; i < c.n_gemm_fp8; i++)
        for (int j = 0; j < i; j++)
            if (c.gemm_fp8[j].flops == c.gemm_fp8[i].flops) {
                c.gemm_fp8[i].time_s *= (flip++ % 2) ? 2.5 : 0.4;
                break;
            }
    cr_assert(flip >= 6, "the grid has permuted shapes of equal FLOPs (%d)", flip);
    cr_assert_eq(ts_calib_fit(&c, &truth), TS_OK, "%s", ts_error_message());
    cr_expect(c.gemm_fp8_rms_error > TS_CALIB_GEMM_RMS_LIMIT, "rms %g", c.gemm_fp8_rms_error);
    ts_calib_quality_judge_at(&c, -1, 16, &q);
    cr_expect_eq(q.warnings, 1);
    int warned = 0;
    for (int i = 0; i < q.n; i++) warned += strstr(q.lines[i], "warning: fp8 GEMM fit off by") != NULL;
    cr_expect_eq(warned, 1, "the warning names the fp8 fit");
}
