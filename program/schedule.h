/* Pipeline schedules as a table of variants (one struct each, one file each: program/sched_*.c),
 * as nccl-tests tables its collectives. A schedule owns its op order, the bubble and the
 * micro-batches in flight the planner's closed form reads, and the placement of the model's
 * chunks on stages: which global chunk (stage, local chunk) holds, which stage holds a chunk,
 * hence each chunk's pipeline peers (the stages of chunks g-1 and g+1). Everything that places
 * chunks (the program builder, the planner's partition, exports) asks here. */
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
    /* Placement of the p·v model chunks (global chunk g holds layers in model order): */
    int (*chunk_of)(int p, int v, int stage, int local); /* global chunk of (stage, local chunk) */
    int (*stage_of)(int p, int v, int chunk);            /* the stage holding global chunk g */
    int (*local_of)(int p, int v, int chunk);            /* its local index there */
} ts_schedule_info;

extern const ts_schedule_info ts_schedules[TS_SCHED_COUNT];

/* Schedule `id`'s placement for p stages of v chunks, and the layout's schedule's. */
int ts_sched_chunk(ts_schedule id, int p, int v, int stage, int local);
int ts_sched_stage(ts_schedule id, int p, int v, int chunk);
int ts_chunk_global(const ts_layout *l, int stage, int local);
int ts_chunk_stage(const ts_layout *l, int chunk);
int ts_chunk_local(const ts_layout *l, int chunk);

/* Layers [first, first + count) of global chunk `chunk` in the even split of `layers` over pp
 * stages of vpp chunks each (the one even split: planner, program builder and exports). */
void ts_even_split(int layers, int pp, int vpp, int chunk, int *first, int *count);

#endif
