/* The parts of `tessera plan`'s answer that explain it (reports/ranking.h): uncertainty bands,
 * the tie with the fastest and its robust order, the memory line, and --against term by term. */
#ifndef TS_RANKING_EXPLAIN_H
#define TS_RANKING_EXPLAIN_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "reports/ranking.h"

/* Whether ts_ranking_bands may reorder a ranking made under `so` and `o`: the objective is not
 * memory and nothing is refined (simulated steps set their own order). */
int ts_ranking_reorders(const ts_search_opts *so, const ts_ranking_opts *o);

/* Bands for r's layouts; the tie group first, most robust first, unless the objective is memory
 * (splits and simulated steps follow their layouts); then r is cut back to so->top_k layouts (it
 * may hold more to draw a tie from). */
ts_status ts_ranking_bands(const ts_problem *pb, const ts_search_opts *so, const ts_ranking_opts *o, ts_ranking *r);
/* The best layout under o->against (pins), with its band. */
ts_status ts_ranking_against(const ts_problem *pb, const ts_search_opts *so, const ts_ranking_opts *o, ts_ranking *r);

/* "TP comm +2.1 s, bubble -3.4 s, memory -12.0 GB; bands overlap (a tie)": the best layout minus
 * the --against one. */
void ts_ranking_against_text(const ts_ranking *r, char *buf, size_t cap);
/* The tie in words (empty when the fastest stands alone). */
void ts_ranking_tie_text(const ts_problem *pb, const ts_ranking *r, char *buf, size_t cap);

/* The '#' lines on the stack, the memory line and the bands. */
void ts_ranking_print_context(FILE *f, const ts_problem *pb, const ts_ranking *r);
/* The JSON: "stack", "mem_headroom_bytes" (root), per layout "band_s", "tight", "tie", "exotic",
 * and root "tie" and "against". */
ts_status ts_ranking_explain_json(const ts_problem *pb, const ts_ranking *r, cJSON *root);

#endif
