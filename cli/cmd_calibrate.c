/* `tessera calibrate`: measures this machine on MPI ranks through the executor's own code paths
 * (exec/calibrate.h), prints nccl-tests-style tables (or their JSON mirror) and writes what it
 * measured as a system spec that `plan`, `sim` and `run` read like any zoo system. Started
 * without an MPI launcher it starts `mpirun` itself with --ranks ranks. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/interrupt.h"
#include "common/json.h"
#include "exec/calibrate.h"
#include "exec/calibrate_quality.h"
#include "exec/launch.h"
#include "exec/runtime.h"

/* One rank per core by default (at least 2: communication needs a pair); on GPUs one rank per GPU
 * when the GPUs can be counted (ts_device_runnable has already refused a machine without any). */
static long default_ranks(ts_device device) {
    int gpus = device == TS_DEVICE_CUDA ? ts_cuda_gpu_count() : 0;
    if (gpus > 0) return gpus;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 2 ? cores : 2;
}
#define TEMPLATE "cpu-localhost"

static void help(void) {
    printf("usage: tessera calibrate [-o profile.json] [--ranks N] [--json] [--quick] [--threads T] [--no-in-situ]\n"
           "                         [--situ-model M] [--situ-steps N] [--situ-batch B] [--situ-seq L] [--situ-mbs N]\n"
           "                         [--device cpu|cuda] [--strict]\n"
           "\n"
           "Measures this machine through the code `tessera run` executes and writes it as a system\n"
           "spec that plan, sim and run read like any zoo system:\n"
           "  - compute on min(ranks, cores) ranks at once, one core each (the spec's figures are one\n"
           "    rank's with a core to itself; node.cores scales them when ranks share cores): sgemm\n"
           "    (OpenBLAS fp32, NT/NN/TN) over (m, n, k) in 64..1024, rmsnorm / swiglu / AdamW bytes/s,\n"
           "    causal attention forward and backward;\n"
           "  - all-reduce, reduce-scatter, all-gather, all-to-all over every group size dividing the\n"
           "    ranks (every group at once) and send/recv between rank pairs, 1 KB .. 256 MB, printed\n"
           "    as nccl-tests tables (size, count, time, algbw, busbw);\n"
           "  - fits: peak FLOP/s and the GEMM efficiency curve, memory bandwidth, attention\n"
           "    efficiency, link bus bandwidth and latency (least squares on the planner's ring costs);\n"
           "  - in situ: every compute rank trains a model at once (one rank each; default " TS_SITU_MODEL ", batch\n"
           "    %d of %d tokens, micro-batches of 1; fp32 on CPUs, bf16 mixed precision on GPUs) for a few\n"
           "    steps and scales the compute figures so that GEMM, attention, element-wise and optimizer\n"
           "    times in the training step match the spec's (kernels run slower or faster there); on\n"
           "    CPUs the ranks' spread at the same step is node.speed_cv.\n"
           "The spec (" TEMPLATE "'s schema; node.gpus = max(8, ranks), node.cores = this machine's\n"
           "cores, serial_ops) says in \"source\" strings how each figure was measured, and holds the\n"
           "tables under \"measured\". Without an MPI launcher it starts mpirun itself\n"
           "(--oversubscribe when the ranks exceed the cores, and it says so).\n"
           "With --device cuda the same benchmarks run on one GPU per rank (cuBLAS fp32 GEMMs, the CUDA\n"
           "kernels, NCCL on device buffers; one GPU: no communication measured); the spec has\n"
           "node.gpus = ranks, node.cores = 0, no serial_ops; the in-situ pass trains in bf16 (the factors\n"
           "scale the bf16 peak, which GPU plans price on; the fp32 peak is kept) without the speed gauge\n"
           "(node.gauge_flops_per_s and node.speed_cv 0); GPUs with\n"
           "FP8 (compute capability 8.9+) also time an fp8 GEMM grid (cuBLASLt E4M3, as Transformer Engine),\n"
           "written as peak_flops.fp8 and efficiency.gemm_fp8 (plan --dtype fp8 prices on it); others keep\n"
           "the template's FP8 curve and say so.\n"
           "\n"
           "  -o, --output FILE   write the spec (atomically; \"-\": stdout, instead of the tables)\n"
           "  -r, --ranks N       MPI ranks, at least 2 on CPUs (default: the cores, %ld here; with\n"
           "                      --device cuda the GPUs)\n"
           "  -q, --quick         1 KB .. 16 MB, fewer shapes, 2 ms batches: seconds; for tests and\n"
           "                      tessera validate\n"
           "      --json          print the tables as one JSON document instead\n"
           "      --threads T     OpenBLAS threads per rank (default 1, as tessera run)\n"
           "      --no-in-situ    keep the microbenchmarks' figures (skip the in-situ pass)\n"
           "      --situ-steps N  in-situ training steps, the first a warm-up (default 3 with --quick,\n"
           "                      else 5; more average over more of a shared machine's speed phases)\n"
           "      --situ-model M  the model the in-situ pass trains, a zoo name or a model JSON path, as\n"
           "                      plan's --model takes (default " TS_SITU_MODEL ")\n"
           "      --situ-batch B  in-situ global batch, sequences (default %d)\n"
           "      --situ-seq L    in-situ tokens per sequence, 1 to the model's max_seq (default %d):\n"
           "                      kernels run at other speeds at other shapes, so calibrate at the\n"
           "                      shapes you will run (tessera validate passes its own)\n"
           "      --situ-mbs N    in-situ micro-batch size, dividing the batch (default 1)\n"
           "      --device D      cpu (default) or cuda (needs make CUDA=1; see README, CUDA)\n"
           "      --strict        exit 1 without writing the spec when a fit is worse than its limit or\n"
           "                      the machine was too busy or noisy (the warnings say which; without\n"
           "                      --strict they are printed on stderr and the spec is written)\n"
           "  -h, --help          this help\n"
           "\n"
           "Exit status: 0 ok, 2 bad input, 1 a rank failed (or --strict and a warning).\n",
           TS_SITU_BATCH, TS_SITU_SEQ, default_ranks(TS_DEVICE_CPU), TS_SITU_BATCH, TS_SITU_SEQ);
}

/* The in-situ shape, refused here (exit 2, one line naming the option) before any rank starts:
 * the model must load, the length fit its max_seq, the micro-batch divide the batch, and the
 * executor train it (ts_calib_situ_check). */
static void check_situ(const char *cmd, const ts_system *tmpl, const ts_situ_shape *sh) {
    ts_model m;
    if (ts_model_load(sh->model, &m) != TS_OK) cli_usage_error(cmd, "--situ-model: %s", ts_error_message());
    if (sh->seq > m.max_seq)
        cli_usage_error(cmd, "--situ-seq: expected an integer in [1, %lld] (%s's max_seq), got %d",
                        (long long)m.max_seq, sh->model, sh->seq);
    if (sh->batch % sh->mbs != 0)
        cli_usage_error(cmd, "--situ-mbs: %d does not divide the in-situ batch %d (--situ-batch)", sh->mbs, sh->batch);
    if (ts_calib_situ_check(tmpl, sh) != TS_OK)
        cli_usage_error(cmd, "--situ-model %s: %s", sh->model, ts_error_message());
}

/* "tessera calibrate ARGS", for the spec's source (truncated to fit). */
static void command_line(int argc, char **argv, char *buf, size_t cap) {
    size_t used = (size_t)snprintf(buf, cap, "tessera calibrate");
    for (int i = 1; i < argc && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, " %s", argv[i]);
}

/* Rank 0's output: the tables (or their JSON) and the spec written to `output` ("-": stdout,
 * instead of the tables); the exit status. */
static int report(const char *cmd, const ts_calib *cal, int json, const char *output, int strict) {
    ts_status st = TS_OK;
    ts_calib_quality q;
    ts_calib_quality_judge(cal, &q);
    ts_calib_quality_print(stderr, &q);
    int refused = strict && q.warnings > 0;
    int to_stdout = output && strcmp(output, "-") == 0;
    cJSON *doc = NULL;
    if (!to_stdout && json) {
        st = ts_calib_json(cal, &doc);
        if (st == TS_OK) st = ts_json_write_file("-", doc);
        cJSON_Delete(doc);
    } else if (!to_stdout) {
        st = ts_calib_print(stdout, cal);
    }
    if (st == TS_OK && refused) {
        fflush(stdout);
        fprintf(stderr, "tessera %s: --strict: %d warning%s above; %s not written\n", cmd, q.warnings,
                q.warnings == 1 ? "" : "s", output ? output : "the spec");
        return 1;
    }
    if (st == TS_OK && output) {
        st = ts_calib_profile(cal, &doc);
        if (st == TS_OK) st = ts_json_write_file(output, doc);
        cJSON_Delete(doc);
        if (st == TS_OK && !json && !to_stdout) printf("# wrote %s\n", output);
    }
    if (st != TS_OK) fprintf(stderr, "tessera %s: %s\n", cmd, ts_error_message());
    fflush(stdout);
    return ts_exit_code(st);
}

int cmd_calibrate(int argc, char **argv) {
    const char *cmd = "calibrate", *output = NULL;
    const char *situ_model = NULL;
    int ranks = 0, quick = 0, json = 0, threads = 1, strict = 0, in_situ = 1, situ_steps = 0, situ_batch = 0, situ_seq = 0;
    int situ_mbs = 0;
    ts_device device = TS_DEVICE_CPU;
    enum { OPT_JSON = 256, OPT_THREADS, OPT_NO_IN_SITU, OPT_DEVICE, OPT_SITU_STEPS, OPT_SITU_BATCH, OPT_SITU_SEQ,
           OPT_SITU_MODEL, OPT_SITU_MBS, OPT_STRICT };
    static const struct option longs[] = {
        {"ranks", required_argument, 0, 'r'}, {"quick", no_argument, 0, 'q'},
        {"json", no_argument, 0, OPT_JSON},   {"output", required_argument, 0, 'o'},
        {"threads", required_argument, 0, OPT_THREADS}, {"no-in-situ", no_argument, 0, OPT_NO_IN_SITU},
        {"device", required_argument, 0, OPT_DEVICE}, {"situ-steps", required_argument, 0, OPT_SITU_STEPS},
        {"situ-batch", required_argument, 0, OPT_SITU_BATCH}, {"situ-seq", required_argument, 0, OPT_SITU_SEQ},
        {"situ-model", required_argument, 0, OPT_SITU_MODEL}, {"situ-mbs", required_argument, 0, OPT_SITU_MBS},
        {"strict", no_argument, 0, OPT_STRICT}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":r:qo:h", longs, NULL)) != -1) {
        switch (c) {
        case 'r': ranks = (int)cli_int(cmd, "--ranks", optarg, 1, 1024); break;
        case 'q': quick = 1; break;
        case OPT_JSON: json = 1; break;
        case 'o': output = optarg; break;
        case OPT_THREADS: threads = (int)cli_int(cmd, "--threads", optarg, 1, 256); break;
        case OPT_NO_IN_SITU: in_situ = 0; break;
        case OPT_STRICT: strict = 1; break;
        case OPT_SITU_STEPS: situ_steps = (int)cli_int(cmd, "--situ-steps", optarg, 2, 1000); break;
        case OPT_SITU_BATCH: situ_batch = (int)cli_int(cmd, "--situ-batch", optarg, 1, 4096); break;
        case OPT_SITU_SEQ: situ_seq = (int)cli_int(cmd, "--situ-seq", optarg, 1, 1 << 20); break;
        case OPT_SITU_MODEL: situ_model = optarg; break;
        case OPT_SITU_MBS: situ_mbs = (int)cli_int(cmd, "--situ-mbs", optarg, 1, 4096); break;
        case OPT_DEVICE:
            if (ts_device_parse(optarg, &device) != TS_OK) cli_usage_error(cmd, "%s", ts_error_message());
            break;
        case 'h': help(); return 0;
        default: cli_bad_option(cmd, c, argv);
        }
    }
    if (optind < argc) cli_usage_error(cmd, "unexpected argument \"%s\"", argv[optind]);
    /* Communication needs a pair of CPU ranks; one GPU is measured alone (no collectives). */
    if (ranks == 1 && device == TS_DEVICE_CPU)
        cli_usage_error(cmd, "--ranks: expected an integer in [2, 1024] on CPUs, got \"1\"");
    const char *situ = situ_steps ? "--situ-steps" : situ_batch ? "--situ-batch" : situ_seq ? "--situ-seq"
                     : situ_model ? "--situ-model" : situ_mbs ? "--situ-mbs" : NULL;
    if (!in_situ && situ) cli_usage_error(cmd, "%s needs the in-situ pass, which --no-in-situ turns off", situ);
    ts_system tmpl;
    ts_status st = ts_system_load(TEMPLATE, &tmpl);
    if (st != TS_OK) cli_fail(cmd, st);
    ts_calib_opts asked = {.situ_model = situ_model, .situ_batch = situ_batch, .situ_seq = situ_seq, .situ_mbs = situ_mbs};
    ts_situ_shape shape = ts_calib_situ_shape(&asked);
    if (in_situ) check_situ(cmd, &tmpl, &shape);
    if (ts_device_runnable(device) != TS_OK) cli_fail(cmd, ts_error_status());
    /* Refuse an output that cannot be written before the minute of measuring, not after. */
    cli_output_check(cmd, "--output", output);
    int ranks_given = ranks > 0;
    if (!ranks_given) ranks = (int)default_ranks(device);

    if (!ts_runtime_under_mpi()) {
        cli_launch_mpirun(cmd, ranks, argc, argv);
    }

    /* A rank stopped by mpirun (which passes on SIGINT / SIGTERM) removes its temporary files;
     * the launcher says what was interrupted. */
    ts_interrupt_install(cmd, NULL, TS_INTERRUPT_EXIT);
    int rank = 0, size = 0;
    st = ts_mpi_init(&rank, &size);
    if (st != TS_OK) ts_mpi_abort(cmd, ts_exit_code(st), ts_error_message());
    if (ranks_given && size != ranks) {
        char msg[128];
        snprintf(msg, sizeof msg, "--ranks %d, but mpirun started %d ranks", ranks, size);
        ts_mpi_abort(cmd, 2, msg);
    }
    char line[256]; /* ts_calib.argv's size */
    command_line(argc, argv, line, sizeof line);
    ts_calib_opts o = {.quick = quick, .in_situ = in_situ, .situ_steps = situ_steps, .situ_batch = situ_batch,
                       .situ_seq = situ_seq, .situ_model = situ_model, .situ_mbs = situ_mbs, .threads = threads,
                       .device = device, .argv = line,
                       .log = json ? NULL : stderr};
    static ts_calib cal; /* about 10 KB of tables: off the stack */
    st = ts_calibrate(&o, &tmpl, &cal);
    if (st != TS_OK) ts_mpi_abort(cmd, ts_exit_code(st), ts_error_message());

    int rc = rank == 0 ? report(cmd, &cal, json, output, strict) : 0;
    ts_runtime_finalize();
    return rc;
}
