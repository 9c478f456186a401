/* The step's gradient zeroing is an op of the step program (program/program.c, zero-grad): every
 * stage program starts with it, the simulator prices it as a memory-bound pass over the gradients
 * the rank holds, and the executor runs it as that op (its span in the trace), not as work
 * outside the program that the simulated step would miss. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "exec/backend.h"
#include "exec/runtime.h"
#include "exec/trainer.h"
#include "planner/cost.h"
#include "planner/op_cost.h"
#include "sim/engine.h"
#include "tests/helpers.h"

static ts_problem cpu_problem(const char *model, int gpus) {
    ts_model m;
    ts_system s;
    ts_error_clear();
    cr_assert_eq(ts_model_load(model, &m), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_system_load("cpu-localhost", &s), TS_OK, "%s", ts_error_message());
    ts_problem pb = test_problem_on(&m, &s, gpus, 8, 128, 1);
    ts_train_set_dtype(&pb.train, TS_DTYPE_FP32); /* as the CPU executor trains */
    return pb;
}

/* The program of layout `text` of tiny on as many CPU ranks as it has, its problem into *pb. */
static ts_program build(const char *text, ts_problem *pb) {
    ts_layout l;
    ts_program prog;
    ts_error_clear();
    cr_assert_eq(ts_layout_parse("test", text, &l), TS_OK, "%s", ts_error_message());
    *pb = cpu_problem("tiny", ts_rank_count(&l));
    cr_assert_eq(ts_program_build(pb, &l, NULL, &prog), TS_OK, "%s: %s", text, ts_error_message());
    return prog;
}

/* The zero-grad op's bytes over the stages (each stage's first op, checked to be it). */
static double zero_grad_bytes(const ts_program *prog) {
    double bytes = 0;
    for (int s = 0; s < prog->pp; s++) {
        const ts_op *op = &prog->stages[s].ops[0];
        cr_assert_eq(op->part, TS_PART_ZERO_GRAD, "stage %d starts with %s", s, ts_part_names[op->part]);
        cr_expect(op->kind == TS_OP_ELEMENTWISE && op->phase == TS_PHASE_STEP && op->stream == TS_STREAM_COMPUTE);
        cr_expect_eq(op->ndeps, 0u);
        for (int i = 1; i < prog->stages[s].n_ops; i++)
            cr_expect_neq(prog->stages[s].ops[i].part, TS_PART_ZERO_GRAD, "stage %d: one zero-grad, op %d", s, i);
        bytes += op->bytes;
    }
    return bytes;
}

/* It writes the gradient bytes the rank accumulates into: the whole model's over the stages,
 * a TP rank's share, under ZeRO-2/3 the DP shard. */
Test(zero_grad, in_every_stage_program_over_the_held_gradients) {
    ts_problem pb = cpu_problem("tiny", 1);
    ts_param_count pc;
    ts_model_params(&pb.model, &pc);
    double all = pb.train.grad_bytes * pc.total;
    const char *whole[] = {"dp=1,tp=1,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none",
                           "dp=1,tp=1,pp=2,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none",
                           "dp=1,tp=1,pp=4,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none",
                           "dp=1,tp=1,pp=2,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=2,sched=interleaved,recompute=none",
                           "dp=2,tp=1,pp=1,cp=1,ep=1,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none"};
    for (size_t i = 0; i < sizeof whole / sizeof *whole; i++) {
        ts_problem at;
        ts_program prog = build(whole[i], &at);
        double got = zero_grad_bytes(&prog);
        /* the final norm's few parameters are the head's in the model count */
        cr_expect(fabs(got / all - 1) < 1e-3, "%s: %g bytes zeroed, the model's gradients are %g", whole[i], got, all);
        ts_program_free(&prog);
    }
    ts_problem at;
    ts_program tp = build("dp=1,tp=2,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none", &at);
    ts_program z2 = build("dp=2,tp=1,pp=1,cp=1,ep=1,sp=0,zero=2,mbs=1,vpp=1,sched=1f1b,recompute=none", &at);
    ts_program z3 = build("dp=4,tp=1,pp=1,cp=1,ep=1,sp=0,zero=3,mbs=1,vpp=1,sched=1f1b,recompute=none", &at);
    cr_expect(fabs(zero_grad_bytes(&tp) / all - 0.5) < 0.01, "tp=2 holds about half");
    cr_expect(fabs(zero_grad_bytes(&z2) / all - 0.5) < 1e-3, "zero=2 over dp=2: the shard");
    cr_expect(fabs(zero_grad_bytes(&z3) / all - 0.25) < 1e-3, "zero=3 over dp=4: the shard");
    ts_program_free(&tp);
    ts_program_free(&z2);
    ts_program_free(&z3);
}

/* The simulator runs it first, for what the memory-bound model prices it, on every rank. */
Test(zero_grad, simulated_first_at_its_memory_bound_price) {
    ts_problem pb;
    ts_program prog = build("dp=2,tp=1,pp=2,cp=1,ep=1,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none", &pb);
    ts_sim_result r;
    ts_sim_opts so = {.full = 1};
    cr_assert_eq(ts_simulate(&pb, &prog, &so, &r), TS_OK, "%s", ts_error_message());
    double cost = ts_op_cost_s(&pb, &prog.layout, &prog.stages[0].ops[0]);
    cr_expect(cost > 0 && cost == ts_memory_s(&pb.sys, prog.stages[0].ops[0].bytes, 1));
    for (int k = 0; k < r.n_ranks; k++) {
        const ts_op_span *sp = r.ranks[k].spans;
        const ts_stage_program *st = &prog.stages[r.ranks[k].stage];
        double own = ts_op_cost_s(&pb, &prog.layout, &st->ops[0]);
        cr_expect(sp[0].start_s == 0, "rank %d starts the step zeroing", r.ranks[k].rank);
        cr_expect(fabs(sp[0].end_s - sp[0].start_s - own) <= 1e-12 * own, "rank %d: %g s, priced %g s",
                  r.ranks[k].rank, sp[0].end_s - sp[0].start_s, own);
    }
    ts_sim_result_free(&r);
    ts_program_free(&prog);
}

/* The executor runs it as the program's first op: its span is timed, and the step's next
 * compute op starts after it. */
Test(zero_grad, executed_as_the_first_op) {
    ts_problem pb;
    ts_program prog = build("dp=1,tp=1,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none", &pb);
    ts_runtime rt = {0};
    ts_trainer *tr = NULL;
    ts_train_opts opts;
    ts_train_opts_defaults(&opts);
    cr_assert_eq(ts_runtime_init_self(&rt, &prog.layout), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_trainer_init(&tr, &pb, &prog, &rt, ts_backend_cpu(1), &opts), TS_OK, "%s", ts_error_message());
    int n = prog.stages[0].n_ops;
    ts_op_span *spans = calloc((size_t)n, sizeof *spans);
    cr_assert_not_null(spans);
    float loss[2];
    for (int s = 0; s < 2; s++) {
        cr_assert_eq(ts_trainer_step(tr, s, &loss[s], spans), TS_OK, "%s", ts_error_message());
        cr_expect(spans[0].end_s > spans[0].start_s, "step %d: zero-grad timed %g..%g", s, spans[0].start_s,
                  spans[0].end_s);
        cr_expect(spans[1].start_s >= spans[0].end_s, "step %d: the embedding after the zeroing", s);
    }
    /* Had the zeroing not run, the second step's update would hold both steps' gradients; the
     * mpi parity tests compare the losses with the reference step by step. */
    cr_expect(isfinite(loss[0]) && isfinite(loss[1]));
    free(spans);
    ts_trainer_free(tr);
    ts_runtime_free(&rt);
    ts_program_free(&prog);
}
