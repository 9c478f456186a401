/* Scale-up domains and fabric tiers in the cost model (planner/cost.h, models/system.h; suite
 * `fabric`): which link a group crosses, a collective over 1, 2 and 3 tiers priced as the formula
 * of docs/systems.md says, ring against tree by size, oversubscription slowing a DP all-reduce
 * by its ratio, and every zoo system planning a model. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/paths.h"
#include "planner/cost.h"
#include "planner/search.h"
#include "tests/helpers.h"

#define EXPECT_REL(got, want, ...) cr_expect(fabs((got) - (want)) <= 1e-12 * fabs(want), __VA_ARGS__)

/* 8-GPU domains; a leaf of 32 GPUs, a spine of 128 (2:1 below it), a core above (2:1 again). */
static ts_system three_tiers(void) {
    ts_system s;
    memset(&s, 0, sizeof s);
    s.gpus_per_node = s.domain_gpus = 8;
    s.link_bytes_per_s = 450e9, s.link_busbw_eff = 0.8, s.link_latency_s = 2e-6;
    s.nic_bytes_per_s = 50e9, s.nic_busbw_eff = 0.8, s.nic_latency_s = 5e-6;
    s.n_tiers = 3;
    s.tiers[0] = (ts_tier){"leaf", 32, 1.0, 1e-6};
    s.tiers[1] = (ts_tier){"spine", 128, 2.0, 2e-6};
    s.tiers[2] = (ts_tier){"core", 0, 2.0, 3e-6};
    return s;
}

Test(fabric, group_link_follows_domain_and_tiers) {
    ts_system s = three_tiers();
    cr_expect_eq(ts_group_link(&s, 1, 8), TS_LINK_NVLINK);
    cr_expect_eq(ts_group_link(&s, 8, 4), TS_LINK_NIC, "span 32: one leaf");
    cr_expect_eq(ts_group_link(&s, 8, 16), TS_LINK_SPINE, "span 128: one spine group");
    cr_expect_eq(ts_group_link(&s, 8, 17), TS_LINK_CORE);
    cr_expect_eq(ts_link_kinds(&s), 4);
    s.n_tiers = 0;
    cr_expect_eq(ts_group_link(&s, 8, 1024), TS_LINK_NIC, "a flat fabric has only the NIC");
    cr_expect_eq(ts_link_kinds(&s), 2);
    s.domain_gpus = 72;
    cr_expect_eq(ts_group_link(&s, 1, 64), TS_LINK_NVLINK, "EP64 inside an NVL72 domain");
    cr_expect_eq(ts_group_link(&s, 4, 32), TS_LINK_NIC, "span 128 leaves the domain");
}

/* Reduce-scatter over n ranks crossing tier k: (n−1)/n·B / (nic·eff / Π o) + (n−1)·(lat + Σ hop). */
Test(fabric, collective_over_one_two_three_tiers) {
    ts_system s = three_tiers();
    double B = 1e9, n = 4, frac = (n - 1) / n, base = 50e9 * 0.8;
    struct { ts_link link; double bw, lat; } want[] = {
        {TS_LINK_NIC, base, 5e-6 + 1e-6},
        {TS_LINK_SPINE, base / 2, 5e-6 + 1e-6 + 2e-6},
        {TS_LINK_CORE, base / 4, 5e-6 + 1e-6 + 2e-6 + 3e-6},
    };
    for (int k = 0; k < 3; k++) {
        EXPECT_REL(ts_link_busbw(&s, want[k].link), want[k].bw, "tier %d bandwidth", k);
        EXPECT_REL(ts_link_latency_s(&s, want[k].link), want[k].lat, "tier %d latency", k);
        EXPECT_REL(ts_coll_s(&s, TS_COLL_REDUCE_SCATTER, 4, B, want[k].link), frac * B / want[k].bw + 3 * want[k].lat,
                   "reduce-scatter over %d tier(s)", k + 1);
        EXPECT_REL(ts_coll_s(&s, TS_COLL_ALLTOALL, 4, B, want[k].link), frac * B / want[k].bw + 3 * want[k].lat,
                   "all-to-all over %d tier(s)", k + 1);
        EXPECT_REL(ts_coll_s(&s, TS_COLL_SENDRECV, 2, B, want[k].link), B / want[k].bw + want[k].lat,
                   "send-recv over %d tier(s)", k + 1);
    }
}

/* All-reduce over tiers: ring 2(n−1)/n·B/bw + 2(n−1)·lat, tree the same volume at 0.92 of the
 * bandwidth + 2·⌈log2 n⌉·lat (NCCL tuning.cc); small messages take the tree, large the ring. */
Test(fabric, ring_or_tree_by_size) {
    ts_system s = three_tiers();
    int n = 64;
    double bw = ts_link_busbw(&s, TS_LINK_CORE), lat = ts_link_latency_s(&s, TS_LINK_CORE);
    for (double B = 1e3; B <= 1e10; B *= 10) {
        double wire = 2.0 * (n - 1) / n * B / bw;
        double ring = wire + 2.0 * (n - 1) * lat, tree = wire / 0.92 + 2.0 * 6 * lat;
        EXPECT_REL(ts_coll_s(&s, TS_COLL_ALLREDUCE, n, B, TS_LINK_CORE), fmin(ring, tree), "%g bytes", B);
    }
    double small = 1e4, large = 1e10, wire_s = 2.0 * (n - 1) / n * small / bw, wire_l = 2.0 * (n - 1) / n * large / bw;
    EXPECT_REL(ts_coll_s(&s, TS_COLL_ALLREDUCE, n, small, TS_LINK_CORE), wire_s / 0.92 + 12 * lat, "tree for 10 KB");
    EXPECT_REL(ts_coll_s(&s, TS_COLL_ALLREDUCE, n, large, TS_LINK_CORE), wire_l + 2.0 * (n - 1) * lat, "ring for 10 GB");
}

/* A flat fabric keeps the model it had: one bus volume, the fewer latency steps. */
Test(fabric, flat_fabric_prices_as_before) {
    ts_system s = three_tiers();
    s.n_tiers = 0;
    int n = 16;
    double B = 1e8, bw = 50e9 * 0.8, lat = 5e-6;
    EXPECT_REL(ts_coll_s(&s, TS_COLL_ALLREDUCE, n, B, TS_LINK_NIC), 2.0 * (n - 1) / n * B / bw + 2.0 * 4 * lat,
               "the tree's latency, the ring's bandwidth");
}

/* The DP all-reduce of a layout whose DP group crosses an oversubscribed spine: its volume term
 * grows by the ratio, its latency not at all. */
Test(fabric, oversubscription_slows_dp_allreduce_by_its_ratio) {
    ts_system eth;
    cr_assert_eq(ts_system_load("h100-eth-2tier", &eth), TS_OK, "%s", ts_error_message());
    ts_system flat = eth;
    flat.tiers[1].oversubscription = 1;
    cr_assert_eq(eth.tiers[1].oversubscription, 2);
    int dp = 32, stride = 8; /* tp = 8: DP over 32 nodes, past the 64-GPU leaf */
    ts_link link = ts_group_link(&eth, stride, dp);
    cr_assert_eq(link, TS_LINK_SPINE);
    double B = 4e9; /* large: the ring */
    double lat = 2.0 * (dp - 1) * ts_link_latency_s(&eth, link);
    double t2 = ts_coll_s(&eth, TS_COLL_ALLREDUCE, dp, B, link), t1 = ts_coll_s(&flat, TS_COLL_ALLREDUCE, dp, B, link);
    EXPECT_REL((t2 - lat) / (t1 - lat), 2.0, "2:1 oversubscription doubles the volume term");
    cr_expect_gt(t2 / t1, 1.9);
    /* Inside one leaf (8 nodes) the spine's oversubscription costs nothing. */
    ts_link leaf = ts_group_link(&eth, stride, 8);
    cr_assert_eq(leaf, TS_LINK_NIC);
    cr_expect_eq(ts_coll_s(&eth, TS_COLL_ALLREDUCE, 8, B, leaf), ts_coll_s(&flat, TS_COLL_ALLREDUCE, 8, B, leaf));
}

/* Rail optimisation (docs/systems.md "Rail-optimised fabrics"; NVIDIA DGX SuperPOD RA: a scalable
 * unit of 32 nodes, NIC i of every node on rail leaf i, 32 node-facing ports per leaf). On
 * the rail-optimised fabric the leaf tier's reach is the rail group, 32 nodes = 256 GPUs; the same
 * 32-port leaves cabled node by node reach 4 nodes = 32 GPUs each. A DP group of the 32 nodes' GPUs
 * of one local rank (tp = 8: stride 8) stays on its rail leaf on the first, climbs to the spine
 * on the second; a group of mixed local ranks inside the leaf prices the same on both. */
Test(fabric, rail_group_keeps_same_local_rank_groups_on_the_leaf) {
    ts_system rail;
    cr_assert_eq(ts_system_load("h100-superpod", &rail), TS_OK, "%s", ts_error_message());
    cr_assert(rail.rail_optimized);
    cr_assert_eq(rail.tiers[0].gpus, 256);
    ts_system node_leaves = rail;
    node_leaves.rail_optimized = 0;
    node_leaves.tiers[0].gpus = rail.tiers[0].gpus / rail.gpus_per_node; /* 32 ports per leaf */
    int dp = 32, stride = 8;
    double B = 4e9, frac = (dp - 1.0) / dp;
    cr_assert_eq(ts_group_link(&rail, stride, dp), TS_LINK_NIC, "one rail leaf");
    cr_assert_eq(ts_group_link(&node_leaves, stride, dp), TS_LINK_SPINE, "32 nodes span 8 node leaves");
    double bw = rail.nic_bytes_per_s * rail.nic_busbw_eff / rail.tiers[0].oversubscription;
    double lat_leaf = rail.nic_latency_s + rail.tiers[0].latency_s, lat_spine = lat_leaf + rail.tiers[1].latency_s;
    EXPECT_REL(ts_coll_s(&rail, TS_COLL_ALLREDUCE, dp, B, TS_LINK_NIC), 2 * frac * B / bw + 2 * (dp - 1) * lat_leaf,
               "rail: ring at the leaf's bandwidth and latency");
    EXPECT_REL(ts_coll_s(&node_leaves, TS_COLL_ALLREDUCE, dp, B, TS_LINK_SPINE),
               2 * frac * B / (bw / rail.tiers[1].oversubscription) + 2 * (dp - 1) * lat_spine,
               "node leaves: ring at the spine's bandwidth and latency");
    cr_expect_eq(ts_group_link(&rail, stride, 64), TS_LINK_SPINE, "64 nodes: two rail groups");
    cr_expect_eq(ts_group_link(&rail, 1, 32), TS_LINK_NIC, "mixed local ranks, 4 nodes");
    cr_expect_eq(ts_group_link(&node_leaves, 1, 32), TS_LINK_NIC, "mixed local ranks, one node leaf");
}

/* Every system of the zoo loads and plans a model (llama3-8b on 64 GPUs; the CPU system the tiny
 * model on 4 ranks). */
Test(fabric, every_zoo_system_plans) {
    char names[64][64];
    int n = ts_zoo_list("models/systems", names, 64);
    cr_assert_geq(n, 14);
    for (int i = 0; i < n; i++) {
        ts_system s;
        cr_assert_eq(ts_system_load(names[i], &s), TS_OK, "%s: %s", names[i], ts_error_message());
        int cpu = s.cores_per_node > 0;
        ts_model m;
        cr_assert_eq(ts_model_load(cpu ? "tiny" : "llama3-8b", &m), TS_OK, "%s", ts_error_message());
        ts_problem pb = test_problem_on(&m, &s, cpu ? 4 : 64, cpu ? 8 : 256, cpu ? 64 : 4096, 1);
        ts_search_opts o;
        ts_search_opts_defaults(&o);
        o.top_k = 1;
        ts_search_result r;
        ts_error_clear();
        cr_assert_eq(ts_search(&pb, &o, &r), TS_OK, "%s: %s", names[i], ts_error_message());
        cr_expect_gt(r.n_best, 0, "%s", names[i]);
        cr_expect(r.best[0].step_s > 0 && isfinite(r.best[0].step_s), "%s: step %g s", names[i], r.best[0].step_s);
        ts_search_result_free(&r);
    }
}

/* The published DeepSeek-V3 run on 256 GB200 NVL72 GPUs (validation/published/gb200-moe.json,
 * Megatron-Bridge 25.11, MXFP8, EP64 inside the rack) predicted by the planner within 15% at its
 * layout; the same layout with 8-GPU NVLink domains (EP64 all-to-alls over InfiniBand) is
 * predicted at 1.96 times the rack's step (19.7 s against 10.05 s; the rack's all-to-alls also
 * wait for the replicas, planner/cost.h ts_sync_wait_s, the test system's do not), which is why
 * the domain matters: the check holds it above 1.5, where an all-to-all priced over NVLink would
 * give about 1 (with
 * the dispatch DeepSeek-V3's node-limited routing is built for, DeepEP in FP8, docs/moe.md: NCCL's
 * all-to-all of every copy at 16 bits would send over 2.5 times the IB bytes). */
static double planned_step_s(const char *system, const char *fix) {
    cli_result r = run_cli("plan", "--model", "deepseek-v3", "--system", system, "--gpus", "256", "--global-batch",
                           "2048", "--seq", "4096", "--dtype", "fp8", "--fp8-recipe", "mxfp8", "--fix", fix,
                           "--partition", "ilp", "--top", "1", "--json", NULL);
    cJSON *root = parse_json_output(&r, "plan --json");
    cli_result_free(&r);
    double step = json_num(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "layouts"), 0), "step_s", "layouts[0]");
    cJSON_Delete(root);
    return step;
}

Test(fabric, published_deepseek_v3_on_gb200_nvl72) {
    char *path = test_data_path("validation/published/gb200-moe.json");
    char *text = read_file(path);
    cr_assert_not_null(text, "%s", path);
    cJSON *cases = cJSON_Parse(text);
    cr_assert_not_null(cases);
    const cJSON *c = cJSON_GetArrayItem(cases, 0);
    cr_assert_str_eq(json_str(c, "system", "case"), "gb200-nvl72");
    const cJSON *m = cJSON_GetObjectItem(c, "measured"), *l = cJSON_GetObjectItem(c, "layout");
    double measured_s = 2048.0 * 4096 / (json_num(m, "tokens_per_s_per_gpu", "measured") * 256);
    char fix[256];
    /* Full recompute and ZeRO-1 (the distributed optimizer) fit the layout in the memory model. */
    snprintf(fix, sizeof fix, "tp=%d,pp=%d,vpp=%d,ep=%d,cp=%d,mbs=1,sched=interleaved,zero=1,recompute=full",
             (int)json_num(l, "tp", "layout"), (int)json_num(l, "pp", "layout"), (int)json_num(l, "vpp", "layout"),
             (int)json_num(l, "ep", "layout"), (int)json_num(l, "cp", "layout"));
    double predicted_s = planned_step_s("gb200-nvl72", fix);
    double err = predicted_s / measured_s - 1;
    cr_expect(fabs(err) <= 0.15, "predicted %.3f s, measured %.3f s: %+.1f%%", predicted_s, measured_s, 100 * err);
    char *hgx = test_data_path("tests/data/systems/gb200-8gpu-domain.json");
    double hgx_s = planned_step_s(hgx, fix);
    free(hgx);
    cr_expect_gt(hgx_s, 1.5 * predicted_s, "EP64 over InfiniBand: %.2f s vs %.2f s in the rack", hgx_s, predicted_s);
    cJSON_Delete(cases);
    free(text);
    free(path);
}

/* Reports list the domain and the tiers of systems that have them, and nothing new for the
 * others (their reports stay as they were). */
Test(fabric, reports_show_domain_and_tiers) {
    char *dir = make_temp_dir();
    char plan[4096];
    snprintf(plan, sizeof plan, "%s/plan.json", dir);
    const char *systems[] = {"gb200-nvl72", "h100-sxm-dgx"};
    for (int i = 0; i < 2; i++) {
        cli_result p = run_cli("plan", "--model", "llama3-8b", "--system", systems[i], "--gpus", "144", "--top", "1",
                               "-o", plan, NULL);
        cr_assert_eq(p.status, 0, "%s: %s", systems[i], p.err);
        cli_result_free(&p);
        cli_result r = run_cli("report", "--plan", plan, "--format", "md", NULL);
        cr_assert_eq(r.status, 0, "%s", r.err);
        int nvl72 = i == 0;
        cr_expect_eq(strstr(r.out, "| GPUs per NVLink domain | 72 |") != NULL, nvl72, "%s", systems[i]);
        cr_expect_eq(strstr(r.out, "fabric tier 3 oversubscription") != NULL, nvl72, "%s", systems[i]);
        cli_result_free(&r);
    }
    remove_dir(dir);
}
