/* Pipeline schedules as a table of variants (one struct each), as nccl-tests tables its
 * collectives: the planner's closed form reads the bubble and the micro-batches in flight from
 * here; the simulator's program builder (sim/) adds each schedule's op order to the same table. */
#ifndef TS_SCHEDULE_H
#define TS_SCHEDULE_H

#include "program/layout.h"

/* One step of a stage's pipeline order: forward, backward (input gradients, plus weight gradients
 * unless the schedule splits them) or weight gradients of (micro-batch, local chunk). */
typedef enum { TS_SLOT_F, TS_SLOT_B, TS_SLOT_W } ts_slot_kind;
typedef struct {
    int kind; /* ts_slot_kind */
    int mb;
    int chunk;
} ts_slot;

typedef struct {
    ts_schedule id;
    const char *name;
    int interleaved; /* needs vpp > 1 chunks per stage */
    /* Pipeline bubble in seconds for p stages, v chunks, micro-batch forward t_f, backward t_b
     * (input + weight gradients) and weight-gradient part t_w. */
    double (*bubble_s)(int p, int v, double t_f, double t_b, double t_w);
    /* Micro-batches whose activations stage `stage` holds at its peak, in units of one
     * micro-batch's activations for the whole stage. */
    double (*in_flight)(int p, int stage, int m, int v);
    /* The order of slots stage `stage` of p runs for m micro-batches and v chunks, into `out`
     * (room for 3·m·v); returns the count. */
    int (*order)(int p, int v, int m, int stage, ts_slot *out);
    int splits_w; /* W slots are separate from B (zero-bubble) */
} ts_schedule_info;

extern const ts_schedule_info ts_schedules[TS_SCHED_COUNT];

#endif
