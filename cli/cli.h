/* Shared pieces of the `tessera` subcommands: the command table entry type and flag parsers
 * that exit with status 2 and a one-line message on misuse (edges may exit; the library never). */
#ifndef TS_CLI_H
#define TS_CLI_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "planner/partition.h"
#include "planner/budget.h"
#include "planner/search.h"
#include "reports/ranking.h"

typedef struct {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} ts_command;

/* Integer flag value with an optional k/m suffix (×1024, ×1048576), in [min, max]. */
int64_t cli_int(const char *cmd, const char *flag, const char *text, int64_t min, int64_t max);
/* Number flag value (strtod syntax) in [min, max]. */
double cli_num(const char *cmd, const char *flag, const char *text, double min, double max);
/* A token count flag value: "2T", "300B", "500M", "10k" or a number (1.5e12), in [1, 1e18]. */
double cli_tokens(const char *cmd, const char *flag, const char *text);
/* A fraction flag value, "5%" or "0.05", in [min, max] (as a fraction). */
double cli_fraction(const char *cmd, const char *flag, const char *text, double min, double max);
/* The index of a flag value in a NULL-terminated name table; a usage error listing the names
 * ("expected a, b or c") when absent. */
/* The index of `text` in a NULL-terminated name table, -1 when absent. */
int cli_name_index(const char *const *names, const char *text);
int cli_enum(const char *cmd, const char *flag, const char *text, const char *const *names);
/* A usage error when the comma-separated list `text` (a flag value) is empty or has an empty
 * item ("a,,b", "a,", ",a"). */
void cli_list_check(const char *cmd, const char *flag, const char *text);
/* Prints "tessera CMD: message" to stderr and exits with the status's exit code. */
_Noreturn void cli_fail(const char *cmd, ts_status st);
/* Before any work: `path`, the value of the output flag `flag`, can be written (common/output.h's
 * ts_output_check); otherwise exits as the failed write would (1, or 2 for a directory), naming
 * the path. NULL is fine (not given); "" is a usage error naming the flag. */
void cli_output_check(const char *cmd, const char *flag, const char *path);
/* --max-ops N: the most ops a step program may hold (program/program.h); its help line. */
void cli_max_ops(const char *cmd, const char *text);
#define CLI_MAX_OPS_HELP "      --max-ops N        the most ops a step program may hold (default 20m; docs/reliability.md)\n"
/* Prints "tessera CMD: <fmt>" and "Try 'tessera CMD --help'." to stderr, exits 2. */
_Noreturn void cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The usage error for what getopt_long rejected: `c` is ':' (an option without its value) or
 * '?' (an unknown option); exits 2. */
_Noreturn void cli_bad_option(const char *cmd, int c, char **argv);
/* This program's own path (/proc/self/exe) into buf; exits 2 when it cannot be read. */
void cli_self_path(const char *cmd, char *buf, size_t cap);
/* For commands that run on MPI ranks, started without a launcher: runs `mpirun -np RANKS` on
 * this very binary and `tessera CMD argv[1..]` (--oversubscribe when the ranks exceed the cores,
 * and it says so on stderr) and exits with its status. SIGINT / SIGTERM are passed to mpirun and
 * end with one line and status 130 / 143 (common/interrupt.h). Exits 2 when mpirun cannot be
 * started. */
_Noreturn void cli_launch_mpirun(const char *cmd, int ranks, int argc, char **argv);

/* The flags that state a planning problem and the search over its layouts, shared by the
 * commands that take --model/--system/--gpus (plan, sim, sweep, export, run, report): their getopt short letters and long
 * options (put CLI_PROBLEM_LONGOPTS first in the command's option table), a handler for
 * getopt_long's answers and their help lines. A command's own long-only options take values
 * from CLI_OPT_OWN on. */
enum {
    CLI_OPT_OBJECTIVE = 256, CLI_OPT_DTYPE, CLI_OPT_NO_FLASH, CLI_OPT_ACROSS, CLI_OPT_NO_PRUNE,
    CLI_OPT_SCHEDULES, CLI_OPT_FP8_RECIPE, CLI_OPT_FP8_ATTN, CLI_OPT_CP_KIND, CLI_OPT_STACK, CLI_OPT_HEADROOM,
    CLI_OPT_PARTITION, CLI_OPT_PARTITION_NODES, CLI_OPT_PARTITION_OBJECTIVE, CLI_OPT_MAX_SLOWDOWN,
    CLI_OPT_MOE_DISPATCHER, CLI_OPT_MOE_OVERLAP, CLI_OPT_MOE_FP8_DISPATCH, CLI_OPT_FP8_PARAM_GATHER, CLI_OPT_GPUS_MAX,
    CLI_OPT_BATCH_TOL, CLI_OPT_ATTN_BACKEND, CLI_OPT_NO_GROUPED_GEMM, CLI_OPT_CROSS_ENTROPY, CLI_OPT_MOE_COMBINED,
    CLI_OPT_MOE_SHARED_OVERLAP, CLI_OPT_RECOMPUTE_MODULES, CLI_OPT_OWN
};
#define CLI_PROBLEM_SHORTOPTS "m:s:g:b:l:f:"
#define CLI_PROBLEM_LONGOPTS                                                                       \
    {"model", required_argument, 0, 'm'}, {"system", required_argument, 0, 's'},                   \
    {"gpus", required_argument, 0, 'g'}, {"global-batch", required_argument, 0, 'b'},              \
    {"seq", required_argument, 0, 'l'}, {"fix", required_argument, 0, 'f'},                        \
    {"schedules", required_argument, 0, CLI_OPT_SCHEDULES},                                        \
    {"objective", required_argument, 0, CLI_OPT_OBJECTIVE},                                        \
    {"dtype", required_argument, 0, CLI_OPT_DTYPE}, {"no-flash-attn", no_argument, 0, CLI_OPT_NO_FLASH}, \
    {"attention-backend", required_argument, 0, CLI_OPT_ATTN_BACKEND},                             \
    {"cross-entropy", required_argument, 0, CLI_OPT_CROSS_ENTROPY},                                \
    {"tp-across-nodes", no_argument, 0, CLI_OPT_ACROSS}, {"no-prune", no_argument, 0, CLI_OPT_NO_PRUNE}, \
    {"fp8-recipe", required_argument, 0, CLI_OPT_FP8_RECIPE}, {"fp8-attention", no_argument, 0, CLI_OPT_FP8_ATTN}, \
    {"cp-kind", required_argument, 0, CLI_OPT_CP_KIND}, {"stack", required_argument, 0, CLI_OPT_STACK}, \
    {"mem-headroom", required_argument, 0, CLI_OPT_HEADROOM},                                      \
    {"partition", required_argument, 0, CLI_OPT_PARTITION},                                        \
    {"partition-node-limit", required_argument, 0, CLI_OPT_PARTITION_NODES},                       \
    {"partition-objective", required_argument, 0, CLI_OPT_PARTITION_OBJECTIVE},                    \
    {"max-slowdown", required_argument, 0, CLI_OPT_MAX_SLOWDOWN},                                  \
    {"moe-dispatcher", required_argument, 0, CLI_OPT_MOE_DISPATCHER},                              \
    {"moe-a2a-overlap", required_argument, 0, CLI_OPT_MOE_OVERLAP},                                \
    {"moe-fp8-dispatch", no_argument, 0, CLI_OPT_MOE_FP8_DISPATCH},                                \
    {"no-moe-grouped-gemm", no_argument, 0, CLI_OPT_NO_GROUPED_GEMM},                              \
    {"overlap-moe-expert-parallel-comm", no_argument, 0, CLI_OPT_MOE_COMBINED},                   \
    {"moe-shared-expert-overlap", no_argument, 0, CLI_OPT_MOE_SHARED_OVERLAP},                      \
    {"fp8-param-gather", no_argument, 0, CLI_OPT_FP8_PARAM_GATHER},                                \
    {"recompute-modules", required_argument, 0, CLI_OPT_RECOMPUTE_MODULES}
/* The commands that take one layout grammar (plan, sim, export, run, report): the problem flags
 * and the budget flags --gpus-max and --batch-tolerance (reports/budget.h). */
#define CLI_LAYOUT_LONGOPTS                                                                        \
    CLI_PROBLEM_LONGOPTS, {"gpus-max", required_argument, 0, CLI_OPT_GPUS_MAX},                    \
    {"batch-tolerance", required_argument, 0, CLI_OPT_BATCH_TOL}

typedef struct {
    const char *model, *system, *fix; /* NULL until given */
    const char *stack;                /* --stack, default megatron-core (models/stacks/) */
    int stack_given;                  /* --stack was given: never replaced by one that runs the pins */
    char stack_note[320];             /* why the default stack was replaced ("" when it was not) */
    int gpus;                         /* 0 until given */
    int seq_given;
    int max_slowdown_given;           /* --max-slowdown was given: needs --objective memory */
    unsigned given_mask;              /* TS_GIVEN_* (planner/stack_rules.h): flags that override the stack's defaults */
    const char *given;                /* the last problem flag given ("--seq"), NULL when none */
    ts_train train;
    ts_search_opts search;            /* pins from --fix once loaded */
    ts_partition_opts partition;      /* --partition, --partition-node-limit, --partition-objective */
    ts_budget_opts budget;            /* --gpus-max, --batch-tolerance (0: not given) */
} cli_problem_args;

void cli_problem_args_init(cli_problem_args *a);
/* Takes getopt_long's answer `c` (value `arg`) when it is a problem flag and returns 1; returns 0
 * for any other option. Bad values exit 2. */
int cli_problem_arg(const char *cmd, int c, const char *arg, cli_problem_args *a);
/* Requires --model, --system and --gpus, parses --fix into the search pins, loads the model and
 * system and initialises `pb` (the sequence defaults to at most the model's max_seq); exits 2 on
 * bad input. */
void cli_problem_load(const char *cmd, cli_problem_args *a, ts_problem *pb);
/* A plan in memory: what `tessera plan` makes under the layout flags (the problem, the budget's
 * pick when --gpus-max or --batch-tolerance ask for one, the ranking). cli_plan_free frees it. */
typedef struct {
    ts_problem pb;
    ts_ranking_opts ro;
    ts_ranking r;
    ts_budget_result budget; /* n = 0: no budget asked */
    int64_t batch_requested; /* the global batch before the budget moved it */
} cli_plan;
/* THE one way from the layout flags to a plan, for plan, sim, export, run and report: checks the
 * flags (--gpus or --gpus-max, the pins), loads the problem, searches the budget when asked, and
 * ranks the layouts under `ro` (its fix and partition are taken from `a`) keeping
 * a->search.top_k. Exits 2 on bad flags, 3 when nothing fits, like `plan`. */
void cli_problem_plan(const char *cmd, cli_problem_args *a, const ts_ranking_opts *ro, cli_plan *out);
/* The plan JSON `tessera plan -o` writes (planner/plan_json.h, with the budget's section). */
ts_status cli_plan_json(const cli_plan *p, const cli_problem_args *a, cJSON **out);
void cli_plan_free(cli_plan *p);
/* The plan under the layout flags (cli_problem_plan with the default ranking options, keeping
 * a->search.top_k) written to a private temporary file (common/output.h ts_output_temp_write):
 * its path, for the commands that read a plan by path (report, run's ranks). The file is removed
 * at exit (atexit) and on SIGINT / SIGTERM (it installs common/interrupt.h's handler, which a
 * later install, mpirun's launcher, keeps doing); one per process. Exits like cli_problem_plan, or 1 when the file cannot be written. */
const char *cli_problem_plan_file(const char *cmd, cli_problem_args *a);
/* Removes that file now, once read (before output that a closed pipe's SIGPIPE may cut short). */
void cli_plan_temp_remove(void);
/* The layout `tessera plan --top 1` picks under the problem flags, pins and --partition
 * (cli_problem_load, then reports/ranking.h: uneven stages, a tie broken toward robustness), its
 * closed-form step time and, when uneven, its split (*has_split: split is the caller's to free).
 * Exits like `plan` when the flags are bad or nothing fits. */
void cli_problem_pick(const char *cmd, cli_problem_args *a, ts_problem *pb, ts_layout *layout, double *step_s,
                      ts_split *split, int *has_split);
/* The warning on stderr for a --seq beyond the model's max_seq (program/problem.h ts_seq_extends). */
void cli_warn_context_extension(const char *cmd, const ts_model *m, int64_t seq);
/* Loads --stack (default megatron-core) into a->train.stack; exits 2 on bad input. Without
 * --stack, pins the default cannot run are priced on a zoo stack that runs them, in that stack's
 * precision when --dtype is not given and every one of `systems` has it. */
void cli_problem_load_stack(const char *cmd, cli_problem_args *a, const ts_system *systems, int n_systems);
/* The help lines of the problem flags (two leading spaces, aligned at column 25), and of the
 * stage-partitioning flags (--partition...); cli_layout_help: both and the budget flags, the one
 * block of plan, sim, export, run and report. */
void cli_problem_help(void);
void cli_layout_help(void);
void cli_partition_help(void);
/* Says on stderr when a pinned layout `l` is one the problem's stack cannot run (the search never
 * picks such a layout unpinned). */
/* After a pick: says on stderr which stack replaced the default (a->stack_note), or that the
 * stack cannot run the pinned layout l. Printed only once the pick succeeded, so that an error
 * stays one line. */
void cli_warn_stack(const char *cmd, const cli_problem_args *a, const ts_problem *pb, const ts_layout *l);

int cmd_plan(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_models(int argc, char **argv);
int cmd_systems(int argc, char **argv);

#endif
