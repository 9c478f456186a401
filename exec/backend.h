/* The executor's backend: memory, GEMM, communication and timers as a table of function
 * pointers, filled by one implementation per device (nccl-tests' testColl habit): the CPU
 * backend (OpenBLAS + Open MPI, backend_cpu.c) and the CUDA backend (cuBLAS + NCCL + streams and
 * events, backend_cuda.cu; a stub in builds without CUDA). Callers never #ifdef on the device.
 *
 * Buffers are device memory of `bytes` bytes; on the CPU they are host memory. Collectives run on
 * a communicator handle made by the runtime (exec/runtime.h) for one group of the rank order, and
 * take counts in floats (fp32 throughout the executor). Every call returns ts_status; failures
 * name the backend call and its library's error string. */
#ifndef TS_BACKEND_H
#define TS_BACKEND_H

#include <stddef.h>

#include "common/status.h"
#include "program/span.h"

typedef struct ts_comm ts_comm; /* a group communicator (opaque; runtime.h makes them) */
typedef struct ts_request ts_request; /* an outstanding point-to-point send (opaque) */
typedef struct ts_kernels ts_kernels; /* the device's kernel table (exec/kernel_table.h) */
typedef struct ts_op_clock ts_op_clock; /* per-op marks of one stage program's steps (opaque) */

typedef struct ts_backend {
    const char *name; /* "cpu", "cuda" */

    ts_status (*alloc)(size_t bytes, void **out); /* zero-filled */
    void (*free)(void *p);

    /* Row-major C(M×N) = alpha·op(A)·op(B) + beta·C, op = transpose when trans_* is nonzero. */
    ts_status (*sgemm)(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                       int lda, const float *B, int ldb, float beta, float *C, int ldc);

    /* The same GEMM on bf16 operands (16-bit words), accumulated in fp32 (cuBLAS: cublasGemmEx,
     * CUBLAS_COMPUTE_32F); NULL where the device has none (CPU ranks). */
    ts_status (*gemm_bf16)(int trans_a, int trans_b, int M, int N, int K, float alpha, const void *A, int lda,
                           const void *B, int ldb, float beta, void *C, int ldc);

    /* Collectives over `comm` (sizes in floats). reduce_scatter: `in` holds n·count floats, each
     * member keeps its count-float slice (in member order) summed into `out`; all_gather: each
     * member contributes `count` floats, `out` receives n·count in member order; all_to_all_v:
     * counts and displacements in floats per member. In-place all-reduce when in == out, and
     * in-place all-gather when `in` is the member's own slice of `out`, in-place reduce-scatter
     * (the member's sum at the start of the buffer) when in == out. */
    ts_status (*all_reduce)(ts_comm *c, const float *in, float *out, size_t count);
    ts_status (*all_reduce_max)(ts_comm *c, const float *in, float *out, size_t count);
    ts_status (*reduce_scatter)(ts_comm *c, const float *in, float *out, size_t count);
    ts_status (*all_gather)(ts_comm *c, const float *in, float *out, size_t count);
    ts_status (*all_to_all_v)(ts_comm *c, const float *in, const int *send_counts,
                              const int *send_displs, float *out, const int *recv_counts,
                              const int *recv_displs);
    ts_status (*all_to_all_int)(ts_comm *c, const int *in, int *out, int count);
    ts_status (*broadcast)(ts_comm *c, float *buf, size_t count, int root);

    /* Pipeline point-to-point on the world communicator: sends are non-blocking (the buffer must
     * stay untouched until wait), receives block. `tag` tells transfers apart. */
    ts_status (*send)(const float *buf, size_t count, int dst_rank, int tag, ts_request **req);
    ts_status (*wait)(ts_request *req); /* completes and frees the request */
    ts_status (*recv)(float *buf, size_t count, int src_rank, int tag);

    /* Seconds on a monotonic clock, after everything issued so far has completed (pipeline sends
     * excepted: they complete at wait). */
    double (*now_s)(void);

    /* Per-op streams and timing (exec/op_streams.h). A clock holds the marks of one stage
     * program's `n_ops` ops; ts_trainer_step brackets each op with op_begin and op_end. op_begin
     * queues the calls until op_end on the DP stream (dp nonzero) or the compute stream, once
     * op `after` of the other stream (-1: none) has finished. spans waits for the step's ops and
     * gives each one's start and end in seconds from step_begin. The CPU backend runs every call
     * to completion in issue order (MPI collectives block), so it only reads the clock; the CUDA
     * backend records a pair of CUDA events per op and reads them once, at spans. */
    ts_status (*clock_init)(int n_ops, ts_op_clock **out);
    void (*clock_free)(ts_op_clock *c); /* NULL is ignored */
    ts_status (*step_begin)(ts_op_clock *c);
    ts_status (*op_begin)(ts_op_clock *c, int op, int dp, int after);
    ts_status (*op_end)(ts_op_clock *c, int op);
    ts_status (*spans)(ts_op_clock *c, ts_op_span *out);

    /* The kernels that run on this backend's memory (ts_kernels_cpu or ts_kernels_cuda). */
    const ts_kernels *kernels;

    /* The device this rank drives: its name (CUDA: cudaDeviceProp.name; "" on CPUs, whose model
     * name is in /proc/cpuinfo) and its memory in bytes (CUDA: totalGlobalMem; 0 on CPUs: host
     * memory, shared by the ranks). */
    const char *device_name;
    double device_memory_bytes;
} ts_backend;

/* The CPU backend: host memory, OpenBLAS cblas_sgemm (with `threads` threads per rank), Open MPI.
 * Needs MPI initialised (runtime.h). */
const ts_backend *ts_backend_cpu(int threads);

/* The CUDA backend (exec/backend_cuda.cu, built with make CUDA=1): device memory from the
 * stream-ordered allocator (cudaMallocAsync / cudaFreeAsync on the compute stream, never managed,
 * never a device-wide synchronisation: that would wait for pipeline sends), cublasGemmEx with fp32
 * compute, NCCL collectives, CUDA streams and events. Picks this rank's GPU from its local rank
 * (one rank per GPU, exec/launch.h), makes the cuBLAS handle, a compute stream, a collective
 * stream and send/receive streams, and one NCCL communicator for `world` and for each of the
 * `n_groups` group communicators (stored in their `device` field; the unique id is made on each
 * group's first member and broadcast over the group's MPI communicator). Collective over the
 * world; call it once per process. Pipeline sends and receives run on `world` (NCCL matches them
 * per pair in issue order; tags are not used). all_to_all_int exchanges host ints (routing counts
 * the host needs) over MPI; every other buffer is device memory. Returns NULL with the error
 * recorded (ts_error_message, ts_error_status): no GPU or fewer GPUs than local ranks
 * (TS_ERR_INPUT), a CUDA/cuBLAS/NCCL failure (TS_ERR_EXTERNAL), or, in builds without CUDA,
 * TS_ERR_INPUT "built without CUDA (make CUDA=1)". */
const ts_backend *ts_backend_cuda(ts_comm *world, ts_comm *const *groups, int n_groups);
/* Destroys what ts_backend_cuda made (NCCL communicators, streams, events, cuBLAS handle); call it
 * before the runtime frees the communicators. A no-op when nothing was made. */
void ts_backend_cuda_free(ts_comm *world, ts_comm *const *groups, int n_groups);

#endif
