/* libFuzzer harness: a Chrome trace (tessera sim/run --trace) read by the two trace readers:
 * reports/measured.c's timeline of a run (for a plan of 4 stages) and sim/compare.c's op-by-op
 * comparison, the trace against itself. An accepted trace compared with itself must give zero
 * error on every op kind and stage, and a timeline with one row per stage in the plan. */
#include <math.h>

#include "reports/measured.h"
#include "sim/compare.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    ts_error_clear();
    ts_timeline tl;
    if (ts_run_trace_timeline(path, 4, &tl) == TS_OK) {
        if (tl.rows < 1 || tl.rows > 4) fuzz_fail("timeline rows outside the plan's stages");
        ts_timeline_free(&tl);
    }
    ts_compare c;
    if (ts_compare_traces(path, path, &c) == TS_OK) {
        for (int k = 0; k < c.n_kinds; k++)
            if (c.kinds[k].error != 0 && !isnan(c.kinds[k].error)) fuzz_fail("a trace differs from itself (kind)");
        for (int s = 0; s < c.n_stages; s++)
            if (c.stages[s].error != 0 && !isnan(c.stages[s].error)) fuzz_fail("a trace differs from itself (stage)");
        ts_compare_free(&c);
    }
    return 0;
}
