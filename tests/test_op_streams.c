/* The executor's two streams (exec/op_streams.h) on one-stage programs, and the CPU backend's op
 * clock (backend.h). What the waits guarantee end to end, that any interleaving they allow trains
 * exactly as the program order does, is checked under MPI by tests/test_exec_parity.c
 * (mpi/stream_orders_train_alike). Here:
 *  - DP ops list every segment once (ZeRO-1 buckets, ZeRO-2/3 per layer), in the trainer's order;
 *  - a bucket's reduction waits for the last backward op writing its gradients, the embedding's
 *    included, and no later: it can run beside the rest of the backward;
 *  - under ZeRO-2 a layer's reduction runs beside the next layer's backward (the other of the
 *    two one-layer gradient buffers) and holds back the one after (the same buffer);
 *  - the optimizer waits for the last DP op; the issue orders are permutations that keep each
 *    stream's order and every wait. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "exec/backend.h"
#include "exec/op_streams.h"
#include "program/recipe.h"
#include "tests/helpers.h"

typedef struct {
    ts_problem pb;
    ts_program prog;
    int *local_of;
    int8_t *grad_buffer;
    ts_seg_map map;
} fixture;

/* A one-stage layout (pp = 1, vpp = 1) of `model` on h100-sxm-dgx and its segment map, as the
 * trainer lays it out: layer j's segments 2j and 2j + 1, then the embedding and the head. */
static void fixture_init(fixture *f, const char *model, const char *layout_text, int64_t batch) {
    ts_layout l;
    ts_error_clear();
    cr_assert_eq(ts_layout_parse("test", layout_text, &l), TS_OK, "%s", ts_error_message());
    cr_assert_eq(l.pp, 1, "fixture: one stage only");
    f->pb = test_problem(model, "h100-sxm-dgx", ts_rank_count(&l), batch, 256, 1);
    cr_assert_eq(ts_program_build(&f->pb, &l, NULL, &f->prog), TS_OK, "%s", ts_error_message());
    int L = f->pb.model.layers, n_seg = 2 * L + 2;
    f->local_of = malloc((size_t)L * sizeof *f->local_of);
    f->grad_buffer = malloc((size_t)n_seg);
    cr_assert(f->local_of && f->grad_buffer);
    for (int j = 0; j < L; j++) f->local_of[j] = j;
    for (int s = 0; s < n_seg; s++) {
        int members = ts_group_size(&l, s % 2 ? TS_GROUP_EDP : TS_GROUP_DPCP);
        f->grad_buffer[s] = (int8_t)(s < 2 * L && l.zero >= 2 && members > 1 ? s / 2 % 2 : -1);
    }
    f->map = (ts_seg_map){.layers = L, .local_of = f->local_of, .n_local = L, .seg_embed = 2 * L,
                          .seg_head = 2 * L + 1, .grad_buffer = f->grad_buffer};
}

static void fixture_free(fixture *f) {
    ts_program_free(&f->prog);
    free(f->local_of);
    free(f->grad_buffer);
}

static const ts_stage_program *stage(const fixture *f) { return &f->prog.stages[0]; }

static int dp(const fixture *f, int i) { return ts_op_on_dp(&stage(f)->ops[i]); }

static void streams(const fixture *f, ts_stream_order order, ts_op_streams *s) {
    ts_error_clear();
    cr_assert_eq(ts_op_streams_init(s, stage(f), &f->map, order), TS_OK, "%s", ts_error_message());
}

/* How many times DP ops of `part` list each segment. */
static void count_segments(const fixture *f, const ts_op_streams *s, int part, int *count) {
    memset(count, 0, (size_t)(2 * f->map.n_local + 2) * sizeof *count);
    for (int i = 0; i < s->n_ops; i++) {
        if (!dp(f, i) || stage(f)->ops[i].part != part) continue;
        for (uint32_t k = s->seg_start[i]; k < s->seg_start[i + 1]; k++) count[s->segs[k]]++;
    }
}

/* count_segments into a fresh array of the stage's segments (the caller frees it). */
static int *segment_counts(const fixture *f, const ts_op_streams *s, int part) {
    int *count = calloc((size_t)(2 * f->map.n_local + 2), sizeof *count);
    cr_assert(count);
    count_segments(f, s, part, count);
    return count;
}

/* The last compute op before `i` that writes gradients of layer `layer` (-1: the embedding, -2:
 * the head, whose final norm the loss op runs). */
static int last_grad_writer(const fixture *f, int i, int layer) {
    int last = -1;
    for (int j = 0; j < i; j++) {
        const ts_op *op = &stage(f)->ops[j];
        if (dp(f, j) || (op->phase != TS_PHASE_BWD && op->phase != TS_PHASE_WGRAD)) continue;
        int hit = layer >= 0    ? op->layer == layer
                  : layer == -1 ? op->part == TS_PART_EMBED || op->part == TS_PART_TP_EMBED
                                : op->layer < 0 && (op->part == TS_PART_HEAD || op->part == TS_PART_LOSS);
        if (hit) last = j;
    }
    return last;
}

Test(op_streams, zero1_buckets_wait_for_their_gradients_only) {
    fixture f;
    fixture_init(&f, "llama3-8b", "dp=2,tp=1,pp=1,cp=1,ep=1,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none", 4);
    ts_op_streams s;
    streams(&f, TS_ORDER_PROGRAM, &s);
    int L = f.map.n_local, n_seg = 2 * L + 2;
    /* Every layer's shared gradients reduced once, the embedding and head once; experts never
     * (a dense model has no EDP ops). */
    int *count = segment_counts(&f, &s, TS_PART_GRAD_REDUCE);
    for (int j = 0; j < L; j++) {
        cr_expect_eq(count[2 * j], 1, "layer %d's gradients reduced %d times", j, count[2 * j]);
        cr_expect_eq(count[2 * j + 1], 0, "layer %d's experts reduced", j);
    }
    cr_expect_eq(count[2 * L], 1, "the embedding reduced %d times", count[2 * L]);
    cr_expect_eq(count[2 * L + 1], 1, "the head reduced %d times", count[2 * L + 1]);
    /* The step-start gathers: every layer's shared segment and the edges, once; experts only by
     * a MoE layer's own gather over the EDP group (none here). */
    count_segments(&f, &s, TS_PART_PARAM_GATHER, count);
    for (int k = 0; k < n_seg; k++)
        cr_expect_eq(count[k], k < 2 * L && k % 2 ? 0 : 1, "segment %d gathered %d times", k, count[k]);

    int buckets = 0, last_bwd = -1, early = 0;
    for (int i = 0; i < s.n_ops; i++) {
        const ts_op *op = &stage(&f)->ops[i];
        if (!dp(&f, i) && (op->phase == TS_PHASE_BWD || op->phase == TS_PHASE_WGRAD)) last_bwd = i;
    }
    for (int i = 0; i < s.n_ops; i++) {
        const ts_op *op = &stage(&f)->ops[i];
        if (!dp(&f, i) || op->part != TS_PART_GRAD_REDUCE) continue;
        buckets++;
        int need = -1;
        for (uint32_t k = s.seg_start[i]; k < s.seg_start[i + 1]; k++) {
            int seg = s.segs[k], w = last_grad_writer(&f, i, seg == 2 * L ? -1 : seg == 2 * L + 1 ? -2 : seg / 2);
            if (w > need) need = w;
        }
        cr_expect_geq(s.after[i], need, "bucket op %d waits for op %d, its gradients end at op %d", i, s.after[i],
                      need);
        cr_expect(s.after[i] >= 0 && !dp(&f, s.after[i]), "bucket op %d waits for no compute op", i);
        if (s.after[i] < last_bwd) early++;
    }
    cr_expect_gt(buckets, 2, "llama3-8b in 80 MB buckets: %d buckets", buckets);
    /* All but the last bucket (the one holding layer 0 and the embedding) can start before the
     * backward ends. */
    cr_expect_eq(early, buckets - 1, "%d of %d buckets may start before the backward's last op", early, buckets);
    /* The optimizer waits for the last DP op. */
    int last_dp = -1, opt = -1;
    for (int i = 0; i < s.n_ops; i++) {
        if (dp(&f, i)) last_dp = i;
        if (stage(&f)->ops[i].kind == TS_OP_OPTIMIZER) opt = i;
    }
    cr_assert_geq(opt, 0);
    cr_expect_eq(s.after[opt], last_dp, "the optimizer waits for op %d, the last DP op is %d", s.after[opt], last_dp);
    free(count);
    ts_op_streams_free(&s);
    fixture_free(&f);
}

/* ZeRO-1 with experts sharded over their own DP group (tiny-moe, dp=4, ep=2: EDP 2): the
 * step-start gathers list each layer's shared segment once in DP×CP buckets and its experts once
 * in the layer's own EDP gather, as the trainer shards them (exec/param_store.c); each forward
 * waits for both. */
Test(op_streams, zero1_experts_gather_over_their_group) {
    fixture f;
    fixture_init(&f, "tiny-moe", "dp=4,tp=1,pp=1,cp=1,ep=2,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none", 8);
    ts_op_streams s;
    streams(&f, TS_ORDER_PROGRAM, &s);
    int L = f.map.n_local, *count = segment_counts(&f, &s, TS_PART_PARAM_GATHER), edp_ops = 0;
    for (int i = 0; i < s.n_ops; i++) {
        const ts_op *op = &stage(&f)->ops[i];
        if (!dp(&f, i) || op->part != TS_PART_PARAM_GATHER || op->group != TS_GROUP_EDP) continue;
        edp_ops++;
        cr_expect_eq(s.seg_start[i + 1] - s.seg_start[i], 1, "an expert gather lists one segment");
        cr_expect_eq(s.segs[s.seg_start[i]], 2 * op->layer + 1, "layer %d's gather lists its experts", op->layer);
    }
    int moe = 0;
    for (int j = 0; j < L; j++) {
        int is_moe = ts_model_layer_is_moe(&f.pb.model, j);
        moe += is_moe;
        cr_expect_eq(count[2 * j], 1, "layer %d's shared segment gathered %d times", j, count[2 * j]);
        cr_expect_eq(count[2 * j + 1], is_moe, "layer %d's experts gathered %d times", j, count[2 * j + 1]);
    }
    cr_expect_gt(moe, 0);
    cr_expect_eq(edp_ops, moe, "%d expert gathers for %d MoE layers", edp_ops, moe);
    free(count);
    ts_op_streams_free(&s);
    fixture_free(&f);
}

/* ZeRO-3 gathers a layer's shared parameters over DP×CP and its experts over their own DP group
 * (EDP), each in an op of its own carrying that kind's bytes, and holds two copies of each kind:
 * every release a list names is of a held copy, and no kind ever holds more than two. With an
 * EDP group of one rank the experts stay whole: no expert gathers, and the DP×CP ones carry the
 * shared parameters alone. */
static void check_zero3_gathers(const char *layout, int edp) {
    fixture f;
    fixture_init(&f, "tiny-moe", layout, 8);
    ts_op_streams s;
    streams(&f, TS_ORDER_PROGRAM, &s);
    const ts_layout *l = &f.prog.layout;
    int L = f.map.n_local, n_seg = 2 * L + 2, gathers[2] = {0, 0};
    cr_assert_eq(ts_group_size(l, TS_GROUP_EDP), edp);
    int *held = calloc((size_t)n_seg, sizeof *held), n_held[2] = {0, 0};
    cr_assert(held);
    for (int i = 0; i < s.n_ops; i++) {
        const ts_op *op = &stage(&f)->ops[i];
        if (!dp(&f, i) || op->part != TS_PART_PARAM_GATHER || op->phase == TS_PHASE_STEP) continue;
        int kind = op->group == TS_GROUP_EDP;
        cr_expect(kind || op->group == TS_GROUP_DPCP, "a ZeRO-3 gather over group %d", op->group);
        double sh, ex;
        ts_layer_params_rank(&f.pb, l->tp, l->ep, l->etp, op->layer, &sh, &ex);
        cr_expect_float_eq(op->bytes, ts_weight_elem_bytes(&f.pb) * (kind ? ex : sh), 1e-9,
                           "layer %d's %s gather carries %g bytes", op->layer, kind ? "expert" : "shared", op->bytes);
        const int32_t *list = s.segs + s.seg_start[i];
        int n = (int)(s.seg_start[i + 1] - s.seg_start[i]);
        cr_assert_geq(n, 1);
        cr_expect_eq(list[0], 2 * op->layer + kind, "op %d gathers segment %d for layer %d", i, list[0], op->layer);
        for (int k = 1; k < n; k++) {
            cr_expect(held[list[k]], "op %d releases segment %d, which is not held", i, list[k]);
            cr_expect_eq(list[k] % 2, kind, "op %d releases a copy of the other kind", i);
            if (held[list[k]]) n_held[list[k] % 2]--;
            held[list[k]] = 0;
        }
        cr_expect(!held[list[0]], "op %d gathers segment %d while a copy is held", i, list[0]);
        held[list[0]] = 1;
        n_held[kind]++;
        cr_expect_leq(n_held[kind], 2, "op %d: %d copies of kind %d held", i, n_held[kind], kind);
        gathers[kind]++;
    }
    cr_expect_gt(gathers[0], 0);
    if (edp > 1) cr_expect_eq(gathers[1], gathers[0], "%d expert gathers, %d shared", gathers[1], gathers[0]);
    else cr_expect_eq(gathers[1], 0, "%d expert gathers over a group of one rank", gathers[1]);
    free(held);
    ts_op_streams_free(&s);
    fixture_free(&f);
}

Test(op_streams, zero3_gathers_each_kind_over_its_group) {
    check_zero3_gathers("dp=4,tp=1,pp=1,cp=1,ep=2,sp=0,zero=3,mbs=1,vpp=1,sched=1f1b,recompute=full", 2);
    check_zero3_gathers("dp=2,tp=1,pp=1,cp=1,ep=2,sp=0,zero=3,mbs=1,vpp=1,sched=1f1b,recompute=none", 1);
}

Test(op_streams, zero2_layer_buffers_order_the_backward) {
    fixture f;
    fixture_init(&f, "tiny", "dp=2,tp=1,pp=1,cp=1,ep=1,sp=0,zero=2,mbs=1,vpp=1,sched=1f1b,recompute=none", 4);
    ts_op_streams s;
    streams(&f, TS_ORDER_PROGRAM, &s);
    int L = f.map.n_local, reduces = 0, overlapped = 0;
    for (int i = 0; i < s.n_ops; i++) {
        const ts_op *op = &stage(&f)->ops[i];
        if (!dp(&f, i) || op->part != TS_PART_GRAD_REDUCE || op->phase == TS_PHASE_STEP) continue;
        reduces++;
        cr_expect_eq(s.seg_start[i + 1] - s.seg_start[i], 1, "a per-layer reduce-scatter lists one segment");
        cr_expect_eq(s.segs[s.seg_start[i]], 2 * op->layer, "op %d reduces segment %d for layer %d", i,
                     s.segs[s.seg_start[i]], op->layer);
        /* The next backward op of another layer: the layer below (the other buffer) need not wait
         * for this reduction; one of a layer with the same buffer must. */
        for (int j = i + 1; j < s.n_ops; j++) {
            const ts_op *o = &stage(&f)->ops[j];
            if (dp(&f, j) || o->layer < 0 || o->layer == op->layer ||
                (o->phase != TS_PHASE_BWD && o->phase != TS_PHASE_WGRAD))
                continue;
            if ((o->layer - op->layer) % 2 == 0) {
                cr_expect_geq(s.after[j], i, "op %d writes layer %d's gradients into the buffer op %d still reduces",
                              j, o->layer, i);
                break;
            }
            if (s.after[j] < i) overlapped++;
        }
    }
    /* One reduce-scatter per layer and micro-batch (4 sequences, dp 2, mbs 1: 2 micro-batches). */
    cr_expect_eq(reduces, 2 * L, "%d per-layer reductions, expected %d", reduces, 2 * L);
    cr_expect_gt(overlapped, 0, "no backward op may run beside a reduction");
    ts_op_streams_free(&s);
    fixture_free(&f);
}

/* The issue orders: permutations of the ops that keep each stream's order and issue every op
 * after its wait; dp-early moves DP ops forward, dp-late back. */
Test(op_streams, orders_keep_streams_and_waits) {
    fixture f;
    fixture_init(&f, "llama3-8b", "dp=2,tp=1,pp=1,cp=1,ep=1,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none", 4);
    long moved[TS_ORDER_COUNT] = {0};
    for (int o = 0; o < TS_ORDER_COUNT; o++) {
        ts_op_streams s;
        streams(&f, (ts_stream_order)o, &s);
        int n = s.n_ops, last[2] = {-1, -1};
        int *pos = malloc((size_t)n * sizeof *pos);
        cr_assert(pos);
        for (int i = 0; i < n; i++) pos[i] = -1;
        for (int k = 0; k < n; k++) {
            int i = s.order[k];
            cr_assert(i >= 0 && i < n && pos[i] < 0, "%s: op %d issued twice or out of range", ts_stream_order_names[o], i);
            pos[i] = k;
            cr_expect_gt(i, last[dp(&f, i)], "%s: op %d issued after op %d of its stream", ts_stream_order_names[o], i,
                         last[dp(&f, i)]);
            last[dp(&f, i)] = i;
            if (s.after[i] >= 0)
                cr_expect(pos[s.after[i]] >= 0, "%s: op %d issued before op %d it waits for", ts_stream_order_names[o],
                          i, s.after[i]);
            if (dp(&f, i)) moved[o] += k - i; /* negative: earlier than in the program */
        }
        free(pos);
        ts_op_streams_free(&s);
    }
    cr_expect_eq(moved[TS_ORDER_PROGRAM], 0);
    cr_expect_lt(moved[TS_ORDER_DP_EARLY], 0, "dp-early moved DP ops by %ld", moved[TS_ORDER_DP_EARLY]);
    cr_expect_gt(moved[TS_ORDER_DP_LATE], moved[TS_ORDER_DP_EARLY], "dp-late %ld, dp-early %ld",
                 moved[TS_ORDER_DP_LATE], moved[TS_ORDER_DP_EARLY]);
    fixture_free(&f);
}

Test(op_streams, bad_input) {
    fixture f;
    fixture_init(&f, "tiny", "dp=2,tp=1,pp=1,cp=1,ep=1,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none", 4);
    f.local_of[1] = -1; /* layer 1 not on this stage */
    ts_op_streams s;
    ts_error_clear();
    cr_expect_eq(ts_op_streams_init(&s, stage(&f), &f.map, TS_ORDER_PROGRAM), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "layer 1") != NULL, "%s", ts_error_message());
    ts_op_streams_free(&s);
    ts_stream_order o;
    cr_expect_eq(ts_stream_order_parse("dp-late", &o), TS_OK);
    cr_expect_eq(o, TS_ORDER_DP_LATE);
    ts_error_clear();
    cr_expect_eq(ts_stream_order_parse("late", &o), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "program, dp-early or dp-late") != NULL, "%s", ts_error_message());
    fixture_free(&f);
}

/* The CPU backend's op clock: spans in issue order from step_begin, ops checked. */
Test(op_streams, cpu_op_clock) {
    const ts_backend *be = ts_backend_cpu(1);
    ts_op_clock *c = NULL;
    cr_assert_eq(be->clock_init(3, &c), TS_OK, "%s", ts_error_message());
    cr_assert_eq(be->step_begin(c), TS_OK);
    int order[3] = {1, 0, 2};
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(be->op_begin(c, order[k], order[k] == 1, -1), TS_OK);
        cr_assert_eq(be->op_end(c, order[k]), TS_OK);
    }
    ts_error_clear();
    cr_expect_eq(be->op_begin(c, 3, 0, -1), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "op 3") != NULL, "%s", ts_error_message());
    ts_op_span sp[3];
    cr_assert_eq(be->spans(c, sp), TS_OK);
    cr_expect_geq(sp[1].start_s, 0);
    for (int k = 0; k < 3; k++) cr_expect_geq(sp[order[k]].end_s, sp[order[k]].start_s);
    cr_expect_geq(sp[0].start_s, sp[1].end_s, "op 0 ran after op 1");
    cr_expect_geq(sp[2].start_s, sp[0].end_s, "op 2 ran after op 0");
    be->clock_free(c);
    be->clock_free(NULL);
}

/* The trainer's map of a stage, read off the program's own segments (program/data.h). */
static ts_seg_map map_of(const ts_stage_segments *g) {
    return (ts_seg_map){.layers = g->layers, .local_of = g->local_of, .n_local = g->n_local, .seg_embed = g->seg_embed,
                        .seg_head = g->seg_head, .grad_buffer = g->grad_buffer};
}

/* The program's dependencies order every conflict between the streams, on every stage of every
 * schedule, ZeRO stage and parallel form, with and without recompute. */
Test(op_streams, program_edges_order_every_conflict) {
    static const char *const layouts[] = {
        "dp=2,tp=1,pp=2,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none",
        "dp=2,tp=1,pp=2,cp=1,ep=1,sp=0,zero=1,mbs=1,vpp=2,sched=interleaved,recompute=selective",
        "dp=2,tp=2,pp=2,cp=1,ep=1,sp=1,zero=1,mbs=1,vpp=1,sched=zb-h1,recompute=full",
        "dp=2,tp=1,pp=2,cp=1,ep=1,sp=0,zero=1,mbs=1,vpp=1,sched=gpipe,recompute=none",
        "dp=2,tp=1,pp=1,cp=2,ep=1,sp=0,zero=2,mbs=1,vpp=1,sched=1f1b,recompute=none",
        "dp=4,tp=1,pp=1,cp=1,ep=1,sp=0,zero=3,mbs=1,vpp=1,sched=1f1b,recompute=full",
        "dp=2,tp=1,pp=1,cp=2,ep=1,sp=0,zero=3,mbs=1,vpp=1,sched=1f1b,recompute=selective",
    };
    static const char *const moe_layouts[] = {
        "dp=2,tp=1,pp=2,cp=1,ep=2,sp=0,zero=1,mbs=1,vpp=1,sched=zb-h1,recompute=none",
        "dp=4,tp=1,pp=1,cp=1,ep=2,sp=0,zero=3,mbs=1,vpp=1,sched=1f1b,recompute=none",
    };
    int checked = 0;
    for (int moe = 0; moe < 2; moe++) {
        const char *const *set = moe ? moe_layouts : layouts;
        int n = moe ? 2 : 7;
        for (int k = 0; k < n; k++) {
            ts_layout l;
            cr_assert_eq(ts_layout_parse("test", set[k], &l), TS_OK, "%s", ts_error_message());
            ts_problem pb = test_problem(moe ? "tiny-moe" : "tiny", "cpu-localhost", ts_rank_count(&l), 8, 64, 1);
            ts_program prog;
            ts_error_clear();
            cr_assert_eq(ts_program_build(&pb, &l, NULL, &prog), TS_OK, "%s: %s", set[k], ts_error_message());
            for (int st = 0; st < prog.pp; st++) {
                const ts_stage_program *sp = &prog.stages[st];
                ts_seg_map m = map_of(&sp->seg);
                ts_op_streams s;
                cr_assert_eq(ts_op_streams_init(&s, sp, &m, TS_ORDER_PROGRAM), TS_OK, "%s", ts_error_message());
                cr_expect_eq(ts_op_streams_check(sp, &s), TS_OK, "%s stage %d: %s", set[k], st, ts_error_message());
                ts_op_streams_free(&s);
                checked++;
            }
            ts_program_free(&prog);
        }
    }
    cr_expect_geq(checked, 12);
}

/* The check fails when a data edge is missing: the optimizer without its wait for the last
 * gradient reduction touches gradients the reduction writes. */
Test(op_streams, check_finds_a_missing_edge) {
    fixture f;
    fixture_init(&f, "tiny", "dp=2,tp=1,pp=1,cp=1,ep=1,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none", 4);
    ts_op_streams s;
    streams(&f, TS_ORDER_PROGRAM, &s);
    int opt = stage(&f)->n_ops - 1;
    cr_assert_eq(stage(&f)->ops[opt].kind, TS_OP_OPTIMIZER);
    cr_assert_geq(s.after[opt], 0, "the optimizer waits for a DP op");
    cr_expect_eq(ts_op_streams_check(stage(&f), &s), TS_OK, "%s", ts_error_message());
    s.after[opt] = -1;
    ts_error_clear();
    cr_expect_eq(ts_op_streams_check(stage(&f), &s), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "optimizer") != NULL, "%s", ts_error_message());
    ts_op_streams_free(&s);
    fixture_free(&f);
}
