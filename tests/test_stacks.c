/* Software-stack profiles (models/stack.h, planner/stack_rules.h), memory headroom, uncertainty
 * bands and ties (planner/bands.h, planner/robust.h) and `plan --against` (reports/ranking.h). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/paths.h"
#include "planner/bands.h"
#include "planner/published.h"
#include "planner/robust.h"
#include "planner/search.h"
#include "planner/stack_rules.h"
#include "program/schedule.h"
#include "tests/helpers.h"

static const char *const stacks[] = {"megatron-core", "megatron-lm-2021", "megatron-lm-2023",
                                     "megatron-deepspeed", "deepspeed", "torchtitan", "deepseek-v3"};
#define N_STACKS (sizeof stacks / sizeof stacks[0])

static ts_stack load_stack(const char *name) {
    ts_stack st;
    cr_assert_eq(ts_stack_load(name, ts_schedule_names, ts_recompute_names, &st), TS_OK, "%s: %s", name,
                 ts_error_message());
    return st;
}

/* The problem `test_problem` builds, on `stack`. */
static ts_problem on_stack(const char *model, const char *sys, int gpus, int64_t batch, int64_t seq, const char *stack) {
    ts_problem base = test_problem(model, sys, gpus, batch, seq, 1);
    ts_train t = base.train;
    t.stack = load_stack(stack);
    ts_problem pb;
    cr_assert_eq(ts_problem_init(&pb, &base.model, &base.sys, &t, gpus), TS_OK, "%s", ts_error_message());
    return pb;
}

Test(stacks, zoo_profiles_state_what_they_run) {
    for (size_t i = 0; i < N_STACKS; i++) {
        ts_stack st = load_stack(stacks[i]);
        cr_expect_str_eq(st.name, stacks[i]);
        cr_expect(st.schedules & (1u << TS_SCHED_1F1B), "%s runs 1F1B", st.name);
    }
    ts_stack mc = load_stack("megatron-core");
    cr_expect(!(mc.schedules & (1u << TS_SCHED_ZB_H1)), "upstream Megatron-Core has no ZB-H1");
    cr_expect(mc.etp && load_stack("torchtitan").etp, "experts apart from TP: core_r0.10.0+, TorchTitan");
    cr_expect(!load_stack("megatron-zb").etp && !load_stack("megatron-deepspeed").etp,
              "a stack file that does not say so keeps experts over TP");
    cr_expect(!(mc.schedules & (1u << TS_SCHED_GPIPE)));
    ts_stack m21 = load_stack("megatron-lm-2021");
    cr_expect(!m21.flash_attention && !m21.cp && !m21.sp && m21.zero == 1u, "2021: unfused, no CP/SP/ZeRO");
    ts_stack md = load_stack("megatron-deepspeed");
    cr_expect_eq(md.grad_reduce_bytes, 4, "BF16Optimizer reduces in fp32");
    cr_expect(!md.pp_scatter_gather && md.pp_max_zero == 1);
    ts_stack ds = load_stack("deepspeed");
    cr_expect(!ds.tp, "classic DeepSpeed has no TP");
    /* Megatron-LM 285068c8 (MegaScale's baseline): none of 2023's overlap flags yet */
    ts_stack m23 = load_stack("megatron-lm-2023");
    cr_expect(m23.tp_comm_overlap == 0 && m23.dp_comm_overlap == 0 && m23.pp_comm_overlap == 0,
              "no TP overlap, DP reduced after the backward, blocking sends");
    cr_expect_eq(m23.grad_reduce_bytes, 4, "bf16 forces fp32 all-reduce");
    cr_expect(m23.sp && !m23.cp && !m23.ep && m23.zero == 3u && !m23.flash_attention);
    cr_expect(mc.moe_a2a_overlap < 0 && mc.dtype < 0 && !mc.fp8_recipe[0] && mc.comm_sm_frac == 0,
              "Megatron-Core states no EP overlap, precision or SM share: the options' defaults");
    ts_stack v3 = load_stack("deepseek-v3");
    cr_expect(v3.schedules & (1u << TS_SCHED_DUALPIPE), "DeepSeek-V3 trained with DualPipe");
    cr_expect(!v3.tp && v3.ep && v3.pp && v3.zero == 3u, "no TP, EP, PP, ZeRO-1 at most");
    cr_expect_eq(v3.moe_a2a_overlap, 1, "all-to-all fully hidden (§3.2.1)");
    cr_expect(fabs(v3.comm_sm_frac - 20.0 / 132) < 1e-4, "20 of 132 SMs (§3.2.2)");
    cr_expect_eq(v3.dtype, TS_DTYPE_FP8);
    cr_expect_str_eq(v3.fp8_recipe, "blockwise");
}

/* The library's defaulting: what the stack states unless the caller's bit says it was given. */
Test(stacks, train_defaults_from_the_stack) {
    ts_stack v3 = load_stack("deepseek-v3");
    ts_train t;
    ts_train_defaults(&t);
    cr_assert_eq(ts_stack_train_defaults(&v3, 0, &t), TS_OK, "%s", ts_error_message());
    cr_expect(t.dtype == TS_DTYPE_FP8 && t.fp8_recipe == TS_FP8_BLOCKWISE && t.moe_a2a_overlap == 1);
    ts_train_defaults(&t);
    t.moe_a2a_overlap = 0.25;
    cr_assert_eq(ts_stack_train_defaults(&v3, TS_GIVEN_DTYPE | TS_GIVEN_MOE_A2A_OVERLAP, &t), TS_OK);
    cr_expect(t.dtype == TS_DTYPE_BF16 && t.fp8_recipe == TS_FP8_DELAYED && t.moe_a2a_overlap == 0.25,
              "given flags keep their values; no FP8 recipe without fp8");
    snprintf(v3.fp8_recipe, sizeof v3.fp8_recipe, "e5m2");
    cr_expect_eq(ts_stack_train_defaults(&v3, 0, &t), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "$.fp8_recipe") != NULL, "%s", ts_error_message());
}

/* A stack's EP overlap, precision and FP8 recipe are defaults: flags given override them. */
Test(stacks, stack_defaults_yield_to_flags) {
    const char *base[] = {"plan", "--model", "deepseek-v3", "--system", "h800-dgx", "--gpus", "2048",
                          "--global-batch", "15360", "--fix", "tp=1,pp=16,ep=64,zero=1,sched=dualpipe,recompute=full",
                          "--stack", "deepseek-v3", "--top", "1", "--json"};
    cli_result r = run_cli(base[0], base[1], base[2], base[3], base[4], base[5], base[6], base[7], base[8],
                           base[9], base[10], base[11], base[12], base[13], base[14], base[15], NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "\"dtype\":\t\"fp8\"") && strstr(r.out, "\"fp8_recipe\":\t\"blockwise\""), "%s", r.out);
    cr_expect(strstr(r.out, "\"moe_a2a_overlap\":\t1") != NULL, "the stack's overlap in the request");
    cli_result o = run_cli(base[0], base[1], base[2], base[3], base[4], base[5], base[6], base[7], base[8],
                           base[9], base[10], base[11], base[12], base[13], base[14], base[15], "--dtype", "bf16",
                           "--moe-a2a-overlap", "0", NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    cr_expect(strstr(o.out, "\"dtype\":\t\"bf16\"") && !strstr(o.out, "moe_a2a_overlap"), "%s", o.out);
    cli_result_free(&r);
    cli_result_free(&o);
}

/* The 2023 profile prices the MegaScale 175B layout (Table 1: TP 8, PP 8, six chunks) slower than
 * today's Megatron-Core in the terms its missing overlaps expose: DP, TP and the pipeline sends. */
Test(stacks, megatron_2023_exposes_what_it_did_not_overlap) {
    ts_layout l;
    cr_assert_eq(ts_layout_parse("test", "dp=16,tp=8,pp=8,cp=1,ep=1,sp=1,zero=1,mbs=1,vpp=6,sched=interleaved,recompute=none", &l),
                 TS_OK);
    ts_problem mc = on_stack("megascale-gpt-175b", "a100-80g-dgx", 1024, 768, 2048, "megatron-core");
    ts_problem m23 = on_stack("megascale-gpt-175b", "a100-80g-dgx", 1024, 768, 2048, "megatron-lm-2023");
    ts_eval a, b;
    cr_assert_eq(ts_evaluate(&mc, &l, &a), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_evaluate(&m23, &l, &b), TS_OK, "%s", ts_error_message());
    cr_expect_gt(b.time.dp_comm, 1.5 * a.time.dp_comm, "exposed, fp32: %g vs %g", b.time.dp_comm, a.time.dp_comm);
    cr_expect_gt(b.time.pp_comm, a.time.pp_comm, "blocking sends: %g vs %g", b.time.pp_comm, a.time.pp_comm);
    cr_expect_geq(b.time.tp_comm, a.time.tp_comm);
    cr_expect_gt(b.time.compute, a.time.compute, "unfused attention");
    cr_expect_gt(b.step_s, a.step_s);
}

/* MegaScale Table 2's Megatron-LM rows are in the published set, each predicted on its stack. */
Test(stacks, megascale_baseline_rows_are_predicted_on_their_stack) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/validation/published", data_root());
    ts_pub_case *c;
    int n, rows = 0;
    cr_assert_eq(ts_published_run(dir, &c, &n), TS_OK, "%s", ts_error_message());
    for (int i = 0; i < n; i++) {
        if (strncmp(c[i].id, "megascale-", 10)) continue;
        rows++;
        cr_expect_str_eq(c[i].stack, "megatron-lm-2023");
        cr_expect(!c[i].unfit && c[i].tp == 8 && c[i].pp == 8 && c[i].dp == c[i].gpus / 64, "%s", c[i].id);
        cr_expect_gt(c[i].predicted, 0);
    }
    free(c);
    cr_expect_eq(rows, 8, "256 ... 12,288 GPUs");
}

/* No layout the search keeps is one its stack cannot run, on every stack. */
Test(stacks, the_search_ranks_only_what_the_stack_runs) {
    for (size_t i = 0; i < N_STACKS; i++) {
        ts_problem pb = on_stack("llama2-13b", "h100-sxm-dgx", 32, 256, 4096, stacks[i]);
        ts_search_opts o;
        ts_search_opts_defaults(&o);
        o.top_k = 200;
        ts_search_result r;
        cr_assert_eq(ts_search(&pb, &o, &r), TS_OK, "%s: %s", stacks[i], ts_error_message());
        cr_assert_gt(r.n_best, 0);
        for (int k = 0; k < r.n_best; k++) {
            char why[512];
            cr_expect_null(ts_stack_refusal(&pb.train.stack, &r.best[k].layout, 0, why, sizeof why), "%s", why);
        }
        ts_search_result_free(&r);
    }
}

/* One layout priced on two stacks: Megatron-DeepSpeed exposes the DP reduction (in fp32) and sends
 * every TP rank's whole activation, so the same layout is slower there, in those terms. */
Test(stacks, pricing_follows_the_stack) {
    ts_layout l;
    cr_assert_eq(ts_layout_parse("test", "dp=4,tp=4,pp=4,cp=1,ep=1,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=full", &l),
                 TS_OK);
    ts_problem mc = on_stack("llama2-70b", "h100-sxm-dgx", 64, 256, 4096, "megatron-core");
    ts_problem md = on_stack("llama2-70b", "h100-sxm-dgx", 64, 256, 4096, "megatron-deepspeed");
    ts_eval a, b;
    cr_assert_eq(ts_evaluate(&mc, &l, &a), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_evaluate(&md, &l, &b), TS_OK, "%s", ts_error_message());
    cr_expect_gt(b.time.dp_comm, a.time.dp_comm, "no DP overlap, fp32 reduction");
    cr_expect(fabs(b.time.pp_comm / a.time.pp_comm - 4.0) < 0.5, "no scatter/gather: ×tp pipeline bytes, %g vs %g",
              b.time.pp_comm, a.time.pp_comm);
    cr_expect_gt(b.time.compute, a.time.compute, "unfused attention");
    cr_expect_gt(b.step_s, a.step_s);
    cr_expect_eq(md.train.flash_attention, 0);
}

Test(stacks, headroom_is_the_line_no_pick_crosses) {
    ts_problem base = test_problem("llama2-70b", "h100-sxm-dgx", 64, 1024, 4096, 1);
    double usable = ts_system_usable_bytes(&base.sys);
    cr_expect_eq(base.usable_bytes, usable, "the library's default keeps no headroom");
    ts_train t = base.train;
    t.mem_headroom_frac = 0.10;
    ts_problem pb;
    cr_assert_eq(ts_problem_init(&pb, &base.model, &base.sys, &t, 64), TS_OK);
    cr_expect(fabs(pb.usable_bytes - 0.9 * usable) < 1, "10%% of the usable bytes");
    t.mem_headroom_bytes = 8e9;
    cr_assert_eq(ts_problem_init(&pb, &base.model, &base.sys, &t, 64), TS_OK);
    cr_expect(fabs(pb.usable_bytes - (usable - 8e9)) < 1, "bytes win over the fraction");
    cr_expect(ts_mem_tight(&pb, 0.96 * pb.usable_bytes) && !ts_mem_tight(&pb, 0.94 * pb.usable_bytes));
    /* The CLI: every layout under the line; tight marks what is within 5% of it. */
    cli_result r = run_cli("plan", "--model", "llama2-70b", "--system", "h100-sxm-dgx", "--gpus", "64", "--top", "20",
                           "--mem-headroom", "0.05", "--json", NULL);
    cJSON *plan = parse_json_output(&r, "plan --json");
    double line = json_num(plan, "usable_bytes", "$");
    cr_expect(fabs(json_num(plan, "headroom_bytes", "$") - 0.05 * usable) < 1e3);
    const cJSON *l;
    cJSON_ArrayForEach(l, cJSON_GetObjectItem(plan, "layouts")) {
        double mem = json_num(json_obj(l, "memory_bytes", "layout"), "total", "memory_bytes");
        cr_expect_leq(mem, line, "a pick above the line");
        cr_expect_eq(cJSON_IsTrue(cJSON_GetObjectItem(l, "tight")), mem > 0.95 * line);
    }
    cJSON_Delete(plan);
    cli_result_free(&r);
}

/* The bands are the published cases' step errors, by family, on the stack they ran on: BF16 runs
 * in dense, runs at cp > 1 in CP as well, MoE runs in MoE alone (planner/bands.h). */
Test(stacks, bands_are_the_residuals_on_published_runs) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/validation/published", data_root());
    ts_bands b;
    cr_assert_eq(ts_bands_compute(dir, "megatron-core", 1, &b), TS_OK, "%s", ts_error_message());
    ts_pub_case *c;
    int n;
    cr_assert_eq(ts_published_run(dir, &c, &n), TS_OK);
    ts_band_stat want[TS_FAM_COUNT], h100[TS_FAM_COUNT]; /* on every GPU, on the H100 */
    for (int f = 0; f < TS_FAM_COUNT; f++) want[f] = h100[f] = (ts_band_stat){0, INFINITY, -INFINITY};
    for (int i = 0; i < n; i++) {
        if (strcmp(c[i].stack, "megatron-core") || c[i].unfit) continue;
        int moe = c[i].moe;
        cr_expect_eq(moe, c[i].kind == TS_PUB_NVIDIA_MOE_STEP || c[i].kind == TS_PUB_NVIDIA_MOE_STEP_FP8 ||
                              c[i].kind == TS_PUB_BRIDGE_MOE_STEP, "%s", c[i].id);
        int fams[3] = {moe ? TS_FAM_MOE : c[i].fp8 ? TS_FAM_FP8 : TS_FAM_DENSE, !moe && c[i].cp > 1 ? TS_FAM_CP : -1,
                       !moe && c[i].gpus >= TS_BAND_SCALE_GPUS ? TS_FAM_SCALE : -1};
        for (int k = 0; k < 3; k++) {
            for (int on = 0; on < 2 && fams[k] >= 0; on++) {
                if (on && strcmp(c[i].gpu, "H100 SXM5 80GB")) continue;
                ts_band_stat *w = on ? &h100[fams[k]] : &want[fams[k]];
                w->n++, w->err_min = fmin(w->err_min, c[i].step_error), w->err_max = fmax(w->err_max, c[i].step_error);
            }
        }
    }
    free(c);
    for (int f = 0; f < TS_FAM_COUNT; f++) {
        cr_expect_eq(b.fam[f].n, want[f].n, "%s: %d runs, want %d", ts_family_names[f], b.fam[f].n, want[f].n);
        if (want[f].n)
            cr_expect(b.fam[f].err_min == want[f].err_min && b.fam[f].err_max == want[f].err_max, "%s",
                      ts_family_names[f]);
    }
    cr_expect_gt(want[TS_FAM_MOE].n, 0, "published MoE rows (docs/moe.md)");
    /* a dense plan's bands: the same families less MoE, whose runs are not even predicted */
    ts_bands dense;
    cr_assert_eq(ts_bands_compute(dir, "megatron-core", 0, &dense), TS_OK, "%s", ts_error_message());
    cr_expect_eq(dense.fam[TS_FAM_MOE].n, 0);
    for (int f = 0; f < TS_FAM_COUNT; f++)
        if (f != TS_FAM_MOE)
            cr_expect(dense.fam[f].n == b.fam[f].n && dense.fam[f].err_min == b.fam[f].err_min &&
                          dense.fam[f].err_max == b.fam[f].err_max,
                      "%s", ts_family_names[f]);
    cr_expect_eq(dense.stack_all.n, b.stack_all.n - b.fam[TS_FAM_MOE].n);
    cr_expect_gt(want[TS_FAM_CP].n, 0, "published rows at cp > 1 (Llama 3.1)");
    ts_problem pb = on_stack("llama2-70b", "h100-sxm-dgx", 64, 1024, 4096, "megatron-core");
    ts_layout l = {.dp = 2, .tp = 8, .pp = 4, .cp = 1, .ep = 1, .mbs = 1, .vpp = 5, .schedule = TS_SCHED_INTERLEAVED};
    ts_band one;
    ts_band_of(&b, &pb, &l, 10.0, &one);
    double lo = h100[TS_FAM_DENSE].err_min, hi = h100[TS_FAM_DENSE].err_max; /* the plan's GPU's runs */
    cr_expect(fabs(one.lo_s - 10.0 / (1 + hi)) < 1e-12 && fabs(one.hi_s - 10.0 / (1 + lo)) < 1e-12);
    cr_expect_eq(one.unmeasured, 0u);
    l.cp = 2, l.dp = 1;
    ts_band_of(&b, &pb, &l, 10.0, &one);
    cr_expect_eq(one.unmeasured, 0u, "CP has published runs");
    cr_expect(h100[TS_FAM_CP].n > 0 && fabs(one.lo_s - 10.0 / (1 + fmax(hi, h100[TS_FAM_CP].err_max))) < 1e-12 &&
                  fabs(one.hi_s - 10.0 / (1 + fmin(lo, h100[TS_FAM_CP].err_min))) < 1e-12,
              "the widest of the H100's dense and CP runs");
}

/* The bands keep the runs by GPU: a plan on a GPU with runs takes only theirs, a family without a
 * run there the widest band of that GPU's runs; a plan on another GPU takes every GPU's runs and
 * says so (bands.h). Bands set by hand: the arithmetic, apart from what the published runs say. */
Test(stacks, a_band_comes_from_the_runs_on_its_gpu) {
    ts_bands b = {0};
    b.fam[TS_FAM_DENSE] = (ts_band_stat){.n = 3, .err_min = -0.05, .err_max = 0.02};
    b.fam[TS_FAM_FP8] = (ts_band_stat){.n = 4, .err_min = -0.20, .err_max = 0.06};
    b.stack_all = (ts_band_stat){.n = 7, .err_min = -0.20, .err_max = 0.06};
    b.n_gpus = 2;
    snprintf(b.gpus[0].name, sizeof b.gpus[0].name, "H100 SXM5 80GB");
    b.gpus[0].gemm_eff = test_problem("llama3-8b", "h100-sxm-dgx", 8, 128, 8192, 1).sys.gemm_eff;
    b.gpus[0].fam[TS_FAM_DENSE] = b.fam[TS_FAM_DENSE];
    b.gpus[0].fam[TS_FAM_FP8] = (ts_band_stat){.n = 2, .err_min = -0.03, .err_max = 0.06};
    b.gpus[0].all = (ts_band_stat){.n = 5, .err_min = -0.05, .err_max = 0.06};
    snprintf(b.gpus[1].name, sizeof b.gpus[1].name, "B200 180GB (DGX B200)");
    b.gpus[1].gemm_eff = test_problem("llama3-8b", "b200-dgx", 8, 128, 8192, 1).sys.gemm_eff;
    b.gpus[1].fam[TS_FAM_FP8] = (ts_band_stat){.n = 2, .err_min = -0.20, .err_max = -0.10};
    b.gpus[1].all = b.gpus[1].fam[TS_FAM_FP8];
    ts_layout l = {.dp = 8, .tp = 1, .pp = 1, .cp = 1, .ep = 1, .mbs = 1, .vpp = 1, .schedule = TS_SCHED_1F1B};
    static const struct {
        const char *system;
        ts_dtype dtype;
        double err_min, err_max; /* the band's errors */
        unsigned unmeasured;
        int runs_for;  /* ts_bands_runs_for: 1 its GPU's runs, 2 its curve's, 0 every GPU's */
        unsigned gpus; /* and theirs: bit 0 the H100, bit 1 the B200 */
    } cases[] = {
        {"h100-sxm-dgx", TS_DTYPE_FP8, -0.03, 0.06, 0, 1, 1}, /* the H100's FP8 runs, not the B200's */
        {"b200-dgx", TS_DTYPE_FP8, -0.20, -0.10, 0, 1, 2}, /* the B200's: measured above the prediction */
        {"b200-dgx", TS_DTYPE_BF16, -0.20, -0.10, 1u << TS_FAM_DENSE, 1, 2}, /* no dense run there: its runs' widest */
        {"h200-dgx", TS_DTYPE_FP8, -0.03, 0.06, 0, 2, 1}, /* no run on H200: the H100's, the curve being theirs */
        {"gb200-nvl72", TS_DTYPE_FP8, -0.20, -0.10, 0, 2, 2}, /* the same B200 die and curve: the B200 runs */
        {"mi300x", TS_DTYPE_FP8, -0.20, 0.06, 0, 0, 0}, /* a curve no run shares: every GPU's FP8 runs */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ts_problem base = test_problem("llama3-8b", cases[i].system, 8, 128, 8192, 1);
        ts_train t = base.train;
        ts_train_set_dtype(&t, cases[i].dtype);
        ts_problem pb;
        cr_assert_eq(ts_problem_init(&pb, &base.model, &base.sys, &t, 8), TS_OK, "%s", ts_error_message());
        ts_band one;
        ts_band_of(&b, &pb, &l, 10.0, &one);
        cr_expect(fabs(one.lo_s - 10.0 / (1 + cases[i].err_max)) < 1e-12 &&
                      fabs(one.hi_s - 10.0 / (1 + cases[i].err_min)) < 1e-12,
                  "%s %s: band %.4f-%.4f s", cases[i].system, ts_dtype_names[cases[i].dtype], one.lo_s, one.hi_s);
        cr_expect_eq(one.unmeasured, cases[i].unmeasured, "%s", cases[i].system);
        ts_band_gpu runs;
        unsigned gpus;
        cr_expect_eq(ts_bands_runs_for(&b, &pb.sys, &runs, &gpus), cases[i].runs_for, "%s", cases[i].system);
        cr_expect_eq(gpus, cases[i].gpus, "%s: GPUs %#x", cases[i].system, gpus);
    }
}

/* megatron-core's runs were measured on H100 (NVIDIA's dgxc and Megatron-Bridge recipes) and on
 * Blackwell (Megatron-Bridge); a plan on a GPU without runs says that its band is theirs, in the
 * plan's band line and JSON and in the report; one with runs names its GPU. */
Test(stacks, a_band_says_which_gpus_it_was_measured_on) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/validation/published", data_root());
    ts_bands b;
    cr_assert_eq(ts_bands_compute(dir, "megatron-core", 0, &b), TS_OK, "%s", ts_error_message());
    cr_expect(ts_bands_measured_on(&b, "H100 SXM5 80GB") && ts_bands_measured_on(&b, "B200 180GB (DGX B200)") &&
              !ts_bands_measured_on(&b, "H200 SXM 141GB"));
    static const struct {
        const char *system;
        int measured;
        const char *gpus; /* the GPUs whose runs its band takes */
    } cases[] = {{"h100-sxm-dgx", 1, "H100 SXM5 80GB"},
                 {"b200-dgx", 1, "B200 180GB (DGX B200)"},
                 {"h200-dgx", 0, "H100 SXM5 80GB"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_result r = run_cli("plan", "--model", "llama3-8b", "--system", cases[i].system, "--gpus", "8", "--top", "1",
                               NULL);
        cr_assert_eq(r.status, 0, "%s", r.err);
        cr_expect_eq(strstr(r.out, "the band is that of runs on H100 SXM5 80GB, whose GEMM efficiency curve it shares") ==
                         NULL,
                     cases[i].measured, "%s:\n%s", cases[i].system, r.out);
        cr_expect_eq(strstr(r.out, ", of the runs on the ") != NULL, cases[i].measured, "%s", cases[i].system);
        cli_result_free(&r);
        r = run_cli("plan", "--model", "llama3-8b", "--system", cases[i].system, "--gpus", "8", "--top", "1", "--json",
                    NULL);
        cJSON *plan = cJSON_Parse(r.out);
        cr_assert_not_null(plan);
        cr_expect_eq(cJSON_IsTrue(cJSON_GetObjectItem(plan, "band_measured_on_gpu")), cases[i].measured);
        cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(plan, "band_gpus")), 1);
        cr_expect_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(plan, "band_gpus"), 0)->valuestring, cases[i].gpus);
        cJSON_Delete(plan);
        cli_result_free(&r);
        char *tmp = make_temp_dir(), file[4200];
        snprintf(file, sizeof file, "%s/plan.json", tmp);
        r = run_cli("plan", "--model", "llama3-8b", "--system", cases[i].system, "--gpus", "8", "--top", "2", "-o", file,
                    NULL);
        cli_result_free(&r);
        r = run_cli("report", "--plan", file, "--format", "md", NULL);
        cr_assert_eq(r.status, 0, "%s", r.err);
        cr_expect_eq(strstr(r.out, "**Band.** No published run behind it was measured on the") == NULL,
                     cases[i].measured, "report on %s", cases[i].system);
        cli_result_free(&r);
        remove_dir(tmp);
    }
}

/* The tie: the first `tied` layouts overlap the fastest's band and are listed most robust first;
 * --against explains the pick term by term and the terms add up to the step difference. */
Test(stacks, ties_go_to_robustness_and_against_adds_up) {
    cli_result r = run_cli("plan", "--model", "llama2-70b", "--system", "h100-sxm-dgx", "--gpus", "64", "--top", "10",
                           "--against", "tp=8,pp=4,vpp=5", "--json", NULL);
    cJSON *plan = parse_json_output(&r, "plan --json");
    const cJSON *layouts = cJSON_GetObjectItem(plan, "layouts");
    const cJSON *first = cJSON_GetArrayItem(layouts, 0);
    cr_expect_gt(json_num(plan, "tied", "$"), 1, "the 70B's best layouts are within each other's bands");
    cr_expect_str_eq(json_str(first, "exotic", "$.layouts[0]"), "", "the tie goes to a layout with nothing exotic");
    cr_expect(strstr(json_str(plan, "tie", "$"), "overlap the fastest's band") != NULL);
    int prev_exotic = 0;
    const cJSON *l;
    cJSON_ArrayForEach(l, layouts) {
        if (!cJSON_IsTrue(cJSON_GetObjectItem(l, "tie"))) break;
        int exotic = json_str(l, "exotic", "layout")[0] != '\0' || cJSON_IsTrue(cJSON_GetObjectItem(l, "tight"));
        cr_expect_geq(exotic, prev_exotic, "robust layouts first");
        prev_exotic = exotic;
    }
    const cJSON *against = json_obj(plan, "against", "$");
    const cJSON *al = json_obj(against, "layout", "$.against");
    cr_expect(strstr(json_str(al, "layout", "$.against.layout"), "tp=8,pp=4,") != NULL);
    const char *text = json_str(against, "text", "$.against");
    cr_expect(strstr(text, "TP comm ") && strstr(text, "memory "), "%s", text);
    const cJSON *ta = json_obj(first, "time_s", "best"), *tb = json_obj(al, "time_s", "against");
    double sum = 0;
    const cJSON *term;
    cJSON_ArrayForEach(term, ta) sum += term->valuedouble - json_num(tb, term->string, "against time_s");
    cr_expect(fabs(sum - (json_num(first, "step_s", "best") - json_num(al, "step_s", "against"))) < 1e-9,
              "the terms add up to the step difference");
    cJSON_Delete(plan);
    cli_result_free(&r);
}

/* A plan remembers its stack: sim --plan prices the layout as the plan did. */
Test(stacks, plans_carry_their_stack) {
    char *dir = make_temp_dir();
    char plan[4200];
    snprintf(plan, sizeof plan, "%s/p.json", dir);
    cli_result r = run_cli("plan", "--model", "llama2-13b", "--system", "a100-80g-dgx", "--gpus", "32",
                           "--global-batch", "256", "--seq", "2048", "--stack", "megatron-deepspeed", "--top", "1",
                           "-o", plan, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    char *text = read_file(plan);
    cJSON *p = cJSON_Parse(text);
    const cJSON *best = cJSON_GetArrayItem(cJSON_GetObjectItem(p, "layouts"), 0);
    cr_expect_str_eq(json_str(json_obj(p, "request", "$"), "stack", "$.request"), "megatron-deepspeed");
    cr_expect(strstr(json_str(best, "layout", "best"), "sched=1f1b") && strstr(json_str(best, "layout", "best"), "sp=0"));
    test_expect_sim_reprices(plan, best, "the plan's step, re-priced on its stack");
    cJSON_Delete(p);
    free(text);
    remove_dir(dir);
}

/* A pin the default stack cannot run is priced on the zoo stack that runs it, unless --stack is
 * given, in that stack's precision unless --dtype is given or the system lacks it. */
Test(stacks, pins_the_default_cannot_run_find_a_stack_that_can) {
    ts_pins pins;
    cr_assert_eq(ts_pins_parse("--fix", "pp=4,sched=dualpipe", &pins), TS_OK, "%s", ts_error_message());
    ts_stack core = load_stack("megatron-core"), found_stack;
    cr_expect_str_eq(ts_stack_refuses_pins(&core, &pins), "schedule");
    int found = 0;
    cr_assert_eq(ts_stack_for_pins(&pins, &found_stack, &found), TS_OK, "%s", ts_error_message());
    cr_assert(found);
    cr_expect_null(ts_stack_refuses_pins(&found_stack, &pins), "%s runs dualpipe", found_stack.name);
    cr_assert_eq(ts_pins_parse("--fix", "tp=2,pp=2", &pins), TS_OK);
    cr_expect_null(ts_stack_refuses_pins(&core, &pins), "nothing to replace");

    const char *common[] = {"--model", "llama2-7b", "--system", "h100-sxm-dgx", "--gpus", "16", "--global-batch", "64",
                            "--fix", "tp=1,pp=4,sched=dualpipe"};
    cli_result r = run_cli("sim", common[0], common[1], common[2], common[3], common[4], common[5], common[6],
                           common[7], common[8], common[9], NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "cannot run the pins") && strstr(r.err, found_stack.name), "%s", r.err);
    cr_expect(strstr(r.out, "tokens, fp8,") && strstr(r.err, "in its precision fp8"),
              "the stack's precision comes with it: %s%s", r.err, r.out);
    cli_result_free(&r);
    r = run_cli("sim", common[0], common[1], common[2], common[3], common[4], common[5], common[6], common[7],
                common[8], common[9], "--dtype", "bf16", NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "tokens, bf16,") && !strstr(r.err, "in its precision"), "--dtype stays: %s", r.err);
    cli_result_free(&r);
    r = run_cli("sim", common[0], common[1], common[2], "a100-80g-dgx", common[4], common[5], common[6], common[7],
                common[8], common[9], NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "tokens, bf16,") && strstr(r.err, "not on every system, so not taken"),
              "no FP8 on an A100: %s%s", r.err, r.out);
    cli_result_free(&r);
    r = run_cli("sim", common[0], common[1], common[2], common[3], common[4], common[5], common[6], common[7],
                common[8], common[9], "--stack", "megatron-core", NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "cannot run") && !strstr(r.err, "priced with"), "a named stack stays: %s", r.err);
    cli_result_free(&r);
}

/* DeepSpeed's TrainSchedule (deepspeed/runtime/pipe/schedule.py, v0.5 as MT-NLG and BigScience
 * ran it, DeepSpeed commit 9f17087f): 2·(m + p − 1) steps; at step t stage s runs the forward of
 * a micro-batch when t and s have the same parity, else a backward, the micro-batch given by
 * _even/_odd_step_forward/backward_id; ids outside [0, m) are idle steps (exchanges only). */
static int deepspeed_step_mb(int p, int s, int t, int *forward) {
    *forward = t % 2 == s % 2;
    if (t % 2 == 0 && s % 2 == 0) return t / 2 - s / 2;
    if (t % 2 == 1 && s % 2 == 1) return (t - 1) / 2 - s / 2;
    if (t % 2 == 0) return t / 2 - p + (s + 1) / 2;
    return (t - 1) / 2 - p + 1 + s / 2;
}

/* The megatron-deepspeed profile prices DeepSpeed's engine as 1F1B: each stage's forwards and
 * backwards come in exactly 1F1B's order (F_j at step 2j + s, B_j at step 2j + 2p − 1 − s, so
 * p − s forwards before the first backward), for any p and m. Its fill and drain are therefore
 * 1F1B's (p − 1)(t_f + t_b); what differs is only how the sends pair up (docs/stacks.md). */
Test(stacks, deepspeed_train_schedule_runs_1f1b_order) {
    static const int ps[] = {1, 2, 3, 4, 5, 8, 12, 35};
    const ts_schedule_info *one = &ts_schedules[TS_SCHED_1F1B];
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        int p = ps[i];
        const int ms[] = {1, 2, 3, p, p + 1, 2 * p + 3, 240};
        for (size_t k = 0; k < sizeof ms / sizeof ms[0]; k++) {
            int m = ms[k];
            ts_slot *want = calloc((size_t)3 * m, sizeof *want);
            cr_assert(want);
            for (int s = 0; s < p; s++) {
                int n_want = one->order(p, 1, m, s, want), n = 0, mismatch = -1;
                for (int t = 0; t < 2 * (m + p - 1); t++) {
                    int fwd, mb = deepspeed_step_mb(p, s, t, &fwd);
                    if (mb < 0 || mb >= m) continue;
                    int kind = fwd ? TS_SLOT_F : TS_SLOT_B;
                    if (mismatch < 0 && (n >= n_want || want[n].kind != kind || want[n].mb != mb)) mismatch = n;
                    n++;
                }
                cr_expect_eq(n, 2 * m, "p=%d m=%d stage %d: %d compute steps", p, m, s, n);
                cr_expect_eq(n, n_want, "p=%d m=%d stage %d", p, m, s);
                cr_expect_eq(mismatch, -1, "p=%d m=%d stage %d: slot %d differs from 1F1B", p, m, s, mismatch);
            }
            free(want);
        }
    }
}

/* tp = 1 is exotic on a model of 15B+ parameters; an MoE model counts its active ones. */
Test(stacks, tp1_is_exotic_by_the_parameters_a_token_meets) {
    ts_layout l = {.dp = 8, .tp = 1, .pp = 1, .cp = 1, .ep = 8, .mbs = 1, .vpp = 1, .schedule = TS_SCHED_1F1B};
    char words[256];
    ts_problem small = test_problem("mixtral-8x7b", "h100-sxm-dgx", 8, 64, 4096, 1); /* 47B total, 13B active */
    cr_expect_eq(ts_exotic_dims(&small, &l, words, sizeof words), 0, "%s", words);
    ts_problem big = test_problem("mixtral-8x22b", "h100-sxm-dgx", 8, 64, 4096, 1); /* 141B total, 39B active */
    cr_expect_eq(ts_exotic_dims(&big, &l, words, sizeof words), 1);
    cr_expect(strstr(words, "active parameters") != NULL, "%s", words);
    l.ep = 1;
    ts_problem dense = test_problem("llama2-70b", "h100-sxm-dgx", 8, 64, 4096, 1);
    cr_expect_eq(ts_exotic_dims(&dense, &l, words, sizeof words), 1);
    cr_expect(strstr(words, "active") == NULL && strstr(words, "tp=1 at 69B parameters") != NULL, "%s", words);
}

/* Megatron-Core refuses experts with biases over TP ("Bias in Moe is only supported when ETP==1"):
 * on its stack the search splits GPT-OSS's biased experts apart from TP at every tp > 1; on a stack
 * without the rule (TorchTitan) it offers both. */
Test(stacks, biased_experts_run_apart_from_tp_on_megatron_core) {
    char *cfg = test_data_path("tests/data/hf/gpt-oss-20b.json");
    const char *names[] = {"megatron-core", "torchtitan"};
    for (int s = 0; s < 2; s++) {
        ts_problem pb = on_stack(cfg, "h100-sxm-dgx", 16, 64, 4096, names[s]);
        cr_assert(pb.model.linear_bias && pb.model.moe.experts > 0, "gpt-oss: biased experts");
        ts_search_opts o;
        ts_search_opts_defaults(&o);
        o.top_k = 100000;
        o.prune = 0;
        ts_search_result r;
        cr_assert_eq(ts_search(&pb, &o, &r), TS_OK, "%s: %s", names[s], ts_error_message());
        int over_tp = 0, apart = 0;
        for (int k = 0; k < r.n_best; k++) {
            const ts_layout *l = &r.best[k].layout;
            if (l->tp > 1 && l->etp == 1) apart++;
            else if (l->tp > 1) over_tp++;
        }
        cr_expect_gt(apart, 0, "%s: etp=1 offered", names[s]);
        if (s == 0) cr_expect_eq(over_tp, 0, "megatron-core: no biased experts over TP");
        else cr_expect_gt(over_tp, 0, "torchtitan: experts over TP too");
        ts_search_result_free(&r);
    }
    free(cfg);
}
