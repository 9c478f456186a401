/* Growable arrays (see array.h). */
#include "common/array.h"

#include <stdlib.h>

ts_status ts_grow(void **items, int n, int *cap, size_t size, const char *what) {
    if (n < *cap) return TS_OK;
    int want = *cap ? 2 * *cap : 16;
    void *p = realloc(*items, (size_t)want * size);
    if (!p) return TS_FAIL(TS_ERR_NOMEM, "out of memory for %d %s", want, what);
    *items = p;
    *cap = want;
    return TS_OK;
}
