/* Helpers the export_*.c files share (declared at the end of export.h). */
#include <stdlib.h>
#include <string.h>

#include "planner/partition.h"
#include "planner/stack_rules.h"
#include "program/schedule.h"
#include "reports/export.h"

const char *const ts_megatron_version_names[] = {"current", "legacy", NULL};

int ts_export_split_layers(const ts_model *m, const ts_layout *l, const ts_split *split, int g) {
    if (split) return split->layers[g];
    int first, count; /* the planner's even split of stages (program/schedule.h) */
    ts_even_split(m->layers, l->pp, 1, g, &first, &count);
    return count;
}

int ts_export_virtual_stages(const ts_layout *l, const ts_split *split) {
    return split ? split->pp * split->vpp : l->pp;
}

int ts_export_uneven(const ts_model *m, const ts_layout *l, const ts_split *split) {
    return split != NULL || m->layers % l->pp != 0;
}

void ts_export_shell_word(FILE *f, const char *s) {
    if (*s != '\0' && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.,:/=+-") == strlen(s)) {
        fputs(s, f);
        return;
    }
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputs("'\\''", f);
        else fputc(*s, f);
    }
    fputc('\'', f);
}

/* Tessera's pattern (model.h ts_moe): layers [0, first_dense) dense, then a MoE layer followed by
 * every-1 dense ones, repeated; Megatron-LM's list holds 1 for a MoE layer, 0 for a dense one
 * (megatron/training/arguments.py moe_freq_type: "([0]*3+[1]*58)" is DeepSeek-V3's). */
void ts_export_moe_layer_freq(const ts_model *m, char *buf, size_t cap) {
    const ts_moe *e = &m->moe;
    if (e->first_dense == 0 && e->every == 1) {
        snprintf(buf, cap, "1");
        return;
    }
    int rest = m->layers - e->first_dense, groups = rest / e->every, tail = rest % e->every;
    size_t n = (size_t)snprintf(buf, cap, "(");
    const char *plus = "";
    if (e->first_dense > 0 && n < cap) n += (size_t)snprintf(buf + n, cap - n, "[0]*%d", e->first_dense), plus = "+";
    if (groups > 0 && n < cap) {
        if (e->every == 1) n += (size_t)snprintf(buf + n, cap - n, "%s[1]*%d", plus, groups);
        else n += (size_t)snprintf(buf + n, cap - n, "%s([1]+[0]*%d)*%d", plus, e->every - 1, groups);
        plus = "+";
    }
    if (tail > 0 && n < cap) {
        n += (size_t)snprintf(buf + n, cap - n, "%s[1]", plus);
        if (tail > 1 && n < cap) n += (size_t)snprintf(buf + n, cap - n, "+[0]*%d", tail - 1);
    }
    if (n < cap) snprintf(buf + n, cap - n, ")");
}

int ts_export_needs_max_connections_1(const ts_layout *l) {
    return (l->tp > 1 || l->cp > 1) && l->zero < 2;
}

ts_status ts_export_to_string(char **out, const char *what, ts_status (*write)(FILE *, const void *),
                              const void *arg) {
    *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(out, &len);
    if (f == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory writing %s", what);
    ts_status st = write(f, arg);
    if ((ferror(f) | (fclose(f) != 0)) && st == TS_OK) st = TS_FAIL(TS_ERR_NOMEM, "out of memory writing %s", what);
    if (st != TS_OK) {
        free(*out);
        *out = NULL;
    }
    return st;
}

ts_status ts_export_stack_check(const char *stack, const char *what, const ts_layout *l) {
    ts_stack st;
    TS_CHECK(ts_stack_load(stack, ts_schedule_names, ts_recompute_names, &st));
    char why[512];
    if (ts_stack_refusal(&st, l, 0, why, sizeof why))
        return TS_FAIL(TS_ERR_INPUT, "%s cannot express this layout: %s; plan with --stack %s (the default) to get "
                       "one it runs", what, why, stack);
    return TS_OK;
}
