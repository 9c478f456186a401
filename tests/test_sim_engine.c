/* The event engine (sim/engine.h) and the flow network (sim/network.h) on small programs built
 * by hand, whose step times follow from the cost functions exactly: dependencies and streams,
 * pipeline transfers, stragglers in collectives, max-min sharing of links, determinism, deadlock
 * reports, free communication; and one program from the builder in full mode. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "planner/cost.h"
#include "common/stats.h"
#include "sim/engine.h"
#include "sim/network.h"
#include "program/trace.h"
#include "tests/helpers.h"

/* ------------------------------------------------------------------------------------------ */
/* Hand-built programs                                                                         */

static ts_problem problem(const char *model, int gpus) {
    ts_model m;
    ts_system s;
    ts_train t;
    ts_problem pb;
    cr_assert_eq(ts_model_load(model, &m), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_system_load("h100-sxm-dgx", &s), TS_OK, "%s", ts_error_message());
    ts_train_defaults(&t);
    t.seq = m.max_seq < 2048 ? m.max_seq : 2048;
    t.global_batch = 64;
    cr_assert_eq(ts_problem_init(&pb, &m, &s, &t, gpus), TS_OK, "%s", ts_error_message());
    return pb;
}

static ts_layout layout(int tp, int dp, int pp) {
    return (ts_layout){.dp = dp, .tp = tp, .pp = pp, .cp = 1, .ep = 1, .mbs = 1, .microbatches = 1,
                       .vpp = 1, .schedule = TS_SCHED_1F1B, .recompute = TS_RECOMPUTE_NONE};
}

static ts_program program(ts_layout l) {
    ts_program p = {.layout = l, .pp = l.pp};
    p.stages = calloc((size_t)l.pp, sizeof *p.stages);
    cr_assert_not_null(p.stages);
    return p;
}

/* Appends `op` to stage `s` after `ndeps` dependencies (op indices); returns its index. */
static int add(ts_program *p, int s, ts_op op, int ndeps, ...) {
    ts_stage_program *sp = &p->stages[s];
    sp->ops = realloc(sp->ops, (size_t)(sp->n_ops + 1) * sizeof *sp->ops);
    sp->deps = realloc(sp->deps, (size_t)(sp->n_deps + ndeps + 1) * sizeof *sp->deps);
    cr_assert(sp->ops && sp->deps);
    op.dep0 = (uint32_t)sp->n_deps;
    op.ndeps = (uint32_t)ndeps;
    va_list ap;
    va_start(ap, ndeps);
    for (int i = 0; i < ndeps; i++) sp->deps[sp->n_deps++] = (uint32_t)va_arg(ap, int);
    va_end(ap);
    sp->ops[sp->n_ops] = op;
    p->total_ops++;
    return sp->n_ops++;
}

static ts_op gemm(double m, double n, double k, int stream) {
    return (ts_op){.kind = TS_OP_GEMM, .stream = (uint8_t)stream, .part = TS_PART_FC1, .layer = 0,
                   .mb = 0, .peer = -1, .m = m, .n = n, .k = k, .flops = 2 * m * n * k};
}

static ts_op elementwise(double bytes, int stream) {
    return (ts_op){.kind = TS_OP_ELEMENTWISE, .stream = (uint8_t)stream, .part = TS_PART_ACT,
                   .layer = 0, .mb = 0, .peer = -1, .bytes = bytes};
}

static ts_op coll(ts_group g, ts_coll c, double bytes, int stream) {
    return (ts_op){.kind = TS_OP_COLL, .stream = (uint8_t)stream, .part = TS_PART_GRAD_REDUCE,
                   .phase = TS_PHASE_STEP, .group = (uint8_t)g, .coll = (uint8_t)c, .layer = -1,
                   .mb = -1, .peer = -1, .bytes = bytes};
}

static ts_op p2p(int kind, int peer, int mb, double bytes) {
    return (ts_op){.kind = (uint8_t)kind, .group = TS_GROUP_PP, .part = TS_PART_PP_ACT,
                   .stream = kind == TS_OP_SEND ? TS_STREAM_PP_SEND : TS_STREAM_PP_RECV,
                   .layer = -1, .mb = mb, .peer = peer, .bytes = bytes};
}

static double cost(const ts_problem *pb, const ts_program *p, ts_op op) {
    return ts_op_cost_s(pb, &p->layout, &op);
}

static ts_sim_result simulate(const ts_problem *pb, const ts_program *p, ts_sim_opts o) {
    ts_sim_result r;
    ts_error_clear();
    cr_assert_eq(ts_simulate(pb, p, &o, &r), TS_OK, "%s", ts_error_message());
    return r;
}

#define EXPECT_NEAR(got, want, ...)                                                                \
    cr_expect(fabs((got) - (want)) <= 1e-12 * fabs(want) + 1e-18, __VA_ARGS__)

/* ------------------------------------------------------------------------------------------ */
/* Op costs                                                                                    */

Test(sim_engine, op_costs_use_the_planner_functions) {
    ts_problem pb = problem("llama2-7b", 32);
    ts_layout l = layout(2, 16, 1);
    const ts_system *s = &pb.sys;
    ts_op g = gemm(4096, 4096, 1024, TS_STREAM_COMPUTE);
    cr_expect_eq(ts_op_cost_s(&pb, &l, &g), ts_gemm_s(s, pb.train.dtype, 4096, 4096, 1024));
    g.flops *= 3; /* three experts' GEMMs of that shape */
    EXPECT_NEAR(ts_op_cost_s(&pb, &l, &g), 3 * ts_gemm_s(s, pb.train.dtype, 4096, 4096, 1024));
    ts_op a = {.kind = TS_OP_ATTENTION, .m = 4, .flops = 8e12};
    cr_expect_eq(ts_op_cost_s(&pb, &l, &a), ts_attention_s(s, pb.train.dtype, 8e12, 2e12));
    ts_op e = elementwise(1e9, TS_STREAM_COMPUTE);
    cr_expect_eq(ts_op_cost_s(&pb, &l, &e), ts_memory_s(s, 1e9, 1));
    ts_op tp = coll(TS_GROUP_TP, TS_COLL_ALLREDUCE, 1e8, TS_STREAM_TP);
    cr_expect_eq(ts_op_cost_s(&pb, &l, &tp),
                 ts_coll_s(s, TS_COLL_ALLREDUCE, 2, 1e8, TS_LINK_NVLINK));
    ts_op dp = coll(TS_GROUP_DP, TS_COLL_REDUCE_SCATTER, 1e8, TS_STREAM_DP);
    cr_expect_eq(ts_op_cost_s(&pb, &l, &dp),
                 ts_coll_s(s, TS_COLL_REDUCE_SCATTER, 16, 1e8, TS_LINK_NIC));
    ts_op cp = coll(TS_GROUP_CP, TS_COLL_ALLGATHER, 1e8, TS_STREAM_TP); /* cp = 1 */
    cr_expect_eq(ts_op_cost_s(&pb, &l, &cp), 0.0);
    ts_layout lp = layout(8, 1, 4);
    ts_op send = p2p(TS_OP_SEND, 1, 0, 1e7);
    cr_expect_eq(ts_op_cost_s(&pb, &lp, &send),
                 ts_coll_s(s, TS_COLL_SENDRECV, 2, 1e7, TS_LINK_NIC));
}

/* ------------------------------------------------------------------------------------------ */
/* Dependencies and streams                                                                   */

Test(sim_engine, dependency_adds_costs) {
    ts_problem pb = problem("tiny", 1);
    ts_program p = program(layout(1, 1, 1));
    int a = add(&p, 0, gemm(2048, 2048, 2048, TS_STREAM_COMPUTE), 0);
    add(&p, 0, elementwise(3e9, TS_STREAM_DP), 1, a);
    double ca = cost(&pb, &p, p.stages[0].ops[0]), cb = cost(&pb, &p, p.stages[0].ops[1]);
    ts_sim_result r = simulate(&pb, &p, (ts_sim_opts){0});
    cr_expect_eq(r.n_ranks, 1);
    cr_expect_eq(r.step_s, ca + cb);
    cr_expect_eq(r.ranks[0].spans[1].start_s, ca);
    cr_expect_eq(r.kind_s[TS_OP_GEMM], ca);
    cr_expect_eq(r.kind_s[TS_OP_ELEMENTWISE], cb);
    cr_expect_eq(r.stages[0].busy_s, ca);
    cr_expect_eq(r.stages[0].exposed_comm_s, 0.0);
    cr_expect_eq(r.events, 2);
    cr_expect_geq(r.sim_s, 0.0);
    ts_sim_result_free(&r);
    ts_program_free(&p);
}

Test(sim_engine, streams_overlap_and_serialise) {
    ts_problem pb = problem("tiny", 1);
    ts_program p = program(layout(1, 1, 1));
    add(&p, 0, gemm(2048, 2048, 2048, TS_STREAM_COMPUTE), 0);
    add(&p, 0, elementwise(3e9, TS_STREAM_DP), 0);
    add(&p, 0, elementwise(1e9, TS_STREAM_DP), 0); /* waits for the previous DP-stream op */
    double c0 = cost(&pb, &p, p.stages[0].ops[0]), c1 = cost(&pb, &p, p.stages[0].ops[1]),
           c2 = cost(&pb, &p, p.stages[0].ops[2]);
    ts_sim_result r = simulate(&pb, &p, (ts_sim_opts){0});
    cr_expect_eq(r.ranks[0].spans[1].start_s, 0.0);
    cr_expect_eq(r.ranks[0].spans[2].start_s, c1);
    cr_expect_eq(r.step_s, fmax(c0, c1 + c2));
    /* Nothing communicates: what is not compute is bubble. */
    cr_expect_eq(r.stages[0].bubble_s, r.step_s - c0);
    ts_sim_result_free(&r);
    ts_program_free(&p);
}

/* ------------------------------------------------------------------------------------------ */
/* Pipeline transfers                                                                          */

Test(sim_engine, send_recv_chain) {
    ts_problem pb = problem("tiny", 2);
    ts_program p = program(layout(1, 1, 2));
    int g0 = add(&p, 0, gemm(2048, 2048, 2048, TS_STREAM_COMPUTE), 0);
    add(&p, 0, p2p(TS_OP_SEND, 1, 0, 64e6), 1, g0);
    int rv = add(&p, 1, p2p(TS_OP_RECV, 0, 0, 64e6), 0);
    add(&p, 1, gemm(1024, 2048, 2048, TS_STREAM_COMPUTE), 1, rv);
    double c0 = cost(&pb, &p, p.stages[0].ops[0]), c1 = cost(&pb, &p, p.stages[1].ops[1]);
    double x = ts_coll_s(&pb.sys, TS_COLL_SENDRECV, 2, 64e6, TS_LINK_NVLINK);
    cr_expect_eq(cost(&pb, &p, p.stages[0].ops[1]), x);

    ts_sim_result r = simulate(&pb, &p, (ts_sim_opts){0});
    cr_expect_eq(r.n_ranks, 2);
    cr_expect_eq(r.ranks[1].rank, 1);
    cr_expect_eq(r.ranks[1].stage, 1);
    EXPECT_NEAR(r.ranks[0].spans[1].end_s, c0 + x, "SEND ends with its transfer");
    cr_expect_eq(r.ranks[1].spans[0].start_s, c0, "RECV span starts with the transfer");
    cr_expect_eq(r.ranks[1].spans[0].end_s, r.ranks[0].spans[1].end_s);
    EXPECT_NEAR(r.step_s, c0 + x + c1);
    /* Stage 0 computes, then its send is exposed, then waits; stage 1 waits, receives, computes. */
    cr_expect_eq(r.stages[0].busy_s, c0);
    EXPECT_NEAR(r.stages[0].exposed_comm_s, x);
    EXPECT_NEAR(r.stages[0].bubble_s, c1);
    EXPECT_NEAR(r.stages[1].exposed_comm_s, x);
    EXPECT_NEAR(r.stages[1].bubble_s, c0);
    EXPECT_NEAR(r.bubble_fraction, (c0 + c1) / 2 / r.step_s);
    EXPECT_NEAR(r.kind_s[TS_OP_SEND], x);
    EXPECT_NEAR(r.kind_s[TS_OP_RECV], x);
    ts_sim_result_free(&r);
    ts_program_free(&p);
}

Test(sim_engine, late_recv_ends_when_ready) {
    ts_problem pb = problem("tiny", 2);
    ts_program p = program(layout(1, 1, 2));
    add(&p, 0, p2p(TS_OP_SEND, 1, 0, 1e6), 0);
    int g = add(&p, 1, gemm(4096, 4096, 4096, TS_STREAM_COMPUTE), 0);
    add(&p, 1, p2p(TS_OP_RECV, 0, 0, 1e6), 1, g);
    /* The GEMM starts while the transfer arrives on its rank: it runs overlap_slowdown slower. */
    double cg = cost(&pb, &p, p.stages[1].ops[0]) * (1 + pb.sys.overlap_slowdown);
    ts_sim_result r = simulate(&pb, &p, (ts_sim_opts){0});
    cr_assert_gt(cg, cost(&pb, &p, p.stages[0].ops[0]));
    cr_expect_eq(r.ranks[1].spans[0].end_s, cg);
    cr_expect_eq(r.ranks[1].spans[1].start_s, cg);
    cr_expect_eq(r.ranks[1].spans[1].end_s, cg);
    cr_expect_eq(r.step_s, cg);
    ts_sim_result_free(&r);
    ts_program_free(&p);
}

/* ------------------------------------------------------------------------------------------ */
/* Collectives: stragglers, link sharing, compute slowdown                                     */

static ts_program straggler_program(void) {
    ts_program p = program(layout(2, 1, 1));
    int g = add(&p, 0, gemm(4096, 4096, 4096, TS_STREAM_COMPUTE), 0);
    int c = add(&p, 0, coll(TS_GROUP_TP, TS_COLL_ALLREDUCE, 256e6, TS_STREAM_TP), 1, g);
    add(&p, 0, gemm(4096, 4096, 4096, TS_STREAM_COMPUTE), 1, c);
    return p;
}

Test(sim_engine, straggler_delays_its_collective) {
    ts_problem pb = problem("tiny", 2);
    ts_program p = straggler_program();
    double cg = cost(&pb, &p, p.stages[0].ops[0]), cc = cost(&pb, &p, p.stages[0].ops[1]);
    double scale[2] = {1.0, 1.1};
    ts_sim_result r = simulate(&pb, &p, (ts_sim_opts){.full = 1, .compute_scale = scale});
    cr_assert_eq(r.n_ranks, 2);
    cr_expect_eq(r.ranks[0].spans[0].end_s, cg);
    cr_expect_eq(r.ranks[1].spans[0].end_s, cg * 1.1);
    for (int k = 0; k < 2; k++) {
        cr_expect_eq(r.ranks[k].spans[1].start_s, cg * 1.1, "rank %d waits for the straggler", k);
        EXPECT_NEAR(r.ranks[k].spans[1].end_s, cg * 1.1 + cc);
    }
    cr_expect_eq(r.ranks[0].spans[1].end_s, r.ranks[1].spans[1].end_s, "ends together");
    EXPECT_NEAR(r.step_s, cg * 1.1 + cc + cg * 1.1);
    /* Rank 0 idles 0.1·cg waiting: that is bubble, not communication. */
    EXPECT_NEAR(r.stages[0].exposed_comm_s, cc);
    EXPECT_NEAR(r.stages[0].bubble_s, r.step_s - 2 * cg - cc);
    ts_sim_result_free(&r);

    /* Representative mode: one rank, the collective right after its GEMM. */
    r = simulate(&pb, &p, (ts_sim_opts){0});
    cr_expect_eq(r.n_ranks, 1);
    cr_expect_eq(r.ranks[0].spans[1].start_s, cg);
    EXPECT_NEAR(r.step_s, 2 * cg + cc);
    ts_sim_result_free(&r);
    ts_program_free(&p);
}

Test(sim_engine, full_and_representative_agree_without_stragglers) {
    ts_problem pb = problem("tiny", 4);
    ts_program p = program(layout(2, 2, 1));
    int g = add(&p, 0, gemm(4096, 4096, 4096, TS_STREAM_COMPUTE), 0);
    int c = add(&p, 0, coll(TS_GROUP_TP, TS_COLL_ALLREDUCE, 64e6, TS_STREAM_TP), 1, g);
    int h = add(&p, 0, gemm(4096, 4096, 2048, TS_STREAM_COMPUTE), 1, c);
    add(&p, 0, coll(TS_GROUP_DP, TS_COLL_ALLREDUCE, 256e6, TS_STREAM_DP), 1, h);
    ts_sim_result rep = simulate(&pb, &p, (ts_sim_opts){0});
    ts_sim_result full = simulate(&pb, &p, (ts_sim_opts){.full = 1});
    cr_assert_eq(full.n_ranks, 4);
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 4; i++) {
            cr_expect_eq(full.ranks[k].spans[i].start_s, rep.ranks[0].spans[i].start_s);
            cr_expect_eq(full.ranks[k].spans[i].end_s, rep.ranks[0].spans[i].end_s);
        }
    cr_expect_eq(full.step_s, rep.step_s);
    ts_sim_result_free(&rep);
    ts_sim_result_free(&full);
    ts_program_free(&p);
}

/* With dp = 16 and tp = 2 the DP group spans 32 GPUs (NIC) and TP stays in a node (NVLink). The
 * cost is affine in the bytes, c(B) = lat + w(B), so two collectives of B sharing one NIC, each at
 * half rate, end at lat + 2w(B) = c(2B). */
Test(sim_engine, flows_share_a_link_max_min) {
    ts_problem pb = problem("llama2-7b", 32);
    ts_program p = program(layout(2, 16, 1));
    double B = 512e6;
    add(&p, 0, coll(TS_GROUP_DP, TS_COLL_ALLREDUCE, B, TS_STREAM_DP), 0);
    add(&p, 0, coll(TS_GROUP_DPCP, TS_COLL_ALLREDUCE, B, TS_STREAM_TP), 0);
    double solo = cost(&pb, &p, p.stages[0].ops[0]);
    double shared = cost(&pb, &p, coll(TS_GROUP_DP, TS_COLL_ALLREDUCE, 2 * B, TS_STREAM_DP));
    ts_sim_result r = simulate(&pb, &p, (ts_sim_opts){0});
    for (int i = 0; i < 2; i++) EXPECT_NEAR(r.ranks[0].spans[i].end_s, shared, "op %d", i);
    cr_expect_gt(shared, 1.9 * solo);
    ts_sim_result_free(&r);

    /* Every rank simulated: the same, each flow over all 16 members' NICs. */
    r = simulate(&pb, &p, (ts_sim_opts){.full = 1});
    cr_assert_eq(r.n_ranks, 32);
    for (int k = 0; k < 32; k++)
        for (int i = 0; i < 2; i++)
            EXPECT_NEAR(r.ranks[k].spans[i].end_s, shared, "rank %d op %d", k, i);
    ts_sim_result_free(&r);
    ts_program_free(&p);

    /* A TP (NVLink) and a DP (NIC) collective do not interfere. */
    p = program(layout(2, 16, 1));
    add(&p, 0, coll(TS_GROUP_DP, TS_COLL_ALLREDUCE, B, TS_STREAM_DP), 0);
    add(&p, 0, coll(TS_GROUP_TP, TS_COLL_ALLREDUCE, B, TS_STREAM_TP), 0);
    r = simulate(&pb, &p, (ts_sim_opts){.full = 1});
    for (int k = 0; k < 32; k++)
        for (int i = 0; i < 2; i++)
            EXPECT_NEAR(r.ranks[k].spans[i].end_s, cost(&pb, &p, p.stages[0].ops[i]),
                        "rank %d op %d", k, i);
    ts_sim_result_free(&r);
    ts_program_free(&p);
}

Test(sim_engine, dp_traffic_slows_pipeline_sends) {
    /* tp = 8 fills a node, so the pipeline and the DP group both cross the NIC of the sender. */
    ts_problem pb = problem("llama2-7b", 32);
    ts_program p = program(layout(8, 2, 2));
    double B = 256e6;
    add(&p, 0, coll(TS_GROUP_DP, TS_COLL_ALLGATHER, B, TS_STREAM_DP), 0);
    add(&p, 0, p2p(TS_OP_SEND, 1, 0, B), 0);
    add(&p, 1, p2p(TS_OP_RECV, 0, 0, B), 0);
    double send = cost(&pb, &p, p.stages[0].ops[1]), gather = cost(&pb, &p, p.stages[0].ops[0]);
    ts_sim_result r = simulate(&pb, &p, (ts_sim_opts){0});
    cr_expect_gt(r.ranks[0].spans[1].end_s, send * 1.2, "the send is slowed");
    cr_expect_gt(r.ranks[0].spans[0].end_s, gather * 1.2, "the gather is slowed");
    ts_sim_result_free(&r);
    r = simulate(&pb, &p, (ts_sim_opts){.full = 1});
    cr_expect_gt(r.ranks[0].spans[1].end_s, send * 1.2);
    ts_sim_result_free(&r);
    ts_program_free(&p);
}

Test(sim_engine, compute_slows_under_communication) {
    ts_problem pb = problem("llama2-7b", 32);
    ts_program p = program(layout(2, 16, 1));
    add(&p, 0, coll(TS_GROUP_DP, TS_COLL_ALLREDUCE, 4e9, TS_STREAM_DP), 0);
    add(&p, 0, gemm(8192, 8192, 8192, TS_STREAM_COMPUTE), 0);
    add(&p, 0, gemm(8192, 8192, 8192, TS_STREAM_COMPUTE), 0);
    double cg = cost(&pb, &p, p.stages[0].ops[1]), cc = cost(&pb, &p, p.stages[0].ops[0]);
    cr_assert_gt(cc, 3 * cg);
    ts_sim_result r = simulate(&pb, &p, (ts_sim_opts){0});
    double slow = 1 + pb.sys.overlap_slowdown;
    cr_expect_eq(r.ranks[0].spans[1].end_s, cg * slow);
    cr_expect_eq(r.ranks[0].spans[2].end_s, cg * slow + cg * slow);
    /* Compute covers the collective's start; the rest of it is exposed. */
    EXPECT_NEAR(r.stages[0].exposed_comm_s, r.step_s - 2 * cg * slow);
    cr_expect_leq(r.stages[0].bubble_s, 1e-15);
    ts_sim_result_free(&r);
    ts_program_free(&p);
}

/* Progressive filling on four flows: A over link 0, B over links 0 and 1, C and D over link 1.
 * Link 1 is the tighter (1/3 each for B, C, D); A takes what link 0 has left, 2/3. */
Test(sim_network, max_min_by_progressive_filling) {
    ts_net n;
    cr_assert_eq(ts_net_init(&n, 2), TS_OK);
    int l0[] = {0}, l01[] = {0, 1}, l1[] = {1};
    int a, b, c, d;
    cr_assert_eq(ts_net_add(&n, 0, 1.0, l0, 1, 10, &a), TS_OK);
    cr_assert_eq(ts_net_add(&n, 0, 1.0, l01, 2, 11, &b), TS_OK);
    cr_assert_eq(ts_net_add(&n, 0, 1.0, l1, 1, 12, &c), TS_OK);
    cr_assert_eq(ts_net_add(&n, 0, 2.0, l1, 1, 13, &d), TS_OK);
    cr_assert(ts_net_dirty(&n));
    cr_assert_eq(ts_net_reshare(&n, 0), TS_OK);
    cr_expect(!ts_net_dirty(&n));
    cr_expect_eq(n.n_changed, 4);
    EXPECT_NEAR(n.flows[a].rate, 2.0 / 3);
    EXPECT_NEAR(n.flows[b].rate, 1.0 / 3);
    EXPECT_NEAR(n.flows[c].rate, 1.0 / 3);
    EXPECT_NEAR(n.flows[d].rate, 1.0 / 3);
    EXPECT_NEAR(ts_net_finish_s(&n, a), 1.5);
    EXPECT_NEAR(ts_net_finish_s(&n, b), 3.0);
    cr_expect_eq(n.flows[c].tag, 12);

    /* A finishes at 1.5; B, C, D keep 1/3 (link 1 still binds them): nothing to reschedule. */
    cr_assert_eq(ts_net_remove(&n, a), TS_OK);
    cr_assert_eq(ts_net_reshare(&n, 1.5), TS_OK);
    cr_expect_eq(n.n_changed, 0);
    EXPECT_NEAR(ts_net_finish_s(&n, b), 3.0);

    /* B and C finish at 3; D alone gets the whole link: 2 − 1 = 1 s of work left at rate 1. */
    cr_assert_eq(ts_net_remove(&n, b), TS_OK);
    cr_assert_eq(ts_net_remove(&n, c), TS_OK);
    cr_assert_eq(ts_net_reshare(&n, 3.0), TS_OK);
    cr_expect_eq(n.n_changed, 1);
    cr_expect_eq(n.changed[0], d);
    EXPECT_NEAR(n.flows[d].rate, 1.0);
    EXPECT_NEAR(ts_net_finish_s(&n, d), 4.0);

    /* A new flow reuses a freed id; an untouched component is left alone. */
    int e;
    cr_assert_eq(ts_net_add(&n, 3.0, 1.0, l0, 1, 14, &e), TS_OK);
    cr_expect(e == a || e == b || e == c);
    cr_assert_eq(ts_net_reshare(&n, 3.0), TS_OK);
    cr_expect_eq(n.n_changed, 1);
    cr_expect_eq(n.changed[0], e);
    cr_expect_eq(ts_net_add(&n, 3.0, 0.0, l0, 1, 15, &e), TS_ERR_INPUT);
    ts_net_free(&n);
}

/* A capped flow takes at most its cap, alone or beside others, and leaves the rest of a shared
 * link to them; lifting the cap brings its work up to date at the capped rate first. */
Test(sim_network, capped_flows) {
    ts_net n;
    cr_assert_eq(ts_net_init(&n, 2), TS_OK);
    int l0[] = {0}, l1[] = {1};
    int a, b, c;
    cr_assert_eq(ts_net_add(&n, 0, 1.0, l0, 1, 10, &a), TS_OK); /* alone on link 0 */
    cr_assert_eq(ts_net_add(&n, 0, 1.0, l1, 1, 11, &b), TS_OK); /* B and C share link 1 */
    cr_assert_eq(ts_net_add(&n, 0, 1.0, l1, 1, 12, &c), TS_OK);
    cr_assert_eq(ts_net_set_cap(&n, a, 0.5), TS_OK);
    cr_assert_eq(ts_net_set_cap(&n, b, 0.25), TS_OK);
    cr_assert_eq(ts_net_reshare(&n, 0), TS_OK);
    EXPECT_NEAR(n.flows[a].rate, 0.5);
    EXPECT_NEAR(n.flows[b].rate, 0.25);
    EXPECT_NEAR(n.flows[c].rate, 0.75);
    EXPECT_NEAR(ts_net_finish_s(&n, a), 2.0);
    /* at 1 s: A has 0.5 s of work left; uncapped it finishes at 1.5 s, and B then shares evenly */
    cr_assert_eq(ts_net_set_cap(&n, a, 1.0), TS_OK);
    cr_assert_eq(ts_net_set_cap(&n, b, 1.0), TS_OK);
    cr_expect(ts_net_dirty(&n));
    cr_assert_eq(ts_net_reshare(&n, 1.0), TS_OK);
    EXPECT_NEAR(n.flows[a].rate, 1.0);
    EXPECT_NEAR(ts_net_finish_s(&n, a), 1.5);
    EXPECT_NEAR(n.flows[b].rate, 0.5);
    EXPECT_NEAR(ts_net_finish_s(&n, b), 1.0 + 0.75 / 0.5);
    /* the same cap again is no change; a cap outside (0, 1] is refused */
    cr_assert_eq(ts_net_set_cap(&n, a, 1.0), TS_OK);
    cr_expect(!ts_net_dirty(&n));
    cr_expect_eq(ts_net_set_cap(&n, a, 0.0), TS_ERR_INPUT);
    cr_expect_eq(ts_net_set_cap(&n, a, 1.5), TS_ERR_INPUT);
    ts_net_free(&n);
}

/* ------------------------------------------------------------------------------------------ */
/* Determinism, free communication, errors                                                    */

/* A two-stage, four-micro-batch pipeline with TP and DP collectives, every rank simulated. */
static ts_program pipeline_program(void) {
    ts_program p = program(layout(2, 2, 2));
    for (int s = 0; s < 2; s++) {
        int last = -1;
        for (int mb = 0; mb < 4; mb++) {
            int x = s == 0 ? -1 : add(&p, s, p2p(TS_OP_RECV, 0, mb, 8e6), 0);
            ts_op g = gemm(2048, 4096, 4096, TS_STREAM_COMPUTE);
            g.mb = mb;
            int y = x < 0 ? add(&p, s, g, 0) : add(&p, s, g, 1, x);
            int t = add(&p, s, coll(TS_GROUP_TP, TS_COLL_ALLREDUCE, 16e6, TS_STREAM_TP), 1, y);
            int z = add(&p, s, elementwise(1e8, TS_STREAM_COMPUTE), 1, t);
            if (s == 0) add(&p, s, p2p(TS_OP_SEND, 1, mb, 8e6), 1, z);
            last = z;
        }
        add(&p, s, coll(TS_GROUP_DP, TS_COLL_ALLREDUCE, 1e9, TS_STREAM_DP), 1, last);
    }
    return p;
}

/* CPU ranks (node.cores): a node's computing ranks share its cores. Two stages on one node of
 * one core: stage 0 computes g, sends to stage 1, which then computes g. Stage 0 is alone on the
 * core while stage 1 waits, so its GEMM takes the contention-free time, not the static 2× of
 * ts_compute_scale; with both computing at once (two GEMMs on stage 0, the second overlapping
 * stage 1's) the shared stretch of 2 applies to the overlap only. */
Test(sim_engine, cpu_ranks_share_cores_only_while_computing) {
    ts_problem pb = problem("tiny", 2);
    pb.sys.cores_per_node = 1;
    pb.sys.serial_ops = 1;
    pb.compute_scale = ts_compute_scale(&pb.sys, pb.gpus);
    cr_assert_eq(pb.compute_scale, 2.0);
    ts_program p = program(layout(1, 1, 2));
    int a = add(&p, 0, gemm(1024, 1024, 1024, TS_STREAM_COMPUTE), 0);
    add(&p, 0, p2p(TS_OP_SEND, 1, 0, 4096), 1, a);
    int b = add(&p, 0, gemm(1024, 1024, 1024, TS_STREAM_COMPUTE), 1, a);
    (void)b;
    int r = add(&p, 1, p2p(TS_OP_RECV, 0, 0, 4096), 0);
    add(&p, 1, gemm(1024, 1024, 1024, TS_STREAM_COMPUTE), 1, r);
    ts_sim_result res = simulate(&pb, &p, (ts_sim_opts){0});
    double one = cost(&pb, &p, gemm(1024, 1024, 1024, TS_STREAM_COMPUTE)); /* a core alone */
    const ts_op_span *g0 = &res.ranks[0].spans[a];
    EXPECT_NEAR(g0->end_s - g0->start_s, one, "stage 0's first GEMM alone on the core: %g s, expected %g s",
                g0->end_s - g0->start_s, one);
    /* Stage 0's second GEMM and stage 1's GEMM start about together and share the core. */
    const ts_op_span *g1 = &res.ranks[1].spans[1];
    cr_expect(g1->end_s - g1->start_s > 1.5 * one, "stage 1's GEMM shares the core: %g s for %g s of work",
              g1->end_s - g1->start_s, one);
    /* One GEMM alone, then two sharing the core: about 3 GEMMs' time, where the static stretch
     * (every op twice as long) gives 4. */
    cr_expect(res.step_s > 2.9 * one && res.step_s < 3.5 * one, "step %g s, %g GEMMs", res.step_s, res.step_s / one);
    ts_sim_result_free(&res);
    ts_program_free(&p);
}

Test(sim_engine, deterministic) {
    ts_problem pb = problem("tiny", 8);
    ts_program p = pipeline_program();
    double scale[8] = {1, 1.05, 1, 1, 1.2, 1, 1, 1};
    ts_sim_opts o = {.full = 1, .compute_scale = scale};
    ts_sim_result a = simulate(&pb, &p, o), b = simulate(&pb, &p, o);
    cr_assert_eq(a.n_ranks, 8);
    cr_expect_eq(a.events, b.events);
    cr_expect_eq(a.step_s, b.step_s);
    for (int k = 0; k < a.n_ranks; k++) {
        int n = p.stages[a.ranks[k].stage].n_ops;
        cr_expect_eq(
            memcmp(a.ranks[k].spans, b.ranks[k].spans, (size_t)n * sizeof *a.ranks[k].spans), 0,
            "rank %d", k);
    }
    /* The straggler of stage 1 (rank 4) sets the pace of its TP partner (rank 5). */
    cr_expect_gt(a.ranks[5].spans[2].start_s, a.ranks[5].spans[1].end_s);
    ts_sim_result_free(&a);
    ts_sim_result_free(&b);
    ts_program_free(&p);
}

Test(sim_engine, free_comm_makes_comm_instant) {
    ts_problem pb = problem("tiny", 8);
    ts_program p = pipeline_program();
    ts_sim_result r = simulate(&pb, &p, (ts_sim_opts){.free_comm = 1});
    double compute = 0;
    for (int k = 0; k < r.n_ranks; k++) {
        const ts_stage_program *sp = &p.stages[r.ranks[k].stage];
        for (int i = 0; i < sp->n_ops; i++) {
            const ts_op_span *s = &r.ranks[k].spans[i];
            int comm = sp->ops[i].kind == TS_OP_COLL || sp->ops[i].kind == TS_OP_SEND ||
                       sp->ops[i].kind == TS_OP_RECV;
            if (comm)
                cr_expect_eq(s->end_s, s->start_s, "stage %d op %d", r.ranks[k].stage, i);
            else if (k == 0)
                compute += s->end_s - s->start_s;
        }
        cr_expect_eq(r.stages[k].exposed_comm_s, 0.0);
    }
    /* Stage 0 never waits: its step is its compute; stage 1 starts one micro-batch late. */
    EXPECT_NEAR(r.ranks[0].spans[p.stages[0].n_ops - 1].end_s, compute);
    cr_expect_eq(r.kind_s[TS_OP_COLL], 0.0);
    ts_sim_result_free(&r);
    ts_program_free(&p);
}

Test(sim_engine, recv_without_send_deadlocks) {
    ts_problem pb = problem("tiny", 2);
    ts_program p = program(layout(1, 1, 2));
    add(&p, 0, gemm(1024, 1024, 1024, TS_STREAM_COMPUTE), 0);
    add(&p, 1, gemm(1024, 1024, 1024, TS_STREAM_COMPUTE), 0);
    add(&p, 1, p2p(TS_OP_RECV, 0, 3, 1e6), 0);
    ts_sim_result r;
    ts_error_clear();
    cr_assert_eq(ts_simulate(&pb, &p, NULL, &r), TS_ERR_INPUT);
    cr_expect_str_eq(ts_error_message(),
                     "step program deadlocks: rank 1 (stage 1) op 1 \"fwd mb3 c0 pp-act\" (recv) "
                     "never completes: no SEND from stage 0 matches it");
    cr_expect_null(r.ranks);
    ts_program_free(&p);
}

Test(sim_engine, crossed_receives_deadlock) {
    /* Each stage receives before it sends: both wait forever (full mode, tp = 2). */
    ts_problem pb = problem("tiny", 4);
    ts_program p = program(layout(2, 1, 2));
    for (int s = 0; s < 2; s++) {
        int x = add(&p, s, p2p(TS_OP_RECV, 1 - s, 0, 1e6), 0);
        add(&p, s, p2p(TS_OP_SEND, 1 - s, 0, 1e6), 1, x);
    }
    ts_sim_result r;
    ts_error_clear();
    cr_assert_eq(ts_simulate(&pb, &p, &(ts_sim_opts){.full = 1}, &r), TS_ERR_INPUT);
    cr_expect_str_eq(ts_error_message(),
                     "step program deadlocks: rank 0 (stage 0) op 0 \"fwd mb0 c0 pp-act\" (recv) "
                     "never completes: its SEND on stage 1 never ran");
    ts_program_free(&p);
}

Test(sim_engine, bad_programs_are_refused) {
    ts_problem pb = problem("tiny", 2);
    ts_program p = program(layout(1, 1, 1));
    add(&p, 0, gemm(1024, 1024, 1024, TS_STREAM_COMPUTE), 0);
    add(&p, 0, gemm(1024, 1024, 1024, TS_STREAM_COMPUTE), 1, 1); /* depends on itself */
    ts_sim_result r;
    ts_error_clear();
    cr_expect_eq(ts_simulate(&pb, &p, NULL, &r), TS_ERR_INPUT);
    cr_expect_str_eq(
        ts_error_message(),
        "step program stage 0 op 1 (fwd L0 mb0 c0 fc1): depends on itself or a later op");
    p.stages[0].ops[1].ndeps = 0;
    double scale[1] = {1.0};
    ts_error_clear();
    cr_expect_eq(ts_simulate(&pb, &p, &(ts_sim_opts){.compute_scale = scale}, &r), TS_ERR_INPUT);
    p.stages[0].ops[1].kind = TS_OP_SEND;
    p.stages[0].ops[1].peer = 1;
    ts_error_clear();
    cr_expect_eq(ts_simulate(&pb, &p, NULL, &r), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "peer stage out of range") != NULL, "%s",
              ts_error_message());
    ts_program_free(&p);

    /* Full mode counts a collective's arrivals in 16 bits: a larger group is refused, not
     * miscounted (checked before anything per rank is allocated). */
    p = program(layout(1, 70000, 1));
    add(&p, 0, coll(TS_GROUP_DP, TS_COLL_ALLREDUCE, 1e6, TS_STREAM_DP), 0);
    ts_error_clear();
    cr_expect_eq(ts_simulate(&pb, &p, &(ts_sim_opts){.full = 1}, &r), TS_ERR_INPUT);
    cr_expect_str_eq(ts_error_message(),
                     "a group of 70000 ranks is too large to simulate every rank (at most 65535)");
    ts_program_free(&p);
}

/* ------------------------------------------------------------------------------------------ */
/* A program from the builder                                                                  */

/* The builder's program of `tiny` on tp × dp × pp GPUs with ZeRO-1 and default micro-batches. */
static ts_program built_tiny(ts_problem *pb, ts_layout *l, int tp, int dp, int pp) {
    *pb = problem("tiny", tp * dp * pp);
    *l = layout(tp, dp, pp);
    l->zero = 1;
    l->microbatches = 0;
    ts_program p;
    cr_assert_eq(ts_program_build(pb, l, NULL, &p), TS_OK, "%s", ts_error_message());
    return p;
}

Test(sim_engine, built_program_full_mode) {
    ts_problem pb;
    ts_layout l;
    ts_program p = built_tiny(&pb, &l, 2, 2, 2);
    ts_sim_result rep = simulate(&pb, &p, (ts_sim_opts){0});
    ts_sim_result a = simulate(&pb, &p, (ts_sim_opts){.full = 1});
    ts_sim_result b = simulate(&pb, &p, (ts_sim_opts){.full = 1});
    cr_expect_gt(rep.step_s, 0.0);
    cr_expect_eq(a.step_s, b.step_s);
    for (int k = 0; k < a.n_ranks; k++)
        cr_expect_eq(memcmp(a.ranks[k].spans, b.ranks[k].spans,
                            (size_t)p.stages[a.ranks[k].stage].n_ops * sizeof *a.ranks[k].spans),
                     0);
    /* Identical ranks: every rank of a stage does what its representative does, to rounding. */
    for (int k = 0; k < a.n_ranks; k++) {
        int s = a.ranks[k].stage;
        for (int i = 0; i < p.stages[s].n_ops; i++)
            cr_expect(fabs(a.ranks[k].spans[i].end_s - rep.ranks[s].spans[i].end_s) <=
                          1e-9 * rep.step_s,
                      "rank %d op %d: %g vs %g", k, i, a.ranks[k].spans[i].end_s,
                      rep.ranks[s].spans[i].end_s);
    }
    for (int s = 0; s < 2; s++) {
        const ts_stage_stats *st = &rep.stages[s];
        EXPECT_NEAR(st->busy_s + st->exposed_comm_s + st->bubble_s, rep.step_s);
    }
    ts_sim_result_free(&rep);
    ts_sim_result_free(&a);
    ts_sim_result_free(&b);
    ts_program_free(&p);
}

/* Dropping the spans of the ranks the statistics do not read changes nothing else: the same step,
 * stage statistics, time by kind and events, the same spans on the ranks that keep them; and a
 * trace, which needs every rank's, is refused. */
Test(sim_engine, stats_spans_only_keeps_the_results) {
    ts_problem pb;
    ts_layout l;
    ts_program p = built_tiny(&pb, &l, 2, 2, 4);
    ts_sim_result all = simulate(&pb, &p, (ts_sim_opts){.full = 1});
    ts_sim_result lean = simulate(&pb, &p, (ts_sim_opts){.full = 1, .stats_spans_only = 1});
    cr_expect_eq(lean.step_s, all.step_s);
    cr_expect_eq(lean.events, all.events);
    cr_expect_eq(lean.bubble_fraction, all.bubble_fraction);
    cr_expect_eq(memcmp(lean.stages, all.stages, (size_t)p.pp * sizeof *lean.stages), 0);
    cr_expect_eq(memcmp(lean.kind_s, all.kind_s, sizeof lean.kind_s), 0);
    int kept = 0;
    for (int k = 0; k < lean.n_ranks; k++) {
        if (lean.ranks[k].spans == NULL) continue;
        kept++;
        cr_expect_eq(lean.ranks[k].rank, ts_rank_of(&l, (ts_coords){0, 0, 0, lean.ranks[k].stage}),
                     "rank %d keeps spans but is not its stage's first", lean.ranks[k].rank);
        cr_expect_eq(memcmp(lean.ranks[k].spans, all.ranks[k].spans,
                            (size_t)p.stages[lean.ranks[k].stage].n_ops * sizeof *lean.ranks[k].spans),
                     0, "rank %d", k);
    }
    cr_expect_eq(kept, p.pp, "one rank per stage keeps its spans");
    /* Refused before the file is opened (a directory that does not exist would be TS_ERR_IO). */
    ts_step_spans lean_spans = ts_sim_spans(&lean);
    cr_expect_eq(ts_trace_write("/nonexistent/trace.json", "sim", &pb, &p, &lean_spans), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "stats_spans_only") != NULL, "%s", ts_error_message());
    ts_error_clear();
    ts_sim_result_free(&all);
    ts_sim_result_free(&lean);
    ts_program_free(&p);
}

/* Several flows on one link (the inline first entry and the overflow list), removed first, last
 * and middle: the survivors keep their places, so the shares stay right. Three flows on link 0,
 * one of them also on link 1 with a fourth: shares 1/3 each; as they leave, the rest speed up. */
Test(sim_network, many_flows_on_a_link_leave_in_any_order) {
    ts_net n;
    cr_assert_eq(ts_net_init(&n, 2), TS_OK);
    int l0[] = {0}, l01[] = {0, 1}, l1[] = {1}, f[5];
    cr_assert_eq(ts_net_add(&n, 0, 1.0, l0, 1, 0, &f[0]), TS_OK);
    cr_assert_eq(ts_net_add(&n, 0, 1.0, l01, 2, 1, &f[1]), TS_OK);
    cr_assert_eq(ts_net_add(&n, 0, 1.0, l0, 1, 2, &f[2]), TS_OK);
    cr_assert_eq(ts_net_add(&n, 0, 3.0, l1, 1, 3, &f[3]), TS_OK);
    cr_assert_eq(ts_net_reshare(&n, 0), TS_OK);
    for (int k = 0; k < 3; k++) EXPECT_NEAR(n.flows[f[k]].rate, 1.0 / 3, "flow %d", k);
    EXPECT_NEAR(n.flows[f[3]].rate, 2.0 / 3);
    /* The first-added flow (the inline entry) leaves: the last entry moves into its place. */
    cr_assert_eq(ts_net_remove(&n, f[0]), TS_OK);
    cr_assert_eq(ts_net_reshare(&n, 0.5), TS_OK);
    EXPECT_NEAR(n.flows[f[1]].rate, 0.5);
    EXPECT_NEAR(n.flows[f[2]].rate, 0.5);
    EXPECT_NEAR(n.flows[f[3]].rate, 0.5);
    /* A new flow takes the freed id and the end of link 0's list. */
    cr_assert_eq(ts_net_add(&n, 0.5, 1.0, l0, 1, 4, &f[4]), TS_OK);
    cr_expect_eq(f[4], f[0], "the freed id is reused");
    cr_assert_eq(ts_net_reshare(&n, 0.5), TS_OK);
    for (int k = 1; k < 5; k++)
        if (k != 3) EXPECT_NEAR(n.flows[f[k]].rate, 1.0 / 3, "flow %d", k);
    /* The middle one, then the one crossing both links. */
    cr_assert_eq(ts_net_remove(&n, f[2]), TS_OK);
    cr_assert_eq(ts_net_reshare(&n, 0.6), TS_OK);
    EXPECT_NEAR(n.flows[f[1]].rate, 0.5);
    EXPECT_NEAR(n.flows[f[4]].rate, 0.5);
    cr_assert_eq(ts_net_remove(&n, f[1]), TS_OK);
    cr_assert_eq(ts_net_reshare(&n, 0.7), TS_OK);
    EXPECT_NEAR(n.flows[f[4]].rate, 1.0);
    EXPECT_NEAR(n.flows[f[3]].rate, 1.0);
    cr_expect_eq(n.links[0].n_fl, 1);
    cr_expect_eq(n.links[1].n_fl, 1);
    ts_net_free(&n);
}

/* node.speed_cv (planner/cost.h ts_lockstep_scale): ranks in step run at the slowest's pace, so
 * compute stretches by 1 + cv · E[max of n normals] over the n cores (or devices) the job runs on
 * (E[max of 2] = 0.5642, of 16 = 1.7660: Tippett 1925); communication keeps its time; the
 * planner's compute scale carries the same factor. */
Test(sim_engine, lockstep_scale_stretches_compute_only) {
    ts_system s;
    cr_assert_eq(ts_system_load("h100-sxm-dgx", &s), TS_OK, "%s", ts_error_message());
    cr_expect_eq(ts_lockstep_scale(&s, 64, 0), 1.0, "steady by default");
    s.speed_cv = 0.2;
    cr_expect_eq(ts_lockstep_scale(&s, 1, 0), 1.0, "one rank waits for nobody");
    cr_expect(fabs(ts_lockstep_scale(&s, 16, 0) - (1 + 0.2 * 1.7660)) < 1e-4, "16 GPUs: %g", ts_lockstep_scale(&s, 16, 0));
    s.cores_per_node = 2;
    cr_expect(fabs(ts_lockstep_scale(&s, 8, 0) - (1 + 0.2 * 0.5642)) < 1e-4, "8 ranks on 2 cores: %g",
              ts_lockstep_scale(&s, 8, 0));

    ts_problem pb = problem("tiny", 2), noisy = pb;
    noisy.sys.speed_cv = 0.2;
    ts_program p = program(layout(1, 2, 1));
    int g = add(&p, 0, gemm(1024, 1024, 1024, TS_STREAM_COMPUTE), 0);
    int c = add(&p, 0, coll(TS_GROUP_DP, TS_COLL_ALLREDUCE, 1e8, TS_STREAM_DP), 1, g);
    ts_sim_result a = simulate(&pb, &p, (ts_sim_opts){0}), b = simulate(&noisy, &p, (ts_sim_opts){0});
    double f = ts_lockstep_scale(&noisy.sys, 2, 0);
    cr_expect(fabs(f - (1 + 0.2 * 0.5642)) < 1e-4, "two GPUs: %g", f);
    const ts_op_span *ga = &a.ranks[0].spans[g], *gb = &b.ranks[0].spans[g];
    EXPECT_NEAR(gb->end_s - gb->start_s, f * (ga->end_s - ga->start_s), "the GEMM stretches by %g", f);
    const ts_op_span *ca = &a.ranks[0].spans[c], *cb = &b.ranks[0].spans[c];
    EXPECT_NEAR(cb->end_s - cb->start_s, ca->end_s - ca->start_s, "the all-reduce keeps its time");

    ts_problem planned;
    ts_train t = pb.train;
    cr_assert_eq(ts_problem_init(&planned, &pb.model, &noisy.sys, &t, 2), TS_OK, "%s", ts_error_message());
    EXPECT_NEAR(planned.compute_scale, f, "the closed form's compute scale");
    ts_sim_result_free(&a);
    ts_sim_result_free(&b);
    ts_program_free(&p);
}

/* The spread falls over longer spans (node.speed_cv_decay): σ(w) = speed_cv · (w / window)^-decay,
 * so a stage that synchronises often stretches more. The engine's span is the stage's compute
 * time over its collectives and receives: one GEMM then one all-reduce, the GEMM's own time. */
Test(sim_engine, lockstep_spread_falls_with_the_span) {
    ts_system s;
    cr_assert_eq(ts_system_load("h100-sxm-dgx", &s), TS_OK, "%s", ts_error_message());
    s.speed_cv = 0.1, s.speed_cv_window_s = 1.0, s.speed_cv_decay = 0.5;
    double em = ts_expected_max_normal(2);
    EXPECT_NEAR(ts_lockstep_scale(&s, 2, 1.0), 1 + 0.1 * em, "at the measured span");
    EXPECT_NEAR(ts_lockstep_scale(&s, 2, 0.01), 1 + 0.1 * 10 * em, "100x shorter: 10x the spread");
    EXPECT_NEAR(ts_lockstep_scale(&s, 2, 0), 1 + 0.1 * em, "span unknown: speed_cv itself");
    EXPECT_NEAR(ts_lockstep_scale(&s, 2, 1e-9), 1 + 1 * em, "the spread is at most 1");
    s.speed_cv_decay = 0;
    EXPECT_NEAR(ts_lockstep_scale(&s, 2, 0.01), 1 + 0.1 * em, "no decay: the same at every span");

    ts_problem pb = problem("tiny", 2);
    pb.sys.speed_cv = 0.1, pb.sys.speed_cv_window_s = 1.0, pb.sys.speed_cv_decay = 0.5;
    ts_program p = program(layout(1, 2, 1));
    int g = add(&p, 0, gemm(1024, 1024, 1024, TS_STREAM_COMPUTE), 0);
    add(&p, 0, coll(TS_GROUP_DP, TS_COLL_ALLREDUCE, 1e8, TS_STREAM_DP), 1, g);
    ts_problem steady = pb;
    steady.sys.speed_cv = 0;
    ts_sim_result a = simulate(&steady, &p, (ts_sim_opts){0}), b = simulate(&pb, &p, (ts_sim_opts){0});
    double gemm_s = a.ranks[0].spans[g].end_s - a.ranks[0].spans[g].start_s;
    double f = ts_lockstep_scale(&pb.sys, 2, gemm_s);
    cr_expect(f > 1 + 0.1 * em, "a span shorter than the window spreads more: %g", f);
    EXPECT_NEAR(b.ranks[0].spans[g].end_s - b.ranks[0].spans[g].start_s, f * gemm_s, "the GEMM stretches by %g", f);
    EXPECT_NEAR(b.stages[0].lockstep_scale, f, "the stage reports its factor");
    EXPECT_NEAR(a.stages[0].lockstep_scale, 1.0, "steady: 1");
    ts_sim_result_free(&a);
    ts_sim_result_free(&b);
    ts_program_free(&p);
}

/* ------------------------------------------------------------------------------------------ */
/* Fabric tiers                                                                               */

/* 8-GPU domains, a 32-GPU leaf and a 2:1 spine above it. */
static ts_problem tiered_problem(int gpus) {
    ts_problem pb = problem("llama2-7b", gpus);
    pb.sys.n_tiers = 2;
    pb.sys.tiers[0] = (ts_tier){"leaf", 32, 1.0, 1e-6};
    pb.sys.tiers[1] = (ts_tier){"spine", 0, 2.0, 2e-6};
    return pb;
}

/* Alone, a collective across the spine takes what the closed form says, with every rank
 * simulated; beside a leaf-only collective of the same ranks it shares their NICs (every tier's
 * traffic leaves through the NIC), so the two end later than either alone. */
Test(sim_engine, fabric_tiers_price_as_the_closed_form_and_share_the_nic) {
    ts_problem pb = tiered_problem(128);
    ts_layout l = layout(8, 4, 1);
    l.cp = 4; /* CP spans 32 GPUs (the leaf), DP×CP 128 (the spine) */
    ts_program p = program(l);
    ts_op dp = coll(TS_GROUP_DPCP, TS_COLL_ALLREDUCE, 1e9, TS_STREAM_DP);
    ts_op cp = coll(TS_GROUP_CP, TS_COLL_ALLGATHER, 1e9, TS_STREAM_TP);
    cr_assert_eq(ts_group_link(&pb.sys, 8, 16), TS_LINK_SPINE);
    cr_assert_eq(ts_group_link(&pb.sys, 8, 4), TS_LINK_NIC);
    double c_dp = cost(&pb, &p, dp), c_cp = cost(&pb, &p, cp);
    EXPECT_NEAR(c_dp, ts_coll_s(&pb.sys, TS_COLL_ALLREDUCE, 16, 1e9, TS_LINK_SPINE));
    add(&p, 0, dp, 0);
    ts_sim_result r = simulate(&pb, &p, (ts_sim_opts){.full = 1});
    cr_expect(fabs(r.step_s - c_dp) <= 1e-9 * c_dp, "alone: %.9g s, closed form %.9g s", r.step_s, c_dp);
    ts_sim_result_free(&r);
    add(&p, 0, cp, 0);
    r = simulate(&pb, &p, (ts_sim_opts){.full = 1});
    cr_expect_gt(r.step_s, fmax(c_dp, c_cp) * 1.05, "sharing the NIC: %g s vs %g and %g alone", r.step_s, c_dp, c_cp);
    cr_expect_leq(r.step_s, (c_dp + c_cp) * (1 + 1e-9));
    ts_sim_result_free(&r);
    ts_program_free(&p);
}
