/* Checked integer arithmetic for sizes read from files: a product that does not fit is reported,
 * never wrapped (a hand-edited plan with dp×tp×pp×cp wrapping to 1 must not pass as one GPU). */
#ifndef TS_CHECKED_H
#define TS_CHECKED_H

#include <stdint.h>

/* The product of n factors into *out; 0 when it overflows int64 (or a factor is negative and the
 * product would need more than that), 1 otherwise. */
static inline int ts_mul_i64(const int64_t *factors, int n, int64_t *out) {
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        if (__builtin_mul_overflow(p, factors[i], &p)) return 0;
    *out = p;
    return 1;
}

#endif
