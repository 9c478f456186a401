/* The sweep: the best layout of one model at each (system, GPU count), for capacity planning
 * ("how does throughput, MFU and cost per token change from 8 to 1024 GPUs, on H100 vs B200?").
 *
 * For each GPU count (ascending), global batch, sequence length and system (in the given order)
 * it runs the planner's search (planner/partition.h ts_search_partitioned, top 1, the given pins,
 * schedules and partitioning) and keeps the best layout, or why nothing fits there. Cost per
 * million tokens at each system's price in USD per GPU-hour (ts_sweep_price):
 *     cost_per_mtok = price · gpus / 3600 / tokens_per_s · 1e6
 * The fastest row (most tokens/s) and the cheapest (least cost per token) are the
 * recommendations, marked in the table, the JSON ("fastest", "cheapest") and the page.
 *
 * JSON form (`tessera sweep --json`):
 *   {"tessera": "sweep", "model", "global_batch", "seq", "dtype", "fix", "price_per_gpu_hour",
 *    "price_is_default", "prices": {system: USD per GPU-hour}, "global_batches": [...], "seqs": [...],
 *    "systems": [...], "gpus": [...], "search_s",
 *    "rows": [{"gpus", "system", "global_batch", "seq", "fits": true, "layout", "step_s",
 *              "tokens_per_s", "tflops_per_gpu", "mfu", "memory_bytes", "price_per_gpu_hour",
 *              "cost_per_mtok", "fastest", "cheapest"[, budget rows: "gpus_max", "idle_gpus",
 *              "global_batch_requested"]}
 *           | {"gpus", "system", "global_batch", "seq", "fits": false, "reason"}]}
 * ("global_batch" and "seq" at the top are the first of the lists; "price_per_gpu_hour" the
 * price of systems given none.) With budgets the root also holds "budget": {"gpus_max": true |
 * false, "batch_tolerance"}; "gpus" lists the budgets, each row's "gpus" the count it uses.
 * The table: '#' lines echoing the request, a header and units row, one row per (GPUs, system).
 * The HTML page: the same table and line charts of tokens/s, MFU and cost per 1M tokens against
 * GPUs, one line per system (reports/svg.h). */
#ifndef TS_SWEEP_H
#define TS_SWEEP_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "planner/partition.h"
#include "planner/search.h"

#define TS_SWEEP_MAX_COUNTS 64  /* GPU counts in one sweep */
#define TS_SWEEP_MAX_SYSTEMS 16
#define TS_SWEEP_MAX_SIZES 16   /* global batches, and sequence lengths, in one sweep */

/* Parses a GPU list: comma-separated counts ("8,16,32") and ranges "A..B" (A, 2A, 4A, ... up
 * to B), e.g. "8..1024" or "8,24..96". Counts must be in [1, 16777216] and strictly
 * increasing. TS_ERR_INPUT naming `what` ("--gpus") and the item otherwise. Returns the count. */
ts_status ts_sweep_parse_gpus(const char *what, const char *text, int *gpus, int *n);
/* The same grammar for global batches or sequence lengths in [1, max], at most
 * TS_SWEEP_MAX_SIZES of them ("256,512,1024", "4096..32768"). */
ts_status ts_sweep_parse_sizes(const char *what, const char *text, int64_t max, int64_t *out, int *n);

typedef struct {
    int gpus;            /* the GPUs the row's layout uses */
    int gpus_max;        /* with spec->budget: the row's budget (at most this many GPUs); the
                            GPUs gpus_max - gpus stay idle. 0 otherwise */
    int64_t batch_requested; /* with spec->budget: the swept batch the row's batch moved from */
    int system;          /* index into the sweep's systems */
    int fits;
    int64_t global_batch, seq;
    ts_eval best;        /* when fits */
    double cost_per_mtok;
    int fastest, cheapest; /* the recommendations (one row each) */
    char reason[256];    /* when not: "nothing fits: needs 186.3 GB/GPU, 73.5 GB usable" */
} ts_sweep_row;

typedef struct {
    ts_model model;
    const ts_system *systems; /* (n_systems), not owned */
    int n_systems;
    ts_train train;
    ts_search_opts search;    /* pins and schedules; top_k is set to 1 */
    const char *fix;          /* the --fix text for the echo, or NULL */
    double price_per_gpu_hour;  /* systems without their own price */
    int price_is_default;
    double prices[TS_SWEEP_MAX_SYSTEMS]; /* that system's --price SYSTEM=USD (> 0; -1: free; 0: not given) */
    const int64_t *batches;     /* (n_batches) global batches; NULL: train.global_batch */
    int n_batches;
    const int64_t *seqs;        /* (n_seqs) sequence lengths; NULL: train.seq */
    int n_seqs;
    ts_partition_opts partition; /* uneven stages, as plan (zero: uniform) */
    const int *gpus;          /* (n_gpus) increasing, not owned */
    int n_gpus;
    /* Budgets (`--gpus-max LIST`, `--batch-tolerance T`; planner/budget.h): each count of gpus is
     * at most that many GPUs (exactly that many when gpus_are_max is 0), the batch may move by
     * batch_tolerance; each row is the plan on the budget's pick, saying the GPUs left idle. */
    int budget;
    int gpus_are_max;
    double batch_tolerance;
    const struct ts_buy *capacity; /* the comparison across systems for the HTML page, or NULL */
    /* Called after each search with (done, total), or NULL. */
    void (*progress)(void *ctx, int done, int total);
    void *progress_ctx;
} ts_sweep_spec;

typedef struct {
    ts_sweep_row *rows; /* (n_rows) = n_gpus × batches × seqs × n_systems, GPU-major, then batch,
                           then seq; owned */
    int n_rows;
    int n_fit;
    double search_s;    /* wall-clock time of all the searches */
} ts_sweep_result;

/* "2.5" (every system: price_per_gpu_hour, price_is_default = 0) or "h100-sxm-dgx=2.5,b200-dgx=4"
 * (per system, by name, into spec->prices), or both; spec->systems must be set. TS_ERR_INPUT
 * naming `what` and the item otherwise. */
ts_status ts_sweep_parse_prices(const char *what, const char *text, ts_sweep_spec *spec);
/* The price of one GPU-hour of system s, for the rows and the capacity comparison alike: its own
 * --price SYSTEM=USD; else the --price given for all; else the system file's price (its cost
 * object, with its source); else price_per_gpu_hour (the default). */
double ts_sweep_price(const ts_sweep_spec *spec, int s);
/* Whether that price is the system file's example price or the default, not one the user gave. */
int ts_sweep_price_is_example(const ts_sweep_spec *spec, int s);

/* Runs the sweep. A count where nothing fits, or where the pins leave no valid layout, is a row
 * saying so; TS_ERR_INFEASIBLE (result still filled) when nothing fits anywhere. */
ts_status ts_sweep_run(const ts_sweep_spec *spec, ts_sweep_result *out);
void ts_sweep_result_free(ts_sweep_result *r);

ts_status ts_sweep_to_json(const ts_sweep_spec *spec, const ts_sweep_result *r, cJSON **out);
ts_status ts_sweep_print(FILE *f, const ts_sweep_spec *spec, const ts_sweep_result *r);
ts_status ts_sweep_write_html(FILE *f, const ts_sweep_spec *spec, const ts_sweep_result *r);


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
