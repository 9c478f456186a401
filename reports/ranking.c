/* The answer of `tessera plan` (reports/ranking.h): search, refine by simulation, and the table
 * and JSON of the outcome. */
#include "reports/ranking.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/json.h"
#include "planner/plan_json.h"
#include "planner/stack_rules.h"
#include "reports/ranking_explain.h"
#include "sim/engine.h"

void ts_ranking_opts_defaults(ts_ranking_opts *o) {
    memset(o, 0, sizeof *o);
    ts_partition_opts_defaults(&o->partition);
}

/* A layout's simulated step time and its rank by the closed form. */
typedef struct {
    double sim_step_s;
    int index;
} sim_rank;

static int sim_rank_cmp(const void *a, const void *b) {
    const sim_rank *x = a, *y = b;
    if (x->sim_step_s != y->sim_step_s) return x->sim_step_s < y->sim_step_s ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

ts_status ts_ranking_refine(const ts_problem *pb, ts_search_result *r, int k, double *sim_step_s) {
    ts_status res = TS_OK;
    sim_rank *order = calloc((size_t)k, sizeof *order);
    ts_eval *evals = calloc((size_t)k, sizeof *evals);
    TS_ALLOC_GOTO(order, res, exit);
    TS_ALLOC_GOTO(evals, res, exit);
    ts_sim_opts so = {0};
    for (int i = 0; i < k; i++) {
        ts_program prog;
        ts_sim_result sim;
        ts_program_opts po = ts_program_opts_of(r->splits ? &r->splits[i] : NULL); /* uneven stages */
        TS_CHECK_GOTO(ts_program_build(pb, &r->best[i].layout, &po, &prog), res, exit);
        res = ts_simulate(pb, &prog, &so, &sim);
        order[i] = (sim_rank){sim.step_s, i};
        ts_sim_result_free(&sim);
        ts_program_free(&prog);
        if (res != TS_OK) goto exit;
    }
    qsort(order, (size_t)k, sizeof *order, sim_rank_cmp);
    for (int i = 0; i < k; i++) evals[i] = r->best[order[i].index];
    for (int i = 0; i < k; i++) {
        r->best[i] = evals[i];
        sim_step_s[i] = order[i].sim_step_s;
    }
    if (r->splits) { /* uneven stages follow their layouts */
        ts_split *moved = calloc((size_t)k, sizeof *moved);
        TS_ALLOC_GOTO(moved, res, exit);
        for (int i = 0; i < k; i++) moved[i] = r->splits[order[i].index];
        memcpy(r->splits, moved, (size_t)k * sizeof *moved);
        free(moved);
    }
exit:
    free(order);
    free(evals);
    return res;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}


/* Ranked layouts a tie may draw from beyond the caller's top_k (ts_ranking_bands cuts back to
 * it): which layout ranks first must not depend on how many rows are asked for, and uneven splits
 * exist only in this ranking, not in the tie's pool of even layouts. */
#define TS_TIE_RANKED 16

ts_status ts_ranking_make(const ts_problem *pb, const ts_search_opts *so, const ts_ranking_opts *o, ts_ranking *out) {
    memset(out, 0, sizeof *out);
    ts_search_opts wide = *so;
    if (ts_ranking_reorders(so, o) && wide.top_k < TS_TIE_RANKED) wide.top_k = TS_TIE_RANKED;
    ts_status res = ts_search_partitioned(pb, &wide, &o->partition, &out->search);
    if (res != TS_OK) {
        ts_search_result_free(&out->search);
        memset(out, 0, sizeof *out);
        return res;
    }
    if (o->refine > 0) {
        out->refined = o->refine < out->search.n_best ? o->refine : out->search.n_best;
        double t0 = now_s();
        out->sim_step_s = calloc((size_t)(out->refined > 0 ? out->refined : 1), sizeof *out->sim_step_s);
        if (out->sim_step_s == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for --refine");
        TS_CHECK(ts_ranking_refine(pb, &out->search, out->refined, out->sim_step_s));
        out->refine_s = now_s() - t0;
    }
    TS_CHECK(ts_ranking_bands(pb, so, o, out));
    return ts_ranking_against(pb, so, o, out);
}

void ts_ranking_free(ts_ranking *r) {
    ts_search_result_free(&r->search);
    free(r->sim_step_s);
    r->sim_step_s = NULL;
    free(r->bands);
    r->bands = NULL;
}

/* The stage partitioning's settings in the plan JSON's request: "partition",
 * "partition_objective", "partition_node_limit". */
static ts_status add_partition_json(cJSON *root, const ts_partition_opts *po) {
    ts_status res = TS_OK;
    cJSON *req = cJSON_GetObjectItemCaseSensitive(root, "request");
    TS_CJSON_GOTO(cJSON_AddStringToObject(req, "partition", ts_partition_mode_names[po->mode]), res, exit);
    TS_CJSON_GOTO(cJSON_AddStringToObject(req, "partition_objective", ts_partition_objective_names[po->objective]),
                  res, exit);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(req, "partition_node_limit", (double)po->node_limit), res, exit);
exit:
    return res;
}

/* Adds the simulated step times to the plan JSON: "sim_step_s" on the refined layouts and
 * "refine" in the request. */
static ts_status add_refined_json(cJSON *root, int refined, const double *sim_step_s) {
    ts_status res = TS_OK;
    cJSON *req = cJSON_GetObjectItemCaseSensitive(root, "request");
    cJSON *layouts = cJSON_GetObjectItemCaseSensitive(root, "layouts");
    TS_CJSON_GOTO(cJSON_AddNumberToObject(req, "refine", refined), res, exit);
    for (int i = 0; i < refined; i++)
        TS_CJSON_GOTO(cJSON_AddNumberToObject(cJSON_GetArrayItem(layouts, i), "sim_step_s", sim_step_s[i]),
                      res, exit);
exit:
    return res;
}

ts_status ts_ranking_json(const ts_problem *pb, const ts_search_opts *so, const ts_ranking_opts *o,
                          const ts_ranking *r, cJSON **out) {
    cJSON *root = NULL;
    ts_status res = ts_plan_to_json(pb, so, o->fix, &r->search, &root);
    if (res == TS_OK) res = add_partition_json(root, &o->partition);
    if (res == TS_OK && r->sim_step_s) res = add_refined_json(root, r->refined, r->sim_step_s);
    if (res == TS_OK && r->bands) res = ts_ranking_explain_json(pb, r, root);
    if (res != TS_OK) {
        cJSON_Delete(root);
        return res;
    }
    *out = root;
    return TS_OK;
}

/* The '#' lines above the table, its header and its units row. */
static void print_head(FILE *f, const ts_problem *pb, const ts_ranking *rk) {
    const ts_search_result *r = &rk->search;
    const double *sim_step_s = rk->sim_step_s;
    const ts_system *s = &pb->sys;
    char mods[200];
    fprintf(f, "# tessera plan: %s on %d × %s (%s, %.0f GB, %.1f GB usable), batch %lld × %lld tokens, %s%s%s%s%s\n",
              pb->model.name, pb->gpus, s->name, s->gpu_name, s->hbm_bytes / 1e9, pb->usable_bytes / 1e9,
              (long long)pb->train.global_batch, (long long)pb->train.seq,
              ts_dtype_names[pb->train.dtype], pb->train.flash_attention ? ", flash attention" : "",
              pb->train.cp_kind != TS_CP_RING ? ", CP " : "",
              pb->train.cp_kind != TS_CP_RING ? ts_cp_kind_names[pb->train.cp_kind] : "",
              ts_recompute_modules_said(&pb->train, mods, sizeof mods));
    fprintf(f, "# parameters: %.2fB total, %.2fB active per token\n", pb->params.total / 1e9, pb->params.active / 1e9);
    ts_ranking_print_context(f, pb, rk);
    fprintf(f, "# searched %lld layouts (%lld evaluated, %lld fit) in %.3f s\n", (long long)r->searched,
              (long long)r->evaluated, (long long)r->feasible, r->search_s);
    if (r->step_cap_s > 0)
        fprintf(f, "# objective memory: the least memory among layouts at most %.3g× the fastest step (%.3f s), "
                   "that is within %.3f s (--max-slowdown)\n", r->step_cap_s / r->fastest_step_s,
                r->fastest_step_s, r->step_cap_s);
    if (r->partitioned)
        fprintf(f, "# partitioned: %d layouts re-split into uneven stages with a recompute policy each (GLPK) in %.3f s\n",
                  r->partitioned, r->partition_s);
    if (r->partition_errors)
        fprintf(f, "# partition: GLPK failed on %d layouts, which keep their even split: %s\n", r->partition_errors,
                  r->partition_error);
    if (sim_step_s)
        fprintf(f, "# refined: simulated the best %d (one rank per stage) in %.3f s, re-ranked by simulated step time\n",
                  rk->refined, rk->refine_s);
    fprintf(f, "#%4s %4s %3s %3s %3s %3s %2s %4s %3s %4s %3s %-11s %-9s | %6s %6s %5s %6s %6s %5s | %7s "
              "%15s %7s %6s %6s %6s %6s %6s %6s %6s | %9s %7s %5s | %-9s%s\n",
              "rank", "dp", "tp", "pp", "cp", "ep", "sp", "zero", "mbs", "mb", "vpp", "schedule",
              "recompute", "mem", "weight", "grad", "optim", "activ", "buf", "step", "band", "compute", "tp",
              "cp", "ep", "pp", "bubble", "dp", "optim", "tokens/s", "TFLOP/s", "MFU", "note",
              sim_step_s ? " |      sim      Δ" : "");
    fprintf(f, "#%4s %4s %3s %3s %3s %3s %2s %4s %3s %4s %3s %-11s %-9s | %6s %6s %5s %6s %6s %5s | %7s "
              "%15s %7s %6s %6s %6s %6s %6s %6s %6s | %9s %7s %5s | %-9s%s\n",
              "", "", "", "", "", "", "", "", "", "", "", "", "", "GB", "GB", "GB", "GB", "GB", "GB", "s", "s",
              "s", "s", "s", "s", "s", "s", "s", "s", "", "/GPU", "%", "", sim_step_s ? " |        s      %" : "");
}

/* One row per layout; the simulated step and its difference from the closed form when refined. */
static void print_rows(FILE *f, const ts_problem *pb, const ts_ranking *rk) {
    const ts_search_result *r = &rk->search;
    const double *sim_step_s = rk->sim_step_s;
    int refined = rk->refined;
    for (int i = 0; i < r->n_best; i++) {
        const ts_eval *e = &r->best[i];
        const ts_layout *l = &e->layout;
        const ts_time_split *t = &e->time;
        char band[32], note[32] = "";
        snprintf(band, sizeof band, "%.3f-%.3f", rk->bands[i].lo_s, rk->bands[i].hi_s);
        /* the table has no etp column: rows that split experts apart from TP say so here */
        const char *words[] = {rk->tied > 1 && i < rk->tied ? "tie" : NULL,
                               ts_mem_tight(pb, e->mem.total) ? "tight" : NULL,
                               ts_layout_etp(l) != l->tp ? "etp=1" : NULL};
        for (size_t w = 0, at = 0; w < sizeof words / sizeof words[0]; w++)
            if (words[w]) at += (size_t)snprintf(note + at, sizeof note - at, "%s%s", at ? "," : "", words[w]);
        fprintf(f, " %4d %4d %3d %3d %3d %3d %2d %4d %3d %4d %3d %-11s %-9s | %6.1f %6.1f %5.1f %6.1f %6.1f "
                  "%5.1f | %7.3f %15s %7.3f %6.3f %6.3f %6.3f %6.3f %6.3f %6.3f %6.3f | %9.0f %7.1f %5.1f | %-9s",
                  i + 1, l->dp, l->tp, l->pp, l->cp, l->ep, l->sp, l->zero, l->mbs, l->microbatches,
                  l->vpp, ts_schedule_names[l->schedule], ts_recompute_names[l->recompute],
                  e->mem.total / 1e9, e->mem.weights / 1e9, e->mem.grads / 1e9, e->mem.optimizer / 1e9,
                  e->mem.activations / 1e9, e->mem.buffers / 1e9, e->step_s, band, t->compute, t->tp_comm,
                  t->cp_comm, t->ep_comm, t->pp_comm, t->pp_bubble, t->dp_comm, t->optimizer,
                  e->tokens_per_s, e->tflops_per_gpu, 100 * e->mfu, note);
        if (sim_step_s && i < refined)
            fprintf(f, " | %8.3f %+6.1f", sim_step_s[i], 100 * (sim_step_s[i] - e->step_s) / e->step_s);
        fputc('\n', f);
    }
}

/* The best layout, and each uneven split. */
static void print_tail(FILE *f, const ts_problem *pb, const ts_partition_opts *po, const ts_ranking *rk) {
    const ts_search_result *r = &rk->search;
    const double *sim_step_s = rk->sim_step_s;
    if (r->n_best > 0) {
        const ts_eval *b = &r->best[0];
        char text[256], sim[64] = "";
        ts_layout_format(&b->layout, text, sizeof text);
        if (sim_step_s) snprintf(sim, sizeof sim, " (simulated %.2f)", sim_step_s[0]);
        char tie[1024], against[1024];
        ts_ranking_tie_text(pb, rk, tie, sizeof tie);
        if (tie[0]) fprintf(f, "# tie: %s\n", tie);
        fprintf(f, "# best: %s — %.2f s/step (likely %.2f-%.2f)%s, %.0f tokens/s, %.0f TFLOP/s/GPU (MFU %.1f%%), "
                   "%.1f of %.1f GB/GPU%s\n",
                  text, b->step_s, rk->bands[0].lo_s, rk->bands[0].hi_s, sim, b->tokens_per_s, b->tflops_per_gpu,
                  100 * b->mfu, b->mem.total / 1e9, pb->usable_bytes / 1e9,
                  ts_mem_tight(pb, b->mem.total) ? " (tight)" : "");
        if (rk->has_against) {
            ts_layout_format(&rk->against.layout, text, sizeof text);
            ts_ranking_against_text(rk, against, sizeof against);
            fprintf(f, "# against %s — %.2f s/step (likely %.2f-%.2f), %.1f GB/GPU\n# best minus against: %s\n",
                    text, rk->against.step_s, rk->against_band.lo_s, rk->against_band.hi_s,
                    rk->against.mem.total / 1e9, against);
        }
    }
    for (int i = 0; r->splits && i < r->n_best; i++) {
        char text[1024];
        if (r->splits[i].pp == 0) continue;
        const ts_split *sp = &r->splits[i];
        ts_split_format(sp, text, sizeof text);
        fprintf(f, "# split of rank %d (layers per stage, chunks joined by +; recompute by stage): %s", i + 1, text);
        if (sp->status == TS_PART_NODE_LIMIT) /* GLPK's incumbent: say how far from proven it may be */
            fprintf(f, " (node-limit: not proven optimal; %s %.4g s, bound %.4g s)",
                      po->objective == TS_PART_OBJ_STEP ? "step estimate" : "slowest stage per micro-batch",
                      sp->objective_s, sp->bound_s);
        fputc('\n', f);
    }
}

ts_status ts_ranking_print(FILE *f, const ts_problem *pb, const ts_ranking_opts *o, const ts_ranking *r) {
    print_head(f, pb, r);
    print_rows(f, pb, r);
    print_tail(f, pb, &o->partition, r);
    return TS_OK;
}
