/* Layout text form and pins (see layout.h). */
#include "program/layout.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const ts_schedule_names[] = {"gpipe", "1f1b", "interleaved", "zb-h1", "dualpipe", "zb-v", NULL};
const char *const ts_recompute_names[] = {"none", "selective", "full", NULL};
const char *const ts_pin_names[] = {"dp", "tp",  "pp",    "cp",    "ep",        "sp",
                                    "zero", "mbs", "vpp", "sched", "recompute", "etp", NULL};

int ts_layout_etp(const ts_layout *l) { return l->etp > 0 ? l->etp : l->tp; }

static int *int_field(ts_layout *l, ts_pin p) {
    switch (p) {
    case TS_PIN_DP: return &l->dp;
    case TS_PIN_TP: return &l->tp;
    case TS_PIN_PP: return &l->pp;
    case TS_PIN_CP: return &l->cp;
    case TS_PIN_EP: return &l->ep;
    case TS_PIN_SP: return &l->sp;
    case TS_PIN_ZERO: return &l->zero;
    case TS_PIN_MBS: return &l->mbs;
    case TS_PIN_VPP: return &l->vpp;
    case TS_PIN_ETP: return &l->etp;
    default: return NULL;
    }
}

int ts_layout_field(const ts_layout *l, ts_pin p) {
    if (p == TS_PIN_SCHED) return (int)l->schedule;
    if (p == TS_PIN_RECOMPUTE) return (int)l->recompute;
    if (p == TS_PIN_ETP) return ts_layout_etp(l);
    ts_layout copy = *l;
    return *int_field(&copy, p);
}

void ts_layout_set(ts_layout *l, ts_pin p, int value) {
    if (p == TS_PIN_SCHED) l->schedule = (ts_schedule)value;
    else if (p == TS_PIN_RECOMPUTE) l->recompute = (ts_recompute)value;
    else *int_field(l, p) = value;
}

void ts_pins_set(ts_pins *pins, ts_pin p, int value) {
    pins->mask |= 1u << p;
    ts_layout_set(&pins->value, p, value);
}

int ts_pins_allow(const ts_pins *pins, const ts_layout *l) {
    for (int p = 0; p < TS_PIN_COUNT; p++)
        if ((pins->mask & (1u << p)) &&
            ts_layout_field(l, (ts_pin)p) != ts_layout_field(&pins->value, (ts_pin)p))
            return 0;
    return 1;
}

int ts_layout_format(const ts_layout *l, char *buf, size_t cap) {
    int n = snprintf(buf, cap,
                     "dp=%d,tp=%d,pp=%d,cp=%d,ep=%d,sp=%d,zero=%d,mbs=%d,vpp=%d,sched=%s,recompute=%s",
                     l->dp, l->tp, l->pp, l->cp, l->ep, l->sp, l->zero, l->mbs, l->vpp,
                     ts_schedule_names[l->schedule], ts_recompute_names[l->recompute]);
    if (l->etp <= 0 || l->etp == l->tp || n < 0) return n;
    size_t at = (size_t)n < cap ? (size_t)n : (cap > 0 ? cap - 1 : 0);
    return n + snprintf(cap > 0 ? buf + at : buf, cap > at ? cap - at : 0, ",etp=%d", l->etp);
}

static int lookup(const char *const *names, const char *s) {
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], s) == 0) return i;
    return -1;
}

ts_status ts_pins_parse(const char *what, const char *text, ts_pins *out) {
    memset(out, 0, sizeof *out);
    if (text == NULL || *text == '\0')
        return TS_FAIL(TS_ERR_INPUT, "%s: expected key=value[,key=value...], got an empty string", what);
    char buf[512];
    if (strlen(text) >= sizeof buf)
        return TS_FAIL(TS_ERR_INPUT, "%s: longer than %zu characters", what, sizeof buf - 1);
    strcpy(buf, text);
    /* strtok_r would skip an empty item: "tp=2,,pp=2" is a typo to refuse, not two pins. */
    if (buf[0] == ',' || buf[strlen(buf) - 1] == ',' || strstr(buf, ",,"))
        return TS_FAIL(TS_ERR_INPUT, "%s: expected key=value[,key=value...], got an empty item in \"%s\"", what, text);
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (eq == NULL || eq == item || eq[1] == '\0')
            return TS_FAIL(TS_ERR_INPUT, "%s: expected key=value, got \"%s\"", what, item);
        *eq = '\0';
        const char *key = item, *val = eq + 1;
        if (strcmp(key, "schedule") == 0) key = "sched";
        int p = lookup(ts_pin_names, key);
        if (p < 0)
            return TS_FAIL(TS_ERR_INPUT,
                           "%s: unknown key \"%s\" (expected dp, tp, pp, cp, ep, sp, zero, mbs, vpp, "
                           "sched, recompute, etp)", what, key);
        if (out->mask & (1u << p))
            return TS_FAIL(TS_ERR_INPUT, "%s: \"%s\" given twice", what, key);
        out->mask |= 1u << p;
        if (p == TS_PIN_SCHED || p == TS_PIN_RECOMPUTE) {
            const char *const *names = p == TS_PIN_SCHED ? ts_schedule_names : ts_recompute_names;
            int v = lookup(names, val);
            if (v < 0)
                return TS_FAIL(TS_ERR_INPUT, "%s: %s=%s: expected %s", what, key, val,
                               p == TS_PIN_SCHED ? "gpipe, 1f1b, interleaved, zb-h1, dualpipe or zb-v"
                                                 : "none, selective or full");
            ts_pins_set(out, (ts_pin)p, v);
            continue;
        }
        char *end = NULL;
        errno = 0;
        long v = strtol(val, &end, 10);
        int min = (p == TS_PIN_SP || p == TS_PIN_ZERO) ? 0 : 1;
        int max = p == TS_PIN_SP ? 1 : p == TS_PIN_ZERO ? 3 : 1 << 24;
        if (errno || *end != '\0' || v < min || v > max)
            return TS_FAIL(TS_ERR_INPUT, "%s: %s=%s: expected an integer in [%d, %d]", what, key, val,
                           min, max);
        ts_pins_set(out, (ts_pin)p, (int)v);
    }
    if (out->mask == 0)
        return TS_FAIL(TS_ERR_INPUT, "%s: expected key=value[,key=value...], got \"%s\"", what, text);
    return TS_OK;
}

ts_status ts_layout_parse(const char *what, const char *text, ts_layout *out) {
    ts_pins pins;
    TS_CHECK(ts_pins_parse(what, text, &pins));
    for (int p = 0; p < TS_PIN_COUNT; p++)
        if (p != TS_PIN_ETP && !(pins.mask & (1u << p)))
            return TS_FAIL(TS_ERR_INPUT, "%s: \"%s\" is missing: a layout needs every key of %s", what,
                           ts_pin_names[p],
                           "dp=..,tp=..,pp=..,cp=..,ep=..,sp=..,zero=..,mbs=..,vpp=..,sched=..,recompute=..");
    *out = pins.value;
    out->microbatches = 0;
    return TS_OK;
}
