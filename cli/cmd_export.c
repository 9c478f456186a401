/* `tessera export`: how do I launch this layout? A plan's layout as Megatron-LM arguments, a
 * torchrun or Slurm launch script, a Megatron-Bridge recipe or a DeepSpeed config
 * (reports/export.h; docs/export.md). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/json.h"
#include "planner/partition.h"
#include "planner/plan_json.h"
#include "reports/export.h"

static void help(void) {
    printf("usage: tessera export --plan plan.json --format FORMAT [options]\n"
           "       tessera export --model M --system S --gpus N [--fix PINS] [--partition MODE] --format FORMAT\n"
           "\n"
           "A plan's layout as configuration to launch, building the planned model (docs/export.md):\n"
           "  megatron         Megatron-LM pretrain_gpt.py arguments: '#' comment lines (layout, environment,\n"
           "                   what Megatron-LM cannot express), then one line of flags\n"
           "  torchrun         a bash script running those flags with torchrun on each node\n"
           "  sbatch           a Slurm batch script (#SBATCH nodes and GPUs per node) running torchrun by srun\n"
           "  megatron-bridge  a Python file building a Megatron-Bridge ConfigContainer\n"
           "  deepspeed        a DeepSpeed config JSON (what it cannot express: its \"comment\" and stderr)\n"
           "\n"
           "  -p, --plan FILE        a plan written by tessera plan -o\n"
           "  -i, --index I          which layout of the plan, 1-based (default 1)\n"
           "  or the layout flags of tessera plan: the layout plan --top 1 picks under them\n");
    cli_layout_help();
    printf("  -F, --format F         megatron | torchrun | sbatch | megatron-bridge | deepspeed\n"
           "  -V, --megatron-version V  current (default): Megatron-LM with --pipeline-model-parallel-layout\n"
           "                         (core_r0.14, mid-2025, and later); legacy: older releases, uneven stages as\n"
           "                         --decoder-first/last-pipeline-num-layers (a split they cannot express exits 2)\n"
           "  -o, --output FILE      write to FILE (atomically) instead of stdout\n"
           "  -h, --help             this help\n"
           "\n"
           "Exit status: 0 ok, 2 bad input.\n");
}

static const char *const formats[] = {"megatron", "torchrun", "sbatch", "megatron-bridge", "deepspeed", NULL};
enum { F_MEGATRON, F_TORCHRUN, F_SBATCH, F_BRIDGE, F_DEEPSPEED };

static int lookup(const char *const *names, const char *s) {
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], s) == 0) return i;
    return -1;
}

/* Writes the export of `format` to `path` ("-": stdout). */
static ts_status write_export(int format, const ts_problem *pb, const ts_layout *l, const ts_export_opts *o,
                              const char *path) {
    ts_status st;
    char *text = NULL;
    if (format == F_DEEPSPEED) {
        cJSON *config = NULL;
        char *notes = NULL;
        st = ts_export_deepspeed(pb, l, &config, &notes);
        if (st == TS_OK) st = ts_json_write_file(path, config);
        if (st == TS_OK) fputs(notes, stderr);
        cJSON_Delete(config);
        free(notes);
        return st;
    }
    if (format == F_MEGATRON) st = ts_export_megatron(pb, l, o, &text);
    else if (format == F_BRIDGE) st = ts_export_bridge(pb, l, o, &text);
    else st = ts_export_launch(pb, l, o, format == F_SBATCH ? TS_LAUNCH_SBATCH : TS_LAUNCH_TORCHRUN, &text);
    if (st == TS_OK) st = ts_write_file_atomic(path, text, strlen(text));
    free(text);
    return st;
}

/* The plan's index-th layout (1-based), its problem and its split. */
static void read_plan(const char *cmd, const char *plan, int index, ts_problem *pb, ts_layout *layout,
                      ts_split *split, int *has_split) {
    ts_layout *layouts = NULL;
    int n = 0;
    ts_status st = ts_plan_read(plan, pb, &layouts, &n);
    if (st != TS_OK) cli_fail(cmd, st);
    if (index > n) {
        free(layouts);
        cli_usage_error(cmd, "--index: %s holds %d layout%s, got %d", plan, n, n == 1 ? "" : "s", index);
    }
    *layout = layouts[index - 1];
    free(layouts);
    st = ts_plan_read_split(plan, pb, layout, index - 1, split, has_split);
    if (st != TS_OK) cli_fail(cmd, st);
}

int cmd_export(int argc, char **argv) {
    const char *cmd = "export", *plan = NULL, *output = NULL;
    int index = 0, format = -1, version = TS_MEGATRON_CURRENT;
    cli_problem_args pa;
    cli_problem_args_init(&pa);
    static const struct option longs[] = {
        CLI_LAYOUT_LONGOPTS,
        {"plan", required_argument, 0, 'p'},   {"index", required_argument, 0, 'i'},
        {"format", required_argument, 0, 'F'}, {"output", required_argument, 0, 'o'},
        {"megatron-version", required_argument, 0, 'V'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":" CLI_PROBLEM_SHORTOPTS "p:i:F:o:V:h", longs, NULL)) != -1) {
        if (cli_problem_arg(cmd, c, optarg, &pa)) continue;
        switch (c) {
        case 'p': plan = optarg; break;
        case 'i': index = (int)cli_int(cmd, "--index", optarg, 1, 1 << 20); break;
        case 'F':
            format = lookup(formats, optarg);
            if (format < 0)
                cli_usage_error(cmd, "--format: expected megatron, torchrun, sbatch, megatron-bridge or deepspeed, "
                                "got \"%s\"", optarg);
            break;
        case 'V':
            version = lookup(ts_megatron_version_names, optarg);
            if (version < 0) cli_usage_error(cmd, "--megatron-version: expected current or legacy, got \"%s\"", optarg);
            break;
        case 'o': output = optarg; break;
        case 'h': help(); return 0;
        default: cli_bad_option(cmd, c, argv);
        }
    }
    if (optind < argc) cli_usage_error(cmd, "unexpected argument \"%s\"", argv[optind]);
    if (plan && pa.given)
        cli_usage_error(cmd, "--plan and %s exclude each other (the plan holds the problem)", pa.given);
    if (!plan && !pa.given) cli_usage_error(cmd, "--plan or --model, --system and --gpus are required");
    if (index && !plan) cli_usage_error(cmd, "--index needs --plan");
    if (format < 0) cli_usage_error(cmd, "--format is required (megatron, torchrun, sbatch, megatron-bridge or deepspeed)");
    cli_output_check(cmd, "--output", output);

    ts_problem pb;
    ts_layout layout;
    ts_split split;
    int has_split = 0;
    double step_s = 0;
    if (plan) read_plan(cmd, plan, index ? index : 1, &pb, &layout, &split, &has_split);
    else cli_problem_pick(cmd, &pa, &pb, &layout, &step_s, &split, &has_split);
    ts_export_opts opts = {.split = has_split ? &split : NULL, .version = (ts_megatron_version)version};
    ts_status st = write_export(format, &pb, &layout, &opts, output ? output : "-");
    if (has_split) ts_split_free(&split);
    if (st != TS_OK) cli_fail(cmd, st);
    return 0;
}
