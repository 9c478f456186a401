/* The CUDA backend (see backend.h and backend_cuda.h): device memory from the stream-ordered
 * allocator (cudaMallocAsync / cudaFreeAsync on the compute stream), GEMMs on
 * cuBLAS (cublasGemmEx, fp32 compute), collectives and pipeline transfers on NCCL, timers on CUDA
 * events. One process drives one GPU, so the backend's state is one static struct.
 *
 * Streams. GEMMs and kernels run on the current op's stream: the compute stream, or inside a DP
 * op (op_begin with dp set: gradient reductions and parameter gathers) the DP stream, whose
 * collectives, kernels and allocations all queue there. A DP op starts once the compute op it
 * waits for has (exec/op_streams.h says which), and a compute op that waits for a DP op waits for
 * its end event, so DP and ZeRO traffic overlaps the backward as the program says. Other
 * collectives (TP, SP, CP, EP: on the layer's critical path) run on the collective stream, which
 * waits (an event) for the compute stream's work so far while the compute stream waits for the
 * collective before its next op, as if in issue order. Pipeline sends and receives run on two
 * streams of their own. Each op's start and end are CUDA events on its stream, read once per
 * step (cuda_spans), so timing never stalls the streams. NCCL's guide ("Using multiple NCCL
 * communicators concurrently") warns that collectives of different communicators in flight at
 * once can hang when their kernels cannot all be resident; every rank issues them in the same
 * (program) order, which the guide asks for, and Megatron-LM overlaps its DP and TP communicators
 * the same way, but this has not run on a GPU yet.
 *
 * Memory is stream-ordered on the current stream. A release on the DP stream (ZeRO-3 letting a
 * gathered layer go) first makes the DP stream wait for the compute stream's work so far, which
 * may still read it; a release on the compute stream follows every compute use, and every other
 * stream's use of a buffer the compute stream releases is one it has waited for.
 *
 * Pipeline transfers. NCCL has no tags: it matches a pair's sends and receives in issue order.
 * Transfers to a higher world rank run on one NCCL communicator of the world ("up") and those to
 * a lower rank on another ("down"), each with its own stream, so a stage that sends forward
 * while its neighbour sends backward never waits on itself: on each communicator the transfers
 * follow the stage order, which has no cycle. Nothing but cuda_wait waits for a send: neither
 * memory (cudaMalloc and cudaFree synchronise the whole device, so a free while a neighbour has
 * not yet posted its receive would wait for that send, and the neighbour, sending to us before
 * it receives, for ours: the hang NCCL's documentation warns of) nor the clock, which waits for
 * the compute, collective and receive streams only (as MPI_Isend returns at once on the CPU). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_bf16.h>

#include "exec/cuda_check.cuh"

/* NCCL communicators of one group, hung on ts_comm.device. */
typedef struct {
    ncclComm_t nccl;
} cuda_comm;

/* An outstanding send: the MPI-shaped request of comm_mpi.h, followed by its completion event. */
typedef struct {
    struct ts_request base;
    cudaEvent_t done;
} cuda_request;

struct ts_cuda_timer {
    cudaEvent_t start, stop;
};

static struct {
    int ready;
    int device;
    cudaStream_t compute, dp, coll, send, recv;
    cudaStream_t cur;                         /* the current op's: compute, or dp in a DP op */
    cudaEvent_t ev_compute, ev_coll, ev_recv; /* cross-stream ordering */
    cublasHandle_t blas;
    ncclComm_t up, down; /* pipeline transfers to higher / lower world ranks */
    char name[256];      /* cudaDeviceProp.name */
    double memory_bytes; /* cudaDeviceProp.totalGlobalMem */
} g;

/* ---- memory and GEMM ------------------------------------------------------------------------- */

static ts_status cuda_alloc(size_t bytes, void **out) {
    ts_status res = TS_OK;
    *out = NULL;
    TS_CUDA_GOTO(cudaMallocAsync(out, bytes ? bytes : 1, g.cur), res, fail);
    TS_CUDA_GOTO(cudaMemsetAsync(*out, 0, bytes ? bytes : 1, g.cur), res, fail);
    return TS_OK;
fail:
    if (*out) cudaFreeAsync(*out, g.cur);
    *out = NULL;
    return res;
}

/* The memory goes back in the current stream's order (see the top of this file): on the DP
 * stream after the compute stream's work so far. Send buffers are freed after cuda_wait. The
 * table's free returns nothing, so a failed call is reported on stderr. */
static void cuda_free(void *p) {
    ts_status res = TS_OK;
    if (p == NULL) return;
    if (g.cur == g.dp) {
        TS_CUDA_GOTO(cudaEventRecord(g.ev_compute, g.compute), res, fail);
        TS_CUDA_GOTO(cudaStreamWaitEvent(g.dp, g.ev_compute, 0), res, fail);
    }
    TS_CUDA_GOTO(cudaFreeAsync(p, g.cur), res, fail);
    return;
fail:
    fprintf(stderr, "tessera: cuda backend: free: %s (status %d)\n", ts_error_message(), (int)res);
}

extern "C" ts_status ts_cuda_gemm_mixed(ts_dtype ab, ts_dtype c, int ta, int tb, int M, int N, int K, float alpha,
                                        const void *A, int lda, const void *B, int ldb, float beta, void *C, int ldc) {
    ts_status res = TS_OK;
    ts_gemm_cm cm;
    for (int i = 0; i < 2; i++) {
        ts_dtype d = i ? c : ab;
        if (d != TS_DTYPE_FP32 && d != TS_DTYPE_BF16)
            return TS_FAIL(TS_ERR_INPUT, "cuda gemm: dtype %s not supported (fp32 or bf16)", ts_dtype_names[d]);
    }
    if (ab == TS_DTYPE_FP32 && c == TS_DTYPE_BF16)
        return TS_FAIL(TS_ERR_INPUT, "cuda gemm: fp32 operands with a bf16 result are not a cuBLAS combination");
    cudaDataType_t tab = ab == TS_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F, tc = c == TS_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    if (!g.ready) return TS_FAIL(TS_ERR_INPUT, "cuda gemm: the CUDA backend is not initialised (ts_backend_cuda)");
    TS_CHECK(ts_gemm_colmajor(ta, tb, M, N, K, lda, ldb, ldc, &cm));
    if (M == 0 || N == 0) return TS_OK;
    TS_CUBLAS_GOTO(cublasGemmEx(g.blas, cm.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N,
                                cm.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N, cm.m, cm.n, cm.k, &alpha, B, tab,
                                cm.ld_first, A, tab, cm.ld_second, &beta, C, tc, cm.ld_c, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT),
                   res, fail);
fail:
    return res;
}

extern "C" ts_status ts_cuda_gemm(ts_dtype dtype, int ta, int tb, int M, int N, int K, float alpha,
                                  const void *A, int lda, const void *B, int ldb, float beta, void *C,
                                  int ldc) {
    return ts_cuda_gemm_mixed(dtype, dtype, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static ts_status cuda_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                            const float *B, int ldb, float beta, float *C, int ldc) {
    return ts_cuda_gemm(TS_DTYPE_FP32, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static ts_status cuda_gemm_bf16(int ta, int tb, int M, int N, int K, float alpha, const void *A, int lda,
                                const void *B, int ldb, float beta, void *C, int ldc) {
    return ts_cuda_gemm(TS_DTYPE_BF16, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* ---- collectives ------------------------------------------------------------------------------ */

/* Refuses host buffers with a clear message instead of NCCL's "invalid usage" or a crash. */
static ts_status device_ptr(const char *call, const void *p) {
    cudaPointerAttributes a;
    if (p == NULL) return TS_OK;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky-free error of the failed query */
        return TS_FAIL(TS_ERR_INPUT, "cuda backend: %s: %p is not device memory", call, p);
    }
    if (a.type != cudaMemoryTypeDevice)
        return TS_FAIL(TS_ERR_INPUT, "cuda backend: %s: %p is host memory; pass memory from the backend's alloc",
                       call, p);
    return TS_OK;
}

static ts_status comm_of(const char *call, ts_comm *c, ncclComm_t *out) {
    if (c == NULL || c->device == NULL)
        return TS_FAIL(TS_ERR_INPUT, "cuda backend: %s: the communicator has no NCCL communicator "
                                     "(pass it to ts_backend_cuda)", call);
    *out = ((cuda_comm *)c->device)->nccl;
    return TS_OK;
}

/* The stream a collective queues on: the DP stream inside a DP op, else the collective stream. */
static cudaStream_t coll_stream(void) { return g.cur == g.dp ? g.dp : g.coll; }

/* The collective stream waits for the compute stream's work so far (a DP op's collective follows
 * its stream's order and the op's wait instead). */
static ts_status coll_begin(void) {
    ts_status res = TS_OK;
    if (g.cur == g.dp) return TS_OK;
    TS_CUDA_GOTO(cudaEventRecord(g.ev_compute, g.compute), res, fail);
    TS_CUDA_GOTO(cudaStreamWaitEvent(g.coll, g.ev_compute, 0), res, fail);
fail:
    return res;
}

/* The compute stream's next op waits for the collective. */
static ts_status coll_end(void) {
    ts_status res = TS_OK;
    if (g.cur == g.dp) return TS_OK;
    TS_CUDA_GOTO(cudaEventRecord(g.ev_coll, g.coll), res, fail);
    TS_CUDA_GOTO(cudaStreamWaitEvent(g.compute, g.ev_coll, 0), res, fail);
fail:
    return res;
}

static ts_status reduce(const char *call, ts_comm *c, const float *in, float *out, size_t count,
                        ncclRedOp_t op) {
    ts_status res = TS_OK;
    ncclComm_t nc = NULL;
    TS_CHECK(comm_of(call, c, &nc));
    TS_CHECK(device_ptr(call, in));
    TS_CHECK(device_ptr(call, out));
    TS_CHECK(coll_begin());
    TS_NCCL_GOTO(ncclAllReduce(in, out, count, ncclFloat, op, nc, coll_stream()), res, fail);
    TS_CHECK(coll_end());
fail:
    return res;
}

static ts_status cuda_all_reduce(ts_comm *c, const float *in, float *out, size_t count) {
    return reduce("all_reduce", c, in, out, count, ncclSum);
}

static ts_status cuda_all_reduce_max(ts_comm *c, const float *in, float *out, size_t count) {
    return reduce("all_reduce_max", c, in, out, count, ncclMax);
}

static ts_status cuda_reduce_scatter(ts_comm *c, const float *in, float *out, size_t count) {
    ts_status res = TS_OK;
    ncclComm_t nc = NULL;
    float *mine = NULL;
    TS_CHECK(comm_of("reduce_scatter", c, &nc));
    TS_CHECK(device_ptr("reduce_scatter", in));
    TS_CHECK(device_ptr("reduce_scatter", out));
    TS_CHECK(coll_begin());
    /* NCCL's in-place form leaves the member's sum at its own slice; the contract wants it at the
     * start of the buffer, so it is moved there (disjoint ranges: the slice of member r >= 1 starts
     * count floats or more in). */
    mine = in == out ? out + (size_t)c->rank * count : out;
    TS_NCCL_GOTO(ncclReduceScatter(in, mine, count, ncclFloat, ncclSum, nc, coll_stream()), res, fail);
    if (mine != out)
        TS_CUDA_GOTO(cudaMemcpyAsync(out, mine, count * sizeof *out, cudaMemcpyDeviceToDevice, coll_stream()), res, fail);
    TS_CHECK(coll_end());
fail:
    return res;
}

static ts_status cuda_all_gather(ts_comm *c, const float *in, float *out, size_t count) {
    ts_status res = TS_OK;
    ncclComm_t nc = NULL;
    TS_CHECK(comm_of("all_gather", c, &nc));
    TS_CHECK(device_ptr("all_gather", in));
    TS_CHECK(device_ptr("all_gather", out));
    TS_CHECK(coll_begin());
    /* In place when `in` is the member's slice of `out`: NCCL's own in-place form. */
    TS_NCCL_GOTO(ncclAllGather(in, out, count, ncclFloat, nc, coll_stream()), res, fail);
    TS_CHECK(coll_end());
fail:
    return res;
}

static ts_status cuda_all_to_all_v(ts_comm *c, const float *in, const int *sc, const int *sd, float *out,
                                   const int *rc, const int *rd) {
    ts_status res = TS_OK;
    ncclComm_t nc = NULL;
    int grouped = 0;
    TS_CHECK(comm_of("all_to_all_v", c, &nc));
    TS_CHECK(device_ptr("all_to_all_v", in));
    TS_CHECK(device_ptr("all_to_all_v", out));
    for (int p = 0; p < c->size; p++)
        if (sc[p] < 0 || sd[p] < 0 || rc[p] < 0 || rd[p] < 0)
            return TS_FAIL(TS_ERR_INPUT, "cuda backend: all_to_all_v: member %d has a negative count or displacement", p);
    TS_CHECK(coll_begin());
    /* Point-to-point pairs in one NCCL group: the all-to-all of nccl-tests' alltoall. */
    TS_NCCL_GOTO(ncclGroupStart(), res, fail);
    grouped = 1;
    for (int p = 0; p < c->size; p++) {
        if (sc[p] > 0) TS_NCCL_GOTO(ncclSend(in + sd[p], (size_t)sc[p], ncclFloat, p, nc, coll_stream()), res, fail);
        if (rc[p] > 0) TS_NCCL_GOTO(ncclRecv(out + rd[p], (size_t)rc[p], ncclFloat, p, nc, coll_stream()), res, fail);
    }
    grouped = 0;
    TS_NCCL_GOTO(ncclGroupEnd(), res, fail);
    TS_CHECK(coll_end());
    return TS_OK;
fail:
    if (grouped) ncclGroupEnd();
    return res;
}

/* Routing counts live on the host (the host plans the dispatch), so they go over MPI. */
static ts_status cuda_all_to_all_int(ts_comm *c, const int *in, int *out, int count) {
    int rc = MPI_Alltoall(in, count, MPI_INT, out, count, MPI_INT, c->mpi);
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        return TS_FAIL(TS_ERR_EXTERNAL, "%s:%d: MPI_Alltoall failed: %s", __FILE__, __LINE__, msg);
    }
    return TS_OK;
}

static ts_status cuda_broadcast(ts_comm *c, float *buf, size_t count, int root) {
    ts_status res = TS_OK;
    ncclComm_t nc = NULL;
    TS_CHECK(comm_of("broadcast", c, &nc));
    TS_CHECK(device_ptr("broadcast", buf));
    if (root < 0 || root >= c->size)
        return TS_FAIL(TS_ERR_INPUT, "cuda backend: broadcast: root %d, expected 0 to %d", root, c->size - 1);
    TS_CHECK(coll_begin());
    TS_NCCL_GOTO(ncclBroadcast(buf, buf, count, ncclFloat, root, nc, coll_stream()), res, fail);
    TS_CHECK(coll_end());
fail:
    return res;
}

/* ---- pipeline point-to-point ----------------------------------------------------------------- */

static ts_status p2p_ready(const char *call) {
    if (!g.ready)
        return TS_FAIL(TS_ERR_INPUT, "cuda backend: %s: the CUDA backend is not initialised (ts_backend_cuda)", call);
    return TS_OK;
}

static int world_rank(void) {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

static ts_status cuda_send(const float *buf, size_t count, int dst, int tag, ts_request **req) {
    ts_status res = TS_OK;
    cuda_request *r = NULL;
    int me = 0;
    (void)tag;
    *req = NULL;
    TS_CHECK(p2p_ready("send"));
    TS_CHECK(device_ptr("send", buf));
    me = world_rank();
    if (dst == me) return TS_FAIL(TS_ERR_INPUT, "cuda backend: send: rank %d sends to itself", me);
    r = (cuda_request *)calloc(1, sizeof *r);
    TS_ALLOC_GOTO(r, res, fail);
    TS_CUDA_GOTO(cudaEventCreateWithFlags(&r->done, cudaEventDisableTiming), res, fail);
    TS_CUDA_GOTO(cudaEventRecord(g.ev_compute, g.compute), res, fail);
    TS_CUDA_GOTO(cudaStreamWaitEvent(g.send, g.ev_compute, 0), res, fail);
    TS_NCCL_GOTO(ncclSend(buf, count, ncclFloat, dst, dst > me ? g.up : g.down, g.send), res, fail);
    TS_CUDA_GOTO(cudaEventRecord(r->done, g.send), res, fail);
    *req = &r->base;
    return TS_OK;
fail:
    if (r && r->done) cudaEventDestroy(r->done);
    free(r);
    return res;
}

/* The buffer is free again once the send's event has passed. */
static ts_status cuda_wait(ts_request *req) {
    ts_status res = TS_OK;
    cuda_request *r = (cuda_request *)req;
    TS_CUDA_GOTO(cudaEventSynchronize(r->done), res, exit);
exit:
    cudaEventDestroy(r->done);
    free(r);
    return res;
}

static ts_status cuda_recv(float *buf, size_t count, int src, int tag) {
    ts_status res = TS_OK;
    int me = 0;
    (void)tag;
    TS_CHECK(p2p_ready("recv"));
    TS_CHECK(device_ptr("recv", buf));
    me = world_rank();
    if (src == me) return TS_FAIL(TS_ERR_INPUT, "cuda backend: recv: rank %d receives from itself", me);
    TS_CUDA_GOTO(cudaEventRecord(g.ev_compute, g.compute), res, fail);
    TS_CUDA_GOTO(cudaStreamWaitEvent(g.recv, g.ev_compute, 0), res, fail);
    /* From a lower rank: that rank's transfer "up". */
    TS_NCCL_GOTO(ncclRecv(buf, count, ncclFloat, src, src < me ? g.up : g.down, g.recv), res, fail);
    TS_CUDA_GOTO(cudaEventRecord(g.ev_recv, g.recv), res, fail);
    TS_CUDA_GOTO(cudaStreamWaitEvent(g.compute, g.ev_recv, 0), res, fail);
fail:
    return res;
}

/* Wall clock after the compute, DP, collective and receive streams have drained (outstanding sends
 * complete at cuda_wait; see the top of this file). */
static double cuda_now_s(void) {
    struct timespec t;
    cudaStreamSynchronize(g.compute);
    cudaStreamSynchronize(g.dp);
    cudaStreamSynchronize(g.coll);
    cudaStreamSynchronize(g.recv);
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- per-op streams and timing ---------------------------------------------------------------- */

/* A step's marks: the base event on the compute stream and each op's start and end events on its
 * stream. Elapsed times are read once, at cuda_spans, after the streams drain. */
struct ts_op_clock {
    int n_ops;
    cudaEvent_t base;
    cudaEvent_t *start, *end; /* (n_ops) */
};

static void cuda_clock_free(ts_op_clock *c) {
    if (c == NULL) return;
    for (int i = 0; i < c->n_ops; i++) {
        if (c->start && c->start[i]) cudaEventDestroy(c->start[i]);
        if (c->end && c->end[i]) cudaEventDestroy(c->end[i]);
    }
    if (c->base) cudaEventDestroy(c->base);
    free(c->start);
    free(c->end);
    free(c);
}

static ts_status cuda_clock_init(int n_ops, ts_op_clock **out) {
    ts_status res = TS_OK;
    ts_op_clock *c = (ts_op_clock *)calloc(1, sizeof *c);
    *out = NULL;
    TS_ALLOC_GOTO(c, res, fail);
    c->start = (cudaEvent_t *)calloc(n_ops > 0 ? (size_t)n_ops : 1, sizeof *c->start);
    c->end = (cudaEvent_t *)calloc(n_ops > 0 ? (size_t)n_ops : 1, sizeof *c->end);
    TS_ALLOC_GOTO(c->start, res, fail);
    TS_ALLOC_GOTO(c->end, res, fail);
    c->n_ops = n_ops;
    TS_CUDA_GOTO(cudaEventCreate(&c->base), res, fail);
    for (int i = 0; i < n_ops; i++) {
        TS_CUDA_GOTO(cudaEventCreate(&c->start[i]), res, fail);
        TS_CUDA_GOTO(cudaEventCreate(&c->end[i]), res, fail);
    }
    *out = c;
    return TS_OK;
fail:
    cuda_clock_free(c);
    return res;
}

static ts_status clock_op(const ts_op_clock *c, const char *what, int op) {
    if (op < 0 || op >= c->n_ops)
        return TS_FAIL(TS_ERR_INPUT, "cuda backend: op clock: %s %d, expected 0 to %d", what, op, c->n_ops - 1);
    return TS_OK;
}

static ts_status cuda_step_begin(ts_op_clock *c) {
    ts_status res = TS_OK;
    TS_CUDA_GOTO(cudaEventRecord(c->base, g.compute), res, fail);
fail:
    return res;
}

/* The op's stream becomes current (cuBLAS follows it), after the op it waits for. */
static ts_status cuda_op_begin(ts_op_clock *c, int op, int dp, int after) {
    ts_status res = TS_OK;
    cudaStream_t s = dp ? g.dp : g.compute;
    TS_CHECK(clock_op(c, "op", op));
    if (after >= 0) {
        TS_CHECK(clock_op(c, "wait for op", after));
        TS_CUDA_GOTO(cudaStreamWaitEvent(s, c->end[after], 0), res, fail);
    }
    g.cur = s;
    TS_CUBLAS_GOTO(cublasSetStream(g.blas, s), res, fail);
    TS_CUDA_GOTO(cudaEventRecord(c->start[op], s), res, fail);
fail:
    return res;
}

static ts_status cuda_op_end(ts_op_clock *c, int op) {
    ts_status res = TS_OK;
    TS_CHECK(clock_op(c, "op", op));
    TS_CUDA_GOTO(cudaEventRecord(c->end[op], g.cur), res, fail);
    g.cur = g.compute;
    TS_CUBLAS_GOTO(cublasSetStream(g.blas, g.compute), res, fail);
fail:
    return res;
}

static ts_status cuda_spans(ts_op_clock *c, ts_op_span *out) {
    ts_status res = TS_OK;
    float a = 0, b = 0;
    cuda_now_s(); /* every stream drained */
    for (int i = 0; i < c->n_ops; i++) {
        TS_CUDA_GOTO(cudaEventElapsedTime(&a, c->base, c->start[i]), res, fail);
        TS_CUDA_GOTO(cudaEventElapsedTime(&b, c->base, c->end[i]), res, fail);
        out[i] = (ts_op_span){1e-3 * (double)a, 1e-3 * (double)b};
    }
fail:
    return res;
}

/* ---- set-up ------------------------------------------------------------------------------------ */

extern "C" ts_status ts_cuda_device_count(int *count, char *why, size_t why_size) {
    cudaError_t rc = cudaGetDeviceCount(count);
    if (why && why_size) why[0] = '\0';
    if (rc != cudaSuccess) {
        /* No driver or no device: a count of 0 with the runtime's reason. */
        if (why && why_size) snprintf(why, why_size, "cudaGetDeviceCount: %s", cudaGetErrorString(rc));
        cudaGetLastError();
        *count = 0;
    }
    return TS_OK;
}

/* An NCCL communicator for the MPI communicator's members: the first member makes the unique id,
 * MPI_Bcast hands it to the others, each joins with its rank in the group. */
static ts_status nccl_for(MPI_Comm mpi, int size, int rank, ncclComm_t *out) {
    ts_status res = TS_OK;
    ncclUniqueId id;
    int rc;
    memset(&id, 0, sizeof id);
    if (rank == 0) TS_NCCL_GOTO(ncclGetUniqueId(&id), res, fail);
    rc = MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, mpi);
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        return TS_FAIL(TS_ERR_EXTERNAL, "%s:%d: MPI_Bcast of the NCCL unique id failed: %s", __FILE__,
                       __LINE__, msg);
    }
    TS_NCCL_GOTO(ncclCommInitRank(out, size, id, rank), res, fail);
fail:
    return res;
}

static ts_status attach(ts_comm *c) {
    ts_status res = TS_OK;
    cuda_comm *cc = NULL;
    if (c == NULL || c->device != NULL) return TS_OK; /* absent, or already attached */
    cc = (cuda_comm *)calloc(1, sizeof *cc);
    TS_ALLOC_GOTO(cc, res, fail);
    TS_CHECK_GOTO(nccl_for(c->mpi, c->size, c->rank, &cc->nccl), res, fail);
    c->device = cc;
    return TS_OK;
fail:
    free(cc);
    return res;
}

static void detach(ts_comm *c) {
    if (c == NULL || c->device == NULL) return;
    cuda_comm *cc = (cuda_comm *)c->device;
    ncclCommDestroy(cc->nccl);
    free(cc);
    c->device = NULL;
}

static ts_status setup(ts_comm *world, ts_comm *const *groups, int n_groups) {
    ts_status res = TS_OK;
    int local = 0, count = 0;
    char why[256];
    if (world == NULL || n_groups < 0 || (n_groups > 0 && groups == NULL))
        return TS_FAIL(TS_ERR_INPUT, "cuda backend: needs the world communicator and %d group(s)", n_groups);
    TS_CHECK(ts_local_rank(&local));
    TS_CHECK(ts_cuda_device_count(&count, why, sizeof why));
    if (count == 0 && why[0])
        return TS_FAIL(TS_ERR_INPUT, "no CUDA GPU found (%s); run on a GPU node or use --device cpu", why);
    TS_CHECK(ts_cuda_pick_device(local, count, &g.device));
    TS_CUDA_GOTO(cudaSetDevice(g.device), res, fail);
    {
        cudaDeviceProp prop;
        TS_CUDA_GOTO(cudaGetDeviceProperties(&prop, g.device), res, fail);
        snprintf(g.name, sizeof g.name, "%s", prop.name);
        g.memory_bytes = (double)prop.totalGlobalMem;
    }
    TS_CUDA_GOTO(cudaStreamCreateWithFlags(&g.compute, cudaStreamNonBlocking), res, fail);
    TS_CUDA_GOTO(cudaStreamCreateWithFlags(&g.dp, cudaStreamNonBlocking), res, fail);
    TS_CUDA_GOTO(cudaStreamCreateWithFlags(&g.coll, cudaStreamNonBlocking), res, fail);
    TS_CUDA_GOTO(cudaStreamCreateWithFlags(&g.send, cudaStreamNonBlocking), res, fail);
    TS_CUDA_GOTO(cudaStreamCreateWithFlags(&g.recv, cudaStreamNonBlocking), res, fail);
    TS_CUDA_GOTO(cudaEventCreateWithFlags(&g.ev_compute, cudaEventDisableTiming), res, fail);
    TS_CUDA_GOTO(cudaEventCreateWithFlags(&g.ev_coll, cudaEventDisableTiming), res, fail);
    TS_CUDA_GOTO(cudaEventCreateWithFlags(&g.ev_recv, cudaEventDisableTiming), res, fail);
    g.cur = g.compute;
    TS_CUBLAS_GOTO(cublasCreate(&g.blas), res, fail);
    TS_CUBLAS_GOTO(cublasSetStream(g.blas, g.compute), res, fail);
    /* fp32 GEMMs stay fp32 (no TF32): the executor is diffed against the CPU reference. */
    TS_CUBLAS_GOTO(cublasSetMathMode(g.blas, CUBLAS_DEFAULT_MATH), res, fail);
    /* Every rank walks the same list in the same order, so each group's members meet in
     * ncclCommInitRank together. */
    TS_CHECK_GOTO(attach(world), res, fail);
    for (int i = 0; i < n_groups; i++) TS_CHECK_GOTO(attach(groups[i]), res, fail);
    TS_CHECK_GOTO(nccl_for(world->mpi, world->size, world->rank, &g.up), res, fail);
    TS_CHECK_GOTO(nccl_for(world->mpi, world->size, world->rank, &g.down), res, fail);
    g.ready = 1;
    return TS_OK;
fail:
    return res;
}

extern "C" const ts_backend *ts_backend_cuda(ts_comm *world, ts_comm *const *groups, int n_groups) {
    static ts_backend cuda;
    if (g.ready) return &cuda;
    if (setup(world, groups, n_groups) != TS_OK) {
        /* Keep the first error; release what was made. */
        ts_backend_cuda_free(world, groups, n_groups);
        return NULL;
    }
    cuda.name = "cuda";
    cuda.alloc = cuda_alloc;
    cuda.free = cuda_free;
    cuda.sgemm = cuda_sgemm;
    cuda.gemm_bf16 = cuda_gemm_bf16;
    cuda.all_reduce = cuda_all_reduce;
    cuda.all_reduce_max = cuda_all_reduce_max;
    cuda.reduce_scatter = cuda_reduce_scatter;
    cuda.all_gather = cuda_all_gather;
    cuda.all_to_all_v = cuda_all_to_all_v;
    cuda.all_to_all_int = cuda_all_to_all_int;
    cuda.broadcast = cuda_broadcast;
    cuda.send = cuda_send;
    cuda.wait = cuda_wait;
    cuda.recv = cuda_recv;
    cuda.now_s = cuda_now_s;
    cuda.clock_init = cuda_clock_init;
    cuda.clock_free = cuda_clock_free;
    cuda.step_begin = cuda_step_begin;
    cuda.op_begin = cuda_op_begin;
    cuda.op_end = cuda_op_end;
    cuda.spans = cuda_spans;
    cuda.kernels = ts_kernels_cuda();
    cuda.device_name = g.name;
    cuda.device_memory_bytes = g.memory_bytes;
    return &cuda;
}

extern "C" void ts_backend_cuda_free(ts_comm *world, ts_comm *const *groups, int n_groups) {
    if (g.compute) cudaStreamSynchronize(g.compute);
    detach(world);
    for (int i = 0; groups && i < n_groups; i++) detach(groups[i]);
    if (g.up) ncclCommDestroy(g.up);
    if (g.down) ncclCommDestroy(g.down);
    if (g.blas) cublasDestroy(g.blas);
    if (g.ev_compute) cudaEventDestroy(g.ev_compute);
    if (g.ev_coll) cudaEventDestroy(g.ev_coll);
    if (g.ev_recv) cudaEventDestroy(g.ev_recv);
    if (g.compute) cudaStreamDestroy(g.compute);
    if (g.dp) cudaStreamDestroy(g.dp);
    if (g.coll) cudaStreamDestroy(g.coll);
    if (g.send) cudaStreamDestroy(g.send);
    if (g.recv) cudaStreamDestroy(g.recv);
    memset(&g, 0, sizeof g);
}

/* ---- the extras of backend_cuda.h ------------------------------------------------------------- */

extern "C" void *ts_cuda_stream(void) { return (void *)g.cur; }

extern "C" ts_status ts_cuda_timer_create(ts_cuda_timer **out) {
    ts_status res = TS_OK;
    ts_cuda_timer *t = (ts_cuda_timer *)calloc(1, sizeof *t);
    *out = NULL;
    TS_ALLOC_GOTO(t, res, fail);
    TS_CUDA_GOTO(cudaEventCreate(&t->start), res, fail);
    TS_CUDA_GOTO(cudaEventCreate(&t->stop), res, fail);
    *out = t;
    return TS_OK;
fail:
    ts_cuda_timer_free(t);
    return res;
}

extern "C" ts_status ts_cuda_timer_start(ts_cuda_timer *t) {
    ts_status res = TS_OK;
    TS_CUDA_GOTO(cudaEventRecord(t->start, g.compute), res, fail);
fail:
    return res;
}

extern "C" ts_status ts_cuda_timer_stop(ts_cuda_timer *t, double *seconds) {
    ts_status res = TS_OK;
    float ms = 0;
    TS_CUDA_GOTO(cudaEventRecord(t->stop, g.compute), res, fail);
    TS_CUDA_GOTO(cudaEventSynchronize(t->stop), res, fail);
    TS_CUDA_GOTO(cudaEventElapsedTime(&ms, t->start, t->stop), res, fail);
    *seconds = 1e-3 * (double)ms;
fail:
    return res;
}

extern "C" void ts_cuda_timer_free(ts_cuda_timer *t) {
    if (!t) return;
    if (t->start) cudaEventDestroy(t->start);
    if (t->stop) cudaEventDestroy(t->stop);
    free(t);
}

extern "C" ts_status ts_cuda_to_device(void *dst, const void *src, size_t bytes) {
    ts_status res = TS_OK;
    TS_CUDA_GOTO(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, g.cur), res, fail);
    TS_CUDA_GOTO(cudaStreamSynchronize(g.cur), res, fail);
fail:
    return res;
}

extern "C" ts_status ts_cuda_to_host(void *dst, const void *src, size_t bytes) {
    ts_status res = TS_OK;
    TS_CUDA_GOTO(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, g.cur), res, fail);
    TS_CUDA_GOTO(cudaStreamSynchronize(g.cur), res, fail);
fail:
    return res;
}
