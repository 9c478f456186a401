/* The planner against published measurements (planner/published.h, data in
 * validation/published/): every NVIDIA H100 recipe row's step time and every Megatron-LM SC'21
 * Table 1 row's TFLOP/s within 15%, and each published Megatron (t, p, d) among the planner's own
 * top five (t, p, d). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/published.h"
#include "tests/helpers.h"

static ts_pub_case *cases;
static int n_cases;

static void load(void) {
    char *dir = test_data_path("validation/published");
    ts_error_clear();
    ts_status st = ts_published_run(dir, &cases, &n_cases);
    free(dir);
    cr_assert_eq(st, TS_OK, "ts_published_run: %s", ts_error_message());
}

static void unload(void) {
    free(cases);
    cases = NULL;
    n_cases = 0;
}

TestSuite(planner_published, .init = load, .fini = unload);

Test(planner_published, every_row_is_present) {
    int meg = 0, nv = 0, unfit = 0;
    for (int i = 0; i < n_cases; i++) {
        if (cases[i].unfit) { /* the memory model's miss, said as such (older-stacks.json) */
            unfit++;
            cr_expect(cases[i].kind == TS_PUB_OLDER_STACK && strstr(cases[i].layout, "does not fit"), "%s: %s",
                      cases[i].id, cases[i].layout);
            continue;
        }
        meg += cases[i].kind == TS_PUB_MEGATRON_TFLOPS;
        nv += cases[i].kind == TS_PUB_NVIDIA_STEP;
        cr_expect(cases[i].measured > 0 && isfinite(cases[i].predicted) && cases[i].predicted > 0,
                  "%s: measured %g, predicted %g", cases[i].id, cases[i].measured, cases[i].predicted);
        cr_expect(fabs(cases[i].error - (cases[i].predicted - cases[i].measured) / cases[i].measured) <= 1e-12,
                  "%s: error field", cases[i].id);
        cr_expect_gt(strlen(cases[i].layout), 0u, "%s: no predicted layout", cases[i].id);
    }
    cr_expect_eq(meg, 10, "Megatron-LM SC'21 Table 1 has ten rows");
    cr_expect_eq(nv, 30, "NVIDIA dgxc BF16 rows: 5 GPT-3 175B + 8 Nemotron-4 15B + 17 Llama 3.1 (5 8B, 6 70B, 6 405B)");
    cr_expect_leq(unfit, 1, "only SC'21's 530B ZeRO-3 row at micro-batch 4 overflows the memory model");
}

/* NVIDIA's Megatron-Bridge runs (megatron-bridge.json): read with their FP8 recipes, priced, their
 * step the tokens per second make; on H100, where the system file is calibrated, within 10% each
 * (docs/calibration-and-validation.md); on Blackwell only reported (bench/planner_accuracy). */
Test(planner_published, megatron_bridge_rows_are_read_and_priced) {
    int n = 0, h100 = 0, mx = 0;
    for (int i = 0; i < n_cases; i++) {
        const ts_pub_case *c = &cases[i];
        if (c->kind != TS_PUB_BRIDGE_STEP) continue;
        n++;
        cr_expect(c->fp8 && !c->unfit && !c->is_tflops && !strcmp(c->stack, "megatron-core"), "%s", c->id);
        mx += strstr(c->id, "-mx") != NULL;
        if (!strcmp(c->id, "mbridge-2511-llama3-8b-h100-cs"))
            cr_expect(fabs(c->measured - 128.0 * 8192 / (14451.0 * 8)) < 1e-9, "step from tokens/s: %g", c->measured);
        if (strcmp(c->gpu, "H100 SXM5 80GB")) continue;
        h100++;
        cr_expect_lt(fabs(c->error), 0.10, "%s: %+.1f%%", c->id, 100 * c->error);
    }
    cr_expect_eq(n, 13, "3 H100 rows, 4 B200, 3 GB200, 3 GB300");
    cr_expect_eq(h100, 3);
    cr_expect_eq(mx, 4, "MXFP8 beside current scaling on B200 (8B, 405B), GB200 and GB300 (8B)");
}

/* Megatron-Bridge's MoE runs (megatron-bridge-moe.json): read with their recipes' expert settings
 * and priced, experts apart from TP as pinned; the run that pads to capacity within 5%, the
 * dropless ones within 20% (too fast: no host synchronisation is priced, docs/moe.md). The
 * settings reach the search: forced balance and the combined 1F1B make the 25.11 run faster
 * than the padded 25.09 one on the same layout; a bad setting is refused naming the file and the
 * field. */
Test(planner_published, megatron_bridge_moe_rows_are_read_and_priced) {
    int n = 0;
    double padded_s = 0, dropless_s = 0;
    for (int i = 0; i < n_cases; i++) {
        const ts_pub_case *c = &cases[i];
        if (c->kind != TS_PUB_BRIDGE_MOE_STEP) continue;
        n++;
        cr_expect(c->moe && c->fp8 && !c->unfit && strstr(c->layout, "etp=1"), "%s: %s", c->id, c->layout);
        cr_expect_lt(fabs(c->error), 0.20, "%s: %+.1f%%", c->id, 100 * c->error);
        if (!strcmp(c->id, "mbridge-2509-qwen3-235b-h100-cs")) {
            padded_s = c->predicted;
            cr_expect_lt(fabs(c->error), 0.05, "%s: %+.1f%%", c->id, 100 * c->error);
        }
        if (!strcmp(c->id, "mbridge-2511-qwen3-235b-h100-cs")) dropless_s = c->predicted;
    }
    cr_expect_eq(n, 3, "Qwen3-235B-A22B (25.09, 25.11), DeepSeek-V3 (25.09)");
    cr_expect(dropless_s > 0 && dropless_s < padded_s, "balanced with EP overlap %g s, padded %g s", dropless_s,
              padded_s);
    /* a bad field is refused naming the file and the field */
    static const char *const fmt = "[{\"id\": \"r\", \"source\": \"test\", \"stack\": \"megatron-core\", "
                                   "\"model\": \"deepseek-v3\", \"system\": \"h100-sxm-dgx\", \"gpus\": 1024, "
                                   "\"global_batch_seqs\": 8192, \"seq_len\": 4096, \"dtype\": \"fp8\", %s, "
                                   "\"pins\": \"tp=2,etp=1,pp=8,ep=64,recompute=%s\", \"measured\": {\"train_step_s\": 20}}]";
    static const struct {
        const char *field, *recompute, *error;
    } bad[] = {
        {"\"moe_dispatcher\": \"pigeon\"", "none", "$[0].moe_dispatcher: expected"},
        {"\"moe_force_balance\": \"yes\"", "none", "$[0].moe_force_balance"},
        {"\"moe_capacity_factor\": 0", "none", "$[0].moe_capacity_factor"},
        {"\"recompute_modules\": [\"mla_up_proj\", \"attention\"]", "selective", "$[0].recompute_modules[1]"},
        {"\"recompute_modules\": [\"mla_up_proj\"]", "none", "$[0].recompute_modules: the recipe's modules need"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[1024];
        snprintf(text, sizeof text, fmt, bad[i].field, bad[i].recompute);
        char *dir = test_published_dir("megatron-bridge-moe.json", text);
        ts_pub_case *c = NULL;
        int k = 0;
        ts_error_clear();
        cr_expect_neq(ts_published_errors(dir, &c, &k), TS_OK, "case %zu priced", i);
        cr_expect(strstr(ts_error_message(), "megatron-bridge-moe.json: ") && strstr(ts_error_message(), bad[i].error),
                  "case %zu: %s", i, ts_error_message());
        free(c);
        remove_dir(dir);
    }
}

/* A row's fp8_recipe, fp8_param_gather and partition reach the search: the 405B row's 126 layers on
 * pp8 vpp8 split only as GLPK splits them (an even split refuses the pins); a bad field is refused
 * naming the file and the field. */
Test(planner_published, megatron_bridge_fields_reach_the_search, .timeout = 120) {
    static const char *const fmt =
        "[{\"id\": \"r\", \"source\": \"test\", \"stack\": \"megatron-core\", \"model\": \"llama3-405b\","
        " \"system\": \"b200-dgx\", \"gpus\": 128, \"global_batch_seqs\": 64, \"seq_len\": 8192, \"dtype\": \"fp8\","
        " \"fp8_recipe\": \"%s\", \"fp8_param_gather\": true, \"pins\": "
        "\"tp=4,pp=8,cp=2,vpp=8,mbs=1,sched=interleaved,recompute=none\", %s\"measured\": {%s}}]";
    static const struct {
        const char *recipe, *partition, *measured, *error; /* error: NULL priced, else in the message */
    } rows[] = {
        {"mxfp8", "\"partition\": \"ilp\", ", "\"tokens_per_s_per_gpu\": 624", NULL},
        {"tensorwise", "\"partition\": \"ilp\", ", "\"tokens_per_s_per_gpu\": 661", NULL},
        {"tensorwise", "", "\"tokens_per_s_per_gpu\": 661", "uneven chunks"},
        {"fp9", "", "\"train_step_s\": 6", "fp8_recipe"},
        {"mxfp8", "\"partition\": \"sometimes\", ", "\"train_step_s\": 6", "partition"},
        {"mxfp8", "\"partition\": \"ilp\", ", "", "tokens_per_s_per_gpu"},
        {"mxfp8", "\"partition\": \"ilp\", ", "\"tokens\": 624", "tokens"},
    };
    double step[2] = {0};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char text[1024];
        snprintf(text, sizeof text, fmt, rows[i].recipe, rows[i].partition, rows[i].measured);
        char *dir = test_published_dir("megatron-bridge.json", text);
        ts_pub_case *c = NULL;
        int n = 0;
        ts_error_clear();
        ts_status st = ts_published_errors(dir, &c, &n);
        if (!rows[i].error) {
            cr_assert_eq(st, TS_OK, "case %zu: %s", i, ts_error_message());
            cr_assert_eq(n, 1);
            cr_expect(c[0].kind == TS_PUB_BRIDGE_STEP && !c[0].unfit && c[0].predicted > 0, "%s", c[0].layout);
            cr_expect(fabs(c[0].measured - 64.0 * 8192 / ((i == 0 ? 624.0 : 661.0) * 128)) < 1e-9);
            step[i] = c[0].predicted;
        } else {
            cr_expect_neq(st, TS_OK, "case %zu priced", i);
            cr_expect(strstr(ts_error_message(), rows[i].error) != NULL, "case %zu: %s", i, ts_error_message());
            cr_expect(strstr(ts_error_message(), "megatron-bridge.json") != NULL, "case %zu: %s", i, ts_error_message());
        }
        free(c);
        remove_dir(dir);
    }
    cr_expect_neq(step[0], step[1], "MXFP8 and current scaling price differently (casts, scales)");
}

/* Runs on the stacks of their era (MT-NLG and BLOOM on Megatron-DeepSpeed, SC'21 Table 2 on Megatron-LM 2021
 * and DeepSpeed ZeRO-3, MegaScale's Megatron-LM baseline), each under its stack profile: within 15%
 * each (docs/stacks.md lists them; with the stacks' gradient accumulation passes MT-NLG is within
 * 9%), the PTD-P rows within 10%, and the step error consistent with the TFLOP/s error. */
Test(planner_published, older_stacks_within_their_bounds) {
    int n = 0;
    for (int i = 0; i < n_cases; i++) {
        const ts_pub_case *c = &cases[i];
        if (c->kind != TS_PUB_OLDER_STACK || c->unfit) continue;
        n++;
        cr_expect_leq(fabs(c->error), 0.15, "%s: predicted %.2f, measured %.2f (%+.1f%%) on %s with %s", c->id,
                      c->predicted, c->measured, 100 * c->error, c->stack, c->layout);
        if (strstr(c->id, "ptdp")) cr_expect_leq(fabs(c->error), 0.10, "%s: %+.1f%%", c->id, 100 * c->error);
        double step_err = c->is_tflops ? c->measured / c->predicted - 1 : c->error;
        cr_expect(fabs(c->step_error - step_err) < 1e-12, "%s", c->id);
        /* sequence parallelism arrived with Megatron-LM v3 (2022): only the 2023 stack has it */
        const char *dims = strcmp(c->stack, "megatron-lm-2023") ? "cp=1,ep=1,sp=0" : "cp=1,ep=1,";
        cr_expect(strstr(c->layout, dims) != NULL, "%s: the era's stack has no CP, EP (or SP): %s", c->id, c->layout);
    }
    cr_expect_eq(n, 20, "21 rows, one of which does not fit");
}

Test(planner_published, nvidia_step_time_within_15_percent) {
    int n = 0;
    for (int i = 0; i < n_cases; i++) {
        const ts_pub_case *c = &cases[i];
        if (c->kind != TS_PUB_NVIDIA_STEP) continue;
        n++;
        cr_expect_leq(fabs(c->error), 0.15, "%s: predicted %.3f s, measured %.3f s (%+.1f%%) with %s",
                      c->id, c->predicted, c->measured, 100 * c->error, c->layout);
        /* The prediction keeps the published tp, pp, dp. */
        char want[64];
        snprintf(want, sizeof want, "dp=%d,tp=%d,pp=%d,", c->dp, c->tp, c->pp);
        cr_expect(strncmp(c->layout, want, strlen(want)) == 0, "%s: layout %s, published %s", c->id,
                  c->layout, want);
    }
    cr_expect_gt(n, 0);
}

Test(planner_published, megatron_tflops_within_15_percent) {
    int n = 0;
    for (int i = 0; i < n_cases; i++) {
        const ts_pub_case *c = &cases[i];
        if (c->kind != TS_PUB_MEGATRON_TFLOPS) continue;
        n++;
        cr_expect_leq(fabs(c->error), 0.15, "%s: predicted %.1f TFLOP/s, measured %.1f (%+.1f%%) with %s",
                      c->id, c->predicted, c->measured, 100 * c->error, c->layout);
        char want[64];
        snprintf(want, sizeof want, "dp=%d,tp=%d,pp=%d,", c->dp, c->tp, c->pp);
        cr_expect(strncmp(c->layout, want, strlen(want)) == 0, "%s: layout %s, published %s", c->id,
                  c->layout, want);
    }
    cr_expect_eq(n, 10);
}

Test(planner_published, megatron_published_layout_ranks_in_top_5) {
    int checked = 0;
    for (int i = 0; i < n_cases; i++) {
        const ts_pub_case *c = &cases[i];
        if (c->kind != TS_PUB_MEGATRON_TFLOPS) continue;
        checked++;
        cr_expect(c->rank >= 1 && c->rank <= 5, "%s: published (t=%d, p=%d, d=%d) ranks %d (0 = not in "
                  "the first 10 distinct)", c->id, c->tp, c->pp, c->dp, c->rank);
    }
    cr_expect_eq(checked, 10);
}

static int cmp_abs_err(const void *a, const void *b) {
    double x = fabs(*(const double *)a), y = fabs(*(const double *)b);
    return (x > y) - (x < y);
}

/* MoE rows (Grok-1 and its proxies, DeepSeek-V3 on H100 at tp=2, etp=1, ep=64): all present, the
 * published ep and etp kept, and the BF16 rows' median |error| within 10% (issue 20's target). */
Test(planner_published, moe_rows_bf16_median_within_10_percent) {
    double errs[64];
    int n = 0, fp8 = 0;
    for (int i = 0; i < n_cases; i++) {
        const ts_pub_case *c = &cases[i];
        fp8 += c->kind == TS_PUB_NVIDIA_MOE_STEP_FP8;
        if (c->kind != TS_PUB_NVIDIA_MOE_STEP) continue;
        cr_assert_lt(n, 64);
        errs[n++] = c->error;
        char want[32];
        snprintf(want, sizeof want, ",ep=%d,", ts_layout_field(&c->pins.value, TS_PIN_EP));
        cr_expect(strstr(c->layout, want) != NULL, "%s: layout %s keeps %s", c->id, c->layout, want);
    }
    cr_expect_eq(n, 10, "9 Grok-1 BF16 rows + DeepSeek-V3");
    cr_expect_eq(fp8, 9, "9 Grok-1 FP8 rows");
    qsort(errs, (size_t)n, sizeof errs[0], cmp_abs_err);
    double median = n % 2 ? fabs(errs[n / 2]) : 0.5 * (fabs(errs[n / 2 - 1]) + fabs(errs[n / 2]));
    cr_expect_leq(median, 0.10, "median |error| %.1f%%", 100 * median);
}

/* The bands' reading (ts_published_errors) predicts every case as ts_published_run does, to the
 * bit, and leaves only the Megatron ranks at 0. */
Test(planner_published, errors_only_run_agrees) {
    char *dir = test_data_path("validation/published");
    ts_pub_case *e = NULL;
    int n = 0;
    ts_status st = ts_published_errors(dir, &e, &n);
    free(dir);
    cr_assert_eq(st, TS_OK, "ts_published_errors: %s", ts_error_message());
    cr_assert_eq(n, n_cases);
    int ranked = 0;
    for (int i = 0; i < n; i++) {
        cr_expect_str_eq(e[i].id, cases[i].id);
        cr_expect(e[i].predicted == cases[i].predicted && e[i].step_error == cases[i].step_error,
                  "%s: predicted %.17g vs %.17g", e[i].id, e[i].predicted, cases[i].predicted);
        cr_expect_str_eq(e[i].layout, cases[i].layout);
        cr_expect_eq(e[i].rank, 0, "%s: ranked without the rank search", e[i].id);
        ranked += cases[i].rank > 0;
    }
    cr_expect_gt(ranked, 0, "the full run ranks the Megatron rows");
    free(e);
}

/* What a visitor saw: every NVIDIA row, in order, and where to stop. */
typedef struct {
    int seen, stop_at, bad_pins;
    char ids[128][96];
    double predicted[128];
} visit_log;

static ts_status log_row(const ts_pub_case *c, const ts_problem *pb, const ts_layout *l, void *ctx) {
    visit_log *v = ctx;
    if (v->seen < 128) {
        snprintf(v->ids[v->seen], sizeof v->ids[0], "%s", c->id);
        v->predicted[v->seen] = c->predicted;
    }
    /* the layout honours the row's pins and the problem is the row's */
    v->bad_pins += l->tp != c->tp || l->pp != c->pp || l->dp != c->dp || pb->gpus != c->gpus;
    if (++v->seen == v->stop_at) return TS_FAIL(TS_ERR_INPUT, "stop at %d", v->stop_at);
    return TS_OK;
}

/* ts_published_visit hands each NVIDIA row to the visitor as ts_published_run predicts it (same
 * ids, order and step times; the layout under the row's pins), and a visitor's error stops it. */
Test(planner_published, visit_sees_every_nvidia_row) {
    char *dir = test_data_path("validation/published");
    static visit_log v;
    memset(&v, 0, sizeof v);
    ts_status st = ts_published_visit(dir, log_row, &v);
    cr_assert_eq(st, TS_OK, "ts_published_visit: %s", ts_error_message());
    cr_assert_leq(v.seen, 128, "%d rows: visit_log holds 128", v.seen);
    int nvidia = 0;
    for (int i = 0; i < n_cases; i++) {
        if (strncmp(cases[i].id, "nvidia-dgxc-", 12) || cases[i].kind == TS_PUB_OLDER_STACK) continue;
        cr_assert_lt(nvidia, v.seen, "visit stopped before %s", cases[i].id);
        cr_expect_str_eq(v.ids[nvidia], cases[i].id);
        cr_expect(v.predicted[nvidia] == cases[i].predicted, "%s: %.17g vs %.17g", cases[i].id, v.predicted[nvidia],
                  cases[i].predicted);
        nvidia++;
    }
    cr_expect_eq(v.seen, nvidia, "visited %d rows, %d NVIDIA rows", v.seen, nvidia);
    cr_expect_gt(nvidia, 40);
    cr_expect_eq(v.bad_pins, 0);

    memset(&v, 0, sizeof v);
    v.stop_at = 2;
    ts_error_clear();
    st = ts_published_visit(dir, log_row, &v);
    cr_expect_eq(st, TS_ERR_INPUT);
    cr_expect_eq(v.seen, 2, "the walk went on after the visitor's error");
    cr_expect(strstr(ts_error_message(), "stop at 2") != NULL, "%s", ts_error_message());
    free(dir);
}

/* Distinct strings among n fixed-size fields `at(i)`. */
static int distinct(int n, const char *(*at)(int)) {
    int d = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = strcmp(at(i), at(j)) == 0;
        d += !seen;
    }
    return d;
}
static const char *model_at(int i) { return cases[i].model; }
static const char *stack_at(int i) { return cases[i].stack; }

/* The cache (planner/published_cache.h) changes nothing but the loading: every case predicted
 * with each model, system and stack loaded once equals, to the bit, the case predicted with them
 * loaded afresh, and the cache holds one entry per distinct name. */
Test(planner_published, cached_loads_agree_with_uncached) {
    char *dir = test_data_path("validation/published");
    ts_pub_cache cache;
    ts_pub_cache_init(&cache);
    ts_pub_case *a = NULL, *b = NULL;
    int na = 0, nb = 0;
    ts_status st = ts_published_errors_with(dir, NULL, &a, &na);
    cr_assert_eq(st, TS_OK, "uncached: %s", ts_error_message());
    st = ts_published_errors_with(dir, &cache, &b, &nb);
    free(dir);
    cr_assert_eq(st, TS_OK, "cached: %s", ts_error_message());
    cr_assert_eq(na, nb);
    cr_assert_eq(nb, n_cases);
    for (int i = 0; i < na; i++) {
        cr_expect_str_eq(a[i].id, b[i].id);
        cr_expect(a[i].predicted == b[i].predicted && a[i].step_error == b[i].step_error &&
                      a[i].unfit == b[i].unfit,
                  "%s: predicted %.17g uncached vs %.17g cached", a[i].id, a[i].predicted, b[i].predicted);
        cr_expect_str_eq(a[i].layout, b[i].layout);
        cr_expect_str_eq(a[i].stack, b[i].stack);
    }
    cr_expect_eq(cache.n_models, distinct(n_cases, model_at), "one load per distinct model");
    cr_expect_eq(cache.n_stacks, distinct(n_cases, stack_at), "one load per distinct stack");
    cr_expect(cache.n_systems >= 2 && cache.n_systems < n_cases / 4, "%d systems", cache.n_systems);
    free(a);
    free(b);
    ts_pub_cache_free(&cache);
}

/* A cached value is the loader's, and a caller's change to its copy stays its own (the MoE rows
 * cut their model's layers). */
Test(planner_published, cache_hands_out_copies) {
    ts_pub_cache cache;
    ts_pub_cache_init(&cache);
    ts_model fresh, m, again;
    cr_assert_eq(ts_model_load("llama2-7b", &fresh), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_pub_cache_model(&cache, "llama2-7b", &m), TS_OK, "%s", ts_error_message());
    m.layers = 1;
    m.vocab = 7;
    cr_assert_eq(ts_pub_cache_model(&cache, "llama2-7b", &again), TS_OK, "%s", ts_error_message());
    cr_expect_eq(cache.n_models, 1);
    cr_expect_eq(again.layers, fresh.layers);
    cr_expect_eq(again.vocab, fresh.vocab);
    cr_expect_str_eq(again.name, fresh.name);
    ts_system s;
    cr_expect_neq(ts_pub_cache_system(&cache, "no-such-system", &s), TS_OK, "a bad name fails as the loader does");
    ts_error_clear();
    cr_expect_eq(cache.n_systems, 0, "nothing cached for a failed load");
    ts_pub_cache_free(&cache);
}

/* A row whose pins leave nothing to price (here DeepSeek-V3 with the shared-expert overlap but the
 * default dispatcher, DeepEP, which the overlap does not run with) is said in its layout column and
 * kept out of the errors, and the rows after it are still priced. */
Test(planner_published, unplannable_row_is_said_and_the_rest_priced, .timeout = 120) {
    char *src = test_data_path("validation/published/published-cases.json");
    char *text = read_file(src);
    cJSON *all = cJSON_Parse(text), *rows = cJSON_CreateArray(), *row;
    cJSON_ArrayForEach(row, all) {
        const char *id = cJSON_GetObjectItemCaseSensitive(row, "id")->valuestring;
        if (strcmp(id, "nvidia-dgxc-deepseek-v3-671b-bf16-1024gpu") && strcmp(id, "nvidia-dgxc-nemotron4-15b-bf16-16gpu"))
            continue;
        cJSON *copy = cJSON_Duplicate(row, 1);
        cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(copy, "training"), "moe_dispatcher");
        cJSON_AddItemToArray(rows, copy);
    }
    cr_assert_eq(cJSON_GetArraySize(rows), 2);
    char *out = cJSON_Print(rows), *dir = test_published_dir("published-cases.json", out);
    ts_pub_case *c = NULL;
    int n = 0;
    cr_assert_eq(ts_published_errors(dir, &c, &n), TS_OK, "%s", ts_error_message());
    cr_assert_eq(n, 2);
    for (int i = 0; i < n; i++) {
        if (strstr(c[i].id, "deepseek")) {
            cr_expect(c[i].unfit && c[i].predicted == 0 && c[i].error == 0, "%s: unfit %d", c[i].id, c[i].unfit);
            cr_expect(strstr(c[i].layout, "not plannable") && strstr(c[i].layout, "alltoall"), "%s", c[i].layout);
        } else {
            cr_expect(!c[i].unfit && c[i].predicted > 0 && fabs(c[i].error) < 0.15, "%s: %g s, %s", c[i].id,
                      c[i].predicted, c[i].layout);
        }
    }
    free(c);
    free(out);
    remove_dir(dir);
    cJSON_Delete(rows);
    cJSON_Delete(all);
    free(text);
    free(src);
}
