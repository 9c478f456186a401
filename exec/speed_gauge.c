/* The speed gauge (speed_gauge.h): a few fixed GEMMs timed on the calling thread's CPU clock. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/speed_gauge.h"

ts_status ts_gauge_init(ts_gauge *g, const ts_backend *be) {
    ts_status res = TS_OK;
    *g = (ts_gauge){.be = be};
    TS_CHECK_GOTO(be->alloc((size_t)TS_GAUGE_M * TS_GAUGE_K * sizeof(float), (void **)&g->a), res, fail);
    TS_CHECK_GOTO(be->alloc((size_t)TS_GAUGE_K * TS_GAUGE_N * sizeof(float), (void **)&g->b), res, fail);
    TS_CHECK_GOTO(be->alloc((size_t)TS_GAUGE_M * TS_GAUGE_N * sizeof(float), (void **)&g->c), res, fail);
    return TS_OK;
fail:
    ts_gauge_free(g);
    return res;
}

void ts_gauge_free(ts_gauge *g) {
    if (g->be) {
        g->be->free(g->a);
        g->be->free(g->b);
        g->be->free(g->c);
    }
    *g = (ts_gauge){0};
}

static ts_status cpu_s(double *out) {
    struct timespec t;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0)
        return TS_FAIL(TS_ERR_EXTERNAL, "clock_gettime(CLOCK_THREAD_CPUTIME_ID): %s", strerror(errno));
    *out = (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
    return TS_OK;
}

ts_status ts_gauge_read(ts_gauge *g, double *flops_per_s) {
    double t0, t1;
    TS_CHECK(cpu_s(&t0));
    /* Zero operands: OpenBLAS does the same work whatever the values. */
    for (int i = 0; i < TS_GAUGE_CALLS; i++)
        TS_CHECK(g->be->sgemm(0, 0, TS_GAUGE_M, TS_GAUGE_N, TS_GAUGE_K, 1.0f, g->a, TS_GAUGE_K, g->b, TS_GAUGE_N,
                              0.0f, g->c, TS_GAUGE_N));
    TS_CHECK(cpu_s(&t1));
    if (!(t1 > t0)) return TS_FAIL(TS_ERR_EXTERNAL, "speed gauge: the thread's CPU clock did not move over %d GEMMs",
                                   TS_GAUGE_CALLS);
    *flops_per_s = 2.0 * TS_GAUGE_M * TS_GAUGE_N * TS_GAUGE_K * TS_GAUGE_CALLS / (t1 - t0);
    return TS_OK;
}

void ts_gauge_step_speeds(const double *readings, int ranks, int steps, double *speeds) {
    for (int s = 0; s < steps; s++) {
        speeds[s] = 0;
        for (int r = 0; r < ranks; r++) {
            const double *mine = readings + (size_t)r * (steps + 1);
            speeds[s] += 0.5 * (mine[s] + mine[s + 1]) / ranks;
        }
    }
}

ts_status ts_gauge_world_speeds(const ts_runtime *rt, const double *readings, int steps, double *speeds) {
    ts_status res = TS_OK;
    int world = rt->size, n = steps + 1;
    double *all = NULL;
    int *counts = NULL, *offs = NULL;
    if (rt->rank == 0) {
        all = malloc((size_t)world * n * sizeof *all);
        counts = malloc((size_t)world * sizeof *counts);
        offs = malloc((size_t)world * sizeof *offs);
        TS_ALLOC_GOTO(all, res, exit);
        TS_ALLOC_GOTO(counts, res, exit);
        TS_ALLOC_GOTO(offs, res, exit);
        for (int r = 0; r < world; r++) counts[r] = n, offs[r] = r * n;
    }
    TS_CHECK_GOTO(ts_runtime_gather(rt, readings, n, all, counts, offs), res, exit);
    if (rt->rank == 0) ts_gauge_step_speeds(all, world, steps, speeds);
exit:
    free(all);
    free(counts);
    free(offs);
    return res;
}
