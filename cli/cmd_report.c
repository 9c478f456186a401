/* `tessera report`: what does the plan mean for the people who buy the GPUs? Builds the report of
 * a plan (reports/report.h) and writes it as HTML, Markdown, CSV or JSON. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/json.h"
#include "reports/html.h"
#include "reports/report.h"
#include "reports/text.h"

static void help(void) {
    printf("usage: tessera report --plan plan.json [options]\n"
           "       tessera report --model M --system S --gpus N [--fix PINS] [--partition MODE] [options]\n"
           "\n"
           "A capacity-planning report of a plan: the question and its answer, time, GPU-hours, cost\n"
           "and energy to train, the top layouts, memory per GPU and step-time split per layout, the\n"
           "best layout's simulated pipeline timeline (and a real run's, when given) and the\n"
           "assumptions behind every figure. The HTML page is self-contained: open it in any browser,\n"
           "no network needed.\n"
           "\n"
           "  -p, --plan FILE        a plan written by tessera plan -o\n"
           "  or the layout flags of tessera plan: the report of the plan it makes under them\n");
    cli_layout_help();
    printf("  -k, --top K            with the layout flags: layouts in the plan (default 10, as plan's)\n"
           "      --run FILE         what tessera run --json printed, shown beside the simulation\n"
           "      --run-trace FILE   the trace tessera run --trace wrote: the measured timeline\n"
           "      --tokens T         tokens to train on: 2T, 300B, 1.5e12 (default 1e12)\n"
           "      --price USD        price of one GPU-hour in USD (default %.2f)\n"
           "  -F, --format F         html | md | csv | json (default: from the\n"
           "                         -o file's extension, csv for -o DIR/, else html)\n"
           "  -o, --output FILE      write to FILE (atomically) instead of stdout\n"
           CLI_MAX_OPS_HELP
           "                         CSV is one table per file and needs -o:\n"
           "                         -o PREFIX writes PREFIX-layouts.csv, PREFIX-stages.csv, ...\n"
           "                         -o DIR/ (or an existing directory) DIR/layouts.csv, ...\n"
           "  -h, --help             this help\n"
           "\n"
           "Exit status: 0 ok, 1 a file could not be written, 2 bad input, 3 nothing fits.\n",
           TS_REPORT_DEFAULT_PRICE);
}

typedef enum { FMT_HTML, FMT_MD, FMT_CSV, FMT_JSON } format;
static const char *const format_names[] = {"html", "md", "csv", "json", NULL};

static int format_index(const char *name) {
    for (int i = 0; format_names[i]; i++)
        if (strcmp(name, format_names[i]) == 0) return i;
    return -1;
}

/* The format a file name's extension asks for (".html", ".md", ...; a directory "DIR/": CSV),
 * -1 when none. */
static int format_of_file(const char *path) {
    size_t n = strlen(path);
    if (n > 0 && path[n - 1] == '/') return FMT_CSV;
    const char *dot = strrchr(path, '.');
    if (dot == NULL || strchr(dot, '/')) return -1;
    if (strcmp(dot, ".htm") == 0) return FMT_HTML;
    return format_index(dot + 1);
}

static ts_status write_text(const ts_report *r, format fmt, const char *path) {
    ts_atomic_file af;
    TS_CHECK(ts_atomic_open(path, &af));
    ts_status st = fmt == FMT_HTML ? ts_report_write_html(r, af.f) : ts_report_write_markdown(r, af.f);
    if (st != TS_OK) {
        ts_atomic_abort(&af);
        return st;
    }
    return ts_atomic_commit(&af);
}

int cmd_report(int argc, char **argv) {
    const char *cmd = "report", *plan = NULL, *output = NULL;
    int fmt = -1, top_given = 0;
    ts_report_opts opts;
    ts_report_opts_defaults(&opts);
    cli_problem_args pa;
    cli_problem_args_init(&pa);
    enum { OPT_RUN = CLI_OPT_OWN, OPT_TRACE, OPT_TOKENS, OPT_PRICE, OPT_MAX_OPS };
    static const struct option longs[] = {
        CLI_LAYOUT_LONGOPTS,
        {"plan", required_argument, 0, 'p'},        {"run", required_argument, 0, OPT_RUN},
        {"run-trace", required_argument, 0, OPT_TRACE}, {"tokens", required_argument, 0, OPT_TOKENS},
        {"price", required_argument, 0, OPT_PRICE},
        {"top", required_argument, 0, 'k'},
        {"max-ops", required_argument, 0, OPT_MAX_OPS}, {"format", required_argument, 0, 'F'},
        {"output", required_argument, 0, 'o'},      {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":" CLI_PROBLEM_SHORTOPTS "p:F:o:k:h", longs, NULL)) != -1) {
        if (cli_problem_arg(cmd, c, optarg, &pa)) continue;
        switch (c) {
        case 'p': plan = optarg; break;
        case 'k': pa.search.top_k = (int)cli_int(cmd, "--top", optarg, 1, 100000), top_given = 1; break;
        case OPT_RUN: opts.run_json = optarg; break;
        case OPT_TRACE: opts.run_trace = optarg; break;
        case OPT_TOKENS: opts.tokens = cli_tokens(cmd, "--tokens", optarg); break;
        case OPT_MAX_OPS: cli_max_ops(cmd, optarg); break;
        case OPT_PRICE:
            opts.price_per_gpu_hour = cli_num(cmd, "--price", optarg, 0, 1e6);
            opts.price_is_default = 0;
            break;
        case 'F':
            fmt = format_index(optarg);
            if (fmt < 0) cli_usage_error(cmd, "--format: expected html, md, csv or json, got \"%s\"", optarg);
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
    if (plan && top_given) cli_usage_error(cmd, "--top needs the layout flags (the plan holds its layouts)");
    if (fmt < 0) fmt = output && format_of_file(output) >= 0 ? format_of_file(output) : FMT_HTML;
    if (fmt == FMT_CSV && (!output || !output[0] || strcmp(output, "-") == 0))
        cli_usage_error(cmd, "--format csv writes one file per table: give -o PREFIX (PREFIX-layouts.csv, ...) "
                             "or -o DIR/ (DIR/layouts.csv, ...)");
    if (fmt != FMT_CSV) cli_output_check(cmd, "--output", output);

    if (!plan) plan = cli_problem_plan_file(cmd, &pa); /* held only while the report is built */

    ts_report r;
    ts_status st = ts_report_build(plan, &opts, &r);
    if (pa.given) cli_plan_temp_remove();
    if (pa.given) /* the report names the flags, not the temporary file that held their plan */
        snprintf(r.plan_file, sizeof r.plan_file, "the plan of --model %s --system %s --gpus %d", pa.model,
                 pa.system, r.pb.gpus);
    const char *path = output ? output : "-";
    if (st == TS_OK && fmt == FMT_CSV) {
        ts_report_csv_files written;
        st = ts_report_write_csv(&r, output, &written);
        for (int i = 0; i < written.n; i++) printf("# wrote %s\n", written.path[i]);
        output = NULL; /* listed above */
    } else if (st == TS_OK && fmt == FMT_JSON) {
        cJSON *root = NULL;
        st = ts_report_to_json(&r, &root);
        if (st == TS_OK) st = ts_json_write_file(path, root);
        cJSON_Delete(root);
    } else if (st == TS_OK) {
        st = write_text(&r, (format)fmt, path);
    }
    ts_report_free(&r);
    if (st != TS_OK) cli_fail(cmd, st);
    if (output) printf("# wrote %s\n", output);
    return 0;
}
