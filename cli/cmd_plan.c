/* `tessera plan`: which layout trains this model fastest on these GPUs? */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "common/json.h"
#include "planner/partition.h"
#include "planner/plan_json.h"
#include "planner/search.h"
#include "sim/engine.h"

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
           "      --json             print the plan as JSON instead of a table\n"
           "  -o, --output FILE      also write the plan JSON to FILE (atomically)\n"
           "  -h, --help             this help\n"
           "\n"
           "Exit status: 0 ok, 2 bad input, 3 nothing fits (the message says what came closest).\n");
}

/* A layout's simulated step time and its rank by the closed form. */
typedef struct {
    double sim_step_s;
    int index;
} sim_rank;

static int sim_rank_cmp(const void *a, const void *b) {
    const sim_rank *x = a, *y = b;
    if (x->sim_step_s != y->sim_step_s) return x->sim_step_s < y->sim_step_s ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* --refine: simulates the first `k` ranked layouts (one rank per stage) and re-ranks them by
 * simulated step time, ties keeping the closed form's order. sim_step_s[i] receives the
 * simulated step time of the i-th layout after re-ranking. */
static ts_status refine(const ts_problem *pb, ts_search_result *r, int k, double *sim_step_s) {
    ts_status res = TS_OK;
    sim_rank *order = calloc((size_t)k, sizeof *order);
    ts_eval *evals = calloc((size_t)k, sizeof *evals);
    TS_ALLOC_GOTO(order, res, exit);
    TS_ALLOC_GOTO(evals, res, exit);
    ts_sim_opts so = {0};
    for (int i = 0; i < k; i++) {
        ts_program prog;
        ts_sim_result sim;
        ts_program_opts po = ts_program_opts_of(r->splits ? &r->splits[i] : NULL); /* uneven stages */
        TS_CHECK_GOTO(ts_program_build(pb, &r->best[i].layout, &po, &prog), res, exit);
        res = ts_simulate(pb, &prog, &so, &sim);
        order[i] = (sim_rank){sim.step_s, i};
        ts_sim_result_free(&sim);
        ts_program_free(&prog);
        if (res != TS_OK) goto exit;
    }
    qsort(order, (size_t)k, sizeof *order, sim_rank_cmp);
    for (int i = 0; i < k; i++) evals[i] = r->best[order[i].index];
    for (int i = 0; i < k; i++) {
        r->best[i] = evals[i];
        sim_step_s[i] = order[i].sim_step_s;
    }
    if (r->splits) { /* uneven stages follow their layouts */
        ts_split *moved = calloc((size_t)k, sizeof *moved);
        TS_ALLOC_GOTO(moved, res, exit);
        for (int i = 0; i < k; i++) moved[i] = r->splits[order[i].index];
        memcpy(r->splits, moved, (size_t)k * sizeof *moved);
        free(moved);
    }
exit:
    free(order);
    free(evals);
    return res;
}

/* `sim_step_s` (NULL without --refine) holds the simulated step times of the first `refined`
 * layouts, shown in two more columns. */
static void print_table(const ts_problem *pb, const ts_search_result *r, const ts_partition_opts *po,
                        const double *sim_step_s, int refined, double refine_s) {
    const ts_system *s = &pb->sys;
    printf("# tessera plan: %s on %d × %s (%s, %.0f GB, %.1f GB usable), batch %lld × %lld tokens, %s%s\n",
           pb->model.name, pb->gpus, s->name, s->gpu_name, s->hbm_bytes / 1e9, pb->usable_bytes / 1e9,
           (long long)pb->train.global_batch, (long long)pb->train.seq,
           ts_dtype_names[pb->train.dtype], pb->train.flash_attention ? ", flash attention" : "");
    printf("# parameters: %.2fB total, %.2fB active per token\n", pb->params.total / 1e9, pb->params.active / 1e9);
    printf("# searched %lld layouts (%lld evaluated, %lld fit) in %.3f s\n", (long long)r->searched,
           (long long)r->evaluated, (long long)r->feasible, r->search_s);
    if (r->partitioned)
        printf("# partitioned: %d layouts re-split into uneven stages with a recompute policy each (GLPK) in %.3f s\n",
               r->partitioned, r->partition_s);
    if (r->partition_errors)
        printf("# partition: GLPK failed on %d layouts, which keep their even split: %s\n", r->partition_errors,
               r->partition_error);
    if (sim_step_s)
        printf("# refined: simulated the best %d (one rank per stage) in %.3f s, re-ranked by simulated step time\n",
               refined, refine_s);
    printf("#%4s %4s %3s %3s %3s %3s %2s %4s %3s %4s %3s %-11s %-9s | %6s %6s %5s %6s %6s %5s | %7s "
           "%7s %6s %6s %6s %6s %6s %6s %6s | %9s %7s %5s%s\n",
           "rank", "dp", "tp", "pp", "cp", "ep", "sp", "zero", "mbs", "mb", "vpp", "schedule",
           "recompute", "mem", "weight", "grad", "optim", "activ", "buf", "step", "compute", "tp",
           "cp", "ep", "pp", "bubble", "dp", "optim", "tokens/s", "TFLOP/s", "MFU",
           sim_step_s ? " |      sim      Δ" : "");
    printf("#%4s %4s %3s %3s %3s %3s %2s %4s %3s %4s %3s %-11s %-9s | %6s %6s %5s %6s %6s %5s | %7s "
           "%7s %6s %6s %6s %6s %6s %6s %6s | %9s %7s %5s%s\n",
           "", "", "", "", "", "", "", "", "", "", "", "", "", "GB", "GB", "GB", "GB", "GB", "GB", "s",
           "s", "s", "s", "s", "s", "s", "s", "s", "", "/GPU", "%", sim_step_s ? " |        s      %" : "");
    for (int i = 0; i < r->n_best; i++) {
        const ts_eval *e = &r->best[i];
        const ts_layout *l = &e->layout;
        const ts_time_split *t = &e->time;
        printf(" %4d %4d %3d %3d %3d %3d %2d %4d %3d %4d %3d %-11s %-9s | %6.1f %6.1f %5.1f %6.1f %6.1f "
               "%5.1f | %7.3f %7.3f %6.3f %6.3f %6.3f %6.3f %6.3f %6.3f %6.3f | %9.0f %7.1f %5.1f",
               i + 1, l->dp, l->tp, l->pp, l->cp, l->ep, l->sp, l->zero, l->mbs, l->microbatches,
               l->vpp, ts_schedule_names[l->schedule], ts_recompute_names[l->recompute],
               e->mem.total / 1e9, e->mem.weights / 1e9, e->mem.grads / 1e9, e->mem.optimizer / 1e9,
               e->mem.activations / 1e9, e->mem.buffers / 1e9, e->step_s, t->compute, t->tp_comm,
               t->cp_comm, t->ep_comm, t->pp_comm, t->pp_bubble, t->dp_comm, t->optimizer,
               e->tokens_per_s, e->tflops_per_gpu, 100 * e->mfu);
        if (sim_step_s && i < refined)
            printf(" | %8.3f %+6.1f", sim_step_s[i], 100 * (sim_step_s[i] - e->step_s) / e->step_s);
        putchar('\n');
    }
    if (r->n_best > 0) {
        const ts_eval *b = &r->best[0];
        char text[256], sim[64] = "";
        ts_layout_format(&b->layout, text, sizeof text);
        if (sim_step_s) snprintf(sim, sizeof sim, " (simulated %.2f)", sim_step_s[0]);
        printf("# best: %s — %.2f s/step%s, %.0f tokens/s, %.0f TFLOP/s/GPU (MFU %.1f%%), %.1f of %.1f GB/GPU\n",
               text, b->step_s, sim, b->tokens_per_s, b->tflops_per_gpu, 100 * b->mfu,
               b->mem.total / 1e9, pb->usable_bytes / 1e9);
    }
    for (int i = 0; r->splits && i < r->n_best; i++) {
        char text[1024];
        if (r->splits[i].pp == 0) continue;
        const ts_split *sp = &r->splits[i];
        ts_split_format(sp, text, sizeof text);
        printf("# split of rank %d (layers per stage, chunks joined by +; recompute by stage): %s", i + 1, text);
        if (sp->status == TS_PART_TIME_LIMIT) /* GLPK's incumbent: say how far from proven it may be */
            printf(" (time-limit: not proven optimal; %s %.4g s, bound %.4g s)",
                   po->objective == TS_PART_OBJ_STEP ? "step estimate" : "slowest stage per micro-batch",
                   sp->objective_s, sp->bound_s);
        putchar('\n');
    }
}

/* The stage partitioning's settings in the plan JSON's request: "partition",
 * "partition_objective", "partition_time_limit_s". */
static ts_status add_partition_json(cJSON *root, const ts_partition_opts *po) {
    ts_status res = TS_OK;
    cJSON *req = cJSON_GetObjectItemCaseSensitive(root, "request");
    TS_CJSON_GOTO(cJSON_AddStringToObject(req, "partition", ts_partition_mode_names[po->mode]), res, exit);
    TS_CJSON_GOTO(cJSON_AddStringToObject(req, "partition_objective", ts_partition_objective_names[po->objective]),
                  res, exit);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(req, "partition_time_limit_s", po->time_limit_s), res, exit);
exit:
    return res;
}

/* Adds the simulated step times to the plan JSON: "sim_step_s" on the refined layouts and
 * "refine" in the request. */
static ts_status add_refined_json(cJSON *root, int refined, const double *sim_step_s) {
    ts_status res = TS_OK;
    cJSON *req = cJSON_GetObjectItemCaseSensitive(root, "request");
    cJSON *layouts = cJSON_GetObjectItemCaseSensitive(root, "layouts");
    TS_CJSON_GOTO(cJSON_AddNumberToObject(req, "refine", refined), res, exit);
    for (int i = 0; i < refined; i++)
        TS_CJSON_GOTO(cJSON_AddNumberToObject(cJSON_GetArrayItem(layouts, i), "sim_step_s", sim_step_s[i]),
                      res, exit);
exit:
    return res;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int cmd_plan(int argc, char **argv) {
    const char *cmd = "plan", *output = NULL;
    int json = 0, top_k = 0, refine_k = 0;
    ts_partition_opts po;
    ts_partition_opts_defaults(&po);
    cli_problem_args pa;
    cli_problem_args_init(&pa);
    enum { OPT_JSON = CLI_OPT_OWN, OPT_PARTITION, OPT_PARTITION_TIME, OPT_PARTITION_OBJECTIVE };
    static const struct option longs[] = {
        CLI_PROBLEM_LONGOPTS,
        {"top", required_argument, 0, 'k'},    {"refine", required_argument, 0, 'r'},
        {"output", required_argument, 0, 'o'}, {"json", no_argument, 0, OPT_JSON},
        {"partition", required_argument, 0, OPT_PARTITION},
        {"partition-time-limit", required_argument, 0, OPT_PARTITION_TIME},
        {"partition-objective", required_argument, 0, OPT_PARTITION_OBJECTIVE},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":" CLI_PROBLEM_SHORTOPTS "k:r:o:h", longs, NULL)) != -1) {
        if (cli_problem_arg(cmd, c, optarg, &pa)) continue;
        switch (c) {
        case 'k': top_k = (int)cli_int(cmd, "--top", optarg, 1, 100000); break;
        case 'r': refine_k = (int)cli_int(cmd, "--refine", optarg, 1, 100000); break;
        case 'o': output = optarg; break;
        case OPT_JSON: json = 1; break;
        case OPT_PARTITION:
            po.mode = (ts_partition_mode)cli_enum(cmd, "--partition", optarg, ts_partition_mode_names);
            break;
        case OPT_PARTITION_TIME: po.time_limit_s = cli_num(cmd, "--partition-time-limit", optarg, 1e-9, 3600); break;
        case OPT_PARTITION_OBJECTIVE:
            po.objective =
                (ts_partition_objective)cli_enum(cmd, "--partition-objective", optarg, ts_partition_objective_names);
            break;
        case 'h': help(); return 0;
        default: cli_bad_option(cmd, c, argv);
        }
    }
    if (optind < argc) cli_usage_error(cmd, "unexpected argument \"%s\"", argv[optind]);
    if (top_k) pa.search.top_k = top_k;
    if (refine_k && pa.search.objective == TS_OBJ_MEMORY)
        cli_usage_error(cmd, "--refine re-ranks by simulated step time; it needs --objective time or cost");
    if (refine_k > pa.search.top_k) pa.search.top_k = refine_k;
    ts_problem pb;
    cli_problem_load(cmd, &pa, &pb);

    ts_search_result r;
    ts_status st = ts_search_partitioned(&pb, &pa.search, &po, &r);
    if (st != TS_OK) {
        ts_search_result_free(&r);
        cli_fail(cmd, st);
    }
    if (r.partition_errors) /* also on stderr: with --json the table's note is not printed */
        fprintf(stderr, "tessera plan: warning: GLPK failed on %d layouts, which keep their even split: %s\n",
                r.partition_errors, r.partition_error);
    int refined = refine_k < r.n_best ? refine_k : r.n_best;
    double *sim_step_s = NULL, refine_s = 0;
    if (refine_k) {
        double t0 = now_s();
        sim_step_s = calloc((size_t)(refined > 0 ? refined : 1), sizeof *sim_step_s);
        st = sim_step_s ? refine(&pb, &r, refined, sim_step_s) : TS_FAIL(TS_ERR_NOMEM, "out of memory for --refine");
        refine_s = now_s() - t0;
    }
    cJSON *root = NULL;
    if (st == TS_OK && (json || output)) {
        st = ts_plan_to_json(&pb, &pa.search, pa.fix, &r, &root);
        if (st == TS_OK) st = add_partition_json(root, &po);
        if (st == TS_OK && sim_step_s) st = add_refined_json(root, refined, sim_step_s);
        if (st == TS_OK && output) st = ts_json_write_file(output, root);
        if (st == TS_OK && json) st = ts_json_write_file("-", root);
    }
    if (st == TS_OK && !json) print_table(&pb, &r, &po, sim_step_s, refined, refine_s);
    if (st == TS_OK && output && !json) printf("# wrote %s\n", output);
    cJSON_Delete(root);
    free(sim_step_s);
    ts_search_result_free(&r);
    if (st != TS_OK) cli_fail(cmd, st);
    return 0;
}
