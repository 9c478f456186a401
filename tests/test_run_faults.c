/* `tessera run` when a rank dies or stalls (issue 8): a rank that SIGKILLs itself ends the job
 * non-zero within seconds with mpirun's message naming the rank; a rank that SIGSTOPs itself
 * ends it through the other ranks' --timeout watchdog, with a message naming the waiting rank
 * and the step; in both cases the trace file is absent, never truncated (atomic writes). Suite
 * `mpi`, beside the executor's other MPI tests. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/helpers.h"

/* Plans dp=2 of tiny on two CPU ranks into dir/plan.json; returns its malloc'd path. */
static char *two_rank_plan(const char *dir) {
    char *plan = malloc(4096);
    cr_assert_not_null(plan);
    snprintf(plan, 4096, "%s/plan.json", dir);
    cli_result r = run_cli("plan", "-m", "tiny", "-s", "cpu-localhost", "-g", "2", "-b", "8", "-l", "64",
                           "--dtype", "fp32", "-f", "dp=2", "-k", "1", "-o", plan, NULL);
    cr_assert_eq(r.status, 0, "plan: %s", r.err);
    cli_result_free(&r);
    return plan;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Runs 4 steps with rank 1 faulting at step 1 in `mode`; checks the exit, the time, the message
 * and that no trace was left. */
static void faulty_run(const char *mode, const char *timeout, const char *message, double limit_s) {
    char *dir = make_temp_dir();
    char *plan = two_rank_plan(dir);
    char trace[4200];
    snprintf(trace, sizeof trace, "%s/trace.json", dir);
    setenv("TESSERA_FAULT_RANK", "1", 1);
    setenv("TESSERA_FAULT_STEP", "1", 1);
    setenv("TESSERA_FAULT_MODE", mode, 1);
    double t0 = now_s();
    cli_result r = run_cli("run", "--plan", plan, "--steps", "4", "--warmup", "1", "--timeout", timeout,
                           "--trace", trace, NULL);
    double took_s = now_s() - t0;
    cr_expect_neq(r.status, 0, "%s: the job succeeded", mode);
    cr_expect_lt(took_s, limit_s, "%s: the job took %.1f s to end", mode, took_s);
    cr_expect(strstr(r.err, message) != NULL, "%s: stderr lacks \"%s\": %s", mode, message, r.err);
    char names[4096];
    list_dir(dir, names, sizeof names);
    cr_expect(strstr(names, "trace") == NULL, "%s: files left: %s", mode, names);
    cli_result_free(&r);
    free(plan);
    remove_dir(dir);
}

Test(mpi, killed_rank_ends_the_job, .timeout = 60) {
    faulty_run("kill", "0", "process rank 1", 15);
}

Test(mpi, stalled_rank_ends_the_job_after_timeout, .timeout = 60) {
    faulty_run("stop", "3", "did not finish within 3 s (--timeout)", 20);
}

Test(mpi, timeout_flag_is_checked) {
    cli_result r = run_cli("run", "--plan", "x.json", "--timeout", "-1", NULL);
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "--timeout: expected a number in [0, 86400]") != NULL, "%s", r.err);
    cli_result_free(&r);
}
