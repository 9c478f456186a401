/* Pipeline schedules' closed forms (planner/schedule.h) against their papers, and the step-time
 * closed form with communication made free: then the step is compute + bubble + optimizer, and the
 * bubble is exactly the schedule's formula (DESIGN.md: "zero communication cost ⇒ bubble equals the
 * schedule's formula exactly"). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "planner/problem.h"
#include "program/schedule.h"
#include "planner/search.h"
#include "tests/helpers.h"

/* ------------------------------------------------------------------------------------------ */
/* Bubbles and activations in flight                                                           */

Test(planner_schedule, table_is_indexed_by_id) {
    for (int s = 0; s < TS_SCHED_COUNT; s++) {
        cr_expect_eq((int)ts_schedules[s].id, s);
        cr_expect_str_eq(ts_schedules[s].name, ts_schedule_names[s]);
        cr_expect_not_null(ts_schedules[s].bubble_s);
        cr_expect_not_null(ts_schedules[s].in_flight);
        cr_expect_eq(ts_schedules[s].interleaved, s == TS_SCHED_INTERLEAVED);
    }
}

/* Numbers chosen so every product is exact in binary: tf = 1.5, tb = 3.25, tw = 1.25. */
Test(planner_schedule, bubble_formulas) {
    const double tf = 1.5, tb = 3.25, tw = 1.25;
    for (int p = 1; p <= 16; p++) {
        double one = (p - 1) * (tf + tb);
        cr_expect_eq(ts_schedules[TS_SCHED_GPIPE].bubble_s(p, 1, tf, tb, tw), one, "GPipe p=%d", p);
        cr_expect_eq(ts_schedules[TS_SCHED_1F1B].bubble_s(p, 1, tf, tb, tw), one, "1F1B p=%d", p);
        for (int v = 1; v <= 8; v *= 2)
            cr_expect_eq(ts_schedules[TS_SCHED_INTERLEAVED].bubble_s(p, v, tf, tb, tw), one / v,
                         "interleaved p=%d v=%d", p, v);
        /* ZB-H1 (Qi et al. 2024 Table 2): (p-1)(T_F + T_B - T_W) with T_B the input gradient only,
         * i.e. (p-1)(tf + tb - 2tw) with our tb = input + weight gradients. */
        cr_expect_eq(ts_schedules[TS_SCHED_ZB_H1].bubble_s(p, 1, tf, tb, tw),
                     (p - 1) * (tf + tb - 2 * tw), "ZB-H1 p=%d", p);
    }
    /* Concrete numbers: p = 8 → 7·4.75 = 33.25; v = 4 → 8.3125; ZB-H1 7·2.25 = 15.75. */
    cr_expect_eq(ts_schedules[TS_SCHED_1F1B].bubble_s(8, 1, tf, tb, tw), 33.25);
    cr_expect_eq(ts_schedules[TS_SCHED_INTERLEAVED].bubble_s(8, 4, tf, tb, tw), 8.3125);
    cr_expect_eq(ts_schedules[TS_SCHED_ZB_H1].bubble_s(8, 1, tf, tb, tw), 15.75);
    /* ZB-H1 never goes negative (weight gradients larger than the rest). */
    cr_expect_eq(ts_schedules[TS_SCHED_ZB_H1].bubble_s(8, 1, 0.5, 2.0, 1.5), 0.0);
}

Test(planner_schedule, activations_in_flight) {
    const ts_schedule_info *gp = &ts_schedules[TS_SCHED_GPIPE], *f1 = &ts_schedules[TS_SCHED_1F1B],
                           *il = &ts_schedules[TS_SCHED_INTERLEAVED], *zb = &ts_schedules[TS_SCHED_ZB_H1];
    for (int p = 1; p <= 16; p *= 2) {
        for (int m = 1; m <= 64; m *= 2) {
            cr_expect_eq(gp->in_flight(p, 0, m, 1), (double)m, "GPipe keeps all m: p=%d m=%d", p, m);
            cr_expect_eq(gp->in_flight(p, p - 1, m, 1), (double)m);
            cr_expect_eq(f1->in_flight(p, 0, m, 1), (double)(m < p ? m : p),
                         "1F1B stage 0 holds min(m, p): p=%d m=%d", p, m);
            cr_expect_eq(zb->in_flight(p, 0, m, 1), (double)(m < p ? m : p),
                         "ZB-H1 peaks like 1F1B: p=%d m=%d", p, m);
            for (int i = 0; i < p; i++)
                cr_expect_eq(f1->in_flight(p, i, m, 1), (double)(m < p - i ? m : p - i),
                             "1F1B stage %d of %d, m=%d", i, p, m);
            for (int v = 2; v <= 4; v++) {
                double peak = p * (1.0 + (p - 1.0) / ((double)p * v));
                double want = m < peak ? m : peak;
                double got = il->in_flight(p, 0, m, v);
                cr_expect(fabs(got - want) <= 1e-12 * want,
                          "interleaved stage 0 p=%d v=%d m=%d: %.17g, want p(1+(p-1)/(pv)) = %.17g",
                          p, v, m, got, want);
                cr_expect_leq(il->in_flight(p, p - 1, m, v), got, "later stages hold no more");
            }
        }
    }
    /* Concrete: p = 8, v = 2: 8·(1 + 7/16) = 11.5. */
    cr_expect_eq(il->in_flight(8, 0, 64, 2), 11.5);
}

static const cJSON *case_by_id(const cJSON *root, const char *id) {
    const cJSON *row;
    cJSON_ArrayForEach(row, root) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(row, "id");
        if (cJSON_IsString(j) && strcmp(j->valuestring, id) == 0) return row;
    }
    cr_assert_fail("published-cases.json has no case \"%s\"", id);
    return NULL;
}

static double num(const cJSON *o, const char *a, const char *b) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, a), b);
    cr_assert(cJSON_IsNumber(v), "%s.%s is not a number", a, b);
    return v->valuedouble;
}

typedef struct {
    double f, b, w, comm; /* T_F, T_B (input gradient), T_W, T_comm: ms */
    double rate_1f1b, rate_zbh1;
    int p, m;
} zb_case;

static zb_case zb_load(void) {
    char *path = test_data_path("validation/published/published-cases.json");
    cJSON *root = NULL;
    cr_assert_eq(ts_json_load_file(path, &root), TS_OK, "%s", ts_error_message());
    free(path);
    const cJSON *c = case_by_id(root, "zerobubble-1.5B-p8-m24");
    const cJSON *meas = cJSON_GetObjectItemCaseSensitive(c, "measured");
    zb_case z = {
        .f = num(meas, "profiled_time", "T_F"),
        .b = num(meas, "profiled_time", "T_B"),
        .w = num(meas, "profiled_time", "T_W"),
        .comm = num(meas, "profiled_time", "T_comm"),
        .rate_1f1b = num(meas, "bubble_rate_theoretical", "1F1B"),
        .rate_zbh1 = num(meas, "bubble_rate_theoretical", "ZB-H1"),
        .p = (int)num(c, "layout", "pp"),
        .m = (int)num(c, "training", "microbatches"),
    };
    cJSON_Delete(root);
    return z;
}

/* Bubble rate = bubble / (bubble + m·(T_F + T_B + T_W)) from our formulas; the paper's T_B is the
 * input gradient only, so tb = T_B + T_W and tw = T_W. */
static void zb_rates(const zb_case *z, double *r1, double *rz) {
    double tf = z->f, tb = z->b + z->w, tw = z->w, work = z->m * (z->f + z->b + z->w);
    double b1 = ts_schedules[TS_SCHED_1F1B].bubble_s(z->p, 1, tf, tb, tw);
    double bz = ts_schedules[TS_SCHED_ZB_H1].bubble_s(z->p, 1, tf, tb, tw);
    *r1 = b1 / (b1 + work);
    *rz = bz / (bz + work);
}

/* What the formulas give from the paper's profiled times (communication-free): 1F1B exactly
 * (p-1)/(m+p-1) = 7/31 = 0.2258, ZB-H1 0.1476; and their ratio matches the paper's Table 5 ratio
 * (0.6535 vs 0.1585/0.2431 = 0.6520) within 1%. */
Test(planner_schedule, zero_bubble_paper_rates_communication_free) {
    zb_case z = zb_load();
    cr_assert_eq(z.p, 8);
    cr_assert_eq(z.m, 24);
    double r1, rz;
    zb_rates(&z, &r1, &rz);
    cr_expect(fabs(r1 - 7.0 / 31.0) <= 1e-12, "1F1B bubble rate %.6f, (p-1)/(m+p-1) = %.6f", r1, 7.0 / 31);
    double work = z.m * (z.f + z.b + z.w), bz = 7 * (z.f + z.b - z.w);
    cr_expect(fabs(rz - bz / (bz + work)) <= 1e-12, "ZB-H1 bubble rate %.6f", rz);
    double ours = rz / r1, paper = z.rate_zbh1 / z.rate_1f1b;
    cr_expect(fabs(ours - paper) <= 0.01 * paper, "ZB-H1/1F1B bubble-rate ratio %.4f, paper %.4f",
              ours, paper);
    /* Within 0.02 of the paper's absolute rates: its Table 5 rates come from its schedule simulator
     * with T_comm = 0.601 ms on the critical path; the communication-free formulas give 0.2258 and
     * 0.1476 against 0.2431 and 0.1585. */
    cr_expect(fabs(r1 - z.rate_1f1b) <= 0.02, "1F1B rate %.4f, paper %.4f", r1, z.rate_1f1b);
    cr_expect(fabs(rz - z.rate_zbh1) <= 0.02, "ZB-H1 rate %.4f, paper %.4f", rz, z.rate_zbh1);
}

/* ------------------------------------------------------------------------------------------ */
/* Closed form with free communication                                                          */

static ts_problem free_comm_problem(const char *model, int gpus, int64_t batch, int64_t seq) {
    ts_model m;
    ts_system s;
    ts_error_clear();
    cr_assert_eq(ts_model_load(model, &m), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_system_load("h100-sxm-dgx", &s), TS_OK, "%s", ts_error_message());
    s.link_bytes_per_s = INFINITY;
    s.nic_bytes_per_s = INFINITY;
    s.link_latency_s = 0;
    s.nic_latency_s = 0;
    return test_problem_on(&m, &s, gpus, batch, seq, 1);
}

static ts_layout parse_layout(const char *text) {
    ts_layout l;
    ts_error_clear();
    cr_assert_eq(ts_layout_parse("test", text, &l), TS_OK, "%s", ts_error_message());
    return l;
}

Test(planner_schedule, free_communication_step_is_compute_bubble_optimizer) {
    ts_problem pb = free_comm_problem("llama2-7b", 32, 64, 4096);
    static const char *const layouts[] = {
        "dp=4,tp=4,pp=2,cp=1,ep=1,sp=1,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none",
        "dp=2,tp=4,pp=4,cp=1,ep=1,sp=0,zero=0,mbs=2,vpp=1,sched=gpipe,recompute=full",
        "dp=2,tp=2,pp=4,cp=2,ep=1,sp=1,zero=1,mbs=1,vpp=2,sched=interleaved,recompute=none",
        "dp=1,tp=8,pp=4,cp=1,ep=1,sp=1,zero=0,mbs=1,vpp=1,sched=zb-h1,recompute=full",
        "dp=8,tp=2,pp=2,cp=1,ep=1,sp=0,zero=1,mbs=1,vpp=4,sched=interleaved,recompute=selective",
        "dp=8,tp=4,pp=1,cp=1,ep=1,sp=1,zero=3,mbs=1,vpp=1,sched=1f1b,recompute=full",
    };
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        ts_layout l = parse_layout(layouts[i]);
        ts_eval e;
        ts_error_clear();
        cr_assert_eq(ts_evaluate(&pb, &l, &e), TS_OK, "%s: %s", layouts[i], ts_error_message());
        const ts_time_split *t = &e.time;
        cr_expect_eq(t->tp_comm, 0.0, "%s", layouts[i]);
        cr_expect_eq(t->cp_comm, 0.0, "%s", layouts[i]);
        cr_expect_eq(t->ep_comm, 0.0, "%s", layouts[i]);
        cr_expect_eq(t->pp_comm, 0.0, "%s", layouts[i]);
        cr_expect_eq(t->dp_comm, 0.0, "%s", layouts[i]);
        if (l.pp > 1) cr_expect_gt(t->pp_bubble, 0.0, "%s", layouts[i]);
        else cr_expect_eq(t->pp_bubble, 0.0, "%s", layouts[i]);
        cr_expect_eq(e.step_s, t->compute + t->pp_bubble + t->optimizer,
                     "%s: step %.17g != compute %.17g + bubble %.17g + optimizer %.17g", layouts[i],
                     e.step_s, t->compute, t->pp_bubble, t->optimizer);

        /* The bubble is the schedule's formula on the slowest stage's per-micro-batch times,
         * and compute is m·(t_f + t_b) on that stage, so their ratio is the formula's. */
        int m = e.layout.microbatches;
        cr_expect_eq(m, (int)(64 / (l.dp * l.mbs)));
        double ratio = t->pp_bubble / t->compute;
        if (l.schedule == TS_SCHED_1F1B || l.schedule == TS_SCHED_GPIPE)
            cr_expect(fabs(ratio - (l.pp - 1.0) / m) <= 1e-12, "%s: bubble/compute %.15f, (p-1)/m = %.15f",
                      layouts[i], ratio, (l.pp - 1.0) / m);
        if (l.schedule == TS_SCHED_INTERLEAVED)
            cr_expect(fabs(ratio - (l.pp - 1.0) / (m * l.vpp)) <= 1e-12,
                      "%s: bubble/compute %.15f, (p-1)/(m·v) = %.15f", layouts[i], ratio,
                      (l.pp - 1.0) / (m * l.vpp));
        if (l.schedule == TS_SCHED_ZB_H1)
            cr_expect(ratio > 0 && ratio < (l.pp - 1.0) / m, "%s: ZB-H1 bubble/compute %.6f, 1F1B's %.6f",
                      layouts[i], ratio, (l.pp - 1.0) / m);
    }
}

/* Every search result: MFU ≤ 1, hardware FLOPs ≥ model FLOPs, tokens/s · step = batch · seq,
 * and the time split sums to the step. */
Test(planner_schedule, throughput_identities) {
    static const struct {
        const char *model, *sys;
        int gpus;
        int64_t batch, seq;
    } cases[] = {
        {"llama2-7b", "h100-sxm-dgx", 16, 256, 4096},
        {"tiny-moe", "h100-sxm-dgx", 8, 64, 256},
        {"megatron-gpt-1.7b", "a100-80g-dgx", 32, 512, 2048},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ts_model m;
        ts_system s;
        ts_train t;
        ts_problem pb;
        cr_assert_eq(ts_model_load(cases[c].model, &m), TS_OK, "%s", ts_error_message());
        cr_assert_eq(ts_system_load(cases[c].sys, &s), TS_OK, "%s", ts_error_message());
        ts_train_defaults(&t);
        t.global_batch = cases[c].batch;
        t.seq = cases[c].seq;
        cr_assert_eq(ts_problem_init(&pb, &m, &s, &t, cases[c].gpus), TS_OK, "%s", ts_error_message());
        ts_search_opts o;
        ts_search_opts_defaults(&o);
        o.top_k = 50;
        ts_search_result r;
        cr_assert_eq(ts_search(&pb, &o, &r), TS_OK, "%s: %s", cases[c].model, ts_error_message());
        cr_assert_gt(r.n_best, 0);
        double tokens = (double)cases[c].batch * cases[c].seq;
        for (int i = 0; i < r.n_best; i++) {
            const ts_eval *e = &r.best[i];
            const ts_time_split *ts = &e->time;
            cr_expect(e->mfu > 0 && e->mfu <= 1.0, "%s #%d: mfu %.4f", cases[c].model, i, e->mfu);
            cr_expect_geq(e->hw_tflops_per_gpu, e->tflops_per_gpu * (1 - 1e-12));
            cr_expect(fabs(e->tokens_per_s * e->step_s - tokens) <= 1e-9 * tokens,
                      "%s #%d: tokens/s · step = %.17g, batch · seq = %.17g", cases[c].model, i,
                      e->tokens_per_s * e->step_s, tokens);
            double sum = ts->compute + ts->tp_comm + ts->cp_comm + ts->ep_comm + ts->pp_comm +
                         ts->pp_bubble + ts->dp_comm + ts->optimizer;
            cr_expect(fabs(sum - e->step_s) <= 1e-12 * e->step_s, "%s #%d: split sums to %.17g, step %.17g",
                      cases[c].model, i, sum, e->step_s);
            cr_expect(ts->compute > 0 && ts->tp_comm >= 0 && ts->cp_comm >= 0 && ts->ep_comm >= 0 &&
                          ts->pp_comm >= 0 && ts->pp_bubble >= 0 && ts->dp_comm >= 0 && ts->optimizer > 0,
                      "%s #%d: a negative or zero time term", cases[c].model, i);
            double mfu = pb.model_flops_per_step / (e->step_s * pb.gpus * s.peak_flops[t.dtype]);
            cr_expect(fabs(e->mfu - mfu) <= 1e-12 * mfu);
            cr_expect(fabs(e->tflops_per_gpu * 1e12 / s.peak_flops[t.dtype] - e->mfu) <= 1e-12 * e->mfu);
        }
        ts_search_result_free(&r);
    }
}
