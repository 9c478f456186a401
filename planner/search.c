/* Exhaustive layout search with a provably safe bound (see search.h). */
#include "planner/search.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "planner/partition.h"
#include "program/schedule.h"
#include "planner/stack_rules.h"
#include "planner/stages.h"

const char *const ts_objective_names[] = {"time", "memory", "cost", NULL};

void ts_search_opts_defaults(ts_search_opts *o) {
    *o = (ts_search_opts){.top_k = 10, .objective = TS_OBJ_TIME, .prune = 1, .max_slowdown = TS_DEFAULT_MAX_SLOWDOWN};
}

double ts_objective_value(const ts_problem *pb, ts_objective obj, const ts_eval *e) {
    switch (obj) {
    case TS_OBJ_MEMORY: return e->mem.total;
    case TS_OBJ_COST: return e->step_s * pb->gpus / ((double)pb->train.global_batch * pb->train.seq);
    default: return e->step_s;
    }
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Total order: objective, then memory, then the layout's fields, so results are deterministic. */
static int layout_cmp(const ts_layout *a, const ts_layout *b) {
    const int fa[] = {a->tp, a->pp, a->cp, a->ep, a->sp, a->zero, a->mbs, a->vpp, (int)a->schedule, (int)a->recompute};
    const int fb[] = {b->tp, b->pp, b->cp, b->ep, b->sp, b->zero, b->mbs, b->vpp, (int)b->schedule, (int)b->recompute};
    for (size_t i = 0; i < sizeof fa / sizeof fa[0]; i++)
        if (fa[i] != fb[i]) return fa[i] < fb[i] ? -1 : 1;
    return 0;
}

typedef struct {
    const ts_problem *pb;
    const ts_search_opts *opts;
    ts_search_result *out;
    double *keys; /* (top_k) objective values of out->best, a heap while the search runs */
    double *acts; /* (stages) scratch for ts_stages_run_acts */
    /* The divisors of every n in 1..layers (vpp candidates of n layers per stage), ascending:
     * div[div_first[n] .. div_first[n + 1]). */
    int *div_first, *div;
    int stop_at_first_fit;
    /* The (schedule, vpp) pairs and ZeRO stages of a (pp, micro-batches, dp·cp > 1), what
     * leaves() tries under every shard, ep and recompute policy alike: a direct-mapped cache of
     * LEAF_PLANS plans of room pairs each (see leaf_plan_of). */
    struct leaf_plan *plans;
    int plan_room;
    int dual; /* a schedule with mirrored stages (DualPipe) may be ranked: the bound takes its times */
} search_ctx;

#define LEAF_PLANS 256

/* What leaves() searches under one (pp, micro-batches, dp·cp > 1) once the stack accepts the
 * shape: the valid (schedule, vpp) pairs in search order and the valid ZeRO stages. */
typedef struct leaf_plan {
    int pp, microbatches, multi; /* the key; pp = 0: empty slot */
    int n_pairs, n_zero;
    int zeros[4];
    unsigned char *sched; /* (plan_room) */
    int *vpp;             /* (plan_room) */
} leaf_plan;

static int better(const search_ctx *c, double ka, const ts_eval *a, double kb, const ts_eval *b) {
    if (ka != kb) return ka < kb;
    if (a->mem.total != b->mem.total) return a->mem.total < b->mem.total;
    return layout_cmp(&a->layout, &b->layout) < 0;
    (void)c;
}

/* The kept layouts are a binary heap while the search runs, the worst kept at the root, so the
 * bar a layout must pass once top_k are kept is keys[0]; heap_sort orders them best first when
 * it ends. An entering layout costs O(log top_k), not the O(top_k) of a sorted array, which
 * --top 100000 made the whole search's cost. */
static int heap_worse(const search_ctx *c, int i, int j) { /* entry i ranks after entry j */
    return better(c, c->keys[j], &c->out->best[j], c->keys[i], &c->out->best[i]);
}

static void heap_swap(search_ctx *c, int i, int j) {
    ts_eval e = c->out->best[i];
    c->out->best[i] = c->out->best[j];
    c->out->best[j] = e;
    double k = c->keys[i];
    c->keys[i] = c->keys[j];
    c->keys[j] = k;
}

static void sift_up(search_ctx *c, int i) {
    while (i > 0 && heap_worse(c, i, (i - 1) / 2)) {
        heap_swap(c, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void sift_down(search_ctx *c, int i, int n) {
    for (;;) {
        int w = i, l = 2 * i + 1, r = l + 1;
        if (l < n && heap_worse(c, l, w)) w = l;
        if (r < n && heap_worse(c, r, w)) w = r;
        if (w == i) return;
        heap_swap(c, i, w);
        i = w;
    }
}

/* The heap, best first (the worst goes to the end, one at a time). */
static void heap_sort(search_ctx *c) {
    for (int n = c->out->n_best; n > 1; n--) {
        heap_swap(c, 0, n - 1);
        sift_down(c, 0, n - 1);
    }
}

/* Whether a layout with these step time and memory could enter the top k (ties resolved later
 * by offer on the full evaluation). */
static int may_enter(const search_ctx *c, const ts_eval *e) {
    if (c->out->n_best < c->opts->top_k) return 1;
    return ts_objective_value(c->pb, c->opts->objective, e) <= c->keys[0];
}

/* Keeps the best top_k (the heap above). */
static void offer(search_ctx *c, const ts_eval *e) {
    ts_search_result *r = c->out;
    double key = ts_objective_value(c->pb, c->opts->objective, e);
    if (r->n_best == c->opts->top_k) {
        if (!better(c, key, e, c->keys[0], &r->best[0])) return;
        r->best[0] = *e;
        c->keys[0] = key;
        sift_down(c, 0, r->n_best);
        return;
    }
    r->best[r->n_best] = *e;
    c->keys[r->n_best] = key;
    sift_up(c, r->n_best++);
}

/* A value of `field` is searched when pinned to it, or, unpinned, when it is canonical (not an
 * equivalent duplicate, see search.h). */
static int allowed(const ts_pins *p, ts_pin field, int value, int canonical) {
    if (p->mask & (1u << field)) return value == ts_layout_field(&p->value, field);
    return canonical;
}

/* The divisors of n in ascending order into out (room for `cap`); returns the count.
 * Trial division up to sqrt(n): a batch of 2^30 sequences costs 32768 steps, not 2^30. */
static int divisors_of(long long n, long long *out, int cap) {
    int lo = 0, hi = 0;
    for (long long d = 1; d * d <= n && lo + hi < cap; d++) {
        if (n % d) continue;
        out[lo++] = d;
        if (d != n / d && lo + hi < cap) out[cap - ++hi] = n / d;
    }
    for (int i = 0; i < hi; i++) out[lo + i] = out[cap - hi + i];
    return lo + hi;
}

/* The plan of l's (pp, micro-batches, dp·cp > 1): the schedule, vpp and ZeRO rules (problem.h,
 * stack_rules.h) depend on nothing else of the layout, so each plan is built once and serves
 * every shard, ep and recompute policy that shares them. */
static const leaf_plan *leaf_plan_of(search_ctx *c, ts_layout *l) {
    const ts_problem *pb = c->pb;
    const ts_pins *pins = &c->opts->pins;
    const ts_stack *stack = &pb->train.stack;
    int dpc = l->dp * l->cp, multi = dpc > 1;
    unsigned slot = ((unsigned)l->pp * 2654435761u ^ (unsigned)l->microbatches * 40503u ^ (unsigned)multi) %
                    LEAF_PLANS;
    leaf_plan *plan = &c->plans[slot];
    if (plan->pp == l->pp && plan->microbatches == l->microbatches && plan->multi == multi) return plan;
    plan->pp = l->pp;
    plan->microbatches = l->microbatches;
    plan->multi = multi;
    plan->n_pairs = plan->n_zero = 0;
    /* vpp candidates of the interleaved schedule: the divisors of the layers per stage (with
     * explicit splits, of ⌈layers/pp⌉ too: the fuller stages' chunks then hold equal layers). */
    int per_stage = pb->model.layers / l->pp, up = per_stage + (pb->model.layers % l->pp != 0);
    const int *vpps = c->div + c->div_first[per_stage], *vpps_up = c->div + c->div_first[up];
    int n_vpp = l->pp > 1 ? c->div_first[per_stage + 1] - c->div_first[per_stage] : 0;
    int n_up = l->pp > 1 && c->opts->explicit_splits && up != per_stage ? c->div_first[up + 1] - c->div_first[up] : 0;
    /* ZeRO stages searched here (the ZeRO rules do not depend on the schedule). */
    for (int z = 0; z <= 3; z++) {
        l->zero = z;
        if (allowed(pins, TS_PIN_ZERO, z, multi || z == 0) && !ts_zero_invalid(pb, l, NULL, 0) &&
            !ts_stack_refuses_zero(stack, l, pins->mask))
            plan->zeros[plan->n_zero++] = z;
    }
    for (int s = 0; s < TS_SCHED_COUNT; s++) {
        const ts_schedule_info *si = &ts_schedules[s];
        if (!allowed(pins, TS_PIN_SCHED, s, l->pp > 1 || s == TS_SCHED_1F1B)) continue;
        if (c->opts->schedules && !(c->opts->schedules & (1u << s)) && l->pp > 1) continue;
        if (si->opt_in && !(c->opts->schedules & (1u << s)) && !(pins->mask & (1u << TS_PIN_SCHED)) &&
            !(pb->train.stack.schedules & (1u << s)))
            continue; /* asked for, pinned, or a stack that names it */
        l->schedule = (ts_schedule)s;
        if (ts_stack_refuses_schedule(stack, l, pins->mask)) continue;
        int n_v = si->interleaved ? n_vpp + n_up : 1;
        for (int iv = si->interleaved ? 1 : 0; iv < n_v; iv++) { /* vpps[0] = 1 */
            int v = si->fixed_vpp ? si->fixed_vpp : !si->interleaved ? 1 : iv < n_vpp ? vpps[iv] : vpps_up[iv - n_vpp];
            if (si->interleaved && iv >= n_vpp && per_stage % v == 0) continue; /* a divisor of both */
            if (!allowed(pins, TS_PIN_VPP, v, 1)) continue;
            l->vpp = v;
            if (ts_schedule_invalid(pb, l, c->opts->explicit_splits, NULL, 0)) continue;
            plan->sched[plan->n_pairs] = (unsigned char)s;
            plan->vpp[plan->n_pairs++] = v;
        }
    }
    return plan;
}

/* Leaves under one (shard, pp): every schedule/vpp × ZeRO stage of its plan. Evaluates them
 * unless pruned; returns 1 to stop the whole search (stop_at_first_fit). */
static int leaves(search_ctx *c, ts_stages *st, ts_layout *l, int prune_group) {
    const ts_problem *pb = c->pb;
    ts_search_result *r = c->out;
    /* what the stack cannot run is never searched (stack_rules.h) */
    if (ts_stack_refuses_shape(&pb->train.stack, l, c->opts->pins.mask)) return 0;
    const leaf_plan *plan = leaf_plan_of(c, l);
    if (prune_group) {
        r->searched += (int64_t)plan->n_pairs * plan->n_zero;
        return 0;
    }
    /* The runs' activations, shared by the ZeRO stages and by schedules that keep the same
     * micro-batches in flight (1F1B and ZB-H1): the key of those in c->acts. */
    double (*acts_fn)(int, int, int, int) = NULL;
    int acts_vpp = 0;
    for (int ip = 0; ip < plan->n_pairs; ip++) {
        const ts_schedule_info *si = &ts_schedules[plan->sched[ip]];
        l->schedule = (ts_schedule)plan->sched[ip];
        l->vpp = plan->vpp[ip];
        for (int iz = 0; iz < plan->n_zero; iz++) {
            l->zero = plan->zeros[iz];
            r->searched++;
            /* Rank by the two numbers first; build the full evaluation only for layouts that
             * become the closest or enter the top k. */
            r->evaluated++;
            if (si->dual || si->in_flight != acts_fn || l->vpp != acts_vpp) {
                ts_stages_run_acts(st, l, c->acts);
                acts_fn = si->dual ? NULL : si->in_flight;
                acts_vpp = l->vpp;
            }
            double mem = ts_stages_memory_acts(st, l, c->acts, NULL);
            if (!r->has_closest || mem < r->closest.mem.total) {
                ts_stages_finish(st, pb, l, &r->closest);
                r->has_closest = 1;
            }
            if (mem > pb->usable_bytes) continue;
            r->feasible++;
            if (c->stop_at_first_fit) return 1;
            ts_eval e = {.layout = *l, .mem.total = mem};
            if (c->opts->objective != TS_OBJ_MEMORY || c->opts->max_step_s > 0)
                e.step_s = ts_stages_step(st, pb, l, NULL);
            if (c->opts->max_step_s > 0 && e.step_s > c->opts->max_step_s) continue;
            if (!may_enter(c, &e)) continue;
            ts_stages_finish(st, pb, l, &e);
            offer(c, &e);
        }
    }
    return 0;
}

/* Whether leaf_plan_of may admit a schedule with mirrored stages: the same rules, for any pp. */
static int dual_possible(const ts_problem *pb, const ts_search_opts *opts) {
    for (int s = 0; s < TS_SCHED_COUNT; s++) {
        const ts_schedule_info *si = &ts_schedules[s];
        unsigned bit = 1u << s;
        if (!si->dual || !allowed(&opts->pins, TS_PIN_SCHED, s, 1)) continue;
        if (opts->schedules && !(opts->schedules & bit)) continue;
        if (si->opt_in && !(opts->schedules & bit) && !(opts->pins.mask & (1u << TS_PIN_SCHED)) &&
            !(pb->train.stack.schedules & bit))
            continue;
        return 1;
    }
    return 0;
}

static int divides(long long a, long long b) { return b % a == 0; }

#define TS_MAX_DIVISORS 4096

/* A step-time bound that cannot enter the top k. */
static int beyond(const search_ctx *c, double bound_s) {
    ts_eval e = {.step_s = bound_s};
    return ts_objective_value(c->pb, c->opts->objective, &e) > c->keys[0];
}

/* A lower bound of the step time of every ZeRO stage, schedule and vpp under one (shard, pp):
 * the terms that do not depend on them (compute and exposed TP/CP/EP per micro-batch on the
 * slowest stage), the fewest pipeline transfers (v = 1), and nothing for bubble and DP traffic,
 * which are ≥ 0. */
static double step_lower_bound(const search_ctx *c, const ts_stages *st, const ts_layout *l) {
    const ts_layer_cost *s = &st->slow;
    double per_mb = s->fwd_s + s->bwd_s + s->recompute_s + s->tp_s + s->cp_s + s->ep_s;
    if (c->dual) { /* DualPipe's stages do the mean of two stages' work, its pairs may hide TP and CP */
        ts_layer_cost d;
        ts_stages_dual_times(st, &d);
        per_mb = fmin(per_mb, d.fwd_s + d.bwd_s + d.recompute_s + d.ep_s);
    }
    return l->microbatches * per_mb + 2.0 * ((double)l->microbatches + l->pp - 1) * st->p2p_s;
}

static double busy_s(const ts_layer_cost *c) {
    return c->fwd_s + c->bwd_s + c->recompute_s + c->tp_s + c->cp_s + c->ep_s;
}

/* A weaker bound before the stages are built: the slowest stage is at least the average one. */
static double average_lower_bound(const ts_problem *pb, const ts_shard_costs *k, const ts_layout *l) {
    const ts_model *m = &pb->model;
    int n_moe = 0;
    if (m->moe.experts > 0) {
        int every = m->moe.every > 0 ? m->moe.every : 1;
        n_moe = (m->layers - m->moe.first_dense + every - 1) / every + m->mtp_layers;
    }
    double total = (m->layers + m->mtp_layers - n_moe) * busy_s(&k->dense) + n_moe * busy_s(&k->moe) +
                   busy_s(&k->head) + busy_s(&k->embed);
    return l->microbatches * total / l->pp;
}

/* One (shard, pp) group, valid at the shard level: the bounds, the stages and the leaves under them.
 * `all` holds the shard's per-layer costs under every recompute policy, computed on first use
 * (*have_costs) and moved to the group's ep when only that changed. Returns 1 to stop the
 * search. */
static int group(search_ctx *c, ts_stages *st, ts_layout *l, ts_shard_costs *all, int *have_costs) {
    const ts_problem *pb = c->pb;
    if (!*have_costs) {
        ts_shard sh = {l->tp, l->cp, l->ep, l->sp, l->mbs, TS_RECOMPUTE_NONE, l->etp};
        ts_shard_costs_all(pb, &sh, all);
        *have_costs = 1;
    } else if (all[0].shard.ep != l->ep) {
        ts_shard_costs_new_ep(pb, l->ep, all);
    }
    const ts_shard_costs *costs = &all[l->recompute];
    int can_prune = c->opts->prune && c->opts->objective != TS_OBJ_MEMORY && c->out->n_best == c->opts->top_k;
    /* First the bound that needs no stages (the average stage), then, if it passes, the slowest
     * stage's. */
    int prune_group = can_prune && beyond(c, average_lower_bound(pb, costs, l));
    if (!prune_group) {
        ts_stages_build(st, pb, costs, l->pp);
        prune_group = can_prune && beyond(c, step_lower_bound(c, st, l));
    }
    return leaves(c, st, l, prune_group);
}

/* The divisor list and cost buffers of one search (run). */
typedef struct {
    const long long *gpu_div;
    int n_pp, n_ep;
    ts_shard_costs *costs;    /* the shard's per-layer costs under every recompute policy */
} search_grid;

/* The experts' TP degrees the search tries for a shard of `tp`: the pinned one; else tp's own
 * (0) and, for an MoE model on a stack that splits experts apart (Megatron-Core's
 * --expert-tensor-parallel-size since core_r0.10.0, TorchTitan's expert_tensor_parallel_degree,
 * both 1 or tp), 1 as well (ts_search_offers_etp says at which ep). Returns the count written to
 * out[2]. */
static int etp_choices(const ts_problem *pb, const ts_pins *pins, int tp, int out[2]) {
    if (pins->mask & (1u << TS_PIN_ETP)) return out[0] = pins->value.etp, 1;
    out[0] = 0;
    if (pb->model.moe.experts <= 0 || tp == 1 || !pb->train.stack.etp) return 1;
    out[1] = 1;
    return 2;
}

/* Both etp = tp at ep and etp = 1 at ep·tp split every expert's weights over ep·tp ranks, give an
 * expert the same tokens and the same GEMM work a rank; the second has no TP gather and
 * reduce-scatter around the experts and sends 1/tp of the all-to-all bytes a rank (MoE Parallel
 * Folding, Liu et al. 2025, arXiv:2504.14960), so the search's space holds the second only. The
 * first can still be faster where dropless routing's imbalance grows from ep to ep·tp ranks
 * (ts_moe_load_factor) or where tp times the all-to-all's peers outweigh its bytes; pinning etp
 * or ep compares them. ep·tp divides tp·cp·dp exactly when ep divides cp·dp, as etp = tp needs,
 * so both are valid for the same pp. */
int ts_search_offers_etp(const ts_problem *pb, const ts_layout *l, unsigned pinned) {
    if (pinned & (1u << TS_PIN_ETP)) return 1;
    if (l->etp > 0 && l->etp == l->tp) return 0; /* spelt 0 */
    int apart = ts_layout_etp(l) != l->tp;
    if (pb->model.moe.experts <= 0 || l->tp == 1 || !pb->train.stack.etp) return !apart;
    if (!apart && pb->model.linear_bias && pb->train.stack.moe_bias_etp1) return 0;
    if (pinned & (1u << TS_PIN_EP)) return 1;
    if (apart) return 1;
    return !l->sp || pb->model.moe.experts % ((long long)l->ep * l->tp) != 0;
}

/* Every (ep, pp, recompute) under one (tp, cp, sp, mbs, etp). Returns 1 to stop the search. */
static int shard_leaves(search_ctx *c, search_grid *g, ts_layout shape, ts_stages *st) {
    const ts_problem *pb = c->pb;
    const ts_pins *pins = &c->opts->pins;
    int N = pb->gpus, tp = shape.tp, cp = shape.cp, have_costs = 0;
    long long B = pb->train.global_batch;
    /* ep divides dp·cp·tp/etp = N/(pp·etp), so it divides N/etp. */
    int etp_of = shape.etp > 0 ? shape.etp : tp;
    for (int f = 0; f < g->n_ep && g->gpu_div[f] <= N / etp_of; f++) {
        int ep = (int)g->gpu_div[f];
        if (!divides(ep, N / etp_of) || !allowed(pins, TS_PIN_EP, ep, 1)) continue;
        if (pb->model.moe.experts > 0 && pb->model.moe.experts % ep) continue;
        for (int d = 0; d < g->n_pp; d++) {
            int pp = (int)g->gpu_div[d];
            if (!divides(pp, N / (tp * cp)) || !allowed(pins, TS_PIN_PP, pp, 1)) continue;
            int dp = N / (tp * cp * pp);
            if (!allowed(pins, TS_PIN_DP, dp, 1) || B % ((long long)dp * shape.mbs)) continue;
            if (!divides((long long)ep * etp_of, (long long)dp * cp * tp)) continue;
            /* Shard-level validity, whatever the recompute policy; ZeRO, schedule and vpp are
             * checked per leaf (leaf_plan_of). */
            ts_layout l = shape;
            l.dp = dp, l.pp = pp, l.ep = ep, l.microbatches = (int)(B / ((long long)dp * shape.mbs));
            if (!ts_search_offers_etp(pb, &l, pins->mask) || ts_shard_invalid(pb, &l, NULL, 0)) continue;
            for (int rc = 0; rc < TS_RECOMPUTE_COUNT; rc++) {
                /* under fused attention selective recompute of the core alone changes nothing */
                int canonical = !(rc == TS_RECOMPUTE_SELECTIVE && pb->train.flash_attention &&
                                  (pb->train.recompute_modules & ~TS_RCM_DEFAULT) == 0);
                if (!allowed(pins, TS_PIN_RECOMPUTE, rc, canonical)) continue;
                if (pb->train.moe_combined_1f1b && rc == TS_RECOMPUTE_FULL) continue; /* problem.h */
                l.recompute = (ts_recompute)rc;
                if (group(c, &st[f * g->n_pp + d], &l, g->costs, &have_costs)) return 1;
            }
        }
    }
    return 0;
}

/* The shard's fields outermost, ep, pp and recompute innermost: each shard's per-layer costs
 * (which do not depend on pp) are computed once for every policy, on its first valid pp, and
 * serve every pp; a new ep recomputes only the MoE layers'. */
static ts_status run(search_ctx *c) {
    const ts_problem *pb = c->pb;
    const ts_model *m = &pb->model;
    const ts_pins *pins = &c->opts->pins;
    int N = pb->gpus;
    ts_status res = TS_OK;
    long long *gpu_div = malloc(TS_MAX_DIVISORS * sizeof *gpu_div);
    long long *mbs_div = malloc(TS_MAX_DIVISORS * sizeof *mbs_div);
    ts_shard_costs *costs = malloc(TS_RECOMPUTE_COUNT * sizeof *costs);
    ts_stages *st = NULL;
    int n_st = 0, n_pp = 0, n_div = 0, n_ep = 0;
    if (!gpu_div || !mbs_div || !costs) {
        res = TS_FAIL(TS_ERR_NOMEM, "out of memory for divisor lists");
        goto done;
    }
    n_div = divisors_of(N, gpu_div, TS_MAX_DIVISORS);
    int n_mbs = divisors_of(pb->train.global_batch, mbs_div, TS_MAX_DIVISORS);
    while (n_pp < n_div && gpu_div[n_pp] <= m->layers) n_pp++;
    while (n_ep < n_div && gpu_div[n_ep] <= (m->moe.experts > 0 ? N : 1)) n_ep++;
    /* One ts_stages per (etp choice, ep, pp), ep and pp indexed like gpu_div, so each keeps its
     * weights part while the micro-batch, SP and recompute change under the same tp and cp
     * (stages.h). */
    int per_etp = n_ep * n_pp, etp_slots = m->moe.experts > 0 && pb->train.stack.etp ? 2 : 1;
    st = calloc((size_t)etp_slots * per_etp, sizeof *st);
    TS_ALLOC_GOTO(st, res, done);
    for (; n_st < etp_slots * per_etp; n_st++)
        TS_CHECK_GOTO(ts_stages_init(&st[n_st], (int)gpu_div[n_st % n_pp]), res, done);
    search_grid g = {.gpu_div = gpu_div, .n_pp = n_pp, .n_ep = n_ep, .costs = costs};
    for (int a = 0; a < n_div; a++) {
        int tp = (int)gpu_div[a], etps[2], n_etp = etp_choices(pb, pins, tp, etps);
        if (!allowed(pins, TS_PIN_TP, tp, 1)) continue;
        if (tp > ts_system_domain_gpus(&pb->sys) && !pb->train.tp_across_nodes) break; /* TP inside the NVLink domain */
        if (m->heads % tp) continue;
        for (int b = 0; b < n_div; b++) {
            int cp = (int)gpu_div[b];
            if (!divides(cp, N / tp) || !allowed(pins, TS_PIN_CP, cp, 1)) continue;
            for (int sp = 0; sp <= 1; sp++) {
                if (!allowed(pins, TS_PIN_SP, sp, sp == 0 || tp > 1)) continue;
                for (int e = 0; e < n_mbs; e++) {
                    int mbs = (int)mbs_div[e];
                    if (!allowed(pins, TS_PIN_MBS, mbs, 1)) continue;
                    for (int x = 0; x < n_etp; x++) {
                        ts_layout shape = {.tp = tp, .cp = cp, .sp = sp, .mbs = mbs, .vpp = 1,
                                           .schedule = TS_SCHED_1F1B, .etp = etps[x]};
                        if (shard_leaves(c, &g, shape, st + x * per_etp)) goto done;
                    }
                }
            }
        }
    }
done:
    for (int i = 0; i < n_st; i++) ts_stages_free(&st[i]);
    free(st);
    free(gpu_div);
    free(mbs_div);
    free(costs);
    return res;
}

static ts_status search_into(const ts_problem *pb, const ts_search_opts *opts, ts_search_result *out,
                             int stop_at_first_fit) {
    memset(out, 0, sizeof *out);
    if (opts->top_k < 1 || opts->top_k > 100000)
        return TS_FAIL(TS_ERR_INPUT, "--top: expected an integer in [1, 100000], got %d", opts->top_k);
    ts_status res = TS_OK;
    search_ctx c = {.pb = pb, .opts = opts, .out = out, .stop_at_first_fit = stop_at_first_fit,
                    .dual = dual_possible(pb, opts)};
    out->best = calloc((size_t)opts->top_k, sizeof *out->best);
    c.keys = calloc((size_t)opts->top_k, sizeof *c.keys);
    int most_stages = pb->model.layers < pb->gpus ? pb->model.layers : pb->gpus, L = pb->model.layers;
    c.acts = malloc((size_t)most_stages * sizeof *c.acts);
    c.div_first = calloc((size_t)L + 2, sizeof *c.div_first);
    /* Σ_{n ≤ L} d(n) = Σ_{d ≤ L} floor(L / d) entries. */
    size_t n_div = 0;
    for (int d = 1; d <= L; d++) n_div += (size_t)(L / d);
    c.div = malloc((n_div + 1) * sizeof *c.div);
    if (out->best == NULL || c.keys == NULL || c.acts == NULL || c.div_first == NULL || c.div == NULL) {
        res = TS_FAIL(TS_ERR_NOMEM, "out of memory for %d layouts", opts->top_k);
        goto exit;
    }
    /* Counting sort by n: the multiples of each d in turn, d ascending. */
    for (int d = 1; d <= L; d++)
        for (int n = d; n <= L; n += d) c.div_first[n + 1]++;
    for (int n = 1; n <= L; n++) c.div_first[n + 1] += c.div_first[n];
    for (int d = 1; d <= L; d++)
        for (int n = d; n <= L; n += d) c.div[c.div_first[n]++] = d;
    for (int n = L; n >= 1; n--) c.div_first[n] = c.div_first[n - 1];
    c.div_first[0] = c.div_first[1] = 0;
    /* A plan holds every schedule with up to twice the most divisors of any n ≤ L as vpps. */
    int most_div = 1;
    for (int n = 1; n <= L; n++)
        if (c.div_first[n + 1] - c.div_first[n] > most_div) most_div = c.div_first[n + 1] - c.div_first[n];
    c.plan_room = TS_SCHED_COUNT * (2 * most_div + 1);
    c.plans = calloc(LEAF_PLANS, sizeof *c.plans);
    TS_ALLOC_GOTO(c.plans, res, exit);
    for (int i = 0; i < LEAF_PLANS; i++) {
        c.plans[i].sched = malloc((size_t)c.plan_room);
        c.plans[i].vpp = malloc((size_t)c.plan_room * sizeof *c.plans[i].vpp);
        TS_ALLOC_GOTO(c.plans[i].sched, res, exit);
        TS_ALLOC_GOTO(c.plans[i].vpp, res, exit);
    }
    double t0 = now_s();
    TS_CHECK_GOTO(run(&c), res, exit);
    heap_sort(&c);
    out->search_s = now_s() - t0;
exit:
    for (int i = 0; c.plans && i < LEAF_PLANS; i++) {
        free(c.plans[i].sched);
        free(c.plans[i].vpp);
    }
    free(c.plans);
    free(c.keys);
    free(c.acts);
    free(c.div_first);
    free(c.div);
    return res;
}

/* The smallest GPU count (multiples of a node, doubling then refining) on which some layout fits,
 * or 0 when none up to 64× does. */
static int gpus_that_fit(const ts_problem *pb, const ts_search_opts *opts) {
    int gpn = pb->sys.gpus_per_node, hi = 0;
    ts_search_result r;
    ts_search_opts o = *opts;
    o.top_k = 1;
    o.pins.mask &= ~((1u << TS_PIN_DP) | (1u << TS_PIN_PP)); /* dp and pp must follow the count */
    for (long long g = pb->gpus * 2LL; g <= pb->gpus * 64LL && g <= (1 << 24); g *= 2) {
        ts_problem q = *pb;
        q.gpus = (int)((g + gpn - 1) / gpn * gpn);
        if (search_into(&q, &o, &r, 1) == TS_OK && r.feasible) hi = q.gpus;
        ts_search_result_free(&r);
        if (hi) break;
    }
    if (!hi) return 0;
    int lo = hi / 2, step = (hi - lo) / 16 > gpn ? (hi - lo) / 16 / gpn * gpn : gpn;
    for (int g = (lo / gpn + 1) * gpn; g < hi; g += step) {
        ts_problem q = *pb;
        q.gpus = g;
        int fits = search_into(&q, &o, &r, 1) == TS_OK && r.feasible;
        ts_search_result_free(&r);
        if (fits) return g;
    }
    return hi;
}

/* Why an empty space is empty: the pinned sizes first, then the rules on a probe layout made of
 * the pins with every other field at its simplest value. */
static void explain_empty(const ts_problem *pb, const ts_pins *pins, char *buf, size_t cap) {
    static const ts_pin sizes[] = {TS_PIN_TP, TS_PIN_CP, TS_PIN_PP, TS_PIN_DP};
    ts_layout probe = {.dp = 1, .tp = 1, .pp = 1, .cp = 1, .ep = 1, .mbs = 1, .vpp = 1,
                       .schedule = TS_SCHED_1F1B};
    for (int p = 0; p < TS_PIN_COUNT; p++)
        if (pins->mask & (1u << p)) ts_layout_set(&probe, (ts_pin)p, ts_layout_field(&pins->value, (ts_pin)p));
    long long product = 1;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (pins->mask & (1u << sizes[i])) product *= ts_layout_field(&pins->value, sizes[i]);
    if (pb->gpus % product != 0) {
        snprintf(buf, cap, "the pinned sizes multiply to %lld, which does not divide %d GPUs", product,
                 pb->gpus);
        return;
    }
    /* The GPUs that remain go to dp if it is free, else to pp. */
    long long rest = pb->gpus / product;
    if (!(pins->mask & (1u << TS_PIN_DP))) probe.dp = (int)rest;
    else if (!(pins->mask & (1u << TS_PIN_PP))) probe.pp = (int)rest;
    /* Free sp follows tp where the stack runs SP: the experts apart from TP need it, and no rule
     * refuses it, so a probe without it would blame sp for what another rule forbids. */
    if (!(pins->mask & (1u << TS_PIN_SP)) && probe.tp > 1 && pb->train.stack.sp) probe.sp = 1;
    /* Combined 1F1B needs EP: a free ep takes the smallest that the experts and dp×cp divide, so
     * that the probe blames what another pin forbids (recompute=full), not ep=1. */
    if (pb->train.moe_combined_1f1b && !(pins->mask & (1u << TS_PIN_EP)))
        for (int ep = 2; ep <= pb->model.moe.experts; ep++)
            if (pb->model.moe.experts % ep == 0 && (probe.dp * probe.cp) % ep == 0) {
                probe.ep = ep;
                break;
            }
    if (probe.vpp > 1 && !(pins->mask & (1u << TS_PIN_SCHED))) probe.schedule = TS_SCHED_INTERLEAVED;
    if (ts_schedules[probe.schedule].fixed_vpp && !(pins->mask & (1u << TS_PIN_VPP)))
        probe.vpp = ts_schedules[probe.schedule].fixed_vpp;
    if (ts_layout_invalid(pb, &probe, buf, cap) == NULL)
        snprintf(buf, cap, "no combination of the free fields is valid (check --fix, --gpus and "
                           "--global-batch divisibility)");
    else if (pb->train.global_batch % ((long long)probe.dp * probe.mbs) != 0) {
        size_t n = strlen(buf); /* the GPU count as a budget, planner/budget.h */
        snprintf(buf + n, cap - n, " (plan on at most %d GPUs with --gpus-max %d, or on a nearby batch with "
                 "--batch-tolerance 5%%)", pb->gpus, pb->gpus);
    }
}

ts_status ts_search(const ts_problem *pb, const ts_search_opts *in, ts_search_result *out) {
    double fastest_s = 0, cap_s = 0;
    if (in->objective == TS_OBJ_MEMORY && in->max_step_s <= 0) {
        memset(out, 0, sizeof *out);
        TS_CHECK(ts_memory_step_cap(pb, in, &fastest_s, &cap_s));
    }
    ts_search_opts o = *in;
    if (cap_s > 0) o.max_step_s = cap_s;
    const ts_search_opts *opts = &o;
    TS_CHECK(search_into(pb, opts, out, 0));
    out->fastest_step_s = fastest_s;
    out->step_cap_s = cap_s;
    if (out->n_best > 0) return TS_OK;
    if (out->searched == 0) {
        char why[512];
        explain_empty(pb, &opts->pins, why, sizeof why);
        snprintf(out->reason, sizeof out->reason, "no valid layout of %s on %d GPUs: %s",
                 pb->model.name, pb->gpus, why);
        return TS_FAIL(TS_ERR_INPUT, "%s", out->reason);
    }
    char text[200];
    ts_layout_format(&out->closest.layout, text, sizeof text);
    int need = gpus_that_fit(pb, opts);
    char fit[96] = "no GPU count up to 64× fits either";
    if (need) snprintf(fit, sizeof fit, "needs about %d GPUs of %.0f GB", need, pb->sys.hbm_bytes / 1e9);
    snprintf(out->reason, sizeof out->reason,
             "nothing fits: %s on %d × %s needs at least %.1f GB/GPU (%s) but %.1f GB are usable; %s",
             pb->model.name, pb->gpus, pb->sys.name, out->closest.mem.total / 1e9, text,
             pb->usable_bytes / 1e9, fit);
    return TS_FAIL(TS_ERR_INFEASIBLE, "%s", out->reason);
}

void ts_search_result_free(ts_search_result *r) {
    for (int i = 0; r->splits && i < r->n_best; i++) ts_split_free(&r->splits[i]);
    free(r->splits);
    r->splits = NULL;
    free(r->best);
    r->best = NULL;
    r->n_best = 0;
}
