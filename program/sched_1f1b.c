/* 1F1B (PipeDream-Flush, Narayanan et al. 2021; SC'21 §2.2.1): p-s-1 warm-up forwards, then one
 * forward and one backward in turn, then the drain. Bubble (p-1)(t_f+t_b); stage i keeps
 * min(m, p-i) micro-batches in flight. */
#include "program/sched_impl.h"

double ts_1f1b_bubble_s(int p, int v, double tf, double tb, double tw) {
    (void)v, (void)tw;
    return (p - 1) * (tf + tb);
}

double ts_1f1b_in_flight(int p, int stage, int m, int v) {
    (void)v;
    return m < p - stage ? m : p - stage;
}

int ts_1f1b_warmup(int p, int m, int stage) { return ts_min_i(p - stage - 1, m); }

int ts_1f1b_order(int p, int v, int m, int stage, ts_slot *out) {
    (void)v;
    int warm = ts_1f1b_warmup(p, m, stage), n = 0;
    for (int i = 0; i < warm; i++) out[n++] = ts_slot_of(TS_SLOT_F, i, 0);
    for (int i = 0; i < m; i++) {
        if (warm + i < m) out[n++] = ts_slot_of(TS_SLOT_F, warm + i, 0);
        out[n++] = ts_slot_of(TS_SLOT_B, i, 0);
    }
    return n;
}
