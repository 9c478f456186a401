/* The CUDA files' check macros: one per foreign API (CUDA runtime, cuBLAS, NCCL), each naming the
 * file, line and call with that API's own error string, and relaying the failure through
 * common/status.h (TS_FAIL, TS_ERR_EXTERNAL) to the function's cleanup label (NCCL's
 * CHECKGOTO habit; llm.c's cudaCheck). Also the extern "C" includes of the C headers the .cu
 * files share with the C library. Included by the .cu files of exec/ only. */
#ifndef TS_CUDA_CHECK_CUH
#define TS_CUDA_CHECK_CUH

/* The C API of MPI only (Open MPI's and MPICH's C++ bindings do not compile warning-free). */
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

extern "C" {
#include "common/status.h"
#include "exec/backend.h"
#include "exec/backend_cuda.h"
#include "exec/comm_mpi.h"
#include "exec/kernel_table.h"
#include "exec/kernels_cuda.h"
#include "exec/launch.h"
}

#define TS_CUDA_GOTO(call, res, label)                                                             \
    do {                                                                                           \
        cudaError_t ts_cu_rc_ = (call);                                                            \
        if (ts_cu_rc_ != cudaSuccess) {                                                            \
            (res) = TS_FAIL(TS_ERR_EXTERNAL, "%s:%d: %s failed: %s", __FILE__, __LINE__, #call,    \
                            cudaGetErrorString(ts_cu_rc_));                                        \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

#define TS_CUBLAS_GOTO(call, res, label)                                                           \
    do {                                                                                           \
        cublasStatus_t ts_cb_rc_ = (call);                                                         \
        if (ts_cb_rc_ != CUBLAS_STATUS_SUCCESS) {                                                  \
            (res) = TS_FAIL(TS_ERR_EXTERNAL, "%s:%d: %s failed: %s", __FILE__, __LINE__, #call,    \
                            cublasGetStatusString(ts_cb_rc_));                                     \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

#define TS_NCCL_GOTO(call, res, label)                                                             \
    do {                                                                                           \
        ncclResult_t ts_nc_rc_ = (call);                                                           \
        if (ts_nc_rc_ != ncclSuccess) {                                                            \
            (res) = TS_FAIL(TS_ERR_EXTERNAL, "%s:%d: %s failed: %s", __FILE__, __LINE__, #call,    \
                            ncclGetErrorString(ts_nc_rc_));                                        \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

/* Kernel launches so far in this process (TS_LAUNCH_GOTO counts each; cuBLAS's own are not):
 * ts_cuda_launches() in kernels_cuda.h reads it, for tests that hold an op to one launch. */
extern unsigned long long ts_cuda_launch_count_;

/* After a kernel launch: a launch error (bad configuration, no device) names the kernel. */
#define TS_LAUNCH_GOTO(kernel, res, label)                                                         \
    do {                                                                                           \
        cudaError_t ts_ln_rc_ = cudaGetLastError();                                                \
        ts_cuda_launch_count_++;                                                                   \
        if (ts_ln_rc_ != cudaSuccess) {                                                            \
            (res) = TS_FAIL(TS_ERR_EXTERNAL, "%s:%d: launch of %s failed: %s", __FILE__, __LINE__, \
                            #kernel, cudaGetErrorString(ts_ln_rc_));                               \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

#endif
