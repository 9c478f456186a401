/* Replay of a measured trace on the simulator (see replay.h). */
#include "sim/replay.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "planner/partition.h"
#include "planner/plan_json.h"
#include "program/ranks.h"
#include "sim/compare.h"
#include "sim/compare_wait.h"
#include "sim/engine.h"

enum { TS_REPLAY_MAX_GROUP = 1024 };

static int is_compute(int kind) {
    return kind == TS_OP_GEMM || kind == TS_OP_ATTENTION || kind == TS_OP_ELEMENTWISE || kind == TS_OP_OPTIMIZER;
}

/* The measured compute durations of `t` into `ovr`, checked against `prog`; *ops_s gets the
 * latest rank's first op start to last op end. */
static ts_status fill_override(const char *path, const ts_trace_ops *t, const ts_program *prog,
                               ts_cost_override *ovr, double *ops_s) {
    const ts_layout *l = &prog->layout;
    int world = ts_rank_count(l);
    *ops_s = 0;
    for (int i = 0; i < t->n;) {
        int rank = t->ops[i].rank, j = i;
        if (rank >= world)
            return TS_FAIL(TS_ERR_INPUT, "%s: rank %d, but the layout has %d ranks", path, rank, world);
        const ts_stage_program *sp = &prog->stages[ts_rank_coords(l, rank).pp];
        double first = INFINITY, last = 0;
        for (; j < t->n && t->ops[j].rank == rank; j++) {
            const ts_trace_op *o = &t->ops[j];
            if (o->op >= sp->n_ops || o->kind != (int)sp->ops[o->op].kind)
                return TS_FAIL(TS_ERR_INPUT, "%s: rank %d op %d \"%s\" is not op %d of the plan's program: "
                               "a trace of another program", path, rank, o->op, o->name, o->op);
            if (is_compute(o->kind)) TS_CHECK(ts_cost_override_set(ovr, rank, o->op, o->dur_s));
            first = fmin(first, o->start_s);
            last = fmax(last, o->start_s + o->dur_s);
        }
        if (j - i != sp->n_ops)
            return TS_FAIL(TS_ERR_INPUT, "%s: rank %d has %d ops, its stage program %d: a trace of another "
                           "program", path, rank, j - i, sp->n_ops);
        *ops_s = fmax(*ops_s, last - first);
        TS_CHECK(ts_cost_override_set_start(ovr, rank, fmax(0, first)));
        i = j;
    }
    if (ovr->n_set == 0) return TS_FAIL(TS_ERR_INPUT, "%s holds no compute ops to replay", path);
    return TS_OK;
}

/* ts_trace_ops order (sim/compare.h). */
static int by_rank_op(const void *a, const void *b) {
    const ts_trace_op *x = a, *y = b;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    return (x->op > y->op) - (x->op < y->op);
}

/* A collective that a member left before its last peer arrived was not waited on in the run (the
 * executor issued it and went on; ring CP's exchanges complete inside the attention beside them):
 * each member then runs it alone, for its own measured span. */
static ts_status mark_alone(const ts_trace_ops *t, const ts_layout *l, ts_cost_override *ovr, const ts_trace_op *o) {
    int size = ts_group_size(l, (ts_group)o->group), members[TS_REPLAY_MAX_GROUP];
    if (size > TS_REPLAY_MAX_GROUP) return TS_OK;
    ts_group_members(l, (ts_group)o->group, o->rank, members);
    for (int k = 0; k < size; k++) {
        int r = members[k];
        if (r >= ovr->n_ranks || o->op >= ovr->first[r + 1] - ovr->first[r]) continue;
        TS_CHECK(ts_cost_override_set_alone(ovr, r, o->op));
        const ts_trace_op key = {.rank = r, .op = o->op}, *own = bsearch(&key, t->ops, (size_t)t->n, sizeof key, by_rank_op);
        if (own) TS_CHECK(ts_cost_override_set(ovr, r, o->op, own->dur_s)); /* the member's own span */
    }
    return TS_OK;
}

/* The measured transfers of `t`'s collectives (each member's: the engine ends a replayed collective
 * for each member after its own) and receives: at the matching send, which starts the transfer in
 * the engine (a receive waiting for it ends as it ended), and at the receive, which takes that long
 * when posted after its data arrived (then the send's transfer had ended before: the time from the
 * send to a late receive is the receiver's, not the sends' stream's, which would hold up the next
 * send) into `ovr` (sim/compare_wait.h splits them from the waits). */
static ts_status fill_transfers(const ts_trace_ops *t, const ts_program *prog, ts_cost_override *ovr) {
    const ts_layout *l = &prog->layout;
    double *transfer = malloc(((size_t)t->n + 1) * sizeof *transfer);
    int *send_of = malloc(((size_t)t->n + 1) * sizeof *send_of);
    ts_status res = transfer && send_of ? TS_OK : TS_FAIL(TS_ERR_NOMEM, "out of memory for %d transfers", t->n);
    if (res == TS_OK) res = ts_trace_transfers(t, l, transfer, send_of);
    for (int i = 0; res == TS_OK && i < t->n; i++) {
        const ts_trace_op *o = &t->ops[i];
        if (!isfinite(transfer[i])) continue;
        double d = fmax(0, transfer[i]);
        if (o->kind == TS_OP_COLL && transfer[i] < 0) res = mark_alone(t, l, ovr, o);
        else if (o->kind == TS_OP_COLL) res = ts_cost_override_set(ovr, o->rank, o->op, d);
        else if (o->kind == TS_OP_RECV && send_of[i] >= 0) {
            const ts_trace_op *snd = &t->ops[send_of[i]];
            res = ts_cost_override_set(ovr, snd->rank, snd->op, d);
            if (res == TS_OK) res = ts_cost_override_set(ovr, o->rank, o->op, d);
        }
    }
    free(transfer);
    free(send_of);
    return res;
}

static ts_status replay_step(const ts_problem *pb, const ts_program *prog, const ts_cost_override *ovr, double *step_s) {
    ts_sim_opts so = {.full = 1, .stats_spans_only = 1, .cost_override = ovr};
    ts_sim_result r;
    TS_CHECK(ts_simulate(pb, prog, &so, &r));
    *step_s = r.step_s;
    ts_sim_result_free(&r);
    return TS_OK;
}

static double rel_error(double x, double ref) { return ref > 0 ? (x - ref) / ref : NAN; }

ts_status ts_replay_trace(const ts_problem *pb, const ts_program *prog, const char *measured_path, ts_replay *out) {
    *out = (ts_replay){.error = NAN, .modelled_comm_error = NAN};
    ts_trace_ops t;
    TS_CHECK(ts_trace_ops_read(measured_path, &t));
    ts_cost_override ovr = {0};
    char layout[160];
    ts_layout_format(&prog->layout, layout, sizeof layout);
    ts_status res = TS_OK;
    if (strcmp(t.layout, layout) != 0) {
        res = TS_FAIL(TS_ERR_INPUT, "%s is a run of %s, the plan's layout is %s", measured_path, t.layout, layout);
        goto exit;
    }
    TS_CHECK_GOTO(ts_cost_override_init(&ovr, prog), res, exit);
    TS_CHECK_GOTO(fill_override(measured_path, &t, prog, &ovr, &out->measured_ops_s), res, exit);
    out->ops = ovr.n_set;
    TS_CHECK_GOTO(replay_step(pb, prog, &ovr, &out->modelled_comm_step_s), res, exit);
    TS_CHECK_GOTO(fill_transfers(&t, prog, &ovr), res, exit);
    TS_CHECK_GOTO(replay_step(pb, prog, &ovr, &out->replayed_step_s), res, exit);
    snprintf(out->layout, sizeof out->layout, "%s", t.layout);
    snprintf(out->model, sizeof out->model, "%s", t.model);
    out->measured_step_s = t.step_s;
    out->error = rel_error(out->replayed_step_s, t.step_s);
    out->modelled_comm_error = rel_error(out->modelled_comm_step_s, t.step_s);
exit:
    ts_cost_override_free(&ovr);
    ts_trace_ops_free(&t);
    return res;
}

ts_status ts_replay_plan(const char *plan, int index, const char *measured_path, ts_replay *out) {
    ts_problem pb;
    ts_layout *layouts = NULL;
    int n = 0;
    TS_CHECK(ts_plan_read(plan, &pb, &layouts, &n));
    if (index < 0 || index >= n) {
        free(layouts);
        return TS_FAIL(TS_ERR_INPUT, "%s holds %d layouts, asked for number %d", plan, n, index + 1);
    }
    ts_layout l = layouts[index];
    free(layouts);
    ts_split split;
    int has_split = 0;
    TS_CHECK(ts_plan_read_split(plan, &pb, &l, index, &split, &has_split));
    ts_program_opts po = ts_program_opts_of(has_split ? &split : NULL);
    ts_program prog;
    ts_status res = ts_program_build(&pb, &l, &po, &prog);
    if (has_split) ts_split_free(&split);
    TS_CHECK(res);
    res = ts_replay_trace(&pb, &prog, measured_path, out);
    ts_program_free(&prog);
    return res;
}

/* cJSON writes a NAN as null. */
ts_status ts_replay_json(const ts_replay *r, cJSON **out) {
    ts_status res = TS_OK;
    cJSON *o = cJSON_CreateObject();
    TS_CJSON_GOTO(o, res, fail);
    TS_CJSON_GOTO(cJSON_AddStringToObject(o, "layout", r->layout), res, fail);
    TS_CJSON_GOTO(cJSON_AddStringToObject(o, "model", r->model), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "ops", (double)r->ops), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "replayed_s", r->replayed_step_s), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "measured_s", r->measured_step_s), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "measured_ops_s", r->measured_ops_s), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "error", r->error), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "modelled_comm_s", r->modelled_comm_step_s), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "modelled_comm_error", r->modelled_comm_error), res, fail);
    *out = o;
    return TS_OK;
fail:
    cJSON_Delete(o);
    return res;
}
