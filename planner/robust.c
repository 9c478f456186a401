/* Ties within the bands and robust tie-breaking (see robust.h). */
#include "planner/robust.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/stack_rules.h"

int ts_exotic_dims(const ts_problem *pb, const ts_layout *l, char *buf, size_t cap) {
    char words[256] = "";
    int n = 0;
    size_t used = 0;
#define SAY(...) (used += (size_t)snprintf(words + used, sizeof words - used, __VA_ARGS__), n++)
    if (l->cp > 1) SAY("%scp=%d", n ? ", " : "", l->cp);
    /* an MoE model's per-token work and activations are its active parameters' */
    int moe = pb->model.moe.experts > 0;
    double params = moe ? pb->params.active : pb->params.total;
    if (l->tp == 1 && params >= TS_EXOTIC_TP1_PARAMS)
        SAY("%stp=1 at %.0fB%s parameters", n ? ", " : "", params / 1e9, moe ? " active" : "");
    if (l->vpp > TS_EXOTIC_VPP) SAY("%svpp=%d", n ? ", " : "", l->vpp);
    if (ts_stack_refusal(&pb->train.stack, l, 0, NULL, 0)) SAY("%snot run by %s", n ? ", " : "", pb->train.stack.name);
#undef SAY
    if (buf) snprintf(buf, cap, "%s", words);
    return n;
}

typedef struct {
    int tight, exotic, index;
    double step_s;
} robust_key;

static int key_cmp(const void *a, const void *b) {
    const robust_key *x = a, *y = b;
    if (x->tight != y->tight) return x->tight - y->tight;
    if (x->exotic != y->exotic) return x->exotic - y->exotic;
    if (x->step_s != y->step_s) return x->step_s < y->step_s ? -1 : 1;
    return x->index - y->index;
}

ts_status ts_robust_order(const ts_problem *pb, const ts_eval *e, const ts_band *bands, int n, int *order,
                          int *n_tied) {
    int tied = 0;
    *n_tied = 0;
    for (int i = 0; i < n; i++) order[i] = i;
    if (n <= 0) return TS_OK;
    robust_key *keys = calloc((size_t)n, sizeof *keys);
    if (!keys) return TS_FAIL(TS_ERR_NOMEM, "out of memory for the ties of %d layouts", n);
    for (int i = 0; i < n; i++) {
        if (!ts_bands_overlap(&bands[0], &bands[i])) continue;
        keys[tied++] = (robust_key){ts_mem_tight(pb, e[i].mem.total), ts_exotic_dims(pb, &e[i].layout, NULL, 0), i,
                                    e[i].step_s};
    }
    qsort(keys, (size_t)tied, sizeof *keys, key_cmp);
    int k = 0;
    for (int i = 0; i < tied; i++) order[k++] = keys[i].index;
    for (int i = 0; i < n; i++)
        if (!ts_bands_overlap(&bands[0], &bands[i])) order[k++] = i;
    free(keys);
    *n_tied = tied;
    return TS_OK;
}
