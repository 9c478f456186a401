/* Megatron-Core's combined 1F1B (--overlap-moe-expert-parallel-comm, MCore v0.14;
 * megatron/core/pipeline_parallel/combined_1f1b.py, schedules.py): in the steady state of 1F1B
 * every forward runs paired with the backward of an earlier micro-batch, layer by layer, so that
 * one's expert-parallel dispatch and combine run beside the other's attention and expert GEMMs
 * (models/common/model_chunk_schedule_plan.py TransformerLayerSchedulePlan.run). Megatron-Core
 * schedules one warm-up forward more than 1F1B would ("needed to ensure the forward and backward
 * computations are independent in all 1f1b steps", schedules.py get_pp_rank_microbatches); in a
 * pair the backward frees its micro-batch's activations layer by layer as the forward stores its
 * own (release_state), so a stage holds what 1F1B holds at its peak (the extra warm-up forward
 * where 1F1B's first steady forward was), but a layer. It runs without pipelining or with the
 * interleaved schedule (transformer_config.py: "virtual_pipeline_model_parallel_size must be
 * specified when pipeline_model_parallel_size > 1"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "program/sched_impl.h"

const char *ts_combined_1f1b_invalid(const ts_layout *l, char *buf, size_t cap) {
    if (l->schedule == TS_SCHED_1F1B ? l->pp == 1 : l->schedule == TS_SCHED_INTERLEAVED) return NULL;
    if (buf)
        snprintf(buf, cap, "--overlap-moe-expert-parallel-comm runs 1F1B without pipelining or the interleaved "
                           "schedule (Megatron-Core: \"virtual_pipeline_model_parallel_size must be specified when "
                           "pipeline_model_parallel_size > 1\"); got sched=%s with pp=%d",
                 ts_schedules[l->schedule].name, l->pp);
    return buf ? buf : "invalid";
}

int ts_sched_combined_1f1b(ts_slot *slots, int n) {
    ts_slot *f = malloc((size_t)(n > 0 ? n : 1) * 2 * sizeof *f);
    if (f == NULL) return -1;
    ts_slot *b = f + n;
    int nf = 0, nb = 0, warm = -1;
    for (int i = 0; i < n; i++) {
        if (slots[i].kind == TS_SLOT_F) f[nf++] = slots[i];
        else b[nb++] = slots[i], warm = warm < 0 ? nf : warm;
    }
    /* the forwards before the first backward: 1F1B's warm-up and the first steady-state forward,
     * which combined 1F1B runs unpaired as one warm-up forward more */
    warm = warm < 0 ? nf : warm;
    int k = 0;
    for (int i = 0; i < warm; i++) slots[k++] = f[i];
    for (int i = 0; i < nb; i++) {
        if (warm + i < nf) {
            slots[k] = f[warm + i];
            slots[k++].pair = 1;
        }
        slots[k++] = b[i];
    }
    free(f);
    return k;
}

double ts_combined_1f1b_paired(const ts_layout *l, int stage) {
    int total = l->microbatches * l->vpp;
    int warm = (l->schedule == TS_SCHED_INTERLEAVED ? ts_interleaved_warmup(l->pp, l->vpp, l->microbatches, stage)
                                                    : ts_1f1b_warmup(l->pp, l->microbatches, stage)) + 1;
    return warm < total ? (double)(total - warm) / total : 0;
}
