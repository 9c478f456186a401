/* main_grad accumulation's measured cost (see wgrad_accum.h). */
#include "planner/wgrad_accum.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"

/* Fitted by `build/bench/fp8_gemms --fit validation/gpu/h100-wgrad-sweep-1.txt
 * validation/gpu/h100-wgrad-sweep-2.txt` (ts_accum_fit): one H100 80GB HBM3, cuBLAS 13
 * (cublasGemmEx bf16, cublasLtMatmul E4M3 with split accumulation), six weights from 1536×6144
 * to 7168×18432 over 128 to 16384 tokens, twice; docs/gpu.md gives the figures. Applied to every
 * GPU: on an H200 it gives 16-23% less than was measured (validation/gpu/h200-wgrad-sweep.txt,
 * tests/test_wgrad_accum.c). */
static const ts_accum_curve bf16_curve = {1.232, 0.130, 0.75, 3.0};
static const ts_accum_curve fp32_curve = {1.239, 0.185, 0.77, 2.0};

const ts_accum_curve *ts_accum_curve_for(double grad_bytes) { return grad_bytes > 2 ? &fp32_curve : &bf16_curve; }

/* v^power for a power on the half-integer grid the fit searches (ts_accum_fit): products and
 * one square root, as the planner calls it for every weight-gradient GEMM it prices (pow() there
 * cost the search 6% of its instructions). */
static double half_integer_pow(double v, double power) {
    int halves = (int)lround(2 * power);
    double out = halves % 2 ? sqrt(v) : 1;
    for (int i = 0; i < halves / 2; i++) out *= v;
    return out;
}

/* x(r) of the header. */
static double share_at(const ts_accum_curve *c, double r) {
    return c->x_inf + (c->x0 - c->x_inf) / (1 + half_integer_pow(r / c->r_half, c->power));
}

double ts_accum_added_s(const ts_accum_curve *c, double gemm_s, double traffic_s) {
    if (!(gemm_s > 0 && traffic_s > 0)) return 0;
    return share_at(c, gemm_s / traffic_s) * traffic_s;
}

void ts_accum_points_init(ts_accum_points *p) { memset(p, 0, sizeof *p); }

void ts_accum_points_free(ts_accum_points *p) {
    free(p->pt);
    ts_accum_points_init(p);
}

static ts_status push(ts_accum_points *p, double gemm_s, double traffic_s, double added_s) {
    TS_CHECK(ts_grow((void **)&p->pt, p->n, &p->cap, sizeof *p->pt, "measured points"));
    p->pt[p->n++] = (ts_accum_point){gemm_s, traffic_s, added_s};
    return TS_OK;
}

/* The numbers of one table line from its `first` token on (strtod's reading; "-" and "nan" are
 * not finite): how many of `want` were read. */
static int numbers(char *line, int first, double *v, int want) {
    int tok = 0, got = 0;
    for (char *save = NULL, *t = strtok_r(line, " \t\n", &save); t && got < want; t = strtok_r(NULL, " \t\n", &save)) {
        if (tok++ < first) continue;
        if (*t == 'x') t++; /* "x4": a --gemms line's copies */
        char *end = NULL;
        v[got] = strtod(t, &end);
        if (end == t || *end) return got;
        got++;
    }
    return got;
}

ts_status ts_accum_points_read(ts_accum_points *p, const char *path, int grad_bytes) {
    FILE *f = fopen(path, "r");
    if (!f) return TS_FAIL(TS_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    char line[512];
    int before = p->n;
    ts_status st = TS_OK;
    while (st == TS_OK && fgets(line, sizeof line, f)) {
        int gemms = line[0] == ' ' && line[1] == ' ';
        if (!gemms && strncmp(line, "bf16 ", 5) && strncmp(line, "fp8 ", 4)) continue;
        /* add16 add32 gpu +16 +32 follow m n k compute (sweep) or m n k copies plan (gemms) */
        int at = gemms ? 5 : 4;
        double v[10];
        if (numbers(line, gemms ? 2 : 1, v, at + 5) != at + 5) continue;
        double add = v[at + (grad_bytes > 2)], gpu = v[at + 2], plus = v[at + 3 + (grad_bytes > 2)];
        if (!(isfinite(add) && isfinite(gpu) && isfinite(plus) && add > 0 && gpu > 0)) continue;
        st = push(p, 1e-3 * gpu, 1e-3 * add, 1e-3 * plus);
    }
    fclose(f);
    if (st == TS_OK && p->n == before)
        st = TS_FAIL(TS_ERR_INPUT, "%s: no measured GEMM (bench/fp8_gemms --wgrad --sweep or --gemms lines with GPU figures)",
                     path);
    return st;
}

/* Least squares of the added seconds in (x_inf, x0) at one (r_half, power): the fitted pair in
 * c, the squared error returned (INFINITY where the system is singular). */
static double fit_linear(const ts_accum_points *p, ts_accum_curve *c) {
    double a11 = 0, a12 = 0, a22 = 0, b1 = 0, b2 = 0, yy = 0;
    for (int i = 0; i < p->n; i++) {
        const ts_accum_point *q = &p->pt[i];
        double s = 1 / (1 + half_integer_pow(q->gemm_s / q->traffic_s / c->r_half, c->power));
        double u = q->traffic_s * (1 - s), w = q->traffic_s * s, y = q->added_s;
        a11 += u * u, a12 += u * w, a22 += w * w, b1 += u * y, b2 += w * y, yy += y * y;
    }
    double det = a11 * a22 - a12 * a12;
    if (!(fabs(det) > 1e-300)) return INFINITY;
    c->x_inf = (b1 * a22 - b2 * a12) / det;
    c->x0 = (a11 * b2 - a12 * b1) / det;
    /* |y - A·x|² = yᵀy - 2 xᵀAᵀy + xᵀAᵀA x */
    return yy - 2 * (c->x_inf * b1 + c->x0 * b2) +
           (c->x_inf * c->x_inf * a11 + 2 * c->x_inf * c->x0 * a12 + c->x0 * c->x0 * a22);
}

ts_status ts_accum_fit(const ts_accum_points *p, ts_accum_curve *out, double *rms_s) {
    if (p->n < 4) return TS_FAIL(TS_ERR_INPUT, "fitting main_grad's accumulation: %d measured points, 4 needed", p->n);
    double best = INFINITY;
    for (int i = 0; i <= 390; i++)
        for (int j = 1; j <= 12; j++) {
            ts_accum_curve c = {0, 0, 0.10 + 0.01 * i, 0.5 * j};
            double e = fit_linear(p, &c);
            if (e < best) best = e, *out = c;
        }
    if (!isfinite(best)) return TS_FAIL(TS_ERR_INPUT, "fitting main_grad's accumulation: the points fit no curve");
    if (rms_s) *rms_s = sqrt(fmax(best, 0) / p->n);
    return TS_OK;
}

void ts_accum_totals_of(const ts_accum_points *p, const ts_accum_curve *c, ts_accum_totals *out) {
    *out = (ts_accum_totals){0};
    for (int i = 0; i < p->n; i++) {
        const ts_accum_point *q = &p->pt[i];
        out->measured_s += q->added_s;
        out->curve_s += ts_accum_added_s(c, q->gemm_s, q->traffic_s);
        out->floor_s += fmax(0, q->traffic_s - q->gemm_s);
        out->additive_s += q->traffic_s;
    }
}
