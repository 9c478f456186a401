/* The CUDA backend's entry points in builds without CUDA (make without CUDA=1): they fail with
 * "built without CUDA (make CUDA=1)" (the kernel table is NULL), so callers need no #ifdef (see
 * backend.h, kernel_table.h). In CUDA builds exec/backend_cuda.cu and exec/kernel_table_cuda.cu
 * define them and this file compiles to nothing but a typedef. */
#include "exec/backend.h"
#include "exec/kernel_table.h"

#ifndef TS_CUDA

const ts_backend *ts_backend_cuda(ts_comm *world, ts_comm *const *groups, int n_groups) {
    (void)world;
    (void)groups;
    (void)n_groups;
    TS_FAIL(TS_ERR_INPUT, "cuda backend: built without CUDA (make CUDA=1)");
    return NULL;
}

void ts_backend_cuda_free(ts_comm *world, ts_comm *const *groups, int n_groups) {
    (void)world;
    (void)groups;
    (void)n_groups;
}

const ts_kernels *ts_kernels_cuda(void) { return NULL; }

const ts_kernels *ts_kernels_cuda_bf16(void) { return NULL; }

#else
typedef int ts_backend_nocuda_empty_; /* ISO C: a translation unit is not empty */
#endif
