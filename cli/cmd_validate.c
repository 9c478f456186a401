/* `tessera validate`: does the simulator predict this machine? Calibrates the machine once
 * (tessera calibrate), then for each layout of a matrix of small ones (DP, TP, SP, PP with every
 * schedule, CP, ZeRO stages, recompute, EP and combinations, up to --ranks ranks) writes its plan,
 * simulates it (sim/engine.h) and trains it for real (tessera run, under mpirun), and compares
 * the two traces op by op (sim/compare.h). Prints one row per layout and the median and worst
 * absolute step-time error; --json mirrors it with per-op-kind errors. Measured steps are put at
 * the calibration's speed with the speed gauge (exec/speed_gauge.h) where the runs and the
 * profile have one; the steps as timed are reported beside. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/json.h"
#include "common/spawn.h"
#include "common/stats.h"
#include "planner/plan_json.h"
#include "sim/compare.h"
#include "sim/engine.h"
#include "program/trace.h"

/* The matrix: tiny (dense) and tiny-moe (EP) layouts; ranks = dp·tp·pp·cp. */
static const struct {
    const char *model, *layout;
} cases[] = {
    {"tiny", "dp=1,tp=1,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none"},
    {"tiny", "dp=2,tp=1,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none"},
    {"tiny", "dp=2,tp=1,pp=1,cp=1,ep=1,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none"},
    {"tiny", "dp=2,tp=1,pp=1,cp=1,ep=1,sp=0,zero=2,mbs=1,vpp=1,sched=1f1b,recompute=none"},
    {"tiny", "dp=2,tp=1,pp=1,cp=1,ep=1,sp=0,zero=3,mbs=1,vpp=1,sched=1f1b,recompute=none"},
    {"tiny", "dp=4,tp=1,pp=1,cp=1,ep=1,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none"},
    {"tiny", "dp=1,tp=2,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none"},
    {"tiny", "dp=1,tp=2,pp=1,cp=1,ep=1,sp=1,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none"},
    {"tiny", "dp=1,tp=4,pp=1,cp=1,ep=1,sp=1,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none"},
    {"tiny", "dp=1,tp=1,pp=2,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=gpipe,recompute=none"},
    {"tiny", "dp=1,tp=1,pp=2,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none"},
    {"tiny", "dp=1,tp=1,pp=2,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=2,sched=interleaved,recompute=none"},
    {"tiny", "dp=1,tp=1,pp=2,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=zb-h1,recompute=none"},
    {"tiny", "dp=1,tp=1,pp=4,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none"},
    {"tiny", "dp=1,tp=1,pp=1,cp=2,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none"},
    {"tiny", "dp=2,tp=1,pp=1,cp=1,ep=1,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=full"},
    {"tiny", "dp=1,tp=2,pp=1,cp=1,ep=1,sp=1,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=selective"},
    {"tiny", "dp=2,tp=2,pp=1,cp=1,ep=1,sp=1,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none"},
    {"tiny", "dp=1,tp=2,pp=2,cp=1,ep=1,sp=1,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none"},
    {"tiny", "dp=2,tp=1,pp=2,cp=1,ep=1,sp=0,zero=1,mbs=1,vpp=1,sched=zb-h1,recompute=none"},
    {"tiny", "dp=2,tp=2,pp=2,cp=1,ep=1,sp=1,zero=1,mbs=1,vpp=2,sched=interleaved,recompute=none"},
    {"tiny-moe", "dp=2,tp=1,pp=1,cp=1,ep=2,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none"},
    {"tiny-moe", "dp=4,tp=1,pp=1,cp=1,ep=4,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none"},
    {"tiny-moe", "dp=2,tp=2,pp=1,cp=1,ep=2,sp=1,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none"},
};
#define N_CASES (int)(sizeof cases / sizeof cases[0])

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
           "raw_error give the steps as timed.\n"
           "\n"
           "  -s, --system FILE      use this system spec instead of calibrating (e.g. a profile\n"
           "                         written by tessera calibrate -o)\n"
           "  -r, --ranks N          largest layouts to run, in ranks (default 8)\n"
           "      --only I,J,...     run only these cases of the matrix (1-based)\n"
           "  -n, --steps N          training steps per layout (default 8; the first 3 are warm-up)\n"
           "  -R, --repeat R         train every layout R times, in R passes over the matrix, and\n"
           "                         compare with the median (default 1; a shared machine's speed\n"
           "                         moves in phases of seconds, which passes average over)\n"
           "      --situ-steps N     in-situ steps of the calibration (default 16; calibrate's own\n"
           "                         default is 3 with --quick); the pass trains at the matrix's\n"
           "                         batch and length (calibrate --situ-batch, --situ-seq)\n"
           "  -b, --global-batch B   sequences per step (default 8)\n"
           "  -l, --seq L            tokens per sequence (default 128)\n"
           "  -k, --keep DIR         keep the profile, plans and traces in DIR (default: a temporary\n"
           "                         folder, removed)\n"
           "      --json             print the results as JSON instead of a table\n"
           "  -o, --output FILE      also write the JSON to FILE (atomically)\n"
           "  -h, --help             this help\n"
           "\n"
           "Exit status: 0 ok, 2 bad input, 1 a calibration or run failed.\n",
           N_CASES);
}

typedef struct {
    const char *system;  /* spec path, or NULL to calibrate */
    const char *keep, *output;
    int max_ranks, steps, json;
    int repeat;     /* passes over the matrix */
    int situ_steps; /* calibrate --situ-steps */
    int64_t batch, seq;
    unsigned char only[N_CASES]; /* all zero: every case */
} options;

static int case_ranks(int i) {
    ts_layout l;
    if (ts_layout_parse("validate", cases[i].layout, &l) != TS_OK) return 0;
    return ts_rank_count(&l);
}

/* Writes the plan of case i (the layout pinned, on o->system) to `path` and fills `pb`, `l`. */
static ts_status write_plan(const options *o, int i, const char *path, ts_problem *pb, ts_layout *l) {
    ts_model m;
    ts_system s;
    ts_train t;
    TS_CHECK(ts_model_load(cases[i].model, &m));
    TS_CHECK(ts_system_load(o->system, &s));
    ts_train_defaults(&t);
    ts_train_set_dtype(&t, TS_DTYPE_FP32); /* the executor computes in fp32 */
    t.global_batch = o->batch;
    t.seq = o->seq;
    TS_CHECK(ts_layout_parse("validate", cases[i].layout, l));
    TS_CHECK(ts_problem_init(pb, &m, &s, &t, ts_rank_count(l)));
    ts_search_opts so;
    ts_search_opts_defaults(&so);
    so.top_k = 1;
    TS_CHECK(ts_pins_parse("validate", cases[i].layout, &so.pins));
    ts_search_result r;
    ts_status res = ts_search(pb, &so, &r);
    cJSON *plan = NULL;
    if (res == TS_OK) res = ts_plan_to_json(pb, &so, cases[i].layout, &r, &plan);
    if (res == TS_OK) res = ts_json_write_file(path, plan);
    if (res == TS_OK) *l = r.best[0].layout; /* microbatches filled in */
    cJSON_Delete(plan);
    ts_search_result_free(&r);
    return res;
}

/* Simulates the layout (one rank per stage) and writes its trace to `path`. */
static ts_status simulate(const ts_problem *pb, const ts_layout *l, const char *path) {
    ts_program prog;
    TS_CHECK(ts_program_build(pb, l, NULL, &prog));
    ts_sim_result r;
    ts_sim_opts so = {.full = 0};
    ts_status res = ts_simulate(pb, &prog, &so, &r);
    if (res == TS_OK) {
        ts_step_spans spans = ts_sim_spans(&r);
        res = ts_trace_write(path, "sim", pb, &prog, &spans);
        ts_sim_result_free(&r);
    }
    ts_program_free(&prog);
    return res;
}

/* The median measured step of a `tessera run --json` output file, and the median of its steps'
 * work in gauge FLOPs (gauge.step_flop_median, exec/speed_gauge.h; 0 when the run has no gauge). */
static ts_status measured_step(const char *path, double *step_s, double *step_flop) {
    cJSON *root = NULL;
    TS_CHECK(ts_json_load_file(path, &root));
    ts_jreader r, c;
    ts_jreader_root(&r, path);
    const cJSON *steps = NULL, *gauge = NULL;
    ts_status res = ts_jr_obj(&r, root, "step_s", 1, &steps);
    ts_jreader_child(&r, "step_s", 0, &c);
    if (res == TS_OK) res = ts_jr_num(&c, steps, "median", 1, 1e-9, 1e6, 0, step_s);
    if (res == TS_OK) res = ts_jr_obj(&r, root, "gauge", 0, &gauge);
    ts_jreader_child(&r, "gauge", 0, &c);
    *step_flop = 0;
    if (res == TS_OK && gauge) res = ts_jr_num(&c, gauge, "step_flop_median", 1, 1, 1e30, 0, step_flop);
    cJSON_Delete(root);
    return res;
}

#define MAX_REPEAT 20

typedef struct {
    int index;
    ts_compare cmp;              /* the first pass's traces; its step, the median over passes */
    double raw_s[MAX_REPEAT];    /* each pass's measured (median) step, as timed */
    double flop[MAX_REPEAT];     /* and its work in gauge FLOPs (0: no gauge) */
    double run_s[MAX_REPEAT];    /* at the calibration's speed (compare_case), else as timed */
} result;

/* The files of case i: dir/case-II.KIND (pass 0) or dir/case-II.rP.KIND (pass P > 0). */
static void case_file(char *buf, size_t cap, const char *dir, int i, int pass, const char *kind) {
    if (pass == 0) snprintf(buf, cap, "%s/case-%02d.%s", dir, i + 1, kind);
    else snprintf(buf, cap, "%s/case-%02d.r%d.%s", dir, i + 1, pass + 1, kind);
}

/* Pass `pass` of case i: trains it for real (the first pass writes its plan, on o->system) and
 * records the measured step. */
static ts_status run_case(const char *self, const options *o, const char *dir, int i, int pass, result *out) {
    char plan[4200], run[4200], run_json[4200], steps[16];
    case_file(plan, sizeof plan, dir, i, 0, "plan.json");
    case_file(run, sizeof run, dir, i, pass, "run.trace.json");
    case_file(run_json, sizeof run_json, dir, i, pass, "run.json");
    snprintf(steps, sizeof steps, "%d", o->steps);
    if (pass == 0) {
        ts_problem pb;
        ts_layout l;
        TS_CHECK(write_plan(o, i, plan, &pb, &l));
    }
    const char *const argv[] = {self, "run", "--plan", plan, "--steps", steps, "--warmup", "3",
                                "--json", "--trace", run, NULL};
    TS_CHECK(ts_spawn(argv, run_json));
    out->index = i;
    return measured_step(run_json, &out->raw_s[pass], &out->flop[pass]);
}

/* The median of n ≤ MAX_REPEAT passes' figures, leaving them in order. */
static double median_of(const double *v, int n) {
    double tmp[MAX_REPEAT];
    memcpy(tmp, v, (size_t)n * sizeof *tmp);
    return ts_median(tmp, n);
}

/* After the passes: case i's plan written again on o->system (the chosen calibration),
 * simulated, and compared op by op with the first pass's trace. Each pass's step is put at the
 * calibration's speed (its gauge work ÷ node.gauge_flops_per_s, exec/speed_gauge.h) when both
 * are known; the measured step is the median over the passes. */
static ts_status compare_case(const options *o, const char *dir, result *out) {
    char plan[4200], sim[4200], run[4200];
    int i = out->index;
    case_file(plan, sizeof plan, dir, i, 0, "plan.json");
    case_file(sim, sizeof sim, dir, i, 0, "sim.trace.json");
    case_file(run, sizeof run, dir, i, 0, "run.trace.json");
    ts_problem pb;
    ts_layout l;
    TS_CHECK(write_plan(o, i, plan, &pb, &l));
    TS_CHECK(simulate(&pb, &l, sim));
    TS_CHECK(ts_compare_traces(sim, run, &out->cmp));
    double ref = pb.sys.gauge_flops_per_s;
    for (int p = 0; p < o->repeat; p++)
        out->run_s[p] = ref > 0 && out->flop[p] > 0 ? out->flop[p] / ref : out->raw_s[p];
    ts_compare_set_measured_step(&out->cmp, median_of(out->run_s, o->repeat), median_of(out->raw_s, o->repeat));
    return TS_OK;
}

/* The in-situ step's work of a profile written by tessera calibrate (measured.in_situ: step_s ×
 * gauge_flops_per_s, or step_s alone without a gauge), or 0 when it has none (--no-in-situ,
 * GPUs). */
static ts_status situ_work(const char *path, double *work) {
    cJSON *root = NULL;
    TS_CHECK(ts_json_load_file(path, &root));
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "measured");
    const cJSON *situ = cJSON_GetObjectItemCaseSensitive(m, "in_situ");
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(situ, "step_s");
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(situ, "gauge_flops_per_s");
    *work = (cJSON_IsNumber(s) ? s->valuedouble : 0) * (cJSON_IsNumber(g) && g->valuedouble > 0 ? g->valuedouble : 1);
    cJSON_Delete(root);
    return TS_OK;
}

/* Of the passes' calibrations, the one whose in-situ step is the median (the lower middle one
 * for an even count), in gauge work where the profiles have a gauge: each is one sample of a
 * shared machine, taken at one moment. */
static ts_status median_profile(char profiles[][4200], int n, int *chosen) {
    double work[MAX_REPEAT], sorted[MAX_REPEAT];
    for (int p = 0; p < n; p++) TS_CHECK(situ_work(profiles[p], &work[p]));
    memcpy(sorted, work, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, ts_cmp_double);
    for (*chosen = 0; work[*chosen] != sorted[(n - 1) / 2]; ++*chosen) continue;
    return TS_OK;
}

/* (max − min) / median of n passes' steps: how much this machine moved. */
static double spread(const double *v, int n) {
    double lo = v[0], hi = v[0];
    for (int p = 1; p < n; p++) lo = fmin(lo, v[p]), hi = fmax(hi, v[p]);
    return (hi - lo) / median_of(v, n);
}

/* The step error against the measured step as timed, without the speed gauge. */
static double raw_error(const result *r) {
    return (r->cmp.simulated_step_s - r->cmp.measured_raw_step_s) / r->cmp.measured_raw_step_s;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* Removes the temporary folder and what the cases wrote in it. */
static void remove_tree(const char *dir) {
    nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* Median and maximum of |step error| over the results, at the calibration's speed or (raw) as
 * timed. */
static void summary(const result *res, int n, int raw, double *median, double *worst) {
    double *e = malloc(((size_t)n + 1) * sizeof *e);
    *median = *worst = NAN;
    if (e == NULL || n == 0) {
        free(e);
        return;
    }
    for (int i = 0; i < n; i++) e[i] = fabs(raw ? raw_error(&res[i]) : res[i].cmp.step_error);
    *median = ts_median(e, n); /* sorts e */
    *worst = e[n - 1];
    free(e);
}

/* Adds the array `key` of the passes' figures to `c`. */
static ts_status add_runs(cJSON *c, const char *key, const double *v, int n) {
    cJSON *arr = cJSON_CreateDoubleArray(v, n);
    if (arr == NULL || !cJSON_AddItemToObject(c, key, arr)) {
        cJSON_Delete(arr);
        return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing %s", key);
    }
    return TS_OK;
}

static ts_status to_json(const options *o, const result *res, int n, cJSON **out) {
    ts_status st = TS_OK;
    cJSON *root = cJSON_CreateObject(), *arr;
    TS_CJSON_GOTO(root, st, fail);
    TS_CJSON_GOTO(cJSON_AddStringToObject(root, "system", o->system), st, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "repeat", o->repeat), st, fail);
    TS_CJSON_GOTO(arr = cJSON_AddArrayToObject(root, "cases"), st, fail);
    for (int i = 0; i < n; i++) {
        cJSON *c = NULL;
        TS_CHECK_GOTO(ts_compare_json(&res[i].cmp, &c), st, fail);
        cJSON_AddItemToArray(arr, c);
        const ts_compare *x = &res[i].cmp;
        TS_CJSON_GOTO(cJSON_AddNumberToObject(c, "case", res[i].index + 1), st, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(c, "ranks", case_ranks(res[i].index)), st, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(c, "simulated_s", x->simulated_step_s), st, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(c, "measured_s", x->measured_step_s), st, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(c, "error", x->step_error), st, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(c, "measured_raw_s", x->measured_raw_step_s), st, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(c, "raw_error", raw_error(&res[i])), st, fail);
        TS_CHECK_GOTO(add_runs(c, "measured_runs_s", res[i].run_s, o->repeat), st, fail);
        TS_CHECK_GOTO(add_runs(c, "measured_raw_runs_s", res[i].raw_s, o->repeat), st, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(c, "measured_spread", spread(res[i].run_s, o->repeat)), st, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(c, "measured_raw_spread", spread(res[i].raw_s, o->repeat)), st, fail);
    }
    double median, worst;
    summary(res, n, 0, &median, &worst);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "median_abs_error", median), st, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "max_abs_error", worst), st, fail);
    summary(res, n, 1, &median, &worst);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "median_abs_raw_error", median), st, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "max_abs_raw_error", worst), st, fail);
    *out = root;
    return TS_OK;
fail:
    cJSON_Delete(root);
    return st;
}

/* The op kind whose summed time is furthest off, for the table's last column. */
static const ts_compare_kind *worst_kind(const ts_compare *c) {
    const ts_compare_kind *w = NULL;
    for (int k = 0; k < c->n_kinds; k++)
        if (isfinite(c->kinds[k].error) && (w == NULL || fabs(c->kinds[k].error) > fabs(w->error))) w = &c->kinds[k];
    return w;
}

static void print_table(const options *o, const result *res, int n) {
    int gauged = n > 0 && res[0].cmp.gauged;
    printf("# system %s; %lld sequences of %lld tokens, fp32; measured: median step of %d steps after 3\n"
           "# warm-up%s\n",
           o->system, (long long)o->batch, (long long)o->seq, o->steps - 3,
           o->repeat > 1 ? ", median over the passes; spread: (max - min) / median of the passes" : "");
    if (gauged)
        printf("# measured_s: at the calibration's speed on the speed gauge (exec/speed_gauge.h), error against it;\n"
               "# raw_s: as timed, raw_error against it\n");
    printf("%-4s %-9s %-78s %5s %11s %11s %8s", "#", "model", "layout", "ranks", "simulated_s", "measured_s", "error");
    if (o->repeat > 1) printf(" %7s", "spread");
    if (gauged) printf(" %9s %9s", "raw_s", "raw_error");
    printf("  %s\n", "worst op kind");
    for (int i = 0; i < n; i++) {
        const ts_compare *c = &res[i].cmp;
        const ts_compare_kind *w = worst_kind(c);
        printf("%-4d %-9s %-78s %5d %11.4f %11.4f %+7.1f%%", res[i].index + 1, c->model, c->layout,
               case_ranks(res[i].index), c->simulated_step_s, c->measured_step_s, 100 * c->step_error);
        if (o->repeat > 1) printf(" %6.1f%%", 100 * spread(res[i].run_s, o->repeat));
        if (gauged) printf(" %9.4f %+8.1f%%", c->measured_raw_step_s, 100 * raw_error(&res[i]));
        if (w) printf("  %s %+.0f%%", w->kind, 100 * w->error);
        printf("\n");
    }
    double median, worst;
    summary(res, n, 0, &median, &worst);
    printf("# %d layouts: median |error| %.1f%%, worst %.1f%%", n, 100 * median, 100 * worst);
    if (o->repeat > 1) {
        double s[N_CASES];
        for (int i = 0; i < n; i++) s[i] = spread(res[i].run_s, o->repeat);
        printf("; median spread %.1f%% over %d passes", 100 * ts_median(s, n), o->repeat);
    }
    printf("\n");
    if (gauged) {
        summary(res, n, 1, &median, &worst);
        printf("# as timed: median |raw_error| %.1f%%, worst %.1f%%", 100 * median, 100 * worst);
        if (o->repeat > 1) {
            double s[N_CASES];
            for (int i = 0; i < n; i++) s[i] = spread(res[i].raw_s, o->repeat);
            printf("; median spread %.1f%%", 100 * ts_median(s, n));
        }
        printf("\n");
    }
}

static void parse_only(const char *cmd, const char *text, options *o) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        o->only[cli_int(cmd, "--only", tok, 1, N_CASES) - 1] = 1;
}

static int selected(const options *o, int i) {
    for (int k = 0; k < N_CASES; k++)
        if (o->only[k]) return o->only[i];
    return 1;
}

int cmd_validate(int argc, char **argv) {
    const char *cmd = "validate";
    options o = {.max_ranks = 8, .steps = 8, .repeat = 1, .situ_steps = 16, .batch = 8, .seq = 128};
    enum { OPT_JSON = 256, OPT_ONLY, OPT_SITU_STEPS };
    static const struct option longs[] = {
        {"system", required_argument, 0, 's'},  {"ranks", required_argument, 0, 'r'},
        {"only", required_argument, 0, OPT_ONLY}, {"steps", required_argument, 0, 'n'},
        {"repeat", required_argument, 0, 'R'},  {"situ-steps", required_argument, 0, OPT_SITU_STEPS},
        {"global-batch", required_argument, 0, 'b'}, {"seq", required_argument, 0, 'l'},
        {"keep", required_argument, 0, 'k'},    {"json", no_argument, 0, OPT_JSON},
        {"output", required_argument, 0, 'o'},  {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":s:r:n:R:b:l:k:o:h", longs, NULL)) != -1) {
        switch (c) {
        case 's': o.system = optarg; break;
        case 'r': o.max_ranks = (int)cli_int(cmd, "--ranks", optarg, 1, 64); break;
        case OPT_ONLY: parse_only(cmd, optarg, &o); break;
        case 'n': o.steps = (int)cli_int(cmd, "--steps", optarg, 4, 1000); break;
        case 'R': o.repeat = (int)cli_int(cmd, "--repeat", optarg, 1, MAX_REPEAT); break;
        case OPT_SITU_STEPS: o.situ_steps = (int)cli_int(cmd, "--situ-steps", optarg, 2, 1000); break;
        case 'b': o.batch = cli_int(cmd, "--global-batch", optarg, 1, 4096); break;
        case 'l': o.seq = cli_int(cmd, "--seq", optarg, 8, 4096); break;
        case 'k': o.keep = optarg; break;
        case OPT_JSON: o.json = 1; break;
        case 'o': o.output = optarg; break;
        case 'h': help(); return 0;
        default: cli_bad_option(cmd, c, argv);
        }
    }
    if (optind < argc) cli_usage_error(cmd, "unexpected argument \"%s\"", argv[optind]);

    char self[4096], dir[4096];
    static char profiles[MAX_REPEAT][4200]; /* the passes' calibrations (no --system) */
    cli_self_path(cmd, self, sizeof self);
    if (o.keep) {
        snprintf(dir, sizeof dir, "%s", o.keep);
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) cli_usage_error(cmd, "--keep: cannot create the folder \"%s\"", o.keep);
    } else {
        snprintf(dir, sizeof dir, "/tmp/tessera-validate-XXXXXX");
        if (mkdtemp(dir) == NULL) cli_fail(cmd, TS_FAIL(TS_ERR_IO, "cannot create a temporary folder in /tmp"));
    }
    ts_status st = TS_OK;
    int calibrate = o.system == NULL;
    result *res = calloc(N_CASES, sizeof *res);
    if (res == NULL) st = TS_FAIL(TS_ERR_NOMEM, "out of memory");
    int n = 0, n_runs = 0;
    for (int i = 0; i < N_CASES; i++) n_runs += selected(&o, i) && case_ranks(i) <= o.max_ranks;
    /* Each pass calibrates (unless --system) and then trains every case, so that calibrations
     * and runs alike sample the machine at R moments. */
    for (int pass = 0; pass < o.repeat && st == TS_OK; pass++) {
        if (calibrate) {
            if (o.repeat == 1) snprintf(profiles[pass], sizeof profiles[pass], "%s/profile.json", dir);
            else snprintf(profiles[pass], sizeof profiles[pass], "%s/profile.p%d.json", dir, pass + 1);
            fprintf(stderr, "tessera validate: pass %d/%d: calibrating this machine (tessera calibrate --quick)\n",
                    pass + 1, o.repeat);
            /* In situ at the matrix's shapes: kernels' speed inside a step depends on them. */
            char situ[16], batch[24], seq[24];
            snprintf(situ, sizeof situ, "%d", o.situ_steps);
            snprintf(batch, sizeof batch, "%lld", (long long)o.batch);
            snprintf(seq, sizeof seq, "%lld", (long long)o.seq);
            const char *const argv_cal[] = {self,           "calibrate", "--quick", "--situ-steps", situ, "--situ-batch",
                                            batch,          "--situ-seq", seq,      "-o",           profiles[pass], NULL};
            st = ts_spawn(argv_cal, NULL);
            if (pass == 0) o.system = profiles[0]; /* the plans' system until the choice below */
        }
        n = 0;
        for (int i = 0; i < N_CASES && st == TS_OK; i++) {
            if (!selected(&o, i) || case_ranks(i) > o.max_ranks) continue;
            fprintf(stderr, "tessera validate: pass %d/%d [%d/%d] %s %s\n", pass + 1, o.repeat, n + 1, n_runs,
                    cases[i].model, cases[i].layout);
            st = run_case(self, &o, dir, i, pass, &res[n]);
            if (st != TS_OK) break;
            fprintf(stderr, "tessera validate: pass %d/%d [%d/%d] measured %.4f s\n", pass + 1, o.repeat, n + 1,
                    n_runs, res[n].raw_s[pass]);
            n++;
        }
    }
    if (st == TS_OK && calibrate && o.repeat > 1) {
        int chosen = 0;
        st = median_profile(profiles, o.repeat, &chosen);
        o.system = profiles[chosen];
        if (st == TS_OK)
            fprintf(stderr, "tessera validate: simulating with %s, the calibration with the median in-situ step\n",
                    o.system);
    }
    for (int k = 0; k < n && st == TS_OK; k++) {
        st = compare_case(&o, dir, &res[k]);
        if (st == TS_OK)
            fprintf(stderr, "tessera validate: [%d/%d] simulated %.4f s, measured %.4f s (%+.1f%%)\n", k + 1, n,
                    res[k].cmp.simulated_step_s, res[k].cmp.measured_step_s, 100 * res[k].cmp.step_error);
    }
    cJSON *root = NULL;
    if (st == TS_OK) st = to_json(&o, res, n, &root);
    if (st == TS_OK && o.output) st = ts_json_write_file(o.output, root);
    if (st == TS_OK && o.json) st = ts_json_write_file("-", root);
    if (st == TS_OK && !o.json) print_table(&o, res, n);
    if (st == TS_OK && !o.json && o.keep) printf("# profile, plans and traces kept in %s\n", dir);
    cJSON_Delete(root);
    for (int i = 0; res && i < N_CASES; i++) ts_compare_free(&res[i].cmp); /* calloc'ed: zero or set */
    free(res);
    if (!o.keep) remove_tree(dir);
    if (st != TS_OK) cli_fail(cmd, st);
    return 0;
}
