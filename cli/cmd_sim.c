/* `tessera sim`: how does one step of this layout unfold, rank by rank and op by op? Builds the
 * step program of a layout (from a plan file, or the planner's best under --fix), simulates it
 * and prints the summary; optionally writes the Chrome trace or dumps the program. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/json.h"
#include "planner/partition.h"
#include "planner/plan_json.h"
#include "sim/engine.h"
#include "sim/summary.h"
#include "program/trace.h"

static void help(void) {
    printf("usage: tessera sim --plan plan.json [--index I] [options]\n"
           "       tessera sim --model M --system S --gpus N [--fix PINS] [--partition MODE] [options]\n"
           "\n"
           "Simulates one training step of a layout with the discrete-event simulator: every op of\n"
           "the step program on its stream, collectives and pipeline transfers over the links.\n"
           "The layout is the I-th of a plan file, or the planner's best under the pins.\n"
           "\n"
           "  -p, --plan FILE        a plan written by tessera plan -o (holds model and system)\n"
           "  -i, --index I          which layout of the plan, 1-based (default 1)\n"
           "  or the layout flags of tessera plan: the layout plan --top 1 picks under them\n");
    cli_layout_help();
    printf("      --full             simulate every rank (default: one rank per pipeline stage)\n"
           "  -t, --trace FILE       write a Chrome trace (ui.perfetto.dev, chrome://tracing)\n"
           "      --json             print the summary as JSON instead of a table\n"
           "      --dump-program     print the step program (one line per op) and stop\n"
           CLI_MAX_OPS_HELP
           "  -h, --help             this help\n"
           "\n"
           "Exit status: 0 ok, 2 bad input, 3 nothing fits (the message says what came closest).\n");
}

/* The layout to simulate and its closed-form step time: the plan's index-th, or the search's
 * best under the pins. */
static void pick_layout(const char *cmd, const char *plan, int index, cli_problem_args *pa,
                        ts_problem *pb, ts_layout *layout, double *closed_step_s, ts_split *split, int *has_split) {
    *has_split = 0;
    ts_status st;
    if (plan) {
        ts_layout *layouts = NULL;
        int n = 0;
        st = ts_plan_read(plan, pb, &layouts, &n);
        if (st != TS_OK) cli_fail(cmd, st);
        if (index > n) {
            free(layouts);
            cli_usage_error(cmd, "--index: %s holds %d layout%s, got %d", plan, n, n == 1 ? "" : "s", index);
        }
        *layout = layouts[index - 1];
        free(layouts);
        ts_eval e;
        /* Uneven stages, when the plan chose them (planner/partition.h). */
        st = ts_plan_evaluate(plan, pb, layout, index - 1, &e, split, has_split);
        if (st != TS_OK) cli_fail(cmd, st);
        *closed_step_s = e.step_s;
        return;
    }
    cli_problem_pick(cmd, pa, pb, layout, closed_step_s, split, has_split);
}

int cmd_sim(int argc, char **argv) {
    const char *cmd = "sim", *plan = NULL, *trace = NULL;
    int index = 0, full = 0, json = 0, dump = 0;
    cli_problem_args pa;
    cli_problem_args_init(&pa);
    enum { OPT_FULL = CLI_OPT_OWN, OPT_JSON, OPT_DUMP, OPT_MAX_OPS };
    static const struct option longs[] = {
        CLI_LAYOUT_LONGOPTS,
        {"plan", required_argument, 0, 'p'},   {"index", required_argument, 0, 'i'},
        {"full", no_argument, 0, OPT_FULL},    {"trace", required_argument, 0, 't'},
        {"json", no_argument, 0, OPT_JSON},    {"dump-program", no_argument, 0, OPT_DUMP},
        {"max-ops", required_argument, 0, OPT_MAX_OPS},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":" CLI_PROBLEM_SHORTOPTS "p:i:t:h", longs, NULL)) != -1) {
        if (cli_problem_arg(cmd, c, optarg, &pa)) continue;
        switch (c) {
        case 'p': plan = optarg; break;
        case 'i': index = (int)cli_int(cmd, "--index", optarg, 1, 1 << 20); break;
        case 't': trace = optarg; break;
        case OPT_FULL: full = 1; break;
        case OPT_JSON: json = 1; break;
        case OPT_DUMP: dump = 1; break;
        case OPT_MAX_OPS: cli_max_ops(cmd, optarg); break;
        case 'h': help(); return 0;
        default: cli_bad_option(cmd, c, argv);
        }
    }
    if (optind < argc) cli_usage_error(cmd, "unexpected argument \"%s\"", argv[optind]);
    if (plan && pa.given)
        cli_usage_error(cmd, "--plan and %s exclude each other (the plan holds the problem)", pa.given);
    if (!plan && !pa.given) cli_usage_error(cmd, "--plan or --model, --system and --gpus are required");
    if (index && !plan) cli_usage_error(cmd, "--index needs --plan");
    if (trace && strcmp(trace, "-") == 0)
        cli_usage_error(cmd, "--trace: expected a file name, got \"-\" (the summary goes to stdout)");
    cli_output_check(cmd, "--trace", trace);

    ts_problem pb;
    ts_layout layout;
    double closed_step_s = 0;
    ts_split split;
    int has_split;
    pick_layout(cmd, plan, index ? index : 1, &pa, &pb, &layout, &closed_step_s, &split, &has_split);

    ts_program prog;
    ts_program_opts po = ts_program_opts_of(has_split ? &split : NULL);
    ts_status st = ts_program_build(&pb, &layout, &po, &prog);
    if (has_split) ts_split_free(&split);
    if (st != TS_OK) cli_fail(cmd, st);
    if (dump) {
        st = ts_program_dump(&prog, stdout);
        if (st == TS_OK && fflush(stdout) != 0) st = TS_FAIL(TS_ERR_IO, "stdout: write failed");
        ts_program_free(&prog);
        if (st != TS_OK) cli_fail(cmd, st);
        return 0;
    }
    if (trace) st = ts_trace_check(&prog, full);
    if (st != TS_OK) {
        ts_program_free(&prog);
        cli_fail(cmd, st);
    }

    /* The summary reads each stage's first rank; only a trace needs every rank's spans. */
    ts_sim_opts so = {.full = full, .stats_spans_only = trace == NULL};
    ts_sim_result r;
    st = ts_simulate(&pb, &prog, &so, &r);
    long long trace_events = 0; /* op events in the trace (the summary's "events" are the simulator's) */
    if (st == TS_OK && trace) {
        ts_step_spans spans = ts_sim_spans(&r);
        st = ts_trace_write(trace, "sim", &pb, &prog, &spans);
        trace_events = (long long)ts_trace_op_events(&prog, &spans);
    }
    cJSON *root = NULL;
    if (st == TS_OK && json) {
        st = ts_sim_summary_json(&pb, &prog, &r, closed_step_s, &root);
        if (st == TS_OK && trace && !cJSON_AddNumberToObject(root, "trace_events", (double)trace_events))
            st = TS_FAIL(TS_ERR_NOMEM, "out of memory for the summary");
        if (st == TS_OK) st = ts_json_write_file("-", root);
    }
    if (st == TS_OK && !json) st = ts_sim_summary_print(stdout, &pb, &prog, &r, closed_step_s);
    if (st == TS_OK && trace && !json)
        printf("# wrote %s: %lld op events, one per op of each simulated rank\n", trace, trace_events);
    cJSON_Delete(root);
    ts_sim_result_free(&r);
    ts_program_free(&prog);
    if (st != TS_OK) cli_fail(cmd, st);
    return 0;
}
