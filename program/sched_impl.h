/* The schedules' own functions, one file each (program/sched_*.c), for the table in schedule.c.
 * Adding a schedule: a file defining its bubble, in-flight and order functions (and, when its
 * chunks are not placed as Megatron's looped ones, its placement), declared here, and one row in
 * ts_schedules. Private to program/. */
#ifndef TS_SCHED_IMPL_H
#define TS_SCHED_IMPL_H

#include "program/schedule.h"

static inline int ts_min_i(int a, int b) { return a < b ? a : b; }
static inline ts_slot ts_slot_of(int kind, int mb, int chunk) { return (ts_slot){kind, mb, chunk, 0}; }

double ts_1f1b_bubble_s(int p, int v, double tf, double tb, double tw);
double ts_1f1b_in_flight(int p, int stage, int m, int v);
int ts_1f1b_order(int p, int v, int m, int stage, ts_slot *out);
int ts_1f1b_warmup(int p, int m, int stage); /* forwards before the steady state */

double ts_gpipe_in_flight(int p, int stage, int m, int v);
int ts_gpipe_order(int p, int v, int m, int stage, ts_slot *out);

double ts_interleaved_bubble_s(int p, int v, double tf, double tb, double tw);
double ts_interleaved_in_flight(int p, int stage, int m, int v);
int ts_interleaved_order(int p, int v, int m, int stage, ts_slot *out);
int ts_interleaved_warmup(int p, int v, int m, int stage); /* virtual micro-batches before the steady state */

double ts_zb_h1_bubble_s(int p, int v, double tf, double tb, double tw);
int ts_zb_h1_order(int p, int v, int m, int stage, ts_slot *out);

double ts_dualpipe_bubble_s(int p, int v, double tf, double tb, double tw);
double ts_dualpipe_in_flight(int p, int stage, int m, int v);
int ts_dualpipe_order(int p, int v, int m, int stage, ts_slot *out);
const char *ts_dualpipe_invalid(int p, int m, char *buf, size_t cap);

double ts_zb_v_bubble_s(int p, int v, double tf, double tb, double tw);
double ts_zb_v_in_flight(int p, int stage, int m, int v);
int ts_zb_v_order(int p, int v, int m, int stage, ts_slot *out);
const char *ts_zb_v_invalid(int p, int m, char *buf, size_t cap);

/* Megatron's looped placement: stage s holds global chunks s, s+p, s+2p, ... */
int ts_looped_chunk(int p, int v, int stage, int local);
int ts_looped_stage(int p, int v, int chunk);
int ts_looped_local(int p, int v, int chunk);

/* The V placement: stage s holds global chunks s and 2p-1-s. */
int ts_v_chunk(int p, int v, int stage, int local);
int ts_v_stage(int p, int v, int chunk);
int ts_v_local(int p, int v, int chunk);

#endif
