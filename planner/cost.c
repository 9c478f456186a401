/* Roofline compute costs and NCCL-style collective costs (see cost.h). */
#include "planner/cost.h"

#include "common/stats.h"
#include "planner/wgrad_accum.h"

#include <math.h>

const char *const ts_link_names[] = {"nvlink", "nic", "spine", "core", NULL};

/* NCCL's tuning model (src/graph/tuning.cc, ncclTopoTuneModel): the tree algorithm's bus
 * bandwidth is the ring's × 0.92 with the Simple protocol (`busBw * .92`, "120/128" of the
 * line), its latency 2·log2(nodes) network hops instead of the ring's 2(n−1) steps. */
#define TS_TREE_BUSBW_FACTOR 0.92

/* FP8 without a measured FP8 curve: the FP8:BF16 efficiency ratio of the H100 paired
 * measurement behind h100-sxm-dgx.json's gemm_fp8 (TileLang, H800 SXM, M=N=8192) at the sizes of
 * training GEMMs, 2.7e11-5.5e11 FLOPs (0.83-0.94): an FP8 GEMM reaches 0.9 of the BF16 curve's
 * efficiency, as a fraction of its own (twice as high) peak. */
#define TS_FP8_EFF_FALLBACK 0.9
/* FP8 attention: FlashAttention-3 (Shah et al. 2024, §4.1, H100 SXM) reaches ~1.2 PFLOP/s in FP8
 * against ~740 TFLOP/s in BF16 forward at head dim 256: (1200/1979)/(740/989) = 0.81 of the BF16
 * efficiency, taken as a fraction of the FP8 peak. */
#define TS_FP8_ATTENTION_RATIO 0.81

double ts_gemm_eff(const ts_system *s, ts_dtype dt, double flops) {
    if ((dt == TS_DTYPE_BF16 || dt == TS_DTYPE_FP16) && s->gemm_eff_bf16.n > 0) return ts_eff_at(&s->gemm_eff_bf16, flops);
    if (dt != TS_DTYPE_FP8) return ts_eff_at(&s->gemm_eff, flops);
    if (s->gemm_eff_fp8.n > 0) return ts_eff_at(&s->gemm_eff_fp8, flops);
    return TS_FP8_EFF_FALLBACK * ts_eff_at(&s->gemm_eff, flops);
}

double ts_gemm_bwd_scale(const ts_system *s, ts_dtype dt) {
    return dt == TS_DTYPE_FP8 && s->gemm_fp8_bwd_eff > 0 ? 1.0 / s->gemm_fp8_bwd_eff : 1.0;
}

double ts_wgrad_gemm_s(const ts_system *s, double compute_s, double m, double n, double k, double count,
                       double in_bytes, double grad_bytes) {
    if (compute_s <= 0 || count <= 0 || ts_system_cpu_ranks(s)) return compute_s;
    /* the plain GEMM: its inputs read once, its 2-byte output written once */
    double plain = fmax(compute_s, ts_memory_s(s, count * (k * (m + n) * in_bytes + m * n * 2.0), 0));
    if (grad_bytes <= 0) return plain;
    double traffic = ts_memory_s(s, count * m * n * 2.0 * grad_bytes, 0); /* main_grad read and written */
    return plain + ts_accum_added_s(ts_accum_curve_for(grad_bytes), plain, traffic);
}

/* Bytes a GEMM of `dt` reads per operand element (an FP8 GEMM's E4M3 inputs: 1) and writes per
 * output element (FP8 GEMMs write BF16, as Transformer Engine's do). */
static double operand_bytes(ts_dtype dt) { return dt == TS_DTYPE_FP8 ? 1.0 : dt == TS_DTYPE_FP32 ? 4.0 : 2.0; }
static double output_bytes(ts_dtype dt) { return dt == TS_DTYPE_FP32 ? 4.0 : 2.0; }

double ts_gemm_memory_s(const ts_system *s, ts_dtype dt, double m, double n, double k, double count) {
    if (ts_system_cpu_ranks(s)) return 0; /* CPU ranks' GEMM curves are measured in situ, caches and all */
    double bytes = (m * k + k * n) * operand_bytes(dt) + m * n * output_bytes(dt);
    return ts_memory_s(s, count * bytes, 0);
}

double ts_gemm_compute_s(const ts_system *s, ts_dtype dt, double m, double n, double k) {
    double flops = 2.0 * m * n * k;
    if (flops <= 0) return 0;
    return flops / (s->peak_flops[dt] * ts_gemm_eff(s, dt, flops));
}

double ts_gemm_s(const ts_system *s, ts_dtype dt, double m, double n, double k) {
    return fmax(ts_gemm_compute_s(s, dt, m, n, k), ts_gemm_memory_s(s, dt, m, n, k, 1));
}

double ts_attention_s(const ts_system *s, ts_dtype dt, double flops, double kernel_flops) {
    if (flops <= 0) return 0;
    const ts_eff_curve *c = &s->gemm_eff;
    double plateau = c->n > 0 ? c->eff[c->n - 1] : 1.0;
    double scale = ts_eff_at(c, kernel_flops) / plateau;
    double kernels = kernel_flops > 0 ? flops / kernel_flops : 1.0;
    double eff = s->attention_eff * (dt == TS_DTYPE_FP8 ? TS_FP8_ATTENTION_RATIO : 1.0);
    return flops / (s->peak_flops[dt] * eff * (scale < 1.0 ? scale : 1.0)) + kernels * s->kernel_latency_s;
}

double ts_memory_s(const ts_system *s, double bytes, double kernels) {
    if (bytes <= 0) return 0;
    return bytes / (s->hbm_bytes_per_s * s->hbm_eff) + kernels * s->kernel_latency_s;
}

double ts_optimizer_s(const ts_system *s, double bytes) {
    if (bytes <= 0) return 0;
    return ts_memory_s(s, bytes, 0) / s->optimizer_eff + s->kernel_latency_s;
}

double ts_compute_scale(const ts_system *s, int gpus) {
    if (s->cores_per_node <= 0) return 1.0;
    double on_node = gpus < s->gpus_per_node ? gpus : s->gpus_per_node;
    return on_node > s->cores_per_node ? on_node / s->cores_per_node : 1.0;
}

double ts_lockstep_scale(const ts_system *s, int gpus, double window_s) {
    if (s->speed_cv <= 0 || gpus <= 1) return 1.0;
    int per_node = gpus < s->gpus_per_node ? gpus : s->gpus_per_node;
    int nodes = (gpus + s->gpus_per_node - 1) / s->gpus_per_node;
    int cores = s->cores_per_node > 0 && s->cores_per_node < per_node ? s->cores_per_node : per_node;
    double cv = s->speed_cv;
    if (s->speed_cv_decay > 0 && s->speed_cv_window_s > 0 && window_s > 0)
        cv = fmin(1.0, cv * pow(window_s / s->speed_cv_window_s, -s->speed_cv_decay));
    return 1.0 + cv * ts_expected_max_normal(nodes * cores);
}

double ts_sync_wait_s(const ts_system *s, int span_ranks, int lockstep_ranks) {
    if (s->sync_jitter_s <= 0 || span_ranks <= lockstep_ranks) return 0;
    return s->sync_jitter_s * (ts_expected_max_normal(span_ranks) - ts_expected_max_normal(lockstep_ranks));
}

int ts_link_kinds(const ts_system *s) { return s->n_tiers > 0 ? 1 + s->n_tiers : 2; }

ts_link ts_group_link(const ts_system *s, int stride, int size) {
    if (size <= 1) return TS_LINK_NVLINK;
    /* Domain boundaries fall every domain_gpus ranks; a group starting at a boundary stays inside
     * iff its span fits. Groups of the rank order are aligned that way. */
    double span = (double)stride * (double)size;
    if (span <= ts_system_domain_gpus(s)) return TS_LINK_NVLINK;
    for (int k = 0; k + 1 < s->n_tiers; k++)
        if (span <= s->tiers[k].gpus) return (ts_link)(TS_LINK_NIC + k);
    return s->n_tiers > 0 ? (ts_link)(TS_LINK_NIC + s->n_tiers - 1) : TS_LINK_NIC;
}

double ts_link_busbw(const ts_system *s, ts_link link) {
    if (link == TS_LINK_NVLINK) return s->link_bytes_per_s * s->link_busbw_eff;
    double bw = s->nic_bytes_per_s * s->nic_busbw_eff;
    for (int k = 0; k < s->n_tiers && k <= (int)link - TS_LINK_NIC; k++) bw /= s->tiers[k].oversubscription;
    return bw;
}

double ts_link_latency_s(const ts_system *s, ts_link link) {
    if (link == TS_LINK_NVLINK) return s->link_latency_s;
    double lat = s->nic_latency_s;
    for (int k = 0; k < s->n_tiers && k <= (int)link - TS_LINK_NIC; k++) lat += s->tiers[k].latency_s;
    return lat;
}

double ts_coll_s(const ts_system *s, ts_coll c, int n, double bytes, ts_link link) {
    if (n <= 1 || bytes <= 0) return 0;
    double kind = c < TS_COLL_COUNT && s->coll_busbw[c] > 0 ? s->coll_busbw[c] : 1.0;
    double bw = ts_link_busbw(s, link) * kind, lat = ts_link_latency_s(s, link);
    double frac = (double)(n - 1) / n;
    double steps = n - 1;            /* ring: one latency per step */
    double levels = 0;               /* tree: one latency per level, up and down: ceil(log2 n) */
    for (int span = 1; span < n; span *= 2) levels++;
    switch (c) {
    case TS_COLL_ALLREDUCE: {
        /* Ring: reduce-scatter then all-gather, 2(n-1) steps; tree: reduce up, broadcast down,
         * the same bus volume when pipelined (NCCL tuning model). */
        double wire = 2.0 * frac * bytes / bw;
        double ring = wire + 2.0 * steps * lat;
        int tiered = s->n_tiers > 0 && link != TS_LINK_NVLINK;
        double tree = (tiered ? wire / TS_TREE_BUSBW_FACTOR : wire) + 2.0 * levels * lat;
        return ring < tree ? ring : tree;
    }
    case TS_COLL_REDUCE_SCATTER:
    case TS_COLL_ALLGATHER:
    case TS_COLL_ALLTOALL:
        return frac * bytes / bw + steps * lat;
    case TS_COLL_SENDRECV:
        return bytes / bw + lat;
    case TS_COLL_COUNT: break;
    }
    return 0;
}

double ts_cp_ring_exposed_s(const ts_system *s, ts_link link, int steps, double step_bytes, double attn_s) {
    if (steps <= 0) return 0;
    double xfer = ts_coll_s(s, TS_COLL_SENDRECV, 2, step_bytes, link);
    double block = s->serial_ops ? 0 : attn_s / (steps + 1);
    return steps * (xfer > block ? xfer - block : 0);
}
