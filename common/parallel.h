/* Work split over threads: [0, n) in contiguous ranges, one POSIX thread each, for loops whose
 * iterations are independent and whose result must not depend on the split (each range writes
 * its own elements). Used where a rank fills its parameters' initial values (exec/param_layout.h,
 * exec/reference.h): a billion elements at ~30 ns each are half a minute on one core. */
#ifndef TS_PARALLEL_H
#define TS_PARALLEL_H

#include <stddef.h>

/* fn(ctx, lo, hi) for the ranges of [0, n), on up to `threads` threads (the caller's among them),
 * ranges of at least TS_PAR_MIN_RANGE; returns when every range is done. A thread that cannot be
 * started leaves its range to the caller's thread, so the work is always done. */
#define TS_PAR_MIN_RANGE 65536
void ts_par_ranges(size_t n, int threads, void (*fn)(void *ctx, size_t lo, size_t hi), void *ctx);

/* Threads for such work: the cores online over the node's MPI ranks (OMPI_COMM_WORLD_LOCAL_SIZE,
 * or MPICH's MPI_LOCALNRANKS, where set), at most 16, at least 1. */
int ts_par_threads(void);

#endif
