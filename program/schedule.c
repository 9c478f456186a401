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

#define LOOPED ts_looped_chunk, ts_looped_stage, ts_looped_local, 0, 0, NULL, 0 /* not dual, any vpp, any p and m, searched */

/* The V placement (two chunks per stage): stage s holds global chunks s and 2p-1-s, so the chain
 * of chunks runs down the stages and back up (Qi et al. 2024 §6 "ZB-V"; DualPipe's two directions,
 * DeepSeek-V3 §3.2.1: stage s runs stage s of the forward direction and p-1-s of the reverse). */
int ts_v_chunk(int p, int v, int stage, int local) {
    (void)v;
    return local == 0 ? stage : 2 * p - 1 - stage;
}
int ts_v_stage(int p, int v, int chunk) {
    (void)v;
    return chunk < p ? chunk : 2 * p - 1 - chunk;
}
int ts_v_local(int p, int v, int chunk) {
    (void)v;
    return chunk < p ? 0 : 1;
}

#define V_SHAPED ts_v_chunk, ts_v_stage, ts_v_local

const ts_schedule_info ts_schedules[TS_SCHED_COUNT] = {
    [TS_SCHED_GPIPE] = {TS_SCHED_GPIPE, "gpipe", 0, ts_1f1b_bubble_s, ts_gpipe_in_flight, ts_gpipe_order, 0, LOOPED},
    [TS_SCHED_1F1B] = {TS_SCHED_1F1B, "1f1b", 0, ts_1f1b_bubble_s, ts_1f1b_in_flight, ts_1f1b_order, 0, LOOPED},
    [TS_SCHED_INTERLEAVED] = {TS_SCHED_INTERLEAVED, "interleaved", 1, ts_interleaved_bubble_s,
                              ts_interleaved_in_flight, ts_interleaved_order, 0, LOOPED},
    [TS_SCHED_ZB_H1] = {TS_SCHED_ZB_H1, "zb-h1", 0, ts_zb_h1_bubble_s, ts_1f1b_in_flight, ts_zb_h1_order, 1, LOOPED},
    [TS_SCHED_DUALPIPE] = {TS_SCHED_DUALPIPE, "dualpipe", 0, ts_dualpipe_bubble_s, ts_dualpipe_in_flight,
                           ts_dualpipe_order, 0, V_SHAPED, 1, 2, ts_dualpipe_invalid, 1},
    [TS_SCHED_ZB_V] = {TS_SCHED_ZB_V, "zb-v", 0, ts_zb_v_bubble_s, ts_zb_v_in_flight, ts_zb_v_order, 1, V_SHAPED, 0,
                       2, ts_zb_v_invalid, 1},
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

int ts_model_chunks(const ts_layout *l) {
    return ts_schedules[l->schedule].dual ? l->pp * l->vpp / 2 : l->pp * l->vpp;
}
int ts_chunk_model(const ts_layout *l, int chunk) { return chunk % ts_model_chunks(l); }
int ts_chunk_opens(const ts_layout *l, int chunk) { return ts_chunk_model(l, chunk) == 0; }
int ts_chunk_closes(const ts_layout *l, int chunk) { return ts_chunk_model(l, chunk) == ts_model_chunks(l) - 1; }
int ts_stage_opens(const ts_layout *l, int stage) {
    for (int c = 0; c < l->vpp; c++)
        if (ts_chunk_opens(l, ts_chunk_global(l, stage, c))) return 1;
    return 0;
}
int ts_stage_closes(const ts_layout *l, int stage) {
    for (int c = 0; c < l->vpp; c++)
        if (ts_chunk_closes(l, ts_chunk_global(l, stage, c))) return 1;
    return 0;
}
int ts_chunk_is_copy(const ts_layout *l, int stage, int local) {
    return ts_chunk_global(l, stage, local) >= ts_model_chunks(l);
}

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
