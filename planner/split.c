/* The split type (see partition.h): layers per virtual stage and a recompute policy per physical
 * stage, its copy, its text form and the program options that carry it to program/. What a split
 * costs is partition.c's (ts_partition_evaluate); which split is best, the solvers'. */
#include "planner/partition.h"
#include "program/schedule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ts_status ts_split_init(ts_split *s, int pp, int vpp) {
    *s = (ts_split){.pp = pp, .vpp = vpp, .schedule = vpp > 1 ? TS_SCHED_INTERLEAVED : TS_SCHED_1F1B};
    ts_status res = TS_OK;
    s->layers = calloc((size_t)pp * vpp, sizeof *s->layers);
    s->recompute = calloc((size_t)pp, sizeof *s->recompute);
    s->stage_s = calloc((size_t)pp * 2, sizeof *s->stage_s);
    TS_ALLOC_GOTO(s->layers, res, fail);
    TS_ALLOC_GOTO(s->recompute, res, fail);
    TS_ALLOC_GOTO(s->stage_s, res, fail);
    s->stage_bytes = s->stage_s + pp;
    return TS_OK;
fail:
    ts_split_free(s);
    return res;
}

void ts_split_free(ts_split *s) {
    free(s->layers);
    free(s->recompute);
    free(s->stage_s);
    *s = (ts_split){0};
}

ts_status ts_split_copy(ts_split *dst, const ts_split *src) {
    TS_CHECK(ts_split_init(dst, src->pp, src->vpp));
    dst->schedule = src->schedule;
    int pp = src->pp, V = src->pp * src->vpp;
    memcpy(dst->layers, src->layers, (size_t)V * sizeof *dst->layers);
    memcpy(dst->recompute, src->recompute, (size_t)pp * sizeof *dst->recompute);
    memcpy(dst->stage_s, src->stage_s, (size_t)pp * 2 * sizeof *dst->stage_s);
    dst->max_stage_s = src->max_stage_s;
    dst->slowest = src->slowest;
    dst->worst = src->worst;
    dst->fits = src->fits;
    dst->status = src->status;
    dst->objective_s = src->objective_s;
    dst->bound_s = src->bound_s;
    return TS_OK;
}

int ts_split_is_uniform(const ts_split *s) {
    for (int g = 1; g < s->pp * s->vpp; g++)
        if (s->layers[g] != s->layers[0]) return 0;
    for (int i = 1; i < s->pp; i++)
        if (s->recompute[i] != s->recompute[0]) return 0;
    return 1;
}

int ts_split_format(const ts_split *s, char *buf, size_t cap) {
    size_t n = 0;
    int total = 0;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        int w_ = snprintf(buf + (n < cap ? n : cap), n < cap ? cap - n : 0, __VA_ARGS__);          \
        total += w_;                                                                               \
        n += (size_t)w_;                                                                           \
    } while (0)
    for (int i = 0; i < s->pp; i++) {
        if (i) PUT("|");
        for (int c = 0; c < s->vpp; c++)
            PUT("%s%d", c ? "+" : "", s->layers[ts_sched_chunk(s->schedule, s->pp, s->vpp, i, c)]);
    }
    /* Policies as runs in stage order: "none×12 full×4". */
    for (int i = 0; i < s->pp;) {
        int j = i;
        while (j < s->pp && s->recompute[j] == s->recompute[i]) j++;
        PUT(" %s×%d", ts_recompute_names[s->recompute[i]], j - i);
        i = j;
    }
#undef PUT
    return total;
}

ts_program_opts ts_program_opts_of(const ts_split *s) {
    ts_program_opts o = {0};
    if (s != NULL && s->pp > 0) {
        o.chunk_layers = s->layers;
        o.stage_recompute = s->recompute;
    }
    return o;
}
