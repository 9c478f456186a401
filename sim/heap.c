/* Binary min-heap of simulator events keyed (time, sequence) (see heap.h). */
#include "sim/heap.h"

#include <stdlib.h>

static int earlier(const ts_event *x, const ts_event *y) {
    return x->t_s < y->t_s || (x->t_s == y->t_s && x->seq < y->seq);
}

void ts_event_heap_init(ts_event_heap *h) { *h = (ts_event_heap){0}; }

void ts_event_heap_free(ts_event_heap *h) {
    free(h->ev);
    *h = (ts_event_heap){0};
}

ts_status ts_event_heap_push(ts_event_heap *h, ts_event e) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 1024;
        ts_event *ev = realloc(h->ev, cap * sizeof *ev);
        if (ev == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for %zu simulator events", cap);
        h->ev = ev;
        h->cap = cap;
    }
    e.seq = h->next_seq++;
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!earlier(&e, &h->ev[parent])) break;
        h->ev[i] = h->ev[parent];
        i = parent;
    }
    h->ev[i] = e;
    return TS_OK;
}

const ts_event *ts_event_heap_top(const ts_event_heap *h) { return h->n ? &h->ev[0] : NULL; }

int ts_event_heap_pop(ts_event_heap *h, ts_event *out) {
    if (h->n == 0) return 0;
    *out = h->ev[0];
    ts_event last = h->ev[--h->n];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= h->n) break;
        if (child + 1 < h->n && earlier(&h->ev[child + 1], &h->ev[child])) child++;
        if (!earlier(&h->ev[child], &last)) break;
        h->ev[i] = h->ev[child];
        i = child;
    }
    if (h->n) h->ev[i] = last;
    return 1;
}
