/* Pipeline schedules as a table of variants (one struct each, one file each: program/sched_*.c),
 * as nccl-tests tables its collectives. A schedule owns its op order, the bubble and the
 * micro-batches in flight the planner's closed form reads, and the placement of the model's
 * chunks on stages: which global chunk (stage, local chunk) holds, which stage holds a chunk,
 * hence each chunk's pipeline peers (the stages of chunks g-1 and g+1) - looped as Megatron's, or
 * in a V (ZB-V; DualPipe, whose two directions run two copies of the model's chunks). Everything
 * that places chunks (the program builder, the executor, the planner's partition, exports) asks
 * here. */
#ifndef TS_SCHEDULE_H
#define TS_SCHEDULE_H

#include "program/layout.h"

/* One step of a stage's pipeline order: forward, backward (input gradients, plus weight gradients
 * unless the schedule splits them), backward of input gradients only (its W slot comes later,
 * whatever the schedule) or weight gradients of (micro-batch, local chunk). An F slot with
 * `pair` set runs overlapped with the B slot after it (DualPipe's F&B: each one's communication
 * hides behind the other's computation). */
typedef enum { TS_SLOT_F, TS_SLOT_B, TS_SLOT_W, TS_SLOT_BI } ts_slot_kind;
typedef struct {
    int kind; /* ts_slot_kind */
    int mb;
    int chunk;
    int pair;
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
    /* Two pipelines in opposite directions over the p·v/2 chunks of the model, each chunk held
     * twice (DualPipe): global chunk g runs model chunk g mod (p·v/2), and micro-batches
     * [0, m/2) go down the first half of the global chunks, [m/2, m) down the second. */
    int dual;
    int fixed_vpp; /* the chunks every stage holds when the schedule fixes them (DualPipe, ZB-V: 2), else 0 */
    /* Why p stages and m micro-batches cannot run it (into buf), or NULL; NULL pointer: any. */
    const char *(*invalid)(int p, int m, char *buf, size_t cap);
    /* Searched only when asked for (--schedules, --fix sched=) or named by the stack: it needs its
     * own framework (no exporter writes it: reports/export.h), so a plan left free stays one
     * Megatron can run. */
    int opt_in;
} ts_schedule_info;

extern const ts_schedule_info ts_schedules[TS_SCHED_COUNT];

/* Schedule `id`'s placement for p stages of v chunks, and the layout's schedule's. */
int ts_sched_chunk(ts_schedule id, int p, int v, int stage, int local);
int ts_sched_stage(ts_schedule id, int p, int v, int chunk);
int ts_chunk_global(const ts_layout *l, int stage, int local);
int ts_chunk_stage(const ts_layout *l, int chunk);
int ts_chunk_local(const ts_layout *l, int chunk);

/* The model chunks (layer ranges) of the layout's schedule: p·v, or p·v/2 when each is held twice
 * (dual); the one global chunk g runs; whether g opens a pipeline (embedding, no RECV of
 * activations) or closes one (LM head and loss). */
int ts_model_chunks(const ts_layout *l);
int ts_chunk_model(const ts_layout *l, int chunk);
int ts_chunk_opens(const ts_layout *l, int chunk);
int ts_chunk_closes(const ts_layout *l, int chunk);
/* Whether stage `stage` runs a chunk that opens (closes) a pipeline, so holds the embedding (the
 * head); whether its local chunk `local` is the second copy of its model chunk (DualPipe's reverse
 * direction), whose parameters are kept equal to the first copy's. */
int ts_stage_opens(const ts_layout *l, int stage);
int ts_stage_closes(const ts_layout *l, int stage);
int ts_chunk_is_copy(const ts_layout *l, int stage, int local);

/* The step, in seconds, of the layout's schedule (its order and placement) for m micro-batches
 * when every slot of a chunk takes a fixed time: forward t_f, input gradients t_bi, weight
 * gradients t_w (a backward that keeps them t_bi + t_w), an F&B pair the sum of its two, and a
 * slot waits only for the slots of its micro-batch on the neighbouring chunks (communication
 * free). Negative when out of memory or when the order cannot finish. */
double ts_sched_timeline_s(const ts_layout *l, int m, double t_f, double t_bi, double t_w);
/* The same with a time per global chunk (l->pp · l->vpp of each): forward t_f[g], backward t_b[g]
 * (an uneven split's chunks); -1 for schedules that split weight gradients apart. */
double ts_sched_timeline_chunks_s(const ts_layout *l, int m, const double *t_f, const double *t_b);

/* DualPipe: the overlapped forward-and-backward pairs in stage `stage`'s order for p stages and m
 * micro-batches (a valid dualpipe layout's). */
int ts_dualpipe_pairs(int p, int m, int stage);

/* Megatron-Core's combined 1F1B (--overlap-moe-expert-parallel-comm; program/sched_combined.c):
 * why layout `l`'s schedule cannot run it (into buf), or NULL: it runs 1F1B without pipelining or
 * the interleaved schedule (its ep > 1 and recompute rules: program/problem.h). */
const char *ts_combined_1f1b_invalid(const ts_layout *l, char *buf, size_t cap);
/* Rewrites a 1F1B or interleaved order of n slots (F and B only) in place as Megatron-Core's
 * combined 1F1B runs it: one warm-up forward more, then every forward `pair`ed with the backward
 * after it (program.c runs the two interleaved at the EP collectives), then the drain. Returns
 * the count (n), or -1 when out of memory. */
int ts_sched_combined_1f1b(ts_slot *slots, int n);
/* The fraction of stage `stage`'s forwards that combined 1F1B runs paired: all but its warm-up,
 * the schedule's and one more. */
double ts_combined_1f1b_paired(const ts_layout *l, int stage);
/* Layers [first, first + count) of global chunk `chunk` in the even split of `layers` over pp
 * stages of vpp chunks each (the one even split: planner, program builder and exports). */
void ts_even_split(int layers, int pp, int vpp, int chunk, int *first, int *count);

#endif
