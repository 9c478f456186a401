/* `tessera sweep` as users see it: JSON rows for 8..64 GPUs, each the planner's best at that count
 * (checked against `tessera plan --top 1`), GPU-major and monotone; counts where nothing fits as
 * rows saying so (exit 0), exit 3 when nothing fits anywhere; the HTML page's numbers are the
 * JSON's; the table; the progress bar on a terminal only (a pseudo-terminal); --help; bad input
 * (GPU lists, systems) exits 2 with one line. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "program/ranks.h"
#include "tests/helpers.h"
#include "tests/tagged.h"

Test(sweep, json_rows_are_the_best_per_count) {
    cli_result r = run_cli("sweep", "--model", "llama2-13b", "--system", "h100-sxm-dgx", "--gpus", "8..64",
                           "--global-batch", "256", "--json", NULL);
    cr_expect_eq(r.err_len, 0, "stderr: %s", r.err);
    cJSON *root = parse_json_output(&r, "sweep --json");
    cli_result_free(&r);
    cr_expect_str_eq(json_str(root, "tessera", "$"), "sweep");
    const cJSON *rows = cJSON_GetObjectItem(root, "rows"), *gpus = cJSON_GetObjectItem(root, "gpus");
    cr_assert_eq(cJSON_GetArraySize(rows), 4, "8, 16, 32, 64");
    static const int want[] = {8, 16, 32, 64};
    for (int i = 0; i < 4; i++) {
        const cJSON *row = cJSON_GetArrayItem(rows, i);
        char where[32];
        snprintf(where, sizeof where, "$.rows[%d]", i);
        int g = (int)json_num(row, "gpus", where);
        cr_expect_eq(g, want[i], "%s.gpus %d", where, g);
        cr_expect_eq(cJSON_GetArrayItem(gpus, i)->valuedouble, want[i]);
        cr_expect_str_eq(json_str(row, "system", where), "h100-sxm-dgx");
        cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(row, "fits")), "%s: llama2-13b fits on %d H100s", where, g);
        /* The same answer as the planner's best for that count. */
        char gs[16];
        snprintf(gs, sizeof gs, "%d", g);
        cli_result p = run_cli("plan", "--model", "llama2-13b", "--system", "h100-sxm-dgx", "--gpus", gs,
                               "--global-batch", "256", "--top", "1", "--json", NULL);
        cJSON *plan = parse_json_output(&p, "plan --json");
        const cJSON *best = cJSON_GetArrayItem(cJSON_GetObjectItem(plan, "layouts"), 0);
        cr_expect_str_eq(json_str(row, "layout", where), json_str(best, "layout", "plan"), "%s", where);
        cr_expect_eq(json_num(row, "step_s", where), json_num(best, "step_s", "plan"), "%s", where);
        double tps = json_num(row, "tokens_per_s", where), cost = json_num(row, "cost_per_mtok", where);
        /* No --price: the system file's own price (its cost object). */
        ts_system sys;
        cr_assert_eq(ts_system_load("h100-sxm-dgx", &sys), TS_OK, "%s", ts_error_message());
        double price = json_num(row, "price_per_gpu_hour", where);
        cr_expect_eq(price, sys.price_per_gpu_hour > 0 ? sys.price_per_gpu_hour : 2.0, "%s: price", where);
        cr_expect(fabs(cost - price * g / 3600 / tps * 1e6) <= 1e-12 * cost, "%s: cost per 1M tokens", where);
        cJSON_Delete(plan);
        cli_result_free(&p);
    }
    cJSON_Delete(root);
}

Test(sweep, counts_that_do_not_fit_are_rows_and_systems_interleave) {
    cli_result r = run_cli("sweep", "--model", "llama3-70b", "--system", "h100-sxm-dgx,b200-dgx", "--gpus", "8,16",
                           "--json", "--price", "3", NULL);
    cJSON *root = parse_json_output(&r, "sweep --json");
    cli_result_free(&r);
    const cJSON *rows = cJSON_GetObjectItem(root, "rows");
    cr_assert_eq(cJSON_GetArraySize(rows), 4);
    static const char *const sys[] = {"h100-sxm-dgx", "b200-dgx", "h100-sxm-dgx", "b200-dgx"};
    static const int gpus[] = {8, 8, 16, 16};
    for (int i = 0; i < 4; i++) {
        const cJSON *row = cJSON_GetArrayItem(rows, i);
        cr_expect_str_eq(json_str(row, "system", "row"), sys[i]);
        cr_expect_eq(json_num(row, "gpus", "row"), gpus[i]);
    }
    const cJSON *first = cJSON_GetArrayItem(rows, 0);
    cr_expect(cJSON_IsFalse(cJSON_GetObjectItem(first, "fits")), "70B does not fit on 8 H100s");
    cr_expect(strncmp(json_str(first, "reason", "rows[0]"), "nothing fits: needs ", 20) == 0, "reason: %s",
              json_str(first, "reason", "rows[0]"));
    cr_expect(cJSON_GetObjectItem(first, "layout") == NULL);
    cr_expect_eq(json_num(root, "price_per_gpu_hour", "$"), 3);
    cJSON_Delete(root);
    /* The table says so too. */
    r = run_cli("sweep", "--model", "llama3-70b", "--system", "h100-sxm-dgx", "--gpus", "8,32", NULL);
    cr_expect_eq(r.status, 0, "stderr: %s", r.err);
    cr_expect(strstr(r.out, "(nothing fits: needs ") != NULL, "%s", r.out);
    cr_expect(find_line(r.out, "# gpus system") != NULL, "%s", r.out);
    cli_result_free(&r);
}

Test(sweep, nothing_fits_anywhere_exits_3) {
    cli_result r = run_cli("sweep", "--model", "llama3-405b", "--system", "h100-sxm-dgx", "--gpus", "8,16", NULL);
    cr_expect_eq(r.status, 3, "exit %d, stderr: %s", r.status, r.err);
    cr_expect(one_line_error(r.err, "sweep"), "stderr: %s", r.err);
    cr_expect(strstr(r.out, "(nothing fits: needs ") != NULL, "the rows are still printed: %s", r.out);
    cli_result_free(&r);
}

Test(sweep, html_page_numbers_are_the_json_numbers) {
    char *dir = make_temp_dir();
    char html_path[4096];
    snprintf(html_path, sizeof html_path, "%s/sweep.html", dir);
    cli_result r = run_cli("sweep", "--model", "llama3-70b", "--system", "h100-sxm-dgx,b200-dgx", "--gpus", "8..64",
                           "--json", "-o", html_path, NULL);
    cJSON *root = parse_json_output(&r, "sweep --json -o sweep.html");
    cli_result_free(&r);
    char *html = read_file(html_path);
    cr_assert_not_null(html, "%s not written", html_path);
    tagged_stats st = check_tagged(html, root, "sweep.html");
    cr_expect_eq(st.failures, 0);
    cr_expect_geq(st.numbers, 7 * 4 + 4, "%d tagged numbers", st.numbers);
    int svgs = 0;
    for (const char *p = strstr(html, "<svg "); p; p = strstr(p + 1, "<svg ")) svgs++;
    cr_expect_eq(svgs, 3, "throughput, MFU and cost charts");
    cr_expect(strstr(html, "<polyline") != NULL && strstr(html, "<script") == NULL);
    cr_expect(has_tag(html, "rows[0].reason") && has_tag(html, "rows[1].cost_per_mtok"), "8 H100s: no fit; B200 fits");
    free(html);
    cJSON_Delete(root);
    remove_dir(dir);
}

/* The progress bar: drawn on stderr when stderr is a terminal and the sweep has run longer than
 * TESSERA_PROGRESS_AFTER_S (0 here, so it shows at once), cleared at the end; never when stderr
 * is a file, and not on a terminal for a sweep quicker than the default half second. */
Test(sweep, progress_bar_only_on_a_terminal) {
    const char *const args[] = {"sweep", "--model", "llama2-7b", "--system", "h100-sxm-dgx", "--gpus", "8..64", NULL};
    cr_assert_eq(setenv("TESSERA_PROGRESS_AFTER_S", "0", 1), 0);
    cli_result r = run_argv_tty(args);
    cr_expect_eq(r.status, 0, "exit %d, terminal: %s", r.status, r.err);
    cr_expect(strstr(r.err, "\rtessera sweep: [") != NULL && strstr(r.err, "] 1/4") != NULL &&
                  strstr(r.err, "] 4/4") != NULL,
              "no progress bar on the terminal: \"%s\"", r.err);
    cr_expect(strstr(r.err, "\r\033[K") != NULL, "the bar is not cleared at the end: \"%s\"", r.err);
    cr_expect(strstr(r.out, "# gpus system") != NULL && strstr(r.out, "tessera sweep: [") == NULL,
              "the table, and no bar, on stdout: %s", r.out);
    cli_result_free(&r);

    r = run_argv(args);
    cr_expect_eq(r.status, 0);
    cr_expect_eq(r.err_len, 0, "stderr is a file, yet: \"%s\"", r.err);
    cli_result_free(&r);

    cr_assert_eq(unsetenv("TESSERA_PROGRESS_AFTER_S"), 0);
    const char *const quick[] = {"sweep", "--model", "llama2-7b", "--system", "h100-sxm-dgx", "--gpus", "8", NULL};
    r = run_argv_tty(quick);
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.err, "tessera sweep: [") == NULL, "a bar for a quick sweep: \"%s\"", r.err);
    cli_result_free(&r);

    cr_assert_eq(setenv("TESSERA_PROGRESS_AFTER_S", "soon", 1), 0);
    r = run_argv(quick);
    cr_expect_eq(r.status, 2, "TESSERA_PROGRESS_AFTER_S=soon: exit %d", r.status);
    cr_expect(one_line_error(r.err, "sweep"), "%s", r.err);
    cli_result_free(&r);
}

Test(sweep, bad_input_exits_2_with_one_line) {
    const char *const cases[][10] = {
        {"sweep", "--model", "llama2-7b", "--system", "h100-sxm-dgx", "--gpus", "", NULL},
        {"sweep", "--model", "llama2-7b", "--system", "h100-sxm-dgx", "--gpus", "0", NULL},
        {"sweep", "--model", "llama2-7b", "--system", "h100-sxm-dgx", "--gpus", "8,,16", NULL},
        {"sweep", "--model", "llama2-7b", "--system", "h100-sxm-dgx", "--gpus", "16,8", NULL},
        {"sweep", "--model", "llama2-7b", "--system", "h100-sxm-dgx", "--gpus", "64..8", NULL},
        {"sweep", "--model", "llama2-7b", "--system", "h100-sxm-dgx", "--gpus", "eight", NULL},
        {"sweep", "--model", "llama2-7b", "--system", "no-such-system", "--gpus", "8", NULL},
        {"sweep", "--model", "llama2-7b", "--system", "h100-sxm-dgx,nope", "--gpus", "8", NULL},
        {"sweep", "--model", "llama2-7b", "--gpus", "8", NULL},
        {"sweep", "--model", "llama2-7b", "--system", "h100-sxm-dgx", "--gpus", "8", "--price", "free", NULL},
        /* budgets: --gpus and --gpus-max exclude each other; the budget list's grammar is --gpus' */
        {"sweep", "--model", "llama2-7b", "--system", "h100-sxm-dgx", "--gpus", "8", "--gpus-max", "16", NULL},
        {"sweep", "--model", "llama2-7b", "--system", "h100-sxm-dgx", "--gpus-max", "0", NULL},
        {"sweep", "--model", "llama2-7b", "--system", "h100-sxm-dgx", "--gpus-max", "16,8", NULL},
        {"sweep", "--model", "llama2-7b", "--system", "h100-sxm-dgx", "--gpus-max", "8", "--batch-tolerance", "x", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_result r = run_argv(cases[i]);
        cr_expect_eq(r.status, 2, "case %zu: exit %d, stderr: %s", i, r.status, r.err);
        cr_expect(one_line_error(r.err, "sweep"), "case %zu: not one line: %s", i, r.err);
        cr_expect_eq(r.out_len, 0, "case %zu: stdout: %s", i, r.out);
        cli_result_free(&r);
    }
    cli_result r = run_cli("sweep", "--help", NULL);
    cr_expect_eq(r.status, 0, "sweep --help: exit %d", r.status);
    cr_expect(starts_with(r.out, "usage: tessera sweep "), "sweep --help: %s", r.out);
    cr_expect_eq(r.err_len, 0, "sweep --help: stderr: %s", r.err);
    cli_result_free(&r);
}

/* Sweeps over global batch and sequence length lists and a price per system: one row per (GPUs,
 * batch, seq, system) in that order; each row's cost per token from its own system's price;
 * --tokens takes "2T"; exactly one row recommended as fastest (the most tokens/s) and one as
 * cheapest (the least cost per token). */
Test(sweep, lists_prices_tokens_and_recommendations) {
    cli_result r = run_cli("sweep", "--model", "llama2-7b", "--system", "h100-sxm-dgx,b200-dgx", "--gpus", "8,16",
                           "--global-batch", "256,512", "--seq", "2048,4096", "--price",
                           "h100-sxm-dgx=2.5,b200-dgx=4.25", "--tokens", "2T", "--json", NULL);
    cJSON *root = parse_json_output(&r, "sweep lists --json");
    cli_result_free(&r);
    const cJSON *rows = cJSON_GetObjectItem(root, "rows");
    cr_assert_eq(cJSON_GetArraySize(rows), 2 * 2 * 2 * 2);
    cr_expect_eq(json_num(cJSON_GetObjectItem(root, "capacity"), "tokens", "capacity"), 2e12);
    int fastest = -1, cheapest = -1, n_fast = 0, n_cheap = 0;
    for (int i = 0; i < 16; i++) {
        const cJSON *row = cJSON_GetArrayItem(rows, i);
        char where[32];
        snprintf(where, sizeof where, "$.rows[%d]", i);
        cr_expect_eq(json_num(row, "gpus", where), i < 8 ? 8 : 16);
        cr_expect_eq(json_num(row, "global_batch", where), (i / 4) % 2 ? 512 : 256);
        cr_expect_eq(json_num(row, "seq", where), (i / 2) % 2 ? 4096 : 2048);
        cr_expect_str_eq(json_str(row, "system", where), i % 2 ? "b200-dgx" : "h100-sxm-dgx");
        cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(row, "fits")), "%s", where);
        double price = i % 2 ? 4.25 : 2.5, tps = json_num(row, "tokens_per_s", where), gpus = json_num(row, "gpus", where);
        cr_expect_float_eq(json_num(row, "price_per_gpu_hour", where), price, 1e-12);
        cr_expect_float_eq(json_num(row, "cost_per_mtok", where), price * gpus / 3600 / tps * 1e6, 1e-9);
        if (cJSON_IsTrue(cJSON_GetObjectItem(row, "fastest"))) fastest = i, n_fast++;
        if (cJSON_IsTrue(cJSON_GetObjectItem(row, "cheapest"))) cheapest = i, n_cheap++;
    }
    cr_assert(n_fast == 1 && n_cheap == 1, "%d fastest, %d cheapest", n_fast, n_cheap);
    for (int i = 0; i < 16; i++) {
        const cJSON *row = cJSON_GetArrayItem(rows, i);
        cr_expect_leq(json_num(row, "tokens_per_s", "row"),
                      json_num(cJSON_GetArrayItem(rows, fastest), "tokens_per_s", "fastest"));
        cr_expect_geq(json_num(row, "cost_per_mtok", "row"),
                      json_num(cJSON_GetArrayItem(rows, cheapest), "cost_per_mtok", "cheapest"));
    }
    cJSON_Delete(root);
    /* The table marks both and says them in words, numbers grouped. */
    r = run_cli("sweep", "--model", "llama2-7b", "--system", "h100-sxm-dgx,b200-dgx", "--gpus", "8,16",
                "--global-batch", "256,512", "--tokens", "2T", NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "<- fastest") != NULL && strstr(r.out, "cheapest") != NULL, "%s", r.out);
    cr_expect_not_null(find_line(r.out, "# recommended ("), "%s", r.out);
    cli_result_free(&r);
    r = run_cli("sweep", "--model", "tiny", "--system", "h100-sxm-dgx", "--gpus", "8", "--price", "nosuch=2", NULL);
    cr_expect_eq(r.status, 2);
    cr_expect(one_line_error(r.err, "sweep") && strstr(r.err, "not one of the swept systems") != NULL, "%s", r.err);
    cli_result_free(&r);
}

/* GPUs a row's job holds on system `name`: its ranks placed on the system's scale-up domains. */
static int held_gpus(const char *name, const char *layout_text, int gpus) {
    ts_system s;
    ts_layout l;
    cr_assert_eq(ts_system_load(name, &s), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_layout_parse("row", layout_text, &l), TS_OK, "%s", ts_error_message());
    return ts_rank_gpu(&l, ts_system_domain_gpus(&s), gpus - 1) + 1;
}

/* `--systems a,b --tokens N`: per system the cheapest count (within --days), its days = tokens /
 * tokens_per_s / 86400 and cost = price · GPUs · 24 · days at the system file's price, and the
 * cheapest system in time recommended; in the table ('*'), the JSON and the HTML page (one bar
 * chart per question). */
Test(sweep, capacity_comparison_across_systems) {
    char *dir = make_temp_dir();
    char html_path[4096];
    snprintf(html_path, sizeof html_path, "%s/buy.html", dir);
    cli_result r = run_cli("sweep", "--model", "llama3-70b", "--systems", "h100-sxm-dgx,gb200-nvl72,mi355x", "--gpus",
                           "512..2048", "--tokens", "1e12", "--days", "30", "--json", "-o", html_path, NULL);
    cJSON *root = parse_json_output(&r, "sweep --tokens --json");
    cli_result_free(&r);
    const cJSON *cap = cJSON_GetObjectItem(root, "capacity"), *rows = cJSON_GetObjectItem(root, "rows");
    cr_assert_not_null(cap, "a capacity object");
    cr_expect_eq(json_num(cap, "tokens", "capacity"), 1e12);
    const cJSON *sys = cJSON_GetObjectItem(cap, "systems");
    cr_assert_eq(cJSON_GetArraySize(sys), 3);
    double best_cost = INFINITY;
    const char *best = NULL;
    for (int s = 0; s < 3; s++) {
        const cJSON *p = cJSON_GetArrayItem(sys, s);
        cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(p, "fits")));
        const char *name = json_str(p, "system", "pick");
        double gpus = json_num(p, "gpus", name), days = json_num(p, "days", name), cost = json_num(p, "cost_usd", name);
        double price = json_num(p, "price_per_gpu_hour", name);
        /* Its row of the sweep, and every cheaper row of that system misses the deadline. */
        double tps = 0;
        const cJSON *row;
        cJSON_ArrayForEach(row, rows) {
            if (strcmp(json_str(row, "system", "row"), name) != 0 || !cJSON_IsTrue(cJSON_GetObjectItem(row, "fits")))
                continue;
            double t = json_num(row, "tokens_per_s", "row"), g = json_num(row, "gpus", "row");
            double d = 1e12 / t / 86400, c = price * held_gpus(name, json_str(row, "layout", "row"), (int)g) * 24 * d;
            if (g == gpus) tps = t;
            else if (c < cost) cr_expect_gt(d, 30, "%s on %g GPUs is cheaper and in time", name, g);
        }
        cr_assert_gt(tps, 0, "%s: the pick is a row of the sweep", name);
        cr_expect(fabs(days - 1e12 / tps / 86400) <= 1e-9 * days, "%s: days", name);
        double held = json_num(p, "occupied_gpus", name);
        cr_expect(held >= gpus && held < gpus + 72, "%s: %g GPUs held for %g ranks", name, held, gpus);
        cr_expect(fabs(cost - price * held * 24 * days) <= 1e-9 * cost, "%s: cost", name);
        cr_expect_gt(json_num(p, "power_per_gpu_w", name), 0, "%s: a power figure", name);
        if (cJSON_IsTrue(cJSON_GetObjectItem(p, "meets_deadline")) && cost < best_cost) best_cost = cost, best = name;
    }
    cr_assert_not_null(best);
    cr_expect_str_eq(json_str(cap, "recommended", "capacity"), best);
    char *html = read_file(html_path);
    cr_assert_not_null(html);
    int svgs = 0;
    for (const char *p = strstr(html, "<svg "); p; p = strstr(p + 1, "<svg ")) svgs++;
    cr_expect_eq(svgs, 3 + 4, "three sweep charts and one per question: days, GPUs, cost, energy");
    cr_expect(has_tag(html, "capacity.recommended"), "the recommendation is on the page");
    free(html);
    cJSON_Delete(root);
    remove_dir(dir);
    r = run_cli("sweep", "--model", "llama3-70b", "--systems", "h100-sxm-dgx,b200-dgx", "--gpus", "512", "--tokens",
                "1e12", NULL);
    cr_expect_eq(r.status, 0, "stderr: %s", r.err);
    cr_expect(find_line(r.out, "# recommended: ") != NULL, "%s", r.out);
    cr_expect(find_line(r.out, "*  ") != NULL, "the recommended row is marked: %s", r.out);
    cli_result_free(&r);
    r = run_cli("sweep", "--model", "llama3-70b", "--systems", "h100-sxm-dgx", "--gpus", "512", "--days", "3", NULL);
    cr_expect_eq(r.status, 2, "--days without --tokens");
    cr_expect(one_line_error(r.err, "sweep"), "stderr: %s", r.err);
    cli_result_free(&r);
}

/* `sweep --gpus-max LIST`: each listed count is a budget, and each row is what `tessera plan
 * --gpus-max N --top 1` picks on it: the same GPU count, layout and step time, at most N GPUs,
 * the idle ones counted (100 H100s with a batch of 256 leave some idle: no layout of 100 GPUs
 * divides it). --batch-tolerance moves a row's batch within the tolerance (bad budgets:
 * bad_input_exits_2_with_one_line). */
Test(sweep, gpus_max_rows_are_the_plans_budget_pick) {
    cli_result r = run_cli("sweep", "--model", "llama2-13b", "--system", "h100-sxm-dgx", "--gpus-max", "100,200",
                           "--global-batch", "256", "--json", NULL);
    cr_expect_eq(r.err_len, 0, "stderr: %s", r.err);
    cJSON *root = parse_json_output(&r, "sweep --gpus-max --json");
    cli_result_free(&r);
    const cJSON *budget = cJSON_GetObjectItem(root, "budget"), *rows = cJSON_GetObjectItem(root, "rows");
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(budget, "gpus_max")), "$.budget.gpus_max");
    cr_assert_eq(cJSON_GetArraySize(rows), 2);
    static const char *const maxes[] = {"100", "200"};
    int idle_total = 0;
    for (int i = 0; i < 2; i++) {
        const cJSON *row = cJSON_GetArrayItem(rows, i);
        char where[32];
        snprintf(where, sizeof where, "$.rows[%d]", i);
        cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(row, "fits")), "%s fits", where);
        int g = (int)json_num(row, "gpus", where), max = (int)json_num(row, "gpus_max", where);
        int idle = (int)json_num(row, "idle_gpus", where);
        cr_expect_eq(max, atoi(maxes[i]), "%s.gpus_max", where);
        cr_expect(g <= max && g >= 1, "%s: %d GPUs within the budget %d", where, g, max);
        cr_expect_eq(idle, max - g, "%s.idle_gpus", where);
        idle_total += idle;
        cli_result p = run_cli("plan", "--model", "llama2-13b", "--system", "h100-sxm-dgx", "--gpus-max", maxes[i],
                               "--global-batch", "256", "--top", "1", "--json", NULL);
        cJSON *plan = parse_json_output(&p, "plan --gpus-max --json");
        const cJSON *pb = cJSON_GetObjectItem(plan, "budget");
        const cJSON *best = cJSON_GetArrayItem(cJSON_GetObjectItem(plan, "layouts"), 0);
        cr_expect_eq(g, (int)json_num(pb, "gpus", "plan $.budget"), "%s: plan's budget pick", where);
        cr_expect_str_eq(json_str(row, "layout", where), json_str(best, "layout", "plan"), "%s", where);
        cr_expect_eq(json_num(row, "step_s", where), json_num(best, "step_s", "plan"), "%s", where);
        cJSON_Delete(plan);
        cli_result_free(&p);
    }
    cr_expect_gt(idle_total, 0, "no layout of 100 or 200 GPUs divides a batch of 256: some GPUs stay idle");
    cJSON_Delete(root);

    r = run_cli("sweep", "--model", "llama2-13b", "--system", "h100-sxm-dgx", "--gpus", "96", "--global-batch", "250",
                "--batch-tolerance", "5%", "--json", NULL);
    root = parse_json_output(&r, "sweep --batch-tolerance --json");
    cli_result_free(&r);
    const cJSON *row = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "rows"), 0);
    double batch = json_num(row, "global_batch", "$.rows[0]");
    cr_expect_eq(json_num(row, "gpus", "$.rows[0]"), 96, "--gpus with a tolerance: only the batch moves");
    cr_expect_eq(json_num(row, "global_batch_requested", "$.rows[0]"), 250);
    cr_expect(batch != 250 && fabs(batch - 250) <= 0.05 * 250, "batch %g: 96 GPUs divide no layout of 250", batch);
    cJSON_Delete(root);

    r = run_cli("sweep", "--model", "llama2-13b", "--system", "h100-sxm-dgx", "--gpus-max", "100", "--global-batch",
                "256", NULL);
    cr_expect(strstr(r.out, "# gpus   max  idle system") != NULL, "table columns: %s", r.out);
    cr_expect(strstr(r.out, "    96   100     4 h100-sxm-dgx") != NULL, "96 of 100 GPUs used, 4 idle: %s", r.out);
    cli_result_free(&r);
}
