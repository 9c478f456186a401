/* The layout search: branch and bound equals brute force (STYLE.md: a readable reference beside
 * every fast path, and a test that diffs them), results are valid, fit, sorted and deterministic,
 * pins and the schedule mask are honoured, and impossible requests fail the documented way. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/problem.h"
#include "program/schedule.h"
#include "planner/budget.h"
#include "planner/search.h"
#include "tests/helpers.h"

static ts_search_opts opts_of(int top_k, const char *fix) {
    ts_search_opts o;
    ts_search_opts_defaults(&o);
    o.top_k = top_k;
    if (fix) {
        ts_error_clear();
        cr_assert_eq(ts_pins_parse("--fix", fix, &o.pins), TS_OK, "%s", ts_error_message());
    }
    return o;
}

static void search_ok(const ts_problem *pb, const ts_search_opts *o, ts_search_result *r) {
    ts_error_clear();
    ts_status st = ts_search(pb, o, r);
    cr_assert_eq(st, TS_OK, "%s on %d GPUs: %s", pb->model.name, pb->gpus, ts_error_message());
}

static const char *text_of(const ts_layout *l, char *buf, size_t cap) {
    ts_layout_format(l, buf, cap);
    return buf;
}

/* Every result is valid, fits, honours the pins, re-evaluates (ts_evaluate, fresh stages) to the
 * same numbers, and the list is sorted by the objective with no duplicates. */
static void check_results(const ts_problem *pb, const ts_search_opts *o, const ts_search_result *r) {
    char buf[256], a[256];
    cr_expect_leq(r->n_best, o->top_k);
    cr_expect_leq(r->evaluated, r->searched);
    cr_expect_leq(r->feasible, r->evaluated);
    cr_expect_geq(r->feasible, r->n_best);
    for (int i = 0; i < r->n_best; i++) {
        const ts_eval *e = &r->best[i];
        const char *why = ts_layout_invalid(pb, &e->layout, buf, sizeof buf);
        cr_expect_null(why, "#%d %s invalid: %s", i, text_of(&e->layout, a, sizeof a), why ? why : "");
        cr_expect(e->fits, "#%d %s does not fit", i, text_of(&e->layout, a, sizeof a));
        cr_expect_leq(e->mem.total, pb->usable_bytes, "#%d %s: %.4g GB > usable %.4g GB", i,
                      text_of(&e->layout, a, sizeof a), e->mem.total / 1e9, pb->usable_bytes / 1e9);
        cr_expect(ts_pins_allow(&o->pins, &e->layout), "#%d %s breaks the pins", i,
                  text_of(&e->layout, a, sizeof a));
        cr_expect_eq(e->layout.microbatches,
                     (int)(pb->train.global_batch / ((long long)e->layout.dp * e->layout.mbs)));
        cr_expect(isfinite(e->step_s) && e->step_s > 0);
        ts_eval again;
        cr_assert_eq(ts_evaluate(pb, &e->layout, &again), TS_OK, "%s", ts_error_message());
        cr_expect_eq(again.step_s, e->step_s, "#%d %s: searched %.17g s, evaluated %.17g s", i,
                     text_of(&e->layout, a, sizeof a), e->step_s, again.step_s);
        cr_expect_eq(again.mem.total, e->mem.total, "#%d %s: memory differs", i,
                     text_of(&e->layout, a, sizeof a));
        if (i > 0) {
            double prev = ts_objective_value(pb, o->objective, &r->best[i - 1]);
            double cur = ts_objective_value(pb, o->objective, e);
            cr_expect_leq(prev, cur, "not sorted by %s at #%d: %.17g then %.17g",
                          ts_objective_names[o->objective], i, prev, cur);
            for (int j = 0; j < i; j++)
                cr_expect_neq(memcmp(&r->best[j].layout, &e->layout, sizeof e->layout), 0,
                              "#%d and #%d are the same layout %s", j, i, text_of(&e->layout, a, sizeof a));
        }
    }
}

/* Pruned and brute-force searches agree exactly: same layouts in the same order, same step
 * times, same count of valid layouts. */
static void check_prune_equals_brute(const ts_problem *pb, const char *fix, ts_objective obj) {
    static const int tops[] = {1, 5, 20};
    for (size_t k = 0; k < sizeof tops / sizeof tops[0]; k++) {
        ts_search_opts o = opts_of(tops[k], fix);
        o.objective = obj;
        ts_search_result pruned, brute;
        o.prune = 1;
        search_ok(pb, &o, &pruned);
        o.prune = 0;
        search_ok(pb, &o, &brute);
        const char *what = pb->model.name;
        cr_expect_eq(pruned.searched, brute.searched, "%s/%d top %d: searched %lld vs %lld", what,
                     pb->gpus, tops[k], (long long)pruned.searched, (long long)brute.searched);
        cr_expect_eq(brute.evaluated, brute.searched, "brute force evaluates everything");
        cr_expect_leq(pruned.evaluated, brute.evaluated);
        cr_assert_eq(pruned.n_best, brute.n_best, "%s/%d top %d: %d vs %d results", what, pb->gpus,
                     tops[k], pruned.n_best, brute.n_best);
        cr_expect_gt(brute.n_best, 0);
        for (int i = 0; i < brute.n_best; i++) {
            char a[256], b[256];
            cr_expect_eq(memcmp(&pruned.best[i].layout, &brute.best[i].layout, sizeof(ts_layout)), 0,
                         "%s/%d top %d #%d: pruned %s, brute force %s", what, pb->gpus, tops[k], i,
                         text_of(&pruned.best[i].layout, a, sizeof a),
                         text_of(&brute.best[i].layout, b, sizeof b));
            cr_expect_eq(pruned.best[i].step_s, brute.best[i].step_s, "%s/%d top %d #%d", what,
                         pb->gpus, tops[k], i);
            cr_expect_eq(pruned.best[i].mem.total, brute.best[i].mem.total);
        }
        o.prune = 1;
        check_results(pb, &o, &pruned);
        ts_search_result_free(&pruned);
        ts_search_result_free(&brute);
    }
}

Test(planner_search, prune_equals_brute_force_tiny) {
    ts_problem pb = test_problem("tiny", "h100-sxm-dgx", 8, 64, 256, 1);
    check_prune_equals_brute(&pb, NULL, TS_OBJ_TIME);
    check_prune_equals_brute(&pb, NULL, TS_OBJ_COST);
    pb = test_problem("tiny", "h100-sxm-dgx", 16, 64, 256, 1);
    check_prune_equals_brute(&pb, NULL, TS_OBJ_TIME);
    pb = test_problem("tiny", "h100-sxm-dgx", 8, 64, 256, 0);
    check_prune_equals_brute(&pb, NULL, TS_OBJ_TIME);
}

Test(planner_search, prune_equals_brute_force_tiny_moe) {
    ts_problem pb = test_problem("tiny-moe", "h100-sxm-dgx", 8, 64, 256, 1);
    check_prune_equals_brute(&pb, NULL, TS_OBJ_TIME);
    pb = test_problem("tiny-moe", "h100-sxm-dgx", 16, 64, 256, 1);
    check_prune_equals_brute(&pb, NULL, TS_OBJ_TIME);
}

Test(planner_search, prune_equals_brute_force_llama2_7b) {
    ts_problem pb = test_problem("llama2-7b", "h100-sxm-dgx", 8, 256, 4096, 1);
    check_prune_equals_brute(&pb, NULL, TS_OBJ_TIME);
    pb = test_problem("llama2-7b", "h100-sxm-dgx", 16, 256, 4096, 1);
    check_prune_equals_brute(&pb, NULL, TS_OBJ_TIME);
    check_prune_equals_brute(&pb, "pp=2", TS_OBJ_TIME);
}

Test(planner_search, prune_equals_brute_force_megatron_1p7b_unfused) {
    ts_problem pb = test_problem("megatron-gpt-1.7b", "a100-80g-dgx", 32, 512, 2048, 0);
    check_prune_equals_brute(&pb, NULL, TS_OBJ_TIME);
}

/* The reference the search's loops must equal: every combination of every field, kept when
 * ts_layout_invalid accepts it and it is canonical (search.h; the experts' TP degree as
 * ts_search_offers_etp offers it), evaluated one by one; schedules
 * searched only when asked for (DualPipe) with `opt_in`. */
typedef struct {
    long long valid, fits;
    double *steps; /* (fits) step times of the layouts that fit */
} naive_space;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void naive_enumerate(const ts_problem *pb, int opt_in, naive_space *out) {
    int N = pb->gpus, L = pb->model.layers;
    long long B = pb->train.global_batch;
    size_t cap = 1024;
    *out = (naive_space){.steps = malloc(cap * sizeof(double))};
    cr_assert_not_null(out->steps);
    for (int tp = 1; tp <= N; tp++)
        for (int cp = 1; cp * tp <= N; cp++)
            for (int pp = 1; pp * cp * tp <= N; pp++) {
                if (N % (tp * cp * pp)) continue;
                int dp = N / (tp * cp * pp);
                for (int ep = 1; ep <= N; ep++)
                    for (int etp = 0; etp <= 1; etp++)
                    for (int sp = 0; sp <= 1; sp++)
                        for (int mbs = 1; mbs <= B; mbs++)
                            for (int rc = 0; rc < TS_RECOMPUTE_COUNT; rc++)
                                for (int s = 0; s < TS_SCHED_COUNT; s++)
                                    for (int v = 1; v <= L; v++)
                                        for (int z = 0; z <= 3; z++) {
                                            ts_layout l = {.dp = dp, .tp = tp, .pp = pp, .cp = cp, .ep = ep,
                                                           .sp = sp, .zero = z, .mbs = mbs, .vpp = v,
                                                           .schedule = (ts_schedule)s,
                                                           .recompute = (ts_recompute)rc, .etp = etp};
                                            if (pp == 1 && s != TS_SCHED_1F1B) continue;
                                            if (ts_schedules[s].opt_in && !opt_in) continue;
                                            if (dp * cp == 1 && z != 0) continue;
                                            if (pb->train.flash_attention && rc == TS_RECOMPUTE_SELECTIVE) continue;
                                            if (!ts_search_offers_etp(pb, &l, 0)) continue;
                                            if (ts_layout_invalid(pb, &l, NULL, 0)) continue;
                                            ts_eval e;
                                            cr_assert_eq(ts_evaluate(pb, &l, &e), TS_OK, "%s", ts_error_message());
                                            out->valid++;
                                            if (e.mem.total > pb->usable_bytes) continue;
                                            if ((size_t)out->fits == cap) {
                                                cap *= 2;
                                                out->steps = realloc(out->steps, cap * sizeof(double));
                                                cr_assert_not_null(out->steps);
                                            }
                                            out->steps[out->fits++] = e.step_s;
                                        }
            }
    qsort(out->steps, (size_t)out->fits, sizeof(double), cmp_double);
}

/* Brute-force search and naive enumeration agree: the same count of valid layouts, the same count
 * that fit, and the same best step times in order. */
static void check_search_equals_naive(const ts_problem *pb, int opt_in) {
    naive_space n;
    naive_enumerate(pb, opt_in, &n);
    cr_assert_gt(n.fits, 20, "%s on %d: a space too small to compare", pb->model.name, pb->gpus);
    ts_search_opts o = opts_of(20, NULL);
    o.prune = 0;
    if (opt_in) o.schedules = (1u << TS_SCHED_COUNT) - 1;
    ts_search_result r;
    search_ok(pb, &o, &r);
    cr_expect_eq(r.searched, n.valid, "%s on %d: search %lld valid, naive %lld", pb->model.name, pb->gpus,
                 (long long)r.searched, n.valid);
    cr_expect_eq(r.feasible, n.fits, "%s on %d: search %lld fit, naive %lld", pb->model.name, pb->gpus,
                 (long long)r.feasible, n.fits);
    cr_assert_eq(r.n_best, n.fits < 20 ? n.fits : 20);
    for (int i = 0; i < r.n_best; i++)
        cr_expect_eq(r.best[i].step_s, n.steps[i], "%s on %d: #%d %.17g s, naive %.17g s", pb->model.name,
                     pb->gpus, i, r.best[i].step_s, n.steps[i]);
    ts_search_result_free(&r);
    free(n.steps);
}

Test(planner_search, search_equals_naive_enumeration) {
    ts_problem pb = test_problem("tiny", "h100-sxm-dgx", 8, 32, 256, 1);
    check_search_equals_naive(&pb, 0);
    check_search_equals_naive(&pb, 1); /* DualPipe asked for */
    pb = test_problem("tiny-moe", "h100-sxm-dgx", 8, 16, 256, 1);
    check_search_equals_naive(&pb, 0);
    check_search_equals_naive(&pb, 1);
    pb = test_problem("tiny", "h100-sxm-dgx", 12, 24, 256, 0); /* unfused: selective recompute too */
    check_search_equals_naive(&pb, 0);
}

/* Counts of an unpruned search's layouts: experts apart from TP (etp = 1 at tp > 1), and experts
 * over TP at tp > 1 with SP where the same split apart from TP exists (ep·tp divides the experts). */
static void count_etp(const ts_problem *pb, const char *fix, int *apart, int *dominated, int *over_tp) {
    ts_search_opts o = opts_of(100000, fix);
    o.prune = 0;
    ts_search_result r;
    search_ok(pb, &o, &r);
    *apart = *dominated = *over_tp = 0;
    for (int i = 0; i < r.n_best; i++) {
        const ts_layout *l = &r.best[i].layout;
        if (l->tp == 1) continue;
        if (l->etp == 1) {
            (*apart)++;
            cr_expect(l->sp, "etp=1 at tp=%d needs sp: ep=%d", l->tp, l->ep);
        } else {
            (*over_tp)++;
            *dominated += l->sp && pb->model.moe.experts % (l->ep * l->tp) == 0;
        }
    }
    ts_search_result_free(&r);
}

/* The search tries experts apart from TP where the stack runs them, leaves out the etp = tp
 * layouts that etp = 1 dominates unless ep or etp is pinned, and tries none on a stack without
 * the split. */
Test(planner_search, experts_apart_from_tp_where_the_stack_runs_them) {
    ts_problem pb = test_problem("tiny-moe", "h100-sxm-dgx", 8, 16, 256, 1);
    int apart, dominated, over_tp;
    count_etp(&pb, NULL, &apart, &dominated, &over_tp);
    cr_expect_gt(apart, 0, "etp=1 layouts offered");
    cr_expect_gt(over_tp, 0, "etp=tp layouts where ep·tp does not divide the experts");
    cr_expect_eq(dominated, 0, "etp=tp layouts dominated by etp=1 left out");
    count_etp(&pb, "ep=1", &apart, &dominated, &over_tp);
    cr_expect_gt(dominated, 0, "a pinned ep offers etp=tp whatever etp=1 offers");
    pb.train.stack.etp = 0;
    count_etp(&pb, NULL, &apart, &dominated, &over_tp);
    cr_expect_eq(apart, 0, "no etp=1 on a stack without it");
    cr_expect_gt(dominated, 0, "and etp=tp everywhere");
}

/* The kept layouts are a heap while the search runs and sorted at its end: a large top_k comes
 * out best first (step, then memory), and a smaller top_k is its prefix, whether the heap filled
 * or not (every layout that fits, when top_k exceeds them). */
Test(planner_search, top_rows_are_sorted_and_a_prefix_of_more) {
    ts_problem pb = test_problem("llama2-7b", "h100-sxm-dgx", 16, 64, 4096, 1);
    ts_search_opts big = opts_of(100000, NULL), small = opts_of(37, NULL);
    ts_search_result a, b;
    search_ok(&pb, &big, &a);
    search_ok(&pb, &small, &b);
    cr_assert_gt(a.n_best, 37, "%d layouts fit", a.n_best);
    cr_expect_eq(a.n_best, a.feasible, "every fitting layout kept: %d of %lld", a.n_best, (long long)a.feasible);
    for (int i = 1; i < a.n_best; i++) {
        const ts_eval *x = &a.best[i - 1], *y = &a.best[i];
        cr_expect(x->step_s < y->step_s || (x->step_s == y->step_s && x->mem.total <= y->mem.total),
                  "#%d %.9g s %.0f B before #%d %.9g s %.0f B", i, x->step_s, x->mem.total, i + 1, y->step_s,
                  y->mem.total);
    }
    cr_assert_eq(b.n_best, 37);
    char p[256], q[256];
    for (int i = 0; i < b.n_best; i++)
        cr_expect_str_eq(text_of(&b.best[i].layout, p, sizeof p), text_of(&a.best[i].layout, q, sizeof q), "#%d",
                         i + 1);
    ts_search_result_free(&a);
    ts_search_result_free(&b);
}

Test(planner_search, objective_memory_sorts_by_memory) {
    ts_problem pb = test_problem("llama2-7b", "h100-sxm-dgx", 16, 256, 4096, 1);
    ts_search_opts o = opts_of(20, NULL);
    o.objective = TS_OBJ_MEMORY;
    o.max_slowdown = INFINITY; /* least memory at any speed */
    ts_search_result r;
    search_ok(&pb, &o, &r);
    cr_assert_eq(r.n_best, 20);
    check_results(&pb, &o, &r);
    for (int i = 1; i < r.n_best; i++)
        cr_expect_leq(r.best[i - 1].mem.total, r.best[i].mem.total, "#%d", i);
    /* The least memory of all valid layouts is the search's `closest`. */
    cr_expect(r.has_closest);
    cr_expect_eq(r.best[0].mem.total, r.closest.mem.total);
    /* The memory objective finds less memory than the fastest layout uses. */
    ts_search_opts t = opts_of(1, NULL);
    ts_search_result fast;
    search_ok(&pb, &t, &fast);
    cr_expect_leq(r.best[0].mem.total, fast.best[0].mem.total);
    cr_expect_leq(fast.best[0].step_s, r.best[0].step_s);
    ts_search_result_free(&fast);
    ts_search_result_free(&r);
}

/* The memory objective by default: the least memory among layouts within 1.10× of the fastest
 * step, never the 20×-slower layout that shards and recomputes everything. Every kept layout is
 * within the cap; the least-memory layout at any speed is slower than it; and no layout within
 * the cap needs less memory than the pick (a brute check over the time ranking's top 2000). */
Test(planner_search, objective_memory_within_a_slowdown) {
    ts_problem pb = test_problem("llama2-70b", "h100-sxm-dgx", 64, 1024, 4096, 1);
    ts_search_opts o = opts_of(5, NULL);
    o.objective = TS_OBJ_MEMORY;
    cr_assert_eq(o.max_slowdown, TS_DEFAULT_MAX_SLOWDOWN);
    ts_search_result r, any, fast;
    search_ok(&pb, &o, &r);
    ts_search_opts t = opts_of(2000, NULL);
    search_ok(&pb, &t, &fast);
    cr_assert_float_eq(r.fastest_step_s, fast.best[0].step_s, 1e-12);
    cr_assert_float_eq(r.step_cap_s, 1.10 * fast.best[0].step_s, 1e-9);
    for (int i = 0; i < r.n_best; i++) cr_expect_leq(r.best[i].step_s, r.step_cap_s, "#%d", i + 1);
    cr_expect_lt(r.best[0].mem.total, fast.best[0].mem.total, "the pick saves memory over the fastest");
    for (int i = 0; i < fast.n_best; i++)
        if (fast.best[i].step_s <= r.step_cap_s)
            cr_expect_geq(fast.best[i].mem.total, r.best[0].mem.total, "time rank %d: %.4g bytes", i + 1,
                          fast.best[i].mem.total);
    o.max_slowdown = INFINITY;
    search_ok(&pb, &o, &any);
    cr_expect_eq(any.step_cap_s, 0);
    cr_expect_lt(any.best[0].mem.total, r.best[0].mem.total);
    cr_expect_gt(any.best[0].step_s, r.step_cap_s, "least memory at any speed is slower than the cap");
    ts_search_result_free(&r);
    ts_search_result_free(&any);
    ts_search_result_free(&fast);
}

Test(planner_search, pins_are_honoured) {
    ts_problem pb = test_problem("llama2-7b", "h100-sxm-dgx", 16, 256, 4096, 1);
    static const char *const fixes[] = {"tp=8,pp=2", "dp=4,zero=1", "sched=zb-h1,pp=4",
                                        "vpp=2,mbs=1", "recompute=selective,sp=1", "cp=2,tp=2"};
    for (size_t i = 0; i < sizeof fixes / sizeof fixes[0]; i++) {
        ts_search_opts o = opts_of(20, fixes[i]);
        ts_search_result r;
        search_ok(&pb, &o, &r);
        cr_expect_gt(r.n_best, 0, "--fix %s: no result", fixes[i]);
        check_results(&pb, &o, &r);
        for (int k = 0; k < r.n_best; k++) {
            char a[256];
            cr_expect(ts_pins_allow(&o.pins, &r.best[k].layout), "--fix %s: %s", fixes[i],
                      text_of(&r.best[k].layout, a, sizeof a));
        }
        ts_search_result_free(&r);
    }
    ts_search_opts o = opts_of(20, "tp=8,pp=2");
    ts_search_result r;
    search_ok(&pb, &o, &r);
    for (int k = 0; k < r.n_best; k++) {
        cr_expect_eq(r.best[k].layout.tp, 8);
        cr_expect_eq(r.best[k].layout.pp, 2);
        cr_expect_eq(r.best[k].layout.dp, 1);
    }
    ts_search_result_free(&r);
}

Test(planner_search, schedules_mask_restricts_schedules) {
    ts_problem pb = test_problem("llama2-7b", "h100-sxm-dgx", 16, 256, 4096, 1);
    ts_search_opts all = opts_of(10, "pp=4");
    ts_search_result ra;
    search_ok(&pb, &all, &ra);
    for (int s = 0; s < TS_SCHED_COUNT; s++) {
        ts_search_opts o = opts_of(10, "pp=4");
        o.schedules = 1u << s;
        ts_search_result r;
        search_ok(&pb, &o, &r);
        cr_expect_gt(r.n_best, 0, "only %s", ts_schedule_names[s]);
        cr_expect_lt(r.searched, ra.searched, "only %s: %lld of %lld", ts_schedule_names[s],
                     (long long)r.searched, (long long)ra.searched);
        for (int k = 0; k < r.n_best; k++)
            cr_expect_eq(r.best[k].layout.schedule, (ts_schedule)s, "mask %s, got %s",
                         ts_schedule_names[s], ts_schedule_names[r.best[k].layout.schedule]);
        ts_search_result_free(&r);
    }
    /* Without pins: pp > 1 results keep to the mask; pp = 1 is always the plain 1f1b. */
    ts_search_opts o = opts_of(100, NULL);
    o.schedules = (1u << TS_SCHED_GPIPE) | (1u << TS_SCHED_ZB_H1);
    ts_search_result r;
    search_ok(&pb, &o, &r);
    int piped = 0;
    for (int k = 0; k < r.n_best; k++) {
        const ts_layout *l = &r.best[k].layout;
        if (l->pp == 1) {
            cr_expect_eq(l->schedule, TS_SCHED_1F1B);
        } else {
            piped++;
            cr_expect(l->schedule == TS_SCHED_GPIPE || l->schedule == TS_SCHED_ZB_H1, "pp=%d sched=%s",
                      l->pp, ts_schedule_names[l->schedule]);
        }
    }
    cr_expect_gt(piped, 0);
    ts_search_result_free(&r);
    ts_search_result_free(&ra);
}

Test(planner_search, deterministic) {
    ts_problem pb = test_problem("llama2-7b", "h100-sxm-dgx", 16, 256, 4096, 1);
    ts_search_opts o = opts_of(50, NULL);
    ts_search_result a, b;
    search_ok(&pb, &o, &a);
    search_ok(&pb, &o, &b);
    cr_assert_eq(a.n_best, b.n_best);
    cr_expect_eq(a.searched, b.searched);
    cr_expect_eq(a.evaluated, b.evaluated);
    cr_expect_eq(a.feasible, b.feasible);
    for (int i = 0; i < a.n_best; i++) {
        cr_expect_eq(memcmp(&a.best[i].layout, &b.best[i].layout, sizeof(ts_layout)), 0, "#%d", i);
        cr_expect_eq(memcmp(&a.best[i].time, &b.best[i].time, sizeof(ts_time_split)), 0, "#%d", i);
        cr_expect_eq(memcmp(&a.best[i].mem, &b.best[i].mem, sizeof(ts_memory)), 0, "#%d", i);
        cr_expect_eq(a.best[i].step_s, b.best[i].step_s);
    }
    ts_search_result_free(&a);
    ts_search_result_free(&b);
}

Test(planner_search, nothing_fits_is_infeasible_with_advice) {
    ts_problem pb = test_problem("llama3-405b", "h100-sxm-dgx", 8, 64, 4096, 1);
    ts_search_opts o = opts_of(5, NULL);
    ts_search_result r;
    ts_error_clear();
    ts_status st = ts_search(&pb, &o, &r);
    cr_assert_eq(st, TS_ERR_INFEASIBLE, "405B on 8 GPUs: %s (%s)", ts_status_name(st), ts_error_message());
    cr_expect_eq(r.n_best, 0);
    cr_expect_gt(r.searched, 0);
    cr_expect_eq(r.feasible, 0);
    cr_expect(r.has_closest);
    cr_expect_gt(r.closest.mem.total, pb.usable_bytes);
    cr_expect(strstr(r.reason, "GB") != NULL, "reason: %s", r.reason);
    const char *needs = strstr(r.reason, "needs about ");
    cr_assert_not_null(needs, "reason: %s", r.reason);
    int n = 0;
    cr_expect_eq(sscanf(needs, "needs about %d GPUs", &n), 1, "reason: %s", r.reason);
    /* 405B × 16 bytes of model states alone need > 6.5 TB: at least 82 GPUs of 80 GB. */
    cr_expect(n >= 82 && n <= 512 && n % 8 == 0, "needs about %d GPUs", n);
    cr_expect(strstr(ts_error_message(), r.reason) != NULL, "error message: %s", ts_error_message());
    ts_search_result_free(&r);
    /* The advice holds: the named count fits. */
    ts_problem big = test_problem("llama3-405b", "h100-sxm-dgx", n, 64, 4096, 1);
    ts_search_result rb;
    search_ok(&big, &o, &rb);
    cr_expect_gt(rb.n_best, 0);
    ts_search_result_free(&rb);
}

Test(planner_search, pins_leaving_nothing_valid_are_input_errors) {
    ts_problem pb = test_problem("llama2-7b", "h100-sxm-dgx", 12, 240, 4096, 1);
    static const char *const fixes[] = {"tp=3", "pp=5", "dp=5", "ep=2", "sched=interleaved,pp=1"};
    for (size_t i = 0; i < sizeof fixes / sizeof fixes[0]; i++) {
        ts_search_opts o = opts_of(5, fixes[i]);
        ts_search_result r;
        ts_error_clear();
        ts_status st = ts_search(&pb, &o, &r);
        cr_expect_eq(st, TS_ERR_INPUT, "--fix %s: %s (%s)", fixes[i], ts_status_name(st), ts_error_message());
        cr_expect_eq(r.searched, 0);
        cr_expect_eq(r.n_best, 0);
        cr_expect(strstr(ts_error_message(), "llama2-7b") != NULL, "%s", ts_error_message());
        ts_search_result_free(&r);
    }
    ts_search_opts o = opts_of(0, NULL);
    ts_search_result r;
    ts_error_clear();
    cr_expect_eq(ts_search(&pb, &o, &r), TS_ERR_INPUT, "top_k 0");
    cr_expect(strstr(ts_error_message(), "--top") != NULL, "%s", ts_error_message());
    ts_search_result_free(&r);
}

/* ~1e15 parameters: 100 layers of 12·h² with h = 917504 (7168 heads of 128). */
Test(planner_search, absurd_model_is_infeasible_without_nan) {
    ts_model m = {0};
    snprintf(m.name, sizeof m.name, "absurd-1e15");
    m.layers = 100;
    m.hidden = 917504;
    m.heads = 7168;
    m.kv_heads = 7168;
    m.head_dim = 128;
    m.ffn_hidden = 4 * m.hidden;
    m.vocab = 51200;
    m.max_seq = 2048;
    m.activation = TS_ACT_GELU;
    m.norm = TS_NORM_LAYERNORM;
    m.position = TS_POS_LEARNED;
    m.tied_embeddings = 1;
    cr_assert_eq(ts_model_validate("absurd", &m), TS_OK, "%s", ts_error_message());
    ts_param_count pc;
    ts_model_params(&m, &pc);
    cr_assert(pc.total > 1e15 && pc.total < 1.1e15, "%.4g parameters", pc.total);
    ts_system s;
    cr_assert_eq(ts_system_load("h100-sxm-dgx", &s), TS_OK, "%s", ts_error_message());
    ts_train t;
    ts_train_defaults(&t);
    t.seq = 2048;
    ts_problem pb;
    cr_assert_eq(ts_problem_init(&pb, &m, &s, &t, 1024), TS_OK, "%s", ts_error_message());
    ts_search_opts o = opts_of(5, NULL);
    ts_search_result r;
    ts_error_clear();
    ts_status st = ts_search(&pb, &o, &r);
    cr_assert_eq(st, TS_ERR_INFEASIBLE, "%s (%s)", ts_status_name(st), ts_error_message());
    cr_expect(r.has_closest);
    const ts_eval *c = &r.closest;
    const double nums[] = {c->mem.weights, c->mem.grads, c->mem.optimizer, c->mem.activations,
                           c->mem.buffers, c->mem.total, c->step_s, c->tokens_per_s, c->mfu,
                           c->time.compute, c->time.dp_comm, c->time.pp_bubble};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        cr_expect(isfinite(nums[i]) && nums[i] >= 0, "closest field %zu = %g", i, nums[i]);
    /* Model states alone: 16 bytes × 1e15 / 1024 GPUs ≥ 15 TB per GPU. */
    cr_expect_gt(c->mem.total, 16 * pc.total / 1024 * 0.99);
    cr_expect(strstr(r.reason, "GB") != NULL, "%s", r.reason);
    cr_expect(strstr(r.reason, "absurd-1e15") != NULL, "%s", r.reason);
    ts_search_result_free(&r);
}

/* A GPU count as a budget (planner/budget.h): Megatron's 530B on at most 5128 A100s with a
 * global batch of 2520, which no layout of exactly 5128 GPUs divides (5128 = 8 × 641). The pick
 * uses at most 5128 GPUs, is at least as fast per sequence as the exact searches on every whole
 * node count it could have used, and with the batch free to move ±5% it is no slower per
 * sequence; the batch it picks is within the tolerance and divides by the layout's dp×mbs. */
Test(planner_search, gpu_budget_picks_the_best_count_and_batch, .timeout = 120) {
    ts_problem pb = test_problem("megatron-gpt-529.6b", "a100-80g-dgx", 5128, 2520, 2048, 1);
    ts_search_opts o = opts_of(1, NULL);
    ts_search_result exact;
    cr_assert_eq(ts_search(&pb, &o, &exact), TS_ERR_INPUT, "5128 GPUs exactly has no valid layout");
    ts_search_result_free(&exact);
    ts_error_clear();
    ts_budget_opts bo = {.gpus_max = 5128};
    ts_budget_result br;
    cr_assert_eq(ts_budget_search(&pb, &o, NULL, &bo, &br), TS_OK, "%s", ts_error_message());
    const ts_budget_choice *pick = &br.choices[0];
    cr_assert_leq(pick->gpus, 5128);
    cr_assert_eq(pick->global_batch, 2520);
    for (int i = 1; i < br.n; i++) cr_expect_leq(pick->key, br.choices[i].key);
    for (int g = 5120; g >= 4096; g -= 8) { /* the exact searches it must match or beat */
        ts_problem q = test_problem("megatron-gpt-529.6b", "a100-80g-dgx", g, 2520, 2048, 1);
        ts_search_result r;
        ts_status st = ts_search(&q, &o, &r);
        if (st == TS_OK) cr_expect_leq(pick->best.step_s, r.best[0].step_s * (1 + 1e-12), "%d GPUs", g);
        ts_search_result_free(&r);
        ts_error_clear();
    }
    ts_budget_result loose;
    bo.batch_tolerance = 0.05;
    cr_assert_eq(ts_budget_search(&pb, &o, NULL, &bo, &loose), TS_OK, "%s", ts_error_message());
    cr_expect_leq(loose.choices[0].key, pick->key * (1 + 1e-12));
    for (int i = 0; i < loose.n; i++) {
        const ts_budget_choice *c = &loose.choices[i];
        cr_expect(c->global_batch >= 2394 && c->global_batch <= 2646, "batch %lld", (long long)c->global_batch);
        cr_expect_eq(c->global_batch % ((int64_t)c->best.layout.dp * c->best.layout.mbs), 0);
        cr_expect_leq(c->gpus, 5128);
    }
    ts_budget_result_free(&loose);
    ts_budget_result_free(&br);
}
