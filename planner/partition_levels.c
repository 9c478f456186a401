/* The search over T without GLPK (see partition_ilp.c's top comment for the search): the
 * stage times the optimum is one of, the bounds a relaxation proves, each stage's fastest
 * policy once the layers are given, and the primal heuristic that answers the bisection's
 * probes before GLPK is asked. Times are in the program's scaled units where `ts` appears. */
#include <math.h>
#include <stdlib.h>

#include "planner/partition_impl.h"
#include "program/schedule.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Largest count of kind-t layers stage s can hold under policy k by memory alone (a valid bound
 * of X[t][s][k]: the tighter it is, the tighter GLPK's LP relaxation). */
int ts_part_count_cap(const ts_partition_problem *p, int t, int s, int k, int kind_count) {
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
ts_status ts_part_stage_time_levels(const ts_partition_problem *p, const int *kind_count, double ts, double **out,
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
            for (int t = 0; t < KT; t++)
                combos *= 1 + (kind_count[t] ? ts_part_count_cap(p, t, s, k, kind_count[t]) : 0);
            total += combos;
        }
    if (total > MAX_LEVELS) return TS_OK;
    double *lv = malloc((size_t)(total > 0 ? total : 1) * sizeof *lv);
    if (lv == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for %.0f stage-time levels", total);
    int n = 0;
    for (int s = 0; s < pp; s++)
        for (int k = 0; k < K_POL; k++) {
            if (!policy_allowed(p, k)) continue;
            for (int t = 0; t < KT; t++) cap[t] = kind_count[t] ? ts_part_count_cap(p, t, s, k, kind_count[t]) : 0;
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

/* A lower bound of the slowest stage's time that needs no program: the fluid balance (every
 * layer and fixed part at its fastest allowed policy, spread evenly over the stages) and each
 * stage's least fixed time plus vpp of the fastest layers. What a node limit reports when GLPK
 * proved nothing better. */
double ts_part_relaxed_bound_s(const ts_partition_problem *p) {
    double most, total = relaxed_sums(p, &most);
    return fmax(total / p->pp, most);
}

double ts_part_least_sum_s(const ts_partition_problem *p) {
    double most;
    return relaxed_sums(p, &most);
}

/* Given the layers, stages are independent: each takes its fastest policy that fits (the
 * slowest stage cannot get slower, and no stage recomputes for nothing). */
void ts_part_best_policies(const ts_partition_problem *p, ts_split *s) {
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

/* Each stage's layers over its chunks as ts_part_spread does, the earlier ones heavier: the even
 * split's remainder sits on the middle chunks (program/schedule.h ts_even_split), which the
 * chunk rule (ts_part_chunks_even) refuses when a stage's later chunk gets it. */
static void respread_chunks(const ts_partition_problem *p, int *layers) {
    int V = p->pp * p->vpp, tail = ts_part_tail_layers(p);
    for (int s = 0; s < p->pp; s++) {
        int n = 0, holds_tail = 0;
        for (int ch = 0; ch < p->vpp; ch++) {
            int g = ts_sched_chunk(p->schedule, p->pp, p->vpp, s, ch);
            n += layers[g];
            holds_tail |= g == V - 1;
        }
        /* the model's last chunk counted with its fixed work, then given that many fewer */
        if (holds_tail) n += tail;
        for (int ch = 0; ch < p->vpp; ch++) {
            int g = ts_sched_chunk(p->schedule, p->pp, p->vpp, s, ch);
            layers[g] = ts_part_spread(n, p->vpp, ch) - (g == V - 1 ? tail : 0);
        }
    }
}

/* A split whose stages all take at most cap_s, found without GLPK when it is easy: with vpp = 1
 * each stage takes the longest prefix of what is left that fits (greedy is exact for
 * contiguous splits whose feasibility survives dropping layers); with one kind of layer only
 * counts matter, so each stage takes up to the most it can hold; otherwise the uniform split with
 * each stage's best policy. Returns 1 with `s` filled (policies: best_policies) or 0. */
int ts_part_heuristic(const ts_partition_problem *p, const int *kind_count, double cap_s, ts_split *s) {
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
                int n = ts_part_count_cap(p, t, i, k, kind_count[t]);
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
            for (int ch = 0; ch < p->vpp; ch++)
                s->layers[ts_sched_chunk(p->schedule, pp, p->vpp, i, ch)] = ts_part_spread(count[i], p->vpp, ch);
        free(count);
    } else {
        ts_partition_uniform(p, TS_RECOMPUTE_NONE, s);
        respread_chunks(p, s->layers);
    }
    ts_part_best_policies(p, s);
    return s->fits && s->max_stage_s <= cap_s * (1 + 1e-9);
}
