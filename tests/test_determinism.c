/* Determinism: the same inputs give byte-identical outputs. Each command runs twice and the files
 * and stdout are compared byte for byte, except the values of the fields that hold wall-clock
 * time (WALL_CLOCK_KEYS: how long the search, the stage partitioning or the simulation took on
 * this machine), which are blanked in both texts first, and the lines of the tables that report
 * those times. Covers `plan -o` (dense, MoE, a Hugging Face config, --refine), `sim --plan`
 * with --trace and --json, the sim table, `report` in every format, `sweep` (table, JSON and its
 * HTML page) and `export` in both formats; and `plan --partition ilp` run as concurrent copies (the
 * stage partitioning stops on a count of GLPK nodes, never on wall-clock time, so a busy machine
 * gets the same plan). */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/helpers.h"

static const char *const WALL_CLOCK_KEYS[] = {"\"search_s\":", "\"partition_s\":", "\"sim_s\":",
                                              "\"refine_s\":", NULL};

/* Replaces, in place, the number after each wall-clock key by one '#', so the rest of the text
 * can be compared byte for byte. */
static void blank_wall_clock(char *text) {
    for (int k = 0; WALL_CLOCK_KEYS[k]; k++)
        for (char *p = strstr(text, WALL_CLOCK_KEYS[k]); p; p = strstr(p + 1, WALL_CLOCK_KEYS[k])) {
            char *v = p + strlen(WALL_CLOCK_KEYS[k]);
            while (*v == ' ' || *v == '\t') v++;
            char *end = v;
            while (*end && strchr("0123456789.eE+-", *end)) end++;
            if (end == v) continue;
            *v = '#';
            memmove(v + 1, end, strlen(end) + 1);
        }
}

/* Drops the lines of a table that report wall-clock times ("# searched ... in 0.002 s",
 * "# ... simulated in 0.039 s", "# refined: ... in 2.285 s"). */
static void drop_timed_lines(char *text) {
    char *w = text;
    for (char *line = text; *line;) {
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line + 1) : strlen(line);
        int timed = line[0] == '#' && (strstr(line, " in ") != NULL) &&
                    (memmem(line, len, " s\n", 3) != NULL || memmem(line, len, " s,", 3) != NULL ||
                     memmem(line, len, " s)", 3) != NULL);
        if (!timed) {
            memmove(w, line, len);
            w += len;
        }
        line += len;
    }
    *w = '\0';
}

static char *slurp(const char *path) {
    char *t = read_file(path);
    cr_assert_not_null(t, "%s was not written", path);
    return t;
}

/* The first byte where a and b differ, for the failure message. */
static size_t first_diff(const char *a, const char *b) {
    size_t i = 0;
    while (a[i] && a[i] == b[i]) i++;
    return i;
}

static void expect_same(const char *what, char *a, char *b) {
    size_t at = first_diff(a, b);
    cr_expect(strcmp(a, b) == 0, "%s differs between two runs at byte %zu:\n  run 1: %.120s\n  run 2: %.120s",
              what, at, a + at, b + at);
}

/* Runs `tessera plan ARGS -o FILE` twice and compares the files. */
static void plan_twice(const char *const *args, int nargs) {
    char *dir = make_temp_dir();
    char file[2][PATH_MAX];
    char *text[2];
    for (int i = 0; i < 2; i++) {
        snprintf(file[i], sizeof file[i], "%s/plan%d.json", dir, i);
        const char *argv[CLI_MAX_ARGS + 1];
        int n = 0;
        for (; n < nargs; n++) argv[n] = args[n];
        argv[n++] = "-o";
        argv[n++] = file[i];
        argv[n] = NULL;
        cli_result r = run_argv(argv);
        cr_assert_eq(r.status, 0, "plan run %d: exit %d, stderr: %s", i + 1, r.status, r.err);
        cli_result_free(&r);
        text[i] = slurp(file[i]);
        blank_wall_clock(text[i]);
    }
    char what[256];
    snprintf(what, sizeof what, "plan -o (%s %s %s ...)", args[2], args[4], args[6]);
    expect_same(what, text[0], text[1]);
    free(text[0]);
    free(text[1]);
    remove_dir(dir);
}

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

Test(determinism, plan_files_are_byte_identical, .timeout = 300) {
    const char *dense[] = {"plan", "--model", "llama2-70b", "--system", "h100-sxm-dgx", "--gpus", "64"};
    const char *moe[] = {"plan", "--model", "mixtral-8x7b", "--system", "h100-sxm-dgx", "--gpus", "64",
                         "--global-batch", "256", "--top", "20"};
    char *hf = test_data_path("tests/data/hf/qwen1.5-moe-a2.7b.json");
    const char *hf_args[] = {"plan", "--model", hf, "--system", "a100-80g-dgx", "--gpus", "16",
                             "--global-batch", "64", "--seq", "2048"};
    const char *refine[] = {"plan", "--model", "llama2-7b", "--system", "h100-sxm-dgx", "--gpus", "16",
                            "--global-batch", "32", "--top", "4", "--refine", "2"};
    plan_twice(dense, N(dense));
    plan_twice(moe, N(moe));
    plan_twice(hf_args, N(hf_args));
    plan_twice(refine, N(refine));
    free(hf);
}

Test(determinism, sim_outputs_are_byte_identical, .timeout = 300) {
    char *dir = make_temp_dir();
    char plan[PATH_MAX];
    snprintf(plan, sizeof plan, "%s/plan.json", dir);
    cli_result p = run_cli("plan", "--model", "tiny-moe", "--system", "h100-sxm-dgx", "--gpus", "8",
                           "--global-batch", "16", "--fix", "pp=2,ep=2", "--top", "3", "-o", plan, NULL);
    cr_assert_eq(p.status, 0, "plan: exit %d, stderr: %s", p.status, p.err);
    cli_result_free(&p);

    char trace[2][PATH_MAX];
    char *json[2], *table[2], *tr[2];
    for (int i = 0; i < 2; i++) {
        snprintf(trace[i], sizeof trace[i], "%s/trace%d.json", dir, i);
        cli_result r = run_cli("sim", "--plan", plan, "--index", "2", "--full", "--json", "--trace",
                               trace[i], NULL);
        cr_assert_eq(r.status, 0, "sim run %d: exit %d, stderr: %s", i + 1, r.status, r.err);
        json[i] = strdup(r.out);
        blank_wall_clock(json[i]);
        cli_result_free(&r);
        tr[i] = slurp(trace[i]);
        r = run_cli("sim", "--plan", plan, NULL);
        cr_assert_eq(r.status, 0, "sim table run %d: exit %d, stderr: %s", i + 1, r.status, r.err);
        table[i] = strdup(r.out);
        drop_timed_lines(table[i]);
        cli_result_free(&r);
    }
    expect_same("sim --trace file", tr[0], tr[1]);
    expect_same("sim --json (sim_s blanked)", json[0], json[1]);
    expect_same("sim table (timed lines dropped)", table[0], table[1]);
    cr_expect(strstr(json[0], "\"sim_s\":") != NULL, "the blanked field sim_s is gone from sim --json");
    for (int i = 0; i < 2; i++) {
        free(json[i]);
        free(table[i]);
        free(tr[i]);
    }
    remove_dir(dir);
}

/* Runs `tessera ARGS` twice and compares stdout, wall-clock fields blanked and timed lines
 * dropped; with `file` (ARGS already end in "-o file"), the file too. */
static void cli_twice(const char *const *args, const char *file) {
    char *out[2], *written[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        cli_result r = run_argv(args);
        cr_assert_eq(r.status, 0, "%s run %d: exit %d, stderr: %s", args[0], i + 1, r.status, r.err);
        out[i] = strdup(r.out);
        blank_wall_clock(out[i]);
        drop_timed_lines(out[i]);
        cli_result_free(&r);
        if (file) {
            written[i] = slurp(file);
            blank_wall_clock(written[i]);
        }
    }
    char what[512];
    snprintf(what, sizeof what, "%s %s %s stdout", args[0], args[1], args[2]);
    expect_same(what, out[0], out[1]);
    if (file) {
        snprintf(what, sizeof what, "%s %s %s -o file", args[0], args[1], args[2]);
        expect_same(what, written[0], written[1]);
    }
    for (int i = 0; i < 2; i++) {
        free(out[i]);
        free(written[i]);
    }
}

Test(determinism, report_sweep_and_export_are_byte_identical, .timeout = 300) {
    char *dir = make_temp_dir();
    char plan[PATH_MAX], html[PATH_MAX];
    snprintf(plan, sizeof plan, "%s/plan.json", dir);
    cli_result p = run_cli("plan", "--model", "llama2-7b", "--system", "h100-sxm-dgx", "--gpus", "16",
                           "--global-batch", "32", "--top", "4", "-o", plan, NULL);
    cr_assert_eq(p.status, 0, "plan: exit %d, stderr: %s", p.status, p.err);
    cli_result_free(&p);
    const char *formats[] = {"html", "md", "json"};
    for (int f = 0; f < 3; f++) {
        const char *report[] = {"report", "--plan", plan, "--format", formats[f], NULL};
        cli_twice(report, NULL);
    }
    char csv[PATH_MAX], layouts[PATH_MAX + 16];
    snprintf(csv, sizeof csv, "%s/report", dir);
    snprintf(layouts, sizeof layouts, "%s-layouts.csv", csv);
    const char *report_csv[] = {"report", "--plan", plan, "--format", "csv", "-o", csv, NULL};
    cli_twice(report_csv, layouts);
    const char *exports[] = {"megatron", "deepspeed"};
    for (int f = 0; f < 2; f++) {
        const char *export[] = {"export", "--plan", plan, "--format", exports[f], NULL};
        cli_twice(export, NULL);
    }
    snprintf(html, sizeof html, "%s/sweep.html", dir);
    const char *sweep_table[] = {"sweep", "--model", "llama2-7b", "--system", "h100-sxm-dgx,b200-dgx",
                                 "--gpus", "8..32", "--global-batch", "64", NULL};
    const char *sweep_json[] = {"sweep", "--model", "llama2-7b", "--system", "h100-sxm-dgx,b200-dgx",
                                "--gpus", "8..32", "--global-batch", "64", "--json", "-o", html, NULL};
    cli_twice(sweep_table, NULL);
    cli_twice(sweep_json, html);
    remove_dir(dir);
}

/* Four copies of the same `plan --partition ilp` at once (each slowing the others, as on a busy
 * machine) write byte-identical plans, wall-clock fields blanked. The instance is one where GLPK
 * works up to its node limit (DeepSeek-V3 interleaved: two kinds of layer, where the heuristic is
 * not exact), so a wall-clock limit would stop it at a different point in each copy. */
Test(determinism, concurrent_partitioned_plans_are_byte_identical, .timeout = 600) {
    enum { COPIES = 4 };
    char *dir = make_temp_dir();
    char file[COPIES][PATH_MAX];
    pid_t pid[COPIES];
    for (int i = 0; i < COPIES; i++) {
        snprintf(file[i], sizeof file[i], "%s/plan%d.json", dir, i);
        pid[i] = fork();
        cr_assert_neq(pid[i], -1, "fork failed");
        if (pid[i] == 0) {
            const char *args[] = {"plan", "--model", "deepseek-v3", "--system", "h800-dgx", "--gpus", "2048",
                                  "--global-batch", "15360", "--seq", "4096", "--fix",
                                  "dp=64,tp=1,pp=16,cp=2,ep=64,vpp=2", "--partition", "ilp", "--top", "3",
                                  "-o", file[i], NULL};
            cli_result r = run_argv_timeout(args, 500);
            _exit(r.status);
        }
    }
    char *text[COPIES];
    for (int i = 0; i < COPIES; i++) {
        int status = 0;
        cr_assert_eq(waitpid(pid[i], &status, 0), pid[i]);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "copy %d: status %d", i + 1, status);
        text[i] = slurp(file[i]);
        blank_wall_clock(text[i]);
    }
    /* The instance does what it is here for: splits by GLPK, one of them stopped by the limit. */
    cr_expect(strstr(text[0], "\"partition_status\":\t\"node-limit\"") != NULL ||
                  strstr(text[0], "\"partition_status\": \"node-limit\"") != NULL,
              "no layout reached the node limit: %.400s", text[0]);
    for (int i = 1; i < COPIES; i++) {
        char what[64];
        snprintf(what, sizeof what, "concurrent plan copy %d against copy 1", i + 1);
        expect_same(what, text[0], text[i]);
    }
    for (int i = 0; i < COPIES; i++) free(text[i]);
    remove_dir(dir);
}

/* The helpers themselves: blanking touches the wall-clock values and nothing else. */
Test(determinism, blanking_only_touches_wall_clock_fields) {
    char text[] = "{\"search_s\": 0.0021, \"step_s\": 50.37, \"sim_s\":\t1e-05}";
    blank_wall_clock(text);
    cr_expect_str_eq(text, "{\"search_s\": #, \"step_s\": 50.37, \"sim_s\":\t#}");
    char table[] = "# tessera sim: x\n# 95462 events, simulated in 0.039 s\n     0      3.1\n";
    drop_timed_lines(table);
    cr_expect_str_eq(table, "# tessera sim: x\n     0      3.1\n");
}

/* Concurrent copies writing the same output: four `plan -o` (and four `export -o`) at once into
 * one path. The writer's temporary files are per process, so each copy renames a whole file into
 * place: the survivor is complete and byte-identical to a lone run's, and no temporary file is
 * left (common/output.h). */
Test(determinism, concurrent_copies_write_one_whole_file, .timeout = 300) {
    char *dir = make_temp_dir();
    char *plan = test_data_path("tests/bad-input/plan-valid.json");
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && export TESSERA_DATA='%s' && T='%s' && "
             "$T plan --model tiny --system cpu-localhost --gpus 2 --global-batch 4 --seq 64 -o lone.json >/dev/null && "
             "$T export --plan '%s' --format megatron -o lone.sh && "
             "for i in 1 2 3 4; do "
             "($T plan --model tiny --system cpu-localhost --gpus 2 --global-batch 4 --seq 64 -o same.json >/dev/null || echo FAIL) & "
             "($T export --plan '%s' --format megatron -o same.sh || echo FAIL) & done; wait",
             dir, test_data_dir(), tessera_binary(), plan, plan);
    const char *argv[] = {"sh", "-c", cmd, NULL};
    cli_result r = run_program_timeout(argv, 240);
    cr_assert_eq(r.status, 0, "exit %d, stderr: %s", r.status, r.err);
    cr_expect(strstr(r.out, "FAIL") == NULL && r.err_len == 0, "a copy failed: %s %s", r.out, r.err);
    const char *pairs[][2] = {{"lone.json", "same.json"}, {"lone.sh", "same.sh"}};
    for (int i = 0; i < 2; i++) {
        char a_path[PATH_MAX], b_path[PATH_MAX];
        snprintf(a_path, sizeof a_path, "%s/%s", dir, pairs[i][0]);
        snprintf(b_path, sizeof b_path, "%s/%s", dir, pairs[i][1]);
        char *a = slurp(a_path), *b = slurp(b_path);
        blank_wall_clock(a);
        blank_wall_clock(b);
        expect_same(pairs[i][1], a, b);
        free(a);
        free(b);
    }
    char listing[4096];
    list_dir(dir, listing, sizeof listing);
    cr_expect(strstr(listing, ".tmp.") == NULL, "temporary files left: %s", listing);
    cli_result_free(&r);
    free(plan);
    remove_dir(dir);
}
