/* Software-stack profiles: reading and checking models/stacks/NAME.json (see stack.h).
 *
 * File format. Fields marked * are required; the others take the default shown. Any value may be
 * written as {"value": v, "source": "..."}; any other key is refused, so a misspelt field cannot
 * silently fall back to its default ("notes" is free-form and never read).
 *
 *   {"name"*: "megatron-core",                 at most 63 characters
 *    "description": "...",
 *    "sources"*: ["...", ...],                 where the profile's statements come from, 1 to 32
 *    "schedules"*: ["1f1b", "interleaved"],    pipeline schedules the stack runs (names of
 *                                              program/layout.h), at least one
 *    "recompute": ["none", "selective", "full"], policies it offers, default all
 *    "zero": [0, 1, 2, 3],                     ZeRO stages (distributed optimizer, FSDP flavours)
 *    "pp_max_zero": 3,                         highest ZeRO stage it runs with pp > 1, [0, 3]
 *    "dimensions": {"tp": true, "pp": true, "cp": true, "ep": true, "sp": true, "etp": false},
 *                                              etp: experts split over a TP degree of their
 *                                              own (1 beside tp); default false
 *    "flash_attention": true,                  fused attention (false: unfused softmax)
 *    "cross_entropy_fusion": true,             the loss's cross entropy fused (false: Megatron's
 *                                              unfused passes over fp32 logits)
 *    "overlap": {"tp_comm": "system", "dp_comm": 0.9, "pp_sends": 1},
 *                                              fractions in [0, 1] or "system" (the system
 *                                              file's value), default "system"
 *    "pp_scatter_gather": true,                pipeline sends split over the TP ranks and
 *                                              gathered after (false: each TP rank sends all)
 *    "grad_reduce_dtype": "grad",              fp32 | bf16 | fp16 | grad (the gradients' own)
 *    "grad_accum_bytes": 18,                   bytes per parameter of the gradient accumulation
 *                                              pass after each micro-batch, [0, 64], default 0
 *    "moe_a2a_overlap": 1,                     EP dispatch/combine hidden, [0, 1] or "system"
 *                                              (no statement: --moe-a2a-overlap's default)
 *    "comm_sm_frac": 0.15,                     SMs held by overlapped communication, [0, 1)
 *    "grouped_gemm_streams": 4,                the local experts' grouped GEMM as one cuBLAS GEMM
 *                                              per expert over that many streams, [0, 64];
 *                                              default 0: one grouped kernel
 *    "moe_bias_etp1": true,                    experts with biases only apart from TP (etp 1);
 *                                              default false
 *    "dtype": "fp8", "fp8_recipe": "blockwise", the precision it trains in (default none; the
 *                                              caller checks the names)
 *    "notes": {...}}                           free-form: what the profile states but Tessera
 *                                              does not price (dropout, CP/EP overlap, kernels) */
#include "models/stack.h"

#include <stdio.h>
#include <string.h>

#include "common/json.h"
#include "common/paths.h"
#include "models/system.h"

#define MAX_SOURCES 32

static const char *const root_keys[] = {"name", "description", "sources", "schedules", "recompute",
                                        "zero", "pp_max_zero", "dimensions", "flash_attention", "cross_entropy_fusion",
                                        "overlap", "pp_scatter_gather", "grad_reduce_dtype",
                                        "grad_accum_bytes", "moe_a2a_overlap", "comm_sm_frac", "grouped_gemm_streams",
                                        "moe_bias_etp1", "dtype",
                                        "fp8_recipe",
                                        "notes", NULL};
static const char *const dim_keys[] = {"tp", "pp", "cp", "ep", "sp", "etp", "source", NULL};
static const char *const overlap_keys[] = {"tp_comm", "dp_comm", "pp_sends", "source", NULL};
static const char *const reduce_names[] = {"grad", "fp32", "bf16", "fp16", NULL};
static const double reduce_bytes[] = {0, 4, 2, 2};

void ts_stack_defaults(ts_stack *s) {
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "any");
    s->zero = 0xf;
    s->pp_max_zero = 3;
    s->tp = s->pp = s->cp = s->ep = s->sp = s->etp = 1;
    s->flash_attention = 1;
    s->ce_fused = 1;
    s->pp_scatter_gather = 1;
    s->tp_comm_overlap = s->dp_comm_overlap = s->pp_comm_overlap = TS_STACK_SYSTEM;
    s->moe_a2a_overlap = TS_STACK_SYSTEM;
    s->dtype = -1;
}

/* Refuses keys of `obj` not listed in `allowed` (NULL obj: nothing to check). */
static ts_status check_keys(const ts_jreader *r, const cJSON *obj, const char *const *allowed) {
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        int known = 0;
        for (int i = 0; allowed[i] && !known; i++) known = strcmp(allowed[i], it->string) == 0;
        if (!known)
            return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s: unknown field", r->file, r->path, it->string);
    }
    return TS_OK;
}

/* The array of `key` (or its "value"); required, at least one element. */
static ts_status array_of(const ts_jreader *r, const cJSON *root, const char *key, const char *what,
                          const cJSON **out) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, key);
    if (cJSON_IsObject(a)) a = cJSON_GetObjectItemCaseSensitive(a, "value");
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) < 1)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s: expected a non-empty array of %s, got %s", r->file, r->path,
                       key, what, cJSON_IsArray(a) ? "an empty array" : ts_json_type_name(a));
    *out = a;
    return TS_OK;
}

/* A list of names from `names` as a bit mask; absent and optional: `def`. */
static ts_status name_mask(const ts_jreader *r, const cJSON *root, const char *key, int required,
                           const char *const *names, unsigned def, unsigned *out) {
    *out = def;
    if (!required && cJSON_GetObjectItemCaseSensitive(root, key) == NULL) return TS_OK;
    char list[160] = "";
    for (int i = 0; names[i]; i++) {
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", names[i]);
    }
    const cJSON *a, *it;
    TS_CHECK(array_of(r, root, key, list, &a));
    unsigned mask = 0;
    int idx = 0;
    cJSON_ArrayForEach(it, a) {
        int found = -1;
        for (int i = 0; names[i] && found < 0 && cJSON_IsString(it); i++)
            if (strcmp(names[i], it->valuestring) == 0) found = i;
        if (found < 0)
            return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s[%d]: expected one of %s, got %s%s%s", r->file, r->path, key,
                           idx, list, cJSON_IsString(it) ? "\"" : "",
                           cJSON_IsString(it) ? it->valuestring : ts_json_type_name(it),
                           cJSON_IsString(it) ? "\"" : "");
        mask |= 1u << found;
        idx++;
    }
    *out = mask;
    return TS_OK;
}

static ts_status zero_mask(const ts_jreader *r, const cJSON *root, unsigned *out) {
    *out = 0xf;
    if (cJSON_GetObjectItemCaseSensitive(root, "zero") == NULL) return TS_OK;
    const cJSON *a, *it;
    TS_CHECK(array_of(r, root, "zero", "ZeRO stages 0 to 3", &a));
    unsigned mask = 0;
    int idx = 0;
    cJSON_ArrayForEach(it, a) {
        if (!cJSON_IsNumber(it))
            return TS_FAIL(TS_ERR_INPUT, "%s: %s.zero[%d]: expected an integer in [0, 3], got %s", r->file, r->path,
                           idx, ts_json_type_name(it));
        /* range first: (int) of a double outside int's range (1e300) is undefined */
        if (!(it->valuedouble >= 0 && it->valuedouble <= 3) || it->valuedouble != (int)it->valuedouble)
            return TS_FAIL(TS_ERR_INPUT, "%s: %s.zero[%d]: expected an integer in [0, 3], got %g", r->file, r->path,
                           idx, it->valuedouble);
        mask |= 1u << it->valueint;
        idx++;
    }
    *out = mask;
    return TS_OK;
}

/* An overlap fraction in [0, 1] or "system" (TS_STACK_SYSTEM); absent: "system". */
static ts_status overlap_frac(const ts_jreader *r, const cJSON *obj, const char *key, double *out) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (cJSON_IsObject(it)) it = cJSON_GetObjectItemCaseSensitive(it, "value");
    if (it == NULL || (cJSON_IsString(it) && strcmp(it->valuestring, "system") == 0)) {
        *out = TS_STACK_SYSTEM;
        return TS_OK;
    }
    if (!cJSON_IsNumber(it))
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s: expected a number in [0, 1] or \"system\", got %s", r->file,
                       r->path, key, ts_json_type_name(it));
    if (!(it->valuedouble >= 0 && it->valuedouble <= 1))
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s: expected a number in [0, 1] or \"system\", got %g", r->file,
                       r->path, key, it->valuedouble);
    *out = it->valuedouble;
    return TS_OK;
}

static ts_status read_sources(const ts_jreader *r, const cJSON *root) {
    const cJSON *a, *it;
    TS_CHECK(array_of(r, root, "sources", "strings", &a));
    int idx = 0;
    cJSON_ArrayForEach(it, a) {
        if (!cJSON_IsString(it) || !it->valuestring[0] || idx >= MAX_SOURCES)
            return TS_FAIL(TS_ERR_INPUT, "%s: $.sources[%d]: expected a non-empty string (at most %d), got %s",
                           r->file, idx, MAX_SOURCES, ts_json_type_name(it));
        idx++;
    }
    return TS_OK;
}

static ts_status read_dims(const ts_jreader *r, const cJSON *root, ts_stack *s) {
    ts_jreader dr;
    const cJSON *dims;
    ts_jreader_child(r, "dimensions", 0, &dr);
    TS_CHECK(ts_jr_obj(r, root, "dimensions", 0, &dims));
    TS_CHECK(check_keys(&dr, dims, dim_keys));
    TS_CHECK(ts_jr_bool(&dr, dims, "tp", 0, 1, &s->tp));
    TS_CHECK(ts_jr_bool(&dr, dims, "pp", 0, 1, &s->pp));
    TS_CHECK(ts_jr_bool(&dr, dims, "cp", 0, 1, &s->cp));
    TS_CHECK(ts_jr_bool(&dr, dims, "ep", 0, 1, &s->ep));
    TS_CHECK(ts_jr_bool(&dr, dims, "etp", 0, 0, &s->etp));
    return ts_jr_bool(&dr, dims, "sp", 0, 1, &s->sp);
}

static ts_status read_overlap(const ts_jreader *r, const cJSON *root, ts_stack *s) {
    ts_jreader orr;
    const cJSON *ov;
    ts_jreader_child(r, "overlap", 0, &orr);
    TS_CHECK(ts_jr_obj(r, root, "overlap", 0, &ov));
    TS_CHECK(check_keys(&orr, ov, overlap_keys));
    TS_CHECK(overlap_frac(&orr, ov, "tp_comm", &s->tp_comm_overlap));
    TS_CHECK(overlap_frac(&orr, ov, "dp_comm", &s->dp_comm_overlap));
    return overlap_frac(&orr, ov, "pp_sends", &s->pp_comm_overlap);
}

ts_status ts_stack_from_json(const char *file, const cJSON *root, const char *const *schedule_names,
                             const char *const *recompute_names, ts_stack *out) {
    ts_stack s;
    ts_stack_defaults(&s);
    ts_jreader r;
    ts_jreader_root(&r, file);
    if (!cJSON_IsObject(root))
        return TS_FAIL(TS_ERR_INPUT, "%s: $: expected a stack object, got %s", file, ts_json_type_name(root));
    TS_CHECK(check_keys(&r, root, root_keys));
    TS_CHECK(ts_jr_str(&r, root, "name", 1, "", s.name, sizeof s.name));
    if (!s.name[0]) return TS_FAIL(TS_ERR_INPUT, "%s: $.name: expected a non-empty string, got \"\"", file);
    TS_CHECK(ts_jr_str(&r, root, "description", 0, "", s.description, sizeof s.description));
    TS_CHECK(read_sources(&r, root));
    TS_CHECK(name_mask(&r, root, "schedules", 1, schedule_names, 0, &s.schedules));
    TS_CHECK(name_mask(&r, root, "recompute", 0, recompute_names, 0, &s.recompute));
    TS_CHECK(zero_mask(&r, root, &s.zero));
    int64_t pmz;
    TS_CHECK(ts_jr_int(&r, root, "pp_max_zero", 0, 0, 3, 3, &pmz));
    s.pp_max_zero = (int)pmz;
    TS_CHECK(read_dims(&r, root, &s));
    TS_CHECK(ts_jr_bool(&r, root, "flash_attention", 0, 1, &s.flash_attention));
    TS_CHECK(ts_jr_bool(&r, root, "cross_entropy_fusion", 0, 1, &s.ce_fused));
    TS_CHECK(read_overlap(&r, root, &s));
    TS_CHECK(ts_jr_bool(&r, root, "pp_scatter_gather", 0, 1, &s.pp_scatter_gather));
    int reduce;
    TS_CHECK(ts_jr_enum(&r, root, "grad_reduce_dtype", 0, reduce_names, 0, &reduce));
    s.grad_reduce_bytes = reduce_bytes[reduce];
    TS_CHECK(ts_jr_num(&r, root, "grad_accum_bytes", 0, 0, 64, 0, &s.grad_accum_bytes));
    TS_CHECK(overlap_frac(&r, root, "moe_a2a_overlap", &s.moe_a2a_overlap));
    TS_CHECK(ts_jr_num(&r, root, "comm_sm_frac", 0, 0, 0.99, 0, &s.comm_sm_frac));
    TS_CHECK(ts_jr_i32(&r, root, "grouped_gemm_streams", 0, 0, 64, 0, &s.grouped_gemm_streams));
    TS_CHECK(ts_jr_bool(&r, root, "moe_bias_etp1", 0, 0, &s.moe_bias_etp1));
    TS_CHECK(ts_jr_enum(&r, root, "dtype", 0, ts_dtype_names, -1, &s.dtype));
    TS_CHECK(ts_jr_str(&r, root, "fp8_recipe", 0, "", s.fp8_recipe, sizeof s.fp8_recipe));
    snprintf(s.file, sizeof s.file, "%s", file);
    *out = s;
    return TS_OK;
}

ts_status ts_stack_load(const char *name_or_path, const char *const *schedule_names,
                        const char *const *recompute_names, ts_stack *out) {
    char path[4096];
    cJSON *root = NULL;
    TS_CHECK(ts_zoo_resolve("models/stacks", name_or_path, path, sizeof path));
    TS_CHECK(ts_json_load_file(path, &root));
    ts_status st = ts_stack_from_json(path, root, schedule_names, recompute_names, out);
    cJSON_Delete(root);
    return st;
}
