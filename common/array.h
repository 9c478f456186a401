/* Growable arrays: a struct holds items, n and cap; ts_grow makes room for one more. */
#ifndef TS_ARRAY_H
#define TS_ARRAY_H

#include <stddef.h>

#include "common/status.h"

/* Room for one more item of `size` bytes in *items (n used of *cap): doubles the capacity when
 * full (from 16). TS_ERR_NOMEM naming `what` when it cannot; *items and *cap are unchanged then. */
ts_status ts_grow(void **items, int n, int *cap, size_t size, const char *what);

#endif
