/* Tessera's one result type and its check macros.
 *
 * Library code (models/, planner/, sim/, exec/, reports/) returns ts_status and relays failures
 * with TS_CHECK / TS_CHECK_GOTO, keeping the first error (the habit of NCCL's checks.h). The
 * message is a single line meant for the user: for bad input it names the file, the JSON path and
 * what was expected vs. what was found. The file:line of the library code that raised it is kept
 * separately (ts_error_where) for developers.
 *
 * The error is thread-local, so concurrent searches do not clobber each other's messages. */
#ifndef TS_STATUS_H
#define TS_STATUS_H

typedef enum {
    TS_OK = 0,
    TS_ERR_INPUT,      /* bad input: file, field, expected vs got; the CLI exits 2 */
    TS_ERR_INFEASIBLE, /* a well-formed request that nothing satisfies; the CLI exits 3 */
    TS_ERR_IO,         /* a file could not be read or written */
    TS_ERR_NOMEM,      /* an allocation failed */
    TS_ERR_EXTERNAL,   /* a foreign library (MPI, GLPK, cJSON, CUDA...) failed */
} ts_status;

/* Records the message (printf-style) and where it was raised; returns `st` so callers can write
 * `return ts_error_set(TS_ERR_INPUT, __FILE__, __LINE__, "...")`. Use TS_FAIL instead. */
ts_status ts_error_set(ts_status st, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Adds the caller's context in front of the recorded message ("op 12 \"fwd L0 qkv\": " + cause)
 * and its file:line to the trail of frames the failure passed through (NCCL's NCCLCHECK habit:
 * one failure reads as a short stack). Returns the recorded status, so a caller relays with
 * `return ts_error_context(...)`. Use TS_CHECK_CTX / TS_CHECK_CTX_GOTO. */
ts_status ts_error_context(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const char *ts_error_message(void); /* "" when none */
/* "planner/search.c:120" of the first failure, then " <- file:line" for each frame that added
 * context on the way up. */
const char *ts_error_where(void);
ts_status ts_error_status(void);
void ts_error_clear(void);
const char *ts_status_name(ts_status st);

/* The command line's exit status for a result: 0 ok, 2 bad input, 3 infeasible, 1 otherwise. */
int ts_exit_code(ts_status st);

#define TS_FAIL(st, ...) ts_error_set((st), __FILE__, __LINE__, __VA_ARGS__)

#define TS_CHECK(call)                                                                             \
    do {                                                                                           \
        ts_status ts_check_st_ = (call);                                                           \
        if (ts_check_st_ != TS_OK) return ts_check_st_;                                            \
    } while (0)

#define TS_CHECK_GOTO(call, res, label)                                                            \
    do {                                                                                           \
        (res) = (call);                                                                            \
        if ((res) != TS_OK) goto label;                                                            \
    } while (0)

/* TS_CHECK that adds the caller's context (printf-style) to the error on the way up. */
#define TS_CHECK_CTX(call, ...)                                                                    \
    do {                                                                                           \
        ts_status ts_check_st_ = (call);                                                           \
        if (ts_check_st_ != TS_OK) {                                                               \
            ts_error_context(__FILE__, __LINE__, __VA_ARGS__);                                     \
            return ts_check_st_;                                                                   \
        }                                                                                          \
    } while (0)

#define TS_CHECK_CTX_GOTO(call, res, label, ...)                                                   \
    do {                                                                                           \
        (res) = (call);                                                                            \
        if ((res) != TS_OK) {                                                                      \
            ts_error_context(__FILE__, __LINE__, __VA_ARGS__);                                     \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

/* An allocation that must not fail: records TS_ERR_NOMEM naming the call and jumps to `label`. */
#define TS_ALLOC_GOTO(ptr, res, label)                                                             \
    do {                                                                                           \
        if ((ptr) == NULL) {                                                                       \
            (res) = TS_FAIL(TS_ERR_NOMEM, "out of memory: %s", #ptr);                              \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

#endif
