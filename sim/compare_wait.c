/* Wait versus transfer of communication ops (see compare_wait.h). */
#include "sim/compare_wait.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "program/layout.h"
#include "program/program.h"
#include "program/ranks.h"
#include "sim/compare.h"

/* A trace with each rank's first op (ops sorted by (rank, op), every rank's op indices 0..n-1). */
typedef struct {
    const ts_trace_ops *t;
    int n_ranks;
    int *first;       /* (n_ranks + 1) */
    double *before_s; /* (t->n) the latest end among the ops of the op's rank that started before it */
} indexed;

typedef struct {
    double start_s, end_s;
    int op, at; /* op index; position in the trace */
} started;

/* By start, then op index: the order a rank ran its ops in. */
static int by_start(const void *a, const void *b) {
    const started *x = a, *y = b;
    if (x->start_s != y->start_s) return x->start_s < y->start_s ? -1 : 1;
    return (x->op > y->op) - (x->op < y->op);
}

static void indexed_free(indexed *x) {
    free(x->first);
    free(x->before_s);
}

/* Each rank's ops in the order they started, and the running latest end before each: O(n log n)
 * where a scan per op would be quadratic in a rank's ops. */
static ts_status index_trace(const ts_trace_ops *t, indexed *x) {
    int n_ranks = t->n > 0 ? t->ops[t->n - 1].rank + 1 : 0;
    *x = (indexed){.t = t, .n_ranks = n_ranks, .first = calloc((size_t)n_ranks + 2, sizeof *x->first),
                   .before_s = malloc(((size_t)t->n + 1) * sizeof *x->before_s)};
    started *order = malloc(((size_t)t->n + 1) * sizeof *order);
    if (x->first == NULL || x->before_s == NULL || order == NULL) {
        free(order);
        indexed_free(x);
        return TS_FAIL(TS_ERR_NOMEM, "out of memory indexing %d ranks", n_ranks);
    }
    for (int i = 0; i < t->n; i++) {
        const ts_trace_op *o = &t->ops[i];
        x->first[o->rank + 1]++;
        order[i] = (started){o->start_s, o->start_s + o->dur_s, o->op, i}; /* ops are sorted by rank */
    }
    for (int r = 0; r < n_ranks; r++) x->first[r + 1] += x->first[r];
    for (int r = 0; r < n_ranks; r++) {
        int lo = x->first[r], n = x->first[r + 1] - lo;
        qsort(order + lo, (size_t)n, sizeof *order, by_start);
        double latest = -INFINITY;
        for (int k = lo; k < lo + n; k++) {
            x->before_s[order[k].at] = latest;
            latest = fmax(latest, order[k].end_s);
        }
    }
    free(order);
    return TS_OK;
}

static const ts_trace_op *op_at(const indexed *x, int rank, int op) {
    if (rank < 0 || rank >= x->n_ranks || op < 0 || op >= x->first[rank + 1] - x->first[rank]) return NULL;
    return &x->t->ops[x->first[rank] + op];
}

/* The end of the op that `o`'s rank ran before it: the latest end among the rank's ops that started
 * before it (the CPU executor and the serial simulator run a rank's ops one at a time), at most
 * `o`'s own end. */
static double previous_end(const indexed *x, const ts_trace_op *o) {
    return fmin(x->before_s[o - x->t->ops], o->start_s + o->dur_s);
}

static int same_phase(const ts_trace_op *a, const ts_trace_op *b) {
    size_t n = strcspn(a->name, " ");
    return strncmp(a->name, b->name, n) == 0 && (b->name[n] == ' ' || b->name[n] == 0);
}

/* The SEND that feeds RECV `o`: the k-th of the peer's sends to this stage with its chunk and phase,
 * where `o` is the k-th such receive of its rank (MPI matches messages of one source and tag in
 * order). NULL when there is none. */
static const ts_trace_op *matching_send(const indexed *m, const ts_layout *l, const ts_trace_op *o) {
    ts_coords c = ts_rank_coords(l, o->rank);
    int k = 0;
    for (int i = m->first[o->rank]; &m->t->ops[i] != o; i++) {
        const ts_trace_op *p = &m->t->ops[i];
        k += p->kind == TS_OP_RECV && p->peer == o->peer && p->chunk == o->chunk && same_phase(p, o);
    }
    int stage = c.pp;
    c.pp = o->peer;
    int peer = ts_rank_of(l, c);
    if (peer < 0 || peer >= m->n_ranks) return NULL;
    for (int i = m->first[peer]; i < m->first[peer + 1]; i++) {
        const ts_trace_op *p = &m->t->ops[i];
        if (p->kind == TS_OP_SEND && p->peer == stage && p->chunk == o->chunk && same_phase(p, o) && k-- == 0)
            return p;
    }
    return NULL;
}

/* When the measured transfer of `o` could start: its last member's arrival, or its send's start. */
static double transfer_start(const indexed *m, const ts_layout *l, const ts_trace_op *o) {
    double t = o->start_s;
    if (o->kind == TS_OP_RECV) {
        const ts_trace_op *s = matching_send(m, l, o);
        return s ? fmax(t, s->start_s) : t;
    }
    int size = ts_group_size(l, (ts_group)o->group), *members = malloc((size_t)size * sizeof *members);
    if (members == NULL) return t;
    ts_group_members(l, (ts_group)o->group, o->rank, members);
    for (int k = 0; k < size; k++) {
        const ts_trace_op *p = op_at(m, members[k], o->op);
        if (p) t = fmax(t, p->start_s);
    }
    free(members);
    return t;
}

ts_status ts_trace_transfers(const ts_trace_ops *m, const ts_layout *l, double *transfer_s, int *send_of) {
    indexed x;
    TS_CHECK(index_trace(m, &x));
    for (int i = 0; i < m->n; i++) {
        const ts_trace_op *o = &m->ops[i];
        transfer_s[i] = NAN;
        if (send_of) send_of[i] = -1;
        if (o->kind == TS_OP_RECV && send_of) {
            const ts_trace_op *snd = matching_send(&x, l, o);
            send_of[i] = snd ? (int)(snd - m->ops) : -1;
        }
        if ((o->kind == TS_OP_COLL && o->group >= 0 && o->group < TS_GROUP_COUNT) || o->kind == TS_OP_RECV)
            transfer_s[i] = o->start_s + o->dur_s - transfer_start(&x, l, o);
    }
    indexed_free(&x);
    return TS_OK;
}

static ts_wait_kind *kind_of(ts_compare_waits *w, const ts_trace_op *o) {
    char label[48];
    if (o->kind == TS_OP_COLL) snprintf(label, sizeof label, "collective:%s", o->coll);
    else snprintf(label, sizeof label, "%s", ts_op_kind_names[o->kind]);
    for (int k = 0; k < w->n_kinds; k++)
        if (strcmp(w->kinds[k].kind, label) == 0) return &w->kinds[k];
    ts_wait_kind *k = &w->kinds[w->n_kinds++];
    *k = (ts_wait_kind){0};
    snprintf(k->kind, sizeof k->kind, "%s", label);
    return k;
}

static ts_status split(const indexed *s, const indexed *m, const ts_layout *l, double speed, ts_compare_waits *w) {
    for (int i = 0; i < s->t->n; i++) {
        const ts_trace_op *a = &s->t->ops[i], *b = op_at(m, a->rank, a->op);
        if (a->kind != TS_OP_COLL && a->kind != TS_OP_RECV) continue;
        if (b == NULL || b->kind != a->kind || (a->kind == TS_OP_COLL && (b->group < 0 || b->group >= TS_GROUP_COUNT)))
            return TS_FAIL(TS_ERR_INPUT, "rank %d op %d \"%s\": no measured op of its kind and group to split", a->rank,
                           a->op, a->name);
        double s_prev = previous_end(s, a), m_prev = previous_end(m, b), t0 = transfer_start(m, l, b);
        ts_wait_kind *k = kind_of(w, a);
        k->ops++;
        k->simulated_s += a->dur_s;
        k->simulated_wait_s += isfinite(s_prev) ? fmax(0, a->start_s - s_prev) : 0;
        k->measured_transfer_s += speed * (b->start_s + b->dur_s - t0);
        k->measured_wait_s += speed * (isfinite(m_prev) ? fmax(0, t0 - m_prev) : t0 - b->start_s);
    }
    for (int k = 0; k < w->n_kinds; k++) {
        ts_wait_kind *x = &w->kinds[k];
        x->transfer_error = x->measured_transfer_s > 0 ? (x->simulated_s - x->measured_transfer_s) / x->measured_transfer_s
                                                       : NAN;
    }
    return TS_OK;
}

ts_status ts_compare_waits_read(const char *sim_path, const char *measured_path, double speed,
                                ts_compare_waits *out) {
    *out = (ts_compare_waits){0};
    ts_trace_ops st, mt = {0};
    indexed s = {0}, m = {0};
    ts_layout l;
    TS_CHECK(ts_trace_ops_read(sim_path, &st));
    ts_status res = ts_trace_ops_read(measured_path, &mt);
    if (res == TS_OK) res = ts_layout_parse(measured_path, mt.layout, &l);
    if (res == TS_OK) res = index_trace(&st, &s);
    if (res == TS_OK) res = index_trace(&mt, &m);
    if (res == TS_OK && (out->kinds = calloc((size_t)st.n + 1, sizeof *out->kinds)) == NULL)
        res = TS_FAIL(TS_ERR_NOMEM, "out of memory for %d ops", st.n);
    if (res == TS_OK) res = split(&s, &m, &l, speed, out);
    if (res != TS_OK) ts_compare_waits_free(out);
    indexed_free(&s);
    indexed_free(&m);
    ts_trace_ops_free(&st);
    ts_trace_ops_free(&mt);
    return res;
}

void ts_compare_waits_free(ts_compare_waits *w) {
    free(w->kinds);
    *w = (ts_compare_waits){0};
}

/* cJSON writes a NAN as null. */
ts_status ts_compare_waits_json(const ts_compare_waits *w, cJSON *root) {
    cJSON *arr = cJSON_AddArrayToObject(root, "waits");
    if (arr == NULL) return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory");
    for (int k = 0; k < w->n_kinds; k++) {
        const ts_wait_kind *x = &w->kinds[k];
        cJSON *e = cJSON_CreateObject();
        if (e == NULL || !cJSON_AddItemToArray(arr, e)) {
            cJSON_Delete(e);
            return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory");
        }
        if (!cJSON_AddStringToObject(e, "kind", x->kind) || !cJSON_AddNumberToObject(e, "ops", x->ops) ||
            !cJSON_AddNumberToObject(e, "simulated_s", x->simulated_s) ||
            !cJSON_AddNumberToObject(e, "measured_transfer_s", x->measured_transfer_s) ||
            !cJSON_AddNumberToObject(e, "transfer_error", x->transfer_error) ||
            !cJSON_AddNumberToObject(e, "simulated_wait_s", x->simulated_wait_s) ||
            !cJSON_AddNumberToObject(e, "measured_wait_s", x->measured_wait_s))
            return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory");
    }
    return TS_OK;
}
