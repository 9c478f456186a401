/* What a software stack (models/stack.h) means to the planner: which layouts it runs, and how the
 * problem is priced under it (its overlaps, attention kernels, gradient-reduction dtype and
 * exposed per-step costs replace the system's defaults), and the memory line its picks stay under. */
#ifndef TS_STACK_RULES_H
#define TS_STACK_RULES_H

#include <stddef.h>

#include "program/problem.h"

/* Default memory headroom, a fraction of the usable bytes (stack_rules.c says where it comes from),
 * and the band under the line within which a layout is called tight. */
#define TS_MEM_HEADROOM_DEFAULT_FRAC 0.10
#define TS_MEM_TIGHT_FRAC 0.05

/* Applies pb->train.stack to the problem: overlap fractions it states replace the system's,
 * an unfused-attention stack turns flash attention off; then the headroom: usable_bytes becomes
 * the system's usable bytes less train.mem_headroom (bytes, else the fraction). TS_ERR_INPUT when
 * the headroom leaves no memory. */
ts_status ts_stack_apply(ts_problem *pb);

/* Train options a stack may state (stack.h): a bit per option the user gave, which keeps its value. */
enum { TS_GIVEN_DTYPE = 1u, TS_GIVEN_FP8_RECIPE = 2u, TS_GIVEN_MOE_A2A_OVERLAP = 4u };

/* Sets t's options the stack `st` states and `given` (TS_GIVEN_* bits) does not: its EP overlap,
 * precision and FP8 recipe (the recipe under fp8 only). TS_ERR_INPUT naming the stack file and
 * the field when its fp8_recipe is no recipe's name. Call before ts_problem_init. */
ts_status ts_stack_train_defaults(const ts_stack *st, unsigned given, ts_train *t);

/* Why the stack cannot run `l`, or NULL when it can. Fields pinned in `pinned` (bit per ts_pin)
 * are not checked: a pin is the user's choice (the CLI warns instead). `buf` NULL: the refused
 * field's name alone, nothing formatted (the search's inner loop). */
const char *ts_stack_refusal(const ts_stack *st, const ts_layout *l, unsigned pinned, char *buf, size_t cap);

/* The three parts of ts_stack_refusal, for a search that checks each at the loop level where it
 * can change: the shape (dimensions and recompute policy), the schedule, the ZeRO stage. */
const char *ts_stack_refuses_shape(const ts_stack *st, const ts_layout *l, unsigned pinned);
const char *ts_stack_refuses_schedule(const ts_stack *st, const ts_layout *l, unsigned pinned);
const char *ts_stack_refuses_zero(const ts_stack *st, const ts_layout *l, unsigned pinned);

/* Why the stack cannot run what `pins` pin (only the pinned fields are checked; a pinned schedule
 * is checked as if pipelined), or NULL when it can. */
const char *ts_stack_refuses_pins(const ts_stack *st, const ts_pins *pins);

/* When the user names no stack and the default cannot run the pins (e.g. sched=dualpipe on
 * megatron-core), the first zoo stack (models/stacks/, by name) that runs them: *found 1 and
 * `out` loaded; *found 0 when none does (out untouched). Errors only for an unreadable zoo file. */
ts_status ts_stack_for_pins(const ts_pins *pins, ts_stack *out, int *found);

/* The layout's memory is within TS_MEM_TIGHT_FRAC of the line (usable_bytes). */
int ts_mem_tight(const ts_problem *pb, double mem_bytes);

#endif
