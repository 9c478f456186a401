/* The planner's reading of a software stack (see stack_rules.h).
 *
 * Headroom. PyTorch's caching allocator splits cached blocks and cannot merge non-adjacent free
 * ones, so reserved memory exceeds allocated memory. GMLake (Guo et al., ASPLOS'24,
 * arXiv:2401.08156) measured this fragmentation on eight LLMs on A100-80GB under recompute, ZeRO
 * and offloading: 15% on average, up to 33%. The system files already keep headroom_frac (5% of
 * HBM) for it; the default here keeps 10% of the remaining usable bytes, so that together about
 * 15% of what the model may touch stays free, GMLake's average. Expandable segments
 * (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, PyTorch >= 2.1) remove most of it, and
 * --mem-headroom 0 says so. A layout within TS_MEM_TIGHT_FRAC (5%) of the line is called tight:
 * the spread between GMLake's average and worst case is larger than that. */
#include "planner/stack_rules.h"

#include <stdio.h>

#include "common/paths.h"
#include <string.h>

#define FREE(pin) (!(pinned & (1u << (pin))))

const char *ts_stack_refuses_shape(const ts_stack *st, const ts_layout *l, unsigned pinned) {
    if (FREE(TS_PIN_RECOMPUTE) && st->recompute && !(st->recompute & (1u << l->recompute))) return "recompute";
    if ((FREE(TS_PIN_TP) && !st->tp && l->tp > 1) || (FREE(TS_PIN_PP) && !st->pp && l->pp > 1) ||
        (FREE(TS_PIN_CP) && !st->cp && l->cp > 1) || (FREE(TS_PIN_EP) && !st->ep && l->ep > 1) ||
        (FREE(TS_PIN_SP) && !st->sp && l->sp) || (FREE(TS_PIN_ETP) && !st->etp && ts_layout_etp(l) != l->tp))
        return "dimension";
    return NULL;
}

const char *ts_stack_refuses_schedule(const ts_stack *st, const ts_layout *l, unsigned pinned) {
    return FREE(TS_PIN_SCHED) && st->schedules && l->pp > 1 && !(st->schedules & (1u << l->schedule)) ? "schedule"
                                                                                                       : NULL;
}

const char *ts_stack_refuses_zero(const ts_stack *st, const ts_layout *l, unsigned pinned) {
    if (FREE(TS_PIN_ZERO) && !(st->zero & (1u << l->zero))) return "zero";
    if (FREE(TS_PIN_ZERO) && l->pp > 1 && l->zero > st->pp_max_zero) return "zero with pp";
    return NULL;
}
#undef FREE

const char *ts_stack_refusal(const ts_stack *st, const ts_layout *l, unsigned pinned, char *buf, size_t cap) {
    const char *why = ts_stack_refuses_schedule(st, l, pinned);
    if (!why) why = ts_stack_refuses_shape(st, l, pinned);
    if (!why) why = ts_stack_refuses_zero(st, l, pinned);
    if (!why || !buf) return why;
    char text[256];
    ts_layout_format(l, text, sizeof text);
    snprintf(buf, cap, "the %s stack cannot run %s (%s)", st->name, text, why);
    return buf;
}

const char *ts_stack_refuses_pins(const ts_stack *st, const ts_pins *pins) {
    ts_layout l = pins->value;
    if (!(pins->mask & (1u << TS_PIN_PP)) && l.pp < 2) l.pp = 2; /* a pinned schedule is a pipeline's */
    return ts_stack_refusal(st, &l, ~pins->mask, NULL, 0);
}

ts_status ts_stack_for_pins(const ts_pins *pins, ts_stack *out, int *found) {
    enum { STACKS_MAX = 64 };
    char names[STACKS_MAX][64];
    int n = ts_zoo_list("models/stacks", names, STACKS_MAX);
    *found = 0;
    for (int i = 0; i < n && !*found; i++) {
        ts_stack st;
        TS_CHECK_CTX(ts_stack_load(names[i], ts_schedule_names, ts_recompute_names, &st), "a stack for the pins");
        if (!ts_stack_refuses_pins(&st, pins)) *out = st, *found = 1;
    }
    return TS_OK;
}

ts_status ts_stack_train_defaults(const ts_stack *st, unsigned given, ts_train *t) {
    int recipe = -1;
    for (int i = 0; st->fp8_recipe[0] && ts_fp8_recipe_names[i] && recipe < 0; i++)
        if (strcmp(ts_fp8_recipe_names[i], st->fp8_recipe) == 0) recipe = i;
    if (st->fp8_recipe[0] && recipe < 0)
        return TS_FAIL(TS_ERR_INPUT, "%s: $.fp8_recipe: expected one of delayed, tensorwise, mxfp8, blockwise, got \"%s\"",
                       st->file, st->fp8_recipe);
    if (st->moe_a2a_overlap >= 0 && !(given & TS_GIVEN_MOE_A2A_OVERLAP)) t->moe_a2a_overlap = st->moe_a2a_overlap;
    if (st->dtype >= 0 && !(given & TS_GIVEN_DTYPE)) ts_train_set_dtype(t, (ts_dtype)st->dtype);
    if (recipe >= 0 && !(given & TS_GIVEN_FP8_RECIPE) && t->dtype == TS_DTYPE_FP8) t->fp8_recipe = (ts_fp8_recipe)recipe;
    return TS_OK;
}

ts_status ts_stack_apply(ts_problem *pb) {
    const ts_stack *st = &pb->train.stack;
    ts_system *s = &pb->sys;
    if (st->tp_comm_overlap >= 0) s->tp_comm_overlap = st->tp_comm_overlap;
    if (st->dp_comm_overlap >= 0) s->dp_comm_overlap = st->dp_comm_overlap;
    if (st->pp_comm_overlap >= 0) s->pp_comm_overlap = st->pp_comm_overlap;
    if (!st->flash_attention) pb->train.flash_attention = 0;
    /* The FlashAttention-2 backend runs at its own efficiency where the system states one. */
    if (pb->train.flash_attention && pb->train.attn_backend == TS_ATTN_FLASH && s->attention_flash_eff > 0)
        s->attention_eff = s->attention_flash_eff;
    double usable = ts_system_usable_bytes(s);
    const ts_train *t = &pb->train;
    if (t->mem_headroom_frac < 0 || t->mem_headroom_frac >= 1 || t->mem_headroom_bytes < 0)
        return TS_FAIL(TS_ERR_INPUT, "--mem-headroom: expected bytes >= 0 or a fraction in [0, 1), got %g",
                       t->mem_headroom_bytes > 0 ? t->mem_headroom_bytes : t->mem_headroom_frac);
    pb->headroom_bytes = t->mem_headroom_bytes > 0 ? t->mem_headroom_bytes : t->mem_headroom_frac * usable;
    if (pb->headroom_bytes >= usable)
        return TS_FAIL(TS_ERR_INPUT, "--mem-headroom: %.1f GB leaves nothing of the %.1f GB usable on %s",
                       pb->headroom_bytes / 1e9, usable / 1e9, s->name);
    pb->usable_bytes = usable - pb->headroom_bytes;
    return TS_OK;
}

int ts_mem_tight(const ts_problem *pb, double mem_bytes) {
    return mem_bytes > (1.0 - TS_MEM_TIGHT_FRAC) * pb->usable_bytes;
}
