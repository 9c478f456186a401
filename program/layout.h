/* A parallel layout: how one training step is split over GPUs, and its text form.
 *
 * Text form, everywhere a layout appears as text (DESIGN.md):
 *   dp=8,tp=8,pp=1,cp=1,ep=1,sp=1,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=selective
 * Rank order (Megatron-LM): TP innermost, then CP, then DP (EP folds into DP×CP), PP outermost. */
#ifndef TS_LAYOUT_H
#define TS_LAYOUT_H

#include <stddef.h>

#include "common/status.h"

typedef enum {
    TS_SCHED_GPIPE,
    TS_SCHED_1F1B,
    TS_SCHED_INTERLEAVED, /* interleaved 1F1B, vpp > 1 model chunks per stage */
    TS_SCHED_ZB_H1,       /* zero-bubble ZB-H1 (Qi et al. 2024): backward split into B and W */
    TS_SCHED_DUALPIPE,    /* DualPipe (DeepSeek-V3 §3.2.1): two directions, two copies of the stages */
    TS_SCHED_ZB_V,        /* ZB-V (Qi et al. 2024 §6): two chunks per stage in a V, W split off */
    TS_SCHED_COUNT
} ts_schedule;

typedef enum {
    TS_RECOMPUTE_NONE,
    TS_RECOMPUTE_SELECTIVE, /* recompute core attention only (Korthikanti et al. 2022, §5) */
    TS_RECOMPUTE_FULL,      /* keep each layer's input, recompute the layer in backward */
    TS_RECOMPUTE_COUNT
} ts_recompute;

extern const char *const ts_schedule_names[];  /* "gpipe","1f1b","interleaved","zb-h1","dualpipe","zb-v"; NULL-ended */
extern const char *const ts_recompute_names[]; /* "none","selective","full"; NULL-ended */

typedef struct {
    int dp, tp, pp, cp, ep;
    int sp;           /* sequence parallelism (0/1), only with tp > 1 */
    int zero;         /* ZeRO stage 0..3, sharding over the DP×CP group */
    int mbs;          /* micro-batch size, sequences */
    int microbatches; /* per step per pipeline: global_batch / (dp * mbs) */
    int vpp;          /* model chunks per stage (interleaved; 2 under DualPipe and ZB-V; 1 otherwise) */
    ts_schedule schedule;
    ts_recompute recompute;
    int etp;          /* expert tensor parallelism (Megatron-Core --expert-tensor-parallel-size);
                         0: the experts are split like the rest, over tp (ts_layout_etp) */
} ts_layout;

/* The experts' TP degree: etp when set, else tp. */
int ts_layout_etp(const ts_layout *l);

/* Fields of ts_layout as pinnable keys (for --fix). */
typedef enum {
    TS_PIN_DP, TS_PIN_TP, TS_PIN_PP, TS_PIN_CP, TS_PIN_EP, TS_PIN_SP, TS_PIN_ZERO, TS_PIN_MBS,
    TS_PIN_VPP, TS_PIN_SCHED, TS_PIN_RECOMPUTE, TS_PIN_ETP, TS_PIN_COUNT
} ts_pin;
extern const char *const ts_pin_names[]; /* "dp","tp",... as in the text form; NULL-ended */

/* Pinned fields: a layout `l` honours the pins when every set bit's field equals pins->value. */
typedef struct {
    unsigned mask; /* bit (1u << ts_pin) set when pinned */
    ts_layout value;
} ts_pins;

int ts_pins_allow(const ts_pins *pins, const ts_layout *l);

/* A layout field by pin key (schedule and recompute as their enum values), and its setter; the
 * setter also marks the field pinned. */
int ts_layout_field(const ts_layout *l, ts_pin p);
void ts_layout_set(ts_layout *l, ts_pin p, int value);
void ts_pins_set(ts_pins *pins, ts_pin p, int value);

/* Writes the text form; returns the length snprintf would have written. ",etp=N" follows the
 * text form only when etp is set and differs from tp (so layouts without it read as before). */
int ts_layout_format(const ts_layout *l, char *buf, size_t cap);

/* Parses "k=v,k=v" (any subset of the text form's keys; "schedule" is accepted for "sched").
 * Unknown keys, bad numbers, zero or negative sizes, repeated keys: TS_ERR_INPUT naming `what`
 * (e.g. "--fix") and the offending item. */
ts_status ts_pins_parse(const char *what, const char *text, ts_pins *out);

/* Parses a full layout text (every key but microbatches and etp required); `microbatches` is
 * left 0. */
ts_status ts_layout_parse(const char *what, const char *text, ts_layout *out);

#endif
