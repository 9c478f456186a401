/* Golden outputs of the command line: every line of tests/golden/cases.txt runs `tessera` and
 * compares what it printed (or wrote) with tests/golden/NAME.out, byte for byte. They pin the
 * answers of every schedule, ZeRO 0-3, SP, CP, EP, MLA, recompute policy, uneven stages and FP8
 * across plan, sim (summary, trace, step program), export and report, so a change of shape that
 * must not change an answer is checked as such.
 *
 * JSON is compared after dropping the wall-clock keys (search_s, partition_s, sim_s) and printing
 * it again with cJSON, tables with the time the work took masked (" in X s"); the temporary folder and the repository root read as $DIR and $DATA.
 * Large traces are compared as their size and FNV-1a 64-bit hash. On a mismatch the output is
 * kept in /tmp/tessera-golden-actual/NAME.out for diffing. TESSERA_GOLDEN_UPDATE=1 rewrites the
 * golden files instead (after a deliberate change of answers; say why in the commit). */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/helpers.h"

#define GOLDEN_ACTUAL_DIR "/tmp/tessera-golden-actual"

static const char *const wall_clock_keys[] = {"search_s", "partition_s", "sim_s", NULL};

static void drop_wall_clock(cJSON *item) {
    for (cJSON *c = item ? item->child : NULL; c != NULL;) {
        cJSON *next = c->next;
        int drop = 0;
        for (int i = 0; c->string && wall_clock_keys[i]; i++) drop |= strcmp(c->string, wall_clock_keys[i]) == 0;
        if (drop) cJSON_Delete(cJSON_DetachItemViaPointer(item, c));
        else drop_wall_clock(c);
        c = next;
    }
}

/* A malloc'd copy of `text` with every `from` replaced by `to`. */
static char *replace_all(const char *text, const char *from, const char *to) {
    size_t nf = strlen(from), nt = strlen(to), count = 0;
    for (const char *p = text; (p = strstr(p, from)) != NULL; p += nf) count++;
    char *out = malloc(strlen(text) + count * nt + 1);
    cr_assert_not_null(out);
    char *w = out;
    for (const char *p = text;;) {
        const char *hit = strstr(p, from);
        if (hit == NULL) {
            strcpy(w, p);
            return out;
        }
        memcpy(w, p, (size_t)(hit - p));
        w += hit - p;
        memcpy(w, to, nt);
        w += nt;
        p = hit + nf;
    }
}

/* Tables print how long the work took in their '#' lines ("# searched ... in 0.001 s",
 * "# ... simulated in 0.004 s"): there " in <number> s" reads " in X s". */
static void mask_wall_clock_text(char *text) {
    for (char *p = text; (p = strstr(p, " in ")) != NULL;) {
        char *q = p + 4, *line = p;
        while (line > text && line[-1] != '\n') line--;
        size_t digits = strspn(q, "0123456789.");
        if (line[0] == '#' && digits > 0 && strncmp(q + digits, " s", 2) == 0) {
            memmove(q + 1, q + digits, strlen(q + digits) + 1);
            *q = 'X';
        }
        p = q;
    }
}

/* FNV-1a, 64 bits (Fowler, Noll, Vo). */
static uint64_t fnv1a64(const char *data, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)data[i]) * 1099511628211ull;
    return h;
}

/* What a case produced, normalised as its kind says (malloc'd). */
static char *normalised(const char *kind, const char *dir, const cli_result *r) {
    char *raw = NULL;
    size_t raw_len = 0;
    const char *colon = strchr(kind, ':');
    if (colon) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, colon + 1);
        raw = read_file(path);
        cr_assert_not_null(raw, "golden: %s was not written", path);
        raw_len = strlen(raw);
    } else {
        raw = strdup(r->out);
        raw_len = r->out_len;
    }
    if (strncmp(kind, "hash:", 5) == 0) {
        char *h = malloc(64);
        snprintf(h, 64, "%zu bytes fnv1a64 %016llx\n", raw_len, (unsigned long long)fnv1a64(raw, raw_len));
        free(raw);
        return h;
    }
    int is_json = strcmp(kind, "json") == 0 || (colon && strstr(colon, ".json") != NULL);
    if (is_json) {
        cJSON *doc = cJSON_Parse(raw);
        cr_assert_not_null(doc, "golden: output of kind %s is not JSON", kind);
        drop_wall_clock(doc);
        free(raw);
        char *printed = cJSON_Print(doc);
        cJSON_Delete(doc);
        size_t n = strlen(printed);
        raw = malloc(n + 2);
        memcpy(raw, printed, n);
        memcpy(raw + n, "\n", 2);
        free(printed);
    }
    if (strcmp(kind, "text") == 0) mask_wall_clock_text(raw);
    char *a = replace_all(raw, dir, "$DIR");
    char *b = replace_all(a, data_root(), "$DATA");
    free(raw);
    free(a);
    return b;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "golden: cannot write %s", path);
    cr_assert(fputs(text, f) >= 0 && fclose(f) == 0, "golden: write failed: %s", path);
}

/* Runs one case line; returns 1 when it matched (or was rewritten). */
static int run_case(char *line, const char *dir, int update) {
    const char *args[CLI_MAX_ARGS + 1];
    char *argv_text[CLI_MAX_ARGS];
    int n = 0;
    char *save = NULL, *name = strtok_r(line, " \t\n", &save), *kind = strtok_r(NULL, " \t\n", &save);
    for (char *w = strtok_r(NULL, " \t\n", &save); w && n < CLI_MAX_ARGS; w = strtok_r(NULL, " \t\n", &save)) {
        argv_text[n] = replace_all(w, "$DIR", dir);
        args[n] = argv_text[n];
        n++;
    }
    args[n] = NULL;
    cr_assert(name && kind && n > 0, "golden: malformed case line");
    cli_result r = run_argv(args);
    cr_expect_eq(r.status, 0, "golden %s: exit %d: %s", name, r.status, r.err);
    char *got = r.status == 0 ? normalised(kind, dir, &r) : strdup("(failed)\n");
    char *golden_path = NULL;
    if (asprintf(&golden_path, "%s/tests/golden/%s.out", test_data_dir(), name) < 0) cr_assert_fail("asprintf");
    int ok = 1;
    if (update) {
        write_text(golden_path, got);
    } else {
        char *want = read_file(golden_path);
        ok = want != NULL && strcmp(want, got) == 0;
        if (!ok) {
            char actual[512];
            mkdir(GOLDEN_ACTUAL_DIR, 0755);
            snprintf(actual, sizeof actual, "%s/%s.out", GOLDEN_ACTUAL_DIR, name);
            write_text(actual, got);
            cr_expect(ok, "golden %s differs from %s (actual in %s)", name, golden_path, actual);
        }
        free(want);
    }
    free(golden_path);
    free(got);
    cli_result_free(&r);
    for (int i = 0; i < n; i++) free(argv_text[i]);
    return ok;
}

Test(golden, every_case_byte_identical, .timeout = 600) {
    char *cases_path = test_data_path("tests/golden/cases.txt");
    char *cases = read_file(cases_path);
    cr_assert_not_null(cases, "golden: cannot read %s", cases_path);
    const char *env = getenv("TESSERA_GOLDEN_UPDATE");
    int update = env && strcmp(env, "1") == 0;
    char *dir = make_temp_dir();
    int total = 0, matched = 0;
    char *save = NULL;
    for (char *line = strtok_r(cases, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#' || line[strspn(line, " \t")] == '\0') continue;
        char *copy = strdup(line);
        matched += run_case(copy, dir, update);
        free(copy);
        total++;
    }
    cr_expect_geq(total, 12, "golden: %d cases, the acceptance asks for at least 12", total);
    cr_expect_eq(matched, total, "golden: %d of %d cases match", matched, total);
    remove_dir(dir);
    free(cases);
    free(cases_path);
}
