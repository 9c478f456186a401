/* `tessera run`: trains a plan's layout for real on MPI ranks (CPU: OpenBLAS + Open MPI; GPU:
 * cuBLAS + NCCL, one GPU per rank), op by op as the step program says, and reports losses, step
 * times and memory. Started without an MPI launcher it starts `mpirun` itself with the layout's
 * rank count. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "common/interrupt.h"
#include "common/json.h"
#include "exec/run.h"
#include "exec/runtime.h"
#include "planner/plan_json.h"

static void help(void) {
    printf("usage: tessera run --plan plan.json [options]\n"
           "       tessera run --model M --system S --gpus N [--fix PINS] [--partition MODE] [options]\n"
           "\n"
           "Trains the plan's layout for real on MPI ranks: each rank runs its stage's step program\n"
           "(OpenBLAS GEMMs and Open MPI collectives, or with --device cuda cuBLAS and NCCL on one GPU\n"
           "per rank), the transformer's losses are the same as on one rank. Without an MPI launcher\n"
           "it starts mpirun with the layout's rank count itself (--oversubscribe when the ranks\n"
           "exceed the cores, and it says so). It trains fp32 whatever dtype the plan was made for,\n"
           "says so on stderr, and reports the planner's memory for fp32.\n"
           "\n"
           "  -p, --plan FILE     a plan written by tessera plan -o\n"
           "  -i, --index I       which layout of the plan, 1-based (default 1)\n"
           "  or the layout flags of tessera plan: the layout plan --top 1 picks under them, handed\n"
           "  to the ranks in a private temporary plan file (TMPDIR) removed when the run ends,\n"
           "  fails or is interrupted; not under an existing mpirun (give --plan there)\n");
    cli_layout_help();
    printf("  -n, --steps N       training steps (default 10)\n"
           "  -w, --warmup W      steps left out of the step-time statistics (default 2)\n"
           "  -t, --trace FILE    write the last step's measured ops as a Chrome trace\n"
           "      --timeout S     end the job when start-up, a training step or gathering the\n"
           "                      results takes longer than S seconds (a rank stalled or died),\n"
           "                      naming the ranks of the node that hold it up (default 1800,\n"
           "                      torch.distributed's default; 0: no limit)\n"
           "      --json          print the summary as JSON instead of a table\n"
           "      --threads N     OpenBLAS threads per rank (default 1)\n"
           "      --seed S        parameter and data seed (default 1234)\n"
           "      --text FILE     train on a text file's bytes instead of the synthetic stream\n"
           "      --lr LR         AdamW learning rate (default 3e-3)\n"
           "      --params FILE   write the trained parameters (float32, exec/reference.h's order)\n"
           "      --device D      cpu (default) or cuda (needs make CUDA=1; see README, CUDA)\n"
           "      --precision P   fp32 (default) or bf16: Megatron-Core's BF16 mixed precision (bf16\n"
           "                      weights as read, activations and their gradients; fp32 accumulation,\n"
           "                      master weights, weight gradients and AdamW; docs/gpu.md)\n"
           "      --stream-order O  program (default), dp-early or dp-late: issue the gradient\n"
           "                      reductions and parameter gathers (the DP stream) as early or as\n"
           "                      late as their waits allow, as a GPU may run them beside the\n"
           "                      backward; the losses must not change (a check of the waits on\n"
           "                      CPU ranks, exec/op_streams.h)\n"
           "      --max-ops N     the most ops a step program may hold (default 20m)\n"
           "  -h, --help          this help\n"
           "\n"
           "Fault injection for tests: TESSERA_FAULT_RANK=r makes rank r fail at step\n"
           "TESSERA_FAULT_STEP (default 0); the job ends with a message naming the rank.\n"
           "TESSERA_FAULT_MODE=kill makes it SIGKILL itself instead, =stop SIGSTOP itself (a\n"
           "stalled rank: the other ranks end the job after --timeout).\n"
           "Exit status: 0 ok, 2 bad input, 1 a rank failed or an output could not be written,\n"
           "130 / 143 interrupted by SIGINT / SIGTERM (mpirun and its ranks stopped, nothing written).\n");
}

/* Fails the whole job from any rank: the message names the rank (ts_runtime_abort). */
static _Noreturn void rank_fail(ts_status st) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ts_error_message());
    ts_runtime_abort(NULL, ts_exit_code(st), msg);
}

/* The plan's index-th (1-based) layout and its problem into o. A rank of a running job that
 * cannot load the plan (a file its node lacks, or that changed under the job) ends the job,
 * naming itself. */
static void load_plan(const char *cmd, const char *plan, int index, ts_run_opts *o) {
    ts_layout *layouts = NULL;
    int n_layouts = 0;
    ts_status st = ts_plan_read(plan, &o->pb, &layouts, &n_layouts);
    if (st != TS_OK && ts_runtime_under_mpi()) rank_fail(st);
    if (st != TS_OK) cli_fail(cmd, st);
    if (index > n_layouts) cli_usage_error(cmd, "--index: %s holds %d layouts, got %d", plan, n_layouts, index);
    /* The executor's CP is ring attention (exec/trainer_ops.c); the other kinds are priced only. */
    if (o->pb.train.cp_kind != TS_CP_RING) {
        st = TS_FAIL(TS_ERR_INPUT, "%s: $.request.cp_kind: expected \"ring\" (the executor trains ring "
                     "attention only), got \"%s\"", plan, ts_cp_kind_names[o->pb.train.cp_kind]);
        free(layouts);
        if (ts_runtime_under_mpi()) rank_fail(st);
        cli_fail(cmd, st);
    }
    o->plan = plan;
    o->index = index - 1;
    o->layout = layouts[index - 1];
    free(layouts);
}

/* Rank 0's output: the JSON or the table, then the trace; the exit status. */
static int report(const ts_run_result *r, int json, const char *trace) {
    ts_status st = TS_OK;
    if (json) {
        cJSON *doc = NULL;
        st = ts_run_result_json(r, &doc);
        if (st == TS_OK) st = ts_json_write_file("-", doc);
        cJSON_Delete(doc);
    } else {
        st = ts_run_result_print(stdout, r);
    }
    if (st == TS_OK && trace) st = ts_run_result_trace(r, trace);
    if (st == TS_OK) return 0;
    fprintf(stderr, "tessera run: %s\n", ts_error_message());
    return ts_exit_code(st);
}

/* The layout plan --top 1 picks under the layout flags, in a private temporary plan file
 * removed at exit, when a check fails and on SIGINT / SIGTERM (cli_problem_plan_file). */
static const char *plan_of_flags(const char *cmd, cli_problem_args *pa) {
    /* A closed stderr pipe must not kill the launcher before it removes the file (mpirun gets
     * SIGPIPE back, cli_launch_mpirun). */
    signal(SIGPIPE, SIG_IGN);
    pa->search.top_k = 1;
    return cli_problem_plan_file(cmd, pa);
}

/* Starts mpirun on the layout's ranks (cli_launch_mpirun, which exits); with a plan made from the
 * layout flags (temp_plan), the ranks get --plan TEMP_PLAN in place of those flags. */
static _Noreturn void launch(const char *cmd, const ts_run_opts *o, const char *temp_plan, const char *layout_arg,
                             int argc, char **argv) {
    int ranks = ts_rank_count(&o->layout);
    if (temp_plan == NULL) cli_launch_mpirun(cmd, ranks, argc, argv);
    char **args = calloc((size_t)argc + 3, sizeof *args);
    if (args == NULL) cli_usage_error(cmd, "out of memory");
    int n = 0;
    for (int i = 0; i < argc; i++)
        if (!layout_arg[i]) args[n++] = argv[i];
    static char plan_arg[4096]; /* argv's strings are not const */
    snprintf(plan_arg, sizeof plan_arg, "%s", temp_plan);
    args[n++] = "--plan";
    args[n++] = plan_arg;
    args[n] = NULL;
    cli_launch_mpirun(cmd, ranks, n, args);
}

int cmd_run(int argc, char **argv) {
    const char *cmd = "run", *plan = NULL, *trace = NULL;
    int index = 1, index_given = 0, json = 0;
    ts_run_opts o;
    ts_run_opts_defaults(&o);
    ts_run_fault_from_env(&o.fault);
    cli_problem_args pa;
    cli_problem_args_init(&pa);
    enum { OPT_JSON = CLI_OPT_OWN, OPT_THREADS, OPT_SEED, OPT_TEXT, OPT_LR, OPT_PARAMS, OPT_DEVICE, OPT_TIMEOUT,
           OPT_ORDER, OPT_MAX_OPS };
    static const struct option longs[] = {
        CLI_LAYOUT_LONGOPTS,
        {"precision", required_argument, 0, 'P'}, /* long only: 'P' is not in the short options */
        {"plan", required_argument, 0, 'p'},   {"index", required_argument, 0, 'i'},
        {"steps", required_argument, 0, 'n'},  {"warmup", required_argument, 0, 'w'},
        {"trace", required_argument, 0, 't'},  {"json", no_argument, 0, OPT_JSON},
        {"threads", required_argument, 0, OPT_THREADS}, {"seed", required_argument, 0, OPT_SEED},
        {"text", required_argument, 0, OPT_TEXT}, {"lr", required_argument, 0, OPT_LR},
        {"params", required_argument, 0, OPT_PARAMS}, {"device", required_argument, 0, OPT_DEVICE},
        {"timeout", required_argument, 0, OPT_TIMEOUT}, {"stream-order", required_argument, 0, OPT_ORDER},
        {"max-ops", required_argument, 0, OPT_MAX_OPS},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    /* The layout flags and their values in argv (1): the ranks get --plan instead. */
    char *layout_arg = calloc((size_t)argc + 1, 1);
    if (layout_arg == NULL) cli_usage_error(cmd, "out of memory");
    for (;;) {
        int before = optind;
        int c = getopt_long(argc, argv, ":" CLI_PROBLEM_SHORTOPTS "p:i:n:w:t:h", longs, NULL);
        if (c == -1) break;
        if (cli_problem_arg(cmd, c, optarg, &pa)) {
            for (int i = before; i < optind && i < argc; i++) layout_arg[i] = 1;
            continue;
        }
        switch (c) {
        case 'p': plan = optarg; break;
        case 'P':
            if (ts_precision_parse(optarg, &o.bf16) != TS_OK) cli_usage_error(cmd, "%s", ts_error_message());
            break;
        case 'i': index = (int)cli_int(cmd, "--index", optarg, 1, 1000000), index_given = 1; break;
        case 'n': o.steps = (int)cli_int(cmd, "--steps", optarg, 1, 1000000); break;
        case 'w': o.warmup = (int)cli_int(cmd, "--warmup", optarg, 0, 1000000); break;
        case 't': trace = optarg; break;
        case OPT_JSON: json = 1; break;
        case OPT_THREADS: o.threads = (int)cli_int(cmd, "--threads", optarg, 1, 256); break;
        case OPT_SEED: o.train.seed = (uint64_t)cli_int(cmd, "--seed", optarg, 0, INT64_MAX); break;
        case OPT_TEXT: o.train.text = optarg; break;
        case OPT_PARAMS: o.params = optarg; break;
        case OPT_DEVICE:
            if (ts_device_parse(optarg, &o.device) != TS_OK) cli_usage_error(cmd, "%s", ts_error_message());
            break;
        case OPT_ORDER:
            if (ts_stream_order_parse(optarg, &o.train.order) != TS_OK) cli_usage_error(cmd, "%s", ts_error_message());
            break;
        case OPT_MAX_OPS: cli_max_ops(cmd, optarg); break;
        case OPT_TIMEOUT: o.timeout_s = cli_num(cmd, "--timeout", optarg, 0, 86400); break;
        case OPT_LR: o.train.lr = (float)cli_num(cmd, "--lr", optarg, 1e-9, 1); break;
        case 'h':
            free(layout_arg);
            help();
            return 0;
        default: cli_bad_option(cmd, c, argv);
        }
    }
    if (optind < argc) cli_usage_error(cmd, "unexpected argument \"%s\"", argv[optind]);
    if (plan && pa.given)
        cli_usage_error(cmd, "--plan and %s exclude each other (the plan holds the problem)", pa.given);
    if (!plan && !pa.given) cli_usage_error(cmd, "--plan or --model, --system and --gpus are required");
    if (index_given && !plan) cli_usage_error(cmd, "--index needs --plan");
    if (pa.given && ts_runtime_under_mpi())
        cli_usage_error(cmd, "%s under mpirun: every rank would plan on its own; give --plan (tessera plan -o)",
                        pa.given);
    cli_output_check(cmd, "--trace", trace);
    cli_output_check(cmd, "--params", o.params);
    if (ts_device_runnable(o.device) != TS_OK) cli_fail(cmd, ts_error_status());
    if (o.warmup >= o.steps) cli_usage_error(cmd, "--warmup %d leaves no step of %d to measure", o.warmup, o.steps);
    if (!plan) plan = plan_of_flags(cmd, &pa);
    load_plan(cmd, plan, index, &o);
    if (!ts_runtime_under_mpi()) {
        /* A layout the executor refuses is said once, here, before any rank starts (inside an
         * existing mpirun, ts_trainer_init says it on every rank). */
        ts_status st = ts_run_check(&o);
        if (st != TS_OK) cli_fail(cmd, st);
        launch(cmd, &o, pa.given ? plan : NULL, layout_arg, argc, argv);
    }
    free(layout_arg);

    /* A rank stopped by mpirun (which passes on SIGINT / SIGTERM) removes its temporary files;
     * the launcher says what was interrupted. */
    ts_interrupt_install(cmd, NULL, TS_INTERRUPT_EXIT);
    o.log_steps = !json;
    ts_run_result r;
    ts_status st = ts_run(&o, &r);
    if (st != TS_OK) rank_fail(st);
    int rc = r.rank == 0 ? report(&r, json, trace) : 0;
    ts_run_result_free(&r);
    ts_runtime_finalize();
    return rc;
}
