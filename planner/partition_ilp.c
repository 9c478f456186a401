/* Uneven pipeline stages by mixed-integer programming (see partition.h): the GLPK program, its
 * build and its solve. The GLPK-free parts of the search are partition_levels.c's.
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
 *   Σ_r u[r][g+1] - u[r][g] ≥ 1 layer, and Σ_k X[t][s][k] = Σ_c Σ_{r of kind t} u[r][g(s,c)+1] - u[r][g(s,c)], g(s, c) the global chunk the schedule places at local chunk c of stage s (program/schedule.h).
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

#include "planner/partition_impl.h"
#include "program/schedule.h"

/* GLPK's failures. Its API calls abort the process on misuse unless an error hook is set; the
 * hook here jumps back to ts_partition_solve, which frees GLPK's environment and returns
 * TS_ERR_EXTERNAL with what GLPK printed (GLPK reference manual, glp_error_hook). Its solvers
 * return a code instead: every solver call goes through GLPK_CHECK_GOTO, which keeps the code in
 * `rc` for the caller to interpret the ones this module handles (stopped by the node budget, no
 * feasible LP) and
 * fails on every other with GLPK's name for it and glpk.h's words (GLPK has no strerror). */
static const char *glpk_rc_string(int rc) {
    switch (rc) {
#define RC(code, words)                                                                                case code: return #code " (" words ")"
        RC(0, "success");
        RC(GLP_EBADB, "invalid basis");
        RC(GLP_ESING, "singular matrix");
        RC(GLP_ECOND, "ill-conditioned matrix");
        RC(GLP_EBOUND, "invalid bounds");
        RC(GLP_EFAIL, "solver failed");
        RC(GLP_EOBJLL, "objective lower limit reached");
        RC(GLP_EOBJUL, "objective upper limit reached");
        RC(GLP_EITLIM, "iteration limit exceeded");
        RC(GLP_ETMLIM, "time limit exceeded");
        RC(GLP_ENOPFS, "no primal feasible solution");
        RC(GLP_ENODFS, "no dual feasible solution");
        RC(GLP_EROOT, "root LP optimum not provided");
        RC(GLP_ESTOP, "search terminated by application");
        RC(GLP_EMIPGAP, "relative mip gap tolerance reached");
        RC(GLP_ENOFEAS, "no primal/dual feasible solution");
        RC(GLP_ENOCVG, "no convergence");
        RC(GLP_EINSTAB, "numerical instability");
        RC(GLP_EDATA, "invalid data");
        RC(GLP_ERANGE, "result out of range");
#undef RC
    default: return "an unknown return code";
    }
}

static int glpk_rc_handled(int rc) {
    return rc == 0 || rc == GLP_ESTOP || rc == GLP_ENOPFS || rc == GLP_ENODFS;
}

#define GLPK_CHECK_GOTO(call, rc, res, label)                                                      \
    do {                                                                                           \
        (rc) = (call);                                                                             \
        if (!glpk_rc_handled(rc)) {                                                                \
            (res) = TS_FAIL(TS_ERR_EXTERNAL, "GLPK %s returned %s, code %d", #call,                \
                            glpk_rc_string(rc), (rc));                                             \
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
            for (int ch = 0; ch < p->vpp; ch++)
                out->layers[ts_sched_chunk(p->schedule, pp, p->vpp, s, ch)] = ts_part_spread(n, p->vpp, ch);
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

/* The work budget of the whole search, in branch-and-bound nodes: a count, never wall-clock time
 * (tm_lim), so the same problem gets the same split on a loaded machine. glp_iocp has no node
 * limit; the callback (GLPK reference manual, glp_ios_tree_size and glp_ios_terminate) stops a
 * glp_intopt run once the nodes of this run (t_cnt: every node created, removed ones included)
 * and of the runs before it reach the budget. GLPK visits nodes in the same order for the same
 * program (no randomness, no clock), so the stop lands on the same node every time. */
typedef struct {
    long limit;   /* nodes allowed over the whole search */
    long used;    /* nodes of the finished glp_intopt runs */
    long run;     /* nodes of the run in progress */
} node_budget;

static void count_nodes(glp_tree *tree, void *info) {
    node_budget *nb = info;
    int active = 0, current = 0, total = 0;
    glp_ios_tree_size(tree, &active, &current, &total);
    nb->run = total;
    if (nb->used + nb->run >= nb->limit) glp_ios_terminate(tree);
}

static long nodes_left(const node_budget *nb) { return nb->limit - nb->used; }

/* glp_intopt's parameters: presolve, silent, stopped by the node budget. */
static void intopt_parm(glp_iocp *parm, node_budget *nb) {
    glp_init_iocp(parm);
    parm->presolve = GLP_ON;
    parm->msg_lev = GLP_MSG_OFF;
    parm->cb_func = count_nodes;
    parm->cb_info = nb;
    nb->run = 0;
}

/* After a glp_intopt run: its nodes join the used ones. */
static void end_run(node_budget *nb) {
    nb->used += nb->run > 0 ? nb->run : 1; /* a run that branched nowhere still spent a root LP */
    nb->run = 0;
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
                double most = ts_part_count_cap(p, t, s, k, kind_count[t]);
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
 * GLPK's answer is proved optimal, 0 when the node budget stopped it; `out` keeps the better split. */
static ts_status step_phase(const ts_partition_problem *p, const columns *c, builder *b, const int *kind_count,
                            double ts, node_budget *nb, ts_split *out, ts_split *trial, double *val, int *proven) {
    ts_status res = TS_OK;
    glp_prob *lp = b->lp;
    int pp = p->pp, rc = 0;
    double m = p->microbatches, beta = p->bubble_per_stage;
    *proven = 1;
    if (beta <= 0 || m <= beta) return TS_OK; /* then the step is m·T: the stage optimum is the step optimum */
    double f_best = ts_partition_objective_s(p, out), sum_min = ts_part_least_sum_s(p);
    if (ts_part_sum_s(out) <= sum_min * (1 + 1e-12)) return TS_OK;
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
    if (nodes_left(nb) <= 0) {
        *proven = 0;
        return TS_OK;
    }
    glp_iocp parm;
    intopt_parm(&parm, nb);
    GLPK_CHECK_GOTO(glp_intopt(lp, &parm), rc, res, exit);
    end_run(nb);
    int st = glp_mip_status(lp);
    *proven = rc == 0 && st == GLP_OPT;
    if (rc != GLP_ENOPFS && rc != GLP_ENODFS && (st == GLP_OPT || st == GLP_FEAS)) {
        for (int j = 1; j <= b->n_cols; j++) val[j] = glp_mip_col_val(lp, j);
        read_split(p, c, val, kind_count, trial);
        ts_part_best_policies(p, trial);
        if (trial->fits && ts_partition_objective_s(p, trial) < f_best * (1 - 1e-12)) {
            memcpy(out->layers, trial->layers, (size_t)pp * p->vpp * sizeof *out->layers);
            memcpy(out->recompute, trial->recompute, (size_t)pp * sizeof *out->recompute);
            ts_partition_evaluate(p, out);
        }
    }
exit:
    return res;
}

/* Scales: times by the slowest layer, bytes by the usable memory; and the layers of each kind. */
static void scales_of(const ts_partition_problem *p, double *ts, double *bs, int *kind_count) {
    *ts = 0;
    for (int t = 0; t < p->n_kinds; t++)
        for (int k = 0; k < K_POL; k++) *ts = fmax(*ts, p->time_s[t][k]);
    if (*ts <= 0) *ts = 1;
    *bs = p->usable_bytes > 0 ? p->usable_bytes : 1;
    for (int x = 0; x < p->layers; x++) kind_count[p->kind[x]]++;
}

/* A column by its indices (the top's names; `c` and `pp` in scope). */
#define X(t, s, k) c->x[((t) * pp + (s)) * K_POL + (k)]
#define H(t, s, k) c->h[((t) * pp + (s)) * K_POL + (k)]
#define P(s, k) c->pol[(s) * K_POL + (k)]
#define E(s, k) c->e[(s) * K_POL + (k)]

/* The columns: u and y of several runs; per stage and allowed policy p, X of each kind it can
 * hold (bounded by count_cap), h where a kind's peak exceeds the fixed parts', e where the stage
 * has a transient; T last. Then the row buffers over them. */
static ts_status add_columns(const ts_partition_problem *p, columns *c, builder *b, const int *kind_count) {
    ts_status res = TS_OK;
    int pp = p->pp, V = pp * p->vpp, R = c->n_runs, KT = p->n_kinds;
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
                int cap = kind_count[t] ? ts_part_count_cap(p, t, s, k, kind_count[t]) : 0;
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
    b->n_cols = glp_get_num_cols(b->lp);
    b->coef = calloc((size_t)b->n_cols + 1, sizeof *b->coef);
    b->ind = calloc((size_t)b->n_cols + 1, sizeof *b->ind);
    b->val = calloc((size_t)b->n_cols + 1, sizeof *b->val);
    TS_ALLOC_GOTO(b->coef, res, exit);
    TS_ALLOC_GOTO(b->ind, res, exit);
    TS_ALLOC_GOTO(b->val, res, exit);
exit:
    return res; /* the buffers are ts_partition_solve's to free */
}

/* Contiguity with one run: any counts are contiguous; each stage holds at least one layer per
 * chunk and all layers are placed. */
static void add_one_run_rows(const ts_partition_problem *p, const columns *c, builder *b) {
    int pp = p->pp, t = c->run_kind[0];
    for (int s = 0; s < pp; s++) {
        for (int k = 0; k < K_POL; k++)
            if (P(s, k) && X(t, s, k)) b->coef[X(t, s, k)] = 1;
        flush_row(b, p->vpp, INFINITY);
    }
    for (int s = 0; s < pp; s++)
        for (int k = 0; k < K_POL; k++)
            if (P(s, k) && X(t, s, k)) b->coef[X(t, s, k)] = 1;
    flush_row(b, p->layers, p->layers);
}

/* Contiguity with several runs, the boundary variables (see the top): run r+1 starts only once
 * run r is whole, boundaries in order, every virtual stage at least one layer, and each stage's
 * count of a kind the sum over its chunks. */
static void add_boundary_rows(const ts_partition_problem *p, const columns *c, builder *b, const int *kind_count) {
    int pp = p->pp, V = pp * p->vpp, R = c->n_runs, KT = p->n_kinds;
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
    /* Σ_k X[t][s][k] = Σ_c N[t][g(s, c)] (g: the schedule's placement) */
    for (int s = 0; s < pp; s++)
        for (int t = 0; t < KT; t++) {
            if (kind_count[t] == 0) continue;
            double k0 = 0;
            for (int k = 0; k < K_POL; k++)
                if (P(s, k) && X(t, s, k)) b->coef[X(t, s, k)] = 1;
            for (int ch = 0; ch < p->vpp; ch++)
                k0 += add_count(b, c, V, t, ts_sched_chunk(p->schedule, pp, p->vpp, s, ch), -1);
            flush_row(b, -k0, -k0);
        }
}

/* Interleaving with several runs: a stage's chunks differ by at most one layer and the earlier
 * chunks take the extra ones, 0 <= N[g(s,c)] - N[g(s,c+1)] and N[g(s,0)] - N[g(s,v-1)] <= 1, as
 * the one-run split spreads them (ts_part_spread). The objective sees only stage totals, so
 * without these rows GLPK may return any contiguous chunks (DeepSeek-V3 at pp=4, vpp=4 came back
 * 1+1+1+13 per stage); the interleaved schedule then idles for the long chunk while planner/
 * stages.c charges the bubble of equal chunks, (p-1)/v of a stage (Narayanan et al. SC'21
 * §2.2.2): `tessera sim` of such a split ran 45% slower than its closed form. Which chunk takes
 * the extra layer matters too: the interleaved simulation wants the heavier chunks first and the
 * model's last chunk, which also runs the head, the loss and the MTP modules, lighter by that
 * work (ts_part_tail_layers). DeepSeek-V3 on 256 GB200 (TP1 PP4 VP4 EP64) simulates within 2% of
 * its closed form so, 5-11% above it with the other orders of the same stage totals
 * (docs/moe.md). The brute force and the heuristic keep the same rule (ts_part_chunks_even). */
static void chunk_pair_row(const ts_partition_problem *p, const columns *c, builder *b, int s, int c1, int c2,
                           double lo, double hi) {
    int pp = p->pp, V = pp * p->vpp;
    int g1 = ts_sched_chunk(p->schedule, pp, p->vpp, s, c1), g2 = ts_sched_chunk(p->schedule, pp, p->vpp, s, c2);
    /* the model's last chunk counts its fixed work as layers (ts_part_tail_layers) */
    int tail = ts_part_tail_layers(p);
    double k0 = (g1 == V - 1 ? tail : 0) - (g2 == V - 1 ? tail : 0);
    for (int t = 0; t < p->n_kinds; t++) {
        k0 += add_count(b, c, V, t, g1, 1);
        k0 += add_count(b, c, V, t, g2, -1);
    }
    flush_row(b, lo - k0, hi - k0);
}

static void add_even_chunk_rows(const ts_partition_problem *p, const columns *c, builder *b) {
    for (int s = 0; s < p->pp; s++) {
        for (int ch = 0; ch + 1 < p->vpp; ch++) chunk_pair_row(p, c, b, s, ch, ch + 1, 0, 1);
        if (p->vpp > 2) chunk_pair_row(p, c, b, s, 0, p->vpp - 1, 0, 1);
    }
}

/* Stage s under policy k: layers only under the chosen policy, a kind's peak once it is present,
 * the fixed parts' transient, and the memory. */
static void add_policy_rows(const ts_partition_problem *p, const columns *c, builder *b, int s, int k, double bs) {
    int pp = p->pp, KT = p->n_kinds;
    for (int t = 0; t < KT; t++) {
        if (!X(t, s, k)) continue;
        int cap = (int)glp_get_col_ub(b->lp, X(t, s, k));
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
    /* Memory under policy k, vanishing unless chosen (the perspective of the stage's memory:
     * with p fractional, proportionally less room, which keeps the LP tight). */
    b->coef[P(s, k)] = (p->fixed_state_bytes[s] + p->in_flight[s] * p->fixed_act_bytes[s * K_POL + k]) / bs - 1;
    for (int t = 0; t < KT; t++)
        if (X(t, s, k)) b->coef[X(t, s, k)] = (p->state_bytes[t] + p->in_flight[s] * p->act_bytes[t][k]) / bs;
    if (E(s, k)) b->coef[E(s, k)] = 1;
    flush_row(b, -INFINITY, 0);
}

/* Each stage: one policy, the rows under each, and its time T ≥ τ_s. */
static void add_stage_rows(const ts_partition_problem *p, const columns *c, builder *b, double ts, double bs) {
    int pp = p->pp, KT = p->n_kinds;
    for (int s = 0; s < pp; s++) {
        for (int k = 0; k < K_POL; k++)
            if (P(s, k)) b->coef[P(s, k)] = 1;
        flush_row(b, 1, 1);
        for (int k = 0; k < K_POL; k++)
            if (P(s, k)) add_policy_rows(p, c, b, s, k, bs);
        b->coef[c->T] = 1;
        for (int k = 0; k < K_POL; k++) {
            if (!P(s, k)) continue;
            b->coef[P(s, k)] = -p->fixed_time_s[s * K_POL + k] / ts;
            for (int t = 0; t < KT; t++)
                if (X(t, s, k)) b->coef[X(t, s, k)] = -p->time_s[t][k] / ts;
        }
        flush_row(b, 0, INFINITY);
    }
}

#undef X
#undef H
#undef P
#undef E

/* The program (see the top), minimising T; its size in `info`. */
static ts_status build_program(const ts_partition_problem *p, columns *c, builder *b, const int *kind_count,
                               double ts, double bs, ts_partition_info *info) {
    glp_set_obj_dir(b->lp, GLP_MIN);
    TS_CHECK(add_columns(p, c, b, kind_count));
    if (c->n_runs == 1) add_one_run_rows(p, c, b);
    else {
        add_boundary_rows(p, c, b, kind_count);
        add_even_chunk_rows(p, c, b);
    }
    add_stage_rows(p, c, b, ts, bs);
    info->rows = glp_get_num_rows(b->lp);
    info->cols = b->n_cols;
    info->integer_cols = glp_get_num_int(b->lp);
    return TS_OK;
}

/* The search over T (see the top) and what its steps share. */
typedef struct {
    const ts_partition_problem *p;
    const columns *c;
    builder *b;
    ts_partition_info *info;
    int kind_count[TS_PART_MAX_KINDS]; /* layers of each kind */
    double ts, bs;   /* the scales: seconds of the slowest layer, usable bytes */
    double *levels;  /* (n_levels) the stage times the optimum is one of, scaled; NULL: too many */
    int n_levels;
    int found;       /* a split fits; `out` holds the best */
    int unknown;     /* a probe ran out of nodes: what was not found is not proven infeasible */
    int lo, hi;      /* levels[lo] infeasible, levels[hi] feasible */
    double lo_s, hi_s; /* the same as scaled times (bisecting T itself when levels is NULL) */
    node_budget nodes; /* GLPK's work budget over every probe */
    double *val;     /* (n_cols + 1) a solution's column values */
    ts_split trial;  /* a probe's split */
} t_search;

/* The level the next probe caps T at, in *cap_t (infinite before any split: is one feasible at
 * all?) and its index in *probe (-1 when none); 0 when the phase is done. Phase 2 first probes
 * the level just below the best split's. */
static int next_probe(const t_search *q, int phase, int first_probe, double *cap_t, int *probe) {
    *cap_t = INFINITY;
    *probe = -1;
    if (q->found && q->n_levels > 0) {
        if (q->hi - q->lo <= 1) return 0;
        *probe = phase == 2 && first_probe ? q->hi - 1 : q->lo + (q->hi - q->lo) / 2;
        *cap_t = q->levels[*probe];
    } else if (q->found) { /* too many levels to list: bisect T itself, to 1e-4 */
        if (q->hi_s - q->lo_s <= 1e-4 * q->hi_s) return 0;
        *cap_t = phase == 2 && first_probe ? q->hi_s * (1 - 1e-4) : (q->lo_s + q->hi_s) / 2;
    } else if (phase == 1 && !first_probe) {
        return 0;
    }
    return 1;
}

/* GLPK's answer with T capped at cap_t: *feasible 1 (q->trial holds the split, each stage at
 * its best policy), 0, or -1 when the node budget is spent before it runs. */
static ts_status probe_glpk(t_search *q, double cap_t, int *feasible) {
    ts_status res = TS_OK;
    glp_prob *lp = q->b->lp;
    int rc = 0;
    *feasible = 0;
    cap_level(q->p, q->c, lp, q->kind_count, cap_t, q->ts);
    if (nodes_left(&q->nodes) <= 0) {
        q->unknown = 1;
        *feasible = -1;
        return TS_OK;
    }
    glp_iocp parm;
    intopt_parm(&parm, &q->nodes);
    GLPK_CHECK_GOTO(glp_intopt(lp, &parm), rc, res, exit);
    end_run(&q->nodes);
    q->info->glpk_calls++;
    int st = glp_mip_status(lp);
    *feasible = rc != GLP_ENOPFS && rc != GLP_ENODFS && (st == GLP_OPT || st == GLP_FEAS);
    if (rc == GLP_ESTOP && !*feasible) q->unknown = 1; /* not proven infeasible */
    if (*feasible) {
        for (int j = 1; j <= q->b->n_cols; j++) q->val[j] = glp_mip_col_val(lp, j);
        read_split(q->p, q->c, q->val, q->kind_count, &q->trial);
        ts_part_best_policies(q->p, &q->trial);
    }
exit:
    return res;
}

/* A probe's split is the best so far. Its own slowest stage may sit below the probed level: the
 * bisection's upper end jumps there. */
static void take_trial(t_search *q, ts_split *out) {
    int pp = q->p->pp, V = pp * q->p->vpp;
    q->found = 1;
    memcpy(out->layers, q->trial.layers, (size_t)V * sizeof *out->layers);
    memcpy(out->recompute, q->trial.recompute, (size_t)pp * sizeof *out->recompute);
    q->hi_s = q->trial.max_stage_s / q->ts;
    q->hi = 0;
    while (q->hi < q->n_levels && q->levels[q->hi] < q->hi_s * (1 - 1e-9)) q->hi++;
}

/* Phase 1, no GLPK: bisect with the heuristic alone (exact for one kind or vpp = 1).
 * Phase 2, GLPK: prove the level just below the heuristic's best infeasible — optimality in
 * one program when the heuristic was exact — else bisect further below with GLPK. */
static ts_status bisect(t_search *q, ts_split *out) {
    for (int phase = 1; phase <= 2; phase++) {
        int first_probe = 1;
        q->lo = -1; /* phase 1's failures prove nothing */
        q->lo_s = 0;
        for (;;) {
            double cap_t;
            int probe, feasible = 0;
            if (!next_probe(q, phase, first_probe, &cap_t, &probe)) break;
            first_probe = 0;
            if (phase == 1) {
                if (q->p->glpk_only) break;
                feasible = ts_part_heuristic(q->p, q->kind_count, cap_t * q->ts, &q->trial);
            } else {
                TS_CHECK(probe_glpk(q, cap_t, &feasible));
                if (feasible < 0) break; /* out of nodes */
            }
            if (feasible) {
                take_trial(q, out);
            } else if (!q->found) {
                if (phase == 2) break; /* GLPK: nothing fits at any level */
            } else {
                q->lo = probe;
                q->lo_s = cap_t;
            }
        }
    }
    return TS_OK;
}

/* After the search: why nothing was found (TS_ERR_INFEASIBLE, info->why), or the best split
 * after the step objective's phase, with its status and the bound proved. */
static ts_status conclude(t_search *q, ts_split *out) {
    const ts_partition_problem *p = q->p;
    ts_partition_info *info = q->info;
    if (!q->found) {
        if (q->unknown) {
            info->status = TS_PART_NO_SPLIT;
            snprintf(info->why, sizeof info->why,
                     "GLPK found no split of %d layers over %d×%d stages within the limit of %ld "
                     "branch-and-bound nodes", p->layers, p->pp, p->vpp, q->nodes.limit);
        } else {
            info->status = TS_PART_INFEASIBLE;
            ts_part_explain_infeasible(p, info);
        }
        return TS_FAIL(TS_ERR_INFEASIBLE, "%s", info->why);
    }
    ts_partition_evaluate(p, out);
    /* The slowest stage's bound: proved (the optimum, or the level GLPK found infeasible) or
     * the relaxation's. */
    double t_bound = q->unknown ? fmin(out->max_stage_s, fmax(q->lo_s * q->ts, ts_part_relaxed_bound_s(p)))
                                : out->max_stage_s;
    if (p->objective == TS_PART_OBJ_STEP) {
        int proven = 0;
        if (!q->unknown)
            TS_CHECK(step_phase(p, q->c, q->b, q->kind_count, q->ts, &q->nodes, out,
                                &q->trial, q->val, &proven));
        q->unknown |= !proven;
        double beta = p->bubble_per_stage > 0 && p->microbatches > p->bubble_per_stage ? p->bubble_per_stage : 0;
        info->bound_s = (p->microbatches - beta) * t_bound + beta * ts_part_least_sum_s(p);
    } else {
        info->bound_s = t_bound;
    }
    info->status = q->unknown ? TS_PART_NODE_LIMIT : TS_PART_OPTIMAL;
    out->status = info->status;
    out->objective_s = ts_partition_objective_s(p, out);
    if (info->status == TS_PART_OPTIMAL || info->bound_s > out->objective_s) info->bound_s = out->objective_s;
    out->bound_s = info->bound_s;
    return TS_OK;
}

/* Builds the program on b->lp and searches T. TS_OK with `out` init'ed and filled; otherwise
 * `out` is left empty. */
static ts_status solve_glpk(const ts_partition_problem *p, columns *c, builder *b, ts_split *out,
                            ts_partition_info *info) {
    ts_status res = TS_OK;
    t_search q = {.p = p, .c = c, .b = b, .info = info};
    scales_of(p, &q.ts, &q.bs, q.kind_count);
    TS_CHECK_GOTO(build_program(p, c, b, q.kind_count, q.ts, q.bs, info), res, exit);
    TS_CHECK_GOTO(ts_part_stage_time_levels(p, q.kind_count, q.ts, &q.levels, &q.n_levels), res, exit);
    q.nodes.limit = p->node_limit > 0 ? p->node_limit : TS_PART_DEFAULT_NODES;
    q.lo = -1;
    q.hi = q.n_levels;
    q.hi_s = INFINITY;
    q.val = calloc((size_t)b->n_cols + 1, sizeof *q.val);
    TS_ALLOC_GOTO(q.val, res, exit);
    TS_CHECK_GOTO(ts_split_init(out, p->pp, p->vpp), res, exit);
    TS_CHECK_GOTO(ts_split_init(&q.trial, p->pp, p->vpp), res, exit);
    out->schedule = q.trial.schedule = p->schedule;
    TS_CHECK_GOTO(bisect(&q, out), res, exit);
    TS_CHECK_GOTO(conclude(&q, out), res, exit);
exit:
    info->nodes = q.nodes.used;
    free(q.levels);
    free(q.val);
    ts_split_free(&q.trial);
    if (res != TS_OK) ts_split_free(out);
    return res;
}

/* One search on p's node budget (ts_partition_solve's contract). */
static ts_status solve_once(const ts_partition_problem *p, ts_split *out, ts_partition_info *info) {
    *info = (ts_partition_info){0};
    *out = (ts_split){0};
    double t0 = now_s();
    int pp = p->pp, V = pp * p->vpp, L = p->layers;
    if (p->n_kinds < 1 || p->n_kinds > TS_PART_MAX_KINDS)
        return TS_FAIL(TS_ERR_INPUT, "partition: %d layer kinds, expected 1..%d", p->n_kinds, TS_PART_MAX_KINDS);
    if (V > L) {
        info->status = TS_PART_INFEASIBLE;
        ts_part_explain_infeasible(p, info);
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
        /* `out` is the caller's and freed; solve_glpk's scratch (levels, values, the trial split)
         * went with its frame and is not. */
        ts_split_free(out);
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

/* Whether a node-limited split is far enough above its proved bound to search again. */
static int worth_more_nodes(const ts_split *s, const ts_partition_info *info) {
    return info->status == TS_PART_NODE_LIMIT && s->objective_s > (1 + TS_PART_GAP) * info->bound_s;
}

ts_status ts_partition_solve(const ts_partition_problem *p, ts_split *out, ts_partition_info *info) {
    ts_status res = solve_once(p, out, info);
    ts_partition_problem more = *p;
    long nodes = info->nodes;
    double solve_s = info->solve_s;
    /* Deterministic: each run is a node count, so the same problem doubles the same times. */
    while (res == TS_OK && worth_more_nodes(out, info) && more.node_limit * 2 <= p->node_limit_max) {
        more.node_limit *= 2;
        ts_split_free(out);
        res = solve_once(&more, out, info);
        nodes += info->nodes;
        solve_s += info->solve_s;
    }
    info->nodes = nodes;
    info->solve_s = solve_s;
    return res;
}
