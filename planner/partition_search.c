/* The planner's use of uneven stages (see partition.h, ts_search_partitioned): which layouts of
 * the even search are worth re-partitioning (the auto policy), the program on each, and the
 * ranking in which a split that beats its even forms replaces them. */
#include "planner/partition.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/partition_impl.h"

const char *const ts_partition_mode_names[] = {"uniform", "ilp", "auto", NULL};

#define PART_TOP 4          /* best layouts re-partitioned */
#define PART_NEAR 4         /* layouts that do not fit evenly, re-partitioned */

void ts_partition_opts_defaults(ts_partition_opts *o) {
    *o = (ts_partition_opts){.mode = TS_PARTITION_AUTO, .objective = TS_PART_OBJ_STAGE, .time_limit_s = 0.25};
}

/* Layouts equal but for recompute (which the program chooses per stage). */
static int same_but_recompute(const ts_layout *a, const ts_layout *b) {
    ts_layout x = *a, y = *b;
    x.recompute = y.recompute = TS_RECOMPUTE_NONE;
    return memcmp(&x, &y, sizeof x) == 0;
}

typedef struct {
    ts_eval e;
    ts_split split; /* pp = 0: even */
    double key;
} ranked;

static int ranked_cmp(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    if (x->e.mem.total != y->e.mem.total) return x->e.mem.total < y->e.mem.total ? -1 : 1;
    return (x->split.pp > 0) - (y->split.pp > 0);
}

/* Re-partitions `l`. TS_OK with *e and *s filled when a split fits (valid under the closed
 * form too); TS_ERR_INFEASIBLE when none does (*info says why; the error is cleared: no split is
 * the usual answer); any other failure (GLPK's, memory) is returned with its message. */
static ts_status partition_one(const ts_problem *pb, unsigned policies, const ts_partition_opts *po,
                               const ts_layout *l, ts_eval *e, ts_split *s, ts_partition_info *info) {
    ts_partition_problem p;
    *info = (ts_partition_info){.short_bytes = INFINITY};
    TS_CHECK(ts_partition_problem_of(pb, l, policies, &p));
    p.time_limit_s = po->time_limit_s;
    p.objective = po->objective;
    ts_status st = ts_partition_solve(&p, s, info);
    ts_partition_problem_free(&p);
    if (st == TS_ERR_INFEASIBLE) ts_error_clear();
    if (st != TS_OK) return st;
    int count[TS_RECOMPUTE_COUNT] = {0}, most = 0;
    for (int i = 0; i < s->pp; i++) count[s->recompute[i]]++;
    for (int k = 1; k < TS_RECOMPUTE_COUNT; k++)
        if (count[k] > count[most]) most = k;
    ts_layout lk = *l;
    lk.recompute = (ts_recompute)most;
    st = ts_evaluate_split(pb, &lk, s, e);
    if (st == TS_OK && !e->fits) st = TS_ERR_INFEASIBLE; /* the instance's model and stages.c disagree */
    if (st != TS_OK) ts_split_free(s);
    return st;
}

static int model_mixes_kinds(const ts_model *m) {
    if (m->moe.experts == 0) return 0;
    int moe = 0;
    for (int x = 0; x < m->layers; x++) moe += ts_model_layer_is_moe(m, x);
    return moe > 0 && moe < m->layers;
}

/* Whether a split of `l` could have a faster slowest stage than its even form (auto's test for
 * models of one kind of layer, no GLPK). A relaxation of the program: memory dropped, every layer
 * at the least time any allowed policy gives any kind (t), every stage at its least fixed time
 * (f_s). A split whose slowest stage beats the even form's, M, holds on stage s at most n_s
 * layers, the most with f_s + n_s·t < M; one exists only if every n_s ≥ vpp and Σ_s n_s ≥ L.
 * An even form forced into recompute passes whenever the faster policies leave room (M is its
 * recomputing stage's); an even form balanced to within a layer fails (llama2-70b's 80 layers on
 * 8 stages: no whole layer can move off the LM head's stage without making another slower).
 * Cost: the instance's closed-form costs, microseconds. */
static int split_may_gain(const ts_problem *pb, unsigned policies, ts_partition_objective objective,
                          const ts_layout *l) {
    ts_partition_problem p;
    ts_split even;
    if (ts_partition_problem_of(pb, l, policies, &p) != TS_OK) {
        ts_error_clear();
        return 1; /* cannot tell: let the program decide */
    }
    int gain = 1;
    if (ts_split_init(&even, p.pp, p.vpp) != TS_OK) {
        ts_error_clear();
        goto exit;
    }
    ts_partition_uniform(&p, l->recompute, &even);
    double M = even.max_stage_s * (1 - 1e-9), t = INFINITY;
    for (int kd = 0; kd < p.n_kinds; kd++)
        for (int k = 0; k < K_POL; k++)
            if (policy_allowed(&p, k)) t = fmin(t, p.time_s[kd][k]);
    /* The step objective also gains from less recompute at the same slowest stage: possible
     * unless the even form already runs the fastest policy everywhere. */
    int faster = 0;
    for (int k = 0; k < K_POL; k++)
        faster |= policy_allowed(&p, k) && p.time_s[0][k] < p.time_s[0][l->recompute];
    if (objective == TS_PART_OBJ_STEP && faster) {
        gain = 1;
    } else if (t > 0 && isfinite(t)) {
        long long room = 0;
        for (int s = 0; s < p.pp && gain; s++) {
            double f = INFINITY;
            for (int k = 0; k < K_POL; k++)
                if (policy_allowed(&p, k)) f = fmin(f, p.fixed_time_s[s * K_POL + k]);
            double x = (M - f) / t;
            long long n = x > 0 ? (long long)ceil(x) - 1 : -1;
            if (n < p.vpp) gain = 0;
            room += n;
        }
        gain = gain && room >= p.layers;
    }
    ts_split_free(&even);
exit:
    ts_partition_problem_free(&p);
    return gain;
}

ts_status ts_search_partitioned(const ts_problem *pb, const ts_search_opts *opts, const ts_partition_opts *po,
                                ts_search_result *out) {
    ts_partition_mode mode = po->mode;
    ts_status st = ts_search(pb, opts, out);
    /* ilp: the pins may leave only layouts that need an explicit split (interleaving whose
     * pp·vpp does not divide the layers); the searches below with explicit_splits find them. */
    int no_valid = mode == TS_PARTITION_ILP && st == TS_ERR_INPUT && out->best != NULL && out->searched == 0;
    if (mode == TS_PARTITION_UNIFORM || (st != TS_OK && st != TS_ERR_INFEASIBLE && !no_valid)) return st;
    int nothing_fits = st == TS_ERR_INFEASIBLE || no_valid;
    /* auto, when something fits evenly: with the memory objective the even split stands; with
     * one kind of layer only the best layouts whose even form split_may_gain says could be beaten
     * (forced into recompute, or a stage slower than the rest by more than a layer). */
    int screen = mode == TS_PARTITION_AUTO && !nothing_fits;
    if (screen && opts->objective == TS_OBJ_MEMORY) return st;
    if (screen && model_mixes_kinds(&pb->model)) screen = 0;
    unsigned policies = 0;
    if (opts->pins.mask & (1u << TS_PIN_RECOMPUTE)) policies = 1u << opts->pins.value.recompute;
    char reason[sizeof out->reason];
    memcpy(reason, out->reason, sizeof reason);

    double t0 = now_s();
    ts_status res = TS_OK;
    int max_cand = 2 * PART_TOP + PART_NEAR, cap = out->n_best + max_cand, n = 0, tried = 0;
    ranked *list = NULL;
    ts_layout *cand = calloc((size_t)max_cand, sizeof *cand);
    ts_search_result near = {0}, split_only = {0};
    TS_ALLOC_GOTO(cand, res, exit);
    int n_cand = 0;
    ts_layout seen[PART_TOP];
    for (int i = 0, n_seen = 0; i < out->n_best && n_seen < PART_TOP; i++) {
        const ts_layout *l = &out->best[i].layout;
        int dup = l->pp == 1;
        for (int j = 0; j < n_seen && !dup; j++) dup = same_but_recompute(&seen[j], l);
        if (dup) continue;
        seen[n_seen++] = *l;
        if (!screen || split_may_gain(pb, policies, po->objective, l)) cand[n_cand++] = *l;
    }
    if (screen && n_cand == 0) { /* nothing to gain: the even search's result, untouched */
        free(cand);
        return st;
    }
    list = calloc((size_t)cap, sizeof *list);
    TS_ALLOC_GOTO(list, res, exit);
    /* ilp: the best layouts that only an explicit split makes valid (interleaving whose pp·vpp
     * does not divide the layers: Llama 3 405B's 126 layers on 16×2 chunks), as costed nearly
     * evenly by the search. */
    ts_search_opts o = *opts;
    o.explicit_splits = mode == TS_PARTITION_ILP;
    o.top_k = 4 * PART_TOP;
    if (mode == TS_PARTITION_ILP && ts_search(pb, &o, &split_only) == TS_OK) {
        int added = 0;
        for (int i = 0; i < split_only.n_best && added < PART_TOP; i++) {
            const ts_layout *l = &split_only.best[i].layout;
            int dup = !ts_layout_invalid(pb, l, NULL, 0); /* valid evenly: the first search's */
            for (int j = 0; j < n_cand && !dup; j++) dup = same_but_recompute(&cand[j], l);
            if (!dup) {
                cand[n_cand++] = *l;
                added++;
            }
        }
    }
    ts_error_clear();
    /* Layouts that would fit with more memory: where uneven stages may make room (auto: only
     * when nothing fits; the extra search costs about as much as the first). */
    ts_problem roomy = *pb;
    roomy.usable_bytes *= 2;
    o.top_k = 4 * PART_NEAR;
    /* Nothing fits: the layouts closest to fitting; else the fastest that do not fit. */
    o.objective = nothing_fits && !no_valid ? TS_OBJ_MEMORY : TS_OBJ_TIME;
    if ((mode == TS_PARTITION_ILP || nothing_fits) && ts_search(&roomy, &o, &near) == TS_OK) {
        int added = 0;
        for (int i = 0; i < near.n_best && added < PART_NEAR; i++) {
            const ts_eval *e = &near.best[i];
            int dup = (e->mem.total <= pb->usable_bytes && !ts_layout_invalid(pb, &e->layout, NULL, 0)) ||
                      e->layout.pp == 1;
            for (int j = 0; j < n_cand && !dup; j++) dup = same_but_recompute(&cand[j], &e->layout);
            if (!dup) {
                cand[n_cand++] = e->layout;
                added++;
            }
        }
    }
    ts_error_clear();

    for (int i = 0; i < out->n_best; i++) {
        list[n].e = out->best[i];
        list[n].key = ts_objective_value(pb, opts->objective, &list[n].e);
        n++;
    }
    /* The closest candidate no split fits, for the nothing-fits message. */
    double short_bytes = INFINITY;
    char short_why[sizeof ((ts_partition_info *)0)->why] = "", short_layout[256] = "";
    for (int c = 0; c < n_cand; c++) {
        ranked r = {0};
        ts_partition_info info;
        tried++;
        ts_status pst = partition_one(pb, policies, po, &cand[c], &r.e, &r.split, &info);
        if (pst == TS_ERR_INFEASIBLE) {
            if (info.short_bytes < short_bytes) {
                short_bytes = info.short_bytes;
                memcpy(short_why, info.why, sizeof short_why);
                ts_layout_format(&cand[c], short_layout, sizeof short_layout);
            }
            continue;
        }
        if (pst == TS_ERR_EXTERNAL) { /* GLPK failed here: this layout keeps its even split, and the plan says so */
            if (out->partition_errors++ == 0)
                snprintf(out->partition_error, sizeof out->partition_error, "%s", ts_error_message());
            ts_error_clear();
            continue;
        }
        if (pst != TS_OK) {
            res = pst;
            goto exit;
        }
        r.key = ts_objective_value(pb, opts->objective, &r.e);
        /* It replaces its even forms when better; otherwise it is dropped. */
        int beaten = 0;
        for (int i = 0; i < n && !beaten; i++)
            beaten = list[i].split.pp == 0 && same_but_recompute(&list[i].e.layout, &r.e.layout) &&
                     list[i].key <= r.key;
        if (beaten) {
            ts_split_free(&r.split);
            continue;
        }
        for (int i = 0; i < n;) {
            if (list[i].split.pp == 0 && same_but_recompute(&list[i].e.layout, &r.e.layout)) list[i] = list[--n];
            else i++;
        }
        list[n++] = r;
    }
    qsort(list, (size_t)n, sizeof *list, ranked_cmp);
    int keep = n < opts->top_k ? n : opts->top_k;
    int uneven = 0;
    for (int i = 0; i < keep; i++) uneven |= list[i].split.pp > 0;
    if (uneven) { /* out->best has room for top_k (search_into) */
        out->splits = calloc((size_t)opts->top_k, sizeof *out->splits);
        TS_ALLOC_GOTO(out->splits, res, exit);
    }
    for (int i = 0; i < keep; i++) {
        out->best[i] = list[i].e;
        if (uneven) out->splits[i] = list[i].split;
        else ts_split_free(&list[i].split);
        list[i].split = (ts_split){0};
    }
    out->n_best = keep;
    out->partitioned = tried;
    out->partition_s = now_s() - t0;
    out->search_s += out->partition_s;
    if (keep == 0 && no_valid && tried == 0) {
        memcpy(out->reason, reason, sizeof out->reason);
        res = TS_FAIL(TS_ERR_INPUT, "%s", out->reason);
    } else if (keep == 0) {
        /* The search's reason is under 400 characters; the bound keeps the sentence whole. */
        if (tried > 0 && short_why[0])
            snprintf(out->reason, sizeof out->reason,
                     "%.400s; uneven stages (--partition) fit none of the %d closest layouts either (closest, "
                     "%.140s: %.360s)", reason, tried, short_layout, short_why);
        else if (tried > 0)
            snprintf(out->reason, sizeof out->reason,
                     "%.400s; uneven stages (--partition) fit none of the %d closest layouts either", reason, tried);
        else
            snprintf(out->reason, sizeof out->reason,
                     "%.400s; no pipelined layout came close enough to try uneven stages (--partition)", reason);
        res = TS_FAIL(TS_ERR_INFEASIBLE, "%s", out->reason);
    } else {
        out->reason[0] = '\0';
    }
exit:
    for (int i = 0; list && i < n; i++) ts_split_free(&list[i].split);
    free(list);
    free(cand);
    ts_search_result_free(&near);
    ts_search_result_free(&split_only);
    return res;
}
