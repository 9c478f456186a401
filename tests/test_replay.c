/* sim/replay.h, sim/cost_override.h, sim/compare_ops.h, sim/compare_wait.h and `tessera compare
 * --replay / --ops`: a full simulation's own trace, replayed on its plan, gives back its step
 * exactly (every compute op and transfer at its traced time, the schedule re-derived); one rank's
 * GEMMs made twice as slow in the "measured" trace lengthen the replayed step and make its peers
 * wait at their collectives; the worst-ops list and the wait split read the edited op. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/json.h"
#include "planner/plan_json.h"
#include "sim/compare_ops.h"
#include "sim/compare_wait.h"
#include "sim/cost_override.h"
#include "sim/engine.h"
#include "sim/replay.h"
#include "tests/helpers.h"

#define TINY_ON(sys) "--model", "tiny", "--system", sys, "--gpus", "8", "--global-batch", "16", "--seq", "256"

typedef struct {
    char dir[64], plan[128], sim[128], measured[128];
} files;

/* A fresh directory and the paths of its files. */
static void make_dir(files *f) {
    snprintf(f->dir, sizeof f->dir, "/tmp/tessera-replay-XXXXXX");
    cr_assert_not_null(mkdtemp(f->dir));
    snprintf(f->plan, sizeof f->plan, "%s/plan.json", f->dir);
    snprintf(f->sim, sizeof f->sim, "%s/sim.trace.json", f->dir);
    snprintf(f->measured, sizeof f->measured, "%s/run.trace.json", f->dir);
}

/* dir/sim.trace.json: the full simulation of dir/plan.json, which `plan` (its result) wrote. */
static void simulate_plan(files *f, cli_result plan) {
    cr_assert_eq(plan.status, 0, "plan: %s", plan.err);
    cli_result_free(&plan);
    cli_result r = run_cli("sim", "--plan", f->plan, "--full", "--trace", f->sim, NULL);
    cr_assert_eq(r.status, 0, "sim: %s", r.err);
    cli_result_free(&r);
}

/* dir/plan.json for the pins on `system` and dir/sim.trace.json of its full simulation. */
static void make_files_on(files *f, const char *fix, const char *system) {
    make_dir(f);
    simulate_plan(f, run_cli("plan", TINY_ON(system), "--fix", fix, "--top", "1", "-o", f->plan, NULL));
}

static void make_files(files *f, const char *fix) { make_files_on(f, fix, "h100-sxm-dgx"); }

static void remove_files(files *f) {
    remove(f->plan), remove(f->sim), remove(f->measured), rmdir(f->dir);
}

/* Copies `in` to `out` with rank `rank`'s GEMMs `factor` times as long and every later op of the
 * rank shifted by what they added (the run would have gone on later). */
static void slow_gemms(const char *in, const char *out, int rank, double factor) {
    cJSON *root = NULL;
    cr_assert_eq(ts_json_load_file(in, &root), TS_OK, "%s", ts_error_message());
    cJSON *events = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    for (cJSON *e = events->child; e; e = e->next) {
        const cJSON *pid = cJSON_GetObjectItemCaseSensitive(e, "pid"), *cat = cJSON_GetObjectItemCaseSensitive(e, "cat");
        if (pid->valueint != rank || !cJSON_IsString(cat) || strcmp(cat->valuestring, "gemm") != 0) continue;
        cJSON *dur = cJSON_GetObjectItemCaseSensitive(e, "dur");
        cJSON_SetNumberValue(dur, factor * dur->valuedouble);
    }
    cr_assert_eq(ts_json_write_file(out, root), TS_OK, "%s", ts_error_message());
    cJSON_Delete(root);
}

Test(replay, own_full_trace_gives_back_its_step) {
    files f;
    make_files(&f, "tp=2,pp=2,dp=2,mbs=1");
    ts_replay r;
    cr_assert_eq(ts_replay_plan(f.plan, 0, f.sim, &r), TS_OK, "%s", ts_error_message());
    cr_assert_gt(r.ops, 0);
    /* The trace rounds each start and end to the nanosecond. */
    cr_assert(fabs(r.replayed_step_s - r.measured_step_s) < 1e-6 * r.ops, "replayed %.9f s, traced %.9f s",
              r.replayed_step_s, r.measured_step_s);
    cr_assert(fabs(r.error) < 1e-4, "error %g", r.error);
    /* With the transfers modelled, the same simulation: its step again. */
    cr_assert(fabs(r.modelled_comm_error) < 1e-4, "modelled-comm error %g", r.modelled_comm_error);
    remove_files(&f);
}

/* The same with EP collectives beside computation (DeepEP under Megatron-Core's combined 1F1B,
 * whose in-flight transfers slow the compute beside them by DeepEP's SM share): replayed, or with
 * the communication modelled, the step comes back. */
Test(replay, own_full_trace_gives_back_its_step_with_ep_overlap) {
    files f;
    make_dir(&f);
    simulate_plan(&f, run_cli("plan", "--model", "tiny-moe", "--system", "h100-sxm-dgx", "--gpus", "8",
                              "--global-batch", "16", "--seq", "256", "--moe-dispatcher", "deepep",
                              "--overlap-moe-expert-parallel-comm", "--fix",
                              "tp=1,pp=2,ep=2,dp=4,vpp=2,sched=interleaved,mbs=1", "--top", "1", "-o", f.plan, NULL));
    ts_replay rp;
    cr_assert_eq(ts_replay_plan(f.plan, 0, f.sim, &rp), TS_OK, "%s", ts_error_message());
    cr_assert(fabs(rp.error) < 1e-4, "error %g", rp.error);
    cr_assert(fabs(rp.modelled_comm_error) < 1e-4, "modelled-comm error %g", rp.modelled_comm_error);
    remove_files(&f);
}

Test(replay, a_slow_rank_lengthens_the_step_and_its_peers_wait) {
    files f;
    make_files(&f, "tp=2,pp=1,dp=4,mbs=1");
    slow_gemms(f.sim, f.measured, 1, 3.0);
    ts_replay r;
    cr_assert_eq(ts_replay_plan(f.plan, 0, f.measured, &r), TS_OK, "%s", ts_error_message());
    /* The edited trace keeps the first step_s: the replay must come out longer than it. */
    cr_assert_gt(r.replayed_step_s, 1.2 * r.measured_step_s, "replayed %g s, traced %g s", r.replayed_step_s,
                 r.measured_step_s);
    /* The worst ops are rank 1's GEMMs, at -66.7% (simulated a third of "measured"). */
    ts_compare_ops ops;
    cr_assert_eq(ts_compare_ops_read(f.sim, f.measured, 1.0, &ops), TS_OK, "%s", ts_error_message());
    cr_assert_gt(ops.n, 10);
    cr_assert_eq(ops.ops[0].rank, 1);
    cr_assert_str_eq(ops.ops[0].kind, "gemm");
    cr_assert(fabs(ops.ops[0].error + 2.0 / 3.0) < 1e-3, "error %g", ops.ops[0].error);
    cr_assert_geq(ops.ops[0].microbatch, 0);
    ts_compare_ops_free(&ops);
    remove_files(&f);
}

Test(replay, waits_split_from_transfers_in_a_full_trace) {
    files f;
    make_files(&f, "tp=2,pp=2,dp=2,mbs=1");
    /* The simulator starts a collective when its last member arrives: its own trace has no wait
     * inside a span, so transfer = the simulated span exactly. */
    ts_compare_waits w;
    cr_assert_eq(ts_compare_waits_read(f.sim, f.sim, 1.0, &w), TS_OK, "%s", ts_error_message());
    cr_assert_gt(w.n_kinds, 0);
    for (int k = 0; k < w.n_kinds; k++) {
        const ts_wait_kind *x = &w.kinds[k];
        cr_assert(fabs(x->simulated_s - x->measured_transfer_s) <= 1e-8 * x->ops + 1e-6 * x->simulated_s,
                  "%s: simulated %g s, transfer %g s", x->kind, x->simulated_s, x->measured_transfer_s);
        cr_assert(fabs(x->simulated_wait_s - x->measured_wait_s) <= 1e-8 * x->ops + 1e-6 * x->simulated_wait_s,
                  "%s: waits %g s and %g s", x->kind, x->simulated_wait_s, x->measured_wait_s);
    }
    ts_compare_waits_free(&w);
    remove_files(&f);
}

/* Rank 0 enters every collective `early_us` sooner: its span grows at the front by that much, as a
 * rank that waits for a late peer inside the call instead of before it. */
static void early_arrivals(const char *in, const char *out, double early_us) {
    cJSON *root = NULL;
    cr_assert_eq(ts_json_load_file(in, &root), TS_OK, "%s", ts_error_message());
    cJSON *events = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    for (cJSON *e = events->child; e; e = e->next) {
        const cJSON *pid = cJSON_GetObjectItemCaseSensitive(e, "pid"), *cat = cJSON_GetObjectItemCaseSensitive(e, "cat");
        if (pid->valueint != 0 || !cJSON_IsString(cat) || strcmp(cat->valuestring, "collective") != 0) continue;
        cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "ts"), *dur = cJSON_GetObjectItemCaseSensitive(e, "dur");
        cJSON_SetNumberValue(ts, ts->valuedouble - early_us);
        cJSON_SetNumberValue(dur, dur->valuedouble + early_us);
    }
    cr_assert_eq(ts_json_write_file(out, root), TS_OK, "%s", ts_error_message());
    cJSON_Delete(root);
}

Test(replay, waiting_inside_a_call_is_still_wait) {
    files f;
    /* CPU ranks run one op at a time (serial_ops), as the split assumes. */
    make_files_on(&f, "tp=2,pp=1,dp=4,mbs=1", "cpu-localhost");
    ts_compare_waits same, early;
    cr_assert_eq(ts_compare_waits_read(f.sim, f.sim, 1.0, &same), TS_OK, "%s", ts_error_message());
    /* 1 µs sooner: less than any gap before a collective in this step, so the span overlaps nothing. */
    early_arrivals(f.sim, f.measured, 1.0);
    cr_assert_eq(ts_compare_waits_read(f.sim, f.measured, 1.0, &early), TS_OK, "%s", ts_error_message());
    cr_assert_eq(same.n_kinds, early.n_kinds);
    for (int k = 0; k < same.n_kinds; k++) {
        const ts_wait_kind *a = &same.kinds[k], *b = &early.kinds[k];
        /* Rank 0's spans grew by 1 µs at the front: waiting moved into the call, which the split
         * sees through (the transfer starts at the last arrival either way). */
        cr_expect(fabs(b->measured_transfer_s - a->measured_transfer_s) < 1e-8 * a->ops, "%s: transfer %g -> %g s",
                  a->kind, a->measured_transfer_s, b->measured_transfer_s);
        cr_expect(fabs(b->measured_wait_s - a->measured_wait_s) < 1e-8 * a->ops, "%s: wait %g -> %g s", a->kind,
                  a->measured_wait_s, b->measured_wait_s);
    }
    ts_compare_waits_free(&same);
    ts_compare_waits_free(&early);
    remove_files(&f);
}

Test(replay, cost_override_table_checks_its_keys) {
    files f;
    make_files(&f, "tp=2,pp=2,dp=2,mbs=1");
    ts_problem pb;
    ts_layout *layouts = NULL;
    int n = 0;
    cr_assert_eq(ts_plan_read(f.plan, &pb, &layouts, &n), TS_OK, "%s", ts_error_message());
    ts_program prog;
    cr_assert_eq(ts_program_build(&pb, &layouts[0], NULL, &prog), TS_OK, "%s", ts_error_message());
    ts_cost_override t;
    cr_assert_eq(ts_cost_override_init(&t, &prog), TS_OK);
    cr_assert_eq(t.n_ranks, 8);
    cr_assert(isnan(ts_cost_override_get(&t, 3, 0)));
    cr_assert_eq(ts_cost_override_set(&t, 3, 0, 0.5), TS_OK);
    cr_assert_eq(ts_cost_override_get(&t, 3, 0), 0.5);
    cr_assert_eq(t.n_set, 1);
    cr_assert_eq(ts_cost_override_set(&t, 8, 0, 0.5), TS_ERR_INPUT);
    cr_assert_eq(ts_cost_override_set(&t, 0, prog.stages[0].n_ops, 0.5), TS_ERR_INPUT);
    cr_assert_eq(ts_cost_override_set(&t, 0, 0, -1), TS_ERR_INPUT);
    cr_assert_eq(ts_cost_override_set(&t, 0, 0, NAN), TS_ERR_INPUT);
    /* A table needs the full simulation. */
    ts_sim_opts so = {.full = 0, .cost_override = &t};
    ts_sim_result res;
    cr_assert_eq(ts_simulate(&pb, &prog, &so, &res), TS_ERR_INPUT);
    ts_cost_override_free(&t);
    ts_program_free(&prog);
    free(layouts);
    remove_files(&f);
}

Test(replay, cli_replay_ops_and_bad_input) {
    files f;
    make_files(&f, "tp=2,pp=2,dp=2,mbs=1");
    cli_result r = run_cli("compare", "--measured", f.sim, "--replay", "--plan", f.plan, "--json", NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cJSON *doc = cJSON_Parse(r.out);
    cr_assert_not_null(doc, "%s", r.out);
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(doc, "replay");
    cr_assert(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(rp, "error")), "%s", r.out);
    cr_assert(fabs(cJSON_GetObjectItemCaseSensitive(rp, "error")->valuedouble) < 1e-4);
    cJSON_Delete(doc);
    cli_result_free(&r);
    r = run_cli("compare", "--sim", f.sim, "--measured", f.sim, "--ops", "3", NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.out, "# the 3 ops furthest off"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "#communication"), "%s", r.out);
    cli_result_free(&r);
    r = run_cli("compare", "--sim", f.sim, "--measured", f.sim, "--json", NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    doc = cJSON_Parse(r.out);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(doc, "op_list");
    cr_assert(cJSON_IsArray(list));
    cr_assert_eq(cJSON_GetArraySize(list), cJSON_GetObjectItemCaseSensitive(doc, "ops")->valueint);
    cr_assert(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(doc, "waits")));
    cJSON_Delete(doc);
    cli_result_free(&r);
    r = run_cli("compare", "--measured", f.sim, "--replay", NULL);
    cr_assert_eq(r.status, 2);
    cr_assert(one_line_error(r.err, "compare"), "%s", r.err);
    cr_assert_eq(r.out[0], '\0');
    cli_result_free(&r);
    /* A trace of another layout: refused naming both. */
    files g;
    make_files(&g, "tp=4,pp=2,dp=1,mbs=1");
    r = run_cli("compare", "--measured", g.sim, "--replay", "--plan", f.plan, NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(one_line_error(r.err, "compare"), "%s", r.err);
    cli_result_free(&r);
    remove_files(&g);
    remove_files(&f);
}
