/* Tests for models/system.c: every zoo system loads with its datasheet figures, the GEMM efficiency
 * curve interpolates in log space, specs round-trip through JSON, and each kind of bad spec fails
 * with TS_ERR_INPUT and a message naming the file, the JSON path and expected vs. got.
 *
 * The zoo is found through $TESSERA_DATA (set by `make test`) or the compiled-in source tree. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/json.h"
#include "common/paths.h"
#include "models/system.h"

static const char *const zoo_names[] = {"a100-80g-dgx", "b200-dgx", "cpu-localhost", "h100-sxm-dgx",
                                        "h200-dgx", "h800-dgx", "gb200-nvl72", "gb300-nvl72", "b300-hgx",
                                        "h200-nvl", "mi300x", "mi325x", "mi355x", "h100-eth-2tier"};
#define ZOO_COUNT (sizeof zoo_names / sizeof zoo_names[0])

static ts_system load_ok(const char *name) {
    ts_system s;
    ts_error_clear();
    ts_status st = ts_system_load(name, &s);
    cr_assert_eq(st, TS_OK, "%s: %s (%s)", name, ts_error_message(), ts_error_where());
    return s;
}

static void assert_contains(const char *msg, const char *needle) {
    cr_assert(strstr(msg, needle) != NULL, "message \"%s\" lacks \"%s\"", msg, needle);
}

/* Writes `text` to a fresh temporary file; the caller unlinks `path`. */
static void write_temp(const char *text, char path[64]) {
    snprintf(path, 64, "/tmp/tessera-system-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0, "mkstemp failed");
    size_t n = strlen(text);
    cr_assert_eq(write(fd, text, n), (ssize_t)n, "short write to %s", path);
    close(fd);
}

/* Loads `text` as a system file and expects TS_ERR_INPUT whose message names the file and holds
 * each of `needles` (NULL-terminated). Returns the message for exact checks. */
static const char *expect_bad_text(const char *text, const char *const *needles) {
    char path[64];
    ts_system s;
    write_temp(text, path);
    ts_error_clear();
    ts_status st = ts_system_load(path, &s);
    unlink(path);
    const char *msg = ts_error_message();
    cr_assert_eq(st, TS_ERR_INPUT, "expected bad input, got %s: %s", ts_status_name(st), msg);
    assert_contains(msg, path);
    for (int i = 0; needles[i]; i++) assert_contains(msg, needles[i]);
    return msg;
}

static void expect_bad(cJSON *root, const char *const *needles) {
    char *text = cJSON_Print(root);
    cr_assert_not_null(text);
    expect_bad_text(text, needles);
    free(text);
    cJSON_Delete(root);
}

/* The H100 spec as a tree for a test to break. */
static cJSON *h100_tree(void) {
    char path[4096];
    cJSON *root = NULL;
    ts_error_clear();
    cr_assert_eq(ts_zoo_resolve("models/systems", "h100-sxm-dgx", path, sizeof path), TS_OK, "%s",
                 ts_error_message());
    cr_assert_eq(ts_json_load_file(path, &root), TS_OK, "%s", ts_error_message());
    return root;
}

static cJSON *member(cJSON *obj, const char *key) {
    cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    cr_assert_not_null(it, "no member %s", key);
    return it;
}

static void replace(cJSON *obj, const char *key, cJSON *item) {
    cr_assert(cJSON_ReplaceItemInObjectCaseSensitive(obj, key, item), "cannot replace %s", key);
}

/* Sets element [i][j] of efficiency.gemm.points. */
static void set_point(cJSON *root, int i, int j, double v) {
    cJSON *points = member(member(member(root, "efficiency"), "gemm"), "points");
    cJSON *pair = cJSON_GetArrayItem(points, i);
    cr_assert_not_null(pair);
    cr_assert(cJSON_ReplaceItemInArray(pair, j, cJSON_CreateNumber(v)));
}

static void assert_system_eq(const ts_system *a, const ts_system *b) {
    cr_assert_str_eq(a->name, b->name);
    cr_assert_str_eq(a->source, b->source);
    cr_assert_str_eq(a->gpu_name, b->gpu_name);
    cr_assert_eq(a->hbm_bytes, b->hbm_bytes);
    cr_assert_eq(a->hbm_bytes_per_s, b->hbm_bytes_per_s);
    for (int d = 0; d < TS_DTYPE_COUNT; d++)
        cr_assert_eq(a->peak_flops[d], b->peak_flops[d], "%s", ts_dtype_names[d]);
    cr_assert_eq(a->power_w, b->power_w);
    cr_assert_eq(a->gpus_per_node, b->gpus_per_node);
    cr_assert_eq(a->link_bytes_per_s, b->link_bytes_per_s);
    cr_assert_eq(a->link_latency_s, b->link_latency_s);
    cr_assert_eq(a->nic_bytes_per_s, b->nic_bytes_per_s);
    cr_assert_eq(a->nic_latency_s, b->nic_latency_s);
    cr_assert_eq(a->rail_optimized, b->rail_optimized);
    cr_assert_eq(ts_system_domain_gpus(a), ts_system_domain_gpus(b));
    cr_assert_eq(a->peak_fp4_flops, b->peak_fp4_flops);
    cr_assert_eq(a->n_tiers, b->n_tiers);
    for (int k = 0; k < a->n_tiers; k++) {
        cr_assert_str_eq(a->tiers[k].name, b->tiers[k].name);
        cr_assert_eq(a->tiers[k].gpus, b->tiers[k].gpus);
        cr_assert_eq(a->tiers[k].oversubscription, b->tiers[k].oversubscription);
        cr_assert_eq(a->tiers[k].latency_s, b->tiers[k].latency_s);
    }
    cr_assert_eq(a->gemm_eff.n, b->gemm_eff.n);
    for (int i = 0; i < a->gemm_eff.n; i++) {
        cr_assert_eq(a->gemm_eff.flops[i], b->gemm_eff.flops[i]);
        cr_assert_eq(a->gemm_eff.eff[i], b->gemm_eff.eff[i]);
    }
    cr_assert_eq(a->attention_eff, b->attention_eff);
    cr_assert_eq(a->attention_flash_eff, b->attention_flash_eff);
    cr_assert_eq(a->gemm_fp8_bwd_eff, b->gemm_fp8_bwd_eff);
    cr_assert_eq(a->hbm_eff, b->hbm_eff);
    cr_assert_eq(a->optimizer_eff, b->optimizer_eff);
    cr_assert_eq(a->link_busbw_eff, b->link_busbw_eff);
    cr_assert_eq(a->nic_busbw_eff, b->nic_busbw_eff);
    cr_assert_eq(a->overlap_slowdown, b->overlap_slowdown);
    for (int k = 0; k < TS_COLL_COUNT; k++) cr_assert_eq(a->coll_busbw[k], b->coll_busbw[k], "%s", ts_coll_names[k]);
    cr_assert_eq(a->tp_comm_overlap, b->tp_comm_overlap);
    cr_assert_eq(a->dp_comm_overlap, b->dp_comm_overlap);
    cr_assert_eq(a->reserved_bytes, b->reserved_bytes);
    cr_assert_eq(a->headroom_frac, b->headroom_frac);
    cr_assert_eq(a->sync_jitter_s, b->sync_jitter_s);
    /* what the reports price a plan's run with (the cost object) */
    cr_assert_eq(a->price_per_gpu_hour, b->price_per_gpu_hour, "%s", a->name);
    cr_assert_eq(a->price_is_example, b->price_is_example, "%s", a->name);
    cr_assert_eq(a->rack_power_w, b->rack_power_w, "%s", a->name);
    cr_assert_eq(a->rack_gpus, b->rack_gpus, "%s", a->name);
}

/* Only the required fields; everything else takes its default. */
#define SPEC_WITH_HBM_BW(bw)                                                                       \
    "{\"name\": \"tiny\", \"gpu\": {\"hbm_bytes\": 8e10, \"hbm_bytes_per_s\": " bw ","              \
    " \"peak_flops\": {\"bf16\": 1e15}}, \"node\": {\"gpus\": 8, \"link_bytes_per_s\": 4.5e11},"      \
    " \"fabric\": {\"nic_bytes_per_s\": 5e10},"                                                    \
    " \"efficiency\": {\"gemm\": {\"points\": [[1e9, 0.5]]}}}"
static const char minimal_spec[] = SPEC_WITH_HBM_BW("3e12");

Test(system, zoo_lists_and_loads_every_system) {
    char names[64][64];
    int n = ts_zoo_list("models/systems", names, 64);
    for (size_t i = 0; i < ZOO_COUNT; i++) {
        int listed = 0;
        for (int j = 0; j < n; j++) listed |= strcmp(names[j], zoo_names[i]) == 0;
        cr_assert(listed, "%s missing from the systems zoo", zoo_names[i]);
    }
    for (int j = 0; j < n; j++) {
        ts_system s = load_ok(names[j]);
        cr_assert_str_eq(s.name, names[j], "the name inside %s.json differs", names[j]);
        cr_assert_gt(ts_system_usable_bytes(&s), 0, "%s", names[j]);
        cr_assert_gt(s.gemm_eff.n, 0, "%s", names[j]);
    }
}

Test(system, datasheet_figures) {
    ts_system a100 = load_ok("a100-80g-dgx");
    ts_system h100 = load_ok("h100-sxm-dgx");
    ts_system h200 = load_ok("h200-dgx");
    ts_system h800 = load_ok("h800-dgx");
    ts_system b200 = load_ok("b200-dgx");
    cr_assert_float_eq(h100.peak_flops[TS_DTYPE_BF16], 989.4e12, 989.4e12 * 0.01);
    cr_assert_float_eq(h100.peak_flops[TS_DTYPE_FP8], 2 * h100.peak_flops[TS_DTYPE_BF16], 1e12);
    cr_assert_eq(h100.hbm_bytes, 80e9);
    cr_assert_eq(h100.gpus_per_node, 8);
    cr_assert_eq(h100.link_bytes_per_s, 450e9);
    cr_assert_eq(h100.nic_bytes_per_s, 50e9);
    cr_assert_float_eq(a100.peak_flops[TS_DTYPE_BF16], 312e12, 1e9);
    cr_assert_eq(a100.peak_flops[TS_DTYPE_FP8], 0, "A100 has no FP8");
    cr_assert_eq(a100.nic_bytes_per_s, 25e9);
    cr_assert_gt(b200.peak_flops[TS_DTYPE_BF16], h100.peak_flops[TS_DTYPE_BF16]);
    cr_assert_gt(h200.hbm_bytes, h100.hbm_bytes);
    cr_assert_gt(h200.hbm_bytes_per_s, h100.hbm_bytes_per_s);
    cr_assert_eq(h200.peak_flops[TS_DTYPE_BF16], h100.peak_flops[TS_DTYPE_BF16]);
    cr_assert_lt(h800.link_bytes_per_s, h100.link_bytes_per_s);
    cr_assert_eq(h800.peak_flops[TS_DTYPE_BF16], h100.peak_flops[TS_DTYPE_BF16]);
}

/* The rack-scale and AMD systems: the NVLink domain apart from the host, tiers, FP4 peaks, a
 * price and a power figure on each new system. */
Test(system, domains_tiers_and_costs) {
    ts_system gb200 = load_ok("gb200-nvl72"), gb300 = load_ok("gb300-nvl72"), nvl = load_ok("h200-nvl");
    ts_system mi355 = load_ok("mi355x"), eth = load_ok("h100-eth-2tier"), h100 = load_ok("h100-sxm-dgx");
    cr_assert_eq(gb200.gpus_per_node, 4, "a GB200 compute tray holds 4 GPUs");
    cr_assert_eq(ts_system_domain_gpus(&gb200), 72);
    cr_assert_eq(ts_system_domain_gpus(&h100), 8, "no domain object: the node's");
    cr_assert_eq(ts_system_domain_gpus(&nvl), 4, "4-way NVLink bridges in an 8-card host");
    cr_assert_eq(gb200.n_tiers, 3);
    cr_assert_eq(gb200.tiers[2].gpus, 0, "the top tier reaches every GPU");
    cr_assert_eq(gb200.peak_fp4_flops, 10e15);
    cr_assert_eq(gb300.peak_fp4_flops, 15e15);
    cr_assert_eq(gb300.nic_bytes_per_s, 2 * gb200.nic_bytes_per_s, "ConnectX-8 800G vs ConnectX-7 400G");
    cr_assert_eq(mi355.peak_flops[TS_DTYPE_FP8], 2 * mi355.peak_flops[TS_DTYPE_BF16]);
    cr_assert_eq(eth.tiers[1].oversubscription, 2);
    cr_assert_eq(h100.n_tiers, 0, "h100-sxm-dgx stays a flat fabric");
    const char *priced[] = {"gb200-nvl72", "gb300-nvl72", "b300-hgx", "h200-nvl", "mi300x", "mi325x", "mi355x",
                            "h100-eth-2tier"};
    for (size_t i = 0; i < sizeof priced / sizeof priced[0]; i++) {
        ts_system s = load_ok(priced[i]);
        cr_expect_gt(s.price_per_gpu_hour, 0, "%s has a price", priced[i]);
        cr_expect_gt(ts_system_power_per_gpu_w(&s), 0, "%s has a power figure", priced[i]);
    }
    cr_assert_float_eq(ts_system_power_per_gpu_w(&gb200), 132e3 / 72, 1e-9);
}

#define TIERED_SPEC(tiers)                                                                         \
    "{\"name\": \"t\", \"gpu\": {\"hbm_bytes\": 8e10, \"hbm_bytes_per_s\": 3e12,"                   \
    " \"peak_flops\": {\"bf16\": 1e15}}, \"node\": {\"gpus\": 8, \"link_bytes_per_s\": 4.5e11},"      \
    " \"fabric\": {\"nic_bytes_per_s\": 5e10, \"tiers\": " tiers "},"                               \
    " \"efficiency\": {\"gemm\": {\"points\": [[1e9, 0.5]]}}}"

Test(system, bad_tiers_and_domains) {
    expect_bad_text(TIERED_SPEC("[{\"gpus\": 12}, {\"gpus\": 0}]"),
                    (const char *const[]){"$.fabric.tiers[0].gpus", "a multiple of 8", NULL});
    expect_bad_text(TIERED_SPEC("[{\"gpus\": 0}, {\"gpus\": 64}]"),
                    (const char *const[]){"$.fabric.tiers[0].gpus", NULL});
    expect_bad_text(TIERED_SPEC("[{\"gpus\": 64, \"oversubscription\": 0.5}]"),
                    (const char *const[]){"$.fabric.tiers[0].oversubscription", NULL});
    expect_bad_text(TIERED_SPEC("[{}, {}, {}, {}]"), (const char *const[]){"$.fabric.tiers", "1 to 3", NULL});
    expect_bad_text(TIERED_SPEC("[{\"gpus\": 64, \"hops\": 2}]"),
                    (const char *const[]){"$.fabric.tiers[0].hops", "unknown field", NULL});
    char text[1024];
    snprintf(text, sizeof text, "%.*s, \"domain\": {\"gpus\": 12}}", (int)strlen(minimal_spec) - 1, minimal_spec);
    expect_bad_text(text, (const char *const[]){"$.domain.gpus", "a multiple or a divisor of node.gpus 8", NULL});
    snprintf(text, sizeof text, "%.*s, \"cost\": {\"rack_power_w\": 1e4}}", (int)strlen(minimal_spec) - 1,
             minimal_spec);
    expect_bad_text(text, (const char *const[]){"$.cost.rack_gpus", NULL});
}

Test(system, minimal_spec_takes_defaults) {
    cJSON *root = NULL;
    ts_system s;
    ts_error_clear();
    cr_assert_eq(ts_json_parse("tiny.json", minimal_spec, &root), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_system_from_json("tiny.json", root, &s), TS_OK, "%s", ts_error_message());
    cJSON_Delete(root);
    cr_assert_eq(s.link_latency_s, 2e-6);
    cr_assert_eq(s.nic_latency_s, 5e-6);
    cr_assert_eq(s.rail_optimized, 0);
    cr_assert_eq(s.peak_flops[TS_DTYPE_FP8], 0);
    cr_assert_eq(s.attention_eff, 0.5);
    cr_assert_eq(s.hbm_eff, 0.8);
    cr_assert_eq(s.optimizer_eff, 1.0); /* absent: the other memory-bound kernels' bandwidth */
    cr_assert_eq(s.link_busbw_eff, 0.8);
    cr_assert_eq(s.nic_busbw_eff, 0.8);
    cr_assert_eq(s.overlap_slowdown, 0.05);
    cr_assert_eq(s.tp_comm_overlap, 0);
    cr_assert_eq(s.dp_comm_overlap, 0.9);
    cr_assert_eq(s.reserved_bytes, 2.5e9);
    cr_assert_eq(s.headroom_frac, 0.05);
    cr_assert_float_eq(ts_system_usable_bytes(&s), 8e10 * 0.95 - 2.5e9, 1.0);
}

Test(system, eff_at_interpolates_in_log_flops) {
    ts_eff_curve c = {.n = 3, .flops = {1e8, 1e10, 1e12}, .eff = {0.2, 0.6, 0.8}};
    cr_assert_float_eq(ts_eff_at(&c, 1e8), 0.2, 1e-12);
    cr_assert_float_eq(ts_eff_at(&c, 1e10), 0.6, 1e-12);
    cr_assert_float_eq(ts_eff_at(&c, 1e12), 0.8, 1e-12);
    /* 1e9 is halfway from 1e8 to 1e10 in log10, 10^10.5 a quarter of the way from 1e10 to 1e12 */
    cr_assert_float_eq(ts_eff_at(&c, 1e9), 0.4, 1e-12);
    cr_assert_float_eq(ts_eff_at(&c, 1e11), 0.7, 1e-12);
    cr_assert_float_eq(ts_eff_at(&c, pow(10, 10.5)), 0.65, 1e-12);
    /* flat outside the measured range */
    cr_assert_float_eq(ts_eff_at(&c, 1e3), 0.2, 1e-12);
    cr_assert_float_eq(ts_eff_at(&c, 0), 0.2, 1e-12);
    cr_assert_float_eq(ts_eff_at(&c, 1e18), 0.8, 1e-12);
    ts_eff_curve one = {.n = 1, .flops = {1e9}, .eff = {0.5}};
    cr_assert_float_eq(ts_eff_at(&one, 1e6), 0.5, 1e-12);
    cr_assert_float_eq(ts_eff_at(&one, 1e12), 0.5, 1e-12);
}

Test(system, round_trips_through_json_text_and_file) {
    for (size_t i = 0; i < ZOO_COUNT; i++) {
        ts_system a = load_ok(zoo_names[i]), b, c;
        cJSON *tree = ts_system_to_json(&a);
        cr_assert_not_null(tree, "%s", ts_error_message());
        char *text = cJSON_Print(tree);
        cr_assert_not_null(text);
        cJSON *back = NULL;
        cr_assert_eq(ts_json_parse("round-trip", text, &back), TS_OK, "%s", ts_error_message());
        cr_assert_eq(ts_system_from_json("round-trip", back, &b), TS_OK, "%s: %s", zoo_names[i],
                     ts_error_message());
        assert_system_eq(&a, &b);

        char path[64];
        write_temp("", path);
        cr_assert_eq(ts_json_write_file(path, tree), TS_OK, "%s", ts_error_message());
        c = load_ok(path);
        unlink(path);
        assert_system_eq(&a, &c);
        free(text);
        cJSON_Delete(back);
        cJSON_Delete(tree);
    }
}

Test(system, missing_hbm_bytes) {
    cJSON *root = h100_tree();
    cJSON_DeleteItemFromObjectCaseSensitive(member(root, "gpu"), "hbm_bytes");
    expect_bad(root, (const char *[]){"$.gpu.hbm_bytes", "missing field", "expected a number",
                                      NULL});
}

Test(system, hbm_bytes_as_string) {
    cJSON *root = h100_tree();
    replace(member(root, "gpu"), "hbm_bytes", cJSON_CreateString("80GB"));
    expect_bad(root, (const char *[]){"$.gpu.hbm_bytes", "expected a number in [1, 1e+15]",
                                      "got a string", NULL});
}

Test(system, negative_bandwidth) {
    cJSON *root = h100_tree();
    replace(member(root, "node"), "link_bytes_per_s", cJSON_CreateNumber(-4.5e11));
    expect_bad(root, (const char *[]){"$.node.link_bytes_per_s", "expected a number in [1, 1e+15]",
                                      "got -4.5e+11", NULL});
}

Test(system, huge_and_infinite_values) {
    cJSON *root = h100_tree();
    replace(member(root, "gpu"), "hbm_bytes", cJSON_CreateNumber(8e16));
    expect_bad(root, (const char *[]){"$.gpu.hbm_bytes", "got 8e+16", NULL});
    /* 1e999 overflows to infinity when parsed */
    expect_bad_text(SPEC_WITH_HBM_BW("1e999"),
                    (const char *[]){"$.gpu.hbm_bytes_per_s", "got inf", NULL});
}

Test(system, efficiency_above_one) {
    cJSON *root = h100_tree();
    replace(member(root, "efficiency"), "attention", cJSON_CreateNumber(1.5));
    expect_bad(root, (const char *[]){"$.efficiency.attention", "expected a number in [0.001, 1]",
                                      "got 1.5", NULL});
    root = h100_tree();
    set_point(root, 2, 1, 1.5);
    expect_bad(root, (const char *[]){"$.efficiency.gemm.points[2][1]",
                                      "expected an efficiency in [0.001, 1]", "got 1.5", NULL});
    root = h100_tree();
    replace(member(root, "efficiency"), "dp_comm_overlap", cJSON_CreateNumber(-0.1));
    expect_bad(root, (const char *[]){"$.efficiency.dp_comm_overlap", "expected a number in [0, 1]",
                                      "got -0.1", NULL});
}

Test(system, gemm_points_must_increase) {
    cJSON *root = h100_tree();
    set_point(root, 2, 0, 1e9); /* equal to points[1][0] */
    expect_bad(root, (const char *[]){"$.efficiency.gemm.points[2][0]",
                                      "expected flops greater than the previous point's 1e+09",
                                      "got 1e+09", NULL});
    root = h100_tree();
    cJSON *pair = cJSON_GetArrayItem(member(member(member(root, "efficiency"), "gemm"), "points"), 1);
    cJSON_DeleteItemFromArray(pair, 1);
    expect_bad(root, (const char *[]){"$.efficiency.gemm.points[1]",
                                      "expected a [flops, efficiency] pair",
                                      "got an array of 1 elements", NULL});
    root = h100_tree();
    replace(member(member(root, "efficiency"), "gemm"), "points", cJSON_CreateArray());
    expect_bad(root, (const char *[]){"$.efficiency.gemm.points", "expected an array of 1 to 16",
                                      "got an array of 0 elements", NULL});
}

Test(system, gpus_zero_golden_message) {
    cJSON *root = h100_tree();
    replace(member(root, "node"), "gpus", cJSON_CreateNumber(0));
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    char path[64], want[256];
    ts_system s;
    write_temp(text, path);
    free(text);
    ts_error_clear();
    cr_assert_eq(ts_system_load(path, &s), TS_ERR_INPUT);
    unlink(path);
    snprintf(want, sizeof want, "%s: $.node.gpus: expected an integer in [1, 1024], got 0", path);
    cr_assert_str_eq(ts_error_message(), want);
}

Test(system, unknown_field_and_memory_left) {
    cJSON *root = h100_tree();
    cJSON_AddNumberToObject(member(root, "fabric"), "latency", 1e-6);
    expect_bad(root, (const char *[]){"$.fabric.latency", "unknown field",
                                      "expected one of nic_bytes_per_s, latency_s", NULL});
    root = h100_tree();
    replace(member(root, "memory"), "reserved_bytes", cJSON_CreateNumber(79e9));
    expect_bad(root, (const char *[]){"$.memory.reserved_bytes", "expected less than", "got 7.9e+10",
                                      NULL});
}

Test(system, unknown_zoo_name) {
    ts_system s;
    ts_error_clear();
    cr_assert_eq(ts_system_load("no-such-system", &s), TS_ERR_INPUT);
    assert_contains(ts_error_message(), "no-such-system");
    assert_contains(ts_error_message(), "models/systems");
}

Test(system, not_an_object) {
    expect_bad_text("[1, 2]", (const char *[]){"$: expected a system object, got an array", NULL});
}
