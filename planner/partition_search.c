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

#define PART_TOP 4  /* best layouts re-partitioned */
#define PART_NEAR 4 /* layouts that do not fit evenly, re-partitioned */
#define PART_CANDIDATES (2 * PART_TOP + PART_NEAR)
/* The even layouts scanned for the PART_TOP to re-partition, whatever the caller's top_k: the
 * answer must not depend on how many rows are asked for (--top 1 and --top 3 once re-split
 * different layouts and named different bests). */
#define PART_EVEN_SCAN (4 * PART_TOP)

void ts_partition_opts_defaults(ts_partition_opts *o) {
    *o = (ts_partition_opts){.mode = TS_PARTITION_AUTO, .objective = TS_PART_OBJ_STAGE, .node_limit = TS_PART_DEFAULT_NODES,
                             .node_limit_max = TS_PART_DEFAULT_NODES_MAX};
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

/* A layout as text, for an error's context. */
static const char *layout_text(const ts_layout *l, char *buf, size_t cap) {
    ts_layout_format(l, buf, cap);
    return buf;
}

/* Re-partitions `l`. TS_OK with *e and *s filled when a split fits (valid under the closed
 * form too); TS_ERR_INFEASIBLE when none does (*info says why, no error is left recorded); any
 * other failure (GLPK's, memory) is returned with its message, the layout in front. */
static ts_status partition_one(const ts_problem *pb, unsigned policies, const ts_partition_opts *po,
                               const ts_layout *l, ts_eval *e, ts_split *s, ts_partition_info *info) {
    ts_partition_problem p;
    char text[256];
    *info = (ts_partition_info){.short_bytes = INFINITY};
    TS_CHECK_CTX(ts_partition_problem_of(pb, l, policies, &p), "uneven stages of %s", layout_text(l, text, sizeof text));
    p.node_limit = po->node_limit;
    p.node_limit_max = po->node_limit_max;
    p.objective = po->objective;
    ts_status st = ts_partition_solve(&p, s, info);
    ts_partition_problem_free(&p);
    /* No split fits: the usual answer for a layout that does not fit evenly, which the caller
     * skips, keeping info->why for its own message. Expected and handled, so cleared. */
    if (st == TS_ERR_INFEASIBLE) {
        ts_error_clear();
        return st;
    }
    TS_CHECK_CTX(st, "uneven stages of %s", layout_text(l, text, sizeof text));
    int count[TS_RECOMPUTE_COUNT] = {0}, most = 0;
    for (int i = 0; i < s->pp; i++) count[s->recompute[i]]++;
    for (int k = 1; k < TS_RECOMPUTE_COUNT; k++)
        if (count[k] > count[most]) most = k;
    ts_layout lk = *l;
    lk.recompute = (ts_recompute)most;
    TS_CHECK_CTX_GOTO(ts_evaluate_split(pb, &lk, s, e), st, fail, "uneven stages of %s",
                      layout_text(l, text, sizeof text));
    if (!e->fits) { /* the instance's model and stages.c disagree: no split, as above */
        st = TS_ERR_INFEASIBLE;
        goto fail;
    }
    return TS_OK;
fail:
    ts_split_free(s);
    return st;
}

static int model_mixes_kinds(const ts_model *m) {
    if (m->moe.experts == 0) return 0;
    int moe = 0;
    for (int x = 0; x < m->layers; x++) moe += ts_model_layer_is_moe(m, x);
    return moe > 0 && moe < m->layers;
}

/* Whether a split of `l` could have a faster slowest stage than its even form (auto's test for
 * models of one kind of layer, no GLPK), in *gain. A relaxation of the program: memory dropped,
 * every layer at the least time any allowed policy gives any kind (t), every stage at its least
 * fixed time (f_s). A split whose slowest stage beats the even form's, M, holds on stage s at
 * most n_s layers, the most with f_s + n_s·t < M; one exists only if every n_s ≥ vpp and
 * Σ_s n_s ≥ L. An even form forced into recompute passes whenever the faster policies leave
 * room (M is its recomputing stage's); an even form balanced to within a layer fails
 * (llama2-70b's 80 layers on 8 stages: no whole layer can move off the LM head's stage without
 * making another slower). Cost: the instance's closed-form costs, microseconds. */
static ts_status split_may_gain(const ts_problem *pb, unsigned policies, ts_partition_objective objective,
                                const ts_layout *l, int *gain) {
    ts_partition_problem p;
    ts_split even = {0};
    ts_status res = TS_OK;
    int g = 1;
    TS_CHECK(ts_partition_problem_of(pb, l, policies, &p));
    TS_CHECK_GOTO(ts_split_init(&even, p.pp, p.vpp), res, exit);
    even.schedule = p.schedule;
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
        g = 1;
    } else if (t > 0 && isfinite(t)) {
        long long room = 0;
        for (int s = 0; s < p.pp && g; s++) {
            double f = INFINITY;
            for (int k = 0; k < K_POL; k++)
                if (policy_allowed(&p, k)) f = fmin(f, p.fixed_time_s[s * K_POL + k]);
            double x = (M - f) / t;
            long long n = x > 0 ? (long long)ceil(x) - 1 : -1;
            if (n < p.vpp) g = 0;
            room += n;
        }
        g = g && room >= p.layers;
    }
    *gain = g;
exit:
    ts_split_free(&even);
    ts_partition_problem_free(&p);
    return res;
}

/* One partitioned search: the layouts to re-partition, then the ranking of the even layouts and
 * of the splits that beat them. */
typedef struct {
    const ts_problem *pb;
    const ts_search_opts *opts;
    const ts_partition_opts *po;
    unsigned policies; /* the recompute policies a stage may choose (0: all) */
    ts_layout cand[PART_CANDIDATES];
    int n_cand;
    ranked *list; /* (the even search's n_best + PART_CANDIDATES) */
    int split_only; /* the pins leave only layouts an explicit split makes valid */
    int n, tried;
    /* The closest candidate no split fits, for the nothing-fits message. */
    double short_bytes;
    char short_why[sizeof ((ts_partition_info *)0)->why], short_layout[256];
} part_search;

/* Whether a split can apply: a pipeline whose schedule does not fix its chunks (DualPipe and ZB-V
 * take the even split, program/problem.c ts_schedule_invalid). */
static int takes_split(const ts_layout *l) {
    return l->pp > 1 && !ts_schedules[l->schedule].fixed_vpp;
}

static int is_candidate(const part_search *q, const ts_layout *l) {
    for (int j = 0; j < q->n_cand; j++)
        if (same_but_recompute(&q->cand[j], l)) return 1;
    return 0;
}

/* The best PART_TOP distinct layouts with pp > 1 (recompute aside) among the even search's first
 * PART_EVEN_SCAN; when
 * `screen` (auto), only those whose even form split_may_gain says a split could beat. */
static ts_status add_best(part_search *q, const ts_search_result *even, int screen) {
    ts_layout seen[PART_TOP];
    char text[256];
    for (int i = 0, n_seen = 0; i < even->n_best && i < PART_EVEN_SCAN && n_seen < PART_TOP; i++) {
        const ts_layout *l = &even->best[i].layout;
        int dup = !takes_split(l);
        for (int j = 0; j < n_seen && !dup; j++) dup = same_but_recompute(&seen[j], l);
        if (dup) continue;
        seen[n_seen++] = *l;
        int gain = 1;
        if (screen)
            TS_CHECK_CTX(split_may_gain(q->pb, q->policies, q->po->objective, l, &gain), "uneven stages of %s",
                         layout_text(l, text, sizeof text));
        if (gain) q->cand[q->n_cand++] = *l;
    }
    return TS_OK;
}

/* A search that finds nothing (none fits, or none is valid) is an expected answer here: it adds
 * no candidate, and its error is cleared. Any other failure is relayed. */
static ts_status search_for_candidates(const ts_problem *pb, const ts_search_opts *o, ts_search_result *r,
                                       const char *what) {
    ts_status st = ts_search(pb, o, r);
    if (st == TS_ERR_INFEASIBLE || st == TS_ERR_INPUT) {
        ts_error_clear();
        r->n_best = 0;
        return TS_OK;
    }
    TS_CHECK_CTX(st, "uneven stages: searching %s", what);
    return TS_OK;
}

/* The best layouts that only an explicit split makes valid (interleaving whose pp·vpp does not
 * divide the layers: Llama 3 405B's 126 layers on 16×7 chunks), as costed nearly evenly by the
 * search, whose objective is below `bar` (ilp: INFINITY; auto: the best even layout's, so
 * GLPK runs only where interleaving could win). */
static ts_status add_split_only(part_search *q, double bar, ts_search_result *found) {
    ts_search_opts o = *q->opts;
    o.explicit_splits = 1;
    o.top_k = 4 * PART_TOP;
    TS_CHECK(search_for_candidates(q->pb, &o, found, "layouts that need an explicit split"));
    for (int i = 0, added = 0; i < found->n_best && added < PART_TOP; i++) {
        const ts_layout *l = &found->best[i].layout;
        if (!(ts_objective_value(q->pb, o.objective, &found->best[i]) < bar)) break; /* ranked by it */
        if (!ts_layout_invalid(q->pb, l, NULL, 0)) continue; /* valid evenly: the first search's */
        if (is_candidate(q, l)) continue;
        q->cand[q->n_cand++] = *l;
        added++;
    }
    return TS_OK;
}

/* Layouts that would fit with twice the memory, where uneven stages may make room: by_memory,
 * the closest to fitting (when nothing fits); else the fastest that do not fit. */
static ts_status add_near(part_search *q, int by_memory, ts_search_result *near) {
    ts_problem roomy = *q->pb;
    roomy.usable_bytes *= 2;
    ts_search_opts o = *q->opts;
    o.explicit_splits = q->po->mode == TS_PARTITION_ILP || q->split_only;
    o.top_k = 4 * PART_NEAR;
    o.objective = by_memory ? TS_OBJ_MEMORY : TS_OBJ_TIME;
    o.max_slowdown = INFINITY; /* the least memory at any speed: the closest to fitting */
    TS_CHECK(search_for_candidates(&roomy, &o, near, "layouts that fit with twice the memory"));
    for (int i = 0, added = 0; i < near->n_best && added < PART_NEAR; i++) {
        const ts_eval *e = &near->best[i];
        int fits_evenly = e->mem.total <= q->pb->usable_bytes && !ts_layout_invalid(q->pb, &e->layout, NULL, 0);
        if (fits_evenly || !takes_split(&e->layout) || is_candidate(q, &e->layout)) continue;
        q->cand[q->n_cand++] = e->layout;
        added++;
    }
    return TS_OK;
}

/* A split that fits replaces its candidate's even forms in the ranking when it beats them;
 * otherwise it is dropped. */
static void rank_split(part_search *q, ranked *r) {
    for (int i = 0; i < q->n; i++)
        if (q->list[i].split.pp == 0 && same_but_recompute(&q->list[i].e.layout, &r->e.layout) &&
            q->list[i].key <= r->key) {
            ts_split_free(&r->split);
            return;
        }
    for (int i = 0; i < q->n;) {
        if (q->list[i].split.pp == 0 && same_but_recompute(&q->list[i].e.layout, &r->e.layout))
            q->list[i] = q->list[--q->n];
        else i++;
    }
    q->list[q->n++] = *r;
}

/* The program on every candidate, each split ranked; of those no split fits, the closest is
 * remembered. */
static ts_status partition_candidates(part_search *q, ts_search_result *out) {
    ts_partition_opts quick = *q->po;
    if (quick.node_limit == TS_PART_DEFAULT_NODES && quick.node_limit_max == TS_PART_DEFAULT_NODES_MAX)
        quick.node_limit = quick.node_limit_max = TS_PART_AUTO_SPLIT_NODES;
    for (int c = 0; c < q->n_cand; c++) {
        ranked r = {0};
        ts_partition_info info;
        q->tried++;
        /* auto's split-only layouts on a budget (TS_PART_AUTO_SPLIT_NODES) */
        const ts_partition_opts *po = q->po->mode == TS_PARTITION_AUTO && ts_layout_invalid(q->pb, &q->cand[c], NULL, 0)
                                          ? &quick
                                          : q->po;
        ts_status st = partition_one(q->pb, q->policies, po, &q->cand[c], &r.e, &r.split, &info);
        if (st == TS_ERR_INFEASIBLE) {
            if (info.short_bytes < q->short_bytes) {
                q->short_bytes = info.short_bytes;
                memcpy(q->short_why, info.why, sizeof q->short_why);
                ts_layout_format(&q->cand[c], q->short_layout, sizeof q->short_layout);
            }
            continue;
        }
        if (st == TS_ERR_EXTERNAL) {
            /* GLPK failed on this layout: handled — it keeps its even split, and the plan says so
             * (out->partition_error keeps the first message); the search goes on. */
            if (out->partition_errors++ == 0)
                snprintf(out->partition_error, sizeof out->partition_error, "%s", ts_error_message());
            ts_error_clear();
            continue;
        }
        TS_CHECK(st);
        r.key = ts_objective_value(q->pb, q->opts->objective, &r.e);
        rank_split(q, &r);
    }
    return TS_OK;
}

/* The ranking's best top_k into `out`, with the splits when any of them is uneven. */
static ts_status keep_best(part_search *q, ts_search_result *out) {
    int top_k = q->opts->top_k;
    qsort(q->list, (size_t)q->n, sizeof *q->list, ranked_cmp);
    int keep = q->n < top_k ? q->n : top_k;
    int uneven = 0;
    for (int i = 0; i < keep; i++) uneven |= q->list[i].split.pp > 0;
    if (uneven) { /* out->best has room for top_k (search_into) */
        out->splits = calloc((size_t)top_k, sizeof *out->splits);
        if (out->splits == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory: %d splits", top_k);
    }
    for (int i = 0; i < keep; i++) {
        out->best[i] = q->list[i].e;
        if (uneven) out->splits[i] = q->list[i].split;
        else ts_split_free(&q->list[i].split);
        q->list[i].split = (ts_split){0};
    }
    out->n_best = keep;
    return TS_OK;
}

/* Nothing kept: the even search's `reason` and what uneven stages tried, in out->reason and the
 * error. */
static ts_status nothing_kept(const part_search *q, int no_valid, const char *reason, ts_search_result *out) {
    int tried = q->tried;
    if (no_valid && tried == 0) {
        memcpy(out->reason, reason, sizeof out->reason);
        return TS_FAIL(TS_ERR_INPUT, "%s", out->reason);
    }
    /* The search's reason is under 400 characters; the bound keeps the sentence whole. */
    if (tried > 0 && q->short_why[0])
        snprintf(out->reason, sizeof out->reason,
                 "%.400s; uneven stages (--partition) fit none of the %d closest layouts either (closest, "
                 "%.140s: %.360s)", reason, tried, q->short_layout, q->short_why);
    else if (tried > 0)
        snprintf(out->reason, sizeof out->reason,
                 "%.400s; uneven stages (--partition) fit none of the %d closest layouts either", reason, tried);
    else
        snprintf(out->reason, sizeof out->reason,
                 "%.400s; no pipelined layout came close enough to try uneven stages (--partition)", reason);
    return TS_FAIL(TS_ERR_INFEASIBLE, "%s", out->reason);
}

/* The caller's top_k of a ranking searched wider (PART_EVEN_SCAN). */
static void keep_top(ts_search_result *out, int top_k) {
    if (out->n_best > top_k) out->n_best = top_k;
}

ts_status ts_search_partitioned(const ts_problem *pb, const ts_search_opts *opts, const ts_partition_opts *po,
                                ts_search_result *out) {
    ts_partition_mode mode = po->mode;
    ts_search_opts wide = *opts;
    if (mode != TS_PARTITION_UNIFORM && wide.top_k < PART_EVEN_SCAN) wide.top_k = PART_EVEN_SCAN;
    ts_status st = ts_search(pb, &wide, out);
    /* ilp and auto: the pins may leave only layouts that need an explicit split (interleaving
     * whose pp·vpp does not divide the layers); the searches below with explicit_splits find
     * them. */
    int no_valid = mode != TS_PARTITION_UNIFORM && st == TS_ERR_INPUT && out->best != NULL && out->searched == 0;
    if (mode == TS_PARTITION_UNIFORM || (st != TS_OK && st != TS_ERR_INFEASIBLE && !no_valid)) {
        keep_top(out, opts->top_k);
        return st;
    }
    int nothing_fits = st == TS_ERR_INFEASIBLE || no_valid;
    /* auto, when something fits evenly: with the memory objective the even split stands; with
     * one kind of layer only the best layouts whose even form split_may_gain says could be beaten
     * (forced into recompute, or a stage slower than the rest by more than a layer). */
    int screen = mode == TS_PARTITION_AUTO && !nothing_fits;
    if (screen && opts->objective == TS_OBJ_MEMORY) {
        keep_top(out, opts->top_k);
        return st;
    }
    if (screen && model_mixes_kinds(&pb->model)) screen = 0;
    /* Nothing fits evenly (or, with ilp, nothing is valid evenly): expected here and handled —
     * uneven stages may fit. The even search's reason is kept; when they fit none either, this
     * search fails with that reason and what it tried (nothing_kept). */
    if (nothing_fits) ts_error_clear();
    char reason[sizeof out->reason];
    memcpy(reason, out->reason, sizeof reason);

    double t0 = now_s();
    ts_status res = TS_OK;
    part_search q = {.pb = pb, .opts = opts, .po = po, .short_bytes = INFINITY, .split_only = no_valid};
    if (opts->pins.mask & (1u << TS_PIN_RECOMPUTE)) q.policies = 1u << opts->pins.value.recompute;
    else q.policies = pb->train.stack.recompute; /* the policies the stack offers (0: all) */
    ts_search_result near = {0}, split_only = {0};
    TS_CHECK_GOTO(add_best(&q, out, screen), res, exit);
    /* auto, when something fits evenly: the layouts only a split makes valid that the search
     * costs faster than the best even one (Llama 3 405B's 126 layers interleaved on 16 stages,
     * DeepSeek-V3's 61 on 8) */
    int auto_fits = mode == TS_PARTITION_AUTO && !nothing_fits;
    double bar = auto_fits && out->n_best > 0 ? ts_objective_value(pb, opts->objective, &out->best[0]) : INFINITY;
    if (mode == TS_PARTITION_ILP || no_valid || auto_fits)
        TS_CHECK_GOTO(add_split_only(&q, bar, &split_only), res, exit);
    if (screen && q.n_cand == 0) { /* nothing to gain: the even search's result */
        keep_top(out, opts->top_k);
        goto exit;
    }
    q.list = calloc((size_t)out->n_best + PART_CANDIDATES, sizeof *q.list);
    TS_ALLOC_GOTO(q.list, res, exit);
    if (mode == TS_PARTITION_ILP || nothing_fits)
        TS_CHECK_GOTO(add_near(&q, nothing_fits && !no_valid, &near), res, exit);
    for (int i = 0; i < out->n_best; i++) {
        q.list[q.n].e = out->best[i];
        q.list[q.n].key = ts_objective_value(pb, opts->objective, &q.list[q.n].e);
        q.n++;
    }
    TS_CHECK_GOTO(partition_candidates(&q, out), res, exit);
    TS_CHECK_GOTO(keep_best(&q, out), res, exit);
    out->partitioned = q.tried;
    out->partition_s = now_s() - t0;
    out->search_s += out->partition_s;
    if (out->n_best == 0) res = nothing_kept(&q, no_valid, reason, out);
    else out->reason[0] = '\0';
exit:
    for (int i = 0; q.list && i < q.n; i++) ts_split_free(&q.list[i].split);
    free(q.list);
    ts_search_result_free(&near);
    ts_search_result_free(&split_only);
    return res;
}
