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
    cli_problem_help();
    printf("      --gpus-max N       a budget instead of --gpus: the best layouts on at most N GPUs\n"
           "                         (whole nodes below N), saying how many GPUs stay idle\n"
           "      --batch-tolerance T  let the global batch move by up to T (5%% or 0.05) to the\n"
           "                         nearest batches the layouts divide, saying by how much\n"
           "  -k, --top K            layouts to show (default 10)\n"
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

/* The budget's choice, when --gpus-max or --batch-tolerance asked for one (n = 0: none). */
typedef struct {
    ts_budget_opts opts;
    ts_budget_result result;
    int64_t batch_requested;
} budget;

/* The ranking as JSON (to stdout with --json, to --output) or as the table, after the budget's
 * lines. */
static ts_status report(const ts_problem *pb, const ts_search_opts *so, const ts_ranking_opts *o,
                        const ts_ranking *r, const budget *b, int json, const char *output) {
    ts_status st = TS_OK;
    cJSON *root = NULL;
    if (!json && b->result.n) st = ts_budget_print(stdout, b->batch_requested, &b->opts, &b->result);
    if (st == TS_OK && (json || output)) {
        st = ts_ranking_json(pb, so, o, r, &root);
        if (st == TS_OK && b->result.n) st = ts_budget_add_json(root, b->batch_requested, &b->opts, &b->result);
        if (st == TS_OK && output) st = ts_json_write_file(output, root);
        if (st == TS_OK && json) st = ts_json_write_file("-", root);
    }
    if (st == TS_OK && !json) st = ts_ranking_print(stdout, pb, o, r);
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
    budget bud = {0};
    enum { OPT_JSON = CLI_OPT_OWN, OPT_GPUS_MAX, OPT_BATCH_TOL, OPT_AGAINST, OPT_MAX_OPS };
    static const struct option longs[] = {
        CLI_PROBLEM_LONGOPTS,
        {"gpus-max", required_argument, 0, OPT_GPUS_MAX}, {"batch-tolerance", required_argument, 0, OPT_BATCH_TOL},
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
        case OPT_GPUS_MAX: bud.opts.gpus_max = (int)cli_int(cmd, "--gpus-max", optarg, 1, 1 << 24); break;
        case OPT_BATCH_TOL: bud.opts.batch_tolerance = cli_fraction(cmd, "--batch-tolerance", optarg, 0, 0.5); break;
        case OPT_AGAINST: ro.against = optarg; break;
        case OPT_MAX_OPS: cli_max_ops(cmd, optarg); break;
        case 'h': help(); return 0;
        default: cli_bad_option(cmd, c, argv);
        }
    }
    if (optind < argc) cli_usage_error(cmd, "unexpected argument \"%s\"", argv[optind]);
    cli_output_check(cmd, output);
    if (top_k) pa.search.top_k = top_k;
    if (ro.refine && pa.search.objective == TS_OBJ_MEMORY)
        cli_usage_error(cmd, "--refine re-ranks by simulated step time; it needs --objective time or cost");
    if (ro.refine > pa.search.top_k) pa.search.top_k = ro.refine;
    if (bud.opts.gpus_max && pa.gpus) cli_usage_error(cmd, "--gpus and --gpus-max exclude each other");
    int use_budget = bud.opts.gpus_max || bud.opts.batch_tolerance > 0;
    if (!bud.opts.gpus_max) bud.opts.gpus_max = pa.gpus, bud.opts.exact_gpus = 1;
    else pa.gpus = bud.opts.gpus_max;
    ts_problem pb;
    cli_problem_load(cmd, &pa, &pb);
    ro.fix = pa.fix;
    ro.partition = pa.partition;
    if (use_budget) { /* the plan is made on the budget's pick */
        bud.batch_requested = pb.train.global_batch;
        ts_status bst = ts_budget_search(&pb, &pa.search, &pa.partition, &bud.opts, &bud.result);
        if (bst != TS_OK) cli_fail(cmd, bst);
        ts_problem base = pb;
        base.train.global_batch = bud.result.choices[0].global_batch;
        bst = ts_problem_init(&pb, &base.model, &base.sys, &base.train, bud.result.choices[0].gpus);
        if (bst != TS_OK) cli_fail(cmd, bst);
    }

    ts_ranking r;
    ts_status st = ts_ranking_make(&pb, &pa.search, &ro, &r);
    if (r.search.partition_errors) /* also on stderr: with --json the table's note is not printed */
        fprintf(stderr, "tessera plan: warning: GLPK failed on %d layouts, which keep their even split: %s\n",
                r.search.partition_errors, r.search.partition_error);
    if (st == TS_OK && r.search.n_best > 0) cli_warn_stack(cmd, &pb, &r.search.best[0].layout);
    if (st == TS_OK) st = report(&pb, &pa.search, &ro, &r, &bud, json, output);
    ts_ranking_free(&r);
    ts_budget_result_free(&bud.result);
    if (st != TS_OK) cli_fail(cmd, st);
    return 0;
}
