/* sim/cores.h: processor sharing of a node's cores — rates, finish times, re-planning when ops
 * start and end, weights of representative ranks, and nodes that do not interact. */
#include <criterion/criterion.h>
#include <math.h>

#include "sim/cores.h"

static void init(ts_cores *c, int n, const int *node, const double *weight, int n_nodes, double cores) {
    ts_error_clear();
    cr_assert_eq(ts_cores_init(c, n, node, weight, n_nodes, cores), TS_OK, "%s", ts_error_message());
}

static int changed(const ts_cores *c, int r) {
    for (int k = 0; k < c->n_changed; k++)
        if (c->changed[k] == r) return 1;
    return 0;
}

Test(sim_cores, more_ranks_than_cores_share_them) {
    ts_cores c;
    const int node[3] = {0, 0, 0};
    const double w[3] = {1, 1, 1};
    init(&c, 3, node, w, 1, 2.0);
    for (int r = 0; r < 3; r++) ts_cores_start(&c, r, 1.0, 0.0);
    cr_assert(ts_cores_dirty(&c));
    ts_cores_reshare(&c, 0.0);
    cr_expect_eq(c.n_changed, 3);
    for (int r = 0; r < 3; r++) cr_expect(fabs(ts_cores_finish_s(&c, r) - 1.5) < 1e-12, "rank %d ends at %g", r, ts_cores_finish_s(&c, r));
    cr_expect(!ts_cores_dirty(&c));
    ts_cores_free(&c);
}

Test(sim_cores, an_end_speeds_up_the_others) {
    ts_cores c;
    const int node[2] = {0, 0};
    const double w[2] = {1, 1};
    init(&c, 2, node, w, 1, 1.0);
    ts_cores_start(&c, 0, 1.0, 0.0);
    ts_cores_start(&c, 1, 3.0, 0.0);
    ts_cores_reshare(&c, 0.0);
    cr_expect(fabs(ts_cores_finish_s(&c, 0) - 2.0) < 1e-12); /* half a core each */
    uint32_t v = c.users[1].version;
    ts_cores_end(&c, 0, 2.0);
    ts_cores_reshare(&c, 2.0);
    cr_expect(changed(&c, 1) && c.users[1].version != v, "rank 1's finish moved");
    cr_expect(fabs(ts_cores_finish_s(&c, 1) - 4.0) < 1e-12, "3 s of work: 1 done by t=2, 2 more alone, ends at %g",
              ts_cores_finish_s(&c, 1));
    ts_cores_free(&c);
}

Test(sim_cores, no_contention_no_change) {
    ts_cores c;
    const int node[2] = {0, 1};
    const double w[2] = {1, 1};
    init(&c, 2, node, w, 2, 1.0);
    ts_cores_start(&c, 0, 1.0, 0.0);
    ts_cores_reshare(&c, 0.0);
    ts_cores_start(&c, 1, 1.0, 0.5); /* another node: rank 0 keeps its core */
    ts_cores_reshare(&c, 0.5);
    cr_expect(!changed(&c, 0) && changed(&c, 1));
    cr_expect(fabs(ts_cores_finish_s(&c, 0) - 1.0) < 1e-12 && fabs(ts_cores_finish_s(&c, 1) - 1.5) < 1e-12);
    ts_cores_free(&c);
}

Test(sim_cores, weights_count_the_ranks_a_representative_stands_for) {
    ts_cores c;
    const int node[1] = {0};
    const double w[1] = {4};
    init(&c, 1, node, w, 1, 2.0);
    ts_cores_start(&c, 0, 1.0, 0.0);
    ts_cores_reshare(&c, 0.0);
    cr_expect(fabs(ts_cores_finish_s(&c, 0) - 2.0) < 1e-12, "4 ranks on 2 cores: twice as long, got %g",
              ts_cores_finish_s(&c, 0));
    ts_cores_free(&c);
}

Test(sim_cores, refuses_bad_set_ups) {
    ts_cores c;
    const int node[1] = {3};
    const double w[1] = {1};
    cr_expect_eq(ts_cores_init(&c, 1, node, w, 2, 1.0), TS_ERR_INPUT);
    cr_expect_eq(ts_cores_init(&c, 1, node, w, 4, 0.0), TS_ERR_INPUT);
}
