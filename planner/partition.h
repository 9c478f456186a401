/* Uneven pipeline stages: which contiguous layer range each of the pp·vpp virtual stages holds,
 * and which recompute policy each physical stage uses, chosen by a mixed-integer program (GLPK)
 * that minimises the slowest stage's time per micro-batch subject to every stage fitting in GPU
 * memory. A brute-force enumeration beside it is the readable reference the tests diff against.
 *
 * The instance is generic: layers of a few kinds (dense, MoE) with per-kind, per-policy costs,
 * and per-stage fixed parts (embedding on the first stage; LM head, loss, final norm and MTP
 * module on the last) — ts_partition_problem_of fills it from a planning problem and a layout
 * with the same closed form as planner/stages.c, so the split it returns can be evaluated there.
 *
 * Global chunk g holds layers in model order; the schedule places chunks on stages
 * (program/schedule.h: Megatron-LM's interleaving puts chunk c of stage s at g = c·pp + s); with
 * vpp = 1 chunks and physical stages coincide.
 *
 * ts_partition_problem and ts_split own their arrays: _init allocates, _free releases.
 *
 * One file per job: partition.c (the problem and a split's evaluation), split.c (the split
 * type), partition_brute.c (enumeration), partition_ilp.c with partition_levels.c (the program
 * and its search), partition_search.c (ts_search_partitioned); partition_impl.h is what they
 * share. */
#ifndef TS_PARTITION_H
#define TS_PARTITION_H

#include "planner/problem.h"
#include "planner/search.h"
#include "program/program.h"

#define TS_PART_MAX_KINDS 4

/* GLPK's default work budget per layout, in branch-and-bound nodes (docs/partition.md: what it
 * took on the zoo's cases). */
#define TS_PART_DEFAULT_NODES 200
/* The planner's default lets that budget double, up to this, while the split GLPK stopped at is
 * more than TS_PART_GAP above the bound it proved: the hard cases (two layer kinds, interleaved)
 * then get the nodes they need, the easy ones keep theirs (docs/partition.md). */
#define TS_PART_DEFAULT_NODES_MAX 1600
/* auto's budget for the layouts only an explicit split makes valid, which it tries because the
 * search costs them ahead (partition_search.c), when --partition-node-limit is not given: the
 * heuristic's incumbent and a few nodes, not a proof (DeepSeek-V3 on 512 H100s: the same ranking
 * as the default budget in an eighth of the time) */
#define TS_PART_AUTO_SPLIT_NODES 20
#define TS_PART_GAP 0.02

/* What the program minimises. stage: the slowest stage's time per micro-batch, T. step: the step
 * with its bubble, m·T + β·(Σ_s τ_s - T) (see partition_ilp.c), which may accept a slightly
 * slower slowest stage for less recompute elsewhere. */
typedef enum { TS_PART_OBJ_STAGE, TS_PART_OBJ_STEP, TS_PART_OBJ_COUNT } ts_partition_objective;
extern const char *const ts_partition_objective_names[]; /* "stage", "step"; NULL-ended */

typedef struct {
    int layers;   /* L, the model's layers in order */
    int pp, vpp;  /* physical stages and chunks per stage */
    ts_schedule schedule; /* whose placement puts chunks on stages (ts_partition_problem_of: the
                             layout's; ts_partition_problem_init: a looped one) */
    int n_kinds;  /* layer kinds (<= TS_PART_MAX_KINDS) */
    int *kind;    /* (layers) kind of each layer */
    unsigned policies; /* bit (1u << ts_recompute) per recompute policy allowed; 0: all */
    /* One layer of a kind under a policy, one micro-batch: */
    double time_s[TS_PART_MAX_KINDS][TS_RECOMPUTE_COUNT];     /* fwd + bwd + recompute + exposed comm */
    double act_bytes[TS_PART_MAX_KINDS][TS_RECOMPUTE_COUNT];  /* kept from forward to backward */
    double peak_bytes[TS_PART_MAX_KINDS][TS_RECOMPUTE_COUNT]; /* transient while it runs backward */
    double state_bytes[TS_PART_MAX_KINDS]; /* weights, gradients, optimizer states on one rank */
    /* What a physical stage holds whatever the split, (pp × TS_RECOMPUTE_COUNT) by policy: */
    double *fixed_time_s;
    double *fixed_act_bytes;
    double *fixed_extra_bytes; /* transient (logits) */
    double *fixed_state_bytes; /* (pp) parameters' states and buffers */
    double *in_flight;         /* (pp) micro-batches whose activations the stage keeps at its peak */
    double usable_bytes;       /* per GPU */
    long node_limit;           /* GLPK's branch-and-bound nodes for the whole search, over every
                                  glp_intopt run (0: TS_PART_DEFAULT_NODES); a count, not a time,
                                  so the answer does not depend on the machine's load */
    long node_limit_max;       /* up to this the budget doubles and the search runs again while a
                                  node-limited split is more than TS_PART_GAP above its proved
                                  bound (0: never; ts_partition_problem_init's) */
    ts_partition_objective objective; /* default stage */
    double microbatches;       /* m, per step (the step objective) */
    double bubble_per_stage;   /* β: the schedule's fill and drain per second of stage time beyond
                                  the slowest (1 for GPipe and 1F1B, 1/vpp interleaved) */
    int glpk_only;             /* skip the primal heuristic (tests: GLPK alone reaches the optimum) */
} ts_partition_problem;

ts_status ts_partition_problem_init(ts_partition_problem *p, int layers, int pp, int vpp);
void ts_partition_problem_free(ts_partition_problem *p);

typedef enum {
    TS_PART_OPTIMAL,    /* proven optimal */
    TS_PART_NODE_LIMIT, /* the node limit struck; the split is GLPK's incumbent, not proven */
    TS_PART_INFEASIBLE, /* no split fits (info.why says why) */
    TS_PART_NO_SPLIT,   /* the node limit struck before any split was found */
} ts_partition_status;
extern const char *const ts_partition_status_names[];

/* A split and what it costs under the instance's model. */
typedef struct ts_split {
    int pp, vpp;
    ts_schedule schedule;     /* whose placement puts global chunks on stages (program/schedule.h);
                                 ts_split_init: a looped one, as every schedule today */
    int *layers;              /* (pp·vpp) layers of global chunk g, placed by `schedule` */
    ts_recompute *recompute;  /* (pp) policy of each physical stage */
    double *stage_s;          /* (pp) busy seconds per micro-batch */
    double *stage_bytes;      /* (pp) memory per GPU */
    double max_stage_s;       /* the slowest stage's (the stage objective) */
    int slowest, worst;       /* stage with the most time, with the most memory */
    int fits;                 /* every stage within usable_bytes */
    /* From ts_partition_solve (0 otherwise): OPTIMAL or NODE_LIMIT, the program's objective
     * (ts_partition_objective_s) and the lower bound of it that was proved (= objective_s when
     * optimal). */
    ts_partition_status status;
    double objective_s, bound_s;
} ts_split;

/* The options of a program on split `s` (program/program.h): its chunks' layers and its
 * stages' recompute, which `s` must hold until the program is built; NULL or an empty split
 * (pp = 0): the even split. */
ts_program_opts ts_program_opts_of(const ts_split *s);

ts_status ts_split_init(ts_split *s, int pp, int vpp);
void ts_split_free(ts_split *s);
ts_status ts_split_copy(ts_split *dst, const ts_split *src); /* dst uninitialised; _free it */
/* Whether every virtual stage holds the same layers and every stage the same policy. */
int ts_split_is_uniform(const ts_split *s);
/* "4+4|5+4|... none×12 full×4" style text. */
int ts_split_format(const ts_split *s, char *buf, size_t cap);

/* Fills stage_s, stage_bytes, max_stage_s, slowest, worst and fits from layers and recompute;
 * returns fits. The reference the program is checked against. */
int ts_partition_evaluate(const ts_partition_problem *p, ts_split *s);

/* The objective's value of an evaluated split: max_stage_s (stage) or the step estimate (step). */
double ts_partition_objective_s(const ts_partition_problem *p, const ts_split *s);

/* The planner's uniform split (planner/stages.c: with vpp = 1 stages 1..L mod pp take one more
 * layer; with vpp > 1 equal chunks, remainders to chunks 1..) with policy `rc` on every stage. */
void ts_partition_uniform(const ts_partition_problem *p, ts_recompute rc, ts_split *s);

typedef struct {
    ts_partition_status status;
    double solve_s;  /* wall time of glp_intopt, and of building the program */
    double bound_s;  /* best lower bound of the objective proved (node limit: below the incumbent) */
    int rows, cols, integer_cols;
    int glpk_calls;  /* glp_intopt runs of the search over T */
    long nodes;      /* branch-and-bound nodes they took, over every search (ts_partition_solve) */
    char why[512];   /* infeasible / no split: in words */
    /* Infeasible: the stage of the uniform split (each stage at its least-memory policy) most
     * over the usable memory, and by how many bytes (what info.why says). */
    int short_stage;
    double short_bytes;
} ts_partition_info;

/* Solves the program on p->node_limit nodes; while the split found is NODE_LIMIT and more than
 * TS_PART_GAP above its proved bound, again on twice the nodes, up to p->node_limit_max (info:
 * the last search's, its nodes and time summed over the searches). TS_OK with `out` filled
 * (init'ed here; _free it) for OPTIMAL and NODE_LIMIT; TS_ERR_INFEASIBLE (message = info.why) for INFEASIBLE and NO_SPLIT; TS_ERR_EXTERNAL
 * when GLPK fails (the message quotes what GLPK printed, or names the return code of the solver
 * call; GLPK's terminal output never reaches stdout). On failure `out` is left empty. */
ts_status ts_partition_solve(const ts_partition_problem *p, ts_split *out, ts_partition_info *info);

/* Every contiguous split × every policy per stage: the optimum by enumeration, for small
 * instances (TS_ERR_INPUT beyond 10^7 candidates), under the instance's objective.
 * TS_ERR_INFEASIBLE when none fits. `out` init'ed here. Ties: the least total stage time, then
 * the first enumerated. */
ts_status ts_partition_brute(const ts_partition_problem *p, ts_split *out);

/* The instance of a planning problem for a layout's shard, ZeRO stage, schedule, pp and vpp
 * (the layout's recompute is ignored: each stage chooses; `policies` restricts the choice, 0 all).
 * Costs follow planner/stages.c (dense and MoE kinds; MTP with the head on the last stage);
 * per-stage buffers use the full DP bucket (an upper bound, exact for any real layer size). */
ts_status ts_partition_problem_of(const ts_problem *pb, const ts_layout *l, unsigned policies,
                                  ts_partition_problem *out);

/* --partition: when the planner re-partitions stages. */
typedef enum { TS_PARTITION_UNIFORM, TS_PARTITION_ILP, TS_PARTITION_AUTO, TS_PARTITION_COUNT } ts_partition_mode;
extern const char *const ts_partition_mode_names[]; /* "uniform", "ilp", "auto"; NULL-ended */

typedef struct {
    ts_partition_mode mode;
    ts_partition_objective objective; /* --partition-objective; default stage */
    long node_limit;     /* GLPK's nodes per layout (--partition-node-limit; default
                            TS_PART_DEFAULT_NODES) */
    long node_limit_max; /* doubling it up to this (default TS_PART_DEFAULT_NODES_MAX;
                            --partition-node-limit N fixes both at N) */
} ts_partition_opts;

void ts_partition_opts_defaults(ts_partition_opts *o); /* auto, stage, TS_PART_DEFAULT_NODES(_MAX) */

/* The layout search (ts_search) followed by the program on its best candidates: the best four
 * distinct layouts with pp > 1 (recompute aside: each stage chooses its own) and four that do not
 * fit evenly, from a search with twice the memory (the closest to fitting when nothing fits,
 * else the fastest; with ilp, or when nothing fits); with ilp also the best four that only an
 * explicit split makes valid (ts_search_opts.explicit_splits) — with auto those the search costs
 * faster than the best even layout, and all of them when the pins leave no even layout at all. A candidate whose split fits and beats its even forms replaces them in the
 * ranking (out->splits holds the split, and the layout's recompute field the policy most stages
 * use). uniform: ts_search alone; ilp: always; auto: when
 * nothing fits evenly (then also the closest layouts), when the model mixes kinds of layer (dense
 * and MoE), and otherwise on those of the best four whose even split a relaxation says a split
 * could beat (forced into recompute, or a stage slower than the rest by more than a layer; with
 * the memory objective: only when nothing fits). Returns like ts_search; TS_OK when only uneven
 * splits fit. When none fits, the message (and `reason`) ends with the solver's sentence for the
 * closest candidate: which stage of its even split is short, by how much. A layout on which GLPK fails is
 * kept even and counted in out->partition_errors, the first message in out->partition_error. */
ts_status ts_search_partitioned(const ts_problem *pb, const ts_search_opts *opts, const ts_partition_opts *po,
                                ts_search_result *out);

/* The planner's closed form (planner/stages.c) of layout `l` under split `s` (s->pp = l->pp,
 * s->vpp = l->vpp): memory on the worst rank, the step time and its split. */
ts_status ts_evaluate_split(const ts_problem *pb, const ts_layout *l, const ts_split *s, ts_eval *out);

#endif
