/* Tagged numbers of HTML pages against their JSON form (see tagged.h). */
#include "tests/tagged.h"

#include <criterion/criterion.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The data-unit scales, written out here independently of reports/markup.c. */
static double unit_scale(const char *unit) {
    static const struct {
        const char *unit;
        double scale;
    } units[] = {{"", 1},       {"%", 0.01},   {"MB", 1e6},       {"GB", 1e9}, {"GB/s", 1e9},
                 {"TB/s", 1e12}, {"TFLOP/s", 1e12}, {"us", 1e-6}, {"W", 1}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(unit, units[i].unit) == 0) return units[i].scale;
    return 0;
}

const cJSON *json_at_path(const cJSON *root, const char *path) {
    const cJSON *at = root;
    const char *p = path;
    while (at && *p) {
        if (*p == '.') p++;
        if (*p == '[') {
            char *end = NULL;
            long i = strtol(p + 1, &end, 10);
            if (*end != ']' || !cJSON_IsArray(at)) return NULL;
            at = cJSON_GetArrayItem(at, (int)i);
            p = end + 1;
            continue;
        }
        size_t n = strcspn(p, ".[");
        char key[128];
        if (n == 0 || n >= sizeof key) return NULL;
        memcpy(key, p, n);
        key[n] = '\0';
        at = cJSON_GetObjectItemCaseSensitive(at, key);
        p += n;
    }
    return at;
}

/* The text between `from` and the next `stop`, HTML entities decoded, into buf. */
static void unescape(const char *from, const char *stop, char *buf, size_t cap) {
    static const struct {
        const char *entity;
        char c;
    } entities[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&#39;", '\''}};
    size_t n = 0;
    for (const char *p = from; p < stop && n + 1 < cap;) {
        int done = 0;
        for (size_t e = 0; e < sizeof entities / sizeof entities[0] && !done; e++) {
            size_t len = strlen(entities[e].entity);
            if (strncmp(p, entities[e].entity, len) == 0) buf[n++] = entities[e].c, p += len, done = 1;
        }
        if (!done) buf[n++] = *p++;
    }
    buf[n] = '\0';
}

/* The attribute `name="..."` of the tag starting at `tag` (up to its '>'), decoded; 0 if none. */
static int attribute(const char *tag, const char *name, char *buf, size_t cap) {
    const char *end = strchr(tag, '>');
    char pattern[64];
    snprintf(pattern, sizeof pattern, " %s=\"", name);
    const char *a = strstr(tag, pattern);
    if (a == NULL || end == NULL || a > end) return 0;
    a += strlen(pattern);
    const char *q = strchr(a, '"');
    if (q == NULL || q > end) return 0;
    unescape(a, q, buf, cap);
    return 1;
}

/* Half a unit in the last printed digit of `text` ("12.3" -> 0.05, "1e+12" -> 5e11). */
static double half_ulp(const char *text) {
    const char *dot = strchr(text, '.'), *e = strpbrk(text, "eE");
    int decimals = 0;
    if (dot && (!e || dot < e))
        for (const char *p = dot + 1; isdigit((unsigned char)*p); p++) decimals++;
    int exponent = e ? atoi(e + 1) : 0;
    /* A whole number's trailing zeros may be rounding to significant digits (reports/numfmt.h
     * ts_fmt_sig: 3164416 at 4 digits shows 3,164,000). */
    if (!dot && !e && strpbrk(text, "123456789"))
        for (const char *p = text + strlen(text); p > text && p[-1] == '0'; p--) exponent++;
    return 0.5 * pow(10, exponent - decimals);
}

/* A number as reports/numfmt.h writes it ("2,093,985", "69.0 billion", "n/a" aside) into
 * `plain` without separators, and the word's scale into *word (1 without). */
static void people_number(const char *text, char *plain, size_t cap, double *word) {
    static const struct { const char *name; double scale; } words[] = {{" trillion", 1e12}, {" billion", 1e9}};
    size_t n = strlen(text), w = 0;
    *word = 1;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        size_t k = strlen(words[i].name);
        if (n > k && strcmp(text + n - k, words[i].name) == 0) {
            n -= k;
            *word = words[i].scale;
        }
    }
    for (size_t i = 0; i < n && w + 1 < cap; i++)
        if (text[i] != ',') plain[w++] = text[i];
    plain[w] = '\0';
}

/* What may precede a number in untagged text inside <svg>: Gantt row labels ("stage 3") and
 * chart row labels ("#2 dp8 tp1 pp1"). Axis ticks are marked class="tick" instead. */
static const char *const allowed_in_svg_after[] = {"stage ", "#"};

static int word_char(char c) { return isalnum((unsigned char)c) || c == '_' || c == '.' || c == '+' || c == '-'; }

/* 1 when the word [w, w+n) holds a digit and strtod reads all of it (less a sentence's full stop). */
static int is_number(const char *w, size_t n) {
    char buf[64];
    while (n > 0 && w[n - 1] == '.') n--;
    if (n == 0 || n >= sizeof buf) return 0;
    memcpy(buf, w, n);
    buf[n] = '\0';
    if (strpbrk(buf, "0123456789") == NULL) return 0;
    char *end;
    strtod(buf, &end);
    return end != buf && *end == '\0';
}

/* The end of the element opened at `p` ("<span ...>" .. "</span>", "<text ...>" .. "</text>"). */
static const char *element_end(const char *p, const char *close) {
    const char *e = strstr(p, close);
    return e ? e + strlen(close) : p + strlen(p);
}

int untagged_numbers(const char *html, char (*first)[160], int cap) {
    const char *p = strstr(html, "<body");
    int found = 0, in_svg = 0;
    if (p == NULL) return 0;
    while (*p) {
        if (*p == '<') {
            char cls[16] = "";
            attribute(p, "class", cls, sizeof cls);
            if (strncmp(p, "<span", 5) == 0 && (strcmp(cls, "n") == 0 || strcmp(cls, "s") == 0)) {
                p = element_end(p, "</span>");
                continue;
            }
            if (in_svg && strncmp(p, "<text", 5) == 0 && strcmp(cls, "tick") == 0) {
                p = element_end(p, "</text>");
                continue;
            }
            if (strncmp(p, "<svg", 4) == 0) in_svg = 1;
            if (strncmp(p, "</svg", 5) == 0) in_svg = 0;
            const char *gt = strchr(p, '>');
            p = gt ? gt + 1 : p + strlen(p);
            continue;
        }
        if (*p == '&') { /* an entity: "&#39;" is an apostrophe, not 39 */
            const char *semi = strchr(p, ';');
            p = semi ? semi + 1 : p + 1;
            continue;
        }
        if (!word_char(*p)) {
            p++;
            continue;
        }
        const char *w = p;
        while (word_char(*p)) p++;
        if (!is_number(w, (size_t)(p - w))) continue;
        int allowed = 0;
        for (size_t i = 0; in_svg && i < sizeof allowed_in_svg_after / sizeof allowed_in_svg_after[0]; i++) {
            size_t n = strlen(allowed_in_svg_after[i]);
            allowed |= (size_t)(w - html) >= n && strncmp(w - n, allowed_in_svg_after[i], n) == 0;
        }
        if (allowed) continue;
        if (found < cap) {
            const char *from = w - html > 60 ? w - 60 : html;
            snprintf(first[found], sizeof first[found], "%.*s in \"%.*s\"", (int)(p - w), w, (int)(p - from + 20),
                     from);
            for (char *c = first[found]; *c; c++)
                if (*c == '\n') *c = ' ';
        }
        found++;
    }
    return found;
}

tagged_stats check_tagged(const char *html, const cJSON *json, const char *what) {
    tagged_stats st = {0};
    char stray[5][160];
    st.untagged = untagged_numbers(html, stray, 5);
    for (int i = 0; i < st.untagged && i < 5; i++)
        cr_expect_fail("%s: a number outside the tagged spans: %s", what, stray[i]);
    if (st.untagged > 5) cr_expect_fail("%s: and %d more untagged numbers", what, st.untagged - 5);
    st.failures += st.untagged;
    for (const char *p = strstr(html, "<span class=\""); p; p = strstr(p + 1, "<span class=\"")) {
        char cls[8], key[256], unit[32] = "", text[4096];
        if (!attribute(p, "class", cls, sizeof cls) || (strcmp(cls, "n") != 0 && strcmp(cls, "s") != 0)) continue;
        cr_assert(attribute(p, "data-key", key, sizeof key), "%s: a tagged span without data-key: %.80s", what, p);
        const char *open_end = strchr(p, '>'), *close = strstr(p, "</span>");
        cr_assert(open_end && close && close > open_end, "%s: span %s is not closed", what, key);
        unescape(open_end + 1, close, text, sizeof text);
        const cJSON *item = json_at_path(json, key);
        if (strcmp(cls, "s") == 0) {
            st.strings++;
            int ok = cJSON_IsString(item) && strcmp(item->valuestring, text) == 0;
            cr_expect(ok, "%s: \"%s\" shows \"%.80s\", JSON has %s%.80s%s", what, key, text,
                      cJSON_IsString(item) ? "\"" : "", cJSON_IsString(item) ? item->valuestring : "no string",
                      cJSON_IsString(item) ? "\"" : "");
            st.failures += !ok;
            continue;
        }
        st.numbers++;
        cr_assert(attribute(p, "data-unit", unit, sizeof unit), "%s: number %s has no data-unit", what, key);
        double scale = unit_scale(unit);
        cr_assert(scale > 0, "%s: number %s has an unknown unit \"%s\"", what, key, unit);
        /* Numbers for people (reports/numfmt.h): thousands separators, a word from a billion. */
        double word = 1;
        char plain[sizeof text];
        people_number(text, plain, sizeof plain, &word);
        char *end = NULL;
        double shown = strtod(plain, &end) * word;
        int parsed = end != plain && *end == '\0';
        int ok = parsed && cJSON_IsNumber(item) &&
                 fabs(shown - item->valuedouble / scale) <= half_ulp(plain) * word * (1 + 1e-9) + 1e-12 * fabs(shown);
        cr_expect(ok, "%s: \"%s\" shows \"%s\" %s, JSON has %s%.17g (÷ %g = %.17g)", what, key, text, unit,
                  cJSON_IsNumber(item) ? "" : "no number ", cJSON_IsNumber(item) ? item->valuedouble : 0.0, scale,
                  cJSON_IsNumber(item) ? item->valuedouble / scale : 0.0);
        st.failures += !ok;
    }
    return st;
}

int has_tag(const char *html, const char *key) {
    char pattern[300];
    snprintf(pattern, sizeof pattern, "data-key=\"%s\"", key);
    return strstr(html, pattern) != NULL;
}
