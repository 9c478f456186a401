/* Reading and writing Tessera's JSON files through cJSON, with errors that name the place.
 *
 * Every loader reads fields through a ts_jreader, which knows the file name and the JSON path of
 * the object it reads, so a bad field becomes one line such as
 *     models/llm/x.json: $.moe.top_k: expected an integer in [1, 256], got 0
 * Numbers may be written plainly (80e9) or as {"value": 80e9, "source": "..."} so that every figure
 * of a spec can carry where it came from; readers accept both. */
#ifndef TS_JSON_H
#define TS_JSON_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/output.h"
#include "common/status.h"

typedef struct {
    const char *file; /* shown in messages; not owned */
    char path[256];   /* JSON path of the object being read, "$" at the root */
} ts_jreader;

/* Parses `path` into a cJSON tree that the caller frees with cJSON_Delete. A syntax error names
 * the file, line and column. The file is read as a stream (pipes, FIFOs, /dev/stdin), and more
 * than 64 MiB is refused. */
ts_status ts_json_load_file(const char *path, cJSON **out);
/* Same for text already in memory; `name` is used in messages. A key written twice in one
 * object is refused, naming the key and its JSON path. */
ts_status ts_json_parse(const char *name, const char *text, cJSON **out);

void ts_jreader_root(ts_jreader *r, const char *file);
/* A reader for the child object or array element `key` (or `[index]` when key is NULL). */
void ts_jreader_child(const ts_jreader *parent, const char *key, int index, ts_jreader *child);

/* Field readers. When the field is absent: required → TS_ERR_INPUT, else *out = def.
 * Wrong type, non-finite or out-of-range values → TS_ERR_INPUT naming file, path, expected, got. */
ts_status ts_jr_int(const ts_jreader *r, const cJSON *obj, const char *key, int required,
                    int64_t min, int64_t max, int64_t def, int64_t *out);
/* The same into an int: the range [min, max] lies within int's, so nothing read wraps. */
ts_status ts_jr_i32(const ts_jreader *r, const cJSON *obj, const char *key, int required, int min, int max,
                    int def, int *out);
/* Whether `item` is a number holding an integer in [min, max], checked before any conversion
 * (converting a double outside the target's range, 1e300, is undefined); *out the value. */
int ts_json_int_in(const cJSON *item, int64_t min, int64_t max, int64_t *out);
ts_status ts_jr_num(const ts_jreader *r, const cJSON *obj, const char *key, int required,
                    double min, double max, double def, double *out);
ts_status ts_jr_bool(const ts_jreader *r, const cJSON *obj, const char *key, int required, int def,
                     int *out);
ts_status ts_jr_str(const ts_jreader *r, const cJSON *obj, const char *key, int required,
                    const char *def, char *buf, size_t cap);
/* One of `names` (NULL-terminated); *out is its index. */
ts_status ts_jr_enum(const ts_jreader *r, const cJSON *obj, const char *key, int required,
                     const char *const *names, int def, int *out);
/* An array of `names` (at most 32, NULL-terminated): *out has bit i for each element naming
 * names[i]; `def` when absent. An element that is not one of them is refused, naming its index. */
ts_status ts_jr_enum_set(const ts_jreader *r, const cJSON *obj, const char *key, int required,
                         const char *const *names, unsigned def, unsigned *out);
/* Refuses members of `obj` (NULL: an absent optional object, fine) not named in the NULL-terminated
 * `keys`: "FILE: PATH.KEY: unknown field, expected one of a, b, c". */
ts_status ts_jr_known_keys(const ts_jreader *r, const cJSON *obj, const char *const *keys);
/* An object member: *out is NULL when absent and not required. */
ts_status ts_jr_obj(const ts_jreader *r, const cJSON *obj, const char *key, int required,
                    const cJSON **out);

/* A short description of a JSON value's type for "got ..." ("a string", "null", "an array"). */
const char *ts_json_type_name(const cJSON *item);

/* Prints `root` formatted and writes it by common/output.h's rule, with a trailing newline. */
ts_status ts_json_write_file(const char *path, const cJSON *root);

/* cJSON builders return NULL when out of memory; this records it and jumps to `label`. */
#define TS_CJSON_GOTO(expr, res, label)                                                            \
    do {                                                                                           \
        if ((expr) == NULL) {                                                                      \
            (res) = TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory in %s", #expr);                    \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

#endif
