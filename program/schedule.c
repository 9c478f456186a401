/* The four pipeline schedules' closed forms (see schedule.h).
 *
 * Bubbles: GPipe and 1F1B (p-1)(t_f+t_b) (Huang et al. 2019 §2.3; Narayanan et al. SC'21 §2.2.1);
 * interleaved 1F1B divides it by v (SC'21 §2.2.2); ZB-H1 (p-1)(T_F+T_B-T_W) with T_B the input
 * gradient only (Qi et al. 2024, Table 2).
 * Activations in flight on stage i: GPipe keeps all m; 1F1B and ZB-H1 keep min(m, p-i) (SC'21
 * §2.2.1; Qi et al. Table 2: ZB-H1 peak p·M_B); interleaved stage 0 keeps
 * p·(1 + (p-1)/(p·v)) (Korthikanti et al. 2022 §4.2.3), later stages proportionally fewer.
 *
 * Orders (what the step program runs): GPipe all forwards then all backwards; 1F1B warms up
 * with p-s-1 forwards, then alternates one forward and one backward, then drains (Narayanan et al.
 * 2021, PipeDream-Flush); interleaved follows Megatron-LM's schedule (warm-up
 * (p-s-1)·2 + (v-1)·p virtual micro-batches; forward chunk of the k-th virtual micro-batch
 * (k / p) mod v, backward chunks in reverse); ZB-H1 delays each W (see order_zb_h1). */
#include "program/schedule.h"

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

static int min_i(int a, int b) { return a < b ? a : b; }

static ts_slot slot(int kind, int mb, int chunk) { return (ts_slot){kind, mb, chunk}; }

static int order_gpipe(int p, int v, int m, int stage, ts_slot *out) {
    (void)p, (void)v, (void)stage;
    int n = 0;
    for (int i = 0; i < m; i++) out[n++] = slot(TS_SLOT_F, i, 0);
    for (int i = m - 1; i >= 0; i--) out[n++] = slot(TS_SLOT_B, i, 0);
    return n;
}

static int order_1f1b(int p, int v, int m, int stage, ts_slot *out) {
    (void)v;
    int warm = min_i(p - stage - 1, m), n = 0;
    for (int i = 0; i < warm; i++) out[n++] = slot(TS_SLOT_F, i, 0);
    for (int i = 0; i < m; i++) {
        if (warm + i < m) out[n++] = slot(TS_SLOT_F, warm + i, 0);
        out[n++] = slot(TS_SLOT_B, i, 0);
    }
    return n;
}

/* ZB-H1 (Qi et al. 2024 §2.1, Fig. 3): 1F1B's order with each W split from its B and delayed by
 * `stage` backward passes, so that every stage holds the same p micro-batches in flight (stage
 * 0's 1F1B peak); the delayed W's fill the tail that would be bubble, the B's travel back without
 * their W and start earlier. */
static int order_zb_h1(int p, int v, int m, int stage, ts_slot *out) {
    (void)v;
    int warm = min_i(p - stage - 1, m), n = 0, next_w = 0;
    for (int i = 0; i < warm; i++) out[n++] = slot(TS_SLOT_F, i, 0);
    for (int i = 0; i < m; i++) {
        if (warm + i < m) out[n++] = slot(TS_SLOT_F, warm + i, 0);
        out[n++] = slot(TS_SLOT_B, i, 0);
        if (i - stage >= 0) out[n++] = slot(TS_SLOT_W, next_w++, 0);
    }
    while (next_w < m) out[n++] = slot(TS_SLOT_W, next_w++, 0);
    return n;
}

/* Megatron-LM's interleaved 1F1B: virtual micro-batch k runs micro-batch
 * (k / (p·v))·p + k mod p on chunk (k / p) mod v (backward: v-1 minus that). */
static int order_interleaved(int p, int v, int m, int stage, ts_slot *out) {
    int total = m * v, n = 0;
    int warm = min_i((p - stage - 1) * 2 + (v - 1) * p, total);
    for (int k = 0; k < total + warm; k++) {
        if (k < total) {
            int kf = k;
            out[n++] = slot(TS_SLOT_F, (kf / (p * v)) * p + kf % p, (kf / p) % v);
        }
        int kb = k - warm;
        if (kb >= 0) out[n++] = slot(TS_SLOT_B, (kb / (p * v)) * p + kb % p, v - 1 - (kb / p) % v);
    }
    return n;
}

const ts_schedule_info ts_schedules[TS_SCHED_COUNT] = {
    [TS_SCHED_GPIPE] = {TS_SCHED_GPIPE, "gpipe", 0, bubble_1f1b, inflight_gpipe, order_gpipe, 0},
    [TS_SCHED_1F1B] = {TS_SCHED_1F1B, "1f1b", 0, bubble_1f1b, inflight_1f1b, order_1f1b, 0},
    [TS_SCHED_INTERLEAVED] = {TS_SCHED_INTERLEAVED, "interleaved", 1, bubble_interleaved,
                              inflight_interleaved, order_interleaved, 0},
    [TS_SCHED_ZB_H1] = {TS_SCHED_ZB_H1, "zb-h1", 0, bubble_zb_h1, inflight_1f1b, order_zb_h1, 1},
};
