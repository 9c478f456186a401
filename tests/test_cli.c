/* The `tessera` command line as users and scripts see it: each test runs the built binary
 * ($TESSERA_BIN) as a subprocess and checks its exit status, stdout and stderr separately
 * against DESIGN.md's contract (0 ok, 2 bad input with one line naming file, field, expected vs
 * got; 3 nothing fits; `--json` fields; atomic `-o`).
 *
 * Bad input is a golden file, tests/data/cli/bad_input.golden (jq's %%FAIL habit): arguments,
 * exit status and the exact stderr, with temp-file and repository paths replaced by $TMP and
 * $DATA.
 * Criterion lists them as skipped. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/helpers.h"

static _Noreturn void die(const char *what) {
    cr_assert_fail("test_cli: %s: %s", what, strerror(errno));
    abort();
}

/* --- text helpers ------------------------------------------------------------------------------- */

/* A malloc'd copy of `text` with every `from` replaced by `to`. */
static char *replace_all(const char *text, const char *from, const char *to) {
    size_t nf = strlen(from), nt = strlen(to), count = 0;
    for (const char *p = text; nf && (p = strstr(p, from)) != NULL; p += nf) count++;
    char *out = malloc(strlen(text) + count * (nt > nf ? nt - nf : 0) + 1);
    if (out == NULL) die("malloc");
    char *w = out;
    for (const char *p = text;;) {
        const char *hit = nf ? strstr(p, from) : NULL;
        if (hit == NULL) {
            strcpy(w, p);
            break;
        }
        memcpy(w, p, (size_t)(hit - p));
        w += hit - p;
        memcpy(w, to, nt);
        w += nt;
        p = hit + nf;
    }
    return out;
}


static void write_file(const char *path, const char *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (f == NULL) die(path);
    if (fwrite(data, 1, len, f) != len || fclose(f) != 0) die(path);
}

/* --- golden bad input ----------------------------------------------------------------------------- */

/* Inputs too large or too odd to keep in the repository, written to $TMP. */
static void write_generated_inputs(const char *dir) {
    char path[PATH_MAX];
    /* A 10 MiB "name": the loader must refuse it by length, without echoing it. */
    size_t big = (size_t)10 << 20;
    const char *head = "{\"name\": \"", *tail = "\", \"layers\": 80, \"hidden\": 8192, \"heads\": 64, "
                                               "\"ffn_hidden\": 28672, \"vocab\": 32000}\n";
    size_t len = strlen(head) + big + strlen(tail);
    char *text = malloc(len + 1);
    if (text == NULL) die("malloc");
    memcpy(text, head, strlen(head));
    memset(text + strlen(head), 'a', big);
    memcpy(text + strlen(head) + big, tail, strlen(tail) + 1);
    snprintf(path, sizeof path, "%s/big-string.json", dir);
    write_file(path, text, len);
    /* 100000 '[': a recursive-descent parser without a depth limit overflows the stack. */
    memset(text, '[', 100000);
    snprintf(path, sizeof path, "%s/deep-nesting.json", dir);
    write_file(path, text, 100000);
    free(text);
}

typedef struct {
    int line;                  /* in the golden file */
    char args_text[1024];      /* as written, for messages */
    int exit_status;
    char expected[8192];       /* stderr lines, each ending in '\n' */
} golden_case;

static int parse_golden(const char *path, golden_case *cases, int cap) {
    FILE *f = fopen(path, "r");
    if (f == NULL) die(path);
    char line[8192];
    int n = 0, lineno = 0, in_case = 0, have_exit = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len && line[len - 1] == '\n') line[--len] = '\0';
        if (!in_case) {
            if (len == 0 || line[0] == '#') continue;
            if (!starts_with(line, "$ ")) cr_assert_fail("%s:%d: expected \"$ ARGS\", got \"%s\"", path, lineno, line);
            if (n == cap) cr_assert_fail("%s: more than %d cases", path, cap);
            golden_case *c = &cases[n++];
            memset(c, 0, sizeof *c);
            c->line = lineno;
            snprintf(c->args_text, sizeof c->args_text, "%.1000s", line + 2);
            in_case = 1;
            have_exit = 0;
        } else if (len == 0) {
            in_case = 0;
        } else if (!have_exit) {
            if (sscanf(line, "exit %d", &cases[n - 1].exit_status) != 1)
                cr_assert_fail("%s:%d: expected \"exit N\", got \"%s\"", path, lineno, line);
            have_exit = 1;
        } else {
            golden_case *c = &cases[n - 1];
            size_t used = strlen(c->expected);
            if (used + len + 2 > sizeof c->expected) cr_assert_fail("%s:%d: expected stderr too long", path, lineno);
            memcpy(c->expected + used, line, len);
            memcpy(c->expected + used + len, "\n", 2);
        }
    }
    fclose(f);
    for (int i = 0; i < n; i++)
        if (cases[i].expected[0] == '\0') cr_assert_fail("%s:%d: case has no stderr lines", path, cases[i].line);
    return n;
}

Test(cli, golden_bad_input, .timeout = 600) {
    static golden_case cases[128];
    char *golden = test_data_path("tests/data/cli/bad_input.golden");
    int n = parse_golden(golden, cases, 128);
    cr_assert_geq(n, 30, "%s: only %d cases", golden, n);
    char *tmp = make_temp_dir();
    write_generated_inputs(tmp);
    int failures = 0;
    for (int i = 0; i < n; i++) {
        golden_case *c = &cases[i];
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", c->args_text);
        char *owned[CLI_MAX_ARGS];
        const char *args[CLI_MAX_ARGS + 1];
        int na = 0;
        char *save = NULL;
        for (char *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
            if (na == CLI_MAX_ARGS) cr_assert_fail("%s:%d: too many arguments", golden, c->line);
            char *t = replace_all(tok, "$DATA", data_root());
            owned[na] = replace_all(t, "$TMP", tmp);
            free(t);
            args[na] = owned[na];
            na++;
        }
        args[na] = NULL;
        cli_result r = run_argv(args);
        char *e1 = replace_all(r.err, tmp, "$TMP");
        char *got = replace_all(e1, data_root(), "$DATA");
        free(e1);
        int ok = r.status == c->exit_status && strcmp(got, c->expected) == 0 && r.out_len == 0 &&
                 one_line_error(r.err, args[0]);
        cr_expect(ok,
                  "%s:%d: tessera %s\n  expected exit %d, stderr:\n%s  got exit %d, stderr:\n%s"
                  "  stdout (%zu bytes): %.200s\n  (every error must be one line, plus \"Try ...\" "
                  "for flag misuse, and print nothing on stdout)",
                  golden, c->line, c->args_text, c->exit_status, c->expected, r.status, got,
                  r.out_len, r.out);
        failures += !ok;
        free(got);
        for (int k = 0; k < na; k++) free(owned[k]);
        cli_result_free(&r);
    }
    cr_expect_eq(failures, 0, "%d of %d golden bad-input cases failed", failures, n);
    remove_dir(tmp);
    free(golden);
}

/* --- help and commands --------------------------------------------------------------------------- */

Test(cli, top_level_help_lists_commands) {
    const char *const forms[] = {"--help", "-h", "help"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        cli_result r = run_cli(forms[i], NULL);
        cr_expect_eq(r.status, 0, "tessera %s: exit %d, stderr: %s", forms[i], r.status, r.err);
        cr_expect(starts_with(r.out, "usage: tessera "), "tessera %s: stdout: %s", forms[i], r.out);
        cr_expect_eq(r.err_len, 0, "tessera %s: stderr: %s", forms[i], r.err);
        const char *cmds[] = {"plan", "report", "sweep", "export", "models", "systems"};
        for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
            char want[32];
            snprintf(want, sizeof want, "  %s ", cmds[k]);
            cr_expect(find_line(r.out, want) != NULL, "tessera %s does not list %s:\n%s", forms[i],
                      cmds[k], r.out);
        }
        cli_result_free(&r);
    }
}

Test(cli, unknown_command_exits_2) {
    cli_result r = run_cli("bogus", NULL);
    cr_expect_eq(r.status, 2, "tessera bogus: exit %d", r.status);
    cr_expect_eq(r.out_len, 0, "tessera bogus: stdout: %s", r.out);
    cr_expect(starts_with(r.err, "tessera: unknown command \"bogus\"\n"), "stderr: %s", r.err);
    /* The usage follows the one-line message on stderr. */
    cr_expect(strstr(r.err, "\nusage: tessera ") != NULL, "stderr: %s", r.err);
    cli_result_free(&r);

    r = run_cli(NULL);
    cr_expect_eq(r.status, 2, "tessera (no command): exit %d", r.status);
    cr_expect_eq(r.out_len, 0, "tessera (no command): stdout: %s", r.out);
    cr_expect(starts_with(r.err, "usage: tessera "), "stderr: %s", r.err);
    cli_result_free(&r);
}

/* `tessera cmd --help` and `-h`: exit 0, the usage on stdout starting with `usage`, nothing on
 * stderr (for `run`: no mpirun started), every one of `flags` mentioned. */
static void expect_help(const char *cmd, const char *usage, const char *const *flags, size_t n_flags) {
    const char *const forms[] = {"--help", "-h"};
    for (size_t i = 0; i < 2; i++) {
        cli_result r = run_cli(cmd, forms[i], NULL);
        cr_expect_eq(r.status, 0, "tessera %s %s: exit %d, stderr: %s", cmd, forms[i], r.status, r.err);
        cr_expect_eq(r.err_len, 0, "tessera %s %s: stderr: %s", cmd, forms[i], r.err);
        cr_expect(starts_with(r.out, usage), "tessera %s %s: stdout: %s", cmd, forms[i], r.out);
        for (size_t k = 0; k < n_flags; k++)
            cr_expect(strstr(r.out, flags[k]) != NULL, "%s --help does not mention %s", cmd, flags[k]);
        cli_result_free(&r);
    }
}

/* --help wins even over missing required flags. */
Test(cli, plan_help_on_stdout) {
    const char *const flags[] = {"--model", "--system", "--gpus", "--global-batch", "--seq", "--top",
                                 "--fix", "--objective", "--json", "--output", "--help"};
    expect_help("plan", "usage: tessera plan --model M --system S --gpus N", flags, sizeof flags / sizeof flags[0]);
}

/* `run --help` returns before anything else: no plan needed, no mpirun. */
Test(cli, run_help_on_stdout) {
    const char *const flags[] = {"--plan", "--index", "--steps", "--warmup", "--trace", "--timeout",
                                 "--json", "--threads", "--seed", "--text", "--lr", "--params",
                                 "--device", "--help", "TESSERA_FAULT_RANK", "fp32"};
    expect_help("run", "usage: tessera run --plan plan.json", flags, sizeof flags / sizeof flags[0]);
}

/* A plan made for all-gather CP carries its kind; `run` trains ring attention only and says so
 * in one line, exit 2, before any rank starts. */
Test(cli, run_refuses_a_cp_kind_other_than_ring) {
    char *tmp = make_temp_dir();
    char plan[4200];
    snprintf(plan, sizeof plan, "%s/plan.json", tmp);
    cli_result r = run_cli("plan", "--model", "tiny", "--system", "cpu-localhost", "--gpus", "4", "--global-batch",
                           "8", "--seq", "128", "--dtype", "fp32", "--fix", "tp=1,cp=2,pp=1", "--cp-kind",
                           "allgather", "-o", plan, NULL);
    cr_assert_eq(r.status, 0, "plan: exit %d, stderr: %s", r.status, r.err);
    cli_result_free(&r);
    r = run_cli("run", "--plan", plan, NULL);
    cr_expect_eq(r.status, 2, "exit %d, stderr: %s", r.status, r.err);
    cr_expect_eq(count_lines(r.err), 1, "stderr must be one line:\n%s", r.err);
    cr_expect(strstr(r.err, "$.request.cp_kind: expected \"ring\"") != NULL, "stderr: %s", r.err);
    cli_result_free(&r);
    remove_dir(tmp);
}

/* Every file in <data>/<folder> appears as a row "  NAME ..." of `tessera cmd`. */
static void expect_zoo_listed(const char *cmd, const char *folder, const char *must) {
    cli_result r = run_cli(cmd, NULL);
    cr_expect_eq(r.status, 0, "tessera %s: exit %d, stderr: %s", cmd, r.status, r.err);
    cr_expect_eq(r.err_len, 0, "tessera %s: stderr: %s", cmd, r.err);
    cr_expect(starts_with(r.out, "# "), "tessera %s: no '#' header:\n%s", cmd, r.out);
    char want[128];
    snprintf(want, sizeof want, "  %s ", must);
    cr_expect(find_line(r.out, want) != NULL, "tessera %s does not list %s:\n%s", cmd, must, r.out);
    char *dir = test_data_path(folder);
    DIR *d = opendir(dir);
    cr_assert(d != NULL, "cannot open %s", dir);
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len <= 5 || strcmp(e->d_name + len - 5, ".json") != 0) continue;
        snprintf(want, sizeof want, "  %.*s ", (int)(len - 5), e->d_name);
        cr_expect(find_line(r.out, want) != NULL, "tessera %s does not list %s", cmd, e->d_name);
        files++;
    }
    closedir(d);
    cr_expect_eq(count_lines(r.out), files + 1, "tessera %s: %d lines for %d zoo files", cmd,
                 count_lines(r.out), files);
    free(dir);
    cli_result_free(&r);
}

Test(cli, models_and_systems_list_the_zoo) {
    expect_zoo_listed("models", "models/llm", "llama2-70b");
    expect_zoo_listed("systems", "models/systems", "h100-sxm-dgx");
    cli_result r = run_cli("models", "--help", NULL);
    cr_expect_eq(r.status, 0, "tessera models --help: exit %d", r.status);
    cr_expect(starts_with(r.out, "usage: tessera models"), "stdout: %s", r.out);
    cli_result_free(&r);
}

/* --- nothing fits -------------------------------------------------------------------------------- */

Test(cli, nothing_fits_exits_3_and_says_what_would) {
    cli_result r = run_cli("plan", "--model", "llama3-405b", "--system", "h100-sxm-dgx", "--gpus", "8", NULL);
    cr_expect_eq(r.status, 3, "exit %d, stderr: %s", r.status, r.err);
    cr_expect_eq(r.out_len, 0, "stdout: %s", r.out);
    cr_expect_eq(count_lines(r.err), 1, "stderr must be one line:\n%s", r.err);
    const char *prefix = "tessera plan: nothing fits: llama3-405b on 8 × h100-sxm-dgx needs at least ";
    cr_expect(starts_with(r.err, prefix), "stderr: %s", r.err);
    double need_gb = 0, usable_gb = 0;
    int gpus = 0;
    const char *p = strstr(r.err, "needs at least ");
    cr_assert(p != NULL && sscanf(p, "needs at least %lf GB/GPU", &need_gb) == 1,
              "no \"needs at least X GB/GPU\" in: %s", r.err);
    p = strstr(r.err, " but ");
    cr_assert(p != NULL && sscanf(p, " but %lf GB are usable", &usable_gb) == 1,
              "no \"but X GB are usable\" in: %s", r.err);
    /* 405.9e9 parameters × 16 bytes (weights, grads, Adam) over 8 GPUs is 812 GB already. */
    cr_expect(need_gb > 800 && need_gb > usable_gb && usable_gb > 0 && usable_gb <= 80,
              "needs %.1f GB, %.1f GB usable: %s", need_gb, usable_gb, r.err);
    p = strstr(r.err, "needs about ");
    cr_assert(p != NULL && sscanf(p, "needs about %d GPUs", &gpus) == 1, "no \"needs about N GPUs\" in: %s", r.err);
    /* The weights, gradients and optimizer alone need 6.5 TB: at least 88 GPUs of 73.5 GB. */
    cr_expect(gpus >= 88 && gpus % 8 == 0, "needs about %d GPUs: %s", gpus, r.err);
    cli_result_free(&r);
}

/* --- success --------------------------------------------------------------------------------------- */

#define PLAN_70B "plan", "--model", "llama2-70b", "--system", "h100-sxm-dgx", "--gpus", "64", \
                 "--global-batch", "1024", "--seq", "4096"

/* Checks every field DESIGN.md promises in `tessera plan --json` and the identities between
 * them; returns the "layouts" array. */
static const cJSON *check_plan_json(const cJSON *root, int gpus, long long batch, long long seq,
                                    int top) {
    cr_assert(cJSON_IsObject(root), "plan JSON is not an object");
    double searched = json_num(root, "searched", "$"), feasible = json_num(root, "feasible", "$");
    double search_s = json_num(root, "search_s", "$");
    cr_expect(searched >= 1 && feasible >= 1 && feasible <= searched, "searched %g, feasible %g",
              searched, feasible);
    cr_expect(search_s >= 0 && search_s < 60, "search_s %g", search_s);
    const cJSON *layouts = cJSON_GetObjectItemCaseSensitive(root, "layouts");
    cr_assert(cJSON_IsArray(layouts), "$.layouts is not an array");
    int n = cJSON_GetArraySize(layouts);
    cr_expect(n >= 1 && n <= top && n == (feasible < top ? (int)feasible : top),
              "%d layouts for %g feasible and top %d", n, feasible, top);
    double prev_step = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *l = cJSON_GetArrayItem(layouts, i);
        char where[32];
        snprintf(where, sizeof where, "$.layouts[%d]", i);
        const char *ints[] = {"dp", "tp", "pp", "cp", "ep", "sp", "zero", "mbs", "microbatches", "vpp"};
        int v[10];
        for (int k = 0; k < 10; k++) {
            double x = json_num(l, ints[k], where);
            cr_assert(x == floor(x) && x >= 0 && x <= 1 << 24, "%s.%s = %g", where, ints[k], x);
            v[k] = (int)x;
        }
        const char *sched = json_str(l, "schedule", where), *rc = json_str(l, "recompute", where);
        char text[256];
        snprintf(text, sizeof text, "dp=%d,tp=%d,pp=%d,cp=%d,ep=%d,sp=%d,zero=%d,mbs=%d,vpp=%d,sched=%s,recompute=%s",
                 v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[9], sched, rc);
        cr_expect_str_eq(json_str(l, "layout", where), text, "%s.layout disagrees with its fields", where);
        cr_expect_eq(v[0] * v[1] * v[2] * v[3], gpus, "%s: dp·tp·pp·cp = %d, not %d GPUs", where,
                     v[0] * v[1] * v[2] * v[3], gpus);
        cr_expect_eq((long long)v[8] * v[0] * v[7], batch, "%s: microbatches·dp·mbs != batch %lld", where, batch);
        const cJSON *mem = json_obj(l, "memory_bytes", where);
        const char *mems[] = {"weights", "grads", "optimizer", "activations", "buffers", "total"};
        double total = json_num(mem, "total", where);
        for (int k = 0; k < 6; k++) {
            double x = json_num(mem, mems[k], where);
            cr_expect(x >= 0 && x <= total, "%s.memory_bytes.%s = %g (total %g)", where, mems[k], x, total);
        }
        cr_expect(total > 1e9 && total <= 80e9, "%s: %g bytes does not fit an 80 GB GPU", where, total);
        double step = json_num(l, "step_s", where);
        cr_expect(step > 0 && step >= prev_step, "%s: step_s %g after %g (ranked by time)", where, step, prev_step);
        prev_step = step;
        const cJSON *t = json_obj(l, "time_s", where);
        const char *times[] = {"compute", "tp_comm", "cp_comm", "ep_comm", "pp_comm", "pp_bubble", "dp_comm", "optimizer"};
        for (int k = 0; k < 8; k++) {
            double x = json_num(t, times[k], where);
            cr_expect(x >= 0 && x <= step * (1 + 1e-9), "%s.time_s.%s = %g of step %g", where, times[k], x, step);
        }
        cr_expect(json_num(t, "compute", where) > 0, "%s: no compute time", where);
        double tps = json_num(l, "tokens_per_s", where);
        cr_expect(fabs(tps * step - (double)batch * seq) <= 1e-9 * batch * seq,
                  "%s: tokens_per_s %g × step_s %g != %lld tokens", where, tps, step, batch * seq);
        double tflops = json_num(l, "tflops_per_gpu", where), mfu = json_num(l, "mfu", where);
        cr_expect(tflops > 0 && mfu > 0 && mfu < 1, "%s: %g TFLOP/s/GPU, mfu %g", where, tflops, mfu);
    }
    return layouts;
}

Test(cli, plan_table) {
    cli_result r = run_cli(PLAN_70B, NULL);
    cr_assert_eq(r.status, 0, "exit %d, stderr: %s", r.status, r.err);
    cr_expect_eq(r.err_len, 0, "stderr: %s", r.err);
    cr_expect(starts_with(r.out, "# tessera plan: llama2-70b on 64 × h100-sxm-dgx"), "first line: %.200s", r.out);
    /* Rows: every line not starting with '#' is " RANK dp tp pp cp ..." ranked 1, 2, ... */
    int rows = 0, header_units = 0;
    for (const char *p = r.out; *p; p = strchr(p, '\n') + 1) {
        cr_assert(strchr(p, '\n') != NULL, "unterminated last line");
        if (*p == '#') {
            header_units += starts_with(p, "#    ") && strstr(p, "GB") != NULL;
            continue;
        }
        int rank = 0, dp = 0, tp = 0, pp = 0, cp = 0;
        cr_assert(sscanf(p, "%d %d %d %d %d", &rank, &dp, &tp, &pp, &cp) == 5, "row: %.120s", p);
        cr_expect_eq(rank, rows + 1, "row %d has rank %d", rows + 1, rank);
        cr_expect_eq(dp * tp * pp * cp, 64, "row %d: dp·tp·pp·cp = %d", rank, dp * tp * pp * cp);
        rows++;
    }
    cr_expect(rows >= 1 && rows <= 10, "%d ranked rows", rows);
    cr_expect_eq(header_units, 1, "expected one units row (GB, s) under the column names");
    cr_expect(find_line(r.out, "# best: dp=") != NULL, "no \"# best:\" line");
    cli_result_free(&r);
}

/* The table has no etp column: a row whose experts split apart from TP says etp=1 in its note, and
 * only such a row (the JSON's layout string ends in ",etp=1" for it). */
Test(cli, plan_table_names_etp_in_the_note) {
    cli_result r = run_cli("plan", "--model", "mixtral-8x7b", "--system", "h100-sxm-dgx", "--gpus", "64", "--top", "10",
                           "--json", NULL);
    cJSON *plan = parse_json_output(&r, "plan --json");
    cli_result_free(&r);
    r = run_cli("plan", "--model", "mixtral-8x7b", "--system", "h100-sxm-dgx", "--gpus", "64", "--top", "10", NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    const cJSON *l;
    int i = 0, apart = 0;
    const char *row = r.out;
    const cJSON *layouts = cJSON_GetObjectItem(plan, "layouts");
    cr_assert(cJSON_IsArray(layouts), "$.layouts: an array");
    cJSON_ArrayForEach(l, layouts) {
        while (*row == '#') row = strchr(row, '\n') + 1;
        const char *end = strchr(row, '\n');
        cr_assert_not_null(end);
        int says = memmem(row, (size_t)(end - row), "etp=1", 5) != NULL;
        int has = strstr(json_str(l, "layout", "$.layouts[]"), ",etp=1") != NULL;
        cr_expect_eq(says, has, "row %d: note says etp=1: %d, JSON layout has etp: %d", i + 1, says, has);
        apart += has;
        row = end + 1;
        i++;
    }
    cr_expect_gt(apart, 0, "Mixtral on 64 GPUs ranks layouts with experts apart from TP");
    cJSON_Delete(plan);
    cli_result_free(&r);
}

Test(cli, plan_json_has_design_fields) {
    cli_result r = run_cli(PLAN_70B, "--json", NULL);
    cr_expect_eq(r.err_len, 0, "stderr: %s", r.err);
    cJSON *root = parse_json_output(&r, "plan --json");
    check_plan_json(root, 64, 1024, 4096, 10);
    cJSON_Delete(root);
    cli_result_free(&r);
}

Test(cli, plan_top_k_and_objective_memory) {
    cli_result r = run_cli(PLAN_70B, "--json", "--top", "3", "--objective", "memory", NULL);
    cJSON *root = parse_json_output(&r, "plan --top 3 --objective memory");
    const cJSON *layouts = cJSON_GetObjectItemCaseSensitive(root, "layouts");
    cr_assert(cJSON_IsArray(layouts));
    cr_expect_eq(cJSON_GetArraySize(layouts), 3, "--top 3 gave %d layouts", cJSON_GetArraySize(layouts));
    double prev = 0;
    for (int i = 0; i < cJSON_GetArraySize(layouts); i++) {
        const cJSON *mem = json_obj(cJSON_GetArrayItem(layouts, i), "memory_bytes", "layout");
        double total = json_num(mem, "total", "memory_bytes");
        cr_expect(total >= prev, "--objective memory: layout %d needs %g bytes after %g", i + 1, total, prev);
        prev = total;
    }
    cJSON_Delete(root);
    cli_result_free(&r);
}

Test(cli, plan_output_file_is_atomic_and_matches_stdout) {
    char *dir = make_temp_dir();
    char file[PATH_MAX], names[4096];
    snprintf(file, sizeof file, "%s/plan.json", dir);

    /* -o with the table: the table on stdout, then "# wrote FILE"; the file holds the plan. */
    cli_result r = run_cli(PLAN_70B, "-o", file, NULL);
    cr_assert_eq(r.status, 0, "exit %d, stderr: %s", r.status, r.err);
    cr_expect(starts_with(r.out, "# tessera plan:"), "stdout: %.200s", r.out);
    char wrote[PATH_MAX + 16];
    snprintf(wrote, sizeof wrote, "# wrote %s\n", file);
    cr_expect(find_line(r.out, wrote) != NULL, "no \"%s\" line in stdout", wrote);
    char *text = read_file(file);
    cr_assert(text != NULL, "%s was not written", file);
    cJSON *root = cJSON_Parse(text);
    cr_assert(root != NULL, "%s is not JSON", file);
    check_plan_json(root, 64, 1024, 4096, 10);
    cJSON_Delete(root);
    free(text);
    cr_expect_eq(list_dir(dir, names, sizeof names), 1, "left beside the plan: %s", names);
    cli_result_free(&r);

    /* --long form, over an existing file, with --json: stdout and the file are the same bytes. */
    r = run_cli(PLAN_70B, "--output", file, "--json", NULL);
    cr_assert_eq(r.status, 0, "exit %d, stderr: %s", r.status, r.err);
    text = read_file(file);
    cr_assert(text != NULL);
    /* search_s differs between runs; everything else (same run) must be byte-identical. */
    cr_expect_str_eq(text, r.out, "--json stdout and -o file differ");
    cr_expect_eq(list_dir(dir, names, sizeof names), 1, "left beside the plan: %s", names);
    cr_expect(strstr(names, ".tmp.") == NULL, "temporary file left: %s", names);
    free(text);
    cli_result_free(&r);
    remove_dir(dir);
}

Test(cli, plan_output_to_missing_folder_fails_cleanly) {
    cli_result r = run_cli(PLAN_70B, "-o", "/nonexistent-tessera-dir/plan.json", NULL);
    /* An i/o error: exit 1 (DESIGN.md: 0 ok, 2 bad input, 3 nothing fits, 1 other). */
    cr_expect_eq(r.status, 1, "exit %d, stderr: %s", r.status, r.err);
    cr_expect_eq(count_lines(r.err), 1, "stderr must be one line:\n%s", r.err);
    cr_expect(starts_with(r.err, "tessera plan: /nonexistent-tessera-dir/plan.json"), "stderr: %s", r.err);
    cr_expect(strstr(r.err, "No such file or directory") != NULL, "stderr: %s", r.err);
    cr_expect_eq(r.out_len, 0, "stdout: %.200s", r.out);
    cli_result_free(&r);
}

Test(cli, plan_fix_pins_every_layout) {
    cli_result r = run_cli(PLAN_70B, "--fix", "tp=8,pp=2", "--json", NULL);
    cJSON *root = parse_json_output(&r, "plan --fix tp=8,pp=2");
    const cJSON *layouts = check_plan_json(root, 64, 1024, 4096, 10);
    for (int i = 0; i < cJSON_GetArraySize(layouts); i++) {
        const cJSON *l = cJSON_GetArrayItem(layouts, i);
        cr_expect_eq(json_num(l, "tp", "layout"), 8, "layout %d: %s", i + 1, json_str(l, "layout", "layout"));
        cr_expect_eq(json_num(l, "pp", "layout"), 2, "layout %d: %s", i + 1, json_str(l, "layout", "layout"));
    }
    const cJSON *req = json_obj(root, "request", "$");
    cr_expect_str_eq(json_str(req, "fix", "$.request"), "tp=8,pp=2");
    cJSON_Delete(root);
    cli_result_free(&r);
}

Test(cli, plan_is_deterministic_and_pruning_changes_nothing) {
    cli_result a = run_cli(PLAN_70B, "--json", NULL), b = run_cli(PLAN_70B, "--json", NULL),
               c = run_cli(PLAN_70B, "--json", "--no-prune", NULL);
    cJSON *ja = parse_json_output(&a, "run 1"), *jb = parse_json_output(&b, "run 2"),
          *jc = parse_json_output(&c, "--no-prune");
    const cJSON *la = cJSON_GetObjectItemCaseSensitive(ja, "layouts"),
                *lb = cJSON_GetObjectItemCaseSensitive(jb, "layouts"),
                *lc = cJSON_GetObjectItemCaseSensitive(jc, "layouts");
    cr_expect(cJSON_Compare(la, lb, 1), "two identical runs ranked different layouts");
    cr_expect(cJSON_Compare(la, lc, 1), "--no-prune ranked different layouts than the pruned search");
    cr_expect_eq(json_num(ja, "searched", "$"), json_num(jc, "searched", "$"), "pruning changed the space searched");
    cr_expect_eq(json_num(jc, "evaluated", "$"), json_num(jc, "searched", "$"), "--no-prune must evaluate every layout");
    cJSON_Delete(ja);
    cJSON_Delete(jb);
    cJSON_Delete(jc);
    cli_result_free(&a);
    cli_result_free(&b);
    cli_result_free(&c);
}

Test(cli, plan_hugging_face_config) {
    char *hf = test_data_path("tests/data/hf/llama2-7b.json");
    cli_result r = run_cli("plan", "--model", hf, "--system", "h100-sxm-dgx", "--gpus", "8", NULL);
    cr_expect_eq(r.status, 0, "exit %d, stderr: %s", r.status, r.err);
    cr_expect_eq(r.err_len, 0, "stderr: %s", r.err);
    cr_expect(starts_with(r.out, "# tessera plan: "), "stdout: %.200s", r.out);
    cr_expect(find_line(r.out, "    1 ") != NULL, "no ranked row:\n%s", r.out);
    cli_result_free(&r);

    r = run_cli("plan", "--model", hf, "--system", "h100-sxm-dgx", "--gpus", "8", "--json", NULL);
    cJSON *root = parse_json_output(&r, "plan --model llama2-7b.json --json");
    check_plan_json(root, 8, 1024, 4096, 10);
    cJSON_Delete(root);
    cli_result_free(&r);
    free(hf);
}

/* --- regressions --------------------------------------------------------------------------------- */

/* getopt leaves optind on the current argument while it walks a cluster of short options: the
 * unknown option must be named from optopt, not argv[optind - 1] ("h100-sxm-dgx"). */
Test(cli, unknown_option_in_cluster_is_named) {
    cli_result r = run_cli("plan", "--model", "llama2-70b", "--system", "h100-sxm-dgx", "-zq", "--gpus", "8", NULL);
    cr_expect_eq(r.status, 2);
    cr_expect(starts_with(r.err, "tessera plan: unknown option \"-z\""), "stderr: %s", r.err);
    cli_result_free(&r);
}

/* A batch of 2^30 (accepted by --global-batch) must not make the search walk 1..batch/dp for the
 * micro-batch: it enumerates divisors. */
Test(cli, huge_batch_plans_quickly) {
    const char *args[] = {PLAN_70B, "--global-batch", "1073741824", "--seq", "1", NULL};
    cli_result r = run_argv_timeout(args, 10);
    cr_expect(r.status == 0 || r.status == 3, "exit %d (%d = killed after 10 s), stderr: %s",
              r.status, 128 + SIGALRM, r.err);
    cli_result_free(&r);
}

/* One grammar of layouts (issue 21): `sim` takes the pins and --partition that `plan` takes.
 * Llama-3-405B's 126 layers do not split into 16×2 equal chunks; the even search alone refuses
 * the pins and says how to get them, auto and ilp find an explicit split. */
Test(cli, sim_takes_an_interleaving_only_a_split_makes) {
    const char *args[] = {"sim", "--model", "llama3-405b", "--system", "h100-sxm-dgx", "--gpus", "16384",
                          "--global-batch", "2048", "--seq", "8192", "--fix", "tp=8,pp=16,vpp=2,cp=1", "--json",
                          "--partition", "auto", NULL};
    const char *modes[] = {"auto", "ilp"};
    for (int m = 0; m < 2; m++) {
        args[15] = modes[m];
        cli_result r = run_argv(args);
        cJSON *root = parse_json_output(&r, "sim --fix vpp=2 --json");
        cr_expect(strstr(json_str(root, "layout", "$"), "vpp=2,sched=interleaved") != NULL, "%s",
                  json_str(root, "layout", "$"));
        cr_expect_gt(json_num(root, "step_s", "$"), 0);
        cJSON_Delete(root);
        cli_result_free(&r);
    }
    args[15] = "uniform";
    cli_result r = run_argv(args);
    cr_expect_eq(r.status, 2, "exit %d", r.status);
    cr_expect(strstr(r.err, "interleaving needs") != NULL && strstr(r.err, "--partition ilp") != NULL, "%s", r.err);
    cr_expect(one_line_error(r.err, "sim"), "%s", r.err);
    cli_result_free(&r);
    /* export takes the same flags: the layout, and its 32 chunks in Megatron-LM's layout flag. */
    args[0] = "export", args[13] = "--format", args[14] = "megatron", args[15] = NULL;
    r = run_argv(args);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "vpp=2,sched=interleaved") != NULL, "%s", r.out);
    const char *flag = strstr(r.out, "--pipeline-model-parallel-layout '");
    cr_assert_not_null(flag, "%s", r.out);
    int chunks = 1;
    for (const char *p = flag + 35; *p && *p != '\''; p++) chunks += *p == '|';
    cr_expect_eq(chunks, 32, "16×2 chunks in %.200s", flag);
    cli_result_free(&r);
    r = run_cli("export", "--plan", "x.json", "--model", "tiny", "--format", "megatron", NULL);
    cr_expect_eq(r.status, 2);
    cr_expect(one_line_error(r.err, "export") && strstr(r.err, "exclude each other") != NULL, "%s", r.err);
    cli_result_free(&r);
}

/* --seq beyond max_seq: context extension for RoPE (a warning on stderr, the plan on stdout);
 * learned absolute positions refuse it (tests/data/cli/bad_input.golden). */
Test(cli, seq_beyond_max_seq_is_context_extension_for_rope) {
    cli_result r = run_cli("plan", "--model", "llama3-8b", "--system", "h100-sxm-dgx", "--gpus", "64", "--seq",
                           "32768", "--global-batch", "64", "--top", "1", NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "warning: --seq 32768 is beyond llama3-8b's max_seq 8192") != NULL &&
                  strstr(r.err, "context extension") != NULL, "%s", r.err);
    cr_expect(strstr(r.out, "batch 64 × 32768 tokens") != NULL, "%s", r.out);
    cli_result_free(&r);
}

/* `plan --gpus-max`: the budget's pick and what stays unused, in the table and the JSON. */
Test(cli, plan_gpus_max_says_what_stays_idle, .timeout = 120) {
    cli_result r = run_cli("plan", "--model", "megatron-gpt-529.6b", "--system", "a100-80g-dgx", "--gpus-max", "5128",
                           "--global-batch", "2520", "--top", "1", "--json", NULL);
    cJSON *root = parse_json_output(&r, "plan --gpus-max --json");
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(root, "budget");
    cr_assert_not_null(b, "no budget object");
    double gpus = json_num(b, "gpus", "$.budget");
    cr_expect_leq(gpus, 5128);
    cr_expect_eq(json_num(b, "idle_gpus", "$.budget"), 5128 - gpus);
    cr_expect_eq(json_num(b, "global_batch", "$.budget"), 2520);
    cr_expect_eq(json_num(cJSON_GetObjectItemCaseSensitive(root, "request"), "gpus", "$.request"), gpus);
    cJSON_Delete(root);
    cli_result_free(&r);
    r = run_cli("plan", "--model", "megatron-gpt-529.6b", "--system", "a100-80g-dgx", "--gpus", "5128",
                "--global-batch", "2520", "--batch-tolerance", "5%", "--top", "1", NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    const char *pick = find_line(r.out, "# budget pick: 5128 GPUs (none idle), global batch ");
    cr_expect_not_null(pick, "%s", r.out);
    cr_expect(pick && strstr(pick, "sequences per step") != NULL, "%s", r.out);
    cli_result_free(&r);
    r = run_cli("plan", "--model", "tiny", "--system", "h100-sxm-dgx", "--gpus", "8", "--gpus-max", "8", NULL);
    cr_expect_eq(r.status, 2);
    cr_expect(one_line_error(r.err, "plan") && strstr(r.err, "exclude each other") != NULL, "%s", r.err);
    cli_result_free(&r);
}

/* One grammar of layouts: plan, sim, export, run and report list the same block of layout flags
 * (problem, partition and budget flags) in their --help, byte for byte. */
Test(cli, layout_flags_help_is_one_block) {
    static const char *const cmds[] = {"plan", "sim", "export", "run", "report"};
    const char *first = "  -m, --model M", *last = "nearest batches the layouts divide, saying by how much\n";
    char *block0 = NULL;
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        cli_result r = run_cli(cmds[i], "--help", NULL);
        cr_assert_eq(r.status, 0, "%s --help: exit %d", cmds[i], r.status);
        const char *a = strstr(r.out, first), *b = a ? strstr(a, last) : NULL;
        cr_assert(a && b, "%s --help: no layout-flag block from \"%s\"", cmds[i], first);
        char *block = strndup(a, (size_t)(b + strlen(last) - a));
        for (const char *flag = "--fix\0--partition\0--mem-headroom\0--gpus-max\0--batch-tolerance\0"; *flag;
             flag += strlen(flag) + 1)
            cr_expect(strstr(block, flag) != NULL, "%s --help: no %s in the layout block", cmds[i], flag);
        if (block0) cr_expect_str_eq(block, block0, "%s --help: the layout block differs from plan's", cmds[i]);
        if (block0) free(block);
        else block0 = block;
        cli_result_free(&r);
    }
    free(block0);
}
