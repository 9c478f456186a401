/* The BF16 reference: one-rank training of a model through a CPU kernel table, fp32
 * (ts_kernels_cpu) or BF16 mixed precision (ts_kernels_cpu_bf16), giving each step's loss, so the
 * GPU's bf16 losses (`tessera run --device cuda` in bf16) and the CPU's bf16 losses can both be held
 * to the fp32 losses within a stated tolerance.
 *
 * The tolerance TS_BF16_LOSS_RTOL is the largest relative gap |bf16 - fp32| / fp32 a step's loss
 * may show. It is stated from a measured comparison, not from a guess: on the zoo's `tiny` and
 * `tiny-moe` (batch 4 × 64 tokens, 6 steps; tests/test_bf16.c prints the gaps) the CPU's bf16 losses
 * stay within 1.2e-3 of fp32 (see docs/gpu.md for the command and the figures). The bound is four
 * times the worst gap seen, well below the loss's own change over those steps, and far above fp32
 * noise (the GPU's fp32 losses are within 1e-4 relative of the CPU's): a GPU run whose bf16 losses
 * leave it rounds at a place Megatron-Core does not, or has a kernel bug. */
#ifndef TS_BF16_REF_H
#define TS_BF16_REF_H

#include "common/status.h"
#include "exec/backend.h"
#include "exec/launch.h" /* ts_device */
#include "exec/runtime.h"

#define TS_BF16_LOSS_RTOL 5e-3

/* Trains `model` (a zoo name or a file, one that exec/reference.h supports) on one rank with the
 * layout dp = tp = pp = 1, `batch` sequences of `seq` tokens per step, for `steps` steps from the
 * trainer's default seed, on `device` (the CPU backend, or the CUDA backend on this process's GPU)
 * in fp32 (bf16 = 0: the device's own table) or BF16 mixed precision (bf16 = 1:
 * ts_kernels_cpu_bf16 or ts_kernels_cuda_bf16); writes each step's loss to losses[0 .. steps) and,
 * where step_s is not NULL, each step's wall time in seconds (the loss is on the host at its end).
 * TS_ERR_INPUT for a model or shape the trainer refuses, and for CUDA in a build without it or on
 * a machine without a GPU (the backend's message). */
/* --precision's value: "fp32" (*bf16 = 0) or "bf16" (*bf16 = 1); anything else TS_ERR_INPUT
 * ("--precision: expected fp32 or bf16, got ..."). */
ts_status ts_precision_parse(const char *name, int *bf16);

/* `be` with its device's BF16 table (ts_kernels_cpu_bf16 for the CPU backend, ts_kernels_cuda_bf16
 * for the CUDA one): a copy in static storage (a process runs one backend), valid until the next
 * call. What `tessera run --precision bf16` trains with. NULL (TS_ERR_INPUT) when the device has no
 * bf16 table in this build. */
const ts_backend *ts_backend_bf16(const ts_backend *be);

/* The backend of `device` for the one-rank runtime `rt` (ts_runtime_init_self), as the BF16
 * reference and calibrate's in-situ pass train: the CPU backend with `threads` OpenBLAS threads,
 * or the CUDA backend on rt's communicators (ts_backend_cuda is once per process, so none may be
 * open), then *owned is set and the caller closes it with ts_backend_cuda_free(rt->world,
 * rt->comm, TS_GROUP_COUNT) before ts_runtime_free. NULL with the error recorded (no GPU, a build
 * without CUDA, a CUDA/NCCL failure). */
const ts_backend *ts_backend_self(ts_device device, int threads, const ts_runtime *rt, int *owned);

ts_status ts_bf16_ref_losses(const char *model, int batch, int seq, int steps, ts_device device, int bf16,
                             float *losses, double *step_s);

#endif
