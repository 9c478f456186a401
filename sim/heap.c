/* Simulator event queue: FIFOs of events per distinct time, instants in a min-heap by time, a
 * hash table from time to instant (see heap.h). */
#include "sim/heap.h"

#include <stdlib.h>
#include <string.h>

void ts_event_heap_init(ts_event_heap *h) {
    *h = (ts_event_heap){0};
    h->free_node = h->free_instant = h->last = -1;
}

void ts_event_heap_free(ts_event_heap *h) {
    free(h->nodes);
    free(h->instants);
    free(h->order);
    free(h->slots);
    ts_event_heap_init(h);
}

/* Home slot of time `t_s`: Fibonacci hashing of its bits (−0 folded into +0, which == equates). */
static size_t home_slot(const ts_event_heap *h, double t_s) {
    double t = t_s + 0.0;
    uint64_t bits;
    memcpy(&bits, &t, sizeof bits);
    return (size_t)((bits * 0x9E3779B97F4A7C15ULL) >> (64 - h->slot_bits));
}

static size_t slot_mask(const ts_event_heap *h) { return ((size_t)1 << h->slot_bits) - 1; }

/* The slot holding the instant of time `t_s`, or the empty slot where it would go. */
static size_t find_slot(const ts_event_heap *h, double t_s) {
    size_t i = home_slot(h, t_s), mask = slot_mask(h);
    while (h->slots[i] >= 0 && h->instants[h->slots[i]].t_s != t_s) i = (i + 1) & mask;
    return i;
}

/* Empties slot `i` of the table, moving later entries of its probe run back so that every entry
 * stays reachable from its home slot (linear probing without tombstones). */
static void clear_slot(ts_event_heap *h, size_t i) {
    size_t mask = slot_mask(h);
    for (size_t j = (i + 1) & mask; h->slots[j] >= 0; j = (j + 1) & mask) {
        size_t k = home_slot(h, h->instants[h->slots[j]].t_s);
        /* The entry at j may fill the hole at i unless its home lies cyclically in (i, j]. */
        int home_between = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (home_between) continue;
        h->slots[i] = h->slots[j];
        i = j;
    }
    h->slots[i] = -1;
}

static ts_status grow_nodes(ts_event_heap *h) {
    int32_t cap = h->cap_nodes ? 2 * h->cap_nodes : 1024;
    ts_event_node *nodes = realloc(h->nodes, (size_t)cap * sizeof *nodes);
    if (nodes == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for %d simulator events", cap);
    for (int32_t k = h->cap_nodes; k < cap; k++) nodes[k].next = k + 1 < cap ? k + 1 : h->free_node;
    h->free_node = h->cap_nodes;
    h->nodes = nodes;
    h->cap_nodes = cap;
    return TS_OK;
}

/* Doubles the instant pool and rebuilds the hash table at twice the pool's size. */
static ts_status grow_instants(ts_event_heap *h) {
    int32_t cap = h->cap_instants ? 2 * h->cap_instants : 256;
    int bits = h->slot_bits ? h->slot_bits + 1 : 9;
    ts_instant *instants = realloc(h->instants, (size_t)cap * sizeof *instants);
    if (instants == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for %d simulator instants", cap);
    h->instants = instants;
    int32_t *order = realloc(h->order, (size_t)cap * sizeof *order);
    if (order == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for %d simulator instants", cap);
    h->order = order;
    int32_t *slots = malloc(((size_t)1 << bits) * sizeof *slots);
    if (slots == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for %d simulator instants", cap);
    free(h->slots);
    h->slots = slots;
    h->slot_bits = bits;
    memset(slots, 0xff, ((size_t)1 << bits) * sizeof *slots);
    for (int32_t k = 0; k < h->n_order; k++) slots[find_slot(h, instants[h->order[k]].t_s)] = h->order[k];
    for (int32_t k = h->cap_instants; k < cap; k++) instants[k].head = k + 1 < cap ? k + 1 : h->free_instant;
    h->free_instant = h->cap_instants;
    h->cap_instants = cap;
    return TS_OK;
}

/* Places instant `id` at heap position `i` or above. */
static void sift_up(ts_event_heap *h, int32_t i, int32_t id) {
    double t = h->instants[id].t_s;
    while (i > 0) {
        int32_t parent = (i - 1) / 2;
        if (!(t < h->instants[h->order[parent]].t_s)) break;
        h->order[i] = h->order[parent];
        i = parent;
    }
    h->order[i] = id;
}

/* Removes the earliest instant from the heap (its table slot and pool entry stay). */
static void pop_order(ts_event_heap *h) {
    int32_t last = h->order[--h->n_order], i = 0;
    double t = h->instants[last].t_s;
    for (;;) {
        int32_t child = 2 * i + 1;
        if (child >= h->n_order) break;
        if (child + 1 < h->n_order &&
            h->instants[h->order[child + 1]].t_s < h->instants[h->order[child]].t_s)
            child++;
        if (!(h->instants[h->order[child]].t_s < t)) break;
        h->order[i] = h->order[child];
        i = child;
    }
    if (h->n_order) h->order[i] = last;
}

ts_status ts_event_heap_push_slow(ts_event_heap *h, ts_event e) {
    if (h->free_node < 0) TS_CHECK(grow_nodes(h));
    if (h->free_instant < 0) TS_CHECK(grow_instants(h));
    int32_t node = h->free_node;
    h->free_node = h->nodes[node].next;
    h->nodes[node] = (ts_event_node){e, -1};

    size_t slot = find_slot(h, e.t_s);
    int32_t id = h->slots[slot];
    h->last = id;
    if (id >= 0) {
        h->nodes[h->instants[id].tail].next = node;
        h->instants[id].tail = node;
        return TS_OK;
    }
    id = h->last = h->free_instant;
    h->free_instant = h->instants[id].head;
    h->instants[id] = (ts_instant){e.t_s, node, node};
    h->slots[slot] = id;
    sift_up(h, h->n_order++, id);
    return TS_OK;
}

void ts_event_heap_retire(ts_event_heap *h) {
    int32_t id = h->order[0];
    ts_instant *in = &h->instants[id];
    clear_slot(h, find_slot(h, in->t_s));
    pop_order(h);
    in->head = h->free_instant;
    h->free_instant = id;
    if (h->last == id) h->last = -1;
}
