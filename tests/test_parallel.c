/* Work split over threads (common/parallel.h) and the parameters' initial values filled that way
 * (exec/param_layout.h tr_seg_init_values_on, exec/reference.c): every element written once, the
 * same values on any number of threads. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/parallel.h"
#include "exec/comm_mpi.h"
#include "exec/param_layout.h"
#include "exec/reference.h"
#include "program/program.h"
#include "tests/helpers.h"

static void count_range(void *ctx, size_t lo, size_t hi) {
    unsigned char *seen = ctx;
    for (size_t i = lo; i < hi; i++) seen[i]++;
}

static void count_calls(void *ctx, size_t lo, size_t hi) {
    (void)lo, (void)hi;
    (*(int *)ctx)++;
}

Test(parallel, ranges_cover_every_index_once) {
    size_t n = 16 * (size_t)TS_PAR_MIN_RANGE + 7;
    unsigned char *seen = calloc(n, 1);
    cr_assert_not_null(seen);
    ts_par_ranges(n, 5, count_range, seen);
    for (size_t i = 0; i < n; i++) cr_assert_eq(seen[i], 1, "index %zu seen %d times", i, seen[i]);
    free(seen);
    int calls = 0;
    ts_par_ranges(TS_PAR_MIN_RANGE, 8, count_calls, &calls);
    cr_expect_eq(calls, 1, "below two ranges' worth the caller does it alone");
    calls = 0;
    ts_par_ranges(0, 8, count_calls, &calls);
    cr_expect_eq(calls, 0);
    int alone = ts_par_threads();
    cr_expect(alone >= 1 && alone <= 16);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "1000000", 1);
    cr_expect_eq(ts_par_threads(), 1, "a node's many ranks share its cores");
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "two", 1);
    cr_expect_eq(ts_par_threads(), alone, "an unreadable count is ignored");
    unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
}

/* tiny-moe widened so that its segments split (a dense first layer, a 65536-token vocabulary),
 * rank 3 of tp=2 dp=2 ep=2: each segment filled on 1 and on 4 threads, every element written
 * (NaN poison gone) and the two bitwise equal. */
Test(parallel, initial_values_do_not_depend_on_threads) {
    ts_problem pb = test_problem("tiny-moe", "cpu-localhost", 4, 8, 128, 1);
    pb.model.vocab = 65536;
    pb.model.ffn_hidden = 2752;
    pb.model.moe.expert_ffn = 1376;
    pb.model.moe.first_dense = 1;
    ts_layout l = test_layout("dp=2,tp=2,pp=1,cp=1,ep=2,sp=1,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none");
    ts_program prog;
    cr_assert_eq(ts_program_build(&pb, &l, NULL, &prog), TS_OK, "%s", ts_error_message());
    struct ts_comm ep = {.size = 2, .rank = 1}, etp = {.size = 2, .rank = 1};
    ts_runtime rt = {.layout = l, .rank = 3, .size = 4, .coords = ts_rank_coords(&l, 3)};
    rt.comm[TS_GROUP_EP] = &ep;
    rt.comm[TS_GROUP_ETP] = &etp;
    tr_shape s;
    cr_assert_eq(tr_shape_init(&s, &pb, &l, &rt, &prog.stages[0]), TS_OK, "%s", ts_error_message());
    const struct {
        tr_seg_kind kind;
        int layer;
    } segs[] = {{TR_SEG_SHARED, 0}, {TR_SEG_SHARED, 1}, {TR_SEG_EXPERTS, 1}, {TR_SEG_EMBED, 0}, {TR_SEG_HEAD, 0}};
    int split = 0;
    for (size_t k = 0; k < sizeof segs / sizeof segs[0]; k++) {
        size_t n = tr_seg_size(&s, segs[k].kind, segs[k].layer);
        cr_assert(n > 0);
        float *one = malloc(n * sizeof *one), *four = malloc(n * sizeof *four);
        cr_assert(one && four);
        for (size_t i = 0; i < n; i++) one[i] = four[i] = NAN;
        tr_seg_init_values_on(&s, segs[k].kind, segs[k].layer, 1234, one, 1);
        tr_seg_init_values_on(&s, segs[k].kind, segs[k].layer, 1234, four, 4);
        for (size_t i = 0; i < n; i++) cr_assert(!isnan(one[i]), "segment %zu element %zu not written", k, i);
        cr_expect(memcmp(one, four, n * sizeof *one) == 0, "segment %zu differs on 4 threads", k);
        split += n >= 4 * (size_t)TS_PAR_MIN_RANGE;
        free(one);
        free(four);
    }
    cr_expect(split >= 2, "the embedding and the experts split over 4 threads (%d segments did)", split);
    tr_shape_free(&s);
    ts_program_free(&prog);

    /* the reference's tensors, filled the same way, equal the generator's values */
    ts_ref r;
    cr_assert_eq(ts_ref_init(&r, &pb.model, 16, 1, 77), TS_OK, "%s", ts_error_message());
    const float *embed = ts_ref_tensor(&r.params, 0, TS_REF_EMBED);
    for (size_t i = 0; i < (size_t)pb.model.vocab * (size_t)pb.model.hidden; i += 4099)
        cr_assert_eq(embed[i], ts_ref_init_value(77, 0, TS_REF_EMBED, (int64_t)i), "embedding element %zu", i);
    ts_ref_free(&r);
}
