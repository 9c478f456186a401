/* cJSON-based readers with path-aware errors and atomic writes (see json.h). */
#include "common/json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TS_JSON_MAX_FILE_BYTES (64L << 20)

static int key_cmp(const void *a, const void *b) {
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* The first key that `obj` holds twice, or NULL: pairwise for the small objects of specs, sorted
 * for large ones (a hostile file must not make this quadratic). */
static ts_status twice_in(const cJSON *obj, int n, const char **dup) {
    *dup = NULL;
    if (n <= 16) {
        for (const cJSON *a = obj->child; a && !*dup; a = a->next)
            for (const cJSON *b = a->next; b; b = b->next)
                if (strcmp(a->string, b->string) == 0) {
                    *dup = a->string;
                    break;
                }
        return TS_OK;
    }
    const cJSON **keys = malloc((size_t)n * sizeof *keys);
    if (keys == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory checking keys");
    int k = 0;
    for (const cJSON *c = obj->child; c; c = c->next) keys[k++] = c;
    qsort(keys, (size_t)n, sizeof *keys, key_cmp);
    for (int i = 1; i < n && !*dup; i++)
        if (strcmp(keys[i - 1]->string, keys[i]->string) == 0) *dup = keys[i]->string;
    free(keys);
    return TS_OK;
}

/* RFC 8259 section 4 leaves duplicate names' meaning open: cJSON keeps the first, Python's json
 * (and so Hugging Face) the last. A file that means two things is refused, naming the key and the
 * JSON path of the object (`path` holds it, `len` bytes used, extended in place while walking;
 * cJSON's nesting limit of 1000 bounds the recursion). */
static ts_status check_duplicates(const char *name, const cJSON *item, char *path, size_t len, size_t cap) {
    if (!cJSON_IsObject(item) && !cJSON_IsArray(item)) return TS_OK;
    int n = 0;
    for (const cJSON *c = item->child; c; c = c->next) n++;
    if (cJSON_IsObject(item)) {
        const char *dup;
        TS_CHECK(twice_in(item, n, &dup));
        if (dup)
            return TS_FAIL(TS_ERR_INPUT, "%s: %s.%.60s: duplicate key \"%.60s\" (each key may appear once per object)",
                           name, path, dup, dup);
    }
    int i = 0;
    for (const cJSON *c = item->child; c; c = c->next, i++) {
        if (!cJSON_IsObject(c) && !cJSON_IsArray(c)) continue;
        int w = cJSON_IsObject(item) ? snprintf(path + len, cap - len, ".%.60s", c->string)
                                     : snprintf(path + len, cap - len, "[%d]", i);
        size_t used = w < 0 || (size_t)w >= cap - len ? cap - 1 : len + (size_t)w;
        TS_CHECK(check_duplicates(name, c, path, used, cap));
        path[len] = '\0';
    }
    return TS_OK;
}

ts_status ts_json_parse(const char *name, const char *text, cJSON **out) {
    const char *end = NULL;
    *out = cJSON_ParseWithOpts(text, &end, 1);
    if (*out != NULL) {
        char path[512] = "$";
        ts_status st = check_duplicates(name, *out, path, 1, sizeof path);
        if (st != TS_OK) {
            cJSON_Delete(*out);
            *out = NULL;
        }
        return st;
    }
    /* cJSON reports where it stopped; turn the offset into line:col for the user. */
    int line = 1, col = 1;
    const char *stop = end ? end : text;
    for (const char *p = text; *p && p < stop; p++) {
        if (*p == '\n') { line++; col = 1; } else { col++; }
    }
    if (*stop == '\0')
        return TS_FAIL(TS_ERR_INPUT, "%s:%d:%d: invalid JSON: unexpected end of input (truncated?)",
                       name, line, col);
    /* Quote at most 20 bytes of what follows, up to the end of its line: the message stays one
     * line (control characters become '?'). */
    char near[21];
    size_t n = 0;
    for (; n < sizeof near - 1 && stop[n] != '\0' && stop[n] != '\n' && stop[n] != '\r'; n++)
        near[n] = (unsigned char)stop[n] < 0x20 ? '?' : stop[n];
    near[n] = '\0';
    return TS_FAIL(TS_ERR_INPUT, "%s:%d:%d: invalid JSON near '%s'", name, line, col, near);
}

/* The whole of `f` into a NUL-terminated buffer, growing as it comes: no seek, so pipes, FIFOs
 * and /dev/stdin read like files. More than `max_bytes` is refused while reading. */
static ts_status read_all(const char *path, FILE *f, long max_bytes, char **out, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (buf == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory reading %s", path);
    for (;;) {
        if (n + 1 >= cap) {
            char *grown = realloc(buf, cap * 2);
            if (grown == NULL) {
                free(buf);
                return TS_FAIL(TS_ERR_NOMEM, "out of memory reading %s", path);
            }
            buf = grown, cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (n > (size_t)max_bytes) {
            free(buf);
            return TS_FAIL(TS_ERR_INPUT, "%s: larger than the %ld-byte limit for a spec", path, max_bytes);
        }
        if (got == 0) break;
    }
    if (ferror(f)) {
        free(buf);
        return TS_FAIL(TS_ERR_IO, "%s: read failed: %s", path, strerror(errno));
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return TS_OK;
}

ts_status ts_json_load_file(const char *path, cJSON **out) {
    *out = NULL;
    ts_status res = TS_OK;
    char *buf = NULL;
    size_t size = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL) return TS_FAIL(TS_ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        res = TS_FAIL(TS_ERR_INPUT, "%s: is a directory, expected a JSON file", path);
        goto exit;
    }
    TS_CHECK_GOTO(read_all(path, f, TS_JSON_MAX_FILE_BYTES, &buf, &size), res, exit);
    if (strlen(buf) != size) {
        res = TS_FAIL(TS_ERR_INPUT, "%s: contains a NUL byte: not a JSON text file", path);
        goto exit;
    }
    res = ts_json_parse(path, buf, out);
exit:
    free(buf);
    fclose(f);
    return res;
}

void ts_jreader_root(ts_jreader *r, const char *file) {
    r->file = file;
    snprintf(r->path, sizeof r->path, "$");
}

void ts_jreader_child(const ts_jreader *parent, const char *key, int index, ts_jreader *child) {
    child->file = parent->file;
    if (key)
        snprintf(child->path, sizeof child->path, "%.200s.%.50s", parent->path, key);
    else
        snprintf(child->path, sizeof child->path, "%.200s[%d]", parent->path, index);
}

const char *ts_json_type_name(const cJSON *item) {
    if (item == NULL) return "nothing";
    if (cJSON_IsNull(item)) return "null";
    if (cJSON_IsBool(item)) return cJSON_IsTrue(item) ? "true" : "false";
    if (cJSON_IsNumber(item)) return "a number";
    if (cJSON_IsString(item)) return "a string";
    if (cJSON_IsArray(item)) return "an array";
    if (cJSON_IsObject(item)) return "an object";
    return "an invalid value";
}

/* The field, or its "value" when written as {"value": x, "source": "..."}. */
static const cJSON *field_value(const cJSON *obj, const char *key) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (cJSON_IsObject(it) && cJSON_GetObjectItemCaseSensitive(it, "value"))
        return cJSON_GetObjectItemCaseSensitive(it, "value");
    return it;
}

static ts_status missing(const ts_jreader *r, const char *key, const char *expected) {
    return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s: missing field, expected %s", r->file, r->path, key,
                   expected);
}

ts_status ts_jr_num(const ts_jreader *r, const cJSON *obj, const char *key, int required,
                    double min, double max, double def, double *out) {
    const cJSON *it = field_value(obj, key);
    if (it == NULL) {
        if (required) return missing(r, key, "a number");
        *out = def;
        return TS_OK;
    }
    if (!cJSON_IsNumber(it))
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s: expected a number in [%g, %g], got %s", r->file,
                       r->path, key, min, max, ts_json_type_name(it));
    double v = it->valuedouble;
    if (!isfinite(v) || v < min || v > max)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s: expected a number in [%g, %g], got %g", r->file,
                       r->path, key, min, max, v);
    /* "-0" is zero: one zero, so a figure reads back and compares as the same value. */
    *out = v == 0 ? 0.0 : v;
    return TS_OK;
}

int ts_json_int_in(const cJSON *item, int64_t min, int64_t max, int64_t *out) {
    if (!cJSON_IsNumber(item)) return 0;
    double v = item->valuedouble;
    /* Compare as doubles first: converting a double outside int64's range is undefined, and
     * (double)INT64_MAX rounds up to 2^63, itself out of range. */
    if (!isfinite(v) || v != floor(v) || v < (double)min || v > (double)max || v >= 9223372036854775808.0)
        return 0;
    *out = (int64_t)v;
    return 1;
}

ts_status ts_jr_i32(const ts_jreader *r, const cJSON *obj, const char *key, int required, int min, int max,
                    int def, int *out) {
    int64_t v;
    TS_CHECK(ts_jr_int(r, obj, key, required, min, max, def, &v));
    *out = (int)v;
    return TS_OK;
}

ts_status ts_jr_int(const ts_jreader *r, const cJSON *obj, const char *key, int required,
                    int64_t min, int64_t max, int64_t def, int64_t *out) {
    const cJSON *it = field_value(obj, key);
    if (it == NULL) {
        if (required) return missing(r, key, "an integer");
        *out = def;
        return TS_OK;
    }
    if (!cJSON_IsNumber(it))
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s: expected an integer in [%lld, %lld], got %s",
                       r->file, r->path, key, (long long)min, (long long)max,
                       ts_json_type_name(it));
    if (!ts_json_int_in(it, min, max, out))
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s: expected an integer in [%lld, %lld], got %g",
                       r->file, r->path, key, (long long)min, (long long)max, it->valuedouble);
    return TS_OK;
}

ts_status ts_jr_bool(const ts_jreader *r, const cJSON *obj, const char *key, int required, int def,
                     int *out) {
    const cJSON *it = field_value(obj, key);
    if (it == NULL) {
        if (required) return missing(r, key, "true or false");
        *out = def;
        return TS_OK;
    }
    if (!cJSON_IsBool(it))
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s: expected true or false, got %s", r->file, r->path,
                       key, ts_json_type_name(it));
    *out = cJSON_IsTrue(it);
    return TS_OK;
}

ts_status ts_jr_str(const ts_jreader *r, const cJSON *obj, const char *key, int required,
                    const char *def, char *buf, size_t cap) {
    const cJSON *it = field_value(obj, key);
    const char *s = def;
    if (it == NULL) {
        if (required) return missing(r, key, "a string");
    } else if (!cJSON_IsString(it)) {
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s: expected a string, got %s", r->file, r->path,
                       key, ts_json_type_name(it));
    } else {
        s = it->valuestring;
    }
    if (s == NULL) s = "";
    size_t n = strlen(s);
    if (n >= cap)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s: expected a string of at most %zu characters, got %zu",
                       r->file, r->path, key, cap - 1, n);
    memcpy(buf, s, n + 1);
    return TS_OK;
}

/* "\"a\" | \"b\"": the names an enum field takes, for its messages. */
static void enum_choices(const char *const *names, char *buf, size_t cap) {
    buf[0] = 0;
    for (int i = 0; names[i]; i++) {
        size_t used = strlen(buf);
        snprintf(buf + used, cap - used, "%s\"%s\"", i ? " | " : "", names[i]);
    }
}

ts_status ts_jr_enum_set(const ts_jreader *r, const cJSON *obj, const char *key, int required,
                         const char *const *names, unsigned def, unsigned *out) {
    const cJSON *it = field_value(obj, key);
    if (it == NULL) {
        if (required) return missing(r, key, "an array of names");
        *out = def;
        return TS_OK;
    }
    if (!cJSON_IsArray(it))
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s: expected an array of names, got %s", r->file, r->path, key,
                       ts_json_type_name(it));
    unsigned mask = 0;
    int index = 0;
    for (const cJSON *e = it->child; e; e = e->next, index++) {
        int found = -1;
        for (int i = 0; names[i] && i < 32 && found < 0 && cJSON_IsString(e); i++)
            if (strcmp(names[i], e->valuestring) == 0) found = i;
        if (found < 0) {
            char choices[256];
            enum_choices(names, choices, sizeof choices);
            return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s[%d]: expected %s, got %s%.40s%s", r->file, r->path, key, index,
                           choices, cJSON_IsString(e) ? "\"" : "", cJSON_IsString(e) ? e->valuestring : ts_json_type_name(e),
                           cJSON_IsString(e) ? "\"" : "");
        }
        mask |= 1u << found;
    }
    *out = mask;
    return TS_OK;
}

ts_status ts_jr_enum(const ts_jreader *r, const cJSON *obj, const char *key, int required,
                     const char *const *names, int def, int *out) {
    const cJSON *it = field_value(obj, key);
    char choices[256];
    enum_choices(names, choices, sizeof choices);
    if (it == NULL) {
        if (required) return missing(r, key, choices);
        *out = def;
        return TS_OK;
    }
    if (cJSON_IsString(it)) {
        for (int i = 0; names[i]; i++)
            if (strcmp(names[i], it->valuestring) == 0) {
                *out = i;
                return TS_OK;
            }
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s: expected %s, got \"%.40s\"", r->file, r->path, key,
                       choices, it->valuestring);
    }
    return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s: expected %s, got %s", r->file, r->path, key, choices,
                   ts_json_type_name(it));
}

ts_status ts_jr_known_keys(const ts_jreader *r, const cJSON *obj, const char *const *keys) {
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        int k = 0;
        while (keys[k] != NULL && strcmp(keys[k], it->string) != 0) k++;
        if (keys[k] != NULL) continue;
        char list[512] = "";
        for (k = 0; keys[k] != NULL; k++) {
            size_t used = strlen(list);
            snprintf(list + used, sizeof list - used, "%s%s", k ? ", " : "", keys[k]);
        }
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.%.60s: unknown field, expected one of %s", r->file, r->path, it->string,
                       list);
    }
    return TS_OK;
}

ts_status ts_jr_obj(const ts_jreader *r, const cJSON *obj, const char *key, int required,
                    const cJSON **out) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = NULL;
    if (it == NULL || cJSON_IsNull(it)) {
        if (required) return missing(r, key, "an object");
        return TS_OK;
    }
    if (!cJSON_IsObject(it))
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s: expected an object, got %s", r->file, r->path,
                       key, ts_json_type_name(it));
    *out = it;
    return TS_OK;
}

ts_status ts_json_write_file(const char *path, const cJSON *root) {
    char *text = cJSON_Print(root);
    if (text == NULL) return TS_FAIL(TS_ERR_NOMEM, "cJSON_Print: out of memory");
    size_t n = strlen(text);
    char *withnl = realloc(text, n + 2);
    if (withnl == NULL) {
        free(text);
        return TS_FAIL(TS_ERR_NOMEM, "out of memory printing %s", path);
    }
    withnl[n] = '\n';
    withnl[n + 1] = '\0';
    ts_status res = ts_write_file_atomic(path, withnl, n + 1);
    free(withnl);
    return res;
}
