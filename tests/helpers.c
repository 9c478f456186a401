/* Shared test helpers (see helpers.h). */
#include "tests/helpers.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pty.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec/calibrate.h"
#include "planner/cost.h"
#include "planner/op_cost.h"
#include "planner/published.h"
#include "sim/engine.h"

static _Noreturn void die(const char *what) {
    perror(what);
    abort();
}

const char *test_data_dir(void) {
    const char *env = getenv("TESSERA_DATA");
    return (env && *env) ? env : ".";
}

char *test_data_path(const char *rel) {
    const char *dir = test_data_dir();
    size_t n = strlen(dir) + strlen(rel) + 2;
    char *path = malloc(n);
    if (path == NULL) die("test_data_path: malloc");
    snprintf(path, n, "%s/%s", dir, rel);
    return path;
}

char *test_write_temp(const char *content) {
    char *path = strdup("/tmp/tessera-test-XXXXXX.json");
    if (path == NULL) die("test_write_temp: strdup");
    int fd = mkstemps(path, 5);
    if (fd < 0) die("test_write_temp: mkstemps");
    size_t len = strlen(content), done = 0;
    while (done < len) {
        ssize_t w = write(fd, content + done, len - done);
        if (w < 0) die("test_write_temp: write");
        done += (size_t)w;
    }
    if (close(fd) != 0) die("test_write_temp: close");
    return path;
}

void test_remove_temp(char *path) {
    if (path == NULL) return;
    unlink(path);
    free(path);
}

const char *tessera_binary(void) {
    static char path[PATH_MAX];
    if (!path[0]) {
        const char *env = getenv("TESSERA_BIN");
        if (env && *env) {
            snprintf(path, sizeof path, "%s", env);
        } else {
            char *p = test_data_path("build/tessera");
            snprintf(path, sizeof path, "%s", p);
            free(p);
        }
    }
    if (access(path, X_OK) != 0)
        cr_assert_fail("tests: %s is not an executable (set TESSERA_BIN, or run `make test`)", path);
    return path;
}

const char *data_root(void) {
    static char root[PATH_MAX];
    if (!root[0] && realpath(test_data_dir(), root) == NULL) die("realpath(TESSERA_DATA)");
    return root;
}

static char *read_all(int fd, size_t *len) {
    if (lseek(fd, 0, SEEK_SET) < 0) die("lseek");
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (buf == NULL) die("malloc");
    for (;;) {
        if (n + 1 >= cap) {
            cap *= 2;
            char *bigger = realloc(buf, cap);
            if (bigger == NULL) die("realloc");
            buf = bigger;
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) die("read");
        if (r == 0) break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

static int anonymous_file(void) {
    char name[] = "/tmp/tessera-cli-io-XXXXXX";
    int fd = mkstemp(name);
    if (fd < 0) die("mkstemp");
    unlink(name);
    return fd;
}

/* argv_in (the program, then its arguments, NULL-terminated) strdup'd into argv for exec;
 * returns its length. */
static int exec_argv(const char *const *argv_in, char **argv) {
    int n = 0;
    for (; argv_in[n] != NULL; n++) {
        if (n > CLI_MAX_ARGS) cr_assert_fail("tests: more than %d arguments", CLI_MAX_ARGS);
        argv[n] = strdup(argv_in[n]);
        if (argv[n] == NULL) die("strdup");
    }
    argv[n] = NULL;
    return n;
}

/* argv for exec: the tessera binary, then `args` (NULL-terminated); returns its length. */
static int cli_argv(const char *const *args, char **argv) {
    const char *full[CLI_MAX_ARGS + 2] = {tessera_binary()};
    int n = 1;
    for (; args[n - 1] != NULL; n++) {
        if (n > CLI_MAX_ARGS) cr_assert_fail("tests: more than %d arguments", CLI_MAX_ARGS);
        full[n] = args[n - 1];
    }
    full[n] = NULL;
    return exec_argv(full, argv);
}

/* In the child: the CLI's environment, a SIGALRM deadline that survives exec, then exec (argv[0]
 * a path, or a name looked up on the PATH). */
static _Noreturn void cli_exec(char **argv, const char *data, unsigned timeout_s) {
    setenv("TESSERA_DATA", data, 1);
    unsetenv("TESSERA_DEBUG");
    alarm(timeout_s); /* survives exec: SIGALRM ends a hung run */
    execvp(argv[0], argv);
    _exit(127);
}

static int cli_wait(pid_t pid) {
    int wstatus;
    while (waitpid(pid, &wstatus, 0) < 0)
        if (errno != EINTR) die("waitpid");
    return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
}

/* Runs argv (n entries, strdup'd; freed here) with stdout and stderr captured. */
static cli_result run_captured(char **argv, int n, unsigned timeout_s) {
    const char *data = data_root();
    int out_fd = anonymous_file(), err_fd = anonymous_file();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        if (dup2(out_fd, STDOUT_FILENO) < 0 || dup2(err_fd, STDERR_FILENO) < 0) _exit(126);
        close(out_fd);
        close(err_fd);
        cli_exec(argv, data, timeout_s);
    }
    cli_result r;
    r.status = cli_wait(pid);
    r.out = read_all(out_fd, &r.out_len);
    r.err = read_all(err_fd, &r.err_len);
    close(out_fd);
    close(err_fd);
    for (int i = 0; i < n; i++) free(argv[i]);
    return r;
}

cli_result run_program_timeout(const char *const *argv_in, unsigned timeout_s) {
    char *argv[CLI_MAX_ARGS + 2];
    int n = exec_argv(argv_in, argv);
    return run_captured(argv, n, timeout_s);
}

cli_result run_argv_timeout(const char *const *args, unsigned timeout_s) {
    char *argv[CLI_MAX_ARGS + 2];
    int n = cli_argv(args, argv);
    return run_captured(argv, n, timeout_s);
}

cli_result run_argv_tty(const char *const *args) {
    char *argv[CLI_MAX_ARGS + 2];
    int n = cli_argv(args, argv);
    const char *data = data_root();
    int out_fd = anonymous_file(), master = -1;
    fflush(NULL);
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    if (pid < 0) die("forkpty");
    if (pid == 0) { /* stdin and stderr stay on the terminal */
        if (dup2(out_fd, STDOUT_FILENO) < 0) _exit(126);
        close(out_fd);
        cli_exec(argv, data, CLI_TIMEOUT_S);
    }
    /* Read the terminal while the CLI runs (a full terminal buffer would block it) until its
     * side closes: read then fails with EIO on Linux. */
    size_t cap = 4096, len = 0;
    char *tty = malloc(cap);
    if (tty == NULL) die("malloc");
    for (;;) {
        if (len + 1 >= cap) {
            char *bigger = realloc(tty, cap *= 2);
            if (bigger == NULL) die("realloc");
            tty = bigger;
        }
        ssize_t got = read(master, tty + len, cap - len - 1);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        len += (size_t)got;
    }
    tty[len] = '\0';
    close(master);
    cli_result r;
    r.status = cli_wait(pid);
    r.out = read_all(out_fd, &r.out_len);
    r.err = tty;
    r.err_len = len;
    close(out_fd);
    for (int i = 0; i < n; i++) free(argv[i]);
    return r;
}

cli_result run_argv(const char *const *args) { return run_argv_timeout(args, CLI_TIMEOUT_S); }

cli_result run_cli(const char *first, ...) {
    const char *args[CLI_MAX_ARGS + 1];
    int n = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a != NULL; a = va_arg(ap, const char *)) {
        if (n >= CLI_MAX_ARGS) cr_assert_fail("tests: more than %d arguments", CLI_MAX_ARGS);
        args[n++] = a;
    }
    va_end(ap);
    args[n] = NULL;
    return run_argv(args);
}

cli_result test_export_plan(const char *plan, const char *format) {
    cli_result r = run_cli("export", "--plan", plan, "--format", format, NULL);
    cr_assert_eq(r.status, 0, "export --format %s: exit %d, stderr: %s", format, r.status, r.err);
    return r;
}

void test_expect_sim_reprices(const char *plan, const cJSON *best, const char *why) {
    cli_result r = run_cli("sim", "--plan", plan, "--json", NULL);
    cJSON *sim = parse_json_output(&r, "sim --plan --json");
    double closed_s = json_num(sim, "closed_form_step_s", "$"), step_s = json_num(best, "step_s", "best");
    cr_expect(fabs(closed_s - step_s) < 1e-9, "%s: sim's closed form %.9f s, the plan's step %.9f s", why, closed_s,
              step_s);
    cJSON_Delete(sim);
    cli_result_free(&r);
}

void test_plan_carries(const char *plan, const char *key, const char *value, const char *why) {
    char *text = read_file(plan);
    cr_assert_not_null(text, "cannot read %s", plan);
    cJSON *p = cJSON_Parse(text);
    cr_assert_not_null(p, "%s is not JSON", plan);
    cr_expect_str_eq(json_str(json_obj(p, "request", "$"), key, "$.request"), value, "%s", why);
    const cJSON *best = cJSON_GetArrayItem(cJSON_GetObjectItem(p, "layouts"), 0);
    cr_assert_not_null(best, "%s: no layouts", plan);
    test_expect_sim_reprices(plan, best, why);
    cJSON_Delete(p);
    free(text);
}

char *test_published_dir(const char *file, const char *rows) {
    char *dir = make_temp_dir(), path[4200];
    const char *names[] = {"published-cases.json", "megatron-sc21-table1.json", "older-stacks.json",
                           "megatron-bridge.json", "megatron-bridge-moe.json"};
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f, "cannot write %s", path);
        fputs(strcmp(names[i], file) == 0 ? rows : "[]", f);
        fclose(f);
    }
    return dir;
}

ts_status test_published_rows(const char *rows, double *predicted) {
    char *dir = test_published_dir("published-cases.json", rows);
    ts_pub_case *c = NULL;
    int n = 0;
    ts_status st = ts_published_errors(dir, &c, &n);
    if (st == TS_OK) {
        cr_assert_geq(n, 1, "no row read from %s", rows);
        *predicted = c[0].predicted;
    }
    free(c);
    remove_dir(dir);
    return st;
}

void cli_result_free(cli_result *r) {
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

int starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

const char *find_line(const char *text, const char *prefix) {
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (starts_with(p, prefix)) return p;
    return NULL;
}

int one_line_error(const char *err, const char *cmd) {
    int lines = count_lines(err);
    if (lines == 1) return err[strlen(err) - 1] == '\n';
    if (lines != 2) return 0;
    char try_line[64];
    snprintf(try_line, sizeof try_line, "\nTry 'tessera %s --help'.\n", cmd);
    const char *second = strchr(err, '\n');
    return strcmp(second, try_line) == 0;
}

char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    size_t len;
    char *text = read_all(fileno(f), &len);
    fclose(f);
    return text;
}

char *make_temp_dir(void) {
    char *dir = strdup("/tmp/tessera-cli-XXXXXX");
    if (dir == NULL || mkdtemp(dir) == NULL) die("mkdtemp");
    return dir;
}

int list_dir(const char *dir, char *buf, size_t cap) {
    DIR *d = opendir(dir);
    if (d == NULL) die(dir);
    int n = 0;
    buf[0] = '\0';
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        size_t used = strlen(buf);
        snprintf(buf + used, cap - used, "%s%s", n ? " " : "", e->d_name);
        n++;
    }
    closedir(d);
    return n;
}

void remove_dir(char *dir) {
    char names[4096];
    list_dir(dir, names, sizeof names);
    char *save = NULL;
    for (char *name = strtok_r(names, " ", &save); name; name = strtok_r(NULL, " ", &save)) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        unlink(path);
    }
    rmdir(dir);
    free(dir);
}

cJSON *parse_json_output(const cli_result *r, const char *what) {
    cr_assert_eq(r->status, 0, "%s: exit %d, stderr: %s", what, r->status, r->err);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(r->out, &end, 1);
    cr_assert(root != NULL, "%s: stdout is not JSON (stopped at offset %td): %.300s", what,
              end ? end - r->out : (ptrdiff_t)-1, r->out);
    return root;
}

double json_num(const cJSON *obj, const char *key, const char *where) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    cr_assert(cJSON_IsNumber(it), "%s: \"%s\" is %s, expected a number", where, key,
              it ? "not a number" : "missing");
    cr_assert(isfinite(it->valuedouble), "%s: \"%s\" is not finite", where, key);
    return it->valuedouble;
}

const char *json_str(const cJSON *obj, const char *key, const char *where) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    cr_assert(cJSON_IsString(it), "%s: \"%s\" is %s, expected a string", where, key,
              it ? "not a string" : "missing");
    return it->valuestring;
}

const cJSON *json_obj(const cJSON *parent, const char *key, const char *where) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(parent, key);
    cr_assert(cJSON_IsObject(it), "%s: \"%s\" is %s, expected an object", where, key,
              it ? "not an object" : "missing");
    return it;
}

ts_problem test_problem(const char *model, const char *sys, int gpus, int64_t batch, int64_t seq, int flash) {
    ts_model m;
    ts_error_clear();
    cr_assert_eq(ts_model_load(model, &m), TS_OK, "%s", ts_error_message());
    return test_problem_of(&m, sys, gpus, batch, seq, flash);
}

ts_problem test_problem_of(const ts_model *m, const char *sys, int gpus, int64_t batch, int64_t seq, int flash) {
    ts_system s;
    ts_error_clear();
    cr_assert_eq(ts_system_load(sys, &s), TS_OK, "%s: %s", sys, ts_error_message());
    return test_problem_on(m, &s, gpus, batch, seq, flash);
}

ts_problem test_problem_on(const ts_model *m, const ts_system *s, int gpus, int64_t batch, int64_t seq, int flash) {
    ts_train t;
    ts_train_defaults(&t);
    t.global_batch = batch;
    t.seq = seq;
    t.flash_attention = flash;
    ts_problem pb;
    ts_error_clear();
    cr_assert_eq(ts_problem_init(&pb, m, s, &t, gpus), TS_OK, "%s on %d: %s", m->name, gpus, ts_error_message());
    return pb;
}

uint64_t test_next_u64(uint64_t *s) {
    uint64_t x = (*s += 0x9E3779B97F4A7C15ull);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

float *test_random_floats(size_t n, uint64_t seed) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    cr_assert(p, "out of memory for %zu floats", n);
    for (size_t i = 0; i < n; i++) p[i] = (float)((double)(test_next_u64(&seed) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    return p;
}

ts_layout test_layout(const char *text) {
    ts_layout l;
    ts_error_clear();
    cr_assert_eq(ts_layout_parse("test", text, &l), TS_OK, "%s: %s", text, ts_error_message());
    return l;
}

double test_sim_over_closed_form(const ts_problem *pb, const ts_layout *l) {
    ts_eval e;
    cr_assert_eq(ts_evaluate(pb, l, &e), TS_OK, "%s", ts_error_message());
    ts_program p;
    ts_sim_result r;
    cr_assert_eq(ts_program_build(pb, l, NULL, &p), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_simulate(pb, &p, NULL, &r), TS_OK, "%s", ts_error_message());
    double ratio = r.step_s / e.step_s;
    ts_sim_result_free(&r);
    ts_program_free(&p);
    return ratio;
}

void test_slot_costs(const ts_problem *pb, const ts_program *p, double *f, double *b, double *w) {
    *f = *b = *w = 0;
    const ts_stage_program *sp = &p->stages[0];
    for (int i = 0; i < sp->n_ops; i++) {
        const ts_op *op = &sp->ops[i];
        if (op->mb != 0 || op->chunk != 0 || op->kind >= TS_OP_COLL) continue;
        double c = ts_op_cost_s(pb, &p->layout, op);
        if (op->phase == TS_PHASE_FWD) *f += c;
        else if (op->phase == TS_PHASE_BWD) *b += c;
        else if (op->phase == TS_PHASE_WGRAD) *w += c;
    }
}

void expect_tiny_sim_refused(const char *gpus, const char *batch, const char *fix, const char *says) {
    cli_result r = run_cli("sim", "--model", "tiny", "--system", "cpu-localhost", "--gpus", gpus, "--global-batch",
                           batch, "--fix", fix, NULL);
    cr_expect_eq(r.status, 2, "%s: exit %d", fix, r.status);
    cr_expect_str_empty(r.out, "%s: %s", fix, r.out);
    cr_expect(strstr(r.err, says) != NULL && one_line_error(r.err, "sim"), "%s: %s", fix, r.err);
    cli_result_free(&r);
}

void test_expect_situ_scaled(const ts_system *after, const ts_system *before, ts_dtype dtype, int m, int n, int k,
                             double size, const double *f, double rel_tol) {
    double x[TS_SITU_COUNT];
    x[TS_SITU_GEMM] = ts_gemm_s(after, dtype, m, n, k) / ts_gemm_s(before, dtype, m, n, k);
    x[TS_SITU_ATTENTION] = ts_attention_s(after, dtype, size, size) / ts_attention_s(before, dtype, size, size);
    x[TS_SITU_ELEMENTWISE] = ts_memory_s(after, size, 0) / ts_memory_s(before, size, 0);
    x[TS_SITU_OPTIMIZER] = ts_optimizer_s(after, size) / ts_optimizer_s(before, size);
    for (int i = 0; i < TS_SITU_COUNT; i++)
        cr_expect(fabs(x[i] / f[i] - 1) < rel_tol, "%s %s time x%g, factor %g", ts_dtype_names[dtype],
                  ts_situ_kind_names[i], x[i], f[i]);
}
