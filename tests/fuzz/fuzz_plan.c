/* libFuzzer harness: a plan file (tessera plan -o) read from disk by ts_plan_read, as `tessera
 * sim --plan` reads it, with each layout's uneven stages (ts_plan_read_split). The layouts it
 * accepts are valid for its problem, so the closed form must evaluate the first few without
 * error or undefined behaviour. */
#include <math.h>

#include "planner/partition.h"
#include "planner/plan_json.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    ts_error_clear();
    ts_problem pb;
    ts_layout *ls = NULL;
    int n = 0;
    if (ts_plan_read(path, &pb, &ls, &n) == TS_OK) {
        for (int i = 0; i < n && i < 4; i++) {
            ts_eval e;
            if (ts_evaluate(&pb, &ls[i], &e) != TS_OK) fuzz_fail("an accepted layout does not evaluate");
            if (isnan(e.step_s) || isnan(e.mem.total)) fuzz_fail("NaN step time or memory");
            ts_split split;
            int has = 0;
            if (ts_plan_read_split(path, &pb, &ls[i], i, &split, &has) == TS_OK && has)
                ts_split_free(&split);
            ts_error_clear();
        }
    }
    free(ls);
    return 0;
}
