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

ts_status ts_json_parse(const char *name, const char *text, cJSON **out) {
    const char *end = NULL;
    *out = cJSON_ParseWithOpts(text, &end, 1);
    if (*out != NULL) return TS_OK;
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

ts_status ts_json_load_file(const char *path, cJSON **out) {
    *out = NULL;
    ts_status res = TS_OK;
    char *buf = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL) return TS_FAIL(TS_ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        res = TS_FAIL(TS_ERR_INPUT, "%s: is a directory, expected a JSON file", path);
        goto exit;
    }
    if (fseek(f, 0, SEEK_END) != 0) {
        res = TS_FAIL(TS_ERR_IO, "%s: cannot seek: %s", path, strerror(errno));
        goto exit;
    }
    long size = ftell(f);
    if (size < 0) {
        res = TS_FAIL(TS_ERR_INPUT, "%s: not a regular file", path);
        goto exit;
    }
    if (size > TS_JSON_MAX_FILE_BYTES) {
        res = TS_FAIL(TS_ERR_INPUT, "%s: %ld bytes is larger than the %ld-byte limit for a spec",
                      path, size, TS_JSON_MAX_FILE_BYTES);
        goto exit;
    }
    rewind(f);
    buf = malloc((size_t)size + 1);
    TS_ALLOC_GOTO(buf, res, exit);
    if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
        res = TS_FAIL(TS_ERR_IO, "%s: short read", path);
        goto exit;
    }
    buf[size] = '\0';
    if (strlen(buf) != (size_t)size) {
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
    double v = it->valuedouble;
    /* Compare as doubles first: casting an out-of-range double to int64 is undefined. */
    if (!isfinite(v) || v != floor(v) || v < (double)min || v > (double)max)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s: expected an integer in [%lld, %lld], got %g",
                       r->file, r->path, key, (long long)min, (long long)max, v);
    *out = (int64_t)v;
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

ts_status ts_jr_enum(const ts_jreader *r, const cJSON *obj, const char *key, int required,
                     const char *const *names, int def, int *out) {
    const cJSON *it = field_value(obj, key);
    char choices[256] = "";
    for (int i = 0; names[i]; i++) {
        size_t used = strlen(choices);
        snprintf(choices + used, sizeof choices - used, "%s\"%s\"", i ? " | " : "", names[i]);
    }
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
