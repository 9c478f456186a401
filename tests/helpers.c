/* Shared test helpers (see helpers.h). */
#include "tests/helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void die(const char *what) {
    perror(what);
    abort();
}

const char *test_data_dir(void) {
    const char *env = getenv("TESSERA_DATA");
    return (env && *env) ? env : ".";
}

char *test_data_path(const char *rel) {
    const char *dir = test_data_dir();
    size_t n = strlen(dir) + strlen(rel) + 2;
    char *path = malloc(n);
    if (path == NULL) die("test_data_path: malloc");
    snprintf(path, n, "%s/%s", dir, rel);
    return path;
}

char *test_write_temp(const char *content) {
    char *path = strdup("/tmp/tessera-test-XXXXXX.json");
    if (path == NULL) die("test_write_temp: strdup");
    int fd = mkstemps(path, 5);
    if (fd < 0) die("test_write_temp: mkstemps");
    size_t len = strlen(content), done = 0;
    while (done < len) {
        ssize_t w = write(fd, content + done, len - done);
        if (w < 0) die("test_write_temp: write");
        done += (size_t)w;
    }
    if (close(fd) != 0) die("test_write_temp: close");
    return path;
}

void test_remove_temp(char *path) {
    if (path == NULL) return;
    unlink(path);
    free(path);
}
