/* The models, systems and software stacks that the published runs (planner/published.h) name,
 * each loaded once per computation: the ~77 runs name a handful of each, and loading a zoo file
 * (a JSON parse) for every run was half of every `tessera plan` and `sim` (the bands,
 * planner/bands.h, predict every run). Lookups are by the name the run gives; the values are the
 * loaders' own (ts_model_load, ts_system_load, ts_stack_load with the program's schedule and
 * recompute names), copied out, so a caller may change its copy. ts_pub_cache_free frees what
 * ts_pub_cache_init and the lookups allocated. */
#ifndef TS_PUBLISHED_CACHE_H
#define TS_PUBLISHED_CACHE_H

#include "models/model.h"
#include "models/stack.h"
#include "models/system.h"

typedef struct {
    struct ts_pub_model *models;
    struct ts_pub_system *systems;
    struct ts_pub_stack *stacks;
    int n_models, n_systems, n_stacks; /* distinct names loaded */
    int cap_models, cap_systems, cap_stacks;
} ts_pub_cache;

void ts_pub_cache_init(ts_pub_cache *c);
void ts_pub_cache_free(ts_pub_cache *c);

/* *out = the loader's value for `name`, loaded on the first lookup of that name. A NULL cache
 * loads every time (the reference the cached path is tested against). */
ts_status ts_pub_cache_model(ts_pub_cache *c, const char *name, ts_model *out);
ts_status ts_pub_cache_system(ts_pub_cache *c, const char *name, ts_system *out);
ts_status ts_pub_cache_stack(ts_pub_cache *c, const char *name, ts_stack *out);

#endif
