/* `tessera run` against the one-process reference (exec/reference.h), and `run` as users see it.
 *
 * Suite `mpi`: these tests need Open MPI (`mpirun` on the PATH) and start processes — each runs
 * the built binary, which launches up to 8 ranks with mpirun (oversubscribed past this machine's
 * cores). Select them with --filter 'mpi/?*' (the parity cases alone: 'mpi/parity_*'), leave them
 * out with --filter '!(mpi/?*)'. Suite `run_cli` holds the refusals that stop before any rank
 * starts. The finite-difference check of the reference's backward (tiny and tiny-moe, every
 * parameter tensor) is in tests/test_exec_kernels.c, suite `exec_reference`: no MPI needed.
 *
 * Parity (llm.c's habit: the fast path diffed against the plain reference, failing loudly): for
 * each layout of the table (40: one rank, DP, TP, SP, PP with GPipe/1F1B/interleaved/ZB-H1, CP
 * (ring attention, cp=2 and 4), EP, ZeRO 1/2/3, recompute selective/full, and combinations up to
 * dp=2,tp=2,pp=2; ZB-H1 for tiny-moe too, its experts' and router's weight gradients deferred to W;
 * tiny-moe's experts apart from TP, etp=1 with tp=2, over EP groups spanning TP and DP ranks),
 * `tessera plan --fix <every field>` (tiny or tiny-moe on cpu-localhost, global batch 8 × 64
 * tokens, --dtype fp32) then `tessera run --steps 5 --json --params`, against exec/reference.h
 * trained in this process on the same seed (1234) and synthetic data with the same AdamW. Every
 * loss must agree within 1e-5 relative; the parameters within the bounds at PARAM_L2_RTOL below;
 * a failure names the worst element (tensor, layer, index). The reference runs once per model
 * per test run: the first test that needs it writes it to a cache folder made by a report hook
 * at start and removed at the end (workers take a lock). Batch and sequence are small because
 * the suite runs in `make test` on 2 cores.
 * Measured (this machine, 2026-11-21, batch 8 × 64): losses within 3.1e-7 relative for dense
 * layouts, 2e-6 for tiny-moe; parameters ‖p − ref‖ / ‖ref − init‖ 3.3e-5–7.3e-5 dense, up to
 * 2.3e-4 tiny-moe; max |p − ref| 1.6e-4–4.1e-4 dense, up to 3.8e-3 tiny-moe.
 *
 * Memory (the same runs): `run --json` prints the executor's peak bytes per category on the worst
 * rank ("memory_bytes") beside the planner's ts_evaluate of the plan's layout
 * ("planner_memory_bytes"). The plans are for cpu-localhost, CPU ranks, so the planner prices
 * what the executor holds (planner/memory_exec.h): weights, gradients, optimizer states,
 * activations and buffers are asserted within MEM_RTOL (2%, issue 23's target) on every case. The one
 * exception is a MoE layer's activations: the weight-gradient copies of its experts' rows follow
 * the routing the run draws (tiny-moe's router has no balancing loss; the busiest rank got 485 of
 * a mean 256 rows in one micro-batch), the planner prices the extreme of one step's draws
 * (planner/memory_exec.c), a run's peak is over all its steps, so they are held to
 * MEM_MOE_ACT_RTOL. Buffers are the executor's own (planner/memory_exec_buffers.h: workspace, the
 * store's shards, pipeline and mirror send copies), sized by the same functions, so they hold on
 * MoE layouts too.
 *
 * Under the sanitizers (make check) the subprocesses run with ASAN_OPTIONS=detect_leaks=0 (Open
 * MPI's own allocations at exit are not ours). A sanitized run costs 3.5–4× the CPU (measured:
 * dp=2 14 s against 3.8 s, tiny-moe ep=2 17 s against 4.4 s, dp=2,tp=2,pp=2 16 s against 4.8 s),
 * so only the 16 cases marked `san` run there — every parallel form once: DP with ZeRO 1/2/3, TP
 * with SP, each pipeline schedule, CP, full and selective recompute, the 8-rank 3-D layout, and
 * tiny-moe's EP with ZeRO-3, with TP+SP and with CP, and its ZB-H1; the others are reported skipped
 * (cr_skip_test), never passed. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/json.h"
#include "exec/reference.h"
#include "models/model.h"
#include "program/layout.h"
#include "program/ranks.h"
#include "tests/helpers.h"

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

#define BATCH 8
/* 64, not 32: at 32 tokens tiny-moe's router has a near tie at step 2 (top-2 logit gap 1.2e-5) and
 * the reference run against itself as 8 accumulated micro-batches already drifts 6e-6 in loss by
 * step 5 (tiny-moe cp=2,ep=2: 8.9e-6); at 64 the smallest gap over the 5 steps is 1.2e-4 and every
 * layout's losses stay within 2e-6. */
#define SEQ 64
#define STEPS 5
#define SEED 1234
#define LR 3e-3f /* `run`'s default (--lr) */
#define LOSS_RTOL 1e-5
/* Parameters: AdamW divides each gradient by its own running RMS, so an element whose gradient is
 * at the level of fp32 rounding (summation order differs between layouts) moves by up to ±LR per
 * step either way; no per-element relative bound holds for those few. What a bug does instead is
 * move whole tensors the wrong way: the difference, measured against how far training moved the
 * parameters (‖p − ref‖₂ / ‖ref − init‖₂), catches that. No element may stray by more than 3 LR:
 * noise moves one by about LR per affected step, an element updated the wrong way (or not at all)
 * for the 5 steps is off by up to 10 LR. Measured over the table: max |p − ref| up to 3.8e-3 =
 * 1.3 LR (tiny-moe tp=2,sp=1 and cp=2: an expert weight whose first two gradients were 6e-8 and
 * -1e-7).
 * The reference against itself (2, 4, 8 accumulated micro-batches) differs by up to 1.8e-4
 * (tiny) and 5.5e-4 (tiny-moe) per element: a bound of 1e-4 × max |ref| holds for no layout. */
#define PARAM_L2_RTOL 1e-3
#define PARAM_MAX_ABS (3 * LR)
#define MEM_RTOL 0.02
/* MoE activations: executor/planner up to 1.063 measured here (ZB-H1, dp=2,tp=2,pp=2,ep=2, over 5
 * steps; 1.003 over its first 3: the router trains, its skew and the run's peak grow with the steps,
 * while the planner prices one step's draws, planner/memory_exec.c) and 1.024 (DualPipe, ep=1) */
#define MEM_MOE_ACT_RTOL 0.10
/* One run of up to 8 ranks takes 2–20 s here (sanitized: longer); past this it is a hang. */
#define RUN_TIMEOUT_S (SANITIZED ? 600u : 240u)
#define REF_CACHE_ENV "TESSERA_TEST_REF_CACHE"

/* ---- The reference, computed once per model -------------------------------------------------- */

typedef struct {
    ts_model model;
    size_t n;              /* parameters */
    float losses[STEPS];   /* per step */
    float *init;           /* (n) before the first step; malloc'd */
    float *params;         /* (n) after STEPS steps; malloc'd */
} reference;

static void reference_compute(const char *name, reference *ref) {
    ts_ref r;
    cr_assert_eq(ts_ref_init(&r, &ref->model, SEQ, BATCH, SEED), TS_OK, "ts_ref_init(%s): %s", name,
                 ts_error_message());
    ref->n = r.n_params;
    ref->init = malloc(ref->n * sizeof *ref->init);
    ref->params = malloc(ref->n * sizeof *ref->params);
    int *tokens = malloc((size_t)BATCH * (SEQ + 1) * sizeof *tokens);
    cr_assert(tokens != NULL && ref->init != NULL && ref->params != NULL, "out of memory");
    memcpy(ref->init, r.param_mem, ref->n * sizeof *ref->init);
    for (int s = 0; s < STEPS; s++) {
        ts_synthetic_batch(SEED, s, BATCH, SEQ, (int)ref->model.vocab, tokens);
        ts_ref_zero_grad(&r);
        ref->losses[s] = ts_ref_forward(&r, tokens);
        ts_ref_backward(&r, 1.0f);
        cr_assert_eq(ts_ref_adamw(&r, LR, 0.9f, 0.95f, 1e-8f, 0.1f, s + 1), TS_OK, "ts_ref_adamw");
    }
    memcpy(ref->params, r.param_mem, ref->n * sizeof *ref->params);
    free(tokens);
    ts_ref_free(&r);
}

/* Cache file: uint64 n, float losses[STEPS], float init[n], float params[n]. Returns 0 when absent
 * or short. */
static int reference_read(const char *path, reference *ref) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return 0;
    uint64_t n = 0;
    int ok = fread(&n, sizeof n, 1, f) == 1 && fread(ref->losses, sizeof(float), STEPS, f) == STEPS;
    if (ok) {
        ref->n = (size_t)n;
        ref->init = malloc(ref->n * sizeof *ref->init);
        ref->params = malloc(ref->n * sizeof *ref->params);
        cr_assert(ref->init != NULL && ref->params != NULL, "out of memory");
        ok = fread(ref->init, sizeof *ref->init, ref->n, f) == ref->n &&
             fread(ref->params, sizeof *ref->params, ref->n, f) == ref->n;
        if (!ok) free(ref->init), free(ref->params), ref->init = ref->params = NULL;
    }
    fclose(f);
    return ok;
}

static void reference_write(const char *path, const reference *ref) {
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    cr_assert(f != NULL, "%s: %s", tmp, strerror(errno));
    uint64_t n = ref->n;
    int ok = fwrite(&n, sizeof n, 1, f) == 1 && fwrite(ref->losses, sizeof(float), STEPS, f) == STEPS &&
             fwrite(ref->init, sizeof *ref->init, ref->n, f) == ref->n &&
             fwrite(ref->params, sizeof *ref->params, ref->n, f) == ref->n;
    ok &= fclose(f) == 0;
    cr_assert(ok && rename(tmp, path) == 0, "writing %s failed", path);
}

/* The reference for model `name`, from the cache when a test has computed it already. */
static void reference_get(const char *name, reference *ref) {
    memset(ref, 0, sizeof *ref);
    cr_assert_eq(ts_model_load(name, &ref->model), TS_OK, "model %s: %s", name, ts_error_message());
    const char *dir = getenv(REF_CACHE_ENV);
    if (dir == NULL) {
        reference_compute(name, ref);
        return;
    }
    char path[PATH_MAX], lock[PATH_MAX + 8];
    snprintf(path, sizeof path, "%s/%s-b%d-s%d.bin", dir, name, BATCH, SEQ);
    snprintf(lock, sizeof lock, "%s.lock", path);
    int fd = open(lock, O_CREAT | O_RDWR, 0600);
    cr_assert(fd >= 0 && flock(fd, LOCK_EX) == 0, "%s: %s", lock, strerror(errno));
    if (!reference_read(path, ref)) {
        reference_compute(name, ref);
        reference_write(path, ref);
    }
    flock(fd, LOCK_UN);
    close(fd);
}

/* The cache folder is /tmp/tessera-ref-<runner pid>-XXXXXX. A runner killed before its POST_ALL
 * hook leaves its folder (two references, 67 MB) behind: each run first removes the folders of
 * runners that no longer exist. */
ReportHook(PRE_ALL)(struct criterion_test_set *set) {
    (void)set;
    DIR *tmp = opendir("/tmp");
    for (struct dirent *e; tmp && (e = readdir(tmp)) != NULL;) {
        long pid = 0;
        char rest[16];
        if (sscanf(e->d_name, "tessera-ref-%ld-%15s", &pid, rest) != 2 || pid <= 0) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char *stale = malloc(strlen(e->d_name) + 6);
        if (stale == NULL) break;
        sprintf(stale, "/tmp/%s", e->d_name);
        remove_dir(stale);
    }
    if (tmp) closedir(tmp);
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/tessera-ref-%ld-XXXXXX", (long)getpid());
    if (mkdtemp(dir) != NULL) setenv(REF_CACHE_ENV, dir, 1);
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats) {
    (void)stats;
    const char *dir = getenv(REF_CACHE_ENV);
    char *copy = dir ? strdup(dir) : NULL;
    if (copy) remove_dir(copy);
}

/* "layer 2 qkv[17, 5]" for element i of the reference's flat parameter order. */
static void param_name(const ts_model *m, size_t i, char *buf, size_t cap) {
    size_t start = 0;
    for (int l = -1; l < m->layers; l++) {
        int first = l < 0 ? TS_REF_EMBED : TS_REF_ATTN_NORM, last = l < 0 ? TS_REF_LM_HEAD : TS_REF_KIND_COUNT - 1;
        for (int k = first; k <= last; k++) {
            int64_t shape[3];
            int dims = ts_ref_tensor_shape(m, l < 0 ? 0 : l, (ts_ref_kind)k, shape);
            if (dims == 0) continue;
            size_t numel = 1;
            for (int d = 0; d < dims; d++) numel *= (size_t)shape[d];
            if (i < start + numel) {
                size_t off = i - start, idx[3];
                for (int d = dims - 1; d >= 0; d--) idx[d] = off % (size_t)shape[d], off /= (size_t)shape[d];
                int w = l < 0 ? snprintf(buf, cap, "%s[", ts_ref_kind_names[k])
                              : snprintf(buf, cap, "layer %d %s[", l, ts_ref_kind_names[k]);
                for (int d = 0; d < dims && w > 0 && (size_t)w < cap; d++)
                    w += snprintf(buf + w, cap - (size_t)w, "%s%zu", d ? ", " : "", idx[d]);
                if (w > 0 && (size_t)w < cap) snprintf(buf + w, cap - (size_t)w, "]");
                return;
            }
            start += numel;
        }
    }
    snprintf(buf, cap, "element %zu (past the last tensor)", i);
}

/* ---- Running the CLI ------------------------------------------------------------------------- */

static void suite_init(void) {
    /* Open MPI's allocations at exit are not ours; no effect without the sanitizers. */
    const char *old = getenv("ASAN_OPTIONS");
    char opts[1024];
    snprintf(opts, sizeof opts, "%s%sdetect_leaks=0", old ? old : "", old && *old ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
}

TestSuite(mpi, .init = suite_init);

static int layout_ranks(const char *text) {
    ts_layout l;
    cr_assert_eq(ts_layout_parse("test layout", text, &l), TS_OK, "%s", ts_error_message());
    return ts_rank_count(&l);
}

/* `tessera plan --dtype <dtype>` for `layout` (every field pinned) written to <dir>/plan-<dtype>.json. */
/* A plan of `layout` in `dtype`, with the training flag `flag` (NULL: none). */
static void make_plan_with(const char *dir, const char *model, const char *layout, const char *dtype,
                           const char *flag, char *plan, size_t cap) {
    char gpus[16], batch[16], seq[16];
    snprintf(gpus, sizeof gpus, "%d", layout_ranks(layout));
    snprintf(batch, sizeof batch, "%d", BATCH);
    snprintf(seq, sizeof seq, "%d", SEQ);
    snprintf(plan, cap, "%s/plan-%s.json", dir, dtype);
    cli_result r = run_cli("plan", "--model", model, "--system", "cpu-localhost", "--gpus", gpus,
                           "--global-batch", batch, "--seq", seq, "--dtype", dtype, "--fix", layout,
                           "--top", "1", "-o", plan, flag, NULL);
    cr_assert_eq(r.status, 0, "plan %s %s %s: exit %d, stderr: %s", model, layout, flag ? flag : "", r.status, r.err);
    cli_result_free(&r);
}

static void make_plan_dtype(const char *dir, const char *model, const char *layout, const char *dtype, char *plan,
                            size_t cap) {
    make_plan_with(dir, model, layout, dtype, NULL, plan, cap);
}

/* The executor trains fp32: plans for it are fp32 unless a test is about the dtype. */
static void make_plan(const char *dir, const char *model, const char *layout, char *plan, size_t cap) {
    make_plan_dtype(dir, model, layout, "fp32", plan, cap);
}

static double seconds_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

/* A file of float32 values (malloc'd) and their count. */
static float *read_floats(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    cr_assert(f != NULL, "%s was not written: %s", path, strerror(errno));
    cr_assert(fseek(f, 0, SEEK_END) == 0);
    long bytes = ftell(f);
    cr_assert(bytes >= 0 && bytes % (long)sizeof(float) == 0, "%s: %ld bytes", path, bytes);
    rewind(f);
    *n = (size_t)bytes / sizeof(float);
    float *p = malloc((size_t)bytes + 1);
    cr_assert(p != NULL, "out of memory");
    cr_assert_eq(fread(p, sizeof *p, *n, f), *n, "%s: short read", path);
    fclose(f);
    return p;
}

/* ---- Parity ---------------------------------------------------------------------------------- */

static const char *const mem_cats[] = {"weights", "grads", "optimizer", "activations", "buffers"};

typedef struct {
    const char *model;
    const char *layout; /* every field pinned, as the run reports it */
    int san;            /* also run under the sanitizers */
    const char *flag;   /* a training flag of the plan, or NULL */
} parity_case;

static void check_memory(const parity_case *c, const cJSON *root) {
    const cJSON *ex = json_obj(root, "memory_bytes", "$"), *pl = json_obj(root, "planner_memory_bytes", "$");
    double ratio[5];
    for (int k = 0; k < 5; k++) {
        double e = json_num(ex, mem_cats[k], "$.memory_bytes"), p = json_num(pl, mem_cats[k], "$.planner_memory_bytes");
        ratio[k] = p > 0 ? e / p : INFINITY;
        /* MoE activations follow the routing: see the top. Buffers are the executor's own on
         * CPU ranks (planner/memory_exec_buffers.h), every layout. */
        double tol = k == 3 && strstr(c->model, "moe") != NULL ? MEM_MOE_ACT_RTOL : MEM_RTOL;
        cr_expect(fabs(ratio[k] - 1) <= tol, "%s %s: %s executor %.0f B, planner %.0f B (ratio %.3f)", c->model,
                  c->layout, mem_cats[k], e, p, ratio[k]);
    }
    cr_log_info("memory %s %s: executor/planner weights %.3f grads %.3f optimizer %.3f activations %.3f "
                "buffers %.3f", c->model, c->layout, ratio[0], ratio[1], ratio[2], ratio[3], ratio[4]);
}

typedef struct {
    double rel_l2;   /* ‖p − ref‖₂ / ‖ref − init‖₂ */
    double worst;    /* max |p − ref|, infinite for a NaN */
    size_t worst_at; /* where */
} param_diff;

static param_diff compare_params(const reference *ref, const float *p) {
    param_diff d = {0, -1, 0};
    double diff2 = 0, moved2 = 0;
    for (size_t i = 0; i < ref->n; i++) {
        double e = fabs((double)p[i] - ref->params[i]), m = (double)ref->params[i] - ref->init[i];
        if (isnan(e)) e = INFINITY;
        diff2 += e * e;
        moved2 += m * m;
        if (e > d.worst) d.worst = e, d.worst_at = i;
    }
    d.rel_l2 = moved2 > 0 ? sqrt(diff2 / moved2) : INFINITY;
    return d;
}

static void check_parity(const parity_case *c) {
    if (SANITIZED && !c->san)
        cr_skip_test("%s %s: left out under the sanitizers (one layout per parallel form runs there)", c->model,
                     c->layout);
    char *dir = make_temp_dir();
    char plan[PATH_MAX], params[PATH_MAX];
    make_plan_with(dir, c->model, c->layout, "fp32", c->flag, plan, sizeof plan);
    snprintf(params, sizeof params, "%s/params.bin", dir);
    char steps[16];
    snprintf(steps, sizeof steps, "%d", STEPS);
    const char *args[] = {"run", "--plan", plan, "--steps", steps, "--warmup", "1", "--json", "--params", params, NULL};
    cli_result r = run_argv_timeout(args, RUN_TIMEOUT_S);
    cJSON *root = parse_json_output(&r, c->layout);
    cr_assert_str_eq(json_str(root, "layout", "$"), c->layout, "the plan's layout is not the pinned one");
    cr_expect_eq(json_num(root, "ranks", "$"), layout_ranks(c->layout));

    reference ref;
    reference_get(c->model, &ref);
    const cJSON *losses = cJSON_GetObjectItemCaseSensitive(root, "losses");
    cr_assert(cJSON_IsArray(losses) && cJSON_GetArraySize(losses) == STEPS, "%s: \"losses\" is not %d numbers",
              c->layout, STEPS);
    double loss_rel = 0;
    for (int s = 0; s < STEPS; s++) {
        double got = cJSON_GetArrayItem(losses, s)->valuedouble, want = ref.losses[s];
        loss_rel = fmax(loss_rel, fabs(got - want) / fabs(want));
        cr_expect(fabs(got - want) <= LOSS_RTOL * fabs(want), "%s %s: step %d loss %.9g, reference %.9g (rel %.3g)",
                  c->model, c->layout, s + 1, got, want, fabs(got - want) / fabs(want));
    }

    size_t n = 0;
    float *p = read_floats(params, &n);
    cr_assert_eq(n, ref.n, "%s: %zu parameters written, the reference has %zu", c->layout, n, ref.n);
    param_diff d = compare_params(&ref, p);
    char where[128];
    param_name(&ref.model, d.worst_at, where, sizeof where);
    cr_expect(d.rel_l2 <= PARAM_L2_RTOL && d.worst <= PARAM_MAX_ABS,
              "%s %s: ‖param − ref‖ / ‖ref − init‖ = %.3g (bound %.0e); max |param − ref| %.3g (bound %.2g) at "
              "element %zu = %s: got %.9g, reference %.9g",
              c->model, c->layout, d.rel_l2, PARAM_L2_RTOL, d.worst, PARAM_MAX_ABS, d.worst_at, where,
              p[d.worst_at], ref.params[d.worst_at]);
    cr_log_info("parity %s %s: loss rel %.2g, params rel L2 %.2g, max abs %.2g", c->model, c->layout, loss_rel,
                d.rel_l2, d.worst);
    check_memory(c, root);
    /* The routing's spread over the experts (moe.load_cv): measured for MoE models only. */
    const cJSON *cv = cJSON_GetObjectItemCaseSensitive(root, "moe_load_cv");
    if (strncmp(c->model, "tiny-moe", 8) == 0)
        cr_expect(cJSON_IsNumber(cv) && cv->valuedouble > 0 && cv->valuedouble < 4, "%s: moe_load_cv %s", c->layout,
                  cJSON_IsNumber(cv) ? "out of (0, 4)" : "missing");
    else
        cr_expect_null(cv, "%s: moe_load_cv for a dense model", c->layout);

    free(p);
    free(ref.init);
    free(ref.params);
    cJSON_Delete(root);
    cli_result_free(&r);
    remove_dir(dir);
}

/* name, model, layout, memory categories asserted, run under the sanitizers. */
#define PARITY_CASES(X)                                                                                             \
    X(one_rank, "tiny", "dp=1,tp=1,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none", 1)   \
    X(dp2, "tiny", "dp=2,tp=1,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none", 0)        \
    X(tp2, "tiny", "dp=1,tp=2,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=2,vpp=1,sched=1f1b,recompute=none", 0)        \
    X(tp2_sp, "tiny", "dp=1,tp=2,pp=1,cp=1,ep=1,sp=1,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none", 1)     \
    X(pp2_gpipe, "tiny", "dp=1,tp=1,pp=2,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=gpipe,recompute=none", 1) \
    X(pp2_1f1b, "tiny", "dp=1,tp=1,pp=2,cp=1,ep=1,sp=0,zero=0,mbs=2,vpp=1,sched=1f1b,recompute=none", 0)   \
    X(pp2_interleaved, "tiny", "dp=1,tp=1,pp=2,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=2,sched=interleaved,recompute=none", \
      1)                                                                                                   \
    X(pp2_zbh1, "tiny", "dp=1,tp=1,pp=2,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=zb-h1,recompute=none", 1)  \
    X(pp4_1f1b, "tiny", "dp=1,tp=1,pp=4,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none", 0)   \
    X(pp4_dualpipe, "tiny", "dp=1,tp=1,pp=4,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=2,sched=dualpipe,recompute=none",      \
      0)                                                                                                   \
    X(moe_tp2_pp2_sp_dualpipe, "tiny-moe",                                                                          \
      "dp=1,tp=2,pp=2,cp=1,ep=1,sp=1,zero=0,mbs=1,vpp=2,sched=dualpipe,recompute=none", 0)                 \
    X(pp2_zbv, "tiny", "dp=1,tp=1,pp=2,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=2,sched=zb-v,recompute=none", 0)    \
    X(zero1, "tiny", "dp=2,tp=1,pp=1,cp=1,ep=1,sp=0,zero=1,mbs=2,vpp=1,sched=1f1b,recompute=none", 1)      \
    X(zero2, "tiny", "dp=2,tp=1,pp=1,cp=1,ep=1,sp=0,zero=2,mbs=2,vpp=1,sched=1f1b,recompute=none",  \
      1)                                                                                                            \
    X(zero3_dp4, "tiny", "dp=4,tp=1,pp=1,cp=1,ep=1,sp=0,zero=3,mbs=1,vpp=1,sched=1f1b,recompute=none", 1)    \
    X(cp2, "tiny", "dp=1,tp=1,pp=1,cp=2,ep=1,sp=0,zero=0,mbs=2,vpp=1,sched=1f1b,recompute=none", 1)        \
    X(cp4, "tiny", "dp=1,tp=1,pp=1,cp=4,ep=1,sp=0,zero=0,mbs=2,vpp=1,sched=1f1b,recompute=none", 0)        \
    X(dp2_cp2_selective, "tiny", "dp=2,tp=1,pp=1,cp=2,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=selective", \
      0)                                                                                                   \
    X(cp2_tp2_sp_zero1, "tiny", "dp=1,tp=2,pp=1,cp=2,ep=1,sp=1,zero=1,mbs=2,vpp=1,sched=1f1b,recompute=none",       \
      0)                                                                                                   \
    X(tp2_sp_full, "tiny", "dp=1,tp=2,pp=1,cp=1,ep=1,sp=1,zero=0,mbs=2,vpp=1,sched=1f1b,recompute=full",   \
      1)                                                                                                            \
    X(pp2_selective, "tiny", "dp=1,tp=1,pp=2,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=selective",     \
      1)                                                                                                   \
    X(dp2_pp2_gpipe_full_zero1, "tiny",                                                                             \
      "dp=2,tp=1,pp=2,cp=1,ep=1,sp=0,zero=1,mbs=1,vpp=1,sched=gpipe,recompute=full", 0)                    \
    X(dp2_tp2_pp2_sp_zero1_interleaved, "tiny",                                                                     \
      "dp=2,tp=2,pp=2,cp=1,ep=1,sp=1,zero=1,mbs=1,vpp=2,sched=interleaved,recompute=none", 1)              \
    X(dp2_tp2_pp2_zero1_zbh1_selective, "tiny",                                                                     \
      "dp=2,tp=2,pp=2,cp=1,ep=1,sp=0,zero=1,mbs=1,vpp=1,sched=zb-h1,recompute=selective", 0)               \
    X(moe_ep2, "tiny-moe", "dp=2,tp=1,pp=1,cp=1,ep=2,sp=0,zero=0,mbs=2,vpp=1,sched=1f1b,recompute=none",   \
      0)                                                                                                            \
    X(moe_ep4_zero3, "tiny-moe", "dp=4,tp=1,pp=1,cp=1,ep=4,sp=0,zero=3,mbs=1,vpp=1,sched=1f1b,recompute=none",      \
      1)                                                                                                     \
    X(moe_dp4_ep2_zero3_full, "tiny-moe",                                                                           \
      "dp=4,tp=1,pp=1,cp=1,ep=2,sp=0,zero=3,mbs=1,vpp=1,sched=1f1b,recompute=full", 0)                     \
    X(moe_tp2_sp, "tiny-moe", "dp=1,tp=2,pp=1,cp=1,ep=1,sp=1,zero=0,mbs=2,vpp=1,sched=1f1b,recompute=none",         \
      0)                                                                                                   \
    X(moe_cp2, "tiny-moe", "dp=1,tp=1,pp=1,cp=2,ep=1,sp=0,zero=0,mbs=2,vpp=1,sched=1f1b,recompute=none",   \
      0)                                                                                                            \
    X(moe_dp2_tp2_sp_ep2_zero1, "tiny-moe",                                                                         \
      "dp=2,tp=2,pp=1,cp=1,ep=2,sp=1,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none", 1)                     \
    X(moe_cp2_ep2, "tiny-moe", "dp=1,tp=1,pp=1,cp=2,ep=2,sp=0,zero=0,mbs=2,vpp=1,sched=1f1b,recompute=none",        \
      1)                                                                                                   \
    X(moe_dp2_pp2_ep2_zero1, "tiny-moe",                                                                            \
      "dp=2,tp=1,pp=2,cp=1,ep=2,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none", 0)                     \
    X(moe_pp2_zbh1, "tiny-moe", "dp=1,tp=1,pp=2,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=zb-h1,recompute=none",      \
      1)                                                                                                   \
    X(moe_dp2_tp2_pp2_sp_ep2_zero1_zbh1, "tiny-moe",                                                                \
      "dp=2,tp=2,pp=2,cp=1,ep=2,sp=1,zero=1,mbs=1,vpp=1,sched=zb-h1,recompute=none", 0)                     \
    X(moe_node_limited_ep2, "tiny-moe-grouped",                                                                     \
      "dp=2,tp=1,pp=1,cp=1,ep=2,sp=0,zero=0,mbs=2,vpp=1,sched=1f1b,recompute=none", 0)                              \
    X(moe_tp2_sp_ep2_etp1, "tiny-moe",                                                                              \
      "dp=1,tp=2,pp=1,cp=1,ep=2,sp=1,zero=0,mbs=2,vpp=1,sched=1f1b,recompute=none,etp=1", 1)                        \
    X(moe_tp2_sp_ep1_etp1_zero1, "tiny-moe",                                                                           \
      "dp=1,tp=2,pp=1,cp=1,ep=1,sp=1,zero=1,mbs=2,vpp=1,sched=1f1b,recompute=none,etp=1", 0)                        \
    X(moe_dp2_tp2_sp_ep2_etp1_zero1, "tiny-moe",                                                                    \
      "dp=2,tp=2,pp=1,cp=1,ep=2,sp=1,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none,etp=1", 0)                        \
    X(moe_dp2_tp2_sp_ep4_etp1_zero3, "tiny-moe",                                                                    \
      "dp=2,tp=2,pp=1,cp=1,ep=4,sp=1,zero=3,mbs=1,vpp=1,sched=1f1b,recompute=none,etp=1", 0)                        \
    X(moe_tp2_pp2_sp_ep2_etp1_zbh1, "tiny-moe",                                                                     \
      "dp=1,tp=2,pp=2,cp=1,ep=2,sp=1,zero=0,mbs=1,vpp=1,sched=zb-h1,recompute=none,etp=1", 0)                       \
    X(moe_tp2_cp2_sp_ep2_etp1_zero1_full, "tiny-moe",                                                               \
      "dp=1,tp=2,pp=1,cp=2,ep=2,sp=1,zero=1,mbs=2,vpp=1,sched=1f1b,recompute=full,etp=1", 0)

#define PARITY_TEST(name_, model_, layout_, san_)                                                             \
    Test(mpi, parity_##name_) {                                                                                     \
        check_parity(&(parity_case){.model = model_, .layout = layout_, .san = san_}); \
    }
PARITY_CASES(PARITY_TEST)

/* Megatron-Core's combined 1F1B (program/sched_combined.c): each forward paired with an earlier
 * micro-batch's backward, their ops interleaved at the EP collectives, trains as one rank does. */
#define COMBINED "--overlap-moe-expert-parallel-comm"
Test(mpi, parity_moe_dp2_ep2_combined_1f1b) {
    check_parity(&(parity_case){.model = "tiny-moe", .flag = COMBINED, .san = 1,
                                .layout = "dp=2,tp=1,pp=1,cp=1,ep=2,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none"});
}
Test(mpi, parity_moe_dp2_pp2_ep2_interleaved_combined_1f1b) {
    check_parity(&(parity_case){.model = "tiny-moe", .flag = COMBINED,
                                .layout = "dp=2,tp=1,pp=2,cp=1,ep=2,sp=0,zero=1,mbs=1,vpp=2,sched=interleaved,recompute=none"});
}
Test(mpi, parity_moe_tp2_sp_ep2_etp1_combined_1f1b) {
    check_parity(&(parity_case){.model = "tiny-moe", .flag = COMBINED,
                                .layout = "dp=1,tp=2,pp=1,cp=1,ep=2,sp=1,zero=0,mbs=2,vpp=1,sched=1f1b,recompute=none,etp=1"});
}

/* Selective recompute of Megatron-Core's modules (program/problem.h ts_recompute_module): the
 * step program replays each module's forward ops before the layer's backward, the MLP block's
 * TP collectives and the MoE block's EP exchange included, and trains as one rank does. */
Test(mpi, parity_tp2_pp2_sp_recompute_layernorm_mlp) {
    check_parity(&(parity_case){.model = "tiny", .flag = "--recompute-modules=layernorm,mlp", .san = 1,
                                .layout = "dp=1,tp=2,pp=2,cp=1,ep=1,sp=1,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=selective"});
}
Test(mpi, parity_moe_tp2_sp_ep2_recompute_moe) {
    check_parity(&(parity_case){.model = "tiny-moe", .flag = "--recompute-modules=moe,layernorm",
                                .layout = "dp=2,tp=2,pp=1,cp=1,ep=2,sp=1,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=selective,etp=1"});
}
Test(mpi, parity_moe_dp2_ep2_recompute_moe_act) {
    check_parity(&(parity_case){.model = "tiny-moe", .flag = "--recompute-modules=moe_act,core_attn",
                                .layout = "dp=2,tp=1,pp=1,cp=1,ep=2,sp=0,zero=0,mbs=2,vpp=1,sched=1f1b,recompute=selective"});
}

/* ---- The command ----------------------------------------------------------------------------- */

#define TP2 "dp=1,tp=2,pp=1,cp=1,ep=1,sp=1,zero=0,mbs=2,vpp=1,sched=1f1b,recompute=none"

/* Runs `tessera args...` with stderr on a pipe and returns the exit status, what stderr said, and
 * the seconds from the first stderr line holding `marker` to the end of the job (the exit of the
 * CLI and the close of its stderr by every process it started); negative when `marker` never
 * appeared. Measuring from the failure, not from the launch, keeps start-up on a loaded machine
 * out of the figure. */
static int run_marker_to_end(const char *const *args, const char *marker, char *err, size_t cap, double *after_s) {
    char *argv[CLI_MAX_ARGS + 2] = {strdup(tessera_binary())};
    int n = 1;
    for (; args[n - 1] != NULL && n <= CLI_MAX_ARGS; n++) argv[n] = strdup(args[n - 1]);
    argv[n] = NULL;
    int fds[2];
    for (int i = 0; i < n; i++) cr_assert(argv[i] != NULL, "out of memory");
    cr_assert(pipe(fds) == 0, "pipe: %s", strerror(errno));
    const char *data = data_root();
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(null, STDOUT_FILENO) < 0 || dup2(fds[1], STDERR_FILENO) < 0)
            _exit(126);
        close(fds[0]);
        close(fds[1]);
        setenv("TESSERA_DATA", data, 1);
        alarm(CLI_TIMEOUT_S);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    size_t len = 0;
    struct timespec seen = {0};
    int found = 0;
    err[0] = '\0';
    for (;;) {
        char chunk[4096];
        ssize_t got = read(fds[0], chunk, sizeof chunk);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        size_t keep = (size_t)got < cap - 1 - len ? (size_t)got : cap - 1 - len; /* the start is enough */
        memcpy(err + len, chunk, keep);
        len += keep;
        err[len] = '\0';
        if (!found && strstr(err, marker) != NULL) found = 1, clock_gettime(CLOCK_MONOTONIC, &seen);
    }
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0) cr_assert(errno == EINTR, "waitpid: %s", strerror(errno));
    *after_s = found ? seconds_since(&seen) : -1;
    for (int i = 0; i < n; i++) free(argv[i]);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

Test(mpi, failing_rank_ends_the_job) {
    char *dir = make_temp_dir();
    char plan[PATH_MAX];
    make_plan(dir, "tiny", "dp=2,tp=2,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none", plan,
              sizeof plan);
    setenv("TESSERA_FAULT_RANK", "1", 1);
    setenv("TESSERA_FAULT_STEP", "1", 1);
    const char *args[] = {"run", "--plan", plan, "--steps", "5", "--warmup", "1", NULL};
    char err[16384];
    double after = 0;
    int status = run_marker_to_end(args, "rank 1: injected fault at step 1", err, sizeof err, &after);
    unsetenv("TESSERA_FAULT_RANK");
    unsetenv("TESSERA_FAULT_STEP");
    cr_expect(status != 0 && status < 128, "exit %d (expected a failure status, not a signal)", status);
    cr_expect(after >= 0, "stderr does not name rank 1: %s", err);
    cr_expect(after < 10, "the job took %.1f s to end after rank 1 reported its failure", after);
    cr_log_info("rank 1 failed at step 1; the job ended %.2f s after it said so", after);
    remove_dir(dir);
}

Test(mpi, oversubscribing_is_said) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int ranks = 2;
    while (ranks <= cores) ranks *= 2;
    if (ranks > BATCH) cr_skip_test("%ld cores: more ranks than cores needs dp > %d, the global batch", cores, BATCH);
    char layout[128], *dir = make_temp_dir(), plan[PATH_MAX];
    snprintf(layout, sizeof layout, "dp=%d,tp=1,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none",
             ranks);
    make_plan(dir, "tiny", layout, plan, sizeof plan);
    const char *args[] = {"run", "--plan", plan, "--steps", "2", "--warmup", "1", "--json", NULL};
    cli_result r = run_argv_timeout(args, RUN_TIMEOUT_S);
    cJSON *root = parse_json_output(&r, "run --json");
    char said[160];
    snprintf(said, sizeof said, "tessera run: %d ranks on %ld cores: oversubscribing, each rank bound to a core, round-robin\n",
             ranks, cores);
    cr_expect(strstr(r.err, said) != NULL, "stderr does not say \"%s\": %s", said, r.err);
    cr_expect_eq(json_num(root, "ranks", "$"), ranks);
    cJSON_Delete(root);
    cli_result_free(&r);
    remove_dir(dir);
}

/* "memory_bytes_by_rank" of a run whose ranks 2k, 2k+1 are stage k (tp=2): one entry per rank in
 * rank order, categories adding to the total, "memory_bytes" their maximum over the ranks, TP peers
 * alike, and the stages apart (the first holds the embedding, the last the head). */
static void check_memory_by_rank(const cJSON *root, int ranks) {
    const cJSON *by = cJSON_GetObjectItemCaseSensitive(root, "memory_bytes_by_rank");
    const cJSON *worst = json_obj(root, "memory_bytes", "$");
    cr_assert(cJSON_IsArray(by) && cJSON_GetArraySize(by) == ranks, "$.memory_bytes_by_rank is not %d entries",
              ranks);
    double max[5] = {0}, v[8][5];
    cr_assert(ranks <= 8 && ranks % 2 == 0);
    for (int r = 0; r < ranks; r++) {
        const cJSON *e = cJSON_GetArrayItem(by, r);
        cr_expect_eq(json_num(e, "rank", "$.memory_bytes_by_rank[]"), r);
        cr_expect_eq(json_num(e, "stage", "$.memory_bytes_by_rank[]"), r / 2);
        double sum = 0;
        for (int k = 0; k < 5; k++) {
            v[r][k] = json_num(e, mem_cats[k], "$.memory_bytes_by_rank[]");
            cr_expect(v[r][k] >= 0, "rank %d %s = %g", r, mem_cats[k], v[r][k]);
            sum += v[r][k];
            max[k] = fmax(max[k], v[r][k]);
        }
        double total = json_num(e, "total", "$.memory_bytes_by_rank[]");
        cr_expect(fabs(total - sum) <= 1e-9 * sum, "rank %d: total %g, categories add to %g", r, total, sum);
        cr_expect(v[r][0] > 0, "rank %d holds no weights", r);
        if (r % 2) cr_expect(v[r][0] == v[r - 1][0], "TP peers %d and %d hold %g and %g bytes of weights", r - 1, r,
                             v[r - 1][0], v[r][0]);
    }
    for (int k = 0; k < 5; k++)
        cr_expect_eq(max[k], json_num(worst, mem_cats[k], "$.memory_bytes"),
                     "$.memory_bytes.%s is not the largest rank's", mem_cats[k]);
    cr_expect(v[0][0] != v[ranks - 1][0], "the first and last stages hold the same weights (%g bytes)", v[0][0]);
}

/* The fields of DESIGN.md's run JSON and more, checked on the numbers they must satisfy. */
static void check_run_json(const cJSON *root, const char *layout, int ranks, int steps, int warmup) {
    cr_expect_str_eq(json_str(root, "layout", "$"), layout);
    cr_expect_str_eq(json_str(root, "model", "$"), "tiny");
    cr_expect_eq(json_num(root, "ranks", "$"), ranks);
    cr_expect_eq(json_num(root, "steps", "$"), steps);
    cr_expect_eq(json_num(root, "warmup", "$"), warmup);
    const cJSON *step = json_obj(root, "step_s", "$");
    double med = json_num(step, "median", "$.step_s"), p10 = json_num(step, "p10", "$.step_s"),
           p90 = json_num(step, "p90", "$.step_s");
    cr_expect(p10 > 0 && p10 <= med && med <= p90 && p90 < 60, "step_s p10 %g, median %g, p90 %g", p10, med, p90);
    const cJSON *losses = cJSON_GetObjectItemCaseSensitive(root, "losses");
    cr_assert(cJSON_IsArray(losses) && cJSON_GetArraySize(losses) == steps, "\"losses\" is not %d numbers", steps);
    for (int s = 0; s < steps; s++) {
        const cJSON *l = cJSON_GetArrayItem(losses, s);
        cr_expect(cJSON_IsNumber(l) && isfinite(l->valuedouble) && l->valuedouble > 0, "losses[%d]", s);
    }
    cr_expect(cJSON_GetArrayItem(losses, steps - 1)->valuedouble < cJSON_GetArrayItem(losses, 0)->valuedouble,
              "the loss did not fall in %d steps", steps);
    cr_expect(json_num(json_obj(root, "kind_s", "$"), "gemm", "$.kind_s") > 0, "no GEMM time");
    const char *const blocks[] = {"memory_bytes", "planner_memory_bytes"};
    for (int b = 0; b < 2; b++) {
        const cJSON *m = json_obj(root, blocks[b], "$");
        double sum = 0;
        for (int k = 0; k < 5; k++) {
            double v = json_num(m, mem_cats[k], blocks[b]);
            cr_expect(v >= 0, "$.%s.%s = %g", blocks[b], mem_cats[k], v);
            sum += v;
        }
        double total = json_num(m, "total", blocks[b]);
        cr_expect(fabs(total - sum) <= 1e-9 * sum, "$.%s.total %g, categories add to %g", blocks[b], total, sum);
        cr_expect(json_num(m, "weights", blocks[b]) > 0, "$.%s.weights is 0", blocks[b]);
    }
    check_memory_by_rank(root, ranks);
}

/* The Chrome trace of a run whose ranks 2k, 2k+1 are stage k: one named process per rank, phases
 * X and M only, every op inside the slowest step, GEMMs on every rank. */
static void check_run_trace(const char *path, int ranks, double step_s) {
    char *text = read_file(path);
    cr_assert(text != NULL, "%s was not written", path);
    cJSON *root = cJSON_Parse(text);
    cr_assert(root != NULL, "the trace is not JSON: %.200s", text);
    const cJSON *events = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    cr_assert(cJSON_IsArray(events), "$.traceEvents is not an array");
    int named[8] = {0}, gemms[8] = {0};
    cr_assert(ranks <= 8);
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        const char *ph = json_str(e, "ph", "event");
        int pid = (int)json_num(e, "pid", "event");
        cr_assert(pid >= 0 && pid < ranks, "event of pid %d in a %d-rank run", pid, ranks);
        if (strcmp(ph, "M") == 0) {
            if (strcmp(json_str(e, "name", "metadata"), "process_name") != 0) continue;
            char want[32];
            snprintf(want, sizeof want, "rank %d (stage %d)", pid, pid / 2);
            const char *name = json_str(json_obj(e, "args", "metadata"), "name", "metadata args");
            cr_expect_str_eq(name, want, "process %d", pid);
            named[pid]++;
            continue;
        }
        cr_assert_str_eq(ph, "X", "event of phase \"%s\"", ph);
        double ts = json_num(e, "ts", "event"), dur = json_num(e, "dur", "event");
        cr_expect(ts >= 0 && dur >= 0 && ts + dur <= step_s * 1e6 * 1.001 + 1,
                  "op at %g µs for %g µs in a step of at most %g µs", ts, dur, step_s * 1e6);
        gemms[pid] += strcmp(json_str(e, "cat", "event"), "gemm") == 0;
    }
    for (int k = 0; k < ranks; k++) {
        cr_expect_eq(named[k], 1, "rank %d has %d process names", k, named[k]);
        cr_expect(gemms[k] > 0, "rank %d has no GEMM in the trace", k);
    }
    free(text);
    cJSON_Delete(root);
}

/* One run serves both checks: starting ranks is what costs here. */
Test(mpi, json_fields_and_trace) {
    const char *layout = "dp=1,tp=2,pp=2,cp=1,ep=1,sp=1,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none";
    enum { RANKS = 4, RUN_STEPS = 4 };
    char *dir = make_temp_dir(), plan[PATH_MAX], trace[PATH_MAX];
    make_plan(dir, "tiny", layout, plan, sizeof plan);
    snprintf(trace, sizeof trace, "%s/run.trace.json", dir);
    /* Only the last step is measured, so the statistics are that step: the one the trace holds. */
    const char *args[] = {"run", "--plan", plan, "--steps", "4", "--warmup", "3", "--json", "--trace", trace, NULL};
    cli_result r = run_argv_timeout(args, RUN_TIMEOUT_S);
    cJSON *out = parse_json_output(&r, "run --json --trace");
    check_run_json(out, layout, RANKS, RUN_STEPS, RUN_STEPS - 1);
    check_run_trace(trace, RANKS, json_num(json_obj(out, "step_s", "$"), "p90", "$.step_s"));
    /* The speed gauge (exec/speed_gauge.h): a speed per step, the one measured step's work is its
     * time × its speed, and the trace carries the traced (last) step's speed. */
    const cJSON *gauge = json_obj(out, "gauge", "$"), *speeds = cJSON_GetObjectItemCaseSensitive(gauge, "flops_per_s");
    cr_assert(cJSON_IsArray(speeds) && cJSON_GetArraySize(speeds) == RUN_STEPS, "$.gauge.flops_per_s");
    for (int s = 0; s < RUN_STEPS; s++) {
        double v = cJSON_GetArrayItem(speeds, s)->valuedouble;
        cr_expect(v > 1e8 && v < 1e13, "step %d: gauge %g FLOP/s", s, v);
    }
    double last = cJSON_GetArrayItem(speeds, RUN_STEPS - 1)->valuedouble;
    double step = json_num(json_obj(out, "step_s", "$"), "median", "$.step_s");
    cr_expect(fabs(json_num(gauge, "step_flop_median", "$.gauge") / (step * last) - 1) < 1e-9, "work %g, step %g s × %g",
              json_num(gauge, "step_flop_median", "$.gauge"), step, last);
    cr_expect_eq(json_num(gauge, "median_flops_per_s", "$.gauge"), last);
    /* Every rank's readings, before the first step and after each: a rank's speed over a step is
     * the mean of the two either side of it, a stage's its slowest rank's, the step's the
     * harmonic mean of the stages' (tp=2 × pp=2: ranks by memory_bytes_by_rank's stage). */
    const cJSON *readings = cJSON_GetObjectItemCaseSensitive(gauge, "readings_flops_per_s");
    const cJSON *by_rank = cJSON_GetObjectItemCaseSensitive(out, "memory_bytes_by_rank");
    cr_assert(cJSON_IsArray(readings) && cJSON_GetArraySize(readings) == RANKS, "$.gauge.readings_flops_per_s");
    cr_assert(cJSON_IsArray(by_rank) && cJSON_GetArraySize(by_rank) == RANKS, "$.memory_bytes_by_rank");
    for (int s = 0; s < RUN_STEPS; s++) {
        double slowest[2] = {INFINITY, INFINITY};
        for (int k = 0; k < RANKS; k++) {
            const cJSON *mine = cJSON_GetArrayItem(readings, k);
            cr_assert(cJSON_IsArray(mine) && cJSON_GetArraySize(mine) == RUN_STEPS + 1, "rank %d's readings", k);
            int stage = (int)json_num(cJSON_GetArrayItem(by_rank, k), "stage", "$.memory_bytes_by_rank[]");
            cr_assert(stage == 0 || stage == 1, "rank %d in stage %d", k, stage);
            double v = 0.5 * (cJSON_GetArrayItem(mine, s)->valuedouble + cJSON_GetArrayItem(mine, s + 1)->valuedouble);
            slowest[stage] = fmin(slowest[stage], v);
        }
        double want = 2 / (1 / slowest[0] + 1 / slowest[1]), v = cJSON_GetArrayItem(speeds, s)->valuedouble;
        cr_expect(fabs(want / v - 1) < 1e-12, "step %d: speed %g, from the readings %g", s, v, want);
    }
    /* Every step's time, the measured (last) one the median. */
    const cJSON *each = cJSON_GetObjectItemCaseSensitive(json_obj(out, "step_s", "$"), "each");
    cr_assert(cJSON_IsArray(each) && cJSON_GetArraySize(each) == RUN_STEPS, "$.step_s.each");
    cr_expect(fabs(cJSON_GetArrayItem(each, RUN_STEPS - 1)->valuedouble / step - 1) < 1e-6, "the last step is the median");
    cJSON *tr = NULL;
    cr_assert_eq(ts_json_load_file(trace, &tr), TS_OK, "%s", ts_error_message());
    cr_expect(fabs(json_num(json_obj(tr, "otherData", "$"), "gauge_flops_per_s", "$.otherData") / last - 1) < 1e-12,
              "the trace's gauge is the last step's");
    cJSON_Delete(tr);
    cJSON_Delete(out);
    cli_result_free(&r);
    remove_dir(dir);
}

/* With --precision bf16 the note says what trains: bf16 mixed precision, still in fp32 allocations
 * (the planner memory beside the measured one stays the fp32 plan's). */
Test(mpi, bf16_precision_run_says_what_trains) {
    char *dir = make_temp_dir(), plan[PATH_MAX];
    make_plan_dtype(dir, "tiny", "dp=1,tp=1,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=2,vpp=1,sched=1f1b,recompute=none", "bf16",
                    plan, sizeof plan);
    const char *args[] = {"run", "--plan", plan, "--steps", "1", "--warmup", "0", "--precision", "bf16", NULL};
    cli_result r = run_argv_timeout(args, RUN_TIMEOUT_S);
    cr_expect_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, "the executor trains bf16 mixed precision in fp32 allocations") != NULL, "%s", r.err);
    cr_expect(strstr(r.err, "trains in fp32") == NULL, "%s", r.err);
    cli_result_free(&r);
    remove_dir(dir);
}

/* A plan made for bf16 (plan's default) trains fp32, as every run does: stderr says so once, the
 * JSON names both dtypes, and the planner memory beside the measured one is the fp32 plan's, not
 * the bf16 one's (about half the weights, gradients and activations). */
Test(mpi, bf16_plan_trains_fp32_and_says_so) {
    const char *layout = "dp=1,tp=1,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=2,vpp=1,sched=1f1b,recompute=none";
    const char *const dtypes[] = {"bf16", "fp32"};
    const char *note = "tessera run: note: the plan is for bf16; the executor trains in fp32";
    char *dir = make_temp_dir();
    cJSON *out[2];
    for (int i = 0; i < 2; i++) {
        char plan[PATH_MAX];
        make_plan_dtype(dir, "tiny", layout, dtypes[i], plan, sizeof plan);
        const char *args[] = {"run", "--plan", plan, "--steps", "2", "--warmup", "1", "--json", NULL};
        cli_result r = run_argv_timeout(args, RUN_TIMEOUT_S);
        out[i] = parse_json_output(&r, dtypes[i]);
        const char *at = strstr(r.err, note);
        cr_expect(i == 0 ? at != NULL && strstr(at + 1, note) == NULL : at == NULL,
                  "%s plan: stderr should say \"%s\" %s: %s", dtypes[i], note, i == 0 ? "once" : "never", r.err);
        cr_expect_str_eq(json_str(out[i], "dtype", "$"), "fp32");
        cr_expect_str_eq(json_str(out[i], "plan_dtype", "$"), dtypes[i]);
        cli_result_free(&r);
    }
    const cJSON *pm[2] = {json_obj(out[0], "planner_memory_bytes", "$"), json_obj(out[1], "planner_memory_bytes", "$")};
    for (int k = 0; k < 5; k++) {
        double b = json_num(pm[0], mem_cats[k], "bf16 run"), f = json_num(pm[1], mem_cats[k], "fp32 run");
        cr_expect(b == f, "planner_memory_bytes.%s: %.0f B from the bf16 plan, %.0f B from the fp32 plan", mem_cats[k],
                  b, f);
    }
    const cJSON *l0 = cJSON_GetObjectItemCaseSensitive(out[0], "losses"), *l1 = cJSON_GetObjectItemCaseSensitive(out[1], "losses");
    cr_assert(cJSON_GetArraySize(l0) == 2 && cJSON_GetArraySize(l1) == 2, "\"losses\" is not 2 numbers");
    for (int s = 0; s < 2; s++)
        cr_expect(cJSON_GetArrayItem(l0, s)->valuedouble == cJSON_GetArrayItem(l1, s)->valuedouble,
                  "step %d: the bf16 plan's loss differs from the fp32 plan's", s + 1);
    cJSON_Delete(out[0]);
    cJSON_Delete(out[1]);
    remove_dir(dir);
}

/* The GPU's two streams, checked on CPU ranks (exec/op_streams.h): issuing the DP stream's ops
 * as early (dp-early) or as late (dp-late) as their waits allow trains exactly as the program
 * order does, bit for bit: the same losses and the same parameters. A wait the analysis missed
 * shows here: without the embedding's gradients in its bucket's wait, dp-early's second loss
 * moved by 2.3e-4 relative (ZeRO-1, dp=2, mbs=2; seen while writing this test). Layouts: ZeRO-2's per-layer reductions into the
 * one-layer buffer, ZeRO-3's per-layer gathers that release other layers (shared and expert
 * parameters apart, over their own groups), and EP with PP under ZeRO-1 (expert reductions, two
 * stages). */
Test(mpi, stream_orders_train_alike) {
    static const struct {
        const char *model, *layout;
    } cases[] = {
        {"tiny", "dp=2,tp=1,pp=1,cp=1,ep=1,sp=0,zero=2,mbs=1,vpp=1,sched=1f1b,recompute=none"},
        {"tiny", "dp=4,tp=1,pp=1,cp=1,ep=1,sp=0,zero=3,mbs=1,vpp=1,sched=1f1b,recompute=none"},
        {"tiny", "dp=2,tp=1,pp=1,cp=2,ep=1,sp=0,zero=3,mbs=1,vpp=1,sched=1f1b,recompute=full"},
        {"tiny-moe", "dp=2,tp=1,pp=2,cp=1,ep=2,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none"},
        {"tiny-moe", "dp=4,tp=1,pp=1,cp=1,ep=2,sp=0,zero=3,mbs=1,vpp=1,sched=1f1b,recompute=none"},
    };
    const char *const orders[] = {"program", "dp-early", "dp-late"};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        if (SANITIZED && c > 0) break; /* one layout under the sanitizers */
        char *dir = make_temp_dir(), plan[PATH_MAX];
        make_plan(dir, cases[c].model, cases[c].layout, plan, sizeof plan);
        cJSON *out[3];
        float *params[3];
        size_t n[3];
        for (int o = 0; o < 3; o++) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/params-%s.bin", dir, orders[o]);
            const char *args[] = {"run", "--plan", plan, "--steps", "3", "--warmup", "1", "--json",
                                  "--stream-order", orders[o], "--params", path, NULL};
            cli_result r = run_argv_timeout(args, RUN_TIMEOUT_S);
            out[o] = parse_json_output(&r, orders[o]);
            params[o] = read_floats(path, &n[o]);
            cli_result_free(&r);
        }
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(out[0], "losses");
        cr_assert(cJSON_GetArraySize(want) == 3, "%s: \"losses\" is not 3 numbers", cases[c].layout);
        for (int o = 1; o < 3; o++) {
            const cJSON *got = cJSON_GetObjectItemCaseSensitive(out[o], "losses");
            cr_assert(cJSON_GetArraySize(got) == 3, "%s %s: \"losses\" is not 3 numbers", cases[c].layout, orders[o]);
            for (int s = 0; s < 3; s++) {
                double g = cJSON_GetArrayItem(got, s)->valuedouble, w = cJSON_GetArrayItem(want, s)->valuedouble;
                cr_expect(g == w, "%s %s: step %d loss %.9g, program order %.9g", cases[c].layout, orders[o], s + 1,
                          g, w);
            }
            cr_expect(n[o] == n[0] && memcmp(params[o], params[0], n[0] * sizeof(float)) == 0,
                      "%s %s: the trained parameters differ from the program order's", cases[c].layout, orders[o]);
        }
        for (int o = 0; o < 3; o++) {
            cJSON_Delete(out[o]);
            free(params[o]);
        }
        remove_dir(dir);
    }
}

/* `--stream-order` takes program, dp-early or dp-late. */
Test(run_cli, bad_stream_order) {
    cli_result r = run_cli("run", "--plan", "x.json", "--stream-order", "late", NULL);
    cr_expect_eq(r.status, 2, "exit %d", r.status);
    cr_expect(strstr(r.err, "program, dp-early or dp-late") != NULL, "stderr: %s", r.err);
    cli_result_free(&r);
}

/* Layouts the executor refuses (ts_trainer_check) are refused by the CLI before mpirun starts: exit
 * 2, one line, no rank launched. */
Test(run_cli, unsupported_layout_is_refused_before_mpirun) {
    static const struct {
        const char *model, *layout, *says;
    } cases[] = {
        {"tiny", "dp=2,tp=1,pp=1,cp=1,ep=1,sp=0,zero=2,mbs=1,vpp=1,sched=zb-h1,recompute=none",
         "ZB-H1 only with zero <= 1 (got zero=2)"},
        {"tiny", "dp=1,tp=8,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none",
         "tp=8 to divide 4 kv heads"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *dir = make_temp_dir(), plan[PATH_MAX];
        make_plan(dir, cases[i].model, cases[i].layout, plan, sizeof plan);
        const char *args[] = {"run", "--plan", plan, "--steps", "3", "--warmup", "1", NULL};
        cli_result r = run_argv(args);
        cr_expect_eq(r.status, 2, "%s: exit %d, stderr: %s", cases[i].layout, r.status, r.err);
        cr_expect(one_line_error(r.err, "run"), "%s: not one line: %s", cases[i].layout, r.err);
        cr_expect(strstr(r.err, cases[i].says) != NULL, "%s: stderr does not say \"%s\": %s", cases[i].layout,
                  cases[i].says, r.err);
        cr_expect(strstr(r.err, "mpirun") == NULL, "%s: a rank was started: %s", cases[i].layout, r.err);
        cli_result_free(&r);
        remove_dir(dir);
    }
}

/* Refusals before any rank starts: exit 2 with one line. */
Test(run_cli, bad_input_is_one_line) {
    char *dir = make_temp_dir(), plan[PATH_MAX], missing[PATH_MAX];
    make_plan(dir, "tiny", TP2, plan, sizeof plan);
    snprintf(missing, sizeof missing, "%s/no-such-plan.json", dir);
    const char *const cases[][12] = {
        {"run", "--steps", "3", NULL},
        {"run", "--plan", plan, "--steps", "3", "--warmup", "3", NULL},
        {"run", "--plan", missing, NULL},
        {"run", "--plan", plan, "--index", "2", NULL},
        {"run", "--plan", plan, "--index", "0", NULL},
        {"run", "--plan", plan, "--steps", "many", NULL},
        {"run", "--model", "tiny", "--system", "cpu-localhost", "--gpus", "0", NULL},
        {"run", "--plan", plan, "--model", "tiny", NULL},
        {"run", "--model", "tiny", "--system", "no-such-system", "--gpus", "2", NULL},
        {"run", "--model", "tiny", "--system", "cpu-localhost", "--gpus", "2", "--index", "1", NULL},
        {"run", "--model", "tiny", "--system", "cpu-localhost", "--gpus", "2", "--gpus-max", "4", NULL},
        {"run", "--model", "tiny", "--system", "cpu-localhost", "--gpus", "2", "--fix", "tp=3", NULL},
    };
    const char *const says[] = {"--plan or --model, --system and --gpus are required", "--warmup 3 leaves no step of 3",
                                "no-such-plan.json", "holds 1 layouts, got 2", "--index", "--steps", "--gpus",
                                "--plan and --model exclude each other", "no-such-system", "--index needs --plan",
                                "--gpus and --gpus-max exclude each other", "pinned sizes multiply to 3"};
    char *tmp = make_temp_dir(), left[4096];
    setenv("TMPDIR", tmp, 1); /* where a plan made from the flags would be */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_result r = run_argv(cases[i]);
        cr_expect_eq(r.status, 2, "case %zu: exit %d, stderr: %s", i, r.status, r.err);
        cr_expect(one_line_error(r.err, "run"), "case %zu: not one line: %s", i, r.err);
        cr_expect(strstr(r.err, says[i]) != NULL, "case %zu: stderr does not say \"%s\": %s", i, says[i], r.err);
        cr_expect_eq(r.out_len, 0, "case %zu: stdout: %s", i, r.out);
        cli_result_free(&r);
    }
    cr_expect_eq(list_dir(tmp, left, sizeof left), 0, "left in TMPDIR: %s", left);
    remove_dir(tmp);
    remove_dir(dir);
}

/* `run --model ... --fix` trains the layout plan --top 1 picks, with the losses of `run --plan`
 * on the same plan; the plan handed to the ranks is a temporary file in TMPDIR, gone after the
 * run, after a refusal that comes once it is written, and after SIGTERM. */
#define TINY_FLAGS "--model", "tiny", "--system", "cpu-localhost", "--gpus", "2", "--global-batch", "8", \
                   "--seq", "64", "--dtype", "fp32"
#define DP2 "dp=2,tp=1,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none"
Test(mpi, run_from_layout_flags_leaves_no_plan_behind, .timeout = 300) {
    char *dir = make_temp_dir(), *tmp = make_temp_dir(), plan[PATH_MAX], left[4096];
    setenv("TMPDIR", tmp, 1);
    make_plan(dir, "tiny", DP2, plan, sizeof plan);
    const char *by_plan[] = {"run", "--plan", plan, "--steps", "2", "--warmup", "1", "--json", NULL};
    const char *by_flags[] = {"run", TINY_FLAGS, "--fix", DP2, "--steps", "2", "--warmup", "1", "--json", NULL};
    cli_result a = run_argv_timeout(by_plan, RUN_TIMEOUT_S), b = run_argv_timeout(by_flags, RUN_TIMEOUT_S);
    cJSON *ja = parse_json_output(&a, "run --plan"), *jb = parse_json_output(&b, "run --model");
    cr_expect_str_eq(json_str(jb, "layout", "$"), DP2);
    const cJSON *la = cJSON_GetObjectItemCaseSensitive(ja, "losses"), *lb = cJSON_GetObjectItemCaseSensitive(jb, "losses");
    cr_assert(cJSON_GetArraySize(la) == 2 && cJSON_GetArraySize(lb) == 2, "losses: not 2 steps each");
    for (int s = 0; s < 2; s++)
        cr_expect_eq(cJSON_GetArrayItem(la, s)->valuedouble, cJSON_GetArrayItem(lb, s)->valuedouble,
                     "step %d: --model's loss differs from --plan's", s + 1);
    list_dir(tmp, left, sizeof left);
    cr_expect(strstr(left, "tessera-plan") == NULL, "left in TMPDIR: %s", left);
    cJSON_Delete(ja), cJSON_Delete(jb), cli_result_free(&a), cli_result_free(&b);

    /* Refused by the executor's check, after the plan file was written. */
    const char *zb[] = {"run", TINY_FLAGS, "--fix",
                        "dp=2,tp=1,pp=1,cp=1,ep=1,sp=0,zero=2,mbs=1,vpp=1,sched=zb-h1,recompute=none", NULL};
    cli_result r = run_argv(zb);
    cr_expect_eq(r.status, 2, "zb-h1 zero=2: exit %d: %s", r.status, r.err);
    cli_result_free(&r);
    list_dir(tmp, left, sizeof left);
    cr_expect(strstr(left, "tessera-plan") == NULL, "left in TMPDIR: %s", left);

    char sh[4096];
    snprintf(sh, sizeof sh,
             "TESSERA_DATA='%s' '%s' run --model tiny --system cpu-localhost --gpus 2 --global-batch 8 --seq 64 "
             "--dtype fp32 --fix %s --steps 100000 --warmup 1 & pid=$!; sleep 6; ls \"$TMPDIR\" >&2; "
             "kill -TERM $pid; wait $pid",
             test_data_dir(), tessera_binary(), DP2);
    const char *argv[] = {"sh", "-c", sh, NULL};
    r = run_program_timeout(argv, 120);
    cr_expect_eq(r.status, 143, "SIGTERM: exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, "tessera-plan-") != NULL, "no temporary plan while running: %s", r.err);
    list_dir(tmp, left, sizeof left);
    cr_expect(strstr(left, "tessera-plan") == NULL, "left in TMPDIR: %s", left);
    cli_result_free(&r);
    remove_dir(tmp);
    remove_dir(dir);
}
