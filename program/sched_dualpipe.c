/* DualPipe (DeepSeek-V3 technical report §3.2.1, Fig. 5 and Table 2; the open-source schedule,
 * github.com/deepseek-ai/DualPipe, dualpipe/dualpipe.py DualPipe.step): two pipelines over the
 * same p model chunks run in opposite directions, so stage s holds chunk s of the forward
 * direction and chunk p-1-s of the reverse one (the V placement, schedule.c), and micro-batches
 * [0, m/2) go forward, [m/2, m) in reverse. In the steady state every stage runs the forward of
 * one micro-batch overlapped with the backward of another (F&B), each one's communication hidden
 * behind the other's computation. Bubble (p/2 - 1)(F&B + B - 3W), F a forward chunk, B a full
 * backward chunk, W its weight-gradient part, F&B the pair (DeepSeek-V3 Table 2); each stage holds
 * two copies of the parameters (Table 2: "Parameter 2×"). */
#include <stdio.h>

#include "program/sched_impl.h"

/* With nothing to hide (the closed form prices communication apart), F&B takes F + B. */
double ts_dualpipe_bubble_s(int p, int v, double tf, double tb, double tw) {
    (void)v;
    double fb = tf + tb, b = fb + tb - 3.0 * tw;
    return (p / 2 - 1) * (b > 0 ? b : 0);
}

/* DeepSeek's DualPipe.step asserts an even number of ranks and an even number of micro-batches of
 * at least twice the ranks (its steps 1-8 below need half the micro-batches to fill both
 * directions). */
const char *ts_dualpipe_invalid(int p, int m, char *buf, size_t cap) {
    if (p < 2 || p % 2 != 0) {
        if (buf) snprintf(buf, cap, "sched=dualpipe needs an even pp >= 2 (got pp=%d)", p);
        return buf ? buf : "";
    }
    if (m % 2 != 0 || m < 2 * p) {
        if (buf)
            snprintf(buf, cap, "sched=dualpipe needs an even number of micro-batches >= 2·pp = %d (got %d)", 2 * p, m);
        return buf ? buf : "";
    }
    return NULL;
}

/* The order being written: per local chunk the next micro-batch to run forward and backward. */
typedef struct {
    ts_slot *out;
    int n, half, flip; /* slots written; m/2; stage in the second half (phases swap chunks) */
    int next_f[2], next_b[2];
    int queued; /* W slots owed */
} order_state;

static void fwd(order_state *o, int phase, int pair) {
    int c = phase ^ o->flip;
    o->out[o->n] = ts_slot_of(TS_SLOT_F, c * o->half + o->next_f[c]++, c);
    o->out[o->n++].pair = pair;
}

/* A backward; `zb`: input gradients only, the weight gradients queued for a later W. */
static void bwd(order_state *o, int phase, int zb) {
    int c = phase ^ o->flip, mb = c * o->half + o->next_b[c]++;
    o->out[o->n++] = ts_slot_of(zb ? TS_SLOT_BI : TS_SLOT_B, mb, c);
    o->queued += zb;
}

/* A W slot; which backward's it runs is filled in at the end (first in, first out). */
static void wgt(order_state *o) {
    o->out[o->n++] = ts_slot_of(TS_SLOT_W, -1, -1);
    o->queued--;
}

/* DeepSeek's WeightGradStore is a FIFO: the k-th W runs the k-th input-only backward's weight
 * gradients. */
static void fill_w(ts_slot *out, int n) {
    int next_bi = 0;
    for (int i = 0; i < n; i++) {
        if (out[i].kind != TS_SLOT_W) continue;
        while (out[next_bi].kind != TS_SLOT_BI) next_bi++;
        out[i].mb = out[next_bi].mb;
        out[i].chunk = out[next_bi++].chunk;
    }
}

/* The overlapped pair: forward of `phase0` with the backward of `phase1`. */
static void fwd_bwd(order_state *o, int phase0, int phase1) {
    fwd(o, phase0, 1);
    bwd(o, phase1, 0);
}

/* DualPipe.step's eight steps for rank `stage`, phase 0 being the forward direction on the first
 * half of the ranks and the reverse one on the second. */
int ts_dualpipe_order(int p, int v, int m, int stage, ts_slot *out) {
    (void)v;
    int halves = p / 2, hr = stage < p - 1 - stage ? stage : p - 1 - stage;
    int middle = hr == halves - 1;
    order_state o = {.out = out, .half = m / 2, .flip = stage >= halves};
    for (int i = 0; i < (halves - hr - 1) * 2; i++) fwd(&o, 0, 0); /* 1: nF0 */
    for (int i = 0; i < hr + 1; i++) fwd(&o, 0, 0), fwd(&o, 1, 0); /* 2: nF0F1 */
    for (int i = 0; i < halves - hr - 1; i++) bwd(&o, 1, 1), wgt(&o), fwd(&o, 1, 0); /* 3: nB1W1F1 */
    for (int i = 0; i < m / 2 - p + hr + 1; i++) { /* 4: nF0B1F1B0 */
        if (i == 0 && middle) fwd(&o, 0, 0), bwd(&o, 1, 0); /* not overlapped, to shrink the bubble */
        else fwd_bwd(&o, 0, 1);
        fwd_bwd(&o, 1, 0);
    }
    for (int i = 0; i < halves - hr - 1; i++) bwd(&o, 1, 0), fwd_bwd(&o, 1, 0); /* 5: nB1F1B0 */
    int zb = 0;
    for (int i = 0; i < hr + 1; i++) { /* 6: nB1B0, the second half with W apart */
        if (i == (hr + 1) / 2 && hr % 2 == 1) zb = 1;
        bwd(&o, 1, zb);
        if (i == (hr + 1) / 2 && hr % 2 == 0) zb = 1;
        bwd(&o, 0, zb);
    }
    for (int i = 0; i < halves - hr - 1; i++) wgt(&o), bwd(&o, 0, 1); /* 7: nWB0 */
    while (o.queued > 0) wgt(&o);                                    /* 8: nW */
    fill_w(out, o.n);
    return o.n;
}

/* F&B pairs in stage `stage`'s order (ts_dualpipe_order): two per step-4 iteration (the middle
 * stages' first forward and backward apart), one per step 5. Stages 0 and p-1 have the fewest,
 * m - 3p/2 + 1 of their m forwards (tests/test_dualpipe_closed_form.c counts them off the order). */
int ts_dualpipe_pairs(int p, int m, int stage) {
    int halves = p / 2, hr = stage < p - 1 - stage ? stage : p - 1 - stage;
    return 2 * (m / 2 - p + hr + 1) - (hr == halves - 1) + (halves - hr - 1);
}

/* Activations held at the peak, in units of one micro-batch on one chunk (a chunk holds a stage's
 * share of the model): DeepSeek-V3 Table 2's PP + 1, which the order reaches on every stage
 * (counted off it in tests/test_sched_dualpipe.c: forwards not yet through their backward). */
double ts_dualpipe_in_flight(int p, int stage, int m, int v) {
    (void)stage, (void)m, (void)v;
    return p + 1;
}
