/* The data this rank trains on: each step's global batch from exec/reference.h's synthetic stream
 * (or a text file), of which it takes its replica's sequences and, under CP, its two
 * load-balanced chunks of each (chunks cp_i and 2·cp-1-cp_i of 2·cp, Megatron's causal
 * balancing), with the positions of those tokens and of every CP member's keys.
 *
 * Memory. The host decides with host arrays; the kernels read their copies in backend memory
 * (positions once, tokens per step). The struct owns both; tr_data_free releases them. */
#ifndef TS_TRAINER_DATA_H
#define TS_TRAINER_DATA_H

#include <stdint.h>

#include "exec/kernel_table.h"
#include "exec/trainer_shape.h"

typedef struct {
    int *tokens;                 /* host (B, seq + 1) the global batch */
    int *inputs, *targets, *pos; /* host (m_mb, T) */
    int *kv_pos;                 /* host (cp·Ts) key positions of one sequence, CP member-major */
    int *dev_inputs, *dev_targets, *dev_pos, *dev_kv_pos; /* their copies in backend memory */
} tr_data;

/* The buffers for shape `s`, with the positions computed and copied. tr_data_free releases them
 * (also after a failure). */
ts_status tr_data_init(tr_data *d, const tr_shape *s, const ts_backend *be);
void tr_data_free(tr_data *d, const ts_backend *be);

/* Training step `step`'s tokens from `seed` (and the text file `text`, NULL: synthetic), this
 * rank's rows of them copied to the backend. */
ts_status tr_data_load(tr_data *d, const tr_shape *s, const ts_kernels *k, uint64_t seed, const char *text,
                       int step);

#endif
