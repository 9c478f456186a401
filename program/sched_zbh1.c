/* ZB-H1 (Qi et al. 2024 §2.1, Fig. 3): 1F1B with the weight gradients (W) split from the input
 * gradients (B); bubble (p-1)(T_F+T_B-T_W) with T_B the input gradient only (Table 2); the same
 * p micro-batches in flight as 1F1B's stage 0. */
#include "program/sched_impl.h"

double ts_zb_h1_bubble_s(int p, int v, double tf, double tb, double tw) {
    (void)v;
    double b_input = tb - tw;
    return (p - 1) * (tf + b_input - tw > 0 ? tf + b_input - tw : 0);
}

/* 1F1B's order with each W delayed by `stage` backward passes, so that every stage holds the same
 * p micro-batches in flight (stage 0's 1F1B peak); the delayed W's fill the tail that would be
 * bubble, the B's travel back without their W and start earlier. */
int ts_zb_h1_order(int p, int v, int m, int stage, ts_slot *out) {
    (void)v;
    int warm = ts_min_i(p - stage - 1, m), n = 0, next_w = 0;
    for (int i = 0; i < warm; i++) out[n++] = ts_slot_of(TS_SLOT_F, i, 0);
    for (int i = 0; i < m; i++) {
        if (warm + i < m) out[n++] = ts_slot_of(TS_SLOT_F, warm + i, 0);
        out[n++] = ts_slot_of(TS_SLOT_B, i, 0);
        if (i - stage >= 0) out[n++] = ts_slot_of(TS_SLOT_W, next_w++, 0);
    }
    while (next_w < m) out[n++] = ts_slot_of(TS_SLOT_W, next_w++, 0);
    return n;
}
