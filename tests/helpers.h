/* Small helpers shared by the Criterion tests: where the repository's data lies, and temporary
 * files. Exit-on-error is fine here (tests are an edge, STYLE.md): a helper that cannot do its job
 * aborts the test with a message. */
#ifndef TS_TESTS_HELPERS_H
#define TS_TESTS_HELPERS_H

/* The repository root: $TESSERA_DATA (set by `make test`), else ".". */
const char *test_data_dir(void);

/* "<data dir>/<rel>" in a malloc'd string the caller frees. Use "../shared/..." for the shared
 * folder beside the repository. */
char *test_data_path(const char *rel);

/* Writes `content` to a new file /tmp/tessera-test-XXXXXX.json and returns its malloc'd path;
 * the caller removes it with test_remove_temp. */
char *test_write_temp(const char *content);

/* Unlinks the file and frees the path (NULL is ignored). */
void test_remove_temp(char *path);

#endif
