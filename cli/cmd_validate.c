/* `tessera validate`: does the simulator predict this machine? The flags of the experiment of
 * reports/validate.h (calibrate, then train, simulate and compare a matrix of small layouts),
 * which prints one row per layout and the median and worst absolute step-time error; --json
 * mirrors it with per-op-kind errors. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/interrupt.h"
#include "common/json.h"
#include "models/system.h"
#include "reports/validate.h"

static void help(void) {
    printf("usage: tessera validate [options]\n"
           "\n"
           "Measures how well the simulator predicts this machine: calibrates it (tessera calibrate\n"
           "--quick), then for each of %d small layouts (DP, TP, SP, PP with every schedule, CP,\n"
           "ZeRO 1-3, recompute, EP and combinations, tiny and tiny-moe models) trains it for real\n"
           "on MPI ranks (tessera run), simulates one step and compares the two traces op by op.\n"
           "With --repeat R it calibrates and trains every layout once per pass and simulates with\n"
           "the calibration whose in-situ step is the median. Prints layout, simulated and measured\n"
           "step time and the error, then the median and worst absolute error. On CPU ranks the\n"
           "measured steps are put at the calibration's speed on the speed gauge (GEMMs and an attention\n"
           "pass read between steps: a shared machine's cores change speed in phases of seconds); raw_s and\n"
           "raw_error give the steps as timed. The cases of at most as many ranks as the machine has cores\n"
           "are summarised apart: past the cores the operating system time-slices the ranks.\n"
           "\n"
           "  -s, --system FILE      use this system spec instead of calibrating (e.g. a profile\n"
           "                         written by tessera calibrate -o)\n"
           "  -r, --ranks N          largest layouts to run, in ranks (default 8)\n"
           "      --only I,J,...     run only these cases of the matrix (1-based)\n"
           "      --device D         cpu (default) or cuda: train and calibrate on GPUs, one rank\n"
           "                         each, so only the layouts of at most that many ranks (one GPU:\n"
           "                         the one-rank cases); no usable GPU is exit 2\n"
           "  -n, --steps N          training steps per layout (default 8; the first 3 are warm-up)\n"
           "  -R, --repeat R         train every layout R times, in R passes over the matrix, and\n"
           "                         compare with the median (default 1; a shared machine's speed\n"
           "                         moves in phases of seconds, which passes average over)\n"
           "      --repeat-to X      passes until the measured steps hold to X (a fraction, e.g. 0.02):\n"
           "                         at least 2, at most %d, stopping once the median over the cases\n"
           "                         of their passes' spread / sqrt(passes) is at most X\n"
           "      --situ-steps N     in-situ steps of the calibration (default 16; calibrate's own\n"
           "                         default is 3 with --quick); the pass trains at the matrix's\n"
           "                         batch and length (calibrate --situ-batch, --situ-seq)\n"
           "  -b, --global-batch B   sequences per step (default 8)\n"
           "  -l, --seq L            tokens per sequence (default 128)\n"
           "  -k, --keep DIR         keep the profile, plans and traces in DIR (default: a temporary\n"
           "                         folder, removed)\n"
           "      --replay           also replay each run: simulate it with every compute op taking the\n"
           "                         time it took in the run and the rest modelled (communication,\n"
           "                         schedule, waits), and report that error beside (\"replay\")\n"
           "      --json             print the results as JSON instead of a table\n"
           "  -o, --output FILE      also write the JSON to FILE (atomically)\n"
           "  -h, --help             this help\n"
           "\n"
           "Exit status: 0 ok, 2 bad input, 1 a calibration or run failed, 130 / 143 interrupted by\n"
           "SIGINT / SIGTERM (the case at work stopped, the temporary folder removed).\n",
           TS_VALIDATE_CASES, TS_VALIDATE_MAX_REPEAT);
}

/* "1,3,5": every item a case number; an empty item (",", "1,,3", "") is refused, not skipped,
 * since an --only that selects nothing would run the whole matrix. */
static void parse_only(const char *cmd, const char *text, ts_validate_opts *o) {
    for (const char *p = text;; p++) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char item[32];
        if (n == 0 || n >= sizeof item)
            cli_usage_error(cmd, "--only: expected case numbers in [1, %d] separated by commas, got \"%s\"",
                            TS_VALIDATE_CASES, text);
        memcpy(item, p, n);
        item[n] = '\0';
        o->only[cli_int(cmd, "--only", item, 1, TS_VALIDATE_CASES) - 1] = 1;
        if (end == NULL) break;
        p = end;
    }
}

/* Every input and output of the experiment, checked before it calibrates anything. */
static void check_paths(const char *cmd, const ts_validate_opts *o, const char *output) {
    cli_output_check(cmd, "--output", output);
    if (o->system) {
        ts_system s;
        ts_status st = ts_system_load(o->system, &s);
        if (st != TS_OK) cli_fail(cmd, st);
    }
    if (o->dir == NULL) return;
    struct stat sb;
    if (mkdir(o->dir, 0755) != 0 && errno != EEXIST)
        cli_usage_error(cmd, "--keep: cannot create the folder \"%s\": %s", o->dir, strerror(errno));
    if (stat(o->dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        cli_usage_error(cmd, "--keep: \"%s\" is not a folder", o->dir);
    if (access(o->dir, W_OK | X_OK) != 0)
        cli_usage_error(cmd, "--keep: cannot write in the folder \"%s\": %s", o->dir, strerror(errno));
}

/* The outcome as JSON (to stdout with --json, to --output) or as the table. */
static ts_status report(const ts_validate_result *r, int json, const char *output, const char *keep) {
    cJSON *root = NULL;
    ts_status st = ts_validate_json(r, &root);
    if (st == TS_OK && output) st = ts_json_write_file(output, root);
    if (st == TS_OK && json) st = ts_json_write_file("-", root);
    if (st == TS_OK && !json) st = ts_validate_print(stdout, r);
    if (st == TS_OK && !json && keep) printf("# profile, plans and traces kept in %s\n", keep);
    cJSON_Delete(root);
    return st;
}

int cmd_validate(int argc, char **argv) {
    const char *cmd = "validate", *output = NULL;
    int json = 0;
    ts_validate_opts o;
    ts_validate_opts_defaults(&o);
    enum { OPT_JSON = 256, OPT_ONLY, OPT_SITU_STEPS, OPT_REPLAY, OPT_REPEAT_TO };
    static const struct option longs[] = {
        {"device", required_argument, 0, 'D'}, /* long only: 'D' is not in the short options */
        {"system", required_argument, 0, 's'},  {"ranks", required_argument, 0, 'r'},
        {"only", required_argument, 0, OPT_ONLY}, {"steps", required_argument, 0, 'n'},
        {"repeat", required_argument, 0, 'R'},  {"situ-steps", required_argument, 0, OPT_SITU_STEPS},
        {"global-batch", required_argument, 0, 'b'}, {"seq", required_argument, 0, 'l'},
        {"keep", required_argument, 0, 'k'},    {"json", no_argument, 0, OPT_JSON},
        {"output", required_argument, 0, 'o'},  {"help", no_argument, 0, 'h'},
        {"replay", no_argument, 0, OPT_REPLAY}, {"repeat-to", required_argument, 0, OPT_REPEAT_TO},
        {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":s:r:n:R:b:l:k:o:h", longs, NULL)) != -1) {
        switch (c) {
        case 's': o.system = optarg; break;
        case 'D':
            if (ts_device_parse(optarg, &o.device) != TS_OK) cli_usage_error(cmd, "%s", ts_error_message());
            break;
        case 'r': o.max_ranks = (int)cli_int(cmd, "--ranks", optarg, 1, 64); break;
        case OPT_ONLY: parse_only(cmd, optarg, &o); break;
        case 'n': o.steps = (int)cli_int(cmd, "--steps", optarg, TS_VALIDATE_WARMUP + 1, 1000); break;
        case 'R': o.repeat = (int)cli_int(cmd, "--repeat", optarg, 1, TS_VALIDATE_MAX_REPEAT); break;
        case OPT_SITU_STEPS: o.situ_steps = (int)cli_int(cmd, "--situ-steps", optarg, 2, 1000); break;
        case 'b': o.batch = cli_int(cmd, "--global-batch", optarg, 1, 4096); break;
        case 'l': o.seq = cli_int(cmd, "--seq", optarg, 8, 4096); break;
        case 'k': o.dir = optarg; break;
        case OPT_JSON: json = 1; break;
        case OPT_REPLAY: o.replay = 1; break;
        case OPT_REPEAT_TO: o.repeat_to = cli_num(cmd, "--repeat-to", optarg, 1e-4, 1); break;
        case 'o': output = optarg; break;
        case 'h': help(); return 0;
        default: cli_bad_option(cmd, c, argv);
        }
    }
    if (optind < argc) cli_usage_error(cmd, "unexpected argument \"%s\"", argv[optind]);
    if (o.device == TS_DEVICE_CUDA && ts_device_runnable(o.device) != TS_OK)
        cli_usage_error(cmd, "%s", ts_error_message());
    o.max_ranks = ts_validate_max_ranks(o.device, ts_cuda_gpu_count(), o.max_ranks);
    char self[4096];
    cli_self_path(cmd, self, sizeof self);
    o.self = self;
    check_paths(cmd, &o, output);
    /* SIGINT / SIGTERM stop the child at work (calibrate or run), and the experiment unwinds
     * (its temporary folder removed) before the one line. */
    ts_interrupt_install(cmd, "the validation matrix", TS_INTERRUPT_DEFER);
    setenv("TESSERA_INTERRUPT_QUIET", "1", 1);
    ts_validate_result r;
    ts_status st = ts_validate(&o, &r);
    if (ts_interrupted()) {
        ts_validate_result_free(&r);
        ts_interrupt_exit();
    }
    if (st == TS_OK) st = report(&r, json, output, o.dir);
    ts_validate_result_free(&r);
    if (st != TS_OK) cli_fail(cmd, st);
    return 0;
}
