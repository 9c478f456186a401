/* What the memory objective means (see search.h, ts_memory_step_cap). Least memory alone is
 * not a question anyone asks: it returns the layout that shards and recomputes everything,
 * an order of magnitude slower (Llama-2-70B on 64 H100s: 2.5% MFU). What a user means by
 * "memory" is head-room: of the layouts nearly as fast as the best, the one that leaves the most
 * memory free (for longer sequences, a bigger micro-batch, fragmentation). So the objective is
 * the least memory among layouts within max_slowdown of the fastest — a stated trade (10% by
 * default, said in the output), found by a time search first, then a memory search whose
 * leaves slower than the cap are skipped. */
#include <math.h>
#include <string.h>

#include "planner/search.h"

ts_status ts_memory_step_cap(const ts_problem *pb, const ts_search_opts *opts, double *fastest_s, double *cap_s) {
    *fastest_s = *cap_s = 0;
    if (opts->objective != TS_OBJ_MEMORY || !isfinite(opts->max_slowdown)) return TS_OK;
    if (opts->max_slowdown < 1)
        return TS_FAIL(TS_ERR_INPUT, "--max-slowdown: expected a factor >= 1 (1.10: at most 10%% slower), got %g",
                       opts->max_slowdown);
    ts_search_opts t = *opts;
    t.objective = TS_OBJ_TIME;
    t.top_k = 1;
    t.max_step_s = 0;
    ts_search_result r;
    ts_status st = ts_search(pb, &t, &r);
    if (st == TS_OK) {
        *fastest_s = r.best[0].step_s;
        *cap_s = *fastest_s * opts->max_slowdown;
    }
    ts_search_result_free(&r);
    return st;
}
