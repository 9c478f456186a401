/* What a real run measured, read back for the report: the JSON `tessera run --json` prints and
 * the Chrome trace `tessera run --trace` writes (sim/trace.h's schema).
 *
 * run.json fields read (DESIGN.md "run", plus kind_s):
 *   {"layout": "dp=..", "step_s": {"median", "p10", "p90"}, "losses": [x, ...],
 *    "kind_s": {"gemm", "attention", "elementwise", "optimizer", "collective", "send", "recv"},
 *    "ranks": n, "steps": n}                 (ranks and steps optional)
 * Bad input names the file, the JSON path and what was expected. */
#ifndef TS_MEASURED_H
#define TS_MEASURED_H

#include "reports/timeline.h"

typedef struct {
    char layout[256];
    int ranks, steps;                 /* 0 when the file does not say */
    double step_median_s, step_p10_s, step_p90_s;
    double loss_first, loss_last;
    int n_losses;
    double kind_s[TS_OP_KIND_COUNT];  /* time by op kind, mean over ranks */
} ts_run_summary;

ts_status ts_run_summary_load(const char *file, ts_run_summary *out);

/* The compute stream (tid 0) of each stage's lowest rank in a Chrome trace: rows are the stages
 * named by the "process_name" metadata ("rank R (stage S)"), time starts at the earliest event,
 * and an op's phase is the first word of its name ("fwd", "bwd", ...). A stage outside the
 * plan's `plan_stages` is refused (it would size the timeline). */
ts_status ts_run_trace_timeline(const char *file, int plan_stages, ts_timeline *out);

#endif
