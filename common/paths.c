/* Zoo look-up (see paths.h). */
#include "common/paths.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef TS_DATA_DIR
#define TS_DATA_DIR "."
#endif

const char *ts_data_dir(void) {
    const char *env = getenv("TESSERA_DATA");
    return (env && *env) ? env : TS_DATA_DIR;
}

static int is_path(const char *s) {
    size_t n = strlen(s);
    return strchr(s, '/') != NULL || (n > 5 && strcmp(s + n - 5, ".json") == 0);
}

ts_status ts_zoo_resolve(const char *folder, const char *name_or_path, char *out, size_t cap) {
    if (name_or_path == NULL || *name_or_path == '\0')
        return TS_FAIL(TS_ERR_INPUT, "empty %s name", folder);
    if (is_path(name_or_path)) {
        if (snprintf(out, cap, "%s", name_or_path) >= (int)cap)
            return TS_FAIL(TS_ERR_INPUT, "%.60s...: path too long", name_or_path);
        return TS_OK;
    }
    if (snprintf(out, cap, "%s/%s/%s.json", ts_data_dir(), folder, name_or_path) >= (int)cap)
        return TS_FAIL(TS_ERR_INPUT, "%.60s...: name too long", name_or_path);
    struct stat st;
    if (stat(out, &st) != 0)
        return TS_FAIL(TS_ERR_INPUT, "%s: unknown name: no %s in %s/%s (%s%s)", name_or_path, out, ts_data_dir(),
                       folder, strstr(folder, "stacks") ? "the stacks are the .json files there" : "list them with `tessera ",
                       strstr(folder, "stacks") ? "" : strstr(folder, "systems") ? "systems`" : "models`");
    return TS_OK;
}

static int cmp_name(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

int ts_zoo_list(const char *folder, char names[][64], int cap) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", ts_data_dir(), folder);
    DIR *d = opendir(dir);
    if (d == NULL) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < cap) {
        size_t len = strlen(e->d_name);
        if (len <= 5 || len - 5 >= 64 || strcmp(e->d_name + len - 5, ".json") != 0) continue;
        memcpy(names[n], e->d_name, len - 5);
        names[n][len - 5] = '\0';
        n++;
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_name);
    return n;
}
