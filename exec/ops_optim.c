/* The optimizer op (see ops_optim.h). */
#include "exec/ops_optim.h"

ts_status tr_optimizer_op(tr_store *st, const ts_train_opts *o, int zero, int step) {
    const ts_kernels *k = st->k;
    for (int i = 0; i < st->n_seg; i++) {
        tr_segment *s = &st->seg[i];
        if (s->n == 0) continue;
        /* Without data parallelism the program has no reduction ops; under ZeRO-2/3 nothing
         * reduced the embedding and head, which keep whole gradients. */
        int edge = i == st->seg_embed || i == st->seg_head;
        if (edge && zero >= 2) TS_CHECK(tr_store_reduce(st, i));
        if (s->zero == 0) {
            TS_CHECK(k->adamw(s->param, s->adam_m, s->adam_v, s->grad, s->n, o->lr, o->beta1, o->beta2, o->eps,
                              o->weight_decay, step + 1));
            continue;
        }
        size_t start = (size_t)s->index * s->part;
        if (start >= s->n) continue;
        size_t n = s->n - start < s->part ? s->n - start : s->part;
        float *p = s->zero >= 3 ? s->param_shard : s->param + start;
        TS_CHECK(k->adamw(p, s->adam_m, s->adam_v, s->grad_shard, n, o->lr, o->beta1, o->beta2, o->eps,
                          o->weight_decay, step + 1));
        if (edge && zero >= 3) TS_CHECK(tr_store_gather(st, i));
    }
    if (zero >= 3) tr_store_release_copies(st);
    return TS_OK;
}
