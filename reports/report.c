/* Building the report of a plan: re-evaluation, the best layout's simulated step, capacity
 * figures, measured inputs, and the assumption tables the writers share (see report.h). */
#include "reports/report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/paths.h"
#include "planner/bands.h"
#include "planner/partition.h"
#include "planner/plan_json.h"
#include "planner/stack_rules.h"

void ts_report_opts_defaults(ts_report_opts *o) {
    *o = (ts_report_opts){.tokens = TS_REPORT_DEFAULT_TOKENS,
                          .price_per_gpu_hour = TS_REPORT_DEFAULT_PRICE,
                          .price_is_default = 1};
}

/* Capacity of the best layout (formulas in report.h). */
static void capacity_of(const ts_report *r, ts_capacity *c) {
    const ts_eval *best = &r->layouts[0];
    c->tokens = r->opts.tokens;
    c->tokens_per_s = best->tokens_per_s;
    c->train_s = c->tokens / c->tokens_per_s;
    c->train_days = c->train_s / 86400;
    c->gpu_hours = r->pb.gpus * c->train_s / 3600;
    c->cost_usd = c->gpu_hours * r->opts.price_per_gpu_hour;
    c->energy_kwh = c->gpu_hours * r->pb.sys.power_w / 1000;
}

/* The best layout's band and tight mark, and the plan's "tie" and "against"."text" sentences. */
static ts_status explain_of(const char *plan_file, ts_report *r) {
    ts_bands bands;
    ts_band band;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/validation/published", ts_data_dir());
    TS_CHECK(ts_bands_compute(dir, r->pb.train.stack.name, r->pb.model.moe.experts > 0, &bands));
    ts_band_of(&bands, &r->pb, &r->layouts[0].layout, r->layouts[0].step_s, &band);
    r->band_lo_s = band.lo_s;
    r->band_hi_s = band.hi_s;
    r->band_on_gpu = ts_bands_measured_on(&bands, r->pb.sys.gpu_name);
    ts_band_gpu runs;
    unsigned gpus;
    ts_bands_runs_for(&bands, &r->pb.sys, &runs, &gpus);
    ts_bands_gpus_text(&bands, gpus, r->band_gpus, sizeof r->band_gpus);
    r->tight = ts_mem_tight(&r->pb, r->layouts[0].mem.total);
    cJSON *root = NULL;
    TS_CHECK(ts_json_load_file(plan_file, &root));
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(root, "tie");
    const cJSON *against = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "against"), "text");
    snprintf(r->tie, sizeof r->tie, "%s", cJSON_IsString(tie) ? tie->valuestring : "");
    snprintf(r->against, sizeof r->against, "%s", cJSON_IsString(against) ? against->valuestring : "");
    cJSON_Delete(root);
    return TS_OK;
}

ts_status ts_report_build(const char *plan_file, const ts_report_opts *opts, ts_report *out) {
    memset(out, 0, sizeof *out);
    out->opts = *opts;
    snprintf(out->plan_file, sizeof out->plan_file, "%s", plan_file);
    ts_layout *layouts = NULL;
    int n = 0, has_split = 0;
    ts_split split;
    ts_status res = TS_OK;
    TS_CHECK_GOTO(ts_plan_read(plan_file, &out->pb, &layouts, &n), res, exit);
    if (n == 0) {
        res = TS_FAIL(TS_ERR_INPUT, "%s: $.layouts: expected at least one layout, got an empty array", plan_file);
        goto exit;
    }
    out->layouts = calloc((size_t)n, sizeof *out->layouts);
    TS_ALLOC_GOTO(out->layouts, res, exit);
    /* Each layout as the plan has it: on its uneven stages when it carries them; the best one's
     * stages shape the simulated program too. */
    for (int i = 0; i < n; i++) {
        int uneven;
        TS_CHECK_GOTO(ts_plan_evaluate(plan_file, &out->pb, &layouts[i], i, &out->layouts[i], i == 0 ? &split : NULL,
                                       i == 0 ? &has_split : &uneven),
                      res, exit);
    }
    out->n_layouts = n;
    TS_CHECK_GOTO(explain_of(plan_file, out), res, exit);

    ts_sim_opts so = {0};
    ts_program_opts po = ts_program_opts_of(has_split ? &split : NULL);
    TS_CHECK_GOTO(ts_program_build(&out->pb, &out->layouts[0].layout, &po, &out->prog), res, exit);
    TS_CHECK_GOTO(ts_simulate(&out->pb, &out->prog, &so, &out->sim), res, exit);
    TS_CHECK_GOTO(ts_timeline_from_sim(&out->prog, &out->sim, &out->sim_timeline), res, exit);
    capacity_of(out, &out->capacity);

    if (opts->run_json) {
        snprintf(out->run_file, sizeof out->run_file, "%s", opts->run_json);
        TS_CHECK_GOTO(ts_run_summary_load(opts->run_json, &out->run), res, exit);
        out->has_run = 1;
    }
    if (opts->run_trace) {
        snprintf(out->run_trace_file, sizeof out->run_trace_file, "%s", opts->run_trace);
        TS_CHECK_GOTO(ts_run_trace_timeline(opts->run_trace, out->layouts[0].layout.pp, &out->run_timeline), res, exit);
        out->has_run_trace = 1;
    }
exit:
    if (has_split) ts_split_free(&split);
    free(layouts);
    return res;
}

void ts_report_free(ts_report *r) {
    free(r->layouts);
    ts_program_free(&r->prog);
    ts_sim_result_free(&r->sim);
    ts_timeline_free(&r->sim_timeline);
    ts_timeline_free(&r->run_timeline);
    r->layouts = NULL;
    r->n_layouts = 0;
}

int ts_report_system_figures(const ts_report *r, ts_report_figure *out) {
    const ts_system *s = &r->pb.sys;
    ts_dtype dt = r->pb.train.dtype;
    int n = 0;
#define FIG(label, key, unit, dec, v) out[n++] = (ts_report_figure){label, key, unit, dec, v}
    FIG("HBM per GPU", "hbm_bytes", "GB", 1, s->hbm_bytes);
    FIG("usable by the model (HBM − reserve − head-room)", "usable_bytes", "GB", 1, r->pb.usable_bytes);
    FIG("reserved (CUDA context, NCCL, workspaces)", "reserved_bytes", "GB", 1, s->reserved_bytes);
    FIG("allocator head-room", "headroom_frac", "%", 1, s->headroom_frac);
    FIG("HBM bandwidth", "hbm_bytes_per_s", "TB/s", 2, s->hbm_bytes_per_s);
    FIG("dense peak for the training dtype", "peak_flops", "TFLOP/s", 1, s->peak_flops[dt]);
    FIG("GPU board power", "power_w", "W", 0, s->power_w);
    FIG("GPUs per node", "gpus_per_node", "", 0, s->gpus_per_node);
    FIG("NVLink per GPU, one direction", "link_bytes_per_s", "GB/s", 0, s->link_bytes_per_s);
    FIG("NVLink latency", "link_latency_s", "us", 1, s->link_latency_s);
    FIG("NIC per GPU, one direction", "nic_bytes_per_s", "GB/s", 1, s->nic_bytes_per_s);
    FIG("NIC latency", "nic_latency_s", "us", 1, s->nic_latency_s);
    FIG("attention efficiency", "attention_eff", "%", 0, s->attention_eff);
    FIG("memory-bound kernels, fraction of HBM bandwidth", "hbm_eff", "%", 0, s->hbm_eff);
    FIG("NCCL bus bandwidth / NVLink", "link_busbw_eff", "%", 0, s->link_busbw_eff);
    FIG("NCCL bus bandwidth / NIC", "nic_busbw_eff", "%", 0, s->nic_busbw_eff);
    FIG("compute slowdown under overlapped communication", "overlap_slowdown", "%", 0, s->overlap_slowdown);
    FIG("TP communication hidden", "tp_comm_overlap", "%", 0, s->tp_comm_overlap);
    FIG("DP communication hidden (of its window)", "dp_comm_overlap", "%", 0, s->dp_comm_overlap);
    FIG("interleaving's extra pipeline transfers hidden", "pp_comm_overlap", "%", 0, s->pp_comm_overlap);
    if (s->sync_jitter_s > 0) /* planner/cost.h ts_sync_wait_s; absent where 0 */
        FIG("spread of replicas' arrival at a blocking collective", "sync_jitter_s", "us", 0, s->sync_jitter_s);
    /* Systems with a scale-up domain apart from the host, or a tiered fabric (docs/systems.md);
     * the figures are absent for the others, whose reports stay as they were. */
    static const char *const reach_labels[TS_TIERS_MAX] = {"fabric tier 1: GPUs under one switch group (0: all)",
                                                            "fabric tier 2: GPUs under one switch group (0: all)",
                                                            "fabric tier 3: GPUs under one switch group (0: all)"};
    static const char *const reach_keys[TS_TIERS_MAX] = {"tier1_gpus", "tier2_gpus", "tier3_gpus"};
    static const char *const over_labels[TS_TIERS_MAX] = {"fabric tier 1 oversubscription",
                                                           "fabric tier 2 oversubscription",
                                                           "fabric tier 3 oversubscription"};
    static const char *const over_keys[TS_TIERS_MAX] = {"tier1_oversubscription", "tier2_oversubscription",
                                                         "tier3_oversubscription"};
    if (ts_system_domain_gpus(s) != s->gpus_per_node)
        FIG("GPUs per NVLink domain", "domain_gpus", "", 0, ts_system_domain_gpus(s));
    for (int k = 0; k < s->n_tiers; k++) {
        FIG(reach_labels[k], reach_keys[k], "", 0, s->tiers[k].gpus);
        FIG(over_labels[k], over_keys[k], "", 1, s->tiers[k].oversubscription);
    }
    return n;
}

int ts_report_training_figures(const ts_report *r, ts_report_figure *out) {
    const ts_train *t = &r->pb.train;
    int n = 0;
    FIG("global batch (sequences per step)", "global_batch", "", 0, (double)t->global_batch);
    FIG("sequence length (tokens)", "seq", "", 0, (double)t->seq);
    FIG("tokens per step", "tokens_per_step", "", 0, (double)t->global_batch * (double)t->seq);
    FIG("bytes per parameter: weights", "weight_bytes", "", 0, t->weight_bytes);
    FIG("bytes per parameter: gradients", "grad_bytes", "", 0, t->grad_bytes);
    FIG("bytes per parameter: optimizer states", "optimizer_bytes", "", 0, t->optimizer_bytes);
    FIG("gradient bucket", "bucket_bytes", "MB", 0, t->bucket_bytes);
    FIG("activation bytes relative to 16-bit", "activation_scale", "", 0, t->activation_scale);
    FIG("model parameters", "params", "", -4, r->pb.params.total);
    FIG("model FLOPs per step (forward + backward, no recompute)", "model_flops_per_step", "", -4,
        r->pb.model_flops_per_step);
#undef FIG
    return n;
}

const char *const ts_report_sources[] = {
    "tokens/s = global batch × sequence / step time; time to train = tokens / (tokens/s); "
    "GPU-hours = GPUs × hours; cost = GPU-hours × price; energy = GPU-hours × GPU board power "
    "(GPUs only: no CPUs, network or cooling)",
    "Step time and memory: Tessera's closed form (planner/), re-evaluated by this build; the "
    "timeline is the discrete-event simulator (sim/), one rank per pipeline stage",
    "Weights, gradients and Adam states at 2 + 2 + 12 bytes per parameter, sharded by ZeRO stage: "
    "Rajbhandari et al. 2020 (ZeRO) §3.1, §5",
    "Activation memory: Korthikanti et al. 2022 (Reducing Activation Recomputation in Large "
    "Transformer Models) §4, Table 2, generalised to GQA and gated MLPs",
    "Step time as compute + exposed communication + bubble: Narayanan et al. 2021 (Megatron-LM, "
    "SC'21) eq. 1 and §2.2; ZB-H1 bubble: Qi et al. 2024 (Zero Bubble Pipeline Parallelism) Table 2",
    "Collectives: NCCL ring and tree costs in nccl-tests' bus-bandwidth convention "
    "(nccl-tests doc/PERFORMANCE.md)",
    "MFU: model FLOPs (forward + backward, no recompute, full s² attention) / (step time × GPUs × "
    "dense peak), as PaLM (Chowdhery et al. 2022, App. B) and Megatron-LM count it",
    NULL};
