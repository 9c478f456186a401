/* common/status.h: the first error is kept, and context added on the way up reads as a short
 * stack (message prefixed by each frame's context, outermost first; where = raise site, then
 * each relaying frame). */
#include <criterion/criterion.h>
#include <string.h>

#include "common/status.h"

static ts_status inner(void) { return TS_FAIL(TS_ERR_INPUT, "model.json: layers: expected an integer"); }
static ts_status middle(void) {
    TS_CHECK_CTX(inner(), "loading model %s", "x");
    return TS_OK;
}
static ts_status outer(void) {
    ts_status res = TS_OK;
    TS_CHECK_CTX_GOTO(middle(), res, exit, "planning on %d GPUs", 8);
exit:
    return res;
}

Test(status, context_added_on_the_way_up) {
    ts_error_clear();
    cr_assert_eq(outer(), TS_ERR_INPUT);
    cr_assert_str_eq(ts_error_message(), "planning on 8 GPUs: loading model x: model.json: layers: expected an integer");
    const char *where = ts_error_where();
    cr_assert(strstr(where, "tests/test_status.c:") == where, "%s", where);
    cr_assert_eq(strstr(where + 1, " <- tests/test_status.c:") != NULL, 1, "%s", where);
    ts_error_clear();
}

Test(status, first_error_kept_and_context_without_error_is_a_no_op) {
    ts_error_clear();
    cr_assert_eq(ts_error_context(__FILE__, __LINE__, "nothing failed"), TS_OK);
    cr_assert_str_eq(ts_error_message(), "");
    TS_FAIL(TS_ERR_IO, "first");
    TS_FAIL(TS_ERR_INPUT, "second");
    cr_assert_eq(ts_error_status(), TS_ERR_IO);
    cr_assert_str_eq(ts_error_message(), "first");
    ts_error_clear();
}
