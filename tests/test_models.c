/* Model specs: parameter counts against published totals, Hugging Face loading, round trips, and
 * the exact error message for each kind of bad input. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/paths.h"
#include "common/stats.h"
#include "models/model.h"
#include "planner/cost.h"
#include "tests/helpers.h"

static ts_model load_ok(const char *name_or_path) {
    ts_model m;
    ts_error_clear();
    ts_status st = ts_model_load(name_or_path, &m);
    cr_assert_eq(st, TS_OK, "loading %s: %s", name_or_path, ts_error_message());
    return m;
}

static ts_model load_hf(const char *file) {
    char rel[256];
    snprintf(rel, sizeof rel, "tests/data/hf/%s.json", file);
    char *path = test_data_path(rel);
    ts_model m = load_ok(path);
    free(path);
    return m;
}

static ts_param_count params_of(const ts_model *m) {
    ts_param_count pc;
    ts_model_params(m, &pc);
    return pc;
}

static void expect_near(const char *what, double got, double want, double rel_tol) {
    cr_expect(fabs(got - want) <= rel_tol * want, "%s: %.6g parameters, published %.6g (%+.2f%%)",
              what, got, want, 100 * (got - want) / want);
}

/* Published totals: model cards and papers (Llama 2 Table 1 / model card; Llama 3 model card;
 * Mixtral paper and announcement; DeepSeek-V3 report; GPT-3 Table 2.1; Qwen3 technical report,
 * arXiv:2505.09388, Table 2). */
Test(models, zoo_counts_match_published_totals) {
    static const struct {
        const char *name;
        double total, active; /* active 0: dense */
    } cases[] = {
        {"llama2-7b", 6.738e9, 0},      {"llama2-13b", 13.016e9, 0},
        {"llama2-70b", 68.976e9, 0},    {"llama3-8b", 8.03e9, 0},
        {"llama3-70b", 70.55e9, 0},     {"llama3-405b", 405.9e9, 0},
        {"gpt3-175b", 174.6e9, 0},      {"mixtral-8x7b", 46.7e9, 12.9e9},
        {"mixtral-8x22b", 140.6e9, 39.1e9}, {"deepseek-v3", 671e9, 0},
        {"nemotron4-15b", 15.6e9, 0},   {"qwen3-235b-a22b", 235e9, 0}, /* Qwen3 report: 235B, 22B active */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ts_model m = load_ok(cases[i].name);
        ts_param_count pc = params_of(&m);
        expect_near(cases[i].name, pc.total, cases[i].total, 0.005);
        if (cases[i].active > 0)
            expect_near(cases[i].name, pc.active, cases[i].active, 0.005);
        else if (m.moe.experts == 0)
            cr_expect_eq(pc.active, pc.total, "%s: a dense model is all active", cases[i].name);
    }
}

/* Exact counts that PyTorch reports for the real checkpoints (sum of p.numel()). */
Test(models, zoo_counts_are_exact) {
    ts_model m = load_ok("llama2-7b");
    cr_expect_eq(params_of(&m).total, 6738415616.0);
    m = load_ok("llama2-70b");
    cr_expect_eq(params_of(&m).total, 68976648192.0);
    m = load_ok("mixtral-8x7b");
    cr_expect_eq(params_of(&m).total, 46702792704.0);
    m = load_ok("tiny");
    ts_param_count pc = params_of(&m);
    /* 4 * (2*256*256 + 2*256*128 + 3*256*688 + 2*256) + 2*512*256 (untied) + 256 */
    cr_expect_eq(pc.total, 3033344.0 + 512 * 256);
    cr_expect_eq(pc.lm_head, 512.0 * 256, "tiny is untied, as Llama");
    m = load_ok("tiny-moe");
    pc = params_of(&m);
    cr_expect_eq(pc.expert, 3.0 * 256 * 344);
    cr_expect_eq(pc.total, 5150976.0 + 512 * 256);
    cr_expect_eq(pc.active, 5150976.0 + 512 * 256 - 4 * 2 * 3.0 * 256 * 344);
}

/* DeepSeek-V3 publishes "671B total, 37B activated"; its checkpoint (685B) adds the MTP module
 * with its own copy of the embedding and head. The exact activated count is 37.55e9: "37B" is
 * the figure cut to two digits, so that check allows 2%. */
Test(models, deepseek_v3_active_and_mtp) {
    ts_model m = load_ok("deepseek-v3");
    ts_param_count pc = params_of(&m);
    expect_near("deepseek-v3 total", pc.total, 671e9, 0.005);
    expect_near("deepseek-v3 active", pc.active, 37e9, 0.02);
    expect_near("deepseek-v3 checkpoint", pc.total + pc.mtp + pc.embedding + pc.lm_head, 685e9,
                0.005);
    /* One MoE layer + enorm, hnorm (h each) + eh_proj (2h x h). */
    cr_expect_eq(pc.mtp, pc.per_layer_moe + 2 * 7168.0 + 2 * 7168.0 * 7168);
    cr_expect_eq(pc.mtp, 11610060800.0);
    cr_expect(!ts_model_layer_is_moe(&m, 2));
    cr_expect(ts_model_layer_is_moe(&m, 3));
    cr_expect(ts_model_layer_is_moe(&m, 60));
    cr_expect(!ts_model_layer_is_moe(&m, 61), "past the last layer");
    cr_expect_eq(ts_model_layer_params(&m, 0), pc.per_layer_dense);
    cr_expect_eq(ts_model_layer_params(&m, 3), pc.per_layer_moe);
    double sum = pc.embedding + pc.lm_head + m.hidden; /* final RMSNorm */
    for (int l = 0; l < m.layers; l++) sum += ts_model_layer_params(&m, l);
    cr_expect_eq(sum, pc.total, "layers add up to the total");
}

static double num_at(const cJSON *obj, const char *key) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    cr_assert(cJSON_IsNumber(it), "validation file: %s is not a number", key);
    return it->valuedouble;
}

/* Megatron-LM SC'21 eq. 2: P = 12lh^2 (1 + 13/(12h) + (V+s)/(12lh)) counts everything but the
 * final LayerNorm, so the exact count is eq. 2 + 2h; the table's params_eq2 is it rounded. */
Test(models, megatron_sc21_table1_rows) {
    char *path = test_data_path("validation/published/megatron-sc21-table1.json");
    cJSON *rows = NULL;
    ts_error_clear();
    cr_assert_eq(ts_json_load_file(path, &rows), TS_OK, "%s", ts_error_message());
    cr_assert(cJSON_GetArraySize(rows) == 10);
    const cJSON *row;
    cJSON_ArrayForEach(row, rows) {
        const cJSON *model = cJSON_GetObjectItemCaseSensitive(row, "model");
        double eq2_b = num_at(cJSON_GetObjectItemCaseSensitive(row, "derived"), "params_eq2");
        char name[64];
        snprintf(name, sizeof name, "megatron-gpt-%gb", num_at(model, "params_b"));
        ts_model m = load_ok(name);
        cr_expect_eq(m.layers, num_at(model, "layers"), "%s", name);
        cr_expect_eq(m.hidden, num_at(model, "hidden"), "%s", name);
        cr_expect_eq(m.heads, num_at(model, "heads"), "%s", name);
        cr_expect_eq(m.ffn_hidden, num_at(model, "ffn"), "%s", name);
        cr_expect_eq(m.vocab, num_at(model, "vocab"), "%s", name);
        cr_expect_eq(m.max_seq, num_at(model, "seq_len"), "%s", name);
        ts_param_count pc = params_of(&m);
        double l = m.layers, h = (double)m.hidden, v = (double)m.vocab, s = (double)m.max_seq;
        double eq2 = 12 * l * h * h * (1 + 13 / (12 * h) + (v + s) / (12 * l * h));
        cr_expect(fabs(pc.total - (eq2 + 2 * h)) < 1e-6 * eq2, "%s: %.0f vs eq. 2 %.0f + 2h", name,
                  pc.total, eq2);
        expect_near(name, pc.total, eq2_b * 1e9, 0.005);
    }
    cJSON_Delete(rows);
    free(path);
}

Test(models, hf_configs_match_published_totals) {
    static const struct {
        const char *file;
        double total, active;
    } cases[] = {
        {"gpt2", 124.44e6, 0},          {"gpt-neox-20b", 20.55e9, 0},
        {"bloom-560m", 559.2e6, 0},     {"opt-125m", 125.2e6, 0},
        {"opt-350m", 331.2e6, 0},       {"qwen2-7b", 7.62e9, 0},
        {"mistral-7b", 7.24e9, 0},      {"llama2-7b", 6.738e9, 0},
        {"mixtral-8x7b", 46.7e9, 12.9e9}, {"deepseek-v3", 671e9, 0},
        {"qwen1.5-moe-a2.7b", 14.3e9, 2.7e9},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ts_model m = load_hf(cases[i].file);
        ts_param_count pc = params_of(&m);
        expect_near(cases[i].file, pc.total, cases[i].total, 0.005);
        if (cases[i].active > 0) expect_near(cases[i].file, pc.active, cases[i].active, 0.005);
    }
    /* Exact, as PyTorch counts the checkpoints. */
    ts_model m = load_hf("gpt2");
    cr_expect_eq(params_of(&m).total, 124439808.0);
    m = load_hf("opt-125m");
    cr_expect_eq(params_of(&m).total, 125239296.0);
    m = load_hf("bloom-560m");
    cr_expect_eq(params_of(&m).total, 559214592.0);
}

Test(models, hf_fields_follow_the_architecture) {
    ts_model m = load_hf("gpt2");
    cr_expect_str_eq(m.name, "gpt2", "no _name_or_path: the file's name");
    cr_expect_eq(m.ffn_hidden, 3072, "n_inner absent: 4h");
    cr_expect(m.position == TS_POS_LEARNED && m.norm == TS_NORM_LAYERNORM);
    cr_expect(m.tied_embeddings && m.qkv_bias && m.linear_bias && m.dropout);
    m = load_hf("llama2-7b");
    cr_expect_str_eq(m.name, "meta-llama/Llama-2-7b-hf");
    cr_expect(!m.tied_embeddings && !m.qkv_bias && !m.dropout);
    m = load_hf("qwen2-7b");
    cr_expect(m.qkv_bias && !m.linear_bias);
    cr_expect_eq(m.kv_heads, 4);
    cr_expect_eq(m.head_dim, 128);
    m = load_hf("bloom-560m");
    cr_expect(m.position == TS_POS_ALIBI && m.embed_norm && m.tied_embeddings);
    cr_expect_eq(m.ffn_hidden, 4096);
    m = load_hf("opt-125m");
    cr_expect_eq(m.position_offset, 2);
    cr_expect_eq(m.embed_dim, 0, "word_embed_proj_dim == hidden_size");
    cr_expect_eq(params_of(&m).embedding, 50272.0 * 768 + 2050.0 * 768);
    m = load_hf("opt-350m");
    cr_expect_eq(m.embed_dim, 512);
    m = load_hf("deepseek-v3");
    cr_expect_eq(m.mla.q_lora_rank, 1536);
    cr_expect_eq(m.head_dim, 192);
    cr_expect_eq(m.moe.first_dense, 3);
    cr_expect_eq(m.mtp_layers, 1);
    m = load_hf("gpt-neox-20b");
    cr_expect(m.position == TS_POS_ROPE && !m.tied_embeddings && m.qkv_bias && m.linear_bias);
}

static void expect_same_model(const ts_model *a, const ts_model *b, const char *what) {
    cr_expect_eq(memcmp(a, b, sizeof *a), 0, "%s: models differ", what);
    cr_expect_str_eq(a->name, b->name, "%s", what);
    cr_expect_eq(a->layers, b->layers, "%s", what);
    cr_expect_eq(a->hidden, b->hidden, "%s", what);
    cr_expect_eq(a->moe.experts, b->moe.experts, "%s", what);
    cr_expect_eq(a->mla.kv_lora_rank, b->mla.kv_lora_rank, "%s", what);
}

/* A Hugging Face config and Tessera's spec of the same model describe the same network. */
Test(models, hf_and_own_format_agree) {
    static const char *const names[] = {"llama2-7b", "mixtral-8x7b", "deepseek-v3"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        ts_model own = load_ok(names[i]), hf = load_hf(names[i]);
        ts_param_count a = params_of(&own), b = params_of(&hf);
        cr_expect_eq(a.total, b.total, "%s: %.0f vs %.0f", names[i], a.total, b.total);
        cr_expect_eq(a.active, b.active, "%s", names[i]);
        cr_expect_eq(a.mtp, b.mtp, "%s", names[i]);
        /* Everything but the name and source. */
        memcpy(hf.name, own.name, sizeof hf.name);
        memcpy(hf.source, own.source, sizeof hf.source);
        expect_same_model(&own, &hf, names[i]);
    }
}

static void expect_round_trip(const ts_model *m, const char *what) {
    cJSON *json = ts_model_to_json(m);
    cr_assert_not_null(json, "%s", what);
    ts_model back;
    ts_error_clear();
    ts_status st = ts_model_from_json("round-trip", json, &back);
    cr_assert_eq(st, TS_OK, "%s: %s", what, ts_error_message());
    expect_same_model(m, &back, what);
    cJSON_Delete(json);
}

Test(models, to_json_round_trips) {
    char names[64][64];
    int n = ts_zoo_list("models/llm", names, 64);
    cr_assert_geq(n, 23, "the zoo has %d models", n);
    for (int i = 0; i < n; i++) {
        ts_model m = load_ok(names[i]);
        expect_round_trip(&m, names[i]);
    }
    static const char *const hf[] = {"gpt2", "opt-350m", "bloom-560m", "deepseek-v3",
                                     "qwen1.5-moe-a2.7b", "gpt-neox-20b"};
    for (size_t i = 0; i < sizeof hf / sizeof hf[0]; i++) {
        ts_model m = load_hf(hf[i]);
        expect_round_trip(&m, hf[i]);
    }
}

/* --- bad input: the whole message, as the user sees it ------------------------------------- */

#define BASE                                                                                       \
    "\"name\": \"t\", \"hidden\": 8192, \"heads\": 64, \"ffn_hidden\": 28672, \"vocab\": 32000"

/* Writes `json`, loads it, and expects TS_ERR_INPUT with "<path>" + `tail` as the message. */
static void expect_bad(const char *json, const char *tail) {
    char *path = test_write_temp(json);
    ts_model m;
    ts_error_clear();
    ts_status st = ts_model_load(path, &m);
    char want[1024];
    snprintf(want, sizeof want, "%s%s", path, tail);
    cr_expect_eq(st, TS_ERR_INPUT, "%s: status %s", json, ts_status_name(st));
    cr_expect_str_eq(ts_error_message(), want);
    test_remove_temp(path);
}

Test(models, bad_missing_layers) {
    expect_bad("{" BASE "}", ": $.layers: missing field, expected an integer");
}

Test(models, bad_layers_as_string) {
    expect_bad("{" BASE ", \"layers\": \"80\"}",
               ": $.layers: expected an integer in [1, 100000], got a string");
}

Test(models, bad_negative_hidden) {
    expect_bad("{\"name\": \"t\", \"layers\": 2, \"hidden\": -8192, \"heads\": 64, "
               "\"ffn_hidden\": 1, \"vocab\": 1}",
               ": $.hidden: expected an integer in [1, 16777216], got -8192");
}

Test(models, bad_zero_heads) {
    expect_bad("{\"name\": \"t\", \"layers\": 2, \"hidden\": 64, \"heads\": 0, \"ffn_hidden\": 1, "
               "\"vocab\": 1}",
               ": $.heads: expected an integer in [1, 65536], got 0");
}

Test(models, bad_heads_not_divisible_by_kv_heads) {
    expect_bad("{" BASE ", \"layers\": 80, \"kv_heads\": 6}",
               ": $.heads: 64 heads are not divisible by kv_heads 6");
}

Test(models, bad_top_k_above_experts) {
    expect_bad("{" BASE ", \"layers\": 32, \"moe\": {\"experts\": 8, \"top_k\": 9}}",
               ": $.moe.top_k: expected an integer in [1, 8], got 9");
}

Test(models, bad_load_cv) {
    expect_bad("{" BASE ", \"layers\": 4, \"moe\": {\"experts\": 8, \"top_k\": 2, \"load_cv\": -0.5}}",
               ": $.moe.load_cv: expected a number in [0, 100], got -0.5");
}

/* The busiest EP rank's share (ts_moe_load_factor): 1 balanced or on one rank, the capacity with a
 * capacity factor, else 1 + load_cv / sqrt(E / ep) · E[max of ep standard normals], whose values
 * are tabulated (Tippett 1925; 0.5642 for 2, 1.0294 for 4, 1.4236 for 8, 2.0697 for 32). */
Test(models, moe_load_factor) {
    ts_moe x = {.experts = 64, .top_k = 2};
    cr_expect_eq(ts_moe_load_factor(&x, 8), 1.0, "balanced");
    x.load_cv = 0.8;
    cr_expect_eq(ts_moe_load_factor(&x, 1), 1.0, "one rank holds every expert");
    const int ep[] = {2, 4, 8, 32};
    const double emax[] = {0.5642, 1.0294, 1.4236, 2.0697};
    for (int i = 0; i < 4; i++) {
        double want = 1 + 0.8 / sqrt(64.0 / ep[i]) * emax[i];
        cr_expect(fabs(ts_moe_load_factor(&x, ep[i]) - want) < 1e-4, "ep %d: %.6f, expected %.6f", ep[i],
                  ts_moe_load_factor(&x, ep[i]), want);
    }
    x.capacity_factor = 1.25;
    cr_expect_eq(ts_moe_load_factor(&x, 8), 1.25, "tokens beyond capacity are dropped");
    /* Unpadded, an expert runs what it keeps: the capacity when the busiest exceeds it (1.40 at
     * ep 8), the dropless share when that is smaller (1.10 at ep 2). */
    x.capacity_unpadded = 1;
    cr_expect_eq(ts_moe_load_factor(&x, 8), 1.25);
    cr_expect(fabs(ts_moe_load_factor(&x, 2) - (1 + 0.8 / sqrt(32.0) * 0.5642)) < 1e-4, "%g", ts_moe_load_factor(&x, 2));
}

Test(models, bad_first_dense_past_the_layers) {
    expect_bad("{" BASE ", \"layers\": 4, \"moe\": {\"experts\": 8, \"top_k\": 2, "
               "\"first_dense\": 4}}",
               ": $.moe.first_dense: expected an integer in [0, 3], got 4");
}

Test(models, bad_unknown_activation) {
    expect_bad("{" BASE ", \"layers\": 80, \"activation\": \"silu\"}",
               ": $.activation: expected \"gelu\" | \"swiglu\" | \"relu2\", got \"silu\"");
}

Test(models, bad_misspelt_field) {
    expect_bad("{" BASE ", \"layers\": 80, \"kv_head\": 8}",
               ": $.kv_head: unknown field, expected one of name, source, notes, layers, hidden, "
               "heads, kv_heads, head_dim, ffn_hidden, vocab, max_seq, activation, norm, position, "
               "position_offset, embed_dim, tied_embeddings, qkv_bias, linear_bias, embed_norm, "
               "dropout, moe, mla, mtp_layers, rope_theta, qk_norm, norms_per_layer, window, attn_softcap, "
               "logit_softcap, attn_sinks, attn_gate, router_bias, embed_scaled, gelu_gate, norm_affine");
}

Test(models, bad_dense_model_without_ffn) {
    expect_bad("{\"name\": \"t\", \"layers\": 2, \"hidden\": 64, \"heads\": 4, \"ffn_hidden\": 0, "
               "\"vocab\": 10}",
               ": $.ffn_hidden: expected an integer >= 1 because some layers are dense, got 0");
}

Test(models, bad_head_dim_needed) {
    expect_bad("{\"name\": \"t\", \"layers\": 2, \"hidden\": 100, \"heads\": 7, \"ffn_hidden\": 1, "
               "\"vocab\": 10}",
               ": $.head_dim: missing field, expected an integer because hidden 100 is not "
               "divisible by heads 7");
}

Test(models, bad_truncated_json) {
    expect_bad("{\n  \"name\": \"t\",\n  \"layers\": 8",
               ":3:14: invalid JSON: unexpected end of input (truncated?)");
}

Test(models, bad_not_an_object) {
    expect_bad("[1, 2]", ": $: expected an object, got an array");
}

Test(models, bad_unknown_zoo_name) {
    ts_model m;
    ts_error_clear();
    cr_expect_eq(ts_model_load("no-such-model", &m), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "no-such-model: unknown name") == ts_error_message(), "%s",
              ts_error_message());
    cr_expect(strstr(ts_error_message(), "models/llm") != NULL, "%s", ts_error_message());
}

Test(models, bad_hf_configs_name_the_hf_key) {
    expect_bad("{\"model_type\": \"t5\", \"d_model\": 512}",
               ": $.model_type: got \"t5\", expected a known architectures[] entry or one of llama, mistral, "
               "mixtral, qwen2, qwen2_moe, deepseek_v3, gpt2, "
               "gpt_neox, bloom, opt, qwen3, qwen3_moe, gemma2, gemma3_text, gemma3, phi3, gpt_oss, deepseek_v2, "
               "kimi_k2, olmo2, starcoder2, gptj, llama4, llama4_text, glm4_moe, "
               "olmoe, nemotron, granite, granitemoe, granitemoeshared, phimoe, dbrx, olmo, gemma, phi, falcon, "
               "cohere, stablelm, cohere2, "
               "ernie4_5, ernie4_5_moe, hunyuan_v1_dense, hunyuan_v1_moe, smollm3, deepseek, minicpm, seed_oss, "
               "gpt_bigcode, gpt_neo, codegen, mpt, internlm2, glm, glm4, "
               "chatglm, baichuan, qwen, exaone, exaone4, "
               "minimax_m2, bailing_moe, deepseek_v32, mimo, dots1, arcee, apertus, "
               "olmo3, ministral, internlm, helium, solar_open, afmoe, cwm, vaultgemma, persimmon, jais2, "
               "nanochat, bitnet, glm4_moe_lite, exaone_moe, granitemoehybrid, arctic");
    /* No model_type: the architecture decides (issue 19), and its reader names the missing key. */
    expect_bad("{\"architectures\": [\"LlamaForCausalLM\"]}", ": $.hidden_size: missing field, expected an integer");
    expect_bad("{\"model_type\": \"llama\", \"hidden_size\": 4096, \"num_attention_heads\": 32, "
               "\"intermediate_size\": 11008, \"vocab_size\": 32000}",
               ": $.num_hidden_layers: missing field, expected an integer");
    expect_bad("{\"model_type\": \"mistral\", \"hidden_size\": 4096, \"num_hidden_layers\": 32, "
               "\"num_attention_heads\": 32, \"num_key_value_heads\": 6, "
               "\"intermediate_size\": 14336, \"vocab_size\": 32000}",
               ": $.num_key_value_heads: num_attention_heads 32 is not divisible by "
               "num_key_value_heads 6");
    expect_bad("{\"model_type\": \"mixtral\", \"hidden_size\": 4096, \"num_hidden_layers\": 32, "
               "\"num_attention_heads\": 32, \"intermediate_size\": 14336, \"vocab_size\": 32000, "
               "\"num_local_experts\": 8, \"num_experts_per_tok\": 9}",
               ": $.num_experts_per_tok: expected an integer in [1, 8], got 9");
    expect_bad("{\"model_type\": \"gpt2\", \"n_embd\": \"768\", \"n_layer\": 12, \"n_head\": 12, "
               "\"vocab_size\": 50257}",
               ": $.n_embd: expected an integer in [1, 16777216], got a string");
}

/* Absurd but in range: a 1e15+ parameter model loads and counts without overflow. */
Test(models, absurd_sizes_count_without_overflow) {
    static const char *const specs[] = {
        "{\"name\": \"big\", \"layers\": 1000, \"hidden\": 262144, \"heads\": 2048, "
        "\"ffn_hidden\": 1048576, \"vocab\": 2147483648}",
        "{\"name\": \"huge\", \"layers\": 100000, \"hidden\": 16777216, \"heads\": 65536, "
        "\"ffn_hidden\": 268435456, \"vocab\": 2147483648, \"max_seq\": 134217728, "
        "\"position\": \"learned\", \"moe\": {\"experts\": 65536, \"top_k\": 65536}}",
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        char *path = test_write_temp(specs[i]);
        ts_model m = load_ok(path);
        ts_param_count pc = params_of(&m);
        cr_expect(isfinite(pc.total) && pc.total > 1e15, "%s: %g", m.name, pc.total);
        cr_expect(isfinite(pc.active) && pc.active > 0 && pc.active <= pc.total, "%s", m.name);
        cr_expect(ts_model_layer_params(&m, m.layers - 1) > 0, "%s", m.name);
        test_remove_temp(path);
    }
}

/* MoE placement: Qwen2-MoE's decoder_sparse_step and Tessera's first_dense/every agree. */
Test(models, moe_layer_placement) {
    char *path = test_write_temp(
        "{\"model_type\": \"qwen2_moe\", \"hidden_size\": 64, \"num_hidden_layers\": 6, "
        "\"num_attention_heads\": 4, \"intermediate_size\": 128, \"vocab_size\": 100, "
        "\"num_experts\": 4, \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32, "
        "\"decoder_sparse_step\": 2}");
    ts_model m = load_ok(path);
    for (int l = 0; l < m.layers; l++)
        cr_expect_eq(ts_model_layer_is_moe(&m, l), (l + 1) % 2 == 0, "layer %d", l);
    cr_expect_eq(m.moe.shared_experts, 0);
    ts_param_count pc = params_of(&m);
    double sum = pc.embedding + pc.lm_head + m.hidden;
    for (int l = 0; l < m.layers; l++) sum += ts_model_layer_params(&m, l);
    cr_expect_eq(sum, pc.total);
    cr_expect_eq(pc.per_layer_moe - pc.per_layer_dense,
                 64.0 * 4 + 4 * 3.0 * 64 * 32 - 3.0 * 64 * 128);
    test_remove_temp(path);
}

Test(models, validate_checks_structs_built_in_code) {
    ts_model m = load_ok("mixtral-8x7b");
    ts_error_clear();
    cr_expect_eq(ts_model_validate("code", &m), TS_OK);
    m.moe.top_k = 9;
    cr_expect_eq(ts_model_validate("code", &m), TS_ERR_INPUT);
    cr_expect_str_eq(ts_error_message(), "code: $.moe.top_k: expected an integer in [1, 8] "
                                         "(experts), got 9");
    m = load_ok("llama2-70b");
    m.kv_heads = 6;
    ts_error_clear();
    cr_expect_eq(ts_model_validate("code", &m), TS_ERR_INPUT);
    cr_expect_str_eq(ts_error_message(), "code: $.heads: 64 heads are not divisible by kv_heads 6");
}

/* node.speed_cv: a fraction; out of range is refused with its path. */
Test(models, bad_speed_cv) {
    ts_system s;
    cr_assert_eq(ts_system_load("h100-sxm-dgx", &s), TS_OK, "%s", ts_error_message());
    cJSON *doc = ts_system_to_json(&s);
    cr_assert_not_null(doc);
    cJSON_AddNumberToObject(cJSON_GetObjectItemCaseSensitive(doc, "node"), "speed_cv", 1.5);
    ts_system back;
    cr_expect_eq(ts_system_from_json("inline", doc, &back), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "speed_cv: expected a number in [0, 1], got 1.5") != NULL, "%s",
              ts_error_message());
    ts_error_clear();
    cJSON_Delete(doc);
}

/* gpu.fp8_any_layout: the B200 files say it, Hopper's do not; written back when set; a string is
 * refused with its path. */
Test(models, fp8_any_layout) {
    ts_system h100, b200, back;
    cr_assert_eq(ts_system_load("h100-sxm-dgx", &h100), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_system_load("b200-dgx", &b200), TS_OK, "%s", ts_error_message());
    cr_expect(!h100.fp8_any_layout && b200.fp8_any_layout);
    cJSON *doc = ts_system_to_json(&b200);
    cr_assert_not_null(doc);
    cr_assert_eq(ts_system_from_json("inline", doc, &back), TS_OK, "%s", ts_error_message());
    cr_expect(back.fp8_any_layout);
    cJSON_ReplaceItemInObject(cJSON_GetObjectItemCaseSensitive(doc, "gpu"), "fp8_any_layout", cJSON_CreateString("yes"));
    cr_expect_eq(ts_system_from_json("inline", doc, &back), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "fp8_any_layout") != NULL, "%s", ts_error_message());
    ts_error_clear();
    cJSON_Delete(doc);
}

/* Sets `obj`.`key` of a spec's JSON to `value` and expects the loader to refuse it with a message
 * holding `message`. */
static void expect_refused(cJSON *doc, const char *obj, const char *key, double value, const char *message) {
    ts_system back;
    cJSON_ReplaceItemInObject(cJSON_GetObjectItemCaseSensitive(doc, obj), key, cJSON_CreateNumber(value));
    cr_expect_eq(ts_system_from_json("inline", doc, &back), TS_ERR_INPUT, "%s.%s %g accepted", obj, key, value);
    cr_expect(strstr(ts_error_message(), message) != NULL, "%s", ts_error_message());
    ts_error_clear();
}

/* node.gauge_flops_per_s: a rate, negative refused with its path; read and written. */
Test(models, gauge_flops_per_s) {
    ts_system s;
    cr_assert_eq(ts_system_load("cpu-localhost", &s), TS_OK, "%s", ts_error_message());
    cr_expect_eq(s.gauge_flops_per_s, 0, "unknown unless measured");
    s.gauge_flops_per_s = 4.25e10;
    cJSON *doc = ts_system_to_json(&s);
    cr_assert_not_null(doc);
    ts_system back;
    cr_assert_eq(ts_system_from_json("inline", doc, &back), TS_OK, "%s", ts_error_message());
    cr_expect_eq(back.gauge_flops_per_s, 4.25e10);
    expect_refused(doc, "node", "gauge_flops_per_s", -1, "gauge_flops_per_s: expected a number in [0, 1e+18], got -1");
    cJSON_Delete(doc);
}

/* node.speed_cv_window_s and node.speed_cv_decay: read and written; a decay needs the window it
 * decays from, and out-of-range values are refused with their path. */
Test(models, speed_cv_span) {
    ts_system s;
    cr_assert_eq(ts_system_load("cpu-localhost", &s), TS_OK, "%s", ts_error_message());
    cr_expect(s.speed_cv_window_s == 0 && s.speed_cv_decay == 0, "the same spread at every span by default");
    s.speed_cv = 0.05, s.speed_cv_window_s = 0.75, s.speed_cv_decay = 0.125;
    cJSON *doc = ts_system_to_json(&s);
    cr_assert_not_null(doc);
    ts_system back;
    cr_assert_eq(ts_system_from_json("inline", doc, &back), TS_OK, "%s", ts_error_message());
    cr_expect(back.speed_cv_window_s == 0.75 && back.speed_cv_decay == 0.125);
    expect_refused(doc, "node", "speed_cv_decay", 1.5, "speed_cv_decay: expected a number in [0, 1], got 1.5");
    cJSON_DeleteItemFromObject(cJSON_GetObjectItemCaseSensitive(doc, "node"), "speed_cv_window_s");
    expect_refused(doc, "node", "speed_cv_decay", 0.5, "node.speed_cv_decay 0.5 needs node.speed_cv_window_s > 0");
    cJSON_Delete(doc);
}

/* gpu.kernel_latency_s: kept through JSON, fenced to [0, 1] s, and added once per kernel by the
 * memory-bound, optimizer and attention costs. */
Test(models, kernel_latency) {
    ts_system s;
    cr_assert_eq(ts_system_load("h100-sxm-dgx", &s), TS_OK, "%s", ts_error_message());
    cr_expect_eq(s.kernel_latency_s, 0, "none by default");
    double mem = ts_memory_s(&s, 1e9, 3), opt = ts_optimizer_s(&s, 1e9);
    double attn = ts_attention_s(&s, TS_DTYPE_BF16, 4e12, 1e12);
    s.kernel_latency_s = 5e-6;
    cr_expect(fabs(ts_memory_s(&s, 1e9, 3) - (mem + 15e-6)) < 1e-15, "three kernels");
    cr_expect(fabs(ts_optimizer_s(&s, 1e9) - (opt + 5e-6)) < 1e-15, "one kernel");
    cr_expect(fabs(ts_attention_s(&s, TS_DTYPE_BF16, 4e12, 1e12) - (attn + 20e-6)) < 1e-15, "four kernels");
    cr_expect_eq(ts_memory_s(&s, 0, 3), 0, "no bytes, no kernel");
    cJSON *doc = ts_system_to_json(&s);
    cr_assert_not_null(doc);
    ts_system back;
    cr_assert_eq(ts_system_from_json("inline", doc, &back), TS_OK, "%s", ts_error_message());
    cr_expect_eq(back.kernel_latency_s, 5e-6);
    expect_refused(doc, "gpu", "kernel_latency_s", 2, "kernel_latency_s: expected a number in [0, 1], got 2");
    cJSON_Delete(doc);
}

/* common/stats.h ts_cv: sample standard deviation over mean; 0 for fewer than two values. */
Test(models, coefficient_of_variation) {
    const double v[] = {0.9, 1.0, 1.1, 1.0};
    double want = sqrt((0.01 + 0 + 0.01 + 0) / 3) / 1.0;
    cr_expect(fabs(ts_cv(v, 4) - want) < 1e-12, "cv %g, expected %g", ts_cv(v, 4), want);
    cr_expect_eq(ts_cv(v, 1), 0.0);
    const double flat[] = {2, 2, 2};
    cr_expect_eq(ts_cv(flat, 3), 0.0);
}
