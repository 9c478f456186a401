/* Order statistics (see stats.h). */
#include "common/stats.h"

#include <math.h>
#include <stdlib.h>

int ts_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double ts_median(double *v, int n) {
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, ts_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double ts_quantile(const double *sorted, int n, double q) {
    if (n == 0) return 0;
    double pos = q * (n - 1);
    int lo = (int)floor(pos), hi = lo + 1 < n ? lo + 1 : lo;
    return sorted[lo] + (pos - lo) * (sorted[hi] - sorted[lo]);
}

double ts_cv(const double *v, int n) {
    if (n < 2) return 0;
    double sum = 0, sq = 0;
    for (int i = 0; i < n; i++) sum += v[i];
    double mean = sum / n;
    if (!(mean > 0)) return 0;
    for (int i = 0; i < n; i++) sq += (v[i] - mean) * (v[i] - mean);
    return sqrt(sq / (n - 1)) / mean;
}

/* E[max of n independent standard normals] = ∫ x · n φ(x) Φ(x)^(n−1) dx, by the midpoint rule over
 * [−9, 9] (2e-6 absolute), remembered per n: the planner asks for a few sizes many times. */
double ts_expected_max_normal(int n) {
    enum { CACHED = 4096, STEPS = 3600, WIDE_SLOTS = 64 };
    static double cache[CACHED + 1];
    /* larger groups (the planner's searches reach tens of thousands of ranks): a direct-mapped
     * cache, so a search that asks for a few sizes many times integrates each once */
    static int wide_n[WIDE_SLOTS];
    static double wide[WIDE_SLOTS];
    if (n <= 1) return 0;
    if (n <= CACHED && cache[n] != 0) return cache[n];
    int slot = n % WIDE_SLOTS;
    if (n > CACHED && wide_n[slot] == n) return wide[slot];
    double sum = 0, dx = 18.0 / STEPS;
    for (int i = 0; i < STEPS; i++) {
        double x = -9.0 + (i + 0.5) * dx;
        double pdf = exp(-0.5 * x * x) / sqrt(2.0 * M_PI), cdf = 0.5 * erfc(-x / sqrt(2.0));
        sum += x * n * pdf * pow(cdf, n - 1) * dx;
    }
    if (n <= CACHED) {
        cache[n] = sum;
    } else {
        wide_n[slot] = n;
        wide[slot] = sum;
    }
    return sum;
}
