/* The slot-level timeline of a schedule's order (see schedule.h ts_sched_timeline_s): every slot a
 * fixed time, a forward waiting for the previous chunk's forward of its micro-batch, a backward for
 * the next chunk's input gradients (its own forward where its chunk closes the pipeline), a pair
 * one unit with both outputs at its end (DualPipe's _forward_backward_chunk) - the dependencies
 * the program's transfers carry, so that the simulator with communication free walks the same
 * critical path (tests/test_sched_dualpipe.c, tests/test_sched_zbv.c). */
#include <stdlib.h>

#include "program/schedule.h"

typedef struct {
    const ts_layout *l;
    int m, split;         /* micro-batches; B slots are input gradients only */
    double t_f, t_bi, t_w; /* slot times */
    const double *chunk_f, *chunk_b; /* (p·v) per global chunk instead, when not NULL */
    double *fend, *bend;  /* (2p·m) when each chunk's forward / input gradient of a micro-batch ends; <0 not yet */
} timeline;

static double slot_s(const timeline *tl, int kind, int g) {
    if (tl->chunk_f) return kind == TS_SLOT_F ? tl->chunk_f[g] : tl->chunk_b[g];
    if (kind == TS_SLOT_F) return tl->t_f;
    if (kind == TS_SLOT_W) return tl->t_w;
    return kind == TS_SLOT_BI || tl->split ? tl->t_bi : tl->t_bi + tl->t_w;
}

/* Runs the slot (and its partner when paired) on `stage` from *t if its inputs exist; 0 when it
 * must wait. */
static int run(timeline *tl, const ts_slot *sl, int stage, double *t) {
    const ts_layout *l = tl->l;
    int m = tl->m;
    double ready = *t, dur = 0;
    for (int k = 0; k <= sl->pair; k++) {
        const ts_slot *x = sl + k;
        int g = ts_chunk_global(l, stage, x->chunk), bwd = x->kind == TS_SLOT_B || x->kind == TS_SLOT_BI;
        double dep = 0;
        if (x->kind == TS_SLOT_F && !ts_chunk_opens(l, g)) dep = tl->fend[(g - 1) * m + x->mb];
        if (bwd) dep = ts_chunk_closes(l, g) ? tl->fend[g * m + x->mb] : tl->bend[(g + 1) * m + x->mb];
        if (dep < 0) return 0;
        ready = dep > ready ? dep : ready;
        dur += slot_s(tl, x->kind, g);
    }
    *t = ready + dur;
    for (int k = 0; k <= sl->pair; k++) {
        const ts_slot *x = sl + k;
        int g = ts_chunk_global(l, stage, x->chunk);
        if (x->kind == TS_SLOT_F) tl->fend[g * m + x->mb] = *t;
        else if (x->kind != TS_SLOT_W) tl->bend[g * m + x->mb] = *t;
    }
    return 1;
}

static double timeline_run(timeline tl) {
    const ts_layout *l = tl.l;
    const ts_schedule_info *si = &ts_schedules[l->schedule];
    int p = l->pp, m = tl.m, n_g = p * l->vpp, per = 3 * m * l->vpp;
    ts_slot *order = malloc((size_t)p * per * sizeof *order);
    int *n = calloc((size_t)p, sizeof *n), *next = calloc((size_t)p, sizeof *next);
    double *t = calloc((size_t)p, sizeof *t), step = 0;
    tl.fend = malloc((size_t)n_g * m * sizeof *tl.fend);
    tl.bend = malloc((size_t)n_g * m * sizeof *tl.bend);
    if (!order || !n || !next || !t || !tl.fend || !tl.bend) {
        step = -1;
        goto exit;
    }
    for (int i = 0; i < n_g * m; i++) tl.fend[i] = tl.bend[i] = -1;
    for (int s = 0; s < p; s++) n[s] = si->order(p, l->vpp, m, s, order + (size_t)s * per);
    for (int progress = 1; progress;) {
        progress = 0;
        for (int s = 0; s < p; s++)
            while (next[s] < n[s] && run(&tl, order + (size_t)s * per + next[s], s, &t[s])) {
                next[s] += 1 + order[(size_t)s * per + next[s]].pair;
                progress = 1;
            }
    }
    for (int s = 0; s < p; s++) {
        if (next[s] < n[s]) step = -1; /* an order that deadlocks */
        if (step >= 0 && t[s] > step) step = t[s];
    }
exit:
    free(order), free(n), free(next), free(t), free(tl.fend), free(tl.bend);
    return step;
}

double ts_sched_timeline_s(const ts_layout *l, int m, double t_f, double t_bi, double t_w) {
    return timeline_run((timeline){.l = l, .m = m, .split = ts_schedules[l->schedule].splits_w, .t_f = t_f,
                                   .t_bi = t_bi, .t_w = t_w});
}

double ts_sched_timeline_chunks_s(const ts_layout *l, int m, const double *t_f, const double *t_b) {
    if (ts_schedules[l->schedule].splits_w) return -1; /* W slots have no per-chunk time here */
    return timeline_run((timeline){.l = l, .m = m, .chunk_f = t_f, .chunk_b = t_b});
}
