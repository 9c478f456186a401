/* GPipe (Huang et al. 2019 §2.3): all forwards, then all backwards; every micro-batch's
 * activations stay until its backward, and the bubble is 1F1B's (p-1)(t_f+t_b). */
#include "program/sched_impl.h"

double ts_gpipe_in_flight(int p, int stage, int m, int v) {
    (void)p, (void)stage, (void)v;
    return m;
}

int ts_gpipe_order(int p, int v, int m, int stage, ts_slot *out) {
    (void)p, (void)v, (void)stage;
    int n = 0;
    for (int i = 0; i < m; i++) out[n++] = ts_slot_of(TS_SLOT_F, i, 0);
    for (int i = m - 1; i >= 0; i--) out[n++] = ts_slot_of(TS_SLOT_B, i, 0);
    return n;
}
