/* System specs: reading, validating and writing models/systems/NAME.json (see system.h).
 *
 * File format. Every figure may be a plain number or {"value": x, "source": "..."}; every object
 * may also hold a "source" string. Fields marked * are required; the others take the default shown.
 * Any other key is refused, so a misspelt optional field cannot silently fall back to its default.
 *
 *   {"name"*: "h100-sxm-dgx",                  system name, at most 63 characters
 *    "source": "...",                          where the spec as a whole comes from
 *    "gpu"*: {
 *      "name": "H100 SXM5 80GB",                marketing name, default ""
 *      "hbm_bytes"*:       8.0e10,              device memory in bytes, [1, 1e15]
 *      "hbm_bytes_per_s"*: 3.35e12,             peak HBM bandwidth, [1, 1e15]
 *      "peak_flops"*: {"bf16"*: x, "fp16": x, "fp8": x, "fp32": x, "fp4": x},
 *                                               dense peak FLOP/s per dtype, bf16 in [1, 1e18], the
 *                                               others in [0, 1e18] with 0 (default) = unsupported;
 *                                               fp4 (NVFP4/MXFP4) is reported, never trained in
 *      "power_w": 700,                          board power, [0, 1e5], default 0 = unknown
 *      "sms": 132,                              streaming multiprocessors, [0, 4096], default 0 =
 *                                               not stated (planner/moe_cost.h: DeepEP's SMs)
 *      "mxfp8": false,                          tensor cores run block-scaled MXFP8 (OCP MX,
 *                                               Blackwell), default false
 *      "fp8_any_layout": false,                 FP8 GEMMs take any operand layout (Blackwell's
 *                                               compute capability 10.x; Hopper's are TN only),
 *                                               default false
 *      "kernel_latency_s": 0},                  fixed time of one memory-bound or attention kernel
 *                                               beyond its bytes or FLOPs (launch and ramp-up;
 *                                               GEMMs have theirs in efficiency.gemm), [0, 1],
 *                                               default 0
 *    "node"*: {
 *      "gpus"*: 8,                              GPUs per node, integer in [1, 1024]
 *      "link_bytes_per_s"*: 4.5e11,             NVLink per GPU, one direction, [1, 1e15]
 *      "link_latency_s": 2e-6,                  [0, 1], default 2e-6
 *      "cores": 0,                              CPU cores the node's ranks share (CPU systems;
 *                                               0: each rank has its own device)
 *      "speed_cv": 0,                           how far apart ranks' compute times land over the
 *                                               same span (coefficient of variation), [0, 1],
 *                                               default 0 (steady)
 *      "speed_cv_window_s": 0,                  the span speed_cv was measured over, [0, 1e6] s,
 *                                               default 0 (any)
 *      "speed_cv_decay": 0,                     how the spread falls over longer spans w:
 *                                               speed_cv · (w / speed_cv_window_s)^-decay, [0, 1],
 *                                               default 0 (the same at every span; > 0 needs
 *                                               speed_cv_window_s)
 *      "sync_jitter_s": 0,                      spread (standard deviation) of the instant ranks
 *                                               of different model replicas reach one blocking
 *                                               collective (FP8 amax reductions, expert all-to-
 *                                               alls), [0, 1] s, default 0 (planner/cost.h
 *                                               ts_sync_wait_s)
 *      "gauge_flops_per_s": 0},                 the speed gauge's reading while the spec was
 *                                               measured (exec/speed_gauge.h), [0, 1e18],
 *                                               default 0 (unknown); never used by the model
 *    "domain": {                                the scale-up (NVLink / Infinity Fabric) domain,
 *                                               when larger than a node (NVL72); default: the node
 *      "gpus"*: 72,                             GPUs in one domain, [1, 1024], a multiple of
 *                                               node.gpus (NVL72) or a divisor (NVLink bridges
 *                                               of 4 cards in an 8-card host)
 *      "link_bytes_per_s": 9e11,                per GPU, one direction, default node's
 *      "link_latency_s": 2e-6},                 default node's
 *    "fabric"*: {
 *      "nic_bytes_per_s"*: 5.0e10,              scale-out per GPU, one direction, [1, 1e15]
 *      "latency_s": 5e-6,                       [0, 1], default 5e-6
 *      "rail_optimized": true,                  GPU i of each node on one leaf, default false
 *      "tiers": [{"name": "leaf",               1 to 3 switch tiers, lowest first; default none
 *                 "gpus": 256,                  (a flat fabric). GPUs one switch group of the
 *                                               tier reaches, a multiple of the domain's and of
 *                                               the tier below's; 0 (only the top tier): all
 *                 "oversubscription": 1,        [1, 64], default 1
 *                 "latency_s": 1e-6}]}          added per crossing, [0, 1], default 0
 *    "efficiency"*: {                           achieved / peak; efficiencies in [0.001, 1]
 *      "gemm"*: {"points"*: [[flops, eff], ...], "source": "..."},
 *                                               1 to 16 points, flops in [1, 1e18], increasing
 *      "gemm_bf16": {"points": [...], "source": "..."},
 *                                               16-bit GEMMs' efficiency vs their peak, same
 *                                               form; default: none ("gemm" serves them; a GPU
 *                                               calibration measures both)
 *      "gemm_fp8": {"points": [...], "source": "..."},
 *      "gemm_fp8_bwd": 0.91,                    the backward's FP8 GEMMs against gemm_fp8 (split
 *                                               accumulation), (0, 1]; default: as the curve
 *                                               FP8 GEMMs' efficiency vs the FP8 peak, same form;
 *                                               default: none (FP8 GEMMs take "gemm" scaled,
 *                                               planner/cost.h ts_gemm_eff)
 *      "attention": 0.5, "hbm": 0.8, "link_busbw": 0.8, "nic_busbw": 0.8,
 *      "attention_flash": 0.31,                 the FlashAttention-2 backend's (--attention-backend
 *                                               flash); default: as "attention"
 *      "collective_busbw": {"reduce-scatter": 0.2, ...},
 *                                               a factor on the bus bandwidth per collective
 *                                               kind (models/coll.h names), [0.001, 100],
 *                                               default 1 each
 *      "overlap_slowdown": 0.05, "tp_comm_overlap": 0, "dp_comm_overlap": 0.9,
 *      "pp_comm_overlap": 1,                    the last four are fractions in [0, 1]
 *      "serial_ops": false,                     a rank runs one op at a time (CPU ranks:
 *                                               blocking MPI, no overlap of communication)
 *      "optimizer": 1},                         the optimizer step's bandwidth relative to the
 *                                               other memory-bound kernels', in [0.001, 100]
 *    "memory": {
 *      "reserved_bytes": 2.5e9,                 [0, 1e15], default 2.5e9
 *      "headroom_frac": 0.05},                  [0, 1], default 0.05
 *    "cost": {                                  what running it costs, default unknown; read
 *                                               for reports and sweeps, never written back
 *                                               (ts_system_to_json: a plan's system is the
 *                                               machine it was planned on, not a purchase)
 *      "price_per_gpu_hour": 2.5,               USD, [0, 1e4]
 *      "price_is_example": false,               true when no published price stands behind it
 *      "rack_power_w": 132000,                  power of one rack (or node) as sold, [0, 1e7]
 *      "rack_gpus": 72},                        GPUs that figure feeds, [1, 1e5]; needed with it
 *    "measured": {...}}                         what `tessera calibrate` measured to write this
 *                                               spec (exec/calibrate.h); kept for people and
 *                                               diffs, never read
 *
 * A spec must leave the model some memory: hbm_bytes * (1 - headroom_frac) - reserved_bytes > 0.
 * The limits are not physics; they are wide fences that catch unit slips (GB written as bytes, a
 * bandwidth in bits) and values that would break the cost model (a zero efficiency divides by
 * zero). */
#include "models/system.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/json.h"
#include "common/paths.h"

const char *const ts_dtype_names[] = {"bf16", "fp16", "fp8", "fp32", NULL};

#define MAX_BYTES 1e15       /* device memory or reserved bytes */
#define MAX_BYTES_PER_S 1e15 /* any bandwidth */
#define MAX_FLOPS 1e18       /* a peak rate or one GEMM's FLOPs */
#define MAX_WINDOW_S 1e6     /* a span of time the machine was watched over */
#define MAX_LATENCY_S 1.0
#define MAX_POWER_W 1e5
#define MAX_GPUS 1024
#define MAX_TIER_GPUS (1 << 24)   /* GPUs one fabric tier reaches */
#define MAX_OVERSUBSCRIPTION 64.0
#define MAX_PRICE_USD 1e4        /* per GPU-hour */
#define MAX_RACK_POWER_W 1e7
#define MIN_EFF 1e-3 /* efficiencies divide times; zero would make them infinite */

#define DEF_LINK_LATENCY_S 2e-6
#define DEF_NIC_LATENCY_S 5e-6
#define DEF_ATTENTION_EFF 0.5
#define DEF_HBM_EFF 0.8
#define DEF_LINK_BUSBW_EFF 0.8
#define DEF_NIC_BUSBW_EFF 0.8
#define DEF_OVERLAP_SLOWDOWN 0.05
#define DEF_TP_COMM_OVERLAP 0.0
#define DEF_DP_COMM_OVERLAP 0.9
/* Megatron-Core overlaps the extra pipeline transfers of interleaving (overlap_p2p_comm). */
#define DEF_PP_COMM_OVERLAP 1.0
#define DEF_RESERVED_BYTES 2.5e9
#define DEF_HEADROOM_FRAC 0.05

static const char *const root_keys[] = {"name", "source", "gpu", "node", "domain", "fabric",
                                        "efficiency", "memory", "cost", "measured", NULL};
static const char *const gpu_keys[] = {"name", "source", "hbm_bytes", "hbm_bytes_per_s",
                                       "peak_flops", "power_w", "sms", "kernel_latency_s", "mxfp8", "fp8_any_layout", NULL};
static const char *const peak_keys[] = {"bf16", "fp16", "fp8", "fp32", "fp4", "source", NULL};
static const char *const node_keys[] = {"gpus", "link_bytes_per_s", "link_latency_s", "cores", "speed_cv",
                                        "speed_cv_window_s", "speed_cv_decay", "sync_jitter_s", "gauge_flops_per_s",
                                        "source", NULL};
static const char *const domain_keys[] = {"gpus", "link_bytes_per_s", "link_latency_s", "source", NULL};
static const char *const fabric_keys[] = {"nic_bytes_per_s", "latency_s", "rail_optimized", "tiers",
                                          "source", NULL};
static const char *const tier_keys[] = {"name", "gpus", "oversubscription", "latency_s", "source", NULL};
static const char *const cost_keys[] = {"price_per_gpu_hour", "price_is_example", "rack_power_w",
                                        "rack_gpus", "source", NULL};
static const char *const eff_keys[] = {"gemm", "gemm_bf16", "gemm_fp8", "gemm_fp8_bwd", "attention", "attention_flash", "hbm",
                                       "link_busbw", "nic_busbw", "collective_busbw", "overlap_slowdown",
                                       "tp_comm_overlap", "dp_comm_overlap", "pp_comm_overlap", "serial_ops",
                                       "optimizer", "source", NULL};
static const char *const curve_keys[] = {"points", "source", NULL};
static const char *const memory_keys[] = {"reserved_bytes", "headroom_frac", "source", NULL};

/* "an array of 3 elements", or the type of a non-array, for "got ..." in messages. */
static void describe_array(const cJSON *a, char *buf, size_t cap) {
    if (cJSON_IsArray(a))
        snprintf(buf, cap, "an array of %d elements", cJSON_GetArraySize(a));
    else
        snprintf(buf, cap, "%s", ts_json_type_name(a));
}

/* Reads member `key` of `parent` as an object (absent and optional: *obj = NULL) and sets up the
 * reader for its fields. */
static ts_status open_obj(const ts_jreader *r, const cJSON *parent, const char *key, int required,
                          const char *const *allowed, ts_jreader *child, const cJSON **obj) {
    ts_jreader_child(r, key, 0, child);
    TS_CHECK(ts_jr_obj(r, parent, key, required, obj));
    return ts_jr_known_keys(child, *obj, allowed);
}

/* Element `idx` of a [flops, eff] pair, a number in [min, max]. */
static ts_status pair_num(const ts_jreader *pr, const cJSON *pair, int idx, const char *what,
                          double min, double max, double *out) {
    ts_jreader er;
    ts_jreader_child(pr, NULL, idx, &er);
    const cJSON *v = cJSON_GetArrayItem(pair, idx);
    if (!cJSON_IsNumber(v))
        return TS_FAIL(TS_ERR_INPUT, "%s: %s: expected %s in [%g, %g], got %s", er.file, er.path,
                       what, min, max, ts_json_type_name(v));
    if (!isfinite(v->valuedouble) || v->valuedouble < min || v->valuedouble > max)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s: expected %s in [%g, %g], got %g", er.file, er.path,
                       what, min, max, v->valuedouble);
    *out = v->valuedouble;
    return TS_OK;
}

/* Reads curve `key` of `obj`; an absent optional one leaves out->n = 0. */
static ts_status read_curve(const ts_jreader *r, const cJSON *obj, const char *key, int required,
                            ts_eff_curve *out) {
    ts_jreader cr, pr;
    const cJSON *curve;
    TS_CHECK(open_obj(r, obj, key, required, curve_keys, &cr, &curve));
    out->n = 0;
    if (curve == NULL) return TS_OK;
    ts_jreader_child(&cr, "points", 0, &pr);
    const cJSON *points = cJSON_GetObjectItemCaseSensitive(curve, "points");
    if (points == NULL)
        return TS_FAIL(TS_ERR_INPUT,
                       "%s: %s: missing field, expected an array of [flops, efficiency] pairs",
                       pr.file, pr.path);
    int n = cJSON_GetArraySize(points);
    if (!cJSON_IsArray(points) || n < 1 || n > TS_EFF_POINTS_MAX) {
        char got[48];
        describe_array(points, got, sizeof got);
        return TS_FAIL(TS_ERR_INPUT,
                       "%s: %s: expected an array of 1 to %d [flops, efficiency] pairs, got %s",
                       pr.file, pr.path, TS_EFF_POINTS_MAX, got);
    }
    out->n = n;
    for (int i = 0; i < n; i++) {
        ts_jreader er;
        ts_jreader_child(&pr, NULL, i, &er);
        const cJSON *pair = cJSON_GetArrayItem(points, i);
        if (!cJSON_IsArray(pair) || cJSON_GetArraySize(pair) != 2) {
            char got[48];
            describe_array(pair, got, sizeof got);
            return TS_FAIL(TS_ERR_INPUT, "%s: %s: expected a [flops, efficiency] pair, got %s",
                           er.file, er.path, got);
        }
        TS_CHECK(pair_num(&er, pair, 0, "flops", 1, MAX_FLOPS, &out->flops[i]));
        TS_CHECK(pair_num(&er, pair, 1, "an efficiency", MIN_EFF, 1, &out->eff[i]));
        if (i > 0 && !(out->flops[i] > out->flops[i - 1]))
            return TS_FAIL(TS_ERR_INPUT,
                           "%s: %s[0]: expected flops greater than the previous point's %g "
                           "(points must be strictly increasing), got %g",
                           er.file, er.path, out->flops[i - 1], out->flops[i]);
    }
    return TS_OK;
}

static ts_status read_gpu(const ts_jreader *r, const cJSON *root, ts_system *s) {
    ts_jreader gr, pr;
    const cJSON *gpu, *peak;
    TS_CHECK(open_obj(r, root, "gpu", 1, gpu_keys, &gr, &gpu));
    TS_CHECK(ts_jr_str(&gr, gpu, "name", 0, "", s->gpu_name, sizeof s->gpu_name));
    TS_CHECK(ts_jr_num(&gr, gpu, "hbm_bytes", 1, 1, MAX_BYTES, 0, &s->hbm_bytes));
    TS_CHECK(ts_jr_num(&gr, gpu, "hbm_bytes_per_s", 1, 1, MAX_BYTES_PER_S, 0, &s->hbm_bytes_per_s));
    TS_CHECK(open_obj(&gr, gpu, "peak_flops", 1, peak_keys, &pr, &peak));
    for (int d = 0; d < TS_DTYPE_COUNT; d++) {
        int bf16 = d == TS_DTYPE_BF16;
        TS_CHECK(ts_jr_num(&pr, peak, ts_dtype_names[d], bf16, bf16 ? 1 : 0, MAX_FLOPS, 0,
                           &s->peak_flops[d]));
    }
    TS_CHECK(ts_jr_num(&pr, peak, "fp4", 0, 0, MAX_FLOPS, 0, &s->peak_fp4_flops));
    TS_CHECK(ts_jr_num(&gr, gpu, "power_w", 0, 0, MAX_POWER_W, 0, &s->power_w));
    TS_CHECK(ts_jr_i32(&gr, gpu, "sms", 0, 0, 4096, 0, &s->sms));
    TS_CHECK(ts_jr_bool(&gr, gpu, "mxfp8", 0, 0, &s->mxfp8));
    TS_CHECK(ts_jr_bool(&gr, gpu, "fp8_any_layout", 0, 0, &s->fp8_any_layout));
    return ts_jr_num(&gr, gpu, "kernel_latency_s", 0, 0, 1, 0, &s->kernel_latency_s);
}

static ts_status read_node(const ts_jreader *r, const cJSON *root, ts_system *s) {
    ts_jreader nr;
    const cJSON *node;
    int64_t gpus;
    TS_CHECK(open_obj(r, root, "node", 1, node_keys, &nr, &node));
    TS_CHECK(ts_jr_int(&nr, node, "gpus", 1, 1, MAX_GPUS, 0, &gpus));
    s->gpus_per_node = (int)gpus;
    s->domain_gpus = (int)gpus;
    TS_CHECK(ts_jr_num(&nr, node, "link_bytes_per_s", 1, 1, MAX_BYTES_PER_S, 0,
                       &s->link_bytes_per_s));
    TS_CHECK(ts_jr_num(&nr, node, "link_latency_s", 0, 0, MAX_LATENCY_S, DEF_LINK_LATENCY_S,
                       &s->link_latency_s));
    int64_t cores;
    TS_CHECK(ts_jr_int(&nr, node, "cores", 0, 0, MAX_GPUS, 0, &cores));
    s->cores_per_node = (int)cores;
    TS_CHECK(ts_jr_num(&nr, node, "speed_cv", 0, 0, 1, 0, &s->speed_cv));
    TS_CHECK(ts_jr_num(&nr, node, "speed_cv_window_s", 0, 0, MAX_WINDOW_S, 0, &s->speed_cv_window_s));
    TS_CHECK(ts_jr_num(&nr, node, "speed_cv_decay", 0, 0, 1, 0, &s->speed_cv_decay));
    if (s->speed_cv_decay > 0 && !(s->speed_cv_window_s > 0))
        return TS_FAIL(TS_ERR_INPUT, "%s: node.speed_cv_decay %g needs node.speed_cv_window_s > 0 (the window "
                                     "node.speed_cv was measured over)", nr.file, s->speed_cv_decay);
    TS_CHECK(ts_jr_num(&nr, node, "sync_jitter_s", 0, 0, MAX_LATENCY_S, 0, &s->sync_jitter_s));
    return ts_jr_num(&nr, node, "gauge_flops_per_s", 0, 0, MAX_FLOPS, 0, &s->gauge_flops_per_s);
}

/* The scale-up domain, when the file gives one: its link figures replace the node's. */
static ts_status read_domain(const ts_jreader *r, const cJSON *root, ts_system *s) {
    ts_jreader dr;
    const cJSON *dom;
    int64_t gpus;
    TS_CHECK(open_obj(r, root, "domain", 0, domain_keys, &dr, &dom));
    if (dom == NULL) return TS_OK;
    TS_CHECK(ts_jr_int(&dr, dom, "gpus", 1, 1, MAX_GPUS, 0, &gpus));
    if (gpus % s->gpus_per_node != 0 && s->gpus_per_node % gpus != 0)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.gpus: expected a multiple or a divisor of node.gpus %d (a domain "
                                     "holds whole nodes, or a node whole domains), got %lld",
                       dr.file, dr.path, s->gpus_per_node, (long long)gpus);
    s->domain_gpus = (int)gpus;
    TS_CHECK(ts_jr_num(&dr, dom, "link_bytes_per_s", 0, 1, MAX_BYTES_PER_S, s->link_bytes_per_s,
                       &s->link_bytes_per_s));
    return ts_jr_num(&dr, dom, "link_latency_s", 0, 0, MAX_LATENCY_S, s->link_latency_s, &s->link_latency_s);
}

/* Tier `k` of fabric.tiers: its reach must hold whole switch groups of the tier below (or whole
 * domains), and only the top tier may reach everything (gpus = 0). */
static ts_status read_tier(const ts_jreader *tr, const cJSON *t, int k, int last, ts_system *s) {
    ts_tier *x = &s->tiers[k];
    int64_t gpus;
    TS_CHECK(ts_jr_known_keys(tr, t, tier_keys));
    char def[16];
    snprintf(def, sizeof def, "tier%d", k);
    TS_CHECK(ts_jr_str(tr, t, "name", 0, def, x->name, sizeof x->name));
    TS_CHECK(ts_jr_int(tr, t, "gpus", !last, 0, MAX_TIER_GPUS, 0, &gpus));
    x->gpus = (int)gpus;
    int below = k > 0 ? s->tiers[k - 1].gpus : s->domain_gpus;
    if ((x->gpus == 0 && !last) || (x->gpus > 0 && (x->gpus <= below || x->gpus % below != 0)))
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.gpus: expected a multiple of %d greater than it (the %s below)%s, "
                                     "got %d", tr->file, tr->path, below, k > 0 ? "tier" : "domain",
                       last ? " or 0 (every GPU)" : "", x->gpus);
    TS_CHECK(ts_jr_num(tr, t, "oversubscription", 0, 1, MAX_OVERSUBSCRIPTION, 1, &x->oversubscription));
    return ts_jr_num(tr, t, "latency_s", 0, 0, MAX_LATENCY_S, 0, &x->latency_s);
}

static ts_status read_tiers(const ts_jreader *fr, const cJSON *fabric, ts_system *s) {
    ts_jreader ar;
    ts_jreader_child(fr, "tiers", 0, &ar);
    const cJSON *tiers = cJSON_GetObjectItemCaseSensitive(fabric, "tiers");
    if (tiers == NULL) return TS_OK;
    int n = cJSON_GetArraySize(tiers);
    if (!cJSON_IsArray(tiers) || n < 1 || n > TS_TIERS_MAX) {
        char got[48];
        describe_array(tiers, got, sizeof got);
        return TS_FAIL(TS_ERR_INPUT, "%s: %s: expected an array of 1 to %d tier objects, got %s", ar.file,
                       ar.path, TS_TIERS_MAX, got);
    }
    for (int k = 0; k < n; k++) {
        ts_jreader tr;
        ts_jreader_child(&ar, NULL, k, &tr);
        const cJSON *t = cJSON_GetArrayItem(tiers, k);
        if (!cJSON_IsObject(t))
            return TS_FAIL(TS_ERR_INPUT, "%s: %s: expected a tier object, got %s", tr.file, tr.path,
                           ts_json_type_name(t));
        TS_CHECK(read_tier(&tr, t, k, k == n - 1, s));
    }
    s->n_tiers = n;
    return TS_OK;
}

static ts_status read_fabric(const ts_jreader *r, const cJSON *root, ts_system *s) {
    ts_jreader fr;
    const cJSON *fabric;
    TS_CHECK(open_obj(r, root, "fabric", 1, fabric_keys, &fr, &fabric));
    TS_CHECK(ts_jr_num(&fr, fabric, "nic_bytes_per_s", 1, 1, MAX_BYTES_PER_S, 0,
                       &s->nic_bytes_per_s));
    TS_CHECK(ts_jr_num(&fr, fabric, "latency_s", 0, 0, MAX_LATENCY_S, DEF_NIC_LATENCY_S,
                       &s->nic_latency_s));
    TS_CHECK(ts_jr_bool(&fr, fabric, "rail_optimized", 0, 0, &s->rail_optimized));
    return read_tiers(&fr, fabric, s);
}

static ts_status read_cost(const ts_jreader *r, const cJSON *root, ts_system *s) {
    ts_jreader cr;
    const cJSON *cost;
    int64_t gpus;
    TS_CHECK(open_obj(r, root, "cost", 0, cost_keys, &cr, &cost));
    TS_CHECK(ts_jr_num(&cr, cost, "price_per_gpu_hour", 0, 0, MAX_PRICE_USD, 0, &s->price_per_gpu_hour));
    TS_CHECK(ts_jr_bool(&cr, cost, "price_is_example", 0, 0, &s->price_is_example));
    TS_CHECK(ts_jr_num(&cr, cost, "rack_power_w", 0, 0, MAX_RACK_POWER_W, 0, &s->rack_power_w));
    TS_CHECK(ts_jr_int(&cr, cost, "rack_gpus", s->rack_power_w > 0, 1, 100000, 0, &gpus));
    s->rack_gpus = (int)gpus;
    return TS_OK;
}

/* efficiency.collective_busbw: the factor of each collective kind, 1 where absent. */
static ts_status read_coll_busbw(const ts_jreader *r, const cJSON *eff, ts_system *s) {
    const char *keys[TS_COLL_COUNT + 2];
    for (int k = 0; k < TS_COLL_COUNT; k++) keys[k] = ts_coll_names[k];
    keys[TS_COLL_COUNT] = "source", keys[TS_COLL_COUNT + 1] = NULL;
    ts_jreader cr;
    const cJSON *obj;
    TS_CHECK(open_obj(r, eff, "collective_busbw", 0, keys, &cr, &obj));
    for (int k = 0; k < TS_COLL_COUNT; k++)
        TS_CHECK(ts_jr_num(&cr, obj, ts_coll_names[k], 0, MIN_EFF, 100, 1, &s->coll_busbw[k]));
    return TS_OK;
}

static ts_status read_efficiency(const ts_jreader *r, const cJSON *root, ts_system *s) {
    ts_jreader er;
    const cJSON *eff;
    TS_CHECK(open_obj(r, root, "efficiency", 1, eff_keys, &er, &eff));
    TS_CHECK(read_curve(&er, eff, "gemm", 1, &s->gemm_eff));
    TS_CHECK(read_curve(&er, eff, "gemm_bf16", 0, &s->gemm_eff_bf16));
    TS_CHECK(read_curve(&er, eff, "gemm_fp8", 0, &s->gemm_eff_fp8));
    TS_CHECK(ts_jr_num(&er, eff, "attention", 0, MIN_EFF, 1, DEF_ATTENTION_EFF, &s->attention_eff));
    TS_CHECK(ts_jr_num(&er, eff, "attention_flash", 0, MIN_EFF, 1, 0, &s->attention_flash_eff));
    TS_CHECK(ts_jr_num(&er, eff, "gemm_fp8_bwd", 0, MIN_EFF, 1, 0, &s->gemm_fp8_bwd_eff));
    TS_CHECK(ts_jr_num(&er, eff, "hbm", 0, MIN_EFF, 1, DEF_HBM_EFF, &s->hbm_eff));
    TS_CHECK(ts_jr_num(&er, eff, "optimizer", 0, MIN_EFF, 100, 1, &s->optimizer_eff));
    TS_CHECK(ts_jr_num(&er, eff, "link_busbw", 0, MIN_EFF, 1, DEF_LINK_BUSBW_EFF,
                       &s->link_busbw_eff));
    TS_CHECK(ts_jr_num(&er, eff, "nic_busbw", 0, MIN_EFF, 1, DEF_NIC_BUSBW_EFF,
                       &s->nic_busbw_eff));
    TS_CHECK(read_coll_busbw(&er, eff, s));
    TS_CHECK(ts_jr_num(&er, eff, "overlap_slowdown", 0, 0, 1, DEF_OVERLAP_SLOWDOWN,
                       &s->overlap_slowdown));
    TS_CHECK(ts_jr_num(&er, eff, "tp_comm_overlap", 0, 0, 1, DEF_TP_COMM_OVERLAP,
                       &s->tp_comm_overlap));
    TS_CHECK(ts_jr_num(&er, eff, "dp_comm_overlap", 0, 0, 1, DEF_DP_COMM_OVERLAP,
                       &s->dp_comm_overlap));
    TS_CHECK(ts_jr_num(&er, eff, "pp_comm_overlap", 0, 0, 1, DEF_PP_COMM_OVERLAP,
                       &s->pp_comm_overlap));
    return ts_jr_bool(&er, eff, "serial_ops", 0, 0, &s->serial_ops);
}

static ts_status read_memory(const ts_jreader *r, const cJSON *root, ts_system *s) {
    ts_jreader mr;
    const cJSON *mem;
    TS_CHECK(open_obj(r, root, "memory", 0, memory_keys, &mr, &mem));
    TS_CHECK(ts_jr_num(&mr, mem, "reserved_bytes", 0, 0, MAX_BYTES, DEF_RESERVED_BYTES,
                       &s->reserved_bytes));
    TS_CHECK(ts_jr_num(&mr, mem, "headroom_frac", 0, 0, 1, DEF_HEADROOM_FRAC, &s->headroom_frac));
    if (ts_system_usable_bytes(s) <= 0)
        return TS_FAIL(TS_ERR_INPUT,
                       "%s: %s.reserved_bytes: expected less than $.gpu.hbm_bytes * (1 - "
                       "headroom_frac) = %g bytes, got %g",
                       mr.file, mr.path, s->hbm_bytes * (1 - s->headroom_frac), s->reserved_bytes);
    return TS_OK;
}

ts_status ts_system_from_json(const char *file, const cJSON *root, ts_system *out) {
    ts_system s;
    memset(&s, 0, sizeof s);
    ts_jreader r;
    ts_jreader_root(&r, file);
    if (!cJSON_IsObject(root))
        return TS_FAIL(TS_ERR_INPUT, "%s: $: expected a system object, got %s", file,
                       ts_json_type_name(root));
    TS_CHECK(ts_jr_known_keys(&r, root, root_keys));
    TS_CHECK(ts_jr_str(&r, root, "name", 1, "", s.name, sizeof s.name));
    if (s.name[0] == '\0')
        return TS_FAIL(TS_ERR_INPUT, "%s: $.name: expected a non-empty string, got \"\"", file);
    TS_CHECK(ts_jr_str(&r, root, "source", 0, "", s.source, sizeof s.source));
    TS_CHECK(read_gpu(&r, root, &s));
    TS_CHECK(read_node(&r, root, &s));
    TS_CHECK(read_domain(&r, root, &s));
    TS_CHECK(read_fabric(&r, root, &s));
    TS_CHECK(read_efficiency(&r, root, &s));
    TS_CHECK(read_memory(&r, root, &s));
    TS_CHECK(read_cost(&r, root, &s));
    *out = s;
    return TS_OK;
}

ts_status ts_system_load(const char *name_or_path, ts_system *out) {
    char path[4096];
    cJSON *root = NULL;
    TS_CHECK(ts_zoo_resolve("models/systems", name_or_path, path, sizeof path));
    TS_CHECK(ts_json_load_file(path, &root));
    ts_status res = ts_system_from_json(path, root, out);
    cJSON_Delete(root);
    return res;
}

static ts_status add_num(cJSON *obj, const char *key, double v) {
    if (cJSON_AddNumberToObject(obj, key, v) == NULL)
        return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing system field %s", key);
    return TS_OK;
}

static ts_status add_str(cJSON *obj, const char *key, const char *v) {
    if (cJSON_AddStringToObject(obj, key, v) == NULL)
        return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing system field %s", key);
    return TS_OK;
}

static ts_status add_obj(cJSON *parent, const char *key, cJSON **out) {
    *out = cJSON_AddObjectToObject(parent, key);
    if (*out == NULL)
        return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing system object %s", key);
    return TS_OK;
}

/* efficiency.collective_busbw, written only when a factor is not 1. */
static ts_status add_coll_busbw(cJSON *eff, const ts_system *s) {
    int any = 0;
    for (int k = 0; k < TS_COLL_COUNT; k++) any |= s->coll_busbw[k] > 0 && s->coll_busbw[k] != 1;
    if (!any) return TS_OK;
    cJSON *obj;
    TS_CHECK(add_obj(eff, "collective_busbw", &obj));
    for (int k = 0; k < TS_COLL_COUNT; k++)
        TS_CHECK(add_num(obj, ts_coll_names[k], s->coll_busbw[k] > 0 ? s->coll_busbw[k] : 1));
    return TS_OK;
}

static ts_status add_curve(cJSON *parent, const char *key, const ts_eff_curve *c) {
    cJSON *curve, *points;
    TS_CHECK(add_obj(parent, key, &curve));
    points = cJSON_AddArrayToObject(curve, "points");
    if (points == NULL) return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing %s.points", key);
    for (int i = 0; i < c->n; i++) {
        double xy[2] = {c->flops[i], c->eff[i]};
        cJSON *pair = cJSON_CreateDoubleArray(xy, 2);
        if (!cJSON_AddItemToArray(points, pair)) {
            cJSON_Delete(pair);
            return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing %s.points", key);
        }
    }
    return TS_OK;
}

/* fabric.tiers, when the fabric has tiers (a flat one writes nothing, as before tiers existed). */
static ts_status tiers_to_json(const ts_system *s, cJSON *fabric) {
    if (s->n_tiers == 0) return TS_OK;
    cJSON *arr = cJSON_AddArrayToObject(fabric, "tiers");
    if (arr == NULL) return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing fabric.tiers");
    for (int k = 0; k < s->n_tiers; k++) {
        cJSON *t = cJSON_CreateObject();
        if (t == NULL || !cJSON_AddItemToArray(arr, t)) {
            cJSON_Delete(t);
            return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing fabric.tiers");
        }
        TS_CHECK(add_str(t, "name", s->tiers[k].name));
        TS_CHECK(add_num(t, "gpus", s->tiers[k].gpus));
        TS_CHECK(add_num(t, "oversubscription", s->tiers[k].oversubscription));
        TS_CHECK(add_num(t, "latency_s", s->tiers[k].latency_s));
    }
    return TS_OK;
}

/* The cost object, when the spec has a price or a power figure (a plan's system keeps what its
 * reports price the run with). */
static ts_status cost_to_json(const ts_system *s, cJSON *root) {
    if (s->price_per_gpu_hour <= 0 && s->rack_power_w <= 0 && !s->price_is_example) return TS_OK;
    cJSON *cost;
    TS_CHECK(add_obj(root, "cost", &cost));
    TS_CHECK(add_num(cost, "price_per_gpu_hour", s->price_per_gpu_hour));
    if (cJSON_AddBoolToObject(cost, "price_is_example", s->price_is_example != 0) == NULL)
        return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing system field price_is_example");
    TS_CHECK(add_num(cost, "rack_power_w", s->rack_power_w));
    return s->rack_gpus > 0 ? add_num(cost, "rack_gpus", s->rack_gpus) : TS_OK;
}

/* Fills `root` with every field of `s`, defaults included, so the file stands on its own. */
static ts_status system_to_json(const ts_system *s, cJSON *root) {
    cJSON *gpu, *peak, *node, *fabric, *eff, *mem;
    TS_CHECK(add_str(root, "name", s->name));
    TS_CHECK(add_str(root, "source", s->source));

    TS_CHECK(add_obj(root, "gpu", &gpu));
    TS_CHECK(add_str(gpu, "name", s->gpu_name));
    TS_CHECK(add_num(gpu, "hbm_bytes", s->hbm_bytes));
    TS_CHECK(add_num(gpu, "hbm_bytes_per_s", s->hbm_bytes_per_s));
    TS_CHECK(add_obj(gpu, "peak_flops", &peak));
    for (int d = 0; d < TS_DTYPE_COUNT; d++)
        TS_CHECK(add_num(peak, ts_dtype_names[d], s->peak_flops[d]));
    if (s->peak_fp4_flops > 0) TS_CHECK(add_num(peak, "fp4", s->peak_fp4_flops));
    TS_CHECK(add_num(gpu, "power_w", s->power_w));
    if (s->sms > 0) TS_CHECK(add_num(gpu, "sms", s->sms));
    TS_CHECK(add_num(gpu, "kernel_latency_s", s->kernel_latency_s));
    if (s->mxfp8 && cJSON_AddBoolToObject(gpu, "mxfp8", 1) == NULL)
        return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing system field mxfp8");
    if (s->fp8_any_layout && cJSON_AddBoolToObject(gpu, "fp8_any_layout", 1) == NULL)
        return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing system field fp8_any_layout");

    TS_CHECK(add_obj(root, "node", &node));
    TS_CHECK(add_num(node, "gpus", s->gpus_per_node));
    TS_CHECK(add_num(node, "link_bytes_per_s", s->link_bytes_per_s));
    TS_CHECK(add_num(node, "link_latency_s", s->link_latency_s));
    TS_CHECK(add_num(node, "cores", s->cores_per_node));
    if (s->speed_cv > 0) TS_CHECK(add_num(node, "speed_cv", s->speed_cv));
    if (s->speed_cv_window_s > 0) TS_CHECK(add_num(node, "speed_cv_window_s", s->speed_cv_window_s));
    if (s->speed_cv_decay > 0) TS_CHECK(add_num(node, "speed_cv_decay", s->speed_cv_decay));
    if (s->sync_jitter_s > 0) TS_CHECK(add_num(node, "sync_jitter_s", s->sync_jitter_s));
    if (s->gauge_flops_per_s > 0) TS_CHECK(add_num(node, "gauge_flops_per_s", s->gauge_flops_per_s));

    /* The node's link figures are the domain's: a domain object only says how large it is. */
    if (s->domain_gpus != s->gpus_per_node) {
        cJSON *dom;
        TS_CHECK(add_obj(root, "domain", &dom));
        TS_CHECK(add_num(dom, "gpus", s->domain_gpus));
    }

    TS_CHECK(add_obj(root, "fabric", &fabric));
    TS_CHECK(add_num(fabric, "nic_bytes_per_s", s->nic_bytes_per_s));
    TS_CHECK(add_num(fabric, "latency_s", s->nic_latency_s));
    if (cJSON_AddBoolToObject(fabric, "rail_optimized", s->rail_optimized != 0) == NULL)
        return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing system field rail_optimized");
    TS_CHECK(tiers_to_json(s, fabric));

    TS_CHECK(add_obj(root, "efficiency", &eff));
    TS_CHECK(add_curve(eff, "gemm", &s->gemm_eff));
    if (s->gemm_eff_bf16.n > 0) TS_CHECK(add_curve(eff, "gemm_bf16", &s->gemm_eff_bf16));
    if (s->gemm_eff_fp8.n > 0) TS_CHECK(add_curve(eff, "gemm_fp8", &s->gemm_eff_fp8));
    TS_CHECK(add_num(eff, "attention", s->attention_eff));
    if (s->attention_flash_eff > 0) TS_CHECK(add_num(eff, "attention_flash", s->attention_flash_eff));
    if (s->gemm_fp8_bwd_eff > 0) TS_CHECK(add_num(eff, "gemm_fp8_bwd", s->gemm_fp8_bwd_eff));
    TS_CHECK(add_num(eff, "hbm", s->hbm_eff));
    TS_CHECK(add_num(eff, "optimizer", s->optimizer_eff));
    TS_CHECK(add_num(eff, "link_busbw", s->link_busbw_eff));
    TS_CHECK(add_num(eff, "nic_busbw", s->nic_busbw_eff));
    TS_CHECK(add_coll_busbw(eff, s));
    TS_CHECK(add_num(eff, "overlap_slowdown", s->overlap_slowdown));
    TS_CHECK(add_num(eff, "tp_comm_overlap", s->tp_comm_overlap));
    TS_CHECK(add_num(eff, "dp_comm_overlap", s->dp_comm_overlap));
    TS_CHECK(add_num(eff, "pp_comm_overlap", s->pp_comm_overlap));
    if (cJSON_AddBoolToObject(eff, "serial_ops", s->serial_ops != 0) == NULL)
        return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing the system");

    TS_CHECK(add_obj(root, "memory", &mem));
    TS_CHECK(add_num(mem, "reserved_bytes", s->reserved_bytes));
    TS_CHECK(add_num(mem, "headroom_frac", s->headroom_frac));
    return cost_to_json(s, root);
}

cJSON *ts_system_to_json(const ts_system *s) {
    cJSON *root = cJSON_CreateObject();
    if (root == NULL) {
        TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing system %s", s->name);
        return NULL;
    }
    if (system_to_json(s, root) != TS_OK) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

/* Efficiency between measured points is interpolated linearly in log10(flops): GEMM throughput
 * curves rise roughly linearly per decade of work until the tensor cores saturate. Outside the
 * measured range the nearest point holds (no extrapolation past what was measured). An empty
 * curve (n = 0, which the loader never produces) stands for the peak. */
double ts_eff_at(const ts_eff_curve *c, double flops) {
    if (c->n < 1) return 1.0;
    if (!(flops > c->flops[0])) return c->eff[0];
    for (int i = 1; i < c->n; i++) {
        if (flops <= c->flops[i]) {
            double t = log(flops / c->flops[i - 1]) / log(c->flops[i] / c->flops[i - 1]);
            return c->eff[i - 1] + t * (c->eff[i] - c->eff[i - 1]);
        }
    }
    return c->eff[c->n - 1];
}

int ts_system_cpu_ranks(const ts_system *s) { return s->serial_ops || s->cores_per_node > 0; }

int ts_system_domain_gpus(const ts_system *s) {
    return s->domain_gpus > 0 ? s->domain_gpus : s->gpus_per_node;
}

double ts_system_power_per_gpu_w(const ts_system *s) {
    return s->rack_power_w > 0 && s->rack_gpus > 0 ? s->rack_power_w / s->rack_gpus : s->power_w;
}

double ts_system_usable_bytes(const ts_system *s) {
    return s->hbm_bytes * (1.0 - s->headroom_frac) - s->reserved_bytes;
}
