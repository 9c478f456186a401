/* Processor sharing of a node's cores among its computing ranks (see cores.h). */
#include "sim/cores.h"

#include <stdlib.h>

ts_status ts_cores_init(ts_cores *c, int n_users, const int *node, const double *weight, int n_nodes,
                        double cores) {
    *c = (ts_cores){.cores = cores, .n_users = n_users, .n_nodes = n_nodes};
    if (!(cores > 0) || n_users < 1 || n_nodes < 1)
        return TS_FAIL(TS_ERR_INPUT, "core sharing: %d ranks on %d nodes of %g cores", n_users, n_nodes, cores);
    c->users = calloc((size_t)n_users, sizeof *c->users);
    c->nodes = calloc((size_t)n_nodes, sizeof *c->nodes);
    c->marked = malloc((size_t)n_nodes * sizeof *c->marked);
    c->changed = malloc((size_t)n_users * sizeof *c->changed);
    c->runs = malloc((size_t)n_users * sizeof *c->runs);
    if (!c->users || !c->nodes || !c->marked || !c->changed || !c->runs) {
        ts_cores_free(c);
        return TS_FAIL(TS_ERR_NOMEM, "out of memory for core sharing of %d ranks", n_users);
    }
    /* Each node's `run` is its slice of `runs`, room for the ranks on it. */
    for (int r = 0; r < n_users; r++) {
        if (node[r] < 0 || node[r] >= n_nodes) {
            ts_cores_free(c);
            return TS_FAIL(TS_ERR_INPUT, "core sharing: rank %d on node %d of %d", r, node[r], n_nodes);
        }
        c->users[r].node = node[r];
        c->users[r].weight = weight[r];
        c->nodes[node[r]].n_run++;
    }
    for (int n = 0, at = 0; n < n_nodes; n++) {
        c->nodes[n].run = c->runs + at;
        at += c->nodes[n].n_run;
        c->nodes[n].n_run = 0;
    }
    return TS_OK;
}

void ts_cores_free(ts_cores *c) {
    free(c->runs);
    free(c->users);
    free(c->nodes);
    free(c->marked);
    free(c->changed);
    *c = (ts_cores){0};
}

static void mark(ts_cores *c, int node) {
    if (c->nodes[node].marked) return;
    c->nodes[node].marked = 1;
    c->marked[c->n_marked++] = node;
}

/* Brings rank r's remaining work up to `now_s` at its current rate. */
static void advance(ts_core_user *u, double now_s) {
    u->remaining_s -= (now_s - u->since_s) * u->rate;
    if (u->remaining_s < 0) u->remaining_s = 0;
    u->since_s = now_s;
}

void ts_cores_start(ts_cores *c, int r, double work_s, double now_s) {
    ts_core_user *u = &c->users[r];
    ts_core_node *n = &c->nodes[u->node];
    *u = (ts_core_user){.node = u->node, .weight = u->weight, .running = 1, .fresh = 1, .remaining_s = work_s,
                        .since_s = now_s, .rate = 1, .version = u->version, .slot = n->n_run};
    n->run[n->n_run++] = r;
    n->load += u->weight;
    mark(c, u->node);
}

void ts_cores_end(ts_cores *c, int r, double now_s) {
    ts_core_user *u = &c->users[r];
    ts_core_node *n = &c->nodes[u->node];
    (void)now_s;
    int last = n->run[--n->n_run];
    n->run[u->slot] = last;
    c->users[last].slot = u->slot;
    n->load -= u->weight;
    if (n->n_run == 0) n->load = 0; /* no drift from adding and removing weights */
    u->running = 0;
    mark(c, u->node);
}

void ts_cores_reshare(ts_cores *c, double now_s) {
    c->n_changed = 0;
    for (int k = 0; k < c->n_marked; k++) {
        ts_core_node *n = &c->nodes[c->marked[k]];
        n->marked = 0;
        double rate = n->load > c->cores ? c->cores / n->load : 1.0;
        for (int j = 0; j < n->n_run; j++) {
            int r = n->run[j];
            ts_core_user *u = &c->users[r];
            advance(u, now_s);
            if (!u->fresh && u->rate == rate) continue;
            u->rate = rate;
            u->fresh = 0;
            u->version++;
            c->changed[c->n_changed++] = r;
        }
    }
    c->n_marked = 0;
}

double ts_cores_finish_s(const ts_cores *c, int r) {
    const ts_core_user *u = &c->users[r];
    return u->since_s + u->remaining_s / u->rate;
}
