/* Output files by one rule: regular files atomically, devices and FIFOs in place, links resolved
 * (see output.h). */
#include "common/output.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Temporary files of writes in progress, for ts_output_remove_temps. A process writes one or two
 * files at a time (a report's pages, a trace beside its JSON); more than this many at once are
 * still written, only not cleaned up by a signal. */
#define MAX_TEMPS 16
static const char *volatile temps[MAX_TEMPS];

static void temp_register(const char *tmp) {
    for (int i = 0; i < MAX_TEMPS; i++)
        if (temps[i] == NULL) {
            temps[i] = tmp;
            return;
        }
}

static void temp_forget(const char *tmp) {
    for (int i = 0; i < MAX_TEMPS; i++)
        if (temps[i] == tmp) temps[i] = NULL;
}

void ts_output_remove_temps(void) {
    for (int i = 0; i < MAX_TEMPS; i++)
        if (temps[i] != NULL) unlink(temps[i]);
}

ts_status ts_output_temp_write(const char *prefix, const void *data, size_t len, char *path, size_t cap) {
    const char *dir = getenv("TMPDIR");
    if (dir == NULL || dir[0] == '\0') dir = "/tmp";
    path[0] = '\0';
    if (snprintf(path, cap, "%s/%s-XXXXXX", dir, prefix) >= (int)cap) {
        path[0] = '\0';
        return TS_FAIL(TS_ERR_INPUT, "%s: TMPDIR too long", dir);
    }
    int fd = mkstemp(path); /* 0600, exclusive */
    if (fd < 0) {
        int e = errno;
        path[0] = '\0';
        return TS_FAIL(TS_ERR_IO, "%s: cannot create a temporary file: %s", dir, strerror(e));
    }
    temp_register(path);
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        p += n, left -= (size_t)n;
    }
    int e = left ? errno : 0;
    if (close(fd) != 0 && !e) e = errno;
    if (left || e) {
        ts_output_temp_remove(path);
        return TS_FAIL(TS_ERR_IO, "%s: cannot write a temporary file: %s", dir, strerror(e ? e : EIO));
    }
    return TS_OK;
}

void ts_output_temp_remove(char *path) {
    if (path[0] == '\0') return;
    temp_forget(path);
    unlink(path);
    path[0] = '\0';
}

/* Follows the symbolic links of a path that does not resolve with realpath (a link to a file not
 * yet written) to the path they name, at most 40 links deep (Linux's own MAXSYMLINKS). */
static ts_status follow_links(const char *path, char *out, size_t cap) {
    char cur[PATH_MAX], link[PATH_MAX];
    if (snprintf(cur, sizeof cur, "%s", path) >= (int)sizeof cur)
        return TS_FAIL(TS_ERR_INPUT, "%.200s...: path too long", path);
    for (int hops = 0; hops < 40; hops++) {
        ssize_t n = readlink(cur, link, sizeof link - 1);
        if (n < 0) {
            if (snprintf(out, cap, "%s", cur) >= (int)cap)
                return TS_FAIL(TS_ERR_INPUT, "%s: path too long", path);
            return TS_OK;
        }
        link[n] = '\0';
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", cur);
        int w = link[0] == '/' ? snprintf(cur, sizeof cur, "%s", link)
                               : snprintf(cur, sizeof cur, "%s/%s", dirname(dir), link);
        if (w >= (int)sizeof cur) return TS_FAIL(TS_ERR_INPUT, "%s: path too long", path);
    }
    return TS_FAIL(TS_ERR_INPUT, "%s: too many levels of symbolic links", path);
}

typedef enum { OUT_ATOMIC, OUT_IN_PLACE } out_kind;

/* Which way `path` is written and where it lands (`target`); `mode` is the permission bits to
 * keep (an existing file's), else 0666 before the umask. */
static ts_status classify(const char *path, out_kind *kind, char *target, size_t cap, mode_t *mode) {
    struct stat st;
    *mode = 0666;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return TS_FAIL(TS_ERR_INPUT, "%s: is a directory, expected a file", path);
        if (!S_ISREG(st.st_mode)) {
            *kind = OUT_IN_PLACE;
            if (snprintf(target, cap, "%s", path) >= (int)cap)
                return TS_FAIL(TS_ERR_INPUT, "%.200s...: path too long", path);
            return TS_OK;
        }
        *kind = OUT_ATOMIC;
        *mode = st.st_mode & 07777;
        char real[PATH_MAX];
        if (realpath(path, real) == NULL)
            return TS_FAIL(TS_ERR_IO, "%s: cannot resolve: %s", path, strerror(errno));
        if (snprintf(target, cap, "%s", real) >= (int)cap)
            return TS_FAIL(TS_ERR_INPUT, "%.200s...: path too long", path);
        return TS_OK;
    }
    if (errno != ENOENT) return TS_FAIL(TS_ERR_INPUT, "%s: cannot write: %s", path, strerror(errno));
    *kind = OUT_ATOMIC;
    return follow_links(path, target, cap);
}

/* The directory a new file `target` goes into must exist and take new files. */
static ts_status check_dir(const char *path, const char *target) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", target);
    const char *d = dirname(dir);
    struct stat st;
    if (stat(d, &st) != 0 || !S_ISDIR(st.st_mode))
        return TS_FAIL(TS_ERR_IO, "%s: cannot create: %s (no directory \"%s\")", path, strerror(ENOENT), d);
    if (access(d, W_OK | X_OK) != 0)
        return TS_FAIL(TS_ERR_IO, "%s: cannot create: %s (in \"%s\")", path, strerror(errno), d);
    return TS_OK;
}

ts_status ts_output_check(const char *path) {
    if (strcmp(path, "-") == 0) return TS_OK;
    char target[PATH_MAX];
    out_kind kind;
    mode_t mode;
    ts_status st = classify(path, &kind, target, sizeof target, &mode);
    if (st == TS_OK && kind == OUT_IN_PLACE && access(path, W_OK) != 0)
        st = TS_FAIL(TS_ERR_IO, "%s: cannot open for writing: %s", path, strerror(errno));
    if (st == TS_OK && kind == OUT_ATOMIC) st = check_dir(path, target);
    return st;
}

/* Creates the temporary file beside af->target, exclusively (a stale one of a dead process with
 * the same id is replaced), with the permissions the file had. */
static ts_status open_temp(ts_atomic_file *af, mode_t mode) {
    if (snprintf(af->tmp, sizeof af->tmp, "%s.tmp.%ld", af->target, (long)getpid()) >= (int)sizeof af->tmp)
        return TS_FAIL(TS_ERR_INPUT, "%s: path too long", af->path);
    int fd = open(af->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST && unlink(af->tmp) == 0)
        fd = open(af->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        int e = errno;
        af->tmp[0] = '\0';
        return TS_FAIL(TS_ERR_IO, "%s: cannot create: %s", af->path, strerror(e));
    }
    if (mode != 0666) (void)fchmod(fd, mode); /* best effort: the owner may differ */
    af->f = fdopen(fd, "wb");
    if (af->f == NULL) {
        int e = errno;
        close(fd);
        unlink(af->tmp);
        af->tmp[0] = '\0';
        return TS_FAIL(TS_ERR_IO, "%s: cannot create: %s", af->path, strerror(e));
    }
    temp_register(af->tmp);
    return TS_OK;
}

ts_status ts_atomic_open(const char *path, ts_atomic_file *af) {
    af->f = NULL;
    af->tmp[0] = af->target[0] = '\0';
    af->is_stdout = 0;
    if (snprintf(af->path, sizeof af->path, "%s", path) >= (int)sizeof af->path)
        return TS_FAIL(TS_ERR_INPUT, "%.200s...: path too long", path);
    if (strcmp(path, "-") == 0) {
        af->f = stdout;
        af->is_stdout = 1;
        return TS_OK;
    }
    out_kind kind;
    mode_t mode;
    TS_CHECK(classify(path, &kind, af->target, sizeof af->target, &mode));
    if (kind == OUT_ATOMIC) return open_temp(af, mode);
    af->f = fopen(path, "wb");
    if (af->f == NULL) return TS_FAIL(TS_ERR_IO, "%s: cannot open for writing: %s", path, strerror(errno));
    return TS_OK;
}

/* Flushes `f` and reports whether anything written to it failed; the errno to report in *err.
 * When an earlier, implicit flush failed (output past the stream's buffer), its errno is gone
 * and this flush has nothing left to write: a one-byte write names the cause (ENOSPC on a full
 * disk); the output is incomplete already. */
static int stream_failed(FILE *f, int *err) {
    errno = 0;
    int failed = fflush(f) != 0;
    *err = errno;
    if (ferror(f)) failed = 1;
    if (failed && *err == 0 && write(fileno(f), "\n", 1) < 0) *err = errno;
    if (failed && *err == 0) *err = EIO;
    return failed;
}

ts_status ts_atomic_commit(ts_atomic_file *af) {
    int e = 0;
    if (af->is_stdout) {
        af->f = NULL;
        if (stream_failed(stdout, &e)) return TS_FAIL(TS_ERR_IO, "stdout: write failed: %s", strerror(e));
        return TS_OK;
    }
    int failed = stream_failed(af->f, &e);
    /* fsync makes the bytes durable before the rename publishes them; devices and FIFOs have
     * nothing to sync (EINVAL). */
    if (!failed && af->tmp[0] && fsync(fileno(af->f)) != 0) failed = 1, e = errno;
    if (fclose(af->f) != 0 && !failed) failed = 1, e = errno;
    af->f = NULL;
    if (failed) {
        if (af->tmp[0]) unlink(af->tmp);
        temp_forget(af->tmp);
        return TS_FAIL(TS_ERR_IO, "%s: write failed: %s", af->path, strerror(e));
    }
    if (af->tmp[0] == '\0') return TS_OK;
    ts_status res = TS_OK;
    if (rename(af->tmp, af->target) != 0) {
        e = errno;
        unlink(af->tmp);
        res = TS_FAIL(TS_ERR_IO, "%s: cannot rename into place: %s", af->path, strerror(e));
    }
    temp_forget(af->tmp);
    return res;
}

void ts_atomic_abort(ts_atomic_file *af) {
    if (af->f == NULL || af->is_stdout) return;
    fclose(af->f);
    af->f = NULL;
    if (af->tmp[0]) {
        unlink(af->tmp);
        temp_forget(af->tmp);
    }
}

ts_status ts_write_file_atomic(const char *path, const char *data, size_t len) {
    ts_atomic_file af;
    TS_CHECK(ts_atomic_open(path, &af));
    if (fwrite(data, 1, len, af.f) != len) {
        ts_status res = TS_FAIL(TS_ERR_IO, "%s: write failed: %s", af.is_stdout ? "stdout" : af.path,
                                strerror(errno));
        ts_atomic_abort(&af);
        return res;
    }
    return ts_atomic_commit(&af);
}

ts_status ts_stdout_finish(void) {
    int e = 0;
    if (stream_failed(stdout, &e)) return TS_FAIL(TS_ERR_IO, "stdout: write failed: %s", strerror(e));
    return TS_OK;
}
