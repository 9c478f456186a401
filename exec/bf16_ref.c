/* One-rank training through a chosen kernel table (see bf16_ref.h): the in-process runtime of a
 * single rank (ts_runtime_init_self), a backend with its kernel table swapped. */
#include "exec/bf16_ref.h"

#include <string.h>

#include "exec/backend.h"
#include "exec/kernel_table.h"
#include "exec/launch.h"
#include "models/model.h"
#include "models/system.h"
#include "exec/runtime.h"
#include "exec/trainer.h"
#include "planner/problem.h"
#include "program/program.h"

/* The system only sizes the plan's program (one rank); the trainer's numbers do not depend on it. */
#define BF16_REF_SYSTEM "h100-sxm-dgx"

static ts_status ref_problem(const char *model, int batch, int seq, ts_problem *pb, ts_layout *l) {
    ts_model m;
    ts_system sys;
    ts_train t;
    TS_CHECK_CTX(ts_model_load(model, &m), "bf16 reference: model %s", model);
    /* The planner allows context extension past max_seq (program/problem.h ts_seq_extends); a
     * numerics reference trains within the model's own context. */
    if (seq > m.max_seq)
        return TS_FAIL(TS_ERR_INPUT, "bf16 reference: seq %d is beyond %s's max_seq %lld", seq, model,
                       (long long)m.max_seq);
    TS_CHECK(ts_system_load(BF16_REF_SYSTEM, &sys));
    ts_train_defaults(&t);
    ts_train_set_dtype(&t, TS_DTYPE_FP32); /* the problem's dtype prices plans; numerics are the table's */
    t.global_batch = batch;
    t.seq = seq;
    TS_CHECK_CTX(ts_problem_init(pb, &m, &sys, &t, 1), "bf16 reference: %s, batch %d of %d tokens", model, batch, seq);
    *l = (ts_layout){.dp = 1, .tp = 1, .pp = 1, .cp = 1, .ep = 1, .mbs = 1, .vpp = 1, .microbatches = batch,
                     .schedule = TS_SCHED_1F1B, .recompute = TS_RECOMPUTE_NONE};
    return ts_trainer_check(pb, l);
}

ts_status ts_precision_parse(const char *name, int *bf16) {
    if (name && (!strcmp(name, "fp32") || !strcmp(name, "bf16"))) {
        *bf16 = name[0] == 'b';
        return TS_OK;
    }
    return TS_FAIL(TS_ERR_INPUT, "--precision: expected fp32 or bf16, got \"%s\"", name ? name : "");
}

const ts_backend *ts_backend_bf16(const ts_backend *be) {
    static ts_backend with;
    const ts_kernels *k = be->kernels == ts_kernels_cpu() ? ts_kernels_cpu_bf16() : ts_kernels_cuda_bf16();
    if (k == NULL) {
        TS_FAIL(TS_ERR_INPUT, "bf16: the %s backend has no bf16 kernel table in this build", be->name);
        return NULL;
    }
    with = *be;
    with.kernels = k;
    return &with;
}

const ts_backend *ts_backend_self(ts_device device, int threads, const ts_runtime *rt, int *owned) {
    *owned = device == TS_DEVICE_CUDA;
    if (!*owned) return ts_backend_cpu(threads);
    ts_status ok = ts_device_runnable(device);
    if (ok != TS_OK) return NULL;
    return ts_backend_cuda(rt->world, rt->comm, TS_GROUP_COUNT);
}

ts_status ts_bf16_ref_losses(const char *model, int batch, int seq, int steps, ts_device device, int bf16,
                             float *losses, double *step_s) {
    ts_status res = TS_OK;
    ts_problem pb;
    ts_layout l;
    ts_program prog = {0};
    ts_runtime rt = {0};
    ts_trainer *tr = NULL;
    int owned = 0;
    if (steps < 1) return TS_FAIL(TS_ERR_INPUT, "bf16 reference: steps=%d, expected >= 1", steps);
    TS_CHECK(ref_problem(model, batch, seq, &pb, &l));
    TS_CHECK_GOTO(ts_program_build(&pb, &l, NULL, &prog), res, exit);
    TS_CHECK_GOTO(ts_runtime_init_self(&rt, &l), res, exit);
    const ts_backend *be = ts_backend_self(device, 1, &rt, &owned);
    if (be == NULL) {
        owned = 0;
        res = ts_error_context(__FILE__, __LINE__, "bf16 reference on %s", ts_device_name(device));
        goto exit;
    }
    if (bf16 && (be = ts_backend_bf16(be)) == NULL) {
        res = ts_error_status();
        goto exit;
    }
    ts_train_opts opts;
    ts_train_opts_defaults(&opts);
    TS_CHECK_GOTO(ts_trainer_init(&tr, &pb, &prog, &rt, be, &opts), res, exit);
    for (int s = 0; s < steps; s++) {
        double t0 = be->now_s();
        TS_CHECK_GOTO(ts_trainer_step(tr, s, &losses[s], NULL), res, exit);
        if (step_s) step_s[s] = be->now_s() - t0;
    }
exit:
    ts_trainer_free(tr);
    if (owned) ts_backend_cuda_free(rt.world, rt.comm, TS_GROUP_COUNT);
    ts_runtime_free(&rt);
    ts_program_free(&prog);
    return res;
}
