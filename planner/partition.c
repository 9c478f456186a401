/* Uneven pipeline stages by mixed-integer programming (see partition.h).
 *
 * The program. V = pp·vpp virtual stages cut the layer sequence at V-1 boundaries. Layers come
 * in runs of one kind (Llama: one run of L dense layers; DeepSeek-V3: 3 dense then 58 MoE;
 * alternating models: runs of one).
 *   p[s][k] ∈ {0,1}      physical stage s uses recompute policy k; Σ_k p[s][k] = 1
 *   X[t][s][k] ∈ ℕ       layers of kind t on stage s under policy k; X ≤ cap[t][s][k]·p[s][k],
 *                         cap = what fits in memory alone (a tight big-M)
 *   h[t][s][k] ∈ {0,1}   the stage holds a kind-t layer (X ≤ cap·h), e[s][k] ≥ 0 its transient
 *                         bytes: e ≥ peak[t][k]·h, e ≥ fixed_extra[s][k]·p   (max of what it runs)
 * Memory, per stage and policy, in perspective form (vanishes unless p[s][k] = 1, so with p
 * fractional the LP gets proportionally less room — the convex hull of the policies' memory):
 *   Σ_t (state[t] + in_flight[s]·act[t][k])·X[t][s][k] + e[s][k]
 *     + (fixed_state[s] + in_flight[s]·fixed_act[s][k] - usable)·p[s][k] ≤ 0
 * Time:  T ≥ τ_s = Σ_k fixed_time[s][k]·p[s][k] + Σ_{t,k} time[t][k]·X[t][s][k]
 * Contiguity: with one run any counts are contiguous (Σ_k X[s][k] ≥ vpp, Σ X = L; chunks are
 * filled evenly afterwards). With several runs, boundary variables in the incremental form of
 * the piecewise-linear "layers of run r before boundary j" (Dantzig's δ-method, which is
 * locally ideal):
 *   u[r][j] ∈ {0..len_r}, y[r][j] ∈ {0,1}:  u[r][j] ≥ len_r·y[r][j],  u[r+1][j] ≤ len_{r+1}·y[r][j]
 *   (run r+1 starts only once run r is whole), u[r][j] ≤ u[r][j+1], every virtual stage holds
 *   Σ_r u[r][g+1] - u[r][g] ≥ 1 layer, and Σ_k X[t][s][k] = Σ_c Σ_{r of kind t} u[r][c·pp+s+1] - u[r][c·pp+s].
 * Memory follows planner/stages.c: activations × the schedule's micro-batches in flight
 * (Narayanan et al. SC'21 §2.2; Korthikanti et al. 2022 §4.2.3).
 * A stage's time τ_s is its compute (forward, backward, recompute) and exposed TP/CP/EP traffic
 * per micro-batch. It leaves out the pipeline sends and receives: one activation (or its
 * gradient) per boundary and micro-batch whatever the split — stages.c's pp_comm term, the same
 * on every stage — so adding them would shift every τ_s by the same amount and move neither
 * objective's optimum.
 *
 * The objectives. stage (the default): T = max_s τ_s, which paces the steady state. step: the
 * step with its bubble, m·T + β·(Σ_s τ_s - T). For m micro-batches through p stages in order,
 * the first finishes after Σ_s τ_s and each next one max_s τ_s later (the flow-shop makespan of
 * identical jobs), Σ_s τ_s + (m - 1)·T; with equal stages that is GPipe's (m + p - 1)·τ (Huang
 * et al. 2019 §2.3), whose bubble 1F1B keeps (Narayanan et al. SC'21 §2.2.1). β scales the fill
 * and drain Σ_s τ_s - T by the schedule: 1 for GPipe and 1F1B, 1/v interleaved (SC'21 §2.2.2),
 * (t_f + t_b - 2·t_w)/(t_f + t_b) for ZB-H1 (Qi et al. 2024, Table 2) — schedule.c's bubble of
 * one layer over (p-1)·(t_f + t_b). planner/stages.c charges the bubble at the slowest stage's
 * pace, (p-1)·β·T, an upper bound that is exact for equal stages; under it the stage objective
 * is already step-optimal, so the planner, which ranks by stages.c, only sees the step
 * objective's gain where that bound is loose (uneven stages; `tessera sim` measures it).
 *
 * The search. Minimising T directly leaves GLPK a min-max whose LP bound is the fluid balance
 * (fractional layers); closing that gap by branching is slow (seconds for 126 layers). But the
 * optimum is one of finitely many stage times — every stage × policy × count of each kind that
 * fits — so T is found by bisection over that sorted list, each probe a feasibility program
 * (objective 0, T ≤ level, counts bounded by floor((level - fixed)/time)). A primal heuristic
 * answers the probes first: with vpp = 1 each stage takes the longest prefix that fits (exact:
 * feasibility survives dropping layers), with one kind of layer each stage takes the most it can
 * hold (exact: only counts matter), otherwise the uniform split with each stage's best policy.
 * GLPK then proves the level just below the best split infeasible — one program when the
 * heuristic was exact — or finds a better split and the bisection continues with GLPK. Finally,
 * given the layers, each stage takes its fastest policy that fits. The step objective then
 * solves one more program near the stage optimum (step_phase).
 * Times are scaled to the largest layer's and bytes to the usable memory, so coefficients stay
 * near 1 for GLPK's tolerances. */
#include "planner/partition.h"

#include <glpk.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "program/schedule.h"
#include "planner/stages.h"

const char *const ts_partition_status_names[] = {"optimal", "time-limit", "infeasible", "no-split", NULL};
const char *const ts_partition_objective_names[] = {"stage", "step", NULL};

#define K_POL TS_RECOMPUTE_COUNT

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

ts_status ts_partition_problem_init(ts_partition_problem *p, int layers, int pp, int vpp) {
    *p = (ts_partition_problem){.layers = layers, .pp = pp, .vpp = vpp, .n_kinds = 1, .time_limit_s = 1.0};
    ts_status res = TS_OK;
    if (layers < 1 || pp < 1 || vpp < 1)
        return TS_FAIL(TS_ERR_INPUT, "partition: expected layers, pp, vpp >= 1, got %d, %d, %d", layers, pp, vpp);
    p->kind = calloc((size_t)layers, sizeof *p->kind);
    TS_ALLOC_GOTO(p->kind, res, fail);
    /* One block carved into the per-stage views. */
    size_t n = (size_t)pp * (3 * K_POL + 2);
    p->fixed_time_s = calloc(n, sizeof(double));
    TS_ALLOC_GOTO(p->fixed_time_s, res, fail);
    p->fixed_act_bytes = p->fixed_time_s + (size_t)pp * K_POL;
    p->fixed_extra_bytes = p->fixed_time_s + (size_t)2 * pp * K_POL;
    p->fixed_state_bytes = p->fixed_time_s + (size_t)3 * pp * K_POL;
    p->in_flight = p->fixed_state_bytes + pp;
    return TS_OK;
fail:
    ts_partition_problem_free(p);
    return res;
}

void ts_partition_problem_free(ts_partition_problem *p) {
    free(p->kind);
    free(p->fixed_time_s);
    *p = (ts_partition_problem){0};
}

ts_status ts_split_init(ts_split *s, int pp, int vpp) {
    *s = (ts_split){.pp = pp, .vpp = vpp};
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
        for (int c = 0; c < s->vpp; c++) PUT("%s%d", c ? "+" : "", s->layers[c * s->pp + i]);
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

static int policy_allowed(const ts_partition_problem *p, int k) {
    return p->policies == 0 || (p->policies & (1u << k));
}

int ts_partition_evaluate(const ts_partition_problem *p, ts_split *s) {
    int pp = p->pp, V = pp * p->vpp;
    int *first = malloc((size_t)(V + 1) * sizeof *first);
    if (first == NULL) return 0;
    first[0] = 0;
    for (int g = 0; g < V; g++) first[g + 1] = first[g] + s->layers[g];
    s->fits = first[V] == p->layers;
    s->max_stage_s = -1;
    double worst = -1;
    for (int i = 0; i < pp; i++) {
        int k = s->recompute[i];
        double t = p->fixed_time_s[i * K_POL + k], act = p->fixed_act_bytes[i * K_POL + k];
        double state = p->fixed_state_bytes[i], extra = p->fixed_extra_bytes[i * K_POL + k];
        for (int c = 0; c < p->vpp; c++) {
            int g = c * pp + i;
            if (s->layers[g] < 1) s->fits = 0;
            for (int x = first[g]; x < first[g + 1] && x < p->layers; x++) {
                int kd = p->kind[x];
                t += p->time_s[kd][k];
                act += p->act_bytes[kd][k];
                state += p->state_bytes[kd];
                if (p->peak_bytes[kd][k] > extra) extra = p->peak_bytes[kd][k];
            }
        }
        s->stage_s[i] = t;
        s->stage_bytes[i] = state + p->in_flight[i] * act + extra;
        if (t > s->max_stage_s) {
            s->max_stage_s = t;
            s->slowest = i;
        }
        if (s->stage_bytes[i] > worst) {
            worst = s->stage_bytes[i];
            s->worst = i;
        }
        if (s->stage_bytes[i] > p->usable_bytes || !policy_allowed(p, k)) s->fits = 0;
    }
    free(first);
    return s->fits;
}

void ts_partition_uniform(const ts_partition_problem *p, ts_recompute rc, ts_split *s) {
    int pp = p->pp, V = pp * p->vpp, L = p->layers;
    if (p->vpp == 1) {
        int base = L / pp, rem = L % pp;
        for (int i = 0; i < pp; i++) s->layers[i] = base + (i >= 1 && i <= rem);
    } else {
        int base = L / V, rem = L % V;
        for (int g = 0; g < V; g++) s->layers[g] = base + (g >= 1 && g <= rem);
    }
    for (int i = 0; i < pp; i++) s->recompute[i] = rc;
    ts_partition_evaluate(p, s);
}

/* ---- brute force ------------------------------------------------------------------------- */

typedef struct {
    const ts_partition_problem *p;
    ts_split cur, *best;
    double best_obj_s, best_sum_s;
    int found;
} brute_ctx;

static double sum_s(const ts_split *s) {
    double t = 0;
    for (int i = 0; i < s->pp; i++) t += s->stage_s[i];
    return t;
}

double ts_partition_objective_s(const ts_partition_problem *p, const ts_split *s) {
    if (p->objective != TS_PART_OBJ_STEP) return s->max_stage_s;
    double beta = p->bubble_per_stage;
    return p->microbatches * s->max_stage_s + beta * (sum_s(s) - s->max_stage_s);
}

/* Every policy assignment for the current layer split. */
static void brute_policies(brute_ctx *b, int stage) {
    const ts_partition_problem *p = b->p;
    if (stage == p->pp) {
        if (!ts_partition_evaluate(p, &b->cur)) return;
        double t = ts_partition_objective_s(p, &b->cur), sum = sum_s(&b->cur);
        if (!b->found || t < b->best_obj_s || (t == b->best_obj_s && sum < b->best_sum_s)) {
            int V = p->pp * p->vpp;
            memcpy(b->best->layers, b->cur.layers, (size_t)V * sizeof *b->cur.layers);
            memcpy(b->best->recompute, b->cur.recompute, (size_t)p->pp * sizeof *b->cur.recompute);
            ts_partition_evaluate(p, b->best);
            b->best_obj_s = t;
            b->best_sum_s = sum;
            b->found = 1;
        }
        return;
    }
    for (int k = 0; k < K_POL; k++) {
        if (!policy_allowed(p, k)) continue;
        b->cur.recompute[stage] = (ts_recompute)k;
        brute_policies(b, stage + 1);
    }
}

/* Every composition of the remaining layers into virtual stages g..V-1, each at least one. */
static void brute_layers(brute_ctx *b, int g, int left) {
    int V = b->p->pp * b->p->vpp;
    if (g == V - 1) {
        b->cur.layers[g] = left;
        brute_policies(b, 0);
        return;
    }
    for (int n = 1; n <= left - (V - 1 - g); n++) {
        b->cur.layers[g] = n;
        brute_layers(b, g + 1, left - n);
    }
}

static double binomial(int n, int k) {
    double r = 1;
    for (int i = 1; i <= k; i++) r = r * (n - k + i) / i;
    return r;
}

ts_status ts_partition_brute(const ts_partition_problem *p, ts_split *out) {
    int V = p->pp * p->vpp;
    if (V > p->layers)
        return TS_FAIL(TS_ERR_INFEASIBLE, "%d×%d virtual stages exceed %d layers", p->pp, p->vpp, p->layers);
    int n_pol = 0;
    for (int k = 0; k < K_POL; k++) n_pol += policy_allowed(p, k);
    double candidates = binomial(p->layers - 1, V - 1) * pow(n_pol, p->pp);
    if (candidates > 1e7)
        return TS_FAIL(TS_ERR_INPUT, "partition brute force: %.3g candidates, more than 10^7", candidates);
    brute_ctx b = {.p = p, .best = out};
    TS_CHECK(ts_split_init(out, p->pp, p->vpp));
    ts_status res = ts_split_init(&b.cur, p->pp, p->vpp);
    if (res != TS_OK) {
        ts_split_free(out);
        return res;
    }
    brute_layers(&b, 0, p->layers);
    ts_split_free(&b.cur);
    out->objective_s = out->bound_s = b.best_obj_s;
    if (!b.found) {
        ts_split_free(out);
        return TS_FAIL(TS_ERR_INFEASIBLE, "no contiguous split of %d layers over %d×%d stages fits",
                       p->layers, p->pp, p->vpp);
    }
    return TS_OK;
}

/* ---- the program --------------------------------------------------------------------------- */

/* GLPK's failures. Its API calls abort the process on misuse unless an error hook is set; the
 * hook here jumps back to ts_partition_solve, which frees GLPK's environment and returns
 * TS_ERR_EXTERNAL (GLPK reference manual, glp_error_hook). Solver return codes go through
 * GLPK_CHECK_GOTO, which keeps the code in `rc` for the caller to interpret the ones
 * this module handles (time limit, no feasible LP) and fails on every other. */
static const char *glpk_rc_string(int rc) {
    switch (rc) {
    case 0: return "success";
    case GLP_EBADB: return "invalid basis";
    case GLP_ESING: return "singular matrix";
    case GLP_ECOND: return "ill-conditioned matrix";
    case GLP_EBOUND: return "invalid bounds";
    case GLP_EFAIL: return "solver failed";
    case GLP_EOBJLL: return "objective lower limit reached";
    case GLP_EOBJUL: return "objective upper limit reached";
    case GLP_EITLIM: return "iteration limit exceeded";
    case GLP_ETMLIM: return "time limit exceeded";
    case GLP_ENOPFS: return "no primal feasible solution";
    case GLP_ENODFS: return "no dual feasible solution";
    case GLP_EROOT: return "root LP optimum not provided";
    case GLP_ESTOP: return "search terminated by application";
    case GLP_EMIPGAP: return "relative mip gap tolerance reached";
    case GLP_ENOFEAS: return "no primal/dual feasible solution";
    case GLP_ENOCVG: return "no convergence";
    case GLP_EINSTAB: return "numerical instability";
    case GLP_EDATA: return "invalid data";
    case GLP_ERANGE: return "result out of range";
    default: return "unknown return code";
    }
}

static int glpk_rc_handled(int rc) {
    return rc == 0 || rc == GLP_ETMLIM || rc == GLP_ENOPFS || rc == GLP_ENODFS;
}

#define GLPK_CHECK_GOTO(call, rc, res, label)                                                      \
    do {                                                                                           \
        (rc) = (call);                                                                             \
        if (!glpk_rc_handled(rc)) {                                                                \
            (res) = TS_FAIL(TS_ERR_EXTERNAL, "GLPK %s: %s (%d)", #call, glpk_rc_string(rc), (rc)); \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

static void glpk_error_jump(void *info) { longjmp(*(jmp_buf *)info, 1); }

/* GLPK's terminal output. Its fatal errors print their reason and "Error detected in file ..."
 * even with glp_term_out off (GLPK 5.0 env/error.c turns it back on), which would land in the
 * middle of `plan --json`'s stdout. The hook keeps the last lines for the error message instead
 * and suppresses the printing (a nonzero return; GLPK reference manual, glp_term_hook). */
typedef struct {
    char text[256];
    size_t len;
} glpk_terminal;

static int glpk_term_capture(void *info, const char *s) {
    glpk_terminal *t = info;
    for (; *s; s++) {
        char c = *s == '\n' ? ' ' : *s;
        if (t->len + 1 >= sizeof t->text) { /* keep the newest text */
            memmove(t->text, t->text + sizeof t->text / 2, sizeof t->text / 2);
            t->len -= sizeof t->text / 2;
        }
        if (c == ' ' && (t->len == 0 || t->text[t->len - 1] == ' ')) continue;
        t->text[t->len++] = c;
    }
    t->text[t->len] = '\0';
    return 1;
}

/* Column and row assembly: one dense coefficient buffer over the columns, flushed into a row. */
typedef struct {
    glp_prob *lp;
    int n_cols;
    double *coef;  /* (n_cols + 1), 1-based like GLPK */
    int *ind;      /* (n_cols + 1) */
    double *val;   /* (n_cols + 1) */
} builder;

static int add_col(builder *b, int kind, double lo, double hi, double obj) {
    int j = glp_add_cols(b->lp, 1);
    if (kind == GLP_BV) {
        glp_set_col_kind(b->lp, j, GLP_BV);
    } else {
        glp_set_col_kind(b->lp, j, kind);
        glp_set_col_bnds(b->lp, j, lo == hi ? GLP_FX : (isinf(hi) ? GLP_LO : GLP_DB), lo, hi);
    }
    glp_set_obj_coef(b->lp, j, obj);
    return j;
}

/* Adds a row Σ coef·x in [lo, hi] (lo = -inf or hi = +inf for one-sided) and clears coef. */
static void flush_row(builder *b, double lo, double hi) {
    int n = 0;
    for (int j = 1; j <= b->n_cols; j++)
        if (b->coef[j] != 0) {
            n++;
            b->ind[n] = j;
            b->val[n] = b->coef[j];
            b->coef[j] = 0;
        }
    int i = glp_add_rows(b->lp, 1);
    int type = isinf(lo) && isinf(hi) ? GLP_FR : isinf(lo) ? GLP_UP : isinf(hi) ? GLP_LO : lo == hi ? GLP_FX : GLP_DB;
    glp_set_row_bnds(b->lp, i, type, isinf(lo) ? 0 : lo, isinf(hi) ? 0 : hi);
    glp_set_mat_row(b->lp, i, n, b->ind, b->val);
}

typedef struct {
    int n_runs;
    int *run_kind, *run_len, *run_first; /* (n_runs) */
    int *u;   /* (n_runs × (V+1)) column of u[r][j], 0 for the constant ends j = 0, V */
    int *w;   /* (n_runs × (V+1)) column of y[r][j] (run r whole before boundary j), 0 when none */
    int *pol; /* (pp × K) column of p[s][k], 0 when not allowed */
    int *x;   /* (kinds × pp × K) column of X[t][s][k], 0 when absent */
    int *h;   /* (kinds × pp × K) column of h[t][s][k], 0 when unneeded */
    int *e;   /* (pp × K) column of e[s][k], 0 when unneeded */
    int T;
} columns;

/* Adds `scale`·N[t][g] to the row buffer; returns its constant part (the u[r][V] = len ends). */
static double add_count(builder *b, const columns *c, int V, int t, int g, double scale) {
    double constant = 0;
    for (int r = 0; r < c->n_runs; r++) {
        if (c->run_kind[r] != t) continue;
        /* + u[r][g+1] - u[r][g] */
        if (g + 1 == V) constant += scale * c->run_len[r];
        else b->coef[c->u[r * (V + 1) + g + 1]] += scale;
        if (g > 0) b->coef[c->u[r * (V + 1) + g]] -= scale;
    }
    return constant;
}

/* The infeasibility in words: the uniform split with each stage's least-memory policy. */
static void explain_infeasible(const ts_partition_problem *p, ts_partition_info *info) {
    char *why = info->why;
    size_t cap = sizeof info->why;
    int V = p->pp * p->vpp;
    info->short_stage = 0;
    info->short_bytes = INFINITY;
    if (V > p->layers) {
        snprintf(why, cap, "%d×%d virtual stages exceed the %d layers (each needs at least one)", p->pp, p->vpp,
                 p->layers);
        return;
    }
    ts_split s;
    if (ts_split_init(&s, p->pp, p->vpp) != TS_OK) {
        snprintf(why, cap, "no split fits (out of memory explaining why)");
        return;
    }
    ts_partition_uniform(p, TS_RECOMPUTE_NONE, &s);
    for (int i = 0; i < p->pp; i++) {
        double best = INFINITY;
        for (int k = 0; k < K_POL; k++) {
            if (!policy_allowed(p, k)) continue;
            ts_recompute keep = s.recompute[i];
            s.recompute[i] = (ts_recompute)k;
            ts_partition_evaluate(p, &s);
            if (s.stage_bytes[i] < best) best = s.stage_bytes[i];
            else s.recompute[i] = keep;
        }
    }
    ts_partition_evaluate(p, &s);
    int i = s.worst;
    info->short_stage = i;
    info->short_bytes = s.stage_bytes[i] - p->usable_bytes;
    char text[1024];
    ts_split_format(&s, text, sizeof text);
    snprintf(why, cap,
             "no contiguous split of %d layers over %d×%d stages fits in %.1f GB: under the uniform split "
             "(%.300s) stage %d needs %.1f GB, short by %.1f GB",
             p->layers, p->pp, p->vpp, p->usable_bytes / 1e9, text, i, s.stage_bytes[i] / 1e9,
             (s.stage_bytes[i] - p->usable_bytes) / 1e9);
    ts_split_free(&s);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The split of a solution: layers per virtual stage and each stage's policy. */
static void read_split(const ts_partition_problem *p, const columns *c, const double *val, const int *kind_count,
                       ts_split *out) {
    int pp = p->pp, V = pp * p->vpp, R = c->n_runs;
    for (int s = 0; s < pp; s++) {
        double best = -1;
        for (int k = 0; k < K_POL; k++) {
            int pc = c->pol[s * K_POL + k];
            if (pc && val[pc] > best) {
                best = val[pc];
                out->recompute[s] = (ts_recompute)k;
            }
        }
    }
    if (R == 1) {
        /* Stage totals into chunks as evenly as they go (one kind: where within the stage makes
         * no difference). */
        int t = c->run_kind[0];
        for (int s = 0; s < pp; s++) {
            int n = 0;
            for (int k = 0; k < K_POL; k++) {
                int xc = c->x[(t * pp + s) * K_POL + k];
                if (xc && kind_count[t]) n += (int)lround(val[xc]);
            }
            for (int ch = 0; ch < p->vpp; ch++) out->layers[ch * pp + s] = n / p->vpp + (ch < n % p->vpp);
        }
        return;
    }
    int prev = 0;
    for (int j = 1; j <= V; j++) {
        int before = 0;
        for (int r = 0; r < R; r++) before += j == V ? c->run_len[r] : (int)lround(val[c->u[r * (V + 1) + j]]);
        out->layers[j - 1] = before - prev;
        prev = before;
    }
}

/* Largest count of kind-t layers stage s can hold under policy k by memory alone (a valid bound
 * of X[t][s][k]: the tighter it is, the tighter GLPK's LP relaxation). */
static int count_cap(const ts_partition_problem *p, int t, int s, int k, int kind_count) {
    int pp = p->pp;
    double room = p->usable_bytes - p->fixed_state_bytes[s] - p->in_flight[s] * p->fixed_act_bytes[s * K_POL + k] -
                  fmax(p->fixed_extra_bytes[s * K_POL + k], p->peak_bytes[t][k]);
    double per = p->state_bytes[t] + p->in_flight[s] * p->act_bytes[t][k];
    int most = kind_count < p->layers - (pp - 1) * p->vpp ? kind_count : p->layers - (pp - 1) * p->vpp;
    if (room < 0) return 0;
    if (per <= 0 || room / per >= most) return most;
    return (int)floor(room / per);
}

/* Every time a stage can take — each stage, policy and count of each kind that fits in memory
 * — sorted and deduplicated, in scaled units: the optimum is one of them, so a bisection over
 * this list is exact. NULL and 0 when there would be more than 200000 (the search then bisects
 * T itself). */
static ts_status stage_time_levels(const ts_partition_problem *p, const int *kind_count, double ts, double **out,
                                   int *n_out) {
    enum { MAX_LEVELS = 200000 };
    int pp = p->pp, KT = p->n_kinds;
    *out = NULL;
    *n_out = 0;
    double total = 0;
    int cap[TS_PART_MAX_KINDS];
    for (int s = 0; s < pp; s++)
        for (int k = 0; k < K_POL; k++) {
            if (!policy_allowed(p, k)) continue;
            double combos = 1;
            for (int t = 0; t < KT; t++) combos *= 1 + (kind_count[t] ? count_cap(p, t, s, k, kind_count[t]) : 0);
            total += combos;
        }
    if (total > MAX_LEVELS) return TS_OK;
    double *lv = malloc((size_t)(total > 0 ? total : 1) * sizeof *lv);
    if (lv == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for %.0f stage-time levels", total);
    int n = 0;
    for (int s = 0; s < pp; s++)
        for (int k = 0; k < K_POL; k++) {
            if (!policy_allowed(p, k)) continue;
            for (int t = 0; t < KT; t++) cap[t] = kind_count[t] ? count_cap(p, t, s, k, kind_count[t]) : 0;
            int cnt[TS_PART_MAX_KINDS] = {0};
            for (;;) {
                int layers = 0;
                double tau = p->fixed_time_s[s * K_POL + k] / ts, mem = p->fixed_state_bytes[s];
                double act = p->fixed_act_bytes[s * K_POL + k], extra = p->fixed_extra_bytes[s * K_POL + k];
                for (int t = 0; t < KT; t++) {
                    layers += cnt[t];
                    tau += cnt[t] * (p->time_s[t][k] / ts);
                    mem += cnt[t] * p->state_bytes[t];
                    act += cnt[t] * p->act_bytes[t][k];
                    if (cnt[t] && p->peak_bytes[t][k] > extra) extra = p->peak_bytes[t][k];
                }
                if (layers >= p->vpp && mem + p->in_flight[s] * act + extra <= p->usable_bytes) lv[n++] = tau;
                int t = 0;
                while (t < KT && ++cnt[t] > cap[t]) cnt[t++] = 0;
                if (t == KT) break;
            }
        }
    qsort(lv, (size_t)n, sizeof *lv, cmp_double);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (m == 0 || lv[i] > lv[m - 1] * (1 + 1e-12)) lv[m++] = lv[i];
    *out = lv;
    *n_out = m;
    return TS_OK;
}

/* A lower bound of the slowest stage's time that needs no program: the fluid balance (every
 * layer and fixed part at its fastest allowed policy, spread evenly over the stages) and each
 * stage's least fixed time plus vpp of the fastest layers. What a time limit reports when GLPK
 * proved nothing better. */
/* Σ_s τ_s with every layer and fixed part at its fastest allowed policy (no split has less),
 * and in *most the largest of a stage's least fixed time plus vpp of the fastest layers. */
static double relaxed_sums(const ts_partition_problem *p, double *most) {
    double total = 0, t_any = INFINITY, t_kind[TS_PART_MAX_KINDS];
    *most = 0;
    for (int t = 0; t < p->n_kinds; t++) {
        t_kind[t] = INFINITY;
        for (int k = 0; k < K_POL; k++)
            if (policy_allowed(p, k)) t_kind[t] = fmin(t_kind[t], p->time_s[t][k]);
        t_any = fmin(t_any, t_kind[t]);
    }
    for (int x = 0; x < p->layers; x++) total += t_kind[p->kind[x]];
    for (int s = 0; s < p->pp; s++) {
        double f = INFINITY;
        for (int k = 0; k < K_POL; k++)
            if (policy_allowed(p, k)) f = fmin(f, p->fixed_time_s[s * K_POL + k]);
        total += f;
        *most = fmax(*most, f + p->vpp * t_any);
    }
    return total;
}

static double relaxed_bound_s(const ts_partition_problem *p) {
    double most, total = relaxed_sums(p, &most);
    return fmax(total / p->pp, most);
}

static double least_sum_s(const ts_partition_problem *p) {
    double most;
    return relaxed_sums(p, &most);
}

/* Given the layers, stages are independent: each takes its fastest policy that fits (the
 * slowest stage cannot get slower, and no stage recomputes for nothing). */
static void best_policies(const ts_partition_problem *p, ts_split *s) {
    for (int i = 0; i < p->pp; i++) {
        ts_recompute keep = s->recompute[i];
        double best_t = INFINITY;
        for (int k = 0; k < K_POL; k++) {
            if (!policy_allowed(p, k)) continue;
            s->recompute[i] = (ts_recompute)k;
            ts_partition_evaluate(p, s);
            if (s->stage_bytes[i] <= p->usable_bytes && s->stage_s[i] < best_t) {
                best_t = s->stage_s[i];
                keep = (ts_recompute)k;
            }
        }
        s->recompute[i] = keep;
    }
    ts_partition_evaluate(p, s);
}

/* Whether stage s can run layers [a, b) (its only chunk) within cap_s under some policy. */
static int range_fits(const ts_partition_problem *p, int s, int a, int b, double cap_s) {
    for (int k = 0; k < K_POL; k++) {
        if (!policy_allowed(p, k)) continue;
        double t = p->fixed_time_s[s * K_POL + k], act = p->fixed_act_bytes[s * K_POL + k];
        double state = p->fixed_state_bytes[s], extra = p->fixed_extra_bytes[s * K_POL + k];
        for (int x = a; x < b; x++) {
            int kd = p->kind[x];
            t += p->time_s[kd][k];
            act += p->act_bytes[kd][k];
            state += p->state_bytes[kd];
            if (p->peak_bytes[kd][k] > extra) extra = p->peak_bytes[kd][k];
        }
        if (t <= cap_s * (1 + 1e-9) && state + p->in_flight[s] * act + extra <= p->usable_bytes) return 1;
    }
    return 0;
}

/* A split whose stages all take at most cap_s, found without GLPK when it is easy: with vpp = 1
 * each stage takes the longest prefix of what is left that fits (greedy is exact for
 * contiguous splits whose feasibility survives dropping layers); with one kind of layer only
 * counts matter, so each stage takes up to the most it can hold; otherwise the uniform split with
 * each stage's best policy. Returns 1 with `s` filled (policies: best_policies) or 0. */
static int heuristic(const ts_partition_problem *p, const int *kind_count, double cap_s, ts_split *s) {
    int pp = p->pp, L = p->layers;
    int one_kind = 0;
    for (int t = 0; t < p->n_kinds; t++) one_kind += kind_count[t] > 0;
    one_kind = one_kind == 1;
    if (p->vpp == 1) {
        int a = 0;
        for (int i = 0; i < pp; i++) {
            int most = L - (pp - 1 - i), b = a;
            if (i == pp - 1) b = L;
            else
                while (b < most && range_fits(p, i, a, b + 1, cap_s)) b++;
            if (b == a || !range_fits(p, i, a, b, cap_s)) return 0;
            s->layers[i] = b - a;
            a = b;
        }
    } else if (one_kind) {
        int t = p->kind[0], placed = 0;
        int *most = s->layers; /* per stage first, then spread over chunks */
        for (int i = 0; i < pp; i++) {
            most[i] = 0;
            for (int k = 0; k < K_POL; k++) {
                if (!policy_allowed(p, k)) continue;
                double room_t = (cap_s * (1 + 1e-9) - p->fixed_time_s[i * K_POL + k]) / p->time_s[t][k];
                int n = count_cap(p, t, i, k, kind_count[t]);
                if (p->time_s[t][k] > 0 && room_t < n) n = room_t < 0 ? -1 : (int)floor(room_t);
                if (n > most[i]) most[i] = n;
            }
            if (most[i] < p->vpp) return 0;
        }
        /* Each stage vpp layers, then the rest to stages in order up to their most. */
        int *count = malloc((size_t)pp * sizeof *count);
        if (count == NULL) return 0;
        for (int i = 0; i < pp; i++) {
            count[i] = p->vpp;
            placed += p->vpp;
        }
        for (int i = 0; i < pp && placed < L; i++) {
            int more = most[i] - count[i] < L - placed ? most[i] - count[i] : L - placed;
            count[i] += more;
            placed += more;
        }
        if (placed < L) {
            free(count);
            return 0;
        }
        for (int i = 0; i < pp; i++)
            for (int ch = 0; ch < p->vpp; ch++) s->layers[ch * pp + i] = count[i] / p->vpp + (ch < count[i] % p->vpp);
        free(count);
    } else {
        ts_partition_uniform(p, TS_RECOMPUTE_NONE, s);
    }
    best_policies(p, s);
    return s->fits && s->max_stage_s <= cap_s * (1 + 1e-9);
}

/* glp_intopt with presolve, silent, stopped after left_s seconds (tm_lim, at least 1 ms). */
static int intopt_within(glp_prob *lp, double left_s) {
    glp_iocp parm;
    glp_init_iocp(&parm);
    parm.presolve = GLP_ON;
    parm.msg_lev = GLP_MSG_OFF;
    parm.tm_lim = (int)(left_s * 1000 > 1 ? left_s * 1000 : 1);
    return glp_intopt(lp, &parm);
}

/* T ≤ cap_t (scaled; infinite: no cap) and the counts rounded down to what the cap leaves each
 * stage (bounds GLPK's presolve would leave fractional). */
static void cap_level(const ts_partition_problem *p, const columns *c, glp_prob *lp, const int *kind_count,
                      double cap_t, double ts) {
    int pp = p->pp;
    if (isinf(cap_t)) glp_set_col_bnds(lp, c->T, GLP_LO, 0, 0);
    else glp_set_col_bnds(lp, c->T, GLP_DB, 0, cap_t * (1 + 1e-9) + 1e-12);
    for (int s = 0; s < pp; s++)
        for (int k = 0; k < K_POL; k++)
            for (int t = 0; t < p->n_kinds && c->pol[s * K_POL + k]; t++) {
                int xc = c->x[(t * pp + s) * K_POL + k];
                if (!xc) continue;
                double most = count_cap(p, t, s, k, kind_count[t]);
                double room = (cap_t * ts * (1 + 1e-9) - p->fixed_time_s[s * K_POL + k]) / p->time_s[t][k];
                if (p->time_s[t][k] > 0 && room < most) most = room < 0 ? 0 : floor(room);
                glp_set_col_bnds(lp, xc, most > 0 ? GLP_DB : GLP_FX, 0, most);
            }
}

/* The step objective, given the stage optimum S* (in `out`: slowest stage T*, objective f*).
 * Every split has T ≥ T* and Σ τ_s ≥ Σ_min, so S* is the step optimum when its Σ is Σ_min
 * (no stage recomputes for nothing); and any split that beats it has T < (f* - β·Σ_min)/(m - β),
 * a cap just above T* when m is large. One program over T* ≤ T ≤ that cap minimises
 * (m - β)·T + β·Σ τ_s directly: with T pinned between the two, its LP bound is tight (the
 * min-max's weak fluid bound, see the top, is cut off by T ≥ T*). *proven = 1 when S* or
 * GLPK's answer is proved optimal, 0 on the time limit; `out` keeps the better split. */
static ts_status step_phase(const ts_partition_problem *p, const columns *c, builder *b, const int *kind_count,
                            double ts, double left_s, ts_split *out, ts_split *trial, double *val, int *proven) {
    ts_status res = TS_OK;
    glp_prob *lp = b->lp;
    int pp = p->pp, rc = 0;
    double m = p->microbatches, beta = p->bubble_per_stage;
    *proven = 1;
    if (beta <= 0 || m <= beta) return TS_OK; /* then the step is m·T: the stage optimum is the step optimum */
    double f_best = ts_partition_objective_s(p, out), sum_min = least_sum_s(p);
    if (sum_s(out) <= sum_min * (1 + 1e-12)) return TS_OK;
    double cap_t = (f_best - beta * sum_min) / (m - beta) / ts, t_star = out->max_stage_s / ts;
    cap_level(p, c, lp, kind_count, cap_t, ts);
    glp_set_col_bnds(lp, c->T, GLP_DB, t_star * (1 - 1e-9), fmax(cap_t, t_star) * (1 + 1e-9) + 1e-12);
    glp_set_obj_coef(lp, c->T, m - beta);
    for (int s = 0; s < pp; s++)
        for (int k = 0; k < K_POL; k++) {
            if (!c->pol[s * K_POL + k]) continue;
            glp_set_obj_coef(lp, c->pol[s * K_POL + k], beta * p->fixed_time_s[s * K_POL + k] / ts);
            for (int t = 0; t < p->n_kinds; t++) {
                int xc = c->x[(t * pp + s) * K_POL + k];
                if (xc) glp_set_obj_coef(lp, xc, beta * p->time_s[t][k] / ts);
            }
        }
    if (left_s <= 0) {
        *proven = 0;
        return TS_OK;
    }
    GLPK_CHECK_GOTO(intopt_within(lp, left_s), rc, res, exit);
    int st = glp_mip_status(lp);
    *proven = rc == 0 && st == GLP_OPT;
    if (rc != GLP_ENOPFS && rc != GLP_ENODFS && (st == GLP_OPT || st == GLP_FEAS)) {
        for (int j = 1; j <= b->n_cols; j++) val[j] = glp_mip_col_val(lp, j);
        read_split(p, c, val, kind_count, trial);
        best_policies(p, trial);
        if (trial->fits && ts_partition_objective_s(p, trial) < f_best * (1 - 1e-12)) {
            memcpy(out->layers, trial->layers, (size_t)pp * p->vpp * sizeof *out->layers);
            memcpy(out->recompute, trial->recompute, (size_t)pp * sizeof *out->recompute);
            ts_partition_evaluate(p, out);
        }
    }
exit:
    return res;
}

static ts_status solve_glpk(const ts_partition_problem *p, columns *c, builder *b, ts_split *out,
                            ts_partition_info *info) {
    ts_status res = TS_OK;
    int pp = p->pp, V = pp * p->vpp, R = c->n_runs, KT = p->n_kinds;
    int rc = 0;
    glp_prob *lp = b->lp;
    glp_set_obj_dir(lp, GLP_MIN);

    /* Scales: times by the slowest layer, bytes by the usable memory. */
    double ts = 0;
    for (int t = 0; t < KT; t++)
        for (int k = 0; k < K_POL; k++) ts = fmax(ts, p->time_s[t][k]);
    if (ts <= 0) ts = 1;
    double bs = p->usable_bytes > 0 ? p->usable_bytes : 1;
    int kind_count[TS_PART_MAX_KINDS] = {0};
    for (int x = 0; x < p->layers; x++) kind_count[p->kind[x]]++;
#define X(t, s, k) c->x[((t) * pp + (s)) * K_POL + (k)]
#define H(t, s, k) c->h[((t) * pp + (s)) * K_POL + (k)]
#define P(s, k) c->pol[(s) * K_POL + (k)]
#define E(s, k) c->e[(s) * K_POL + (k)]

    /* Columns. */
    if (R > 1)
        for (int r = 0; r < R; r++)
            for (int j = 1; j < V; j++) {
                c->u[r * (V + 1) + j] = add_col(b, GLP_IV, 0, c->run_len[r], 0);
                if (r + 1 < R) c->w[r * (V + 1) + j] = add_col(b, GLP_BV, 0, 1, 0);
            }
    for (int s = 0; s < pp; s++)
        for (int k = 0; k < K_POL; k++) {
            if (!policy_allowed(p, k)) continue;
            P(s, k) = add_col(b, GLP_BV, 0, 1, 0);
            int need_e = p->fixed_extra_bytes[s * K_POL + k] > 0;
            for (int t = 0; t < KT; t++) {
                int cap = kind_count[t] ? count_cap(p, t, s, k, kind_count[t]) : 0;
                if (cap == 0) continue;
                X(t, s, k) = add_col(b, GLP_IV, 0, cap, 0);
                if (p->peak_bytes[t][k] > p->fixed_extra_bytes[s * K_POL + k]) {
                    H(t, s, k) = add_col(b, GLP_BV, 0, 1, 0);
                    need_e = 1;
                }
            }
            if (need_e) E(s, k) = add_col(b, GLP_CV, 0, INFINITY, 0);
        }
    c->T = add_col(b, GLP_CV, 0, INFINITY, 1);
    b->n_cols = glp_get_num_cols(lp);
    b->coef = calloc((size_t)b->n_cols + 1, sizeof *b->coef);
    b->ind = calloc((size_t)b->n_cols + 1, sizeof *b->ind);
    b->val = calloc((size_t)b->n_cols + 1, sizeof *b->val);
    TS_ALLOC_GOTO(b->coef, res, exit);
    TS_ALLOC_GOTO(b->ind, res, exit);
    TS_ALLOC_GOTO(b->val, res, exit);

    /* Contiguity. One run: any counts are contiguous; each stage holds at least one layer per
     * chunk and all layers are placed. Several runs: the boundary variables. */
    if (R == 1) {
        int t = c->run_kind[0];
        for (int s = 0; s < pp; s++) {
            for (int k = 0; k < K_POL; k++)
                if (P(s, k) && X(t, s, k)) b->coef[X(t, s, k)] = 1;
            flush_row(b, p->vpp, INFINITY);
        }
        for (int s = 0; s < pp; s++)
            for (int k = 0; k < K_POL; k++)
                if (P(s, k) && X(t, s, k)) b->coef[X(t, s, k)] = 1;
        flush_row(b, p->layers, p->layers);
    } else {
        for (int j = 1; j < V; j++) {
            for (int r = 0; r + 1 < R; r++) {
                int y = c->w[r * (V + 1) + j];
                b->coef[c->u[r * (V + 1) + j]] = 1;
                b->coef[y] = -c->run_len[r];
                flush_row(b, 0, INFINITY);
                b->coef[c->u[(r + 1) * (V + 1) + j]] = 1;
                b->coef[y] = -c->run_len[r + 1];
                flush_row(b, -INFINITY, 0);
            }
            if (j + 1 < V)
                for (int r = 0; r < R; r++) {
                    b->coef[c->u[r * (V + 1) + j + 1]] = 1;
                    b->coef[c->u[r * (V + 1) + j]] = -1;
                    flush_row(b, 0, INFINITY);
                }
        }
        for (int g = 0; g < V; g++) {
            double k0 = 0;
            for (int t = 0; t < KT; t++) k0 += add_count(b, c, V, t, g, 1);
            flush_row(b, 1 - k0, INFINITY);
        }
        /* Σ_k X[t][s][k] = Σ_c N[t][c·pp+s] */
        for (int s = 0; s < pp; s++)
            for (int t = 0; t < KT; t++) {
                if (kind_count[t] == 0) continue;
                double k0 = 0;
                for (int k = 0; k < K_POL; k++)
                    if (P(s, k) && X(t, s, k)) b->coef[X(t, s, k)] = 1;
                for (int ch = 0; ch < p->vpp; ch++) k0 += add_count(b, c, V, t, ch * pp + s, -1);
                flush_row(b, -k0, -k0);
            }
    }

    for (int s = 0; s < pp; s++) {
        for (int k = 0; k < K_POL; k++)
            if (P(s, k)) b->coef[P(s, k)] = 1;
        flush_row(b, 1, 1);
        for (int k = 0; k < K_POL; k++) {
            if (!P(s, k)) continue;
            /* Layers only under the chosen policy, and a kind's peak once it is present. */
            for (int t = 0; t < KT; t++) {
                if (!X(t, s, k)) continue;
                int cap = (int)glp_get_col_ub(lp, X(t, s, k));
                b->coef[X(t, s, k)] = 1;
                b->coef[P(s, k)] = -cap;
                flush_row(b, -INFINITY, 0);
                if (H(t, s, k)) {
                    b->coef[X(t, s, k)] = 1;
                    b->coef[H(t, s, k)] = -cap;
                    flush_row(b, -INFINITY, 0);
                    b->coef[E(s, k)] = 1;
                    b->coef[H(t, s, k)] = -p->peak_bytes[t][k] / bs;
                    flush_row(b, 0, INFINITY);
                }
            }
            double fx = p->fixed_extra_bytes[s * K_POL + k] / bs;
            if (E(s, k) && fx > 0) {
                b->coef[E(s, k)] = 1;
                b->coef[P(s, k)] = -fx;
                flush_row(b, 0, INFINITY);
            }
            /* Memory under policy k, vanishing unless chosen (the perspective of the stage's
             * memory: with p fractional, proportionally less room, which keeps the LP tight). */
            b->coef[P(s, k)] = (p->fixed_state_bytes[s] + p->in_flight[s] * p->fixed_act_bytes[s * K_POL + k]) / bs - 1;
            for (int t = 0; t < KT; t++)
                if (X(t, s, k)) b->coef[X(t, s, k)] = (p->state_bytes[t] + p->in_flight[s] * p->act_bytes[t][k]) / bs;
            if (E(s, k)) b->coef[E(s, k)] = 1;
            flush_row(b, -INFINITY, 0);
        }
        /* Time: T ≥ τ_s. */
        b->coef[c->T] = 1;
        for (int k = 0; k < K_POL; k++) {
            if (!P(s, k)) continue;
            b->coef[P(s, k)] = -p->fixed_time_s[s * K_POL + k] / ts;
            for (int t = 0; t < KT; t++)
                if (X(t, s, k)) b->coef[X(t, s, k)] = -p->time_s[t][k] / ts;
        }
        flush_row(b, 0, INFINITY);
    }
    info->rows = glp_get_num_rows(lp);
    info->cols = b->n_cols;
    info->integer_cols = glp_get_num_int(lp);

    /* The search over T (see the file comment): feasibility programs, objective zero. */
    int n_levels = 0;
    double *levels = NULL;
    TS_CHECK_GOTO(stage_time_levels(p, kind_count, ts, &levels, &n_levels), res, exit);
    double t_start = now_s(), budget_s = p->time_limit_s > 0 ? p->time_limit_s : 1.0;
    int found = 0, unknown = 0, lo = -1, hi = n_levels; /* levels[lo] infeasible, levels[hi] feasible */
    double lo_s = 0, hi_s = INFINITY;                   /* the same as scaled times */
    ts_split trial = {0};
    double *val = calloc((size_t)b->n_cols + 1, sizeof *val);
    TS_ALLOC_GOTO(val, res, search_exit);
    TS_CHECK_GOTO(ts_split_init(out, pp, p->vpp), res, search_exit);
    TS_CHECK_GOTO(ts_split_init(&trial, pp, p->vpp), res, search_exit);
    /* Phase 1, no GLPK: bisect with the heuristic alone (exact for one kind or vpp = 1).
     * Phase 2, GLPK: prove the level just below the heuristic's best infeasible — optimality in
     * one program when the heuristic was exact — else bisect further below with GLPK. */
    for (int phase = 1; phase <= 2; phase++) {
        int first_probe = 1;
        lo = -1; /* phase 1's failures prove nothing */
        lo_s = 0;
        for (;;) {
            double cap_t = INFINITY; /* before any split: is one feasible at all? */
            int probe = -1;
            if (found && n_levels > 0) {
                if (hi - lo <= 1) break;
                probe = phase == 2 && first_probe ? hi - 1 : lo + (hi - lo) / 2;
                cap_t = levels[probe];
            } else if (found) { /* too many levels to list: bisect T itself, to 1e-4 */
                if (hi_s - lo_s <= 1e-4 * hi_s) break;
                cap_t = phase == 2 && first_probe ? hi_s * (1 - 1e-4) : (lo_s + hi_s) / 2;
            } else if (phase == 1 && !first_probe) {
                break;
            }
            first_probe = 0;
            int feasible = 0;
            if (phase == 1) {
                if (p->glpk_only) break;
                feasible = heuristic(p, kind_count, cap_t * ts, &trial);
            } else {
                cap_level(p, c, lp, kind_count, cap_t, ts);
                double left_s = budget_s - (now_s() - t_start);
                if (left_s <= 0) {
                    unknown = 1;
                    break;
                }
                GLPK_CHECK_GOTO(intopt_within(lp, left_s), rc, res, search_exit);
                info->glpk_calls++;
                int st = glp_mip_status(lp);
                feasible = rc != GLP_ENOPFS && rc != GLP_ENODFS && (st == GLP_OPT || st == GLP_FEAS);
                if (rc == GLP_ETMLIM && !feasible) unknown = 1; /* not proven infeasible */
                if (feasible) {
                    for (int j = 1; j <= b->n_cols; j++) val[j] = glp_mip_col_val(lp, j);
                    read_split(p, c, val, kind_count, &trial);
                    best_policies(p, &trial);
                }
            }
            if (feasible) {
                found = 1;
                memcpy(out->layers, trial.layers, (size_t)V * sizeof *out->layers);
                memcpy(out->recompute, trial.recompute, (size_t)pp * sizeof *out->recompute);
                /* The split's own slowest stage may sit below the probed level: jump there. */
                hi_s = trial.max_stage_s / ts;
                hi = 0;
                while (hi < n_levels && levels[hi] < hi_s * (1 - 1e-9)) hi++;
            } else if (!found) {
                if (phase == 2) break; /* GLPK: nothing fits at any level */
            } else {
                lo = probe;
                lo_s = cap_t;
            }
        }
    }
    if (!found) {
        if (unknown) {
            info->status = TS_PART_NO_SPLIT;
            snprintf(info->why, sizeof info->why,
                     "GLPK found no split of %d layers over %d×%d stages within the %.3g s time limit", p->layers,
                     pp, p->vpp, budget_s);
        } else {
            info->status = TS_PART_INFEASIBLE;
            explain_infeasible(p, info);
        }
        ts_split_free(out);
        res = TS_FAIL(TS_ERR_INFEASIBLE, "%s", info->why);
        goto search_exit;
    }
    ts_partition_evaluate(p, out);
    /* The slowest stage's bound: proved (the optimum, or the level GLPK found infeasible) or
     * the relaxation's. */
    double t_bound = unknown ? fmin(out->max_stage_s, fmax(lo_s * ts, relaxed_bound_s(p))) : out->max_stage_s;
    if (p->objective == TS_PART_OBJ_STEP) {
        int proven = 0;
        if (!unknown)
            TS_CHECK_GOTO(step_phase(p, c, b, kind_count, ts, budget_s - (now_s() - t_start), out, &trial, val, &proven),
                          res, search_exit);
        unknown |= !proven;
        double beta = p->bubble_per_stage > 0 && p->microbatches > p->bubble_per_stage ? p->bubble_per_stage : 0;
        info->bound_s = (p->microbatches - beta) * t_bound + beta * least_sum_s(p);
    } else {
        info->bound_s = t_bound;
    }
    info->status = unknown ? TS_PART_TIME_LIMIT : TS_PART_OPTIMAL;
    out->status = info->status;
    out->objective_s = ts_partition_objective_s(p, out);
    if (info->status == TS_PART_OPTIMAL || info->bound_s > out->objective_s) info->bound_s = out->objective_s;
    out->bound_s = info->bound_s;
search_exit:
    free(levels);
    free(val);
    ts_split_free(&trial);
    if (res != TS_OK && !found) ts_split_free(out);
exit:
    return res;
}

ts_status ts_partition_solve(const ts_partition_problem *p, ts_split *out, ts_partition_info *info) {
    *info = (ts_partition_info){0};
    *out = (ts_split){0};
    double t0 = now_s();
    int pp = p->pp, V = pp * p->vpp, L = p->layers;
    if (p->n_kinds < 1 || p->n_kinds > TS_PART_MAX_KINDS)
        return TS_FAIL(TS_ERR_INPUT, "partition: %d layer kinds, expected 1..%d", p->n_kinds, TS_PART_MAX_KINDS);
    if (V > L) {
        info->status = TS_PART_INFEASIBLE;
        explain_infeasible(p, info);
        return TS_FAIL(TS_ERR_INFEASIBLE, "%s", info->why);
    }
    ts_status res = TS_OK;
    columns c = {0};
    builder b = {0};
    c.run_kind = calloc((size_t)L * 3, sizeof(int));
    c.u = calloc((size_t)L * (V + 1) * 2, sizeof(int));
    c.pol = calloc((size_t)pp * K_POL * (2 * TS_PART_MAX_KINDS + 2), sizeof(int));
    TS_ALLOC_GOTO(c.run_kind, res, cleanup);
    TS_ALLOC_GOTO(c.u, res, cleanup);
    TS_ALLOC_GOTO(c.pol, res, cleanup);
    c.run_len = c.run_kind + L;
    c.run_first = c.run_kind + 2 * L;
    c.w = c.u + (size_t)L * (V + 1);
    c.x = c.pol + (size_t)pp * K_POL;
    c.h = c.x + (size_t)TS_PART_MAX_KINDS * pp * K_POL;
    c.e = c.h + (size_t)TS_PART_MAX_KINDS * pp * K_POL;
    for (int x = 0; x < L; x++) {
        if (p->kind[x] < 0 || p->kind[x] >= p->n_kinds) {
            res = TS_FAIL(TS_ERR_INPUT, "partition: layer %d has kind %d, expected 0..%d", x, p->kind[x], p->n_kinds - 1);
            goto cleanup;
        }
        if (x == 0 || p->kind[x] != p->kind[x - 1]) {
            c.run_kind[c.n_runs] = p->kind[x];
            c.run_first[c.n_runs++] = x;
        }
        c.run_len[c.n_runs - 1]++;
    }

    /* volatile: read after a longjmp from GLPK's error hook. */
    glp_prob *volatile lp = NULL;
    jmp_buf env;
    /* Static (thread-local): written through the hook between setjmp and longjmp, where an
     * automatic object would be indeterminate (C11 7.13.2.1). */
    static _Thread_local glpk_terminal term;
    term.len = 0;
    term.text[0] = '\0';
    if (setjmp(env)) {
        glp_error_hook(NULL, NULL);
        glp_free_env(); /* frees every GLPK object, lp and the hooks included */
        lp = NULL;
        while (term.len > 0 && term.text[term.len - 1] == ' ') term.text[--term.len] = '\0';
        res = TS_FAIL(TS_ERR_EXTERNAL, "GLPK failed building or solving the partition program: %s",
                      term.len ? term.text : "(it printed nothing)");
        goto cleanup;
    }
    glp_error_hook(glpk_error_jump, &env);
    glp_term_hook(glpk_term_capture, &term);
    glp_term_out(GLP_OFF);
    lp = glp_create_prob();
    b.lp = lp;
    res = solve_glpk(p, &c, &b, out, info);
    glp_delete_prob(lp);
    lp = NULL;
    glp_term_hook(NULL, NULL);
    glp_error_hook(NULL, NULL);
cleanup:
    free(b.coef);
    free(b.ind);
    free(b.val);
    free(c.run_kind);
    free(c.u);
    free(c.pol);
    info->solve_s = now_s() - t0;
    return res;
}

/* ---- the instance of a planning problem ----------------------------------------------------- */

ts_status ts_partition_problem_of(const ts_problem *pb, const ts_layout *l, unsigned policies,
                                  ts_partition_problem *out) {
    const ts_model *m = &pb->model;
    const ts_param_count *pc = &pb->params;
    const ts_train *tr = &pb->train;
    int pp = l->pp, L = m->layers;
    TS_CHECK(ts_partition_problem_init(out, L, pp, l->vpp));
    out->policies = policies;
    out->usable_bytes = pb->usable_bytes;
    int moe_model = m->moe.experts > 0;
    out->n_kinds = moe_model ? 2 : 1;
    for (int x = 0; x < L; x++) out->kind[x] = moe_model ? ts_model_layer_is_moe(m, x) : 0;

    ts_shard_costs costs[K_POL];
    ts_shard sh = {l->tp, l->cp, l->ep, l->sp, l->mbs, TS_RECOMPUTE_NONE};
    ts_shard_costs_all(pb, &sh, costs);
    int splits_w = ts_schedules[l->schedule].splits_w;
#define BUSY(c) ((c).fwd_s + (c).bwd_s + (c).recompute_s + (splits_w ? (c).tp_split_w_s : (c).tp_s) + (c).cp_s + (c).ep_s)

    /* The step objective's m and β: the schedule's bubble over (p-1) stages of one layer's
     * forward and backward (schedule.c's closed forms; stages.c splits the exposed TP/CP/EP
     * traffic a third to forward, two thirds to backward), per second of that time. */
    out->microbatches = l->microbatches;
    if (pp > 1) {
        const ts_layer_cost *d = &costs[TS_RECOMPUTE_NONE].dense;
        double comm = (splits_w ? d->tp_split_w_s : d->tp_s) + d->cp_s + d->ep_s;
        double tf = d->fwd_s + comm / 3.0, tb = d->bwd_s + comm * 2.0 / 3.0;
        if (tf + tb > 0)
            out->bubble_per_stage = ts_schedules[l->schedule].bubble_s(pp, l->vpp, tf, tb, d->wgrad_s) / ((pp - 1) * (tf + tb));
    }

    /* States per parameter, as stage_states in stages.c: ZeRO-1 shards the optimizer, -2 the
     * gradients, -3 the weights, over DP×CP (experts over DP×CP/EP). */
    double t = l->tp, dpc = (double)pb->gpus / (l->tp * l->cp * pp) * l->cp, edp = dpc / l->ep;
    int z = l->zero;
    double per_ne = (tr->weight_bytes * (z >= 3 ? 1 / dpc : 1) + tr->grad_bytes * (z >= 2 ? 1 / dpc : 1) +
                     tr->optimizer_bytes * (z >= 1 ? 1 / dpc : 1)) / t;
    double per_ex = (tr->weight_bytes * (z >= 3 ? 1 / edp : 1) + tr->grad_bytes * (z >= 2 ? 1 / edp : 1) +
                     tr->optimizer_bytes * (z >= 1 ? 1 / edp : 1)) / (t * l->ep);
    double expert_all = moe_model ? m->moe.experts * pc->expert : 0;
    double moe_ne = pc->per_layer_moe - expert_all;
    double state_kind[2] = {pc->per_layer_dense * per_ne, moe_ne * per_ne + expert_all * per_ex};
    for (int kd = 0; kd < out->n_kinds; kd++) {
        out->state_bytes[kd] = state_kind[kd];
        for (int k = 0; k < K_POL; k++) {
            const ts_layer_cost *c = kd ? &costs[k].moe : &costs[k].dense;
            out->time_s[kd][k] = BUSY(*c);
            out->act_bytes[kd][k] = c->act_bytes;
            out->peak_bytes[kd][k] = c->peak_bytes;
        }
    }

    /* Buffers (stage_states): TP/SP collective buffers, pipeline send/recv, two DP buckets (the
     * full bucket: gradients of a stage exceed it for every real layer), ZeRO-3's gathered
     * layers. */
    double T = (double)l->mbs * tr->seq / l->cp, h = (double)m->hidden;
    double max_layer = fmax(pc->per_layer_dense, moe_ne + expert_all / l->ep) / t;
    double buffers = (l->tp > 1 ? 4.0 * T * h : 0) + (pp > 1 ? 4.0 * T * h / l->tp : 0) + 2.0 * tr->bucket_bytes +
                     (z >= 3 ? 2.0 * tr->weight_bytes * max_layer : 0);
    int n_moe_all = 0;
    for (int x = 0; x < L; x++) n_moe_all += moe_model && ts_model_layer_is_moe(m, x);
    double outside = pc->total - pc->embedding - pc->lm_head - (L - n_moe_all) * pc->per_layer_dense -
                     n_moe_all * pc->per_layer_moe;
    for (int s = 0; s < pp; s++) {
        out->fixed_state_bytes[s] = buffers;
        out->in_flight[s] = ts_schedules[l->schedule].in_flight(pp, s, l->microbatches, l->vpp);
    }
    for (int k = 0; k < K_POL; k++) {
        const ts_shard_costs *c = &costs[k];
        out->fixed_time_s[0 * K_POL + k] += BUSY(c->embed);
        out->fixed_act_bytes[0 * K_POL + k] += c->embed.act_bytes;
        int last = pp - 1;
        out->fixed_time_s[last * K_POL + k] += BUSY(c->head) + m->mtp_layers * BUSY(c->moe);
        out->fixed_act_bytes[last * K_POL + k] += m->mtp_layers * c->moe.act_bytes;
        double extra = c->head.act_bytes;
        if (m->mtp_layers > 0) extra = fmax(extra, c->moe.peak_bytes);
        out->fixed_extra_bytes[last * K_POL + k] = extra;
    }
#undef BUSY
    out->fixed_state_bytes[0] += pc->embedding * per_ne;
    double head_params = pc->lm_head > 0 ? pc->lm_head : (pp > 1 ? (double)m->vocab * m->hidden : 0);
    out->fixed_state_bytes[pp - 1] += (head_params + outside) * per_ne;
    if (m->mtp_layers > 0) out->fixed_state_bytes[pp - 1] += m->mtp_layers * state_kind[moe_model ? 1 : 0];
    return TS_OK;
}

ts_status ts_evaluate_split(const ts_problem *pb, const ts_layout *in, const ts_split *s, ts_eval *out) {
    if (s->pp != in->pp || s->vpp != in->vpp)
        return TS_FAIL(TS_ERR_INPUT, "split for pp=%d, vpp=%d given to a layout with pp=%d, vpp=%d", s->pp, s->vpp,
                       in->pp, in->vpp);
    ts_layout l = *in;
    l.microbatches = (int)(pb->train.global_batch / ((long long)l.dp * l.mbs));
    ts_shard_costs costs[K_POL];
    ts_shard sh = {l.tp, l.cp, l.ep, l.sp, l.mbs, TS_RECOMPUTE_NONE};
    ts_shard_costs_all(pb, &sh, costs);
    ts_stages st;
    TS_CHECK(ts_stages_init(&st, l.pp));
    ts_stage_split sp = {.vpp = s->vpp, .layers = s->layers, .recompute = s->recompute, .costs = costs};
    ts_stages_build_split(&st, pb, &costs[l.recompute], l.pp, &sp);
    ts_stages_finish(&st, pb, &l, out);
    ts_stages_free(&st);
    return TS_OK;
}

/* ---- the planner's use of it --------------------------------------------------------------- */

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

ts_program_opts ts_program_opts_of(const ts_split *s) {
    ts_program_opts o = {0};
    if (s != NULL && s->pp > 0) {
        o.chunk_layers = s->layers;
        o.stage_recompute = s->recompute;
    }
    return o;
}
