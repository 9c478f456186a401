/* `tessera sweep`: how do throughput, MFU and cost per token change with the GPU count and the
 * system? The best layout per (system, GPU count) as a table, JSON or an HTML page of charts
 * (reports/sweep.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/json.h"
#include "reports/report.h"
#include "reports/sweep.h"

static void help(void) {
    printf("usage: tessera sweep --model M --system S[,S2,...] --gpus LIST|--gpus-max LIST [options]\n"
           "\n"
           "The best layout of a model at each GPU count on each system, with its step time,\n"
           "tokens/s, MFU and cost per million tokens. Counts where nothing fits are rows saying why.\n"
           "\n"
           "  -m, --model M          zoo name (tessera models), model JSON or Hugging Face config.json\n"
           "  -s, --system S,...     one or more systems (zoo names or JSON files), comma-separated\n"
           "      --systems S,...    the same\n"
           "  -g, --gpus LIST        GPU counts: 8,16,32 or a range 8..1024 (powers of two from 8)\n"
           "      --gpus-max LIST    budgets instead of --gpus (the same list grammar): each row the best\n"
           "                         layouts on at most that many GPUs (whole nodes below it), as\n"
           "                         tessera plan --gpus-max picks, saying how many GPUs stay idle\n"
           "      --batch-tolerance T  let each row's global batch move by up to T (5%% or 0.05) to the\n"
           "                         nearest batches the layouts divide (with --gpus: only the batch)\n"
           "  -b, --global-batch B   sequences per step, or a list such as 256,512,1024 (default 1024)\n"
           "  -l, --seq L            tokens per sequence, or a list such as 4096,8192 (default 4096,\n"
           "                         at most the model's max_seq; beyond it with RoPE: a warning)\n"
           "  -f, --fix PINS         pin layout fields at every count, e.g. tp=8,sched=1f1b\n"
           "      --schedules LIST   schedules to consider, e.g. 1f1b,interleaved (default: all but dualpipe, zb-v)\n"
           "      --dtype D          bf16 (default) | fp16 | fp8 | fp32\n"
           "      --no-flash-attn    unfused attention (s×s scores in memory)\n"
           "      --attention-backend B  fused (default) | flash (FlashAttention-2) | unfused\n"
           "      --cross-entropy C  fused | unfused loss (default: the stack's)\n"
           "      --cp-kind K        context parallelism's exchange: ring (default) | allgather | a2a\n"
           "      --moe-dispatcher D auto (default) | alltoall | allgather | deepep (docs/moe.md)\n"
           "      --moe-a2a-overlap F  fraction of the EP dispatch/combine hidden (default 0)\n"
           "      --moe-fp8-dispatch dispatch MoE tokens in FP8\n"
           "      --no-moe-grouped-gemm  one GEMM per local expert (SequentialMLP)\n"
           "      --overlap-moe-expert-parallel-comm  Megatron-Core's combined 1F1B (docs/moe.md)\n"
           "      --moe-shared-expert-overlap  shared experts beside the EP all-to-all (docs/moe.md)\n"
           "      --recompute-modules LIST  what recompute=selective recomputes (as tessera plan)\n"
           "      --tp-across-nodes  allow TP groups larger than a node\n"
           "      --no-prune         evaluate every layout (no branch and bound; same answer, slower)\n"
           "      --partition MODE   uniform | ilp | auto (default), as in tessera plan\n"
           "      --price P          USD per GPU-hour: one price for every system, or per system,\n"
           "                         e.g. h100-sxm-dgx=2.5,b200-dgx=4.2; a system not given one\n"
           "                         takes its file's price, else %.2f\n"
           "      --tokens N         compare systems for training N tokens (2T, 300B, 1.5e12): per\n"
           "                         system the cheapest GPU count, its days, cost and energy, and a\n"
           "                         recommendation\n"
           "      --days D           with --tokens: only counts that finish within D days\n"
           "      --json             print the sweep as JSON instead of a table\n"
           "  -o, --output FILE      also write FILE (atomically): an HTML page of charts when FILE\n"
           "                         ends in .html (open it in any browser, no network needed), else\n"
           "                         the JSON\n"
           "  -h, --help             this help\n"
           "\n"
           "A progress bar is drawn on stderr when it is a terminal and the sweep runs longer than\n"
           "half a second (the environment variable TESSERA_PROGRESS_AFTER_S sets that delay).\n"
           "The fastest row and the cheapest per token are marked and recommended.\n"
           "Exit status: 0 ok, 2 bad input, 3 nothing fits at any count.\n",
           TS_REPORT_DEFAULT_PRICE);
}

/* Progress on stderr, only for a terminal and only once the sweep has run for half a second, so
 * quick sweeps stay quiet; TESSERA_PROGRESS_AFTER_S changes the delay (the tests set 0). */
#define PROGRESS_AFTER_S 0.5

typedef struct {
    struct timespec start;
    double after_s;
    int drawn;
} progress_state;

static double since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

static void progress(void *ctx, int done, int total) {
    progress_state *p = ctx;
    if (since(&p->start) < p->after_s && !p->drawn) return;
    int width = 30, filled = total > 0 ? width * done / total : width;
    fprintf(stderr, "\rtessera sweep: [%.*s%*s] %d/%d", filled, "##############################", width - filled,
            "", done, total);
    if (done == total) fputs("\r\033[K", stderr);
    fflush(stderr);
    p->drawn = 1;
}

/* Loads each comma-separated system into `out`; returns how many. Exits 2 on bad input. */
static int load_systems(const char *cmd, const char *list, ts_system *out) {
    char buf[4096];
    cli_list_check(cmd, "--system", list);
    if (snprintf(buf, sizeof buf, "%s", list) >= (int)sizeof buf) cli_usage_error(cmd, "--system: list too long");
    int n = 0;
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        if (n == TS_SWEEP_MAX_SYSTEMS) cli_usage_error(cmd, "--system: expected at most %d systems", TS_SWEEP_MAX_SYSTEMS);
        ts_status st = ts_system_load(item, &out[n]);
        if (st != TS_OK) cli_fail(cmd, st);
        for (int k = 0; k < n; k++) /* one row each: a --price SYSTEM=USD must name one */
            if (strcmp(out[k].name, out[n].name) == 0) cli_usage_error(cmd, "--system: %s given twice", out[n].name);
        n++;
    }
    if (n == 0) cli_usage_error(cmd, "--system: expected one or more systems, got \"%s\"", list);
    return n;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static ts_status write_html(const char *path, const ts_sweep_spec *spec, const ts_sweep_result *r) {
    ts_atomic_file af;
    TS_CHECK(ts_atomic_open(path, &af));
    ts_status st = ts_sweep_write_html(af.f, spec, r);
    if (st != TS_OK) {
        ts_atomic_abort(&af);
        return st;
    }
    return ts_atomic_commit(&af);
}

int cmd_sweep(int argc, char **argv) {
    const char *cmd = "sweep", *systems_arg = NULL, *gpus_arg = NULL, *output = NULL, *price_arg = NULL;
    const char *batch_arg = NULL, *seq_arg = NULL, *gpus_max_arg = NULL;
    int json = 0;
    double tokens = 0;
    cli_problem_args pa;
    cli_problem_args_init(&pa);
    double max_days = 0;
    enum { OPT_JSON = CLI_OPT_OWN, OPT_PRICE, OPT_TOKENS, OPT_DAYS };
    static const struct option longs[] = {
        CLI_PROBLEM_LONGOPTS,
        {"systems", required_argument, 0, 's'}, {"tokens", required_argument, 0, OPT_TOKENS},
        {"days", required_argument, 0, OPT_DAYS},
        {"price", required_argument, 0, OPT_PRICE}, {"json", no_argument, 0, OPT_JSON},
        {"gpus-max", required_argument, 0, CLI_OPT_GPUS_MAX}, {"batch-tolerance", required_argument, 0, CLI_OPT_BATCH_TOL},
        {"output", required_argument, 0, 'o'},      {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":" CLI_PROBLEM_SHORTOPTS "o:h", longs, NULL)) != -1) {
        if (c == 's') systems_arg = optarg; /* a list here, not one system */
        else if (c == 'g') gpus_arg = optarg;
        else if (c == CLI_OPT_GPUS_MAX) gpus_max_arg = optarg; /* a list of budgets here */
        else if (c == 'b') batch_arg = optarg; /* lists here */
        else if (c == 'l') seq_arg = optarg;
        else if (c == CLI_OPT_OBJECTIVE || c == CLI_OPT_MAX_SLOWDOWN)
            cli_usage_error(cmd, "%s is a plan option; the sweep ranks by step time",
                            c == CLI_OPT_OBJECTIVE ? "--objective" : "--max-slowdown");
        else if (cli_problem_arg(cmd, c, optarg, &pa)) continue;
        else switch (c) {
            case OPT_PRICE: cli_list_check(cmd, "--price", optarg), price_arg = optarg; break;
            case OPT_TOKENS: tokens = cli_tokens(cmd, "--tokens", optarg); break;
            case OPT_DAYS: max_days = cli_num(cmd, "--days", optarg, 1e-3, 1e5); break;
            case OPT_JSON: json = 1; break;
            case 'o': output = optarg; break;
            case 'h': help(); return 0;
            default: cli_bad_option(cmd, c, argv);
            }
    }
    if (optind < argc) cli_usage_error(cmd, "unexpected argument \"%s\"", argv[optind]);
    if (!pa.model) cli_usage_error(cmd, "--model is required");
    if (!systems_arg) cli_usage_error(cmd, "--system is required");
    if (gpus_arg && gpus_max_arg) cli_usage_error(cmd, "--gpus and --gpus-max exclude each other");
    if (!gpus_arg && !gpus_max_arg) cli_usage_error(cmd, "--gpus or --gpus-max is required");
    if (max_days > 0 && tokens <= 0) cli_usage_error(cmd, "--days needs --tokens (the training run to fit in them)");
    if (output && strcmp(output, "-") == 0)
        cli_usage_error(cmd, "--output: expected a file name, got \"-\" (the table or JSON goes to stdout)");
    cli_output_check(cmd, "--output", output);

    int gpus[TS_SWEEP_MAX_COUNTS], n_gpus = 0, n_batches = 0, n_seqs = 0;
    int64_t batches[TS_SWEEP_MAX_SIZES], seqs[TS_SWEEP_MAX_SIZES];
    ts_status st = ts_sweep_parse_gpus(gpus_arg ? "--gpus" : "--gpus-max", gpus_arg ? gpus_arg : gpus_max_arg, gpus,
                                       &n_gpus);
    if (st == TS_OK && batch_arg) st = ts_sweep_parse_sizes("--global-batch", batch_arg, 1 << 30, batches, &n_batches);
    if (st == TS_OK && seq_arg) st = ts_sweep_parse_sizes("--seq", seq_arg, 1LL << 27, seqs, &n_seqs);
    if (st == TS_OK && pa.fix) st = ts_pins_parse("--fix", pa.fix, &pa.search.pins);
    if (st != TS_OK) cli_fail(cmd, st);
    ts_system systems[TS_SWEEP_MAX_SYSTEMS];
    int n_systems = load_systems(cmd, systems_arg, systems);
    cli_problem_load_stack(cmd, &pa, systems, n_systems);
    ts_sweep_spec spec = {.systems = systems, .n_systems = n_systems, .train = pa.train, .search = pa.search,
                          .fix = pa.fix, .price_per_gpu_hour = TS_REPORT_DEFAULT_PRICE, .price_is_default = 1,
                          .gpus = gpus, .n_gpus = n_gpus, .batches = batch_arg ? batches : NULL,
                          .n_batches = n_batches, .seqs = seq_arg ? seqs : NULL, .n_seqs = n_seqs,
                          .partition = pa.partition, .gpus_are_max = gpus_max_arg != NULL,
                          .batch_tolerance = pa.budget.batch_tolerance};
    spec.budget = spec.gpus_are_max || spec.batch_tolerance > 0;
    if (price_arg) st = ts_sweep_parse_prices("--price", price_arg, &spec);
    if (st == TS_OK) st = ts_model_load(pa.model, &spec.model);
    if (st != TS_OK) cli_fail(cmd, st);
    if (seq_arg) spec.train.seq = seqs[0];
    else if (spec.train.seq > spec.model.max_seq) spec.train.seq = spec.model.max_seq;
    if (batch_arg) spec.train.global_batch = batches[0];
    for (int l = 0; l < (seq_arg ? n_seqs : 1); l++) cli_warn_context_extension(cmd, &spec.model, seq_arg ? seqs[l] : spec.train.seq);
    const char *after = getenv("TESSERA_PROGRESS_AFTER_S");
    progress_state ps = {.after_s = after ? cli_num(cmd, "TESSERA_PROGRESS_AFTER_S", after, 0, 3600)
                                          : PROGRESS_AFTER_S};
    if (isatty(STDERR_FILENO)) {
        clock_gettime(CLOCK_MONOTONIC, &ps.start);
        spec.progress = progress;
        spec.progress_ctx = &ps;
    }

    ts_sweep_result r;
    ts_status run_st = ts_sweep_run(&spec, &r);
    if (run_st != TS_OK && run_st != TS_ERR_INFEASIBLE) {
        ts_sweep_result_free(&r);
        cli_fail(cmd, run_st);
    }
    ts_buy cap;
    if (tokens > 0) {
        st = ts_capacity_compare(&spec, &r, tokens, max_days, &cap);
        if (st != TS_OK) cli_fail(cmd, st);
        spec.capacity = &cap;
    }
    char nothing_fits[1024];
    snprintf(nothing_fits, sizeof nothing_fits, "%s", run_st == TS_OK ? "" : ts_error_message());
    /* Nothing fitting anywhere still prints the rows that say why, then exits 3. */
    cJSON *root = NULL;
    st = TS_OK;
    if (json || (output && !ends_with(output, ".html"))) st = ts_sweep_to_json(&spec, &r, &root);
    if (st == TS_OK && root && spec.capacity) st = ts_capacity_add_json(&spec, &r, spec.capacity, root);
    if (st == TS_OK && output) st = ends_with(output, ".html") ? write_html(output, &spec, &r)
                                                                : ts_json_write_file(output, root);
    if (st == TS_OK) st = json ? ts_json_write_file("-", root) : ts_sweep_print(stdout, &spec, &r);
    if (st == TS_OK && !json && spec.capacity) st = ts_capacity_print(stdout, &spec, &r, spec.capacity);
    if (st == TS_OK && output && !json) printf("# wrote %s\n", output);
    cJSON_Delete(root);
    ts_sweep_result_free(&r);
    if (st != TS_OK) cli_fail(cmd, st);
    if (run_st != TS_OK) {
        fprintf(stderr, "tessera %s: %s\n", cmd, nothing_fits);
        return ts_exit_code(run_st);
    }
    return 0;
}
