/* exec/speed_gauge.h: a reading is its kernels' FLOPs per second of the calling thread's CPU time (a
 * backend whose GEMM and attention kernels sleep longer than they compute read the computing
 * alone); a rank's speed over a step is the mean of the readings either side of it, a stage goes
 * at its slowest rank's and the step at the stages' harmonic mean; the CPU backend reads a
 * plausible rate. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "exec/kernel_table.h"
#include "exec/speed_gauge.h"

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define BURN_S 0.005
#define SLEEP_S 0.010

/* Computes for BURN_S of CPU time, then sleeps SLEEP_S (off the CPU). */
static void burn_then_sleep(void) {
    volatile double x = 0;
    for (double t0 = cpu_now(); cpu_now() - t0 < BURN_S;) x += 1;
    (void)x;
    struct timespec d = {0, (long)(SLEEP_S * 1e9)};
    while (nanosleep(&d, &d) != 0 && errno == EINTR) continue;
}

static ts_status slow_gemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                           int ldb, float beta, float *c, int ldc) {
    (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb, (void)beta,
        (void)c, (void)ldc;
    burn_then_sleep();
    return TS_OK;
}

static ts_status slow_attention_fwd(float *out, float *lse, const float *q, const float *k, const float *v,
                                    const ts_attn_shape *s, float *scratch) {
    (void)out, (void)lse, (void)q, (void)k, (void)v, (void)scratch;
    cr_expect(s->Tq == TS_GAUGE_T && s->H == TS_GAUGE_H && s->KV == TS_GAUGE_KV && s->D == TS_GAUGE_D);
    cr_expect(s->q_pos[TS_GAUGE_T - 1] == TS_GAUGE_T - 1, "positions 0..T-1");
    burn_then_sleep();
    return TS_OK;
}

static ts_status slow_attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q,
                                    const float *k, const float *v, const float *out, const float *lse,
                                    const ts_attn_shape *s) {
    (void)dq, (void)dk, (void)dv, (void)dout, (void)q, (void)k, (void)v, (void)out, (void)lse, (void)s;
    burn_then_sleep();
    return TS_OK;
}

static ts_status host_copy(void *dst, const void *src, size_t bytes) {
    memcpy(dst, src, bytes);
    return TS_OK;
}

static ts_status host_alloc(size_t bytes, void **out) {
    *out = calloc(1, bytes);
    return *out ? TS_OK : TS_FAIL(TS_ERR_NOMEM, "calloc %zu", bytes);
}

Test(speed_gauge, reads_cpu_time_not_wall_time) {
    ts_kernels kernels = {.to_device = host_copy, .attention_fwd = slow_attention_fwd,
                          .attention_bwd = slow_attention_bwd};
    ts_backend fake = {.name = "fake", .alloc = host_alloc, .free = free, .sgemm = slow_gemm, .kernels = &kernels};
    ts_gauge g;
    cr_assert_eq(ts_gauge_init(&g, &fake), TS_OK, "%s", ts_error_message());
    double rate = 0;
    cr_assert_eq(ts_gauge_read(&g, &rate), TS_OK, "%s", ts_error_message());
    /* TS_GAUGE_CALLS GEMMs and the attention forward and backward each burn BURN_S. */
    double flop = ts_gauge_flop(), calls = TS_GAUGE_CALLS + 2;
    cr_expect(flop > 2.0 * TS_GAUGE_M * TS_GAUGE_N * TS_GAUGE_K * TS_GAUGE_CALLS, "the attention's FLOPs count");
    double cpu_rate = flop / (calls * BURN_S), wall_rate = flop / (calls * (BURN_S + SLEEP_S));
    /* The burn loop overshoots a little, never undershoots: at most the CPU-time rate. */
    cr_expect(rate <= cpu_rate * 1.0001 && rate > 0.7 * cpu_rate, "read %g FLOP/s, computing alone gives %g", rate,
              cpu_rate);
    cr_expect(rate > 2 * wall_rate, "read %g FLOP/s: the sleep counted (wall clock gives %g)", rate, wall_rate);
    ts_gauge_free(&g);
    ts_gauge_free(&g); /* freed twice: the second is a no-op */
}

Test(speed_gauge, step_speeds_average_the_readings_either_side) {
    const double readings[4] = {10, 20, 40, 10};
    const int stage[1] = {0};
    double speeds[3] = {0};
    ts_gauge_step_speeds(readings, stage, 1, 3, speeds);
    cr_expect_eq(speeds[0], 15);
    cr_expect_eq(speeds[1], 30);
    cr_expect_eq(speeds[2], 25);
}

/* Ranks of one stage synchronise: the step goes at the slowest one's speed. */
Test(speed_gauge, a_stage_goes_at_its_slowest_rank) {
    const double readings[2][4] = {{10, 20, 40, 10}, {30, 30, 10, 30}};
    const int stage[2] = {0, 0};
    double speeds[3] = {0};
    ts_gauge_step_speeds(&readings[0][0], stage, 2, 3, speeds);
    cr_expect_eq(speeds[0], 15, "min(15, 30)");
    cr_expect_eq(speeds[1], 20, "min(30, 20)");
    cr_expect_eq(speeds[2], 20, "min(25, 20)");
}

/* Pipeline stages take turns: the harmonic mean of the stages' (slowest ranks') speeds. Four ranks,
 * two per stage. */
Test(speed_gauge, stages_take_turns) {
    const double readings[4][2] = {{10, 10}, {30, 30}, {40, 40}, {60, 60}};
    const int stage[4] = {0, 0, 1, 1};
    double speed = 0;
    ts_gauge_step_speeds(&readings[0][0], stage, 4, 1, &speed);
    cr_expect(fabs(speed - 2 / (1 / 10.0 + 1 / 40.0)) < 1e-12, "stages at 10 and 40: %g", speed);
    const int stage_rev[4] = {1, 0, 1, 0};
    ts_gauge_step_speeds(&readings[0][0], stage_rev, 4, 1, &speed);
    cr_expect(fabs(speed - 2 / (1 / 10.0 + 1 / 30.0)) < 1e-12, "stages at 10 and 30: %g", speed);
}

Test(speed_gauge, cpu_backend_reads_a_rate) {
    ts_gauge g;
    cr_assert_eq(ts_gauge_init(&g, ts_backend_cpu(1)), TS_OK, "%s", ts_error_message());
    double a = 0, b = 0;
    cr_assert_eq(ts_gauge_read(&g, &a), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_gauge_read(&g, &b), TS_OK, "%s", ts_error_message());
    /* One core of anything that runs these tests: above 100 MFLOP/s, below 10 TFLOP/s. */
    cr_expect(a > 1e8 && a < 1e13 && b > 1e8 && b < 1e13, "readings %g, %g FLOP/s", a, b);
    ts_gauge_free(&g);
}
