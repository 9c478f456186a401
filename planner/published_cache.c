/* The published runs' models, systems and stacks, loaded once by name (see published_cache.h). */
#include "planner/published_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "program/schedule.h"

#define NAME_CAP 256 /* longest name (a zoo name or a path) the cache keys; longer ones load uncached */

struct ts_pub_model {
    char name[NAME_CAP];
    ts_model v;
};
struct ts_pub_system {
    char name[NAME_CAP];
    ts_system v;
};
struct ts_pub_stack {
    char name[NAME_CAP];
    ts_stack v;
};

void ts_pub_cache_init(ts_pub_cache *c) { memset(c, 0, sizeof *c); }

void ts_pub_cache_free(ts_pub_cache *c) {
    free(c->models);
    free(c->systems);
    free(c->stacks);
    memset(c, 0, sizeof *c);
}

/* One lookup in c->arr (c->n entries, each a name and a value v): the cached value, else
 * `load_call` into *out and a new entry; a NULL cache or an over-long name: load_call alone. */
#define LOOKUP(c, arr, n, cap, name, out, load_call)                                               \
    do {                                                                                           \
        if (!(c) || strlen(name) >= NAME_CAP) {                                                    \
            ts_status st_ = (load_call);                                                           \
            return st_;                                                                            \
        }                                                                                          \
        for (int i_ = 0; i_ < (c)->n; i_++)                                                        \
            if (strcmp((c)->arr[i_].name, (name)) == 0) {                                          \
                *(out) = (c)->arr[i_].v;                                                           \
                return TS_OK;                                                                      \
            }                                                                                      \
        TS_CHECK(load_call);                                                                       \
        TS_CHECK(ts_grow((void **)&(c)->arr, (c)->n, &(c)->cap, sizeof *(c)->arr, "inputs"));      \
        snprintf((c)->arr[(c)->n].name, NAME_CAP, "%s", (name));                                   \
        (c)->arr[(c)->n++].v = *(out);                                                             \
        return TS_OK;                                                                              \
    } while (0)

ts_status ts_pub_cache_model(ts_pub_cache *c, const char *name, ts_model *out) {
    LOOKUP(c, models, n_models, cap_models, name, out, ts_model_load(name, out));
}

ts_status ts_pub_cache_system(ts_pub_cache *c, const char *name, ts_system *out) {
    LOOKUP(c, systems, n_systems, cap_systems, name, out, ts_system_load(name, out));
}

ts_status ts_pub_cache_stack(ts_pub_cache *c, const char *name, ts_stack *out) {
    LOOKUP(c, stacks, n_stacks, cap_stacks, name, out,
           ts_stack_load(name, ts_schedule_names, ts_recompute_names, out));
}
