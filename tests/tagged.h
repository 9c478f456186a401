/* Reading back the tagged numbers of an HTML page (reports/markup.h) and checking each against
 * the page's JSON form: <span class="n" data-key="a.b[2].c" data-unit="GB">12.3</span> must
 * show json(a.b[2].c) / scale(GB) to the digits printed, and <span class="s" data-key="k">text
 * </span> must equal the JSON string (after unescaping), and no other number may show in the
 * page's text but a short allow-list (untagged_numbers). Used by the report and sweep tests. */
#ifndef TS_TESTS_TAGGED_H
#define TS_TESTS_TAGGED_H

#include <cjson/cJSON.h>

typedef struct {
    int numbers, strings; /* tagged spans checked */
    int untagged;         /* numbers in the visible text outside tagged spans (untagged_numbers) */
    int failures;         /* spans that did not match, plus untagged numbers (each reported with cr_expect) */
} tagged_stats;

/* Checks every tagged span of `html` against `json`, and that the page shows no number outside
 * them; `what` names the page in messages. */
tagged_stats check_tagged(const char *html, const cJSON *json, const char *what);

/* Numbers in the visible text of `html` (its <body>, outside tags and tagged spans): a word that
 * holds a digit and reads whole as a number ("12.3", "1e+12"; not "h100", "bf16", "16-bit").
 * Allowed, inside <svg> only: axis ticks (<text class="tick">), and a number right after
 * "stage " (Gantt rows) or "#" (chart rows). Returns how many; up to `cap` of them are described
 * ("12.3 in …context…") in `first[]`, each a line of at most 160 characters. */
int untagged_numbers(const char *html, char (*first)[160], int cap);

/* 1 when `html` holds a span tagged with exactly `key`. */
int has_tag(const char *html, const char *key);

/* The JSON item at a path such as "layouts[0].memory_bytes.total" (NULL when absent). */
const cJSON *json_at_path(const cJSON *root, const char *path);

#endif
