/* libFuzzer harness: a plan file (tessera plan -o) read from disk by ts_plan_read, as `tessera
 * sim --plan` reads it, with each layout's uneven stages (ts_plan_read_split). The layouts it
 * accepts, with the stages it accepts, are valid for its problem, so the closed form must
 * evaluate the first few as the plan has them (ts_plan_evaluate: on their stages, which a layout
 * interleaving unequal chunks needs) without error or undefined behaviour. */
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
            ts_split split;
            int has = 0;
            if (ts_plan_read_split(path, &pb, &ls[i], i, &split, &has) != TS_OK) {
                ts_error_clear(); /* stages it refuses, with a message */
                continue;
            }
            if (has) ts_split_free(&split);
            ts_eval e;
            if (ts_plan_evaluate(path, &pb, &ls[i], i, &e, NULL, &has) != TS_OK)
                fuzz_fail("an accepted layout does not evaluate");
            if (isnan(e.step_s) || isnan(e.mem.total)) fuzz_fail("NaN step time or memory");
            ts_error_clear();
        }
    }
    free(ls);
    return 0;
}
