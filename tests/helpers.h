/* Small helpers shared by the Criterion tests: where the repository's data lies, temporary
 * files and folders, running the `tessera` binary as a subprocess, and reading what it printed.
 * Exit-on-error is fine here (tests are an edge, STYLE.md): a helper that cannot do its job
 * aborts the test with a message. */
#ifndef TS_TESTS_HELPERS_H
#define TS_TESTS_HELPERS_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "planner/problem.h"
#include "program/program.h"

/* The repository root: $TESSERA_DATA (set by `make test`), else ".". */
const char *test_data_dir(void);

/* "<data dir>/<rel>" in a malloc'd string the caller frees, e.g. "validation/published/..." for
 * the published measurements kept in the repository (validation/published/README.md). */
char *test_data_path(const char *rel);

/* Writes `content` to a new file /tmp/tessera-test-XXXXXX.json and returns its malloc'd path;
 * the caller removes it with test_remove_temp. */
char *test_write_temp(const char *content);

/* Unlinks the file and frees the path (NULL is ignored). */
void test_remove_temp(char *path);

/* The repository root as an absolute path: passed to the CLI as TESSERA_DATA (and replaced by
 * "$DATA" in golden files). */
const char *data_root(void);

/* A planning problem of zoo model and system names (defaults of ts_train_defaults but the batch,
 * sequence and flash attention); the test fails when a name does not load. */
ts_problem test_problem(const char *model, const char *sys, int gpus, int64_t batch, int64_t seq, int flash);
/* The same for a model already in hand (an edited zoo model, a Hugging Face config). */
ts_problem test_problem_of(const ts_model *m, const char *sys, int gpus, int64_t batch, int64_t seq, int flash);
/* And for a system in hand (a zoo system with figures changed). */
ts_problem test_problem_on(const ts_model *m, const ts_system *s, int gpus, int64_t batch, int64_t seq, int flash);
/* Compute seconds of micro-batch 0's forward, input gradients and weight gradients on stage 0's
 * first chunk (collectives and transfers left out): a schedule's slot times. */
void test_slot_costs(const ts_problem *pb, const ts_program *p, double *f, double *b, double *w);
/* The layout written `text` (dp=..,tp=..,...); the test fails when it does not parse. */
ts_layout test_layout(const char *text);
/* Layout `l` simulated (every op of its step program) over its closed-form step: 1 when the two
 * agree. */
double test_sim_over_closed_form(const ts_problem *pb, const ts_layout *l);

/* --- running the binary ($TESSERA_BIN, else <data dir>/build/tessera) --------------------------- */

#define CLI_TIMEOUT_S 120 /* a run killed by SIGALRM past this counts as a hang */
#define CLI_MAX_ARGS 64

typedef struct {
    int status;      /* exit status; 128 + signal number when killed (crash, sanitizer, timeout) */
    char *out, *err; /* everything written to stdout / stderr, NUL-terminated; malloc'd */
    size_t out_len, err_len;
} cli_result;

/* Runs `tessera args...` (NULL-terminated) with TESSERA_DATA set to the repository root. The
 * output goes to unlinked temporary files, so any amount is captured without deadlock. */
cli_result run_argv_timeout(const char *const *args, unsigned timeout_s);
cli_result run_argv(const char *const *args); /* timeout CLI_TIMEOUT_S */
/* The same with stderr (and stdin) on a pseudo-terminal (forkpty), for what the CLI does only
 * for a terminal: `err` holds what the terminal received ("\n" arrives as "\r\n"). */
cli_result run_argv_tty(const char *const *args);
/* run_argv_timeout for any program: argv[0] is a path or a name looked up on the PATH (e.g.
 * "mpirun"), NULL-terminated. */
cli_result run_program_timeout(const char *const *argv, unsigned timeout_s);
/* The `tessera` binary the tests run (absolute or relative to the working directory). */
const char *tessera_binary(void);
/* run_cli("plan", "--model", "x", NULL) */
cli_result run_cli(const char *first, ...);
void cli_result_free(cli_result *r);
/* `tessera export --plan PLAN --format FORMAT`, which must succeed; the caller frees the result. */
cli_result test_export_plan(const char *plan, const char *format);
/* In-situ factors f (ts_situ_kind order, exec/calibrate.h) applied to `before` gave `after`: each
 * kind's modelled time in `dtype` moved by its factor within rel_tol, at an m×n×k GEMM and `size`
 * FLOPs of attention, bytes of element-wise work and parameters of the optimizer. */
void test_expect_situ_scaled(const ts_system *after, const ts_system *before, ts_dtype dtype, int m, int n, int k,
                             double size, const double *f, double rel_tol);
/* `tessera sim --plan PLAN --json` re-prices the plan's layout `best` (a "layouts" entry of the
 * plan) at the plan's own step: its closed form equals best's step_s; `why` names the case. */
void test_expect_sim_reprices(const char *plan, const cJSON *best, const char *why);
/* The plan file's request holds `key`: `value` (a string), and sim re-prices its best layout at
 * the plan's step (test_expect_sim_reprices): an option travels with the plan. */
void test_plan_carries(const char *plan, const char *key, const char *value, const char *why);
/* A new temporary folder of published runs (planner/published.h) holding only `rows`, a JSON
 * array, as its `file` (published-cases.json, older-stacks.json, ...; the other files empty
 * arrays); remove_dir deletes it. */
char *test_published_dir(const char *file, const char *rows);
/* The published-run reader (ts_published_errors) over test_published_dir("published-cases.json",
 * rows): its status, and
 * the first row's prediction in *predicted when TS_OK. */
ts_status test_published_rows(const char *rows, double *predicted);

/* --- text, files and folders ------------------------------------------------------------------- */

int count_lines(const char *s);
int starts_with(const char *s, const char *prefix);
/* The line of `text` that starts with `prefix` (NULL when none), as a pointer into text. */
const char *find_line(const char *text, const char *prefix);
/* The DESIGN.md rule for every error: one line, plus "Try 'tessera CMD --help'." after misuse
 * caught by the flag parser (cli_usage_error). Returns 1 when `err` obeys it. */
int one_line_error(const char *err, const char *cmd);
/* `tessera sim --model tiny --system cpu-localhost --gpus G --global-batch B --fix FIX` exits 2 with
 * one line holding `says` and nothing on stdout. */
void expect_tiny_sim_refused(const char *gpus, const char *batch, const char *fix, const char *says);

/* A file's whole content, NUL-terminated and malloc'd; NULL when it cannot be opened. */
char *read_file(const char *path);
/* A new folder /tmp/tessera-cli-XXXXXX (malloc'd path); remove_dir deletes its files, the folder
 * and frees the path. */
char *make_temp_dir(void);
void remove_dir(char *dir);
/* Names in `dir` other than . and .., joined by spaces into buf; returns how many. */
int list_dir(const char *dir, char *buf, size_t cap);

/* --- Deterministic random numbers --------------------------------------------------------------- */

/* SplitMix64 (Steele, Lea & Flood 2014): the next 64 bits of the stream whose state is *s. */
uint64_t test_next_u64(uint64_t *s);
/* n floats uniform in [-1, 1) from `seed` (malloc'd; the test fails if memory runs out). */
float *test_random_floats(size_t n, uint64_t seed);

/* --- JSON the CLI printed ------------------------------------------------------------------------ */

/* Asserts exit status 0 and stdout one JSON document; the caller frees it with cJSON_Delete. */
cJSON *parse_json_output(const cli_result *r, const char *what);
/* Members of the expected type (the test fails, naming `where` and `key`, otherwise); numbers
 * must be finite. */
double json_num(const cJSON *obj, const char *key, const char *where);
const char *json_str(const cJSON *obj, const char *key, const char *where);
const cJSON *json_obj(const cJSON *parent, const char *key, const char *where);

#endif
