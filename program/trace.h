/* The simulated step as a Chrome trace (the trace-event JSON format that https://ui.perfetto.dev
 * and chrome://tracing open; the executor writes measured steps in the same schema):
 *
 *   {"traceEvents": [...], "displayTimeUnit": "ms",
 *    "otherData": {"tessera": "sim" or "run", "layout", "model", "system", "step_s",
 *                  "gauge_flops_per_s" (when known: program/span.h)}}
 *
 * One process per simulated rank (pid = global rank, "process_name" metadata
 * "rank R (stage S)"), one thread per stream of its stage program (tid = ts_stream,
 * "thread_name" metadata from ts_stream_names), and one complete event ("ph": "X", "ts" and
 * "dur" in microseconds, start and end each rounded to the nanosecond and "dur" their difference,
 * so ops that follow each other on a track never overlap) per op, named by ts_op_label, "cat" = ts_op_kind_names, with the op's
 * index in its stage program and its kind's fields in "args" (gemm: m, n, k, flops; attention:
 * flops, kernels; elementwise, optimizer: bytes; collective: coll, group, bytes; send, recv:
 * peer stage, chunk, bytes). Events are sorted by (pid, tid, ts, op index) and numbers are
 * printed with fixed formats, so one simulation always gives the same bytes.
 *
 * The file is streamed (never held in memory) and written atomically (temporary file, then
 * rename). Traces above TS_TRACE_MAX_EVENTS op events are refused: they would be gigabytes. */
#ifndef TS_TRACE_H
#define TS_TRACE_H

#include "program/problem.h"
#include "program/program.h"
#include "program/span.h"

#define TS_TRACE_MAX_EVENTS 5000000

/* TS_ERR_INPUT, saying how many events and what to do instead, when the trace of `prog`
 * simulated with `full` (every rank) or not (one rank per stage) would hold more than
 * TS_TRACE_MAX_EVENTS op events; lets a caller refuse before simulating. */
ts_status ts_trace_check(const ts_program *prog, int full);

/* Writes the trace of `r` (spans of `prog` for `pb`: simulated, sim/engine.h ts_sim_spans, or
 * measured by the executor; `source` "sim" or "run") to `path`. TS_ERR_INPUT when a rank has no
 * spans (simulated with ts_sim_opts.stats_spans_only). */
ts_status ts_trace_write(const char *path, const char *source, const ts_problem *pb,
                         const ts_program *prog, const ts_step_spans *r);

/* The op events a trace of `r` holds: one per op of each rank's stage program (the metadata
 * events naming processes and threads come on top). */
int64_t ts_trace_op_events(const ts_program *prog, const ts_step_spans *r);

#endif
