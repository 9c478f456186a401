/* `tessera plan`: which layout trains this model fastest on these GPUs? */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/json.h"
#include "planner/plan_json.h"
#include "planner/search.h"

static void help(void) {
    printf(
        "usage: tessera plan --model M --system S --gpus N [options]\n"
        "\n"
        "Ranks every DP×TP×PP×CP×EP×SP layout, ZeRO stage, micro-batch, pipeline schedule and\n"
        "recompute policy that fits in GPU memory, by predicted step time.\n"
        "\n"
        "  -m, --model M          zoo name (tessera models), model JSON or Hugging Face config.json\n"
        "  -s, --system S         zoo name (tessera systems) or system JSON\n"
        "  -g, --gpus N           number of GPUs (k = ×1024)\n"
        "  -b, --global-batch B   sequences per step (default 1024)\n"
        "  -l, --seq L            tokens per sequence (default 4096, at most the model's max_seq)\n"
        "  -k, --top K            layouts to show (default 10)\n"
        "  -f, --fix PINS         pin fields, e.g. tp=8,pp=16,cp=2,vpp=5,mbs=1,sched=interleaved\n"
        "      --schedules LIST   schedules to consider, e.g. 1f1b,interleaved (default: all)\n"
        "      --objective O      time (default) | memory | cost (GPU-seconds per token)\n"
        "      --dtype D          bf16 (default) | fp16 | fp8 | fp32\n"
        "      --no-flash-attn    unfused attention (s×s scores in memory), as in 2021 Megatron-LM\n"
        "      --tp-across-nodes  allow TP groups larger than a node\n"
        "      --no-prune         evaluate every layout (no branch and bound; same answer, slower)\n"
        "      --json             print the plan as JSON instead of a table\n"
        "  -o, --output FILE      also write the plan JSON to FILE (atomically)\n"
        "  -h, --help             this help\n"
        "\n"
        "Exit status: 0 ok, 2 bad input, 3 nothing fits (the message says what came closest).\n");
}

/* "1f1b,interleaved" -> a bit per schedule. */
static unsigned parse_schedules(const char *cmd, const char *list) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    unsigned mask = 0;
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        int found = -1;
        for (int i = 0; ts_schedule_names[i]; i++)
            if (strcmp(item, ts_schedule_names[i]) == 0) found = i;
        if (found < 0)
            cli_usage_error(cmd, "--schedules: expected a list of gpipe, 1f1b, interleaved, zb-h1, got \"%s\"", item);
        mask |= 1u << found;
    }
    if (!mask) cli_usage_error(cmd, "--schedules: expected at least one schedule");
    return mask;
}

static void print_table(const ts_problem *pb, const ts_search_result *r) {
    const ts_system *s = &pb->sys;
    printf("# tessera plan: %s on %d × %s (%s, %.0f GB, %.1f GB usable), batch %lld × %lld tokens, %s%s\n",
           pb->model.name, pb->gpus, s->name, s->gpu_name, s->hbm_bytes / 1e9, pb->usable_bytes / 1e9,
           (long long)pb->train.global_batch, (long long)pb->train.seq,
           ts_dtype_names[pb->train.dtype], pb->train.flash_attention ? ", flash attention" : "");
    printf("# searched %lld layouts (%lld evaluated, %lld fit) in %.3f s\n", (long long)r->searched,
           (long long)r->evaluated, (long long)r->feasible, r->search_s);
    printf("#%4s %4s %3s %3s %3s %3s %2s %4s %3s %4s %3s %-11s %-9s | %6s %6s %5s %6s %6s %5s | %7s "
           "%7s %6s %6s %6s %6s %6s %6s %6s | %9s %7s %5s\n",
           "rank", "dp", "tp", "pp", "cp", "ep", "sp", "zero", "mbs", "mb", "vpp", "schedule",
           "recompute", "mem", "weight", "grad", "optim", "activ", "buf", "step", "compute", "tp",
           "cp", "ep", "pp", "bubble", "dp", "optim", "tokens/s", "TFLOP/s", "MFU");
    printf("#%4s %4s %3s %3s %3s %3s %2s %4s %3s %4s %3s %-11s %-9s | %6s %6s %5s %6s %6s %5s | %7s "
           "%7s %6s %6s %6s %6s %6s %6s %6s | %9s %7s %5s\n",
           "", "", "", "", "", "", "", "", "", "", "", "", "", "GB", "GB", "GB", "GB", "GB", "GB", "s",
           "s", "s", "s", "s", "s", "s", "s", "s", "", "/GPU", "%");
    for (int i = 0; i < r->n_best; i++) {
        const ts_eval *e = &r->best[i];
        const ts_layout *l = &e->layout;
        const ts_time_split *t = &e->time;
        printf(" %4d %4d %3d %3d %3d %3d %2d %4d %3d %4d %3d %-11s %-9s | %6.1f %6.1f %5.1f %6.1f %6.1f "
               "%5.1f | %7.3f %7.3f %6.3f %6.3f %6.3f %6.3f %6.3f %6.3f %6.3f | %9.0f %7.1f %5.1f\n",
               i + 1, l->dp, l->tp, l->pp, l->cp, l->ep, l->sp, l->zero, l->mbs, l->microbatches,
               l->vpp, ts_schedule_names[l->schedule], ts_recompute_names[l->recompute],
               e->mem.total / 1e9, e->mem.weights / 1e9, e->mem.grads / 1e9, e->mem.optimizer / 1e9,
               e->mem.activations / 1e9, e->mem.buffers / 1e9, e->step_s, t->compute, t->tp_comm,
               t->cp_comm, t->ep_comm, t->pp_comm, t->pp_bubble, t->dp_comm, t->optimizer,
               e->tokens_per_s, e->tflops_per_gpu, 100 * e->mfu);
    }
    if (r->n_best > 0) {
        const ts_eval *b = &r->best[0];
        char text[256];
        ts_layout_format(&b->layout, text, sizeof text);
        printf("# best: %s — %.2f s/step, %.0f tokens/s, %.0f TFLOP/s/GPU (MFU %.1f%%), %.1f of %.1f GB/GPU\n",
               text, b->step_s, b->tokens_per_s, b->tflops_per_gpu, 100 * b->mfu, b->mem.total / 1e9,
               pb->usable_bytes / 1e9);
    }
}

int cmd_plan(int argc, char **argv) {
    const char *cmd = "plan", *model = NULL, *system = NULL, *fix = NULL, *output = NULL;
    int gpus = 0, json = 0;
    ts_train train;
    ts_train_defaults(&train);
    int seq_given = 0;
    ts_search_opts opts;
    ts_search_opts_defaults(&opts);
    enum { OPT_OBJ = 256, OPT_DTYPE, OPT_NOFLASH, OPT_ACROSS, OPT_NOPRUNE, OPT_JSON, OPT_SCHEDS };
    static const struct option longs[] = {
        {"model", required_argument, 0, 'm'},     {"system", required_argument, 0, 's'},
        {"gpus", required_argument, 0, 'g'},      {"global-batch", required_argument, 0, 'b'},
        {"seq", required_argument, 0, 'l'},       {"top", required_argument, 0, 'k'},
        {"fix", required_argument, 0, 'f'},       {"output", required_argument, 0, 'o'},
        {"objective", required_argument, 0, OPT_OBJ}, {"dtype", required_argument, 0, OPT_DTYPE},
        {"no-flash-attn", no_argument, 0, OPT_NOFLASH}, {"tp-across-nodes", no_argument, 0, OPT_ACROSS},
        {"no-prune", no_argument, 0, OPT_NOPRUNE}, {"json", no_argument, 0, OPT_JSON},
        {"schedules", required_argument, 0, OPT_SCHEDS},
        {"help", no_argument, 0, 'h'},            {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":m:s:g:b:l:k:f:o:h", longs, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 's': system = optarg; break;
        case 'g': gpus = (int)cli_int(cmd, "--gpus", optarg, 1, 1 << 24); break;
        case 'b': train.global_batch = cli_int(cmd, "--global-batch", optarg, 1, 1 << 30); break;
        case 'l': train.seq = cli_int(cmd, "--seq", optarg, 1, 1LL << 27), seq_given = 1; break;
        case 'k': opts.top_k = (int)cli_int(cmd, "--top", optarg, 1, 100000); break;
        case 'f': fix = optarg; break;
        case 'o': output = optarg; break;
        case OPT_OBJ: {
            int found = -1;
            for (int i = 0; ts_objective_names[i]; i++)
                if (strcmp(optarg, ts_objective_names[i]) == 0) found = i;
            if (found < 0) cli_usage_error(cmd, "--objective: expected time, memory or cost, got \"%s\"", optarg);
            opts.objective = (ts_objective)found;
            break;
        }
        case OPT_DTYPE: {
            int found = -1;
            for (int i = 0; ts_dtype_names[i]; i++)
                if (strcmp(optarg, ts_dtype_names[i]) == 0) found = i;
            if (found < 0) cli_usage_error(cmd, "--dtype: expected bf16, fp16, fp8 or fp32, got \"%s\"", optarg);
            train.dtype = (ts_dtype)found;
            break;
        }
        case OPT_SCHEDS: opts.schedules = parse_schedules(cmd, optarg); break;
        case OPT_NOFLASH: train.flash_attention = 0; break;
        case OPT_ACROSS: train.tp_across_nodes = 1; break;
        case OPT_NOPRUNE: opts.prune = 0; break;
        case OPT_JSON: json = 1; break;
        case 'h': help(); return 0;
        case ':': cli_usage_error(cmd, "%s needs a value", argv[optind - 1]);
        default:
            if (optopt) cli_usage_error(cmd, "unknown option \"-%c\"", optopt);
            cli_usage_error(cmd, "unknown option \"%s\"", argv[optind - 1]);
        }
    }
    if (optind < argc) cli_usage_error(cmd, "unexpected argument \"%s\"", argv[optind]);
    if (!model) cli_usage_error(cmd, "--model is required");
    if (!system) cli_usage_error(cmd, "--system is required");
    if (!gpus) cli_usage_error(cmd, "--gpus is required");
    if (fix) {
        ts_status st = ts_pins_parse("--fix", fix, &opts.pins);
        if (st != TS_OK) cli_fail(cmd, st);
    }

    ts_model m;
    ts_system s;
    ts_problem pb;
    ts_status st = ts_model_load(model, &m);
    if (st == TS_OK) st = ts_system_load(system, &s);
    if (st == TS_OK && !seq_given && train.seq > m.max_seq) train.seq = m.max_seq;
    if (st == TS_OK) st = ts_problem_init(&pb, &m, &s, &train, gpus);
    if (st != TS_OK) cli_fail(cmd, st);

    ts_search_result r;
    st = ts_search(&pb, &opts, &r);
    if (st != TS_OK) {
        ts_search_result_free(&r);
        cli_fail(cmd, st);
    }
    cJSON *root = NULL;
    if (json || output) {
        st = ts_plan_to_json(&pb, &opts, fix, &r, &root);
        if (st == TS_OK && output) st = ts_json_write_file(output, root);
        if (st == TS_OK && json) st = ts_json_write_file("-", root);
    }
    if (st == TS_OK && !json) print_table(&pb, &r);
    if (st == TS_OK && output && !json) printf("# wrote %s\n", output);
    cJSON_Delete(root);
    ts_search_result_free(&r);
    if (st != TS_OK) cli_fail(cmd, st);
    return 0;
}
