/* `tessera report` as users see it (subprocesses, tests/helpers.h):
 *  - the HTML page renders: headless Chromium screenshots it, the PNG is decoded (libpng) and
 *    must show many colours on a mostly-white page, not a blank one; Chromium missing fails the
 *    test (scripts/deps.sh installs it);
 *  - every number the page shows is the JSON form's and tagged (tests/tagged.h), the page is
 *    self-contained (no scripts, no fetched resources) and byte-identical from run to run;
 *  - golden Markdown and CSV for a small fixed plan (llama2-7b on 16 h100-sxm-dgx, top 3);
 *    regenerate with TESSERA_UPDATE_GOLDEN=1; the CSV tables other than layouts hold every
 *    scalar of the JSON form's sections, each the JSON's value;
 *  - CSV is one tidy table per file: -o PREFIX and -o DIR/ name them, no -o is misuse, a
 *    failure leaves no file and no temporary;
 *  - the capacity arithmetic, --tokens/--price; no energy for a system without a power figure;
 *  - suite `mpi`: the report beside a real `tessera run` (tiny, 2 ranks) and its trace;
 *  - bad input exits 2 with one line. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "reports/numfmt.h"
#include "tests/helpers.h"
#include "tests/tagged.h"

/* A plan in `dir` from `tessera plan ARGS... -o dir/name`. */
static char *make_plan(const char *dir, const char *name, const char *const *args) {
    char *path = malloc(4096);
    cr_assert_not_null(path);
    snprintf(path, 4096, "%s/%s", dir, name);
    const char *argv[CLI_MAX_ARGS + 1];
    int n = 0;
    argv[n++] = "plan";
    for (int i = 0; args[i]; i++) argv[n++] = args[i];
    argv[n++] = "-o";
    argv[n++] = path;
    argv[n] = NULL;
    cli_result r = run_argv(argv);
    cr_assert_eq(r.status, 0, "plan: exit %d, stderr: %s", r.status, r.err);
    cli_result_free(&r);
    return path;
}

static const char *const small_plan[] = {"--model", "llama2-7b", "--system", "h100-sxm-dgx", "--gpus", "16",
                                         "--top", "3", NULL};
/* A pipeline, so the timeline has several rows; more layouts than the charts draw. */
static const char *const pipe_plan[] = {"--model", "llama2-13b", "--system", "h100-sxm-dgx", "--gpus", "32",
                                        "--global-batch", "64", "--fix", "pp=4", "--top", "12", NULL};

/* stdout of `tessera report --plan PLAN --format FMT [extra...]`, asserting success. */
static char *report(const char *plan, const char *format, const char *extra1, const char *extra2) {
    const char *argv[12];
    int n = 0;
    argv[n++] = "report", argv[n++] = "--plan", argv[n++] = plan, argv[n++] = "--format", argv[n++] = format;
    if (extra1) argv[n++] = extra1;
    if (extra2) argv[n++] = extra2;
    argv[n] = NULL;
    cli_result r = run_argv(argv);
    cr_assert_eq(r.status, 0, "report --format %s: exit %d, stderr: %s", format, r.status, r.err);
    cr_expect_eq(r.err_len, 0, "report --format %s: stderr: %s", format, r.err);
    char *out = r.out;
    free(r.err);
    return out;
}

/* The CSV tables of a report without a run, in the order they are written (reports/text.h). */
static const char *const csv_tables[] = {"layouts", "question", "answer",          "simulation", "stages", "op_kinds",
                                         "capacity", "system", "gemm_efficiency", "training",   "sources"};
#define N_CSV_TABLES (int)(sizeof csv_tables / sizeof csv_tables[0])

/* `tessera report --plan PLAN [FORMAT] -o DEST` (FORMAT NULL: "--format=csv"; "": none, the
 * format taken from DEST), asserting success and that stdout is "# wrote BASE<table>.csv" for
 * every table in order, BASE being DIR/ or PREFIX- (NULL: DEST-). */
static void csv_report(const char *plan, const char *dest, const char *base, const char *format) {
    char prefix[4096], want[16384] = "";
    if (!base) snprintf(prefix, sizeof prefix, "%s-", dest), base = prefix;
    for (int t = 0; t < N_CSV_TABLES; t++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "# wrote %s%s.csv\n", base, csv_tables[t]);
    const char *argv[] = {"report", "--plan", plan, "-o", dest, format ? format : "--format=csv", NULL};
    if (format && !*format) argv[5] = NULL;
    cli_result r = run_argv(argv);
    cr_assert_eq(r.status, 0, "report -o %s: exit %d, stderr: %s", dest, r.status, r.err);
    cr_expect_eq(r.err_len, 0, "report -o %s: stderr: %s", dest, r.err);
    cr_expect_str_eq(r.out, want, "report -o %s: the files listed", dest);
    cli_result_free(&r);
}

static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* ---- the page renders --------------------------------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* Removes `dir` with everything below it (Chromium leaves a profile folder) and frees the path. */
static void remove_tree(char *dir) {
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

/* Runs `chromium` headless on file://html, screenshot to png; returns the exit status (127: not
 * installed). */
static int screenshot(const char *dir, const char *html, const char *png) {
    char shot[4200], url[4200], profile[4200];
    snprintf(shot, sizeof shot, "--screenshot=%s", png);
    snprintf(url, sizeof url, "file://%s", html);
    snprintf(profile, sizeof profile, "--user-data-dir=%s/chromium-profile", dir);
    char *const argv[] = {"chromium", "--headless", "--no-sandbox", "--disable-gpu",
                          "--disable-background-networking", shot, "--window-size=1400,2000", profile, url, NULL};
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, STDOUT_FILENO), dup2(null, STDERR_FILENO);
        alarm(120);
        execvp(argv[0], argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0) cr_assert_eq(errno, EINTR, "waitpid: %s", strerror(errno));
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

Test(reports, html_renders_in_headless_chromium, .timeout = 300) {
    char *dir = make_temp_dir();
    char *plan = make_plan(dir, "plan.json", pipe_plan);
    char html[4096], png[4096];
    snprintf(html, sizeof html, "%s/report.html", dir);
    snprintf(png, sizeof png, "%s/report.png", dir);
    cli_result r = run_cli("report", "--plan", plan, "-o", html, NULL);
    cr_assert_eq(r.status, 0, "report -o: exit %d, stderr: %s", r.status, r.err);
    cli_result_free(&r);
    int st = screenshot(dir, html, png);
    cr_assert_neq(st, 127, "chromium is not installed: run scripts/deps.sh (it installs the chromium package)");
    cr_assert_eq(st, 0, "chromium --headless --screenshot exited %d", st);

    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    cr_assert(png_image_begin_read_from_file(&img, png), "%s: %s", png, img.message);
    img.format = PNG_FORMAT_RGB;
    unsigned char *px = malloc(PNG_IMAGE_SIZE(img));
    cr_assert_not_null(px);
    cr_assert(png_image_finish_read(&img, NULL, px, 0, NULL), "%s: %s", png, img.message);
    cr_expect_eq(img.width, 1400u);
    cr_expect_eq(img.height, 2000u);
    /* A blank page is one colour; the report has text, tables and charts in several colours. */
    static unsigned char seen[1 << 15];
    memset(seen, 0, sizeof seen);
    size_t pixels = (size_t)img.width * img.height, inked = 0;
    int colours = 0;
    for (size_t i = 0; i < pixels; i++) {
        const unsigned char *p = px + 3 * i;
        inked += p[0] < 235 || p[1] < 235 || p[2] < 235;
        unsigned q = (unsigned)(p[0] >> 3) << 10 | (unsigned)(p[1] >> 3) << 5 | (unsigned)(p[2] >> 3);
        if (!seen[q]) seen[q] = 1, colours++;
    }
    cr_expect_gt(inked, pixels / 20, "only %zu of %zu pixels are not white: the page looks blank", inked, pixels);
    cr_expect_lt(inked, pixels * 9 / 10, "%zu of %zu pixels inked: the page did not render as a page", inked, pixels);
    cr_expect_geq(colours, 40, "only %d distinct colours (5 bits per channel): charts missing?", colours);
    free(px);
    free(plan);
    remove_tree(dir);
}

/* ---- numbers, self-containment, determinism -------------------------------------------------------- */

/* The chart row labels of the first chart ("#3 dp4 tp1 pp4 cp2 vpp5" less its "#3 ") must be
 * pairwise different: two bars must not read as the same layout. */
static void check_chart_labels_differ(const char *html, const char *what) {
    char labels[10][128];
    int n = 0;
    const char *p = strstr(html, "<svg "), *end = p ? strstr(p, "</svg>") : NULL;
    cr_assert(p && end, "%s: no chart", what);
    for (p = strstr(p, ">#"); p && p < end && n < 10; p = strstr(p + 1, ">#")) {
        const char *from = strchr(p, ' '), *close = strstr(p, "</text>");
        cr_assert(from && close && from < close, "%s: chart row label without a layout: %.60s", what, p);
        snprintf(labels[n++], sizeof labels[0], "%.*s", (int)(close - from - 1), from + 1);
    }
    cr_expect_geq(n, 2, "%s: fewer than two chart rows", what);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            cr_expect_str_neq(labels[i], labels[j], "%s: chart rows #%d and #%d both read \"%s\"", what, j + 1, i + 1,
                              labels[i]);
}

static void check_page(const char *html, const cJSON *json, const char *what, int pp) {
    tagged_stats st = check_tagged(html, json, what);
    cr_expect_eq(st.failures, 0, "%s: %d tagged values differ from the JSON form", what, st.failures);
    cr_expect_geq(st.numbers, 150, "%s: only %d tagged numbers", what, st.numbers);
    static const char *const keys[] = {
        "answer.step_s", "answer.tokens_per_s", "answer.mfu", "question.gpus", "capacity.train_days",
        "capacity.gpu_hours", "capacity.cost_usd", "capacity.energy_kwh", "capacity.price_per_gpu_hour",
        "layouts[0].memory_bytes.weights", "layouts[0].memory_bytes.activations", "layouts[0].time_s.compute",
        "layouts[0].time_s.pp_bubble", "layouts[0].time_s.dp_comm", "simulation.step_s",
        "simulation.stages[0].busy_s", "simulation.kind_s_per_rank.gemm", "assumptions.system.hbm_bytes",
        "assumptions.system.gemm_efficiency_points[0][1]", "assumptions.training.global_batch"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        cr_expect(has_tag(html, keys[i]), "%s: no tagged %s", what, keys[i]);
    cr_expect(strstr(html, "<script") == NULL, "%s: holds a script", what);
    cr_expect(strstr(html, " src=") == NULL && strstr(html, " href=") == NULL && strstr(html, "url(") == NULL &&
                  strstr(html, "@import") == NULL,
              "%s: fetches a resource", what);
    cr_expect_geq(count(html, "<svg "), 3, "%s: memory, time and timeline charts", what);
    /* The memory chart with its dashed usable-HBM line, and the step-time chart, by their labels. */
    cr_expect(strstr(html, ">GB per GPU</text>") != NULL, "%s: no memory chart", what);
    cr_expect(strstr(html, "stroke-dasharray=\"6,4\"") != NULL && strstr(html, ">usable HBM</text>") != NULL,
              "%s: the memory chart has no usable-HBM line", what);
    cr_expect(strstr(html, ">seconds per step (closed form)</text>") != NULL, "%s: no step-time chart", what);
    cr_expect(strstr(html, ">time in the step (s)</text>") != NULL, "%s: no timeline", what);
    check_chart_labels_differ(html, what);
    char last_stage[32];
    snprintf(last_stage, sizeof last_stage, ">stage %d<", pp - 1);
    cr_expect(strstr(html, last_stage) != NULL, "%s: the timeline has no row \"stage %d\"", what, pp - 1);
}

/* The untagged-number check itself: what it must catch and what it must let through. */
Test(reports, untagged_numbers_are_caught) {
    static const struct {
        const char *html;
        int want;
    } cases[] = {
        {"<body><p>using 12.3 GB</p></body>", 1},
        {"<body><p>58% MFU, 1e+12 tokens, 7.</p></body>", 3},
        {"<body><td class=\"r\">42</td></body>", 1},
        {"<body><p><span class=\"n\" data-key=\"a\" data-unit=\"\">12.3</span> GB</p></body>", 0},
        {"<body><p>llama2-13b on h100-sxm-dgx, bf16, 1f1b, 16-bit, the system&#39;s</p></body>", 0},
        {"<body><svg><text class=\"tick\" x=\"1\">40</text><text>stage 3</text><text>#2 dp8 tp1</text></svg>"
         "</body>", 0},
        {"<body><svg><text x=\"1\">40</text></svg></body>", 1},
        {"<body><p>stage 3, #2</p></body>", 2}, /* the allow-list holds inside charts only */
        {"<head><title>32 GPUs</title></head><body><p>none</p></body>", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char first[4][160];
        int n = untagged_numbers(cases[i].html, first, 4);
        cr_expect_eq(n, cases[i].want, "case %zu: %d untagged numbers, want %d (%s)", i, n, cases[i].want,
                     n ? first[0] : "none");
    }
}

Test(reports, html_numbers_are_the_json_numbers) {
    char *dir = make_temp_dir();
    char *plan = make_plan(dir, "plan.json", pipe_plan);
    char *html = report(plan, "html", NULL, NULL), *again = report(plan, "html", NULL, NULL);
    char *text = report(plan, "json", NULL, NULL);
    cJSON *json = cJSON_Parse(text);
    cr_assert_not_null(json, "report --format json is not JSON");
    cr_expect_str_eq(json_str(json, "tessera", "$"), "report");
    const cJSON *stages = cJSON_GetObjectItem(json_obj(json, "simulation", "$"), "stages");
    cr_expect_eq(cJSON_GetArraySize(stages), 4, "pp=4: four simulated stages");
    check_page(html, json, "report.html", 4);
    cr_expect_eq(count(html, "The chart shows the best ten layouts."), 2, "12 layouts, 10 bars per chart");
    cr_expect_str_eq(html, again, "two runs of the same report differ");
    cJSON_Delete(json);
    free(html);
    free(again);
    free(text);
    free(plan);
    remove_dir(dir);
}

Test(reports, capacity_arithmetic_and_options) {
    char *dir = make_temp_dir();
    char *plan = make_plan(dir, "plan.json", small_plan);
    char *text = report(plan, "json", "--tokens=2e12", "--price=3.5");
    cJSON *json = cJSON_Parse(text);
    cr_assert_not_null(json);
    const cJSON *cap = json_obj(json, "capacity", "$"), *best = cJSON_GetArrayItem(cJSON_GetObjectItem(json, "layouts"), 0);
    double tps = json_num(best, "tokens_per_s", "layouts[0]"), step = json_num(best, "step_s", "layouts[0]");
    cr_expect(fabs(tps - 1024.0 * 4096 / step) <= 1e-9 * tps, "tokens/s = batch × seq / step");
    cr_expect_eq(json_num(cap, "tokens", "capacity"), 2e12);
    double train_s = json_num(cap, "train_s", "capacity"), hours = json_num(cap, "gpu_hours", "capacity");
    cr_expect(fabs(train_s - 2e12 / tps) <= 1e-9 * train_s, "time = tokens / tokens/s");
    cr_expect(fabs(json_num(cap, "train_days", "capacity") - train_s / 86400) <= 1e-9 * train_s);
    cr_expect(fabs(hours - 16 * train_s / 3600) <= 1e-9 * hours, "GPU-hours = GPUs × hours");
    cr_expect(fabs(json_num(cap, "cost_usd", "capacity") - 3.5 * hours) <= 1e-9 * hours, "cost = GPU-hours × price");
    cr_expect(fabs(json_num(cap, "energy_kwh", "capacity") - hours * 700 / 1000) <= 1e-9 * hours,
              "energy = GPU-hours × 700 W");
    cr_expect(!cJSON_IsTrue(cJSON_GetObjectItem(cap, "price_is_default")));
    cr_expect(cJSON_GetObjectItem(json, "measured") == NULL, "no run given, no measured section");
    cJSON_Delete(json);
    free(text);
    /* The default price is said to be the default. */
    char *md = report(plan, "md", NULL, NULL);
    cr_expect(strstr(md, "$2.00 per GPU-hour (the default price") != NULL, "the default price is not flagged");
    free(md);
    free(plan);
    remove_dir(dir);
}

/* A system without a power figure (cpu-localhost: "power_w" 0, "unknown"): no energy anywhere,
 * rather than 0 kWh. */
Test(reports, energy_left_out_without_power) {
    char *dir = make_temp_dir();
    static const char *const cpu[] = {"--model", "tiny", "--system", "cpu-localhost", "--gpus", "2",
                                      "--global-batch", "8", "--seq", "64", "--top", "2", NULL};
    char *plan = make_plan(dir, "plan.json", cpu);
    char *html = report(plan, "html", NULL, NULL), *md = report(plan, "md", NULL, NULL);
    char *text = report(plan, "json", NULL, NULL), prefix[4096], capacity[4200];
    snprintf(prefix, sizeof prefix, "%s/t", dir);
    csv_report(plan, prefix, NULL, NULL);
    snprintf(capacity, sizeof capacity, "%s-capacity.csv", prefix);
    char *csv = read_file(capacity);
    cr_assert_not_null(csv, "%s was not written", capacity);
    cJSON *json = cJSON_Parse(text);
    cr_assert_not_null(json);
    const cJSON *cap = json_obj(json, "capacity", "$");
    cr_expect(json_num(cap, "gpu_hours", "capacity") > 0, "the other figures are there");
    cr_expect(cJSON_GetObjectItem(cap, "energy_kwh") == NULL && cJSON_GetObjectItem(cap, "power_w") == NULL,
              "JSON: energy without a power figure");
    cr_expect(strstr(md, "| energy at") == NULL && strstr(md, "kWh") == NULL, "Markdown: energy without a power figure");
    cr_expect(strstr(csv, "energy_kwh") == NULL && strstr(csv, "power_w") == NULL, "CSV: energy without a power figure");
    cr_expect(!has_tag(html, "capacity.energy_kwh") && strstr(html, "energy at") == NULL && strstr(html, "kWh") == NULL,
              "HTML: energy without a power figure");
    tagged_stats st = check_tagged(html, json, "report.html on cpu-localhost");
    cr_expect_eq(st.failures, 0);
    cJSON_Delete(json);
    free(html);
    free(md);
    free(csv);
    free(text);
    free(plan);
    remove_tree(dir);
}

/* ---- golden Markdown and CSV ---------------------------------------------------------------------- */

static void check_golden(const char *got, const char *rel) {
    char *path = test_data_path(rel);
    if (getenv("TESSERA_UPDATE_GOLDEN")) {
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f, "cannot write %s", path);
        fputs(got, f);
        fclose(f);
    }
    char *want = read_file(path);
    cr_assert_not_null(want, "missing golden %s (regenerate with TESSERA_UPDATE_GOLDEN=1)", path);
    /* Line by line, so a difference names its line. */
    const char *g = got, *w = want;
    for (int line = 1; *g || *w; line++) {
        size_t gl = strcspn(g, "\n"), wl = strcspn(w, "\n");
        cr_assert(gl == wl && strncmp(g, w, gl) == 0, "%s:%d differs:\n  got:  %.*s\n  want: %.*s", rel, line,
                  (int)gl, g, (int)wl, w);
        g += gl + (g[gl] == '\n');
        w += wl + (w[wl] == '\n');
    }
    free(want);
    free(path);
}

Test(reports, golden_markdown_and_csv) {
    char *dir = make_temp_dir();
    char *plan = make_plan(dir, "plan.json", small_plan);
    char *md = report(plan, "md", NULL, NULL);
    check_golden(md, "tests/data/reports/llama2-7b-16xh100.md");
    char prefix[4096];
    snprintf(prefix, sizeof prefix, "%s/golden", dir);
    csv_report(plan, prefix, NULL, NULL);
    for (int t = 0; t < N_CSV_TABLES; t++) {
        char path[4200], rel[256];
        snprintf(path, sizeof path, "%s-%s.csv", prefix, csv_tables[t]);
        snprintf(rel, sizeof rel, "tests/data/reports/llama2-7b-16xh100-%s.csv", csv_tables[t]);
        char *csv = read_file(path);
        cr_assert_not_null(csv, "%s was not written", path);
        check_golden(csv, rel);
        free(csv);
    }
    free(md);
    free(plan);
    remove_dir(dir);
}

/* The next RFC 4180 field of a CSV record at *p into buf (quotes undone); *p moves past the
 * field's comma, or stops at the end of the record. Returns 0 at the end of the record. */
static int csv_next(const char **p, char *buf, size_t cap) {
    const char *s = *p;
    size_t n = 0;
    if (*s == '\n' || *s == '\0') return 0;
    if (*s == '"') {
        for (s++; *s && !(*s == '"' && s[1] != '"'); s++) {
            if (*s == '"') s++; /* a doubled quote */
            if (n + 1 < cap) buf[n++] = *s;
        }
        cr_assert_eq(*s, '"', "unterminated quoted CSV field");
        s++;
    } else {
        for (; *s && *s != ',' && *s != '\n'; s++)
            if (n + 1 < cap) buf[n++] = *s;
    }
    buf[n] = '\0';
    cr_assert(*s == ',' || *s == '\n' || *s == '\0', "CSV field followed by '%c'", *s);
    *p = s + (*s == ',');
    return 1;
}

/* Scalars under a JSON item (objects and arrays walked). */
static int json_leaves(const cJSON *item) {
    if (!cJSON_IsObject(item) && !cJSON_IsArray(item)) return 1;
    int n = 0;
    for (const cJSON *c = item->child; c; c = c->next) n += json_leaves(c);
    return n;
}

/* One CSV file's records, split into fields (RFC 4180, csv_next): row 0 is the header. */
#define CSV_MAX_ROWS 64
#define CSV_MAX_COLS 48
typedef struct {
    int rows, cols;
    char cell[CSV_MAX_ROWS][CSV_MAX_COLS][512];
} csv_table;

/* Reads `path` into *t (heap: the caller frees it), asserting that it is tidy: a header, then
 * records with exactly as many fields each, no blank line. */
static csv_table *read_csv(const char *path) {
    char *text = read_file(path);
    cr_assert_not_null(text, "%s was not written", path);
    csv_table *t = calloc(1, sizeof *t);
    cr_assert_not_null(t);
    for (const char *p = text; *p; p++, t->rows++) {
        cr_assert_lt(t->rows, CSV_MAX_ROWS, "%s: more than %d rows", path, CSV_MAX_ROWS);
        int n = 0;
        while (n < CSV_MAX_COLS && csv_next(&p, t->cell[t->rows][n], sizeof t->cell[0][0])) n++;
        cr_assert(*p == '\n', "%s:%d: no line end after %d fields (blank line or too many fields)", path, t->rows + 1, n);
        if (t->rows == 0) t->cols = n;
        cr_assert(n > 0 && n == t->cols, "%s:%d: %d fields under a header of %d", path, t->rows + 1, n, t->cols);
    }
    cr_assert_gt(t->rows, 1, "%s: no rows under the header", path);
    free(text);
    return t;
}

/* The JSON path of a table's cell (data row `row`, column `col`; `kind` is the row's first
 * field); 0 for a cell that is no JSON value (the op kinds' names are keys). */
static int cell_path(const char *table, const csv_table *t, int row, int col, char *buf, size_t cap) {
    const char *column = t->cell[0][col], *first = t->cell[row + 1][0];
    if (strcmp(table, "stages") == 0) snprintf(buf, cap, "simulation.stages[%d].%s", row, column);
    else if (strcmp(table, "op_kinds") == 0 && col == 0) return 0;
    else if (strcmp(table, "op_kinds") == 0 && strcmp(column, "error") == 0) {
        if (t->cell[row + 1][col][0] == '\0') return 0; /* no measured op of the kind */
        snprintf(buf, cap, "measured.kind_error.%s", first);
    } else if (strcmp(table, "op_kinds") == 0)
        snprintf(buf, cap, "%s.kind_s_per_rank.%s", strcmp(column, "measured_s_per_rank") == 0 ? "measured" : "simulation",
                 first);
    else if (strcmp(table, "measured") == 0 && starts_with(column, "step_") && strcmp(column, "step_s") != 0)
        snprintf(buf, cap, "measured.step_s.%.*s", (int)strlen(column) - 7, column + 5); /* step_p10_s */
    else if (strcmp(table, "gemm_efficiency") == 0)
        snprintf(buf, cap, "assumptions.system.gemm_efficiency_points[%d][%d]", row, col);
    else if (strcmp(table, "sources") == 0) snprintf(buf, cap, "assumptions.sources[%d]", row);
    else if (strcmp(table, "system") == 0 || strcmp(table, "training") == 0)
        snprintf(buf, cap, "assumptions.%s.%s", table, column);
    else snprintf(buf, cap, "%s.%s", table, column);
    if (strstr("stages op_kinds gemm_efficiency sources", table) == NULL)
        cr_expect_eq(t->rows, 2, "%s: one row under the header, got %d", table, t->rows - 1);
    return 1;
}

static void expect_json_value(const cJSON *json, const char *where, const char *path, const char *value) {
    const cJSON *item = json_at_path(json, path);
    cr_assert_not_null(item, "%s: %s is not in the JSON form", where, path);
    if (cJSON_IsNumber(item)) {
        char *end;
        double v = strtod(value, &end);
        cr_expect(*end == '\0' && fabs(v - item->valuedouble) <= 1e-9 * fabs(item->valuedouble), "%s: CSV %s, JSON %s %.17g",
                  where, value, path, item->valuedouble);
    } else if (cJSON_IsBool(item)) {
        cr_expect_str_eq(value, cJSON_IsTrue(item) ? "true" : "false", "%s: %s", where, path);
    } else {
        cr_expect(cJSON_IsString(item) && strcmp(value, item->valuestring) == 0, "%s: CSV \"%s\", JSON %s", where,
                  value, path);
    }
}

/* Checks the tables named `tables` (n) in DIR/TABLE.csv against the JSON form: each is tidy,
 * each cell of every table but layouts is the value at its path, and together the cells are
 * every scalar of the JSON form's sections. */
static void expect_tables_are_json(const cJSON *json, const char *dir, const char *const *tables, int n) {
    int cells = 0;
    for (int k = 0; k < n; k++) {
        char path[4200], where[4400], at[256];
        snprintf(path, sizeof path, "%s%s.csv", dir, tables[k]);
        csv_table *t = read_csv(path);
        for (int row = 0; row + 1 < t->rows && strcmp(tables[k], "layouts") != 0; row++)
            for (int col = 0; col < t->cols; col++) {
                if (!cell_path(tables[k], t, row, col, at, sizeof at)) continue;
                if (snprintf(where, sizeof where, "%s:%d %s", path, row + 2, t->cell[0][col]) < 0) where[0] = '\0';
                expect_json_value(json, where, at, t->cell[row + 1][col]);
                cells++;
            }
        free(t);
    }
    int leaves = 0;
    for (const cJSON *s = json->child; s; s = s->next)
        if (cJSON_IsObject(s)) leaves += json_leaves(s);
    cr_expect_eq(cells, leaves, "%d CSV cells for %d scalars in the JSON form's sections", cells, leaves);
}

Test(reports, csv_tables_are_the_json_values) {
    char *dir = make_temp_dir();
    char *plan = make_plan(dir, "plan.json", pipe_plan);
    char *text = report(plan, "json", NULL, NULL), dest[4096], path[4200];
    cJSON *json = cJSON_Parse(text);
    cr_assert_not_null(json);
    snprintf(dest, sizeof dest, "%s/", dir);
    csv_report(plan, dest, dest, NULL);
    expect_tables_are_json(json, dest, csv_tables, N_CSV_TABLES);
    snprintf(path, sizeof path, "%slayouts.csv", dest);
    csv_table *t = read_csv(path);
    cr_expect_eq(t->rows, 13, "header + 12 layouts");
    free(t);
    snprintf(path, sizeof path, "%sstages.csv", dest);
    t = read_csv(path);
    cr_expect_eq(t->rows, 5, "pp=4: header + 4 stages");
    free(t);
    cJSON_Delete(json);
    free(text);
    free(plan);
    remove_dir(dir);
}

/* With --run: a measured table (step_s's median, p10, p90 as step_median_s, ...) after
 * capacity, and the measured seconds beside the simulated ones in op_kinds. */
Test(reports, csv_with_a_run) {
    char *dir = make_temp_dir();
    char *plan = make_plan(dir, "plan.json", small_plan);
    char *run = test_write_temp("{\"layout\": \"dp=16\", \"ranks\": 16, \"steps\": 5, \"step_s\": {\"median\": 21.5,"
                                " \"p10\": 21.25, \"p90\": 22.75}, \"losses\": [10.5, 9.25], \"kind_s\": {\"gemm\": 16,"
                                " \"attention\": 2, \"elementwise\": 1.75, \"optimizer\": 0.125, \"collective\": 0.5,"
                                " \"send\": 0, \"recv\": 0}}");
    char run_flag[4200], dest[4096];
    snprintf(run_flag, sizeof run_flag, "--run=%s", run);
    snprintf(dest, sizeof dest, "%s/", dir);
    char *text = report(plan, "json", run_flag, NULL);
    cJSON *json = cJSON_Parse(text);
    cr_assert_not_null(json);
    cli_result r = run_cli("report", "--plan", plan, run_flag, "-o", dest, NULL);
    cr_assert_eq(r.status, 0, "exit %d, stderr: %s", r.status, r.err);
    cr_expect_eq(count_lines(r.out), N_CSV_TABLES + 1, "%s", r.out);
    cr_expect(strstr(r.out, "capacity.csv\n# wrote ") && strstr(r.out, "measured.csv\n# wrote "), "%s", r.out);
    cli_result_free(&r);
    const char *const tables[] = {"layouts",  "question", "answer", "simulation",      "stages",   "op_kinds",
                                  "capacity", "measured", "system", "gemm_efficiency", "training", "sources"};
    expect_tables_are_json(json, dest, tables, N_CSV_TABLES + 1);
    char path[4200];
    snprintf(path, sizeof path, "%smeasured.csv", dest);
    csv_table *t = read_csv(path);
    cr_expect(strcmp(t->cell[0][5], "step_median_s") == 0 && strcmp(t->cell[1][5], "21.5") == 0, "%s = %s",
              t->cell[0][5], t->cell[1][5]);
    cr_expect_str_eq(t->cell[0][8], "loss_first");
    free(t);
    snprintf(path, sizeof path, "%sop_kinds.csv", dest);
    t = read_csv(path);
    cr_expect_str_eq(t->cell[0][2], "measured_s_per_rank");
    cr_expect_str_eq(t->cell[1][2], "16");
    free(t);
    cJSON_Delete(json);
    free(text);
    test_remove_temp(run);
    free(plan);
    remove_dir(dir);
}

/* -o PREFIX: PREFIX-TABLE.csv, a ".csv" ending taking the format and dropped from the names;
 * nothing else left beside them. */
Test(reports, csv_prefix_mode) {
    char *dir = make_temp_dir();
    char *plan = make_plan(dir, "plan.json", small_plan);
    char dest[4096], base[4096], names[8192];
    snprintf(dest, sizeof dest, "%s/plan.csv", dir);
    snprintf(base, sizeof base, "%s/plan-", dir);
    csv_report(plan, dest, base, "");
    snprintf(dest, sizeof dest, "%s/x", dir);
    csv_report(plan, dest, NULL, "-Fcsv");
    cr_expect_eq(list_dir(dir, names, sizeof names), 1 + 2 * N_CSV_TABLES, "in %s: %s", dir, names);
    cr_expect(strstr(names, ".tmp") == NULL, "a temporary left: %s", names);
    snprintf(dest, sizeof dest, "%s/plan-layouts.csv", dir);
    csv_table *t = read_csv(dest);
    cr_expect_eq(t->rows, 4, "header + 3 layouts");
    cr_expect_str_eq(t->cell[0][0], "rank");
    cr_expect_str_eq(t->cell[0][21], "step_s");
    free(t);
    free(plan);
    remove_dir(dir);
}

/* -o DIR/ (the format taken from the slash) or an existing directory: DIR/TABLE.csv. */
Test(reports, csv_directory_mode) {
    char *dir = make_temp_dir();
    char *plan = make_plan(dir, "plan.json", small_plan);
    char out[4096], again[4096], base[4200], names[8192];
    snprintf(out, sizeof out, "%s/out/", dir);
    snprintf(again, sizeof again, "%s/again", dir);
    cr_assert(mkdir(out, 0755) == 0 && mkdir(again, 0755) == 0, "mkdir: %s", strerror(errno));
    csv_report(plan, out, out, "");
    snprintf(base, sizeof base, "%s/", again);
    csv_report(plan, again, base, NULL);
    cr_expect_eq(list_dir(out, names, sizeof names), N_CSV_TABLES, "in %s: %s", out, names);
    cr_expect(strstr(names, "layouts.csv") != NULL && strstr(names, "sources.csv") != NULL, "%s", names);
    cr_expect_eq(list_dir(again, names, sizeof names), N_CSV_TABLES, "in %s: %s", again, names);
    free(plan);
    remove_tree(dir);
}

/* A CSV export that cannot be written says where in one line (exit 2) and leaves no file and no
 * temporary: a prefix or a directory that does not exist, a target that is a directory. */
Test(reports, csv_write_failure_leaves_no_file) {
    char *dir = make_temp_dir();
    char *plan = make_plan(dir, "plan.json", small_plan);
    char missing[4096], missing_dir[4096], blocked[4096], block[4200], names[8192];
    snprintf(missing, sizeof missing, "%s/missing/plan", dir);
    snprintf(missing_dir, sizeof missing_dir, "%s/missing/", dir);
    snprintf(blocked, sizeof blocked, "%s/p", dir);
    snprintf(block, sizeof block, "%s/p-stages.csv", dir);
    cr_assert(mkdir(block, 0755) == 0, "mkdir %s: %s", block, strerror(errno));
    const char *const dests[] = {missing, missing_dir, blocked};
    const char *const named[] = {missing_dir, missing_dir, block};
    for (int i = 0; i < 3; i++) {
        cli_result r = run_cli("report", "--plan", plan, "--format", "csv", "-o", dests[i], NULL);
        cr_expect_eq(r.status, 2, "-o %s: exit %d, stderr: %s", dests[i], r.status, r.err);
        cr_expect(one_line_error(r.err, "report"), "-o %s: not one line: %s", dests[i], r.err);
        cr_expect(strstr(r.err, named[i]) != NULL, "-o %s: the message does not name %s: %s", dests[i], named[i], r.err);
        cr_expect_eq(r.out_len, 0, "-o %s: stdout: %s", dests[i], r.out);
        cli_result_free(&r);
        cr_expect_eq(list_dir(dir, names, sizeof names), 2, "-o %s: left behind: %s", dests[i], names);
    }
    free(plan);
    remove_tree(dir);
}

/* ---- beside a real run ----------------------------------------------------------------------------- */

static void no_leak_check(void) {
    /* Open MPI's allocations at exit are not ours; no effect without the sanitizers. */
    const char *old = getenv("ASAN_OPTIONS");
    char opts[1024];
    snprintf(opts, sizeof opts, "%s%sdetect_leaks=0", old ? old : "", old && *old ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
}

Test(mpi, report_beside_a_real_run, .init = no_leak_check, .timeout = 300) {
    char *dir = make_temp_dir();
    static const char *const tiny[] = {"--model", "tiny", "--system", "cpu-localhost", "--gpus", "2",
                                       "--global-batch", "8", "--seq", "64", "--fix", "pp=2", "--top", "2", NULL};
    char *plan = make_plan(dir, "plan.json", tiny);
    char run[4096], trace[4096];
    snprintf(run, sizeof run, "%s/run.json", dir);
    snprintf(trace, sizeof trace, "%s/run.trace.json", dir);
    cli_result r = run_cli("run", "--plan", plan, "--steps", "4", "--warmup", "1", "--json", "--trace", trace, NULL);
    cr_assert_eq(r.status, 0, "run: exit %d, stderr: %s", r.status, r.err);
    FILE *f = fopen(run, "w");
    cr_assert_not_null(f);
    fputs(r.out, f);
    fclose(f);
    cJSON *measured = parse_json_output(&r, "run --json");
    cli_result_free(&r);

    char run_arg[4200], trace_arg[4200];
    snprintf(run_arg, sizeof run_arg, "--run=%s", run);
    snprintf(trace_arg, sizeof trace_arg, "--run-trace=%s", trace);
    char *html = report(plan, "html", run_arg, trace_arg), *text = report(plan, "json", run_arg, trace_arg);
    cJSON *json = cJSON_Parse(text);
    cr_assert_not_null(json);
    const cJSON *m = json_obj(json, "measured", "$");
    cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(m, "same_layout")), "the run ran the plan's best layout");
    cr_expect_eq(json_num(json_obj(m, "step_s", "measured"), "median", "measured.step_s"),
                 json_num(json_obj(measured, "step_s", "run"), "median", "run.step_s"));
    const cJSON *losses = cJSON_GetObjectItem(measured, "losses");
    cr_expect_eq(json_num(m, "loss_first", "measured"), cJSON_GetArrayItem(losses, 0)->valuedouble);
    cr_expect_eq(json_num(m, "loss_last", "measured"), cJSON_GetArrayItem(losses, 3)->valuedouble);
    cr_expect_eq(json_num(json_obj(m, "kind_s_per_rank", "measured"), "gemm", "measured.kind_s_per_rank"),
                 json_num(json_obj(measured, "kind_s", "run"), "gemm", "run.kind_s"));
    tagged_stats st = check_tagged(html, json, "report.html with a run");
    cr_expect_eq(st.failures, 0);
    cr_expect(has_tag(html, "measured.step_s.median") && has_tag(html, "measured.kind_s_per_rank.gemm"));
    cr_expect_eq(count(html, "time in the step (s)"), 2, "a simulated and a measured timeline");
    cr_expect(has_tag(html, "measured.kind_error.gemm"), "the error per kind");
    const cJSON *kerr = json_obj(m, "kind_error", "measured");
    double sim_gemm = json_num(json_obj(json_obj(json, "simulation", "$"), "kind_s_per_rank", "simulation"), "gemm", "k");
    double run_gemm = json_num(json_obj(m, "kind_s_per_rank", "measured"), "gemm", "measured.kind_s_per_rank");
    cr_expect(fabs(json_num(kerr, "gemm", "measured.kind_error") - (sim_gemm - run_gemm) / run_gemm) < 1e-9);
    cJSON_Delete(json);
    cJSON_Delete(measured);
    free(html);
    free(text);
    free(plan);
    remove_dir(dir);
}

/* `report --model ...` is the report of the plan `plan` makes under the same flags: the JSON of
 * `plan -o` then `report --plan` but for the "plan" it names; no temporary plan is left. */
Test(reports, report_from_layout_flags_is_the_plans) {
    char *dir = make_temp_dir(), *tmp = make_temp_dir(), left[4096];
    setenv("TMPDIR", tmp, 1);
    static const char *const flags[] = {"--model", "llama2-7b", "--system", "h100-sxm-dgx", "--gpus-max", "16",
                                        "--batch-tolerance", "5%", "--fix", "pp=2", NULL};
    char *plan = make_plan(dir, "plan.json", flags);
    char *by_plan = report(plan, "json", NULL, NULL);
    const char *argv[CLI_MAX_ARGS + 1];
    int n = 0;
    argv[n++] = "report";
    for (int i = 0; flags[i]; i++) argv[n++] = flags[i];
    argv[n++] = "--format", argv[n++] = "json", argv[n] = NULL;
    cli_result r = run_argv(argv);
    cr_assert_eq(r.status, 0, "report --model: exit %d, stderr: %s", r.status, r.err);
    cJSON *a = cJSON_Parse(by_plan), *b = cJSON_Parse(r.out);
    cr_assert(a && b, "report --format json is not JSON");
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(b, "plan")),
                     "the plan of --model llama2-7b --system h100-sxm-dgx --gpus 16");
    cJSON_DeleteItemFromObjectCaseSensitive(a, "plan");
    cJSON_DeleteItemFromObjectCaseSensitive(b, "plan");
    cr_expect(cJSON_Compare(a, b, 1), "report --model differs from plan -o then report --plan");
    cr_expect(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(b, "layouts")) > 1, "one layout: not the plan's");
    list_dir(tmp, left, sizeof left);
    cr_expect(strstr(left, "tessera-plan") == NULL, "left in TMPDIR: %s", left);
    cJSON_Delete(a), cJSON_Delete(b), cli_result_free(&r);
    free(by_plan), free(plan);
    remove_dir(tmp), remove_dir(dir);
}

/* ---- bad input ----------------------------------------------------------------------------------- */

Test(reports, bad_input_exits_2_with_one_line) {
    char *dir = make_temp_dir();
    char *plan = make_plan(dir, "plan.json", small_plan);
    char *not_json = test_write_temp("{\"layout\": \"x\"");
    char *no_kinds = test_write_temp("{\"layout\": \"x\", \"step_s\": {\"median\": 1, \"p10\": 1, \"p90\": 1},"
                                     " \"losses\": [1]}");
    char bad_run[4200], bad_kinds[4200];
    snprintf(bad_run, sizeof bad_run, "--run=%s", not_json);
    snprintf(bad_kinds, sizeof bad_kinds, "--run=%s", no_kinds);
    const char *const cases[][10] = {
        {"report", NULL},
        {"report", "--plan", "/nonexistent/plan.json", NULL},
        {"report", "--plan", plan, "--format", "pdf", NULL},
        {"report", "--plan", plan, "--tokens", "0", NULL},
        {"report", "--plan", plan, "--price", "-1", NULL},
        {"report", "--plan", plan, bad_run, NULL},
        {"report", "--plan", plan, bad_kinds, NULL},
        {"report", "--plan", plan, "--run-trace", plan, NULL},
        {"report", "--plan", plan, "--format", "csv", NULL},
        {"report", "--plan", plan, "--format", "csv", "-o", "-", NULL},
        {"report", "--plan", plan, "-o", "/nonexistent/dir/", NULL},
        {"report", "--plan", plan, "--model", "tiny", NULL},
        {"report", "--model", "tiny", "--system", "h100-sxm-dgx", NULL},
        {"report", "--model", "tiny", "--system", "h100-sxm-dgx", "--gpus", "many", NULL},
        {"report", "--model", "tiny", "--system", "h100-sxm-dgx", "--gpus", "8", "--partition", "x", NULL},
        {"report", "--model", "tiny", "--system", "h100-sxm-dgx", "--gpus-max", "8", "--batch-tolerance", "60%", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_result r = run_argv(cases[i]);
        cr_expect_eq(r.status, 2, "case %zu: exit %d, stderr: %s", i, r.status, r.err);
        cr_expect(one_line_error(r.err, "report"), "case %zu: not one line: %s", i, r.err);
        cr_expect_eq(r.out_len, 0, "case %zu: stdout: %s", i, r.out);
        cli_result_free(&r);
    }
    cli_result r = run_cli("report", "--help", NULL);
    cr_expect_eq(r.status, 0);
    cr_expect(starts_with(r.out, "usage: tessera report"));
    cli_result_free(&r);
    test_remove_temp(not_json);
    test_remove_temp(no_kinds);
    free(plan);
    remove_dir(dir);
}

/* Numbers for people (reports/numfmt.h): never "2290.0 days", "$8793447" or "6.898e+10". */
Test(reports, numbers_are_formatted_for_people) {
    char b[64];
    cr_expect_str_eq(ts_fmt_sig(2290.04, 3, b, sizeof b), "2,290");
    cr_expect_str_eq(ts_fmt_sig(5.4821, 3, b, sizeof b), "5.48");
    cr_expect_str_eq(ts_fmt_sig(0.012345, 3, b, sizeof b), "0.0123");
    cr_expect_str_eq(ts_fmt_sig(1234567, 3, b, sizeof b), "1,230,000");
    cr_expect_str_eq(ts_fmt_sig(-1234.5, 2, b, sizeof b), "-1,200");
    cr_expect_str_eq(ts_fmt_usd(8793447, b, sizeof b), "$8,790,000");
    cr_expect_str_eq(ts_fmt_usd(2.5, b, sizeof b), "$2.50");
    cr_expect_str_eq(ts_fmt_usd(0.05129, b, sizeof b), "$0.0513");
    cr_expect_str_eq(ts_fmt_usd(1.234e9, b, sizeof b), "$1.23 billion");
    cr_expect_str_eq(ts_fmt_count(6.898e10, b, sizeof b), "69.0 billion");
    cr_expect_str_eq(ts_fmt_count(1e12, b, sizeof b), "1.00 trillion");
    cr_expect_str_eq(ts_fmt_count(2093985.4, b, sizeof b), "2,093,985");
    cr_expect_str_eq(ts_fmt_count(999, b, sizeof b), "999");
    cr_expect_str_eq(ts_fmt_count(NAN, b, sizeof b), "n/a");
    cr_expect_eq(ts_parse_tokens("2T"), 2e12);
    cr_expect_eq(ts_parse_tokens("300B"), 3e11);
    cr_expect_eq(ts_parse_tokens("1.5e12"), 1.5e12);
    cr_expect_eq(ts_parse_tokens("2TB"), 0);
    cr_expect_eq(ts_parse_tokens("-1T"), 0);
}
