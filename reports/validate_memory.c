/* The planner's memory against the executor's peaks (see validate_memory.h). */
#include "reports/validate_memory.h"

#include <math.h>

#include "common/json.h"

const char *const ts_validate_mem_names[TS_VALIDATE_MEM_KINDS] = {"weights", "grads", "optimizer", "activations",
                                                                  "buffers"};

/* The categories of object `key` of `root` into v; 0 when one is missing. */
static int read_kinds(const cJSON *root, const char *key, double *v) {
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, key);
    for (int k = 0; k < TS_VALIDATE_MEM_KINDS; k++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, ts_validate_mem_names[k]);
        if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble < 0) return 0;
        v[k] = x->valuedouble;
    }
    return 1;
}

ts_status ts_validate_memory_read(const char *run_json, ts_validate_memory *out) {
    *out = (ts_validate_memory){0};
    cJSON *root = NULL;
    TS_CHECK(ts_json_load_file(run_json, &root));
    out->known = read_kinds(root, "memory_bytes", out->measured) && read_kinds(root, "planner_memory_bytes", out->predicted);
    for (int k = 0; k < TS_VALIDATE_MEM_KINDS; k++)
        out->error[k] = out->known && out->measured[k] > 0 ? (out->predicted[k] - out->measured[k]) / out->measured[k]
                                                           : NAN;
    cJSON_Delete(root);
    return TS_OK;
}

ts_status ts_validate_memory_json(const ts_validate_memory *m, cJSON *parent) {
    if (!m->known) return TS_OK;
    cJSON *o = cJSON_AddObjectToObject(parent, "memory");
    if (o == NULL) return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing memory errors");
    for (int k = 0; k < TS_VALIDATE_MEM_KINDS; k++) {
        cJSON *c = cJSON_AddObjectToObject(o, ts_validate_mem_names[k]);
        /* cJSON writes a NAN as null. */
        if (c == NULL || !cJSON_AddNumberToObject(c, "predicted_bytes", m->predicted[k]) ||
            !cJSON_AddNumberToObject(c, "measured_bytes", m->measured[k]) ||
            !cJSON_AddNumberToObject(c, "error", m->error[k]))
            return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing memory errors");
    }
    return TS_OK;
}
