/* Op-by-op comparison of a simulated and a measured trace (see compare.h). */
#include "sim/compare.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/stats.h"
#include "program/program.h"
#include "program/ranks.h"

/* One op event of a trace. Strings point into the cJSON tree, which outlives the events. */
typedef struct {
    int rank, op;
    const char *name, *cat, *coll;
    const cJSON *args;
    double start_s, dur_s;
} event;

typedef struct {
    cJSON *root;
    const char *path, *source, *layout, *model;
    double step_s;
    double gauge_flops_per_s; /* otherData's, 0 when absent */
    event *ev;
    int n;
    int *stage_of; /* (max rank + 1) stage of each rank from its process_name, -1 unknown */
    int n_ranks;
} trace;

static void trace_free(trace *t) {
    cJSON_Delete(t->root);
    free(t->ev);
    free(t->stage_of);
    *t = (trace){0};
}

static int by_rank_op(const void *a, const void *b) {
    const event *x = a, *y = b;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    return (x->op > y->op) - (x->op < y->op);
}

static const char *str_of(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int num_of(const cJSON *obj, const char *key, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) return 0;
    *out = v->valuedouble;
    return 1;
}

static ts_status not_a_trace(const char *path, const char *what) {
    return TS_FAIL(TS_ERR_INPUT, "%s: not a Tessera trace (%s); write one with tessera sim --trace or "
                                 "tessera run --trace", path, what);
}

/* How far an op event may lie from the step's start, in µs: one day. */
#define TRACE_MAX_US 86400e6

/* Reads one op event (ph "X"); metadata events fill the rank → stage table. */
static ts_status read_event(trace *t, const cJSON *e, int index) {
    const char *ph = str_of(e, "ph");
    double ts_us, dur_us;
    int64_t pid, op;
    /* Integers checked in range before any conversion: (int) of 1e300 is undefined. */
    if (ph == NULL || !ts_json_int_in(cJSON_GetObjectItemCaseSensitive(e, "pid"), 0, 10000000, &pid))
        return TS_FAIL(TS_ERR_INPUT, "%s: $.traceEvents[%d]: expected \"ph\" and a \"pid\" in [0, 1e7]",
                       t->path, index);
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
    if (strcmp(ph, "M") == 0) {
        const char *what = str_of(e, "name"), *name = str_of(args, "name");
        int rank, stage;
        if (what && strcmp(what, "process_name") == 0 && name &&
            sscanf(name, "rank %d (stage %d)", &rank, &stage) == 2 && rank == pid && rank < t->n_ranks &&
            stage >= 0 && stage < t->n_ranks) /* a stage holds at least one rank */
            t->stage_of[rank] = stage;
        return TS_OK;
    }
    if (strcmp(ph, "X") != 0) return TS_OK;
    event *v = &t->ev[t->n];
    if (!ts_json_int_in(cJSON_GetObjectItemCaseSensitive(args, "op"), 0, INT_MAX, &op) || !num_of(e, "ts", &ts_us) || !num_of(e, "dur", &dur_us) ||
        dur_us < 0 || (v->name = str_of(e, "name")) == NULL || (v->cat = str_of(e, "cat")) == NULL)
        return TS_FAIL(TS_ERR_INPUT, "%s: $.traceEvents[%d]: an op event needs \"name\", \"cat\", \"ts\", "
                       "\"dur\" ≥ 0 and \"args\": {\"op\"}", t->path, index);
    /* Tessera's traces count microseconds from the step's start on one clock (a rank may start a
     * little before it: ts < 0); an op a day away is no trace of a step. */
    if (ts_us < -TRACE_MAX_US || ts_us + dur_us > TRACE_MAX_US)
        return TS_FAIL(TS_ERR_INPUT,
                       "%s: $.traceEvents[%d]: expected \"ts\" and \"ts\" + \"dur\" within ±%.3g µs of the step's "
                       "start, got %g + %g", t->path, index, TRACE_MAX_US, ts_us, dur_us);
    v->rank = (int)pid;
    v->op = (int)op;
    v->coll = str_of(args, "coll");
    v->args = args;
    v->start_s = ts_us * 1e-6;
    v->dur_s = dur_us * 1e-6;
    t->n++;
    return TS_OK;
}

static ts_status trace_load(const char *path, trace *t) {
    *t = (trace){.path = path};
    TS_CHECK(ts_json_load_file(path, &t->root));
    const cJSON *events = cJSON_GetObjectItemCaseSensitive(t->root, "traceEvents");
    const cJSON *other = cJSON_GetObjectItemCaseSensitive(t->root, "otherData");
    if (!cJSON_IsArray(events)) return not_a_trace(path, "no \"traceEvents\" array");
    if (!cJSON_IsObject(other) || (t->source = str_of(other, "tessera")) == NULL ||
        (t->layout = str_of(other, "layout")) == NULL || (t->model = str_of(other, "model")) == NULL ||
        !num_of(other, "step_s", &t->step_s))
        return not_a_trace(path, "\"otherData\" lacks \"tessera\", \"layout\", \"model\" or \"step_s\"");
    if (!num_of(other, "gauge_flops_per_s", &t->gauge_flops_per_s) || t->gauge_flops_per_s < 0) t->gauge_flops_per_s = 0;
    int n = cJSON_GetArraySize(events);
    double max_pid = 0, pid;
    for (const cJSON *e = events->child; e; e = e->next)
        if (num_of(e, "pid", &pid) && pid > max_pid && pid <= 1e7) max_pid = pid;
    t->n_ranks = (int)max_pid + 1;
    t->ev = malloc(((size_t)n + 1) * sizeof *t->ev);
    t->stage_of = malloc((size_t)t->n_ranks * sizeof *t->stage_of);
    if (t->ev == NULL || t->stage_of == NULL)
        return TS_FAIL(TS_ERR_NOMEM, "%s: out of memory for %d events", path, n);
    for (int r = 0; r < t->n_ranks; r++) t->stage_of[r] = -1;
    int i = 0;
    for (const cJSON *e = events->child; e; e = e->next, i++) TS_CHECK(read_event(t, e, i));
    qsort(t->ev, (size_t)t->n, sizeof *t->ev, by_rank_op);
    for (i = 1; i < t->n; i++)
        if (t->ev[i].rank == t->ev[i - 1].rank && t->ev[i].op == t->ev[i - 1].op)
            return TS_FAIL(TS_ERR_INPUT, "%s: rank %d op %d appears twice", path, t->ev[i].rank, t->ev[i].op);
    return TS_OK;
}

/* The first event of `rank` in a sorted trace, or n when it has none; *count gets its events. */
static int rank_events(const trace *t, int rank, int *count) {
    int lo = 0, hi = t->n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (t->ev[mid].rank < rank) lo = mid + 1;
        else hi = mid;
    }
    int end = lo;
    while (end < t->n && t->ev[end].rank == rank) end++;
    *count = end - lo;
    return lo;
}

static double rel_error(double sim_s, double measured_s) {
    return measured_s > 0 ? (sim_s - measured_s) / measured_s : NAN;
}

static void kind_label(const event *e, char *buf, size_t cap) {
    if (e->coll) snprintf(buf, cap, "%s:%s", e->cat, e->coll);
    else snprintf(buf, cap, "%s", e->cat);
}

/* The index of `label` in c->kinds, added when new (kinds has room for every event). */
static int kind_index(ts_compare *c, const char *label) {
    for (int k = 0; k < c->n_kinds; k++)
        if (strcmp(c->kinds[k].kind, label) == 0) return k;
    ts_compare_kind *k = &c->kinds[c->n_kinds];
    *k = (ts_compare_kind){.median_abs_op_error = NAN};
    snprintf(k->kind, sizeof k->kind, "%s", label);
    return c->n_kinds++;
}

/* Checks that the traces hold the same program on the simulated ranks and sums their op times,
 * the measured ones × c->speed. */
static ts_status align(const trace *s, const trace *m, ts_compare *c, double *op_err, int *op_kind) {
    double f = c->speed;
    int n_err = 0;
    for (int i = 0; i < s->n;) {
        int rank = s->ev[i].rank, ns, nm;
        rank_events(s, rank, &ns);
        int j = rank_events(m, rank, &nm);
        if (nm == 0)
            return TS_FAIL(TS_ERR_INPUT, "%s has no ops of rank %d, which %s simulates: traces of "
                           "different layouts", m->path, rank, s->path);
        if (nm != ns)
            return TS_FAIL(TS_ERR_INPUT, "%s: rank %d: %d ops simulated in %s, %d measured: traces "
                           "of different step programs", m->path, rank, ns, s->path, nm);
        int stage = rank < s->n_ranks ? s->stage_of[rank] : -1;
        if (stage < 0 || stage >= c->n_stages)
            return TS_FAIL(TS_ERR_INPUT, "%s: rank %d has no \"rank R (stage S)\" process name", s->path, rank);
        double s_first = INFINITY, s_last = 0, m_first = INFINITY, m_last = 0;
        for (int k = 0; k < ns; k++, i++, j++) {
            const event *a = &s->ev[i], *b = &m->ev[j];
            if (a->op != b->op || strcmp(a->name, b->name) != 0 || strcmp(a->cat, b->cat) != 0)
                return TS_FAIL(TS_ERR_INPUT, "%s: rank %d: op %d \"%s\" (%s), but %s simulates op %d "
                               "\"%s\" (%s): traces of different step programs", m->path, rank, b->op, b->name,
                               b->cat, s->path, a->op, a->name, a->cat);
            char label[48];
            kind_label(a, label, sizeof label);
            int kx = kind_index(c, label);
            c->kinds[kx].ops++;
            c->kinds[kx].simulated_s += a->dur_s;
            c->kinds[kx].measured_s += f * b->dur_s;
            if (b->dur_s > 0) {
                op_err[n_err] = fabs(rel_error(a->dur_s, f * b->dur_s));
                op_kind[n_err++] = kx;
            }
            s_first = fmin(s_first, a->start_s), s_last = fmax(s_last, a->start_s + a->dur_s);
            m_first = fmin(m_first, b->start_s), m_last = fmax(m_last, b->start_s + b->dur_s);
        }
        ts_compare_stage *st = &c->stages[stage];
        st->ranks++;
        st->simulated_s += s_last - s_first;
        st->measured_s += f * (m_last - m_first);
        c->ops += ns;
    }
    /* Median absolute op error per kind: the kind's errors gathered, then sorted. */
    double *tmp = malloc(((size_t)n_err + 1) * sizeof *tmp);
    if (tmp == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for %d op errors", n_err);
    for (int k = 0; k < c->n_kinds; k++) {
        int n = 0;
        for (int e = 0; e < n_err; e++)
            if (op_kind[e] == k) tmp[n++] = op_err[e];
        if (n == 0) continue;
        c->kinds[k].median_abs_op_error = ts_median(tmp, n);
    }
    free(tmp);
    return TS_OK;
}

static int stage_count(const trace *t) {
    int n = 0;
    for (int r = 0; r < t->n_ranks; r++)
        if (t->stage_of[r] + 1 > n) n = t->stage_of[r] + 1;
    return n;
}

ts_status ts_compare_traces(const char *sim_path, const char *measured_path, ts_compare *out) {
    *out = (ts_compare){0};
    trace s, m;
    double *op_err = NULL;
    int *op_kind = NULL;
    ts_status res = trace_load(sim_path, &s);
    if (res == TS_OK) res = trace_load(measured_path, &m);
    else m = (trace){0};
    if (res != TS_OK) goto exit;
    if (strcmp(s.model, m.model) != 0 || strcmp(s.layout, m.layout) != 0) {
        res = TS_FAIL(TS_ERR_INPUT, "%s is %s %s but %s is %s %s: traces of different programs", sim_path,
                      s.model, s.layout, measured_path, m.model, m.layout);
        goto exit;
    }
    if (s.n == 0) {
        res = TS_FAIL(TS_ERR_INPUT, "%s holds no op events", sim_path);
        goto exit;
    }
    snprintf(out->layout, sizeof out->layout, "%s", s.layout);
    snprintf(out->model, sizeof out->model, "%s", s.model);
    out->n_stages = stage_count(&s);
    out->kinds = calloc((size_t)s.n, sizeof *out->kinds);
    out->stages = calloc((size_t)out->n_stages + 1, sizeof *out->stages);
    out->gauged = s.gauge_flops_per_s > 0 && m.gauge_flops_per_s > 0;
    out->speed = out->gauged ? m.gauge_flops_per_s / s.gauge_flops_per_s : 1;
    op_err = malloc((size_t)s.n * sizeof *op_err);
    op_kind = malloc((size_t)s.n * sizeof *op_kind);
    if (!out->kinds || !out->stages || !op_err || !op_kind) {
        res = TS_FAIL(TS_ERR_NOMEM, "out of memory comparing %d ops", s.n);
        goto exit;
    }
    res = align(&s, &m, out, op_err, op_kind);
    if (res != TS_OK) goto exit;
    for (int k = 0; k < out->n_kinds; k++)
        out->kinds[k].error = rel_error(out->kinds[k].simulated_s, out->kinds[k].measured_s);
    for (int i = 0; i < out->n_stages; i++) {
        ts_compare_stage *st = &out->stages[i];
        st->stage = i;
        if (st->ranks > 0) st->simulated_s /= st->ranks, st->measured_s /= st->ranks;
        st->error = rel_error(st->simulated_s, st->measured_s);
    }
    out->simulated_step_s = s.step_s;
    ts_compare_set_measured_step(out, m.step_s * out->speed, m.step_s);
exit:
    free(op_err);
    free(op_kind);
    trace_free(&s);
    trace_free(&m);
    if (res != TS_OK) ts_compare_free(out);
    return res;
}

void ts_compare_set_measured_step(ts_compare *c, double measured_s, double raw_s) {
    c->measured_raw_step_s = raw_s;
    c->measured_step_s = measured_s;
    c->step_error = rel_error(c->simulated_step_s, c->measured_step_s);
}

void ts_compare_free(ts_compare *c) {
    free(c->kinds);
    free(c->stages);
    *c = (ts_compare){0};
}

static cJSON *number(double v) {
    return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
}

/* Adds {"simulated_s", "measured_s", "error"} members to `o`. */
static ts_status add_times(cJSON *o, double sim_s, double measured_s, double error) {
    if (!cJSON_AddItemToObject(o, "simulated_s", number(sim_s)) ||
        !cJSON_AddItemToObject(o, "measured_s", number(measured_s)) ||
        !cJSON_AddItemToObject(o, "error", number(error)))
        return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing a comparison");
    return TS_OK;
}

ts_status ts_compare_json(const ts_compare *c, cJSON **out) {
    ts_status res = TS_OK;
    cJSON *o = cJSON_CreateObject(), *step, *kinds, *stages;
    TS_CJSON_GOTO(o, res, fail);
    TS_CJSON_GOTO(cJSON_AddStringToObject(o, "layout", c->layout), res, fail);
    TS_CJSON_GOTO(cJSON_AddStringToObject(o, "model", c->model), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "ops", c->ops), res, fail);
    TS_CJSON_GOTO(step = cJSON_AddObjectToObject(o, "step"), res, fail);
    TS_CHECK_GOTO(add_times(step, c->simulated_step_s, c->measured_step_s, c->step_error), res, fail);
    if (c->gauged) {
        /* The step's speed: the traced step's, or the one the caller set with its step. */
        double speed = c->measured_raw_step_s > 0 ? c->measured_step_s / c->measured_raw_step_s : NAN;
        if (!cJSON_AddItemToObject(step, "measured_raw_s", number(c->measured_raw_step_s)) ||
            !cJSON_AddItemToObject(step, "speed", number(speed))) {
            res = TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing a comparison");
            goto fail;
        }
    }
    TS_CJSON_GOTO(kinds = cJSON_AddArrayToObject(o, "kinds"), res, fail);
    for (int k = 0; k < c->n_kinds; k++) {
        const ts_compare_kind *x = &c->kinds[k];
        cJSON *e = cJSON_CreateObject();
        TS_CJSON_GOTO(e, res, fail);
        cJSON_AddItemToArray(kinds, e);
        TS_CJSON_GOTO(cJSON_AddStringToObject(e, "kind", x->kind), res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(e, "ops", x->ops), res, fail);
        TS_CHECK_GOTO(add_times(e, x->simulated_s, x->measured_s, x->error), res, fail);
        if (!cJSON_AddItemToObject(e, "median_abs_op_error", number(x->median_abs_op_error))) {
            res = TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing a comparison");
            goto fail;
        }
    }
    TS_CJSON_GOTO(stages = cJSON_AddArrayToObject(o, "stages"), res, fail);
    for (int i = 0; i < c->n_stages; i++) {
        const ts_compare_stage *x = &c->stages[i];
        cJSON *e = cJSON_CreateObject();
        TS_CJSON_GOTO(e, res, fail);
        cJSON_AddItemToArray(stages, e);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(e, "stage", x->stage), res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(e, "ranks", x->ranks), res, fail);
        TS_CHECK_GOTO(add_times(e, x->simulated_s, x->measured_s, x->error), res, fail);
    }
    *out = o;
    return TS_OK;
fail:
    cJSON_Delete(o);
    return res;
}

/* The index of `name` in a NULL-ended or n-long table of names, -1 when absent. */
static int name_index(const char *const *names, int n, const char *name) {
    for (int k = 0; name && k < n && names[k]; k++)
        if (strcmp(name, names[k]) == 0) return k;
    return -1;
}

/* A communication op's args: its group, or its peer stage and chunk (-1 when absent). */
static void comm_args(const event *e, ts_trace_op *o) {
    double v;
    o->group = name_index(ts_group_names, TS_GROUP_COUNT, str_of(e->args, "group"));
    o->peer = num_of(e->args, "peer", &v) && v >= 0 && v < 1e7 ? (int)v : -1;
    o->chunk = num_of(e->args, "chunk", &v) && v >= 0 && v < 1e7 ? (int)v : -1;
}

ts_status ts_trace_ops_read(const char *path, ts_trace_ops *out) {
    *out = (ts_trace_ops){0};
    trace t;
    ts_status res = trace_load(path, &t);
    if (res == TS_OK) {
        out->ops = malloc(((size_t)t.n + 1) * sizeof *out->ops);
        if (out->ops == NULL) res = TS_FAIL(TS_ERR_NOMEM, "%s: out of memory for %d op events", path, t.n);
    }
    if (res == TS_OK) {
        snprintf(out->layout, sizeof out->layout, "%s", t.layout);
        snprintf(out->model, sizeof out->model, "%s", t.model);
        out->step_s = t.step_s;
        for (int i = 0; i < t.n; i++) {
            const event *e = &t.ev[i];
            ts_trace_op *o = &out->ops[i];
            *o = (ts_trace_op){.rank = e->rank, .stage = t.stage_of[e->rank], .op = e->op, .kind = name_index(ts_op_kind_names, TS_OP_KIND_COUNT, e->cat), .start_s = e->start_s,
                               .dur_s = e->dur_s};
            snprintf(o->name, sizeof o->name, "%s", e->name);
            comm_args(e, o);
            snprintf(o->coll, sizeof o->coll, "%s", e->coll ? e->coll : "");
        }
        out->n = t.n;
    }
    trace_free(&t);
    return res;
}

void ts_trace_ops_free(ts_trace_ops *t) {
    free(t->ops);
    *t = (ts_trace_ops){0};
}
