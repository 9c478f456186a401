/* Megatron-Core's combined 1F1B (--overlap-moe-expert-parallel-comm; program/sched_combined.c):
 *  - the order: one warm-up forward more than 1F1B's, every later forward paired with the
 *    backward after it, never its own micro-batch's, the same slots as the schedule's;
 *  - the rules Megatron-Core asserts (ep > 1, no pipelining or the interleaved schedule, no full
 *    recompute, the alltoall or deepep dispatcher), refused with the reason;
 *  - the step program: the EP collectives on a stream of their own, the pairs tagged;
 *  - the simulator hides cross-node EP traffic under the partner's computation and the closed
 *    form (planner/layer.c combined_exposed_s) agrees with it within 5%;
 *  - the planner holds 1F1B's peak of activations (each pair's backward frees what its forward
 *    stores). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/stack.h"
#include "planner/problem.h"
#include "planner/search.h"
#include "planner/stack_rules.h"
#include "program/program.h"
#include "program/schedule.h"
#include "tests/helpers.h"

/* The forward of (mb, chunk) before position `at` of the order. */
static int forward_before(const ts_slot *o, int at, int mb, int chunk) {
    for (int i = 0; i < at; i++)
        if (o[i].kind == TS_SLOT_F && o[i].mb == mb && o[i].chunk == chunk) return 1;
    return 0;
}

static void check_order(ts_schedule id, int p, int v, int m) {
    for (int s = 0; s < p; s++) {
        int cap = 3 * m * v;
        ts_slot *base = calloc((size_t)cap, sizeof *base), *comb = calloc((size_t)cap, sizeof *comb);
        cr_assert(base && comb, "out of memory");
        int n = ts_schedules[id].order(p, v, m, s, base);
        for (int i = 0; i < n; i++) comb[i] = base[i];
        cr_assert_eq(ts_sched_combined_1f1b(comb, n), n, "p=%d v=%d m=%d stage %d: slots lost", p, v, m, s);
        int warm = 0, warm_c = 0, pairs = 0, fwd_b = 0, fwd_c = 0, bwd_b = 0, bwd_c = 0;
        /* 1F1B's warm-up is the forwards before the first backward but the one beside it */
        while (warm < n && base[warm + 1].kind == TS_SLOT_F) warm++;
        while (warm_c < n && comb[warm_c].kind == TS_SLOT_F && !comb[warm_c].pair) warm_c++;
        cr_expect_eq(warm_c, warm + 1 < m * v ? warm + 1 : m * v, "p=%d v=%d m=%d stage %d: warm-up %d, 1F1B's %d", p,
                     v, m, s, warm_c, warm);
        for (int i = 0; i < n; i++) {
            /* each kind keeps its order: the k-th forward (backward) is the schedule's k-th */
            if (comb[i].kind == TS_SLOT_F) {
                while (base[fwd_b].kind != TS_SLOT_F) fwd_b++;
                cr_expect(comb[i].mb == base[fwd_b].mb && comb[i].chunk == base[fwd_b].chunk, "forward %d moved", fwd_c);
                fwd_b++, fwd_c++;
            } else {
                while (base[bwd_b].kind != TS_SLOT_B) bwd_b++;
                cr_expect(comb[i].mb == base[bwd_b].mb && comb[i].chunk == base[bwd_b].chunk, "backward %d moved", bwd_c);
                bwd_b++, bwd_c++;
                cr_expect(forward_before(comb, i, comb[i].mb, comb[i].chunk),
                          "p=%d v=%d m=%d stage %d: backward of (%d, %d) before its forward", p, v, m, s, comb[i].mb,
                          comb[i].chunk);
            }
            if (!comb[i].pair) continue;
            pairs++;
            cr_assert(i + 1 < n && comb[i + 1].kind == TS_SLOT_B, "p=%d v=%d m=%d stage %d: pair at %d has no backward",
                      p, v, m, s, i);
            cr_expect(comb[i + 1].mb != comb[i].mb || comb[i + 1].chunk != comb[i].chunk,
                      "p=%d stage %d: a forward paired with its own backward", p, s);
        }
        cr_expect_eq(pairs, m * v - warm_c, "p=%d v=%d m=%d stage %d: %d pairs", p, v, m, s, pairs);
        /* the closed form's count of them (planner/stages.c) */
        ts_layout l = {.pp = p, .vpp = v, .microbatches = m, .schedule = id};
        cr_expect(fabs(ts_combined_1f1b_paired(&l, s) - (double)pairs / (m * v)) < 1e-12,
                  "p=%d v=%d m=%d stage %d: the closed form pairs %.4f, the order %d of %d", p, v, m, s,
                  ts_combined_1f1b_paired(&l, s), pairs, m * v);
        free(base);
        free(comb);
    }
}

Test(combined_1f1b, order_pairs_every_steady_forward) {
    for (int m = 1; m <= 9; m++) check_order(TS_SCHED_1F1B, 1, 1, m);
    for (int p = 2; p <= 8; p *= 2)
        for (int v = 2; v <= 3; v++)
            for (int m = p; m <= 3 * p; m += p) check_order(TS_SCHED_INTERLEAVED, p, v, m);
}

/* Qwen3-30B-A3B (128 experts of 768) on 64 H100, batch `batch` × 4096 tokens, on the
 * megatron-core stack (the one that runs combined 1F1B), its dispatcher alltoall. */
static ts_problem moe_problem_of(int64_t batch, int combined) {
    char *path = test_data_path("tests/data/hf/qwen3-30b-a3b.json");
    ts_problem base = test_problem(path, "h100-sxm-dgx", 64, batch, 4096, 1);
    free(path);
    ts_train t = base.train;
    ts_error_clear();
    cr_assert_eq(ts_stack_load("megatron-core", ts_schedule_names, ts_recompute_names, &t.stack), TS_OK, "%s",
                 ts_error_message());
    cr_assert_eq(ts_stack_train_defaults(&t.stack, TS_GIVEN_DTYPE, &t), TS_OK, "%s", ts_error_message());
    t.moe_dispatcher = TS_MOE_DISPATCH_ALLTOALL;
    t.moe_combined_1f1b = combined;
    ts_problem pb;
    cr_assert_eq(ts_problem_init(&pb, &base.model, &base.sys, &t, 64), TS_OK, "%s", ts_error_message());
    return pb;
}

static ts_problem moe_problem(int combined) { return moe_problem_of(256, combined); }

static void expect_refused(const ts_problem *pb, const char *layout, const char *says) {
    ts_layout l = test_layout(layout);
    char why[512];
    const char *got = ts_layout_invalid(pb, &l, why, sizeof why);
    cr_expect(got != NULL && strstr(got, says) != NULL, "%s: %s", layout, got ? got : "accepted");
}

Test(combined_1f1b, megatron_core_rules_refused) {
    ts_problem pb = moe_problem(1);
    expect_refused(&pb, "dp=16,tp=1,pp=4,cp=1,ep=16,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none",
                   "virtual_pipeline_model_parallel_size must be specified");
    expect_refused(&pb, "dp=16,tp=1,pp=4,cp=1,ep=16,sp=0,zero=1,mbs=1,vpp=1,sched=zb-h1,recompute=none",
                   "got sched=zb-h1");
    expect_refused(&pb, "dp=16,tp=1,pp=4,cp=1,ep=1,sp=0,zero=1,mbs=1,vpp=2,sched=interleaved,recompute=none",
                   "needs ep > 1");
    expect_refused(&pb, "dp=16,tp=1,pp=4,cp=1,ep=16,sp=0,zero=1,mbs=1,vpp=2,sched=interleaved,recompute=full",
                   "recompute=full");
    ts_layout ok = test_layout("dp=16,tp=1,pp=4,cp=1,ep=16,sp=0,zero=1,mbs=1,vpp=2,sched=interleaved,recompute=none");
    cr_expect_null(ts_layout_invalid(&pb, &ok, NULL, 0), "interleaved with ep=16 runs it");
    ok = test_layout("dp=64,tp=1,pp=1,cp=1,ep=16,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=selective");
    cr_expect_null(ts_layout_invalid(&pb, &ok, NULL, 0), "1F1B without pipelining runs it");
    pb.train.moe_dispatcher = TS_MOE_DISPATCH_ALLGATHER;
    expect_refused(&pb, "dp=16,tp=1,pp=4,cp=1,ep=16,sp=0,zero=1,mbs=1,vpp=2,sched=interleaved,recompute=none",
                   "got allgather");
    pb = moe_problem(1);
    pb.model.mtp_layers = 2; /* the rule reads the model alone */
    expect_refused(&pb, "dp=16,tp=1,pp=4,cp=1,ep=16,sp=0,zero=1,mbs=1,vpp=2,sched=interleaved,recompute=none",
                   "at most one MTP layer");
}

Test(combined_1f1b, ep_collectives_on_their_stream_in_pairs) {
    ts_layout l = test_layout("dp=16,tp=1,pp=4,cp=1,ep=16,sp=0,zero=1,mbs=1,vpp=2,sched=interleaved,recompute=none");
    for (int combined = 0; combined <= 1; combined++) {
        ts_problem pb = moe_problem(combined);
        ts_program prog;
        cr_assert_eq(ts_program_build(&pb, &l, NULL, &prog), TS_OK, "%s", ts_error_message());
        int ep_ops = 0, on_ep_stream = 0, paired = 0;
        for (int s = 0; s < prog.pp; s++)
            for (int i = 0; i < prog.stages[s].n_ops; i++) {
                const ts_op *op = &prog.stages[s].ops[i];
                ep_ops += op->kind == TS_OP_COLL && op->group == TS_GROUP_EP;
                on_ep_stream += op->stream == TS_STREAM_EP;
                paired += op->pair != 0;
            }
        cr_expect_gt(ep_ops, 0);
        cr_expect_eq(on_ep_stream, combined ? ep_ops : 0, "combined %d: %d of %d EP collectives on the EP stream",
                     combined, on_ep_stream, ep_ops);
        cr_expect(combined ? paired > 0 : paired == 0, "combined %d: %d paired ops", combined, paired);
        ts_program_free(&prog);
    }
}

/* Cross-node EP (16 ranks over two nodes): the pairing hides a large part of it in both models,
 * which agree (16 micro-batches a rank each: the unpaired warm-up and drain a small part). */
Test(combined_1f1b, hides_ep_in_simulator_and_closed_form) {
    static const struct {
        const char *layout;
        int64_t batch;
    } cases[] = {
        {"dp=16,tp=1,pp=4,cp=1,ep=16,sp=0,zero=1,mbs=1,vpp=2,sched=interleaved,recompute=none", 256},
        {"dp=64,tp=1,pp=1,cp=1,ep=16,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none", 1024},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *text = cases[i].layout;
        ts_layout l = test_layout(text);
        ts_problem off = moe_problem_of(cases[i].batch, 0), on = moe_problem_of(cases[i].batch, 1);
        ts_eval e_off, e_on;
        cr_assert_eq(ts_evaluate(&off, &l, &e_off), TS_OK, "%s", ts_error_message());
        cr_assert_eq(ts_evaluate(&on, &l, &e_on), TS_OK, "%s", ts_error_message());
        cr_expect_lt(e_on.time.ep_comm, 0.7 * e_off.time.ep_comm, "%s: exposed EP %.3f s paired, %.3f s not", text,
                     e_on.time.ep_comm, e_off.time.ep_comm);
        cr_expect_lt(e_on.step_s, e_off.step_s);
        double r = test_sim_over_closed_form(&on, &l), r_off = test_sim_over_closed_form(&off, &l);
        cr_expect(fabs(r - 1) < 0.05, "%s: simulated / closed form %.3f", text, r);
        cr_expect_lt(r * e_on.step_s, 0.9 * r_off * e_off.step_s, "%s: the simulated step drops", text);
        cr_expect_eq(e_on.mem.activations, e_off.mem.activations, "%s: 1F1B's peak of activations", text);
    }
}

/* plan -> JSON request -> sim and exports: the flag travels with the plan; what Megatron-Core
 * refuses is a one-line error, exit 2. */
Test(combined_1f1b, plans_carry_it_into_sim_and_exports) {
    char *dir = make_temp_dir();
    char plan[4200];
    snprintf(plan, sizeof plan, "%s/p.json", dir);
    cli_result r = run_cli("plan", "--model", "mixtral-8x7b", "--system", "h100-sxm-dgx", "--gpus", "64",
                           "--global-batch", "256", "--seq", "4096", "--fix",
                           "tp=1,pp=4,cp=1,ep=8,mbs=1,vpp=2,sched=interleaved,recompute=none",
                           "--overlap-moe-expert-parallel-comm", "--top", "1", "-o", plan, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    char *text = read_file(plan);
    cr_assert_not_null(text);
    cJSON *p = cJSON_Parse(text);
    cr_assert_not_null(p);
    cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(json_obj(p, "request", "$"), "overlap_moe_expert_parallel_comm")),
              "the plan's request carries the flag");
    test_expect_sim_reprices(plan, cJSON_GetArrayItem(cJSON_GetObjectItem(p, "layouts"), 0), "combined 1F1B");
    cJSON_Delete(p);
    free(text);
    r = test_export_plan(plan, "megatron");
    cr_expect(strstr(r.out, "--overlap-moe-expert-parallel-comm") != NULL, "%s", r.out);
    cli_result_free(&r);
    r = test_export_plan(plan, "megatron-bridge");
    cr_expect(strstr(r.out, "comm_overlap=CommOverlapConfig(tp_comm_overlap=False, overlap_moe_expert_parallel_comm=True)") !=
                  NULL && strstr(r.out, "from megatron.bridge.training.comm_overlap import CommOverlapConfig") != NULL,
              "%s", r.out);
    cli_result_free(&r);
    remove_dir(dir);

    static const char *const refused[][2] = {
        {"tp=1,pp=4,cp=1,ep=8,mbs=1,vpp=1,sched=1f1b,recompute=none", "virtual_pipeline_model_parallel_size"},
        {"tp=1,pp=4,cp=1,ep=8,mbs=1,vpp=2,sched=interleaved,recompute=full", "recompute=full"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        r = run_cli("plan", "--model", "mixtral-8x7b", "--system", "h100-sxm-dgx", "--gpus", "64", "--global-batch",
                    "256", "--seq", "4096", "--fix", refused[i][0], "--overlap-moe-expert-parallel-comm", NULL);
        cr_expect_eq(r.status, 2, "%s: exit %d", refused[i][0], r.status);
        cr_expect(strstr(r.err, refused[i][1]) != NULL, "%s: %s", refused[i][0], r.err);
        cli_result_free(&r);
    }
    r = run_cli("plan", "--model", "llama3-8b", "--system", "h100-sxm-dgx", "--gpus", "8",
                "--overlap-moe-expert-parallel-comm", NULL);
    cr_expect_eq(r.status, 2);
    cr_expect(one_line_error(r.err, "plan") && strstr(r.err, "needs a MoE model") != NULL, "%s", r.err);
    cli_result_free(&r);
}

/* Megatron-Core's --moe-shared-expert-overlap (program.c shared_overlap_fwd/bwd, planner/layer.c
 * shared_hidden_s): DeepSeekMoE 16B (2 shared experts) with EP16 over two nodes: the shared
 * experts hide part of the all-to-all in the simulator and the closed form alike. */
Test(combined_1f1b, shared_expert_overlap_hides_ep_beside_the_shared_experts) {
    char *path = test_data_path("tests/data/hf/deepseek-moe-16b.json");
    ts_problem base = test_problem(path, "h100-sxm-dgx", 64, 512, 4096, 1);
    free(path);
    ts_layout l = test_layout("dp=64,tp=1,pp=1,cp=1,ep=16,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none");
    ts_eval e[2];
    double r[2];
    for (int on = 0; on <= 1; on++) {
        ts_train t = base.train;
        t.moe_dispatcher = TS_MOE_DISPATCH_ALLTOALL;
        t.moe_shared_expert_overlap = on;
        ts_problem pb;
        cr_assert_eq(ts_problem_init(&pb, &base.model, &base.sys, &t, 64), TS_OK, "%s", ts_error_message());
        cr_assert_eq(ts_evaluate(&pb, &l, &e[on]), TS_OK, "%s", ts_error_message());
        r[on] = test_sim_over_closed_form(&pb, &l);
        cr_expect(fabs(r[on] - 1) < 0.03, "overlap %d: simulated / closed form %.3f", on, r[on]);
        if (on) {
            t.moe_dispatcher = TS_MOE_DISPATCH_DEEPEP;
            cr_assert_eq(ts_problem_init(&pb, &base.model, &base.sys, &t, 64), TS_OK, "%s", ts_error_message());
            char why[256];
            const char *got = ts_layout_invalid(&pb, &l, why, sizeof why);
            cr_expect(got && strstr(got, "only works with alltoall"), "deepep: %s", got ? got : "accepted");
        }
    }
    cr_expect_lt(e[1].time.ep_comm, e[0].time.ep_comm - 0.05, "exposed EP %.3f s with, %.3f s without",
                 e[1].time.ep_comm, e[0].time.ep_comm);
    cr_expect_eq(e[1].time.compute, e[0].time.compute, "the same computation");
    cr_expect_lt(r[1] * e[1].step_s, r[0] * e[0].step_s, "the simulated step drops");
}

Test(combined_1f1b, shared_expert_overlap_in_plans_exports_and_errors) {
    char *dir = make_temp_dir(), *model = test_data_path("tests/data/hf/deepseek-moe-16b.json");
    char plan[4200];
    snprintf(plan, sizeof plan, "%s/p.json", dir);
    cli_result r = run_cli("plan", "--model", model, "--system", "h100-sxm-dgx", "--gpus", "64", "--global-batch", "512",
                           "--moe-dispatcher", "alltoall", "--fix", "tp=1,pp=1,cp=1,ep=16", "--mem-headroom", "0",
                           "--moe-shared-expert-overlap", "--top", "1", "-o", plan, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    r = test_export_plan(plan, "megatron");
    cr_expect(strstr(r.out, "--moe-shared-expert-overlap") != NULL, "%s", r.out);
    cli_result_free(&r);
    r = test_export_plan(plan, "megatron-bridge");
    cr_expect(strstr(r.out, "moe_shared_expert_overlap=True") != NULL, "%s", r.out);
    cli_result_free(&r);
    r = run_cli("sim", "--plan", plan, NULL);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    r = run_cli("plan", "--model", "mixtral-8x7b", "--system", "h100-sxm-dgx", "--gpus", "64",
                "--moe-shared-expert-overlap", NULL);
    cr_expect(r.status == 2 && strstr(r.err, "needs shared experts") != NULL, "%s", r.err);
    cli_result_free(&r);
    r = run_cli("plan", "--model", model, "--system", "h100-sxm-dgx", "--gpus", "64", "--moe-shared-expert-overlap",
                "--overlap-moe-expert-parallel-comm", NULL);
    cr_expect(r.status == 2 && strstr(r.err, "exclude each other") != NULL, "%s", r.err);
    cli_result_free(&r);
    free(model);
    remove_dir(dir);
}

/* With ep free, an empty space under --overlap-moe-expert-parallel-comm names the pin that empties
 * it (recompute=full here), not the ep=1 that no layout of the search takes. */
Test(combined_1f1b, empty_search_names_the_pin_not_ep) {
    ts_problem pb = moe_problem(1);
    ts_search_opts o;
    ts_search_opts_defaults(&o);
    cr_assert_eq(ts_pins_parse("--fix", "recompute=full", &o.pins), TS_OK, "%s", ts_error_message());
    ts_search_result r;
    cr_expect_eq(ts_search(&pb, &o, &r), TS_ERR_INPUT);
    cr_expect(strstr(r.reason, "recompute=full") != NULL && strstr(r.reason, "ep > 1") == NULL, "%s", r.reason);
    ts_search_result_free(&r);
    ts_error_clear();
}
