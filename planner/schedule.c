/* The four pipeline schedules' closed forms (see schedule.h).
 *
 * Bubbles: GPipe and 1F1B (p-1)(t_f+t_b) (Huang et al. 2019 §2.3; Narayanan et al. SC'21 §2.2.1);
 * interleaved 1F1B divides it by v (SC'21 §2.2.2); ZB-H1 (p-1)(T_F+T_B-T_W) with T_B the input
 * gradient only (Qi et al. 2024, Table 2).
 * Activations in flight on stage i: GPipe keeps all m; 1F1B and ZB-H1 keep min(m, p-i) (SC'21
 * §2.2.1; Qi et al. Table 2: ZB-H1 peak p·M_B); interleaved stage 0 keeps
 * p·(1 + (p-1)/(p·v)) (Korthikanti et al. 2022 §4.2.3), later stages proportionally fewer. */
#include "planner/schedule.h"

static double min_d(double a, double b) { return a < b ? a : b; }

static double bubble_1f1b(int p, int v, double tf, double tb, double tw) {
    (void)v, (void)tw;
    return (p - 1) * (tf + tb);
}
static double bubble_interleaved(int p, int v, double tf, double tb, double tw) {
    (void)tw;
    return (p - 1) * (tf + tb) / v;
}
static double bubble_zb_h1(int p, int v, double tf, double tb, double tw) {
    (void)v;
    double b_input = tb - tw;
    return (p - 1) * (tf + b_input - tw > 0 ? tf + b_input - tw : 0);
}

static double inflight_gpipe(int p, int stage, int m, int v) {
    (void)p, (void)stage, (void)v;
    return m;
}
static double inflight_1f1b(int p, int stage, int m, int v) {
    (void)v;
    return min_d(m, p - stage);
}
static double inflight_interleaved(int p, int stage, int m, int v) {
    double peak = (p - stage) * (1.0 + (p - 1.0) / ((double)p * v));
    return min_d(m, peak);
}

const ts_schedule_info ts_schedules[TS_SCHED_COUNT] = {
    [TS_SCHED_GPIPE] = {TS_SCHED_GPIPE, "gpipe", 0, bubble_1f1b, inflight_gpipe},
    [TS_SCHED_1F1B] = {TS_SCHED_1F1B, "1f1b", 0, bubble_1f1b, inflight_1f1b},
    [TS_SCHED_INTERLEAVED] = {TS_SCHED_INTERLEAVED, "interleaved", 1, bubble_interleaved,
                              inflight_interleaved},
    [TS_SCHED_ZB_H1] = {TS_SCHED_ZB_H1, "zb-h1", 0, bubble_zb_h1, inflight_1f1b},
};
