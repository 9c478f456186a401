/* Every file Tessera writes goes through here (the rule is stated in docs/reliability.md):
 *
 *   - a regular file, or a path that does not exist yet, is written atomically: a temporary file
 *     beside it (PATH.tmp.PID, in the same directory so the rename stays on one file system), its
 *     writes, flush, fsync and close checked, then renamed over PATH; a reader never sees a
 *     truncated file and a failure leaves PATH as it was;
 *   - "-", a character device (/dev/null, /dev/full, a terminal), a FIFO or a socket is written in
 *     place: it is never replaced by a regular file;
 *   - a symbolic link is resolved to its target first, and the rule applies to the target (the
 *     link stays a link);
 *   - every error names the path the user gave, never the temporary file.
 *
 * The temporary files of writes in progress are registered so that a signal handler can remove
 * them (ts_output_remove_temps), leaving nothing partial behind. */
#ifndef TS_OUTPUT_H
#define TS_OUTPUT_H

#include <stddef.h>
#include <stdio.h>

#include "common/status.h"

/* A file being written: ts_atomic_open hands it out in `f`; write to it with stdio, then either
 * ts_atomic_commit (flush, fsync, close, rename into place) or ts_atomic_abort (close, remove).
 * Either one ends the ts_atomic_file. */
typedef struct {
    FILE *f;
    char path[4096];   /* as the user gave it: what messages name */
    char target[4096]; /* where it lands: `path` with symbolic links resolved */
    char tmp[4096];    /* the temporary file; "" when written in place */
    int is_stdout;     /* "-": stdout, neither opened nor closed here */
} ts_atomic_file;

ts_status ts_atomic_open(const char *path, ts_atomic_file *af);
ts_status ts_atomic_commit(ts_atomic_file *af);
void ts_atomic_abort(ts_atomic_file *af);

/* Writes `len` bytes to `path` by the rule above ("-": stdout). */
ts_status ts_write_file_atomic(const char *path, const char *data, size_t len);

/* Checks, before any work, that `path` could be written by the rule above: "-", a writable device
 * or FIFO, or a file whose directory exists and takes new files. Otherwise the error a failed
 * write would give, naming the path: TS_ERR_IO (a missing or read-only directory), TS_ERR_INPUT
 * (a directory where a file belongs). */
ts_status ts_output_check(const char *path);

/* Flushes stdout and reports a write error (a full disk, /dev/full, a closed pipe) that a table
 * printer's unchecked printf left in the stream: TS_ERR_IO "stdout: write failed: ...". */
ts_status ts_stdout_finish(void);

/* Removes the temporary files of the writes in progress; async-signal-safe (unlink only), for
 * signal handlers. */
void ts_output_remove_temps(void);

/* A private file for handing data to a child process by path (a plan made in memory, to the
 * ranks of `tessera run`): created by mkstemp in $TMPDIR (default /tmp) as PREFIX-XXXXXX, mode
 * 0600, holding `data`, and registered like a write in progress so that ts_output_remove_temps
 * removes it. `path` (cap bytes) must stay valid until ts_output_temp_remove unlinks and
 * forgets it (a no-op on ""). */
ts_status ts_output_temp_write(const char *prefix, const void *data, size_t len, char *path, size_t cap);
void ts_output_temp_remove(char *path);

#endif
