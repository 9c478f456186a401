/* exec/ops_comm.h: the pipeline sends' list waits for and releases each copy exactly once, also
 * when a wait fails part-way and the failed step's list is then freed. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "exec/ops_comm.h"

enum { N_SENDS = 4, FAIL_AT = 1 };

static int waits[N_SENDS], frees[N_SENDS];
static float copies[N_SENDS][8];

static int index_of(const void *p, const void *base, size_t stride) {
    return (int)(((const char *)p - (const char *)base) / (ptrdiff_t)stride);
}

/* Requests are &waits[i]: a wait records its request and fails on FAIL_AT. */
static ts_status fake_wait(ts_request *req) {
    int i = index_of(req, waits, sizeof waits[0]);
    waits[i]++;
    return i == FAIL_AT ? TS_FAIL(TS_ERR_EXTERNAL, "send %d failed", i) : TS_OK;
}

static void fake_free(void *p) { frees[index_of(p, copies, sizeof copies[0])]++; }

Test(exec_sends, failed_wait_then_free_releases_each_copy_once) {
    ts_backend be = {.wait = fake_wait, .free = fake_free};
    tr_tally tally = {0};
    tr_sends q;
    tr_sends_init(&q, &tally);
    q.cap = q.n = N_SENDS;
    q.reqs = malloc(N_SENDS * sizeof *q.reqs);
    q.bufs = malloc(N_SENDS * sizeof *q.bufs);
    q.floats = malloc(N_SENDS * sizeof *q.floats);
    cr_assert(q.reqs && q.bufs && q.floats);
    for (int i = 0; i < N_SENDS; i++) {
        q.reqs[i] = (ts_request *)&waits[i];
        q.bufs[i] = copies[i];
        q.floats[i] = 8;
        tr_tally_add(&tally, TR_MEM_BUFFERS, 8 * sizeof(float));
    }
    cr_expect_neq(tr_sends_wait(&q, &be), TS_OK);
    cr_expect_eq(q.n, 0, "a failed wait still empties the list");
    tr_sends_free(&q, &be);
    ts_error_clear();
    for (int i = 0; i < N_SENDS; i++) {
        cr_expect_eq(waits[i], 1, "send %d waited %d times", i, waits[i]);
        cr_expect_eq(frees[i], 1, "copy %d freed %d times", i, frees[i]);
    }
    cr_expect_eq(tally.live[TR_MEM_BUFFERS], 0.0, "every copy leaves the tally");
}
