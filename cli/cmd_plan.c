/* `tessera plan`: which layout trains this model fastest on these GPUs? The flags of the ranking
 * of reports/ranking.h, shown as a table or as the plan JSON. */
#include <getopt.h>
#include <stdio.h>

#include "cli/cli.h"
#include "common/json.h"
#include "reports/budget.h"
#include "reports/ranking.h"

static void help(void) {
    printf("usage: tessera plan --model M --system S --gpus N [options]\n"
           "\n"
           "Ranks every DP×TP×PP×CP×EP×SP layout, ZeRO stage, micro-batch, pipeline schedule and\n"
           "recompute policy that fits in GPU memory, by predicted step time.\n"
           "\n");
    cli_layout_help();
    printf("  -k, --top K            layouts to show (default 10)\n"
           "  -r, --refine K         simulate the best K layouts (one rank per stage) and re-rank\n"
           "                         them by simulated step time (at least K layouts are shown)\n"
           CLI_MAX_OPS_HELP
           "      --against PINS     the pick beside the best layout under PINS (e.g. tp=8,pp=4,vpp=5),\n"
           "                         term by term: compute, TP/CP/EP/PP comm, bubble, DP, memory, band\n"
           "      --json             print the plan as JSON instead of a table\n"
           "  -o, --output FILE      also write the plan JSON to FILE (atomically)\n"
           "  -h, --help             this help\n"
           "\n"
           "Exit status: 0 ok, 2 bad input, 3 nothing fits (the message says what came closest).\n");
}

/* The plan as JSON (to stdout with --json, to --output) or as the table, after the budget's
 * lines. */
static ts_status report(const cli_plan *p, const cli_problem_args *a, int json, const char *output) {
    ts_status st = TS_OK;
    cJSON *root = NULL;
    if (!json && p->budget.n) st = ts_budget_print(stdout, p->batch_requested, &a->budget, &p->budget);
    if (st == TS_OK && (json || output)) {
        st = cli_plan_json(p, a, &root);
        if (st == TS_OK && output) st = ts_json_write_file(output, root);
        if (st == TS_OK && json) st = ts_json_write_file("-", root);
    }
    if (st == TS_OK && !json) st = ts_ranking_print(stdout, &p->pb, &p->ro, &p->r);
    if (st == TS_OK && output && !json) printf("# wrote %s\n", output);
    cJSON_Delete(root);
    return st;
}

int cmd_plan(int argc, char **argv) {
    const char *cmd = "plan", *output = NULL;
    int json = 0, top_k = 0;
    ts_ranking_opts ro;
    ts_ranking_opts_defaults(&ro);
    cli_problem_args pa;
    cli_problem_args_init(&pa);
    enum { OPT_JSON = CLI_OPT_OWN, OPT_AGAINST, OPT_MAX_OPS };
    static const struct option longs[] = {
        CLI_LAYOUT_LONGOPTS,
        {"top", required_argument, 0, 'k'},    {"refine", required_argument, 0, 'r'},
        {"output", required_argument, 0, 'o'}, {"json", no_argument, 0, OPT_JSON},
        {"against", required_argument, 0, OPT_AGAINST},
        {"max-ops", required_argument, 0, OPT_MAX_OPS},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":" CLI_PROBLEM_SHORTOPTS "k:r:o:h", longs, NULL)) != -1) {
        if (cli_problem_arg(cmd, c, optarg, &pa)) continue;
        switch (c) {
        case 'k': top_k = (int)cli_int(cmd, "--top", optarg, 1, 100000); break;
        case 'r': ro.refine = (int)cli_int(cmd, "--refine", optarg, 1, 100000); break;
        case 'o': output = optarg; break;
        case OPT_JSON: json = 1; break;
        case OPT_AGAINST: ro.against = optarg; break;
        case OPT_MAX_OPS: cli_max_ops(cmd, optarg); break;
        case 'h': help(); return 0;
        default: cli_bad_option(cmd, c, argv);
        }
    }
    if (optind < argc) cli_usage_error(cmd, "unexpected argument \"%s\"", argv[optind]);
    cli_output_check(cmd, "--output", output);
    if (top_k) pa.search.top_k = top_k;
    if (ro.refine && pa.search.objective == TS_OBJ_MEMORY)
        cli_usage_error(cmd, "--refine re-ranks by simulated step time; it needs --objective time or cost");
    if (ro.refine > pa.search.top_k) pa.search.top_k = ro.refine;
    cli_plan p;
    cli_problem_plan(cmd, &pa, &ro, &p);
    ts_status st = report(&p, &pa, json, output);
    cli_plan_free(&p);
    if (st != TS_OK) cli_fail(cmd, st);
    return 0;
}
