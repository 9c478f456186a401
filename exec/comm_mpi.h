/* The concrete communicator behind ts_comm, shared by the runtime (which makes them) and the
 * backends (which use them). Not part of the executor's public surface. */
#ifndef TS_COMM_MPI_H
#define TS_COMM_MPI_H

#include <mpi.h>

#include "exec/backend.h"

struct ts_comm {
    MPI_Comm mpi;
    int size, rank;
    void *device; /* a backend's own communicator for this group (NCCL), or NULL */
};

struct ts_request {
    MPI_Request mpi;
};

#endif
