/* Layouts: validity rules (ts_layout_invalid names the offending numbers), the text form's round
 * trip, and the exact messages of bad --fix text. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "planner/problem.h"
#include "tests/helpers.h"

static ts_problem problem(const char *model, int gpus, int64_t batch, int64_t seq, int across) {
    ts_model m;
    ts_system s;
    ts_error_clear();
    cr_assert_eq(ts_model_load(model, &m), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_system_load("h100-sxm-dgx", &s), TS_OK, "%s", ts_error_message());
    ts_train t;
    ts_train_defaults(&t);
    t.global_batch = batch;
    t.seq = seq;
    t.tp_across_nodes = across;
    ts_problem pb;
    cr_assert_eq(ts_problem_init(&pb, &m, &s, &t, gpus), TS_OK, "%s", ts_error_message());
    return pb;
}

static ts_layout layout(const char *text) {
    ts_layout l;
    ts_error_clear();
    cr_assert_eq(ts_layout_parse("test", text, &l), TS_OK, "%s: %s", text, ts_error_message());
    return l;
}

/* The layout is invalid and the reason contains every string in `needles` (NULL-ended). */
static void expect_invalid(const ts_problem *pb, const char *text, const char *const *needles) {
    ts_layout l = layout(text);
    char buf[256];
    const char *why = ts_layout_invalid(pb, &l, buf, sizeof buf);
    cr_assert_not_null(why, "%s should be invalid for %s on %d GPUs", text, pb->model.name, pb->gpus);
    for (int i = 0; needles[i]; i++)
        cr_expect(strstr(why, needles[i]) != NULL, "%s: reason \"%s\" should mention \"%s\"", text,
                  why, needles[i]);
    /* ts_evaluate refuses it with the same reason. */
    ts_eval e;
    ts_error_clear();
    cr_expect_eq(ts_evaluate(pb, &l, &e), TS_ERR_INPUT, "%s: ts_evaluate accepted it", text);
    cr_expect(strstr(ts_error_message(), why) != NULL, "%s: \"%s\" lacks \"%s\"", text,
              ts_error_message(), why);
}

static void expect_valid(const ts_problem *pb, const char *text) {
    ts_layout l = layout(text);
    char buf[256];
    const char *why = ts_layout_invalid(pb, &l, buf, sizeof buf);
    cr_expect_null(why, "%s on %s/%d GPUs: unexpectedly invalid: %s", text, pb->model.name, pb->gpus,
                   why ? why : "");
}

#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})

/* llama2-7b: 32 layers, 32 heads, 32 kv heads, ffn 11008; h100-sxm-dgx nodes of 8 GPUs. */
Test(planner_layout, constraints_name_the_numbers) {
    ts_problem p8 = problem("llama2-7b", 8, 1024, 4096, 0);
    expect_valid(&p8, "dp=8,tp=1,pp=1,cp=1,ep=1,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none");
    expect_valid(&p8, "dp=1,tp=2,pp=4,cp=1,ep=1,sp=1,zero=0,mbs=2,vpp=4,sched=interleaved,recompute=full");

    expect_invalid(&p8, "dp=2,tp=2,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none",
                   NEEDLES("2×2×1×1", "= 4", "8 GPUs"));
    expect_invalid(&p8, "dp=8,tp=2,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none",
                   NEEDLES("= 16", "8 GPUs"));
    expect_invalid(&p8, "dp=8,tp=1,pp=1,cp=1,ep=1,sp=1,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none",
                   NEEDLES("sp=1", "tp"));
    expect_invalid(&p8, "dp=4,tp=1,pp=1,cp=1,ep=2,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none",
                   NEEDLES("= 4", "8 GPUs")); /* ep does not multiply into the GPU count */
    expect_invalid(&p8, "dp=8,tp=1,pp=1,cp=1,ep=2,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none",
                   NEEDLES("ep=2", "dense"));
    expect_invalid(&p8, "dp=4,tp=1,pp=2,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=2,sched=1f1b,recompute=none",
                   NEEDLES("vpp=2", "interleaved"));
    expect_invalid(&p8, "dp=4,tp=1,pp=2,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=interleaved,recompute=none",
                   NEEDLES("interleaved", "vpp", "1"));
    /* 32 layers / pp=2 = 16 per stage, not divisible by vpp=3. */
    expect_invalid(&p8, "dp=4,tp=1,pp=2,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=3,sched=interleaved,recompute=none",
                   NEEDLES("vpp=3", "32 layers"));
    /* pp=8: 4 layers per stage, not divisible by vpp=3. */
    expect_invalid(&p8, "dp=1,tp=1,pp=8,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=3,sched=interleaved,recompute=none",
                   NEEDLES("vpp=3", "32"));
    expect_invalid(&p8, "dp=4,tp=1,pp=2,cp=1,ep=1,sp=0,zero=2,mbs=1,vpp=1,sched=1f1b,recompute=none",
                   NEEDLES("zero=2", "pp=2"));
    expect_invalid(&p8, "dp=2,tp=1,pp=4,cp=1,ep=1,sp=0,zero=3,mbs=1,vpp=1,sched=gpipe,recompute=none",
                   NEEDLES("zero=3", "pp=4"));
    expect_invalid(&p8, "dp=8,tp=1,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=3,vpp=1,sched=1f1b,recompute=none",
                   NEEDLES("1024", "24"));
    /* zero=2/3 are fine without pipelining. */
    expect_valid(&p8, "dp=8,tp=1,pp=1,cp=1,ep=1,sp=0,zero=3,mbs=1,vpp=1,sched=1f1b,recompute=none");
}

Test(planner_layout, constraints_tp) {
    /* tp=3 does not divide 32 heads (3 GPUs: the product holds). */
    ts_problem p3 = problem("llama2-7b", 3, 1023, 4096, 0);
    expect_invalid(&p3, "dp=1,tp=3,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none",
                   NEEDLES("tp=3", "32"));
    /* tp=16 spans two 8-GPU nodes unless allowed. */
    ts_problem p16 = problem("llama2-7b", 16, 1024, 4096, 0);
    expect_invalid(&p16, "dp=1,tp=16,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none",
                   NEEDLES("tp=16", "8"));
    ts_problem p16x = problem("llama2-7b", 16, 1024, 4096, 1);
    expect_valid(&p16x, "dp=1,tp=16,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none");
    /* tp=64 divides no 32 heads even across nodes. */
    ts_problem p64x = problem("llama2-7b", 64, 1024, 4096, 1);
    expect_invalid(&p64x, "dp=1,tp=64,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none",
                   NEEDLES("tp=64", "32"));
}

Test(planner_layout, constraints_cp_ep_pp) {
    /* cp=3 needs seq divisible by 6: 4096 is not. */
    ts_problem p3 = problem("llama2-7b", 3, 1023, 4096, 0);
    expect_invalid(&p3, "dp=1,tp=1,pp=1,cp=3,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none",
                   NEEDLES("cp=3", "4096"));
    ts_problem p3s = problem("llama2-7b", 3, 1023, 4092, 0); /* 4092 = 6·682 */
    expect_valid(&p3s, "dp=1,tp=1,pp=1,cp=3,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none");

    /* tiny-moe: 4 experts, 4 layers. */
    ts_problem m3 = problem("tiny-moe", 3, 48, 256, 0);
    expect_invalid(&m3, "dp=3,tp=1,pp=1,cp=1,ep=3,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none",
                   NEEDLES("ep=3", "4 experts"));
    ts_problem m8 = problem("tiny-moe", 8, 64, 256, 0);
    expect_valid(&m8, "dp=8,tp=1,pp=1,cp=1,ep=4,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none");
    expect_valid(&m8, "dp=2,tp=1,pp=1,cp=4,ep=4,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none");
    expect_invalid(&m8, "dp=1,tp=1,pp=8,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none",
                   NEEDLES("pp=8", "4 layers"));
    /* ep must divide dp×cp: dp=2, ep=4. */
    expect_invalid(&m8, "dp=2,tp=1,pp=4,cp=1,ep=4,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none",
                   NEEDLES("ep=4", "2"));
}

/* ------------------------------------------------------------------------------------------ */
/* Text form                                                                                    */

Test(planner_layout, format_parse_round_trip) {
    int n = 0;
    for (int s = 0; s < TS_SCHED_COUNT; s++)
        for (int r = 0; r < TS_RECOMPUTE_COUNT; r++)
            for (int z = 0; z <= 3; z++) {
                ts_layout l = {.dp = 3 + s, .tp = 1 << r, .pp = 2 + z, .cp = 1 + (s + z) % 3,
                               .ep = 1 + r, .sp = (s + r) % 2, .zero = z, .mbs = 1 + 7 * r,
                               .vpp = s == TS_SCHED_INTERLEAVED ? 5 : 1, .schedule = (ts_schedule)s,
                               .recompute = (ts_recompute)r};
                char text[256];
                int len = ts_layout_format(&l, text, sizeof text);
                cr_assert(len > 0 && (size_t)len < sizeof text);
                ts_layout back = layout(text);
                cr_expect_eq(memcmp(&back, &l, sizeof l), 0, "%s did not round-trip", text);
                char again[256];
                ts_layout_format(&back, again, sizeof again);
                cr_expect_str_eq(again, text);
                n++;
            }
    cr_expect_eq(n, TS_SCHED_COUNT * TS_RECOMPUTE_COUNT * 4);

    ts_layout l = {.dp = 8, .tp = 8, .pp = 1, .cp = 1, .ep = 1, .sp = 1, .zero = 1, .mbs = 1,
                   .vpp = 1, .schedule = TS_SCHED_1F1B, .recompute = TS_RECOMPUTE_SELECTIVE};
    char text[256];
    ts_layout_format(&l, text, sizeof text);
    cr_expect_str_eq(text, "dp=8,tp=8,pp=1,cp=1,ep=1,sp=1,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=selective",
                     "DESIGN.md's text form");
    /* snprintf convention: the full length even when truncated. */
    char small[8];
    cr_expect_eq(ts_layout_format(&l, small, sizeof small), (int)strlen(text));
    cr_expect_eq(strlen(small), 7u);
}

Test(planner_layout, parse_accepts_schedule_alias_and_any_order) {
    ts_layout a = layout("recompute=full,schedule=zb-h1,vpp=1,mbs=2,zero=0,sp=0,ep=1,cp=1,pp=4,tp=2,dp=1");
    cr_expect_eq(a.schedule, TS_SCHED_ZB_H1);
    cr_expect_eq(a.recompute, TS_RECOMPUTE_FULL);
    cr_expect_eq(a.pp, 4);
    cr_expect_eq(a.tp, 2);
    cr_expect_eq(a.mbs, 2);
    cr_expect_eq(a.microbatches, 0, "microbatches is left 0");

    ts_pins p;
    cr_assert_eq(ts_pins_parse("--fix", "tp=8,pp=2,sched=interleaved", &p), TS_OK, "%s", ts_error_message());
    cr_expect_eq(p.mask, (1u << TS_PIN_TP) | (1u << TS_PIN_PP) | (1u << TS_PIN_SCHED));
    cr_expect_eq(p.value.tp, 8);
    cr_expect_eq(p.value.pp, 2);
    cr_expect_eq(p.value.schedule, TS_SCHED_INTERLEAVED);
    ts_layout yes = layout("dp=1,tp=8,pp=2,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=2,sched=interleaved,recompute=none");
    ts_layout no = layout("dp=1,tp=8,pp=2,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none");
    cr_expect(ts_pins_allow(&p, &yes));
    cr_expect(!ts_pins_allow(&p, &no));
    /* sp and zero may be 0. */
    cr_expect_eq(ts_pins_parse("--fix", "sp=0,zero=0", &p), TS_OK, "%s", ts_error_message());
}

/* Bad --fix text: TS_ERR_INPUT, the message names `what` and the offending item. */
static void expect_pins_error(const char *text, const char *const *needles) {
    ts_pins p;
    ts_error_clear();
    cr_assert_eq(ts_pins_parse("--fix", text, &p), TS_ERR_INPUT, "\"%s\" was accepted", text);
    const char *msg = ts_error_message();
    cr_expect(strncmp(msg, "--fix", 5) == 0, "\"%s\": message \"%s\" should start with --fix", text, msg);
    for (int i = 0; needles[i]; i++)
        cr_expect(strstr(msg, needles[i]) != NULL, "\"%s\": message \"%s\" should mention \"%s\"", text,
                  msg, needles[i]);
}

Test(planner_layout, pins_parse_errors) {
    expect_pins_error("tp=2,foo=1", NEEDLES("unknown key", "\"foo\""));
    expect_pins_error("tp=2,pp=4,tp=8", NEEDLES("\"tp\"", "twice"));
    expect_pins_error("sched=1f1b,schedule=gpipe", NEEDLES("\"sched\"", "twice"));
    expect_pins_error("tp=0", NEEDLES("tp=0", "[1,"));
    expect_pins_error("mbs=-2", NEEDLES("mbs=-2"));
    expect_pins_error("pp=two", NEEDLES("pp=two"));
    expect_pins_error("pp=4x", NEEDLES("pp=4x"));
    expect_pins_error("sp=2", NEEDLES("sp=2", "[0, 1]"));
    expect_pins_error("zero=4", NEEDLES("zero=4", "[0, 3]"));
    expect_pins_error("sched=zigzag", NEEDLES("zigzag", "1f1b"));
    expect_pins_error("recompute=some", NEEDLES("recompute=some", "selective"));
    expect_pins_error("tp8", NEEDLES("\"tp8\""));
    expect_pins_error("=8", NEEDLES("\"=8\""));
    expect_pins_error("tp=", NEEDLES("\"tp=\""));
    expect_pins_error("", NEEDLES("empty"));

    ts_layout l;
    ts_error_clear();
    cr_expect_eq(ts_layout_parse("plan.json: $.layouts[0].layout", "dp=8,tp=1", &l), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "$.layouts[0].layout") != NULL, "%s", ts_error_message());
    cr_expect(strstr(ts_error_message(), "\"pp\" is missing") != NULL, "%s", ts_error_message());
}
