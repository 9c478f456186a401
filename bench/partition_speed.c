/* Benchmark: the uneven-stage program (planner/partition.h) on two published-scale layouts.
 *
 *   llama3-405b, 16384 H100s, batch 2048 × 8192, dp=128,tp=8,pp=16,vpp=2 interleaved (Llama 3
 *     paper §3.3.2: 126 layers do not split evenly over 16×2 stages; Meta removed one layer
 *     from the first and the last stage by hand);
 *   deepseek-v3, 2048 H800s, batch 15360 × 4096, dp=128,tp=1,pp=16,ep=64 1F1B (DeepSeek-V3
 *     report §3.2: PP 16, EP 64, ZeRO-1; 3 dense layers before 58 MoE layers, MTP on the last
 *     stage).
 *
 * For each: the program's size, the glp_intopt runs of the search over T, the wall and CPU time
 * of ts_partition_solve (median of --reps runs, building the program included), the status, and
 * the predicted step time (planner/stages.c's closed form) of three alternatives:
 *   uniform split   the same layout with stages.c's even split (first and last chunk lighter
 *                   when the layers do not divide) and the best single recompute policy that fits;
 *   best uniform    the search's best layout with tp, pp, cp, ep pinned (uniform splits only, so
 *                   with vpp it must divide the layers);
 *   ILP split       the program's split and per-stage recompute.
 * gain = 1 - ILP / min(uniform split, best uniform).
 * Target: every solve under 100 ms of CPU time (wall time also counts other processes on a busy
 * machine); a miss is reported ("TARGET MISSED") and fails the run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <glpk.h>

#include "planner/partition.h"
#include "planner/search.h"

#define TARGET_SOLVE_S 0.100

typedef struct {
    const char *label, *model, *system;
    int gpus;
    long long global_batch, seq;
    const char *layout;
    const char *pins; /* for the best-uniform search */
} bench_config;

static const bench_config configs[] = {
    {"llama3-405b pp16 vpp2", "llama3-405b", "h100-sxm-dgx", 16384, 2048, 8192,
     "dp=128,tp=8,pp=16,cp=1,ep=1,sp=1,zero=1,mbs=1,vpp=2,sched=interleaved,recompute=none", "tp=8,pp=16,cp=1"},
    {"deepseek-v3 pp16", "deepseek-v3", "h800-dgx", 2048, 15360, 4096,
     "dp=128,tp=1,pp=16,cp=1,ep=64,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none", "tp=1,pp=16,cp=1,ep=64"},
};
#define N_CONFIGS (sizeof configs / sizeof configs[0])

static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static ts_status load(const bench_config *c, ts_problem *pb) {
    ts_model m;
    ts_system s;
    ts_train t;
    TS_CHECK(ts_model_load(c->model, &m));
    TS_CHECK(ts_system_load(c->system, &s));
    ts_train_defaults(&t);
    t.global_batch = c->global_batch;
    t.seq = c->seq;
    return ts_problem_init(pb, &m, &s, &t, c->gpus);
}

/* The even split of the layout with the fastest single policy that fits (the slowest if none). */
static ts_status uniform_step(const ts_problem *pb, const ts_layout *l, const ts_partition_problem *inst,
                              ts_eval *best, ts_recompute *rc) {
    ts_split s;
    TS_CHECK(ts_split_init(&s, l->pp, l->vpp));
    int have = 0;
    for (int k = 0; k < TS_RECOMPUTE_COUNT; k++) {
        ts_partition_uniform(inst, (ts_recompute)k, &s);
        ts_eval e;
        ts_layout lk = *l;
        lk.recompute = (ts_recompute)k;
        ts_status st = ts_evaluate_split(pb, &lk, &s, &e);
        if (st != TS_OK) {
            ts_split_free(&s);
            return st;
        }
        int better = !have || (e.fits && !best->fits) || (e.fits == best->fits && e.step_s < best->step_s);
        if (better) {
            *best = e;
            *rc = (ts_recompute)k;
            have = 1;
        }
    }
    ts_split_free(&s);
    return TS_OK;
}

int main(int argc, char **argv) {
    int reps = 21;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
    if (reps < 1) reps = 1;
    printf("# partition_speed: ts_partition_solve (GLPK %s glp_intopt, presolve on, %d-node limit), median of %d runs\n"
           "# (wall and this process's CPU time: other work on the machine inflates wall time only);\n"
           "# step times by planner/stages.c's closed form; target solve < %.0f ms (CPU)\n",
           glp_version(), TS_PART_DEFAULT_NODES, reps, TARGET_SOLVE_S * 1e3);
    printf("%-24s %5s %5s %5s %5s %8s %8s %-10s | %9s %9s %9s %7s | %s\n", "#config", "rows", "cols", "ints", "glpk",
           "wall", "cpu", "status", "uniform", "best_uni", "ilp", "gain", "ilp split (layers per chunk | policies)");
    printf("%-24s %5s %5s %5s %5s %8s %8s %-10s | %9s %9s %9s %7s |\n", "#", "", "", "", "runs", "ms", "ms", "", "s", "s",
           "s", "%");
    int fail = 0;
    for (size_t ci = 0; ci < N_CONFIGS; ci++) {
        const bench_config *c = &configs[ci];
        ts_problem pb;
        ts_layout l;
        if (load(c, &pb) != TS_OK || ts_layout_parse("layout", c->layout, &l) != TS_OK) {
            fprintf(stderr, "%s: %s\n", c->label, ts_error_message());
            return 1;
        }
        l.microbatches = (int)(pb.train.global_batch / ((long long)l.dp * l.mbs));
        ts_partition_problem inst;
        if (ts_partition_problem_of(&pb, &l, 0, &inst) != TS_OK) {
            fprintf(stderr, "%s: %s\n", c->label, ts_error_message());
            return 1;
        }
        double *times = calloc((size_t)reps * 2, sizeof *times), *cpu = times + reps;
        ts_split best = {0};
        ts_partition_info info = {0};
        ts_status st = TS_OK;
        for (int r = 0; r < reps && st == TS_OK; r++) {
            ts_split_free(&best);
            double c0 = cpu_s();
            st = ts_partition_solve(&inst, &best, &info);
            cpu[r] = cpu_s() - c0;
            times[r] = info.solve_s;
        }
        qsort(times, (size_t)reps, sizeof *times, cmp_d);
        qsort(cpu, (size_t)reps, sizeof *cpu, cmp_d);
        double solve_s = times[reps / 2], cpu_solve_s = cpu[reps / 2];
        free(times);
        if (st != TS_OK) {
            printf("%-24s %5d %5d %5d %5d %8.2f %8.2f %-10s | %s\n", c->label, info.rows, info.cols, info.integer_cols,
                   info.glpk_calls, solve_s * 1e3, cpu_solve_s * 1e3, ts_partition_status_names[info.status],
                   ts_error_message());
            fail = 1;
            ts_partition_problem_free(&inst);
            continue;
        }
        ts_eval uni, ilp, bu = {0};
        ts_recompute uni_rc;
        ts_layout lk = l;
        if (uniform_step(&pb, &l, &inst, &uni, &uni_rc) != TS_OK || ts_evaluate_split(&pb, &lk, &best, &ilp) != TS_OK) {
            fprintf(stderr, "%s: %s\n", c->label, ts_error_message());
            return 1;
        }
        ts_search_opts o;
        ts_search_opts_defaults(&o);
        o.top_k = 1;
        ts_search_result r;
        int have_bu = 0;
        if (ts_pins_parse("pins", c->pins, &o.pins) == TS_OK && ts_search(&pb, &o, &r) == TS_OK && r.n_best) {
            bu = r.best[0];
            have_bu = 1;
        }
        ts_search_result_free(&r);
        double ref = uni.fits ? uni.step_s : INFINITY;
        if (have_bu && bu.step_s < ref) ref = bu.step_s;
        char text[1024];
        ts_split_format(&best, text, sizeof text);
        int ok = cpu_solve_s < TARGET_SOLVE_S;
        fail |= !ok;
        char uni_s[32], bu_s[32], gain[32];
        snprintf(uni_s, sizeof uni_s, uni.fits ? "%.3f" : "%.3f*", uni.step_s);
        snprintf(bu_s, sizeof bu_s, have_bu ? "%.3f" : "-", bu.step_s);
        snprintf(gain, sizeof gain, isinf(ref) ? "-" : "%.2f", (1 - ilp.step_s / ref) * 100);
        printf("%-24s %5d %5d %5d %5d %8.2f %8.2f %-10s | %9s %9s %9.3f %7s | %s%s\n", c->label, info.rows,
               info.cols, info.integer_cols, info.glpk_calls, solve_s * 1e3, cpu_solve_s * 1e3,
               ts_partition_status_names[info.status], uni_s, bu_s, ilp.step_s, gain, text,
               ok ? "" : "  TARGET MISSED");
        char lt[256];
        ts_layout_format(&bu.layout, lt, sizeof lt);
        printf("#   uniform split: recompute=%s, %.1f GB on stage %d%s; best uniform: %s; ILP: slowest stage %.4f s "
               "per micro-batch (uniform %.4f), %.1f GB on stage %d\n",
               ts_recompute_names[uni_rc], uni.mem.total / 1e9, uni.worst_stage, uni.fits ? "" : " (does not fit: *)",
               have_bu ? lt : "none fits", best.max_stage_s, (uni.time.compute + uni.time.tp_comm + uni.time.cp_comm + uni.time.ep_comm) / l.microbatches, ilp.mem.total / 1e9,
               ilp.worst_stage);
        ts_split_free(&best);
        ts_partition_problem_free(&inst);
    }
    return fail;
}
