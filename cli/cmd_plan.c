/* `tessera plan`: which layout trains this model fastest on these GPUs? The flags of the ranking
 * of reports/ranking.h, shown as a table or as the plan JSON. */
#include <getopt.h>
#include <stdio.h>

#include "cli/cli.h"
#include "common/json.h"
#include "reports/ranking.h"

static void help(void) {
    printf("usage: tessera plan --model M --system S --gpus N [options]\n"
           "\n"
           "Ranks every DP×TP×PP×CP×EP×SP layout, ZeRO stage, micro-batch, pipeline schedule and\n"
           "recompute policy that fits in GPU memory, by predicted step time.\n"
           "\n");
    cli_problem_help();
    printf("  -k, --top K            layouts to show (default 10)\n"
           "  -r, --refine K         simulate the best K layouts (one rank per stage) and re-rank\n"
           "                         them by simulated step time (at least K layouts are shown)\n"
           CLI_MAX_OPS_HELP
           "      --partition MODE   uniform | ilp | auto (default): uneven pipeline stages and a\n"
           "                         recompute policy per stage, by a GLPK integer program over the\n"
           "                         best layouts and those that do not fit evenly; auto does it when\n"
           "                         the model mixes dense and MoE layers, nothing fits evenly, or a\n"
           "                         best layout's even split recomputes or has a stage slower than\n"
           "                         the rest by more than a layer\n"
           "      --partition-objective O  stage (default): the slowest stage's time per\n"
           "                         micro-batch; step: the step with its bubble, which may take a\n"
           "                         slightly slower slowest stage for less recompute elsewhere\n"
           "      --partition-time-limit S  GLPK's time per layout (default 0.25 s); a split found\n"
           "                         when it strikes is marked time-limit, not optimal\n"
           "      --against PINS     the pick beside the best layout under PINS (e.g. tp=8,pp=4,vpp=5),\n"
           "                         term by term: compute, TP/CP/EP/PP comm, bubble, DP, memory, band\n"
           "      --json             print the plan as JSON instead of a table\n"
           "  -o, --output FILE      also write the plan JSON to FILE (atomically)\n"
           "  -h, --help             this help\n"
           "\n"
           "Exit status: 0 ok, 2 bad input, 3 nothing fits (the message says what came closest).\n");
}

/* The ranking as JSON (to stdout with --json, to --output) or as the table. */
static ts_status report(const ts_problem *pb, const ts_search_opts *so, const ts_ranking_opts *o,
                        const ts_ranking *r, int json, const char *output) {
    ts_status st = TS_OK;
    cJSON *root = NULL;
    if (json || output) {
        st = ts_ranking_json(pb, so, o, r, &root);
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
    ts_partition_opts *po = &ro.partition;
    cli_problem_args pa;
    cli_problem_args_init(&pa);
    enum { OPT_JSON = CLI_OPT_OWN, OPT_PARTITION, OPT_PARTITION_TIME, OPT_PARTITION_OBJECTIVE, OPT_AGAINST,
           OPT_MAX_OPS };
    static const struct option longs[] = {
        CLI_PROBLEM_LONGOPTS,
        {"top", required_argument, 0, 'k'},    {"refine", required_argument, 0, 'r'},
        {"output", required_argument, 0, 'o'}, {"json", no_argument, 0, OPT_JSON},
        {"partition", required_argument, 0, OPT_PARTITION},
        {"partition-time-limit", required_argument, 0, OPT_PARTITION_TIME},
        {"partition-objective", required_argument, 0, OPT_PARTITION_OBJECTIVE},
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
        case OPT_PARTITION:
            po->mode = (ts_partition_mode)cli_enum(cmd, "--partition", optarg, ts_partition_mode_names);
            break;
        case OPT_PARTITION_TIME: po->time_limit_s = cli_num(cmd, "--partition-time-limit", optarg, 1e-9, 3600); break;
        case OPT_PARTITION_OBJECTIVE:
            po->objective =
                (ts_partition_objective)cli_enum(cmd, "--partition-objective", optarg, ts_partition_objective_names);
            break;
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
    ts_problem pb;
    cli_problem_load(cmd, &pa, &pb);
    ro.fix = pa.fix;

    ts_ranking r;
    ts_status st = ts_ranking_make(&pb, &pa.search, &ro, &r);
    if (r.search.partition_errors) /* also on stderr: with --json the table's note is not printed */
        fprintf(stderr, "tessera plan: warning: GLPK failed on %d layouts, which keep their even split: %s\n",
                r.search.partition_errors, r.search.partition_error);
    if (st == TS_OK && r.search.n_best > 0) cli_warn_stack(cmd, &pb, &r.search.best[0].layout);
    if (st == TS_OK) st = report(&pb, &pa.search, &ro, &r, json, output);
    ts_ranking_free(&r);
    if (st != TS_OK) cli_fail(cmd, st);
    return 0;
}
