/* Interleaved 1F1B (Narayanan et al. SC'21 §2.2.2): v model chunks per stage divide the bubble by
 * v; stage 0 keeps p·(1 + (p-1)/(p·v)) micro-batches of activations (Korthikanti et al. 2022
 * §4.2.3), later stages proportionally fewer. */
#include "program/sched_impl.h"

double ts_interleaved_bubble_s(int p, int v, double tf, double tb, double tw) {
    (void)tw;
    return (p - 1) * (tf + tb) / v;
}

double ts_interleaved_in_flight(int p, int stage, int m, int v) {
    double peak = (p - stage) * (1.0 + (p - 1.0) / ((double)p * v));
    return m < peak ? m : peak;
}

/* Megatron-LM's order: warm-up (p-s-1)·2 + (v-1)·p virtual micro-batches; virtual micro-batch k
 * runs micro-batch (k / (p·v))·p + k mod p on chunk (k / p) mod v (backward: v-1 minus that). */
int ts_interleaved_warmup(int p, int v, int m, int stage) { return ts_min_i((p - stage - 1) * 2 + (v - 1) * p, m * v); }

int ts_interleaved_order(int p, int v, int m, int stage, ts_slot *out) {
    int total = m * v, n = 0;
    int warm = ts_interleaved_warmup(p, v, m, stage);
    for (int k = 0; k < total + warm; k++) {
        if (k < total) out[n++] = ts_slot_of(TS_SLOT_F, (k / (p * v)) * p + k % p, (k / p) % v);
        int kb = k - warm;
        if (kb >= 0) out[n++] = ts_slot_of(TS_SLOT_B, (kb / (p * v)) * p + kb % p, v - 1 - (kb / p) % v);
    }
    return n;
}
