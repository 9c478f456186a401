/* Gradient accumulation apart from the weight-gradient GEMMs (models/stack.h grad_accum_bytes):
 * the stacks that do it (Megatron-DeepSpeed's BF16_Optimizer, 2021 Megatron-LM's DDP hook) get a
 * memory-bound op after each chunk's backward of a micro-batch, before the gradient goes
 * upstream; the closed form charges the same pass; Megatron-Core, which accumulates inside its
 * GEMMs, gets none. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "planner/cost.h"
#include "planner/search.h"
#include "program/program.h"
#include "program/schedule.h"
#include "tests/helpers.h"

static ts_problem on_stack(const char *model, const char *sys, int gpus, int64_t batch, const char *stack) {
    ts_problem base = test_problem(model, sys, gpus, batch, 2048, 1);
    ts_train t = base.train;
    cr_assert_eq(ts_stack_load(stack, ts_schedule_names, ts_recompute_names, &t.stack), TS_OK, "%s", ts_error_message());
    ts_problem pb;
    cr_assert_eq(ts_problem_init(&pb, &base.model, &base.sys, &t, gpus), TS_OK, "%s", ts_error_message());
    return pb;
}

static ts_layout layout(const char *text) {
    ts_layout l;
    cr_assert_eq(ts_layout_parse("test", text, &l), TS_OK, "%s: %s", text, ts_error_message());
    return l;
}

Test(grad_accum, one_pass_per_micro_batch_before_the_gradient_goes_upstream) {
    ts_problem pb = on_stack("llama2-7b", "a100-80g-dgx", 16, 64, "megatron-deepspeed");
    cr_assert_eq(pb.train.stack.grad_accum_bytes, 18);
    ts_layout l = layout("dp=4,tp=2,pp=2,cp=1,ep=1,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=full");
    l.microbatches = 16;
    ts_program p;
    cr_assert_eq(ts_program_build(&pb, &l, NULL, &p), TS_OK, "%s", ts_error_message());
    ts_param_count pc;
    ts_model_params(&pb.model, &pc);
    double bytes = 0;
    for (int s = 0; s < p.pp; s++) {
        const ts_stage_program *sp = &p.stages[s];
        int n = 0;
        for (int i = 0; i < sp->n_ops; i++) {
            const ts_op *op = &sp->ops[i];
            if (op->part != TS_PART_GRAD_ACCUM) continue;
            n++;
            bytes += op->bytes;
            cr_expect(op->kind == TS_OP_ELEMENTWISE && op->stream == TS_STREAM_COMPUTE);
            /* stage 1 sends the gradient to stage 0 after accumulating it */
            for (int j = i + 1; s == 1 && j < sp->n_ops; j++) {
                if (sp->ops[j].part != TS_PART_PP_GRAD || sp->ops[j].kind != TS_OP_SEND) continue;
                cr_expect(sp->ops[j].ndeps > 0 && sp->deps[sp->ops[j].dep0] == (uint32_t)i, "the send waits for it");
                break;
            }
        }
        cr_expect_eq(n, 16, "stage %d: one pass per micro-batch, got %d", s, n);
    }
    /* every micro-batch, every parameter of a TP rank once, 18 bytes each */
    cr_expect(fabs(bytes / (16.0 * 18.0 * pc.total / 2) - 1) < 0.01, "%g bytes", bytes);
    ts_program_free(&p);

    ts_problem mc = on_stack("llama2-7b", "a100-80g-dgx", 16, 64, "megatron-core");
    cr_assert_eq(ts_program_build(&mc, &l, NULL, &p), TS_OK, "%s", ts_error_message());
    for (int s = 0; s < p.pp; s++)
        for (int i = 0; i < p.stages[s].n_ops; i++)
            cr_expect_neq(p.stages[s].ops[i].part, TS_PART_GRAD_ACCUM, "Megatron-Core accumulates in its GEMMs");
    ts_program_free(&p);
}

Test(grad_accum, closed_form_charges_each_micro_batch_and_agrees_with_the_simulator) {
    ts_problem pb = on_stack("llama2-7b", "a100-80g-dgx", 8, 64, "megatron-deepspeed");
    ts_layout l = layout("dp=4,tp=2,pp=1,cp=1,ep=1,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=full");
    /* twice the bytes a pass: each of the 16 micro-batches' passes moves 18 bytes a parameter more */
    ts_eval with, twice;
    cr_assert_eq(ts_evaluate(&pb, &l, &with), TS_OK, "%s", ts_error_message());
    ts_problem doubled = pb;
    doubled.train.stack.grad_accum_bytes = 36;
    cr_assert_eq(ts_evaluate(&doubled, &l, &twice), TS_OK, "%s", ts_error_message());
    ts_param_count pc;
    ts_model_params(&pb.model, &pc);
    double more = ts_memory_s(&pb.sys, 18.0 * pc.total / 2, 0);
    cr_expect(fabs((twice.time.compute - with.time.compute) / (16 * more) - 1) < 0.01, "%g s more, 16 passes of %g s more",
              twice.time.compute - with.time.compute, more);
    ts_layout l2 = layout("dp=2,tp=2,pp=2,cp=1,ep=1,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=full");
    double ratio = test_sim_over_closed_form(&pb, &l2);
    cr_expect(fabs(ratio - 1) < 0.05, "simulated over closed form %g", ratio);
}

Test(grad_accum, a_stack_file_states_it_within_bounds) {
    char *dir = make_temp_dir(), path[4200];
    snprintf(path, sizeof path, "%s/s.json", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("{\"name\": \"x\", \"sources\": [\"test\"], \"schedules\": [\"1f1b\"], \"grad_accum_bytes\": 65}\n", f);
    fclose(f);
    ts_stack st;
    cr_expect_eq(ts_stack_load(path, ts_schedule_names, ts_recompute_names, &st), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "$.grad_accum_bytes: expected a number in [0, 64], got 65") != NULL, "%s",
              ts_error_message());
    remove_dir(dir);
}
