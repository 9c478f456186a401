/* The table of pipeline schedules, chunk placement and the even split (see schedule.h). Each
 * schedule's closed forms and op order live in its own file, program/sched_*.c. */
#include "program/schedule.h"

#include "program/sched_impl.h"

int ts_looped_chunk(int p, int v, int stage, int local) {
    (void)v;
    return local * p + stage;
}
int ts_looped_stage(int p, int v, int chunk) {
    (void)v;
    return chunk % p;
}
int ts_looped_local(int p, int v, int chunk) {
    (void)v;
    return chunk / p;
}

#define LOOPED ts_looped_chunk, ts_looped_stage, ts_looped_local

const ts_schedule_info ts_schedules[TS_SCHED_COUNT] = {
    [TS_SCHED_GPIPE] = {TS_SCHED_GPIPE, "gpipe", 0, ts_1f1b_bubble_s, ts_gpipe_in_flight, ts_gpipe_order, 0, LOOPED},
    [TS_SCHED_1F1B] = {TS_SCHED_1F1B, "1f1b", 0, ts_1f1b_bubble_s, ts_1f1b_in_flight, ts_1f1b_order, 0, LOOPED},
    [TS_SCHED_INTERLEAVED] = {TS_SCHED_INTERLEAVED, "interleaved", 1, ts_interleaved_bubble_s,
                              ts_interleaved_in_flight, ts_interleaved_order, 0, LOOPED},
    [TS_SCHED_ZB_H1] = {TS_SCHED_ZB_H1, "zb-h1", 0, ts_zb_h1_bubble_s, ts_1f1b_in_flight, ts_zb_h1_order, 1, LOOPED},
};

int ts_sched_chunk(ts_schedule id, int p, int v, int stage, int local) {
    return ts_schedules[id].chunk_of(p, v, stage, local);
}
int ts_sched_stage(ts_schedule id, int p, int v, int chunk) { return ts_schedules[id].stage_of(p, v, chunk); }
int ts_chunk_global(const ts_layout *l, int stage, int local) {
    return ts_sched_chunk(l->schedule, l->pp, l->vpp, stage, local);
}
int ts_chunk_stage(const ts_layout *l, int chunk) { return ts_sched_stage(l->schedule, l->pp, l->vpp, chunk); }
int ts_chunk_local(const ts_layout *l, int chunk) { return ts_schedules[l->schedule].local_of(l->pp, l->vpp, chunk); }

/* The planner's even split: with interleaving every chunk holds L/(p·v) layers (the validity
 * check asks for it, as Megatron-LM's --num-layers-per-virtual-pipeline-stage); without, the
 * first stage takes the floor and the extra layers of L mod p go one each to the stages after it
 * (the embedding weighs on the first). */
void ts_even_split(int layers, int pp, int vpp, int chunk, int *first, int *count) {
    if (vpp > 1) {
        int lc = layers / (pp * vpp);
        *first = chunk * lc;
        *count = lc;
        return;
    }
    int base = layers / pp, rem = layers % pp;
    *first = chunk * base + (chunk >= 1 ? (chunk - 1 < rem ? chunk - 1 : rem) : 0);
    *count = base + (chunk >= 1 && chunk <= rem ? 1 : 0);
}
