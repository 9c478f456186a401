/* Reading a real run's summary and trace back (see measured.h). */
#include "reports/measured.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "program/layout.h"
#include "program/ranks.h"

ts_status ts_run_summary_load(const char *file, ts_run_summary *out) {
    memset(out, 0, sizeof *out);
    cJSON *root = NULL;
    ts_status res = TS_OK;
    TS_CHECK(ts_json_load_file(file, &root));
    ts_jreader r, rs, rk;
    ts_jreader_root(&r, file);
    const cJSON *step = NULL, *kinds = NULL;
    int64_t ranks = 0, steps = 0;
    if (!cJSON_IsObject(root)) {
        res = TS_FAIL(TS_ERR_INPUT, "%s: $: expected the object `tessera run --json` prints, got %s", file,
                      ts_json_type_name(root));
        goto exit;
    }
    TS_CHECK_GOTO(ts_jr_str(&r, root, "layout", 1, NULL, out->layout, sizeof out->layout), res, exit);
    TS_CHECK_GOTO(ts_jr_int(&r, root, "ranks", 0, 1, 1 << 24, 0, &ranks), res, exit);
    TS_CHECK_GOTO(ts_jr_int(&r, root, "steps", 0, 1, 1 << 30, 0, &steps), res, exit);
    out->ranks = (int)ranks, out->steps = (int)steps;
    /* The layout must be one (the report sets it beside the plan's): its keys and values those
     * of a layout (sizes left out are 1), with as many ranks as it says. */
    char what[600];
    ts_pins pins;
    snprintf(what, sizeof what, "%s: $.layout", file);
    TS_CHECK_GOTO(ts_pins_parse(what, out->layout, &pins), res, exit);
    ts_layout l = pins.value;
    l.dp = l.dp ? l.dp : 1, l.tp = l.tp ? l.tp : 1, l.pp = l.pp ? l.pp : 1, l.cp = l.cp ? l.cp : 1;
    if (ranks && ts_rank_count(&l) != ranks) {
        res = TS_FAIL(TS_ERR_INPUT, "%s: $.ranks: %lld, but the layout \"%s\" has %d ranks", file, (long long)ranks,
                      out->layout, ts_rank_count(&l));
        goto exit;
    }
    TS_CHECK_GOTO(ts_jr_obj(&r, root, "step_s", 1, &step), res, exit);
    ts_jreader_child(&r, "step_s", 0, &rs);
    TS_CHECK_GOTO(ts_jr_num(&rs, step, "median", 1, 0, 1e9, 0, &out->step_median_s), res, exit);
    TS_CHECK_GOTO(ts_jr_num(&rs, step, "p10", 1, 0, 1e9, 0, &out->step_p10_s), res, exit);
    TS_CHECK_GOTO(ts_jr_num(&rs, step, "p90", 1, 0, 1e9, 0, &out->step_p90_s), res, exit);
    const cJSON *losses = cJSON_GetObjectItemCaseSensitive(root, "losses");
    if (!cJSON_IsArray(losses) || cJSON_GetArraySize(losses) == 0) {
        res = TS_FAIL(TS_ERR_INPUT, "%s: $.losses: expected a non-empty array of numbers, got %s", file,
                      cJSON_IsArray(losses) ? "an empty array" : ts_json_type_name(losses));
        goto exit;
    }
    out->n_losses = cJSON_GetArraySize(losses);
    for (int i = 0; i < out->n_losses; i++) {
        const cJSON *x = cJSON_GetArrayItem(losses, i);
        if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble)) {
            res = TS_FAIL(TS_ERR_INPUT, "%s: $.losses[%d]: expected a finite number, got %s", file, i,
                          ts_json_type_name(x));
            goto exit;
        }
        if (i == 0) out->loss_first = x->valuedouble;
        out->loss_last = x->valuedouble;
    }
    TS_CHECK_GOTO(ts_jr_obj(&r, root, "kind_s", 1, &kinds), res, exit);
    ts_jreader_child(&r, "kind_s", 0, &rk);
    for (int k = 0; k < TS_OP_KIND_COUNT; k++)
        TS_CHECK_GOTO(ts_jr_num(&rk, kinds, ts_op_kind_names[k], 1, 0, 1e9, 0, &out->kind_s[k]), res, exit);
exit:
    cJSON_Delete(root);
    return res;
}

/* The phase named by the first word of an op label, -1 when none. */
static int phase_of(const char *name) {
    size_t n = strcspn(name, " ");
    for (int p = 0; p < TS_PHASE_COUNT; p++)
        if (strlen(ts_phase_names[p]) == n && strncmp(name, ts_phase_names[p], n) == 0) return p;
    return -1;
}

static int num_field(const cJSON *o, const char *key, double *out) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble)) return 0;
    *out = it->valuedouble;
    return 1;
}

/* pid -> stage for the lowest rank of each stage: `rep[stage]` is that rank, -1 when none. A
 * stage outside the plan's `plan_stages` is refused: the timeline has one row per stage, so the
 * trace must not size it. */
static ts_status stage_ranks(const char *file, const cJSON *events, int plan_stages, int **rep, int *stages) {
    int max_stage = -1, index = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name"), *args;
        index++;
        if (!cJSON_IsString(name) || strcmp(name->valuestring, "process_name") != 0) continue;
        args = cJSON_GetObjectItemCaseSensitive(e, "args");
        const cJSON *label = cJSON_GetObjectItemCaseSensitive(args, "name");
        int rank, stage;
        if (!cJSON_IsString(label) || sscanf(label->valuestring, "rank %d (stage %d)", &rank, &stage) != 2) continue;
        if (stage < 0 || stage >= plan_stages || rank < 0)
            return TS_FAIL(TS_ERR_INPUT, "%s: $.traceEvents[%d].args.name: \"rank %d (stage %d)\": expected a rank "
                           ">= 0 and a stage in [0, %d] (the plan's layout has %d stages)", file, index - 1, rank,
                           stage, plan_stages - 1, plan_stages);
        if (stage > max_stage) max_stage = stage;
    }
    if (max_stage < 0)
        return TS_FAIL(TS_ERR_INPUT, "%s: $.traceEvents: no \"process_name\" metadata of the form "
                       "\"rank R (stage S)\" (is it a trace written by tessera run --trace?)", file);
    *stages = max_stage + 1;
    *rep = malloc((size_t)*stages * sizeof **rep);
    if (*rep == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory reading %s", file);
    for (int s = 0; s < *stages; s++) (*rep)[s] = -1;
    cJSON_ArrayForEach(e, events) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (!cJSON_IsString(name) || strcmp(name->valuestring, "process_name") != 0) continue;
        const cJSON *label = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "args"), "name");
        int rank, stage;
        if (cJSON_IsString(label) && sscanf(label->valuestring, "rank %d (stage %d)", &rank, &stage) == 2 &&
            stage >= 0 && stage < *stages && ((*rep)[stage] < 0 || rank < (*rep)[stage]))
            (*rep)[stage] = rank;
    }
    return TS_OK;
}

/* The stage whose representative is `pid`, -1 when none. */
static int stage_of(const int *rep, int stages, int pid) {
    for (int s = 0; s < stages; s++)
        if (rep[s] == pid) return s;
    return -1;
}

ts_status ts_run_trace_timeline(const char *file, int plan_stages, ts_timeline *out) {
    *out = (ts_timeline){0};
    cJSON *root = NULL;
    int *rep = NULL, stages = 0;
    ts_status res = TS_OK;
    TS_CHECK(ts_json_load_file(file, &root));
    const cJSON *events = cJSON_GetObjectItemCaseSensitive(root, "traceEvents"), *e;
    if (!cJSON_IsArray(events)) {
        res = TS_FAIL(TS_ERR_INPUT, "%s: $.traceEvents: expected an array (a Chrome trace), got %s", file,
                      ts_json_type_name(events));
        goto exit;
    }
    TS_CHECK_GOTO(stage_ranks(file, events, plan_stages, &rep, &stages), res, exit);
    /* The compute ops of the representatives: their time range first, then the timeline. */
    double t0 = INFINITY, t1 = -INFINITY;
    int ops = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            if (ops == 0) {
                res = TS_FAIL(TS_ERR_INPUT, "%s: $.traceEvents: no compute-stream (tid 0) \"X\" events", file);
                goto exit;
            }
            if (!isfinite(t1 - t0) || !(t1 > t0)) {
                res = TS_FAIL(TS_ERR_INPUT, "%s: $.traceEvents: the compute ops span %g us (from %g to %g): expected "
                              "a finite, positive span", file, t1 - t0, t0, t1);
                goto exit;
            }
            TS_CHECK_CTX_GOTO(ts_timeline_init(out, stages, TS_TIMELINE_COLUMNS, (t1 - t0) * 1e-6), res, exit,
                              "%s: $.traceEvents", file);
        }
        int index = 0;
        cJSON_ArrayForEach(e, events) {
            const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
            double tid, ts, dur;
            int64_t pid;
            index++;
            if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "X") != 0) continue;
            /* A complete event without its numbers is a broken trace, not one to skip (compare refuses it too). */
            if (!cJSON_IsString(name) || !num_field(e, "tid", &tid) || !num_field(e, "ts", &ts) ||
                !num_field(e, "dur", &dur) || dur < 0) {
                res = TS_FAIL(TS_ERR_INPUT, "%s: $.traceEvents[%d]: an \"X\" event needs a \"name\" and finite "
                              "\"tid\", \"ts\" and \"dur\" >= 0", file, index - 1);
                goto exit;
            }
            if (tid != 0) continue;
            /* Range first: (int) of a pid of 1e300 is undefined. */
            if (!ts_json_int_in(cJSON_GetObjectItemCaseSensitive(e, "pid"), 0, INT_MAX, &pid)) {
                res = TS_FAIL(TS_ERR_INPUT, "%s: $.traceEvents[%d].pid: expected an integer in [0, %d]", file,
                              index - 1, INT_MAX);
                goto exit;
            }
            int stage = stage_of(rep, stages, (int)pid), phase = phase_of(name->valuestring);
            if (stage < 0 || phase < 0) continue;
            if (pass == 0) {
                t0 = fmin(t0, ts), t1 = fmax(t1, ts + dur), ops++;
            } else {
                ts_timeline_add(out, stage, (ts - t0) * 1e-6, (ts + dur - t0) * 1e-6, phase);
            }
        }
    }
    ts_timeline_finish(out);
exit:
    if (res != TS_OK) ts_timeline_free(out);
    free(rep);
    cJSON_Delete(root);
    return res;
}
