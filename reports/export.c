/* Megatron-LM arguments and DeepSpeed configs for a layout (see export.h).
 *
 * Every Megatron-LM flag below was checked against NVIDIA/Megatron-LM
 * megatron/training/arguments.py (commit 000c4ac2, 2025):
 *   _add_distributed_args: --tensor-model-parallel-size, --pipeline-model-parallel-size,
 *     --num-layers-per-virtual-pipeline-stage, --pipeline-model-parallel-layout ("E|(t|)*3,m|m||L":
 *     E embedding, t transformer layer, L loss, stages split by '|'), --use-distributed-optimizer,
 *     --use-megatron-fsdp, --data-parallel-sharding-strategy {no_shard, optim, optim_grads,
 *     optim_grads_params}, --context-parallel-size;
 *   _add_training_args: --micro-batch-size, --global-batch-size, --recompute-granularity
 *     {full, selective} (selective: --recompute-modules, default core_attn), --recompute-method
 *     {uniform, block}, --recompute-num-layers, --sequence-parallel (store_true);
 *   _add_mixed_precision_args: --fp16, --bf16; _add_transformer_engine_args: --fp8-format
 *     {e4m3, hybrid};
 *   _add_network_size_args: --num-layers, --hidden-size, --ffn-hidden-size,
 *     --num-attention-heads, --group-query-attention, --num-query-groups, --attention-backend
 *     (flash, fused, unfused, local, auto), --mtp-num-layers (multi-token prediction modules);
 *   _add_data_args: --seq-length; _add_moe_args: --expert-model-parallel-size, --num-experts,
 *     --moe-router-topk.
 * The layout string's `m` is an MTP layer (docs/api-guide/pipeline_parallel_layout.md, whose
 * example splits DeepSeek-V3's 61 layers and its MTP layer over PP16 × VPP2 as
 * "Et*3|(tt|)*29,m|L"); without a layout Megatron puts the MTP layers on the last stage.
 * The ZeRO-1/2/3 names of --data-parallel-sharding-strategy come from the Megatron Core
 * "Parallelism Strategies Guide" (docs.nvidia.com/megatron-core/developer-guide, user-guide/
 * parallelism-guide.html): optim = ZeRO-1, optim_grads = ZeRO-2, optim_grads_params = ZeRO-3.
 * Megatron-LM has no GPipe or zero-bubble (ZB-H1) schedule flag; both are said in comments.
 *
 * DeepSpeed keys were checked against the DeepSpeed configuration documentation
 * (deepspeed.ai/docs/config-json): train_batch_size, train_micro_batch_size_per_gpu,
 * gradient_accumulation_steps ("train_batch_size must be equal to train_micro_batch_size_per_gpu
 * * gradient_accumulation_steps * number of GPUs", the GPUs of data parallelism),
 * zero_optimization.stage (0-3), bf16.enabled, fp16.enabled; against deepspeedai/DeepSpeed
 * deepspeed/runtime/config.py get_pipeline_config, which reads a "pipeline" section with
 * "stages" (default "auto"), "partition", "seed_layers" and "activation_checkpoint_interval"
 * (the pipeline engine sets PipelineModule.activation_checkpoint_interval from it; the stage
 * count itself comes from PipelineModule(num_stages=...)); and against the AutoTP training
 * tutorial (deepspeed.ai/tutorials/autotp-training): "tensor_parallel": {"autotp_size": N},
 * DeepSpeed >= 0.16.4, ZeRO stages 0-2. */
#include "reports/export.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "planner/partition.h"

/* Layers of each pipeline stage as planner/stages.h splits them: stages 1..(L mod pp) take
 * one extra layer. */
static int stage_layers(int layers, int pp, int stage) {
    int base = layers / pp, extra = layers % pp;
    return base + (stage >= 1 && stage <= extra);
}

/* Layers of virtual stage g (chunk·pp + stage, model order): the plan's split, or stage_layers. */
static int split_layers(const ts_model *m, const ts_layout *l, const ts_split *split, int g) {
    return split ? split->layers[g] : stage_layers(m->layers, l->pp, g);
}

/* Megatron's --pipeline-model-parallel-layout: "Et..t|t..t|...|t..tmL", one segment per virtual
 * stage in model order; the MTP layers (`m`) sit with the loss on the last, where Tessera's
 * planner and step program put them. */
static void write_layout_string(FILE *f, const ts_model *m, const ts_layout *l, const ts_split *split) {
    int n = split ? split->pp * split->vpp : l->pp;
    for (int g = 0; g < n; g++) {
        if (g) fputc('|', f);
        if (g == 0) fputc('E', f);
        for (int i = 0; i < split_layers(m, l, split, g); i++) fputc('t', f);
        for (int i = 0; g == n - 1 && i < m->mtp_layers; i++) fputc('m', f);
        if (g == n - 1) fputc('L', f);
    }
}

static void megatron_comments(FILE *f, const ts_problem *pb, const ts_layout *l, const ts_split *split) {
    char text[256];
    ts_layout_format(l, text, sizeof text);
    const ts_model *m = &pb->model;
    fprintf(f, "# tessera export: %s on %d x %s, layout %s\n", m->name, pb->gpus, pb->sys.name, text);
    fprintf(f, "# Megatron-LM pretrain_gpt.py arguments (add data, tokenizer, optimizer and learning-rate flags); "
               "data-parallel size = %d GPUs / (tp %d x pp %d x cp %d) = %d, %d micro-batches per step\n",
            pb->gpus, l->tp, l->pp, l->cp, l->dp, l->microbatches);
    if (l->schedule == TS_SCHED_ZB_H1)
        fprintf(f, "# sched=zb-h1: stock Megatron-LM has no zero-bubble (ZB-H1, Qi et al. 2024) schedule flag; "
                   "without it Megatron runs 1F1B, with the larger bubble of sched=1f1b\n");
    if (l->schedule == TS_SCHED_GPIPE)
        fprintf(f, "# sched=gpipe: Megatron-LM has no GPipe schedule; it runs 1F1B, which has the same bubble "
                   "and holds fewer micro-batches' activations\n");
    if (l->zero >= 2)
        fprintf(f, "# zero=%d: Megatron-LM's --use-distributed-optimizer shards only the optimizer states "
                   "(ZeRO-1); for %s sharding use Megatron-FSDP (--use-megatron-fsdp "
                   "--data-parallel-sharding-strategy %s) or DeepSpeed (tessera export --format deepspeed)\n",
                l->zero, l->zero == 2 ? "gradient" : "gradient and parameter",
                l->zero == 2 ? "optim_grads" : "optim_grads_params");
    if (split || m->layers % l->pp != 0) {
        int n = split ? split->pp * split->vpp : l->pp;
        fprintf(f, "# uneven pipeline split (layers per %sstage:", split && split->vpp > 1 ? "virtual " : "");
        for (int g = 0; g < n; g++) fprintf(f, "%s%d", g ? "," : " ", split_layers(m, l, split, g));
        fprintf(f, "): given with --pipeline-model-parallel-layout\n");
    }
    if (split) {
        fprintf(f, "# recompute per stage (Megatron-LM has no per-stage flag; set it per stage by hand):");
        for (int s = 0; s < split->pp; s++) fprintf(f, " %d:%s", s, ts_recompute_names[split->recompute[s]]);
        fprintf(f, "\n");
    }
    if (pb->train.dtype == TS_DTYPE_FP32)
        fprintf(f, "# dtype=fp32: Megatron-LM's default precision (neither --bf16 nor --fp16)\n");
}

ts_status ts_export_megatron(const ts_problem *pb, const ts_layout *l, const ts_split *split, char **out) {
    *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(out, &len);
    if (f == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory writing Megatron-LM arguments");
    const ts_model *m = &pb->model;
    megatron_comments(f, pb, l, split);
    fprintf(f, "--tensor-model-parallel-size %d --pipeline-model-parallel-size %d", l->tp, l->pp);
    /* A layout string sets the virtual stages itself, so it replaces the per-chunk layer count. */
    if (split || m->layers % l->pp != 0) {
        fputs(" --pipeline-model-parallel-layout ", f);
        write_layout_string(f, m, l, split);
    } else if (l->schedule == TS_SCHED_INTERLEAVED) {
        fprintf(f, " --num-layers-per-virtual-pipeline-stage %d", m->layers / (l->pp * l->vpp));
    }
    if (l->sp) fputs(" --sequence-parallel", f);
    fprintf(f, " --context-parallel-size %d", l->cp);
    if (m->moe.experts > 0)
        fprintf(f, " --expert-model-parallel-size %d --num-experts %d --moe-router-topk %d", l->ep, m->moe.experts,
                m->moe.top_k);
    fprintf(f, " --micro-batch-size %d --global-batch-size %lld --seq-length %lld", l->mbs,
            (long long)pb->train.global_batch, (long long)pb->train.seq);
    fprintf(f, " --num-layers %d --hidden-size %lld --ffn-hidden-size %lld --num-attention-heads %d", m->layers,
            (long long)m->hidden, (long long)m->ffn_hidden, m->heads);
    if (m->mtp_layers > 0) fprintf(f, " --mtp-num-layers %d", m->mtp_layers);
    if (m->kv_heads != m->heads) fprintf(f, " --group-query-attention --num-query-groups %d", m->kv_heads);
    if (!pb->train.flash_attention) fputs(" --attention-backend unfused", f);
    if (l->recompute == TS_RECOMPUTE_FULL)
        fputs(" --recompute-granularity full --recompute-method uniform --recompute-num-layers 1", f);
    else if (l->recompute == TS_RECOMPUTE_SELECTIVE)
        fputs(" --recompute-granularity selective", f);
    if (l->zero >= 1) fputs(" --use-distributed-optimizer", f);
    switch (pb->train.dtype) {
    case TS_DTYPE_BF16: fputs(" --bf16", f); break;
    case TS_DTYPE_FP16: fputs(" --fp16", f); break;
    case TS_DTYPE_FP8: fputs(" --bf16 --fp8-format hybrid", f); break;
    case TS_DTYPE_FP32:
    case TS_DTYPE_COUNT: break;
    }
    fputc('\n', f);
    if (ferror(f) | (fclose(f) != 0)) {
        free(*out);
        *out = NULL;
        return TS_FAIL(TS_ERR_NOMEM, "out of memory writing Megatron-LM arguments");
    }
    return TS_OK;
}

/* DeepSpeed's AutoTP training combines with ZeRO stages 0-2 only (the AutoTP training tutorial,
 * above); with ZeRO-3 the config says nothing of tensor parallelism rather than a combination
 * DeepSpeed does not run, and a note says so. */
#define AUTOTP_MAX_ZERO 2

/* What the DeepSpeed config cannot say, as '#' lines. */
static void deepspeed_notes(FILE *f, const ts_problem *pb, const ts_layout *l) {
    char text[256];
    ts_layout_format(l, text, sizeof text);
    fprintf(f, "# tessera export: %s on %d x %s, layout %s; train_batch_size %lld = micro-batch %d x "
               "gradient_accumulation_steps %d x data-parallel %d\n",
            pb->model.name, pb->gpus, pb->sys.name, text, (long long)pb->train.global_batch, l->mbs,
            l->microbatches, l->dp);
    if (l->pp > 1)
        fprintf(f, "# pp=%d: build the model as deepspeed.pipe.PipelineModule(..., num_stages=%d); \"pipeline.stages\" "
                   "records it, PipelineModule sets it\n", l->pp, l->pp);
    if (l->pp > 1 && l->schedule != TS_SCHED_1F1B)
        fprintf(f, "# sched=%s: DeepSpeed's pipeline engine runs its own 1F1B schedule (TrainSchedule)\n",
                ts_schedule_names[l->schedule]);
    if (l->tp > 1 && l->zero <= AUTOTP_MAX_ZERO)
        fprintf(f, "# tp=%d: \"tensor_parallel.autotp_size\" is DeepSpeed's AutoTP training (DeepSpeed >= 0.16.4, "
                   "Hugging Face-style models, ZeRO stages 0-2); with a PipelineModule take tensor parallelism from "
                   "the model code (e.g. Megatron-DeepSpeed's --tensor-model-parallel-size %d)\n", l->tp, l->tp);
    if (l->tp > 1 && l->zero > AUTOTP_MAX_ZERO)
        fprintf(f, "# tp=%d with zero=%d: DeepSpeed's AutoTP training supports ZeRO stages 0-2 only, so the config "
                   "leaves \"tensor_parallel\" out; take tensor parallelism of %d from the model code (its "
                   "model-parallel unit passed as deepspeed.initialize(mpu=...)), or, if it fits, re-plan with "
                   "--fix zero=2 for \"tensor_parallel\": {\"autotp_size\": %d}\n", l->tp, l->zero, l->tp, l->tp);
    if (l->sp)
        fprintf(f, "# sp=1: Megatron-style sequence parallelism has no DeepSpeed config key (it belongs to the "
                   "model code, e.g. Megatron-DeepSpeed)\n");
    if (l->cp > 1)
        fprintf(f, "# cp=%d: context parallelism has no DeepSpeed config key (DeepSpeed-Ulysses is set up in the "
                   "model code)\n", l->cp);
    if (pb->model.moe.experts > 0)
        fprintf(f, "# ep=%d: expert parallelism is set in the model code (DeepSpeed-MoE's ep_size)\n", l->ep);
    if (l->recompute != TS_RECOMPUTE_NONE && l->pp == 1)
        fprintf(f, "# recompute=%s: activation checkpointing is applied in the model code "
                   "(deepspeed.checkpointing.checkpoint)\n", ts_recompute_names[l->recompute]);
    if (l->recompute == TS_RECOMPUTE_SELECTIVE && l->pp > 1)
        fprintf(f, "# recompute=selective: only attention is recomputed, in the model code; "
                   "\"activation_checkpoint_interval\" would recompute whole layers\n");
    if (pb->train.dtype == TS_DTYPE_FP8)
        fprintf(f, "# dtype=fp8: FP8 GEMMs come from Transformer Engine in the model code; the config trains in bf16\n");
}

ts_status ts_export_deepspeed(const ts_problem *pb, const ts_layout *l, cJSON **config, char **notes) {
    *config = NULL;
    *notes = NULL;
    ts_status res = TS_OK;
    cJSON *root = cJSON_CreateObject(), *o;
    TS_CJSON_GOTO(root, res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "train_batch_size", (double)pb->train.global_batch), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "train_micro_batch_size_per_gpu", l->mbs), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "gradient_accumulation_steps", l->microbatches), res, fail);
    TS_CJSON_GOTO(o = cJSON_AddObjectToObject(root, "zero_optimization"), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "stage", l->zero), res, fail);
    int bf16 = pb->train.dtype == TS_DTYPE_BF16 || pb->train.dtype == TS_DTYPE_FP8;
    TS_CJSON_GOTO(o = cJSON_AddObjectToObject(root, "bf16"), res, fail);
    TS_CJSON_GOTO(cJSON_AddBoolToObject(o, "enabled", bf16), res, fail);
    TS_CJSON_GOTO(o = cJSON_AddObjectToObject(root, "fp16"), res, fail);
    TS_CJSON_GOTO(cJSON_AddBoolToObject(o, "enabled", pb->train.dtype == TS_DTYPE_FP16), res, fail);
    if (l->pp > 1) {
        TS_CJSON_GOTO(o = cJSON_AddObjectToObject(root, "pipeline"), res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "stages", l->pp), res, fail);
        if (l->recompute == TS_RECOMPUTE_FULL)
            TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "activation_checkpoint_interval", 1), res, fail);
    }
    if (l->tp > 1 && l->zero <= AUTOTP_MAX_ZERO) {
        TS_CJSON_GOTO(o = cJSON_AddObjectToObject(root, "tensor_parallel"), res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "autotp_size", l->tp), res, fail);
    }
    size_t len = 0;
    FILE *f = open_memstream(notes, &len);
    if (f == NULL) {
        res = TS_FAIL(TS_ERR_NOMEM, "out of memory writing DeepSpeed notes");
        goto fail;
    }
    deepspeed_notes(f, pb, l);
    if (ferror(f) | (fclose(f) != 0)) {
        res = TS_FAIL(TS_ERR_NOMEM, "out of memory writing DeepSpeed notes");
        goto fail;
    }
    *config = root;
    return TS_OK;
fail:
    cJSON_Delete(root);
    free(*notes);
    *notes = NULL;
    return res;
}
