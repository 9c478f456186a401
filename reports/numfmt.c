/* Numbers for people (see numfmt.h). */
#include "reports/numfmt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The integer part of `text` ("1234567.89", optional '-') grouped by thousands into buf. */
static void group(const char *text, char *buf, size_t cap) {
    const char *digits = text[0] == '-' ? text + 1 : text;
    size_t int_len = strcspn(digits, ".");
    size_t w = 0;
    if (text[0] == '-' && w + 1 < cap) buf[w++] = '-';
    for (size_t i = 0; i < int_len && w + 1 < cap; i++) {
        if (i > 0 && (int_len - i) % 3 == 0 && w + 2 < cap) buf[w++] = ',';
        buf[w++] = digits[i];
    }
    for (const char *p = digits + int_len; *p && w + 1 < cap; p++) buf[w++] = *p;
    buf[w] = '\0';
}

const char *ts_fmt_sig(double v, int sig, char *buf, size_t cap) {
    if (!isfinite(v)) {
        snprintf(buf, cap, "n/a");
        return buf;
    }
    if (sig < 1) sig = 1;
    if (sig > 15) sig = 15;
    char raw[64];
    if (v == 0) {
        snprintf(buf, cap, "0");
        return buf;
    }
    int mag = (int)floor(log10(fabs(v)));
    int decimals = sig - 1 - mag;
    if (decimals > 0) {
        snprintf(raw, sizeof raw, "%.*f", decimals, v);
    } else {
        /* Round to `sig` digits, then print whole: 2290.04 → 2290, 1234567 → 1230000. */
        double unit = pow(10, -decimals);
        snprintf(raw, sizeof raw, "%.0f", round(v / unit) * unit);
    }
    group(raw, buf, cap);
    return buf;
}

/* What counts and dollars print alike: "n/a" when not finite, and from a billion `sig`
 * significant digits and the word. Returns 1 when it wrote buf. */
static int special(double v, const char *prefix, int sig, char *buf, size_t cap) {
    if (!isfinite(v)) {
        snprintf(buf, cap, "n/a");
        return 1;
    }
    static const struct { double scale; const char *word; } words[] = {
        {1e12, "trillion"}, {1e9, "billion"}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (fabs(v) >= words[i].scale) {
            char num[48];
            ts_fmt_sig(v / words[i].scale, sig, num, sizeof num);
            snprintf(buf, cap, "%s%s %s", prefix, num, words[i].word);
            return 1;
        }
    return 0;
}

const char *ts_fmt_fixed(double v, int decimals, char *buf, size_t cap) {
    if (!isfinite(v)) {
        snprintf(buf, cap, "n/a");
        return buf;
    }
    char raw[400];
    snprintf(raw, sizeof raw, "%.*f", decimals < 0 ? 0 : decimals > 15 ? 15 : decimals, v);
    group(raw, buf, cap);
    return buf;
}

const char *ts_fmt_sig_words(double v, int sig, char *buf, size_t cap) {
    if (special(v, "", sig, buf, cap)) return buf;
    return ts_fmt_sig(v, sig, buf, cap);
}

const char *ts_fmt_count(double v, char *buf, size_t cap) {
    if (special(v, "", 3, buf, cap)) return buf;
    return ts_fmt_fixed(v, 0, buf, cap);
}

const char *ts_fmt_usd(double v, char *buf, size_t cap) {
    if (special(v, "$", 3, buf, cap)) return buf;
    char num[48];
    if (v != 0 && fabs(v) < 10) { /* cents at least, three significant digits below a dollar */
        int decimals = 2 - (int)floor(log10(fabs(v)));
        snprintf(num, sizeof num, "%.*f", decimals < 2 ? 2 : decimals, v);
    } else {
        ts_fmt_sig(v, 3, num, sizeof num);
    }
    snprintf(buf, cap, "$%s", num);
    return buf;
}

double ts_parse_tokens(const char *text) {
    char *end = NULL;
    double v = strtod(text, &end);
    if (end == text || !isfinite(v) || v <= 0) return 0;
    static const struct { char suffix; double scale; } units[] = {
        {'k', 1e3}, {'K', 1e3}, {'M', 1e6}, {'B', 1e9}, {'G', 1e9}, {'T', 1e12}};
    if (*end) {
        size_t i = 0;
        while (i < sizeof units / sizeof units[0] && units[i].suffix != *end) i++;
        if (i == sizeof units / sizeof units[0] || end[1] != '\0') return 0;
        v *= units[i].scale;
    }
    return v;
}
