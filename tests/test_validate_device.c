/* `tessera validate --device`, suite `validate_device` (starts no MPI ranks, needs no GPU): the
 * matrix on CUDA keeps the layouts of at most one rank per GPU, and where no GPU can train the
 * command refuses at once with one line and exit 2, before calibrating anything. */
#include <criterion/criterion.h>
#include <string.h>

#include "exec/launch.h"
#include "reports/validate.h"
#include "tests/helpers.h"

Test(validate_device, cuda_matrix_is_one_rank_per_gpu) {
    cr_expect_eq(ts_validate_max_ranks(TS_DEVICE_CPU, 0, 8), 8, "CPU ranks as requested");
    cr_expect_eq(ts_validate_max_ranks(TS_DEVICE_CUDA, 1, 8), 1, "one GPU: the one-rank cases");
    cr_expect_eq(ts_validate_max_ranks(TS_DEVICE_CUDA, 4, 8), 4);
    cr_expect_eq(ts_validate_max_ranks(TS_DEVICE_CUDA, 16, 8), 8, "never more than requested");
    cr_expect_eq(ts_validate_max_ranks(TS_DEVICE_CUDA, 0, 8), 0, "no GPU: no case");
    ts_validate_opts o;
    ts_validate_opts_defaults(&o);
    cr_expect_eq(o.device, TS_DEVICE_CPU, "validate trains on CPU ranks by default");
}

Test(validate_device, cuda_without_gpu_refuses) {
    if (ts_cuda_gpu_count() > 0) cr_skip_test("this machine has a GPU");
    cli_result r = run_cli("validate", "--device", "cuda", NULL);
    cr_expect_eq(r.status, 2, "exit %d, stderr: %s", r.status, r.err);
    cr_expect(strstr(r.err, "built without CUDA") || strstr(r.err, "no CUDA GPU"), "%s", r.err);
    cr_expect(one_line_error(r.err, "validate"), "%s", r.err);
    cr_expect_str_empty(r.out, "nothing on stdout");
    cli_result_free(&r);
}

Test(validate_device, bad_device_and_help) {
    cli_result r = run_cli("validate", "--device", "tpu", NULL);
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "expected cpu or cuda") != NULL, "%s", r.err);
    cr_expect(one_line_error(r.err, "validate"), "%s", r.err);
    cli_result_free(&r);
    r = run_cli("validate", "--help", NULL);
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "--device D") != NULL, "%s", r.out);
    cli_result_free(&r);
}
