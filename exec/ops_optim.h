/* The optimizer op: AdamW over this rank's parameters, each segment's whole tensors or, under
 * ZeRO >= 1, this member's shard of them (exec/param_store.h). Under ZeRO-2/3 the embedding and
 * head, which no bucket op reduced, are reduced here first; under ZeRO-3 they are gathered whole
 * again after their update (no step-start gather brings them back). */
#ifndef TS_OPS_OPTIM_H
#define TS_OPS_OPTIM_H

#include "exec/param_store.h"
#include "exec/trainer.h"

/* The update of training step `step` (0-based) with the options' learning rate, betas, eps and
 * weight decay under the layout's ZeRO stage `zero`. */
ts_status tr_optimizer_op(tr_store *st, const ts_train_opts *o, int zero, int step);

#endif
