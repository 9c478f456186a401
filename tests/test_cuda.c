/* The CUDA backend (exec/backend_cuda.cu, exec/kernels_cuda.cu) and its CPU-side half
 * (exec/launch.h), compiled in every build.
 *
 * Suite `cuda` runs everywhere, GPU or not: launch configurations (grid and block sizes), the
 * row-major GEMM mapped onto column-major cuBLAS (checked by running the mapped call through a
 * plain column-major GEMM against OpenBLAS's row-major one), argument checks, local-rank parsing,
 * GPU selection (no GPU, too few GPUs), `--device` parsing and the "built without CUDA" /
 * "no CUDA GPU found" error paths, and `tessera run --device` and `tessera calibrate --device` on
 * the command line.
 *
 * Suite `cuda_gpu` diffs every CUDA kernel and the cuBLAS GEMMs against the CPU reference
 * (exec/kernels.h, or a reference here for GELU and LayerNorm), and every entry of the CUDA kernel
 * table against the CPU table (exec/kernel_table.h), printing the first mismatches and the
 * largest difference (llm.c's test_gpt2.cu habit); then trains tiny models with `tessera run
 * --device cuda` and compares each step's loss with `--device cpu`, and calibrates the GPUs
 * (`tessera calibrate --device cuda --quick`, the profile loads back). It needs a CUDA build (make
 * CUDA=1) and a GPU: without either, each test is reported SKIPPED (cr_skip_test), never passed.
 * Select with --filter 'cuda*' to see both. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bf16.h"
#include "exec/backend.h"
#include "exec/bf16_ref.h"
#include "exec/comm_mpi.h"
#include "exec/kernel_table.h"
#include "exec/kernels.h"
#include "exec/launch.h"
#include "models/system.h"
#include "tests/helpers.h"
#ifdef TS_CUDA
#include <cuda_runtime.h>

#include "exec/backend_cuda.h"
#include "exec/kernels_cuda.h"
#include "exec/runtime.h"
#endif

/* ---- helpers ----------------------------------------------------------------------------------- */


/* C (m x n) = op(A) op(B) as cuBLAS computes it: column-major, element (i, j) at i + j*ld. */
static void gemm_colmajor(int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda,
                          const float *B, int ldb, float beta, float *C, int ldc) {
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0;
            for (int p = 0; p < k; p++) {
                float a = ta ? A[p + (size_t)i * lda] : A[i + (size_t)p * lda];
                float b = tb ? B[j + (size_t)p * ldb] : B[p + (size_t)j * ldb];
                s += (double)a * b;
            }
            float *c = &C[i + (size_t)j * ldc];
            *c = (float)(alpha * s + beta * *c);
        }
}

/* ---- launch configurations --------------------------------------------------------------------- */

Test(cuda, launch_1d_covers_every_item) {
    static const size_t ns[] = {1, 255, 256, 257, 1000, 65536, 1u << 20};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        ts_launch l;
        cr_assert_eq(ts_launch_1d(ns[i], 256, TS_LAUNCH_MAX_GRID, &l), TS_OK, "%s", ts_error_message());
        cr_expect_eq(l.block, 256u);
        cr_expect_eq(l.grid, (unsigned)((ns[i] + 255) / 256), "n=%zu: grid %u", ns[i], l.grid);
        cr_expect((size_t)l.grid * l.block >= ns[i] && (size_t)(l.grid - 1) * l.block < ns[i], "n=%zu", ns[i]);
    }
}

Test(cuda, launch_1d_empty_and_capped) {
    ts_launch l;
    cr_assert_eq(ts_launch_1d(0, 128, 100, &l), TS_OK);
    cr_expect_eq(l.grid, 0u, "an empty launch has no blocks (the caller skips it)");
    /* Past max_grid the grid-stride loop covers the rest. */
    cr_assert_eq(ts_launch_1d((size_t)1 << 40, 1024, 65535u, &l), TS_OK);
    cr_expect_eq(l.grid, 65535u);
    cr_assert_eq(ts_launch_1d(100000, 32, 3, &l), TS_OK);
    cr_expect_eq(l.grid, 3u);
}

Test(cuda, launch_1d_refuses_bad_blocks) {
    static const int bad[] = {0, 16, 33, 1056, 2048, -32};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ts_launch l;
        ts_error_clear();
        cr_expect_eq(ts_launch_1d(10, bad[i], 100, &l), TS_ERR_INPUT, "block %d accepted", bad[i]);
        cr_expect(strstr(ts_error_message(), "multiple of 32") != NULL, "%s", ts_error_message());
    }
    ts_launch l;
    ts_error_clear();
    cr_expect_eq(ts_launch_1d(10, 64, 0, &l), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "max_grid 0") != NULL, "%s", ts_error_message());
}

Test(cuda, launch_rows_power_of_two_blocks) {
    static const struct { int cols, max_block; unsigned block; } cases[] = {
        {0, 1024, 32}, {1, 1024, 32}, {32, 1024, 32}, {33, 1024, 64}, {100, 1024, 128},
        {1024, 1024, 1024}, {4096, 1024, 1024}, {8192, 256, 256}, {3, 32, 32},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ts_launch l;
        cr_assert_eq(ts_launch_rows(7, cases[i].cols, cases[i].max_block, &l), TS_OK, "%s", ts_error_message());
        cr_expect_eq(l.block, cases[i].block, "cols %d max %d: block %u", cases[i].cols, cases[i].max_block, l.block);
        cr_expect_eq(l.grid, cases[i].cols ? 7u : 0u, "one block per row");
        cr_expect_eq(ts_launch_smem(&l, sizeof(double)), (size_t)l.block * 8);
    }
    ts_launch l;
    cr_assert_eq(ts_launch_rows(0, 10, 1024, &l), TS_OK);
    cr_expect_eq(l.grid, 0u);
}

Test(cuda, launch_rows_refuses_bad_arguments) {
    ts_launch l;
    ts_error_clear();
    cr_expect_eq(ts_launch_rows(4, 10, 48, &l), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "max_block 48") != NULL, "%s", ts_error_message());
    ts_error_clear();
    cr_expect_eq(ts_launch_rows(4, 10, 2048, &l), TS_ERR_INPUT);
    ts_error_clear();
    cr_expect_eq(ts_launch_rows(-1, 10, 256, &l), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "-1 rows") != NULL, "%s", ts_error_message());
}

/* ---- row-major GEMM on column-major cuBLAS --------------------------------------------------- */

/* Every transpose combination with padded leading dimensions: the mapped column-major call, run
 * by a plain loop, gives OpenBLAS's row-major answer. */
Test(cuda, gemm_operand_swap_matches_row_major) {
    const int M = 5, N = 7, K = 3, pad = 2;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
            int a_rows = ta ? K : M, b_rows = tb ? N : K;
            float *A = test_random_floats((size_t)a_rows * lda, 1 + 2 * ta + tb);
            float *B = test_random_floats((size_t)b_rows * ldb, 11 + 2 * ta + tb);
            float *C0 = test_random_floats((size_t)M * ldc, 21), *C1 = test_random_floats((size_t)M * ldc, 21);
            ts_sgemm(ta, tb, M, N, K, 1.5f, A, lda, B, ldb, 0.5f, C0, ldc);
            ts_gemm_cm cm;
            cr_assert_eq(ts_gemm_colmajor(ta, tb, M, N, K, lda, ldb, ldc, &cm), TS_OK, "%s", ts_error_message());
            cr_expect_eq(cm.m, N);
            cr_expect_eq(cm.n, M);
            cr_expect_eq(cm.k, K);
            gemm_colmajor(cm.trans_first, cm.trans_second, cm.m, cm.n, cm.k, 1.5f, B, cm.ld_first, A, cm.ld_second,
                          0.5f, C1, cm.ld_c);
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++)
                    cr_expect(fabsf(C0[i * ldc + j] - C1[i * ldc + j]) < 1e-5f, "ta=%d tb=%d C[%d][%d]: %g vs %g", ta,
                              tb, i, j, C0[i * ldc + j], C1[i * ldc + j]);
            /* The padding between rows is untouched. */
            float *C2 = test_random_floats((size_t)M * ldc, 21);
            for (int i = 0; i < M; i++)
                for (int j = N; j < ldc; j++) cr_expect_eq(C1[i * ldc + j], C2[i * ldc + j]);
            free(A);
            free(B);
            free(C0);
            free(C1);
            free(C2);
        }
}

Test(cuda, gemm_argument_checks_name_the_argument) {
    ts_gemm_cm cm;
    ts_error_clear();
    cr_expect_eq(ts_gemm_colmajor(0, 0, 4, 5, 6, 5, 5, 5, &cm), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "lda=5, expected at least 6") != NULL, "%s", ts_error_message());
    ts_error_clear();
    cr_expect_eq(ts_gemm_colmajor(1, 0, 4, 5, 6, 3, 5, 5, &cm), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "lda=3, expected at least 4") != NULL, "%s", ts_error_message());
    ts_error_clear();
    cr_expect_eq(ts_gemm_colmajor(0, 1, 4, 5, 6, 6, 5, 5, &cm), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "ldb=5, expected at least 6") != NULL, "%s", ts_error_message());
    ts_error_clear();
    cr_expect_eq(ts_gemm_colmajor(0, 0, 4, 5, 6, 6, 5, 4, &cm), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "ldc=4, expected at least 5") != NULL, "%s", ts_error_message());
    ts_error_clear();
    cr_expect_eq(ts_gemm_colmajor(0, 0, -1, 5, 6, 6, 5, 5, &cm), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "M=-1") != NULL, "%s", ts_error_message());
    /* Empty products are legal (leading dimensions of at least 1). */
    cr_expect_eq(ts_gemm_colmajor(0, 0, 0, 0, 0, 1, 1, 1, &cm), TS_OK, "%s", ts_error_message());
}

/* ---- devices ------------------------------------------------------------------------------------- */

Test(cuda, device_parse) {
    ts_device d = TS_DEVICE_CUDA;
    cr_expect_eq(ts_device_parse("cpu", &d), TS_OK);
    cr_expect_eq(d, TS_DEVICE_CPU);
    cr_expect_eq(ts_device_parse("cuda", &d), TS_OK);
    cr_expect_eq(d, TS_DEVICE_CUDA);
    ts_error_clear();
    cr_expect_eq(ts_device_parse("gpu", &d), TS_ERR_INPUT);
    cr_expect_str_eq(ts_error_message(), "--device: expected cpu or cuda, got \"gpu\"");
    ts_error_clear();
    cr_expect_eq(ts_device_parse(NULL, &d), TS_ERR_INPUT);
}

/* Why --device cuda is refused here (not built, or built but no GPU); NULL where it runs (a CUDA
 * build on a machine with a GPU). */
static const char *device_cuda_refusal(void) {
#ifdef TS_CUDA
    int n = 0;
    char why[256];
    cr_assert_eq(ts_cuda_device_count(&n, why, sizeof why), TS_OK);
    return n == 0 ? "--device cuda: no CUDA GPU found (" : NULL;
#else
    return "--device cuda: built without CUDA (make CUDA=1)";
#endif
}

Test(cuda, device_runnable_says_what_is_missing) {
    cr_expect_eq(ts_device_runnable(TS_DEVICE_CPU), TS_OK);
    const char *refusal = device_cuda_refusal();
    ts_error_clear();
    if (refusal) {
        cr_expect_eq(ts_device_runnable(TS_DEVICE_CUDA), TS_ERR_INPUT);
        cr_expect(strstr(ts_error_message(), refusal) != NULL, "%s", ts_error_message());
    } else {
        cr_expect_eq(ts_device_runnable(TS_DEVICE_CUDA), TS_OK, "a GPU is here: %s", ts_error_message());
    }
#ifdef TS_CUDA
    cr_expect_eq(ts_cuda_built(), 1);
#else
    cr_expect_eq(ts_cuda_built(), 0);
#endif
}

Test(cuda, local_rank_parse) {
    int r = -1;
    cr_expect_eq(ts_local_rank_parse("V", "0", &r), TS_OK);
    cr_expect_eq(r, 0);
    cr_expect_eq(ts_local_rank_parse("V", "7", &r), TS_OK);
    cr_expect_eq(r, 7);
    static const char *const bad[] = {"", "x", "-1", "3x", " ", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ts_error_clear();
        cr_expect_eq(ts_local_rank_parse("OMPI_COMM_WORLD_LOCAL_RANK", bad[i], &r), TS_ERR_INPUT, "\"%s\"", bad[i]);
        cr_expect(strstr(ts_error_message(), "OMPI_COMM_WORLD_LOCAL_RANK: expected a local rank") != NULL, "%s",
                  ts_error_message());
    }
}

/* Criterion runs each test in its own process, so the environment can change here. */
Test(cuda, local_rank_from_the_launcher) {
    int r = -1;
    unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
    unsetenv("MPI_LOCALRANKID");
    unsetenv("SLURM_LOCALID");
    cr_expect_eq(ts_local_rank(&r), TS_OK);
    cr_expect_eq(r, 0, "no launcher: local rank 0");
    setenv("SLURM_LOCALID", "5", 1);
    cr_expect_eq(ts_local_rank(&r), TS_OK);
    cr_expect_eq(r, 5);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "2", 1); /* Open MPI's comes first */
    cr_expect_eq(ts_local_rank(&r), TS_OK);
    cr_expect_eq(r, 2);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "two", 1);
    ts_error_clear();
    cr_expect_eq(ts_local_rank(&r), TS_ERR_INPUT);
    cr_expect_str_eq(ts_error_message(), "OMPI_COMM_WORLD_LOCAL_RANK: expected a local rank (an integer >= 0), got \"two\"");
}

Test(cuda, pick_device_one_rank_per_gpu) {
    int d = -1;
    cr_expect_eq(ts_cuda_pick_device(0, 1, &d), TS_OK);
    cr_expect_eq(d, 0);
    cr_expect_eq(ts_cuda_pick_device(3, 8, &d), TS_OK);
    cr_expect_eq(d, 3);
    ts_error_clear();
    cr_expect_eq(ts_cuda_pick_device(0, 0, &d), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "no CUDA GPU found") != NULL, "%s", ts_error_message());
    cr_expect_eq(ts_exit_code(TS_ERR_INPUT), 2);
    ts_error_clear();
    cr_expect_eq(ts_cuda_pick_device(2, 2, &d), TS_ERR_INPUT);
    cr_expect_str_eq(ts_error_message(), "local rank 2 needs GPU 2 but this node has 2 GPU(s): start at most 2 "
                                         "rank(s) per node (one rank per GPU)");
    ts_error_clear();
    cr_expect_eq(ts_cuda_pick_device(-1, 2, &d), TS_ERR_INPUT);
}

/* Without CUDA the backend is a stub that says so; with CUDA but no GPU, it stops at the GPU
 * count before touching MPI or NCCL. */
Test(cuda, backend_cuda_error_paths) {
    ts_comm world;
    memset(&world, 0, sizeof world);
    world.mpi = MPI_COMM_NULL;
    world.size = 1;
#ifdef TS_CUDA
    int n = 0;
    char why[256];
    cr_assert_eq(ts_cuda_device_count(&n, why, sizeof why), TS_OK);
    ts_error_clear();
    cr_expect_null(ts_backend_cuda(NULL, NULL, 0));
    cr_expect(strstr(ts_error_message(), "needs the world communicator") != NULL, "%s", ts_error_message());
    if (n > 0) cr_skip_test("%d GPU(s) present: the no-GPU error path cannot be reached here", n);
    unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
    ts_error_clear();
    cr_expect_null(ts_backend_cuda(&world, NULL, 0));
    cr_expect_eq(ts_error_status(), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "no CUDA GPU found") != NULL, "%s", ts_error_message());
    cr_expect(world.device == NULL, "no NCCL communicator was attached");
#else
    ts_error_clear();
    cr_expect_null(ts_backend_cuda(&world, NULL, 0));
    cr_expect_eq(ts_error_status(), TS_ERR_INPUT);
    cr_expect_str_eq(ts_error_message(), "cuda backend: built without CUDA (make CUDA=1)");
    ts_backend_cuda_free(&world, NULL, 0); /* a no-op */
#endif
}

#ifdef TS_CUDA
/* The kernels' and the GEMM's argument checks run on the host, before any launch. */
Test(cuda, kernel_argument_checks) {
    ts_attn_shape s = {4, 4, 4, 3, 8, 32, 24, 24, 32, NULL, NULL, 1};
    ts_error_clear();
    cr_expect_eq(ts_cuda_gemm(TS_DTYPE_FP32, 0, 0, 2, 2, 2, 1, NULL, 2, NULL, 2, 0, NULL, 2), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "not initialised") != NULL, "%s", ts_error_message());
    ts_error_clear();
    cr_expect_eq(ts_cuda_gemm(TS_DTYPE_FP8, 0, 0, 2, 2, 2, 1, NULL, 2, NULL, 2, 0, NULL, 2), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "dtype fp8 not supported") != NULL, "%s", ts_error_message());
    ts_error_clear();
    cr_expect_eq(ts_cuda_rmsnorm_fwd(NULL, NULL, NULL, NULL, -1, 8, 1e-5f), TS_ERR_INPUT);
    cr_expect_str_eq(ts_error_message(), "cuda rmsnorm_fwd: T=-1 C=8, expected both >= 0");
    ts_error_clear();
    cr_expect_eq(ts_cuda_attention_fwd(NULL, NULL, NULL, NULL, NULL, &s), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "H=4 KV=3") != NULL, "%s", ts_error_message());
    s.KV = 2;
    s.ldk = 15;
    ts_error_clear();
    cr_expect_eq(ts_cuda_attention_bwd(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, &s), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "ldk=15") != NULL, "%s", ts_error_message());
    s.D = TS_CUDA_ATTN_MAX_D + 2;
    s.ldq = s.ldo = s.H * s.D;
    s.ldk = s.ldv = s.KV * s.D;
    ts_error_clear();
    cr_expect_eq(ts_cuda_attention_fwd(NULL, NULL, NULL, NULL, NULL, &s), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "head dim D=258 above 256") != NULL, "%s", ts_error_message());
    s.D = 8, s.ldq = s.ldo = s.H * 8, s.ldk = s.ldv = s.KV * 8, s.batch = -1;
    ts_error_clear();
    cr_expect_eq(ts_cuda_attention_bwd(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, &s), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "batch=-1") != NULL, "%s", ts_error_message());
    ts_error_clear();
    cr_expect_eq(ts_cuda_rope_fwd(NULL, 24, NULL, 2, 3, 7, 1e4f), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "D=7") != NULL, "%s", ts_error_message());
    ts_error_clear();
    cr_expect_eq(ts_cuda_adamw(NULL, NULL, NULL, NULL, 10, 1e-3f, 0.9f, 0.95f, 1e-8f, 0, 0), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "step 0") != NULL, "%s", ts_error_message());
    /* Empty work launches nothing and succeeds, GPU or not. */
    cr_expect_eq(ts_cuda_add(NULL, NULL, NULL, 0), TS_OK);
    cr_expect_eq(ts_cuda_rmsnorm_fwd(NULL, NULL, NULL, NULL, 0, 8, 1e-5f), TS_OK);
}

/* Without a GPU, a launch and a copy fail through the check macros: file, line, the call and
 * the CUDA runtime's own error string. */
Test(cuda, check_macros_name_call_and_cuda_error) {
    int n = 0;
    char why[256];
    cr_assert_eq(ts_cuda_device_count(&n, why, sizeof why), TS_OK);
    if (n > 0) cr_skip_test("%d GPU(s) present: launches succeed, the failure path cannot be reached here", n);
    ts_error_clear();
    cr_expect_eq(ts_cuda_add(NULL, NULL, NULL, 100), TS_ERR_EXTERNAL);
    cr_expect(strstr(ts_error_message(), "exec/kernels_cuda.cu:") != NULL, "%s", ts_error_message());
    cr_expect(strstr(ts_error_message(), ": launch of add_kernel<B> failed: ") != NULL, "%s", ts_error_message());
    float x = 0;
    ts_error_clear();
    cr_expect_eq(ts_cuda_to_host(&x, &x, sizeof x), TS_ERR_EXTERNAL);
    cr_expect(strstr(ts_error_message(), "exec/backend_cuda.cu:") != NULL, "%s", ts_error_message());
    cr_expect(strstr(ts_error_message(), "cudaMemcpyAsync(") != NULL, "%s", ts_error_message());
    fprintf(stderr, "check macro message: %s\n", ts_error_message());
}
#endif

Test(cuda, run_device_flag) {
    cli_result r = run_cli("run", "--plan", "no-such-plan.json", "--device", "gpu", NULL);
    cr_expect_eq(r.status, 2, "stderr: %s", r.err);
    cr_expect(strstr(r.err, "--device: expected cpu or cuda, got \"gpu\"") != NULL, "%s", r.err);
    cr_expect(one_line_error(r.err, "run"), "%s", r.err);
    cli_result_free(&r);
    r = run_cli("run", "--plan", "no-such-plan.json", "--device", "cuda", NULL);
    cr_expect_eq(r.status, 2, "stderr: %s", r.err);
    /* Refused for the device, or (a GPU here) accepted and stopped at the missing plan. */
    const char *refusal = device_cuda_refusal();
    cr_expect(strstr(r.err, refusal ? refusal : "no-such-plan.json") != NULL, "%s", r.err);
    cr_expect(one_line_error(r.err, "run"), "%s", r.err);
    cli_result_free(&r);
    r = run_cli("run", "--help", NULL);
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "--device") != NULL, "help lists --device");
    cli_result_free(&r);
}

/* calibrate --device cuda is refused as run's is (before mpirun starts); with a GPU here it is
 * accepted and stops at the output that cannot be written, before measuring. */
Test(cuda, calibrate_device_flag) {
    cli_result r = run_cli("calibrate", "--device", "cuda", "-o", "/nonexistent-dir/profile.json", NULL);
    const char *refusal = device_cuda_refusal();
    cr_expect_neq(r.status, 0, "stderr: %s", r.err);
    if (refusal) cr_expect_eq(r.status, 2, "stderr: %s", r.err);
    cr_expect(strstr(r.err, refusal ? refusal : "/nonexistent-dir/profile.json") != NULL, "%s", r.err);
    cr_expect(one_line_error(r.err, "calibrate"), "%s", r.err);
    cli_result_free(&r);
}

/* ---- GPU: kernels and GEMMs against the CPU reference ------------------------------------------ */

#ifndef TS_CUDA

Test(cuda_gpu, kernels_and_gemm_vs_cpu) {
    cr_skip_test("built without CUDA (make CUDA=1): GPU kernel and GEMM tests not compiled");
}

Test(cuda_gpu, kernel_table_vs_cpu) {
    cr_skip_test("built without CUDA (make CUDA=1): the CUDA kernel table is not compiled");
}

Test(cuda_gpu, flash_attention_vs_cpu) {
    cr_skip_test("built without CUDA (make CUDA=1): the tiled attention kernels are not compiled");
}

Test(cuda_gpu, bf16_fused_ops_one_launch) {
    cr_skip_test("built without CUDA (make CUDA=1): the bf16 CUDA table is not compiled");
}

#else

static void skip_without_gpu(void) {
    int n = 0;
    char why[256];
    cr_assert_eq(ts_cuda_device_count(&n, why, sizeof why), TS_OK);
    if (n == 0) cr_skip_test("no CUDA GPU on this machine (%s)", why[0] ? why : "0 devices");
}

static void *dev_copy(const void *host, size_t bytes) {
    void *d = NULL;
    cr_assert_eq(cudaMalloc(&d, bytes ? bytes : 1), cudaSuccess);
    if (bytes) cr_assert_eq(ts_cuda_to_device(d, host, bytes), TS_OK, "%s", ts_error_message());
    return d;
}

static float *dev_floats(const float *host, size_t n) { return dev_copy(host, n * sizeof *host); }

/* Fails, after printing the first mismatches and the largest difference, when |got - want| >
 * tol (1 + |want|) anywhere. */
static void expect_close(const char *what, const float *dev, const float *want, size_t n, float tol) {
    float *got = malloc((n ? n : 1) * sizeof *got);
    cr_assert(got);
    cr_assert_eq(ts_cuda_to_host(got, dev, n * sizeof *got), TS_OK, "%s", ts_error_message());
    double worst = 0;
    int shown = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        int same_inf = isinf(got[i]) && isinf(want[i]) && (got[i] > 0) == (want[i] > 0);
        if (same_inf) continue;
        if (d > worst || isnan(got[i])) worst = isnan(got[i]) ? INFINITY : d;
        if ((d > tol * (1 + fabs(want[i])) || isnan(got[i])) && shown++ < 5)
            fprintf(stderr, "%s[%zu]: gpu %.8g cpu %.8g\n", what, i, got[i], want[i]);
    }
    fprintf(stderr, "%s: %zu values, max |gpu - cpu| %.3g\n", what, n, worst);
    cr_expect_eq(shown, 0, "%s: %d mismatches beyond %g (max diff %g)", what, shown, tol, worst);
    free(got);
}

Test(cuda_gpu, elementwise_add_gelu_swiglu) {
    skip_without_gpu();
    size_t n = 10007;
    float *a = test_random_floats(n, 1), *b = test_random_floats(n, 2), *g = test_random_floats(n, 3), *want = malloc(n * 4),
          *want2 = malloc(n * 4);
    float *da = dev_floats(a, n), *db = dev_floats(b, n), *dg = dev_floats(g, n), *dout = dev_floats(a, n),
          *dout2 = dev_floats(b, n);
    for (size_t i = 0; i < n; i++) want[i] = a[i] + b[i];
    cr_assert_eq(ts_cuda_add(dout, da, db, n), TS_OK, "%s", ts_error_message());
    expect_close("add", dout, want, n, 1e-6f);
    for (size_t i = 0; i < n; i++) {
        double x = a[i], u = 0.7978845608028654 * (x + 0.044715 * x * x * x), t = tanh(u);
        want[i] = (float)(0.5 * x * (1 + t));
        double du = 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
        want2[i] = b[i] + g[i] * (float)(0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du);
    }
    cr_assert_eq(ts_cuda_gelu_fwd(dout, da, n), TS_OK, "%s", ts_error_message());
    expect_close("gelu_fwd", dout, want, n, 1e-5f);
    cr_assert_eq(ts_cuda_gelu_bwd(db, dg, da, n), TS_OK, "%s", ts_error_message()); /* db += gelu'(a) g */
    expect_close("gelu_bwd", db, want2, n, 1e-5f);
    ts_swiglu_fwd(want, a, g, n);
    cr_assert_eq(ts_cuda_swiglu_fwd(dout, da, dg, n), TS_OK, "%s", ts_error_message());
    expect_close("swiglu_fwd", dout, want, n, 1e-5f);
    ts_swiglu_bwd(want, want2, b, a, g, n);
    float *ddact = dev_floats(b, n);
    cr_assert_eq(ts_cuda_swiglu_bwd(dout, dout2, ddact, da, dg, n), TS_OK, "%s", ts_error_message());
    expect_close("swiglu_bwd dgate", dout, want, n, 1e-5f);
    expect_close("swiglu_bwd dup", dout2, want2, n, 1e-5f);
    cudaFree(da), cudaFree(db), cudaFree(dg), cudaFree(dout), cudaFree(dout2), cudaFree(ddact);
    free(a), free(b), free(g), free(want), free(want2);
}

Test(cuda_gpu, rmsnorm_and_layernorm) {
    skip_without_gpu();
    int T = 37, C = 1500;
    size_t n = (size_t)T * C;
    float *x = test_random_floats(n, 4), *w = test_random_floats((size_t)C, 5), *b = test_random_floats((size_t)C, 6),
          *dout = test_random_floats(n, 7);
    float *out = calloc(n, 4), *rstd = calloc((size_t)T, 4), *dx = calloc(n, 4), *dw = calloc((size_t)C, 4);
    ts_rmsnorm_fwd(out, rstd, x, w, T, C, 1e-5f);
    ts_rmsnorm_bwd(dx, dw, dout, x, w, rstd, T, C);
    float *gx = dev_floats(x, n), *gw = dev_floats(w, (size_t)C), *gb = dev_floats(b, (size_t)C),
          *gdout = dev_floats(dout, n), *gout = dev_floats(out, n), *grstd = dev_floats(rstd, (size_t)T),
          *gmean = dev_floats(rstd, (size_t)T);
    float *zeros = calloc(n, 4), *gdx = dev_floats(zeros, n), *gdw = dev_floats(zeros, (size_t)C),
          *gdb = dev_floats(zeros, (size_t)C);
    cr_assert_eq(ts_cuda_rmsnorm_fwd(gout, grstd, gx, gw, T, C, 1e-5f), TS_OK, "%s", ts_error_message());
    expect_close("rmsnorm_fwd out", gout, out, n, 1e-5f);
    expect_close("rmsnorm_fwd rstd", grstd, rstd, (size_t)T, 1e-5f);
    cr_assert_eq(ts_cuda_rmsnorm_bwd(gdx, gdw, gdout, gx, gw, grstd, T, C), TS_OK, "%s", ts_error_message());
    expect_close("rmsnorm_bwd dx", gdx, dx, n, 1e-4f);
    expect_close("rmsnorm_bwd dw", gdw, dw, (size_t)C, 1e-4f);

    /* LayerNorm against a double-precision reference written here. */
    float *mean = calloc((size_t)T, 4), *db = calloc((size_t)C, 4);
    memset(dx, 0, n * 4);
    memset(dw, 0, (size_t)C * 4);
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * C, *gt = dout + (size_t)t * C;
        double mu = 0, var = 0, sg = 0, sgx = 0;
        for (int c = 0; c < C; c++) mu += xt[c];
        mu /= C;
        for (int c = 0; c < C; c++) var += (xt[c] - mu) * (xt[c] - mu);
        double r = 1.0 / sqrt(var / C + 1e-5);
        mean[t] = (float)mu, rstd[t] = (float)r;
        for (int c = 0; c < C; c++) {
            double xh = (xt[c] - mu) * r, gc = (double)gt[c] * w[c];
            out[(size_t)t * C + c] = (float)(xh * w[c] + b[c]);
            sg += gc, sgx += gc * xh;
        }
        for (int c = 0; c < C; c++) {
            double xh = (xt[c] - mu) * r;
            dx[(size_t)t * C + c] = (float)(r * ((double)gt[c] * w[c] - sg / C - xh * sgx / C));
            dw[c] += (float)(gt[c] * xh);
            db[c] += gt[c];
        }
    }
    cr_assert_eq(cudaMemset(gdx, 0, n * 4), cudaSuccess);
    cr_assert_eq(cudaMemset(gdw, 0, (size_t)C * 4), cudaSuccess);
    cr_assert_eq(ts_cuda_layernorm_fwd(gout, gmean, grstd, gx, gw, gb, T, C, 1e-5f), TS_OK, "%s", ts_error_message());
    expect_close("layernorm_fwd out", gout, out, n, 1e-5f);
    expect_close("layernorm_fwd mean", gmean, mean, (size_t)T, 1e-5f);
    cr_assert_eq(ts_cuda_layernorm_bwd(gdx, gdw, gdb, gdout, gx, gw, gmean, grstd, T, C), TS_OK, "%s",
                 ts_error_message());
    expect_close("layernorm_bwd dx", gdx, dx, n, 1e-4f);
    expect_close("layernorm_bwd dw", gdw, dw, (size_t)C, 1e-4f);
    expect_close("layernorm_bwd db", gdb, db, (size_t)C, 1e-4f);
    cudaFree(gx), cudaFree(gw), cudaFree(gb), cudaFree(gdout), cudaFree(gout), cudaFree(grstd), cudaFree(gmean);
    cudaFree(gdx), cudaFree(gdw), cudaFree(gdb);
    free(x), free(w), free(b), free(dout), free(out), free(rstd), free(dx), free(dw), free(zeros), free(mean), free(db);
}

Test(cuda_gpu, rope_fwd_bwd) {
    skip_without_gpu();
    int T = 19, H = 3, D = 16, ldx = H * D + 5;
    size_t n = (size_t)T * ldx;
    float *x = test_random_floats(n, 8), *want = malloc(n * 4);
    int pos[19];
    for (int t = 0; t < T; t++) pos[t] = 3 * t + 1;
    memcpy(want, x, n * 4);
    ts_rope_fwd(want, ldx, pos, T, H, D, 10000.0f);
    float *gx = dev_floats(x, n);
    int *gpos = dev_copy(pos, sizeof pos);
    cr_assert_eq(ts_cuda_rope_fwd(gx, ldx, gpos, T, H, D, 10000.0f), TS_OK, "%s", ts_error_message());
    expect_close("rope_fwd", gx, want, n, 1e-5f);
    ts_rope_bwd(want, ldx, pos, T, H, D, 10000.0f);
    cr_assert_eq(ts_cuda_rope_bwd(gx, ldx, gpos, T, H, D, 10000.0f), TS_OK, "%s", ts_error_message());
    expect_close("rope_bwd", gx, want, n, 1e-5f);
    ts_error_clear();
    cr_expect_eq(ts_cuda_rope_fwd(gx, ldx, gpos, T, H, 15, 10000.0f), TS_ERR_INPUT, "odd head dim accepted");
    cudaFree(gx), cudaFree(gpos);
    free(x), free(want);
}

/* Grouped-query causal attention over a key chunk that starts before the queries (as a
 * context-parallel rank sees it), forward and backward, on the GPU against the CPU. The backward
 * adds to gradients that already hold values. */
static void attention_vs_cpu(int Tq, int Tk, int H, int KV, int D, int batch) {
    int *qpos = malloc((size_t)batch * Tq * sizeof *qpos), *kpos = malloc((size_t)batch * Tk * sizeof *kpos);
    for (int i = 0; i < batch * Tq; i++) qpos[i] = Tk - Tq + 2 + i % Tq;
    for (int j = 0; j < batch * Tk; j++) kpos[j] = j % Tk;
    size_t nq = (size_t)batch * Tq * H * D, nk = (size_t)batch * Tk * KV * D;
    float *q = test_random_floats(nq, 9), *k = test_random_floats(nk, 10), *v = test_random_floats(nk, 11),
          *dout = test_random_floats(nq, 12);
    float *out = calloc(nq, 4), *lse = calloc((size_t)batch * Tq * H, 4), *scratch = calloc((size_t)Tk, 4);
    float *dq = test_random_floats(nq, 13), *dk = test_random_floats(nk, 14), *dv = test_random_floats(nk, 15);
    float *gdq = dev_floats(dq, nq), *gdk = dev_floats(dk, nk), *gdv = dev_floats(dv, nk);
    ts_attn_shape s = {Tq, Tk, H, KV, D, H * D, KV * D, KV * D, H * D, qpos, kpos, batch};
    ts_attention_fwd(out, lse, q, k, v, &s, scratch);
    ts_attention_bwd(dq, dk, dv, dout, q, k, v, out, lse, &s);
    ts_attn_shape gs = s;
    int *gqpos = dev_copy(qpos, (size_t)batch * Tq * sizeof *qpos);
    int *gkpos = dev_copy(kpos, (size_t)batch * Tk * sizeof *kpos);
    gs.q_pos = gqpos;
    gs.k_pos = gkpos;
    float *gq = dev_floats(q, nq), *gk = dev_floats(k, nk), *gv = dev_floats(v, nk), *gdout = dev_floats(dout, nq);
    float *zero = calloc(nq, 4), *gout = dev_floats(zero, nq), *glse = dev_floats(zero, (size_t)batch * Tq * H);
    cr_assert_eq(ts_cuda_attention_fwd(gout, glse, gq, gk, gv, &gs), TS_OK, "%s", ts_error_message());
    fprintf(stderr, "attention Tq=%d Tk=%d H=%d KV=%d D=%d batch=%d\n", Tq, Tk, H, KV, D, batch);
    expect_close("attention_fwd out", gout, out, nq, 1e-5f);
    expect_close("attention_fwd lse", glse, lse, (size_t)batch * Tq * H, 1e-5f);
    cr_assert_eq(ts_cuda_attention_bwd(gdq, gdk, gdv, gdout, gq, gk, gv, gout, glse, &gs), TS_OK, "%s",
                 ts_error_message());
    expect_close("attention_bwd dq", gdq, dq, nq, 1e-4f);
    expect_close("attention_bwd dk", gdk, dk, nk, 1e-4f);
    expect_close("attention_bwd dv", gdv, dv, nk, 1e-4f);
    ts_attn_shape bad = gs;
    bad.KV = 3;
    ts_error_clear();
    cr_expect_eq(ts_cuda_attention_fwd(gout, glse, gq, gk, gv, &bad), TS_ERR_INPUT);
    cudaFree(gqpos), cudaFree(gkpos), cudaFree(gq), cudaFree(gk), cudaFree(gv);
    cudaFree(gdout), cudaFree(gout), cudaFree(glse), cudaFree(gdq), cudaFree(gdk), cudaFree(gdv);
    free(q), free(k), free(v), free(dout), free(out), free(lse), free(scratch), free(dq), free(dk), free(dv);
    free(zero), free(qpos), free(kpos);
}

/* Head dims below a warp, across two lanes' shares with a partial one, and a full 128; one and
 * two query heads per kv head; one sequence and batches of 3 (against the CPU's, which is its
 * sequences one by one: exec_kernels/attention_batch_is_its_sequences). */
Test(cuda_gpu, attention_fwd_bwd) {
    skip_without_gpu();
    attention_vs_cpu(9, 13, 4, 2, 8, 1);
    attention_vs_cpu(9, 13, 4, 2, 8, 3);
    attention_vs_cpu(40, 40, 2, 2, 40, 1);
    attention_vs_cpu(70, 96, 4, 2, 64, 1);
    attention_vs_cpu(64, 64, 4, 2, 64, 3);
    attention_vs_cpu(33, 33, 2, 1, 128, 1);
}

/* Ring attention's merge: the partial attention over a second key block (keys at later positions,
 * so some queries see none of them) merged into the first, against the CPU kernel. */
Test(cuda_gpu, attention_merge) {
    skip_without_gpu();
    int Tq = 9, Tk = 13, H = 4, KV = 2, D = 8;
    int qpos[9], kpos[13], kpos2[13];
    for (int i = 0; i < Tq; i++) qpos[i] = 4 + i;
    for (int j = 0; j < Tk; j++) kpos[j] = j, kpos2[j] = 8 + j;
    size_t nq = (size_t)Tq * H * D, nk = (size_t)Tk * KV * D, nl = (size_t)Tq * H;
    float *q = test_random_floats(nq, 13), *k = test_random_floats(nk, 14), *v = test_random_floats(nk, 15);
    float *out = calloc(nq, 4), *lse = calloc(nl, 4), *out2 = calloc(nq, 4), *lse2 = calloc(nl, 4),
          *scratch = calloc((size_t)Tk, 4);
    ts_attn_shape s = {Tq, Tk, H, KV, D, H * D, KV * D, KV * D, H * D, qpos, kpos, 1};
    ts_attention_fwd(out, lse, q, k, v, &s, scratch);
    s.k_pos = kpos2;
    ts_attention_fwd(out2, lse2, q, k, v, &s, scratch);
    float *gout = dev_floats(out, nq), *glse = dev_floats(lse, nl), *gout2 = dev_floats(out2, nq),
          *glse2 = dev_floats(lse2, nl);
    ts_attention_merge(out, lse, out2, lse2, Tq, H, D, H * D);
    cr_assert_eq(ts_cuda_attention_merge(gout, glse, gout2, glse2, Tq, H, D, H * D), TS_OK, "%s", ts_error_message());
    expect_close("attention_merge out", gout, out, nq, 1e-5f);
    expect_close("attention_merge lse", glse, lse, nl, 1e-5f);
    ts_error_clear();
    cr_expect_eq(ts_cuda_attention_merge(gout, glse, gout2, glse2, Tq, H, D, H * D - 1), TS_ERR_INPUT);
    cudaFree(gout), cudaFree(glse), cudaFree(gout2), cudaFree(glse2);
    free(q), free(k), free(v), free(out), free(lse), free(out2), free(lse2), free(scratch);
}

Test(cuda_gpu, adamw_steps) {
    skip_without_gpu();
    size_t n = 4099;
    float *p = test_random_floats(n, 13), *m = calloc(n, 4), *v = calloc(n, 4);
    float *gp = dev_floats(p, n), *gm = dev_floats(m, n), *gv = dev_floats(v, n);
    for (int step = 1; step <= 3; step++) {
        float *g = test_random_floats(n, 100 + (uint64_t)step), *gg = dev_floats(g, n);
        ts_adamw(p, m, v, g, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step);
        cr_assert_eq(ts_cuda_adamw(gp, gm, gv, gg, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step), TS_OK, "%s",
                     ts_error_message());
        cudaFree(gg);
        free(g);
    }
    expect_close("adamw param", gp, p, n, 1e-5f);
    expect_close("adamw m", gm, m, n, 1e-6f);
    expect_close("adamw v", gv, v, n, 1e-6f);
    ts_error_clear();
    cr_expect_eq(ts_cuda_adamw(gp, gm, gv, gp, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 0), TS_ERR_INPUT);
    cudaFree(gp), cudaFree(gm), cudaFree(gv);
    free(p), free(m), free(v);
}

/* The CUDA backend on this process alone (skips without a GPU); one_rank_backend_free ends it. */
static const ts_backend *one_rank_backend(ts_comm **world) {
    skip_without_gpu();
    int rank = 0, size = 0;
    cr_assert_eq(ts_mpi_init(&rank, &size), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_comm_blocks(1, world), TS_OK, "%s", ts_error_message());
    const ts_backend *be = ts_backend_cuda(*world, NULL, 0);
    cr_assert_not_null(be, "%s", ts_error_message());
    return be;
}

static void one_rank_backend_free(ts_comm **world) {
    ts_backend_cuda_free(*world, NULL, 0);
    ts_comm_free(world);
    ts_runtime_finalize();
}

/* The backend itself on one rank: cuBLAS fp32 and bf16 GEMMs, a one-member NCCL all-reduce and
 * in-place reduce-scatter, event timers, and the refusal of host buffers. */
Test(cuda_gpu, backend_gemm_collectives_timer) {
    ts_comm *world = NULL;
    const ts_backend *be = one_rank_backend(&world);
    cr_expect_str_eq(be->name, "cuda");

    const int M = 33, N = 65, K = 47;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int lda = ta ? M : K, ldb = tb ? K : N;
            float *A = test_random_floats((size_t)M * K, 30 + ta), *B = test_random_floats((size_t)K * N, 40 + tb),
                  *C = test_random_floats((size_t)M * N, 50);
            float *gA = dev_floats(A, (size_t)M * K), *gB = dev_floats(B, (size_t)K * N), *gC = dev_floats(C, (size_t)M * N);
            ts_sgemm(ta, tb, M, N, K, 0.75f, A, lda, B, ldb, 0.25f, C, N);
            cr_assert_eq(be->sgemm(ta, tb, M, N, K, 0.75f, gA, lda, gB, ldb, 0.25f, gC, N), TS_OK, "%s",
                         ts_error_message());
            char what[32];
            snprintf(what, sizeof what, "sgemm ta=%d tb=%d", ta, tb);
            expect_close(what, gC, C, (size_t)M * N, 1e-5f);
            cudaFree(gA), cudaFree(gB), cudaFree(gC);
            free(A), free(B), free(C);
        }

    /* bf16: inputs rounded to bf16 on the host, the product in fp32 compared with tolerance for
     * the bf16 output. */
    {
        size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
        float *A = test_random_floats(na, 60), *B = test_random_floats(nb, 61), *C = calloc(nc, 4);
        uint16_t *hA = malloc(na * 2), *hB = malloc(nb * 2), *hC = calloc(nc, 2);
        for (size_t i = 0; i < na + nb; i++) { /* A, then B: each rounded, kept as the float it rounds to */
            float *x = i < na ? &A[i] : &B[i - na];
            uint16_t *h = i < na ? &hA[i] : &hB[i - na];
            *h = ts_bf16_bits(*x);
            uint32_t u = (uint32_t)*h << 16;
            memcpy(x, &u, 4);
        }
        ts_sgemm(0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
        void *gA = dev_copy(hA, na * 2), *gB = dev_copy(hB, nb * 2), *gC = dev_copy(hC, nc * 2);
        cr_assert_eq(ts_cuda_gemm(TS_DTYPE_BF16, 0, 1, M, N, K, 1.0f, gA, K, gB, K, 0.0f, gC, N), TS_OK, "%s",
                     ts_error_message());
        cr_assert_eq(ts_cuda_to_host(hC, gC, nc * 2), TS_OK);
        int bad = 0;
        for (size_t i = 0; i < nc; i++) {
            uint32_t u = (uint32_t)hC[i] << 16;
            float got;
            memcpy(&got, &u, 4);
            if (fabsf(got - C[i]) > 1e-2f * (1 + fabsf(C[i])) && bad++ < 5)
                fprintf(stderr, "bf16 gemm [%zu]: gpu %g cpu %g\n", i, got, C[i]);
        }
        cr_expect_eq(bad, 0, "bf16 gemm: %d mismatches", bad);
        cudaFree(gA), cudaFree(gB), cudaFree(gC);
        free(A), free(B), free(C), free(hA), free(hB), free(hC);
    }

    float host[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    float *g = NULL;
    cr_assert_eq(be->alloc(sizeof host, (void **)&g), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_cuda_to_device(g, host, sizeof host), TS_OK);
    cr_assert_eq(be->all_reduce(world, g, g, 8), TS_OK, "%s", ts_error_message());
    expect_close("all_reduce (1 rank)", g, host, 8, 0);
    cr_assert_eq(be->reduce_scatter(world, g, g, 8), TS_OK, "%s", ts_error_message());
    expect_close("reduce_scatter in place (1 rank)", g, host, 8, 0);
    ts_error_clear();
    cr_expect_eq(be->all_reduce(world, host, host, 8), TS_ERR_INPUT, "a host buffer was accepted");
    cr_expect(strstr(ts_error_message(), "host memory") != NULL, "%s", ts_error_message());

    ts_cuda_timer *t = NULL;
    double sec = -1;
    cr_assert_eq(ts_cuda_timer_create(&t), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_cuda_timer_start(t), TS_OK);
    cr_assert_eq(ts_cuda_add(g, g, g, 8), TS_OK);
    cr_assert_eq(ts_cuda_timer_stop(t, &sec), TS_OK, "%s", ts_error_message());
    cr_expect(sec >= 0 && sec < 10, "timer %g s", sec);
    ts_cuda_timer_free(t);
    be->free(g);
    one_rank_backend_free(&world);
}


/* The op clock and the DP stream on one rank: a compute op, a DP op that waits for it (an
 * all-reduce, a scratch buffer allocated and released on the DP stream), and a compute op that
 * waits for the DP op; the values follow that order and the spans do too. */
Test(cuda_gpu, op_clock_dp_stream) {
    ts_comm *world = NULL;
    const ts_backend *be = one_rank_backend(&world);
    enum { N = 1 << 20 };
    float *host = test_random_floats(N, 70), *want = malloc(N * sizeof *want), *g = NULL, *tmp = NULL;
    cr_assert(want);
    for (size_t i = 0; i < N; i++) want[i] = 4 * host[i];
    cr_assert_eq(be->alloc(N * sizeof *g, (void **)&g), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_cuda_to_device(g, host, N * sizeof *g), TS_OK);
    ts_op_clock *c = NULL;
    cr_assert_eq(be->clock_init(3, &c), TS_OK, "%s", ts_error_message());
    cr_assert_eq(be->step_begin(c), TS_OK, "%s", ts_error_message());
    cr_assert_eq(be->op_begin(c, 0, 0, -1), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_cuda_add(g, g, g, N), TS_OK);
    cr_assert_eq(be->op_end(c, 0), TS_OK, "%s", ts_error_message());
    cr_assert_eq(be->op_begin(c, 1, 1, 0), TS_OK, "%s", ts_error_message());
    cr_assert_eq(be->all_reduce(world, g, g, N), TS_OK, "%s", ts_error_message());
    cr_assert_eq(be->alloc(N * sizeof *tmp, (void **)&tmp), TS_OK, "%s", ts_error_message());
    cr_assert_eq(be->kernels->copy(tmp, g, N * sizeof *tmp), TS_OK, "%s", ts_error_message());
    be->free(tmp);
    cr_assert_eq(be->op_end(c, 1), TS_OK, "%s", ts_error_message());
    cr_assert_eq(be->op_begin(c, 2, 0, 1), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_cuda_add(g, g, g, N), TS_OK);
    cr_assert_eq(be->op_end(c, 2), TS_OK, "%s", ts_error_message());
    ts_error_clear();
    cr_expect_eq(be->op_begin(c, 3, 0, -1), TS_ERR_INPUT);
    ts_op_span sp[3];
    cr_assert_eq(be->spans(c, sp), TS_OK, "%s", ts_error_message());
    expect_close("compute, DP all-reduce (1 rank), compute", g, want, N, 0);
    for (int i = 0; i < 3; i++) cr_expect(sp[i].start_s >= 0 && sp[i].end_s >= sp[i].start_s, "op %d span", i);
    cr_expect_geq(sp[1].start_s, sp[0].end_s, "the DP op started before the compute op it waits for ended");
    cr_expect_geq(sp[2].start_s, sp[1].end_s, "the compute op started before the DP op it waits for ended");
    be->clock_free(c);
    be->free(g);
    free(host);
    free(want);
    one_rank_backend_free(&world);
}

/* ---- GPU: the kernel table against the CPU one ------------------------------------------------- */

static void expect_ints(const char *what, const int *dev, const int *want, size_t n) {
    int *got = malloc((n ? n : 1) * sizeof *got);
    cr_assert(got);
    cr_assert_eq(ts_cuda_to_host(got, dev, n * sizeof *got), TS_OK, "%s", ts_error_message());
    int shown = 0;
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i] && shown++ < 5) fprintf(stderr, "%s[%zu]: gpu %d cpu %d\n", what, i, got[i], want[i]);
    cr_expect_eq(shown, 0, "%s: %d mismatches", what, shown);
    free(got);
}

/* Every entry the trainer calls, on the same inputs through both tables: the kernels new with
 * the table (embedding, cross-entropy, routing, dispatch, combine), the linear layers on cuBLAS,
 * and the memory ops. Gradients start from nonzero values, so "adds into" is checked too. Each
 * output is diffed with the CPU's (expect_close: first mismatches, the largest difference). */
Test(cuda_gpu, kernel_table_vs_cpu) {
    ts_comm *world = NULL;
    const ts_backend *be = one_rank_backend(&world); /* the cuBLAS handle for the linear layers */
    const ts_kernels *cpu = ts_kernels_cpu(), *gpu = be->kernels;
    cr_assert_eq(gpu, ts_kernels_cuda());
    enum { T = 37, C = 40, IC = 40, OC = 56, VS = 300, V0 = 100, E = 8, K = 2 };
    size_t TC = (size_t)T * C, TK = (size_t)T * K;
    int tokens[T];
    for (int t = 0; t < T; t++) tokens[t] = V0 - 20 + (t * 53) % (VS + 40); /* repeats, outside the slice */
    int *g_tokens = dev_copy(tokens, sizeof tokens);

    /* linear */
    float *in = test_random_floats((size_t)T * IC, 70), *w = test_random_floats((size_t)OC * IC, 71),
          *dout = test_random_floats((size_t)T * OC, 72), *out = calloc((size_t)T * OC, 4);
    float *g_in = dev_floats(in, (size_t)T * IC), *g_w = dev_floats(w, (size_t)OC * IC),
          *g_dout = dev_floats(dout, (size_t)T * OC), *g_out = dev_floats(out, (size_t)T * OC);
    cr_assert_eq(cpu->linear_fwd(out, in, w, T, IC, OC), TS_OK);
    cr_assert_eq(gpu->linear_fwd(g_out, g_in, g_w, T, IC, OC), TS_OK, "%s", ts_error_message());
    expect_close("linear_fwd", g_out, out, (size_t)T * OC, 1e-5f);
    float *din = test_random_floats((size_t)T * IC, 73), *g_din = dev_floats(din, (size_t)T * IC);
    cr_assert_eq(cpu->linear_bwd_input(din, dout, w, T, IC, OC), TS_OK);
    cr_assert_eq(gpu->linear_bwd_input(g_din, g_dout, g_w, T, IC, OC), TS_OK, "%s", ts_error_message());
    expect_close("linear_bwd_input", g_din, din, (size_t)T * IC, 1e-5f);
    float *dw = test_random_floats((size_t)OC * IC, 74), *g_dw = dev_floats(dw, (size_t)OC * IC);
    cr_assert_eq(cpu->linear_bwd_weight(dw, dout, in, T, IC, OC), TS_OK);
    cr_assert_eq(gpu->linear_bwd_weight(g_dw, g_dout, g_in, T, IC, OC), TS_OK, "%s", ts_error_message());
    expect_close("linear_bwd_weight", g_dw, dw, (size_t)OC * IC, 1e-5f);

    /* embedding over the slice [V0, V0 + VS) */
    float *wte = test_random_floats((size_t)VS * C, 75), *emb = calloc(TC, 4), *g_emb = dev_floats(emb, TC);
    float *g_wte = dev_floats(wte, (size_t)VS * C), *gx = test_random_floats(TC, 76), *g_gx = dev_floats(gx, TC);
    cr_assert_eq(cpu->embedding_fwd(emb, tokens, wte, V0, VS, T, C), TS_OK);
    cr_assert_eq(gpu->embedding_fwd(g_emb, g_tokens, g_wte, V0, VS, T, C), TS_OK, "%s", ts_error_message());
    expect_close("embedding_fwd", g_emb, emb, TC, 0);
    cr_assert_eq(cpu->embedding_bwd(wte, gx, tokens, V0, VS, T, C), TS_OK);
    cr_assert_eq(gpu->embedding_bwd(g_wte, g_gx, g_tokens, V0, VS, T, C), TS_OK, "%s", ts_error_message());
    expect_close("embedding_bwd", g_wte, wte, (size_t)VS * C, 1e-6f);

    /* cross-entropy: each side on its own results, step after step */
    float *z = test_random_floats((size_t)T * VS, 77), mx[T], se[T], tg[T], loss[T];
    for (size_t i = 0; i < (size_t)T * VS; i++) z[i] *= 4;
    float *g_z = dev_floats(z, (size_t)T * VS), *g_mx = dev_floats(mx, T), *g_se = dev_floats(se, T),
          *g_tg = dev_floats(tg, T), *g_loss = dev_floats(loss, T);
    cr_assert_eq(cpu->ce_max(mx, z, T, VS), TS_OK);
    cr_assert_eq(gpu->ce_max(g_mx, g_z, T, VS), TS_OK, "%s", ts_error_message());
    expect_close("ce_max", g_mx, mx, T, 0);
    cr_assert_eq(cpu->ce_sums(se, tg, z, mx, tokens, V0, T, VS), TS_OK);
    cr_assert_eq(gpu->ce_sums(g_se, g_tg, g_z, g_mx, g_tokens, V0, T, VS), TS_OK, "%s", ts_error_message());
    expect_close("ce_sums sumexp", g_se, se, T, 1e-6f);
    expect_close("ce_sums target_logit", g_tg, tg, T, 0);
    cr_assert_eq(cpu->ce_loss(loss, mx, se, tg, T), TS_OK);
    cr_assert_eq(gpu->ce_loss(g_loss, g_mx, g_se, g_tg, T), TS_OK, "%s", ts_error_message());
    expect_close("ce_loss", g_loss, loss, T, 1e-6f);
    cr_assert_eq(cpu->ce_bwd(z, z, mx, se, tokens, V0, T, VS, 1.0f / T), TS_OK);
    cr_assert_eq(gpu->ce_bwd(g_z, g_z, g_mx, g_se, g_tokens, V0, T, VS, 1.0f / T), TS_OK, "%s", ts_error_message());
    expect_close("ce_bwd (in place)", g_z, z, (size_t)T * VS, 1e-6f);

    /* routing: the GPU's choices must be the CPU's (ties are measure-zero with random logits) */
    float *logits = test_random_floats((size_t)T * E, 78), probs[T * E], weight[T * K];
    int expert[T * K];
    float *g_logits = dev_floats(logits, (size_t)T * E), *g_probs = dev_floats(probs, (size_t)T * E),
          *g_weight = dev_floats(weight, TK);
    int *g_expert = dev_copy(expert, sizeof expert);
    cr_assert_eq(cpu->router_fwd(probs, expert, weight, logits, T, E, K, 0, 0), TS_OK);
    cr_assert_eq(gpu->router_fwd(g_probs, g_expert, g_weight, g_logits, T, E, K, 0, 0), TS_OK, "%s", ts_error_message());
    expect_close("router_fwd probs", g_probs, probs, (size_t)T * E, 1e-6f);
    expect_ints("router_fwd expert", g_expert, expert, TK);
    expect_close("router_fwd weight", g_weight, weight, TK, 1e-6f);
    float *dweight = test_random_floats(TK, 79), *dlogits = test_random_floats((size_t)T * E, 80);
    float *g_dweight = dev_floats(dweight, TK), *g_dlogits = dev_floats(dlogits, (size_t)T * E);
    cr_assert_eq(cpu->router_bwd(dlogits, dweight, probs, expert, T, E, K), TS_OK);
    cr_assert_eq(gpu->router_bwd(g_dlogits, g_dweight, g_probs, g_expert, T, E, K), TS_OK, "%s", ts_error_message());
    expect_close("router_bwd", g_dlogits, dlogits, (size_t)T * E, 1e-5f);

    /* dispatch and combine on the host's plan */
    int offset[E + 1], slot_token[T * K], slot[T * K];
    ts_moe_plan(offset, slot_token, slot, expert, T, E, K);
    int *g_slot_token = dev_copy(slot_token, sizeof slot_token), *g_slot = dev_copy(slot, sizeof slot);
    float *x = test_random_floats(TC, 81), *xe = calloc(TK * C, 4), *g_x = dev_floats(x, TC), *g_xe = dev_floats(xe, TK * C);
    cr_assert_eq(cpu->moe_gather_fwd(xe, x, slot_token, (int)TK, C), TS_OK);
    cr_assert_eq(gpu->moe_gather_fwd(g_xe, g_x, g_slot_token, (int)TK, C), TS_OK, "%s", ts_error_message());
    expect_close("moe_gather_fwd", g_xe, xe, TK * C, 0);
    cr_assert_eq(cpu->moe_gather_bwd(x, xe, slot_token, (int)TK, C), TS_OK);
    cr_assert_eq(gpu->moe_gather_bwd(g_x, g_xe, g_slot_token, (int)TK, C), TS_OK, "%s", ts_error_message());
    expect_close("moe_gather_bwd", g_x, x, TC, 1e-6f);
    float *ye = test_random_floats(TK * C, 82), *comb = calloc(TC, 4), *g_ye = dev_floats(ye, TK * C),
          *g_comb = dev_floats(comb, TC);
    cr_assert_eq(cpu->moe_combine_fwd(comb, ye, weight, slot, T, K, C), TS_OK);
    cr_assert_eq(gpu->moe_combine_fwd(g_comb, g_ye, g_weight, g_slot, T, K, C), TS_OK, "%s", ts_error_message());
    expect_close("moe_combine_fwd", g_comb, comb, TC, 1e-6f);
    float *dye = test_random_floats(TK * C, 83), *g_dye = dev_floats(dye, TK * C);
    cr_assert_eq(cpu->moe_combine_bwd(dye, dweight, gx, ye, weight, slot, T, K, C), TS_OK);
    cr_assert_eq(gpu->moe_combine_bwd(g_dye, g_dweight, g_gx, g_ye, g_weight, g_slot, T, K, C), TS_OK, "%s",
                 ts_error_message());
    expect_close("moe_combine_bwd dye", g_dye, dye, TK * C, 1e-6f);
    expect_close("moe_combine_bwd dweight", g_dweight, dweight, TK, 1e-5f);

    /* memory ops: strided rows, zero, add in place, host round trip */
    float rows[6 * 7], packed[6 * 3];
    for (int i = 0; i < 6 * 7; i++) rows[i] = (float)i;
    for (int r = 0; r < 6; r++)
        for (int c = 0; c < 3; c++) packed[r * 3 + c] = rows[r * 7 + 2 + c];
    float *g_rows = dev_floats(rows, 6 * 7), *g_packed = dev_floats(packed, 6 * 3);
    cr_assert_eq(gpu->zero(g_packed, sizeof packed), TS_OK, "%s", ts_error_message());
    cr_assert_eq(gpu->copy_rows(g_packed, 3, g_rows + 2, 7, 6, 3), TS_OK, "%s", ts_error_message());
    expect_close("copy_rows", g_packed, packed, 6 * 3, 0);
    cr_assert_eq(gpu->add(g_packed, g_packed, g_packed, 6 * 3), TS_OK, "%s", ts_error_message());
    for (int i = 0; i < 6 * 3; i++) packed[i] *= 2;
    expect_close("add (aliased)", g_packed, packed, 6 * 3, 0);
    cr_assert_eq(gpu->copy(g_rows, g_packed, sizeof packed), TS_OK, "%s", ts_error_message());
    cr_assert_eq(gpu->to_device(g_packed, rows, sizeof packed), TS_OK, "%s", ts_error_message());
    expect_close("copy", g_rows, packed, 6 * 3, 0);
    expect_close("to_device", g_packed, rows, 6 * 3, 0);

    void *dev[] = {g_tokens, g_in, g_w, g_dout, g_out, g_din, g_dw, g_emb, g_wte, g_gx, g_z, g_mx, g_se, g_tg,
                   g_loss, g_logits, g_probs, g_weight, g_expert, g_dweight, g_dlogits, g_slot_token, g_slot, g_x,
                   g_xe, g_ye, g_comb, g_dye, g_rows, g_packed};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) cudaFree(dev[i]);
    void *host[] = {in, w, dout, out, din, dw, wte, emb, gx, z, logits, dweight, dlogits, x, xe, ye, comb, dye};
    for (size_t i = 0; i < sizeof host / sizeof *host; i++) free(host[i]);
    one_rank_backend_free(&world);
}

/* The tiled bf16 attention (kernels_cuda_flash.cu) against the CPU kernel run on the same inputs
 * rounded to bf16 (what the tiles hold): what is left is the GPU's rounding of P and dS to bf16
 * (2^-8 relative each) and fp32 summation order, so the bounds are bf16-sized, not fp32's. Keys
 * start before the queries (a CP rank's chunk) and the backward adds into nonzero gradients. */
static void round_bf16_all(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = ts_bf16_round(x[i]);
}

static void flash_vs_cpu(int Tq, int Tk, int H, int KV, int D, int batch) {
    int *qpos = malloc((size_t)batch * Tq * sizeof *qpos), *kpos = malloc((size_t)batch * Tk * sizeof *kpos);
    for (int i = 0; i < batch * Tq; i++) qpos[i] = Tk - Tq + i % Tq;
    for (int j = 0; j < batch * Tk; j++) kpos[j] = j % Tk;
    size_t nq = (size_t)batch * Tq * H * D, nk = (size_t)batch * Tk * KV * D, nl = (size_t)batch * Tq * H;
    float *q = test_random_floats(nq, 19), *k = test_random_floats(nk, 20), *v = test_random_floats(nk, 21),
          *dout = test_random_floats(nq, 22);
    round_bf16_all(q, nq), round_bf16_all(k, nk), round_bf16_all(v, nk), round_bf16_all(dout, nq);
    float *out = calloc(nq, 4), *lse = calloc(nl, 4), *scratch = calloc((size_t)Tk, 4);
    float *dq = test_random_floats(nq, 23), *dk = test_random_floats(nk, 24), *dv = test_random_floats(nk, 25);
    float *gdq = dev_floats(dq, nq), *gdk = dev_floats(dk, nk), *gdv = dev_floats(dv, nk);
    ts_attn_shape s = {Tq, Tk, H, KV, D, H * D, KV * D, KV * D, H * D, qpos, kpos, batch};
    ts_attention_fwd(out, lse, q, k, v, &s, scratch);
    ts_attention_bwd(dq, dk, dv, dout, q, k, v, out, lse, &s);
    ts_attn_shape gs = s;
    int *gqpos = dev_copy(qpos, (size_t)batch * Tq * sizeof *qpos), *gkpos = dev_copy(kpos, (size_t)batch * Tk * sizeof *kpos);
    gs.q_pos = gqpos;
    gs.k_pos = gkpos;
    float *gq = dev_floats(q, nq), *gk = dev_floats(k, nk), *gv = dev_floats(v, nk), *gdout = dev_floats(dout, nq);
    float *zero = calloc(nq, 4), *gout = dev_floats(zero, nq), *glse = dev_floats(zero, nl);
    fprintf(stderr, "flash attention Tq=%d Tk=%d H=%d KV=%d D=%d batch=%d\n", Tq, Tk, H, KV, D, batch);
    cr_assert_eq(ts_cuda_flash_attention_fwd(gout, glse, gq, gk, gv, &gs, 0), TS_OK, "%s", ts_error_message());
    expect_close("flash fwd out", gout, out, nq, 1e-2f);
    expect_close("flash fwd lse", glse, lse, nl, 1e-4f);
    /* The backward from the CPU's out and lse, so only its own rounding is measured. */
    float *gout_cpu = dev_floats(out, nq), *glse_cpu = dev_floats(lse, nl);
    cr_assert_eq(ts_cuda_flash_attention_bwd(gdq, gdk, gdv, gdout, gq, gk, gv, gout_cpu, glse_cpu, &gs, 0), TS_OK, "%s",
                 ts_error_message());
    expect_close("flash bwd dq", gdq, dq, nq, 2e-2f);
    expect_close("flash bwd dk", gdk, dk, nk, 2e-2f);
    expect_close("flash bwd dv", gdv, dv, nk, 2e-2f);
    ts_attn_shape bad = gs;
    bad.D = 264;
    ts_error_clear();
    cr_expect_eq(ts_cuda_flash_attention_fwd(gout, glse, gq, gk, gv, &bad, 0), TS_ERR_INPUT, "head dim 264 accepted");
    void *dev[] = {gqpos, gkpos, gq, gk, gv, gdout, gout, glse, gout_cpu, glse_cpu, gdq, gdk, gdv};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) cudaFree(dev[i]);
    void *host[] = {q, k, v, dout, out, lse, scratch, dq, dk, dv, zero, qpos, kpos};
    for (size_t i = 0; i < sizeof host / sizeof *host; i++) free(host[i]);
}

/* Every compiled width (exec/flash_launch.h): head dims 8 (run at 16), 20 (32), 40 (64), 64, 96, 128,
 * 192 and 256, and 30 (32, loaded a float at a time); MHA, GQA and MQA; partial tiles; fewer queries
 * than keys; batches. */
Test(cuda_gpu, flash_attention_vs_cpu, .timeout = 120) {
    skip_without_gpu();
    flash_vs_cpu(9, 13, 4, 2, 8, 1);
    flash_vs_cpu(20, 50, 4, 4, 20, 2);
    flash_vs_cpu(33, 33, 2, 2, 30, 1); /* D % 4 != 0: the tiles' scalar loads */
    flash_vs_cpu(64, 64, 6, 2, 96, 1);
    flash_vs_cpu(45, 45, 2, 1, 192, 1);
    flash_vs_cpu(40, 40, 2, 2, 40, 3);
    flash_vs_cpu(70, 96, 4, 2, 64, 1);
    flash_vs_cpu(130, 130, 4, 1, 128, 2);
    flash_vs_cpu(77, 77, 2, 1, 256, 1);
}

Test(cuda_gpu, flash_backward_is_deterministic) {
    skip_without_gpu();
    enum { T = 150, H = 4, KV = 2, D = 64 };
    size_t nq = (size_t)T * H * D, nk = (size_t)T * KV * D, nl = (size_t)T * H;
    int pos[T];
    for (int i = 0; i < T; i++) pos[i] = i;
    float *q = test_random_floats(nq, 31), *k = test_random_floats(nk, 32), *v = test_random_floats(nk, 33),
          *dout = test_random_floats(nq, 34), *zero = calloc(nq, 4);
    int *gpos = dev_copy(pos, sizeof pos);
    ts_attn_shape s = {T, T, H, KV, D, H * D, KV * D, KV * D, H * D, gpos, gpos, 1};
    float *gq = dev_floats(q, nq), *gk = dev_floats(k, nk), *gv = dev_floats(v, nk), *gdout = dev_floats(dout, nq);
    float *gout = dev_floats(zero, nq), *glse = dev_floats(zero, nl);
    cr_assert_eq(ts_cuda_flash_attention_fwd(gout, glse, gq, gk, gv, &s, 0), TS_OK, "%s", ts_error_message());
    float *run[2][3];
    for (int r = 0; r < 2; r++) {
        float *g[3] = {dev_floats(zero, nq), dev_floats(zero, nk), dev_floats(zero, nk)};
        cr_assert_eq(ts_cuda_flash_attention_bwd(g[0], g[1], g[2], gdout, gq, gk, gv, gout, glse, &s, 0), TS_OK, "%s",
                     ts_error_message());
        size_t n[3] = {nq, nk, nk};
        for (int i = 0; i < 3; i++) {
            run[r][i] = malloc(n[i] * 4);
            cr_assert_eq(ts_cuda_to_host(run[r][i], g[i], n[i] * 4), TS_OK);
            cudaFree(g[i]);
        }
    }
    cr_expect(memcmp(run[0][0], run[1][0], nq * 4) == 0, "dq differs between two runs");
    cr_expect(memcmp(run[0][1], run[1][1], nk * 4) == 0, "dk differs between two runs");
    cr_expect(memcmp(run[0][2], run[1][2], nk * 4) == 0, "dv differs between two runs");
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 3; i++) free(run[r][i]);
    void *dev[] = {gpos, gq, gk, gv, gdout, gout, glse};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) cudaFree(dev[i]);
    free(q), free(k), free(v), free(dout), free(zero);
}

/* The bf16 table's element-wise ops and attention are one kernel launch each (the program's op
 * granularity: residual add, RMSNorm, rotary, SwiGLU, attention forward), and give what the CPU's
 * bf16 table gives within a bf16 rounding step (2^-7 relative: the GPU's expf and summation order
 * may land a value on the neighbouring bf16). */
#define ONE_LAUNCH(what, call)                                                                     \
    do {                                                                                           \
        unsigned long long before_ = ts_cuda_launches();                                           \
        cr_assert_eq((call), TS_OK, "%s: %s", what, ts_error_message());                           \
        cr_expect_eq(ts_cuda_launches() - before_, 1ull, "%s: %llu launches", what,                \
                     ts_cuda_launches() - before_);                                                \
    } while (0)

Test(cuda_gpu, bf16_fused_ops_one_launch) {
    skip_without_gpu();
    const ts_kernels *cpu = ts_kernels_cpu_bf16(), *gpu = ts_kernels_cuda_bf16();
    enum { T = 19, C = 96, H = 4, D = 24 };
    size_t n = (size_t)T * C;
    float *a = test_random_floats(n, 41), *b = test_random_floats(n, 42), *w = test_random_floats(C, 43);
    float *out = calloc(n, 4), *act = calloc(n, 4), *rstd = calloc(T, 4), *dx = test_random_floats(n, 44),
          *dw = calloc(C, 4), *dg = calloc(n, 4), *du = calloc(n, 4);
    float *ga = dev_floats(a, n), *gb = dev_floats(b, n), *gw = dev_floats(w, C), *gout = dev_floats(out, n),
          *gact = dev_floats(act, n), *grstd = dev_floats(rstd, T), *gdx = dev_floats(dx, n), *gdw = dev_floats(dw, C),
          *gdg = dev_floats(dg, n), *gdu = dev_floats(du, n);
    cr_assert_eq(cpu->add(out, a, b, n), TS_OK);
    ONE_LAUNCH("add", gpu->add(gout, ga, gb, n));
    expect_close("bf16 add", gout, out, n, 1e-2f);
    cr_assert_eq(cpu->swiglu_fwd(act, a, b, n), TS_OK);
    ONE_LAUNCH("swiglu_fwd", gpu->swiglu_fwd(gact, ga, gb, n));
    expect_close("bf16 swiglu_fwd", gact, act, n, 1e-2f);
    cr_assert_eq(cpu->swiglu_bwd(dg, du, out, a, b, n), TS_OK);
    ONE_LAUNCH("swiglu_bwd", gpu->swiglu_bwd(gdg, gdu, gout, ga, gb, n));
    expect_close("bf16 swiglu_bwd dgate", gdg, dg, n, 1e-2f);
    expect_close("bf16 swiglu_bwd dup", gdu, du, n, 1e-2f);
    cr_assert_eq(cpu->rmsnorm_fwd(act, rstd, a, w, T, C, 1e-5f), TS_OK);
    ONE_LAUNCH("rmsnorm_fwd", gpu->rmsnorm_fwd(gact, grstd, ga, gw, T, C, 1e-5f));
    expect_close("bf16 rmsnorm_fwd", gact, act, n, 1e-2f);
    expect_close("bf16 rmsnorm rstd (fp32)", grstd, rstd, T, 1e-5f);
    cr_assert_eq(cpu->rmsnorm_bwd(dx, dw, b, a, w, rstd, T, C), TS_OK);
    ONE_LAUNCH("rmsnorm_bwd", gpu->rmsnorm_bwd(gdx, gdw, gb, ga, gw, grstd, T, C));
    expect_close("bf16 rmsnorm_bwd dx", gdx, dx, n, 1e-2f);
    expect_close("bf16 rmsnorm_bwd dw (fp32)", gdw, dw, C, 1e-4f);
    int pos[T];
    for (int t = 0; t < T; t++) pos[t] = 3 * t;
    int *gpos = dev_copy(pos, sizeof pos);
    cr_assert_eq(cpu->rope_fwd(a, C, pos, T, H, D, 10000.0f), TS_OK);
    ONE_LAUNCH("rope_fwd", gpu->rope_fwd(ga, C, gpos, T, H, D, 10000.0f));
    expect_close("bf16 rope_fwd", ga, a, n, 1e-2f);
    ts_attn_shape s = {T, T, H, 2, D, C, C, C, C, pos, pos, 1}, gs = s;
    gs.q_pos = gs.k_pos = gpos;
    float *lse = calloc((size_t)T * H, 4), *scratch = calloc(T, 4), *glse = dev_floats(lse, (size_t)T * H);
    cr_assert_eq(cpu->attention_fwd(out, lse, a, b, b, &s, scratch), TS_OK);
    ONE_LAUNCH("attention_fwd", gpu->attention_fwd(gout, glse, ga, gb, gb, &gs, NULL));
    expect_close("bf16 attention_fwd", gout, out, (size_t)T * H * D, 2e-2f);
    void *dev[] = {ga, gb, gw, gout, gact, grstd, gdx, gdw, gdg, gdu, gpos, glse};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) cudaFree(dev[i]);
    void *host[] = {a, b, w, out, act, rstd, dx, dw, dg, du, lse, scratch};
    for (size_t i = 0; i < sizeof host / sizeof *host; i++) free(host[i]);
}

#endif

/* ---- GPU: training on the CUDA backend against the CPU --------------------------------------- */

/* GPUs this build can train on; 0 with the reason in `why` otherwise. */
static int gpus_here(char *why, size_t why_size) {
#ifdef TS_CUDA
    int n = 0;
    cr_assert_eq(ts_cuda_device_count(&n, why, why_size), TS_OK);
    if (n == 0 && !why[0]) snprintf(why, why_size, "0 devices");
    return n;
#else
    snprintf(why, why_size, "built without CUDA (make CUDA=1)");
    return 0;
#endif
}

/* `tessera run --json` losses of a plan on one device. */
static void run_losses_in(const char *plan, const char *device, const char *precision, int steps, double *losses) {
    char n[16];
    snprintf(n, sizeof n, "%d", steps);
    cli_result r = run_cli("run", "--plan", plan, "--steps", n, "--warmup", "1", "--json", "--device", device,
                           "--precision", precision, NULL);
    cr_assert_eq(r.status, 0, "run --device %s: exit %d, stderr: %s", device, r.status, r.err);
    cJSON *root = cJSON_Parse(r.out);
    cr_assert_not_null(root, "run --device %s printed no JSON: %s", device, r.out);
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(root, "losses");
    cr_assert(cJSON_IsArray(ls) && cJSON_GetArraySize(ls) == steps, "run --device %s: no %d losses", device, steps);
    for (int s = 0; s < steps; s++) losses[s] = cJSON_GetArrayItem(ls, s)->valuedouble;
    cJSON_Delete(root);
    cli_result_free(&r);
}

static void run_losses(const char *plan, const char *device, int steps, double *losses) {
    run_losses_in(plan, device, "fp32", steps, losses);
}

/* A tiny model trained on the GPU (one rank, every kernel through the CUDA table, cuBLAS, NCCL)
 * and on the CPU from the same parameters and data: the losses of every step agree within 1e-4
 * relative (fp32 on both; the GPU sums in other orders). Dense and MoE; with two GPUs also a
 * layout with TP, PP and DP across them. */
static void train_vs_cpu(const char *model, const char *layout, int gpus_needed) {
    char why[256];
    int gpus = gpus_here(why, sizeof why);
    if (gpus == 0) cr_skip_test("no CUDA GPU on this machine (%s)", why);
    if (gpus < gpus_needed) cr_skip_test("%s needs %d GPUs, this machine has %d", layout, gpus_needed, gpus);
    enum { STEPS = 4 };
    char *dir = make_temp_dir(), plan[4096], ranks[16];
    snprintf(plan, sizeof plan, "%s/plan.json", dir);
    snprintf(ranks, sizeof ranks, "%d", gpus_needed);
    cli_result r = run_cli("plan", "--model", model, "--system", "cpu-localhost", "--gpus", ranks, "--global-batch",
                           "8", "--seq", "64", "--dtype", "fp32", "--fix", layout, "--top", "1", "-o", plan, NULL);
    cr_assert_eq(r.status, 0, "plan %s %s: exit %d, stderr: %s", model, layout, r.status, r.err);
    cli_result_free(&r);
    double cpu[STEPS], gpu[STEPS];
    run_losses(plan, "cpu", STEPS, cpu);
    run_losses(plan, "cuda", STEPS, gpu);
    for (int s = 0; s < STEPS; s++) {
        double rel = fabs(gpu[s] - cpu[s]) / fabs(cpu[s]);
        fprintf(stderr, "%s %s step %d: gpu %.9g cpu %.9g (rel %.2g)\n", model, layout, s + 1, gpu[s], cpu[s], rel);
        cr_expect(rel <= 1e-4, "%s %s step %d: gpu loss %.9g, cpu %.9g (rel %.3g)", model, layout, s + 1, gpu[s],
                  cpu[s], rel);
    }
    remove_dir(dir);
}

Test(cuda_gpu, train_tiny_vs_cpu) {
    train_vs_cpu("tiny", "dp=1,tp=1,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=2,vpp=1,sched=1f1b,recompute=none", 1);
}

Test(cuda_gpu, train_tiny_moe_vs_cpu) {
    train_vs_cpu("tiny-moe", "dp=1,tp=1,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=2,vpp=1,sched=1f1b,recompute=none", 1);
}

Test(cuda_gpu, train_tiny_two_gpus_vs_cpu) {
    train_vs_cpu("tiny", "dp=1,tp=2,pp=1,cp=1,ep=1,sp=1,zero=0,mbs=2,vpp=1,sched=1f1b,recompute=none", 2);
}

/* `calibrate --device cuda --quick` on this machine's GPUs (one rank each) writes a profile that
 * loads back: measured fp32 peak and memory rate, node.gpus = the GPUs, node.cores 0, no
 * serial_ops. */
Test(cuda_gpu, calibrate_quick_profile_loads, .timeout = 300) {
    char why[256];
    int gpus = gpus_here(why, sizeof why);
    if (gpus == 0) cr_skip_test("no CUDA GPU on this machine (%s)", why);
    char *dir = make_temp_dir(), profile[4096];
    snprintf(profile, sizeof profile, "%s/profile.json", dir);
    const char *args[] = {"calibrate", "--device", "cuda", "--quick", "-o", profile, NULL};
    cli_result r = run_argv_timeout(args, 240);
    cr_assert_eq(r.status, 0, "calibrate --device cuda: exit %d, stderr: %s", r.status, r.err);
    cli_result_free(&r);
    ts_system s;
    cr_assert_eq(ts_system_load(profile, &s), TS_OK, "%s", ts_error_message());
    fprintf(stderr, "calibrated %d GPU(s): fp32 peak %.3g FLOP/s, memory %.3g B/s, link %.3g B/s\n", gpus,
            s.peak_flops[TS_DTYPE_FP32], s.hbm_bytes_per_s, s.link_bytes_per_s);
    cr_expect_eq(s.gpus_per_node, gpus);
    cr_expect(s.cores_per_node == 0 && !s.serial_ops, "node.cores %d, serial_ops %d", s.cores_per_node, s.serial_ops);
    cr_expect(s.peak_flops[TS_DTYPE_FP32] > 1e11 && s.gemm_eff.n >= 2, "peak %g over %d points",
              s.peak_flops[TS_DTYPE_FP32], s.gemm_eff.n);
    cr_expect(s.hbm_bytes_per_s > 1e10, "memory %g B/s", s.hbm_bytes_per_s);
    remove_dir(dir);
}

/* BF16 mixed precision on the GPU (ts_kernels_cuda_bf16: bf16 cuBLAS GEMMs, the tiled attention)
 * against fp32 training on the CPU: within TS_BF16_LOSS_RTOL, the tolerance the CPU's own bf16
 * reference is held to (tests/test_bf16.c). The GPU's fp32 run is held to 1e-4 beside it. */
Test(cuda_gpu, bf16_training_vs_cpu, .timeout = 300) {
    char why[256];
    if (gpus_here(why, sizeof why) == 0) cr_skip_test("no CUDA GPU on this machine (%s)", why);
    enum { STEPS = 6, BATCH = 4, SEQ = 64 };
    const char *models[] = {"tiny", "tiny-moe"};
    for (int m = 0; m < 2; m++) {
        float cpu[STEPS], gpu32[STEPS], gpu16[STEPS];
        cr_assert_eq(ts_bf16_ref_losses(models[m], BATCH, SEQ, STEPS, TS_DEVICE_CPU, 0, cpu, NULL), TS_OK, "%s",
                     ts_error_message());
        cr_assert_eq(ts_bf16_ref_losses(models[m], BATCH, SEQ, STEPS, TS_DEVICE_CUDA, 0, gpu32, NULL), TS_OK, "%s",
                     ts_error_message());
        cr_assert_eq(ts_bf16_ref_losses(models[m], BATCH, SEQ, STEPS, TS_DEVICE_CUDA, 1, gpu16, NULL), TS_OK, "%s",
                     ts_error_message());
        for (int s = 0; s < STEPS; s++) {
            double r32 = fabs((double)gpu32[s] - cpu[s]) / cpu[s], r16 = fabs((double)gpu16[s] - cpu[s]) / cpu[s];
            fprintf(stderr, "%s step %d: cpu fp32 %.6f gpu fp32 %.6f (rel %.2g) gpu bf16 %.6f (rel %.2g)\n", models[m],
                    s, cpu[s], gpu32[s], r32, gpu16[s], r16);
            cr_expect(r32 <= 1e-4, "%s step %d: gpu fp32 rel %g", models[m], s, r32);
            cr_expect(r16 <= TS_BF16_LOSS_RTOL, "%s step %d: gpu bf16 rel %g > %g", models[m], s, r16,
                      TS_BF16_LOSS_RTOL);
        }
    }
}

/* `tessera run --precision bf16` (one rank): the device's bf16 table, losses within
 * TS_BF16_LOSS_RTOL of fp32 on the CPU and not equal to them. On CPU ranks (suite `mpi`: it starts
 * mpirun) and, where there is one, on a GPU. */
static void precision_vs_fp32(const char *device) {
    enum { STEPS = 4 };
    char *dir = make_temp_dir(), plan[4096];
    snprintf(plan, sizeof plan, "%s/plan.json", dir);
    cli_result r = run_cli("plan", "--model", "tiny", "--system", "cpu-localhost", "--gpus", "1", "--global-batch", "8",
                           "--seq", "64", "--dtype", "fp32", "--fix",
                           "dp=1,tp=1,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=2,vpp=1,sched=1f1b,recompute=none", "--top", "1",
                           "-o", plan, NULL);
    cr_assert_eq(r.status, 0, "plan: exit %d, stderr: %s", r.status, r.err);
    cli_result_free(&r);
    double fp32[STEPS], bf16[STEPS], worst = 0;
    run_losses_in(plan, "cpu", "fp32", STEPS, fp32);
    run_losses_in(plan, device, "bf16", STEPS, bf16);
    for (int s = 0; s < STEPS; s++) {
        double rel = fabs(bf16[s] - fp32[s]) / fabs(fp32[s]);
        fprintf(stderr, "run --precision bf16 --device %s step %d: %.6f (cpu fp32 %.6f, rel %.2g)\n", device, s + 1,
                bf16[s], fp32[s], rel);
        worst = fmax(worst, rel);
    }
    cr_expect(worst > 0, "bf16 losses equal fp32 ones: the bf16 table did not run");
    cr_expect(worst <= TS_BF16_LOSS_RTOL, "bf16 losses %g from fp32 (tolerance %g)", worst, TS_BF16_LOSS_RTOL);
    remove_dir(dir);
}

Test(mpi, run_precision_bf16_cpu, .timeout = 300) { precision_vs_fp32("cpu"); }

Test(cuda_gpu, run_precision_bf16_vs_cpu, .timeout = 300) {
    char why[256];
    if (gpus_here(why, sizeof why) == 0) cr_skip_test("no CUDA GPU on this machine (%s)", why);
    precision_vs_fp32("cuda");
}
