/* Memory, validated as the step time is: the planner's memory model (planner/memory.h) against
 * the peaks the executor measured, per category, for `tessera validate` (reports/validate.h).
 *
 * Each run's `tessera run --json` holds both: "memory_bytes" (the worst rank's measured peak per
 * category, exec/run.h) and "planner_memory_bytes" (the plan's prediction for the same layout).
 * Errors are signed fractions of the measured peak, (predicted − measured) / measured, as the step
 * time's. */
#ifndef TS_VALIDATE_MEMORY_H
#define TS_VALIDATE_MEMORY_H

#include <cjson/cJSON.h>

#include "common/status.h"

#define TS_VALIDATE_MEM_KINDS 5 /* weights, grads, optimizer, activations, buffers */
extern const char *const ts_validate_mem_names[TS_VALIDATE_MEM_KINDS];

typedef struct {
    int known;                                 /* the run's JSON had both */
    double predicted[TS_VALIDATE_MEM_KINDS], measured[TS_VALIDATE_MEM_KINDS];
    double error[TS_VALIDATE_MEM_KINDS];       /* NAN where nothing was measured */
} ts_validate_memory;

/* Reads the figures of a `tessera run --json` file; a run without them leaves known = 0. */
ts_status ts_validate_memory_read(const char *run_json, ts_validate_memory *out);

/* {"weights": {"predicted_bytes", "measured_bytes", "error"}, ...} into parent["memory"]. */
ts_status ts_validate_memory_json(const ts_validate_memory *m, cJSON *parent);

#endif
