/* The validation experiment (reports/validate.h): calibrate, then per pass train every case of
 * the matrix, then simulate and compare each. reports/validate_report.c writes the outcome. */
#include "reports/validate.h"

#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/spawn.h"
#include "common/stats.h"
#include "exec/calibrate.h"
#include "planner/plan_json.h"
#include "program/trace.h"
#include "sim/engine.h"

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
_Static_assert(sizeof cases / sizeof cases[0] == TS_VALIDATE_CASES, "TS_VALIDATE_CASES is the matrix's size");

void ts_validate_opts_defaults(ts_validate_opts *o) {
    memset(o, 0, sizeof *o);
    o->max_ranks = 8;
    o->steps = 8;
    o->repeat = 1;
    o->situ_steps = 16;
    o->batch = 8;
    o->seq = 128;
    o->log = stderr;
}

int ts_validate_max_ranks(ts_device device, int gpus, int requested) {
    if (device != TS_DEVICE_CUDA) return requested;
    return gpus < requested ? gpus : requested;
}

static int case_ranks(int i) {
    ts_layout l;
    if (ts_layout_parse("validate", cases[i].layout, &l) != TS_OK) return 0;
    return ts_rank_count(&l);
}

static int selected(const ts_validate_opts *o, int i) {
    for (int k = 0; k < TS_VALIDATE_CASES; k++)
        if (o->only[k]) return o->only[i];
    return 1;
}

/* What the passes share: the options, the folder, and the spec the plans are written on. */
typedef struct {
    ts_validate_opts *o; /* the caller's, with repeat the passes made (repeat_to) */
    const char *dir;
    const char *system;
    char (*profiles)[4200]; /* (repeat) the passes' calibrations (no opts.system) */
} experiment;

/* Writes the plan of case i (the layout pinned, on x->system) to `path` and fills `pb`, `l`. */
static ts_status write_plan(const experiment *x, int i, const char *path, ts_problem *pb, ts_layout *l) {
    ts_model m;
    ts_system s;
    ts_train t;
    TS_CHECK(ts_model_load(cases[i].model, &m));
    TS_CHECK(ts_system_load(x->system, &s));
    ts_train_defaults(&t);
    /* The device's training precision, as its calibration's in-situ pass trains (fp32 on CPU ranks,
     * bf16 on GPUs): the plans are priced in it and the runs train in it. */
    ts_train_set_dtype(&t, ts_situ_mode_of(x->o->device).dtype);
    t.global_batch = x->o->batch;
    t.seq = x->o->seq;
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

/* The files of case i: dir/case-II.KIND (pass 0) or dir/case-II.rP.KIND (pass P > 0). */
static void case_file(char *buf, size_t cap, const char *dir, int i, int pass, const char *kind) {
    if (pass == 0) snprintf(buf, cap, "%s/case-%02d.%s", dir, i + 1, kind);
    else snprintf(buf, cap, "%s/case-%02d.r%d.%s", dir, i + 1, pass + 1, kind);
}


/* A progress line on o->log. */
__attribute__((format(printf, 2, 3))) static void say(const ts_validate_opts *o, const char *fmt, ...) {
    if (o->log == NULL) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(o->log, "tessera validate: ");
    vfprintf(o->log, fmt, ap);
    va_end(ap);
}

/* Pass `pass` of case i: trains it for real (the first pass writes its plan, on x->system) and
 * records the measured step. */
static ts_status run_case(const experiment *x, int i, int pass, ts_validate_case *out) {
    char plan[4200], run[4200], run_json[4200], steps[16], warmup[16];
    case_file(plan, sizeof plan, x->dir, i, 0, "plan.json");
    case_file(run, sizeof run, x->dir, i, pass, "run.trace.json");
    case_file(run_json, sizeof run_json, x->dir, i, pass, "run.json");
    snprintf(steps, sizeof steps, "%d", x->o->steps);
    snprintf(warmup, sizeof warmup, "%d", TS_VALIDATE_WARMUP);
    if (pass == 0) {
        ts_problem pb;
        ts_layout l;
        TS_CHECK(write_plan(x, i, plan, &pb, &l));
    }
    const char *precision = ts_situ_mode_of(x->o->device).bf16 ? "bf16" : "fp32";
    const char *const argv[] = {x->o->self, "run",   "--plan",    plan,      "--device", ts_device_name(x->o->device),
                                "--steps",  steps,   "--warmup",  warmup,    "--json",   "--trace",
                                run,        "--precision", precision, NULL};
    TS_CHECK(ts_spawn(argv, run_json));
    out->index = i;
    out->ranks = case_ranks(i);
    TS_CHECK(measured_step(run_json, &out->raw_s[pass], &out->flop[pass]));
    if (pass == 0) TS_CHECK(ts_validate_memory_read(run_json, &out->memory));
    return ts_run_spreads(run_json, TS_VALIDATE_WARMUP, &out->step_spread[pass], &out->gauge_spread[pass]);
}

/* The median of n ≤ TS_VALIDATE_MAX_REPEAT passes' figures, leaving them in order. */
static double median_of(const double *v, int n) {
    double tmp[TS_VALIDATE_MAX_REPEAT];
    memcpy(tmp, v, (size_t)n * sizeof *tmp);
    return ts_median(tmp, n);
}

/* (max − min) / median of n passes' steps: how much this machine moved. */
static double spread(const double *v, int n) {
    double lo = v[0], hi = v[0];
    for (int p = 1; p < n; p++) lo = fmin(lo, v[p]), hi = fmax(hi, v[p]);
    return (hi - lo) / median_of(v, n);
}

/* After the passes: case out->index's plan written again on x->system (the chosen calibration),
 * simulated, and compared op by op with the first pass's trace. Each pass's step is put at the
 * calibration's speed (its gauge work ÷ node.gauge_flops_per_s, exec/speed_gauge.h) when both
 * are known; the measured step is the median over the passes. */
static ts_status compare_case(const experiment *x, ts_validate_case *out) {
    char plan[4200], sim[4200], run[4200];
    int i = out->index, repeat = x->o->repeat;
    case_file(plan, sizeof plan, x->dir, i, 0, "plan.json");
    case_file(sim, sizeof sim, x->dir, i, 0, "sim.trace.json");
    case_file(run, sizeof run, x->dir, i, 0, "run.trace.json");
    ts_problem pb;
    ts_layout l;
    TS_CHECK(write_plan(x, i, plan, &pb, &l));
    TS_CHECK(simulate(&pb, &l, sim));
    TS_CHECK(ts_compare_traces(sim, run, &out->cmp));
    double ref = pb.sys.gauge_flops_per_s;
    for (int p = 0; p < repeat; p++)
        out->run_s[p] = ref > 0 && out->flop[p] > 0 ? out->flop[p] / ref : out->raw_s[p];
    ts_compare_set_measured_step(&out->cmp, median_of(out->run_s, repeat), median_of(out->raw_s, repeat));
    const ts_compare *c = &out->cmp;
    out->raw_error = (c->simulated_step_s - c->measured_raw_step_s) / c->measured_raw_step_s;
    out->run_spread = spread(out->run_s, repeat);
    out->raw_spread = spread(out->raw_s, repeat);
    return TS_OK;
}

/* Each pass's trace of case out->index replayed on its plan (sim/replay.h): the simulator on
 * the run's own compute times, so the error is the model's of everything else. */
static ts_status replay_case(const experiment *x, ts_validate_case *out) {
    char plan[4200], run[4200];
    int repeat = x->o->repeat;
    case_file(plan, sizeof plan, x->dir, out->index, 0, "plan.json");
    for (int p = 0; p < repeat; p++) {
        ts_replay r;
        case_file(run, sizeof run, x->dir, out->index, p, "run.trace.json");
        TS_CHECK(ts_replay_plan(plan, 0, run, &r));
        out->replay_errors[p] = r.error;
        if (p == 0) out->replay = r;
    }
    out->replay_error = median_of(out->replay_errors, repeat);
    return TS_OK;
}

/* The in-situ step's work of a profile written by tessera calibrate (measured.in_situ: step_s ×
 * gauge_flops_per_s, or step_s alone without a gauge, as on GPUs), or 0 when it has none
 * (--no-in-situ). */
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
    double work[TS_VALIDATE_MAX_REPEAT], sorted[TS_VALIDATE_MAX_REPEAT];
    for (int p = 0; p < n; p++) TS_CHECK(situ_work(profiles[p], &work[p]));
    memcpy(sorted, work, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, ts_cmp_double);
    for (*chosen = 0; work[*chosen] != sorted[(n - 1) / 2]; ++*chosen) continue;
    return TS_OK;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* Removes the temporary folder and what the cases wrote in it. */
static void remove_tree(const char *dir) {
    nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}


/* Pass `pass`'s calibration of this machine into x->profiles[pass], in situ at the matrix's
 * shapes: kernels' speed inside a step depends on them. */
static ts_status calibrate(experiment *x, int pass) {
    const ts_validate_opts *o = x->o;
    char *profile = x->profiles[pass];
    if (o->repeat == 1) snprintf(profile, sizeof x->profiles[pass], "%s/profile.json", x->dir);
    else snprintf(profile, sizeof x->profiles[pass], "%s/profile.p%d.json", x->dir, pass + 1);
    say(o, "pass %d/%d: calibrating this machine (tessera calibrate --quick)\n", pass + 1, o->repeat);
    char situ[16], batch[24], seq[24];
    snprintf(situ, sizeof situ, "%d", o->situ_steps);
    snprintf(batch, sizeof batch, "%lld", (long long)o->batch);
    snprintf(seq, sizeof seq, "%lld", (long long)o->seq);
    const char *const argv[] = {o->self, "calibrate", "--quick", "--device", ts_device_name(o->device), "--situ-steps",
                                situ,    "--situ-batch", batch,  "--situ-seq", seq, "-o", profile, NULL};
    ts_status res = ts_spawn(argv, NULL);
    if (pass == 0) x->system = x->profiles[0]; /* the plans' system until choose_profile */
    return res;
}

/* Pass `pass`: its calibration (without opts.system), then one run of each selected case into
 * out->cases, in matrix order. */
static ts_status run_pass(experiment *x, int pass, int n_runs, ts_validate_result *out) {
    const ts_validate_opts *o = x->o;
    if (o->system == NULL) TS_CHECK(calibrate(x, pass));
    int n = 0;
    for (int i = 0; i < TS_VALIDATE_CASES; i++) {
        if (!selected(o, i) || case_ranks(i) > o->max_ranks) continue;
        say(o, "pass %d/%d [%d/%d] %s %s\n", pass + 1, o->repeat, n + 1, n_runs, cases[i].model, cases[i].layout);
        ts_validate_case *c = &out->cases[n];
        TS_CHECK(run_case(x, i, pass, c));
        say(o, "pass %d/%d [%d/%d] measured %.4f s\n", pass + 1, o->repeat, n + 1, n_runs, c->raw_s[pass]);
        n++;
    }
    out->n = n;
    return TS_OK;
}

/* With several calibrations, the one to simulate with: the median in-situ step's. */
static ts_status choose_profile(experiment *x) {
    int chosen = 0;
    TS_CHECK(median_profile(x->profiles, x->o->repeat, &chosen));
    x->system = x->profiles[chosen];
    say(x->o, "simulating with %s, the calibration with the median in-situ step\n", x->system);
    return TS_OK;
}

/* The median and the largest of n values, sorting them; NAN without values. */
static void median_worst(double *v, int n, double *median, double *worst) {
    *median = ts_median(v, n);
    *worst = n > 0 ? v[n - 1] : NAN;
}

/* Over the cases: median and worst |error| at the calibration's speed and as timed, and the
 * median spreads. */
static void summarize(ts_validate_result *r) {
    double err[TS_VALIDATE_CASES], raw[TS_VALIDATE_CASES], run_spread[TS_VALIDATE_CASES],
        raw_spread[TS_VALIDATE_CASES];
    int n = r->n;
    for (int i = 0; i < n; i++) {
        err[i] = fabs(r->cases[i].cmp.step_error);
        raw[i] = fabs(r->cases[i].raw_error);
        run_spread[i] = r->cases[i].run_spread;
        raw_spread[i] = r->cases[i].raw_spread;
    }
    median_worst(err, n, &r->median_abs_error, &r->max_abs_error);
    median_worst(raw, n, &r->median_abs_raw_error, &r->max_abs_raw_error);
    r->median_spread = ts_median(run_spread, n);
    r->median_raw_spread = ts_median(raw_spread, n);
    double steps[TS_VALIDATE_CASES], gauge[TS_VALIDATE_CASES];
    for (int i = 0; i < n; i++) {
        steps[i] = median_of(r->cases[i].step_spread, r->repeat);
        gauge[i] = median_of(r->cases[i].gauge_spread, r->repeat);
    }
    for (int k = 0; k < TS_VALIDATE_MEM_KINDS; k++) {
        int m = 0;
        for (int i = 0; i < n; i++)
            if (isfinite(r->cases[i].memory.error[k])) err[m++] = fabs(r->cases[i].memory.error[k]);
        median_worst(err, m, &r->memory_median_abs_error[k], &r->memory_max_abs_error[k]);
    }
    ts_validate_noise_judge(&r->noise, ts_median(steps, n), ts_median(gauge, n), r->repeat > 1 ? r->median_raw_spread : NAN);
    if (!r->replayed) return;
    for (int i = 0; i < n; i++) err[i] = fabs(r->cases[i].replay_error);
    median_worst(err, n, &r->replay_median_abs_error, &r->replay_max_abs_error);
}

/* Whether `passes` passes pin the measured steps down to `target`: the median over the cases of
 * their passes' spread ((max − min) / median, about two standard deviations for a few normal
 * samples: Tippett 1925's mean range is 1.13σ for 2, 1.69σ for 3, 2.06σ for 4) over √passes,
 * the standard error of a mean of that many, is at most the target. */
static int settled(const ts_validate_result *out, int passes, double target) {
    double s[TS_VALIDATE_CASES];
    for (int i = 0; i < out->n; i++) s[i] = spread(out->cases[i].raw_s, passes);
    return ts_median(s, out->n) / sqrt((double)passes) <= target;
}

/* The passes, the choice of calibration and the comparisons, in folder x->dir. */
static ts_status experiment_run(experiment *x, ts_validate_result *out) {
    const ts_validate_opts *o = x->o;
    int n_runs = 0;
    for (int i = 0; i < TS_VALIDATE_CASES; i++) n_runs += selected(o, i) && case_ranks(i) <= o->max_ranks;
    /* Each pass calibrates (unless opts.system) and then trains every case, so that calibrations
     * and runs alike sample the machine at R moments. */
    for (int pass = 0; pass < o->repeat; pass++) {
        TS_CHECK(run_pass(x, pass, n_runs, out));
        if (o->repeat_to > 0 && pass >= 1 && settled(out, pass + 1, o->repeat_to)) {
            say(o, "the passes' medians hold to %.1f%%: %d passes\n", 100 * o->repeat_to, pass + 1);
            x->o->repeat = pass + 1;
        }
    }
    out->repeat = o->repeat;
    if (o->system == NULL && o->repeat > 1) TS_CHECK(choose_profile(x));
    for (int k = 0; k < out->n; k++) {
        const ts_compare *c = &out->cases[k].cmp;
        TS_CHECK(compare_case(x, &out->cases[k]));
        say(o, "[%d/%d] simulated %.4f s, measured %.4f s (%+.1f%%)\n", k + 1, out->n, c->simulated_step_s,
            c->measured_step_s, 100 * c->step_error);
        out->cases[k].replay_error = NAN;
        if (!o->replay) continue;
        TS_CHECK(replay_case(x, &out->cases[k]));
        say(o, "[%d/%d] replayed %.4f s against %.4f s measured (%+.1f%%)\n", k + 1, out->n,
            out->cases[k].replay.replayed_step_s, out->cases[k].replay.measured_step_s,
            100 * out->cases[k].replay_error);
    }
    summarize(out);
    if (o->device != TS_DEVICE_CUDA) ts_validate_within_cores(out, (int)out->noise.cores);
    snprintf(out->system, sizeof out->system, "%s", x->system);
    return TS_OK;
}

ts_status ts_validate(const ts_validate_opts *o, ts_validate_result *out) {
    memset(out, 0, sizeof *out);
    out->steps = o->steps, out->repeat = o->repeat, out->batch = o->batch, out->seq = o->seq;
    out->replayed = o->replay;
    out->bf16 = ts_situ_mode_of(o->device).bf16;
    ts_validate_noise_start(&out->noise);
    char dir[4096];
    if (o->dir) {
        snprintf(dir, sizeof dir, "%s", o->dir);
    } else {
        snprintf(dir, sizeof dir, "/tmp/tessera-validate-XXXXXX");
        if (mkdtemp(dir) == NULL) return TS_FAIL(TS_ERR_IO, "cannot create a temporary folder in /tmp");
    }
    ts_validate_opts opts = *o;
    if (o->repeat_to > 0) opts.repeat = TS_VALIDATE_MAX_REPEAT; /* until settled */
    experiment x = {.o = &opts, .dir = dir, .system = o->system};
    ts_status res = TS_OK;
    out->cases = calloc(TS_VALIDATE_CASES, sizeof *out->cases);
    x.profiles = calloc(TS_VALIDATE_MAX_REPEAT, sizeof *x.profiles);
    if (out->cases == NULL || x.profiles == NULL) res = TS_FAIL(TS_ERR_NOMEM, "out of memory");
    if (res == TS_OK) res = experiment_run(&x, out);
    free(x.profiles);
    if (!o->dir) remove_tree(dir);
    return res;
}

void ts_validate_result_free(ts_validate_result *r) {
    for (int i = 0; r->cases && i < TS_VALIDATE_CASES; i++) ts_compare_free(&r->cases[i].cmp); /* zero or set */
    free(r->cases);
    r->cases = NULL;
    r->n = 0;
}
