/* Flag parsing and the clock shared by the benchmark programs (each bench is one .c file; this header is all
 * they share). */
#ifndef TS_BENCH_ARGS_H
#define TS_BENCH_ARGS_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double bench_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* --min-s's value: seconds of timing in [0, 600]. On a bad value prints "PROG: --min-s: ..." to
 * stderr and returns 0 (the caller exits 2). */
static inline int bench_parse_min_s(const char *prog, const char *text, double *min_s) {
    char *end = NULL;
    double v = strtod(text, &end);
    if (end == text || *end || !(v >= 0 && v <= 600)) {
        fprintf(stderr, "%s: --min-s: expected seconds in [0, 600], got \"%s\"\n", prog, text);
        return 0;
    }
    *min_s = v;
    return 1;
}

#endif
