/* Reading back the tagged numbers of an HTML page (reports/markup.h) and checking each against
 * the page's JSON form: <span class="n" data-key="a.b[2].c" data-unit="GB">12.3</span> must
 * show json(a.b[2].c) / scale(GB) to the digits printed, and <span class="s" data-key="k">text
 * </span> must equal the JSON string (after unescaping). Used by the report and sweep tests. */
#ifndef TS_TESTS_TAGGED_H
#define TS_TESTS_TAGGED_H

#include <cjson/cJSON.h>

typedef struct {
    int numbers, strings; /* tagged spans checked */
    int failures;         /* spans that did not match (each is reported with cr_expect) */
} tagged_stats;

/* Checks every tagged span of `html` against `json`; `what` names the page in messages. */
tagged_stats check_tagged(const char *html, const cJSON *json, const char *what);

/* 1 when `html` holds a span tagged with exactly `key`. */
int has_tag(const char *html, const char *key);

/* The JSON item at a path such as "layouts[0].memory_bytes.total" (NULL when absent). */
const cJSON *json_at_path(const cJSON *root, const char *path);

#endif
