/* Op by op: every op of a simulated trace beside its measured time, worst first, so that errors
 * that cancel in a kind's or the step's sum (a GEMM +300% beside a reduce-scatter −99%) show.
 * Ops are aligned as ts_compare_traces aligns them (sim/compare.h: same rank, op index and name;
 * ts_compare_traces checks the traces first), measured times × `speed` (the comparison's). */
#ifndef TS_COMPARE_OPS_H
#define TS_COMPARE_OPS_H

#include <cjson/cJSON.h>

#include "common/status.h"

typedef struct {
    int rank, stage, op, microbatch; /* microbatch from the label's "mbN", -1 without */
    char name[64], kind[16];
    double simulated_s, measured_s, error; /* error NAN when nothing was measured */
} ts_compare_op;

typedef struct {
    int n;
    ts_compare_op *ops; /* (n) owned; by |error| descending, unmeasured ones last */
} ts_compare_ops;

ts_status ts_compare_ops_read(const char *sim_path, const char *measured_path, double speed, ts_compare_ops *out);
void ts_compare_ops_free(ts_compare_ops *c);

/* [{"rank", "stage", "op", "name", "kind", "microbatch", "simulated_s", "measured_s", "error"}]
 * for the first n ops (all when n < 0 or more than there are). */
ts_status ts_compare_ops_json(const ts_compare_ops *c, int n, cJSON **out);

#endif
