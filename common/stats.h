/* Order statistics of small arrays of doubles (step times, op times, errors). */
#ifndef TS_STATS_H
#define TS_STATS_H

/* qsort comparator: ascending doubles. */
int ts_cmp_double(const void *a, const void *b);

/* The median of v[0..n), sorting v in place (the mean of the middle two when n is even); NAN when
 * n is 0. */
double ts_median(double *v, int n);

/* The q-quantile (q in [0, 1]) of n ascending values, interpolated linearly between the two
 * nearest ranks (numpy's default: position q·(n − 1)); 0 when n is 0. */
double ts_quantile(const double *sorted, int n, double q);

/* Sample standard deviation (n − 1) over mean of v[0..n); 0 when n < 2 or the mean is not
 * positive. */
double ts_cv(const double *v, int n);

/* E[max of n independent standard normals] (0 for n ≤ 1; 0.5642 for 2, 1.0294 for 4, 1.4236 for
 * 8): how far above the mean the largest of n equally noisy quantities lands, in standard
 * deviations. */
double ts_expected_max_normal(int n);

#endif
