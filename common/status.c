/* The thread-local error record behind ts_status (see status.h). */
#include "common/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char err_msg[1024];
static _Thread_local char err_where[1024];
static _Thread_local ts_status err_status;

/* Messages quote user input (JSON keys and strings, flag values): a control character in it must
 * not break the one-line rule or reach the terminal. */
static void printable(char *text) {
    for (char *p = text; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
}

ts_status ts_error_set(ts_status st, const char *file, int line, const char *fmt, ...) {
    /* Keep the first error: a caller that wraps a failure must not overwrite its cause. */
    if (err_status != TS_OK) return st;
    err_status = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    va_end(ap);
    printable(err_msg);
    snprintf(err_where, sizeof err_where, "%s:%d", file, line);
    return st;
}

ts_status ts_error_context(const char *file, int line, const char *fmt, ...) {
    if (err_status == TS_OK) return TS_OK;
    char ctx[512], msg[sizeof err_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
    printable(ctx);
    /* A message longer than the record is cut at its end: the context in front stays. */
    if (snprintf(msg, sizeof msg, "%s: %s", ctx, err_msg) >= 0) memcpy(err_msg, msg, sizeof err_msg);
    size_t used = strlen(err_where);
    if (used < sizeof err_where) snprintf(err_where + used, sizeof err_where - used, " <- %s:%d", file, line);
    return err_status;
}

const char *ts_error_message(void) { return err_msg; }
const char *ts_error_where(void) { return err_where; }
ts_status ts_error_status(void) { return err_status; }

void ts_error_clear(void) {
    err_status = TS_OK;
    err_msg[0] = '\0';
    err_where[0] = '\0';
}

const char *ts_status_name(ts_status st) {
    switch (st) {
    case TS_OK: return "ok";
    case TS_ERR_INPUT: return "bad input";
    case TS_ERR_INFEASIBLE: return "infeasible";
    case TS_ERR_IO: return "i/o error";
    case TS_ERR_NOMEM: return "out of memory";
    case TS_ERR_EXTERNAL: return "library error";
    }
    return "unknown";
}

int ts_exit_code(ts_status st) {
    switch (st) {
    case TS_OK: return 0;
    case TS_ERR_INPUT: return 2;
    case TS_ERR_INFEASIBLE: return 3;
    default: return 1;
    }
}
