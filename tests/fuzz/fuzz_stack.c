/* libFuzzer harness: a stack file (models/stacks schema, `--stack FILE`) parsed from memory with
 * the program's schedule and recompute names. An accepted stack must state sane fractions and
 * byte counts, and the planner must rank Llama 2 7B on 8 H100s under it (its defaults applied as
 * the CLI applies them) without error other than "nothing fits" or undefined behaviour.
 * The model and system are the zoo's (run from the repository root, as `make fuzz` does). */
#include <math.h>

#include "common/json.h"
#include "models/stack.h"
#include "planner/search.h"
#include "planner/stack_rules.h"
#include "program/layout.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fraction_ok(double f) { return f == TS_STACK_SYSTEM || (f >= 0 && f <= 1); }

static void check_stack(const ts_stack *s) {
    if (memchr(s->name, '\0', sizeof s->name) == NULL || memchr(s->file, '\0', sizeof s->file) == NULL ||
        memchr(s->description, '\0', sizeof s->description) == NULL ||
        memchr(s->fp8_recipe, '\0', sizeof s->fp8_recipe) == NULL)
        fuzz_fail("a string field is not terminated");
    if (!fraction_ok(s->tp_comm_overlap) || !fraction_ok(s->dp_comm_overlap) || !fraction_ok(s->pp_comm_overlap) ||
        !fraction_ok(s->moe_a2a_overlap))
        fuzz_fail("an overlap outside [0, 1]");
    if (!(s->comm_sm_frac >= 0 && s->comm_sm_frac < 1)) fuzz_fail("comm_sm_frac outside [0, 1)");
    if (!(s->grad_reduce_bytes >= 0 && isfinite(s->grad_reduce_bytes)) ||
        !(s->grad_accum_bytes >= 0 && isfinite(s->grad_accum_bytes)))
        fuzz_fail("a byte count negative or not finite");
    if (s->pp_max_zero < 0 || s->pp_max_zero > 3) fuzz_fail("pp_max_zero outside [0, 3]");
    if (s->dtype < -1 || s->dtype >= TS_DTYPE_COUNT) fuzz_fail("dtype outside the dtypes");
}

/* Ranks the zoo's Llama 2 7B on 8 H100s under the stack, as `tessera plan --stack` does. */
static void plan_under(const ts_stack *s) {
    static ts_model m;
    static ts_system sys;
    static int loaded;
    if (!loaded) {
        if (ts_model_load("llama2-7b", &m) != TS_OK || ts_system_load("h100-sxm-dgx", &sys) != TS_OK)
            fuzz_fail("the zoo's llama2-7b or h100-sxm-dgx does not load (run from the repository root)");
        loaded = 1;
    }
    ts_train t;
    ts_train_defaults(&t);
    t.stack = *s;
    if (ts_stack_train_defaults(s, 0, &t) != TS_OK) return; /* refused with a message */
    if (!(sys.peak_flops[t.dtype] > 0)) return;
    ts_problem pb;
    if (ts_problem_init(&pb, &m, &sys, &t, 8) != TS_OK) return;
    if (ts_stack_apply(&pb) != TS_OK) return;
    ts_search_opts o;
    ts_search_opts_defaults(&o);
    o.top_k = 1;
    ts_search_result r;
    ts_status st = ts_search(&pb, &o, &r);
    if (st != TS_OK && st != TS_ERR_INFEASIBLE && st != TS_ERR_INPUT) fuzz_fail("the search failed");
    if (st == TS_OK && r.n_best > 0 && !(r.best[0].step_s > 0 && isfinite(r.best[0].step_s)))
        fuzz_fail("a ranked layout's step time is not a positive number");
    ts_search_result_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_cstr(data, size);
    ts_error_clear();
    cJSON *root = NULL;
    if (ts_json_parse("stack.json", text, &root) == TS_OK) {
        ts_stack s;
        if (ts_stack_from_json("stack.json", root, ts_schedule_names, ts_recompute_names, &s) == TS_OK) {
            check_stack(&s);
            plan_under(&s);
        } else if (ts_error_message()[0] == '\0') {
            fuzz_fail("a refused stack left no message");
        }
    }
    ts_error_clear();
    cJSON_Delete(root);
    free(text);
    return 0;
}
