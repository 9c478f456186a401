/* The executor's MPI runtime: initialisation, the rank order of DESIGN.md (planner/ranks.h) and
 * one communicator per group a rank belongs to (TP, CP, DP, PP, DP×CP for gradients and ZeRO
 * shards, EP, and EP's data-parallel group EDP). The CPU and CUDA backends share it: NCCL
 * communicators are derived from these groups (unique id broadcast over the MPI communicator).
 *
 * ts_runtime_init checks that the world has exactly the layout's rank count and that each
 * communicator holds, in order, the members planner/ranks.h names (ts_group_members); ts_runtime_free
 * frees the communicators (MPI_Finalize is the caller's, once). Errors name the MPI call and
 * MPI_Error_string. */
#ifndef TS_RUNTIME_H
#define TS_RUNTIME_H

#include "exec/backend.h"
#include "program/ranks.h"

/* Wraps an MPI call: on failure records "file:line: CALL failed: <MPI_Error_string>" and jumps. */
#define TS_MPI_GOTO(call, res, label)                                                              \
    do {                                                                                           \
        int ts_mpi_rc_ = (call);                                                                   \
        if (ts_mpi_rc_ != 0) {                                                                     \
            (res) = ts_mpi_fail(__FILE__, __LINE__, #call, ts_mpi_rc_);                            \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

ts_status ts_mpi_fail(const char *file, int line, const char *call, int rc);

typedef struct {
    ts_layout layout;
    int rank, size; /* in the world */
    ts_coords coords;
    ts_comm *comm[TS_GROUP_COUNT]; /* this rank's communicator for each group */
    ts_comm *world;                /* every rank, in rank order */
} ts_runtime;

/* Whether this process runs under an MPI launcher (mpirun/srun set their environment). */
int ts_runtime_under_mpi(void);
/* This process's world rank for a message: MPI's once initialised, else the launcher's (a rank
 * can fail before MPI_Init, e.g. loading its plan); -1 outside any launcher. */
int ts_world_rank_now(void);

/* MPI_Init (if not yet), errors returned as codes rather than aborting; this rank and the world
 * size. ts_runtime_init calls it; so do tools that need only the world (exec/calibrate.h). */
ts_status ts_mpi_init(int *rank, int *size);
/* A communicator for this rank's block of `size` consecutive world ranks (ranks r with equal
 * r / size), ordered by rank; the world size must be a multiple of `size`. Collective over the
 * world. The caller frees it with ts_comm_free. */
ts_status ts_comm_blocks(int size, ts_comm **out);
/* Frees *c (NULL is ignored) and sets it to NULL. */
void ts_comm_free(ts_comm **c);

/* MPI_Init (if not yet) and the group communicators for `layout`. */
ts_status ts_runtime_init(ts_runtime *rt, const ts_layout *layout);
/* The same on this process alone (MPI_COMM_SELF), whatever the world: for a one-rank layout run
 * inside a larger job (calibrate's in-situ pass). Not collective. Pipeline sends and receives
 * (the backends' world ones) are not available: the layout must have pp = 1. */
ts_status ts_runtime_init_self(ts_runtime *rt, const ts_layout *layout);
void ts_runtime_free(ts_runtime *rt);
/* MPI_Finalize, once, after every runtime is freed. */
void ts_runtime_finalize(void);

/* Size of and this rank's index in its group `g`. */
int ts_comm_size(const ts_comm *c);
int ts_comm_rank(const ts_comm *c);

/* Gathers `n` doubles from every rank into `all` on rank 0 (rank r's at offsets[r], counts[r]
 * = its n; `all`, `counts` and `offsets` matter on rank 0 only). */
ts_status ts_runtime_gather(const ts_runtime *rt, const double *mine, int n, double *all,
                            const int *counts, const int *offsets);

/* Every rank stops: a failing rank calls this with its message so the whole job ends promptly
 * (MPI_Abort) instead of hanging in a collective. `rt` may be NULL (a rank that failed before or
 * while making its runtime): the rank is then MPI_COMM_WORLD's, or before MPI_Init the launcher's
 * (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK), and before MPI_Init the process exits instead of
 * calling MPI_Abort. Never returns. */
_Noreturn void ts_runtime_abort(const ts_runtime *rt, int exit_code, const char *message);
/* The same for any MPI program: prints "tessera CMD: rank R: message" (R as above; -1 outside any
 * launcher) and aborts the job. */
_Noreturn void ts_mpi_abort(const char *cmd, int exit_code, const char *message);

#endif
