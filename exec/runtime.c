/* MPI start-up and group communicators (see runtime.h). */
#include "exec/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/comm_mpi.h"

ts_status ts_mpi_fail(const char *file, int line, const char *call, int rc) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return ts_error_set(TS_ERR_EXTERNAL, file, line, "%s failed: %s", call, msg);
}

int ts_runtime_under_mpi(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", NULL};
    for (int i = 0; vars[i]; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

int ts_comm_size(const ts_comm *c) { return c->size; }
int ts_comm_rank(const ts_comm *c) { return c->rank; }

ts_status ts_mpi_init(int *rank, int *size) {
    ts_status res = TS_OK;
    int inited = 0;
    TS_MPI_GOTO(MPI_Initialized(&inited), res, fail);
    if (!inited) TS_MPI_GOTO(MPI_Init(NULL, NULL), res, fail);
    /* Errors come back as codes so they can be reported with the rank, not abort silently. */
    TS_MPI_GOTO(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), res, fail);
    TS_MPI_GOTO(MPI_Comm_rank(MPI_COMM_WORLD, rank), res, fail);
    TS_MPI_GOTO(MPI_Comm_size(MPI_COMM_WORLD, size), res, fail);
fail:
    return res;
}

ts_status ts_comm_blocks(int size, ts_comm **out) {
    ts_status res = TS_OK;
    int rank = 0, world = 0;
    *out = NULL;
    TS_MPI_GOTO(MPI_Comm_rank(MPI_COMM_WORLD, &rank), res, fail);
    TS_MPI_GOTO(MPI_Comm_size(MPI_COMM_WORLD, &world), res, fail);
    if (size < 1 || world % size != 0)
        return TS_FAIL(TS_ERR_INPUT, "blocks of %d ranks do not tile a world of %d", size, world);
    ts_comm *c = calloc(1, sizeof *c);
    TS_ALLOC_GOTO(c, res, fail);
    *out = c;
    c->mpi = MPI_COMM_NULL;
    TS_MPI_GOTO(MPI_Comm_split(MPI_COMM_WORLD, rank / size, rank, &c->mpi), res, fail);
    TS_MPI_GOTO(MPI_Comm_set_errhandler(c->mpi, MPI_ERRORS_RETURN), res, fail);
    TS_MPI_GOTO(MPI_Comm_size(c->mpi, &c->size), res, fail);
    TS_MPI_GOTO(MPI_Comm_rank(c->mpi, &c->rank), res, fail);
    return TS_OK;
fail:
    ts_comm_free(out);
    return res;
}

/* The members of the communicator made for group g, in its own order, against planner/ranks.h's
 * (ts_group_members): collectives over it assume that order (reduce-scatter slices, all-gathers,
 * ZeRO shards), and the planner and the simulator assume those ranks. One small all-gather per
 * group at start-up. */
static ts_status check_members(const ts_runtime *rt, ts_group g) {
    const ts_comm *c = rt->comm[g];
    ts_status res = TS_OK;
    int *got = malloc((size_t)c->size * sizeof *got), *want = malloc((size_t)c->size * sizeof *want);
    TS_ALLOC_GOTO(got, res, exit);
    TS_ALLOC_GOTO(want, res, exit);
    TS_MPI_GOTO(MPI_Allgather(&rt->rank, 1, MPI_INT, got, 1, MPI_INT, c->mpi), res, exit);
    int self = ts_group_members(&rt->layout, g, rt->rank, want);
    for (int i = 0; i < c->size; i++)
        if (got[i] != want[i] || (i == c->rank) != (i == self)) {
            res = TS_FAIL(TS_ERR_EXTERNAL, "member %d of the %s communicator is rank %d, the rank order says %d", i,
                          ts_group_names[g], got[i], want[i]);
            break;
        }
exit:
    free(got);
    free(want);
    return res;
}

/* The runtime of `layout` over the ranks of `base` (the world, or this process alone). */
static ts_status runtime_init_on(ts_runtime *rt, const ts_layout *layout, MPI_Comm base) {
    memset(rt, 0, sizeof *rt);
    ts_status res = TS_OK;
    int world_rank, world_size;
    TS_CHECK_GOTO(ts_mpi_init(&world_rank, &world_size), res, fail);
    TS_MPI_GOTO(MPI_Comm_rank(base, &rt->rank), res, fail);
    TS_MPI_GOTO(MPI_Comm_size(base, &rt->size), res, fail);
    rt->layout = *layout;
    int need = ts_rank_count(layout);
    if (rt->size != need) {
        res = TS_FAIL(TS_ERR_INPUT, "the layout needs %d ranks but mpirun started %d", need, rt->size);
        goto fail;
    }
    rt->coords = ts_rank_coords(layout, rt->rank);
    rt->world = calloc(1, sizeof *rt->world);
    TS_ALLOC_GOTO(rt->world, res, fail);
    TS_MPI_GOTO(MPI_Comm_dup(base, &rt->world->mpi), res, fail);
    rt->world->size = rt->size;
    rt->world->rank = rt->rank;
    for (int g = 0; g < TS_GROUP_COUNT; g++) {
        ts_comm *c = calloc(1, sizeof *c);
        TS_ALLOC_GOTO(c, res, fail);
        rt->comm[g] = c;
        /* One split per group: members share the group id (their lowest member's rank) and are
         * ordered by rank, the order of ts_group_members. */
        int color = ts_group_id(layout, (ts_group)g, rt->rank);
        TS_MPI_GOTO(MPI_Comm_split(base, color, rt->rank, &c->mpi), res, fail);
        TS_MPI_GOTO(MPI_Comm_set_errhandler(c->mpi, MPI_ERRORS_RETURN), res, fail);
        TS_MPI_GOTO(MPI_Comm_size(c->mpi, &c->size), res, fail);
        TS_MPI_GOTO(MPI_Comm_rank(c->mpi, &c->rank), res, fail);
        if (c->size != ts_group_size(layout, (ts_group)g)) {
            /* no rank here: ts_runtime_abort names it */
            res = TS_FAIL(TS_ERR_EXTERNAL, "the %s group has %d members, expected %d", ts_group_names[g], c->size,
                          ts_group_size(layout, (ts_group)g));
            goto fail;
        }
        TS_CHECK_GOTO(check_members(rt, (ts_group)g), res, fail);
    }
    return TS_OK;
fail:
    ts_runtime_free(rt);
    return res;
}

ts_status ts_runtime_init(ts_runtime *rt, const ts_layout *layout) {
    return runtime_init_on(rt, layout, MPI_COMM_WORLD);
}

ts_status ts_runtime_init_self(ts_runtime *rt, const ts_layout *layout) {
    return runtime_init_on(rt, layout, MPI_COMM_SELF);
}

void ts_comm_free(ts_comm **c) {
    if (*c == NULL) return;
    if ((*c)->mpi != MPI_COMM_NULL && (*c)->mpi != 0) MPI_Comm_free(&(*c)->mpi);
    free(*c);
    *c = NULL;
}

void ts_runtime_free(ts_runtime *rt) {
    for (int g = 0; g < TS_GROUP_COUNT; g++) ts_comm_free(&rt->comm[g]);
    ts_comm_free(&rt->world);
}

void ts_runtime_finalize(void) {
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
}

ts_status ts_runtime_gather(const ts_runtime *rt, const double *mine, int n, double *all,
                            const int *counts, const int *offsets) {
    ts_status res = TS_OK;
    TS_MPI_GOTO(MPI_Gatherv(mine, n, MPI_DOUBLE, all, counts, offsets, MPI_DOUBLE, 0, rt->world->mpi),
                res, fail);
fail:
    return res;
}

int ts_world_rank_now(void) {
    int inited = 0, rank = -1;
    MPI_Initialized(&inited);
    if (inited && MPI_Comm_rank(MPI_COMM_WORLD, &rank) == MPI_SUCCESS) return rank;
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", NULL};
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        long r = v ? strtol(v, &end, 10) : -1;
        if (v && *v && *end == '\0' && r >= 0 && r <= 1 << 30) return (int)r;
    }
    return -1;
}

/* Prints "tessera CMD: rank R: message" and ends the job: MPI_Abort once MPI is up, else this
 * process's exit, which the launcher turns into the end of the job. */
static _Noreturn void abort_job(const char *cmd, int rank, int exit_code, const char *message) {
    int inited = 0, finalized = 0;
    fprintf(stderr, "tessera %s: rank %d: %s\n", cmd, rank, message);
    fflush(stderr);
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (inited && !finalized) MPI_Abort(MPI_COMM_WORLD, exit_code ? exit_code : 1);
    exit(exit_code ? exit_code : 1);
}

void ts_runtime_abort(const ts_runtime *rt, int exit_code, const char *message) {
    abort_job("run", rt ? rt->rank : ts_world_rank_now(), exit_code, message);
}

void ts_mpi_abort(const char *cmd, int exit_code, const char *message) {
    abort_job(cmd, ts_world_rank_now(), exit_code, message);
}
