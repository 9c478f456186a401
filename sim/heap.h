/* The simulator's event queue: a binary min-heap of timed events ordered by (time, sequence
 * number). The heap stamps each pushed event with the next sequence number, so events due at the
 * same time pop in the order they were pushed and a simulation is deterministic.
 *
 * ts_event_heap_init / ts_event_heap_free pair; the heap owns its array. */
#ifndef TS_HEAP_H
#define TS_HEAP_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

typedef struct {
    double t_s;       /* when it happens */
    uint64_t seq;     /* set by ts_event_heap_push */
    int32_t type;     /* the engine's event kinds */
    int32_t a, b;     /* payload: (rank, op) or (flow id, 0) */
    uint32_t version; /* payload: a flow's version when the event was scheduled */
} ts_event;

typedef struct {
    ts_event *ev; /* (cap), the first n in heap order */
    size_t n, cap;
    uint64_t next_seq;
} ts_event_heap;

void ts_event_heap_init(ts_event_heap *h);
void ts_event_heap_free(ts_event_heap *h);

/* Adds `e` (its seq is overwritten). TS_ERR_NOMEM when the heap cannot grow. */
ts_status ts_event_heap_push(ts_event_heap *h, ts_event e);

/* The earliest event, or NULL when empty. */
const ts_event *ts_event_heap_top(const ts_event_heap *h);

/* Removes the earliest event into `out`; returns 0 when the heap is empty. */
int ts_event_heap_pop(ts_event_heap *h, ts_event *out);

#endif
