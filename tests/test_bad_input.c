/* The bad-input corpus, tests/bad-input/: malformed and hostile model, Hugging Face, system and
 * plan files and command lines, each run through the `tessera` binary ($TESSERA_BIN). Every case
 * must end the way tests/bad-input/MANIFEST says: that exit status, one line on stderr holding
 * the expected message (plus "Try ..." after flag misuse), nothing on stdout, and no crash,
 * sanitizer report or hang. Inputs too big to commit (10 MiB strings, 100000-deep nesting) are
 * written at run time into a temporary folder. */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/helpers.h"

#define BIG_STRING_BYTES ((size_t)10 << 20)
#define DEEP_NESTING 100000

typedef struct {
    int line;               /* in MANIFEST */
    char input[128];        /* file name, "gen:NAME" or "-" */
    int exit_status;
    char message[1024];     /* substring of stderr */
    char args[1024];        /* as written; '@' is the input's path */
} bad_case;

static void write_or_die(const char *path, const char *head, char fill, size_t n, const char *tail) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    char chunk[4096];
    memset(chunk, fill, sizeof chunk);
    int ok = fputs(head, f) >= 0;
    for (size_t done = 0; ok && done < n; done += sizeof chunk) {
        size_t k = n - done < sizeof chunk ? n - done : sizeof chunk;
        ok = fwrite(chunk, 1, k, f) == k;
    }
    ok = ok && fputs(tail, f) >= 0;
    ok = (fclose(f) == 0) && ok;
    cr_assert(ok, "%s: write failed", path);
}

/* Writes gen:NAME into `dir`; the names are the ones MANIFEST uses. */
static void generate(const char *dir, const char *name, char *path, size_t cap) {
    snprintf(path, cap, "%s/%s", dir, name);
    if (strcmp(name, "system-big-source.json") == 0) {
        /* A 10 MiB "source": refused by length, not copied or echoed. */
        write_or_die(path, "{\"name\": \"s\", \"source\": \"", 's', BIG_STRING_BYTES,
                     "\", \"gpu\": {\"hbm_bytes\": 8e10, \"hbm_bytes_per_s\": 3e12, \"peak_flops\": "
                     "{\"bf16\": 1e15}}, \"node\": {\"gpus\": 8, \"link_bytes_per_s\": 4e11}, "
                     "\"fabric\": {\"nic_bytes_per_s\": 5e10}, \"efficiency\": {\"gemm\": "
                     "{\"points\": [[1e9, 0.5]]}}}\n");
    } else if (strcmp(name, "plan-big-layout.json") == 0) {
        /* plan-valid.json with its first layout string replaced by 10 MiB. */
        char *src = test_data_path("tests/bad-input/plan-valid.json");
        char *text = read_file(src);
        cr_assert_not_null(text, "%s: cannot read", src);
        char *key = strstr(text, "\"layout\":");
        cr_assert_not_null(key, "%s: no \"layout\"", src);
        char *open = strchr(key + 9, '"');
        cr_assert_not_null(open);
        char *close = strchr(open + 1, '"');
        cr_assert_not_null(close);
        open[1] = '\0';
        write_or_die(path, text, 'd', BIG_STRING_BYTES, close);
        free(text);
        free(src);
    } else if (strcmp(name, "plan-deep-nesting.json") == 0) {
        /* 100000 '[' where the request object belongs: cJSON's depth limit must stop it. */
        write_or_die(path, "{\"tessera\": \"plan\", \"version\": 1, \"request\": ", '[', DEEP_NESTING,
                     "");
    } else {
        cr_assert_fail("MANIFEST: no generator for gen:%s", name);
    }
}

static char *trim(char *s) {
    while (*s == ' ') s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\r')) s[--n] = '\0';
    return s;
}

/* INPUT | EXIT | MESSAGE | ARGUMENTS, MESSAGE being everything between the second separator and
 * the last. */
static int parse_manifest(const char *path, bad_case *cases, int cap) {
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    char line[4096];
    int n = 0, lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '#' || trim(line)[0] == '\0') continue;
        cr_assert_lt(n, cap, "%s: more than %d cases", path, cap);
        char *s1 = strstr(line, " | ");
        char *s2 = s1 ? strstr(s1 + 3, " | ") : NULL;
        char *last = NULL;
        for (char *p = s2 ? strstr(s2 + 3, " | ") : NULL; p; p = strstr(p + 3, " | ")) last = p;
        cr_assert(s1 && s2 && last, "%s:%d: expected INPUT | EXIT | MESSAGE | ARGUMENTS", path, lineno);
        *s1 = *s2 = *last = '\0';
        bad_case *c = &cases[n++];
        c->line = lineno;
        snprintf(c->input, sizeof c->input, "%s", trim(line));
        char *end = NULL;
        c->exit_status = (int)strtol(trim(s1 + 3), &end, 10);
        cr_assert(end && *end == '\0', "%s:%d: EXIT is not a number", path, lineno);
        snprintf(c->message, sizeof c->message, "%s", trim(s2 + 3));
        snprintf(c->args, sizeof c->args, "%s", trim(last + 3));
        cr_assert(c->message[0] && c->args[0], "%s:%d: empty MESSAGE or ARGUMENTS", path, lineno);
    }
    fclose(f);
    return n;
}

/* A malloc'd copy of `s` with each '@' replaced by `input` and each "$DATA" by the repository. */
static char *subst_input(const char *s, const char *input) {
    const char *data = test_data_dir();
    size_t at = 0;
    for (const char *p = s; *p; p++) at += *p == '@' || strncmp(p, "$DATA", 5) == 0;
    char *out = malloc(strlen(s) + at * (strlen(input) + strlen(data)) + 1);
    cr_assert_not_null(out);
    char *w = out;
    for (const char *p = s; *p; p++) {
        if (*p == '@') {
            strcpy(w, input);
            w += strlen(input);
        } else if (strncmp(p, "$DATA", 5) == 0) {
            strcpy(w, data);
            w += strlen(data);
            p += 4;
        } else {
            *w++ = *p;
        }
    }
    *w = '\0';
    return out;
}

Test(bad_input, corpus, .timeout = 900) {
    static bad_case cases[256];
    char *manifest = test_data_path("tests/bad-input/MANIFEST");
    int n = parse_manifest(manifest, cases, 256);
    cr_assert_geq(n, 40, "%s: only %d cases (the corpus holds at least 40)", manifest, n);
    char *tmp = make_temp_dir();
    int failures = 0;
    for (int i = 0; i < n; i++) {
        bad_case *c = &cases[i];
        char input[PATH_MAX] = "";
        if (strncmp(c->input, "gen:", 4) == 0) {
            generate(tmp, c->input + 4, input, sizeof input);
        } else if (strcmp(c->input, "-") != 0) {
            char rel[256];
            snprintf(rel, sizeof rel, "tests/bad-input/%s", c->input);
            char *p = test_data_path(rel);
            snprintf(input, sizeof input, "%s", p);
            free(p);
            FILE *f = fopen(input, "rb");
            cr_assert_not_null(f, "%s:%d: input %s is missing", manifest, c->line, input);
            fclose(f);
        }
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", c->args);
        char *owned[CLI_MAX_ARGS];
        const char *args[CLI_MAX_ARGS + 1];
        int na = 0;
        char *save = NULL;
        for (char *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
            cr_assert_lt(na, CLI_MAX_ARGS, "%s:%d: too many arguments", manifest, c->line);
            owned[na] = subst_input(tok, input);
            args[na] = owned[na];
            na++;
        }
        args[na] = NULL;
        char *want = subst_input(c->message, input);
        cli_result r = run_argv(args);
        int ok = r.status == c->exit_status && strstr(r.err, want) != NULL && r.out_len == 0 &&
                 one_line_error(r.err, args[0]);
        cr_expect(ok,
                  "%s:%d: %s: tessera %s\n  expected exit %d and stderr holding: %s\n  got exit %d, "
                  "stderr (%zu bytes): %.600s\n  stdout (%zu bytes): %.200s",
                  manifest, c->line, c->input, c->args, c->exit_status, want, r.status, r.err_len,
                  r.err, r.out_len, r.out);
        failures += !ok;
        free(want);
        for (int k = 0; k < na; k++) free(owned[k]);
        cli_result_free(&r);
    }
    cr_expect_eq(failures, 0, "%d of %d bad-input cases failed", failures, n);
    remove_dir(tmp);
    free(manifest);
}

/* Regressions found while building the corpus: an error message never spans lines, whatever the
 * input holds (a syntax error quotes what follows it; a JSON key may hold a newline). */
Test(bad_input, messages_stay_one_line) {
    const char *texts[] = {
        "{\"name\": \"m\"}\n}\n",                              /* quoted text after the error */
        "{\"name\": \"m\", \"lay\\ners\": 4}\n",               /* an unknown key with a newline */
        "{\"name\": \"m\", \"layers\": 4, \"activation\": \"a\\r\\nb\"}\n", /* a bad enum value */
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        char *path = test_write_temp(texts[i]);
        cli_result r = run_cli("plan", "--model", path, "--system", "h100-sxm-dgx", "--gpus", "8", NULL);
        cr_expect_eq(r.status, 2, "case %zu: exit %d, stderr: %s", i, r.status, r.err);
        cr_expect_eq(count_lines(r.err), 1, "case %zu: stderr is not one line:\n%s", i, r.err);
        cli_result_free(&r);
        test_remove_temp(path);
    }
}

/* Regression: reading a plan walked its layouts with cJSON_GetArrayItem(arr, i), quadratic in
 * their number: a 9 MB plan of 100000 layouts took over ten minutes. It must now load in
 * seconds (the limit leaves room for sanitizer builds). */
Test(bad_input, plan_with_100000_layouts_loads_quickly, .timeout = 300) {
    char *dir = make_temp_dir();
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/many.json", dir);
    char *src = test_data_path("tests/bad-input/plan-valid.json");
    char *text = read_file(src);
    cr_assert_not_null(text, "%s: cannot read", src);
    char *layouts = strstr(text, "\"layouts\":");
    cr_assert_not_null(layouts, "%s: no \"layouts\"", src);
    layouts[strlen("\"layouts\":")] = '\0';
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    fprintf(f, "%s [", text);
    for (int i = 0; i < 100000; i++)
        fprintf(f, "%s{\"layout\": \"dp=2,tp=1,pp=1,cp=1,ep=1,sp=0,zero=2,mbs=2,vpp=1,sched=1f1b,"
                   "recompute=none\"}", i ? ", " : "");
    cr_assert_eq(fprintf(f, "]}\n") > 0 && fclose(f) == 0, 1, "%s: write failed", path);
    const char *args[] = {"sim", "--plan", path, "--index", "100000", "--json", NULL};
    cli_result r = run_argv_timeout(args, 120);
    cr_expect_eq(r.status, 0, "exit %d (124+ is a timeout), stderr: %.300s", r.status, r.err);
    cli_result_free(&r);
    free(text);
    free(src);
    remove_dir(dir);
}

/* `sh -c CMD` with TESSERA_DATA set and $T the tessera binary, in folder `dir`. */
static cli_result shell(const char *dir, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static cli_result shell(const char *dir, const char *fmt, ...) {
    char body[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "cd '%s' && T='%s' TESSERA_DATA='%s' && export TESSERA_DATA && %s", dir,
             tessera_binary(), test_data_dir(), body);
    const char *argv[] = {"sh", "-c", cmd, NULL};
    return run_program_timeout(argv, 120);
}

/* The output rule (common/output.h): devices written in place, links followed and kept, a failed
 * write (a full device, stdout on /dev/full) an error naming the user's path, no temporary file
 * left beside the target. */
Test(bad_input, output_rule_devices_links_and_stdout) {
    char *dir = make_temp_dir();
    char *plan = test_data_path("tests/bad-input/plan-valid.json");
    struct stat st;
    cli_result r = shell(dir, "$T export --plan '%s' --format megatron -o /dev/null", plan);
    cr_expect_eq(r.status, 0, "-o /dev/null: exit %d: %s", r.status, r.err);
    cr_expect(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode), "/dev/null is no longer a character device");
    cli_result_free(&r);

    r = shell(dir, "echo old > target.sh && ln -s target.sh link.sh && $T export --plan '%s' --format megatron -o link.sh", plan);
    cr_expect_eq(r.status, 0, "-o link: exit %d: %s", r.status, r.err);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/link.sh", dir);
    cr_expect(lstat(path, &st) == 0 && S_ISLNK(st.st_mode), "the link was replaced by a file");
    snprintf(path, sizeof path, "%s/target.sh", dir);
    char *text = read_file(path);
    cr_expect(text && strstr(text, "--tensor-model-parallel-size") != NULL, "the link's target was not written: %.80s",
              text ? text : "(missing)");
    free(text);
    cli_result_free(&r);

    /* a table within stdout's buffer (the last flush fails) and one far past it (an implicit
     * flush fails first): the same cause named */
    static const char *const tops[] = {"1", "200"};
    for (int i = 0; i < 2; i++) {
        r = shell(dir, "$T plan --model tiny --system cpu-localhost --gpus 2 --global-batch 4 --seq 64 --top %s > /dev/full",
                  tops[i]);
        cr_expect_eq(r.status, 1, "table on /dev/full: exit %d (expected 1): %s", r.status, r.err);
        cr_expect(strstr(r.err, "tessera plan: stdout: write failed: No space left on device") && count_lines(r.err) == 1,
                  "--top %s: stderr: %s", tops[i], r.err);
        cli_result_free(&r);
    }

    r = shell(dir, "$T export --plan '%s' --format megatron -o /dev/full", plan);
    cr_expect_eq(r.status, 1, "-o /dev/full: exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, "/dev/full: write failed") && !strstr(r.err, ".tmp."), "stderr: %s", r.err);
    cli_result_free(&r);

    char listing[4096];
    list_dir(dir, listing, sizeof listing);
    cr_expect(strstr(listing, ".tmp.") == NULL, "a temporary file was left: %s", listing);
    free(plan);
    remove_dir(dir);
}

/* Inputs are streams: a pipe on /dev/stdin and a FIFO read like the file they carry. */
Test(bad_input, pipes_and_fifos_are_read) {
    char *dir = make_temp_dir();
    char *model = test_data_path("models/llm/tiny.json");
    cli_result r = shell(dir, "cat '%s' | $T plan --model /dev/stdin --system cpu-localhost --gpus 2 --global-batch 4 --seq 64 --json", model);
    cr_expect_eq(r.status, 0, "/dev/stdin: exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.out, "\"layouts\"") != NULL, "no plan on stdout");
    cli_result_free(&r);
    r = shell(dir, "mkfifo m.json && (cat '%s' > m.json &) && $T plan --model m.json --system cpu-localhost --gpus 2 --global-batch 4 --seq 64 --json", model);
    cr_expect_eq(r.status, 0, "FIFO: exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.out, "\"layouts\"") != NULL, "no plan on stdout");
    cli_result_free(&r);
    free(model);
    remove_dir(dir);
}

/* SIGTERM to `tessera run`: mpirun and its ranks stop, one line names what was interrupted, the
 * exit status is 143 and no output file, temporary or final, is left. */
Test(mpi, run_interrupted_by_sigterm_says_so_and_leaves_nothing, .timeout = 180) {
    char *dir = make_temp_dir();
    char *plan = test_data_path("tests/bad-input/plan-valid.json");
    cli_result r = shell(dir, "$T run --plan '%s' --steps 100000 --warmup 1 --trace t.json --params p.bin & pid=$!; "
                              "sleep 6; kill -TERM $pid; wait $pid", plan);
    cr_expect_eq(r.status, 143, "exit %d (expected 143): %s", r.status, r.err);
    const char *line = find_line(r.err, "tessera run: interrupted by SIGTERM: stopped mpirun and its 2 ranks; no output written");
    cr_expect_not_null(line, "stderr: %s", r.err);
    char listing[4096];
    list_dir(dir, listing, sizeof listing);
    cr_expect(strstr(listing, "t.json") == NULL && strstr(listing, "p.bin") == NULL, "left behind: %s", listing);
    cli_result_free(&r);
    free(plan);
    remove_dir(dir);
}
