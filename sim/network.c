/* Max-min fair sharing of links by fluid flows, recomputed incrementally (see network.h). */
#include "sim/network.h"

#include <stdlib.h>
#include <string.h>

/* `p` with room for at least `need` (≥ 1) elements of `size` bytes; NULL when out of memory,
 * `p` and `*cap` then untouched. */
static void *grow(void *p, int *cap, int need, size_t size) {
    if (need <= *cap) return p;
    int c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(p, (size_t)c * size);
    if (q) *cap = c;
    return q;
}

#define GROW(arr, cap, need, what)                                                                 \
    do {                                                                                           \
        void *grown_ = grow((arr), &(cap), (need), sizeof *(arr));                                 \
        if (grown_ == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for network %s", (what));  \
        (arr) = grown_;                                                                            \
    } while (0)

ts_status ts_net_init(ts_net *n, int n_links) {
    *n = (ts_net){0};
    /* Aligned to a cache line, so that each group of four links shares one. */
    size_t bytes = ((n_links > 0 ? (size_t)n_links : 1) * sizeof *n->links + 63) & ~(size_t)63;
    n->links = aligned_alloc(64, bytes);
    n->more = calloc(n_links > 0 ? (size_t)n_links : 1, sizeof *n->more);
    n->fill_of = calloc(n_links > 0 ? (size_t)n_links : 1, sizeof *n->fill_of);
    if (n->links == NULL || n->more == NULL || n->fill_of == NULL) {
        ts_net_free(n);
        return TS_FAIL(TS_ERR_NOMEM, "out of memory for %d network links", n_links);
    }
    memset(n->links, 0, bytes);
    n->n_links = n_links;
    return TS_OK;
}

void ts_net_free(ts_net *n) {
    for (int i = 0; n->more && i < n->n_links; i++) free(n->more[i].fl);
    for (int i = 0; i < n->n_flows; i++) free(n->flows[i].hops);
    free(n->links);
    free(n->more);
    free(n->fill_of);
    free(n->flows);
    free(n->free_ids);
    free(n->seed_flows);
    free(n->seed_links);
    free(n->changed);
    free(n->comp_links);
    free(n->comp_flows);
    free(n->lone);
    free(n->fill);
    *n = (ts_net){0};
}

/* Entry `e` (< n_fl) of link `l`'s active flows. */
static inline ts_net_entry *entry(const ts_net *n, int l, int e) {
    return e == 0 ? &n->links[l].first : &n->more[l].fl[e - 1];
}

static ts_status add_seed(int **seeds, int *n_seeds, int *cap, int id) {
    GROW(*seeds, *cap, *n_seeds + 1, "seeds");
    (*seeds)[(*n_seeds)++] = id;
    return TS_OK;
}

ts_status ts_net_add(ts_net *n, double now_s, double work_s, const int *links, int n_links,
                     int64_t tag, int *id) {
    if (n_links < 1 || !(work_s > 0))
        return TS_FAIL(TS_ERR_INPUT,
                       "a flow needs work > 0 over at least one link (got %g s, %d links)", work_s,
                       n_links);
    int fid;
    if (n->n_free > 0) {
        fid = n->free_ids[--n->n_free];
    } else {
        GROW(n->flows, n->cap_flows, n->n_flows + 1, "flows");
        fid = n->n_flows++;
        n->flows[fid] = (ts_flow){0};
    }
    ts_flow *f = &n->flows[fid];
    if (n_links > f->cap_links) {
        ts_net_hop *h = realloc(f->hops, (size_t)n_links * sizeof *h);
        if (h == NULL)
            return TS_FAIL(TS_ERR_NOMEM, "out of memory for a flow over %d links", n_links);
        f->hops = h;
        f->cap_links = n_links;
    }
    for (int k = 0; k < n_links; k++) {
        int l = links[k];
        ts_net_link *L = &n->links[l];
        if (L->n_fl > 0) GROW(n->more[l].fl, L->cap_more, L->n_fl, "link flow lists");
        *entry(n, l, L->n_fl) = (ts_net_entry){fid, k};
        f->hops[k] = (ts_net_hop){l, L->n_fl++};
    }
    TS_CHECK(add_seed(&n->seed_flows, &n->n_seed_flows, &n->cap_seed_flows, fid));
    f->n_links = n_links;
    f->remaining_s = work_s;
    f->rate = 0;
    f->cap = 1.0;
    f->since_s = now_s;
    f->tag = tag;
    f->active = 1;
    f->fresh = 1;
    *id = fid;
    return TS_OK;
}

ts_status ts_net_set_cap(ts_net *n, int id, double cap) {
    ts_flow *f = &n->flows[id];
    if (!(cap > 0 && cap <= 1))
        return TS_FAIL(TS_ERR_INPUT, "a flow's cap must be in (0, 1], got %g", cap);
    if (!f->active || f->cap == cap) return TS_OK;
    f->cap = cap;
    return add_seed(&n->seed_flows, &n->n_seed_flows, &n->cap_seed_flows, id);
}

ts_status ts_net_remove(ts_net *n, int id) {
    ts_flow *f = &n->flows[id];
    GROW(n->free_ids, n->cap_free, n->n_free + 1, "free flow ids");
    for (int k = 0; k < f->n_links; k++) {
        int l = f->hops[k].link, pos = f->hops[k].slot;
        ts_net_link *L = &n->links[l];
        ts_net_entry last = *entry(n, l, --L->n_fl);
        if (pos != L->n_fl) {
            *entry(n, l, pos) = last;
            n->flows[last.flow].hops[last.idx].slot = pos;
        }
        if (L->n_fl > 0) TS_CHECK(add_seed(&n->seed_links, &n->n_seed_links, &n->cap_seed_links, l));
    }
    f->active = 0;
    n->free_ids[n->n_free++] = id;
    return TS_OK;
}

static int fill_before(const ts_fill_key *x, const ts_fill_key *y) {
    return x->key < y->key || (x->key == y->key && x->link < y->link);
}

static ts_status fill_push(ts_net *n, int link) {
    ts_net_fill *L = &n->fill_of[link];
    GROW(n->fill, n->cap_fill, n->n_fill + 1, "fill heap");
    ts_fill_key k = {L->cap_left / L->unfrozen, link, L->stamp};
    int i = n->n_fill++;
    while (i > 0) {
        int parent = (i - 1) / 2;
        if (!fill_before(&k, &n->fill[parent])) break;
        n->fill[i] = n->fill[parent];
        i = parent;
    }
    n->fill[i] = k;
    return TS_OK;
}

static ts_fill_key fill_pop(ts_net *n) {
    ts_fill_key top = n->fill[0], last = n->fill[--n->n_fill];
    int i = 0;
    for (;;) {
        int child = 2 * i + 1;
        if (child >= n->n_fill) break;
        if (child + 1 < n->n_fill && fill_before(&n->fill[child + 1], &n->fill[child])) child++;
        if (!fill_before(&n->fill[child], &last)) break;
        n->fill[i] = n->fill[child];
        i = child;
    }
    if (n->n_fill) n->fill[i] = last;
    return top;
}

/* Queues `link` for the component search unless seen this epoch or crossed by no flow. */
static void visit_link(ts_net *n, int link) {
    ts_net_fill *L = &n->fill_of[link];
    if (L->mark == n->epoch || n->links[link].n_fl == 0) return;
    L->mark = n->epoch;
    n->comp_links[n->n_comp_links++] = link;
}

/* Adds flow `id` to the components unless seen this epoch: queues its shared links (a lone link
 * leads to no other flow) and notes its lowest lone link. */
static void visit_flow(ts_net *n, int id) {
    ts_flow *f = &n->flows[id];
    if (f->mark == n->epoch) return;
    f->mark = n->epoch;
    n->comp_flows[n->n_comp_flows++] = id;
    int lone = -1;
    f->shared = 0;
    for (int k = 0; k < f->n_links; k++) {
        int l = f->hops[k].link;
        if (n->links[l].n_fl > 1) {
            f->shared++;
            visit_link(n, l);
        } else if (lone < 0 || l < lone) {
            lone = l;
        }
    }
    if (lone >= 0 || f->cap < 1) n->lone[n->n_lone++] = (ts_net_lone){f->cap, lone >= 0 ? lone : n->n_links + id, id};
}

/* Freezes flow `id` at `share` and charges its shared links, queueing those with unfrozen flows
 * left (all but `link`, the one that froze it). Lone links are left alone: no other flow reads
 * them. */
static ts_status freeze_flow(ts_net *n, int id, double share, int link) {
    ts_flow *f = &n->flows[id];
    f->frozen = 1;
    if (f->fresh || f->rate != share) {
        f->version++;
        n->changed[n->n_changed++] = id;
    }
    f->rate = share;
    f->fresh = 0;
    for (int k = 0; f->shared > 0 && k < f->n_links; k++) {
        int l = f->hops[k].link;
        if (n->links[l].n_fl == 1) continue;
        ts_net_fill *M = &n->fill_of[l];
        M->cap_left -= share;
        if (M->cap_left < 0) M->cap_left = 0;
        M->unfrozen--;
        M->stamp++;
        if (M->unfrozen > 0 && l != link) TS_CHECK(fill_push(n, l));
    }
    return TS_OK;
}

/* Freezes the unfrozen flows crossing shared link `link` at its share. */
static ts_status freeze_link(ts_net *n, int link) {
    const ts_net_fill *L = &n->fill_of[link];
    double share = L->cap_left / L->unfrozen;
    for (int e = 0; e < n->links[link].n_fl; e++) {
        int id = entry(n, link, e)->flow;
        if (!n->flows[id].frozen) TS_CHECK(freeze_flow(n, id, share, link));
    }
    return TS_OK;
}

static int lone_before(const ts_net_lone *x, const ts_net_lone *y) {
    return x->key < y->key || (x->key == y->key && x->link < y->link);
}

static int lone_cmp(const void *a, const void *b) {
    const ts_net_lone *x = a, *y = b;
    return lone_before(x, y) ? -1 : lone_before(y, x);
}

/* The lone links by (cap, link), ascending (distinct: one flow crosses each). A reshare usually has a
 * few, found nearly in order, and qsort's calls through the comparison cost ten times an
 * insertion sort there (a third of sim_speed's Llama-3-405B row went to qsort); many use qsort. */
static void sort_lone(ts_net_lone *a, int n) {
    if (n > 32) {
        qsort(a, (size_t)n, sizeof *a, lone_cmp);
        return;
    }
    for (int i = 1; i < n; i++) {
        ts_net_lone x = a[i];
        int j = i;
        for (; j > 0 && lone_before(&x, &a[j - 1]); j--) a[j] = a[j - 1];
        a[j] = x;
    }
}

/* The connected components of the flows added and the links left shared since the last reshare,
 * breadth first. (A flow added and removed since then is no longer active.) */
static void find_components(ts_net *n) {
    for (int i = 0; i < n->n_seed_flows; i++)
        if (n->flows[n->seed_flows[i]].active) visit_flow(n, n->seed_flows[i]);
    for (int i = 0; i < n->n_seed_links; i++) visit_link(n, n->seed_links[i]);
    n->n_seed_flows = n->n_seed_links = 0;
    for (int q = 0; q < n->n_comp_links; q++) {
        int l = n->comp_links[q];
        for (int e = 0; e < n->links[l].n_fl; e++) visit_flow(n, entry(n, l, e)->flow);
    }
}

ts_status ts_net_reshare(ts_net *n, double now_s) {
    n->n_changed = 0;
    n->n_comp_links = 0;
    n->n_comp_flows = 0;
    n->n_lone = 0;
    n->n_fill = 0;
    n->epoch++;
    GROW(n->comp_links, n->cap_comp_links, n->n_links, "component links");
    GROW(n->comp_flows, n->cap_comp_flows, n->n_flows, "component flows");
    GROW(n->lone, n->cap_lone, n->n_flows, "lone links");
    GROW(n->changed, n->cap_changed, n->n_flows, "changed flows");
    find_components(n);

    /* Work done at the old rates up to now; then progressive filling from empty links. */
    for (int i = 0; i < n->n_comp_flows; i++) {
        ts_flow *f = &n->flows[n->comp_flows[i]];
        if (!f->fresh) {
            f->remaining_s -= f->rate * (now_s - f->since_s);
            if (f->remaining_s < 0) f->remaining_s = 0;
        }
        f->since_s = now_s;
        f->frozen = 0;
    }
    for (int i = 0; i < n->n_comp_links; i++) {
        int l = n->comp_links[i];
        if (n->links[l].n_fl == 1) continue; /* a lone seed */
        ts_net_fill *L = &n->fill_of[l];
        L->cap_left = 1.0;
        L->unfrozen = n->links[l].n_fl;
        L->stamp++;
        TS_CHECK(fill_push(n, n->comp_links[i]));
    }
    /* A lone link keeps key 1 (all of it, one flow) until its flow freezes, so the lone links
     * join the fill order as (1, link), lowest first; only a flow's lowest one can freeze it. A
     * capped flow's cap is its key, as a private link of that capacity would be. */
    sort_lone(n->lone, n->n_lone);
    int next = 0;
    for (;;) {
        ts_fill_key lone = {next < n->n_lone ? n->lone[next].key : 1.0, next < n->n_lone ? n->lone[next].link : -1, 0};
        if (n->n_fill > 0 && (lone.link < 0 || fill_before(&n->fill[0], &lone))) {
            ts_fill_key k = fill_pop(n);
            const ts_net_fill *L = &n->fill_of[k.link];
            if (k.stamp != L->stamp || L->unfrozen == 0) continue;
            TS_CHECK(freeze_link(n, k.link));
        } else if (lone.link >= 0) {
            int id = n->lone[next++].flow;
            if (!n->flows[id].frozen) TS_CHECK(freeze_flow(n, id, lone.key, lone.link));
        } else {
            break;
        }
    }
    return TS_OK;
}

double ts_net_finish_s(const ts_net *n, int id) {
    const ts_flow *f = &n->flows[id];
    return f->since_s + f->remaining_s / f->rate;
}
