/* Megatron-LM pretrain_gpt.py arguments for a layout (see export.h).
 *
 * Every flag was checked against NVIDIA/Megatron-LM at d98e8a64 (Aug 2026):
 * megatron/training/arguments.py, which declares some flags itself (--group-query-attention,
 * --max-position-embeddings, --position-embedding-type {learned_absolute, rope, ...},
 * --rotary-base (int), --swiglu, --squared-relu, --untie-embeddings-and-output-weights,
 * --make-vocab-size-divisible-by, --window-size "(left,right)", --window-attn-skip-freq N ("one
 * full attention layer after N-1 sliding-window layers"), --num-experts, --moe-layer-freq (an int
 * or a Python list expression), --num-layers-per-virtual-pipeline-stage,
 * --pipeline-model-parallel-layout, --decoder-first/last-pipeline-num-layers,
 * --use-distributed-optimizer, --data-parallel-sharding-strategy {no_shard, optim, optim_grads,
 * optim_grads_params}) and generates the rest from dataclass fields
 * (megatron/training/argument_utils.py ArgumentGroupFactory: field x_y becomes --x-y unless its
 * argparse_meta names it): TransformerConfig (megatron/core/transformer/transformer_config.py:
 * num_layers, hidden_size, ffn_hidden_size, num_attention_heads, num_query_groups, kv_channels,
 * normalization {LayerNorm, RMSNorm}, add_bias_linear as --disable-bias-linear, add_qkv_bias,
 * qk_layernorm, softmax_type {vanilla, off-by-one, learnable}, attention_output_gate, hidden_dropout,
 * attention_dropout, mtp_num_layers, recompute_granularity/method/num_layers, moe_router_topk,
 * moe_ffn_hidden_size, moe_shared_expert_intermediate_size, moe_token_dispatcher_type {allgather,
 * alltoall, flex}, moe_router_score_function {softmax, sigmoid}, moe_router_enable_expert_bias,
 * moe_router_num_groups, moe_router_group_topk, moe_router_topk_scaling_factor,
 * moe_expert_capacity_factor, fp8 as --fp8-format {e4m3, hybrid}, fp8_recipe {tensorwise,
 * delayed, mxfp8, blockwise}; MLATransformerConfig: multi_latent_attention, q_lora_rank,
 * kv_lora_rank, qk_head_dim, qk_pos_emb_head_dim, v_head_dim), ModelParallelConfig
 * (tensor/pipeline/context/expert_model/expert_tensor parallel sizes, sequence_parallel, bf16,
 * fp16) and TokenizerConfig (vocab_size). validate_args requires CUDA_DEVICE_MAX_CONNECTIONS=1
 * with tp > 1 or cp > 1 before Blackwell, and Megatron-FSDP (--use-megatron-fsdp) requires it
 * unset and --ckpt-format fsdp_dtensor.
 *
 * The layout string: E embedding, t transformer layer, m MTP layer, L loss, stages split by '|'
 * in model order (docs/api-guide/pipeline_parallel_layout.md, whose DeepSeek-V3 example is
 * "Et*3|(tt|)*29,m|L"); the MTP layers sit with the loss on the last stage, where Tessera's
 * planner and step program put them. ZeRO-1/2/3 as --data-parallel-sharding-strategy optim /
 * optim_grads / optim_grads_params: the Megatron Core "Parallelism Strategies Guide". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/partition.h"
#include "program/schedule.h"
#include "reports/export.h"

typedef struct {
    FILE *f;
    int n; /* flags written */
} flags;

static void fl(flags *x, const char *name) { fprintf(x->f, "%s%s", x->n++ ? " " : "", name); }
static void fl_s(flags *x, const char *name, const char *v) {
    fl(x, name);
    fputc(' ', x->f);
    ts_export_shell_word(x->f, v);
}
static void fl_i(flags *x, const char *name, long long v) {
    fl(x, name);
    fprintf(x->f, " %lld", v);
}
static void fl_g(flags *x, const char *name, double v) {
    fl(x, name);
    fprintf(x->f, " %.10g", v);
}

/* Physical stage s's layers, its chunks added. */
static int physical_layers(const ts_model *m, const ts_layout *l, const ts_split *split, int s) {
    int vpp = split ? split->vpp : 1, n = 0;
    for (int c = 0; c < vpp; c++) n += ts_export_split_layers(m, l, split, ts_chunk_global(l, s, c));
    return n;
}

static void write_layout_string(FILE *f, const ts_model *m, const ts_layout *l, const ts_split *split) {
    int n = ts_export_virtual_stages(l, split);
    for (int g = 0; g < n; g++) {
        if (g) fputc('|', f);
        if (g == 0) fputc('E', f);
        for (int i = 0; i < ts_export_split_layers(m, l, split, g); i++) fputc('t', f);
        for (int i = 0; g == n - 1 && i < m->mtp_layers; i++) fputc('m', f);
        if (g == n - 1) fputc('L', f);
    }
}

/* The older form: only the first and the last stage may differ from the others, which must be
 * equal; interleaving with it needs --num-virtual-stages-per-pipeline-rank, which those releases
 * lack, so an uneven interleaved split is refused. */
static ts_status legacy_split(flags *x, const ts_model *m, const ts_layout *l, const ts_split *split) {
    int pp = l->pp, vpp = split ? split->vpp : 1;
    int first = physical_layers(m, l, split, 0), last = physical_layers(m, l, split, pp - 1);
    int mid = pp > 2 ? physical_layers(m, l, split, 1) : last, ok = vpp == 1;
    for (int s = 1; s < pp - 1; s++) ok &= physical_layers(m, l, split, s) == mid;
    if (!ok) {
        char text[512] = "";
        size_t n = 0;
        for (int s = 0; s < pp && n < sizeof text; s++)
            n += (size_t)snprintf(text + n, sizeof text - n, "%s%d", s ? "," : "", physical_layers(m, l, split, s));
        return TS_FAIL(TS_ERR_INPUT, "--megatron-version legacy: the split %s%s cannot be given with "
                       "--decoder-first/last-pipeline-num-layers (only the first and last stage may differ%s); "
                       "use --megatron-version current", text, vpp > 1 ? " (interleaved)" : "",
                       vpp > 1 ? ", without interleaving" : "");
    }
    if (first != mid) fl_i(x, "--decoder-first-pipeline-num-layers", first);
    if (last != mid && pp > 2) fl_i(x, "--decoder-last-pipeline-num-layers", last);
    return TS_OK;
}

static ts_status parallel_flags(flags *x, const ts_problem *pb, const ts_layout *l, const ts_export_opts *o) {
    const ts_model *m = &pb->model;
    fl_i(x, "--tensor-model-parallel-size", l->tp);
    fl_i(x, "--pipeline-model-parallel-size", l->pp);
    /* A layout string sets the virtual stages itself, so it replaces the per-chunk layer count. */
    if (ts_export_uneven(m, l, o->split)) {
        if (o->version == TS_MEGATRON_LEGACY) {
            TS_CHECK(legacy_split(x, m, l, o->split));
        } else {
            fl(x, "--pipeline-model-parallel-layout");
            fputc(' ', x->f);
            char *s = NULL;
            size_t len = 0;
            FILE *f = open_memstream(&s, &len);
            if (f == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory writing Megatron-LM arguments");
            write_layout_string(f, m, l, o->split);
            fclose(f);
            ts_export_shell_word(x->f, s ? s : "");
            free(s);
        }
    } else if (l->schedule == TS_SCHED_INTERLEAVED) {
        fl_i(x, "--num-layers-per-virtual-pipeline-stage", m->layers / (l->pp * l->vpp));
    }
    if (l->sp) fl(x, "--sequence-parallel");
    fl_i(x, "--context-parallel-size", l->cp);
    return TS_OK;
}

static void moe_flags(flags *x, const ts_problem *pb, const ts_layout *l) {
    const ts_model *m = &pb->model;
    const ts_moe *e = &m->moe;
    if (e->experts == 0) return;
    fl_i(x, "--num-experts", e->experts);
    fl_i(x, "--moe-router-topk", e->top_k);
    fl_i(x, "--moe-ffn-hidden-size", e->expert_ffn);
    if (e->shared_experts > 0)
        fl_i(x, "--moe-shared-expert-intermediate-size", (long long)e->shared_experts * e->shared_ffn);
    char freq[256];
    ts_export_moe_layer_freq(m, freq, sizeof freq);
    if (strcmp(freq, "1") != 0) fl_s(x, "--moe-layer-freq", freq);
    /* The planner costs all-to-all dispatch; Megatron's default is allgather. */
    fl_s(x, "--moe-token-dispatcher-type", "alltoall");
    /* the experts as the plan priced them: one grouped GEMM, or SequentialMLP (the default) */
    if (pb->train.moe_grouped_gemm) fl(x, "--moe-grouped-gemm");
    /* combined 1F1B as priced (program/schedule.h ts_sched_combined_1f1b; MCore v0.14) */
    if (pb->train.moe_combined_1f1b) fl(x, "--overlap-moe-expert-parallel-comm");
    if (pb->train.moe_shared_expert_overlap && e->shared_experts > 0) fl(x, "--moe-shared-expert-overlap");
    fl_i(x, "--expert-model-parallel-size", l->ep);
    /* The planner splits each expert over the layout's etp (expert_ffn / etp; etp = tp unless
     * pinned); Megatron-LM allows etp > 1 only without biases ("Bias in Moe is only supported when
     * ETP==1"). */
    if (l->tp > 1) fl_i(x, "--expert-tensor-parallel-size", m->linear_bias ? 1 : ts_layout_etp(l));
    if (e->router_sigmoid) fl_s(x, "--moe-router-score-function", "sigmoid");
    if (e->router_expert_bias) fl(x, "--moe-router-enable-expert-bias");
    if (e->router_groups > 0) {
        fl_i(x, "--moe-router-num-groups", e->router_groups);
        fl_i(x, "--moe-router-group-topk", e->router_group_topk);
    }
    if (e->router_scale > 0) fl_g(x, "--moe-router-topk-scaling-factor", e->router_scale);
    if (e->capacity_factor > 0) fl_g(x, "--moe-expert-capacity-factor", e->capacity_factor);
}

static void attention_flags(flags *x, const ts_model *m) {
    if (m->mla.kv_lora_rank > 0) {
        const ts_mla *a = &m->mla;
        fl(x, "--multi-latent-attention");
        if (a->q_lora_rank > 0) fl_i(x, "--q-lora-rank", a->q_lora_rank);
        fl_i(x, "--kv-lora-rank", a->kv_lora_rank);
        fl_i(x, "--qk-head-dim", a->qk_nope_dim);
        fl_i(x, "--qk-pos-emb-head-dim", a->qk_rope_dim);
        fl_i(x, "--v-head-dim", a->v_dim);
    } else {
        if (m->kv_heads != m->heads) {
            fl(x, "--group-query-attention");
            fl_i(x, "--num-query-groups", m->kv_heads);
        }
        if (m->hidden % m->heads != 0 || m->head_dim != m->hidden / m->heads) fl_i(x, "--kv-channels", m->head_dim);
    }
    /* Under MLA --qk-layernorm is the norms of the query and key-value latents, which every
     * DeepSeek-V2/V3 layer has (megatron/core/models/gpt/gpt_layer_specs.py: MLA's q_layernorm and
     * kv_layernorm exist only with qk_layernorm). */
    if (m->qk_norm == TS_QKNORM_HEAD || m->mla.kv_lora_rank > 0) fl(x, "--qk-layernorm");
    if (m->attn_sinks) fl_s(x, "--softmax-type", "learnable");
    if (m->attn_gate) fl(x, "--attention-output-gate");
    if (m->window.tokens > 0 && !m->window.chunked) {
        char w[64];
        snprintf(w, sizeof w, "(%lld,0)", (long long)m->window.tokens);
        fl_s(x, "--window-size", w);
        if (m->window.full_every > 0) fl_i(x, "--window-attn-skip-freq", m->window.full_every);
    }
}

static void model_flags(flags *x, const ts_problem *pb) {
    const ts_model *m = &pb->model;
    fl_i(x, "--num-layers", m->layers);
    fl_i(x, "--hidden-size", m->hidden);
    fl_i(x, "--ffn-hidden-size", m->ffn_hidden > 0 ? m->ffn_hidden : m->moe.expert_ffn);
    fl_i(x, "--num-attention-heads", m->heads);
    attention_flags(x, m);
    fl_i(x, "--seq-length", pb->train.seq);
    fl_i(x, "--max-position-embeddings", m->max_seq);
    if (m->position == TS_POS_ROPE) {
        fl_s(x, "--position-embedding-type", "rope");
        if (m->rope_theta > 0) fl_i(x, "--rotary-base", (long long)m->rope_theta);
    }
    if (m->activation == TS_ACT_SWIGLU) fl(x, "--swiglu");
    if (m->activation == TS_ACT_RELU2) fl(x, "--squared-relu");
    if (m->norm == TS_NORM_RMSNORM) fl_s(x, "--normalization", "RMSNorm");
    if (!m->tied_embeddings) fl(x, "--untie-embeddings-and-output-weights");
    if (!m->linear_bias) fl(x, "--disable-bias-linear");
    if (!m->linear_bias && m->qkv_bias) fl(x, "--add-qkv-bias");
    if (!m->dropout) {
        fl_i(x, "--attention-dropout", 0);
        fl_i(x, "--hidden-dropout", 0);
    }
    if (m->mtp_layers > 0) fl_i(x, "--mtp-num-layers", m->mtp_layers);
    /* The vocabulary exactly: no padding beyond a multiple of tp. */
    fl_i(x, "--vocab-size", m->vocab);
    fl_i(x, "--make-vocab-size-divisible-by", 1);
}

static void training_flags(flags *x, const ts_problem *pb, const ts_layout *l) {
    fl_i(x, "--micro-batch-size", l->mbs);
    fl_i(x, "--global-batch-size", pb->train.global_batch);
    if (!pb->train.flash_attention) fl_s(x, "--attention-backend", "unfused");
    else if (pb->train.attn_backend == TS_ATTN_FLASH) fl_s(x, "--attention-backend", "flash");
    /* the loss the plan priced (program/recipe.c); the flag exists since core_r0.8.0 */
    if (ts_train_ce_fused(&pb->train)) fl(x, "--cross-entropy-loss-fusion");
    if (l->recompute == TS_RECOMPUTE_FULL) {
        fl_s(x, "--recompute-granularity", "full");
        fl_s(x, "--recompute-method", "uniform");
        fl_i(x, "--recompute-num-layers", 1);
    } else if (l->recompute == TS_RECOMPUTE_SELECTIVE) {
        fl_s(x, "--recompute-granularity", "selective");
        /* the modules the plan priced, where they are not Megatron-Core's default (core_attn) */
        char mods[160];
        if (pb->train.recompute_modules != TS_RCM_DEFAULT) { /* nargs='*': one word each */
            fl(x, "--recompute-modules");
            fl(x, ts_recompute_modules_format(pb->train.recompute_modules, " ", "", mods, sizeof mods));
        }
    }
    if (l->zero == 1) fl(x, "--use-distributed-optimizer");
    if (l->zero >= 2) {
        fl(x, "--use-megatron-fsdp");
        fl_s(x, "--data-parallel-sharding-strategy", l->zero == 2 ? "optim_grads" : "optim_grads_params");
        fl_s(x, "--ckpt-format", "fsdp_dtensor");
    }
    switch (pb->train.dtype) {
    case TS_DTYPE_BF16: fl(x, "--bf16"); break;
    case TS_DTYPE_FP16: fl(x, "--fp16"); break;
    case TS_DTYPE_FP8:
        /* The scaling recipe the plan priced (program/recipe.c), Megatron-LM's --fp8-recipe names
         * being Tessera's; the hybrid format (E4M3 forward, E5M2 gradients) but for MXFP8, E4M3
         * throughout (Megatron-Bridge training/mixed_precision.py: bf16_with_mxfp8_mixed). */
        fl(x, "--bf16");
        fl_s(x, "--fp8-format", pb->train.fp8_recipe == TS_FP8_MXFP8 ? "e4m3" : "hybrid");
        fl_s(x, "--fp8-recipe", ts_fp8_recipe_names[pb->train.fp8_recipe]);
        break;
    case TS_DTYPE_FP32:
    case TS_DTYPE_COUNT: break;
    }
}

/* What the model has that Megatron-LM's GPT flags do not build, one '#' line each. */
static void model_notes(FILE *f, const ts_model *m, const ts_layout *l) {
    if (m->qk_norm == TS_QKNORM_FULL)
        fprintf(f, "# qk_norm=full (OLMo 2 normalises whole Q and K projections): Megatron-LM's --qk-layernorm is per "
                   "head, so it is left out and the built model lacks those %lld norm weights per layer\n",
                (long long)(m->heads + m->kv_heads) * m->head_dim);
    if (ts_model_norms_per_layer(m) != 2)
        fprintf(f, "# %d norms per layer (Gemma's sandwich norms: 4; GPT-J's parallel block: 1): Megatron-LM's GPT "
                   "layer has 2\n", ts_model_norms_per_layer(m));
    if (m->gelu_gate) fprintf(f, "# GeGLU MLP: Megatron-LM has no GELU-gated flag; --swiglu builds the same shape "
                                 "with a SiLU gate\n");
    if (m->attn_softcap > 0 || m->logit_softcap > 0)
        fprintf(f, "# soft-capping (scores %g, logits %g): no Megatron-LM GPT flag\n", m->attn_softcap, m->logit_softcap);
    if (m->embed_scaled) fprintf(f, "# embeddings scaled by sqrt(hidden): no Megatron-LM GPT flag\n");
    if (m->norm_affine != TS_NORM_AFFINE_FULL)
        fprintf(f, "# norms that learn %s (DBRX: no bias; OLMo: nothing): Megatron-LM's learn a weight and, for "
                   "LayerNorm, a bias\n", m->norm_affine == TS_NORM_AFFINE_WEIGHT ? "a weight only" : "nothing");
    if (m->window.tokens > 0 && m->window.chunked)
        fprintf(f, "# chunked attention (chunks of %lld tokens, full every %d layers): no Megatron-LM flag; the "
                   "built model attends to the whole sequence\n", (long long)m->window.tokens, m->window.full_every);
    if (m->router_bias) fprintf(f, "# the router's per-expert bias (gpt-oss): no Megatron-LM flag\n");
    if (m->position == TS_POS_ALIBI) fprintf(f, "# ALiBi positions: Megatron-LM's GPT has none\n");
    if (m->position_offset > 0 || m->embed_dim > 0 || m->embed_norm)
        fprintf(f, "# position offset / embedding projection / embedding norm (OPT, BLOOM): no Megatron-LM GPT flag\n");
    if (m->linear_bias && !m->qkv_bias)
        fprintf(f, "# biases on the output and MLP matrices but not on Q, K, V: Megatron-LM's bias flag covers all\n");
    if (m->moe.experts > 0 && l->tp > 1 && m->linear_bias)
        fprintf(f, "# --expert-tensor-parallel-size 1: Megatron-LM splits biased experts over EP only; the plan "
                   "split them over tp=%d as well\n", l->tp);
    if (m->vocab % l->tp != 0)
        fprintf(f, "# vocabulary %lld is padded to a multiple of tp=%d (%lld rows)\n", (long long)m->vocab, l->tp,
                (long long)((m->vocab + l->tp - 1) / l->tp * l->tp));
}

static void layout_notes(FILE *f, const ts_problem *pb, const ts_layout *l, const ts_export_opts *o) {
    const ts_model *m = &pb->model;
    const ts_split *split = o->split;
    if (l->zero >= 2)
        fprintf(f, "# zero=%d: Megatron-FSDP shards %s over the data-parallel ranks (--data-parallel-sharding-strategy "
                   "%s); CUDA_DEVICE_MAX_CONNECTIONS must be unset\n", l->zero,
                l->zero == 2 ? "optimizer states and gradients" : "optimizer states, gradients and parameters",
                l->zero == 2 ? "optim_grads" : "optim_grads_params");
    if (ts_export_uneven(m, l, split)) {
        int n = ts_export_virtual_stages(l, split);
        fprintf(f, "# uneven pipeline split (layers per %sstage:", split && split->vpp > 1 ? "virtual " : "");
        for (int g = 0; g < n; g++) fprintf(f, "%s%d", g ? "," : " ", ts_export_split_layers(m, l, split, g));
        fprintf(f, "): given with %s\n", o->version == TS_MEGATRON_LEGACY
                                             ? "--decoder-first/last-pipeline-num-layers"
                                             : "--pipeline-model-parallel-layout");
    }
    if (split) {
        fprintf(f, "# recompute per stage (Megatron-LM has no per-stage flag; set it per stage by hand):");
        for (int s = 0; s < split->pp; s++) fprintf(f, " %d:%s", s, ts_recompute_names[split->recompute[s]]);
        fprintf(f, "\n");
    }
    if (pb->train.dtype == TS_DTYPE_FP32)
        fprintf(f, "# dtype=fp32: Megatron-LM's default precision (neither --bf16 nor --fp16)\n");
}

static void megatron_comments(FILE *f, const ts_problem *pb, const ts_layout *l, const ts_export_opts *o) {
    char text[256];
    ts_layout_format(l, text, sizeof text);
    const ts_model *m = &pb->model;
    fprintf(f, "# tessera export: %s on %d x %s, layout %s\n", m->name, pb->gpus, pb->sys.name, text);
    fprintf(f, "# Megatron-LM (%s) pretrain_gpt.py arguments (add data, tokenizer, optimizer and learning-rate "
               "flags); data-parallel size = %d GPUs / (tp %d x pp %d x cp %d) = %d, %d micro-batches per step\n",
            ts_megatron_version_names[o->version], pb->gpus, l->tp, l->pp, l->cp, l->dp, l->microbatches);
    fprintf(f, "# parameters: %.0f total, %.0f active per token (%.0f in MTP modules)\n", pb->params.total,
            pb->params.active, pb->params.mtp);
    if (ts_export_needs_max_connections_1(l))
        fprintf(f, "# environment: CUDA_DEVICE_MAX_CONNECTIONS=1 (Megatron-LM requires it with tp > 1 or cp > 1)\n");
    else if (l->zero >= 2)
        fprintf(f, "# environment: CUDA_DEVICE_MAX_CONNECTIONS unset (Megatron-FSDP refuses 1)\n");
    layout_notes(f, pb, l, o);
    model_notes(f, m, l);
}

typedef struct {
    const ts_problem *pb;
    const ts_layout *l;
    const ts_export_opts *o;
} megatron_args;

static ts_status write_megatron(FILE *f, const void *arg) {
    const megatron_args *a = arg;
    flags x = {.f = f};
    megatron_comments(f, a->pb, a->l, a->o);
    TS_CHECK(parallel_flags(&x, a->pb, a->l, a->o));
    moe_flags(&x, a->pb, a->l);
    model_flags(&x, a->pb);
    training_flags(&x, a->pb, a->l);
    fputc('\n', f);
    return TS_OK;
}

ts_status ts_export_megatron(const ts_problem *pb, const ts_layout *l, const ts_export_opts *o, char **out) {
    megatron_args a = {pb, l, o};
    *out = NULL;
    TS_CHECK(ts_export_schedule_check(l, "Megatron-LM"));
    TS_CHECK(ts_export_stack_check("megatron-core", "Megatron-LM", l));
    return ts_export_to_string(out, "Megatron-LM arguments", write_megatron, &a);
}
