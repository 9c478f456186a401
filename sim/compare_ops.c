/* Every op of a simulated trace beside its measured time (see compare_ops.h). */
#include "sim/compare_ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "program/program.h"
#include "sim/compare.h"

static int by_abs_error(const void *a, const void *b) {
    const ts_compare_op *x = a, *y = b;
    double ex = isfinite(x->error) ? fabs(x->error) : -1, ey = isfinite(y->error) ? fabs(y->error) : -1;
    if (ex != ey) return ex > ey ? -1 : 1;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    return (x->op > y->op) - (x->op < y->op);
}

static int microbatch_of(const char *name) {
    const char *p = strstr(name, " mb");
    int mb;
    return p && sscanf(p, " mb%d", &mb) == 1 ? mb : -1;
}

/* Pairs each simulated op with the measured op of the same rank and index (both sorted). */
static ts_status pair(const ts_trace_ops *s, const ts_trace_ops *m, double speed, ts_compare_ops *out) {
    int j = 0;
    for (int i = 0; i < s->n; i++) {
        const ts_trace_op *a = &s->ops[i];
        while (j < m->n && (m->ops[j].rank < a->rank || (m->ops[j].rank == a->rank && m->ops[j].op < a->op))) j++;
        if (j == m->n || m->ops[j].rank != a->rank || m->ops[j].op != a->op)
            return TS_FAIL(TS_ERR_INPUT, "rank %d op %d \"%s\" was simulated but not measured: traces of different "
                           "step programs", a->rank, a->op, a->name);
        const ts_trace_op *b = &m->ops[j];
        ts_compare_op *o = &out->ops[out->n++];
        *o = (ts_compare_op){.rank = a->rank, .stage = a->stage, .op = a->op, .microbatch = microbatch_of(a->name),
                             .simulated_s = a->dur_s, .measured_s = speed * b->dur_s};
        o->error = o->measured_s > 0 ? (o->simulated_s - o->measured_s) / o->measured_s : NAN;
        snprintf(o->name, sizeof o->name, "%s", a->name);
        snprintf(o->kind, sizeof o->kind, "%s", a->kind >= 0 ? ts_op_kind_names[a->kind] : "?");
    }
    return TS_OK;
}

ts_status ts_compare_ops_read(const char *sim_path, const char *measured_path, double speed, ts_compare_ops *out) {
    *out = (ts_compare_ops){0};
    ts_trace_ops s, m = {0};
    TS_CHECK(ts_trace_ops_read(sim_path, &s));
    ts_status res = ts_trace_ops_read(measured_path, &m);
    if (res == TS_OK) {
        out->ops = malloc(((size_t)s.n + 1) * sizeof *out->ops);
        if (out->ops == NULL) res = TS_FAIL(TS_ERR_NOMEM, "out of memory for %d ops", s.n);
    }
    if (res == TS_OK) res = pair(&s, &m, speed, out);
    if (res == TS_OK) qsort(out->ops, (size_t)out->n, sizeof *out->ops, by_abs_error);
    else ts_compare_ops_free(out);
    ts_trace_ops_free(&s);
    ts_trace_ops_free(&m);
    return res;
}

void ts_compare_ops_free(ts_compare_ops *c) {
    free(c->ops);
    *c = (ts_compare_ops){0};
}

/* cJSON writes a NAN as null. */
static ts_status op_json(const ts_compare_op *o, cJSON *arr) {
    cJSON *e = cJSON_CreateObject();
    if (e != NULL && !cJSON_AddItemToArray(arr, e)) {
        cJSON_Delete(e);
        e = NULL;
    }
    /* From here `e` belongs to `arr`. */
    if (e == NULL || !cJSON_AddNumberToObject(e, "rank", o->rank) || !cJSON_AddNumberToObject(e, "stage", o->stage) ||
        !cJSON_AddNumberToObject(e, "op", o->op) || !cJSON_AddStringToObject(e, "name", o->name) ||
        !cJSON_AddStringToObject(e, "kind", o->kind) || !cJSON_AddNumberToObject(e, "microbatch", o->microbatch) ||
        !cJSON_AddNumberToObject(e, "simulated_s", o->simulated_s) ||
        !cJSON_AddNumberToObject(e, "measured_s", o->measured_s) || !cJSON_AddNumberToObject(e, "error", o->error))
        return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing the ops");
    return TS_OK;
}

ts_status ts_compare_ops_json(const ts_compare_ops *c, int n, cJSON **out) {
    if (n < 0 || n > c->n) n = c->n;
    cJSON *arr = cJSON_CreateArray();
    if (arr == NULL) return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing the ops");
    for (int i = 0; i < n; i++) {
        ts_status st = op_json(&c->ops[i], arr);
        if (st != TS_OK) {
            cJSON_Delete(arr);
            return st;
        }
    }
    *out = arr;
    return TS_OK;
}
