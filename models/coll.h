/* The kinds of collective a step program issues over a group (program/ranks.h names the
 * groups). What a collective costs is the planner's business (planner/cost.h), from the system's
 * links and its per-kind bus bandwidth (models/system.h coll_busbw). */
#ifndef TS_COLL_H
#define TS_COLL_H

typedef enum {
    TS_COLL_ALLREDUCE,
    TS_COLL_REDUCE_SCATTER,
    TS_COLL_ALLGATHER,
    TS_COLL_ALLTOALL,
    TS_COLL_SENDRECV, /* one point-to-point transfer */
    TS_COLL_COUNT
} ts_coll;
extern const char *const ts_coll_names[]; /* "all-reduce", ...; NULL-terminated */

#endif
