/* Hugging Face import of today's model families (issue 19): real config.json files in
 * tests/data/hf/ (sources in tests/data/hf/SOURCES.md) import, plan on 64 H100s (Kimi K2, 1T
 * parameters, and DeepSeek-V3.2 on 512), count the parameters their publishers quote, keep what changes the cost
 * (sliding windows, Q/K norms, sinks, sandwich norms), fall back on architectures[] when
 * model_type is unknown, and refuse Mamba hybrids with one line. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/hf.h"
#include "models/model.h"
#include "tests/helpers.h"

static ts_model load(const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "tests/data/hf/%s.json", name);
    char *path = test_data_path(rel);
    ts_model m;
    ts_status st = ts_model_load(path, &m);
    cr_assert_eq(st, TS_OK, "%s: %s", name, ts_error_message());
    free(path);
    return m;
}

/* Published totals (SOURCES.md cites each); `exact` when the publisher gives every digit. */
static const struct {
    const char *file;
    double total, tolerance;
} published[] = {
    {"qwen3-8b", 8190735360, 0},              /* model card: 8.2B; 6.95B non-embedding */
    {"qwen3-30b-a3b", 30.5e9, 0.005},          /* model card: 30.5B total, 3.3B activated */
    {"gemma2-9b", 9241705984, 0},             /* Gemma 2 report, Table 1 rounds it to 9.24B */
    {"gemma3-1b", 999885952, 0},              /* Gemma 3 1B: 999,885,952 */
    {"phi3-mini-4k", 3821079552, 0},          /* Phi-3-mini: 3.8B (3,821,079,552) */
    {"gpt-oss-120b", 116.83e9, 0.0005},        /* gpt-oss model card, Table 1: 116.83B */
    {"gpt-oss-20b", 20.91e9, 0.0005},          /* gpt-oss model card, Table 1: 20.91B */
    {"deepseek-v2-lite", 15.7e9, 0.005},       /* DeepSeek-V2-Lite: 15.7B total */
    {"kimi-k2", 1.0e12, 0.05},                 /* Kimi K2: 1T total, 32B activated */
    {"olmo2-7b", 7.30e9, 0.005},               /* OLMo 2 7B: 7.3B */
    {"starcoder2-7b", 7.17e9, 0.005},          /* StarCoder2-7B: 7.17B */
    {"gpt-j-6b", 6053381344, 0.0005}, /* model card: 6,053,381,344; transformers GPTJForCausalLM's modules add to
                                        * 6.0509B, 0.04% less (not explained here) */
    {"llama4-scout", 109e9, 0.02},             /* Llama 4 Scout: 109B total with its vision encoder */
    {"glm-4.5-air", 106e9, 0.01},              /* GLM-4.5-Air: 106B total, 12B active (model card), the MTP
                                                * module left out as DeepSeek-V3's 671B does */
    {"olmoe-1b-7b", 6.9e9, 0.01},              /* OLMoE paper (Muennighoff et al. 2024): 6.9B total, 1.3B active */
    {"minitron-8b", 8e9, 0.0625},              /* Minitron-8B-Base model card: "8B", rounded to whole billions */
    {"granite-3.1-8b-base", 8.1e9, 0.0124},    /* model card: 8.1B, cut to 0.1B (8.1 stands for 8.1 to 8.2) */
    {"granite-3.1-3b-a800m-base", 3.3e9, 0.0152}, /* model card: 3.3B total (0.1B rounding), 800M active */
    {"snowflake-arctic-instruct", 480e9, 0.0105}, /* Snowflake's Arctic announcement: 480B (10B dense + 128 x
                                                   * 3.66B experts), 17B active; two digits */
    {"phi3.5-moe", 41.9e9, 0.0012},            /* Phi-3.5-MoE model card: 41.9B total, 6.6B active */
    {"dbrx-instruct", 132e9, 0.0038},          /* DBRX model card: 132B total (whole billions), 36B active */
    {"olmo-7b", 6.89e9, 0.00073},              /* OLMo-7B-hf: 6.89B (0.01B rounding); 6,888,095,744 below */
    {"gemma-7b", 8537680896, 0},               /* Google's KerasHub preset gemma_7b_en: 8,537,680,896 */
    {"phi-2", 2779683840, 0.00002},            /* Hub safetensors count: 2,779,683,840; the LM head's bias
                                                * (51,200, 1.8e-5) is not counted */
    {"falcon-7b", 7e9, 0.072},                 /* model card: 7B, whole billions (the modules: 6.92B, exact
                                                * in hf_a_families_keep_their_shape; the Hub's 7.22B counts
                                                * the tied head twice, stored beside the embedding) */
    {"command-r-v01", 35e9, 0.015},            /* model card: 35 billion, whole billions */
    {"stablelm-2-1_6b", 1644417024, 0.0001},   /* model card: 1,644,417,024; StableLmForCausalLM's modules add
                                                * to 98,304 (6e-5) more, not explained here */
    {"gemma-2b", 2506172416, 0},               /* KerasHub preset gemma_2b_en: 2,506,172,416 (multi-query) */
    {"stablelm-3b-4e1t", 2795443200, 0},       /* model card: 2,795,443,200 */
    {"command-r7b", 8.03e9, 0.0007},           /* Hub safetensors count: 8.03B (to 10M); card: "7 billion" */
    {"ernie-4.5-0.3b", 0.36e9, 0.014},         /* ERNIE-4.5-0.3B model card: 0.36B (0.01B rounding) */
    {"ernie-4.5-21b-a3b", 21e9, 0.0476},       /* ERNIE-4.5-21B-A3B model card: 21B total (whole billions, cut), 3B
                                                * active */
    {"hunyuan-7b", 7e9, 0.075},                /* Hunyuan-7B: "7B", a size class; the modules add to 7.50B */
    {"hunyuan-a13b", 80e9, 0.00625},           /* Hunyuan-A13B model card: 80B total (whole billions), 13B active */
    {"smollm3-3b", 3.08e9, 0.0017},            /* Hub safetensors count: 3.08B (to 10M); card: "3B" */
    {"deepseek-moe-16b", 16.4e9, 0.0031},      /* DeepSeekMoE (Dai et al. 2024): 16.4B total, 2.8B activated */
    {"minicpm-2b", 2.7e9, 0.0186},             /* MiniCPM-2B model card: 2.7B with embeddings (0.1B rounding), 2.4B
                                                * without */
    {"seed-oss-36b", 36e9, 0.014},             /* Seed-OSS-36B model card: 36B (whole billions) */
    {"starcoder", 15.5e9, 0.0033},             /* StarCoder paper (Li et al. 2023): 15.5B (0.1B rounding) */
    {"gpt-neo-1.3b", 1.3e9, 0.0385},           /* model card: 1.3B (0.1B rounding) */
    {"codegen-2b-mono", 2.7e9, 0.037},         /* CodeGen paper (Nijkamp et al. 2022) and cards: 2.7B, cut to 0.1B
                                                * (2.7 stands for 2.7 to 2.8; the modules add to 2.78B) */
    {"mpt-30b", 29.95e9, 0.00034},             /* MPT-30B model card: n_parameters 29.95B, cut to 0.01B */
    {"internlm2.5-7b", 7e9, 0.143},            /* model card: "7 billion", the size class (7 to 8B); the modules add
                                                * to 7.74B, exact in hf_c_families_keep_their_shape */
    {"glm-4-9b-hf", 9e9, 0.056},               /* GLM-4-9B model card: 9B, whole billions (the modules: 9.40B) */
    {"glm-4-9b-0414", 9e9, 0.056},             /* GLM-4-9B-0414 model card: 9B, whole billions */
    {"santacoder", 1.1e9, 0.0455},             /* SantaCoder paper (Allal et al. 2023) and card: 1.1B (0.1B rounding) */
    {"chatglm3-6b", 6e9, 0.041},               /* ChatGLM3-6B model card: 6B, whole billions (the modules: 6.24B) */
    {"chatglm-6b", 6.2e9, 0.0081},             /* ChatGLM-6B README: 6.2B (62亿, 0.1B rounding) */
    {"glm-4-9b-chat", 9e9, 0.056},             /* GLM-4-9B-Chat model card: 9B, whole billions (the modules: 9.40B) */
    {"baichuan2-7b", 7e9, 0.073},              /* Baichuan 2 report (Yang et al. 2023): 7B, the size class (the
                                                * modules: 7.51B) */
    {"baichuan2-13b", 13e9, 0.07},             /* Baichuan 2 report: 13B, the size class (the modules: 13.90B) */
    {"qwen-7b", 7.72e9, 0.0007},               /* Hub safetensors count: 7.72B (to 10M); card: "7B" */
    {"exaone-3.5-7.8b", 7.8e9, 0.0064},        /* EXAONE 3.5 model card: 7.8B (0.1B rounding), 6.98B without
                                                * embeddings (checked below) */
    {"exaone-4.0-32b", 32e9, 0.0156},          /* EXAONE 4.0 model card: 32B (whole billions), 30.95B without
                                                * embeddings (checked below) */
    {"minimax-m2", 230e9, 0.006},              /* MiniMax-M2 model card: 230B total, 10B active; the modules add to
                                                * 228.69B (0.57% under, not explained here) */
    {"ling-lite-1.5", 16.8e9, 0.003},          /* Ling-lite-1.5 model card: 16.8B total, 2.75B activated */
    {"deepseek-v3.2-exp", 671e9, 0.0015},      /* DeepSeek-V3's 671B (report) with the indexer's 0.85B on top; the
                                                * Hub's 685B adds the MTP module */
    {"mimo-7b-base", 7e9, 0.143},              /* MiMo-7B: "7B", the size class (7 to 8B); the MTP module apart */
    {"dots.llm1.base", 142e9, 0.0055},         /* dots.llm1 report: 142B total, 14B activated; the modules add to
                                                * 142.77B (0.55% over, not explained here) */
    {"afm-4.5b", 4.5e9, 0.027},                /* AFM-4.5B model card: 4.5B; the modules add to 4.62B */
    {"apertus-8b", 8e9, 0.0625},               /* Apertus-8B: "8B", whole billions; the modules add to 8.05B */
    {"ling-mini-2.0", 16e9, 0.017},            /* Ling-mini-2.0 model card: 16B total (whole billions; the modules
                                                * 16.26B), 1.4B activated */
    {"olmo-3-1025-7b", 7e9, 0.0715},           /* Olmo 3 7B: "7B", whole billions; the modules add to 7.30B */
    {"ministral-8b-instruct-2410", 8019808256, 0}, /* Ministral-8B model card: 8,019,808,256 */
    {"internlm-7b", 7e9, 0.0715},              /* InternLM-7B: "7B", whole billions; the modules add to 7.32B */
    {"helium-1-preview-2b", 2e9, 0.25},        /* Helium-1 preview: "2B", whole billions; the modules 2.17B */
    {"ministral-3-3b-text", 3.4e9, 0.015},     /* Ministral 3 3B: a 3.4B language model (Megatron-Bridge's
                                                * Ministral 3 page; 0.1B rounding), 0.4B vision encoder apart */
    {"glm-5", 744e9, 0.0007},                  /* GLM-5 report (arXiv:2602.15763) Table 1: 744B total, 40B
                                                * activated (0.5B rounding); MTP apart, as DeepSeek's 671B */
    {"solar-open-100b", 102.6e9, 0.0006},      /* Solar-Open-100B model card: 102.6B total, 12B active (0.1B
                                                * rounding; the modules 102.65B) */
    {"trinity-mini", 26e9, 0.005},             /* Arcee Trinity Large Technical Report (2026), abstract: 26B total, 3B active
                                                * (whole billions; the modules 26.12B) */
    {"trinity-nano", 6e9, 0.021},              /* the same report: 6B total, 1B active (the modules 6.12B) */
    {"cwm", 32e9, 0.019},                      /* CWM report (arXiv:2510.02387): a 32-billion-parameter model, whole billions
                                                * (the modules 32.58B) */
    {"vaultgemma-1b", 1038741120, 0},          /* the Hub's safetensors count of google/vaultgemma-1b ("1.04B
                                                * params"); equals the modules */
    {"jais-2-8b", 8e9, 0.012},                 /* Jais 2: "8B and 70B parameters" (transformers' model doc, whole
                                                * billions; the modules 8.09B) */
    {"nanochat-d20", 560988160, 0},            /* nanochat d20: 560,988,160 (karpathy/nanochat's d20 walkthrough, as
                                                * model cards of the run quote it) */
    {"bitnet-b1.58-2b-4t-bf16", 2412820480, 0.0001}, /* the checkpoint's tensors, 2,412,820,480 (a public listing;
                                                * model card "~2 Billion"); ffn_sub_norm (8.6e-5) not counted */
    {"glm-4.7-flash", 30e9, 0.017},            /* GLM-4.7-Flash model card: a 30B-A3B MoE (whole billions; the
                                                * modules 29.94B, MTP apart) */
    {"k-exaone-236b-a23b", 236571150336, 0},   /* K-EXAONE: the official BF16 GGUF's tensor inventory, 237,099,669,632,
                                                * less its MTP module (528,513,280, not built by transformers) and
                                                * the routers' correction-bias buffers (6,016); model card 236B
                                                * total, 23B active */
};

Test(models_hf, families_match_published_totals) {
    for (size_t i = 0; i < sizeof published / sizeof published[0]; i++) {
        ts_model m = load(published[i].file);
        ts_param_count pc;
        ts_model_params(&m, &pc);
        double rel = fabs(pc.total - published[i].total) / published[i].total;
        cr_expect(rel <= published[i].tolerance, "%s: %.0f parameters, published %.0f (%.3g%% off)", published[i].file,
                  pc.total, published[i].total, 100 * rel);
    }
}

Test(models_hf, every_family_imports_and_plans, .timeout = 300) {
    for (size_t i = 0; i < sizeof published / sizeof published[0]; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "tests/data/hf/%s.json", published[i].file);
        char *path = test_data_path(rel);
        int big = strcmp(published[i].file, "kimi-k2") == 0 || strcmp(published[i].file, "deepseek-v3.2-exp") == 0 ||
                  strcmp(published[i].file, "glm-5") == 0 || strcmp(published[i].file, "snowflake-arctic-instruct") == 0;
        const char *gpus = big ? "512" : "64";
        cli_result r = run_cli("plan", "--model", path, "--system", "h100-sxm-dgx", "--gpus", gpus, "--top", "1", NULL);
        cr_expect_eq(r.status, 0, "%s: exit %d: %s", published[i].file, r.status, r.err);
        cr_expect(strstr(r.out, "# parameters: ") != NULL, "%s: no parameters line:\n%s", published[i].file, r.out);
        cli_result_free(&r);
        free(path);
    }
}

Test(models_hf, what_changes_the_cost_is_kept) {
    ts_model g2 = load("gemma2-9b");
    cr_expect(g2.window.tokens == 4096 && g2.window.full_every == 2 && !g2.window.chunked);
    cr_expect(ts_model_layer_window(&g2, 0) == 4096 && ts_model_layer_window(&g2, 1) == 0, "layer 0 local, 1 global");
    cr_expect(g2.attn_softcap == 50 && g2.logit_softcap == 30 && g2.norms_per_layer == 4 && g2.tied_embeddings &&
              g2.embed_scaled && g2.gelu_gate && g2.head_dim == 256);
    ts_model g3 = load("gemma3-1b");
    cr_expect(g3.window.tokens == 512 && g3.window.full_every == 6 && g3.qk_norm == TS_QKNORM_HEAD);
    cr_expect(ts_model_layer_window(&g3, 4) == 512 && ts_model_layer_window(&g3, 5) == 0);
    ts_model oss = load("gpt-oss-120b");
    cr_expect(oss.attn_sinks && oss.router_bias && oss.qkv_bias && oss.linear_bias && oss.window.tokens == 128 &&
              oss.window.full_every == 2 && oss.moe.experts == 128 && oss.moe.top_k == 4);
    ts_model q3 = load("qwen3-30b-a3b");
    cr_expect(q3.qk_norm == TS_QKNORM_HEAD && q3.moe.experts == 128 && q3.moe.expert_ffn == 768 && q3.window.tokens == 0);
    cr_expect_eq(load("olmo2-7b").qk_norm, TS_QKNORM_FULL);
    ts_model l4 = load("llama4-scout");
    cr_expect(l4.window.chunked && l4.window.tokens == 8192 && l4.window.full_every == 4 && l4.moe.shared_experts == 1 &&
              l4.ffn_hidden == 16384 && l4.moe.expert_ffn == 8192);
    ts_model k2 = load("kimi-k2");
    cr_expect(k2.mla.kv_lora_rank == 512 && k2.moe.experts == 384 && k2.moe.router_sigmoid && k2.moe.router_expert_bias &&
              k2.moe.first_dense == 1);
    ts_model glm = load("glm-4.5-air");
    cr_expect(glm.moe.experts == 128 && glm.moe.top_k == 8 && glm.moe.expert_ffn == 1408 && glm.moe.shared_experts == 1 &&
              glm.moe.shared_ffn == 1408 && glm.moe.first_dense == 1 && glm.moe.every == 1 && glm.moe.router_sigmoid &&
              glm.moe.router_expert_bias && glm.mtp_layers == 1 && glm.qkv_bias && !glm.linear_bias &&
              glm.head_dim == 128 && glm.kv_heads == 8 && glm.mla.kv_lora_rank == 0 && !glm.tied_embeddings,
              "GLM-4.5-Air: DeepSeek-V3's experts, router and MTP without MLA");
    ts_model olmoe = load("olmoe-1b-7b");
    cr_expect(olmoe.moe.experts == 64 && olmoe.moe.top_k == 8 && olmoe.moe.expert_ffn == 1024 && olmoe.moe.every == 1 &&
              olmoe.moe.first_dense == 0 && olmoe.moe.shared_experts == 0 && olmoe.qk_norm == TS_QKNORM_FULL &&
              !olmoe.tied_embeddings, "OLMoE: OLMo 2's attention, every layer MoE");
    ts_model v2 = load("deepseek-v2-lite");
    cr_expect(v2.mla.q_lora_rank == 0 && v2.moe.shared_experts == 2 && !v2.moe.router_sigmoid);
    cr_expect_eq(load("gpt-j-6b").norms_per_layer, 1);
}

/* A model_type Tessera does not know, with a known architecture, imports as that architecture. */
Test(models_hf, architectures_fallback) {
    char *path = test_data_path("tests/data/hf/qwen3-8b.json");
    char *text = read_file(path);
    cJSON *root = cJSON_Parse(text);
    cJSON_ReplaceItemInObject(root, "model_type", cJSON_CreateString("qwen3-custom"));
    ts_model a, b;
    cr_assert_eq(ts_model_from_json("custom.json", root, &a), TS_OK, "%s", ts_error_message());
    b = load("qwen3-8b");
    ts_param_count pa, pb;
    ts_model_params(&a, &pa);
    ts_model_params(&b, &pb);
    cr_expect_eq(pa.total, pb.total);
    cJSON_DeleteItemFromObject(root, "architectures");
    cr_expect_eq(ts_model_from_json("custom.json", root, &a), TS_ERR_INPUT, "no known type nor architecture");
    cJSON_Delete(root);
    free(text);
    free(path);
}

/* A boolean written null ("tie_word_embeddings": null, as mlx-community's Gemma 3 configs and
 * Rostlab's ProstT5 ship it) reads as absent: the class's default, so the count is the fixture's
 * (Gemma 2 tied by default, Llama untied). A boolean of another type is still refused. */
Test(models_hf, null_booleans_read_as_absent) {
    const char *fixtures[] = {"gemma2-9b", "llama2-7b"};
    for (int i = 0; i < 2; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "tests/data/hf/%s.json", fixtures[i]);
        char *path = test_data_path(rel);
        char *text = read_file(path);
        cJSON *root = cJSON_Parse(text);
        cJSON_DeleteItemFromObject(root, "tie_word_embeddings");
        cJSON_DeleteItemFromObject(root, "attention_bias");
        cJSON_AddNullToObject(root, "tie_word_embeddings");
        cJSON_AddNullToObject(root, "attention_bias");
        ts_model a, b = load(fixtures[i]);
        cr_assert_eq(ts_model_from_json("nulls.json", root, &a), TS_OK, "%s", ts_error_message());
        ts_param_count pa, pb;
        ts_model_params(&a, &pa);
        ts_model_params(&b, &pb);
        cr_expect_eq(pa.total, pb.total, "%s: %lld vs %lld", fixtures[i], (long long)pa.total, (long long)pb.total);
        cr_expect_eq(a.tied_embeddings, b.tied_embeddings, "%s", fixtures[i]);
        cr_expect_eq(a.tied_embeddings, i == 0, "%s", fixtures[i]);
        cJSON_ReplaceItemInObject(root, "tie_word_embeddings", cJSON_CreateString("true"));
        cr_expect_eq(ts_model_from_json("nulls.json", root, &a), TS_ERR_INPUT);
        cr_expect(strstr(ts_error_message(), "nulls.json: $.tie_word_embeddings: expected true or false") != NULL, "%s",
                  ts_error_message());
        cJSON_Delete(root);
        free(text);
        free(path);
    }
}

Test(models_hf, mamba_hybrids_are_refused_with_one_line) {
    char *path = test_data_path("tests/data/hf/nemotron-h-8b.json");
    cli_result r = run_cli("plan", "--model", path, "--system", "h100-sxm-dgx", "--gpus", "64", NULL);
    cr_expect_eq(r.status, 2, "exit %d: %s", r.status, r.err);
    cr_expect(one_line_error(r.err, "plan") && strstr(r.err, "Mamba"), "%s", r.err);
    cli_result_free(&r);
    free(path);
}

/* --- errors name the file's keys (issue 22) ---------------------------------------------------- */

/* Every fixture, in turn with one of these keys (where its language model has it: the root, or
 * text_config or llm_config for a wrapper) set to a value no rule allows, is refused naming that key
 * under its own path; never Tessera's field. */
static const struct {
    const char *key;
    double value;
} breaks[] = {
    {"hidden_size", 0}, {"n_embd", 0}, {"num_attention_heads", 0}, {"n_head", 0},
    {"num_key_value_heads", -1}, {"intermediate_size", -5}, {"rope_theta", -1},
    {"num_experts_per_tok", 100000}, {"n_routed_experts", -1}, {"head_dim", 1e6},
    {"qk_rope_head_dim", -1}, {"vocab_size", 0},
};

static void expect_key_named(const char *file, cJSON *root, const char *prefix, const char *key) {
    ts_model m;
    ts_error_clear();
    cr_expect_eq(ts_model_from_json(file, root, &m), TS_ERR_INPUT, "%s: %s%s accepted", file, prefix, key);
    char want[160];
    snprintf(want, sizeof want, ": $.%s%s:", prefix, key);
    cr_expect(strstr(ts_error_message(), want) != NULL, "%s: %s%s broken, got: %s", file, prefix, key,
              ts_error_message());
}

Test(models_hf, errors_name_the_files_keys) {
    char names[8192];
    char *dir = test_data_path("tests/data/hf");
    int n = list_dir(dir, names, sizeof names), tried = 0;
    cr_assert(n > 10, "tests/data/hf: %d files", n);
    for (char *save, *name = strtok_r(names, " ", &save); name; name = strtok_r(NULL, " ", &save)) {
        if (strstr(name, ".json") == NULL || strstr(name, "nemotron")) continue; /* refused whole */
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        char *text = read_file(path);
        for (size_t b = 0; b < sizeof breaks / sizeof breaks[0]; b++) {
            cJSON *root = cJSON_Parse(text);
            cJSON *obj = cJSON_GetObjectItemCaseSensitive(root, "text_config");
            const char *prefix = "text_config.";
            if (!cJSON_IsObject(obj)) obj = cJSON_GetObjectItemCaseSensitive(root, "llm_config"), prefix = "llm_config.";
            if (!cJSON_IsObject(obj)) obj = root, prefix = "";
            if (cJSON_GetObjectItemCaseSensitive(obj, breaks[b].key) != NULL) {
                cJSON_ReplaceItemInObject(obj, breaks[b].key, cJSON_CreateNumber(breaks[b].value));
                expect_key_named(name, root, prefix, breaks[b].key);
                tried++;
            }
            cJSON_Delete(root);
        }
        free(text);
    }
    cr_expect(tried > 100, "%d broken keys tried", tried);
    free(dir);
}

/* The cross-field rules ts_model_validate checks after reading name the keys too: DeepSeek-V3's
 * first dense layers rounded up to moe_layer_freq leave no MoE layer. */
Test(models_hf, cross_field_rules_name_the_files_keys) {
    char *path = test_data_path("tests/data/hf/deepseek-v3.json");
    char *text = read_file(path);
    cJSON *root = cJSON_Parse(text);
    cJSON_ReplaceItemInObject(root, "first_k_dense_replace", cJSON_CreateNumber(1));
    cJSON_ReplaceItemInObject(root, "moe_layer_freq", cJSON_CreateNumber(61));
    ts_model m;
    cr_expect_eq(ts_model_from_json("v3.json", root, &m), TS_ERR_INPUT);
    cr_expect_str_eq(ts_error_message(), "v3.json: $.first_k_dense_replace: expected an integer in [0, 60] so that "
                     "some of the 61 layers are MoE, got 61");
    cJSON_Delete(root);
    free(text);
    free(path);
}

/* A field not recorded keeps Tessera's name; a recorded one is replaced, not added twice. */
Test(models_hf, field_names_table) {
    ts_field_names n;
    ts_field_names_init(&n);
    cr_expect_str_eq(ts_field_name(&n, "moe.top_k"), "moe.top_k");
    cr_expect_str_eq(ts_field_name(NULL, "kv_heads"), "kv_heads");
    ts_field_names_set(&n, "kv_heads", "num_key_value_heads");
    ts_field_names_set(&n, "kv_heads", "text_config.num_key_value_heads");
    cr_expect_eq(n.count, 1);
    cr_expect_str_eq(ts_field_name(&n, "kv_heads"), "text_config.num_key_value_heads");
    ts_model m = load("mixtral-8x7b");
    m.moe.top_k = 9;
    cr_expect_eq(ts_model_validate("t", &m), TS_ERR_INPUT);
    cr_expect_str_eq(ts_error_message(), "t: $.moe.top_k: expected an integer in [1, 8] (experts), got 9");
    ts_field_names_set(&n, "moe.top_k", "num_experts_per_tok");
    ts_field_names_set(&n, "moe.experts", "num_local_experts");
    ts_error_clear();
    cr_expect_eq(ts_model_validate_named("t", &m, &n), TS_ERR_INPUT);
    cr_expect_str_eq(ts_error_message(), "t: $.num_experts_per_tok: expected an integer in [1, 8] "
                     "(num_local_experts), got 9");
}

/* Nemotron, Granite (MoE), Phi-3.5-MoE, DBRX and OLMo keep what their modelling code builds. */
Test(models_hf, more_families_keep_their_modules) {
    ts_model nemo = load("minitron-8b");
    cr_expect(nemo.activation == TS_ACT_RELU2 && nemo.norm == TS_NORM_LAYERNORM && nemo.head_dim == 128 &&
              nemo.heads == 48 && nemo.kv_heads == 8 && !nemo.tied_embeddings && !nemo.qkv_bias && !nemo.linear_bias,
              "Minitron-8B: squared-ReLU 2-matrix MLP, LayerNorm1P (weight and bias), head_dim 128 given");
    ts_model g8 = load("granite-3.1-8b-base");
    cr_expect(g8.activation == TS_ACT_SWIGLU && g8.norm == TS_NORM_RMSNORM && g8.kv_heads == 8 && g8.tied_embeddings &&
              g8.dropout && g8.rope_theta == 1e7, "Granite 3.1 8B: Llama's shape, attention dropout 0.1");
    ts_model g3 = load("granite-3.1-3b-a800m-base");
    ts_param_count pc;
    ts_model_params(&g3, &pc);
    cr_expect(g3.moe.experts == 40 && g3.moe.top_k == 8 && g3.moe.expert_ffn == 512 && g3.moe.every == 1 &&
              g3.moe.shared_experts == 0 && g3.tied_embeddings, "Granite 3.1 3B-A800M: 40 experts of 512, top 8");
    /* the card's 800M active leaves the (tied) embedding out */
    cr_expect(fabs(pc.active - pc.embedding - 0.8e9) <= 0.05e9, "%.0f active without the embedding",
              pc.active - pc.embedding);
    ts_model phi = load("phi3.5-moe");
    ts_model_params(&phi, &pc);
    cr_expect(phi.norm == TS_NORM_LAYERNORM && phi.qkv_bias && !phi.linear_bias && phi.moe.experts == 16 &&
              phi.moe.top_k == 2 && phi.moe.expert_ffn == 6400 && phi.window.tokens == 131072 && !phi.tied_embeddings,
              "Phi-3.5-MoE: LayerNorm, Q/K/V biases, 16 experts of 6400, top 2");
    cr_expect(fabs(pc.active - 6.6e9) <= 0.05e9, "Phi-3.5-MoE: %.0f active, card 6.6B", pc.active);
    ts_model dbrx = load("dbrx-instruct");
    ts_model_params(&dbrx, &pc);
    cr_expect(dbrx.hidden == 6144 && dbrx.heads == 48 && dbrx.kv_heads == 8 && dbrx.head_dim == 128 &&
              dbrx.rope_theta == 5e5 && dbrx.moe.experts == 16 && dbrx.moe.top_k == 4 && dbrx.moe.expert_ffn == 10752 &&
              dbrx.activation == TS_ACT_SWIGLU && !dbrx.qkv_bias && !dbrx.tied_embeddings,
              "DBRX: attn_config and ffn_config read");
    cr_expect(fabs(pc.active - 36e9) <= 0.5e9, "DBRX: %.0f active, card 36B", pc.active);
    /* transformers DbrxForCausalLM's modules: wte and lm_head V*h; per layer Wqkv h*(h + 2*kv*d), out_proj
     * h*h, router h*E, E experts' w1, v1, w2 3*f*h, norm_1 and norm_2 weights h each; norm_f h */
    double h = 6144, V = 100352, f = 10752, E = 16, L = 40;
    cr_expect_eq(pc.total, 2 * V * h + L * (h * (h + 2 * 8 * 128) + h * h + h * E + E * 3 * f * h + 2 * h) + h,
                 "DBRX: %.0f, LayerNorms without bias", pc.total);
    cr_expect_eq(dbrx.norm_affine, TS_NORM_AFFINE_WEIGHT);
    ts_model olmo = load("olmo-7b");
    ts_model_params(&olmo, &pc);
    /* OlmoForCausalLM: embed_tokens and lm_head V*h; per layer q, k, v, o h*h, gate, up, down h*f; the
     * OlmoLayerNorms learn nothing */
    h = 4096, V = 50304, f = 11008, L = 32;
    cr_expect_eq(pc.total, 2 * V * h + L * (4 * h * h + 3 * h * f), "OLMo-7B: %.0f, non-parametric norms", pc.total);
    cr_expect(olmo.norm == TS_NORM_LAYERNORM && olmo.norm_affine == TS_NORM_AFFINE_NONE && !olmo.qkv_bias &&
              olmo.activation == TS_ACT_SWIGLU && !olmo.tied_embeddings, "OLMo-7B: non-parametric LayerNorm");
    /* the field survives Tessera's own JSON */
    ts_model models[] = {dbrx, olmo};
    for (size_t i = 0; i < 2; i++) {
        cJSON *json = ts_model_to_json(&models[i]);
        ts_model back;
        cr_assert_eq(ts_model_from_json("round-trip", json, &back), TS_OK, "%s", ts_error_message());
        cr_expect_eq(back.norm_affine, models[i].norm_affine, "%s", models[i].name);
        cr_expect_eq(memcmp(&back, &models[i], sizeof back), 0, "%s round-trips", models[i].name);
        cJSON_Delete(json);
    }
}

/* DBRX's nested objects: a key a child leaves out takes DbrxAttentionConfig's / DbrxFFNConfig's
 * default, and an error names the key under its child's path. */
Test(models_hf, dbrx_nested_configs) {
    char *path = test_data_path("tests/data/hf/dbrx-instruct.json");
    char *text = read_file(path);
    cJSON *root = cJSON_Parse(text);
    cJSON *ffn = cJSON_GetObjectItemCaseSensitive(root, "ffn_config");
    cJSON_DeleteItemFromObject(ffn, "moe_top_k");
    cJSON_DeleteItemFromObject(root, "attn_config");
    ts_model m;
    cr_assert_eq(ts_model_from_json("dbrx.json", root, &m), TS_OK, "%s", ts_error_message());
    cr_expect(m.moe.top_k == 1 && m.kv_heads == 1 && m.rope_theta == 0, "defaults: top 1, one KV head, no rope_theta");
    cJSON_ReplaceItemInObject(ffn, "ffn_hidden_size", cJSON_CreateNumber(0));
    ts_error_clear();
    cr_expect_eq(ts_model_from_json("dbrx.json", root, &m), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "dbrx.json: $.ffn_config.ffn_hidden_size: expected an integer in [1, ") != NULL,
              "%s", ts_error_message());
    cJSON_ReplaceItemInObject(root, "ffn_config", cJSON_CreateString("none"));
    ts_error_clear();
    cr_expect_eq(ts_model_from_json("dbrx.json", root, &m), TS_ERR_INPUT);
    cr_expect_str_eq(ts_error_message(), "dbrx.json: $.ffn_config: expected an object, got a string");
    cJSON_Delete(root);
    free(text);
    free(path);
}

/* Vision-language wrappers: the language model is read, from text_config (LLaVA, Gemma 3, the newer
 * Qwen2.5-VL saves), llm_config (InternVL) or from the root (the Hub's Qwen2.5-VL files), with transformers' class defaults
 * for the keys a diff-saved text_config leaves out; the vision tower is named as not modelled. */
Test(models_hf, vision_language_wrappers_read_their_language_model) {
    static const struct {
        const char *file;
        double total, tolerance;
    } lm[] = {
        /* Llama 2 7B's 6,738,415,616 (Touvron et al. 2023) with 64 more vocabulary rows in the
         * embedding and the untied head: 2·64·4096 */
        {"llava-1.5-7b", 6738415616.0 + 2.0 * 64 * 4096, 0},
        /* Gemma 3 report, Table 1, 4B: 675M embedding + 3,209M non-embedding parameters */
        {"gemma-3-4b", 3884e6, 0.002},
        /* Qwen2.5-VL's language model is Qwen2.5-7B (Qwen2.5-VL report §2.1): 7.61B (model card) */
        {"qwen2.5-vl-7b", 7.61e9, 0.002},
        /* InternVL3-1B's language model: Qwen2.5-0.5B's 0.36B non-embedding parameters (model card, two
         * digits: 1.4% of them) with an untied embedding and head of 151,674 rows */
        {"internvl3-1b", 0.36e9 + 2.0 * 151674 * 896, 0.01},
        /* Qwen3-VL-30B-A3B's language model has Qwen3-30B-A3B's shape: 30.5B (that model's card) */
        {"qwen3-vl-30b-a3b", 30.5e9, 0.005},
        /* Mistral Small 3.1's language model, Mistral-Small-24B: "24B" (model card; 23.5-24.5B) */
        {"mistral-small-3.1-24b", 24e9, 0.021},
        /* PaliGemma 3B's language model is Gemma 2B (PaliGemma report, Beyer et al. 2024, §3.1): 2,506,172,416
         * (KerasHub gemma_2b_en) with 1,216 more vocabulary rows (257,216) in the tied embedding: 1216·2048 */
        {"paligemma-3b-pt-224", 2506172416.0 + 1216.0 * 2048, 0},
        /* LLaVA-NeXT Mistral 7B's language model, Mistral-7B-Instruct-v0.2: 7,241,732,096 (Mistral 7B) with
         * 64 more vocabulary rows in the embedding and the untied head: 2·64·4096 */
        {"llava-v1.6-mistral-7b", 7241732096.0 + 2.0 * 64 * 4096, 0},
        /* Phi-3.5-vision's language model is Phi-3-mini's decoder (model card: "4.2B" with the CLIP encoder):
         * 3,821,079,552 */
        {"phi3.5-vision", 3821079552.0, 0},
        /* GLM-4.1V-9B-Thinking's language model is GLM-4-9B-0414's (GLM-4.1V report §2): 9B, whole billions */
        {"glm-4.1v-9b-thinking", 9e9, 0.056},
        /* PaliGemma 2 3B's language model is Gemma 2 2B (PaliGemma 2 report, Steiner et al. 2024): google/gemma-2-2b's
         * 2,614,341,888 (the Hub's safetensors count) with 1,216 more rows in the tied embedding: 1216·2304 */
        {"paligemma2-3b-pt-224", 2614341888.0 + 1216.0 * 2304, 0},
        /* Idefics3-8B's language model is Llama 3.1 8B: 8,030,261,248 (Llama 3 report) with 3 more vocabulary rows
         * in the embedding and the untied head: 2·3·4096 */
        {"idefics3-8b-llama3", 8030261248.0 + 2.0 * 3 * 4096, 0},
        /* GLM-4.5V's language model is GLM-4.5-Air's: 106B total (model card, whole billions) */
        {"glm-4.5v", 106e9, 0.01},
        /* Kimi-VL-A3B's MoE language model (Moonlight's shape): 16B total, 2.8B activated (Kimi-VL report §1;
         * whole billions) */
        {"kimi-vl-a3b", 16e9, 0.031},
    };
    for (size_t i = 0; i < sizeof lm / sizeof lm[0]; i++) {
        ts_model m = load(lm[i].file);
        ts_param_count pc;
        ts_model_params(&m, &pc);
        cr_expect(fabs(pc.total - lm[i].total) <= lm[i].tolerance * lm[i].total, "%s: %.0f parameters, expected %.0f",
                  lm[i].file, pc.total, lm[i].total);
        cr_expect(strstr(m.source, "the vision tower is not modelled") != NULL, "%s: %s", lm[i].file, m.source);
    }
    /* LLaVA 1.5's text_config holds six keys: LlamaConfig's defaults give the rest */
    ts_model llava = load("llava-1.5-7b");
    cr_expect(llava.hidden == 4096 && llava.layers == 32 && llava.heads == 32 && llava.kv_heads == 32 &&
              llava.ffn_hidden == 11008 && llava.vocab == 32064 && llava.max_seq == 4096 && !llava.tied_embeddings);
    /* Gemma 3 4B's leaves out head_dim (256, not 2560 / 8), the heads and the vocabulary */
    ts_model g = load("gemma-3-4b");
    cr_expect(g.head_dim == 256 && g.heads == 8 && g.kv_heads == 4 && g.vocab == 262208 && g.window.tokens == 1024 &&
              g.window.full_every == 6 && g.tied_embeddings);
    /* Qwen3-VL's MoE text model reads as Qwen3-MoE: per-head Q/K norms, 128 experts of 768 */
    ts_model q = load("qwen3-vl-30b-a3b");
    cr_expect(q.qk_norm == TS_QKNORM_HEAD && q.moe.experts == 128 && q.moe.top_k == 8 && q.moe.expert_ffn == 768 &&
              !q.tied_embeddings);
    /* the Hub's Qwen2.5-VL config.json writes the language model at the root, without text_config */
    char *path = test_data_path("tests/data/hf/qwen2.5-vl-7b.json");
    char *text = read_file(path);
    cJSON *root = cJSON_Parse(text);
    free(text);
    cr_assert(root != NULL);
    cJSON_DeleteItemFromObjectCaseSensitive(root, "text_config");
    ts_model flat, nested = load("qwen2.5-vl-7b");
    cr_assert_eq(ts_model_from_hf(path, root, &flat), TS_OK, "%s", ts_error_message());
    ts_param_count a, b;
    ts_model_params(&flat, &a);
    ts_model_params(&nested, &b);
    cr_expect(a.total == b.total && flat.qkv_bias && !flat.linear_bias, "root %.0f, text_config %.0f", a.total, b.total);
    cr_expect(strstr(flat.source, "qwen2_5_vl read as qwen2, the language model only") != NULL, "%s", flat.source);
    cJSON_Delete(root);
    free(path);
}

/* The wrappers of the fourth round keep their language model's modules: the diff-saved text_config
 * takes its class's defaults (GemmaConfig, Gemma2Config, MistralConfig), the aliases read as the family
 * whose decoder transformers reuses. */
Test(models_hf, vision_language_wrappers_keep_their_language_models_modules) {
    /* PaliGemma's text_config leaves out head_dim (GemmaConfig's 256) and tie_word_embeddings (true) */
    ts_model pg = load("paligemma-3b-pt-224");
    cr_expect(pg.head_dim == 256 && pg.heads == 8 && pg.kv_heads == 1 && pg.layers == 18 && pg.vocab == 257216 &&
              pg.max_seq == 8192 && pg.gelu_gate && pg.tied_embeddings && pg.norms_per_layer == 0);
    cr_expect(strstr(pg.source, "paligemma read as gemma") != NULL, "%s", pg.source);
    /* LLaVA-NeXT's Mistral text_config leaves out hidden_size, the layers and heads (MistralConfig's) */
    ts_model ln = load("llava-v1.6-mistral-7b");
    cr_expect(ln.hidden == 4096 && ln.layers == 32 && ln.heads == 32 && ln.kv_heads == 8 && ln.ffn_hidden == 14336 &&
              ln.vocab == 32064 && ln.window.tokens == 0 && !ln.tied_embeddings);
    /* Phi-3.5-vision keeps Phi-3's keys at the root, without text_config */
    ts_model pv = load("phi3.5-vision");
    cr_expect(pv.hidden == 3072 && pv.layers == 32 && pv.kv_heads == 32 && pv.vocab == 32064 && !pv.tied_embeddings);
    cr_expect(strstr(pv.source, "phi3_v read as phi3, the language model only") != NULL, "%s", pv.source);
    /* GLM-4.1V's glm4v_text reads as GLM-4: the same parameters as GLM-4-9B-0414 */
    ts_model gv = load("glm-4.1v-9b-thinking"), g4 = load("glm-4-9b-0414");
    ts_param_count pgv, pg4;
    ts_model_params(&gv, &pgv);
    ts_model_params(&g4, &pg4);
    cr_expect(pgv.total == pg4.total && gv.norms_per_layer == g4.norms_per_layer && gv.qkv_bias && gv.kv_heads == 2,
              "glm4v %.0f, glm4 %.0f", pgv.total, pg4.total);
    /* GLM-4.1V's first saves wrote the text keys at the root; a diff-saved text_config takes Glm4vTextConfig's
     * defaults (GLM-4.1V-9B's shape): both read the same model */
    char *path = test_data_path("tests/data/hf/glm-4.1v-9b-thinking.json");
    char *text = read_file(path);
    cJSON *flat = cJSON_Parse(text), *diff = cJSON_Parse(text);
    free(text);
    cr_assert(flat != NULL && diff != NULL);
    cJSON *inner = cJSON_DetachItemFromObjectCaseSensitive(flat, "text_config"), *key;
    cJSON_ArrayForEach(key, inner) {
        if (strcmp(key->string, "model_type") != 0)
            cr_assert(cJSON_AddItemToObject(flat, key->string, cJSON_Duplicate(key, 1)));
    }
    cJSON_Delete(inner);
    static const char *const defaulted[] = {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                                            "num_attention_heads", "num_key_value_heads"};
    for (size_t i = 0; i < sizeof defaulted / sizeof defaulted[0]; i++)
        cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(diff, "text_config"), defaulted[i]);
    ts_model from_root, from_diff;
    cr_assert_eq(ts_model_from_hf(path, flat, &from_root), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_model_from_hf(path, diff, &from_diff), TS_OK, "%s", ts_error_message());
    ts_param_count a, b;
    ts_model_params(&from_root, &a);
    ts_model_params(&from_diff, &b);
    cr_expect(a.total == pgv.total && b.total == pgv.total, "root %.0f, diff %.0f, text_config %.0f", a.total,
              b.total, pgv.total);
    cr_expect(strstr(from_root.source, "glm4v read as glm4, the language model only") != NULL, "%s", from_root.source);
    cJSON_Delete(flat);
    cJSON_Delete(diff);
    free(path);
    /* PaliGemma 2's gemma2 text_config leaves out head_dim and the soft caps: Gemma2Config's 256, 50 and 30 */
    ts_model p2 = load("paligemma2-3b-pt-224");
    cr_expect(p2.head_dim == 256 && p2.attn_softcap == 50 && p2.logit_softcap == 30 && p2.norms_per_layer == 4 &&
              p2.window.tokens == 4096 && p2.window.full_every == 2 && p2.tied_embeddings);
    /* GLM-4.5V's glm4v_moe_text reads as GLM-4.5-Air's MoE: 128 experts of 1408, one shared, one dense layer */
    ts_model g5 = load("glm-4.5v");
    cr_expect(g5.moe.experts == 128 && g5.moe.top_k == 8 && g5.moe.expert_ffn == 1408 && g5.moe.shared_experts == 1 &&
              g5.moe.first_dense == 1 && g5.qkv_bias && !g5.tied_embeddings);
    /* Kimi-VL's deepseek_v3 text_config: MLA without a query LoRA, 64 experts, 2 shared */
    ts_model kv = load("kimi-vl-a3b");
    cr_expect(kv.moe.experts == 64 && kv.moe.top_k == 6 && kv.moe.shared_experts == 2 && kv.moe.first_dense == 1 &&
              kv.mla.q_lora_rank == 0 && kv.vocab == 163840 && !kv.tied_embeddings);
    cr_expect(strstr(kv.source, "kimi_vl read as deepseek_v3") != NULL, "%s", kv.source);
}

/* A config without a window length (Llama 4's attention_chunk_size left out; sliding_window null)
 * has no local attention, and reads back from Tessera's own JSON as the same model: plans embed
 * that JSON (found by tests/fuzz/fuzz_hf, a Llama 4 config whose chunk size key was mangled). */
Test(models_hf, no_window_length_round_trips) {
    const char *cases[][3] = {{"llama4-scout", "text_config", "attention_chunk_size"},
                              {"mistral-7b", NULL, "sliding_window"},
                              {"gemma2-9b", NULL, "sliding_window"},
                              {"gpt-oss-20b", NULL, "sliding_window"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "tests/data/hf/%s.json", cases[i][0]);
        char *path = test_data_path(rel);
        char *text = read_file(path);
        cJSON *root = cJSON_Parse(text);
        cJSON *obj = cases[i][1] ? cJSON_GetObjectItemCaseSensitive(root, cases[i][1]) : root;
        cJSON_DeleteItemFromObject(obj, "sliding_window_size");
        if (cases[i][1]) cJSON_DeleteItemFromObject(obj, cases[i][2]);
        else cJSON_ReplaceItemInObject(obj, cases[i][2], cJSON_CreateNull());
        ts_model m, back;
        cr_assert_eq(ts_model_from_json(cases[i][0], root, &m), TS_OK, "%s: %s", cases[i][0], ts_error_message());
        cr_expect_eq(m.window.tokens, 0, "%s: no local attention", cases[i][0]);
        cJSON *json = ts_model_to_json(&m);
        cr_assert_eq(ts_model_from_json("round-trip", json, &back), TS_OK, "%s", ts_error_message());
        cr_expect_eq(memcmp(&back, &m, sizeof back), 0, "%s round-trips without a window", cases[i][0]);
        cJSON_Delete(json);
        cJSON_Delete(root);
        free(text);
        free(path);
    }
}

/* --- Gemma 1, Phi-2, Falcon, Command R, StableLM 2 ------------------------------------------------ */

/* A fixture with `key` set to `value` (NULL: removed). */
static ts_model load_edited(const char *name, const char *key, cJSON *value) {
    char rel[256];
    snprintf(rel, sizeof rel, "tests/data/hf/%s.json", name);
    char *path = test_data_path(rel);
    char *text = read_file(path);
    cJSON *root = cJSON_Parse(text);
    if (value == NULL) cJSON_DeleteItemFromObject(root, key); /* NULL: the key left out */
    else if (cJSON_GetObjectItemCaseSensitive(root, key)) cJSON_ReplaceItemInObject(root, key, value);
    else cJSON_AddItemToObject(root, key, value);
    ts_model m;
    cr_assert_eq(ts_model_from_json(name, root, &m), TS_OK, "%s with %s: %s", name, key, ts_error_message());
    cJSON_Delete(root);
    free(text);
    free(path);
    return m;
}

static double total_params(const ts_model *m) {
    ts_param_count pc;
    ts_model_params(m, &pc);
    return pc.total;
}

/* What each family's modelling code builds, checked against sums written out from its modules. */
Test(models_hf, hf_a_families_keep_their_shape) {
    ts_model g = load("gemma-7b");
    ts_param_count pc;
    ts_model_params(&g, &pc);
    /* Gemma report (Gemma Team 2024), Table 2: 7,751,248,896 non-embedding parameters */
    cr_expect_eq(pc.total - pc.embedding, 7751248896.0, "Gemma 7B non-embedding: %.0f", pc.total - pc.embedding);
    cr_expect(g.norms_per_layer == 0 && g.gelu_gate && g.embed_scaled && g.tied_embeddings && g.head_dim == 256 &&
              g.window.tokens == 0 && g.attn_softcap == 0, "Gemma 1: two RMSNorms a layer, GeGLU, no local layers");

    ts_model phi = load("phi-2");
    cr_expect(phi.norms_per_layer == 1 && phi.qkv_bias && phi.linear_bias && phi.activation == TS_ACT_GELU &&
              phi.norm == TS_NORM_LAYERNORM && !phi.tied_embeddings && phi.dropout && phi.qk_norm == TS_QKNORM_NONE,
              "Phi-2: parallel block, biases, GELU, resid_pdrop 0.1");
    cr_expect_eq(load_edited("phi-2", "qk_layernorm", cJSON_CreateTrue()).qk_norm, TS_QKNORM_HEAD);

    /* FalconForCausalLM, falcon-7b: word_embeddings V*h (the head tied), per layer query_key_value
     * h*(h + 2*64), dense h*h, dense_h_to_4h and dense_4h_to_h 2*h*4h, input_layernorm 2h; ln_f 2h */
    ts_model f7 = load("falcon-7b");
    double h = 4544, ffn = 4 * h;
    double want = 65024 * h + 32 * (h * (h + 2 * 64) + h * h + 2 * h * ffn + 2 * h) + 2 * h;
    cr_expect_eq(total_params(&f7), want, "Falcon-7B: %.0f, the modules %.0f", total_params(&f7), want);
    cr_expect(f7.kv_heads == 1 && f7.norms_per_layer == 1 && f7.tied_embeddings && !f7.linear_bias &&
              f7.position == TS_POS_ROPE, "Falcon-7B: multi-query, one LayerNorm, tied");
    cr_expect_eq(load_edited("falcon-7b", "parallel_attn", cJSON_CreateFalse()).norms_per_layer, 0);
    cr_expect_eq(load_edited("falcon-7b", "alibi", cJSON_CreateTrue()).position, TS_POS_ALIBI);
    cr_expect_eq(load_edited("falcon-7b", "multi_query", cJSON_CreateFalse()).kv_heads, 71);

    ts_model f40 = load("falcon-40b-rw");
    cr_expect(f40.kv_heads == 8 && f40.norms_per_layer == 0 && f40.layers == 60 && f40.heads == 128,
              "Falcon-40B (RW keys): n_head_kv 8 implies the new decoder, ln_attn and ln_mlp");
    cr_expect_eq(load_edited("falcon-40b-rw", "num_ln_in_parallel_attn", cJSON_CreateNumber(1)).norms_per_layer, 1);

    /* CohereForCausalLM, command-r-v01: embed_tokens V*h (the head tied), per layer q/k/v/o 4*h*h,
     * gate/up/down 3*h*f, input_layernorm h (CohereLayerNorm: a weight, no bias); norm h */
    ts_model cr = load("command-r-v01");
    double hc = 8192, fc = 22528;
    double want_cr = 256000 * hc + 40 * (4 * hc * hc + 3 * hc * fc + hc) + hc;
    cr_expect_eq(total_params(&cr), want_cr, "Command R: %.0f, the modules %.0f", total_params(&cr), want_cr);
    cr_expect(cr.norms_per_layer == 1 && cr.activation == TS_ACT_SWIGLU && cr.norm == TS_NORM_LAYERNORM &&
              cr.norm_affine == TS_NORM_AFFINE_WEIGHT && cr.tied_embeddings && cr.kv_heads == 64 && !cr.qkv_bias,
              "Command R: parallel SwiGLU block, weight-only LayerNorm, tied");
    cr_expect_eq(load_edited("command-r-v01", "use_qk_norm", cJSON_CreateTrue()).qk_norm, TS_QKNORM_FULL);
    ts_model r7 = load("command-r7b");
    cr_expect(r7.window.tokens == 4096 && r7.window.full_every == 4 && ts_model_layer_window(&r7, 2) == 4096 &&
              ts_model_layer_window(&r7, 3) == 0 && r7.norms_per_layer == 1 && r7.kv_heads == 8,
              "Command R7B: three sliding layers in four, Command R's parallel block");

    ts_model slm = load("stablelm-2-1_6b");
    cr_expect(slm.qkv_bias && !slm.linear_bias && slm.norms_per_layer == 0 && slm.activation == TS_ACT_SWIGLU &&
              slm.norm == TS_NORM_LAYERNORM && !slm.tied_embeddings, "StableLM 2: Q/K/V biases, two LayerNorms");
    cr_expect_eq(load_edited("stablelm-2-1_6b", "use_parallel_residual", cJSON_CreateTrue()).norms_per_layer, 1);
}

/* An RW config (custom code, model_type RefinedWeb) and the one transformers'
 * convert_custom_code_checkpoint.py makes of it describe the same model. */
Test(models_hf, falcon_rw_keys_read_as_converted) {
    char *path = test_data_path("tests/data/hf/falcon-40b-rw.json");
    char *text = read_file(path);
    cJSON *root = cJSON_Parse(text);
    static const char *const renames[][2] = {
        {"n_head", "num_attention_heads"}, {"n_layer", "num_hidden_layers"}, {"n_head_kv", "num_kv_heads"}};
    for (size_t i = 0; i < sizeof renames / sizeof renames[0]; i++) {
        cJSON *v = cJSON_DetachItemFromObject(root, renames[i][0]);
        cJSON_AddItemToObject(root, renames[i][1], v);
    }
    cJSON_AddItemToObject(root, "new_decoder_architecture", cJSON_CreateTrue());
    cJSON_ReplaceItemInObject(root, "model_type", cJSON_CreateString("falcon"));
    ts_model conv;
    cr_assert_eq(ts_model_from_json("converted.json", root, &conv), TS_OK, "%s", ts_error_message());
    ts_model rw = load("falcon-40b-rw");
    cr_expect_eq(total_params(&conv), total_params(&rw));
    cr_expect(conv.kv_heads == rw.kv_heads && conv.norms_per_layer == rw.norms_per_layer);
    cli_result r = run_cli("plan", "--model", path, "--system", "h100-sxm-dgx", "--gpus", "64", "--top", "1", NULL);
    cr_expect_eq(r.status, 0, "falcon-40b-rw: exit %d: %s", r.status, r.err);
    cli_result_free(&r);
    cJSON_Delete(root);
    free(text);
    free(path);
}

/* --- ERNIE 4.5, Hunyuan, SmolLM3, DeepSeek v1 MoE, MiniCPM, Seed-OSS ------------------------------- */

Test(models_hf, hf_d_families_keep_their_modules) {
    ts_model e = load("ernie-4.5-0.3b");
    cr_expect(e.head_dim == 128 && e.kv_heads == 2 && e.tied_embeddings && !e.qkv_bias && !e.linear_bias &&
              e.max_seq == 131072, "ERNIE 4.5 0.3B: 16 heads of 128 on 1024, tied, no biases");
    ts_model eb = load_edited("ernie-4.5-0.3b", "use_bias", cJSON_CreateTrue());
    cr_expect(eb.qkv_bias && eb.linear_bias, "use_bias puts biases on Q, K, V, O and the MLP");

    /* ERNIE-4.5-21B-A3B: layer 0 dense (moe_layer_start_index 1), 27 MoE layers of 64 experts and
     * two shared; the rule (i + 1) % moe_layer_interval == 0 from the start index */
    ts_model em = load("ernie-4.5-21b-a3b");
    cr_expect(em.moe.experts == 64 && em.moe.top_k == 6 && em.moe.expert_ffn == 1536 && em.moe.shared_experts == 2 &&
              em.moe.shared_ffn == 1536 && em.ffn_hidden == 12288 && em.moe.router_expert_bias);
    cr_expect(!ts_model_layer_is_moe(&em, 0) && ts_model_layer_is_moe(&em, 1) && ts_model_layer_is_moe(&em, 27));
    ts_model every2 = load_edited("ernie-4.5-21b-a3b", "moe_layer_interval", cJSON_CreateNumber(2));
    cr_expect(ts_model_layer_is_moe(&every2, 1) && !ts_model_layer_is_moe(&every2, 2) &&
              ts_model_layer_is_moe(&every2, 3) && ts_model_layer_is_moe(&every2, 27),
              "interval 2: layers 1, 3, ..., 27 ((i + 1) %% 2 == 0)");

    /* Hunyuan-7B: embed_tokens V*h (tied), per layer q/o 2*h*h, k/v 2*h*8*128, query/key_layernorm
     * 2*128, gate/up/down 3*h*f, two RMSNorms 2h; the final norm h */
    ts_model hy = load("hunyuan-7b");
    double h = 4096, f = 14336, kv = 8 * 128;
    double want = 128167 * h + 32 * (2 * h * h + 2 * h * kv + 2 * 128 + 3 * h * f + 2 * h) + h;
    cr_expect_eq(total_params(&hy), want, "Hunyuan-7B: %.0f, the modules %.0f", total_params(&hy), want);
    cr_expect(hy.qk_norm == TS_QKNORM_HEAD && hy.tied_embeddings && hy.dropout);

    /* Hunyuan-A13B: every layer 64 experts of intermediate_size, top 8 (a list, one per layer), and
     * the shared MLP (use_mixed_mlp_moe) */
    ts_model a13 = load("hunyuan-a13b");
    cr_expect(a13.moe.experts == 64 && a13.moe.top_k == 8 && a13.moe.expert_ffn == 3072 && a13.moe.shared_experts == 1 &&
              a13.moe.shared_ffn == 3072 && a13.moe.every == 1 && a13.moe.first_dense == 0 && a13.qk_norm == TS_QKNORM_HEAD);
    ts_param_count pc;
    ts_model_params(&a13, &pc);
    cr_expect(fabs(pc.active - 13e9) / 13e9 < 0.04, "Hunyuan-A13B: 13B active (model card), got %.0f", pc.active);
    cr_expect_eq(load_edited("hunyuan-a13b", "use_mixed_mlp_moe", cJSON_CreateFalse()).moe.shared_experts, 0);

    ts_model smol = load("smollm3-3b");
    cr_expect(smol.tied_embeddings && smol.kv_heads == 4 && smol.window.tokens == 0 && smol.rope_theta == 5e6,
              "SmolLM3: tied (the default), no window; its NoPE layers hold no parameter");
    cJSON *nope = cJSON_CreateArray();
    for (int i = 0; i < 36; i++) cJSON_AddItemToArray(nope, cJSON_CreateNumber(1));
    ts_model all_rope = load_edited("smollm3-3b", "no_rope_layers", nope);
    cr_expect_eq(total_params(&smol), total_params(&all_rope));

    /* DeepSeekMoE 16B: the paper's 2.8B activated; layer 0 dense */
    ts_model ds = load("deepseek-moe-16b");
    ts_model_params(&ds, &pc);
    cr_expect(ds.moe.experts == 64 && ds.moe.top_k == 6 && ds.moe.shared_experts == 2 && ds.moe.shared_ffn == 1408 &&
              ds.moe.first_dense == 1 && !ds.moe.router_sigmoid && ds.mla.kv_lora_rank == 0 && !ds.tied_embeddings);
    cr_expect(fabs(pc.active - 2.8e9) / 2.8e9 < 0.018, "DeepSeekMoE 16B: 2.8B activated, got %.0f", pc.active);

    /* MiniCPM-2B (Hu et al. 2024): 2,442,057,984 non-embedding parameters; scale_emb and
     * dim_model_base change none */
    ts_model mc = load("minicpm-2b");
    ts_model_params(&mc, &pc);
    cr_expect_eq(pc.total - pc.embedding, 2442057984.0, "MiniCPM-2B non-embedding: %.0f", pc.total - pc.embedding);
    cr_expect(mc.tied_embeddings && mc.kv_heads == 36 && !mc.qkv_bias);
    ts_model unscaled = load_edited("minicpm-2b", "scale_emb", cJSON_CreateNumber(1));
    cr_expect_eq(total_params(&mc), total_params(&unscaled));
    char *mc_path = test_data_path("tests/data/hf/minicpm-2b.json");
    char *mc_text = read_file(mc_path);
    cJSON *moe = cJSON_Parse(mc_text);
    cJSON_AddNumberToObject(moe, "num_experts", 8);
    cJSON_AddNumberToObject(moe, "num_experts_per_tok", 2);
    ts_model mm;
    cr_assert_eq(ts_model_from_json("minicpm-moe", moe, &mm), TS_OK, "%s", ts_error_message());
    cr_expect(mm.moe.experts == 8 && mm.moe.top_k == 2 && mm.moe.expert_ffn == 5760 && mm.moe.every == 1,
              "MiniCPM-MoE: Mixtral's experts on every layer");
    cJSON_Delete(moe);
    free(mc_text);
    free(mc_path);

    /* Seed-OSS-36B: Q/K/V biases (attention_bias), 80 heads of 128 on 5120, dropout 0.1 */
    ts_model seed = load("seed-oss-36b");
    cr_expect(seed.qkv_bias && !seed.linear_bias && seed.head_dim == 128 && seed.heads == 80 && seed.kv_heads == 8 &&
              seed.dropout && !seed.tied_embeddings);
    cr_expect_eq(load_edited("seed-oss-36b", "head_dim", cJSON_CreateNull()).head_dim, 128, "SeedOssConfig's head_dim default: 128");
}

/* --- GPT-BigCode, GPT-Neo, CodeGen, MPT, InternLM2, GLM-4 ------------------------------------------ */

/* What each family's modelling code builds, checked against sums written out from its modules. */
Test(models_hf, hf_c_families_keep_their_shape) {
    /* GPTBigCodeForCausalLM, starcoderbase-1b: wte V*h (the head tied), wpe 8192*h; per layer ln_1, ln_2 2h each,
     * c_attn h*(h + 2*128) + (h + 2*128) (one key/value head), c_proj h*h + h, c_fc h*f + f, c_proj f*h + h; ln_f */
    double h = 2048, f = 8192, d = 128, V = 49152;
    double want = V * h + 8192 * h + 24 * (4 * h + h * (h + 2 * d) + h + 2 * d + h * h + h + 2 * h * f + f + h) + 2 * h;
    ts_model sc = load("starcoderbase-1b");
    cr_expect_eq(total_params(&sc), want, "StarCoderBase-1B: %.0f, the modules %.0f", total_params(&sc), want);
    cr_expect(sc.kv_heads == 1 && sc.position == TS_POS_LEARNED && sc.tied_embeddings && sc.qkv_bias &&
              sc.linear_bias && sc.max_seq == 8192 && sc.dropout,
              "StarCoderBase-1B: multi-query, learned positions, tied");
    cr_expect_eq(load_edited("starcoderbase-1b", "multi_query", cJSON_CreateFalse()).kv_heads, 16);
    /* SantaCoder's first release (model_type gpt2, attention_head_type multiquery): the same modules, with a
     * 49,280-row vocabulary and 2048 positions */
    V = 49280;
    want = V * h + 2048 * h + 24 * (4 * h + h * (h + 2 * d) + h + 2 * d + h * h + h + 2 * h * f + f + h) + 2 * h;
    ts_model santa = load("santacoder");
    cr_expect(total_params(&santa) == want && santa.kv_heads == 1, "SantaCoder: %.0f, the modules %.0f",
              total_params(&santa), want);
    cr_expect_eq(load_edited("santacoder", "attention_head_type", cJSON_CreateString("multihead")).kv_heads, 16);

    /* GPTNeoForCausalLM, gpt-neo-1.3B: wte V*h (tied), wpe 2048*h; per layer ln_1, ln_2 2h each, q/k/v h*h
     * without bias, out_proj h*h + h, c_fc h*4h + 4h, c_proj 4h*h + h; ln_f */
    h = 2048, V = 50257;
    want = V * h + 2048 * h + 24 * (4 * h + 4 * h * h + h + 8 * h * h + 4 * h + h) + 2 * h;
    ts_model neo = load("gpt-neo-1.3b");
    cr_expect_eq(total_params(&neo), want, "GPT-Neo 1.3B: %.0f, the modules %.0f", total_params(&neo), want);
    cr_expect(neo.window.tokens == 256 && neo.window.full_every == 2 && neo.position == TS_POS_LEARNED &&
              !neo.qkv_bias && neo.linear_bias && neo.tied_embeddings, "GPT-Neo: global and local layers alternate");
    cJSON *types = cJSON_Parse("[[[\"local\", \"local\", \"global\"], 8]]");
    ts_model neo3 = load_edited("gpt-neo-1.3b", "attention_types", types);
    cr_expect(neo3.window.full_every == 3 && ts_model_layer_window(&neo3, 0) == 256 &&
              ts_model_layer_window(&neo3, 2) == 0);
    cr_expect_eq(load_edited("gpt-neo-1.3b", "attention_types", cJSON_Parse("[[[\"global\"], 24]]")).window.tokens, 0);

    /* CodeGenForCausalLM, codegen-2B-mono: wte and lm_head V*h; per layer ln_1 2h (one norm, parallel block),
     * qkv_proj 3h*h and out_proj h*h without bias, fc_in h*4h + 4h, fc_out 4h*h + h; ln_f. Read as GPT-J, which
     * counts out_proj with a bias (h a layer) and not lm_head's (V): 51,200 - 32 * 2560 = -30,720 in all */
    h = 2560, V = 51200;
    want = 2 * V * h + 32 * (2 * h + 4 * h * h + 8 * h * h + 4 * h + h) + 2 * h;
    ts_model cg = load("codegen-2b-mono");
    cr_expect_eq(total_params(&cg), want + 32 * h, "CodeGen-2B: %.0f, the modules %.0f", total_params(&cg), want);
    cr_expect(cg.norms_per_layer == 1 && cg.position == TS_POS_ROPE && !cg.qkv_bias && !cg.tied_embeddings);

    /* MptForCausalLM, mpt-7b: wte V*h (tied); per layer norm_1, norm_2 h each (no bias), Wqkv 3h*h, out_proj
     * h*h, up_proj h*4h, down_proj 4h*h, no biases; norm_f h */
    h = 4096, V = 50432;
    want = V * h + 32 * (2 * h + 4 * h * h + 8 * h * h) + h;
    ts_model mpt = load("mpt-7b");
    cr_expect_eq(total_params(&mpt), want, "MPT-7B: %.0f, the modules %.0f", total_params(&mpt), want);
    cr_expect(mpt.position == TS_POS_ALIBI && mpt.norm_affine == TS_NORM_AFFINE_WEIGHT && !mpt.linear_bias &&
              mpt.tied_embeddings && mpt.kv_heads == 32 && mpt.ffn_hidden == 4 * 4096, "MPT-7B: ALiBi, no biases");
    cr_expect_eq(load_edited("mpt-7b", "no_bias", cJSON_CreateFalse()).norm_affine, TS_NORM_AFFINE_FULL);
    cr_expect_eq(load_edited("mpt-7b", "expansion_ratio", cJSON_CreateNumber(2.5)).ffn_hidden, 10240);
    ts_model gqa = load_edited("mpt-7b", "attn_config",
                               cJSON_Parse("{\"attn_type\": \"grouped_query_attention\", \"kv_n_heads\": 8, "
                                           "\"alibi\": false, \"qk_ln\": true}"));
    cr_expect(gqa.kv_heads == 8 && gqa.position == TS_POS_LEARNED && gqa.qk_norm == TS_QKNORM_FULL,
              "llm-foundry's grouped-query attention, learned positions, Q/K LayerNorms");

    /* InternLM2ForCausalLM, internlm2_5-7b: tok_embeddings and output V*h; per layer wqkv h*(h + 2*8*128), wo h*h,
     * w1, w3, w2 3*h*f (no biases: "bias": false), attention_norm and ffn_norm h each; norm h */
    h = 4096, f = 14336, V = 92544;
    want = 2 * V * h + 32 * (h * (h + 2 * 8 * 128) + h * h + 3 * h * f + 2 * h) + h;
    ts_model ilm = load("internlm2.5-7b");
    cr_expect_eq(total_params(&ilm), want, "InternLM2.5-7B: %.0f, the modules %.0f", total_params(&ilm), want);
    cr_expect(ilm.kv_heads == 8 && !ilm.qkv_bias && ilm.rope_theta == 1e6 && !ilm.tied_embeddings);

    /* GlmForCausalLM, glm-4-9b-hf: embed_tokens and lm_head V*h; per layer q h*h + h, k and v h*256 + 256 each
     * (two KV heads of 128), o_proj h*h, gate_up_proj h*2f, down_proj f*h, two RMSNorms h; norm h. Glm4 adds
     * post_self_attn_layernorm and post_mlp_layernorm, 2h a layer */
    h = 4096, f = 13696, V = 151552;
    want = 2 * V * h + 40 * (2 * h * h + h + 2 * (h * 256 + 256) + 3 * h * f + 2 * h) + h;
    ts_model glm = load("glm-4-9b-hf"), glm4 = load("glm-4-9b-0414");
    cr_expect_eq(total_params(&glm), want, "GLM-4-9B: %.0f, the modules %.0f", total_params(&glm), want);
    cr_expect_eq(total_params(&glm4), want + 40 * 2 * h, "GLM-4-9B-0414: %.0f", total_params(&glm4));
    cr_expect(glm.qkv_bias && !glm.linear_bias && glm.kv_heads == 2 && glm.head_dim == 128 &&
              glm.norms_per_layer == 0 && glm4.norms_per_layer == 4,
              "GLM-4: Q/K/V biases, two KV heads; GLM-4-0414: four norms a layer");
}

/* GPT-Neo's attention_types that Tessera's one-global-layer-in-N cannot hold, or that do not add up to
 * num_layers, are refused naming the key. */
Test(models_hf, gpt_neo_layer_patterns) {
    static const char *const bad[] = {"[[[\"global\", \"global\", \"local\"], 8]]", "[[[\"global\", \"local\"], 11]]",
                                      "[[[\"global\", \"sliding\"], 12]]", "[[\"global\", 24]]",
                                      "[[[], 100000], [[], 100000]]"};
    char *path = test_data_path("tests/data/hf/gpt-neo-1.3b.json");
    char *text = read_file(path);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cJSON *root = cJSON_Parse(text);
        cJSON_ReplaceItemInObject(root, "attention_types", cJSON_Parse(bad[i]));
        ts_model m;
        ts_error_clear();
        cr_expect_eq(ts_model_from_json("neo.json", root, &m), TS_ERR_INPUT, "%s accepted", bad[i]);
        cr_expect(strstr(ts_error_message(), "neo.json: $.attention_types: ") != NULL, "%s: %s", bad[i],
                  ts_error_message());
        cJSON_Delete(root);
    }
    free(text);
    free(path);
}

/* --- ChatGLM / GLM-4, Baichuan 2, Qwen 1, EXAONE 3.5 and 4 (hf_remote.c) ----------------------------- */

Test(models_hf, hf_e_families_keep_their_modules) {
    /* ChatGLMForConditionalGeneration, chatglm3-6b: embedding and output_layer V*h; per layer query_key_value
     * h*(a + 2k) + (a + 2k) (32 heads and 2 groups of kv_channels 128), dense a*h, dense_h_to_4h h*2f,
     * dense_4h_to_h f*h, two RMSNorms h; final_layernorm h */
    double h = 4096, f = 13696, V = 65024, a = 32 * 128, k = 2 * 128;
    double want = 2 * V * h + 28 * (h * (a + 2 * k) + a + 2 * k + a * h + 3 * h * f + 2 * h) + h;
    ts_model glm3 = load("chatglm3-6b"), glm4 = load("glm-4-9b-chat");
    cr_expect_eq(total_params(&glm3), want, "ChatGLM3-6B: %.0f, the modules %.0f", total_params(&glm3), want);
    cr_expect(glm3.kv_heads == 2 && glm3.head_dim == 128 && glm3.qkv_bias && !glm3.linear_bias &&
              !glm3.tied_embeddings && glm3.max_seq == 8192 && glm3.rope_theta == 1e4 && glm3.norm == TS_NORM_RMSNORM);
    /* GLM-4-9B-Chat's remote code builds the modules of transformers' GlmForCausalLM for GLM-4-9B */
    ts_model glm_hf = load("glm-4-9b-hf");
    cr_expect_eq(total_params(&glm4), total_params(&glm_hf), "GLM-4-9B-Chat: %.0f", total_params(&glm4));
    cr_expect(glm4.rope_theta == 5e6 && glm4.max_seq == 131072, "rope_ratio 500: base 10000 * 500");
    cr_expect_eq(load_edited("chatglm3-6b", "multi_query_attention", cJSON_CreateFalse()).kv_heads, 32);
    ts_model lin = load_edited("chatglm3-6b", "add_bias_linear", cJSON_CreateTrue());
    cr_expect(lin.linear_bias && lin.qkv_bias, "add_bias_linear biases every linear layer");
    cr_expect_eq(load_edited("chatglm3-6b", "rmsnorm", cJSON_CreateFalse()).norm, TS_NORM_LAYERNORM);
    /* ChatGLM-6B v1: word_embeddings V*h, tied lm_head; per layer query_key_value 3h*h + 3h, dense h*h + h,
     * dense_h_to_4h h*f + f, dense_4h_to_h f*h + h, two LayerNorms 2h each; final LayerNorm 2h */
    h = 4096, f = 16384, V = 130528;
    want = V * h + 28 * (4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h) + 2 * h;
    ts_model glm1 = load("chatglm-6b");
    cr_expect_eq(total_params(&glm1), want, "ChatGLM-6B: %.0f, the modules %.0f", total_params(&glm1), want);
    cr_expect(glm1.tied_embeddings && glm1.activation == TS_ACT_GELU && glm1.norm == TS_NORM_LAYERNORM &&
              glm1.kv_heads == 32 && glm1.max_seq == 2048, "v1: GLM-130B's block, tied head");

    /* BaichuanForCausalLM, Baichuan2-7B / 13B: embed_tokens and lm_head (NormHead) V*h; per layer W_pack 3h*h,
     * o_proj h*h, gate, up, down 3*h*f, two RMSNorms h; norm h; no biases. 7B rotates, 13B adds ALiBi */
    h = 4096, f = 11008, V = 125696;
    want = 2 * V * h + 32 * (4 * h * h + 3 * h * f + 2 * h) + h;
    ts_model b7 = load("baichuan2-7b"), b13 = load("baichuan2-13b");
    cr_expect_eq(total_params(&b7), want, "Baichuan2-7B: %.0f, the modules %.0f", total_params(&b7), want);
    h = 5120, f = 13696;
    want = 2 * V * h + 40 * (4 * h * h + 3 * h * f + 2 * h) + h;
    cr_expect_eq(total_params(&b13), want, "Baichuan2-13B: %.0f, the modules %.0f", total_params(&b13), want);
    cr_expect(b7.position == TS_POS_ROPE && b13.position == TS_POS_ALIBI && b13.max_seq == 4096 &&
              !b7.qkv_bias && !b13.linear_bias && !b13.tied_embeddings, "7B RoPE, 13B ALiBi, no biases");

    /* QWenLMHeadModel, Qwen-7B: wte and lm_head V*h; per layer c_attn h*3a + 3a, c_proj a*h (no_bias), w1, w2
     * h*f/2 each and c_proj f/2*h with f = intermediate_size 22016, ln_1 and ln_2 h; ln_f h */
    h = 4096, f = 22016 / 2, V = 151936, a = 32 * 128;
    want = 2 * V * h + 32 * (3 * h * a + 3 * a + a * h + 3 * h * f + 2 * h) + h;
    ts_model qw = load("qwen-7b");
    cr_expect_eq(total_params(&qw), want, "Qwen-7B: %.0f, the modules %.0f", total_params(&qw), want);
    cr_expect(qw.ffn_hidden == 11008 && qw.qkv_bias && !qw.linear_bias && qw.max_seq == 8192 && qw.rope_theta == 1e4);
    cr_expect(load_edited("qwen-7b", "no_bias", cJSON_CreateFalse()).linear_bias);

    /* ExaoneForCausalLM, EXAONE-3.5-7.8B: wte and lm_head V*h; per layer q_proj, out_proj h*a, k_proj, v_proj
     * h*k (8 KV heads of 128), c_fc_0, c_fc_1, c_proj 3*h*f, ln_1 and ln_2 h; ln_f h. Model card: 6.98B without
     * the embeddings (0.01B rounding) */
    h = 4096, f = 14336, V = 102400, a = 32 * 128, k = 8 * 128;
    want = 2 * V * h + 32 * (2 * h * a + 2 * h * k + 3 * h * f + 2 * h) + h;
    ts_model ex3 = load("exaone-3.5-7.8b");
    cr_expect_eq(total_params(&ex3), want, "EXAONE-3.5-7.8B: %.0f, the modules %.0f", total_params(&ex3), want);
    cr_expect(fabs(total_params(&ex3) - 2 * V * h - 6.98e9) <= 0.005e9, "6.98B without embeddings");
    cr_expect(ex3.tied_embeddings == 0 && ex3.kv_heads == 8 && ex3.rope_theta == 1e6);
    cr_expect_eq(load_edited("exaone-3.5-7.8b", "intermediate_size", cJSON_CreateNull()).ffn_hidden, 4 * 4096);

    /* Exaone4ForCausalLM, EXAONE-4.0-32B: Llama's modules (40 heads, 8 KV heads of 128), q_norm and k_norm of
     * 128 a layer, the two norms after attention and MLP; 30.95B without embeddings (model card) */
    h = 5120, f = 27392, a = 40 * 128, k = 8 * 128;
    want = 2 * V * h + 64 * (2 * h * a + 2 * h * k + 2 * 128 + 3 * h * f + 2 * h) + h;
    ts_model ex4 = load("exaone-4.0-32b");
    cr_expect_eq(total_params(&ex4), want, "EXAONE-4.0-32B: %.0f, the modules %.0f", total_params(&ex4), want);
    cr_expect(fabs(total_params(&ex4) - 2 * V * h - 30.95e9) <= 0.005e9, "30.95B without embeddings");
    cr_expect(ex4.qk_norm == TS_QKNORM_HEAD && ex4.window.tokens == 4096 && ex4.window.full_every == 4 &&
              ts_model_layer_window(&ex4, 0) == 4096 && ts_model_layer_window(&ex4, 3) == 0, "three local, one global");
    ts_model by_pattern = load_edited("exaone-4.0-32b", "layer_types", cJSON_CreateNull());
    cr_expect_eq(by_pattern.window.full_every, 4, "sliding_window_pattern \"LLLG\" alone: a global layer every 4");
    cr_expect_eq(load_edited("exaone-4.0-32b", "sliding_window", cJSON_CreateNull()).window.tokens, 0);
    /* Exaone4Config's defaults: sliding_window 4096 and one global layer in sliding_window_pattern 4 */
    cJSON *bare = cJSON_Parse("{\"model_type\": \"exaone4\", \"hidden_size\": 2048, \"num_hidden_layers\": 8, "
                              "\"num_attention_heads\": 16, \"vocab_size\": 1000, \"intermediate_size\": 4096, "
                              "\"sliding_window_pattern\": 2}");
    ts_model d;
    cr_assert_eq(ts_model_from_json("exaone4.json", bare, &d), TS_OK, "%s", ts_error_message());
    cr_expect(d.window.tokens == 4096 && d.window.full_every == 2 && d.max_seq == 2048 && !d.tied_embeddings);
    cJSON_Delete(bare);
}

/* --- MiniMax-M2, Ling, DeepSeek-V3.2, MiMo, dots.llm1, Arcee, Apertus ------------------------------- */

/* What each family's modelling code builds, checked against sums written out from its modules. */
Test(models_hf, hf_f_families_keep_their_modules) {
    /* ArceeForCausalLM, AFM-4.5B: embed and untied head V*h; per layer q, o h*20*128, k, v h*4*128,
     * up and down h*f (NemotronMLP: no gate), two RMSNorms; the final norm */
    double h = 2560, f = 18432, V = 128004;
    double want = 2 * V * h + 36 * (2 * h * 2560 + 2 * h * 512 + 2 * h * f + 2 * h) + h;
    ts_model afm = load("afm-4.5b");
    cr_expect_eq(total_params(&afm), want, "AFM-4.5B: %.0f, the modules %.0f", total_params(&afm), want);
    cr_expect(afm.activation == TS_ACT_RELU2 && afm.kv_heads == 4 && !afm.tied_embeddings);
    cr_expect_eq(load_edited("afm-4.5b", "hidden_act", cJSON_CreateString("silu")).activation, TS_ACT_GELU,
                 "another activation keeps the two matrices");

    /* ApertusForCausalLM, Apertus-8B: as Arcee with q_norm and k_norm of head_dim 128 */
    h = 4096, f = 21504, V = 131072;
    want = 2 * V * h + 32 * (2 * h * h + 2 * h * 1024 + 2 * 128 + 2 * h * f + 2 * h) + h;
    ts_model ap = load("apertus-8b");
    cr_expect_eq(total_params(&ap), want, "Apertus-8B: %.0f, the modules %.0f", total_params(&ap), want);
    cr_expect(ap.qk_norm == TS_QKNORM_HEAD && ap.activation == TS_ACT_GELU && ap.rope_theta == 12e6);

    /* MiMo-7B: Qwen2's layer (Q/K/V biases) and one MTP module counted apart: a layer, two norms and
     * input_proj 2h -> h */
    ts_model mimo = load("mimo-7b-base");
    ts_param_count pc;
    ts_model_params(&mimo, &pc);
    h = 4096, f = 11008;
    double layer = 2 * h * h + 2 * h * 1024 + h + 2 * 1024 + 3 * h * f + 2 * h;
    cr_expect_eq(pc.total, 2 * 151680 * h + 36 * layer + h, "MiMo-7B: %.0f", pc.total);
    cr_expect_eq(pc.mtp, layer + 2 * h + 2 * h * h, "MiMo-7B's MTP module: %.0f", pc.mtp);
    cr_expect(mimo.qkv_bias && mimo.mtp_layers == 1 && mimo.window.tokens == 0);

    /* Ling-lite-1.5: 64 experts of 1408, top 6, two shared as one MLP, every layer MoE; the model
     * card's 2.75B activated */
    ts_model ling = load("ling-lite-1.5");
    ts_model_params(&ling, &pc);
    cr_expect(ling.moe.experts == 64 && ling.moe.top_k == 6 && ling.moe.shared_experts == 2 &&
              ling.moe.shared_ffn == 1408 && ling.moe.first_dense == 0 && !ling.moe.router_sigmoid && !ling.dropout);
    cr_expect(fabs(pc.active - 2.75e9) / 2.75e9 < 0.002, "Ling-lite: 2.75B activated, got %.0f", pc.active);
    ts_model ling2 = load_edited("ling-lite-1.5", "use_qk_norm", cJSON_CreateTrue());
    cr_expect_eq(total_params(&ling2) - total_params(&ling), 28 * 2 * 128.0, "v2's q/k norms of head_dim");
    cr_expect(load_edited("ling-lite-1.5", "score_function", cJSON_CreateString("sigmoid")).moe.router_sigmoid);
    ts_model ling16 = load_edited("ling-lite-1.5", "num_experts", cJSON_CreateNull());
    cr_expect(ling16.moe.experts == 16 && ling16.moe.top_k == 6, "BailingMoeConfig's default: 16 experts");
    /* Ling-mini-2.0 (v2): layer 0 dense, 256 experts of 512 and one shared, Q/K norms, DeepSeek-V3's
     * router; the model card's 789M activated without the embedding and head */
    ts_model mini = load("ling-mini-2.0");
    ts_model_params(&mini, &pc);
    cr_expect(mini.moe.first_dense == 1 && mini.moe.shared_ffn == 512 && mini.qk_norm == TS_QKNORM_HEAD &&
              mini.moe.router_sigmoid && mini.moe.router_expert_bias && mini.moe.router_groups == 8 &&
              mini.moe.router_group_topk == 4 && mini.moe.router_scale == 2.5);
    double non_embedding = pc.active - pc.embedding - pc.lm_head;
    cr_expect(fabs(non_embedding - 789e6) / 789e6 < 0.001, "Ling-mini-2.0: 789M activated, got %.0f", non_embedding);

    /* dots.llm1: layer 0 dense, Qwen3's Q/K norms, DeepSeek-V3's sigmoid router; 14B activated */
    ts_model dots = load("dots.llm1.base");
    ts_model_params(&dots, &pc);
    cr_expect(!ts_model_layer_is_moe(&dots, 0) && ts_model_layer_is_moe(&dots, 1) && dots.moe.shared_experts == 2 &&
              dots.qk_norm == TS_QKNORM_HEAD && dots.moe.router_sigmoid && dots.moe.router_expert_bias &&
              dots.moe.router_scale == 2.5);
    cr_expect(fabs(pc.active - 14e9) / 14e9 < 0.005, "dots.llm1: 14B activated, got %.0f", pc.active);
    ts_model dots_bias = load_edited("dots.llm1.base", "attention_bias", cJSON_CreateTrue());
    cr_expect_eq(total_params(&dots_bias) - total_params(&dots), 62 * (4096 + 2 * 4096.0),
                 "attention_bias: Q, K, V biases (o_proj's not counted), none on the MLPs");

    /* MiniMax-M2: 48 heads of 128 on 3072, Q/K normed over the whole projection, 256 experts of 1536
     * on every layer, sigmoid router with a correction bias */
    ts_model mm = load("minimax-m2");
    h = 3072;
    double q = 48 * 128, kv = 8 * 128, e = 3 * h * 1536;
    want = 2 * 200064 * h + 62 * (2 * h * q + 2 * h * kv + q + kv + 256 * e + h * 256 + 2 * h) + h;
    cr_expect_eq(total_params(&mm), want, "MiniMax-M2: %.0f, the modules %.0f", total_params(&mm), want);
    cr_expect(mm.qk_norm == TS_QKNORM_FULL && mm.head_dim == 128 && mm.moe.router_sigmoid &&
              mm.moe.router_expert_bias && mm.mtp_layers == 0);
    cr_expect_eq(load_edited("minimax-m2", "qk_norm_type", cJSON_CreateString("per_head")).qk_norm, TS_QKNORM_HEAD);

    /* DeepSeek-V3.2-Exp: DeepSeek-V3 plus the indexer in each of the 61 layers (and the MTP layer):
     * wq_b 1536*64*128, wk 7168*128, k_norm 2*128, weights_proj 7168*64 */
    ts_model v32 = load("deepseek-v3.2-exp"), v3 = load("deepseek-v3");
    double indexer = 1536.0 * 64 * 128 + 7168.0 * 128 + 2 * 128 + 7168.0 * 64;
    cr_expect_eq(total_params(&v32) - total_params(&v3), 61 * indexer, "the indexer: %.0f a layer", indexer);
    cr_expect(v32.mla.index_heads == 64 && v32.mla.index_head_dim == 128 && v32.mla.kv_lora_rank == 512);
    cJSON *js = ts_model_to_json(&v32);
    ts_model back;
    cr_assert_eq(ts_model_from_json("v32", js, &back), TS_OK, "%s", ts_error_message());
    cr_expect_eq(total_params(&back), total_params(&v32), "Tessera's JSON keeps the indexer");
    cJSON_Delete(js);
}

/* --- OLMo 3, Ministral, InternLM v1, Helium, JetMoE ------------------------------------------------ */

/* What each family's modelling code builds, checked against sums written out from its modules. */
Test(models_hf, hf_h_families_keep_their_modules) {
    /* Olmo3ForCausalLM, Olmo-3-1025-7B: OLMo 2's layer (q_norm and k_norm over the whole 4096-wide
     * projections, two RMSNorms), untied head; three sliding layers of 4096 then a full one */
    double h = 4096, f = 11008, V = 100278;
    double want = 2 * V * h + 32 * (4 * h * h + 2 * h + 3 * h * f + 2 * h) + h;
    ts_model o3 = load("olmo-3-1025-7b");
    cr_expect_eq(total_params(&o3), want, "Olmo-3-7B: %.0f, the modules %.0f", total_params(&o3), want);
    cr_expect(o3.qk_norm == TS_QKNORM_FULL && o3.window.tokens == 4096 && o3.window.full_every == 4 &&
              !o3.tied_embeddings);
    ts_model o3_default = load_edited("olmo-3-1025-7b", "layer_types", cJSON_CreateNull());
    cr_expect_eq(o3_default.window.full_every, 4, "Olmo3Config's default: a full layer every fourth");
    cr_expect_eq(load_edited("olmo-3-1025-7b", "sliding_window", cJSON_CreateNull()).window.tokens, 0);

    /* MinistralForCausalLM, Ministral-8B: Mistral's layer (32 heads of 128, 8 key/value heads, no
     * biases), a window of 32768 on every layer (layer_types all sliding) */
    h = 4096, f = 12288, V = 131072;
    want = 2 * V * h + 36 * (2 * h * h + 2 * h * 1024 + 3 * h * f + 2 * h) + h;
    ts_model mi = load("ministral-8b-instruct-2410");
    cr_expect_eq(total_params(&mi), want, "Ministral-8B: %.0f, the modules %.0f", total_params(&mi), want);
    cr_expect(mi.window.tokens == 32768 && mi.window.full_every == 0 && mi.kv_heads == 8 && !mi.qkv_bias);

    /* InternLMForCausalLM (remote code), InternLM-7B: Llama's layer with biases on Q, K, V (and O,
     * not counted: h a layer) from `bias` */
    f = 11008, V = 103168;
    want = 2 * V * h + 32 * (4 * h * h + 3 * h + 3 * h * f + 2 * h) + h;
    ts_model il = load("internlm-7b");
    cr_expect_eq(total_params(&il), want, "InternLM-7B: %.0f, the modules %.0f", total_params(&il), want);
    cr_expect(il.qkv_bias && !il.linear_bias && il.window.tokens == 0);
    ts_model il_nobias = load_edited("internlm-7b", "bias", cJSON_CreateFalse());
    cr_expect_eq(total_params(&il) - total_params(&il_nobias), 32 * 3 * h, "bias: Q, K and V biases");

    /* HeliumForCausalLM, Helium-1 preview 2B: Llama's layer, 20 heads of 128 on 2560, untied head */
    h = 2560, f = 7040, V = 48000;
    want = 2 * V * h + 24 * (4 * h * h + 3 * h * f + 2 * h) + h;
    ts_model he = load("helium-1-preview-2b");
    cr_expect_eq(total_params(&he), want, "Helium-2B: %.0f, the modules %.0f", total_params(&he), want);
    cr_expect(!he.tied_embeddings && he.rope_theta == 1e5 && !he.qkv_bias && !he.linear_bias);
}

/* JetMoE's attention is a mixture of experts: refused with one line naming num_local_experts. */
Test(models_hf, jetmoe_is_refused_naming_its_attention_experts) {
    char *path = test_data_path("tests/bad-input/hf-jetmoe-attention-experts.json");
    cli_result r = run_cli("plan", "--model", path, "--system", "h100-sxm-dgx", "--gpus", "64", NULL);
    cr_expect_eq(r.status, 2, "exit %d: %s", r.status, r.err);
    cr_expect(one_line_error(r.err, "plan") && strstr(r.err, "$.num_local_experts: JetMoE routes attention"), "%s",
              r.err);
    cli_result_free(&r);
    free(path);
}

/* Text-only model_types read as a family under another name: Ministral3ForCausalLM as Mistral's
 * decoder, FlexOlmoForCausalLM as OLMoE's layer (post-norms instead of pre-norms: the same count).
 * Neither is a vision wrapper, so the source line claims no vision tower. */
Test(models_hf, kin_types_read_as_their_family) {
    double h = 3072, f = 9216, V = 131072, kv = 8 * 128, q = 32 * 128;
    double want = V * h + 26 * (h * q + 2 * h * kv + q * h + 3 * h * f + 2 * h) + h;
    ts_model mi = load("ministral-3-3b-text");
    cr_expect_eq(total_params(&mi), want, "Ministral 3 3B: %.0f, the modules %.0f", total_params(&mi), want);
    cr_expect(mi.tied_embeddings && mi.head_dim == 128 && mi.kv_heads == 8 && mi.window.tokens == 0);
    cr_expect(strstr(mi.source, "ministral3 read as mistral") && !strstr(mi.source, "vision"), "%s", mi.source);

    /* FlexOlmo: 32 layers of OLMo 2's attention (Q and K normed whole) and 7 experts of 11008, top 5 */
    h = 4096, f = 11008, V = 100352;
    double attn = 4 * h * h + 2 * h + 2 * h, expert = 3 * h * f;
    want = 2 * V * h + 32 * (attn + 7 * expert + 7 * h) + h;
    ts_model fo = load("flexolmo-7x7b-1t");
    cr_expect_eq(total_params(&fo), want, "FlexOlmo-7x7B: %.0f, the modules %.0f", total_params(&fo), want);
    cr_expect(fo.moe.experts == 7 && fo.moe.top_k == 5 && fo.moe.expert_ffn == 11008 && fo.moe.every == 1 &&
              fo.qk_norm == TS_QKNORM_FULL && !fo.tied_embeddings);
    cr_expect(strstr(fo.source, "flex_olmo read as olmoe") && !strstr(fo.source, "vision"), "%s", fo.source);
    char *path = test_data_path("tests/data/hf/flexolmo-7x7b-1t.json");
    cli_result r = run_cli("plan", "--model", path, "--system", "h100-sxm-dgx", "--gpus", "64", "--top", "1", NULL);
    cr_expect_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cli_result_free(&r);
    free(path);

    /* GLM-5: DeepSeek-V3.2's layer (MLA with a 192 + 64 query/key head and a 256 value head, the DSA
     * indexer, 1 shared and 256 routed experts after 3 dense layers, one MTP layer) */
    ts_model g5 = load("glm-5");
    cr_expect(g5.mla.kv_lora_rank == 512 && g5.mla.q_lora_rank == 2048 && g5.mla.qk_nope_dim == 192 &&
              g5.mla.qk_rope_dim == 64 && g5.mla.v_dim == 256 && g5.mla.index_heads == 32 &&
              g5.mla.index_head_dim == 128 && g5.moe.experts == 256 && g5.moe.top_k == 8 &&
              g5.moe.shared_experts == 1 && g5.moe.first_dense == 3 && g5.mtp_layers == 1,
              "GLM-5 read as DeepSeek-V3.2");
    cr_expect(strstr(g5.source, "glm_moe_dsa read as deepseek_v32") && !strstr(g5.source, "vision"), "%s", g5.source);

    /* The paper's largest (arXiv:2507.07024 abstract: "up to 37 billion parameters (20 billion
     * active)"): eight experts, four a token. Its figures are whole billions; the modules give
     * 37.60B and 20.29B. */
    ts_model eight = load_edited("flexolmo-7x7b-1t", "num_experts", cJSON_CreateNumber(8));
    eight.moe.top_k = 4;
    ts_param_count pc;
    ts_model_params(&eight, &pc);
    cr_expect(fabs(pc.total - 37e9) / 37e9 < 0.02 && fabs(pc.active - 20e9) / 20e9 < 0.02,
              "FlexOlmo 8 experts, top 4: %.4g total, %.4g active", pc.total, pc.active);
}

Test(models_hf, gated_and_glm_expert_kin_keep_their_modules) {
    /* Solar Open: 48 layers of Llama's attention (64 heads of 128, 8 KV heads) and 128 experts of 1280,
     * top 8, one shared, a router without bias, on every layer; the config's intermediate_size 10240
     * builds nothing */
    double h = 4096, q = 64 * 128, kv = 8 * 128, e = 3 * h * 1280, V = 196608;
    double want = 2 * V * h + 48 * (2 * h * q + 2 * h * kv + 129 * e + 128 * h + 2 * h) + h;
    ts_model so = load("solar-open-100b");
    cr_expect_eq(total_params(&so), want, "Solar Open: %.0f, the modules %.0f", total_params(&so), want);
    cr_expect(so.moe.first_dense == 0 && so.moe.every == 1 && so.moe.top_k == 8 && so.moe.router_sigmoid &&
              so.moe.router_expert_bias && so.qk_norm == TS_QKNORM_NONE && so.mtp_layers == 0 && !so.attn_gate);
    cr_expect_eq(load_edited("solar-open-100b", "first_k_dense_replace", cJSON_CreateNumber(3)).moe.first_dense, 0,
                 "SolarOpenDecoderLayer is MoE whatever first_k_dense_replace says");
    cr_expect_eq(load_edited("solar-open-100b", "num_key_value_heads", cJSON_CreateNull()).kv_heads, 8,
                 "SolarOpenConfig's default");

    /* Trinity Mini (AFMoE): 32 layers, 32 heads of 128 with a gate of the queries' width beside them and
     * 4 KV heads, Q and K normed per head, four norms a layer; 2 dense layers of 6144, then 128 experts
     * of 1024 and one shared */
    h = 2048, q = 32 * 128, kv = 4 * 128, V = 200192;
    double attn = 3 * h * q + 2 * h * kv + 2 * 128 + 4 * h;
    want = 2 * V * h + 2 * (attn + 3 * h * 6144) + 30 * (attn + 129 * 3 * h * 1024 + 128 * h) + h;
    ts_model tm = load("trinity-mini");
    cr_expect_eq(total_params(&tm), want, "Trinity Mini: %.0f, the modules %.0f", total_params(&tm), want);
    cr_expect(tm.attn_gate && tm.norms_per_layer == 4 && tm.qk_norm == TS_QKNORM_HEAD && tm.moe.first_dense == 2 &&
              tm.moe.router_sigmoid && tm.moe.router_expert_bias && tm.moe.router_scale == 2.826 &&
              tm.window.tokens == 2048 && tm.window.full_every == 4);
    cr_expect(ts_model_layer_window(&tm, 2) == 2048 && ts_model_layer_window(&tm, 3) == 0, "every 4th layer global");
    ts_model dense = load_edited("trinity-mini", "num_dense_layers", cJSON_CreateNumber(32));
    cr_expect(dense.moe.experts == 0, "num_dense_layers = num_hidden_layers: every layer dense");
    cJSON *js = ts_model_to_json(&tm);
    cr_assert_not_null(js);
    ts_model back;
    cr_expect_eq(ts_model_from_json("trinity-mini", js, &back), TS_OK);
    cr_expect(back.attn_gate && total_params(&back) == want, "attn_gate round-trips through Tessera's JSON");
    cJSON_Delete(js);
}

/* CWM: Llama 3's layer with a window of 8192 on three layers of four, the full one first in each
 * period (CwmConfig's default): read as one every 4, the same count; transformers 5's
 * rope_parameters carry the base. A pattern that is not one global layer every N is refused. */
Test(models_hf, layer_types_of_any_phase_and_rope_parameters) {
    double h = 6144, q = 48 * 128, kv = 8 * 128, f = 21504, V = 128256;
    double want = 2 * V * h + 64 * (2 * h * q + 2 * h * kv + 3 * h * f + 2 * h) + h;
    ts_model cwm = load("cwm");
    cr_expect_eq(total_params(&cwm), want, "CWM: %.0f, the modules %.0f", total_params(&cwm), want);
    cr_expect(cwm.window.tokens == 8192 && cwm.window.full_every == 4 && !cwm.qkv_bias && !cwm.linear_bias);
    cr_expect_eq(cwm.rope_theta, 1e6, "rope_parameters.rope_theta");
    int global = 0;
    for (int i = 0; i < cwm.layers; i++) global += ts_model_layer_window(&cwm, i) == 0;
    cr_expect_eq(global, 16, "16 full-attention layers, as layer_types lists");
    cr_expect_eq(load_edited("cwm", "sliding_window", cJSON_CreateNull()).window.tokens, 0, "CwmConfig: None");

    /* per layer type (Gemma 3's v5 save): the full-attention layers' base */
    cJSON *per_type = cJSON_Parse("{\"full_attention\": {\"rope_type\": \"default\", \"rope_theta\": 1000000},"
                                  " \"sliding_attention\": {\"rope_type\": \"default\", \"rope_theta\": 10000}}");
    cr_expect_eq(load_edited("cwm", "rope_parameters", per_type).rope_theta, 1e6);

    /* a full layer at 0, 1, 5: no period (0 and 1 say one every layer, layer 2 breaks it) */
    cJSON *odd = cJSON_CreateArray();
    for (int i = 0; i < 64; i++)
        cJSON_AddItemToArray(odd, cJSON_CreateString(i == 0 || i == 1 || i == 5 ? "full_attention" : "sliding_attention"));
    char *path = test_data_path("tests/data/hf/cwm.json");
    char *text = read_file(path);
    cJSON *root = cJSON_Parse(text);
    cJSON_ReplaceItemInObject(root, "layer_types", odd);
    ts_model m;
    ts_error_clear();
    cr_expect_eq(ts_model_from_json("cwm.json", root, &m), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "$.layer_types[2]: Tessera models a full-attention layer every N layers "
                                         "(N = 1 here)") != NULL, "%s", ts_error_message());
    /* the phase-shifted pattern over a partial period would count another number of full layers */
    cJSON *partial = cJSON_CreateArray();
    for (int i = 0; i < 64; i++) cJSON_AddItemToArray(partial, cJSON_CreateString(i % 5 == 0 ? "full_attention" : "sliding_attention"));
    cJSON_ReplaceItemInObject(root, "layer_types", partial);
    ts_error_clear();
    cr_expect_eq(ts_model_from_json("cwm.json", root, &m), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "$.layer_types: a full-attention layer every 5 layers from layer 0 over 64 "
                                         "layers") != NULL, "%s", ts_error_message());
    cJSON_Delete(root);
    free(text);
    free(path);
}

/* Gemma 2 without its sandwich norms, Persimmon's fused multi-head attention with LayerNorm'd Q and K,
 * Jais 2's biased squared-ReLU MLP under LayerNorm, NanoChat's weightless norms and BitNet's sub-norm:
 * each fixture's total from its modules. */
Test(models_hf, small_families_keep_their_modules) {
    double h = 1152, q = 4 * 256, V = 256000;
    double want = V * h + 26 * (2 * h * q + 2 * h * q + 3 * h * 6912 + 2 * h) + h;
    ts_model vg = load("vaultgemma-1b");
    cr_expect_eq(total_params(&vg), want, "VaultGemma: %.0f, the modules %.0f", total_params(&vg), want);
    cr_expect(vg.norms_per_layer == 0 && vg.gelu_gate && vg.embed_scaled && vg.tied_embeddings);
    cr_expect_eq(vg.attn_softcap, 0, "null caps: none");
    cr_expect_eq(load_edited("vaultgemma-1b", "attn_logit_softcapping", NULL).attn_softcap, 50,
                 "an absent cap takes VaultGemmaConfig's 50");

    h = 4096, V = 262144;
    double f = 16384, layer = 4 * h * h + 4 * h + 4 * 64 + 2 * h * f + f + h + 4 * h;
    ts_model ps = load("persimmon-8b-base");
    want = 36 * layer + 2 * V * h + 2 * h;
    cr_expect_eq(total_params(&ps), want, "Persimmon: %.0f, the modules %.0f", total_params(&ps), want);
    cr_expect(ps.kv_heads == ps.heads && ps.head_dim == 64 && ps.activation == TS_ACT_RELU2 &&
              ps.norm == TS_NORM_LAYERNORM && ps.rope_theta == 25000, "the fused QKV is multi-head");

    h = 3328, f = 26624, V = 150272;
    want = 2 * V * h + 32 * (4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h) + 2 * h;
    ts_model j2 = load("jais-2-8b");
    cr_expect_eq(total_params(&j2), want, "Jais 2: %.0f, the modules %.0f", total_params(&j2), want);

    h = 1280, f = 5120, V = 65536;
    ts_model nc = load("nanochat-d20");
    cr_expect_eq(total_params(&nc), 2 * V * h + 20 * (4 * h * h + 2 * h * f), "NanoChat: every norm weightless");
    cr_expect(nc.logit_softcap == 15 && nc.qk_norm == TS_QKNORM_HEAD && nc.norm_affine == TS_NORM_AFFINE_NONE);

    h = 2560, f = 6912, V = 128256;
    want = V * h + 30 * (2 * h * h + 2 * h * 640 + 3 * h * f + 3 * h) + h;
    ts_model bn = load("bitnet-b1.58-2b-4t-bf16");
    cr_expect_eq(total_params(&bn), want, "BitNet: %.0f, the modules less ffn_sub_norm %.0f", total_params(&bn), want);
}

/* GLM-4.7-Flash (glm4_moe_lite): DeepSeek-V3's MLA with GLM-4.5's sigmoid router; its dense layers
 * are mlp_layer_types' leading "dense" entries (default: the first), and a dense layer after an MoE
 * one is refused naming the entry. */
Test(models_hf, glm4_moe_lite_reads_mla_and_its_layer_types) {
    ts_model m = load("glm-4.7-flash");
    cr_expect_eq(m.mla.kv_lora_rank, 512);
    cr_expect_eq(m.mla.q_lora_rank, 768);
    cr_expect_eq(m.mla.v_dim, 256);
    cr_expect_eq(m.moe.experts, 64);
    cr_expect_eq(m.moe.top_k, 4);
    cr_expect_eq(m.moe.shared_experts, 1);
    cr_expect_eq(m.moe.first_dense, 1, "mlp_layer_types' default: the first layer dense");
    cr_expect(m.moe.router_sigmoid && m.moe.router_expert_bias, "Glm4MoeTopkRouter");
    cr_expect_eq(m.mtp_layers, 1);

    cJSON *types = cJSON_CreateArray();
    for (int i = 0; i < 47; i++) cJSON_AddItemToArray(types, cJSON_CreateString(i < 3 ? "dense" : "sparse"));
    m = load_edited("glm-4.7-flash", "mlp_layer_types", types);
    cr_expect_eq(m.moe.first_dense, 3);

    char *path = test_data_path("tests/data/hf/glm-4.7-flash.json");
    char *text = read_file(path);
    cJSON *root = cJSON_Parse(text);
    types = cJSON_CreateArray();
    for (int i = 0; i < 47; i++) cJSON_AddItemToArray(types, cJSON_CreateString(i == 5 ? "dense" : "sparse"));
    cJSON_AddItemToObject(root, "mlp_layer_types", types);
    ts_model bad;
    cr_expect_eq(ts_model_from_json("flash.json", root, &bad), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "flash.json: $.mlp_layer_types[5]: a dense layer after an MoE layer") != NULL,
              "%s", ts_error_message());
    cJSON_Delete(root);
    free(text);
    free(path);
}

/* K-EXAONE (exaone_moe): EXAONE 4's attention with DeepSeek-V3's MoE block; its dense layers come
 * from is_moe_layer (the released config's booleans) when mlp_layer_types is absent, and its MTP
 * module, which transformers does not build, is not counted as a layer (mtp_layers 0). */
Test(models_hf, exaone_moe_reads_is_moe_layer_and_its_router) {
    ts_model m = load("k-exaone-236b-a23b");
    cr_expect_eq(m.moe.experts, 128);
    cr_expect_eq(m.moe.top_k, 8);
    cr_expect_eq(m.moe.shared_experts, 1);
    cr_expect_eq(m.moe.first_dense, 1, "is_moe_layer: layer 0 dense");
    cr_expect(m.moe.router_sigmoid && m.moe.router_expert_bias, "ExaoneMoeTopkRouter");
    cr_expect_eq(m.moe.router_scale, 2.5);
    cr_expect_eq(m.qk_norm, TS_QKNORM_HEAD);
    cr_expect_eq(m.window.tokens, 128);
    cr_expect_eq(m.mtp_layers, 0);
    cJSON *flags = cJSON_CreateArray();
    for (int i = 0; i < 48; i++) cJSON_AddItemToArray(flags, cJSON_CreateBool(i >= 2));
    m = load_edited("k-exaone-236b-a23b", "is_moe_layer", flags);
    cr_expect_eq(m.moe.first_dense, 2);
}

/* Granite 4.0's transformer releases are saved as granitemoehybrid (GraniteMoeHybridConfig) with
 * every layer "attention" and no experts: the layer's MLP is its shared_mlp, a SwiGLU of
 * shared_intermediate_size (intermediate_size is the experts' width). granite-4.0-micro, summed from
 * GraniteMoeHybridDecoderLayer's modules: the tied embedding 100352·2560; a layer's Q and O 2·2560²,
 * K and V 2·2560·512, shared_mlp 3·2560·8192, two RMSNorms; the final norm. With experts the layer
 * is Granite MoE Shared's (the routed experts of intermediate_size beside the shared MLP). */
Test(models_hf, granitemoehybrid_reads_its_attention_only_releases) {
    ts_model m = load("granite-4.0-micro");
    cr_expect_eq(m.moe.experts, 0);
    cr_expect_eq(m.ffn_hidden, 8192);
    cr_expect_eq(m.kv_heads, 8);
    cr_expect(m.tied_embeddings);
    double layer = 2.0 * 2560 * 2560 + 2.0 * 2560 * 512 + 3.0 * 2560 * 8192 + 2 * 2560;
    cr_expect_eq(total_params(&m), 100352.0 * 2560 + 40 * layer + 2560, "%.0f", total_params(&m));
    m = load_edited("granite-4.0-micro", "shared_intermediate_size", cJSON_CreateNumber(4096));
    cr_expect_eq(m.ffn_hidden, 4096, "the shared MLP's width, not intermediate_size's");
    char *path = test_data_path("tests/data/hf/granite-4.0-micro.json"), *text = read_file(path);
    cJSON *root = cJSON_Parse(text);
    cJSON_ReplaceItemInObject(root, "num_local_experts", cJSON_CreateNumber(16));
    cr_expect_neq(ts_model_from_json("moe", root, &m), TS_OK, "experts with num_experts_per_tok 0");
    cr_expect(strstr(ts_error_message(), "num_experts_per_tok"), "%s", ts_error_message());
    cJSON_ReplaceItemInObject(root, "num_experts_per_tok", cJSON_CreateNumber(4));
    cr_assert_eq(ts_model_from_json("moe", root, &m), TS_OK, "%s", ts_error_message());
    cr_expect_eq(m.moe.experts, 16);
    cr_expect_eq(m.moe.top_k, 4);
    cr_expect_eq(m.moe.expert_ffn, 8192);
    cr_expect_eq(m.moe.shared_ffn, 8192);
    cr_expect_eq(m.moe.shared_experts, 1);
    cJSON_Delete(root);
    free(text);
    free(path);
}

/* Snowflake Arctic (remote code ArcticConfig / ArcticDecoderLayer): Mixtral's layer whose MoE
 * layers, with parallel_attn_mlp_res, add a dense residual SwiGLU MLP of hidden_size, read as a
 * shared expert of that width. Summed from the modules: the untied embedding and head 2·32000·7168;
 * a layer's Q and O 2·7168², K and V 2·7168·1024, the router 7168·128, 128 experts of 3·7168·4864,
 * the residual MLP 3·7168², two RMSNorms (the residual MLP's own norm, 7168 a layer, is not
 * counted); the final norm. Snowflake's figures: 480B total, 17B active ("10B dense + 128×3.66B"). */
Test(models_hf, arctic_reads_its_residual_mlp_as_a_shared_expert) {
    ts_model m = load("snowflake-arctic-instruct");
    cr_expect(m.moe.experts == 128 && m.moe.top_k == 2 && m.moe.every == 1 && m.moe.first_dense == 0,
              "128 experts, top 2, on every layer (moe_layer_frequency 1)");
    cr_expect(m.moe.shared_experts == 1 && m.moe.shared_ffn == 7168, "the residual MLP: a shared expert of hidden_size");
    double h = 7168, layer = 2 * h * h + 2 * h * 1024 + h * 128 + 128 * 3 * h * 4864 + 3 * h * h + 2 * h;
    cr_expect_eq(total_params(&m), 2 * 32000 * h + 35 * layer + h, "%.0f", total_params(&m));
    m = load_edited("snowflake-arctic-instruct", "moe_layer_frequency", NULL);
    cr_expect_eq(m.moe.every, 2, "ArcticConfig's default: an MoE layer every 2");
    cr_expect_eq(m.moe.first_dense, 1, "(i + 1) %% 2 == 0: layers 1, 3, 5, ...");
    m = load_edited("snowflake-arctic-instruct", "parallel_attn_mlp_res", cJSON_CreateFalse());
    cr_expect_eq(m.moe.shared_experts, 0);
}
