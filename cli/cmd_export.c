/* `tessera export`: how do I launch this layout? A plan's layout as Megatron-LM arguments or a
 * DeepSpeed config (reports/export.h). */
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
    printf("usage: tessera export --plan plan.json --format megatron|deepspeed [options]\n"
           "\n"
           "A plan's layout as configuration to launch: Megatron-LM pretrain_gpt.py arguments ('#'\n"
           "comment lines, then one line of flags) or a DeepSpeed config JSON (on stdout; what the\n"
           "config cannot express is said in '#' lines on stderr).\n"
           "\n"
           "  -p, --plan FILE        a plan written by tessera plan -o\n"
           "  -i, --index I          which layout of the plan, 1-based (default 1)\n"
           "  -F, --format F         megatron | deepspeed\n"
           "  -o, --output FILE      write to FILE (atomically) instead of stdout\n"
           "  -h, --help             this help\n"
           "\n"
           "Exit status: 0 ok, 2 bad input.\n");
}

int cmd_export(int argc, char **argv) {
    const char *cmd = "export", *plan = NULL, *format = NULL, *output = NULL;
    int index = 1;
    static const struct option longs[] = {
        {"plan", required_argument, 0, 'p'},   {"index", required_argument, 0, 'i'},
        {"format", required_argument, 0, 'F'}, {"output", required_argument, 0, 'o'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":p:i:F:o:h", longs, NULL)) != -1) {
        switch (c) {
        case 'p': plan = optarg; break;
        case 'i': index = (int)cli_int(cmd, "--index", optarg, 1, 1 << 20); break;
        case 'F':
            if (strcmp(optarg, "megatron") != 0 && strcmp(optarg, "deepspeed") != 0)
                cli_usage_error(cmd, "--format: expected megatron or deepspeed, got \"%s\"", optarg);
            format = optarg;
            break;
        case 'o': output = optarg; break;
        case 'h': help(); return 0;
        default: cli_bad_option(cmd, c, argv);
        }
    }
    if (optind < argc) cli_usage_error(cmd, "unexpected argument \"%s\"", argv[optind]);
    if (!plan) cli_usage_error(cmd, "--plan is required");
    if (!format) cli_usage_error(cmd, "--format is required (megatron or deepspeed)");

    ts_problem pb;
    ts_layout *layouts = NULL;
    int n = 0;
    ts_status st = ts_plan_read(plan, &pb, &layouts, &n);
    if (st != TS_OK) cli_fail(cmd, st);
    if (index > n) {
        free(layouts);
        cli_usage_error(cmd, "--index: %s holds %d layout%s, got %d", plan, n, n == 1 ? "" : "s", index);
    }
    ts_layout layout = layouts[index - 1];
    free(layouts);
    ts_split split;
    int has_split = 0;
    st = ts_plan_read_split(plan, &pb, &layout, index - 1, &split, &has_split);
    if (st != TS_OK) cli_fail(cmd, st);

    const char *path = output ? output : "-";
    if (strcmp(format, "megatron") == 0) {
        char *text = NULL;
        st = ts_export_megatron(&pb, &layout, has_split ? &split : NULL, &text);
        if (st == TS_OK) st = ts_write_file_atomic(path, text, strlen(text));
        free(text);
    } else {
        cJSON *config = NULL;
        char *notes = NULL;
        st = ts_export_deepspeed(&pb, &layout, &config, &notes);
        if (st == TS_OK) st = ts_json_write_file(path, config);
        if (st == TS_OK) fputs(notes, stderr);
        cJSON_Delete(config);
        free(notes);
    }
    if (has_split) ts_split_free(&split);
    if (st != TS_OK) cli_fail(cmd, st);
    return 0;
}
