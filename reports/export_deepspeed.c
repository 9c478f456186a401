/* DeepSpeed configs for a layout (see export.h).
 *
 * Checked against DeepSpeed 0.19.8 (PyPI sdist; deepspeedai/DeepSpeed):
 *  - deepspeed/runtime/config.py DeepSpeedConfig: train_batch_size must equal
 *    train_micro_batch_size_per_gpu × gradient_accumulation_steps × world_size, where world_size is
 *    the mpu's data-parallel size when an mpu is given (the pipeline engine passes its
 *    PipelineModule's grid; AutoTP training passes the model's mpu), else
 *    dist.get_world_size() / "sequence_parallel_size" (DeepSpeed-Ulysses, DeepSpeed's
 *    counterpart of context parallelism). So cp > 1 writes "sequence_parallel_size": cp.
 *  - deepspeed/__init__.py initialize: a PipelineModule takes its stages and model parallelism
 *    from the module (num_stages, its topology), so with pp > 1 "pipeline.stages" records pp and
 *    no "tensor_parallel.autotp_size" is written beside it (AutoTP would shard the pipeline
 *    module's layers a second time); "pipeline" reads "stages" and
 *    "activation_checkpoint_interval" (get_pipeline_config).
 *  - deepspeed/runtime/engine.py: AutoTP ("tensor_parallel": {"autotp_size": tp}) trains with ZeRO
 *    stages 0-3 ("AutoTP + ZeRO stage 3 is supported for both inference and training").
 *  - deepspeed/module_inject/auto_ep_config.py parse_autoep_config: AutoEP reads
 *    "expert_parallel": {"enabled": true, "autoep_size": ep}, replacing the model's MoE layers with
 *    expert-parallel ones (validate_autoep_config checks it against world, pp, tp and sp sizes).
 *  - zero_optimization.stage 0-3, bf16.enabled, fp16.enabled; an unknown top-level key such as
 *    "comment" is ignored by DeepSpeedConfig. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "reports/export.h"

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
    if (l->tp > 1 && l->pp == 1)
        fprintf(f, "# tp=%d: \"tensor_parallel.autotp_size\" is DeepSpeed's AutoTP training (Hugging Face-style "
                   "models); pass the model's mpu to deepspeed.initialize so the batch counts %d data-parallel "
                   "ranks\n", l->tp, l->dp);
    if (l->tp > 1 && l->pp > 1)
        fprintf(f, "# tp=%d with pp=%d: no \"tensor_parallel.autotp_size\" beside \"pipeline.stages\" (a PipelineModule "
                   "takes tensor parallelism from its own topology, e.g. Megatron-DeepSpeed's "
                   "--tensor-model-parallel-size %d)\n", l->tp, l->pp, l->tp);
    if (l->sp)
        fprintf(f, "# sp=1: Megatron-style sequence parallelism has no DeepSpeed config key (it belongs to the "
                   "model code, e.g. Megatron-DeepSpeed)\n");
    if (l->cp > 1)
        fprintf(f, "# cp=%d: as DeepSpeed-Ulysses sequence parallelism (\"sequence_parallel_size\": %d), which "
                   "exchanges heads by all-to-all where the plan priced ring attention\n", l->cp, l->cp);
    if (pb->model.moe.experts > 0)
        fprintf(f, "# ep=%d: AutoEP (\"expert_parallel.autoep_size\") replaces the model's MoE layers%s\n", l->ep,
                l->tp > 1 ? "; the plan also split experts over tp, AutoEP folds them over EP x TP" : "");
    if (l->recompute != TS_RECOMPUTE_NONE && l->pp == 1)
        fprintf(f, "# recompute=%s: activation checkpointing is applied in the model code "
                   "(deepspeed.checkpointing.checkpoint)\n", ts_recompute_names[l->recompute]);
    char mods[160];
    int own_modules = pb->train.recompute_modules != TS_RCM_DEFAULT;
    if (l->recompute == TS_RECOMPUTE_SELECTIVE && own_modules)
        fprintf(f, "# recompute=selective priced Megatron-Core's recompute modules %s; DeepSpeed has no such "
                   "option: checkpoint those modules in the model code\n",
                ts_recompute_modules_format(pb->train.recompute_modules, " ", "", mods, sizeof mods));
    if (l->recompute == TS_RECOMPUTE_SELECTIVE && l->pp > 1 && !own_modules)
        fprintf(f, "# recompute=selective: only attention is recomputed, in the model code; "
                   "\"activation_checkpoint_interval\" would recompute whole layers\n");
    if (pb->train.dtype == TS_DTYPE_FP8)
        fprintf(f, "# dtype=fp8: FP8 GEMMs come from Transformer Engine in the model code; the config trains in bf16\n");
}

static ts_status add_parallel(cJSON *root, const ts_problem *pb, const ts_layout *l) {
    ts_status res = TS_OK;
    cJSON *o;
    if (l->pp > 1) {
        TS_CJSON_GOTO(o = cJSON_AddObjectToObject(root, "pipeline"), res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "stages", l->pp), res, fail);
        if (l->recompute == TS_RECOMPUTE_FULL)
            TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "activation_checkpoint_interval", 1), res, fail);
    }
    if (l->tp > 1 && l->pp == 1) {
        TS_CJSON_GOTO(o = cJSON_AddObjectToObject(root, "tensor_parallel"), res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "autotp_size", l->tp), res, fail);
    }
    if (l->cp > 1) TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "sequence_parallel_size", l->cp), res, fail);
    if (pb->model.moe.experts > 0) {
        TS_CJSON_GOTO(o = cJSON_AddObjectToObject(root, "expert_parallel"), res, fail);
        TS_CJSON_GOTO(cJSON_AddBoolToObject(o, "enabled", 1), res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "autoep_size", l->ep), res, fail);
    }
fail:
    return res;
}

static ts_status notes_text(FILE *f, const void *arg) {
    const void *const *a = arg;
    deepspeed_notes(f, a[0], a[1]);
    return TS_OK;
}

ts_status ts_export_deepspeed(const ts_problem *pb, const ts_layout *l, cJSON **config, char **notes) {
    *config = NULL;
    *notes = NULL;
    const void *args[2] = {pb, l};
    TS_CHECK(ts_export_schedule_check(l, "DeepSpeed"));
    TS_CHECK(ts_export_to_string(notes, "DeepSpeed notes", notes_text, args));
    ts_status res = TS_OK;
    cJSON *root = cJSON_CreateObject(), *o;
    TS_CJSON_GOTO(root, res, fail);
    TS_CJSON_GOTO(cJSON_AddStringToObject(root, "comment", *notes), res, fail);
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
    TS_CHECK_GOTO(add_parallel(root, pb, l), res, fail);
    *config = root;
    return TS_OK;
fail:
    cJSON_Delete(root);
    free(*notes);
    *notes = NULL;
    return res;
}
