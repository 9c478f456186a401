/* `tessera export` as users see it:
 *  - the ten Megatron-LM SC'21 Table 1 rows (validation/published/megatron-sc21-table1.json):
 *    planned with the published t, p, d and batch pinned (2021 software: cp=1, sp=0, zero=0,
 *    full recompute, unfused attention, 1F1B or interleaved), exported as Megatron-LM arguments
 *    that reproduce t, p, d = GPUs / (t·p) and the batch exactly, and as a DeepSpeed config that
 *    parses and keeps train_batch_size = micro-batch × accumulation × dp;
 *  - what a framework cannot say becomes a '#' line: ZB-H1, ZeRO-2/3 in Megatron, AutoTP with
 *    ZeRO-3 in DeepSpeed (left out of the config), uneven pipeline splits (given as
 *    --pipeline-model-parallel-layout), MoE and precision flags;
 *  - selective recompute without full recompute's method flags; the distributed optimizer at zero=1;
 *  - bad input exits 2 with one line; --help exits 0. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers.h"

/* `tessera plan ARGS -o dir/plan.json --top 1`; returns the plan's path (malloc'd). */
static char *plan_with(const char *dir, const char *const *args) {
    char *path = malloc(4096);
    cr_assert_not_null(path);
    snprintf(path, 4096, "%s/plan.json", dir);
    const char *argv[CLI_MAX_ARGS + 1];
    int n = 0;
    argv[n++] = "plan";
    for (int i = 0; args[i]; i++) argv[n++] = args[i];
    argv[n++] = "--top", argv[n++] = "1", argv[n++] = "-o", argv[n++] = path, argv[n] = NULL;
    cli_result r = run_argv(argv);
    cr_assert_eq(r.status, 0, "plan: exit %d, stderr: %s", r.status, r.err);
    cli_result_free(&r);
    return path;
}

/* The one line of Megatron flags (the first line not starting with '#'). */
static const char *flags_line(const char *text) {
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (*p != '#') return p;
    return NULL;
}

/* The value after `flag` in the flags line, or -1 when the flag is absent. */
static long flag_value(const char *line, const char *flag) {
    char pattern[96];
    snprintf(pattern, sizeof pattern, "%s ", flag);
    for (const char *p = strstr(line, pattern); p; p = strstr(p + 1, pattern))
        if (p == line || p[-1] == ' ') return strtol(p + strlen(pattern), NULL, 10);
    return -1;
}

static int has_flag(const char *line, const char *flag) {
    size_t n = strlen(flag);
    for (const char *p = strstr(line, flag); p; p = strstr(p + 1, flag))
        if ((p == line || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\n' || p[n] == '\0')) return 1;
    return 0;
}

static double row_num(const cJSON *row, const char *obj, const char *key) {
    return json_num(json_obj(row, obj, "row"), key, obj);
}

/* The DeepSpeed config's batch arithmetic for a layout of `dp` data-parallel ranks. */
static void check_deepspeed(const char *plan, int dp, int pp, int zero, const char *what) {
    cli_result r = test_export_plan(plan, "deepspeed");
    cJSON *ds = parse_json_output(&r, what);
    double batch = json_num(ds, "train_batch_size", what), micro = json_num(ds, "train_micro_batch_size_per_gpu", what);
    double gas = json_num(ds, "gradient_accumulation_steps", what);
    cr_expect_eq(batch, micro * gas * dp, "%s: train_batch_size %g != micro %g × accumulation %g × dp %d", what,
                 batch, micro, gas, dp);
    cr_expect_eq(json_num(json_obj(ds, "zero_optimization", what), "stage", what), zero, "%s: ZeRO stage", what);
    cr_expect(cJSON_IsBool(cJSON_GetObjectItem(json_obj(ds, "bf16", what), "enabled")), "%s: bf16.enabled", what);
    cr_expect(cJSON_IsBool(cJSON_GetObjectItem(json_obj(ds, "fp16", what), "enabled")), "%s: fp16.enabled", what);
    if (pp > 1) cr_expect_eq(json_num(json_obj(ds, "pipeline", what), "stages", what), pp, "%s: pipeline.stages", what);
    else cr_expect(cJSON_GetObjectItem(ds, "pipeline") == NULL, "%s: no pipeline section without pipelining", what);
    cr_expect(r.err_len > 0 && r.err[0] == '#', "%s: notes are '#' lines on stderr: %s", what, r.err);
    cJSON_Delete(ds);
    cli_result_free(&r);
}

Test(export, megatron_sc21_table1_rows, .timeout = 600) {
    char *path = test_data_path("validation/published/megatron-sc21-table1.json");
    char *text = read_file(path);
    cr_assert_not_null(text, "%s is missing", path);
    cJSON *rows = cJSON_Parse(text);
    cr_assert(cJSON_IsArray(rows), "%s is not a JSON array", path);
    int n = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, rows) {
        const char *id = json_str(row, "id", "row");
        if (strncmp(id, "megatron21-t1-", 14) != 0) continue;
        n++;
        int t = (int)row_num(row, "layout", "tp"), p = (int)row_num(row, "layout", "pp");
        int gpus = (int)row_num(row, "hardware", "count"), batch = (int)row_num(row, "training", "global_batch_seqs");
        int seq = (int)row_num(row, "model", "seq_len");
        int d = gpus / (t * p);
        cr_assert_eq(d * t * p, gpus, "%s: t·p does not divide the GPUs", id);
        char model[64], g[16], b[16], s[16], fix[128];
        snprintf(model, sizeof model, "megatron-gpt-%gb", row_num(row, "model", "params_b"));
        snprintf(g, sizeof g, "%d", gpus);
        snprintf(b, sizeof b, "%d", batch);
        snprintf(s, sizeof s, "%d", seq);
        snprintf(fix, sizeof fix, "tp=%d,pp=%d,dp=%d,cp=1,sp=0,zero=0,recompute=full", t, p, d);
        const char *const args[] = {"--model", model, "--system", "a100-80g-dgx", "--gpus", g, "--global-batch", b,
                                    "--seq", s, "--fix", fix, "--no-flash-attn", "--schedules", "1f1b,interleaved",
                                    NULL};
        char *dir = make_temp_dir();
        char *plan = plan_with(dir, args);
        cli_result r = test_export_plan(plan, "megatron");
        const char *line = flags_line(r.out);
        cr_assert_not_null(line, "%s: no flags line in:\n%s", id, r.out);
        const char *nl = strchr(line, '\n');
        cr_expect(nl != NULL && nl[1] == '\0', "%s: the flags are one line, the last:\n%s", id, r.out);
        long tp = flag_value(line, "--tensor-model-parallel-size"), pp = flag_value(line, "--pipeline-model-parallel-size");
        long cp = flag_value(line, "--context-parallel-size"), gb = flag_value(line, "--global-batch-size");
        long mbs = flag_value(line, "--micro-batch-size"), layers = flag_value(line, "--num-layers");
        cr_expect_eq(tp, t, "%s: --tensor-model-parallel-size %ld, published t=%d", id, tp, t);
        cr_expect_eq(pp, p, "%s: --pipeline-model-parallel-size %ld, published p=%d", id, pp, p);
        cr_expect_eq(cp, 1, "%s: --context-parallel-size %ld", id, cp);
        cr_expect_eq(gpus / (tp * pp * cp), d, "%s: d = GPUs/(t·p) = %ld, published d=%d", id, gpus / (tp * pp * cp), d);
        cr_expect_eq(gb, batch, "%s: --global-batch-size %ld, published %d", id, gb, batch);
        cr_expect_eq(flag_value(line, "--seq-length"), seq, "%s: --seq-length", id);
        cr_expect(mbs >= 1 && batch % (mbs * d) == 0, "%s: micro-batch %ld × dp %d does not divide %d", id, mbs, d, batch);
        long vls = flag_value(line, "--num-layers-per-virtual-pipeline-stage");
        if (vls > 0) cr_expect(layers % (p * vls) == 0, "%s: %ld layers per virtual stage of %ld", id, vls, layers);
        cr_expect(has_flag(line, "--recompute-granularity") && strstr(line, "--recompute-granularity full") &&
                      strstr(line, "--recompute-method uniform --recompute-num-layers 1"),
                  "%s: full recompute flags", id);
        cr_expect(!has_flag(line, "--sequence-parallel") && !has_flag(line, "--use-distributed-optimizer"),
                  "%s: sp=0, zero=0", id);
        cr_expect(has_flag(line, "--bf16") && strstr(line, "--attention-backend unfused"), "%s: bf16, unfused", id);
        cli_result_free(&r);
        check_deepspeed(plan, d, p, 0, id);
        free(plan);
        remove_dir(dir);
    }
    cr_expect_eq(n, 10, "Table 1 has ten rows, found %d", n);
    cJSON_Delete(rows);
    free(text);
    free(path);
}

/* Export of the planner's best under `fix` for a model on a system and GPU count. */
static cli_result export_fixed(const char *model, const char *gpus, const char *batch, const char *fix,
                               const char *dtype, const char *format, char **dir, char **plan) {
    const char *const args[] = {"--model", model, "--system", "h100-sxm-dgx", "--gpus", gpus, "--global-batch", batch,
                                "--fix", fix, "--dtype", dtype, NULL};
    *dir = make_temp_dir();
    *plan = plan_with(*dir, args);
    return test_export_plan(*plan, format);
}

Test(export, what_frameworks_cannot_say_is_said) {
    char *dir, *plan;
    /* ZeRO-3: Megatron's distributed optimizer is ZeRO-1; DeepSpeed stage 3. */
    cli_result r = export_fixed("llama2-7b", "8", "64", "tp=1,pp=1,zero=3", "bf16", "megatron", &dir, &plan);
    const char *line = flags_line(r.out);
    cr_expect(strstr(r.out, "# zero=3:") && strstr(line, "--data-parallel-sharding-strategy optim_grads_params"),
              "ZeRO-3 as Megatron-FSDP:\n%s", r.out);
    cr_expect(has_flag(line, "--use-megatron-fsdp") && strstr(line, "--ckpt-format fsdp_dtensor") &&
              !has_flag(line, "--use-distributed-optimizer"), "%s", line);
    cr_expect(strstr(r.out, "CUDA_DEVICE_MAX_CONNECTIONS unset") != NULL, "FSDP wants it unset:\n%s", r.out);
    cli_result_free(&r);
    check_deepspeed(plan, 8, 1, 3, "zero=3");
    free(plan);
    remove_dir(dir);
    /* ZB-H1 has no stock Megatron schedule (models/stacks/megatron-core.json): the Megatron
     * export refuses it, bad input naming the schedule, nothing on stdout; fp16. */
    const char *const zb[] = {"--model", "llama2-13b", "--system", "h100-sxm-dgx", "--gpus", "32", "--global-batch",
                              "64", "--fix", "pp=4,sched=zb-h1", "--dtype", "fp16", NULL};
    dir = make_temp_dir();
    plan = plan_with(dir, zb);
    r = run_cli("export", "--plan", plan, "--format", "megatron", NULL);
    cr_expect_eq(r.status, 2, "megatron export of zb-h1: %s", r.err);
    cr_expect(strstr(r.err, "megatron-core stack cannot run") && strstr(r.err, "sched=zb-h1"), "%s", r.err);
    cr_expect_eq(r.out[0], '\0', "%s", r.out);
    cli_result_free(&r);
    r = test_export_plan(plan, "deepspeed");
    cJSON *ds = parse_json_output(&r, "deepspeed fp16");
    cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(json_obj(ds, "fp16", "$"), "enabled")));
    cr_expect(cJSON_IsFalse(cJSON_GetObjectItem(json_obj(ds, "bf16", "$"), "enabled")));
    cr_expect(strstr(r.err, "# sched=zb-h1:") != NULL, "DeepSpeed runs its own 1F1B: %s", r.err);
    cJSON_Delete(ds);
    cli_result_free(&r);
    free(plan);
    remove_dir(dir);
    /* MoE: expert parallelism and the router's top-k; the experts over the whole TP group
     * (etp pinned to tp: unpinned, the search may split them apart, below). */
    r = export_fixed("mixtral-8x7b", "64", "1024", "tp=2,ep=4,etp=2", "bf16", "megatron", &dir, &plan);
    line = flags_line(r.out);
    cr_expect_eq(flag_value(line, "--expert-model-parallel-size"), 4);
    cr_expect_eq(flag_value(line, "--num-experts"), 8);
    cr_expect_eq(flag_value(line, "--moe-router-topk"), 2);
    cr_expect_eq(flag_value(line, "--num-query-groups"), 8);
    cr_expect_eq(flag_value(line, "--moe-ffn-hidden-size"), 14336);
    cr_expect(strstr(line, "--moe-token-dispatcher-type alltoall") != NULL, "the planner costs all-to-all: %s", line);
    if (flag_value(line, "--tensor-model-parallel-size") > 1)
        cr_expect_eq(flag_value(line, "--expert-tensor-parallel-size"), flag_value(line, "--tensor-model-parallel-size"),
                     "bias-free experts split over TP as planned: %s", line);
    cr_expect(has_flag(line, "--swiglu") && has_flag(line, "--disable-bias-linear") &&
              has_flag(line, "--untie-embeddings-and-output-weights") && strstr(line, "--normalization RMSNorm") &&
              strstr(line, "--position-embedding-type rope") && strstr(line, "--rotary-base 1000000"),
              "the architecture flags: %s", line);
    cli_result_free(&r);
    free(plan);
    remove_dir(dir);
    /* Experts apart from TP (etp=1, Megatron-Core --expert-tensor-parallel-size 1). */
    r = export_fixed("mixtral-8x7b", "64", "1024", "tp=2,sp=1,ep=8,etp=1", "bf16", "megatron", &dir, &plan);
    line = flags_line(r.out);
    cr_expect_eq(flag_value(line, "--tensor-model-parallel-size"), 2);
    cr_expect_eq(flag_value(line, "--expert-tensor-parallel-size"), 1, "etp as planned: %s", line);
    cli_result_free(&r);
    r = test_export_plan(plan, "megatron-bridge");
    cr_expect(strstr(r.out, "tensor_model_parallel_size=2") && strstr(r.out, "expert_tensor_parallel_size=1"),
              "Megatron-Bridge: etp as planned:\n%s", r.out);
    cli_result_free(&r);
    free(plan);
    remove_dir(dir);
    /* Interleaved with sequence parallelism: layers / (pp · vpp) per virtual stage. */
    r = export_fixed("llama2-70b", "64", "64", "tp=8,pp=4,vpp=5,mbs=1", "bf16", "megatron", &dir, &plan);
    line = flags_line(r.out);
    cr_expect_eq(flag_value(line, "--num-layers-per-virtual-pipeline-stage"), 80 / (4 * 5));
    cr_expect(has_flag(line, "--sequence-parallel"));
    cli_result_free(&r);
    free(plan);
    remove_dir(dir);
}

/* The attention output gate (AFMoE, Qwen3-Next): Megatron-Core's attention_output_gate widens
 * linear_qkv by it (core_v0.16.1 SelfAttention); Trinity's sandwich norms are said, not flagged. */
Test(export, attention_output_gate) {
    char *dir, *plan, *path = test_data_path("tests/data/hf/trinity-nano.json");
    cli_result r = export_fixed(path, "8", "64", "tp=1,pp=1,ep=8", "bf16", "megatron", &dir, &plan);
    const char *line = flags_line(r.out);
    cr_expect(has_flag(line, "--attention-output-gate") && has_flag(line, "--qk-layernorm"), "%s", line);
    cr_expect(strstr(r.out, "# 4 norms per layer") != NULL, "the sandwich norms are said:\n%s", r.out);
    cli_result_free(&r);
    r = test_export_plan(plan, "megatron-bridge");
    cr_expect(strstr(r.out, "attention_output_gate=True") != NULL, "Megatron-Bridge:\n%s", r.out);
    cli_result_free(&r);
    free(plan);
    remove_dir(dir);
    free(path);
    path = test_data_path("tests/data/models/gated-gqa-1b.json");
    r = export_fixed(path, "8", "64", "tp=2,pp=1", "bf16", "megatron", &dir, &plan);
    cr_expect(has_flag(flags_line(r.out), "--attention-output-gate"), "%s", r.out);
    cli_result_free(&r);
    free(plan);
    remove_dir(dir);
    free(path);
}

/* Megatron-LM (megatron/training/arguments.py): --recompute-method and --recompute-num-layers
 * belong to full recompute only ("recompute method is not yet supported for selective recomputing
 * granularity"); selective recomputes core attention (--recompute-modules' default). The
 * distributed optimizer shards the optimizer states over data-parallel ranks, which is ZeRO-1
 * itself: no comment then, unlike zero=2/3. */
Test(export, megatron_selective_recompute_and_distributed_optimizer) {
    char *dir, *plan;
    cli_result r = export_fixed("llama2-7b", "8", "64", "tp=1,pp=1,zero=1,recompute=selective", "bf16", "megatron",
                                &dir, &plan);
    const char *line = flags_line(r.out);
    cr_assert_not_null(line, "%s", r.out);
    cr_expect(strstr(line, "--recompute-granularity selective") != NULL, "%s", line);
    cr_expect(!has_flag(line, "--recompute-method") && !has_flag(line, "--recompute-num-layers"),
              "selective takes no method or layer count: %s", line);
    cr_expect(has_flag(line, "--use-distributed-optimizer"), "zero=1: %s", line);
    cr_expect(strstr(r.out, "# zero=") == NULL, "ZeRO-1 is what the distributed optimizer does:\n%s", r.out);
    cli_result_free(&r);
    free(plan);
    remove_dir(dir);
}

/* Recompute modules the plan priced are exported as Megatron-LM's --recompute-modules (nargs='*':
 * one word each, core_r0.12.0 on) and Megatron-Bridge's recompute_modules; the plan file keeps
 * them, so the export reads them back. */
Test(export, recompute_modules_as_planned) {
    char *dir = make_temp_dir();
    const char *const args[] = {"--model", "deepseek-v3", "--system", "h100-sxm-dgx", "--gpus", "1024",
                                "--global-batch", "8192", "--dtype", "fp8", "--mem-headroom", "0", "--fix",
                                "tp=2,pp=8,ep=64,etp=1,mbs=1,vpp=4,sched=interleaved,recompute=selective",
                                "--recompute-modules", "mlp,mla_up_proj", "--partition", "ilp", NULL};
    char *plan = plan_with(dir, args);
    static const char *const formats[][2] = {
        {"megatron", "--recompute-granularity selective --recompute-modules mla_up_proj mlp "},
        {"megatron-bridge", "recompute_modules=[\"mla_up_proj\", \"mlp\"]"}};
    for (int i = 0; i < 2; i++) {
        cli_result out = test_export_plan(plan, formats[i][0]);
        cr_expect(strstr(out.out, formats[i][1]) != NULL, "%s:\n%s", formats[i][0], out.out);
        cli_result_free(&out);
    }
    free(plan);
    remove_dir(dir);
    /* the default, core_attn, is Megatron-LM's own: no flag */
    cli_result r = export_fixed("llama2-7b", "8", "64", "tp=1,pp=1,recompute=selective", "bf16", "megatron", &dir, &plan);
    cr_expect(!has_flag(flags_line(r.out), "--recompute-modules"), "%s", r.out);
    cli_result_free(&r);
    free(plan);
    remove_dir(dir);
}

/* The FP8 recipe the plan priced is the one exported: Megatron-LM's --fp8-recipe of that name,
 * the hybrid format but for MXFP8 (E4M3 throughout), and Megatron-Bridge's mixed-precision recipe
 * of that scaling. */
Test(export, fp8_recipe_as_planned) {
    static const struct {
        const char *system, *recipe, *format, *bridge;
    } cases[] = {{"h100-sxm-dgx", "delayed", "hybrid", "bf16_with_fp8_delayed_scaling_mixed"},
                 {"h100-sxm-dgx", "tensorwise", "hybrid", "bf16_with_fp8_current_scaling_mixed"},
                 {"b200-dgx", "mxfp8", "e4m3", "bf16_with_mxfp8_mixed"},
                 {"h100-sxm-dgx", "blockwise", "hybrid", "bf16_with_fp8_subchannel_scaling_mixed"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *const args[] = {"--model", "llama3-8b", "--system", cases[i].system, "--gpus", "16", "--global-batch",
                                    "64", "--dtype", "fp8", "--fp8-recipe", cases[i].recipe, "--fix", "tp=2,pp=2", NULL};
        char *dir = make_temp_dir(), *plan = plan_with(dir, args), want[128];
        cli_result r = test_export_plan(plan, "megatron");
        snprintf(want, sizeof want, "--fp8-format %s --fp8-recipe %s", cases[i].format, cases[i].recipe);
        cr_expect(strstr(r.out, want) != NULL, "%s: want %s in\n%s", cases[i].recipe, want, r.out);
        cli_result_free(&r);
        r = test_export_plan(plan, "megatron-bridge");
        snprintf(want, sizeof want, "mixed_precision=\"%s\"", cases[i].bridge);
        cr_expect(strstr(r.out, want) != NULL, "%s: want %s in\n%s", cases[i].recipe, want, r.out);
        cli_result_free(&r);
        free(plan);
        remove_dir(dir);
    }
}

/* DeepSpeed 0.19.8 (deepspeed/runtime/engine.py): AutoTP trains with ZeRO stages 0-3; with a
 * pipeline the PipelineModule's topology sets tensor parallelism, so no autotp_size beside
 * "pipeline.stages"; context parallelism as Ulysses' "sequence_parallel_size". */
Test(export, deepspeed_autotp_pipeline_and_ulysses) {
    static const struct {
        const char *fix;
        int zero, autotp, sp_size;
        const char *note;
    } cases[] = {{"tp=2,pp=1,cp=1,zero=3", 3, 2, 0, "# tp=2: \"tensor_parallel.autotp_size\""},
                 {"tp=2,pp=2,cp=1,zero=1", 1, 0, 0, "# tp=2 with pp=2: no \"tensor_parallel.autotp_size\""},
                 {"tp=1,pp=1,cp=2,zero=1", 1, 0, 2, "# cp=2: as DeepSpeed-Ulysses"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *dir, *plan;
        cli_result r = export_fixed("llama2-7b", "8", "64", cases[i].fix, "bf16", "deepspeed", &dir, &plan);
        cJSON *ds = parse_json_output(&r, cases[i].fix);
        cr_expect_eq(json_num(json_obj(ds, "zero_optimization", "$"), "stage", "zero_optimization"), cases[i].zero,
                     "%s", cases[i].fix);
        const cJSON *tp = cJSON_GetObjectItem(ds, "tensor_parallel");
        if (cases[i].autotp) cr_expect_eq(json_num(tp, "autotp_size", "tensor_parallel"), cases[i].autotp);
        else cr_expect(tp == NULL, "%s: no \"tensor_parallel\"", cases[i].fix);
        const cJSON *sp = cJSON_GetObjectItem(ds, "sequence_parallel_size");
        if (cases[i].sp_size) cr_expect(cJSON_IsNumber(sp) && sp->valueint == cases[i].sp_size, "%s", cases[i].fix);
        else cr_expect(sp == NULL, "%s: no sequence_parallel_size", cases[i].fix);
        cr_expect(strstr(r.err, cases[i].note) != NULL, "%s: notes: %s", cases[i].fix, r.err);
        const cJSON *comment = cJSON_GetObjectItem(ds, "comment");
        cr_expect(cJSON_IsString(comment) && strstr(comment->valuestring, cases[i].note), "%s: comment", cases[i].fix);
        cJSON_Delete(ds);
        cli_result_free(&r);
        free(plan);
        remove_dir(dir);
    }
}

Test(export, uneven_pipeline_split_as_a_layout) {
    const char *const args[] = {"--model", "megatron-gpt-1.7b", "--system", "a100-80g-dgx", "--gpus", "5",
                                "--global-batch", "10", "--seq", "2048", "--fix", "tp=1,pp=5",
                                "--partition", "uniform", NULL}; /* auto moves a layer off the LM head's stage */
    char *dir = make_temp_dir();
    char *plan = plan_with(dir, args);
    cli_result r = test_export_plan(plan, "megatron");
    /* 24 layers on 5 stages: stages 1..4 take the extra layer (planner/stages.h). */
    cr_expect(strstr(r.out, "(layers per stage: 4,5,5,5,5)") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "--pipeline-model-parallel-layout 'Etttt|ttttt|ttttt|ttttt|tttttL' ") != NULL, "%s", r.out);
    cli_result_free(&r);
    free(plan);
    remove_dir(dir);
}

/* A plan whose layout carries an ILP split (issue 7): the layout string follows the plan's
 * "stages" layer counts, segment by segment, and the per-stage recompute is stated. */
Test(export, ilp_split_becomes_the_layout_string) {
    const char *const args[] = {"--model", "deepseek-v3", "--system", "h100-sxm-dgx", "--gpus", "1024",
                                "--global-batch", "1024", "--seq", "4096", "--fix", "tp=1,pp=16,ep=64,vpp=1",
                                "--partition", "ilp", NULL};
    char *dir = make_temp_dir();
    char *plan = plan_with(dir, args);
    char *text = read_file(plan);
    cr_assert_not_null(text);
    cJSON *root = cJSON_Parse(text);
    free(text);
    cr_assert_not_null(root);
    const cJSON *layout = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "layouts"), 0);
    const cJSON *stages = cJSON_GetObjectItemCaseSensitive(layout, "stages");
    cr_assert(cJSON_IsArray(stages), "the plan's best layout has no uneven \"stages\"");
    char want[512] = "--pipeline-model-parallel-layout 'E";
    int i = 0, n = cJSON_GetArraySize(stages);
    for (const cJSON *st = stages->child; st; st = st->next, i++) {
        int layers = (int)json_num(st, "layers", "$.layouts[0].stages[]");
        for (int k = 0; k < layers; k++) strcat(want, "t");
        strcat(want, i == n - 1 ? "mL' " : "|"); /* DeepSeek-V3's MTP layer sits with the loss */
    }
    cJSON_Delete(root);
    cli_result r = test_export_plan(plan, "megatron");
    const char *line = flags_line(r.out);
    cr_assert_not_null(line);
    cr_expect(strstr(line, want) != NULL, "want %s in %s", want, line);
    cr_expect(!has_flag(line, "--num-layers-per-virtual-pipeline-stage"));
    cr_expect(strstr(r.out, "# recompute per stage") != NULL, "%s", r.out);
    cli_result_free(&r);
    free(plan);
    remove_dir(dir);
}

Test(export, bad_input_exits_2_with_one_line) {
    char *dir = make_temp_dir();
    const char *const args[] = {"--model", "llama2-7b", "--system", "h100-sxm-dgx", "--gpus", "8", NULL};
    char *plan = plan_with(dir, args);
    const char *const cases[][8] = {
        {"export", "--plan", plan, NULL},
        {"export", "--format", "megatron", NULL},
        {"export", "--plan", plan, "--format", "nemo", NULL},
        {"export", "--plan", plan, "--format", "megatron", "--index", "2", NULL},
        {"export", "--plan", "/nonexistent.json", "--format", "deepspeed", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_result r = run_argv(cases[i]);
        cr_expect_eq(r.status, 2, "case %zu: exit %d, stderr: %s", i, r.status, r.err);
        cr_expect(one_line_error(r.err, "export"), "case %zu: not one line: %s", i, r.err);
        cr_expect_eq(r.out_len, 0, "case %zu: stdout: %s", i, r.out);
        cli_result_free(&r);
    }
    cli_result r = run_cli("export", "--help", NULL);
    cr_expect_eq(r.status, 0, "export --help: exit %d", r.status);
    cr_expect(starts_with(r.out, "usage: tessera export "), "export --help: %s", r.out);
    cr_expect_eq(r.err_len, 0, "export --help: stderr: %s", r.err);
    cli_result_free(&r);
    free(plan);
    remove_dir(dir);
}

/* DualPipe and ZB-V have no flag anywhere: every format refuses them with exit 2, one line naming
 * the schedule and no output. */
Test(export, dualpipe_and_zbv_are_refused) {
    static const char *const fixes[] = {"pp=4,sched=dualpipe", "pp=4,sched=zb-v"};
    static const char *const formats[] = {"megatron", "megatron-bridge", "deepspeed", "sbatch"};
    for (int k = 0; k < 2; k++) {
        const char *const args[] = {"--model", "llama2-13b", "--system", "h100-sxm-dgx", "--gpus", "32",
                                    "--global-batch", "64", "--fix", fixes[k], NULL};
        char *dir = make_temp_dir(), *plan = plan_with(dir, args);
        for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
            cli_result r = run_cli("export", "--plan", plan, "--format", formats[i], NULL);
            cr_expect_eq(r.status, 2, "%s %s: exit %d", fixes[k], formats[i], r.status);
            cr_expect_str_empty(r.out, "%s: %s", formats[i], r.out);
            cr_expect(strstr(r.err, strchr(fixes[k], 's')) != NULL && strchr(r.err, '\n') == r.err + strlen(r.err) - 1,
                      "%s: one line naming the schedule: %s", formats[i], r.err);
            cli_result_free(&r);
        }
        free(plan);
        remove_dir(dir);
    }
}
