/* A Megatron-Bridge pre-training recipe for a layout (see export.h).
 *
 * Checked against megatron-bridge 0.3.1 (PyPI; NVIDIA-NeMo/Megatron-Bridge):
 * megatron/bridge/training/config.py ConfigContainer(train=TrainingConfig, model=provider,
 * optimizer=OptimizerConfig, scheduler=SchedulerConfig, dataset=GPTDatasetConfig,
 * logger=LoggerConfig, tokenizer=TokenizerConfig, checkpoint=CheckpointConfig,
 * ddp=DistributedDataParallelConfig, dist=DistributedInitConfig, mixed_precision=name) and its
 * validate(); megatron/bridge/models/gpt_provider.py GPTModelProvider (a TransformerConfig: the
 * same field names as megatron-core, plus vocab_size, seq_length, share_embeddings_and_output_weights,
 * position_embedding_type, rotary_base, should_pad_vocab) and models/mla_provider.py
 * MLAModelProvider (MLATransformerConfig's q_lora_rank, kv_lora_rank, qk_head_dim,
 * qk_pos_emb_head_dim, v_head_dim); training/mixed_precision.py recipe names bf16_mixed,
 * fp16_mixed and, by the plan's FP8 recipe, bf16_with_fp8_delayed_scaling_mixed,
 * bf16_with_fp8_current_scaling_mixed, bf16_with_mxfp8_mixed, bf16_with_fp8_subchannel_scaling_mixed; OptimizerConfig and SchedulerConfig as
 * recipes/utils/optimizer_utils.py distributed_fused_adam_with_cosine_annealing fills them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/partition.h"
#include "reports/export.h"

static const char *py_bool(int v) { return v ? "True" : "False"; }

/* The attention backend the plan priced when it is not the default one (TransformerConfig's
 * attention_backend, megatron.core.transformer.enums.AttnBackend); NULL: the default. */
static const char *bridge_attn_backend(const ts_problem *pb) {
    if (!pb->train.flash_attention) return "unfused";
    return pb->train.attn_backend == TS_ATTN_FLASH ? "flash" : NULL;
}

static void bridge_model(FILE *f, const ts_problem *pb, const ts_layout *l, const ts_export_opts *o) {
    const ts_model *m = &pb->model;
    const ts_moe *e = &m->moe;
    int mla = m->mla.kv_lora_rank > 0;
    fprintf(f, "    model = %s(\n", mla ? "MLAModelProvider" : "GPTModelProvider");
    fprintf(f, "        num_layers=%d, hidden_size=%lld, ffn_hidden_size=%lld, num_attention_heads=%d,\n",
            m->layers, (long long)m->hidden, (long long)(m->ffn_hidden > 0 ? m->ffn_hidden : e->expert_ffn), m->heads);
    if (mla) {
        const ts_mla *a = &m->mla;
        char q[32] = "None";
        if (a->q_lora_rank > 0) snprintf(q, sizeof q, "%d", a->q_lora_rank);
        fprintf(f, "        multi_latent_attention=True,\n");
        fprintf(f, "        q_lora_rank=%s, kv_lora_rank=%d, qk_head_dim=%d, qk_pos_emb_head_dim=%d, v_head_dim=%d,\n",
                q, a->kv_lora_rank, a->qk_nope_dim, a->qk_rope_dim, a->v_dim);
    } else {
        fprintf(f, "        num_query_groups=%d, kv_channels=%d,\n", m->kv_heads, m->head_dim);
    }
    fprintf(f, "        seq_length=%lld, vocab_size=%lld, should_pad_vocab=False,\n", (long long)pb->train.seq,
            (long long)m->vocab);
    fprintf(f, "        share_embeddings_and_output_weights=%s, position_embedding_type=\"%s\",\n",
            py_bool(m->tied_embeddings), m->position == TS_POS_ROPE ? "rope" : "learned_absolute");
    if (m->rope_theta > 0) fprintf(f, "        rotary_base=%lld,\n", (long long)m->rope_theta);
    fprintf(f, "        normalization=\"%s\", gated_linear_unit=%s, activation_func=%s,\n",
            m->norm == TS_NORM_RMSNORM ? "RMSNorm" : "LayerNorm", py_bool(m->activation == TS_ACT_SWIGLU),
            m->activation == TS_ACT_SWIGLU && !m->gelu_gate ? "F.silu" : m->activation == TS_ACT_RELU2 ? "squared_relu" : "F.gelu");
    fprintf(f, "        add_bias_linear=%s, add_qkv_bias=%s, qk_layernorm=%s,\n", py_bool(m->linear_bias),
            py_bool(m->qkv_bias && !m->linear_bias), py_bool(m->qk_norm == TS_QKNORM_HEAD || m->mla.kv_lora_rank > 0));
    fprintf(f, "        hidden_dropout=%s, attention_dropout=%s,\n", m->dropout ? "0.1" : "0.0", m->dropout ? "0.1" : "0.0");
    if (bridge_attn_backend(pb)) fprintf(f, "        attention_backend=AttnBackend.%s,\n", bridge_attn_backend(pb));
    if (m->attn_sinks) fprintf(f, "        softmax_type=\"learnable\",\n");
    if (m->attn_gate) fprintf(f, "        attention_output_gate=True,\n");
    if (m->window.tokens > 0 && !m->window.chunked) {
        fprintf(f, "        window_size=(%lld, 0),\n", (long long)m->window.tokens);
        if (m->window.full_every > 0) fprintf(f, "        window_attn_skip_freq=%d,\n", m->window.full_every);
    }
    if (m->mtp_layers > 0) fprintf(f, "        mtp_num_layers=%d,\n", m->mtp_layers);
    if (e->experts > 0) {
        char freq[256];
        ts_export_moe_layer_freq(m, freq, sizeof freq);
        fprintf(f, "        num_moe_experts=%d, moe_router_topk=%d, moe_ffn_hidden_size=%lld, moe_layer_freq=%s,\n",
                e->experts, e->top_k, (long long)e->expert_ffn, freq);
        if (e->shared_experts > 0)
            fprintf(f, "        moe_shared_expert_intermediate_size=%lld,\n", (long long)e->shared_experts * e->shared_ffn);
        fprintf(f, "        moe_token_dispatcher_type=\"alltoall\", moe_router_score_function=\"%s\",\n",
                e->router_sigmoid ? "sigmoid" : "softmax");
        if (pb->train.moe_grouped_gemm) fprintf(f, "        moe_grouped_gemm=True,\n");
        if (pb->train.moe_shared_expert_overlap && e->shared_experts > 0)
            fprintf(f, "        moe_shared_expert_overlap=True,\n");
        if (e->router_expert_bias) fprintf(f, "        moe_router_enable_expert_bias=True,\n");
        if (e->router_groups > 0)
            fprintf(f, "        moe_router_num_groups=%d, moe_router_group_topk=%d,\n", e->router_groups,
                    e->router_group_topk);
        if (e->router_scale > 0) fprintf(f, "        moe_router_topk_scaling_factor=%g,\n", e->router_scale);
        if (e->capacity_factor > 0) fprintf(f, "        moe_expert_capacity_factor=%g,\n", e->capacity_factor);
    }
    /* parallelism */
    fprintf(f, "        tensor_model_parallel_size=%d, pipeline_model_parallel_size=%d, context_parallel_size=%d,\n",
            l->tp, l->pp, l->cp);
    fprintf(f, "        sequence_parallel=%s, expert_model_parallel_size=%d", py_bool(l->sp), l->ep);
    if (e->experts > 0) fprintf(f, ", expert_tensor_parallel_size=%d", m->linear_bias ? 1 : ts_layout_etp(l));
    fprintf(f, ",\n");
    if (l->pp > 1) fprintf(f, "        pipeline_dtype=torch.bfloat16,\n");
    if (ts_export_uneven(m, l, o->split)) {
        fprintf(f, "        pipeline_model_parallel_layout=\"");
        int n = ts_export_virtual_stages(l, o->split);
        for (int g = 0; g < n; g++) {
            fprintf(f, "%s%s", g ? "|" : "", g == 0 ? "E" : "");
            for (int i = 0; i < ts_export_split_layers(m, l, o->split, g); i++) fputc('t', f);
            for (int i = 0; g == n - 1 && i < m->mtp_layers; i++) fputc('m', f);
            if (g == n - 1) fputc('L', f);
        }
        fprintf(f, "\",\n");
    } else if (l->schedule == TS_SCHED_INTERLEAVED && l->vpp > 1) {
        fprintf(f, "        virtual_pipeline_model_parallel_size=%d,\n", l->vpp);
    }
    if (l->recompute == TS_RECOMPUTE_FULL)
        fprintf(f, "        recompute_granularity=\"full\", recompute_method=\"uniform\", recompute_num_layers=1,\n");
    else if (l->recompute == TS_RECOMPUTE_SELECTIVE) {
        char mods[200];
        fprintf(f, "        recompute_granularity=\"selective\",");
        if (pb->train.recompute_modules != TS_RCM_DEFAULT)
            fprintf(f, " recompute_modules=[%s],",
                    ts_recompute_modules_format(pb->train.recompute_modules, ", ", "\"", mods, sizeof mods));
        fprintf(f, "\n");
    }
    fprintf(f, "    )\n");
}

/* Megatron-Bridge's mixed-precision recipe (training/mixed_precision.py) for the plan's precision
 * and, under fp8, the scaling recipe it priced. */
static const char *precision_name(ts_dtype d, ts_fp8_recipe r) {
    static const char *const fp8[TS_FP8_RECIPE_COUNT] = {
        [TS_FP8_DELAYED] = "\"bf16_with_fp8_delayed_scaling_mixed\"",
        [TS_FP8_TENSORWISE] = "\"bf16_with_fp8_current_scaling_mixed\"",
        [TS_FP8_MXFP8] = "\"bf16_with_mxfp8_mixed\"",
        [TS_FP8_BLOCKWISE] = "\"bf16_with_fp8_subchannel_scaling_mixed\""};
    switch (d) {
    case TS_DTYPE_BF16: return "\"bf16_mixed\"";
    case TS_DTYPE_FP16: return "\"fp16_mixed\"";
    case TS_DTYPE_FP8: return fp8[r];
    case TS_DTYPE_FP32:
    case TS_DTYPE_COUNT: break;
    }
    return "None";
}

static void bridge_container(FILE *f, const ts_problem *pb, const ts_layout *l) {
    const char *strategy = l->zero >= 3 ? "optim_grads_params" : l->zero == 2 ? "optim_grads" : l->zero == 1 ? "optim" : "no_shard";
    /* Adam with cosine decay, as recipes/utils/optimizer_utils.py
     * distributed_fused_adam_with_cosine_annealing builds them (importing it pulls in every recipe,
     * vision ones included, so the two configs are written out). */
    fprintf(f, "    optimizer = OptimizerConfig(optimizer=\"adam\", lr=3e-4, min_lr=3e-5, weight_decay=0.1, bf16=%s,\n"
               "                                fp16=%s, adam_beta1=0.9, adam_beta2=0.95, adam_eps=1e-8,\n"
               "                                use_distributed_optimizer=%s, clip_grad=1.0)\n",
            py_bool(pb->train.dtype == TS_DTYPE_BF16 || pb->train.dtype == TS_DTYPE_FP8),
            py_bool(pb->train.dtype == TS_DTYPE_FP16), py_bool(l->zero >= 1));
    fprintf(f, "    scheduler = SchedulerConfig(start_weight_decay=0.033, end_weight_decay=0.033,\n"
               "                                weight_decay_incr_style=\"constant\", lr_decay_style=\"cosine\",\n"
               "                                lr_warmup_iters=2000, lr_warmup_init=0.0, lr_decay_iters=None)\n");
    fprintf(f, "    return ConfigContainer(\n");
    fprintf(f, "        model=model,\n");
    fprintf(f, "        train=TrainingConfig(train_iters=1000, global_batch_size=%lld, micro_batch_size=%d),\n",
            (long long)pb->train.global_batch, l->mbs);
    fprintf(f, "        optimizer=optimizer, scheduler=scheduler,\n");
    fprintf(f, "        ddp=DistributedDataParallelConfig(use_distributed_optimizer=%s, use_megatron_fsdp=%s,\n"
               "                                          data_parallel_sharding_strategy=\"%s\"),\n",
            py_bool(l->zero >= 1), py_bool(l->zero >= 2), l->zero >= 2 ? strategy : "no_shard");
    fprintf(f, "        dist=DistributedInitConfig(use_megatron_fsdp=%s),\n", py_bool(l->zero >= 2));
    fprintf(f, "        dataset=GPTDatasetConfig(random_seed=1234, seq_length=%lld, blend=None, split=\"9999,8,2\",\n"
               "                                 reset_attention_mask=False, reset_position_ids=False,\n"
               "                                 eod_mask_loss=False, dataloader_type=\"single\"),\n",
            (long long)pb->train.seq);
    fprintf(f, "        logger=LoggerConfig(log_interval=10),\n");
    fprintf(f, "        tokenizer=TokenizerConfig(tokenizer_type=\"NullTokenizer\", vocab_size=%lld),\n",
            (long long)pb->model.vocab);
    fprintf(f, "        checkpoint=CheckpointConfig(save_interval=500, ckpt_format=\"%s\"),\n",
            l->zero >= 2 ? "fsdp_dtensor" : "torch_dist");
    fprintf(f, "        rng=RNGConfig(seed=1234),\n");
    fprintf(f, "        mixed_precision=%s,\n", precision_name(pb->train.dtype, pb->train.fp8_recipe));
    /* combined 1F1B as priced: Bridge sets it on the model through its CommOverlapConfig, after the
     * mixed-precision recipe made the model bf16 (Megatron-Core asserts bf16 or fp16 with it) */
    if (pb->train.moe_combined_1f1b)
        fprintf(f, "        comm_overlap=CommOverlapConfig(tp_comm_overlap=False, overlap_moe_expert_parallel_comm=True),\n");
    fprintf(f, "    )\n");
}

typedef struct {
    const ts_problem *pb;
    const ts_layout *l;
    const ts_export_opts *o;
} bridge_args;

static ts_status write_bridge(FILE *f, const void *arg) {
    const bridge_args *a = arg;
    const ts_problem *pb = a->pb;
    const ts_layout *l = a->l;
    char *notes = NULL;
    /* The Megatron-LM notes say what the model and layout need beyond the recipe (the layout
     * string is the current form, whatever --megatron-version says). */
    ts_export_opts current = *a->o;
    current.version = TS_MEGATRON_CURRENT;
    TS_CHECK(ts_export_megatron(pb, l, &current, &notes));
    char *last = strrchr(notes, '#');
    if (last != NULL) {
        char *nl = strchr(last, '\n');
        if (nl) nl[1] = '\0';
    }
    fprintf(f, "# Megatron-Bridge recipe written by tessera export (megatron-bridge 0.3.1 API).\n");
    fprintf(f, "# Run: torchrun --nproc-per-node %d THIS_FILE (on each of %d nodes).\n",
            pb->gpus < pb->sys.gpus_per_node || pb->sys.gpus_per_node < 1 ? pb->gpus : pb->sys.gpus_per_node,
            pb->sys.gpus_per_node > 0 ? (pb->gpus + pb->sys.gpus_per_node - 1) / pb->sys.gpus_per_node : 1);
    fputs(notes, f);
    free(notes);
    fputs("import torch\nimport torch.nn.functional as F\n"
          "from megatron.core.distributed import DistributedDataParallelConfig\n"
          "from megatron.bridge.models.gpt_provider import GPTModelProvider\n"
          "from megatron.bridge.models.mla_provider import MLAModelProvider\n"
          "from megatron.bridge.training.config import (CheckpointConfig, ConfigContainer, DistributedInitConfig,\n"
          "                                             GPTDatasetConfig, LoggerConfig, OptimizerConfig, RNGConfig,\n"
          "                                             SchedulerConfig, TokenizerConfig, TrainingConfig)\n", f);
    if (pb->model.activation == TS_ACT_RELU2)
        fputs("from megatron.bridge.training.mlm_compat.activations import squared_relu\n", f);
    if (bridge_attn_backend(pb)) fputs("from megatron.core.transformer.enums import AttnBackend\n", f);
    if (pb->train.moe_combined_1f1b) fputs("from megatron.bridge.training.comm_overlap import CommOverlapConfig\n", f);
    fputs("\n\ndef tessera_pretrain_config() -> ConfigContainer:\n", f);
    fprintf(f, "    \"\"\"%s on %d x %s as planned by tessera.\"\"\"\n", pb->model.name, pb->gpus, pb->sys.name);
    bridge_model(f, pb, l, a->o);
    bridge_container(f, pb, l);
    fputs("\n\nif __name__ == \"__main__\":\n"
          "    from megatron.bridge.training.gpt_step import forward_step\n"
          "    from megatron.bridge.training.pretrain import pretrain\n\n"
          "    pretrain(tessera_pretrain_config(), forward_step)\n", f);
    return TS_OK;
}

ts_status ts_export_bridge(const ts_problem *pb, const ts_layout *l, const ts_export_opts *o, char **out) {
    bridge_args a = {pb, l, o};
    *out = NULL;
    TS_CHECK(ts_export_schedule_check(l, "Megatron-Bridge"));
    TS_CHECK(ts_export_stack_check("megatron-core", "Megatron-Bridge", l));
    return ts_export_to_string(out, "a Megatron-Bridge recipe", write_bridge, &a);
}
