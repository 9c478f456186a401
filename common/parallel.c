/* Work split over POSIX threads (parallel.h). */
#include "common/parallel.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define TS_PAR_MAX_THREADS 16

typedef struct {
    void (*fn)(void *ctx, size_t lo, size_t hi);
    void *ctx;
    size_t lo, hi;
} par_range;

static void *run_range(void *arg) {
    par_range *r = arg;
    r->fn(r->ctx, r->lo, r->hi);
    return NULL;
}

void ts_par_ranges(size_t n, int threads, void (*fn)(void *ctx, size_t lo, size_t hi), void *ctx) {
    if (threads > TS_PAR_MAX_THREADS) threads = TS_PAR_MAX_THREADS;
    if ((size_t)threads > n / TS_PAR_MIN_RANGE) threads = (int)(n / TS_PAR_MIN_RANGE);
    if (threads <= 1) {
        if (n > 0) fn(ctx, 0, n);
        return;
    }
    par_range r[TS_PAR_MAX_THREADS];
    pthread_t tid[TS_PAR_MAX_THREADS];
    int started[TS_PAR_MAX_THREADS] = {0};
    for (int i = 0; i < threads; i++)
        r[i] = (par_range){fn, ctx, n * (size_t)i / (size_t)threads, n * (size_t)(i + 1) / (size_t)threads};
    for (int i = 1; i < threads; i++) started[i] = pthread_create(&tid[i], NULL, run_range, &r[i]) == 0;
    run_range(&r[0]);
    for (int i = 1; i < threads; i++) {
        if (started[i]) pthread_join(tid[i], NULL);
        else run_range(&r[i]); /* no thread: the caller does it */
    }
}

int ts_par_threads(void) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    /* the node's ranks share its cores (Open MPI's, then MPICH's count of them) */
    const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        char *end = NULL;
        long ranks = v ? strtol(v, &end, 10) : 0;
        if (v && *v && *end == '\0' && ranks > 0) {
            cores /= ranks;
            break;
        }
    }
    if (cores < 1) return 1;
    return cores > TS_PAR_MAX_THREADS ? TS_PAR_MAX_THREADS : (int)cores;
}
