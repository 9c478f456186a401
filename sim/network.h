/* Communication as fluid flows over shared links, for the event engine (engine.h).
 *
 * A link is a resource of capacity 1 (the engine numbers them: one direction of one simulated
 * rank's NVLink or NIC). A flow is a transfer with `work_s` seconds of contention-free work over
 * a set of distinct links; it progresses at a rate in (0, 1], so alone on its links it takes
 * `work_s` seconds, and two flows sharing a link take twice as long each.
 *
 * A flow may be capped below 1 (ts_net_set_cap): the simulator caps data-parallel traffic while its
 * rank computes (engine.c). Rates are max-min fair, found by progressive filling (Bertsekas & Gallager, "Data Networks",
 * 2nd ed., §6.5.2): all unfrozen flows grow together; the link with the least capacity left per
 * unfrozen flow crossing it runs out first, and its flows freeze at that share; repeat until every
 * flow is frozen. No flow can then go faster without slowing one that is no faster than it.
 *
 * Incremental use. ts_net_add only notes the new flow, ts_net_remove the links it leaves that other
 * flows still cross; ts_net_reshare then brings the work of the affected flows up to date and
 * recomputes rates over the connected components (links joined by flows) of those flows and links
 * only, since no other rate can change.
 * It lists in `changed` the flows whose finish time moved (new flows included) and bumps their
 * `version`, so a completion event scheduled for an earlier finish can be recognised as stale.
 * Links that only one flow crosses (lone links: most links, since a collective's members each
 * have their own) are never queued: each has key 1 until its flow freezes, so the flows that own
 * one join the fill order at (1, their lowest lone link). Cost of a reshare: O(F log F + S log S
 * + Σ links of F) over the F flows and S shared links of the touched components.
 *
 * ts_net_init / ts_net_free pair; the net owns every array below. */
#ifndef TS_NETWORK_H
#define TS_NETWORK_H

#include <stdint.h>

#include "common/status.h"

typedef struct {
    int flow; /* flow id */
    int idx;  /* position of this link in the flow's `links` */
} ts_net_entry;

/* What every flow's start and end touch of a link, 16 bytes: the 2 × 2 links of one
 * simulated rank on a flat fabric (engine.c numbers them together; 2 × (1 + tiers) over fabric
 * tiers) share a cache line, and a link's first flow
 * (most links carry one at a time: a collective's members each have their own) is inline. */
typedef struct {
    ts_net_entry first; /* entry 0 of the active flows crossing it, when n_fl > 0 */
    int n_fl;           /* active flows crossing it */
    int cap_more;       /* room in its ts_net_more */
} ts_net_link;

typedef struct {
    ts_net_entry *fl; /* (cap_more) entries 1 .. n_fl − 1 */
} ts_net_more;

/* Reshare scratch of a link, apart from the hot part above. */
typedef struct {
    double cap_left; /* capacity not yet given to frozen flows */
    int unfrozen;    /* flows crossing it not yet frozen */
    uint32_t stamp;  /* bumped whenever its fill key changes */
    uint64_t mark;   /* epoch of the last visit */
} ts_net_fill;

typedef struct {
    int link; /* link id */
    int slot; /* position of the flow in the link's entries */
} ts_net_hop;

typedef struct {
    double remaining_s; /* contention-free work left, as of since_s */
    double rate;        /* current share of its links, (0, cap]; 0 until the first reshare */
    double cap;         /* the most it may take of any link, (0, 1] (ts_net_set_cap; 1 by default) */
    double since_s;
    uint32_t version; /* bumped whenever its finish time changes */
    int64_t tag;      /* the caller's, returned untouched */
    ts_net_hop *hops; /* (n_links) the links it crosses */
    int n_links, cap_links;
    int active;    /* in the net (ids of removed flows are reused) */
    int fresh;     /* added since the last reshare */
    int frozen;    /* reshare scratch */
    int shared;    /* reshare scratch: its links that other flows cross */
    uint64_t mark; /* reshare scratch: epoch of the last visit */
} ts_flow;

typedef struct {
    double key; /* the flow's cap */
    int link;   /* a flow's lowest-numbered link that no other flow crosses; a flow capped below 1
                   without one: n_links + its id (its cap acts as a private link of that capacity) */
    int flow;
} ts_net_lone;

typedef struct {
    double key; /* capacity left per unfrozen flow */
    int link;
    uint32_t stamp;
} ts_fill_key;

typedef struct {
    ts_net_link *links; /* (n_links) */
    ts_net_more *more;  /* (n_links) */
    ts_net_fill *fill_of; /* (n_links) */
    int n_links;
    ts_flow *flows; /* (n_flows) ever used; removed ones are on `free_ids` */
    int n_flows, cap_flows;
    int *free_ids;
    int n_free, cap_free;
    int *seed_flows; /* flows added since the last reshare */
    int n_seed_flows, cap_seed_flows;
    int *seed_links; /* links that flows left since the last reshare, others still crossing them */
    int n_seed_links, cap_seed_links;
    int *changed; /* after ts_net_reshare: flows whose finish time moved */
    int n_changed, cap_changed;
    int *comp_links; /* reshare scratch: the touched components */
    int n_comp_links, cap_comp_links;
    int *comp_flows;
    int n_comp_flows, cap_comp_flows;
    ts_net_lone *lone; /* reshare scratch: the component flows that have a lone link */
    int n_lone, cap_lone;
    ts_fill_key *fill; /* reshare scratch: min-heap by (key, link) */
    int n_fill, cap_fill;
    uint64_t epoch;
} ts_net;

ts_status ts_net_init(ts_net *n, int n_links);
void ts_net_free(ts_net *n);

/* Adds a flow of `work_s` > 0 seconds over `n_links` ≥ 1 distinct links (ids < the net's
 * n_links) at time `now_s`; `*id` receives its id. Its rate is set by the next reshare. */
ts_status ts_net_add(ts_net *n, double now_s, double work_s, const int *links, int n_links,
                     int64_t tag, int *id);

/* Caps flow `id`'s rate at `cap` in (0, 1] from `now` on (1: no cap): as if it crossed a link of
 * its own with that capacity. The next reshare brings its work up to date at its old rate and
 * recomputes its component. */
ts_status ts_net_set_cap(ts_net *n, int id, double cap);

/* Removes flow `id` (finished). */
ts_status ts_net_remove(ts_net *n, int id);

/* Whether a reshare has work: flows were added, or removed from links that others still cross,
 * since the last one. (Inline: the event loop asks once per event.) */
static inline int ts_net_dirty(const ts_net *n) {
    return n->n_seed_flows > 0 || n->n_seed_links > 0;
}

/* Recomputes the rates of the flows that the additions and removals since the last call can
 * affect, as of `now_s` (no earlier than any of those calls); fills `changed`. */
ts_status ts_net_reshare(ts_net *n, double now_s);

/* When flow `id` finishes if rates stay as they are. */
double ts_net_finish_s(const ts_net *n, int id);

#endif
