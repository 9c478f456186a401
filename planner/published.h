/* The planner checked against published measurements (validation/published/):
 *  - Megatron-LM SC'21 Table 1 (A100): TFLOP/s per GPU of the published (t, p, d) layout, counted
 *    like the paper (eq. 3: executed FLOPs incl. full recompute, unfused 2021 attention, no ZeRO,
 *    no SP/CP, interleaved schedule when p > 1), and the rank of the published (t, p, d) in the
 *    planner's own search over that 2021 space;
 *  - NVIDIA's H100 dgxc-benchmarking recipes (BF16 and FP8 rows, FP8 as Transformer Engine's
 *    default delayed-scaling recipe): step time of the published layout (tp, pp, cp, dp, mbs, vpp
 *    pinned; the planner picks SP, ZeRO and recompute); rows naming a zoo model (Llama 3.1, Grok-1,
 *    DeepSeek-V3) take it with the row's layer count (proxy rows), MoE rows also pin ep and etp;
 *    a row's training block may state its recipe's attention backend, FP8 weights and expert
 *    settings (validation/published/README.md).
 * For each, the prediction is the planner's best layout under those pins. */
#ifndef TS_PUBLISHED_H
#define TS_PUBLISHED_H

#include <cjson/cJSON.h>

#include "common/json.h"

#include "planner/published_cache.h"
#include "planner/search.h"

/* TS_PUB_OLDER_STACK: runs on the stacks of their era (validation/published/older-stacks.json,
 * planner/published_stacks.c): step seconds or TFLOP/s per GPU (counted with recompute, as the
 * papers count), predicted under the era's stack profile (models/stacks/) and the published pins.
 * TS_PUB_NVIDIA_MOE_STEP(_FP8): MoE rows (the case's model.zoo names the zoo model; its layers,
 * layout.ep and layout.etp pinned as published).
 * TS_PUB_BRIDGE_STEP: NVIDIA's Megatron-Bridge dense FP8 runs on H100 and Blackwell
 * (validation/published/megatron-bridge.json, read like older-stacks.json): no curve was fitted
 * to them. TS_PUB_BRIDGE_MOE_STEP: its MoE runs on H100 whose recipes Tessera prices
 * (megatron-bridge-moe.json, the same reader with the rows' expert settings). */
typedef enum {
    TS_PUB_MEGATRON_TFLOPS,
    TS_PUB_NVIDIA_STEP,
    TS_PUB_NVIDIA_STEP_FP8,
    TS_PUB_OLDER_STACK,
    TS_PUB_NVIDIA_MOE_STEP,
    TS_PUB_NVIDIA_MOE_STEP_FP8,
    TS_PUB_BRIDGE_STEP,
    TS_PUB_BRIDGE_MOE_STEP,
    TS_PUB_KIND_COUNT
} ts_pub_kind;

typedef struct {
    char id[96];
    ts_pub_kind kind;
    char model[64];
    int gpus;
    int tp, pp, dp;
    int cp;           /* context parallelism: the published layout's (NVIDIA rows), else the predicted one's */
    double measured;  /* TFLOP/s per GPU (Megatron) or step seconds (NVIDIA) */
    double predicted; /* the same quantity, predicted */
    double error;     /* (predicted - measured) / measured */
    double step_error; /* the same for the step time (a TFLOP/s error e is a step error 1/(1+e) - 1) */
    int is_tflops;    /* measured and predicted are TFLOP/s per GPU (else step seconds) */
    char stack[64];   /* the software stack it was predicted under */
    char gpu[64];     /* the GPU it ran on (its system spec's gpu name) */
    ts_eff_curve gemm_eff; /* that system spec's GEMM efficiency curve */
    int fp8;          /* the run trained in FP8 (the FP8 kinds, and rows naming their stack with dtype fp8) */
    int moe;          /* the run trained an MoE model (the MoE kinds, and MoE rows naming their stack) */
    int unfit;        /* the planner finds no layout under the pins that fits, or none valid (layout:
                         the reason); predicted and the errors are 0 */
    int rank;         /* Megatron: rank of the published (t,p,d) among distinct (t,p,d) of the
                         search, 0 if not in the first 10 */
    char layout[256]; /* the predicted layout */
    ts_pins pins;     /* pins beyond tp, pp, cp, dp, mbs, vpp (MoE rows: ep, etp) */
} ts_pub_case;

/* Loads the files from `dir` (megatron-sc21-table1.json, published-cases.json,
 * older-stacks.json, megatron-bridge.json, megatron-bridge-moe.json) and predicts every usable case. *cases is malloc'd (caller frees). */
ts_status ts_published_run(const char *dir, ts_pub_case **cases, int *n);

/* ts_published_run without the Megatron rows' ranks (rank 0): the same predictions and errors,
 * for callers that need only those (the uncertainty bands, planner/bands.h); the rank's search
 * of the whole space is most of the work. */
ts_status ts_published_errors(const char *dir, ts_pub_case **cases, int *n);

/* ts_published_errors with the runs of MoE models left out (not predicted) unless `moe_runs`:
 * the bands of a dense model's plan take no MoE error (planner/bands.h). */
ts_status ts_published_errors_scoped(const char *dir, int moe_runs, ts_pub_case **cases, int *n);

/* ts_published_errors with the caller's cache (planner/published_cache.h): each distinct model,
 * system and stack loaded once; NULL loads them for every case (the same answers, slower). */
ts_status ts_published_errors_with(const char *dir, ts_pub_cache *cache, ts_pub_case **cases, int *n);

/* Called for each NVIDIA row of published-cases.json as it is predicted: the row (c->error is not
 * set yet), the problem it is priced as (the zoo model at the row's layers, the row's training
 * settings) and the best layout under its pins. A status other than TS_OK stops the walk. */
typedef ts_status (*ts_pub_visit_fn)(const ts_pub_case *c, const ts_problem *pb, const ts_layout *best, void *ctx);
/* Predicts the NVIDIA rows of `dir`/published-cases.json (as ts_published_errors does) and
 * calls fn on each: for benches that look inside a row's prediction (bench/fp8_gemms.c). */
ts_status ts_published_visit(const char *dir, ts_pub_visit_fn fn, void *ctx);

/* An MoE recipe's expert settings where the object `obj` of a published row (read by `r`, whose
 * file and path name a bad field) states them: moe_dispatcher (one of ts_moe_dispatcher_names); moe_capacity_factor
 * with moe_pad_to_capacity (Megatron-Core's token drop); moe_grouped_gemm;
 * overlap_moe_expert_parallel_comm (its combined 1F1B); moe_shared_expert_overlap;
 * moe_force_balance (Megatron-Core's moe_router_force_load_balancing: every expert its even
 * share, load_cv 0). Absent ones keep the defaults. */
ts_status ts_pub_moe_settings(const ts_jreader *r, const cJSON *obj, ts_model *m, ts_train *t);

/* The recompute modules where the object `obj` of a published row (read by `r`) states its
 * recipe's ("recompute_modules": Megatron-Core's names, problem.h), into t; absent, the default.
 * Sets *given when stated: the row's recompute is then selective. */
ts_status ts_pub_recompute_modules(const ts_jreader *r, const cJSON *obj, ts_train *t, int *given);

/* Appends the cases of `path` (rows that name their stack: older-stacks.json, megatron-bridge.json,
 * megatron-bridge-moe.json) as `kind` to *cases (room *cap, grown as needed), their models,
 * systems and stacks from `cache` (NULL: loaded for every case); rows of MoE models only when
 * `moe_runs`. */
ts_status ts_published_stacks_run(const char *path, ts_pub_kind kind, int moe_runs, ts_pub_cache *cache,
                                  ts_pub_case **cases, int *n, int *cap);

#endif
