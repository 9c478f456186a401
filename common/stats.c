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
