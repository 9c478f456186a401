/* Tests for common/json.c: syntax errors carry line:col, figures may be {"value", "source"},
 * readers refuse wrong types and ranges naming file, path, expected and got, and atomic writes
 * leave exactly the target file behind. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/json.h"

static cJSON *parse_ok(const char *text) {
    cJSON *root = NULL;
    ts_error_clear();
    cr_assert_eq(ts_json_parse("t.json", text, &root), TS_OK, "%s", ts_error_message());
    return root;
}

Test(json, truncated_input_reports_line_col) {
    cJSON *root = NULL;
    ts_error_clear();
    cr_assert_eq(ts_json_parse("t.json", "{\n  \"a\": [1, 2", &root), TS_ERR_INPUT);
    cr_assert_null(root);
    cr_assert_str_eq(ts_error_message(),
                     "t.json:2:13: invalid JSON: unexpected end of input (truncated?)");
    ts_error_clear();
    cr_assert_eq(ts_json_parse("t.json", "{\"a\": tru }", &root), TS_ERR_INPUT);
    cr_assert_str_eq(ts_error_message(), "t.json:1:7: invalid JSON near 'tru }'");
}

Test(json, value_source_form_reads_as_number) {
    cJSON *root = parse_ok("{\"hbm\": {\"value\": 8e10, \"source\": \"datasheet\"}, \"plain\": 3.5,"
                           " \"gpus\": {\"value\": 8, \"source\": \"x\"}}");
    ts_jreader r;
    ts_jreader_root(&r, "t.json");
    double hbm = 0, plain = 0;
    int64_t gpus = 0;
    cr_assert_eq(ts_jr_num(&r, root, "hbm", 1, 0, 1e15, 0, &hbm), TS_OK, "%s", ts_error_message());
    cr_assert_eq(hbm, 8e10);
    cr_assert_eq(ts_jr_num(&r, root, "plain", 1, 0, 10, 0, &plain), TS_OK);
    cr_assert_eq(plain, 3.5);
    cr_assert_eq(ts_jr_int(&r, root, "gpus", 1, 1, 1024, 0, &gpus), TS_OK);
    cr_assert_eq(gpus, 8);
    cJSON_Delete(root);
}

/* "-0" reads as zero, not negative zero: a value reads back from Tessera's JSON bit for bit (the
 * Hugging Face fuzz harness compares a model with its round trip). */
Test(json, negative_zero_reads_as_zero) {
    cJSON *root = parse_ok("{\"theta\": -0.0}");
    ts_jreader r;
    ts_jreader_root(&r, "t.json");
    double v = 1;
    cr_assert_eq(ts_jr_num(&r, root, "theta", 1, 0, 10, 0, &v), TS_OK, "%s", ts_error_message());
    cr_expect(v == 0 && !signbit(v), "%g", v);
    cJSON_Delete(root);
}

Test(json, missing_and_default) {
    cJSON *root = parse_ok("{\"gpu\": {}}");
    ts_jreader r, g;
    ts_jreader_root(&r, "t.json");
    ts_jreader_child(&r, "gpu", 0, &g);
    const cJSON *gpu = cJSON_GetObjectItemCaseSensitive(root, "gpu");
    double v = 0;
    cr_assert_eq(ts_jr_num(&g, gpu, "power_w", 0, 0, 1e5, 700, &v), TS_OK);
    cr_assert_eq(v, 700);
    cr_assert_eq(ts_jr_num(&g, gpu, "hbm_bytes", 1, 1, 1e15, 0, &v), TS_ERR_INPUT);
    cr_assert_str_eq(ts_error_message(), "t.json: $.gpu.hbm_bytes: missing field, expected a number");
    cJSON_Delete(root);
}

Test(json, int_reader_rejects_fractions_and_huge) {
    cJSON *root = parse_ok("{\"a\": 1.5, \"b\": 1e30, \"c\": \"8\"}");
    ts_jreader r;
    ts_jreader_root(&r, "t.json");
    int64_t v = 0;
    cr_assert_eq(ts_jr_int(&r, root, "a", 1, 0, 100, 0, &v), TS_ERR_INPUT);
    cr_assert_str_eq(ts_error_message(), "t.json: $.a: expected an integer in [0, 100], got 1.5");
    ts_error_clear();
    cr_assert_eq(ts_jr_int(&r, root, "b", 1, 0, INT64_MAX, 0, &v), TS_ERR_INPUT);
    cr_assert_str_eq(ts_error_message(),
                     "t.json: $.b: expected an integer in [0, 9223372036854775807], got 1e+30");
    ts_error_clear();
    cr_assert_eq(ts_jr_int(&r, root, "c", 1, 0, 100, 0, &v), TS_ERR_INPUT);
    cr_assert_str_eq(ts_error_message(),
                     "t.json: $.c: expected an integer in [0, 100], got a string");
    cJSON_Delete(root);
}

Test(json, enum_reader_lists_choices) {
    static const char *const names[] = {"bf16", "fp16", "fp8", "fp32", NULL};
    cJSON *root = parse_ok("{\"dtype\": \"int4\", \"ok\": \"fp8\"}");
    ts_jreader r;
    ts_jreader_root(&r, "t.json");
    int v = -1;
    cr_assert_eq(ts_jr_enum(&r, root, "ok", 1, names, 0, &v), TS_OK);
    cr_assert_eq(v, 2);
    cr_assert_eq(ts_jr_enum(&r, root, "dtype", 1, names, 0, &v), TS_ERR_INPUT);
    cr_assert_str_eq(ts_error_message(), "t.json: $.dtype: expected \"bf16\" | \"fp16\" | \"fp8\" | "
                                         "\"fp32\", got \"int4\"");
    cJSON_Delete(root);
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "cannot open %s", dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
    closedir(d);
    return n;
}

static void assert_file_is(const char *path, const char *want) {
    char buf[64] = "";
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    cr_assert_str_eq(buf, want);
}

Test(json, write_file_atomic_leaves_no_temp_file) {
    char dir[] = "/tmp/tessera-json-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/out.json", dir);
    ts_error_clear();
    cr_assert_eq(ts_write_file_atomic(path, "{\"a\": 1}\n", 9), TS_OK, "%s", ts_error_message());
    assert_file_is(path, "{\"a\": 1}\n");
    cr_assert_eq(count_entries(dir), 1);
    /* replacing an existing file */
    cr_assert_eq(ts_write_file_atomic(path, "[]\n", 3), TS_OK, "%s", ts_error_message());
    assert_file_is(path, "[]\n");
    cr_assert_eq(count_entries(dir), 1);
    /* a directory that does not exist: an error, and nothing created */
    char bad[160];
    snprintf(bad, sizeof bad, "%s/missing/out.json", dir);
    cr_assert_eq(ts_write_file_atomic(bad, "x", 1), TS_ERR_IO);
    cr_assert_eq(count_entries(dir), 1);
    unlink(path);
    rmdir(dir);
}

/* A key twice in one object is refused with its JSON path, in small objects and in large ones
 * (sorted), nested in arrays too; the same key in two objects is fine. */
Test(json, duplicate_keys_are_refused_with_their_path) {
    cJSON *root = NULL;
    ts_error_clear();
    cr_expect_eq(ts_json_parse("t.json", "{\"a\": 1, \"b\": {\"c\": 1, \"c\": 2}}", &root), TS_ERR_INPUT);
    cr_expect_null(root);
    cr_expect(strstr(ts_error_message(), "t.json: $.b.c: duplicate key \"c\"") != NULL, "%s", ts_error_message());
    char big[4096] = "{\"l\": [0, {";
    for (int i = 0; i < 40; i++) snprintf(big + strlen(big), sizeof big - strlen(big), "\"k%d\": %d, ", i, i);
    strcat(big, "\"k7\": 0}]}");
    ts_error_clear();
    cr_expect_eq(ts_json_parse("t.json", big, &root), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "$.l[1].k7: duplicate key \"k7\"") != NULL, "%s", ts_error_message());
    cJSON_Delete(parse_ok("{\"a\": {\"x\": 1}, \"b\": {\"x\": 1}, \"c\": [{\"x\": 1}, {\"x\": 2}]}"));
}

/* Integers are checked as doubles before any conversion: 1e300, 2^63 and 0.5 are refused. */
Test(json, int_in_checks_before_converting) {
    cJSON *root = parse_ok("[1e300, 9223372036854775808, 0.5, -3, 42]");
    int64_t v = 0;
    cr_expect_not(ts_json_int_in(cJSON_GetArrayItem(root, 0), 0, INT64_MAX, &v));
    cr_expect_not(ts_json_int_in(cJSON_GetArrayItem(root, 1), INT64_MIN, INT64_MAX, &v));
    cr_expect_not(ts_json_int_in(cJSON_GetArrayItem(root, 2), 0, 10, &v));
    cr_expect_not(ts_json_int_in(cJSON_GetArrayItem(root, 3), 0, 10, &v));
    cr_expect(ts_json_int_in(cJSON_GetArrayItem(root, 4), 0, 100, &v) && v == 42);
    cJSON_Delete(root);
}

/* A FIFO is read as a stream (no seek), and so is anything else that cannot seek. */
Test(json, load_file_reads_a_fifo) {
    char dir[] = "/tmp/tessera-json-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/in.json", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        FILE *f = fopen(path, "w");
        fputs("{\"a\": [1, 2, 3]}", f);
        fclose(f);
        _exit(0);
    }
    cJSON *root = NULL;
    ts_error_clear();
    cr_expect_eq(ts_json_load_file(path, &root), TS_OK, "%s", ts_error_message());
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "a")), 3);
    cJSON_Delete(root);
    waitpid(pid, NULL, 0);
    unlink(path);
    rmdir(dir);
}

/* The output rule: a link stays a link (its target is written), a device is written in place
 * and its failure names the user's path, not a temporary file. */
Test(json, write_follows_links_and_writes_devices_in_place) {
    char dir[] = "/tmp/tessera-json-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char target[128], link[128];
    snprintf(target, sizeof target, "%s/target.json", dir);
    snprintf(link, sizeof link, "%s/link.json", dir);
    cr_assert_eq(symlink("target.json", link), 0); /* dangling until written */
    ts_error_clear();
    cr_expect_eq(ts_write_file_atomic(link, "[]\n", 3), TS_OK, "%s", ts_error_message());
    struct stat st;
    cr_expect(lstat(link, &st) == 0 && S_ISLNK(st.st_mode), "the link was replaced");
    assert_file_is(target, "[]\n");
    cr_expect_eq(ts_write_file_atomic(link, "{}\n", 3), TS_OK, "%s", ts_error_message());
    assert_file_is(target, "{}\n");
    cr_expect_eq(count_entries(dir), 2);
    cr_expect_eq(ts_write_file_atomic("/dev/null", "x", 1), TS_OK, "%s", ts_error_message());
    cr_expect(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode));
    ts_error_clear();
    cr_expect_eq(ts_write_file_atomic("/dev/full", "x", 1), TS_ERR_IO);
    cr_expect_str_eq(ts_error_message(), "/dev/full: write failed: No space left on device");
    unlink(link);
    unlink(target);
    rmdir(dir);
}
