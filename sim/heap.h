/* The simulator's event queue: timed events popped by (time, push order), so that events due at
 * the same time pop in the order they were pushed and a simulation is deterministic.
 *
 * Why not one heap of events: a full-rank step holds millions of events but only about a
 * hundredth as many distinct times (peer ranks do the same work at the same instants), and a
 * heap pays a log-depth sift, with unpredictable branches, on every pop. Here each distinct time
 * (an instant) keeps its events in a FIFO, the instants sit in a binary min-heap by time, and a
 * hash table (linear probing on the time's bits) finds a pushed event's instant. A push costs a
 * probe (none when it repeats the last push's time) and, for a new instant, a sift; a pop costs a
 * sift only when it empties its instant.
 *
 * ts_event_heap_init / ts_event_heap_free pair; the queue owns its arrays. */
#ifndef TS_HEAP_H
#define TS_HEAP_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

typedef struct {
    double t_s;       /* when it happens */
    int32_t type;     /* the engine's event kinds */
    int32_t a, b;     /* payload: (rank, op) or (flow id, 0) */
    uint32_t version; /* payload: a flow's version when the event was scheduled */
} ts_event;

typedef struct {
    ts_event ev;
    int32_t next; /* the next event of its instant (or of the free list), -1 at the end */
} ts_event_node;

typedef struct {
    double t_s;
    int32_t head, tail; /* its events in push order (head: next free instant when unused) */
} ts_instant;

typedef struct {
    ts_event_node *nodes; /* (cap_nodes) pool: queued events and the free list */
    int32_t cap_nodes, free_node;
    ts_instant *instants; /* (cap_instants) pool: live instants and the free list */
    int32_t cap_instants, free_instant;
    int32_t *order; /* (cap_instants) live instant ids, a binary min-heap by t_s */
    int32_t n_order;
    int32_t *slots; /* (2 · cap_instants) hash table of live instant ids, -1 when empty */
    int slot_bits;  /* log2 of the table size */
    int32_t last;   /* the instant of the last push, -1 once popped empty (peers push alike times
                       in a row, so this skips most probes) */
} ts_event_heap;

void ts_event_heap_init(ts_event_heap *h);
void ts_event_heap_free(ts_event_heap *h);

/* The push and pop that the event loop runs millions of times are inline: a push to the time of
 * the last push appends to its FIFO, a pop that leaves its instant non-empty unlinks a node. The
 * rest is out of line. */

/* A push that needs the hash table or more room (use ts_event_heap_push). */
ts_status ts_event_heap_push_slow(ts_event_heap *h, ts_event e);

/* Drops the earliest instant, emptied by a pop (use ts_event_heap_pop). */
void ts_event_heap_retire(ts_event_heap *h);

/* Adds `e`. TS_ERR_NOMEM when the queue cannot grow. */
static inline ts_status ts_event_heap_push(ts_event_heap *h, ts_event e) {
    int32_t id = h->last, node = h->free_node;
    if (id < 0 || node < 0 || h->instants[id].t_s != e.t_s) return ts_event_heap_push_slow(h, e);
    h->free_node = h->nodes[node].next;
    h->nodes[node] = (ts_event_node){e, -1};
    h->nodes[h->instants[id].tail].next = node;
    h->instants[id].tail = node;
    return TS_OK;
}

/* The earliest event, or NULL when empty; valid until the next push or pop. */
static inline const ts_event *ts_event_heap_top(const ts_event_heap *h) {
    return h->n_order ? &h->nodes[h->instants[h->order[0]].head].ev : NULL;
}

/* Removes the earliest event into `out`; returns 0 when the queue is empty. */
static inline int ts_event_heap_pop(ts_event_heap *h, ts_event *out) {
    if (h->n_order == 0) return 0;
    ts_instant *in = &h->instants[h->order[0]];
    int32_t node = in->head;
    *out = h->nodes[node].ev;
    in->head = h->nodes[node].next;
    /* The next pop reads that node, queued long ago: fetch it while this event runs. */
    if (in->head >= 0) __builtin_prefetch(&h->nodes[in->head]);
    h->nodes[node].next = h->free_node;
    h->free_node = node;
    if (in->head < 0) ts_event_heap_retire(h);
    return 1;
}

#endif
