/* Shared by the libFuzzer harnesses in tests/fuzz/ (built and run by `make fuzz`).
 *
 * Each harness feeds one input to one loader and, when the input loads, checks a property that
 * must hold for every accepted input (it writes back and reads back to the same value). A
 * property that fails calls fuzz_fail, which aborts so libFuzzer keeps the input as a crash. */
#ifndef TS_FUZZ_H
#define TS_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/status.h"

/* The input as a NUL-terminated string (the loaders take C strings); the caller frees it. */
static inline char *fuzz_cstr(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (s == NULL) abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* Writes the input to a per-process file (in $TMPDIR, else /dev/shm, else /tmp: a disk-backed
 * file costs the fuzzer most of its speed) for the loaders that read only paths; returns its
 * path, valid until the next call. Removed at exit. */
static char fuzz_path_[4096];
static void fuzz_remove_(void) { unlink(fuzz_path_); }
static inline const char *fuzz_file(const uint8_t *data, size_t size) {
    if (fuzz_path_[0] == '\0') {
        const char *dir = getenv("TMPDIR");
        if (dir == NULL || *dir == '\0') dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(fuzz_path_, sizeof fuzz_path_, "%s/tessera-fuzz-%d.json", dir, (int)getpid());
        atexit(fuzz_remove_);
    }
    FILE *f = fopen(fuzz_path_, "wb");
    if (f == NULL || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
        perror(fuzz_path_);
        abort();
    }
    return fuzz_path_;
}

static inline void fuzz_fail(const char *what) {
    fprintf(stderr, "fuzz property failed: %s (last error: %s at %s)\n", what, ts_error_message(),
            ts_error_where());
    abort();
}

#endif
