/* reports/ranking.h, called directly: the refinement re-ranks the best layouts by simulated step
 * time (a permutation of them, ascending), the JSON carries the request's partition settings and
 * the simulated times, the table says it refined; a search that fails leaves the ranking empty. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports/ranking.h"
#include "reports/ranking_explain.h"
#include "tests/helpers.h"

static ts_problem problem(void) { return test_problem("llama2-7b", "h100-sxm-dgx", 16, 32, 4096, 1); }

Test(ranking, refine_reranks_by_simulated_step) {
    ts_problem pb = problem();
    ts_search_opts so;
    ts_search_opts_defaults(&so);
    so.top_k = 5;
    ts_search_result r;
    cr_assert_eq(ts_search(&pb, &so, &r), TS_OK, "%s", ts_error_message());
    cr_assert_geq(r.n_best, 4);
    ts_layout before[4];
    for (int i = 0; i < 4; i++) before[i] = r.best[i].layout;
    double sim[4];
    cr_assert_eq(ts_ranking_refine(&pb, &r, 4, sim), TS_OK, "%s", ts_error_message());
    for (int i = 0; i < 4; i++) {
        cr_expect_gt(sim[i], 0);
        if (i) cr_expect_leq(sim[i - 1], sim[i], "re-ranked ascending");
        int found = 0;
        for (int j = 0; j < 4; j++) found += memcmp(&r.best[i].layout, &before[j], sizeof before[j]) == 0;
        cr_expect_eq(found, 1, "layout %d is one of the best four", i);
    }
    ts_search_result_free(&r);
}

Test(ranking, json_and_table_of_a_refined_ranking) {
    ts_problem pb = problem();
    ts_search_opts so;
    ts_search_opts_defaults(&so);
    so.top_k = 3;
    ts_ranking_opts o;
    ts_ranking_opts_defaults(&o);
    o.refine = 2;
    ts_ranking rk;
    cr_assert_eq(ts_ranking_make(&pb, &so, &o, &rk), TS_OK, "%s", ts_error_message());
    cr_expect_eq(rk.refined, 2);
    cr_assert_not_null(rk.sim_step_s);
    cJSON *root = NULL;
    cr_assert_eq(ts_ranking_json(&pb, &so, &o, &rk, &root), TS_OK, "%s", ts_error_message());
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(root, "request");
    cr_expect_eq(json_num(req, "refine", "$.request"), 2);
    cr_expect_str_eq(json_str(req, "partition", "$.request"), "auto");
    cr_expect_str_eq(json_str(req, "partition_objective", "$.request"), "stage");
    const cJSON *layouts = cJSON_GetObjectItemCaseSensitive(root, "layouts");
    cr_assert_eq(cJSON_GetArraySize(layouts), 3);
    for (int i = 0; i < 2; i++)
        cr_expect_eq(json_num(cJSON_GetArrayItem(layouts, i), "sim_step_s", "$.layouts[]"), rk.sim_step_s[i]);
    cr_expect_null(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(layouts, 2), "sim_step_s"), "not refined");
    cJSON_Delete(root);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_eq(ts_ranking_print(f, &pb, &o, &rk), TS_OK);
    fclose(f);
    cr_expect_not_null(find_line(text, "# refined: simulated the best 2 (one rank per stage)"), "%s", text);
    cr_expect_not_null(find_line(text, "# best: "), "%s", text);
    cr_expect_not_null(find_line(text, "# parameters: 6.74B total, 6.74B active per token"), "%s", text);
    cr_expect_not_null(find_line(text, "# memory line: "), "%s", text);
    cr_expect_eq(count_lines(text), 4 + 3 + 2 + 3 + 1,
                 "problem, parameters, search, refinement; stack, memory line, band; header and units; three "
                 "rows; best: %s", text);
    free(text);
    ts_ranking_free(&rk);
}

Test(ranking, failed_search_leaves_it_empty) {
    ts_problem pb = test_problem("llama2-70b", "h100-sxm-dgx", 1, 32, 4096, 1);
    ts_search_opts so;
    ts_search_opts_defaults(&so);
    ts_ranking_opts o;
    ts_ranking_opts_defaults(&o);
    o.refine = 2;
    ts_ranking rk;
    cr_expect_eq(ts_ranking_make(&pb, &so, &o, &rk), TS_ERR_INFEASIBLE, "%s", ts_error_message());
    cr_expect(rk.search.n_best == 0 && rk.search.partition_errors == 0 && rk.sim_step_s == NULL);
    ts_ranking_free(&rk);
}

/* The pick of `tessera sim` (order_only) is the ranking's best whether or not it reads the bands;
 * with free fields it computes them (they can reorder), with every field pinned it does not. */
Test(ranking, order_only_pick_skips_unread_bands) {
    ts_problem pb = problem();
    ts_search_opts so;
    ts_search_opts_defaults(&so);
    so.top_k = 1;
    ts_ranking_opts o, lazy;
    ts_ranking_opts_defaults(&o);
    lazy = o;
    lazy.order_only = 1;
    ts_ranking full, pick;
    cr_assert_eq(ts_ranking_make(&pb, &so, &o, &full), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_ranking_make(&pb, &so, &lazy, &pick), TS_OK, "%s", ts_error_message());
    char a[256], b[256];
    ts_layout_format(&full.search.best[0].layout, a, sizeof a);
    ts_layout_format(&pick.search.best[0].layout, b, sizeof b);
    cr_expect_str_eq(b, a);
    cr_expect_not_null(pick.bands, "free fields: the bands can reorder the pick");
    ts_ranking_free(&full);
    ts_ranking_free(&pick);

    cr_assert_eq(ts_pins_parse("test", a, &so.pins), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_ranking_make(&pb, &so, &o, &full), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_ranking_make(&pb, &so, &lazy, &pick), TS_OK, "%s", ts_error_message());
    ts_layout_format(&pick.search.best[0].layout, b, sizeof b);
    cr_expect_str_eq(b, a);
    cr_expect_null(pick.bands, "every field pinned: no band is read, none computed");
    cr_expect_not_null(full.bands, "the plan's ranking still carries its bands");
    ts_ranking_free(&full);
    ts_ranking_free(&pick);
}

/* The best layout does not depend on how many rows are asked for. DeepSeek-V3 on 2048 H800s: the
 * fastest layouts are uneven pipeline splits (re-partitioned from the even search's best) and
 * ZeRO-3 ones that cannot split; --top 1, 2 and 3 once named three different bests (the splits
 * re-partitioned, and the ranked layouts a tie could draw from, followed the row count). */
Test(ranking, best_layout_does_not_depend_on_top) {
    ts_problem pb = test_problem("deepseek-v3", "h800-dgx", 2048, 15360, 4096, 1);
    char first[256] = "";
    double step_s = 0;
    const int tops[] = {1, 2, 3, 10};
    for (size_t i = 0; i < sizeof tops / sizeof tops[0]; i++) {
        ts_search_opts so;
        ts_search_opts_defaults(&so);
        so.top_k = tops[i];
        ts_ranking_opts o;
        ts_ranking_opts_defaults(&o);
        ts_ranking rk;
        cr_assert_eq(ts_ranking_make(&pb, &so, &o, &rk), TS_OK, "%s", ts_error_message());
        cr_assert_eq(rk.search.n_best, tops[i], "--top %d: %d rows", tops[i], rk.search.n_best);
        char text[256];
        ts_layout_format(&rk.search.best[0].layout, text, sizeof text);
        if (i == 0) {
            snprintf(first, sizeof first, "%s", text);
            step_s = rk.search.best[0].step_s;
        }
        cr_expect_str_eq(text, first, "--top %d's best", tops[i]);
        cr_expect_float_eq(rk.search.best[0].step_s, step_s, 1e-9 * step_s, "--top %d's best step", tops[i]);
        ts_ranking_free(&rk);
    }
}

/* "N of the best M layouts" counts the layouts the tie was drawn from: the even pool and the
 * ranked splits it lacks. Llama 3 405B with 126 layers on 16 stages of 2 chunks is valid only
 * unevenly, so the pool of even layouts is empty; the sentence once said "3 of the best 0". */
Test(ranking, tie_counts_the_layouts_it_draws_from) {
    ts_problem pb = test_problem("llama3-405b", "h100-sxm-dgx", 16384, 2048, 8192, 1);
    ts_search_opts so;
    ts_search_opts_defaults(&so);
    so.top_k = 1;
    cr_assert_eq(ts_pins_parse("--fix", "tp=8,pp=16,cp=1,vpp=2", &so.pins), TS_OK, "%s", ts_error_message());
    ts_ranking_opts o;
    ts_ranking_opts_defaults(&o);
    o.partition.mode = TS_PARTITION_ILP;
    ts_ranking rk;
    cr_assert_eq(ts_ranking_make(&pb, &so, &o, &rk), TS_OK, "%s", ts_error_message());
    cr_expect_geq(rk.tied_pool, 2, "a tie: %d layouts", rk.tied_pool);
    cr_expect_leq(rk.tied_pool, rk.pool, "%d tied of %d drawn from", rk.tied_pool, rk.pool);
    char text[1024];
    ts_ranking_tie_text(&pb, &rk, text, sizeof text);
    char want[64];
    snprintf(want, sizeof want, "%d of the best %d layouts", rk.tied_pool, rk.pool);
    cr_expect(strncmp(text, want, strlen(want)) == 0, "%s", text);
    ts_ranking_free(&rk);
}
