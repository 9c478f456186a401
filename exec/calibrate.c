/* `tessera calibrate`'s measurements (see calibrate.h for what and why): the compute kernels on
 * one rank per core (or per GPU), the collectives on every rank, then the fit (calibrate_fit.c).
 * Everything goes through the backend table and its kernel table on the backend's own memory, so
 * the same code measures CPU ranks and GPUs.
 *
 * Ranks that have nothing to do in a phase wait in non-blocking MPI calls polled with a short
 * sleep (quiet_wait), not in blocking ones: Open MPI's blocking calls spin, and a spinning idle
 * rank would take a core from a rank being measured when ranks outnumber cores. */
#include "exec/calibrate.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/stats.h"
#include "exec/backend.h"
#include "exec/comm_mpi.h"
#include "exec/gpu_bench.h"
#include "exec/kernel_table.h"
#include "exec/runtime.h"

#define MAX_REPS 100000
#define BATCHES 3            /* timed batches per point; the point's time is their median */
#define QUICK_POINT_S 0.002  /* at least this long per batch */
#define FULL_POINT_S 0.01
#define QUICK_MAX_BYTES (16.0 * 1048576)
#define FULL_MAX_BYTES (256.0 * 1048576)
#define MAX_GROUPS 64        /* divisors of a world of at most 1024 ranks: 32 at most */

/* The block communicators of every group size the collectives run over, made before the backend
 * so that the CUDA backend gives each its NCCL communicator (ts_backend_cuda). */
typedef struct {
    ts_comm *world;              /* all ranks: the blocks of the world's size, and the backend's world */
    ts_comm *group[MAX_GROUPS];  /* blocks of group_size[i] ranks, each divisor 2 <= n < world size */
    int group_size[MAX_GROUPS], n_groups;
} calib_comms;

typedef struct {
    const ts_backend *be;
    const ts_calib_opts *o;
    ts_calib *c;
    const calib_comms *comms;
    int rank, size;
    int computes; /* this rank runs the compute benchmarks */
} bench;

/* ---- waiting without taking a core ----------------------------------------------------------- */

static int computes_here = 1; /* this rank runs the compute benchmarks (set by ts_calibrate) */

static ts_status quiet_wait(MPI_Request *req) {
    ts_status res = TS_OK;
    /* 50 µs for ranks being measured (well under any point's min_point_s), 2 ms for idle ones,
     * whose every wake-up would take a little of a measured rank's core. */
    const struct timespec nap = {0, computes_here ? 50000 : 2000000};
    for (int done = 0;;) {
        TS_MPI_GOTO(MPI_Test(req, &done, MPI_STATUS_IGNORE), res, fail);
        if (done) break;
        nanosleep(&nap, NULL);
    }
fail:
    return res;
}

static ts_status quiet_allreduce(double *v, int n, MPI_Op op) {
    ts_status res = TS_OK;
    MPI_Request req;
    TS_MPI_GOTO(MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, op, MPI_COMM_WORLD, &req), res, fail);
    return quiet_wait(&req);
fail:
    return res;
}

static ts_status quiet_barrier(void) {
    ts_status res = TS_OK;
    MPI_Request req;
    TS_MPI_GOTO(MPI_Ibarrier(MPI_COMM_WORLD, &req), res, fail);
    return quiet_wait(&req);
fail:
    return res;
}

/* Repetitions that fill min_point_s after a probe of one call that took `probe_s`. */
static int reps_for(const bench *b, double probe_s) {
    if (!(probe_s > 0)) return MAX_REPS;
    double r = ceil(b->c->min_point_s / probe_s);
    return r < 1 ? 1 : r > MAX_REPS ? MAX_REPS : (int)r;
}

/* ---- compute points -------------------------------------------------------------------------- */

typedef ts_status (*kernel_fn)(const void *arg);

/* Two timed calls (the first also warms caches and pages); the faster is the probe. */
static ts_status probe_s(const ts_backend *be, kernel_fn fn, const void *arg, double *out) {
    double t0 = be->now_s();
    TS_CHECK(fn(arg));
    double t1 = be->now_s();
    TS_CHECK(fn(arg));
    double t2 = be->now_s();
    *out = fmin(t1 - t0, t2 - t1);
    return TS_OK;
}

/* One compute point on the computing ranks at once: a probe, an agreed repetition count, then
 * BATCHES batches of it, each started by a barrier; a batch's time per call is the mean over the
 * computing ranks, the point's the median over batches (robust to a batch that another process
 * on the machine preempted). */
static ts_status time_compute(const bench *b, kernel_fn fn, const void *arg, double *time_s,
                              int *reps) {
    double probe = 0, mine[BATCHES] = {0};
    if (b->computes) TS_CHECK(probe_s(b->be, fn, arg, &probe));
    TS_CHECK(quiet_allreduce(&probe, 1, MPI_MAX));
    *reps = reps_for(b, probe);
    for (int k = 0; k < BATCHES; k++) {
        TS_CHECK(quiet_barrier());
        if (!b->computes) continue;
        double t0 = b->be->now_s();
        for (int r = 0; r < *reps; r++) TS_CHECK(fn(arg));
        mine[k] = (b->be->now_s() - t0) / *reps / b->c->compute_ranks;
    }
    TS_CHECK(quiet_allreduce(mine, BATCHES, MPI_SUM));
    *time_s = ts_median(mine, BATCHES);
    return TS_OK;
}

/* Frees backend memory; NULL is ignored (error paths free what was not allocated yet). */
static void release(const ts_backend *be, void *p) {
    if (p) be->free(p);
}

/* A copy of `bytes` (> 0) host bytes in new backend memory (device memory on GPUs). */
static ts_status backend_copy(const ts_backend *be, const void *host, size_t bytes, void **out) {
    *out = NULL;
    ts_status res = be->alloc(bytes, out);
    if (res == TS_OK) res = be->kernels->to_device(*out, host, bytes);
    if (res != TS_OK) release(be, *out), *out = NULL;
    return res;
}

/* The i-th of filled()'s values: small, deterministic, of both signs. */
static float fill_value(size_t i) { return 0.01f * (float)((int)((i * 7919u) % 97u) - 48) / 48.0f; }

/* `n` floats of backend memory holding deterministic small values, so no kernel meets a NaN or an
 * overflow over many repetitions. */
static ts_status filled(const ts_backend *be, size_t n, float **out) {
    size_t bytes = (n ? n : 1) * sizeof **out;
    float *host = malloc(bytes);
    *out = NULL;
    if (host == NULL) return TS_FAIL(TS_ERR_NOMEM, "calibrate: out of memory for %zu floats", n);
    for (size_t i = 0; i < n; i++) host[i] = fill_value(i);
    ts_status res = backend_copy(be, host, bytes, (void **)out);
    free(host);
    return res;
}

/* `n` bf16 words of backend memory: filled()'s values rounded to bf16 (round to nearest even) on
 * the host, so the tensor cores see ordinary numbers, not float halves (some would be NaNs). */
static ts_status filled_bf16(const ts_backend *be, size_t n, void **out) {
    size_t bytes = (n ? n : 1) * sizeof(uint16_t);
    uint16_t *host = malloc(bytes);
    *out = NULL;
    if (host == NULL) return TS_FAIL(TS_ERR_NOMEM, "calibrate: out of memory for %zu bf16 words", n);
    for (size_t i = 0; i < n; i++) host[i] = ts_bf16_bits(fill_value(i));
    ts_status res = backend_copy(be, host, bytes, out);
    free(host);
    return res;
}

typedef struct {
    const ts_backend *be;
    int bf16; /* gemm_bf16 instead of sgemm */
    int m, n, k;
    void *A, *B, *C; /* each holds max(m,k)·max(k,n) elements and more */
} gemm_arg;

static ts_status gemm_one(const gemm_arg *g, int ta, int tb, int lda, int ldb) {
    if (g->bf16) return g->be->gemm_bf16(ta, tb, g->m, g->n, g->k, 1.0f, g->A, lda, g->B, ldb, 0.0f, g->C, g->n);
    return g->be->sgemm(ta, tb, g->m, g->n, g->k, 1.0f, g->A, lda, g->B, ldb, 0.0f, g->C, g->n);
}

/* The executor's three uses of one weight (exec/kernels.h): out = in·wᵀ (NT), din = dout·w (NN),
 * dw = doutᵀ·in (TN), here all with the shape (m, n, k). */
static ts_status gemm_call(const void *p) {
    const gemm_arg *g = p;
    TS_CHECK(gemm_one(g, 0, 1, g->k, g->k));
    TS_CHECK(gemm_one(g, 0, 0, g->k, g->n));
    return gemm_one(g, 1, 0, g->m, g->n);
}

/* The (m, n, k) grid in fp32, or in bf16 (rows into gemm_bf16). */
static ts_status bench_gemm_grid(bench *b, int bf16) {
    static const int full[] = {64, 128, 256, 512, 1024}, quick[] = {64, 256, 1024};
    const int *dims = b->c->quick ? quick : full;
    int nd = b->c->quick ? 3 : 5;
    if (b->c->device == TS_DEVICE_CUDA) nd = ts_gpu_calib_dims(b->c->quick, &dims);
    int top = dims[nd - 1];
    ts_status res = TS_OK;
    gemm_arg g = {.be = b->be, .bf16 = bf16};
    ts_calib_gemm *rows = bf16 ? b->c->gemm_bf16 : b->c->gemm;
    int *n_rows = bf16 ? &b->c->n_gemm_bf16 : &b->c->n_gemm;
    size_t n = (size_t)top * top;
    void **bufs[] = {&g.A, &g.B, &g.C};
    for (int i = 0; i < 3; i++) {
        float *f = NULL;
        TS_CHECK_GOTO(bf16 ? filled_bf16(b->be, n, bufs[i]) : filled(b->be, n, &f), res, exit);
        if (!bf16) *bufs[i] = f;
    }
    for (int i = 0; i < nd; i++)
        for (int j = 0; j < nd; j++)
            for (int l = 0; l < nd && *n_rows < TS_CALIB_MAX_GEMM; l++) {
                ts_calib_gemm *row = &rows[(*n_rows)++];
                g.m = row->m = dims[i], g.n = row->n = dims[j], g.k = row->k = dims[l];
                row->flops = 2.0 * g.m * g.n * g.k;
                double rep_s;
                TS_CHECK_GOTO(time_compute(b, gemm_call, &g, &rep_s, &row->reps), res, exit);
                row->time_s = rep_s / 3.0;
            }
exit:
    release(b->be, g.A), release(b->be, g.B), release(b->be, g.C);
    return res;
}

/* One fp8 row on every computing rank at once (a barrier first, as time_compute): Transformer
 * Engine's forward GEMM (fast accumulation) and its two backward ones (split), calibrate.h. */
static ts_status fp8_point(bench *b, const ts_gpu_gemm_shape *g, ts_calib_gemm *row) {
    double t[2] = {0, 0};
    *row = (ts_calib_gemm){.m = g->m, .n = g->n, .k = g->k, .flops = ts_gpu_gemm_flops(g)};
    TS_CHECK(quiet_barrier());
    if (b->computes) {
        double min_s = BATCHES * b->c->min_point_s;
        TS_CHECK(ts_gpu_time_gemm_fp8(g, 1, min_s, &t[0], NULL));
        TS_CHECK(ts_gpu_time_gemm_fp8(g, 0, min_s, &t[1], &row->reps));
        t[0] /= b->c->compute_ranks, t[1] /= b->c->compute_ranks;
    }
    TS_CHECK(quiet_allreduce(t, 2, MPI_SUM));
    row->time_s = (t[0] + 2 * t[1]) / 3;
    return TS_OK;
}

/* The fp8 grid (gpu_bench.h) where every rank's GPU has FP8 (the lowest compute capability
 * decides); else nothing. */
static ts_status bench_gemm_fp8(bench *b) {
    char name[128];
    int major = 0, minor = 0;
    TS_CHECK(ts_gpu_describe(name, sizeof name, &major, &minor));
    double cc = major * 10 + minor;
    TS_CHECK(quiet_allreduce(&cc, 1, MPI_MIN));
    b->c->gpu_cc = (int)cc;
    if (!ts_calib_fp8_capable(b->c->gpu_cc)) return TS_OK; /* said after the fit (run_benchmarks) */
    static ts_gpu_gemm_shape grid[TS_GPU_FP8_GRID_MAX];
    int n = ts_gpu_fp8_grid(b->c->quick, grid);
    for (int i = 0; i < n && b->c->n_gemm_fp8 < TS_CALIB_MAX_GEMM; i++)
        TS_CHECK(fp8_point(b, &grid[i], &b->c->gemm_fp8[b->c->n_gemm_fp8++]));
    return TS_OK;
}

static ts_status bench_gemm(bench *b) {
    TS_CHECK(bench_gemm_grid(b, 0));
    if (b->be->gemm_bf16) TS_CHECK(bench_gemm_grid(b, 1));
    return b->c->device == TS_DEVICE_CUDA ? bench_gemm_fp8(b) : TS_OK;
}

typedef struct {
    const ts_kernels *k;
    int kind; /* 0 rmsnorm, 1 swiglu, 2 adamw */
    int rows, cols;
    float *a, *b, *c, *d, *e;
} mem_arg;

static ts_status mem_call(const void *p) {
    const mem_arg *m = p;
    size_t n = (size_t)m->rows * m->cols;
    if (m->kind == 0) return m->k->rmsnorm_fwd(m->a, m->e, m->b, m->c, m->rows, m->cols, 1e-5f);
    if (m->kind == 1) return m->k->swiglu_fwd(m->a, m->b, m->c, n);
    return m->k->adamw(m->a, m->b, m->c, m->d, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1);
}

/* Bytes one call reads and writes (fp32): rmsnorm x, w in, out, rstd out; swiglu gate, up in,
 * act out; AdamW param, m, v, grad in, param, m, v out. */
static double mem_bytes(int kind, int rows, int cols) {
    double n = (double)rows * cols;
    if (kind == 0) return 4.0 * (2.0 * n + cols + rows);
    return kind == 1 ? 12.0 * n : 28.0 * n;
}

static ts_status mem_point(bench *b, int kind, int rows, int cols) {
    static const char *const names[] = {"rmsnorm", "swiglu", "adamw"};
    if (b->c->n_mem >= TS_CALIB_MAX_MEM) return TS_OK;
    size_t n = (size_t)rows * cols;
    ts_status res = TS_OK;
    mem_arg m = {.k = b->be->kernels, .kind = kind, .rows = rows, .cols = cols};
    float **bufs[] = {&m.a, &m.b, &m.c, &m.d};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) TS_CHECK_GOTO(filled(b->be, n, bufs[i]), res, exit);
    TS_CHECK_GOTO(filled(b->be, (size_t)rows, &m.e), res, exit);
    ts_calib_mem *row = &b->c->mem[b->c->n_mem++];
    *row = (ts_calib_mem){.kernel = names[kind], .rows = rows, .cols = cols,
                          .bytes = mem_bytes(kind, rows, cols)};
    TS_CHECK_GOTO(time_compute(b, mem_call, &m, &row->time_s, &row->reps), res, exit);
exit:
    release(b->be, m.a), release(b->be, m.b), release(b->be, m.c), release(b->be, m.d), release(b->be, m.e);
    return res;
}

/* tiny's sizes: T tokens of width 256 (norms), T × 688 (SwiGLU), a few million parameters. A GPU
 * moves these in microseconds, mostly launch time, so there the rows go up to 64 times further
 * (tens to hundreds of MB), where the bandwidth shows. */
static ts_status bench_mem(bench *b) {
    static const int full_t[] = {64, 256, 1024, 4096}, quick_t[] = {256, 1024};
    static const int full_p[] = {256, 1024, 4096}, quick_p[] = {1024};
    int q = b->c->quick, nt = q ? 2 : 4, np = q ? 1 : 3;
    int grow = b->c->device == TS_DEVICE_CUDA ? 64 : 1, swiglu_top = 1024 * grow;
    const int *ts = q ? quick_t : full_t, *ps = q ? quick_p : full_p;
    for (int i = 0; i < nt; i++) TS_CHECK(mem_point(b, 0, ts[i] * (i ? grow : 1), 256));
    for (int i = 0; i < nt && ts[i] * (i ? grow : 1) <= swiglu_top; i++)
        TS_CHECK(mem_point(b, 1, ts[i] * (i ? grow : 1), 688));
    for (int i = 0; i < np; i++) TS_CHECK(mem_point(b, 2, ps[i] * (i ? grow : 1), 1024));
    return TS_OK;
}

typedef struct {
    const ts_backend *be;
    ts_attn_shape s;
    int bwd;
    float *q, *k, *v, *out, *lse, *scratch, *dq, *dk, *dv, *dout;
    int *pos; /* backend memory, as the kernel table's q_pos and k_pos are */
} attn_arg;

static ts_status attn_call(const void *p) {
    const attn_arg *a = p;
    const ts_kernels *k = a->be->kernels;
    if (a->bwd) return k->attention_bwd(a->dq, a->dk, a->dv, a->dout, a->q, a->k, a->v, a->out, a->lse, &a->s);
    return k->attention_fwd(a->out, a->lse, a->q, a->k, a->v, &a->s, a->scratch);
}

static void attn_arg_free(attn_arg *a) {
    float *bufs[] = {a->q, a->k, a->v, a->out, a->lse, a->scratch, a->dq, a->dk, a->dv, a->dout};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) release(a->be, bufs[i]);
    release(a->be, a->pos);
}

/* Positions 0..T-1 in backend memory. */
static ts_status attn_positions(const ts_backend *be, int T, int **out) {
    int *host = malloc((size_t)T * sizeof *host);
    *out = NULL;
    if (host == NULL) return TS_FAIL(TS_ERR_NOMEM, "calibrate: out of memory for %d positions", T);
    for (int t = 0; t < T; t++) host[t] = t;
    ts_status res = backend_copy(be, host, (size_t)T * sizeof *host, (void **)out);
    free(host);
    return res;
}

/* Forward and backward of one causal attention of T tokens (planner/layer.c's FLOP convention:
 * the forward executes half of 4·T²·H·D under the causal mask, the backward 2.5 times that). */
static ts_status attn_point(bench *b, int T, int H, int KV, int D) {
    ts_status res = TS_OK;
    size_t nq = (size_t)T * H * D, nk = (size_t)T * KV * D;
    attn_arg a = {.be = b->be, .s = {.Tq = T, .Tk = T, .H = H, .KV = KV, .D = D, .ldq = H * D,
                                     .ldk = KV * D, .ldv = KV * D, .ldo = H * D}};
    struct { float **buf; size_t n; } bufs[] = {
        {&a.q, nq}, {&a.k, nk}, {&a.v, nk}, {&a.out, nq}, {&a.dout, nq}, {&a.lse, (size_t)T * H},
        {&a.scratch, (size_t)T}, {&a.dq, nq}, {&a.dk, nk}, {&a.dv, nk}};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        TS_CHECK_GOTO(filled(b->be, bufs[i].n, bufs[i].buf), res, exit);
    TS_CHECK_GOTO(attn_positions(b->be, T, &a.pos), res, exit);
    a.s.q_pos = a.s.k_pos = a.pos;
    TS_CHECK_GOTO(attn_call(&a), res, exit); /* the forward: the backward reads out and lse */
    for (a.bwd = 0; a.bwd <= 1 && b->c->n_attn < TS_CALIB_MAX_ATTN; a.bwd++) {
        ts_calib_attn *row = &b->c->attn[b->c->n_attn++];
        double fwd = 0.5 * 4.0 * (double)T * T * H * D;
        *row = (ts_calib_attn){.T = T, .H = H, .KV = KV, .D = D, .bwd = a.bwd,
                               .flops = a.bwd ? 2.5 * fwd : fwd};
        TS_CHECK_GOTO(time_compute(b, attn_call, &a, &row->time_s, &row->reps), res, exit);
    }
exit:
    attn_arg_free(&a);
    return res;
}

/* tiny's heads: 8 query and 4 kv heads of 32 (tp=1), 4 and 2 (tp=2); its sequences, up to 256. */
static ts_status bench_attn(bench *b) {
    static const int full_t[] = {64, 128, 256}, quick_t[] = {128, 256};
    int q = b->c->quick, nt = q ? 2 : 3;
    const int *ts = q ? quick_t : full_t;
    for (int h = 8; h >= (q ? 8 : 4); h /= 2)
        for (int i = 0; i < nt; i++) TS_CHECK(attn_point(b, ts[i], h, h / 2, 32));
    return TS_OK;
}

/* ---- communication points -------------------------------------------------------------------- */

typedef struct {
    const ts_backend *be;
    ts_comm *comm; /* the rank's block; NULL for send-recv */
    ts_coll coll;
    int peer;      /* send-recv: the other rank of the pair, -1 when idle */
    int even;      /* send-recv: this rank sends first */
    size_t count;  /* floats in the full buffer (send-recv: one message) */
    float *in, *out;
    int *counts, *displs; /* all-to-all: count / n per member */
} coll_arg;

static ts_status sendrecv_call(const coll_arg *a) {
    ts_request *req = NULL;
    if (a->even) {
        TS_CHECK(a->be->send(a->in, a->count, a->peer, 7, &req));
        TS_CHECK(a->be->wait(req));
        return a->be->recv(a->out, a->count, a->peer, 7);
    }
    TS_CHECK(a->be->recv(a->out, a->count, a->peer, 7));
    TS_CHECK(a->be->send(a->in, a->count, a->peer, 7, &req));
    return a->be->wait(req);
}

static ts_status coll_call(const coll_arg *a) {
    size_t part = a->comm ? a->count / (size_t)a->comm->size : 0;
    switch (a->coll) {
    case TS_COLL_ALLREDUCE: return a->be->all_reduce(a->comm, a->in, a->out, a->count);
    case TS_COLL_REDUCE_SCATTER: return a->be->reduce_scatter(a->comm, a->in, a->out, part);
    case TS_COLL_ALLGATHER: return a->be->all_gather(a->comm, a->in, a->out, part);
    case TS_COLL_ALLTOALL:
        return a->be->all_to_all_v(a->comm, a->in, a->counts, a->displs, a->out, a->counts, a->displs);
    case TS_COLL_SENDRECV: return a->peer >= 0 ? sendrecv_call(a) : TS_OK;
    case TS_COLL_COUNT: break;
    }
    return TS_FAIL(TS_ERR_INPUT, "calibrate: unknown collective %d", (int)a->coll);
}

static ts_status coll_fn(const void *arg) { return coll_call(arg); }

/* One communication point on every rank at once, timed as a compute point is (time_compute) but
 * with blocking barriers (every rank takes part); the mean is over the ranks taking part. */
static ts_status time_coll(const bench *b, const coll_arg *a, double *time_s, int *reps) {
    ts_status res = TS_OK;
    int active = a->coll != TS_COLL_SENDRECV || a->peer >= 0;
    double probe = 0, sums[BATCHES + 1] = {0};
    TS_CHECK(probe_s(b->be, coll_fn, a, &probe));
    TS_MPI_GOTO(MPI_Allreduce(MPI_IN_PLACE, &probe, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), res, fail);
    *reps = reps_for(b, probe);
    for (int k = 0; k < BATCHES; k++) {
        TS_MPI_GOTO(MPI_Barrier(MPI_COMM_WORLD), res, fail);
        double t0 = b->be->now_s();
        for (int r = 0; r < *reps; r++) TS_CHECK(coll_call(a));
        sums[k] = active ? (b->be->now_s() - t0) / *reps : 0;
    }
    sums[BATCHES] = active;
    TS_MPI_GOTO(MPI_Allreduce(MPI_IN_PLACE, sums, BATCHES + 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), res, fail);
    *time_s = ts_median(sums, BATCHES) / sums[BATCHES]; /* sorts the batches, not the count */
    if (a->coll == TS_COLL_SENDRECV) *time_s *= 0.5; /* a round trip is two transfers */
fail:
    return res;
}

/* Every size of one collective over groups of `n` ranks (comm: this rank's group). */
static ts_status coll_sizes(bench *b, coll_arg *a, int n) {
    double top = b->c->quick ? QUICK_MAX_BYTES : FULL_MAX_BYTES, factor = b->c->quick ? 4 : 2;
    for (double bytes = 1024; bytes <= top; bytes *= factor) {
        size_t count = (size_t)(bytes / 4);
        if (a->coll != TS_COLL_SENDRECV) count = count / (size_t)n * (size_t)n;
        if (count == 0) continue;
        if (b->c->n_coll >= TS_CALIB_MAX_COLL)
            return TS_FAIL(TS_ERR_INPUT, "calibrate: more than %d collective points (too many ranks)",
                           TS_CALIB_MAX_COLL);
        a->count = count;
        for (int i = 0; a->counts && i < n; i++)
            a->counts[i] = (int)(count / (size_t)n), a->displs[i] = i * (int)(count / (size_t)n);
        ts_calib_coll *row = &b->c->coll[b->c->n_coll++];
        *row = (ts_calib_coll){.coll = a->coll, .ranks = n, .bytes = 4.0 * (double)count,
                               .groups = a->coll == TS_COLL_SENDRECV ? b->size / 2 : b->size / n};
        TS_CHECK(time_coll(b, a, &row->time_s, &row->reps));
    }
    return TS_OK;
}

/* The four collectives over blocks of n consecutive ranks (every block at once), on `comm`. */
static ts_status coll_group(bench *b, coll_arg *a, ts_comm *comm, int n) {
    ts_status res = TS_OK;
    a->comm = comm;
    a->counts = calloc((size_t)n, sizeof *a->counts);
    a->displs = calloc((size_t)n, sizeof *a->displs);
    TS_ALLOC_GOTO(a->counts, res, exit);
    TS_ALLOC_GOTO(a->displs, res, exit);
    for (int c = TS_COLL_ALLREDUCE; c <= TS_COLL_ALLTOALL; c++) {
        a->coll = (ts_coll)c;
        TS_CHECK_GOTO(coll_sizes(b, a, n), res, exit);
    }
exit:
    a->comm = NULL;
    free(a->counts), free(a->displs);
    a->counts = a->displs = NULL;
    return res;
}

static ts_status bench_coll(bench *b) {
    ts_status res = TS_OK;
    size_t top = (size_t)(b->c->quick ? QUICK_MAX_BYTES : FULL_MAX_BYTES);
    coll_arg a = {.be = b->be, .peer = -1};
    TS_CHECK_GOTO(b->be->alloc(top, (void **)&a.in), res, exit);
    TS_CHECK_GOTO(b->be->alloc(top, (void **)&a.out), res, exit);
    /* Touch every page before any timing (host memory is faulted in on first write). */
    TS_CHECK_GOTO(b->be->kernels->zero(a.in, top), res, exit);
    TS_CHECK_GOTO(b->be->kernels->zero(a.out, top), res, exit);
    const calib_comms *cc = b->comms;
    for (int i = 0; i < cc->n_groups; i++) TS_CHECK_GOTO(coll_group(b, &a, cc->group[i], cc->group_size[i]), res, exit);
    TS_CHECK_GOTO(coll_group(b, &a, cc->world, b->size), res, exit);
    a.coll = TS_COLL_SENDRECV;
    a.peer = (b->rank ^ 1) < b->size ? b->rank ^ 1 : -1;
    a.even = b->rank % 2 == 0;
    TS_CHECK_GOTO(coll_sizes(b, &a, 2), res, exit);
exit:
    release(b->be, a.in), release(b->be, a.out);
    return res;
}

/* ---- where it runs --------------------------------------------------------------------------- */

static void cpu_model(char *out, size_t cap) {
    out[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || colon == NULL) continue;
        colon += 1 + (colon[1] == ' ');
        colon[strcspn(colon, "\n")] = '\0';
        snprintf(out, cap, "%s", colon);
        break;
    }
    fclose(f);
}

static ts_status describe_machine(bench *b) {
    ts_status res = TS_OK;
    ts_calib *c = b->c;
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    TS_MPI_GOTO(MPI_Get_library_version(mpi, &len), res, fail);
    mpi[strcspn(mpi, "\n")] = '\0';
    snprintf(c->mpi, sizeof c->mpi, "%s", mpi);
    snprintf(c->openblas, sizeof c->openblas, "%s", openblas_get_config()); /* "OpenBLAS 0.3.21 ..." */
    if (gethostname(c->host, sizeof c->host) != 0) snprintf(c->host, sizeof c->host, "unknown");
    c->host[sizeof c->host - 1] = '\0';
    cpu_model(c->cpu, sizeof c->cpu);
    time_t now = time(NULL);
    struct tm utc;
    gmtime_r(&now, &utc);
    strftime(c->date, sizeof c->date, "%Y-%m-%dT%H:%M:%SZ", &utc);
    long cores = sysconf(_SC_NPROCESSORS_ONLN), pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    c->cores = cores > 0 ? (int)cores : 1;
    c->host_memory_bytes = pages > 0 && page > 0 ? (double)pages * (double)page : 0;
    c->ranks = b->size;
    c->device = b->o->device;
    snprintf(c->gpu, sizeof c->gpu, "%s", b->be->device_name ? b->be->device_name : "");
    c->gpu_memory_bytes = b->be->device_memory_bytes;
    c->threads = b->o->threads > 0 ? b->o->threads : 1;
    if (c->device == TS_DEVICE_CUDA) {
        c->compute_ranks = b->size; /* a GPU each: nothing shares a core's worth of compute */
    } else {
        c->oversubscribed = b->size > c->cores;
        int per_core = c->cores / c->threads > 0 ? c->cores / c->threads : 1;
        c->compute_ranks = b->size < per_core ? b->size : per_core;
    }
    c->quick = b->o->quick != 0;
    c->min_point_s = c->quick ? QUICK_POINT_S : FULL_POINT_S;
    snprintf(c->argv, sizeof c->argv, "%s", b->o->argv ? b->o->argv : "tessera calibrate");
fail:
    return res;
}

static ts_status situ_barrier(void *ctx) {
    (void)ctx;
    return quiet_barrier();
}

/* The in-situ pass (calibrate.h) on the compute ranks at once, the others waiting off the cores
 * at the same barriers; rank 0 gathers the samples, sums them and broadcasts the sums, so every
 * rank applies the same factors. A failure on any rank fails every rank. On GPUs the calibration's
 * backend is closed first: the pass opens its own on its one-rank runtime (ts_calib_situ_run),
 * and ts_backend_cuda is once per process. */
static ts_status bench_situ(bench *b) {
    ts_status res = TS_OK, mine = TS_OK;
    int ranks = b->c->compute_ranks;
    computes_here = b->rank < ranks;
    int steps = b->o->situ_steps > 0 ? b->o->situ_steps : b->c->quick ? 3 : 5;
    ts_situ_shape sh = ts_calib_situ_shape(b->o);
    double *samples = NULL, *all = NULL;
    size_t count = 0;
    int *counts = NULL, *offs = NULL;
    const calib_comms *cc = b->comms;
    if (b->c->device == TS_DEVICE_CUDA) ts_backend_cuda_free(cc->world, cc->group, cc->n_groups);
    if (computes_here) mine = ts_calib_situ_run(b->c, &sh, steps, situ_barrier, NULL, &samples, &count);
    else
        for (int s = 0; s < steps && mine == TS_OK; s++) mine = quiet_barrier();
    double failed = mine != TS_OK;
    TS_CHECK_GOTO(quiet_allreduce(&failed, 1, MPI_MAX), res, exit);
    if (failed) {
        res = mine != TS_OK ? mine : TS_FAIL(TS_ERR_EXTERNAL, "calibrate: the in-situ pass failed on another rank");
        goto exit;
    }
    if (count > INT_MAX / (size_t)ranks) {
        res = TS_FAIL(TS_ERR_INPUT, "calibrate: %zu in-situ samples per rank are too many to gather", count);
        goto exit;
    }
    if (b->rank == 0) {
        all = malloc(count * ranks * sizeof *all);
        counts = calloc((size_t)b->size, sizeof *counts);
        offs = calloc((size_t)b->size, sizeof *offs);
        TS_ALLOC_GOTO(all, res, exit);
        TS_ALLOC_GOTO(counts, res, exit);
        TS_ALLOC_GOTO(offs, res, exit);
        for (int r = 0; r < ranks; r++) counts[r] = (int)count, offs[r] = r * (int)count;
    }
    MPI_Request req;
    TS_MPI_GOTO(MPI_Igatherv(samples, (int)count, MPI_DOUBLE, all, counts, offs, MPI_DOUBLE, 0, MPI_COMM_WORLD, &req),
                res, exit);
    TS_CHECK_GOTO(quiet_wait(&req), res, exit);
    if (b->rank == 0) mine = ts_calib_situ_sums(b->c, &sh, all, ranks, steps);
    failed = mine != TS_OK;
    TS_MPI_GOTO(MPI_Ibcast(&failed, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD, &req), res, exit);
    TS_CHECK_GOTO(quiet_wait(&req), res, exit);
    if (failed) {
        res = b->rank == 0 ? mine : TS_FAIL(TS_ERR_EXTERNAL, "calibrate: the in-situ sums failed on rank 0");
        goto exit;
    }
    TS_MPI_GOTO(MPI_Ibcast(&b->c->situ, (int)sizeof b->c->situ, MPI_BYTE, 0, MPI_COMM_WORLD, &req), res, exit);
    TS_CHECK_GOTO(quiet_wait(&req), res, exit);
    ts_calib_situ_apply(b->c);
exit:
    free(samples);
    free(all);
    free(counts);
    free(offs);
    return res;
}

static void progress(const bench *b, const char *what, int points, double t0) {
    if (b->rank != 0 || b->o->log == NULL) return;
    fprintf(b->o->log, "tessera calibrate: %-12s %4d points, %6.2f s\n", what, points, b->be->now_s() - t0);
    fflush(b->o->log);
}

/* Every block communicator the collectives need, and the world's (see calib_comms). Collective. */
static ts_status calib_comms_init(calib_comms *cc, int size) {
    memset(cc, 0, sizeof *cc);
    TS_CHECK(ts_comm_blocks(size, &cc->world));
    for (int n = 2; n < size; n++) {
        if (size % n != 0) continue;
        if (cc->n_groups == MAX_GROUPS)
            return TS_FAIL(TS_ERR_INPUT, "calibrate: more than %d group sizes divide %d ranks", MAX_GROUPS, size);
        TS_CHECK(ts_comm_blocks(n, &cc->group[cc->n_groups]));
        cc->group_size[cc->n_groups++] = n;
    }
    return TS_OK;
}

static void calib_comms_free(calib_comms *cc) {
    for (int i = 0; i < cc->n_groups; i++) ts_comm_free(&cc->group[i]);
    ts_comm_free(&cc->world);
    cc->n_groups = 0;
}

/* The device's backend; on CUDA each of cc's communicators gets its NCCL communicator. */
static ts_status open_backend(const ts_calib_opts *o, calib_comms *cc, const ts_backend **out) {
    if (o->device != TS_DEVICE_CUDA) {
        *out = ts_backend_cpu(o->threads);
        return TS_OK;
    }
    *out = ts_backend_cuda(cc->world, cc->group, cc->n_groups);
    return *out ? TS_OK : ts_error_status();
}

/* The benchmarks, the fit and the in-situ pass (calibrate.h). */
static ts_status run_benchmarks(bench *b, const ts_system *tmpl) {
    ts_calib *out = b->c;
    TS_CHECK(describe_machine(b));
    b->computes = computes_here = b->rank < out->compute_ranks;
    double t0 = b->be->now_s(), t = t0;
    TS_CHECK(bench_gemm(b));
    progress(b, "gemm", out->n_gemm + out->n_gemm_bf16 + out->n_gemm_fp8, t), t = b->be->now_s();
    TS_CHECK(bench_mem(b));
    progress(b, "elementwise", out->n_mem, t), t = b->be->now_s();
    TS_CHECK(bench_attn(b));
    progress(b, "attention", out->n_attn, t), t = b->be->now_s();
    if (b->size >= 2) { /* one GPU: nothing to communicate with */
        TS_CHECK(bench_coll(b));
        progress(b, "collectives", out->n_coll, t), t = b->be->now_s();
    }
    TS_CHECK(ts_calib_fit(out, tmpl));
    if (out->device == TS_DEVICE_CUDA && b->rank == 0 && b->o->log) { /* what the profile's FP8 figures are */
        char fp8[320];
        ts_calib_fp8_note(out, fp8, sizeof fp8);
        fprintf(b->o->log, "tessera calibrate: %s\n", fp8);
    }
    if (b->o->in_situ) {
        TS_CHECK(bench_situ(b));
        progress(b, "in situ", out->situ.steps, t);
    }
    out->elapsed_s = b->be->now_s() - t0;
    return TS_OK;
}

ts_status ts_calibrate(const ts_calib_opts *o, const ts_system *tmpl, ts_calib *out) {
    memset(out, 0, sizeof *out);
    ts_status res = TS_OK;
    calib_comms cc = {0};
    bench b = {.o = o, .c = out, .comms = &cc};
    TS_CHECK(ts_mpi_init(&b.rank, &b.size));
    if (b.size < 2 && o->device != TS_DEVICE_CUDA)
        return TS_FAIL(TS_ERR_INPUT, "calibrate: needs at least 2 MPI ranks to measure communication, got %d", b.size);
    TS_CHECK_GOTO(calib_comms_init(&cc, b.size), res, exit);
    TS_CHECK_GOTO(open_backend(o, &cc, &b.be), res, exit);
    res = run_benchmarks(&b, tmpl);
exit:
    if (o->device == TS_DEVICE_CUDA) ts_backend_cuda_free(cc.world, cc.group, cc.n_groups);
    calib_comms_free(&cc);
    return res;
}
