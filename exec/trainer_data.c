/* This rank's tokens and positions (see trainer_data.h). */
#include <stdlib.h>
#include <string.h>

#include "exec/reference.h"
#include "exec/trainer_data.h"

/* Positions of CP member cp_i's rows of one sequence of Ts of them: its two chunks. */
static void positions_of(int cp, int cp_i, int Ts, int *pos) {
    int half = Ts / 2;
    for (int i = 0; i < half; i++) {
        pos[i] = cp_i * half + i;
        pos[half + i] = (2 * cp - 1 - cp_i) * half + i;
    }
}

/* Every member's key positions, and this member's query positions for every micro-batch row. */
static ts_status fill_positions(tr_data *d, const tr_shape *s) {
    int *one = malloc((size_t)s->Ts * sizeof *one);
    if (!one) return TS_FAIL(TS_ERR_NOMEM, "out of memory for positions");
    for (int r = 0; r < s->cp; r++) {
        if (s->cp == 1) {
            for (int i = 0; i < s->Ts; i++) one[i] = i;
        } else {
            positions_of(s->cp, r, s->Ts, one);
        }
        memcpy(d->kv_pos + (size_t)r * s->Ts, one, (size_t)s->Ts * sizeof *one);
    }
    for (int mb = 0; mb < s->m_mb; mb++)
        for (int b = 0; b < s->mbs; b++)
            memcpy(d->pos + (size_t)mb * s->T + (size_t)b * s->Ts, d->kv_pos + (size_t)s->cp_i * s->Ts,
                   (size_t)s->Ts * sizeof *one);
    free(one);
    return TS_OK;
}

ts_status tr_data_init(tr_data *d, const tr_shape *s, const ts_backend *be) {
    size_t mT = (size_t)s->m_mb * s->T, kvn = (size_t)s->cp * s->Ts;
    *d = (tr_data){0};
    d->tokens = malloc((size_t)s->B * (s->seq + 1) * sizeof *d->tokens);
    d->inputs = malloc(mT * sizeof *d->inputs);
    d->targets = malloc(mT * sizeof *d->targets);
    d->pos = malloc(mT * sizeof *d->pos);
    d->kv_pos = malloc(kvn * sizeof *d->kv_pos);
    if (!d->tokens || !d->inputs || !d->targets || !d->pos || !d->kv_pos)
        return TS_FAIL(TS_ERR_NOMEM, "out of memory for the token buffers");
    TS_CHECK(fill_positions(d, s));
    TS_CHECK(be->alloc(mT * sizeof(int), (void **)&d->dev_inputs));
    TS_CHECK(be->alloc(mT * sizeof(int), (void **)&d->dev_targets));
    TS_CHECK(be->alloc(mT * sizeof(int), (void **)&d->dev_pos));
    TS_CHECK(be->alloc(kvn * sizeof(int), (void **)&d->dev_kv_pos));
    TS_CHECK(be->kernels->to_device(d->dev_pos, d->pos, mT * sizeof(int)));
    return be->kernels->to_device(d->dev_kv_pos, d->kv_pos, kvn * sizeof(int));
}

void tr_data_free(tr_data *d, const ts_backend *be) {
    free(d->tokens);
    free(d->inputs);
    free(d->targets);
    free(d->pos);
    free(d->kv_pos);
    int *dev[] = {d->dev_inputs, d->dev_targets, d->dev_pos, d->dev_kv_pos};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) be->free(dev[i]);
    *d = (tr_data){0};
}

ts_status tr_data_load(tr_data *d, const tr_shape *s, const ts_kernels *k, uint64_t seed, const char *text,
                       int step) {
    if (text) {
        ts_text_source src;
        TS_CHECK(ts_text_source_init(&src, text));
        ts_status st = ts_text_batch(&src, seed, step, s->B, s->seq, s->V, d->tokens);
        ts_text_source_free(&src);
        TS_CHECK(st);
    } else {
        ts_synthetic_batch(seed, step, s->B, s->seq, s->V, d->tokens);
    }
    int per_replica = s->B / s->l->dp;
    for (int mb = 0; mb < s->m_mb; mb++)
        for (int b = 0; b < s->mbs; b++) {
            const int *row = d->tokens + (size_t)(s->dp_i * per_replica + mb * s->mbs + b) * (s->seq + 1);
            for (int i = 0; i < s->Ts; i++) {
                size_t j = (size_t)mb * s->T + (size_t)b * s->Ts + (size_t)i;
                int p = d->pos[j];
                d->inputs[j] = row[p];
                d->targets[j] = row[p + 1];
            }
        }
    size_t bytes = (size_t)s->m_mb * s->T * sizeof(int);
    TS_CHECK(k->to_device(d->dev_inputs, d->inputs, bytes));
    return k->to_device(d->dev_targets, d->targets, bytes);
}
