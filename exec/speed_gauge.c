/* The speed gauge (speed_gauge.h): a few fixed GEMMs and an attention pass timed on the calling
 * thread's CPU clock. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/kernel_table.h"
#include "exec/speed_gauge.h"

ts_status ts_gauge_init(ts_gauge *g, const ts_backend *be) {
    ts_status res = TS_OK;
    *g = (ts_gauge){.be = be};
    TS_CHECK_GOTO(be->alloc((size_t)TS_GAUGE_M * TS_GAUGE_K * sizeof(float), (void **)&g->a), res, fail);
    TS_CHECK_GOTO(be->alloc((size_t)TS_GAUGE_K * TS_GAUGE_N * sizeof(float), (void **)&g->b), res, fail);
    TS_CHECK_GOTO(be->alloc((size_t)TS_GAUGE_M * TS_GAUGE_N * sizeof(float), (void **)&g->c), res, fail);
    size_t qn = (size_t)TS_GAUGE_T * TS_GAUGE_H * TS_GAUGE_D, kn = (size_t)TS_GAUGE_T * TS_GAUGE_KV * TS_GAUGE_D;
    float **qs[] = {&g->q, &g->o, &g->dq}, **ks[] = {&g->k, &g->v, &g->dk, &g->dv};
    for (int i = 0; i < 3; i++) TS_CHECK_GOTO(be->alloc(qn * sizeof(float), (void **)qs[i]), res, fail);
    for (int i = 0; i < 4; i++) TS_CHECK_GOTO(be->alloc(kn * sizeof(float), (void **)ks[i]), res, fail);
    TS_CHECK_GOTO(be->alloc((size_t)TS_GAUGE_T * TS_GAUGE_H * sizeof(float), (void **)&g->lse), res, fail);
    TS_CHECK_GOTO(be->alloc((size_t)TS_GAUGE_T * sizeof(float), (void **)&g->scratch), res, fail);
    TS_CHECK_GOTO(be->alloc((size_t)TS_GAUGE_T * sizeof(int), (void **)&g->pos), res, fail);
    int pos[TS_GAUGE_T];
    for (int i = 0; i < TS_GAUGE_T; i++) pos[i] = i;
    TS_CHECK_GOTO(be->kernels->to_device(g->pos, pos, sizeof pos), res, fail);
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
        float *fs[] = {g->q, g->k, g->v, g->o, g->lse, g->dq, g->dk, g->dv, g->scratch};
        for (int i = 0; i < 9; i++) g->be->free(fs[i]);
        g->be->free(g->pos);
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
    const ts_attn_shape sh = {.Tq = TS_GAUGE_T, .Tk = TS_GAUGE_T, .H = TS_GAUGE_H, .KV = TS_GAUGE_KV, .D = TS_GAUGE_D,
                              .ldq = TS_GAUGE_H * TS_GAUGE_D, .ldk = TS_GAUGE_KV * TS_GAUGE_D,
                              .ldv = TS_GAUGE_KV * TS_GAUGE_D, .ldo = TS_GAUGE_H * TS_GAUGE_D, .q_pos = g->pos,
                              .k_pos = g->pos};
    TS_CHECK(cpu_s(&t0));
    /* Zero operands: OpenBLAS and the attention kernels do the same work whatever the values. */
    for (int i = 0; i < TS_GAUGE_CALLS; i++)
        TS_CHECK(g->be->sgemm(0, 0, TS_GAUGE_M, TS_GAUGE_N, TS_GAUGE_K, 1.0f, g->a, TS_GAUGE_K, g->b, TS_GAUGE_N,
                              0.0f, g->c, TS_GAUGE_N));
    TS_CHECK(g->be->kernels->attention_fwd(g->o, g->lse, g->q, g->k, g->v, &sh, g->scratch));
    TS_CHECK(g->be->kernels->attention_bwd(g->dq, g->dk, g->dv, g->o, g->q, g->k, g->v, g->o, g->lse, &sh));
    TS_CHECK(cpu_s(&t1));
    if (!(t1 > t0)) return TS_FAIL(TS_ERR_EXTERNAL, "speed gauge: the thread's CPU clock did not move over a reading");
    *flops_per_s = ts_gauge_flop() / (t1 - t0);
    return TS_OK;
}

double ts_gauge_flop(void) {
    /* GEMM 2mnk; causal attention forward 0.5 · 4·T²·H·D and backward 2.5 × that (planner/layer.c's
     * convention). */
    double gemm = 2.0 * TS_GAUGE_M * TS_GAUGE_N * TS_GAUGE_K * TS_GAUGE_CALLS;
    return gemm + 3.5 * 0.5 * 4.0 * TS_GAUGE_T * TS_GAUGE_T * TS_GAUGE_H * TS_GAUGE_D;
}

void ts_gauge_step_speeds(const double *readings, const int *stage, int ranks, int steps, double *speeds) {
    int stages = 0;
    for (int r = 0; r < ranks; r++) stages = stage[r] + 1 > stages ? stage[r] + 1 : stages;
    for (int s = 0; s < steps; s++) {
        double inv = 0; /* Σ over the stages of 1 / the stage's slowest rank's speed */
        int seen = 0;
        for (int p = 0; p < stages; p++) {
            double slowest = INFINITY;
            for (int r = 0; r < ranks; r++) {
                const double *mine = readings + (size_t)r * (steps + 1);
                if (stage[r] == p) slowest = fmin(slowest, 0.5 * (mine[s] + mine[s + 1]));
            }
            if (slowest < INFINITY) inv += 1 / slowest, seen++;
        }
        speeds[s] = seen / inv;
    }
}

ts_status ts_gauge_world_readings(const ts_runtime *rt, const double *readings, int steps, double *all) {
    ts_status res = TS_OK;
    int world = rt->size, n = steps + 1;
    int *counts = NULL, *offs = NULL;
    if (rt->rank == 0) {
        counts = malloc((size_t)world * sizeof *counts);
        offs = malloc((size_t)world * sizeof *offs);
        TS_ALLOC_GOTO(counts, res, exit);
        TS_ALLOC_GOTO(offs, res, exit);
        for (int r = 0; r < world; r++) counts[r] = n, offs[r] = r * n;
    }
    TS_CHECK_GOTO(ts_runtime_gather(rt, readings, n, all, counts, offs), res, exit);
exit:
    free(counts);
    free(offs);
    return res;
}
