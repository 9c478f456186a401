/* `tessera calibrate`'s measurements (see calibrate.h for what and why): the compute kernels on
 * one rank per core, the collectives on every rank, then the fit (calibrate_fit.c).
 *
 * Ranks that have nothing to do in a phase wait in non-blocking MPI calls polled with a short
 * sleep (quiet_wait), not in blocking ones: Open MPI's blocking calls spin, and a spinning idle
 * rank would take a core from a rank being measured when ranks outnumber cores. */
#include "exec/calibrate.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/stats.h"
#include "exec/backend.h"
#include "exec/comm_mpi.h"
#include "exec/kernels.h"
#include "exec/runtime.h"

#define MAX_REPS 100000
#define BATCHES 3            /* timed batches per point; the point's time is their median */
#define QUICK_POINT_S 0.002  /* at least this long per batch */
#define FULL_POINT_S 0.01
#define QUICK_MAX_BYTES (16.0 * 1048576)
#define FULL_MAX_BYTES (256.0 * 1048576)

typedef struct {
    const ts_backend *be;
    const ts_calib_opts *o;
    ts_calib *c;
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

/* Deterministic small values, so no kernel meets a NaN or an overflow over many repetitions. */
static float *filled(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (p == NULL) return NULL;
    for (size_t i = 0; i < n; i++) p[i] = 0.01f * (float)((int)((i * 7919u) % 97u) - 48) / 48.0f;
    return p;
}

typedef struct {
    const ts_backend *be;
    int m, n, k;
    float *A, *B, *C; /* each holds max(m,k)·max(k,n) floats and more */
} gemm_arg;

/* The executor's three uses of one weight (exec/kernels.h): out = in·wᵀ (NT), din = dout·w (NN),
 * dw = doutᵀ·in (TN), here all with the shape (m, n, k). */
static ts_status gemm_call(const void *p) {
    const gemm_arg *g = p;
    TS_CHECK(g->be->sgemm(0, 1, g->m, g->n, g->k, 1.0f, g->A, g->k, g->B, g->k, 0.0f, g->C, g->n));
    TS_CHECK(g->be->sgemm(0, 0, g->m, g->n, g->k, 1.0f, g->A, g->k, g->B, g->n, 0.0f, g->C, g->n));
    return g->be->sgemm(1, 0, g->m, g->n, g->k, 1.0f, g->A, g->m, g->B, g->n, 0.0f, g->C, g->n);
}

static ts_status bench_gemm(bench *b) {
    static const int full[] = {64, 128, 256, 512, 1024}, quick[] = {64, 256, 1024};
    const int *dims = b->c->quick ? quick : full;
    int nd = b->c->quick ? 3 : 5, top = dims[nd - 1];
    ts_status res = TS_OK;
    gemm_arg g = {.be = b->be};
    g.A = filled((size_t)top * top), g.B = filled((size_t)top * top), g.C = filled((size_t)top * top);
    TS_ALLOC_GOTO(g.A, res, exit);
    TS_ALLOC_GOTO(g.B, res, exit);
    TS_ALLOC_GOTO(g.C, res, exit);
    for (int i = 0; i < nd; i++)
        for (int j = 0; j < nd; j++)
            for (int l = 0; l < nd && b->c->n_gemm < TS_CALIB_MAX_GEMM; l++) {
                ts_calib_gemm *row = &b->c->gemm[b->c->n_gemm++];
                g.m = row->m = dims[i], g.n = row->n = dims[j], g.k = row->k = dims[l];
                row->flops = 2.0 * g.m * g.n * g.k;
                double rep_s;
                TS_CHECK_GOTO(time_compute(b, gemm_call, &g, &rep_s, &row->reps), res, exit);
                row->time_s = rep_s / 3.0;
            }
exit:
    free(g.A), free(g.B), free(g.C);
    return res;
}

typedef struct {
    int kind; /* 0 rmsnorm, 1 swiglu, 2 adamw */
    int rows, cols;
    float *a, *b, *c, *d, *e;
} mem_arg;

static ts_status mem_call(const void *p) {
    const mem_arg *m = p;
    size_t n = (size_t)m->rows * m->cols;
    if (m->kind == 0) ts_rmsnorm_fwd(m->a, m->e, m->b, m->c, m->rows, m->cols, 1e-5f);
    else if (m->kind == 1) ts_swiglu_fwd(m->a, m->b, m->c, n);
    else ts_adamw(m->a, m->b, m->c, m->d, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1);
    return TS_OK;
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
    mem_arg m = {.kind = kind, .rows = rows, .cols = cols};
    m.a = filled(n), m.b = filled(n), m.c = filled(n), m.d = filled(n), m.e = filled((size_t)rows);
    if (!m.a || !m.b || !m.c || !m.d || !m.e) {
        res = TS_FAIL(TS_ERR_NOMEM, "calibrate: out of memory for %s of %zu elements", names[kind], n);
        goto exit;
    }
    ts_calib_mem *row = &b->c->mem[b->c->n_mem++];
    *row = (ts_calib_mem){.kernel = names[kind], .rows = rows, .cols = cols,
                          .bytes = mem_bytes(kind, rows, cols)};
    TS_CHECK_GOTO(time_compute(b, mem_call, &m, &row->time_s, &row->reps), res, exit);
exit:
    free(m.a), free(m.b), free(m.c), free(m.d), free(m.e);
    return res;
}

/* tiny's sizes: T tokens of width 256 (norms), T × 688 (SwiGLU), a few million parameters. */
static ts_status bench_mem(bench *b) {
    static const int full_t[] = {64, 256, 1024, 4096}, quick_t[] = {256, 1024};
    static const int full_p[] = {256, 1024, 4096}, quick_p[] = {1024};
    int q = b->c->quick, nt = q ? 2 : 4, np = q ? 1 : 3;
    const int *ts = q ? quick_t : full_t, *ps = q ? quick_p : full_p;
    for (int i = 0; i < nt; i++) TS_CHECK(mem_point(b, 0, ts[i], 256));
    for (int i = 0; i < nt && ts[i] <= 1024; i++) TS_CHECK(mem_point(b, 1, ts[i], 688));
    for (int i = 0; i < np; i++) TS_CHECK(mem_point(b, 2, ps[i], 1024));
    return TS_OK;
}

typedef struct {
    ts_attn_shape s;
    int bwd;
    float *q, *k, *v, *out, *lse, *scratch, *dq, *dk, *dv, *dout;
    int *pos;
} attn_arg;

static ts_status attn_call(const void *p) {
    const attn_arg *a = p;
    if (a->bwd) ts_attention_bwd(a->dq, a->dk, a->dv, a->dout, a->q, a->k, a->v, a->out, a->lse, &a->s);
    else ts_attention_fwd(a->out, a->lse, a->q, a->k, a->v, &a->s, a->scratch);
    return TS_OK;
}

static void attn_arg_free(attn_arg *a) {
    float *bufs[] = {a->q, a->k, a->v, a->out, a->lse, a->scratch, a->dq, a->dk, a->dv, a->dout};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(a->pos);
}

/* Forward and backward of one causal attention of T tokens (planner/layer.c's FLOP convention:
 * the forward executes half of 4·T²·H·D under the causal mask, the backward 2.5 times that). */
static ts_status attn_point(bench *b, int T, int H, int KV, int D) {
    ts_status res = TS_OK;
    size_t nq = (size_t)T * H * D, nk = (size_t)T * KV * D;
    attn_arg a = {.s = {.Tq = T, .Tk = T, .H = H, .KV = KV, .D = D, .ldq = H * D, .ldk = KV * D,
                        .ldv = KV * D, .ldo = H * D}};
    a.q = filled(nq), a.k = filled(nk), a.v = filled(nk), a.out = filled(nq), a.dout = filled(nq);
    a.lse = filled((size_t)T * H), a.scratch = filled((size_t)T);
    a.dq = filled(nq), a.dk = filled(nk), a.dv = filled(nk);
    a.pos = malloc((size_t)T * sizeof *a.pos);
    if (!a.q || !a.k || !a.v || !a.out || !a.dout || !a.lse || !a.scratch || !a.dq || !a.dk ||
        !a.dv || !a.pos) {
        res = TS_FAIL(TS_ERR_NOMEM, "calibrate: out of memory for attention of %d tokens", T);
        goto exit;
    }
    for (int t = 0; t < T; t++) a.pos[t] = t;
    a.s.q_pos = a.s.k_pos = a.pos;
    ts_attention_fwd(a.out, a.lse, a.q, a.k, a.v, &a.s, a.scratch); /* the backward reads these */
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

/* The four collectives over blocks of n consecutive ranks (every block at once). */
static ts_status coll_group(bench *b, coll_arg *a, int n) {
    ts_status res = TS_OK;
    a->counts = calloc((size_t)n, sizeof *a->counts);
    a->displs = calloc((size_t)n, sizeof *a->displs);
    TS_ALLOC_GOTO(a->counts, res, exit);
    TS_ALLOC_GOTO(a->displs, res, exit);
    TS_CHECK_GOTO(ts_comm_blocks(n, &a->comm), res, exit);
    for (int c = TS_COLL_ALLREDUCE; c <= TS_COLL_ALLTOALL; c++) {
        a->coll = (ts_coll)c;
        TS_CHECK_GOTO(coll_sizes(b, a, n), res, exit);
    }
exit:
    ts_comm_free(&a->comm);
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
    memset(a.in, 0, top), memset(a.out, 0, top); /* fault the pages in before any timing */
    for (int n = 2; n <= b->size; n++)
        if (b->size % n == 0) TS_CHECK_GOTO(coll_group(b, &a, n), res, exit);
    a.coll = TS_COLL_SENDRECV;
    a.peer = (b->rank ^ 1) < b->size ? b->rank ^ 1 : -1;
    a.even = b->rank % 2 == 0;
    TS_CHECK_GOTO(coll_sizes(b, &a, 2), res, exit);
exit:
    if (a.in) b->be->free(a.in);
    if (a.out) b->be->free(a.out);
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
    c->oversubscribed = b->size > c->cores;
    c->threads = b->o->threads > 0 ? b->o->threads : 1;
    int per_core = c->cores / c->threads > 0 ? c->cores / c->threads : 1;
    c->compute_ranks = b->size < per_core ? b->size : per_core;
    c->quick = b->o->quick != 0;
    c->min_point_s = c->quick ? QUICK_POINT_S : FULL_POINT_S;
    snprintf(c->argv, sizeof c->argv, "%s", b->o->argv ? b->o->argv : "tessera calibrate");
fail:
    return res;
}

/* The in-situ pass (calibrate.h) on rank 0 while the others wait off the cores; its sums are
 * broadcast so every rank applies the same factors. A failure on rank 0 fails every rank. */
static ts_status bench_situ(bench *b) {
    ts_status res = TS_OK, mine = TS_OK;
    computes_here = b->rank == 0;
    if (b->rank == 0) mine = ts_calib_situ_measure(b->c, b->be, b->c->quick ? 3 : 5);
    double failed = mine != TS_OK;
    MPI_Request req;
    TS_MPI_GOTO(MPI_Ibcast(&failed, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD, &req), res, fail);
    TS_CHECK(quiet_wait(&req));
    if (failed) return b->rank == 0 ? mine : TS_FAIL(TS_ERR_EXTERNAL, "calibrate: the in-situ pass failed on rank 0");
    TS_MPI_GOTO(MPI_Ibcast(&b->c->situ, (int)sizeof b->c->situ, MPI_BYTE, 0, MPI_COMM_WORLD, &req), res, fail);
    TS_CHECK(quiet_wait(&req));
    ts_calib_situ_apply(b->c);
fail:
    return res;
}

static void progress(const bench *b, const char *what, int points, double t0) {
    if (b->rank != 0 || b->o->log == NULL) return;
    fprintf(b->o->log, "tessera calibrate: %-12s %4d points, %6.2f s\n", what, points, b->be->now_s() - t0);
    fflush(b->o->log);
}

ts_status ts_calibrate(const ts_calib_opts *o, const ts_system *tmpl, ts_calib *out) {
    memset(out, 0, sizeof *out);
    bench b = {.o = o, .c = out};
    TS_CHECK(ts_mpi_init(&b.rank, &b.size));
    if (b.size < 2)
        return TS_FAIL(TS_ERR_INPUT, "calibrate: needs at least 2 MPI ranks to measure communication, got %d", b.size);
    b.be = ts_backend_cpu(o->threads);
    TS_CHECK(describe_machine(&b));
    b.computes = computes_here = b.rank < out->compute_ranks;
    double t0 = b.be->now_s(), t = t0;
    TS_CHECK(bench_gemm(&b));
    progress(&b, "gemm", out->n_gemm, t), t = b.be->now_s();
    TS_CHECK(bench_mem(&b));
    progress(&b, "elementwise", out->n_mem, t), t = b.be->now_s();
    TS_CHECK(bench_attn(&b));
    progress(&b, "attention", out->n_attn, t), t = b.be->now_s();
    TS_CHECK(bench_coll(&b));
    progress(&b, "collectives", out->n_coll, t), t = b.be->now_s();
    TS_CHECK(ts_calib_fit(out, tmpl));
    if (o->in_situ) {
        TS_CHECK(bench_situ(&b));
        progress(&b, "in situ", out->situ.steps, t);
    }
    out->elapsed_s = b.be->now_s() - t0;
    return TS_OK;
}
