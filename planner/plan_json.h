/* plan.json: the planner's answer, the input of sim, run, report and export.
 *
 *   {"tessera": "plan", "version": 1,
 *    "request": {"model","system","gpus","global_batch","seq","dtype","flash_attention",
 *                "tp_across_nodes","cp_kind" (only when not "ring"),"objective","fix","top"},
 *    "model": {...models/llm schema...}, "system": {...models/systems schema...},
 *    "searched", "evaluated", "feasible", "search_s", "usable_bytes",
 *    "layouts": [{"rank","layout","dp","tp","pp","cp","ep","sp","zero","mbs","microbatches",
 *                 "vpp","schedule","recompute","worst_stage",
 *                 "memory_bytes": {"weights","grads","optimizer","activations","buffers","total"},
 *                 "step_s", "time_s": {"compute","tp_comm","cp_comm","ep_comm","pp_comm",
 *                 "pp_bubble","dp_comm","optimizer"}, "tokens_per_s","tflops_per_gpu",
 *                 "hw_tflops_per_gpu","mfu"}]}
 * The model and system are embedded so a plan is self-contained. */
#ifndef TS_PLAN_JSON_H
#define TS_PLAN_JSON_H

#include <cjson/cJSON.h>

#include "planner/search.h"

/* One evaluated layout as a "layouts" element (rank is 1-based). NULL when out of memory. */
cJSON *ts_eval_to_json(const ts_eval *e, int rank);

/* The whole plan; `fix` is the --fix text or NULL. */
ts_status ts_plan_to_json(const ts_problem *pb, const ts_search_opts *opts, const char *fix,
                          const ts_search_result *r, cJSON **out);

/* Reads a plan back: the problem (model, system, request) and its layouts, best first
 * (microbatches derived). `*layouts` is malloc'd; the caller frees it. */
ts_status ts_plan_read(const char *file, ts_problem *pb, ts_layout **layouts, int *n);

/* The uneven stages of layout `index` (0-based) of a plan read by ts_plan_read ("stages", see
 * planner/partition.h): *has = 0 when the layout uses the even split; else `out` is init'ed
 * (the caller frees it with ts_split_free) and checked against the layout and the model. */
struct ts_split;
ts_status ts_plan_read_split(const char *file, const ts_problem *pb, const ts_layout *l, int index,
                             struct ts_split *out, int *has);

/* Layout `index` of a plan read by ts_plan_read, evaluated as the plan has it: on its uneven
 * stages when it carries them (ts_evaluate_split), else evenly (ts_evaluate) — a layout that
 * interleaves chunks of unequal size is valid only with its stages. `split` and `has` as
 * ts_plan_read_split's, kept only on success; `split` may be NULL (the stages are then dropped). */
ts_status ts_plan_evaluate(const char *file, const ts_problem *pb, const ts_layout *l, int index, ts_eval *out,
                           struct ts_split *split, int *has);

#endif
