/* The CPU backend: host memory, OpenBLAS and Open MPI (see backend.h). */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/backend.h"
#include "exec/comm_mpi.h"
#include "exec/kernel_table.h"
#include "exec/runtime.h"

static ts_status cpu_alloc(size_t bytes, void **out) {
    *out = calloc(1, bytes ? bytes : 1);
    if (*out == NULL) return TS_FAIL(TS_ERR_NOMEM, "cpu backend: cannot allocate %zu bytes", bytes);
    return TS_OK;
}

static void cpu_free(void *p) { free(p); }

static ts_status cpu_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                           const float *B, int ldb, float beta, float *C, int ldc) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K,
                alpha, A, lda, B, ldb, beta, C, ldc);
    return TS_OK;
}

/* MPI counts are ints: refuse larger messages rather than truncate them. */
static ts_status count_ok(size_t count) {
    if (count > (size_t)0x7fffffff)
        return TS_FAIL(TS_ERR_INPUT, "cpu backend: %zu floats exceed MPI's int count", count);
    return TS_OK;
}

static ts_status cpu_all_reduce(ts_comm *c, const float *in, float *out, size_t count) {
    ts_status res = TS_OK;
    TS_CHECK(count_ok(count));
    TS_MPI_GOTO(MPI_Allreduce(in == out ? MPI_IN_PLACE : in, out, (int)count, MPI_FLOAT, MPI_SUM, c->mpi),
                res, fail);
fail:
    return res;
}

static ts_status cpu_all_reduce_max(ts_comm *c, const float *in, float *out, size_t count) {
    ts_status res = TS_OK;
    TS_CHECK(count_ok(count));
    TS_MPI_GOTO(MPI_Allreduce(in == out ? MPI_IN_PLACE : in, out, (int)count, MPI_FLOAT, MPI_MAX, c->mpi),
                res, fail);
fail:
    return res;
}

static ts_status cpu_reduce_scatter(ts_comm *c, const float *in, float *out, size_t count) {
    ts_status res = TS_OK;
    TS_CHECK(count_ok(count * (size_t)c->size));
    /* In place (in == out): the member's sum lands at the start of the buffer. */
    TS_MPI_GOTO(MPI_Reduce_scatter_block(in == out ? MPI_IN_PLACE : (const void *)in, out, (int)count,
                                         MPI_FLOAT, MPI_SUM, c->mpi),
                res, fail);
fail:
    return res;
}

static ts_status cpu_all_gather(ts_comm *c, const float *in, float *out, size_t count) {
    ts_status res = TS_OK;
    TS_CHECK(count_ok(count * (size_t)c->size));
    /* A member's own slice already in place in `out` is sent from there (MPI_IN_PLACE). */
    const void *send = in == out + (size_t)c->rank * count ? MPI_IN_PLACE : (const void *)in;
    TS_MPI_GOTO(MPI_Allgather(send, (int)count, MPI_FLOAT, out, (int)count, MPI_FLOAT, c->mpi), res, fail);
fail:
    return res;
}

static ts_status cpu_all_to_all_v(ts_comm *c, const float *in, const int *sc, const int *sd, float *out,
                                  const int *rc, const int *rd) {
    ts_status res = TS_OK;
    TS_MPI_GOTO(MPI_Alltoallv(in, sc, sd, MPI_FLOAT, out, rc, rd, MPI_FLOAT, c->mpi), res, fail);
fail:
    return res;
}

static ts_status cpu_all_to_all_int(ts_comm *c, const int *in, int *out, int count) {
    ts_status res = TS_OK;
    TS_MPI_GOTO(MPI_Alltoall(in, count, MPI_INT, out, count, MPI_INT, c->mpi), res, fail);
fail:
    return res;
}

static ts_status cpu_broadcast(ts_comm *c, float *buf, size_t count, int root) {
    ts_status res = TS_OK;
    TS_CHECK(count_ok(count));
    TS_MPI_GOTO(MPI_Bcast(buf, (int)count, MPI_FLOAT, root, c->mpi), res, fail);
fail:
    return res;
}

static ts_status cpu_send(const float *buf, size_t count, int dst, int tag, ts_request **req) {
    ts_status res = TS_OK;
    TS_CHECK(count_ok(count));
    ts_request *r = malloc(sizeof *r);
    TS_ALLOC_GOTO(r, res, fail);
    TS_MPI_GOTO(MPI_Isend(buf, (int)count, MPI_FLOAT, dst, tag, MPI_COMM_WORLD, &r->mpi), res, fail);
    *req = r;
    return TS_OK;
fail:
    free(r);
    return res;
}

static ts_status cpu_wait(ts_request *req) {
    ts_status res = TS_OK;
    TS_MPI_GOTO(MPI_Wait(&req->mpi, MPI_STATUS_IGNORE), res, exit);
exit:
    free(req);
    return res;
}

static ts_status cpu_recv(float *buf, size_t count, int src, int tag) {
    ts_status res = TS_OK;
    TS_CHECK(count_ok(count));
    TS_MPI_GOTO(MPI_Recv(buf, (int)count, MPI_FLOAT, src, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), res, fail);
fail:
    return res;
}

static double cpu_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The CPU's op clock: every call has completed when it returns, so an op's span is two clock
 * readings; the streams are one (backend.h). */
struct ts_op_clock {
    int n_ops;
    double t0;
    ts_op_span *spans; /* (n_ops) */
};

static ts_status cpu_clock_init(int n_ops, ts_op_clock **out) {
    ts_op_clock *c = calloc(1, sizeof *c);
    *out = NULL;
    if (c) c->spans = calloc(n_ops > 0 ? (size_t)n_ops : 1, sizeof *c->spans);
    if (c == NULL || c->spans == NULL) {
        free(c);
        return TS_FAIL(TS_ERR_NOMEM, "cpu backend: out of memory for %d op spans", n_ops);
    }
    c->n_ops = n_ops;
    *out = c;
    return TS_OK;
}

static void cpu_clock_free(ts_op_clock *c) {
    if (c) free(c->spans);
    free(c);
}

static ts_status op_index(const ts_op_clock *c, int op) {
    if (op < 0 || op >= c->n_ops)
        return TS_FAIL(TS_ERR_INPUT, "op clock: op %d, expected 0 to %d", op, c->n_ops - 1);
    return TS_OK;
}

static ts_status cpu_step_begin(ts_op_clock *c) {
    c->t0 = cpu_now_s();
    return TS_OK;
}

static ts_status cpu_op_begin(ts_op_clock *c, int op, int dp, int after) {
    (void)dp;
    (void)after;
    TS_CHECK(op_index(c, op));
    c->spans[op].start_s = cpu_now_s() - c->t0;
    return TS_OK;
}

static ts_status cpu_op_end(ts_op_clock *c, int op) {
    TS_CHECK(op_index(c, op));
    c->spans[op].end_s = cpu_now_s() - c->t0;
    return TS_OK;
}

static ts_status cpu_spans(ts_op_clock *c, ts_op_span *out) {
    memcpy(out, c->spans, (size_t)c->n_ops * sizeof *out);
    return TS_OK;
}

const ts_backend *ts_backend_cpu(int threads) {
    static ts_backend cpu = {
        .name = "cpu",
        .alloc = cpu_alloc,
        .free = cpu_free,
        .sgemm = cpu_sgemm,
        .all_reduce = cpu_all_reduce,
        .all_reduce_max = cpu_all_reduce_max,
        .reduce_scatter = cpu_reduce_scatter,
        .all_gather = cpu_all_gather,
        .all_to_all_v = cpu_all_to_all_v,
        .all_to_all_int = cpu_all_to_all_int,
        .broadcast = cpu_broadcast,
        .send = cpu_send,
        .wait = cpu_wait,
        .recv = cpu_recv,
        .now_s = cpu_now_s,
        .clock_init = cpu_clock_init,
        .clock_free = cpu_clock_free,
        .step_begin = cpu_step_begin,
        .op_begin = cpu_op_begin,
        .op_end = cpu_op_end,
        .spans = cpu_spans,
        .device_name = "",
        .device_memory_bytes = 0,
    };
    cpu.kernels = ts_kernels_cpu(); /* not a constant expression, so not in the initialiser */
    openblas_set_num_threads(threads > 0 ? threads : 1);
    return &cpu;
}
