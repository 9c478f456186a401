/* Benchmark data: a GPU's BF16 GEMM efficiency curve carried over from another's by the ratio of
 * their GEMM efficiencies in OpenXLA's measured matmul table (models/gemm_transfer.h,
 * validation/xla/). Prints each decade's shapes, median FLOPs and ratio, the carried curve beside
 * the target system file's, and exits 1 when the file does not carry it.
 *
 *   gemm_transfer [--table CSV] [--from SYSTEM] [--to SYSTEM] [--from-sm SM] [--to-sm SM]
 *                 [--dtype KEY] [--hold FLOPS]
 *
 * Defaults: validation/xla/matmul-perf-table.csv, h100-sxm-dgx (sm_90) to b200-dgx (sm_100),
 * bf16xbf16->bf16, the last ratio held to 1e12 FLOPs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/paths.h"
#include "models/gemm_transfer.h"

typedef struct {
    char table[4096];
    const char *table_name; /* as printed: the default's path in the repository, else --table's */
    const char *from, *to, *from_sm, *to_sm, *dtype;
    double hold_flops;
} opts;

static int parse(int argc, char **argv, opts *o) {
    *o = (opts){.from = "h100-sxm-dgx", .to = "b200-dgx", .from_sm = "sm_90", .to_sm = "sm_100",
                .dtype = "bf16xbf16->bf16", .hold_flops = 1e12, .table_name = "validation/xla/matmul-perf-table.csv"};
    snprintf(o->table, sizeof o->table, "%s/validation/xla/matmul-perf-table.csv", ts_data_dir());
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return fprintf(stderr, "gemm_transfer: %s needs a value (see the file's header)\n", a), 0;
        i++;
        if (!strcmp(a, "--table")) snprintf(o->table, sizeof o->table, "%s", o->table_name = v);
        else if (!strcmp(a, "--from")) o->from = v;
        else if (!strcmp(a, "--to")) o->to = v;
        else if (!strcmp(a, "--from-sm")) o->from_sm = v;
        else if (!strcmp(a, "--to-sm")) o->to_sm = v;
        else if (!strcmp(a, "--dtype")) o->dtype = v;
        else if (!strcmp(a, "--hold")) o->hold_flops = atof(v);
        else return fprintf(stderr, "gemm_transfer: unknown option %s\n", a), 0;
    }
    return 1;
}

/* The carried curve beside the target file's; 1 when they agree (FLOPs within 0.5%, efficiency
 * within 0.0005). */
static int print_curves(const ts_eff_curve *carried, const ts_eff_curve *file, const char *to) {
    int same = carried->n == file->n;
    printf("# carried curve against %s's: FLOPs, carried, file\n", to);
    for (int i = 0; i < carried->n || i < file->n; i++) {
        double f = i < carried->n ? carried->flops[i] : file->flops[i];
        printf("  %9.3g  ", f);
        if (i < carried->n) printf("%6.3f  ", carried->eff[i]); else printf("%6s  ", "-");
        if (i < file->n) printf("%6.3f\n", file->eff[i]); else printf("%6s\n", "-");
        if (i < carried->n && i < file->n)
            same = same && fabs(carried->flops[i] / file->flops[i] - 1) < 0.005 &&
                   fabs(carried->eff[i] - file->eff[i]) < 0.0005;
    }
    return same;
}

int main(int argc, char **argv) {
    opts o;
    if (!parse(argc, argv, &o)) return 2;
    ts_system from, to;
    ts_gemm_pairs p;
    ts_gemm_pairs_init(&p);
    if (ts_system_load(o.from, &from) != TS_OK || ts_system_load(o.to, &to) != TS_OK ||
        ts_gemm_pairs_read(&p, o.table, o.from_sm, o.to_sm, o.dtype) != TS_OK) {
        fprintf(stderr, "gemm_transfer: %s\n", ts_error_message());
        ts_gemm_pairs_free(&p);
        return 2;
    }
    const ts_eff_curve *from_curve = from.gemm_eff_bf16.n > 0 ? &from.gemm_eff_bf16 : &from.gemm_eff;
    ts_gemm_ratio_bin bins[TS_GEMM_RATIO_BINS_MAX];
    int n = ts_gemm_ratio_bins(&p, from.peak_flops[TS_DTYPE_BF16], to.peak_flops[TS_DTYPE_BF16], bins,
                               TS_GEMM_RATIO_BINS_MAX);
    printf("# %s: %d %s shapes on %s (%s, %.1f TFLOP/s peak) and %s (%s, %.1f)\n", o.table_name, p.n, o.dtype, o.from_sm,
           o.from, from.peak_flops[TS_DTYPE_BF16] / 1e12, o.to_sm, o.to, to.peak_flops[TS_DTYPE_BF16] / 1e12);
    printf("# decade  shapes  median FLOPs  efficiency ratio %s/%s  %s's curve  carried\n", o.to_sm, o.from_sm, o.from);
    for (int i = 0; i < n; i++)
        printf("  1e%-5.0f %6d  %12.3g  %24.3f  %10.3f  %7.3f\n", round(log10(bins[i].flops)), bins[i].shapes,
               bins[i].flops, bins[i].ratio, ts_eff_at(from_curve, bins[i].flops),
               ts_eff_at(from_curve, bins[i].flops) * bins[i].ratio);
    ts_gemm_pairs_free(&p);
    ts_eff_curve carried;
    if (ts_gemm_curve_transfer(bins, n, from_curve, o.hold_flops, &carried) != TS_OK) {
        fprintf(stderr, "gemm_transfer: %s\n", ts_error_message());
        return 2;
    }
    int same = print_curves(&carried, to.gemm_eff_bf16.n > 0 ? &to.gemm_eff_bf16 : &to.gemm_eff, o.to);
    printf("# %s %s the carried curve\n", o.to, same ? "carries" : "does not carry");
    return same ? 0 : 1;
}
