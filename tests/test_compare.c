/* `tessera compare` and sim/compare.h: traces written by `tessera sim --trace` (the tiny model
 * on 8 H100s, tp=2, pp=2) compared with themselves report 0% everywhere; a one-rank-per-stage
 * simulation compares with a full one on the ranks it holds; traces of different layouts, a
 * renamed op or a missing op are refused with a clear error; measured GEMMs twice as slow give
 * exactly -50% for GEMMs and 0% for the rest. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "sim/compare.h"
#include "tests/helpers.h"

#define TINY "--model", "tiny", "--system", "h100-sxm-dgx", "--gpus", "8", "--global-batch", "16", "--seq", "256"

/* Writes the trace of `tessera sim` with pins `fix` (and --full when `full`) to dir/name. */
static char *sim_trace(const char *dir, const char *name, const char *fix, int full) {
    char *path = malloc(strlen(dir) + strlen(name) + 2);
    cr_assert_not_null(path);
    sprintf(path, "%s/%s", dir, name);
    cli_result r = full ? run_cli("sim", TINY, "--fix", fix, "--full", "--trace", path, NULL)
                        : run_cli("sim", TINY, "--fix", fix, "--trace", path, NULL);
    cr_assert_eq(r.status, 0, "sim --trace: %s", r.err);
    cli_result_free(&r);
    return path;
}

/* Loads `in`, applies `edit` to its op events, writes it to `out`. */
static void edit_trace(const char *in, const char *out, void (*edit)(cJSON *events)) {
    cJSON *root = NULL;
    cr_assert_eq(ts_json_load_file(in, &root), TS_OK, "%s", ts_error_message());
    edit(cJSON_GetObjectItemCaseSensitive(root, "traceEvents"));
    cr_assert_eq(ts_json_write_file(out, root), TS_OK, "%s", ts_error_message());
    cJSON_Delete(root);
}

static int is_op(const cJSON *e, const char *cat) {
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "cat");
    return cJSON_IsString(ph) && strcmp(ph->valuestring, "X") == 0 &&
           (cat == NULL || (cJSON_IsString(c) && strcmp(c->valuestring, cat) == 0));
}

static void double_gemms(cJSON *events) {
    for (cJSON *e = events->child; e; e = e->next) {
        if (!is_op(e, "gemm")) continue;
        cJSON *dur = cJSON_GetObjectItemCaseSensitive(e, "dur");
        cJSON_SetNumberValue(dur, 2 * dur->valuedouble);
    }
}

static void rename_tenth_op(cJSON *events) {
    int n = 0;
    for (cJSON *e = events->child; e; e = e->next)
        if (is_op(e, NULL) && ++n == 10) cJSON_ReplaceItemInObject(e, "name", cJSON_CreateString("bwd L0 mb0 c0 other"));
}

static void drop_last_op(cJSON *events) {
    cJSON *last = NULL;
    for (cJSON *e = events->child; e; e = e->next)
        if (is_op(e, NULL)) last = e;
    cJSON_Delete(cJSON_DetachItemViaPointer(events, last));
}

Test(compare, identical_traces_report_zero) {
    char *dir = make_temp_dir();
    char *full = sim_trace(dir, "full.json", "tp=2,pp=2", 1);
    ts_compare c;
    cr_assert_eq(ts_compare_traces(full, full, &c), TS_OK, "%s", ts_error_message());
    cr_expect_gt(c.ops, 100);
    cr_expect_eq(c.n_stages, 2);
    cr_expect_eq(c.step_error, 0.0);
    for (int k = 0; k < c.n_kinds; k++) {
        if (c.kinds[k].measured_s == 0) continue;
        cr_expect_eq(c.kinds[k].error, 0.0, "%s: %g", c.kinds[k].kind, c.kinds[k].error);
        cr_expect_eq(c.kinds[k].median_abs_op_error, 0.0, "%s", c.kinds[k].kind);
    }
    for (int s = 0; s < c.n_stages; s++) {
        cr_expect_eq(c.stages[s].ranks, 4, "stage %d ranks %d", s, c.stages[s].ranks);
        cr_expect_eq(c.stages[s].error, 0.0, "stage %d: %g", s, c.stages[s].error);
    }
    /* Collectives are split by collective. */
    int split = 0;
    for (int k = 0; k < c.n_kinds; k++) split += strncmp(c.kinds[k].kind, "collective:", 11) == 0;
    cr_expect_geq(split, 1);
    ts_compare_free(&c);

    cli_result r = run_cli("compare", "--sim", full, "--measured", full, "--json", NULL);
    cJSON *root = parse_json_output(&r, "compare --json");
    const cJSON *step = json_obj(root, "step", "$");
    cr_expect_eq(json_num(step, "error", "$.step"), 0.0);
    cr_expect(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "kinds")));
    cr_expect(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "stages")));
    cJSON_Delete(root);
    cli_result_free(&r);
    free(full);
    remove_dir(dir);
}

/* The default simulation holds one rank per stage; a symmetric layout's ranks all take the same
 * time, so it compares with every-rank traces without error on the ranks it holds. */
Test(compare, representative_against_full) {
    char *dir = make_temp_dir();
    char *rep = sim_trace(dir, "rep.json", "tp=2,pp=2", 0), *full = sim_trace(dir, "full.json", "tp=2,pp=2", 1);
    ts_compare c;
    cr_assert_eq(ts_compare_traces(rep, full, &c), TS_OK, "%s", ts_error_message());
    for (int s = 0; s < c.n_stages; s++) {
        cr_expect_eq(c.stages[s].ranks, 1);
        cr_expect(fabs(c.stages[s].error) < 1e-9, "stage %d: %g", s, c.stages[s].error);
    }
    cr_expect(fabs(c.step_error) < 1e-9, "step error %g", c.step_error);
    ts_compare_free(&c);
    cr_expect_eq(ts_compare_traces(full, rep, &c), TS_ERR_INPUT, "a full simulation against one rank per stage");
    cr_expect(strstr(ts_error_message(), "has no ops of rank") != NULL, "%s", ts_error_message());
    free(rep);
    free(full);
    remove_dir(dir);
}

Test(compare, slower_gemms_show_in_their_kind_only) {
    char *dir = make_temp_dir();
    char *full = sim_trace(dir, "full.json", "tp=2,pp=2", 1);
    char slow[4096];
    snprintf(slow, sizeof slow, "%s/slow.json", dir);
    edit_trace(full, slow, double_gemms);
    ts_compare c;
    cr_assert_eq(ts_compare_traces(full, slow, &c), TS_OK, "%s", ts_error_message());
    int seen = 0;
    for (int k = 0; k < c.n_kinds; k++) {
        if (c.kinds[k].measured_s == 0) continue;
        double want = strcmp(c.kinds[k].kind, "gemm") == 0 ? -0.5 : 0.0;
        seen += want != 0;
        cr_expect(fabs(c.kinds[k].error - want) < 1e-6, "%s: %g, want %g", c.kinds[k].kind, c.kinds[k].error, want);
    }
    cr_expect_eq(seen, 1);
    /* Longer GEMMs can only end a rank later (their starts are left where they were). */
    for (int s = 0; s < c.n_stages; s++) cr_expect_leq(c.stages[s].error, 0.0, "stage %d", s);
    ts_compare_free(&c);
    free(full);
    remove_dir(dir);
}

/* Writes `in` to `out` with otherData.gauge_flops_per_s set to `gauge` (0: none) and every time
 * (op starts and durations, the step) × `time_scale`: the same step run at another speed. */
static void gauged_copy(const char *in, const char *out, double gauge, double time_scale) {
    cJSON *root = NULL;
    cr_assert_eq(ts_json_load_file(in, &root), TS_OK, "%s", ts_error_message());
    for (cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "traceEvents")->child; e; e = e->next) {
        if (!is_op(e, NULL)) continue;
        cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "ts"), *dur = cJSON_GetObjectItemCaseSensitive(e, "dur");
        cJSON_SetNumberValue(ts, time_scale * ts->valuedouble);
        cJSON_SetNumberValue(dur, time_scale * dur->valuedouble);
    }
    cJSON *other = cJSON_GetObjectItemCaseSensitive(root, "otherData");
    cJSON *step = cJSON_GetObjectItemCaseSensitive(other, "step_s");
    cJSON_SetNumberValue(step, time_scale * step->valuedouble);
    if (gauge > 0) cJSON_AddNumberToObject(other, "gauge_flops_per_s", gauge);
    cr_assert_eq(ts_json_write_file(out, root), TS_OK, "%s", ts_error_message());
    cJSON_Delete(root);
}

/* A run at half the calibration's speed (gauge 2e10 against 4e10) takes twice as long: put at
 * the calibration's speed it matches the simulation exactly, by kind, stage and step; the table
 * and the JSON say the speed and the step as timed. Without a gauge on both sides nothing is
 * scaled. */
Test(compare, gauge_puts_measured_times_at_the_simulated_speed) {
    char *dir = make_temp_dir();
    char *full = sim_trace(dir, "full.json", "tp=2,pp=2", 1);
    char sim[4096], slow[4096], slow_bare[4096];
    snprintf(sim, sizeof sim, "%s/sim.json", dir);
    snprintf(slow, sizeof slow, "%s/slow.json", dir);
    snprintf(slow_bare, sizeof slow_bare, "%s/slow-bare.json", dir);
    gauged_copy(full, sim, 4e10, 1);
    gauged_copy(full, slow, 2e10, 2);
    gauged_copy(full, slow_bare, 0, 2);
    ts_compare c;
    cr_assert_eq(ts_compare_traces(sim, slow, &c), TS_OK, "%s", ts_error_message());
    cr_expect(c.gauged && c.speed == 0.5, "gauged %d, speed %g", c.gauged, c.speed);
    cr_expect(fabs(c.step_error) < 1e-9, "step error %g", c.step_error);
    cr_expect(fabs(c.measured_raw_step_s / c.simulated_step_s - 2) < 1e-9, "as timed %g s, simulated %g s",
              c.measured_raw_step_s, c.simulated_step_s);
    for (int k = 0; k < c.n_kinds; k++)
        if (c.kinds[k].measured_s > 0)
            cr_expect(fabs(c.kinds[k].error) < 1e-6 && c.kinds[k].median_abs_op_error < 1e-6, "%s: %g", c.kinds[k].kind,
                      c.kinds[k].error);
    for (int st = 0; st < c.n_stages; st++) cr_expect(fabs(c.stages[st].error) < 1e-6, "stage %d", st);
    ts_compare_free(&c);

    cr_assert_eq(ts_compare_traces(sim, slow_bare, &c), TS_OK, "%s", ts_error_message());
    cr_expect(!c.gauged && c.speed == 1, "one gauge only: gauged %d, speed %g", c.gauged, c.speed);
    cr_expect(fabs(c.step_error + 0.5) < 1e-9, "step error %g", c.step_error);
    ts_compare_free(&c);

    cli_result r = run_cli("compare", "--sim", sim, "--measured", slow, NULL);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "# speed: the run's gauge read 0.500x the calibration's") != NULL, "%s", r.out);
    cli_result_free(&r);
    r = run_cli("compare", "--sim", sim, "--measured", slow, "--step-s", "3", "--json", NULL);
    cJSON *root = parse_json_output(&r, "compare --json");
    const cJSON *step = json_obj(root, "step", "$");
    cr_expect_eq(json_num(step, "measured_raw_s", "$.step"), 3);
    cr_expect_eq(json_num(step, "measured_s", "$.step"), 1.5, "--step-s is as timed: the traced step's speed applies");
    cr_expect_eq(json_num(step, "speed", "$.step"), 0.5);
    cJSON_Delete(root);
    cli_result_free(&r);
    free(full);
    remove_dir(dir);
}

Test(compare, different_programs_are_refused) {
    char *dir = make_temp_dir();
    char *a = sim_trace(dir, "a.json", "tp=2,pp=2", 1), *b = sim_trace(dir, "b.json", "tp=4,pp=2", 1);
    char renamed[4096], short_[4096];
    snprintf(renamed, sizeof renamed, "%s/renamed.json", dir);
    snprintf(short_, sizeof short_, "%s/short.json", dir);
    edit_trace(a, renamed, rename_tenth_op);
    edit_trace(a, short_, drop_last_op);

    cli_result r = run_cli("compare", "--sim", a, "--measured", b, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "traces of different programs") != NULL && one_line_error(r.err, "compare"), "%s", r.err);
    cli_result_free(&r);

    ts_compare c;
    cr_expect_eq(ts_compare_traces(a, renamed, &c), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "different step programs") != NULL, "%s", ts_error_message());
    cr_expect_eq(ts_compare_traces(a, short_, &c), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "different step programs") != NULL, "%s", ts_error_message());
    free(a);
    free(b);
    remove_dir(dir);
}

Test(compare, bad_input) {
    char *plain = test_write_temp("{\"traceEvents\": []}");
    cli_result r = run_cli("compare", "--sim", plain, "--measured", plain, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "not a Tessera trace") != NULL && one_line_error(r.err, "compare"), "%s", r.err);
    cli_result_free(&r);
    r = run_cli("compare", "--sim", plain, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "--measured is required") != NULL, "%s", r.err);
    cli_result_free(&r);
    r = run_cli("compare", "--sim", plain, "--measured", plain, "--step-s", "-1", NULL);
    cr_expect_eq(r.status, 2);
    cli_result_free(&r);
    r = run_cli("compare", "--help", NULL);
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "usage: tessera compare") != NULL);
    cli_result_free(&r);
    test_remove_temp(plain);
}
