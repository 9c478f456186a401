/* Uncertainty bands from the planner's residuals on published runs (see bands.h). */
#include "planner/bands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/published.h"

const char *const ts_family_names[] = {"dense", "fp8", "moe", "cp", "scale", NULL};

static void add(ts_band_stat *s, double e) {
    if (s->n == 0 || e < s->err_min) s->err_min = e;
    if (s->n == 0 || e > s->err_max) s->err_max = e;
    s->n++;
}

static void widen(ts_band_stat *into, const ts_band_stat *s) {
    if (s->n == 0) return;
    if (into->n == 0 || s->err_min < into->err_min) into->err_min = s->err_min;
    if (into->n == 0 || s->err_max > into->err_max) into->err_max = s->err_max;
    into->n += s->n;
}

/* The index of GPU `name` among the runs' GPUs, -1 when the stack has no run there. */
static int gpu_index(const ts_bands *b, const char *name) {
    for (int i = 0; i < b->n_gpus; i++)
        if (strcmp(b->gpus[i].name, name) == 0) return i;
    return -1;
}

static int same_curve(const ts_eff_curve *a, const ts_eff_curve *b) {
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++)
        if (a->flops[i] != b->flops[i] || a->eff[i] != b->eff[i]) return 0;
    return 1;
}

/* Adds a run's error to the families it shows in fam[] and to *all. An MoE run counts in the MoE
 * family alone: an MoE layout takes the MoE band beside its precision's, and a dense layout
 * takes no MoE error. */
static void add_run(const ts_pub_case *c, ts_band_stat *fam, ts_band_stat *all) {
    add(all, c->step_error);
    if (c->moe) {
        add(&fam[TS_FAM_MOE], c->step_error);
        return;
    }
    add(&fam[c->fp8 ? TS_FAM_FP8 : TS_FAM_DENSE], c->step_error);
    if (c->cp > 1) add(&fam[TS_FAM_CP], c->step_error);
    if (c->gpus >= TS_BAND_SCALE_GPUS) add(&fam[TS_FAM_SCALE], c->step_error);
}

ts_status ts_bands_compute(const char *dir, const char *stack, int moe, ts_bands *out) {
    memset(out, 0, sizeof *out);
    ts_pub_case *c;
    int n;
    TS_CHECK_CTX(ts_published_errors_scoped(dir, moe, &c, &n), "the uncertainty bands' published runs (%s)", dir);
    for (int i = 0; i < n; i++) {
        if (c[i].unfit) continue;
        add(&out->all, c[i].step_error);
        if (strcmp(c[i].stack, stack) != 0) continue;
        add_run(&c[i], out->fam, &out->stack_all);
        int g = gpu_index(out, c[i].gpu);
        if (g < 0 && out->n_gpus < TS_BAND_MAX_GPUS) {
            g = out->n_gpus++;
            snprintf(out->gpus[g].name, sizeof out->gpus[g].name, "%s", c[i].gpu);
            out->gpus[g].gemm_eff = c[i].gemm_eff;
        }
        if (g >= 0) add_run(&c[i], out->gpus[g].fam, &out->gpus[g].all);
    }
    free(c);
    return TS_OK;
}

int ts_bands_measured_on(const ts_bands *b, const char *gpu_name) { return gpu_index(b, gpu_name) >= 0; }

int ts_bands_runs_for(const ts_bands *b, const ts_system *sys, ts_band_gpu *out, unsigned *gpus) {
    memset(out, 0, sizeof *out);
    *gpus = 0;
    int own = gpu_index(b, sys->gpu_name);
    if (own >= 0) *gpus = 1u << own;
    for (int i = 0; i < b->n_gpus && own < 0; i++)
        if (same_curve(&b->gpus[i].gemm_eff, &sys->gemm_eff)) *gpus |= 1u << i;
    if (!*gpus) {
        memcpy(out->fam, b->fam, sizeof out->fam);
        out->all = b->stack_all.n ? b->stack_all : b->all;
        return 0;
    }
    for (int i = 0; i < b->n_gpus; i++) {
        if (!(*gpus & (1u << i))) continue;
        for (int f = 0; f < TS_FAM_COUNT; f++) widen(&out->fam[f], &b->gpus[i].fam[f]);
        widen(&out->all, &b->gpus[i].all);
    }
    return own >= 0 ? 1 : 2;
}

void ts_bands_gpus_text(const ts_bands *b, unsigned gpus, char *buf, size_t cap) {
    size_t used = 0;
    if (cap) buf[0] = '\0';
    for (int i = 0; i < b->n_gpus && used < cap; i++)
        if (!gpus || (gpus & (1u << i)))
            used += (size_t)snprintf(buf + used, cap - used, "%s%s", used ? ", " : "", b->gpus[i].name);
}

void ts_band_of(const ts_bands *b, const ts_problem *pb, const ts_layout *l, double step_s, ts_band *out) {
    memset(out, 0, sizeof *out);
    out->families = 1u << (pb->train.dtype == TS_DTYPE_FP8 ? TS_FAM_FP8 : TS_FAM_DENSE);
    if (pb->model.moe.experts > 0) out->families |= 1u << TS_FAM_MOE;
    if (l->cp > 1) out->families |= 1u << TS_FAM_CP;
    if (pb->gpus >= TS_BAND_SCALE_GPUS) out->families |= 1u << TS_FAM_SCALE;
    ts_band_gpu runs;
    unsigned gpus;
    ts_bands_runs_for(b, &pb->sys, &runs, &gpus);
    ts_band_stat s = {0};
    for (int f = 0; f < TS_FAM_COUNT; f++) {
        if (!(out->families & (1u << f))) continue;
        if (runs.fam[f].n == 0) out->unmeasured |= 1u << f;
        else widen(&s, &runs.fam[f]);
    }
    if (out->unmeasured) widen(&s, &runs.all);
    /* measured = predicted / (1 + e); no runs at all: the prediction alone */
    out->lo_s = s.n ? step_s / (1.0 + s.err_max) : step_s;
    out->hi_s = s.n ? step_s / (1.0 + s.err_min) : step_s;
}

int ts_bands_overlap(const ts_band *a, const ts_band *b) { return a->lo_s <= b->hi_s && b->lo_s <= a->hi_s; }
