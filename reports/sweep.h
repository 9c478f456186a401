/* The sweep: the best layout of one model at each (system, GPU count), for capacity planning
 * ("how does throughput, MFU and cost per token change from 8 to 1024 GPUs, on H100 vs B200?").
 *
 * For each GPU count (ascending) and each system (in the given order) it runs the planner's
 * search (planner/search.h, top 1, the given pins and schedules) and keeps the best layout, or
 * why nothing fits there. Cost per million tokens at `price` USD per GPU-hour:
 *     cost_per_mtok = price · gpus / 3600 / tokens_per_s · 1e6
 *
 * JSON form (`tessera sweep --json`):
 *   {"tessera": "sweep", "model", "global_batch", "seq", "dtype", "fix", "price_per_gpu_hour",
 *    "price_is_default", "systems": [...], "gpus": [...], "search_s",
 *    "rows": [{"gpus", "system", "fits": true, "layout", "step_s", "tokens_per_s",
 *              "tflops_per_gpu", "mfu", "memory_bytes", "cost_per_mtok"}
 *           | {"gpus", "system", "fits": false, "reason"}]}
 * The table: '#' lines echoing the request, a header and units row, one row per (GPUs, system).
 * The HTML page: the same table and line charts of tokens/s, MFU and cost per 1M tokens against
 * GPUs, one line per system (reports/svg.h). */
#ifndef TS_SWEEP_H
#define TS_SWEEP_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "planner/search.h"

#define TS_SWEEP_MAX_COUNTS 64  /* GPU counts in one sweep */
#define TS_SWEEP_MAX_SYSTEMS 16

/* Parses a GPU list: comma-separated counts ("8,16,32") and ranges "A..B" (A, 2A, 4A, ... up
 * to B), e.g. "8..1024" or "8,24..96". Counts must be in [1, 16777216] and strictly
 * increasing. TS_ERR_INPUT naming `what` ("--gpus") and the item otherwise. Returns the count. */
ts_status ts_sweep_parse_gpus(const char *what, const char *text, int *gpus, int *n);

typedef struct {
    int gpus;
    int system;          /* index into the sweep's systems */
    int fits;
    ts_eval best;        /* when fits */
    double cost_per_mtok;
    char reason[256];    /* when not: "nothing fits: needs 186.3 GB/GPU, 73.5 GB usable" */
} ts_sweep_row;

typedef struct {
    ts_model model;
    const ts_system *systems; /* (n_systems), not owned */
    int n_systems;
    ts_train train;
    ts_search_opts search;    /* pins and schedules; top_k is set to 1 */
    const char *fix;          /* the --fix text for the echo, or NULL */
    double price_per_gpu_hour;
    int price_is_default;
    const int *gpus;          /* (n_gpus) increasing, not owned */
    int n_gpus;
    const struct ts_buy *capacity; /* the comparison across systems for the HTML page, or NULL */
    /* Called after each search with (done, total), or NULL. */
    void (*progress)(void *ctx, int done, int total);
    void *progress_ctx;
} ts_sweep_spec;

typedef struct {
    ts_sweep_row *rows; /* (n_rows) = n_gpus × n_systems, GPU-major; owned */
    int n_rows;
    int n_fit;
    double search_s;    /* wall-clock time of all the searches */
} ts_sweep_result;

/* Runs the sweep. A count where nothing fits, or where the pins leave no valid layout, is a row
 * saying so; TS_ERR_INFEASIBLE (result still filled) when nothing fits anywhere. */
ts_status ts_sweep_run(const ts_sweep_spec *spec, ts_sweep_result *out);
void ts_sweep_result_free(ts_sweep_result *r);

ts_status ts_sweep_to_json(const ts_sweep_spec *spec, const ts_sweep_result *r, cJSON **out);
ts_status ts_sweep_print(FILE *f, const ts_sweep_spec *spec, const ts_sweep_result *r);
ts_status ts_sweep_write_html(FILE *f, const ts_sweep_spec *spec, const ts_sweep_result *r);

/* The price of one GPU-hour of `s` in the capacity comparison: the system's own (its file's cost
 * object) unless --price set one for all, else the sweep's. (The rows' cost per 1M tokens stays at
 * the sweep's one price.) */
double ts_sweep_price(const ts_sweep_spec *spec, const ts_system *s);

/* Capacity comparison across systems (`tessera sweep --systems a,b,c --tokens N [--days D]`):
 * "same model, same tokens: which system, how many GPUs, how many days, what cost". For each
 * system, of the GPU counts where the model fits, the cheapest that trains `tokens` within
 * `max_days` (any count when max_days is 0; the fastest, flagged, when none is that fast):
 *     days = tokens / tokens_per_s / 86400,   cost = price · occupied GPUs · 24 · days,
 *     energy = watts per GPU (models/system.h ts_system_power_per_gpu_w) · occupied GPUs · 24 · days,
 * the occupied GPUs being the ranks plus the GPUs their scale-up domains leave idle.
 * The recommendation is the cheapest pick that meets the deadline (fewer days on a tie).
 * JSON: "capacity": {"tokens", "max_days", "recommended": name | null,
 *   "systems": [{"system", "fits", "gpus", "occupied_gpus", "layout", "days", "cost_usd", "price_per_gpu_hour",
 *                "price_is_example", "power_per_gpu_w", "energy_mwh", "meets_deadline"}]}
 * The table: one row per system, the recommendation marked '*'. The HTML page: one bar chart per
 * question (days, GPUs, cost, energy), the recommendation in its own colour. */
typedef struct {
    int row;               /* the chosen row of the sweep result, -1 when nothing fits */
    int occupied_gpus;     /* GPUs the job holds: its ranks plus what its domains leave idle
                              (program/ranks.h ts_rank_gpu; EP64 on NVL72 holds 72 a rack) */
    double price_per_gpu_hour;
    int price_is_example;
    double power_per_gpu_w;
    double days, cost_usd, energy_mwh;
    int meets_deadline;
} ts_buy_pick;

typedef struct ts_buy {
    double tokens, max_days;
    ts_buy_pick picks[TS_SWEEP_MAX_SYSTEMS]; /* one per system, in the sweep's order */
    int n_picks;
    int recommended;       /* index into picks, -1 when no system fits */
} ts_buy;

ts_status ts_capacity_compare(const ts_sweep_spec *spec, const ts_sweep_result *r, double tokens, double max_days,
                              ts_buy *out);
ts_status ts_capacity_add_json(const ts_sweep_spec *spec, const ts_sweep_result *r, const ts_buy *c,
                               cJSON *root);
ts_status ts_capacity_print(FILE *f, const ts_sweep_spec *spec, const ts_sweep_result *r, const ts_buy *c);
ts_status ts_capacity_write_html(FILE *f, const ts_sweep_spec *spec, const ts_sweep_result *r,
                                 const ts_buy *c);

#endif
