/* A GEMM efficiency curve carried over by measured ratios (see gemm_transfer.h). */
#include "models/gemm_transfer.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "common/stats.h"

void ts_gemm_pairs_init(ts_gemm_pairs *p) { memset(p, 0, sizeof *p); }

void ts_gemm_pairs_free(ts_gemm_pairs *p) {
    free(p->pt);
    ts_gemm_pairs_init(p);
}

/* One GPU's measured shapes while reading: (b, m, n, k) and FLOP/s. */
typedef struct {
    long long shape[4];
    double per_s;
} shape_meas;

typedef struct {
    int n, cap;
    shape_meas *at;
} shape_list;

static int shape_find(const shape_list *l, const long long s[4]) {
    for (int i = 0; i < l->n; i++)
        if (!memcmp(l->at[i].shape, s, sizeof l->at[i].shape)) return i;
    return -1;
}

static ts_status shape_push(shape_list *l, const long long s[4], double per_s) {
    TS_CHECK(ts_grow((void **)&l->at, l->n, &l->cap, sizeof *l->at, "measured GEMM shapes"));
    memcpy(l->at[l->n].shape, s, sizeof l->at[0].shape);
    l->at[l->n++].per_s = per_s;
    return TS_OK;
}

/* Reads the lines of `f` for from_sm and to_sm in dtype into from and to. */
static ts_status read_lines(FILE *f, const char *path, const char *from_sm, const char *to_sm, const char *dtype,
                            shape_list *from, shape_list *to) {
    char line[256];
    int no = 1;
    if (!fgets(line, sizeof line, f) || strcmp(line, "sm,b,m,n,k,dtype,flops_per_s\n") != 0)
        return TS_FAIL(TS_ERR_INPUT, "%s:1: expected the header sm,b,m,n,k,dtype,flops_per_s", path);
    while (fgets(line, sizeof line, f)) {
        no++;
        char sm[32], dt[64];
        long long s[4];
        double per_s;
        int used = 0;
        if (sscanf(line, "%31[^,],%lld,%lld,%lld,%lld,%63[^,],%lf%n", sm, &s[0], &s[1], &s[2], &s[3], dt, &per_s,
                   &used) != 7 ||
            (line[used] != '\n' && line[used] != '\0') || s[0] < 1 || s[1] < 1 || s[2] < 1 || s[3] < 1 ||
            !(per_s > 0) || !isfinite(per_s))
            return TS_FAIL(TS_ERR_INPUT, "%s:%d: expected sm,b,m,n,k,dtype,flops_per_s with positive numbers", path,
                           no);
        if (strcmp(dt, dtype) != 0) continue;
        shape_list *l = !strcmp(sm, from_sm) ? from : !strcmp(sm, to_sm) ? to : NULL;
        if (!l) continue;
        if (shape_find(l, s) >= 0)
            return TS_FAIL(TS_ERR_INPUT, "%s:%d: %s %s b=%lld m=%lld n=%lld k=%lld given twice", path, no, sm, dt, s[0],
                           s[1], s[2], s[3]);
        TS_CHECK(shape_push(l, s, per_s));
    }
    return TS_OK;
}

ts_status ts_gemm_pairs_read(ts_gemm_pairs *p, const char *path, const char *from_sm, const char *to_sm,
                             const char *dtype) {
    FILE *f = fopen(path, "r");
    if (!f) return TS_FAIL(TS_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    shape_list from = {0}, to = {0};
    ts_status st = read_lines(f, path, from_sm, to_sm, dtype, &from, &to);
    fclose(f);
    for (int i = 0; st == TS_OK && i < from.n; i++) {
        int j = shape_find(&to, from.at[i].shape);
        if (j < 0) continue;
        const long long *s = from.at[i].shape;
        st = ts_grow((void **)&p->pt, p->n, &p->cap, sizeof *p->pt, "GEMM shapes measured on both GPUs");
        if (st == TS_OK)
            p->pt[p->n++] = (ts_gemm_pair){2.0 * (double)s[0] * (double)s[1] * (double)s[2] * (double)s[3],
                                           from.at[i].per_s, to.at[j].per_s};
    }
    free(from.at);
    free(to.at);
    if (st == TS_OK && p->n == 0)
        st = TS_FAIL(TS_ERR_INPUT, "%s: no %s shape measured on both %s and %s", path, dtype, from_sm, to_sm);
    return st;
}

int ts_gemm_ratio_bins(const ts_gemm_pairs *p, double from_peak, double to_peak, ts_gemm_ratio_bin *bins, int max) {
    int lo = INT_MAX, hi = INT_MIN, n = 0;
    for (int i = 0; i < p->n; i++) {
        int d = (int)lround(log10(p->pt[i].flops));
        lo = d < lo ? d : lo, hi = d > hi ? d : hi;
    }
    double *logf = malloc((size_t)p->n * sizeof *logf), *ratio = malloc((size_t)p->n * sizeof *ratio);
    for (int d = lo; logf && ratio && d <= hi && n < max; d++) {
        int k = 0;
        for (int i = 0; i < p->n; i++) {
            if ((int)lround(log10(p->pt[i].flops)) != d) continue;
            logf[k] = log10(p->pt[i].flops);
            ratio[k++] = (p->pt[i].to_per_s / to_peak) / (p->pt[i].from_per_s / from_peak);
        }
        if (k) bins[n++] = (ts_gemm_ratio_bin){pow(10.0, ts_median(logf, k)), ts_median(ratio, k), k};
    }
    free(logf);
    free(ratio);
    return n;
}

/* x to `digits` significant digits. */
static double round_sig(double x, int digits) {
    double scale = pow(10.0, digits - 1 - (int)floor(log10(fabs(x))));
    return round(x * scale) / scale;
}

ts_status ts_gemm_curve_transfer(const ts_gemm_ratio_bin *bins, int n, const ts_eff_curve *from, double hold_flops,
                                 ts_eff_curve *out) {
    int hold = n > 0 && hold_flops > bins[n - 1].flops;
    if (n < 1 || n + hold > TS_EFF_POINTS_MAX)
        return TS_FAIL(TS_ERR_INPUT, "carrying a GEMM curve over: %d ratio bins (1 to %d)", n, TS_EFF_POINTS_MAX - hold);
    memset(out, 0, sizeof *out);
    for (int i = 0; i < n + hold; i++) {
        double flops = i < n ? round_sig(bins[i].flops, 3) : hold_flops;
        out->flops[i] = flops;
        out->eff[i] = round(1000.0 * ts_eff_at(from, flops) * bins[i < n ? i : n - 1].ratio) / 1000.0;
    }
    out->n = n + hold;
    return TS_OK;
}
