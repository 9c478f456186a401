/* The job watchdog (see watchdog.h): node-shared progress slots and the SIGALRM report. */
#include "exec/watchdog.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/comm_mpi.h"

struct ts_watchdog {
    MPI_Comm node;         /* this node's ranks (MPI_COMM_TYPE_SHARED) */
    MPI_Win win;           /* their slots */
    ts_watch_slot *slots;  /* (n) the node's slots, slot i of node rank i */
    int n, self;           /* node size, this rank's index */
    const ts_program *prog;
    ts_layout layout;
    double timeout_s;
};

/* What the signal handler reads: set by ts_watchdog_init, or by ts_watchdog_arm_startup for the
 * start-up phase before any window exists (then `startup_slot` stands alone). */
static ts_watchdog *active;
static ts_watch_slot startup_slot;
static double startup_timeout_s;

/* ---- async-signal-safe text ---------------------------------------------------------------- */

typedef struct {
    char *buf;
    size_t cap, len;
} text;

static void put(text *t, const char *s) {
    while (*s && t->len + 1 < t->cap) t->buf[t->len++] = *s++;
    t->buf[t->len] = '\0';
}

static void put_int(text *t, long v) {
    char d[24];
    int n = 0;
    unsigned long u = v < 0 ? (unsigned long)-v : (unsigned long)v;
    do d[n++] = (char)('0' + u % 10), u /= 10;
    while (u && n < (int)sizeof d - 1);
    if (v < 0) put(t, "-");
    char s[24];
    for (int i = 0; i < n; i++) s[i] = d[n - 1 - i];
    s[n] = '\0';
    put(t, s);
}

/* Seconds with up to three decimals ("3", "0.5", "2.25"). */
static void put_seconds(text *t, double s) {
    long ms = lround(s * 1000);
    put_int(t, ms / 1000);
    if (ms % 1000 == 0) return;
    char frac[5] = {'.', (char)('0' + ms / 100 % 10), (char)('0' + ms / 10 % 10), (char)('0' + ms % 10), '\0'};
    for (int i = 3; i > 1 && frac[i] == '0'; i--) frac[i] = '\0';
    put(t, frac);
}

static const ts_op *op_at(const ts_program *prog, const ts_layout *l, const ts_watch_slot *s) {
    if (prog == NULL || s->phase != TS_WATCH_STEP || s->op < 0) return NULL;
    int stage = ts_rank_coords(l, (int)s->rank).pp;
    if (stage < 0 || stage >= prog->pp || s->op >= prog->stages[stage].n_ops) return NULL;
    return &prog->stages[stage].ops[s->op];
}

static int waits(const ts_watch_slot *s, const ts_op *op) {
    if (s->phase == TS_WATCH_STEP && s->op == TS_WATCH_SENDS) return 1;
    return op && (op->kind == TS_OP_COLL || op->kind == TS_OP_SEND || op->kind == TS_OP_RECV);
}

/* "step 3, op 37 (collective)", "step 3, between ops", "start-up", "gathering the results". */
static void put_where(text *t, const ts_watch_slot *s, const ts_op *op) {
    if (s->phase == TS_WATCH_STARTUP) {
        put(t, "start-up");
        return;
    }
    if (s->phase == TS_WATCH_RESULTS) {
        put(t, "gathering the results");
        return;
    }
    put(t, "step ");
    put_int(t, s->step);
    if (op == NULL) {
        put(t, s->op == TS_WATCH_SENDS ? ", waiting for its pipeline sends" : ", between ops");
        return;
    }
    put(t, ", op ");
    put_int(t, s->op);
    put(t, " (");
    put(t, ts_op_kind_names[op->kind]);
    put(t, ")");
}

size_t ts_watchdog_report(char *buf, size_t cap, const ts_watch_slot *slots, int n, int self,
                          const ts_program *prog, const ts_layout *l, double timeout_s) {
    text t = {buf, cap, 0};
    if (cap == 0) return 0;
    buf[0] = '\0';
    const ts_watch_slot *me = &slots[self];
    put(&t, "tessera run: rank ");
    put_int(&t, me->rank);
    put(&t, ": ");
    if (me->phase == TS_WATCH_STEP) {
        put(&t, "step ");
        put_int(&t, me->step);
    } else {
        put(&t, me->phase == TS_WATCH_STARTUP ? "start-up" : "gathering the results");
    }
    put(&t, " did not finish within ");
    put_seconds(&t, timeout_s);
    put(&t, " s (--timeout): ");
    /* A rank inside a communication op waits for its peers; one that is not (between ops, in a
     * compute op, stopped) is what they wait for. */
    int suspects = 0;
    for (int i = 0; i < n; i++) {
        const ts_op *op = op_at(prog, l, &slots[i]);
        if (waits(&slots[i], op)) continue;
        put(&t, suspects++ ? "; rank " : "rank ");
        put_int(&t, slots[i].rank);
        put(&t, " is not in a communication op (");
        put_where(&t, &slots[i], op);
        put(&t, ")");
    }
    if (suspects == 0) put(&t, "every rank of this node waits in a communication op: the rank holding them up is on another node");
    if (n > 1) {
        put(&t, "; on this node:");
        for (int i = 0; i < n; i++) {
            put(&t, i ? ", rank " : " rank ");
            put_int(&t, slots[i].rank);
            put(&t, " ");
            put_where(&t, &slots[i], op_at(prog, l, &slots[i]));
        }
    }
    put(&t, "; ending the job\n");
    return t.len;
}

/* ---- the alarm ------------------------------------------------------------------------------ */

static void fire(int sig) {
    (void)sig;
    char msg[2048];
    size_t len;
    if (active != NULL) {
        /* The node's first rank to fire reports; the others leave quietly. */
        if (__atomic_exchange_n(&active->slots[0].claim, 1, __ATOMIC_SEQ_CST)) _exit(1);
        len = ts_watchdog_report(msg, sizeof msg, active->slots, active->n, active->self, active->prog,
                                 &active->layout, active->timeout_s);
    } else {
        len = ts_watchdog_report(msg, sizeof msg, &startup_slot, 1, 0, NULL, NULL, startup_timeout_s);
    }
    ssize_t w = write(STDERR_FILENO, msg, len);
    (void)w;
    _exit(1);
}

static void start_alarm(double timeout_s) {
    signal(SIGALRM, fire);
    alarm((unsigned)ceil(timeout_s));
}

void ts_watchdog_arm_startup(int rank, double timeout_s) {
    if (timeout_s <= 0) return;
    startup_slot = (ts_watch_slot){.rank = rank, .phase = TS_WATCH_STARTUP, .op = TS_WATCH_BETWEEN};
    startup_timeout_s = timeout_s;
    start_alarm(timeout_s);
}

ts_status ts_watchdog_init(ts_watchdog **out, const ts_runtime *rt, const ts_program *prog, double timeout_s) {
    *out = NULL;
    if (timeout_s <= 0) return TS_OK;
    ts_status res = TS_OK;
    ts_watchdog *w = calloc(1, sizeof *w);
    if (w == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for the watchdog");
    w->node = MPI_COMM_NULL;
    w->win = MPI_WIN_NULL;
    w->prog = prog;
    w->layout = rt->layout;
    w->timeout_s = timeout_s;
    TS_MPI_GOTO(MPI_Comm_split_type(rt->world->mpi, MPI_COMM_TYPE_SHARED, rt->rank, MPI_INFO_NULL, &w->node), res,
                fail);
    TS_MPI_GOTO(MPI_Comm_size(w->node, &w->n), res, fail);
    TS_MPI_GOTO(MPI_Comm_rank(w->node, &w->self), res, fail);
    /* One contiguous block on the node's first rank, so slot i is node rank i's. */
    void *mine = NULL;
    MPI_Aint bytes = w->self == 0 ? (MPI_Aint)(w->n * sizeof(ts_watch_slot)) : 0;
    TS_MPI_GOTO(MPI_Win_allocate_shared(bytes, (int)sizeof(ts_watch_slot), MPI_INFO_NULL, w->node, &mine, &w->win),
                res, fail);
    MPI_Aint size = 0;
    int unit = 0;
    void *base = NULL;
    TS_MPI_GOTO(MPI_Win_shared_query(w->win, 0, &size, &unit, &base), res, fail);
    w->slots = base;
    w->slots[w->self] = (ts_watch_slot){.rank = rt->rank, .phase = TS_WATCH_STARTUP, .op = TS_WATCH_BETWEEN};
    TS_MPI_GOTO(MPI_Barrier(w->node), res, fail); /* every slot filled before any alarm reads them */
    active = w;
    *out = w;
    return TS_OK;
fail:
    ts_watchdog_free(w);
    return res;
}

void ts_watchdog_arm(ts_watchdog *w, ts_watch_phase phase, int step) {
    if (w == NULL) return;
    ts_watch_slot *s = &w->slots[w->self];
    s->op = TS_WATCH_BETWEEN;
    s->step = step;
    s->phase = phase;
    start_alarm(w->timeout_s);
}

volatile sig_atomic_t *ts_watchdog_op_slot(ts_watchdog *w) { return w ? &w->slots[w->self].op : NULL; }

void ts_watchdog_free(ts_watchdog *w) {
    alarm(0);
    if (w == NULL) return;
    if (active == w) active = NULL;
    if (w->win != MPI_WIN_NULL) MPI_Win_free(&w->win);
    if (w->node != MPI_COMM_NULL) MPI_Comm_free(&w->node);
    free(w);
}
