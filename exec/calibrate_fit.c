/* `tessera calibrate`'s fit of a system spec to the measured rows, its tables and its JSON (see
 * calibrate.h for the formulas). Pure: no MPI, so tests feed it synthetic rows. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "exec/calibrate.h"
#include "exec/speed_gauge.h"

#define MAX_BUSBW 1e15 /* models/system.c's fence on any bandwidth */
#define MIN_EFF 1e-3   /* and on any efficiency */
#define MIN_COLL_FACTOR 1e-3 /* models/system.c's range of efficiency.collective_busbw */
#define MAX_COLL_FACTOR 100
#define NODE_GPUS_MIN 8

double ts_calib_busbw_factor(ts_coll coll, int n) {
    if (n <= 1) return 0;
    double frac = (double)(n - 1) / n;
    switch (coll) {
    case TS_COLL_ALLREDUCE: return 2.0 * frac;
    case TS_COLL_REDUCE_SCATTER:
    case TS_COLL_ALLGATHER:
    case TS_COLL_ALLTOALL: return frac;
    case TS_COLL_SENDRECV: return 1.0;
    case TS_COLL_COUNT: break;
    }
    return 0;
}

/* a (latency steps) and b (bus bytes) of ts_coll_s(c, n, bytes) = a·latency + b / busbw, read off
 * the cost model itself: latency 1 with an unbounded link gives a; latency 0 and 1 byte/s, b. */
static void coll_terms(ts_coll c, int n, double bytes, double *a, double *b) {
    ts_system s;
    memset(&s, 0, sizeof s);
    s.gpus_per_node = n;
    s.link_busbw_eff = 1;
    s.link_latency_s = 1, s.link_bytes_per_s = 1e300;
    *a = ts_coll_s(&s, c, n, bytes, TS_LINK_NVLINK);
    s.link_latency_s = 0, s.link_bytes_per_s = 1;
    *b = ts_coll_s(&s, c, n, bytes, TS_LINK_NVLINK);
}

static double coll_model_s(const ts_calib_coll *r, double latency_s, double busbw) {
    double a, b;
    coll_terms(r->coll, r->ranks, r->bytes, &a, &b);
    return a * latency_s + b / busbw;
}

/* Relative errors of (latency, busbw) on the rows. */
static void coll_errors(const ts_calib_coll *rows, int n, double latency_s, double busbw,
                        double *rms, double *max) {
    double sum = 0, worst = 0;
    for (int i = 0; i < n; i++) {
        double e = fabs(coll_model_s(&rows[i], latency_s, busbw) / rows[i].time_s - 1.0);
        sum += e * e;
        worst = e > worst ? e : worst;
    }
    *rms = n > 0 ? sqrt(sum / n) : 0;
    *max = worst;
}

/* Minimises sum_i ((a_i·lat + b_i·x) / t_i - 1)² over lat >= 0 and x = 1/busbw > 0: with
 * p_i = a_i/t_i and q_i = b_i/t_i, the normal equations
 *   [Σp² Σpq; Σpq Σq²] [lat; x] = [Σp; Σq],
 * and when they give lat < 0, lat = 0 and x = Σq / Σq² (bandwidth alone). */
ts_status ts_calib_fit_coll(const ts_calib_coll *rows, int n, ts_calib_coll_fit *out) {
    memset(out, 0, sizeof *out);
    if (n < 1) return TS_FAIL(TS_ERR_INPUT, "calibrate: no collective rows to fit");
    double spp = 0, spq = 0, sqq = 0, sp = 0, sq = 0;
    for (int i = 0; i < n; i++) {
        if (!(rows[i].time_s > 0) || !(rows[i].bytes > 0))
            return TS_FAIL(TS_ERR_INPUT, "calibrate: %s row %d: time %g s, %g bytes: expected both positive",
                           ts_coll_names[rows[i].coll], i, rows[i].time_s, rows[i].bytes);
        double a, b;
        coll_terms(rows[i].coll, rows[i].ranks, rows[i].bytes, &a, &b);
        double p = a / rows[i].time_s, q = b / rows[i].time_s;
        spp += p * p, spq += p * q, sqq += q * q, sp += p, sq += q;
    }
    double det = spp * sqq - spq * spq, lat = 0, x = sq / sqq;
    if (fabs(det) > 1e-12 * spp * sqq) {
        double l2 = (sp * sqq - sq * spq) / det, x2 = (spp * sq - spq * sp) / det;
        if (l2 >= 0 && x2 > 0) lat = l2, x = x2;
    }
    if (!(x > 1.0 / MAX_BUSBW)) { /* no bandwidth term to speak of: latency alone */
        x = 1.0 / MAX_BUSBW;
        lat = spp > 0 ? (sp - x * spq) / spp : 0;
        lat = lat > 0 ? lat : 0;
    }
    out->points = n;
    out->latency_s = lat < 1.0 ? lat : 1.0;
    out->busbw_bytes_per_s = 1.0 / x;
    coll_errors(rows, n, out->latency_s, out->busbw_bytes_per_s, &out->rms_error, &out->max_error);
    return TS_OK;
}

/* ---- compute -------------------------------------------------------------------------------- */

static int cmp_gemm_flops(const void *a, const void *b) {
    double x = ((const ts_calib_gemm *)a)->flops, y = ((const ts_calib_gemm *)b)->flops;
    return x < y ? -1 : x > y;
}

/* The efficiency curve: one point per distinct FLOP count (rows of equal FLOPs pooled as total
 * flops / total time, the rate a mix of those shapes runs at), then the two closest neighbours in
 * log(flops) merged (efficiency and position weighted by row counts; the ends keep their FLOPs so
 * the curve spans the grid) until TS_EFF_POINTS_MAX remain. */
static void fit_gemm_curve(const ts_calib_gemm *measured, int n_rows, double peak, ts_eff_curve *curve) {
    ts_calib_gemm rows[TS_CALIB_MAX_GEMM];
    memcpy(rows, measured, (size_t)n_rows * sizeof *rows);
    qsort(rows, (size_t)n_rows, sizeof *rows, cmp_gemm_flops);
    double lf[TS_CALIB_MAX_GEMM], eff[TS_CALIB_MAX_GEMM], w[TS_CALIB_MAX_GEMM];
    double fl[TS_CALIB_MAX_GEMM]; /* flops: exact until merged (exp(log) would round them) */
    int n = 0;
    for (int i = 0; i < n_rows;) {
        double flops = 0, time = 0, f0 = rows[i].flops;
        int j = i;
        for (; j < n_rows && rows[j].flops == f0; j++) flops += rows[j].flops, time += rows[j].time_s;
        fl[n] = f0, lf[n] = log(f0), eff[n] = flops / time / peak, w[n] = j - i;
        n++, i = j;
    }
    while (n > TS_EFF_POINTS_MAX) {
        int best = 0;
        for (int i = 1; i + 1 < n; i++)
            if (lf[i + 1] - lf[i] < lf[best + 1] - lf[best]) best = i;
        double ws = w[best] + w[best + 1];
        /* The ends stay where they were measured, so the curve spans the whole grid. */
        double at = best == 0 ? lf[0] : best + 2 == n ? lf[best + 1]
                                      : (w[best] * lf[best] + w[best + 1] * lf[best + 1]) / ws;
        double at_fl = best == 0 ? fl[0] : best + 2 == n ? fl[best + 1] : exp(at);
        lf[best] = at;
        eff[best] = (w[best] * eff[best] + w[best + 1] * eff[best + 1]) / ws;
        w[best] = ws, fl[best] = at_fl;
        for (int i = best + 1; i + 1 < n; i++)
            fl[i] = fl[i + 1], lf[i] = lf[i + 1], eff[i] = eff[i + 1], w[i] = w[i + 1];
        n--;
    }
    curve->n = n;
    for (int i = 0; i < n; i++) {
        curve->flops[i] = fl[i];
        curve->eff[i] = eff[i] < MIN_EFF ? MIN_EFF : eff[i] > 1 ? 1 : eff[i];
    }
}

/* One scale k minimising sum_i (k·u_i / t_i - 1)²: k = Σ(u/t) / Σ(u/t)². */
static double fit_scale(const double *u, const double *t, int n) {
    double s1 = 0, s2 = 0;
    for (int i = 0; i < n; i++) s1 += u[i] / t[i], s2 += (u[i] / t[i]) * (u[i] / t[i]);
    return s2 > 0 ? s1 / s2 : 0;
}

static double rms(const double *model, const double *t, int n) {
    double sum = 0;
    for (int i = 0; i < n; i++) sum += (model[i] / t[i] - 1) * (model[i] / t[i] - 1);
    return n > 0 ? sqrt(sum / n) : 0;
}

/* The best measured GEMM rate of `n` rows: the fit's peak, which the in-situ pass may scale
 * afterwards. */
static double best_gemm_rate(const ts_calib_gemm *rows, int n) {
    double peak = 0;
    for (int i = 0; i < n; i++) peak = fmax(peak, rows[i].flops / rows[i].time_s);
    return peak;
}

/* The best rate of `n` GEMM rows (`what`: "GEMM", "bf16 GEMM"), after checking their times. */
static ts_status gemm_peak(const ts_calib_gemm *rows, int n, const char *what, double *peak) {
    for (int i = 0; i < n; i++)
        if (!(rows[i].time_s > 0))
            return TS_FAIL(TS_ERR_INPUT, "calibrate: %s row %d: time %g s, expected positive", what, i, rows[i].time_s);
    *peak = best_gemm_rate(rows, n);
    return TS_OK;
}

/* t ≈ lat + x·b by least squares on relative error, Σ((lat + x·b_i) / t_i − 1)², with lat ≥ 0:
 * the normal equations over the regressors 1/t_i and b_i/t_i; where they would give a negative
 * latency (or none fits), lat = 0 and x alone (fit_scale). */
static void fit_line(const double *b, const double *t, int n, double *lat, double *x) {
    double saa = 0, sac = 0, scc = 0, sa = 0, sc = 0;
    for (int i = 0; i < n; i++) {
        double a = 1.0 / t[i], c = b[i] / t[i];
        saa += a * a, sac += a * c, scc += c * c, sa += a, sc += c;
    }
    double det = saa * scc - sac * sac;
    *lat = det > 0 ? (sa * scc - sc * sac) / det : -1;
    *x = det > 0 ? (saa * sc - sac * sa) / det : -1;
    if (!(*lat >= 0 && *x > 0)) *lat = 0, *x = fit_scale(b, t, n);
}

/* Each row's model_s, ts_gemm_compute_s in `dt` on `s` (the grid repeats each GEMM on the same
 * buffers, which stay in cache: it measures the compute curve, not the HBM floor that
 * ts_gemm_s adds); returns their rms relative error. */
static double gemm_model(const ts_system *s, ts_dtype dt, ts_calib_gemm *rows, int n) {
    double u[TS_CALIB_MAX_GEMM], t[TS_CALIB_MAX_GEMM];
    for (int i = 0; i < n; i++) {
        rows[i].model_s = ts_gemm_compute_s(s, dt, rows[i].m, rows[i].n, rows[i].k);
        u[i] = rows[i].model_s, t[i] = rows[i].time_s;
    }
    return rms(u, t, n);
}

/* The fp8 grid, where it ran, by the fp32 grid's method: its best rate is the fp8 peak and its
 * curve efficiency.gemm_fp8; elsewhere no FP8 (peak 0) and the template's curve, kept by the copy
 * ts_calib_fit starts from (ts_calib_fp8_note says which). */
static ts_status fit_fp8(ts_calib *c) {
    ts_system *s = &c->system;
    s->peak_flops[TS_DTYPE_FP8] = 0;
    c->gemm_fp8_rms_error = 0;
    if (c->n_gemm_fp8 == 0) return TS_OK;
    TS_CHECK(gemm_peak(c->gemm_fp8, c->n_gemm_fp8, "fp8 GEMM", &s->peak_flops[TS_DTYPE_FP8]));
    fit_gemm_curve(c->gemm_fp8, c->n_gemm_fp8, s->peak_flops[TS_DTYPE_FP8], &s->gemm_eff_fp8);
    /* the grid mixes fast and split accumulation as Transformer Engine does (gpu_grid.c): the
     * curve holds the backward's slower GEMMs already, no template factor on top */
    s->gemm_fp8_bwd_eff = 0;
    c->gemm_fp8_rms_error = gemm_model(s, TS_DTYPE_FP8, c->gemm_fp8, c->n_gemm_fp8);
    return TS_OK;
}

static ts_status fit_compute(ts_calib *c) {
    ts_system *s = &c->system;
    double peak = 0, bf16 = 0, u[TS_CALIB_MAX_GEMM], t[TS_CALIB_MAX_GEMM];
    TS_CHECK(gemm_peak(c->gemm, c->n_gemm, "GEMM", &peak));
    TS_CHECK(gemm_peak(c->gemm_bf16, c->n_gemm_bf16, "bf16 GEMM", &bf16));
    s->peak_flops[TS_DTYPE_FP32] = peak;
    /* Where the bf16 grid ran (GPUs), its best rate; else no bf16 path: plans in bf16 cost as fp32. */
    s->peak_flops[TS_DTYPE_BF16] = c->n_gemm_bf16 > 0 ? bf16 : peak;
    s->peak_flops[TS_DTYPE_FP16] = 0;
    fit_gemm_curve(c->gemm, c->n_gemm, peak, &s->gemm_eff);
    c->gemm_rms_error = gemm_model(s, TS_DTYPE_FP32, c->gemm, c->n_gemm);
    TS_CHECK(fit_fp8(c));
    /* The bf16 grid's own curve: on a GPU cuBLAS's bf16 GEMMs reach their peak at other sizes than
     * its fp32 ones (an H100's 64³ bf16 GEMM ran at 5e-5 of the bf16 peak, the fp32 one at 6e-4 of
     * the fp32 peak: docs/gpu.md), so the fp32 curve at the bf16 peak misprices them. */
    s->gemm_eff_bf16 = (ts_eff_curve){0};
    if (c->n_gemm_bf16 > 0) fit_gemm_curve(c->gemm_bf16, c->n_gemm_bf16, bf16, &s->gemm_eff_bf16);
    c->gemm_bf16_rms_error = gemm_model(s, TS_DTYPE_BF16, c->gemm_bf16, c->n_gemm_bf16);

    if (c->n_mem > 0) {
        for (int i = 0; i < c->n_mem; i++) u[i] = c->mem[i].bytes, t[i] = c->mem[i].time_s;
        double lat, x; /* seconds per kernel, per byte */
        fit_line(u, t, c->n_mem, &lat, &x);
        if (x > 0) s->hbm_bytes_per_s = fmin(1.0 / x, MAX_BUSBW), s->hbm_eff = 1, s->kernel_latency_s = fmin(lat, 1);
        for (int i = 0; i < c->n_mem; i++) u[i] = c->mem[i].model_s = ts_memory_s(s, c->mem[i].bytes, 1);
        c->mem_rms_error = rms(u, t, c->n_mem);
    }
    if (c->n_attn > 0) {
        /* The efficiency of the FLOPs part: each row's time less the memory rows' kernel latency
         * (rows no longer than it say nothing of it). */
        double lat = s->kernel_latency_s;
        int n = 0;
        s->attention_eff = 1, s->kernel_latency_s = 0;
        for (int i = 0; i < c->n_attn; i++)
            if (c->attn[i].time_s > lat) {
                u[n] = ts_attention_s(s, TS_DTYPE_FP32, c->attn[i].flops, c->attn[i].flops);
                t[n++] = c->attn[i].time_s - lat;
            }
        double inv = fit_scale(u, t, n); /* 1 / efficiency */
        s->attention_eff = inv > 0 ? fmin(fmax(1.0 / inv, MIN_EFF), 1.0) : s->attention_eff;
        s->kernel_latency_s = lat;
        for (int i = 0; i < c->n_attn; i++) {
            u[i] = c->attn[i].model_s = ts_attention_s(s, TS_DTYPE_FP32, c->attn[i].flops, c->attn[i].flops);
            t[i] = c->attn[i].time_s;
        }
        c->attn_rms_error = rms(u, t, c->n_attn);
    }
    return TS_OK;
}

/* ---- communication -------------------------------------------------------------------------- */

/* The bus bandwidth of one kind's rows at the shared latency `lat`: x = 1/busbw minimising
 * sum_i ((a_i·lat + b_i·x) / t_i - 1)², x = Σ q_i (1 - p_i·lat) / Σ q_i² (p, q as in
 * ts_calib_fit_coll). */
static double kind_busbw(const ts_calib_coll *rows, int n, double lat) {
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) {
        double a, b;
        coll_terms(rows[i].coll, rows[i].ranks, rows[i].bytes, &a, &b);
        double p = a / rows[i].time_s, q = b / rows[i].time_s;
        num += q * (1.0 - p * lat), den += q * q;
    }
    double x = den > 0 ? num / den : 0;
    return x > 1.0 / MAX_BUSBW ? 1.0 / x : MAX_BUSBW;
}

/* The shared fit (latency, bus bandwidth: the spec's links), then per collective kind its own
 * fit (printed) and its bus bandwidth at the shared latency, which the spec keeps as a factor on
 * the shared one (efficiency.collective_busbw: Open MPI's reductions on CPU ranks run at a
 * fraction of its copies' bandwidth); the spec's errors are those of the factored model. */
static ts_status fit_comm(ts_calib *c) {
    ts_system *s = &c->system;
    if (c->n_coll == 0) return TS_OK;
    TS_CHECK(ts_calib_fit_coll(c->coll, c->n_coll, &c->fit_all));
    double lat = c->fit_all.latency_s, bw = c->fit_all.busbw_bytes_per_s;
    for (int k = 0; k < TS_COLL_COUNT; k++) {
        ts_calib_coll rows[TS_CALIB_MAX_COLL];
        int n = 0;
        for (int i = 0; i < c->n_coll; i++)
            if (c->coll[i].coll == (ts_coll)k) rows[n++] = c->coll[i];
        memset(&c->fit[k], 0, sizeof c->fit[k]);
        s->coll_busbw[k] = 1;
        if (n == 0) continue;
        TS_CHECK(ts_calib_fit_coll(rows, n, &c->fit[k]));
        s->coll_busbw[k] = fmin(fmax(kind_busbw(rows, n, lat) / bw, MIN_COLL_FACTOR), MAX_COLL_FACTOR);
        coll_errors(rows, n, lat, bw * s->coll_busbw[k], &c->fit[k].spec_rms_error, &c->fit[k].spec_max_error);
    }
    double sum = 0, worst = 0;
    for (int i = 0; i < c->n_coll; i++) {
        ts_calib_coll *r = &c->coll[i];
        r->model_s = coll_model_s(r, lat, bw * s->coll_busbw[r->coll]);
        double e = fabs(r->model_s / r->time_s - 1.0);
        sum += e * e, worst = fmax(worst, e);
    }
    c->fit_all.spec_rms_error = sqrt(sum / c->n_coll), c->fit_all.spec_max_error = worst;
    /* One host: the fabric is the same shared memory as the "node" link. */
    s->link_bytes_per_s = s->nic_bytes_per_s = fmin(bw, MAX_BUSBW);
    s->link_latency_s = s->nic_latency_s = lat;
    s->link_busbw_eff = s->nic_busbw_eff = 1;
    return TS_OK;
}

/* Where CPU ranks ran: one core stands in for a GPU, the ranks share the host's cores and memory,
 * and the executor runs one blocking op at a time. */
static void spec_cpu_node(ts_calib *c) {
    ts_system *s = &c->system;
    snprintf(s->name, sizeof s->name, "cpu-%.59s", c->host[0] ? c->host : "calibrated");
    snprintf(s->source, sizeof s->source,
             "tessera calibrate, %s on %.60s: %d MPI ranks on %d cores (%s), %d OpenBLAS thread(s) "
             "per rank%s",
             c->date, c->host, c->ranks, c->cores, c->oversubscribed ? "oversubscribed" : "not oversubscribed",
             c->threads, c->quick ? ", --quick" : "");
    snprintf(s->gpu_name, sizeof s->gpu_name, "CPU core%s%.50s", c->cpu[0] ? ": " : "", c->cpu);
    s->gpus_per_node = c->ranks > NODE_GPUS_MIN ? c->ranks : NODE_GPUS_MIN;
    s->cores_per_node = c->cores;
    if (c->host_memory_bytes > 0) s->hbm_bytes = c->host_memory_bytes / s->gpus_per_node;
    s->serial_ops = 1;
}

/* Where GPU ranks ran: one GPU per rank, the host's GPUs form the node, no cores shared (0), the
 * GPU's name and memory size as CUDA reports them (the template's when unknown), and ops run on
 * CUDA streams. */
static void spec_cuda_node(ts_calib *c) {
    ts_system *s = &c->system;
    snprintf(s->name, sizeof s->name, "cuda-%.58s", c->host[0] ? c->host : "calibrated");
    snprintf(s->source, sizeof s->source,
             "tessera calibrate --device cuda, %s on %.60s: %d MPI rank(s), one CUDA GPU each (cuBLAS fp32, "
             "NCCL)%s",
             c->date, c->host, c->ranks, c->quick ? ", --quick" : "");
    snprintf(s->gpu_name, sizeof s->gpu_name, "%.63s", c->gpu[0] ? c->gpu : "CUDA GPU");
    if (c->gpu_memory_bytes > 0) s->hbm_bytes = c->gpu_memory_bytes;
    s->gpus_per_node = c->ranks;
    s->cores_per_node = 0;
    s->serial_ops = 0;
}

ts_status ts_calib_fit(ts_calib *c, const ts_system *tmpl) {
    if (c->n_gemm < 1) return TS_FAIL(TS_ERR_INPUT, "calibrate: no GEMM rows to fit a spec to");
    ts_system *s = &c->system;
    *s = *tmpl;
    if (c->device == TS_DEVICE_CUDA) spec_cuda_node(c);
    else spec_cpu_node(c);
    s->overlap_slowdown = s->tp_comm_overlap = s->dp_comm_overlap = s->pp_comm_overlap = 0;
    s->rail_optimized = 0;
    TS_CHECK(fit_compute(c));
    return fit_comm(c);
}

/* ---- tables --------------------------------------------------------------------------------- */

static double err_pct(double model, double t) { return t > 0 ? 100.0 * (model / t - 1.0) : 0; }

static void print_header(FILE *f, const ts_calib *c) {
    fprintf(f, "# tessera calibrate: %s, %s (%s)\n", c->host, c->date, c->argv);
    if (c->device == TS_DEVICE_CUDA)
        fprintf(f, "# %d rank(s), one CUDA GPU each (cuBLAS fp32, NCCL); compute on every rank at once; %s, %.0f ms "
                   "per point\n", c->ranks, c->quick ? "quick" : "full", 1e3 * c->min_point_s);
    else
        fprintf(f, "# %d ranks on %d cores (%s); compute on %d rank(s) at once, one core each; %d OpenBLAS "
                   "thread(s) per rank; %s, %.0f ms per point\n",
                c->ranks, c->cores, c->oversubscribed ? "oversubscribed" : "not oversubscribed",
                c->compute_ranks, c->threads, c->quick ? "quick" : "full", 1e3 * c->min_point_s);
    fprintf(f, "# %s\n# %s\n# cpu: %s\n", c->openblas, c->mpi, c->cpu[0] ? c->cpu : "unknown");
}

/* The fp32 grid, or the bf16 or fp8 one (where measured). */
static void print_gemm(FILE *f, const ts_calib *c, ts_dtype dt) {
    const ts_calib_gemm *rows = dt == TS_DTYPE_FP8 ? c->gemm_fp8 : dt == TS_DTYPE_BF16 ? c->gemm_bf16 : c->gemm;
    int n = dt == TS_DTYPE_FP8 ? c->n_gemm_fp8 : dt == TS_DTYPE_BF16 ? c->n_gemm_bf16 : c->n_gemm;
    if (n == 0) return;
    if (dt == TS_DTYPE_FP8)
        fprintf(f, "#\n# GEMM fp8: cublasLtMatmul, E4M3 in, bf16 out, fp32 accumulation (Transformer Engine's calls);\n"
                   "# time is the mean of its forward (fast accumulation) and two backward GEMMs (split accumulation)\n");
    else
        fprintf(f, "#\n# GEMM: the backend's %s (%s, %s); a repetition runs NT, NN and TN once; time is one call\n",
                dt == TS_DTYPE_BF16 ? "gemm_bf16" : "sgemm", c->device == TS_DEVICE_CUDA ? "cuBLAS" : "OpenBLAS",
                dt == TS_DTYPE_BF16 ? "bf16, fp32 accumulation" : "fp32");
    fprintf(f, "#%6s %6s %6s %12s %7s %10s %9s %6s %10s %6s\n", "m", "n", "k", "flops", "reps", "time", "rate", "eff", "model", "err");
    fprintf(f, "#%6s %6s %6s %12s %7s %10s %9s %6s %10s %6s\n", "", "", "", "", "", "us", "GFLOP/s", "", "us", "%");
    double peak = best_gemm_rate(rows, n); /* the peak before the in-situ factor */
    for (int i = 0; i < n; i++) {
        const ts_calib_gemm *g = &rows[i];
        double rate = g->flops / g->time_s;
        fprintf(f, " %6d %6d %6d %12.4g %7d %10.2f %9.2f %6.3f %10.2f %6.1f\n", g->m, g->n, g->k, g->flops, g->reps,
                1e6 * g->time_s, 1e-9 * rate, rate / peak, 1e6 * g->model_s, err_pct(g->model_s, g->time_s));
    }
}

static void print_mem(FILE *f, const ts_calib *c) {
    if (c->n_mem == 0) return;
    fprintf(f, "#\n# memory-bound kernels (exec/kernels.h, fp32): bytes read + written by one call\n");
    fprintf(f, "#%-9s %6s %6s %12s %7s %10s %9s %10s %6s\n", "kernel", "rows", "cols", "bytes", "reps", "time", "rate", "model", "err");
    fprintf(f, "#%-9s %6s %6s %12s %7s %10s %9s %10s %6s\n", "", "", "", "", "", "us", "GB/s", "us", "%");
    for (int i = 0; i < c->n_mem; i++) {
        const ts_calib_mem *m = &c->mem[i];
        fprintf(f, " %-9s %6d %6d %12.0f %7d %10.2f %9.2f %10.2f %6.1f\n", m->kernel, m->rows, m->cols, m->bytes, m->reps,
                1e6 * m->time_s, 1e-9 * m->bytes / m->time_s, 1e6 * m->model_s, err_pct(m->model_s, m->time_s));
    }
}

static void print_attn(FILE *f, const ts_calib *c) {
    if (c->n_attn == 0) return;
    fprintf(f, "#\n# attention (exec/kernels.h, causal, grouped-query): T tokens, H query and KV kv heads of D\n");
    fprintf(f, "#%-4s %5s %3s %3s %3s %12s %7s %10s %9s %10s %6s\n", "pass", "T", "H", "KV", "D", "flops", "reps", "time", "rate", "model", "err");
    fprintf(f, "#%-4s %5s %3s %3s %3s %12s %7s %10s %9s %10s %6s\n", "", "", "", "", "", "", "", "us", "GFLOP/s", "us", "%");
    for (int i = 0; i < c->n_attn; i++) {
        const ts_calib_attn *a = &c->attn[i];
        fprintf(f, " %-4s %5d %3d %3d %3d %12.4g %7d %10.2f %9.2f %10.2f %6.1f\n", a->bwd ? "bwd" : "fwd", a->T, a->H,
                a->KV, a->D, a->flops, a->reps, 1e6 * a->time_s, 1e-9 * a->flops / a->time_s, 1e6 * a->model_s,
                err_pct(a->model_s, a->time_s));
    }
}

static void print_coll(FILE *f, const ts_calib *c) {
    for (int i = 0; i < c->n_coll; i++) {
        const ts_calib_coll *r = &c->coll[i];
        if (i == 0 || r->coll != c->coll[i - 1].coll || r->ranks != c->coll[i - 1].ranks) {
            fprintf(f, "#\n# %s: groups of %d ranks, %d group(s) at once%s\n", ts_coll_names[r->coll], r->ranks,
                    r->groups, r->coll == TS_COLL_SENDRECV ? "; ping-pong, time is half a round trip" : "");
            fprintf(f, "#%12s %11s %6s %7s %10s %10s %10s %10s %6s\n", "size", "count", "type", "reps", "time", "algbw",
                    "busbw", "model", "err");
            fprintf(f, "#%12s %11s %6s %7s %10s %10s %10s %10s %6s\n", "B", "elements", "", "", "us", "GB/s", "GB/s", "us",
                    "%");
        }
        double algbw = r->bytes / r->time_s;
        fprintf(f, " %12.0f %11.0f %6s %7d %10.2f %10.3f %10.3f %10.2f %6.1f\n", r->bytes, r->bytes / 4, "float", r->reps,
                1e6 * r->time_s, 1e-9 * algbw, 1e-9 * algbw * ts_calib_busbw_factor(r->coll, r->ranks),
                1e6 * r->model_s, err_pct(r->model_s, r->time_s));
    }
}

static void print_fit_row(FILE *f, const char *name, const ts_calib_coll_fit *x) {
    fprintf(f, " %-15s %6d %10.3f %10.3f %7.1f %7.1f %9.1f %9.1f\n", name, x->points, 1e6 * x->latency_s,
            1e-9 * x->busbw_bytes_per_s, 100 * x->rms_error, 100 * x->max_error, 100 * x->spec_rms_error,
            100 * x->spec_max_error);
}

static void print_fits(FILE *f, const ts_calib *c) {
    if (c->n_coll == 0) return;
    fprintf(f, "#\n# collective fits: time = a·latency + b·bytes / busbw, a (latency steps) and b (bus bytes) from\n"
               "# planner/cost.h ts_coll_s; least squares on relative error. \"all\" is the spec's shared fit;\n"
               "# spec_rms / spec_max: its error on each collective's points\n");
    fprintf(f, "#%-15s %6s %10s %10s %7s %7s %9s %9s\n", "collective", "points", "latency", "busbw", "rms", "max",
            "spec_rms", "spec_max");
    fprintf(f, "#%-15s %6s %10s %10s %7s %7s %9s %9s\n", "", "", "us/step", "GB/s", "%", "%", "%", "%");
    for (int k = 0; k < TS_COLL_COUNT; k++)
        if (c->fit[k].points > 0) print_fit_row(f, ts_coll_names[k], &c->fit[k]);
    print_fit_row(f, "all", &c->fit_all);
}

/* What the in-situ pass trained, for the tables and the sources: "tiny, global batch 4 of 256
 * tokens in micro-batches of 1, fp32" (GPUs: "bf16 mixed precision priced as bf16"). */
static void situ_what(const ts_calib_situ *s, char *buf, size_t cap) {
    snprintf(buf, cap, "%s, global batch %d of %d tokens in micro-batches of %d, %s", s->model, s->batch, s->seq,
             s->mbs, s->mode.bf16 ? "bf16 mixed precision priced as bf16" : "fp32");
}

static void print_situ(FILE *f, const ts_calib *c) {
    const ts_calib_situ *s = &c->situ;
    if (s->steps == 0) return;
    char mbs[48] = "";
    if (s->mbs > 1) snprintf(mbs, sizeof mbs, " in micro-batches of %d", s->mbs);
    fprintf(f, "#\n# in situ: %s on %d rank(s) at once, one each, %s, global batch %d of %d tokens%s, %d steps (median\n",
            s->model, s->ranks, s->mode.bf16 ? "bf16 mixed precision" : "fp32", s->batch, s->seq, mbs, s->steps);
    if (s->mode.gauged)
        fprintf(f, "# of the last %d), step %.4f s as timed (spread %.1f%%: node.speed_cv), %.4f s at the speed gauge's\n"
                   "# median %.2f GFLOP/s (node.gauge_flops_per_s); each op's time at that speed beside the\n",
                s->timed, s->step_raw_s, 100 * s->step_cv, s->step_s, s->gauge_flops_per_s / 1e9);
    else
        fprintf(f, "# of the last %d), step %.4f s as timed (spread %.1f%%; no speed gauge and node.speed_cv 0 on GPUs);\n"
                   "# each op's time as timed beside the\n", s->timed, s->step_raw_s, 100 * s->step_cv);
    fprintf(f, "# microbenchmark fit's; the spec is scaled by the factors (the rows above keep the\n"
               "# microbenchmark fit's model times)\n");
    if (s->n_spans > 0) {
        fprintf(f, "# the ranks' spread over spans of 1, 2, 4, ... ops (node.speed_cv_decay %.3f: the slope):", s->cv_decay);
        for (int i = 0; i < s->n_spans; i++) fprintf(f, "%s %.3g ms %.1f%%", i % 4 ? "," : "\n#  ", 1e3 * s->span_s[i], 100 * s->span_cv[i]);
        fprintf(f, "\n");
    }
    fprintf(f, "#%-12s %6s %10s %10s %8s\n", "kind", "ops", "model", "time", "factor");
    fprintf(f, "#%-12s %6s %10s %10s %8s\n", "", "", "ms", "ms", "");
    for (int k = 0; k < TS_SITU_COUNT; k++) {
        const ts_calib_situ_kind *x = &s->kind[k];
        fprintf(f, " %-12s %6d %10.3f %10.3f %8.3f\n", ts_situ_kind_names[k], x->ops, 1e3 * x->model_s, 1e3 * x->time_s,
                x->factor);
    }
}

static void print_spec(FILE *f, const ts_calib *c) {
    const ts_system *s = &c->system;
    const ts_eff_curve *g = &s->gemm_eff;
    fprintf(f, "#\n# spec %s: fp32 peak %.2f GFLOP/s per rank, GEMM efficiency %.3f..%.3f over %d points (rms err %.1f%%)\n",
            s->name, 1e-9 * s->peak_flops[TS_DTYPE_FP32], g->eff[0], g->eff[g->n - 1], g->n, 100 * c->gemm_rms_error);
    fprintf(f, "#   memory %.2f GB/s + %.2f us per kernel (rms err %.1f%%), attention efficiency %.3f (rms err %.1f%%), "
            "optimizer %.3f\n", 1e-9 * s->hbm_bytes_per_s * s->hbm_eff, 1e6 * s->kernel_latency_s, 100 * c->mem_rms_error,
            s->attention_eff, 100 * c->attn_rms_error, s->optimizer_eff);
    fprintf(f, "#   link busbw %.3f GB/s, latency %.2f us per step (rms err %.1f%%); node.gpus %d, node.cores %d%s\n",
            1e-9 * s->link_bytes_per_s * s->link_busbw_eff, 1e6 * s->link_latency_s, 100 * c->fit_all.rms_error,
            s->gpus_per_node, s->cores_per_node, s->serial_ops ? ", serial_ops" : "");
    char fp8[320];
    ts_calib_fp8_note(c, fp8, sizeof fp8);
    fprintf(f, "#   %s\n", fp8);
    if (c->n_gemm_fp8 > 0) { /* the curve as the profile holds it: FLOPs:efficiency */
        fprintf(f, "#   efficiency.gemm_fp8:");
        for (int i = 0; i < s->gemm_eff_fp8.n; i++)
            fprintf(f, "%s %.3g:%.3f", i && i % 8 == 0 ? "\n#    " : "", s->gemm_eff_fp8.flops[i], s->gemm_eff_fp8.eff[i]);
        fprintf(f, "\n");
    }
    fprintf(f, "# measured in %.1f s\n", c->elapsed_s);
}

ts_status ts_calib_print(FILE *f, const ts_calib *c) {
    print_header(f, c);
    print_gemm(f, c, TS_DTYPE_FP32);
    print_gemm(f, c, TS_DTYPE_BF16);
    print_gemm(f, c, TS_DTYPE_FP8);
    print_mem(f, c);
    print_attn(f, c);
    print_coll(f, c);
    print_fits(f, c);
    print_situ(f, c);
    print_spec(f, c);
    if (fflush(f) != 0 || ferror(f)) return TS_FAIL(TS_ERR_IO, "calibrate: cannot write the tables");
    return TS_OK;
}

/* ---- JSON ----------------------------------------------------------------------------------- */

/* Adds number members to `o` from alternating (const char *key, double value) arguments ending
 * with a NULL key. */
static ts_status add_nums(cJSON *o, ...) {
    ts_status res = TS_OK;
    va_list ap;
    va_start(ap, o);
    for (const char *k = va_arg(ap, const char *); k; k = va_arg(ap, const char *))
        TS_CJSON_GOTO(cJSON_AddNumberToObject(o, k, va_arg(ap, double)), res, exit);
exit:
    va_end(ap);
    return res;
}

static ts_status add_row(cJSON *arr, cJSON **row) {
    *row = cJSON_CreateObject();
    if (*row == NULL || !cJSON_AddItemToArray(arr, *row)) {
        cJSON_Delete(*row);
        return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing calibration rows");
    }
    return TS_OK;
}

/* `n` GEMM rows as the array `name` of `root`, eff against their own best rate. */
static ts_status json_gemm(cJSON *root, const char *name, const ts_calib_gemm *rows, int n) {
    ts_status res = TS_OK;
    cJSON *arr, *row;
    double peak = best_gemm_rate(rows, n); /* the peak before the in-situ factor */
    TS_CJSON_GOTO(arr = cJSON_AddArrayToObject(root, name), res, exit);
    for (int i = 0; i < n; i++) {
        const ts_calib_gemm *g = &rows[i];
        TS_CHECK(add_row(arr, &row));
        TS_CHECK(add_nums(row, "m", (double)g->m, "n", (double)g->n, "k", (double)g->k, "flops", g->flops, "reps",
                          (double)g->reps, "time_s", g->time_s, "flops_per_s", g->flops / g->time_s, "eff",
                          g->flops / g->time_s / peak, "model_s", g->model_s, (const char *)NULL));
    }
exit:
    return res;
}

static ts_status json_compute(const ts_calib *c, cJSON *root) {
    ts_status res = TS_OK;
    cJSON *arr, *row;
    TS_CHECK(json_gemm(root, "gemm", c->gemm, c->n_gemm));
    if (c->n_gemm_bf16 > 0) TS_CHECK(json_gemm(root, "gemm_bf16", c->gemm_bf16, c->n_gemm_bf16));
    if (c->n_gemm_fp8 > 0) TS_CHECK(json_gemm(root, "gemm_fp8", c->gemm_fp8, c->n_gemm_fp8));
    TS_CJSON_GOTO(arr = cJSON_AddArrayToObject(root, "elementwise"), res, exit);
    for (int i = 0; i < c->n_mem; i++) {
        const ts_calib_mem *m = &c->mem[i];
        TS_CHECK(add_row(arr, &row));
        TS_CJSON_GOTO(cJSON_AddStringToObject(row, "kernel", m->kernel), res, exit);
        TS_CHECK(add_nums(row, "rows", (double)m->rows, "cols", (double)m->cols, "bytes", m->bytes, "reps",
                          (double)m->reps, "time_s", m->time_s, "bytes_per_s", m->bytes / m->time_s, "model_s",
                          m->model_s, (const char *)NULL));
    }
    TS_CJSON_GOTO(arr = cJSON_AddArrayToObject(root, "attention"), res, exit);
    for (int i = 0; i < c->n_attn; i++) {
        const ts_calib_attn *a = &c->attn[i];
        TS_CHECK(add_row(arr, &row));
        TS_CJSON_GOTO(cJSON_AddStringToObject(row, "pass", a->bwd ? "bwd" : "fwd"), res, exit);
        TS_CHECK(add_nums(row, "T", (double)a->T, "H", (double)a->H, "KV", (double)a->KV, "D", (double)a->D, "flops",
                          a->flops, "reps", (double)a->reps, "time_s", a->time_s, "flops_per_s", a->flops / a->time_s,
                          "model_s", a->model_s, (const char *)NULL));
    }
exit:
    return res;
}

static ts_status json_fit(cJSON *arr, const char *name, const ts_calib_coll_fit *x) {
    ts_status res = TS_OK;
    cJSON *row;
    TS_CHECK(add_row(arr, &row));
    TS_CJSON_GOTO(cJSON_AddStringToObject(row, "collective", name), res, exit);
    TS_CHECK(add_nums(row, "points", (double)x->points, "latency_s", x->latency_s, "busbw", x->busbw_bytes_per_s,
                      "rms_error", x->rms_error, "max_error", x->max_error, "spec_rms_error", x->spec_rms_error,
                      "spec_max_error", x->spec_max_error, (const char *)NULL));
exit:
    return res;
}

static ts_status json_comm(const ts_calib *c, cJSON *root) {
    ts_status res = TS_OK;
    cJSON *arr, *row;
    TS_CJSON_GOTO(arr = cJSON_AddArrayToObject(root, "collectives"), res, exit);
    for (int i = 0; i < c->n_coll; i++) {
        const ts_calib_coll *r = &c->coll[i];
        double algbw = r->bytes / r->time_s;
        TS_CHECK(add_row(arr, &row));
        TS_CJSON_GOTO(cJSON_AddStringToObject(row, "collective", ts_coll_names[r->coll]), res, exit);
        TS_CHECK(add_nums(row, "ranks", (double)r->ranks, "groups", (double)r->groups, "bytes", r->bytes, "count",
                          r->bytes / 4, "reps", (double)r->reps, "time_s", r->time_s, "algbw", algbw, "busbw",
                          algbw * ts_calib_busbw_factor(r->coll, r->ranks), "model_s", r->model_s,
                          (const char *)NULL));
    }
    TS_CJSON_GOTO(arr = cJSON_AddArrayToObject(root, "fits"), res, exit);
    for (int k = 0; k < TS_COLL_COUNT; k++)
        if (c->fit[k].points > 0) TS_CHECK(json_fit(arr, ts_coll_names[k], &c->fit[k]));
    if (c->fit_all.points > 0) TS_CHECK(json_fit(arr, "all", &c->fit_all));
exit:
    return res;
}

static ts_status json_situ(const ts_calib *c, cJSON *root) {
    ts_status res = TS_OK;
    const ts_calib_situ *s = &c->situ;
    if (s->steps == 0) return TS_OK;
    cJSON *obj, *arr, *row;
    TS_CJSON_GOTO(obj = cJSON_AddObjectToObject(root, "in_situ"), res, exit);
    TS_CJSON_GOTO(cJSON_AddStringToObject(obj, "model", s->model), res, exit);
    /* precision: the kernel table trained with; dtype: the problem's, the ops were priced in */
    TS_CJSON_GOTO(cJSON_AddStringToObject(obj, "precision", s->mode.bf16 ? "bf16" : "fp32"), res, exit);
    TS_CJSON_GOTO(cJSON_AddStringToObject(obj, "dtype", ts_dtype_names[s->mode.dtype]), res, exit);
    TS_CJSON_GOTO(cJSON_AddBoolToObject(obj, "gauged", s->mode.gauged), res, exit);
    TS_CHECK(add_nums(obj, "ranks", (double)s->ranks, "global_batch", (double)s->batch, "seq", (double)s->seq, "mbs",
                      (double)s->mbs, "steps", (double)s->steps,
                      "timed", (double)s->timed, "step_s", s->step_s, "step_raw_s", s->step_raw_s, "step_cv",
                      s->step_cv, "gauge_flops_per_s", s->gauge_flops_per_s, (const char *)NULL));
    if (s->n_spans > 0) {
        TS_CHECK(add_nums(obj, "cv_decay", s->cv_decay, (const char *)NULL));
        TS_CJSON_GOTO(arr = cJSON_AddArrayToObject(obj, "spread"), res, exit);
        for (int i = 0; i < s->n_spans; i++) {
            TS_CHECK(add_row(arr, &row));
            TS_CHECK(add_nums(row, "span_s", s->span_s[i], "cv", s->span_cv[i], (const char *)NULL));
        }
    }
    TS_CJSON_GOTO(arr = cJSON_AddArrayToObject(obj, "kinds"), res, exit);
    for (int k = 0; k < TS_SITU_COUNT; k++) {
        const ts_calib_situ_kind *x = &s->kind[k];
        TS_CHECK(add_row(arr, &row));
        TS_CJSON_GOTO(cJSON_AddStringToObject(row, "kind", ts_situ_kind_names[k]), res, exit);
        TS_CHECK(add_nums(row, "ops", (double)x->ops, "model_s", x->model_s, "time_s", x->time_s, "factor", x->factor,
                          (const char *)NULL));
    }
exit:
    return res;
}

/* Everything measured, without the spec (the profile's "measured" object). */
static ts_status json_measured(const ts_calib *c, cJSON **out) {
    ts_status res = TS_OK;
    cJSON *root = cJSON_CreateObject();
    TS_CJSON_GOTO(root, res, fail);
    TS_CJSON_GOTO(cJSON_AddStringToObject(root, "tessera", "calibrate"), res, fail);
    TS_CHECK_GOTO(add_nums(root, "ranks", (double)c->ranks, "cores", (double)c->cores, "compute_ranks",
                           (double)c->compute_ranks, "threads", (double)c->threads, "min_point_s", c->min_point_s,
                           "elapsed_s", c->elapsed_s, "gpu_memory_bytes", c->gpu_memory_bytes,
                           "gpu_compute_capability", c->gpu_cc / 10.0, (const char *)NULL), res, fail);
    TS_CJSON_GOTO(cJSON_AddBoolToObject(root, "oversubscribed", c->oversubscribed), res, fail);
    TS_CJSON_GOTO(cJSON_AddBoolToObject(root, "quick", c->quick), res, fail);
    const char *keys[] = {"device", "host", "date", "cpu", "gpu", "openblas", "mpi", "command"};
    const char *vals[] = {c->device == TS_DEVICE_CUDA ? "cuda" : "cpu", c->host, c->date, c->cpu, c->gpu,
                          c->openblas, c->mpi, c->argv};
    for (int i = 0; i < 8; i++) TS_CJSON_GOTO(cJSON_AddStringToObject(root, keys[i], vals[i]), res, fail);
    TS_CHECK_GOTO(json_compute(c, root), res, fail);
    TS_CHECK_GOTO(json_comm(c, root), res, fail);
    TS_CHECK_GOTO(json_situ(c, root), res, fail);
    *out = root;
    return TS_OK;
fail:
    cJSON_Delete(root);
    return res;
}

/* Replaces the number `key` of `obj` by {"value": x, "source": "..."}. */
static ts_status sourced(cJSON *obj, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static ts_status sourced(cJSON *obj, const char *key, const char *fmt, ...) {
    ts_status res = TS_OK;
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    cJSON *old = cJSON_GetObjectItemCaseSensitive(obj, key), *item = cJSON_CreateObject();
    TS_CJSON_GOTO(item, res, fail);
    if (!cJSON_IsNumber(old) && !cJSON_IsBool(old)) {
        res = TS_FAIL(TS_ERR_INPUT, "calibrate: spec field %s is missing", key);
        goto fail;
    }
    TS_CJSON_GOTO(cJSON_AddItemToObject(item, "value", cJSON_Duplicate(old, 0)) ? item : NULL, res, fail);
    TS_CJSON_GOTO(cJSON_AddStringToObject(item, "source", text), res, fail);
    if (!cJSON_ReplaceItemInObjectCaseSensitive(obj, key, item)) {
        res = TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing %s", key);
        goto fail;
    }
    return TS_OK;
fail:
    cJSON_Delete(item);
    return res;
}

/* The sources of the node's figures that say where it ran rather than what was measured. */
static ts_status add_node_sources(const ts_calib *c, cJSON *spec) {
    cJSON *gpu = cJSON_GetObjectItemCaseSensitive(spec, "gpu"), *node = cJSON_GetObjectItemCaseSensitive(spec, "node");
    cJSON *eff = cJSON_GetObjectItemCaseSensitive(spec, "efficiency");
    const char *none[] = {"overlap_slowdown", "tp_comm_overlap", "dp_comm_overlap", "pp_comm_overlap"};
    if (c->device == TS_DEVICE_CUDA) {
        if (c->gpu_memory_bytes > 0)
            TS_CHECK(sourced(gpu, "hbm_bytes", "cudaGetDeviceProperties: totalGlobalMem of rank 0's GPU"));
        else
            TS_CHECK(sourced(gpu, "hbm_bytes", "the template's: the GPU did not report its memory"));
        TS_CHECK(sourced(node, "gpus", "the calibrated ranks, one CUDA GPU each, on this host"));
        TS_CHECK(sourced(node, "cores", "0: one GPU per rank, no cores shared"));
        TS_CHECK(sourced(eff, "serial_ops", "false: the CUDA executor queues ops on streams"));
        for (int i = 0; i < 4; i++) TS_CHECK(sourced(eff, none[i], "0: not measured by tessera calibrate"));
        return TS_OK;
    }
    TS_CHECK(sourced(gpu, "hbm_bytes", "host memory %.3g bytes / node.gpus", c->host_memory_bytes));
    TS_CHECK(sourced(node, "gpus", "at least 8 and the calibrated ranks: MPI ranks on this host form one node"));
    TS_CHECK(sourced(node, "cores", "online CPU cores of %s (sysconf); ranks beyond them share cores", c->host));
    if (c->situ.steps > 0 && c->system.speed_cv > 0 && c->situ.ranks > 1)
        TS_CHECK(sourced(node, "speed_cv", "tessera calibrate: standard deviation / mean of the %d ranks' simultaneous "
                         "in-situ steps, root mean square over the %d timed steps", c->situ.ranks, c->situ.timed));
    else if (c->situ.steps > 0 && c->system.speed_cv > 0)
        TS_CHECK(sourced(node, "speed_cv", "tessera calibrate: standard deviation / mean of the %d timed in-situ steps "
                         "of the one compute rank", c->situ.timed));
    if (c->system.speed_cv_window_s > 0)
        TS_CHECK(sourced(node, "speed_cv_window_s", "tessera calibrate: the median in-situ step as timed, the span "
                         "node.speed_cv was measured over"));
    if (c->system.speed_cv_decay > 0)
        TS_CHECK(sourced(node, "speed_cv_decay", "tessera calibrate: least-squares slope of -log(spread) over "
                         "log(span) across the %d ranks, spans of 1 to %d ops of the in-situ steps (measured.in_situ.spread)",
                         c->situ.ranks, 1 << (c->situ.n_spans - 1)));
    if (c->system.gauge_flops_per_s > 0)
        TS_CHECK(sourced(node, "gauge_flops_per_s", "tessera calibrate: the speed gauge (exec/speed_gauge.h: %d sgemm "
                         "%dx%dx%d and a causal attention forward and backward of %d tokens, %d/%d heads of %d, per "
                         "CPU-second) read between the in-situ steps, median over %d rank(s) × %d timed steps",
                         TS_GAUGE_CALLS, TS_GAUGE_M, TS_GAUGE_N, TS_GAUGE_K, TS_GAUGE_T, TS_GAUGE_H, TS_GAUGE_KV,
                         TS_GAUGE_D, c->situ.ranks, c->situ.timed));
    TS_CHECK(sourced(eff, "serial_ops", "CPU executor: blocking MPI, one op at a time"));
    for (int i = 0; i < 4; i++) TS_CHECK(sourced(eff, none[i], "0: serial_ops, nothing overlaps"));
    return TS_OK;
}

/* peak_flops.fp8 and efficiency.gemm_fp8: how the fp8 grid was measured and fitted, or why it was
 * not and where the curve comes from (ts_calib_fp8_note). */
static ts_status add_fp8_sources(const ts_calib *c, cJSON *peak, cJSON *eff, const char *how) {
    char note[320];
    ts_calib_fp8_note(c, note, sizeof note);
    cJSON *curve = cJSON_GetObjectItemCaseSensitive(eff, "gemm_fp8");
    int measured = c->n_gemm_fp8 > 0;
    if (measured)
        TS_CHECK(sourced(peak, "fp8", "tessera calibrate: best per-rank fp8 GEMM rate over %d (m, n, k) shapes "
                         "(cublasLtMatmul E4M3, bf16 out, as Transformer Engine: forward with fast accumulation, two "
                         "backward without); %s", c->n_gemm_fp8, how));
    else
        TS_CHECK(sourced(peak, "fp8", "%s", note));
    if (curve == NULL) return TS_OK;
    char text[768];
    if (measured)
        snprintf(text, sizeof text, "tessera calibrate: fp8 GEMM rate / peak_flops.fp8 by FLOPs (2mnk) over %d shapes, "
                 "equal FLOPs pooled, merged to at most %d points in log(flops) (the fp32 curve's fitter; rms err "
                 "%.1f%%); %s", c->n_gemm_fp8, TS_EFF_POINTS_MAX, 100 * c->gemm_fp8_rms_error, how);
    else
        snprintf(text, sizeof text, "the template's curve, not measured here: %s", note);
    if (cJSON_AddStringToObject(curve, "source", text) == NULL)
        return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing efficiency.gemm_fp8.source");
    return TS_OK;
}

/* The sources' note of the in-situ factors `factors` ("gemm 1.234"): "; then the in-situ factor(s)
 * (gemm 1.234; trained WHAT; exec/calibrate.h)" (situ_what), or "" where the pass did not run. */
static void situ_note(const ts_calib *c, const char *factors, char *buf, size_t cap) {
    char what[TS_SITU_MODEL_MAX + 128];
    buf[0] = '\0';
    if (c->situ.steps == 0) return;
    situ_what(&c->situ, what, sizeof what);
    snprintf(buf, cap, "; then the in-situ factor%s (%s; trained %s; exec/calibrate.h)", strchr(factors, ',') ? "s" : "",
             factors, what);
}

/* The "source" strings of the measured figures: how each was measured. */
static ts_status add_sources(const ts_calib *c, cJSON *spec) {
    int on_gpu = c->device == TS_DEVICE_CUDA;
    char how[512], ranks[160];
    if (on_gpu) {
        snprintf(how, sizeof how, "%d rank(s) at once, one CUDA GPU each (cuBLAS fp32, the CUDA kernel table); %s",
                 c->compute_ranks, c->date);
        snprintf(ranks, sizeof ranks, "%d rank(s), one CUDA GPU each (NCCL)", c->ranks);
    } else {
        snprintf(how, sizeof how, "%d rank(s) at once on %d cores, one core and %d OpenBLAS thread(s) each; %s; %s",
                 c->compute_ranks, c->cores, c->threads, c->openblas, c->date);
        snprintf(ranks, sizeof ranks, "%d ranks on %d cores (%s)", c->ranks, c->cores,
                 c->oversubscribed ? "oversubscribed" : "not oversubscribed");
    }
    cJSON *gpu = cJSON_GetObjectItemCaseSensitive(spec, "gpu"), *node = cJSON_GetObjectItemCaseSensitive(spec, "node");
    cJSON *fab = cJSON_GetObjectItemCaseSensitive(spec, "fabric");
    cJSON *eff = cJSON_GetObjectItemCaseSensitive(spec, "efficiency");
    cJSON *peak = cJSON_GetObjectItemCaseSensitive(gpu, "peak_flops");
    cJSON *gemm = cJSON_GetObjectItemCaseSensitive(eff, "gemm");
    char situ[TS_SITU_MODEL_MAX + 320], factors[96];
    const ts_calib_situ_kind *k = c->situ.kind;
    snprintf(factors, sizeof factors, "%s %.3f", ts_situ_kind_names[TS_SITU_GEMM], k[TS_SITU_GEMM].factor);
    situ_note(c, factors, situ, sizeof situ);
    /* On GPUs the pass trains bf16 GEMMs and leaves the fp32 peak alone (ts_calib_situ_apply). */
    TS_CHECK(sourced(peak, "fp32", "tessera calibrate: best per-rank sgemm rate over %d (m, n, k) shapes (NT, NN, TN)%s; %s",
                     c->n_gemm, on_gpu ? (c->situ.steps > 0 ? "; the in-situ pass trained bf16 and leaves it" : "") : situ,
                     how));
    if (c->n_gemm_bf16 > 0)
        TS_CHECK(sourced(peak, "bf16", "tessera calibrate: best per-rank bf16 GEMM rate (fp32 accumulation) over %d "
                                       "(m, n, k) shapes (NT, NN, TN)%s; %s", c->n_gemm_bf16, situ, how));
    else
        TS_CHECK(sourced(peak, "bf16", on_gpu ? "not measured (the backend has no bf16 GEMM): the measured fp32 figure%s"
                                              : "no bf16 path on CPU ranks: the measured fp32 figure%s", situ));
    TS_CHECK(add_fp8_sources(c, peak, eff, how));
    snprintf(factors, sizeof factors, "%s %.3f", ts_situ_kind_names[TS_SITU_ELEMENTWISE], k[TS_SITU_ELEMENTWISE].factor);
    situ_note(c, factors, situ, sizeof situ);
    TS_CHECK(sourced(gpu, "hbm_bytes_per_s", "tessera calibrate: least squares (relative error) over %d memory-bound "
                                             "kernel rows (rmsnorm, swiglu, adamw; efficiency.hbm = 1)%s; %s", c->n_mem, situ, how));
    TS_CHECK(sourced(gpu, "kernel_latency_s", "tessera calibrate: the intercept of the same fit, time = latency + bytes "
                                              "/ hbm_bytes_per_s (0 where the rows give none); %s", how));
    TS_CHECK(add_node_sources(c, spec));
    char comm[768];
    if (c->n_coll == 0)
        snprintf(comm, sizeof comm, "not measured (one rank, nothing to communicate with): the template's");
    else
        snprintf(comm, sizeof comm, "tessera calibrate: least squares (relative error) of planner/cost.h ts_coll_s over "
                 "%d rows (all-reduce, reduce-scatter, all-gather, all-to-all over every group size dividing %d, "
                 "send-recv; 1 KB .. %s), %s; %s",
                 c->fit_all.points, c->ranks, c->quick ? "16 MB" : "256 MB", ranks, c->mpi);
    TS_CHECK(sourced(node, "link_bytes_per_s", "%s (bus bandwidth)", comm));
    TS_CHECK(sourced(node, "link_latency_s", "%s (latency per ring step)", comm));
    cJSON *kinds = cJSON_GetObjectItemCaseSensitive(eff, "collective_busbw");
    if (kinds && cJSON_AddStringToObject(kinds, "source", "tessera calibrate: each collective kind's bus bandwidth at the "
                                         "shared latency (least squares on relative error over its rows) over the "
                                         "shared fit's; 1 for kinds not measured") == NULL)
        return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing efficiency.collective_busbw.source");
    TS_CHECK(sourced(fab, "nic_bytes_per_s", "one host, no fabric: the node link's figure"));
    TS_CHECK(sourced(fab, "latency_s", "one host, no fabric: the node link's figure"));
    if (cJSON_AddStringToObject(gemm, "source", how) == NULL)
        return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing efficiency.gemm.source");
    cJSON *gemm16 = cJSON_GetObjectItemCaseSensitive(eff, "gemm_bf16");
    if (gemm16 != NULL) {
        char text[640];
        snprintf(text, sizeof text, "tessera calibrate: bf16 GEMM rate / peak_flops.bf16 by FLOPs (2mnk) over %d "
                 "shapes (the fp32 curve's fitter; rms err %.1f%%); %s", c->n_gemm_bf16, 100 * c->gemm_bf16_rms_error, how);
        if (cJSON_AddStringToObject(gemm16, "source", text) == NULL)
            return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing efficiency.gemm_bf16.source");
    }
    snprintf(factors, sizeof factors, "gemm %.3f, attention %.3f", k[TS_SITU_GEMM].factor, k[TS_SITU_ATTENTION].factor);
    situ_note(c, factors, situ, sizeof situ);
    TS_CHECK(sourced(eff, "attention", "tessera calibrate: least squares (relative error) of ts_attention_s over %d rows "
                                       "(ts_attention_fwd/bwd, causal)%s; %s", c->n_attn, situ, how));
    snprintf(factors, sizeof factors, "optimizer %.3f, elementwise %.3f", k[TS_SITU_OPTIMIZER].factor,
             k[TS_SITU_ELEMENTWISE].factor);
    situ_note(c, factors, situ, sizeof situ);
    if (c->situ.steps > 0)
        TS_CHECK(sourced(eff, "optimizer", "tessera calibrate, in situ: the optimizer step's time over the other "
                                           "memory-bound kernels'%s", situ));
    TS_CHECK(sourced(eff, "hbm", "1: hbm_bytes_per_s is the achieved rate"));
    TS_CHECK(sourced(eff, "link_busbw", "1: link_bytes_per_s is the achieved bus bandwidth"));
    TS_CHECK(sourced(eff, "nic_busbw", "1: nic_bytes_per_s is the achieved bus bandwidth"));
    return TS_OK;
}

ts_status ts_calib_profile(const ts_calib *c, cJSON **out) {
    ts_status res = TS_OK;
    cJSON *spec = ts_system_to_json(&c->system), *measured = NULL;
    if (spec == NULL) return TS_FAIL(TS_ERR_NOMEM, "calibrate: out of memory writing the spec");
    TS_CHECK_GOTO(add_sources(c, spec), res, fail);
    TS_CHECK_GOTO(json_measured(c, &measured), res, fail);
    if (!cJSON_AddItemToObject(spec, "measured", measured)) {
        cJSON_Delete(measured);
        res = TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing the profile");
        goto fail;
    }
    *out = spec;
    return TS_OK;
fail:
    cJSON_Delete(spec);
    return res;
}

ts_status ts_calib_json(const ts_calib *c, cJSON **out) {
    ts_status res = TS_OK;
    cJSON *root = NULL, *spec = NULL;
    TS_CHECK(json_measured(c, &root));
    TS_CHECK_GOTO(ts_calib_profile(c, &spec), res, fail);
    cJSON_DeleteItemFromObjectCaseSensitive(spec, "measured"); /* already the document itself */
    if (!cJSON_AddItemToObject(root, "system", spec)) {
        cJSON_Delete(spec);
        res = TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing the calibration JSON");
        goto fail;
    }
    *out = root;
    return TS_OK;
fail:
    cJSON_Delete(root);
    return res;
}
