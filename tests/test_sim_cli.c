/* `tessera sim` and `tessera plan --refine` as users see them: each test runs the built binary
 * as a subprocess (tests/helpers.h) on a small layout (the `tiny` model on 8 H100s, tp=2, pp=2)
 * and checks the DESIGN.md "sim" JSON, the table, the Chrome trace (parsed back with cJSON: one
 * "X" event per op and simulated rank, metadata per rank and stream, sorted, written
 * atomically), byte-identical reruns, --dump-program, --plan/--index, refusals of bad input
 * (exit 2, one line) and the refined plan. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "tests/helpers.h"

#define TINY "--model", "tiny", "--system", "h100-sxm-dgx", "--gpus", "8", "--global-batch", "16", \
             "--seq", "256"
#define SIM_TINY "sim", TINY, "--fix", "tp=2,pp=2"

static const char *const kinds[] = {"gemm", "attention", "elementwise", "optimizer", "collective",
                                    "send", "recv"};
#define N_KINDS (sizeof kinds / sizeof kinds[0])

/* Checks DESIGN.md's sim fields and the extra ones; returns the root for more checks. */
static cJSON *check_sim_json(const cli_result *r, int pp, int ranks) {
    cr_expect_eq(r->err_len, 0, "stderr: %s", r->err);
    cJSON *root = parse_json_output(r, "sim --json");
    const char *layout = json_str(root, "layout", "$");
    cr_expect(strncmp(layout, "dp=", 3) == 0 && strstr(layout, ",sched=") != NULL, "layout \"%s\"", layout);
    double step = json_num(root, "step_s", "$"), bubble = json_num(root, "bubble_fraction", "$");
    double events = json_num(root, "events", "$"), sim_s = json_num(root, "sim_s", "$");
    cr_expect(step > 0 && step < 1, "step_s %g (a tiny model's step is well under a second)", step);
    cr_expect(bubble >= 0 && bubble < 1, "bubble_fraction %g", bubble);
    cr_expect(events >= 1 && events == floor(events), "events %g", events);
    cr_expect(sim_s >= 0 && sim_s < 60, "sim_s %g", sim_s);
    const cJSON *stages = cJSON_GetObjectItemCaseSensitive(root, "stages");
    cr_assert(cJSON_IsArray(stages), "$.stages is not an array");
    cr_assert_eq(cJSON_GetArraySize(stages), pp, "%d stages for pp=%d", cJSON_GetArraySize(stages), pp);
    double bubble_sum = 0;
    for (int s = 0; s < pp; s++) {
        const cJSON *st = cJSON_GetArrayItem(stages, s);
        char where[32];
        snprintf(where, sizeof where, "$.stages[%d]", s);
        cr_expect_eq(json_num(st, "stage", where), s, "%s.stage", where);
        double busy = json_num(st, "busy_s", where), bub = json_num(st, "bubble_s", where);
        double exposed = json_num(st, "exposed_comm_s", where);
        cr_expect(busy > 0 && bub >= 0 && exposed >= 0, "%s: busy %g, bubble %g, exposed %g", where, busy, bub, exposed);
        /* The compute stream is either busy or idle, and idle time is bubble or exposed comm. */
        cr_expect(fabs(busy + bub + exposed - step) <= 1e-9 * step,
                  "%s: busy %g + bubble %g + exposed %g != step %g", where, busy, bub, exposed, step);
        bubble_sum += bub / step;
    }
    cr_expect(fabs(bubble_sum / pp - bubble) <= 1e-9, "bubble_fraction %g, mean of stages %g", bubble,
              bubble_sum / pp);
    double closed = json_num(root, "closed_form_step_s", "$");
    cr_expect(closed > 0 && closed < 1, "closed_form_step_s %g", closed);
    const cJSON *kind_s = json_obj(root, "kind_s", "$");
    double compute = 0;
    for (size_t k = 0; k < N_KINDS; k++) {
        double v = json_num(kind_s, kinds[k], "$.kind_s");
        cr_expect(v >= 0, "$.kind_s.%s = %g", kinds[k], v);
        if (k < 4) compute += v;
    }
    cr_expect(json_num(kind_s, "gemm", "$.kind_s") > 0, "no GEMM time");
    cr_expect(compute <= pp * step * (1 + 1e-9), "compute %g over %d stages of %g s", compute, pp, step);
    cr_expect_eq(json_num(root, "ranks", "$"), ranks, "ranks %g, expected %d", json_num(root, "ranks", "$"), ranks);
    cr_expect_eq(json_num(root, "full", "$"), ranks == 8, "full");
    cr_expect_str_eq(json_str(root, "model", "$"), "tiny");
    cr_expect_eq(json_num(root, "gpus", "$"), 8);
    cr_expect(json_num(root, "ops", "$") >= 1, "ops");
    return root;
}

Test(sim_cli, json_has_design_fields) {
    cli_result r = run_cli(SIM_TINY, "--json", NULL);
    cJSON *root = check_sim_json(&r, 2, 2);
    const char *layout = json_str(root, "layout", "$");
    cr_expect(strstr(layout, ",tp=2,pp=2,") != NULL, "--fix tp=2,pp=2 not honoured: %s", layout);
    cJSON_Delete(root);
    cli_result_free(&r);

    r = run_cli(SIM_TINY, "--json", "--full", NULL);
    root = check_sim_json(&r, 2, 8);
    cJSON_Delete(root);
    cli_result_free(&r);
}

Test(sim_cli, table) {
    cli_result r = run_cli(SIM_TINY, NULL);
    cr_assert_eq(r.status, 0, "exit %d, stderr: %s", r.status, r.err);
    cr_expect_eq(r.err_len, 0, "stderr: %s", r.err);
    cr_expect(starts_with(r.out, "# tessera sim: tiny on 8 × h100-sxm-dgx"), "first line: %.200s", r.out);
    cr_expect(find_line(r.out, "# layout: dp=2,tp=2,pp=2,") != NULL, "no layout line:\n%s", r.out);
    const char *step = find_line(r.out, "# step: simulated ");
    double sim = 0, closed = 0;
    cr_assert(step != NULL && sscanf(step, "# step: simulated %lf s, closed form %lf s", &sim, &closed) == 2,
              "no step line:\n%s", r.out);
    cr_expect(sim > 0 && closed > 0, "step %g, closed form %g", sim, closed);
    int rows = 0;
    for (const char *p = r.out; *p; p = strchr(p, '\n') + 1) {
        cr_assert(strchr(p, '\n') != NULL, "unterminated last line");
        if (*p == '#') continue;
        int stage = -1;
        double busy = -1, bubble = -1, exposed = -1;
        cr_assert(sscanf(p, "%d %lf %lf %lf", &stage, &busy, &bubble, &exposed) == 4, "row: %.120s", p);
        cr_expect_eq(stage, rows, "row %d is stage %d", rows, stage);
        cr_expect(busy > 0 && bubble >= 0 && exposed >= 0, "row %d: %.120s", rows, p);
        rows++;
    }
    cr_expect_eq(rows, 2, "%d stage rows for pp=2", rows);
    cr_expect(find_line(r.out, "# time by op kind") != NULL, "no time-by-kind line");
    cr_expect(strstr(r.out, " events, simulated in ") != NULL, "no events line");
    cli_result_free(&r);
}

/* Parses a trace and checks its structure; returns the number of "X" events. */
static int check_trace(const char *text, int ranks, double step_s) {
    cJSON *root = cJSON_Parse(text);
    cr_assert(root != NULL, "the trace is not JSON: %.200s", text);
    cr_expect_str_eq(json_str(root, "displayTimeUnit", "$"), "ms");
    const cJSON *events = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    cr_assert(cJSON_IsArray(events), "$.traceEvents is not an array");
    int n_x = 0, n_proc = 0, n_thread = 0, last_pid = -1, last_tid = -1;
    double last_ts = 0;
    long long last_end_ns = 0; /* of the previous op on the same track */
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        const char *ph = json_str(e, "ph", "event");
        int pid = (int)json_num(e, "pid", "event"), tid = (int)json_num(e, "tid", "event");
        cr_assert(pid >= 0 && pid < 8 && tid >= 0 && tid < 5, "pid %d, tid %d", pid, tid);
        if (strcmp(ph, "M") == 0) {
            const char *what = json_str(e, "name", "metadata");
            const char *name = json_str(json_obj(e, "args", "metadata"), "name", "metadata args");
            if (strcmp(what, "process_name") == 0) {
                char want[64];
                snprintf(want, sizeof want, "rank %d (stage ", pid);
                cr_expect(starts_with(name, want), "process %d is named \"%s\"", pid, name);
                n_proc++;
            } else {
                cr_expect_str_eq(what, "thread_name");
                n_thread++;
            }
            continue;
        }
        cr_assert_str_eq(ph, "X", "event of phase \"%s\"", ph);
        const char *cat = json_str(e, "cat", "event");
        int known = 0;
        for (size_t k = 0; k < N_KINDS; k++) known |= strcmp(cat, kinds[k]) == 0;
        cr_expect(known, "category \"%s\"", cat);
        cr_expect(json_str(e, "name", "event")[0] != '\0', "unnamed event");
        double ts = json_num(e, "ts", "event"), dur = json_num(e, "dur", "event");
        cr_expect(ts >= 0 && dur >= 0 && ts + dur <= step_s * 1e6 + 1e-3,
                  "event at %g µs for %g µs in a step of %g µs", ts, dur, step_s * 1e6);
        const cJSON *args = json_obj(e, "args", "event");
        json_num(args, "op", "args");
        if (strcmp(cat, "gemm") == 0) {
            double m = json_num(args, "m", "args"), n = json_num(args, "n", "args"), k = json_num(args, "k", "args");
            cr_expect(json_num(args, "flops", "args") >= 2 * m * n * k * (1 - 1e-12), "gemm flops < 2mnk");
        } else if (strcmp(cat, "collective") == 0) {
            json_str(args, "coll", "args");
            json_str(args, "group", "args");
        }
        /* Sorted by (pid, tid, ts). */
        cr_expect(pid > last_pid || (pid == last_pid && (tid > last_tid || (tid == last_tid && ts >= last_ts))),
                  "event (%d, %d, %g) after (%d, %d, %g)", pid, tid, ts, last_pid, last_tid, last_ts);
        /* Times are printed to the nanosecond: on one track an op never starts before the one
         * before it ends. */
        long long ts_ns = llround(ts * 1e3), end_ns = ts_ns + llround(dur * 1e3);
        if (pid == last_pid && tid == last_tid)
            cr_expect(ts_ns >= last_end_ns, "op at %lld ns overlaps the previous one, ending at %lld ns", ts_ns,
                      last_end_ns);
        last_end_ns = end_ns;
        last_pid = pid, last_tid = tid, last_ts = ts;
        n_x++;
    }
    cr_expect_eq(n_proc, ranks, "%d process names for %d ranks", n_proc, ranks);
    cr_expect(n_thread >= 2 * ranks && n_thread <= 5 * ranks, "%d thread names for %d ranks", n_thread, ranks);
    cJSON_Delete(root);
    return n_x;
}

Test(sim_cli, trace_has_every_op_of_every_rank) {
    char *dir = make_temp_dir();
    char file[PATH_MAX], names[4096];
    snprintf(file, sizeof file, "%s/sim.trace.json", dir);
    const char *const modes[] = {NULL, "--full"};
    for (int full = 0; full < 2; full++) {
        const char *args[] = {SIM_TINY, "--json", "--trace", file, modes[full], NULL};
        cli_result r = run_argv(args);
        cJSON *root = check_sim_json(&r, 2, full ? 8 : 2);
        double ops = json_num(root, "ops", "$"), step = json_num(root, "step_s", "$");
        char *text = read_file(file);
        cr_assert(text != NULL, "%s was not written", file);
        int n_x = check_trace(text, full ? 8 : 2, step);
        /* "ops" counts both stage programs; every simulated rank runs its stage's. */
        int per_stage = full ? 4 : 1;
        cr_expect_eq(n_x, (int)ops * per_stage, "%d op events for %g ops × %d ranks per stage", n_x, ops, per_stage);
        cr_expect_eq(json_num(root, "trace_events", "$"), n_x, "trace_events says what the trace holds");
        cr_expect_eq(list_dir(dir, names, sizeof names), 1, "left beside the trace: %s", names);
        free(text);
        cJSON_Delete(root);
        cli_result_free(&r);
    }
    /* With the table, the last line names the file and the op events it holds. */
    cli_result r = run_cli(SIM_TINY, "-t", file, NULL);
    cr_assert_eq(r.status, 0, "exit %d, stderr: %s", r.status, r.err);
    char *text = read_file(file);
    cr_assert(text != NULL);
    char wrote[PATH_MAX + 80];
    snprintf(wrote, sizeof wrote, "# wrote %s: %d op events, one per op of each simulated rank\n", file,
             check_trace(text, 2, 1e9));
    free(text);
    cr_expect(find_line(r.out, wrote) != NULL, "no \"%s\" line:\n%s", wrote, r.out);
    cli_result_free(&r);
    remove_dir(dir);
}

/* The JSON text without its "sim_s" member (the simulation's wall-clock time). */
static char *without_sim_s(const cli_result *r) {
    cJSON *root = parse_json_output(r, "sim --json");
    cJSON_DeleteItemFromObjectCaseSensitive(root, "sim_s");
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    cr_assert(text != NULL);
    return text;
}

Test(sim_cli, reruns_are_byte_identical) {
    char *dir = make_temp_dir();
    char file[2][PATH_MAX];
    cli_result r[2];
    for (int i = 0; i < 2; i++) {
        snprintf(file[i], sizeof file[i], "%s/run%d.json", dir, i);
        const char *args[] = {SIM_TINY, "--full", "--json", "--trace", file[i], NULL};
        r[i] = run_argv(args);
        cr_assert_eq(r[i].status, 0, "run %d: exit %d, stderr: %s", i + 1, r[i].status, r[i].err);
    }
    char *a = read_file(file[0]), *b = read_file(file[1]);
    cr_assert(a != NULL && b != NULL, "a trace was not written");
    cr_expect(strcmp(a, b) == 0, "two runs wrote different traces");
    free(a);
    free(b);
    a = without_sim_s(&r[0]);
    b = without_sim_s(&r[1]);
    cr_expect_str_eq(a, b, "two runs printed different JSON (apart from sim_s)");
    free(a);
    free(b);
    for (int i = 0; i < 2; i++) cli_result_free(&r[i]);
    remove_dir(dir);
}

Test(sim_cli, dump_program) {
    cli_result j = run_cli(SIM_TINY, "--json", NULL);
    cJSON *root = check_sim_json(&j, 2, 2);
    int ops = (int)json_num(root, "ops", "$");
    cli_result r = run_cli(SIM_TINY, "--dump-program", NULL);
    cr_assert_eq(r.status, 0, "exit %d, stderr: %s", r.status, r.err);
    cr_expect_eq(r.err_len, 0, "stderr: %s", r.err);
    cr_expect(starts_with(r.out, "# step program: dp=2,tp=2,pp=2,"), "first line: %.200s", r.out);
    /* One line per op, plus the program's and each stage's header; no simulation summary. */
    cr_expect_eq(count_lines(r.out), ops + 1 + 2, "%d lines for %d ops", count_lines(r.out), ops);
    cr_expect(find_line(r.out, "# stage 1: ") != NULL, "no stage 1 header");
    cr_expect(strstr(r.out, "# tessera sim") == NULL, "--dump-program also simulated");
    cJSON_Delete(root);
    cli_result_free(&j);
    cli_result_free(&r);
}

Test(sim_cli, plan_file_and_index) {
    char *dir = make_temp_dir();
    char plan[PATH_MAX];
    snprintf(plan, sizeof plan, "%s/plan.json", dir);
    cli_result p = run_cli("plan", TINY, "--top", "3", "--json", "-o", plan, NULL);
    cJSON *pj = parse_json_output(&p, "plan -o");
    const cJSON *layouts = cJSON_GetObjectItemCaseSensitive(pj, "layouts");
    cr_assert(cJSON_IsArray(layouts) && cJSON_GetArraySize(layouts) == 3, "plan has no 3 layouts");
    const char *const index[] = {NULL, "2", "3"};
    for (int i = 0; i < 3; i++) {
        const char *args[] = {"sim", "--plan", plan, "--json", index[i] ? "--index" : NULL, index[i], NULL};
        cli_result r = run_argv(args);
        const cJSON *l = cJSON_GetArrayItem(layouts, i);
        int pp = (int)json_num(l, "pp", "layout");
        cJSON *root = check_sim_json(&r, pp, pp);
        cr_expect_str_eq(json_str(root, "layout", "$"), json_str(l, "layout", "layout"), "--index %s",
                         index[i] ? index[i] : "(default)");
        double closed = json_num(root, "closed_form_step_s", "$"), planned = json_num(l, "step_s", "layout");
        cr_expect(fabs(closed - planned) <= 1e-9 * planned, "closed form %g, plan says %g", closed, planned);
        cJSON_Delete(root);
        cli_result_free(&r);
    }
    /* Past the last layout. */
    cli_result r = run_cli("sim", "--plan", plan, "--index", "4", NULL);
    cr_expect_eq(r.status, 2, "exit %d, stderr: %s", r.status, r.err);
    cr_expect(one_line_error(r.err, "sim"), "stderr: %s", r.err);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "tessera sim: --index: %s holds 3 layouts, got 4\n", plan);
    cr_expect(starts_with(r.err, want), "stderr: %s", r.err);
    cr_expect_eq(r.out_len, 0, "stdout: %s", r.out);
    cli_result_free(&r);
    cJSON_Delete(pj);
    cli_result_free(&p);
    remove_dir(dir);
}

/* Bad input: exit 2, nothing on stdout, one line (plus "Try ..." for flag misuse). */
static void expect_bad_input(const char *const *args, const char *stderr_start) {
    cli_result r = run_argv(args);
    cr_expect_eq(r.status, 2, "tessera sim ... %s: exit %d, stderr: %s", args[1] ? args[1] : "", r.status, r.err);
    cr_expect_eq(r.out_len, 0, "stdout: %.200s", r.out);
    cr_expect(one_line_error(r.err, "sim"), "not one line: %s", r.err);
    cr_expect(starts_with(r.err, stderr_start), "expected \"%s...\", got: %s", stderr_start, r.err);
    cli_result_free(&r);
}

Test(sim_cli, bad_input_exits_2_with_one_line) {
    const char *none[] = {"sim", NULL};
    expect_bad_input(none, "tessera sim: --plan or --model, --system and --gpus are required\n");
    const char *no_model[] = {"sim", "--system", "h100-sxm-dgx", "--gpus", "8", NULL};
    expect_bad_input(no_model, "tessera sim: --model is required\n");
    const char *missing[] = {"sim", "--plan", "/nonexistent-tessera-dir/plan.json", NULL};
    expect_bad_input(missing, "tessera sim: /nonexistent-tessera-dir/plan.json: ");
    const char *both[] = {"sim", "--plan", "plan.json", "--model", "tiny", NULL};
    expect_bad_input(both, "tessera sim: --plan and --model exclude each other");
    const char *index_alone[] = {"sim", TINY, "--index", "2", NULL};
    expect_bad_input(index_alone, "tessera sim: --index needs --plan\n");
    const char *index_zero[] = {"sim", "--plan", "plan.json", "--index", "0", NULL};
    expect_bad_input(index_zero, "tessera sim: --index: expected an integer in [1, 1048576], got \"0\"\n");
    const char *index_text[] = {"sim", "--plan", "plan.json", "--index", "two", NULL};
    expect_bad_input(index_text, "tessera sim: --index: expected an integer in [1, 1048576], got \"two\"\n");
    const char *trace_stdout[] = {"sim", TINY, "--trace", "-", NULL};
    expect_bad_input(trace_stdout, "tessera sim: --trace: expected a file name, got \"-\"");
    const char *gpus_twice[] = {"sim", TINY, "--gpus-max", "8", NULL};
    expect_bad_input(gpus_twice, "tessera sim: --gpus and --gpus-max exclude each other\n");
    const char *bad_tolerance[] = {"sim", TINY, "--batch-tolerance", "half", NULL};
    expect_bad_input(bad_tolerance, "tessera sim: --batch-tolerance");
    const char *bad_fix[] = {"sim", TINY, "--fix", "tp=3", NULL};
    expect_bad_input(bad_fix, "tessera sim: ");
    const char *not_plan[] = {"sim", "--plan", "", NULL};
    char *model = test_data_path("models/llm/tiny.json");
    not_plan[2] = model;
    expect_bad_input(not_plan, "tessera sim: ");
    free(model);
}

/* `sim --gpus-max N`: the budget's pick, the layout `plan --gpus-max N --top 1` ranks first, on
 * the GPU count it chose. */
Test(sim_cli, gpus_max_simulates_the_budgets_pick) {
    cli_result p = run_cli("plan", "--model", "llama3-8b", "--system", "h100-sxm-dgx", "--gpus-max", "60", "--top", "1",
                           "--json", NULL);
    cJSON *pj = parse_json_output(&p, "plan --gpus-max");
    const cJSON *best = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(pj, "layouts"), 0);
    cli_result r = run_cli("sim", "--model", "llama3-8b", "--system", "h100-sxm-dgx", "--gpus-max", "60", "--json", NULL);
    cJSON *sj = parse_json_output(&r, "sim --gpus-max");
    cr_expect_str_eq(json_str(sj, "layout", "$"), json_str(best, "layout", "$.layouts[0]"));
    cr_expect_eq(json_num(best, "step_s", "$.layouts[0]"), json_num(sj, "closed_form_step_s", "$"),
                 "sim's closed form is not the plan's on the budget's GPU count");
    cJSON_Delete(pj), cJSON_Delete(sj), cli_result_free(&p), cli_result_free(&r);
}

/* An unwritable trace is an i/o error (exit 1): one line, nothing on stdout. */
Test(sim_cli, trace_to_missing_folder_fails_cleanly) {
    cli_result r = run_cli(SIM_TINY, "--trace", "/nonexistent-tessera-dir/sim.trace.json", NULL);
    cr_expect_eq(r.status, 1, "exit %d, stderr: %s", r.status, r.err);
    cr_expect_eq(count_lines(r.err), 1, "stderr must be one line:\n%s", r.err);
    cr_expect(starts_with(r.err, "tessera sim: /nonexistent-tessera-dir/sim.trace.json"), "stderr: %s", r.err);
    cr_expect_eq(r.out_len, 0, "stdout: %.200s", r.out);
    cli_result_free(&r);
}

/* A trace of millions of events is refused before simulating, and nothing is written. */
Test(sim_cli, huge_trace_is_refused) {
    char *dir = make_temp_dir();
    char file[PATH_MAX], names[4096];
    snprintf(file, sizeof file, "%s/big.trace.json", dir);
    const char *args[] = {"sim", "--model", "llama3-405b", "--system", "h100-sxm-dgx", "--gpus", "16384",
                          "--global-batch", "2048", "--seq", "8192", "--full", "--trace", file, NULL};
    expect_bad_input(args, "tessera sim: a trace of ");
    cli_result r = run_argv(args);
    cr_expect(strstr(r.err, "over the limit of 5000000 events") != NULL, "stderr: %s", r.err);
    cr_expect(strstr(r.err, "no --full") != NULL, "stderr does not suggest one rank per stage: %s", r.err);
    cli_result_free(&r);
    cr_expect_eq(list_dir(dir, names, sizeof names), 0, "written anyway: %s", names);
    remove_dir(dir);
}

Test(sim_cli, help_on_stdout) {
    cli_result r = run_cli("sim", "--help", NULL);
    cr_expect_eq(r.status, 0, "exit %d, stderr: %s", r.status, r.err);
    cr_expect_eq(r.err_len, 0, "stderr: %s", r.err);
    cr_expect(starts_with(r.out, "usage: tessera sim --plan plan.json"), "stdout: %.200s", r.out);
    const char *flags[] = {"--plan", "--index", "--model", "--system", "--gpus", "--fix", "--full",
                           "--trace", "--json", "--dump-program", "--help"};
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++)
        cr_expect(strstr(r.out, flags[k]) != NULL, "sim --help does not mention %s", flags[k]);
    cli_result_free(&r);
}

Test(plan_cli, refine_simulates_and_reranks) {
    cli_result r = run_cli("plan", TINY, "--refine", "3", NULL);
    cr_assert_eq(r.status, 0, "exit %d, stderr: %s", r.status, r.err);
    cr_expect(find_line(r.out, "# refined: simulated the best 3 ") != NULL, "no \"# refined:\" line:\n%s", r.out);
    int rows = 0, refined = 0;
    for (const char *p = r.out; *p; p = strchr(p, '\n') + 1) {
        const char *end = strchr(p, '\n');
        cr_assert(end != NULL, "unterminated last line");
        if (*p == '#') continue;
        int bars = 0;
        for (const char *q = p; q < end; q++) bars += *q == '|';
        cr_expect(bars == 4 || bars == 5, "row %d has %d column groups: %.*s", rows + 1, bars, (int)(end - p), p);
        if (bars == 5) {
            cr_expect_eq(refined, rows, "refined row after an unrefined one");
            refined++;
        }
        rows++;
    }
    cr_expect_eq(refined, 3, "%d refined rows", refined);
    cr_expect(rows == 10, "%d rows (top 10)", rows);
    cr_expect(strstr(r.out, "(simulated ") != NULL, "the best line lacks the simulated time");
    cli_result_free(&r);

    r = run_cli("plan", TINY, "--refine", "3", "--json", NULL);
    cJSON *root = parse_json_output(&r, "plan --refine 3 --json");
    const cJSON *layouts = cJSON_GetObjectItemCaseSensitive(root, "layouts");
    cr_assert(cJSON_IsArray(layouts) && cJSON_GetArraySize(layouts) == 10, "layouts");
    double prev = 0;
    for (int i = 0; i < 10; i++) {
        const cJSON *l = cJSON_GetArrayItem(layouts, i);
        cr_expect_eq(json_num(l, "rank", "layout"), i + 1);
        const cJSON *sim = cJSON_GetObjectItemCaseSensitive(l, "sim_step_s");
        if (i >= 3) {
            cr_expect(sim == NULL, "layout %d is not refined but has sim_step_s", i + 1);
            continue;
        }
        double s = json_num(l, "sim_step_s", "layout");
        cr_expect(s > 0 && s >= prev, "layout %d: sim_step_s %g after %g (re-ranked by it)", i + 1, s, prev);
        prev = s;
    }
    cr_expect_eq(json_num(json_obj(root, "request", "$"), "refine", "$.request"), 3);
    cJSON_Delete(root);
    cli_result_free(&r);

    /* Without --refine nothing about simulation appears. */
    r = run_cli("plan", TINY, "--json", NULL);
    cr_expect(r.status == 0 && strstr(r.out, "sim_step_s") == NULL && strstr(r.out, "\"refine\"") == NULL,
              "plain plan mentions the simulation: %.300s", r.out);
    cli_result_free(&r);
    r = run_cli("plan", TINY, "--refine", "2", "--objective", "memory", NULL);
    cr_expect_eq(r.status, 2, "--refine with --objective memory: exit %d", r.status);
    cr_expect(one_line_error(r.err, "plan"), "stderr: %s", r.err);
    cli_result_free(&r);
}

/* A temporary copy of the system spec at `zoo` with node.KEY = value; test_remove_temp it. */
static char *zoo_with_node_key(const char *zoo, const char *key, double value) {
    cJSON *doc = NULL;
    cr_assert_eq(ts_json_load_file(zoo, &doc), TS_OK, "%s", ts_error_message());
    cJSON_AddNumberToObject(cJSON_GetObjectItemCaseSensitive(doc, "node"), key, value);
    char *text = cJSON_Print(doc), *path = test_write_temp(text);
    cJSON_free(text);
    cJSON_Delete(doc);
    return path;
}

/* A system with node.gauge_flops_per_s (a calibrated profile): the trace's otherData carries it,
 * the speed its times hold at (sim/compare.h scales runs to it); the zoo's has none. */
Test(sim_cli, trace_carries_the_systems_gauge) {
    char *zoo = test_data_path("models/systems/cpu-localhost.json");
    char *path = zoo_with_node_key(zoo, "gauge_flops_per_s", 3.25e10);
    char *dir = make_temp_dir(), file[PATH_MAX];
    snprintf(file, sizeof file, "%s/sim.trace.json", dir);
    for (int gauged = 0; gauged < 2; gauged++) {
        cli_result r = run_cli("sim", "-m", "tiny", "-s", gauged ? path : zoo, "-g", "2", "--fix", "dp=2", "-t", file, NULL);
        cr_assert_eq(r.status, 0, "exit %d, stderr: %s", r.status, r.err);
        cJSON *root = NULL;
        cr_assert_eq(ts_json_load_file(file, &root), TS_OK, "%s", ts_error_message());
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(json_obj(root, "otherData", "$"), "gauge_flops_per_s");
        if (gauged) cr_expect(cJSON_IsNumber(g) && g->valuedouble == 3.25e10, "otherData.gauge_flops_per_s");
        else cr_expect_null(g, "the zoo's system has no gauge");
        cJSON_Delete(root);
        cli_result_free(&r);
    }
    free(zoo);
    test_remove_temp(path);
    remove_dir(dir);
}

/* A system with node.speed_cv: the summary names the lockstep factor on compute (JSON and table);
 * a steady system's has none. */
Test(sim_cli, lockstep_factor_is_reported) {
    char *zoo = test_data_path("models/systems/cpu-localhost.json");
    char *path = zoo_with_node_key(zoo, "speed_cv", 0.1);

    cli_result r = run_cli("sim", "-m", "tiny", "-s", path, "-g", "2", "--fix", "dp=2", "--json", NULL);
    cJSON *root = parse_json_output(&r, "sim --json");
    double f = json_num(root, "lockstep_scale", "$");
    cr_expect(fabs(f - (1 + 0.1 * 0.5642)) < 1e-4, "lockstep_scale %g for 2 ranks at cv 0.1", f);
    cJSON_Delete(root);
    cli_result_free(&r);
    r = run_cli("sim", "-m", "tiny", "-s", path, "-g", "2", "--fix", "dp=2", NULL);
    cr_expect(find_line(r.out, "# compute × 1.056: node.speed_cv 0.1, ranks in lockstep wait for the slowest") != NULL,
              "no lockstep line:\n%s", r.out);
    cli_result_free(&r);
    r = run_cli("sim", "-m", "tiny", "-s", zoo, "-g", "2", "--fix", "dp=2", "--json", NULL);
    root = parse_json_output(&r, "sim --json");
    cr_expect_null(cJSON_GetObjectItemCaseSensitive(root, "lockstep_scale"), "a steady system has no factor");
    cJSON_Delete(root);
    cli_result_free(&r);
    free(zoo);
    test_remove_temp(path);
}
