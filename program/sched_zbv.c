/* ZB-V (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", ICLR 2024, §6 and Fig. 8): two chunks
 * per stage in the V placement (stage s holds chunks s and 2p-1-s, schedule.c), the backward
 * split into input gradients (B) and weight gradients (W) as ZB-H1. Its warm-up fills the first
 * chunk down the V, then alternates; the steady state runs F B W on each chunk in turn; the W's
 * of the cool-down fill the tail. With equal F, B and W it has no bubble (§6: "ZB-V ... zero
 * bubble ... when T_F = T_B = T_W"), and each stage holds 1F1B's peak activations, p micro-batches
 * of a whole stage (2p chunk-micro-batches): Table 4 of Qi et al. 2024b, "Pipeline Parallelism
 * with Controllable Memory" (NeurIPS 2024), V-ZB row. The order is the paper's as PyTorch's
 * torch.distributed.pipelining ScheduleZBVZeroBubble writes it. */
#include <stdio.h>

#include "program/sched_impl.h"

/* The paper gives ZB-V's bubble only for T_F = T_B = T_W; for any times it is this order's own
 * timeline with communication free (schedule.h ts_sched_timeline_s), which does not depend on m
 * once m >= 2p - 1 (the steady state adds no idle time; tests/test_sched_zbv.c): a chunk's times are half the stage's. With
 * equal chunk times T it is (p-1)·T, the first micro-batch's way down to the last stage, which no
 * schedule can fill. */
double ts_zb_v_bubble_s(int p, int v, double tf, double tb, double tw) {
    (void)v;
    ts_layout l = {.dp = 1, .tp = 1, .pp = p, .cp = 1, .ep = 1, .mbs = 1, .vpp = 2, .schedule = TS_SCHED_ZB_V};
    int m = 2 * p;
    double step = ts_sched_timeline_s(&l, m, tf / 2, (tb - tw) / 2, tw / 2);
    double bubble = step - m * (tf + tb);
    return step < 0 || bubble < 0 ? 0 : bubble;
}

/* ZB-V fills its steady state from 2p - 1 micro-batches on (PyTorch writes the order for at least
 * that many); the bubble above holds from there. Its V needs two stages: at pp = 1 both chunks
 * would sit on one rank, a degenerate pipeline no stack runs. */
const char *ts_zb_v_invalid(int p, int m, char *buf, size_t cap) {
    if (p < 2) {
        if (buf) snprintf(buf, cap, "sched=zb-v needs pp >= 2 (got pp=%d)", p);
        return buf ? buf : "";
    }
    if (m >= 2 * p - 1) return NULL;
    if (buf) snprintf(buf, cap, "sched=zb-v needs micro-batches >= 2·pp - 1 = %d (got %d)", 2 * p - 1, m);
    return buf ? buf : "";
}

typedef struct {
    ts_slot *out;
    int n, m;
    int f[2], b[2], w[2];
} zbv_state;

/* Slots of micro-batches past the step's m are dropped (the order is written for at least
 * 2p - 1, as PyTorch's is). */
static void put(zbv_state *z, int kind, int c) {
    int *cnt = kind == TS_SLOT_F ? z->f : kind == TS_SLOT_B ? z->b : z->w;
    int mb = cnt[c]++;
    if (mb < z->m) z->out[z->n++] = ts_slot_of(kind, mb, c);
}

int ts_zb_v_order(int p, int v, int m, int stage, ts_slot *out) {
    (void)v;
    int n_micro = m > 2 * p - 1 ? m : 2 * p - 1, i = stage;
    zbv_state z = {.out = out, .m = m};
    for (int k = 0; k < 2 * (p - i) - 1; k++) put(&z, TS_SLOT_F, 0);
    for (int k = 0; k < i; k++) put(&z, TS_SLOT_F, 1), put(&z, TS_SLOT_F, 0);
    for (int k = 0; k < p - i; k++) put(&z, TS_SLOT_F, 1), put(&z, TS_SLOT_B, 1), put(&z, TS_SLOT_W, 1);
    while (z.f[1] < z.f[0] || z.f[0] < n_micro) {
        if (z.f[0] < n_micro) put(&z, TS_SLOT_F, 0);
        put(&z, TS_SLOT_B, 0), put(&z, TS_SLOT_W, 0);
        put(&z, TS_SLOT_F, 1), put(&z, TS_SLOT_B, 1), put(&z, TS_SLOT_W, 1);
    }
    for (int k = 0; k < i; k++) put(&z, TS_SLOT_B, 0), put(&z, TS_SLOT_B, 1);
    for (int k = 0; k < p - i; k++) put(&z, TS_SLOT_B, 0), put(&z, TS_SLOT_W, 0);
    while (z.w[1] < z.b[1]) put(&z, TS_SLOT_W, 1);
    while (z.w[0] < z.b[0]) put(&z, TS_SLOT_W, 0);
    return z.n;
}

/* V-ZB's peak, p micro-batches of the whole stage (Qi et al. 2024b, Table 4). */
double ts_zb_v_in_flight(int p, int stage, int m, int v) {
    (void)stage, (void)v;
    return m < p ? m : p;
}
