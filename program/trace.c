/* Chrome-trace writer for simulated and measured steps (format and ordering in trace.h). */
#include "program/trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"

static int64_t ranks_per_stage(const ts_program *prog, int full) {
    return full ? ts_rank_count(&prog->layout) / prog->pp : 1;
}

/* Op events: the stage programs' ops times the simulated ranks of each stage. */
static int64_t op_events(const ts_program *prog, int full) {
    return prog->total_ops * ranks_per_stage(prog, full);
}

static ts_status check_events(int64_t events, int ranks, int pp) {
    if (events <= TS_TRACE_MAX_EVENTS) return TS_OK;
    return TS_FAIL(TS_ERR_INPUT,
                   "a trace of %lld op events (%d simulated ranks) is over the limit of %d events "
                   "(gigabytes of JSON); trace a smaller layout (fewer GPUs, layers or "
                   "micro-batches)%s",
                   (long long)events, ranks, TS_TRACE_MAX_EVENTS,
                   ranks > pp ? " or one rank per stage (no --full)" : "");
}

ts_status ts_trace_check(const ts_program *prog, int full) {
    return check_events(op_events(prog, full), (int)(ranks_per_stage(prog, full) * prog->pp), prog->pp);
}

/* A JSON string: quotes, backslashes and control characters escaped (RFC 8259 §7). */
static void put_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            fputc('\\', f);
            fputc(*p, f);
        } else if (*p < 0x20) {
            fprintf(f, "\\u%04x", *p);
        } else {
            fputc(*p, f);
        }
    }
    fputc('"', f);
}

/* ,"key":value — JSON has no NaN or infinity, so those become null. */
static void put_num(FILE *f, const char *key, double v) {
    if (isfinite(v)) fprintf(f, ",\"%s\":%.15g", key, v);
    else fprintf(f, ",\"%s\":null", key);
}

static void put_str(FILE *f, const char *key, const char *v) {
    fprintf(f, ",\"%s\":", key);
    put_string(f, v);
}

/* Every event but the first starts with the separator. */
static void begin_event(FILE *f, int *first) {
    fputs(*first ? "\n{" : ",\n{", f);
    *first = 0;
}

static void put_metadata(FILE *f, int *first, const char *what, int pid, int tid, const char *name) {
    begin_event(f, first);
    fprintf(f, "\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", what, pid, tid);
    put_string(f, name);
    fputs("}}", f);
}

/* The constant parts of an op's event, the same on every rank of its stage: `"name":..,
 * "cat":..,"ph":"X"` and `,"args":{..}}`. */
static void put_op_parts(FILE *f, int index, const ts_op *op, long *split) {
    char label[128];
    fputs("\"name\":", f);
    put_string(f, ts_op_label(op, label, sizeof label));
    fprintf(f, ",\"cat\":\"%s\",\"ph\":\"X\"", ts_op_kind_names[op->kind]);
    *split = ftell(f);
    fprintf(f, ",\"args\":{\"op\":%d", index);
    switch ((ts_op_kind)op->kind) {
    case TS_OP_GEMM:
        put_num(f, "m", op->m);
        put_num(f, "n", op->n);
        put_num(f, "k", op->k);
        put_num(f, "flops", op->flops);
        break;
    case TS_OP_ATTENTION:
        put_num(f, "flops", op->flops);
        put_num(f, "kernels", op->m);
        break;
    case TS_OP_COLL:
        put_str(f, "coll", ts_coll_names[op->coll]);
        put_str(f, "group", ts_group_names[op->group]);
        put_num(f, "bytes", op->bytes);
        break;
    case TS_OP_SEND:
    case TS_OP_RECV:
        put_num(f, "peer", op->peer);
        put_num(f, "chunk", op->chunk);
        put_num(f, "bytes", op->bytes);
        break;
    case TS_OP_ELEMENTWISE:
    case TS_OP_OPTIMIZER:
    case TS_OP_KIND_COUNT:
        put_num(f, "bytes", op->bytes);
        break;
    }
    /* DualPipe's F&B: the forward's and the backward's ops of one pair carry the same tag. */
    if (op->pair) put_num(f, "pair", op->pair);
    fputs("}}", f);
}

/* Every op's constant parts for one stage program, formatted once and reused for each of the
 * stage's simulated ranks (printf of floating point dominates the writer's time otherwise). */
typedef struct {
    int stage;    /* the stage cached, -1 for none */
    char *text;   /* op i's parts: text[start[i] .. split[i]) and text[split[i] .. start[i+1]) */
    size_t len;
    long *start, *split; /* (n_ops + 1), (n_ops) */
} op_parts;

static void op_parts_free(op_parts *c) {
    free(c->text);
    free(c->start);
    free(c->split);
    *c = (op_parts){.stage = -1};
}

static ts_status op_parts_cache(op_parts *c, const ts_stage_program *sp, int stage) {
    if (c->stage == stage) return TS_OK;
    op_parts_free(c);
    c->start = malloc(((size_t)sp->n_ops + 1) * sizeof *c->start);
    c->split = malloc(((size_t)sp->n_ops + 1) * sizeof *c->split);
    FILE *m = c->start && c->split ? open_memstream(&c->text, &c->len) : NULL;
    if (m == NULL) {
        op_parts_free(c);
        return TS_FAIL(TS_ERR_NOMEM, "out of memory formatting the trace events of stage %d", stage);
    }
    for (int i = 0; i < sp->n_ops; i++) {
        c->start[i] = ftell(m);
        put_op_parts(m, i, &sp->ops[i], &c->split[i]);
    }
    c->start[sp->n_ops] = ftell(m);
    if (ferror(m) | (fclose(m) != 0)) {
        op_parts_free(c);
        return TS_FAIL(TS_ERR_NOMEM, "out of memory formatting the trace events of stage %d", stage);
    }
    c->stage = stage;
    return TS_OK;
}

/* Decimal digits of v. */
static char *put_u64(char *p, uint64_t v) {
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) *p++ = tmp[--n];
    return p;
}

/* Seconds to whole nanoseconds; 0 with *ok cleared when out of range. */
static int64_t to_ns(double s, int *ok) {
    double ns = s * 1e9;
    if (!isfinite(ns) || fabs(ns) > 9e18) {
        *ok = 0;
        return 0;
    }
    return llround(ns);
}

/* Nanoseconds as microseconds with three decimals, e.g. 12.345. */
static char *put_us(char *p, int64_t ns, int ok) {
    if (!ok) {
        memcpy(p, "null", 4);
        return p + 4;
    }
    if (ns < 0) *p++ = '-', ns = -ns;
    uint64_t v = (uint64_t)ns;
    p = put_u64(p, v / 1000);
    unsigned frac = (unsigned)(v % 1000);
    *p++ = '.';
    *p++ = (char)('0' + frac / 100);
    *p++ = (char)('0' + frac / 10 % 10);
    *p++ = (char)('0' + frac % 10);
    return p;
}

static void put_op(FILE *f, int *first, const op_parts *c, int i, int pid, int tid, const ts_op_span *span) {
    begin_event(f, first);
    fwrite(c->text + c->start[i], 1, (size_t)(c->split[i] - c->start[i]), f);
    char buf[128], *p = buf;
    memcpy(p, ",\"pid\":", 7), p += 7;
    p = put_u64(p, (uint64_t)pid);
    memcpy(p, ",\"tid\":", 7), p += 7;
    p = put_u64(p, (uint64_t)tid);
    /* Start and end are rounded alike and the duration is their difference, so an op that
     * starts when the previous one on its track ends never overlaps it in the trace. */
    int ok = 1;
    int64_t start_ns = to_ns(span->start_s, &ok), end_ns = to_ns(span->end_s, &ok);
    memcpy(p, ",\"ts\":", 6), p += 6;
    p = put_us(p, start_ns, ok);
    memcpy(p, ",\"dur\":", 7), p += 7;
    p = put_us(p, end_ns - start_ns, ok);
    fwrite(buf, 1, (size_t)(p - buf), f);
    fwrite(c->text + c->split[i], 1, (size_t)(c->start[i + 1] - c->split[i]), f);
}

typedef struct {
    double start_s;
    int index;
} span_key;

static int span_key_cmp(const void *a, const void *b) {
    const span_key *x = a, *y = b;
    if (x->start_s != y->start_s) return x->start_s < y->start_s ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* One rank: its process name, then per stream the thread name and the ops by start time. */
static void put_rank(FILE *f, int *first, const ts_stage_program *sp, const op_parts *c,
                     const ts_rank_spans *rk, span_key *keys) {
    char name[64];
    snprintf(name, sizeof name, "rank %d (stage %d)", rk->rank, rk->stage);
    put_metadata(f, first, "process_name", rk->rank, 0, name);
    for (int s = 0; s < TS_STREAM_COUNT; s++) {
        int n = 0;
        for (int i = 0; i < sp->n_ops; i++)
            if (sp->ops[i].stream == s) keys[n++] = (span_key){rk->spans[i].start_s, i};
        if (n == 0) continue;
        put_metadata(f, first, "thread_name", rk->rank, s, ts_stream_names[s]);
        qsort(keys, (size_t)n, sizeof *keys, span_key_cmp);
        for (int k = 0; k < n; k++) put_op(f, first, c, keys[k].index, rk->rank, s, &rk->spans[keys[k].index]);
    }
}

int64_t ts_trace_op_events(const ts_program *prog, const ts_step_spans *r) {
    int64_t events = 0;
    for (int i = 0; i < r->n_ranks; i++) events += prog->stages[r->ranks[i].stage].n_ops;
    return events;
}

ts_status ts_trace_write(const char *path, const char *source, const ts_problem *pb,
                         const ts_program *prog, const ts_step_spans *r) {
    int max_ops = 1;
    for (int i = 0; i < r->n_ranks; i++) {
        if (r->ranks[i].spans == NULL)
            return TS_FAIL(TS_ERR_INPUT,
                           "no op spans for rank %d: they were not kept (simulated with stats_spans_only)",
                           r->ranks[i].rank);
        int n = prog->stages[r->ranks[i].stage].n_ops;
        if (n > max_ops) max_ops = n;
    }
    TS_CHECK(check_events(ts_trace_op_events(prog, r), r->n_ranks, prog->pp));

    ts_status res = TS_OK;
    ts_atomic_file af = {0};
    op_parts parts = {.stage = -1};
    span_key *keys = malloc((size_t)max_ops * sizeof *keys);
    TS_ALLOC_GOTO(keys, res, exit);
    TS_CHECK_GOTO(ts_atomic_open(path, &af), res, exit);
    FILE *f = af.f;
    int first = 1;
    fputs("{\"traceEvents\":[", f);
    for (int i = 0; i < r->n_ranks && !ferror(f); i++) {
        const ts_rank_spans *rk = &r->ranks[i];
        TS_CHECK_GOTO(op_parts_cache(&parts, &prog->stages[rk->stage], rk->stage), res, exit);
        put_rank(f, &first, &prog->stages[rk->stage], &parts, rk, keys);
    }
    char layout[256];
    ts_layout_format(&prog->layout, layout, sizeof layout);
    fputs("\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{", f);
    fprintf(f, "\"tessera\":\"%s\"", source);
    put_str(f, "layout", layout);
    put_str(f, "model", pb->model.name);
    put_str(f, "system", pb->sys.name);
    put_num(f, "gpus", pb->gpus);
    put_num(f, "ranks", r->n_ranks);
    put_num(f, "step_s", r->step_s);
    if (r->gauge_flops_per_s > 0) put_num(f, "gauge_flops_per_s", r->gauge_flops_per_s);
    fputs("}}\n", f);
    res = ts_atomic_commit(&af);
exit:
    if (res != TS_OK) ts_atomic_abort(&af);
    op_parts_free(&parts);
    free(keys);
    return res;
}
