/* Bands, ties, the memory line and --against for `tessera plan` (see ranking_explain.h). */
#include "reports/ranking_explain.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/paths.h"
#include "planner/plan_json.h"
#include "planner/robust.h"
#include "planner/stack_rules.h"

/* Reorders r's layouts (and their splits and bands) by `order` (never refined ones: see
 * ts_ranking_bands). */
static ts_status permute(ts_ranking *r, const int *order) {
    int n = r->search.n_best;
    ts_status res = TS_OK;
    ts_eval *e = malloc((size_t)n * sizeof *e);
    ts_band *b = malloc((size_t)n * sizeof *b);
    ts_split *sp = r->search.splits ? malloc((size_t)n * sizeof *sp) : NULL;
    TS_ALLOC_GOTO(e, res, exit);
    TS_ALLOC_GOTO(b, res, exit);
    if (r->search.splits && !sp) {
        res = TS_FAIL(TS_ERR_NOMEM, "out of memory reordering %d layouts", n);
        goto exit;
    }
    for (int i = 0; i < n; i++) {
        e[i] = r->search.best[order[i]];
        b[i] = r->bands[order[i]];
        if (sp) sp[i] = r->search.splits[order[i]];
    }
    memcpy(r->search.best, e, (size_t)n * sizeof *e);
    memcpy(r->bands, b, (size_t)n * sizeof *b);
    if (sp) memcpy(r->search.splits, sp, (size_t)n * sizeof *sp);
exit:
    free(e);
    free(b);
    free(sp);
    return res;
}

#define TS_TIE_POOL 200 /* layouts of the plain search a tie may draw from */

static void bands_dir(const ts_ranking_opts *o, char *buf, size_t cap) {
    if (o->bands_dir) snprintf(buf, cap, "%s", o->bands_dir);
    else snprintf(buf, cap, "%s/validation/published", ts_data_dir());
}

/* The plain search's best TS_TIE_POOL layouts, the candidates of a tie; none when no even layout
 * exists under the pins (the ranking's come from uneven stages). */
static ts_status pool_search(const ts_problem *pb, const ts_search_opts *so, ts_search_result *pool) {
    ts_search_opts po = *so;
    po.top_k = TS_TIE_POOL > so->top_k ? TS_TIE_POOL : so->top_k;
    ts_status res = ts_search(pb, &po, pool);
    if (res == TS_ERR_INPUT || res == TS_ERR_INFEASIBLE) {
        ts_error_clear();
        ts_search_result_free(pool);
        return TS_OK;
    }
    if (res != TS_OK) ts_search_result_free(pool);
    return res;
}

/* The order cannot change (nothing to reorder but r's one layout): the pool is empty or holds
 * that layout alone. */
static int order_fixed(const ts_ranking *r, const ts_search_result *pool) {
    if (r->search.n_best > 1 || pool->n_best > 1) return 0;
    if (pool->n_best == 0 || r->search.n_best == 0) return 1;
    char x[256], y[256];
    ts_layout_format(&pool->best[0].layout, x, sizeof x);
    ts_layout_format(&r->search.best[0].layout, y, sizeof y);
    return strcmp(x, y) == 0;
}

/* Layouts as text, sorted for lookup: a ranking and the tie's pool hold up to --top of them
 * each, so finding one in the other must not cost a pass over it. */
enum { LAYOUT_TEXT = 256 };
typedef struct {
    char (*text)[LAYOUT_TEXT]; /* (n) in the layouts' order */
    const char **sorted;        /* (n) into text, ascending */
    int n;
} layout_set;

static int text_cmp(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static void layout_set_free(layout_set *s) {
    free(s->text);
    free(s->sorted);
    *s = (layout_set){0};
}

static ts_status layout_set_init(layout_set *s, const ts_eval *e, int n) {
    *s = (layout_set){.n = n};
    s->text = malloc((size_t)(n > 0 ? n : 1) * sizeof *s->text);
    s->sorted = malloc((size_t)(n > 0 ? n : 1) * sizeof *s->sorted);
    if (!s->text || !s->sorted) {
        layout_set_free(s);
        return TS_FAIL(TS_ERR_NOMEM, "out of memory comparing %d layouts", n);
    }
    for (int i = 0; i < n; i++) {
        ts_layout_format(&e[i].layout, s->text[i], sizeof s->text[i]);
        s->sorted[i] = s->text[i];
    }
    qsort(s->sorted, (size_t)n, sizeof *s->sorted, text_cmp);
    return TS_OK;
}

static int layout_set_has(const layout_set *s, const char *text) {
    return s->n > 0 && bsearch(&text, s->sorted, (size_t)s->n, sizeof *s->sorted, text_cmp) != NULL;
}

/* Appends to r the pool's layouts `add` marks, with their bands (even splits). */
static ts_status append_ties(ts_ranking *r, const ts_search_result *pool, const uint8_t *add, const ts_band *bands,
                             int extra) {
    int n = r->search.n_best;
    if (extra == 0) return TS_OK;
    ts_eval *best = realloc(r->search.best, (size_t)(n + extra) * sizeof *best);
    if (best) r->search.best = best;
    ts_band *b = realloc(r->bands, (size_t)(n + extra) * sizeof *b);
    if (b) r->bands = b;
    ts_split *splits = r->search.splits ? realloc(r->search.splits, (size_t)(n + extra) * sizeof *splits) : NULL;
    if (splits) r->search.splits = splits;
    if (!best || !b || (r->search.splits && !splits)) return TS_FAIL(TS_ERR_NOMEM, "out of memory for the tie's layouts");
    for (int i = 0, k = n; i < pool->n_best; i++) {
        if (!add[i]) continue;
        r->search.best[k] = pool->best[i];
        r->bands[k] = bands[i];
        if (splits) memset(&splits[k], 0, sizeof *splits); /* pp = 0: the even split */
        k++;
    }
    r->search.n_best = n + extra;
    return TS_OK;
}

/* The layouts of the pool whose bands overlap the fastest's and that r lacks, appended to r with
 * their bands (even splits): a robust layout a little slower than the fastest ten is still in
 * the tie. r->pool counts the layouts the tie is drawn from: the pool's and r's it lacks (uneven
 * splits, layouts past the pool's size). */
static ts_status add_pool_ties(const ts_problem *pb, const ts_search_result *pool, ts_ranking *r) {
    int n = r->search.n_best, extra = 0, beyond = 0;
    layout_set ranked = {0}, pooled = {0};
    uint8_t *add = calloc((size_t)(pool->n_best > 0 ? pool->n_best : 1), sizeof *add);
    ts_band *bands = malloc((size_t)(pool->n_best > 0 ? pool->n_best : 1) * sizeof *bands);
    ts_status res = TS_OK;
    TS_ALLOC_GOTO(add, res, exit);
    TS_ALLOC_GOTO(bands, res, exit);
    TS_CHECK_GOTO(layout_set_init(&ranked, r->search.best, n), res, exit);
    TS_CHECK_GOTO(layout_set_init(&pooled, pool->best, pool->n_best), res, exit);
    for (int i = 0; i < pool->n_best; i++) {
        ts_band_of(&r->stats, pb, &pool->best[i].layout, pool->best[i].step_s, &bands[i]);
        add[i] = ts_bands_overlap(&r->bands[0], &bands[i]) && !layout_set_has(&ranked, pooled.text[i]);
        extra += add[i];
    }
    for (int j = 0; j < n; j++)
        beyond += (r->search.splits && r->search.splits[j].pp > 0) || !layout_set_has(&pooled, ranked.text[j]);
    r->pool = pool->n_best + beyond;
    res = append_ties(r, pool, add, bands, extra);
exit:
    layout_set_free(&ranked);
    layout_set_free(&pooled);
    free(add);
    free(bands);
    return res;
}

/* Keeps the first `keep` layouts (their splits with them). */
static void truncate_to(ts_ranking *r, int keep) {
    for (int i = keep; i < r->search.n_best; i++)
        if (r->search.splits && r->search.splits[i].pp > 0) ts_split_free(&r->search.splits[i]);
    if (r->search.n_best > keep) r->search.n_best = keep;
}

/* r's layouts (the first n and the pool's ties after them) in robust order, cut back to n. */
static ts_status robust_order(const ts_problem *pb, int n, ts_ranking *r) {
    int total = r->search.n_best;
    int *order = malloc((size_t)total * sizeof *order);
    if (!order) return TS_FAIL(TS_ERR_NOMEM, "out of memory for %d layouts", total);
    ts_status res = ts_robust_order(pb, r->search.best, r->bands, total, order, &r->tied_pool);
    r->fastest = -1;
    for (int i = 0; res == TS_OK && i < n; i++)
        if (order[i] == 0) r->fastest = i;
    if (res == TS_OK) res = permute(r, order);
    free(order);
    truncate_to(r, n);
    r->tied = r->tied_pool < n ? r->tied_pool : n;
    return res;
}

int ts_ranking_reorders(const ts_search_opts *so, const ts_ranking_opts *o) {
    return so->objective != TS_OBJ_MEMORY && o->refine <= 0;
}

ts_status ts_ranking_bands(const ts_problem *pb, const ts_search_opts *so, const ts_ranking_opts *o, ts_ranking *r) {
    char dir[4096];
    int n = r->search.n_best, keep = n < so->top_k ? n : so->top_k;
    /* Refined layouts are ordered by simulation; a tie then speaks of the closed form's bands. */
    int reorder = ts_ranking_reorders(so, o) && n >= 1 && !r->sim_step_s;
    ts_search_result pool = {0};
    if (reorder) TS_CHECK(pool_search(pb, so, &pool));
    /* The bands predict every published run (planner/bands.h): skipped when nobody reads them. */
    if (o->order_only && (!reorder || order_fixed(r, &pool))) {
        ts_search_result_free(&pool);
        truncate_to(r, keep);
        return TS_OK;
    }
    ts_status res = TS_OK;
    bands_dir(o, dir, sizeof dir);
    if (o->stats) r->stats = *o->stats;
    else TS_CHECK_GOTO(ts_bands_compute(dir, pb->train.stack.name, pb->model.moe.experts > 0, &r->stats), res, exit);
    r->bands = calloc((size_t)(n > 0 ? n : 1), sizeof *r->bands);
    if (!r->bands) {
        res = TS_FAIL(TS_ERR_NOMEM, "out of memory for %d bands", n);
        goto exit;
    }
    for (int i = 0; i < n; i++)
        ts_band_of(&r->stats, pb, &r->search.best[i].layout, r->search.best[i].step_s, &r->bands[i]);
    r->tied = r->tied_pool = n > 0;
    r->fastest = 0;
    if (!reorder) goto exit;
    r->fastest_eval = r->search.best[0];
    res = add_pool_ties(pb, &pool, r);
    if (res == TS_OK) res = robust_order(pb, keep, r);
exit:
    ts_search_result_free(&pool);
    return res;
}

ts_status ts_ranking_against(const ts_problem *pb, const ts_search_opts *so, const ts_ranking_opts *o, ts_ranking *r) {
    if (!o->against) return TS_OK;
    ts_search_opts ao = *so;
    ao.top_k = 1;
    TS_CHECK(ts_pins_parse("--against", o->against, &ao.pins));
    ts_search_result res;
    ts_status st = ts_search(pb, &ao, &res);
    if (st == TS_OK) {
        r->against = res.best[0];
        r->has_against = 1;
        ts_band_of(&r->stats, pb, &r->against.layout, r->against.step_s, &r->against_band);
    }
    ts_search_result_free(&res);
    TS_CHECK_CTX(st, "--against %s", o->against);
    return TS_OK;
}

void ts_ranking_against_text(const ts_ranking *r, char *buf, size_t cap) {
    buf[0] = '\0';
    if (!r->has_against || r->search.n_best == 0) return;
    const ts_eval *a = &r->search.best[0], *b = &r->against;
    const ts_time_split *x = &a->time, *y = &b->time;
    const struct {
        const char *name;
        double d;
    } terms[] = {{"compute", x->compute - y->compute}, {"TP comm", x->tp_comm - y->tp_comm},
                 {"CP comm", x->cp_comm - y->cp_comm}, {"EP comm", x->ep_comm - y->ep_comm},
                 {"PP comm", x->pp_comm - y->pp_comm}, {"bubble", x->pp_bubble - y->pp_bubble},
                 {"DP comm", x->dp_comm - y->dp_comm}, {"optimizer", x->optimizer - y->optimizer}};
    size_t used = 0;
    for (size_t i = 0; i < sizeof terms / sizeof terms[0]; i++) {
        /* terms under a thousandth of the step say nothing */
        if (fabs(terms[i].d) < 1e-3 * a->step_s) continue;
        used += (size_t)snprintf(buf + used, used < cap ? cap - used : 0, "%s%s %+.2f s", used ? ", " : "",
                                 terms[i].name, terms[i].d);
    }
    const char *verdict = ts_bands_overlap(&r->bands[0], &r->against_band) ? "bands overlap: a tie"
                          : a->step_s < b->step_s ? "the pick is faster beyond the bands"
                                                   : "the named layout is faster beyond the bands";
    snprintf(buf + (used < cap ? used : cap - 1), used < cap ? cap - used : 1, "%smemory %+.1f GB; %s",
             used ? ", " : "", (a->mem.total - b->mem.total) / 1e9, verdict);
}

void ts_ranking_tie_text(const ts_problem *pb, const ts_ranking *r, char *buf, size_t cap) {
    buf[0] = '\0';
    if (r->tied_pool < 2 || r->search.n_best == 0) return;
    const ts_eval *b = &r->search.best[0];
    char exotic[256], text[256];
    int n_exotic = ts_exotic_dims(pb, &b->layout, exotic, sizeof exotic);
    int n = snprintf(buf, cap, "%d of the best %d layouts overlap the fastest's band, so the prediction cannot order "
                               "them; the tie goes to the most robust (not tight on memory, fewest exotic dimensions: "
                               "cp>1, tp=1 at %.0fB+%s parameters, vpp>%d), then the fastest: rank 1 is %s%s%s",
                     r->tied_pool, r->pool, TS_EXOTIC_TP1_PARAMS / 1e9, pb->model.moe.experts > 0 ? " active" : "",
                     TS_EXOTIC_VPP,
                     ts_mem_tight(pb, b->mem.total) ? "tight, " : "not tight, ",
                     n_exotic ? "exotic in " : "with no exotic dimension", exotic);
    if (r->fastest == 0 || n < 0 || (size_t)n >= cap) return;
    const ts_eval *f = &r->fastest_eval;
    ts_exotic_dims(pb, &f->layout, exotic, sizeof exotic);
    ts_layout_format(&f->layout, text, sizeof text);
    char where[48] = "not among the rows shown";
    if (r->fastest > 0) snprintf(where, sizeof where, "rank %d", r->fastest + 1);
    snprintf(buf + n, cap - (size_t)n, "; the fastest predicted, %s (%s, %.1f%% faster), is %s%s%s", text, where,
             100 * (1 - f->step_s / b->step_s), ts_mem_tight(pb, f->mem.total) ? "tight" : "not tight",
             exotic[0] ? " and exotic in " : "", exotic);
}

/* "dense -6.5%..+0.3% (13 runs)" for each family with runs the plan's GPU takes (planner/bands.h),
 * into buf; then the GPU they ran on, or, when none ran on the plan's, which GPUs they were on. */
static void families_text(const ts_bands *b, const ts_system *sys, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    ts_band_gpu runs;
    unsigned gpus;
    int which = ts_bands_runs_for(b, sys, &runs, &gpus);
    for (int f = 0; f < TS_FAM_COUNT; f++) {
        const ts_band_stat *s = &runs.fam[f];
        if (s->n == 0 || used >= cap) continue;
        used += (size_t)snprintf(buf + used, cap - used, "%s%s %+.1f%%..%+.1f%% (%d runs)", used ? ", " : "",
                                 ts_family_names[f], 100 * s->err_min, 100 * s->err_max, s->n);
    }
    if (!used) {
        snprintf(buf, cap, "no published run on this stack: every family takes the widest band of all "
                           "%d runs", b->all.n);
        return;
    }
    if (used >= cap) return;
    if (which == 1) {
        snprintf(buf + used, cap - used, ", of the runs on the %s", sys->gpu_name);
        return;
    }
    used += (size_t)snprintf(buf + used, cap - used, "; no run on the %s: the band is that of runs on ", sys->gpu_name);
    if (used < cap) ts_bands_gpus_text(b, gpus, buf + used, cap - used);
    used = strlen(buf);
    if (which == 2 && used < cap) snprintf(buf + used, cap - used, ", whose GEMM efficiency curve it shares");
}

void ts_ranking_print_context(FILE *f, const ts_problem *pb, const ts_ranking *r) {
    const ts_stack *st = &pb->train.stack;
    fprintf(f, "# stack: %s%s%s\n", st->name, st->description[0] ? " — " : "", st->description);
    fprintf(f, "# memory line: %.1f GB per GPU = %.1f GB usable less %.1f GB headroom (--mem-headroom); no pick "
               "above it; tight: within %.0f%% of it\n",
            pb->usable_bytes / 1e9, (pb->usable_bytes + pb->headroom_bytes) / 1e9, pb->headroom_bytes / 1e9,
            100 * TS_MEM_TIGHT_FRAC);
    char fam[768];
    families_text(&r->stats, &pb->sys, fam, sizeof fam);
    fprintf(f, "# band: the measured step is likely within it, from this code's errors on published runs with %s: %s\n",
            st->name, fam);
}

/* Per layout: "band_s", "tight", "tie", "exotic". */
static ts_status layouts_json(const ts_problem *pb, const ts_ranking *r, cJSON *root) {
    ts_status res = TS_OK;
    cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "layouts");
    for (int i = 0; i < r->search.n_best; i++) {
        cJSON *o = cJSON_GetArrayItem(arr, i), *band = NULL;
        char exotic[256];
        ts_exotic_dims(pb, &r->search.best[i].layout, exotic, sizeof exotic);
        TS_CJSON_GOTO(band = cJSON_AddArrayToObject(o, "band_s"), res, exit);
        cJSON *lo = cJSON_CreateNumber(r->bands[i].lo_s), *hi = cJSON_CreateNumber(r->bands[i].hi_s);
        if (lo) cJSON_AddItemToArray(band, lo);
        if (hi) cJSON_AddItemToArray(band, hi);
        TS_CJSON_GOTO(lo && hi ? band : NULL, res, exit);
        TS_CJSON_GOTO(cJSON_AddBoolToObject(o, "tight", ts_mem_tight(pb, r->search.best[i].mem.total)), res, exit);
        TS_CJSON_GOTO(cJSON_AddBoolToObject(o, "tie", i < r->tied && r->tied > 1), res, exit);
        TS_CJSON_GOTO(cJSON_AddStringToObject(o, "exotic", exotic), res, exit);
    }
exit:
    return res;
}

ts_status ts_ranking_explain_json(const ts_problem *pb, const ts_ranking *r, cJSON *root) {
    ts_status res = TS_OK;
    char text[1024];
    TS_CHECK(layouts_json(pb, r, root));
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "tied", r->tied_pool), res, exit);
    ts_ranking_tie_text(pb, r, text, sizeof text);
    TS_CJSON_GOTO(cJSON_AddStringToObject(root, "tie", text), res, exit);
    /* the GPUs of the published runs the bands took (planner/bands.h), and whether the plan's is one */
    cJSON *gpus = cJSON_AddArrayToObject(root, "band_gpus");
    TS_CJSON_GOTO(gpus, res, exit);
    ts_band_gpu runs;
    unsigned took;
    ts_bands_runs_for(&r->stats, &pb->sys, &runs, &took);
    for (int i = 0; i < r->stats.n_gpus; i++) {
        if (took && !(took & (1u << i))) continue;
        cJSON *g = cJSON_CreateString(r->stats.gpus[i].name);
        TS_CJSON_GOTO(g, res, exit);
        cJSON_AddItemToArray(gpus, g);
    }
    TS_CJSON_GOTO(cJSON_AddBoolToObject(root, "band_measured_on_gpu", ts_bands_measured_on(&r->stats, pb->sys.gpu_name)),
                  res, exit);
    if (r->has_against) {
        cJSON *a = cJSON_CreateObject(), *e = ts_eval_to_json(&r->against, 0);
        if (a) cJSON_AddItemToObject(root, "against", a);
        if (a && e) cJSON_AddItemToObject(a, "layout", e);
        else cJSON_Delete(e);
        TS_CJSON_GOTO(a && e ? a : NULL, res, exit);
        ts_ranking_against_text(r, text, sizeof text);
        TS_CJSON_GOTO(cJSON_AddStringToObject(a, "text", text), res, exit);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(a, "band_lo_s", r->against_band.lo_s), res, exit);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(a, "band_hi_s", r->against_band.hi_s), res, exit);
    }
exit:
    return res;
}
