/* Training defaults and layout validity (see problem.h). */
#include "program/problem.h"

#include <stdio.h>

#include "common/checked.h"
#include "program/recipe.h"
#include "program/schedule.h"

const char *const ts_fp8_recipe_names[] = {"delayed", "tensorwise", "mxfp8", "blockwise", NULL};
const char *const ts_cp_kind_names[] = {"ring", "allgather", "a2a", NULL};
const char *const ts_moe_dispatcher_names[] = {"auto", "alltoall", "allgather", "deepep", NULL};
const char *const ts_attn_backend_names[] = {"fused", "flash", NULL};
const char *const ts_ce_names[] = {"fused", "unfused", NULL};
const char *const ts_recompute_module_names[] = {"core_attn", "mla_up_proj", "layernorm", "mlp", "moe_act",
                                                 "shared_experts", "moe", NULL};

void ts_train_defaults(ts_train *t) {
    *t = (ts_train){
        .global_batch = 1024,
        .seq = 4096,
        .dtype = TS_DTYPE_BF16,
        .flash_attention = 1,
        .tp_across_nodes = 0,
        .cp_kind = TS_CP_RING,
        .moe_grouped_gemm = 1,
        .recompute_modules = TS_RCM_DEFAULT,
        .ce_fusion = -1,
        .weight_bytes = 2,
        .grad_bytes = 2,
        .optimizer_bytes = 12,
        /* Megatron-LM's DDP bucket: 40M parameters of 16-bit gradients. */
        .bucket_bytes = 40e6 * 2,
        .activation_scale = 1,
    };
    ts_stack_defaults(&t->stack);
}

const char *ts_recompute_modules_format(unsigned mask, const char *sep, const char *quote, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0, n = 0; i < TS_RCM_COUNT && used < cap; i++)
        if (mask & TS_RCM_BIT(i)) {
            int w = snprintf(buf + used, cap - used, "%s%s%s%s", n++ ? sep : "", quote, ts_recompute_module_names[i], quote);
            used += w > 0 ? (size_t)w : 0;
        }
    return buf;
}

const char *ts_recompute_modules_said(const ts_train *t, char *buf, size_t cap) {
    char mods[160];
    buf[0] = 0;
    if (t->recompute_modules != TS_RCM_DEFAULT)
        snprintf(buf, cap, ", selective recompute of %s",
                 ts_recompute_modules_format(t->recompute_modules, ",", "", mods, sizeof mods));
    return buf;
}

const char *ts_recompute_modules_invalid(const ts_model *m, const ts_train *t, char *buf, size_t cap) {
    unsigned rm = t->recompute_modules;
    if (rm >> TS_RCM_COUNT)
        snprintf(buf, cap, "unknown module bits 0x%x", rm >> TS_RCM_COUNT);
    else if ((rm & TS_RCM_BIT(TS_RCM_MLA_UP_PROJ)) && m->mla.kv_lora_rank <= 0)
        snprintf(buf, cap, "mla_up_proj needs multi-head latent attention, %s has none (Megatron-Core: "
                 "\"mla_up_proj in recompute_modules is only supported with multi_latent_attention\")", m->name);
    else if ((rm & TS_RCM_BIT(TS_RCM_MOE_ACT)) && !t->moe_grouped_gemm)
        snprintf(buf, cap, "moe_act needs the grouped GEMM, not --no-moe-grouped-gemm (Megatron-Core: \"moe_act in "
                 "recompute_modules is only supported with moe_grouped_gemm\")");
    else
        return NULL;
    return buf;
}

double ts_grad_reduce_bytes(const ts_train *t) {
    return t->stack.grad_reduce_bytes > 0 ? t->stack.grad_reduce_bytes : t->grad_bytes;
}

void ts_train_set_dtype(ts_train *t, ts_dtype d) {
    t->dtype = d;
    int fp32 = d == TS_DTYPE_FP32;
    t->weight_bytes = fp32 ? 4 : 2;
    t->grad_bytes = fp32 ? 4 : 2;
    t->optimizer_bytes = fp32 ? 8 : 12;
    t->activation_scale = fp32 ? 2 : 1;
}

int ts_train_ce_fused(const ts_train *t) { return t->ce_fusion >= 0 ? t->ce_fusion : t->stack.ce_fused; }

int ts_seq_extends(const ts_model *m, int64_t seq) {
    if (seq <= m->max_seq) return 0;
    return m->position == TS_POS_LEARNED ? -1 : 1;
}

/* Returns the reason, formatted into buf only when the caller wants it (the search's inner loop
 * passes NULL and pays no formatting). */
#define INVALID(...)                                                                               \
    do {                                                                                           \
        if (buf == NULL) return "invalid";                                                         \
        snprintf(buf, cap, __VA_ARGS__);                                                           \
        return buf;                                                                                \
    } while (0)

const char *ts_layout_invalid(const ts_problem *pb, const ts_layout *l, char *buf, size_t cap) {
    return ts_layout_invalid_split(pb, l, 0, buf, cap);
}

const char *ts_layout_invalid_split(const ts_problem *pb, const ts_layout *l, int explicit_split, char *buf,
                                    size_t cap) {
    const char *why = ts_shard_invalid(pb, l, buf, cap);
    if (!why && pb->train.moe_combined_1f1b && l->recompute == TS_RECOMPUTE_FULL)
        INVALID("--overlap-moe-expert-parallel-comm does not run with recompute=full (Megatron-Core: \"disable full "
                "recomputation\")");
    if (!why) why = ts_zero_invalid(pb, l, buf, cap);
    return why ? why : ts_schedule_invalid(pb, l, explicit_split, buf, cap);
}

const char *ts_shard_invalid(const ts_problem *pb, const ts_layout *l, char *buf, size_t cap) {
    const ts_model *m = &pb->model;
    if (l->dp < 1 || l->tp < 1 || l->pp < 1 || l->cp < 1 || l->ep < 1 || l->mbs < 1 || l->vpp < 1)
        INVALID("every size must be at least 1");
    int64_t prod, sizes[] = {l->dp, l->tp, l->pp, l->cp};
    if (!ts_mul_i64(sizes, 4, &prod))
        INVALID("dp×tp×pp×cp = %d×%d×%d×%d overflows 64 bits, not the %d GPUs", l->dp, l->tp, l->pp, l->cp,
                pb->gpus);
    if (prod != pb->gpus)
        INVALID("dp×tp×pp×cp = %d×%d×%d×%d = %lld, not the %d GPUs", l->dp, l->tp, l->pp,
                 l->cp, (long long)prod, pb->gpus);
    if (l->tp > ts_system_domain_gpus(&pb->sys) && !pb->train.tp_across_nodes)
        INVALID("tp=%d spans nodes of %d GPUs (allow with --tp-across-nodes)", l->tp,
                 ts_system_domain_gpus(&pb->sys));
    if (m->heads % l->tp != 0)
        INVALID("tp=%d does not divide %d attention heads", l->tp, m->heads);
    if (m->mla.kv_lora_rank == 0 && m->kv_heads % l->tp != 0 && l->tp % m->kv_heads != 0)
        INVALID("tp=%d neither divides nor is a multiple of %d kv heads", l->tp, m->kv_heads);
    if (m->ffn_hidden % l->tp != 0)
        INVALID("tp=%d does not divide ffn_hidden %lld", l->tp, (long long)m->ffn_hidden);
    int etp = ts_layout_etp(l);
    if (m->moe.experts > 0 && m->moe.expert_ffn % etp != 0)
        INVALID("%s=%d does not divide expert_ffn %lld", l->etp > 0 ? "etp" : "tp", etp,
                 (long long)m->moe.expert_ffn);
    if (l->sp && l->tp == 1)
        INVALID("sp=1 needs tp > 1");
    if (l->sp != 0 && l->sp != 1)
        INVALID("sp must be 0 or 1");
    if (l->cp > 1 && pb->train.seq % (2 * l->cp) != 0)
        INVALID("cp=%d needs seq %lld divisible by 2·cp (load-balanced causal split)",
                 l->cp, (long long)pb->train.seq);
    if (l->cp > 1 && pb->train.cp_kind == TS_CP_A2A && m->heads % (l->tp * l->cp) != 0)
        INVALID("cp=%d with --cp-kind a2a needs tp·cp = %d to divide %d attention heads", l->cp,
                 l->tp * l->cp, m->heads);
    if (m->moe.experts == 0 && l->ep != 1)
        INVALID("ep=%d on a dense model", l->ep);
    if (m->moe.experts > 0 && m->moe.experts % l->ep != 0)
        INVALID("ep=%d does not divide %d experts", l->ep, m->moe.experts);
    if (etp == l->tp && (l->dp * l->cp) % l->ep != 0)
        INVALID("ep=%d does not divide dp×cp = %d", l->ep, l->dp * l->cp);
    /* Megatron-Core's expert rank order (program/ranks.h): ep·etp ranks of a stage's tp·cp·dp;
     * experts split apart from TP need SP (Megatron-Core: MoE with TP requires sequence parallel),
     * so that TP ranks hold different tokens. */
    if (etp != 1 && etp != l->tp)
        INVALID("etp=%d: expected 1 or tp=%d (an expert TP group apart from TP is not modelled)", etp, l->tp);
    if (etp != l->tp && (l->tp * l->cp * l->dp) % (l->ep * etp) != 0)
        INVALID("ep×etp = %d×%d does not divide tp×cp×dp = %d", l->ep, etp, l->tp * l->cp * l->dp);
    if (etp != l->tp && l->tp > 1 && !l->sp)
        INVALID("etp=%d apart from tp=%d needs sp=1", etp, l->tp);
    if (pb->train.global_batch % ((long long)l->dp * l->mbs) != 0)
        INVALID("global batch %lld is not divisible by dp×mbs = %lld",
                 (long long)pb->train.global_batch, (long long)l->dp * l->mbs);
    if (l->pp > m->layers)
        INVALID("pp=%d exceeds %d layers", l->pp, m->layers);
    if (pb->train.moe_combined_1f1b && l->ep <= 1)
        INVALID("--overlap-moe-expert-parallel-comm needs ep > 1 (Megatron-Core: \"only supported with expert "
                "model parallelism\")");
    if (pb->train.moe_combined_1f1b && m->mtp_layers > 1)
        INVALID("--overlap-moe-expert-parallel-comm runs at most one MTP layer (Megatron-Core: \"MTP supports at most "
                "one layer\"); %s has %d", m->name, m->mtp_layers);
    return NULL;
}

const char *ts_zero_invalid(const ts_problem *pb, const ts_layout *l, char *buf, size_t cap) {
    (void)pb;
    if (l->zero < 0 || l->zero > 3)
        INVALID("zero must be 0..3");
    if (l->zero >= 2 && l->pp > 1)
        INVALID("zero=%d with pp=%d: sharded gradients/parameters do not combine with "
                 "pipeline parallelism (DeepSpeed refuses ZeRO-2/3 with PP; Megatron shards only the "
                 "optimizer)", l->zero, l->pp);
    return NULL;
}

/* Interleaving with the even split needs pp·vpp equal chunks (Megatron-LM's
 * --num-layers-per-virtual-pipeline-stage); an explicit split (planner/partition.h, Megatron's
 * --pipeline-model-parallel-layout) needs only a layer in every chunk. */
const char *ts_schedule_invalid(const ts_problem *pb, const ts_layout *l, int explicit_split, char *buf, size_t cap) {
    const ts_model *m = &pb->model;
    const ts_schedule_info *si = &ts_schedules[l->schedule];
    if (pb->train.moe_combined_1f1b && ts_combined_1f1b_invalid(l, buf, cap)) return buf ? buf : "invalid";
    if (pb->train.moe_shared_expert_overlap && m->moe.shared_experts > 0 &&
        ts_moe_dispatcher_of(pb) != TS_MOE_DISPATCH_ALLTOALL)
        INVALID("--moe-shared-expert-overlap runs the alltoall dispatcher (Megatron-Core: \"moe_shared_expert_overlap "
                "only works with alltoall token dispatcher\"), got %s (--moe-dispatcher alltoall)",
                ts_moe_dispatcher_names[ts_moe_dispatcher_of(pb)]);
    if (pb->train.moe_combined_1f1b && ts_moe_dispatcher_of(pb) == TS_MOE_DISPATCH_ALLGATHER)
        INVALID("--overlap-moe-expert-parallel-comm runs the alltoall or deepep dispatcher (Megatron-Core: "
                "\"supported with alltoall/flex token dispatcher\"), got allgather");
    if (si->fixed_vpp) {
        if (l->vpp != si->fixed_vpp)
            INVALID("sched=%s places %d chunks on every stage: vpp=%d expected (got %d)", si->name, si->fixed_vpp,
                    si->fixed_vpp, l->vpp);
        if (explicit_split) INVALID("sched=%s takes the even split of the layers", si->name);
        if ((long long)ts_model_chunks(l) > m->layers)
            INVALID("sched=%s needs %d chunks of at least one of %d layers", si->name, ts_model_chunks(l), m->layers);
        /* Two chunks of one stage's layers each take the even split of the interleaved schedule. */
        if (!si->dual && m->layers % ts_model_chunks(l) != 0)
            INVALID("sched=%s needs the %d layers in %d equal chunks", si->name, m->layers, ts_model_chunks(l));
        int mb = (int)(pb->train.global_batch / ((long long)l->dp * l->mbs));
        if (si->invalid && si->invalid(l->pp, mb, buf, cap)) return buf ? buf : "invalid";
        return NULL;
    }
    if (si->interleaved != (l->vpp > 1))
        INVALID(l->vpp > 1 ? "vpp=%d needs sched=interleaved"
                                      : "sched=interleaved needs vpp > 1 (got %d)", l->vpp);
    if (l->vpp > 1 && explicit_split && (l->pp == 1 || (long long)l->pp * l->vpp > m->layers))
        INVALID("interleaving needs pp > 1 and pp×vpp = %lld chunks of at least one of %d layers",
                 (long long)l->pp * l->vpp, m->layers);
    if (l->vpp > 1 && !explicit_split && (l->pp == 1 || m->layers % l->pp != 0 || (m->layers / l->pp) % l->vpp != 0))
        INVALID("interleaving needs pp > 1 dividing %d layers and vpp=%d dividing layers per stage "
                "(uneven chunks: --partition ilp)", m->layers, l->vpp);
    if (l->vpp > 1 && (pb->train.global_batch / ((long long)l->dp * l->mbs)) % l->pp != 0)
        INVALID("interleaving needs micro-batches (%lld) divisible by pp=%d",
                 (long long)(pb->train.global_batch / ((long long)l->dp * l->mbs)), l->pp);
    return NULL;
}

