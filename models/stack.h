/* A software stack: what a training framework can run (schedules, ZeRO / FSDP flavours,
 * recompute policies, which parallel dimensions) and how it runs it (which communication it
 * overlaps, fused attention, the gradient-reduction dtype). No profile states a per-step cost
 * outside the step program: none of their sources measures one (data loading, logging), and the
 * optimizer step is the system file's.
 *
 * Loaded from models/stacks/NAME.json (format in stack.c); every figure may be written as
 * {"value": x, "source": "..."} and the file lists its sources. The planner ranks only layouts the
 * stack runs and prices them with its overlaps (planner/stack_rules.h); exports refuse layouts
 * their target stack cannot express. models/ knows no schedule or recompute enum: the caller
 * passes the name tables, and the masks hold one bit per entry of those tables.
 *
 * A ts_stack is a plain value (no heap memory, no _free). */
#ifndef TS_STACK_H
#define TS_STACK_H

#include <cjson/cJSON.h>

#include "common/status.h"

/* An overlap fraction the stack leaves to the system file (the system's measured value). */
#define TS_STACK_SYSTEM (-1.0)

typedef struct {
    char name[64];
    char file[256];        /* where it was read from ("" for the built-in default) */
    char description[256];
    unsigned schedules;    /* bit i: schedule_names[i] runs; 0: any */
    unsigned recompute;    /* bit i: recompute_names[i] is offered; 0: any */
    unsigned zero;         /* bit z: ZeRO stage z (distributed optimizer / FSDP flavour) */
    int pp_max_zero;       /* with pipeline parallelism, ZeRO stages above this do not run
                              (DeepSpeed's pipeline engine: ZeRO-1 at most); 3: no limit */
    int tp, pp, cp, ep, sp; /* the dimension exists in the stack (1) or not (0) */
    int etp;                /* experts may take a TP degree of their own, 1 beside tp (1), or
                               always tp's (0: the default of a stack file) */
    int moe_bias_etp1;      /* experts with biases run only apart from TP, etp 1 (1) */
    int flash_attention;   /* fused (flash) attention; 0: unfused softmax, s×s scores */
    int ce_fused;          /* the LM loss's vocab-parallel cross entropy in fused kernels (1, the
                              default) or Megatron's unfused passes (0; program/recipe.h) */
    double tp_comm_overlap; /* fraction of TP communication hidden; TS_STACK_SYSTEM: the system's */
    double dp_comm_overlap; /* fraction of the DP overlap window used (gradient reduce-scatter under
                               backward, parameter all-gather under forward); 0: reduced after
                               the backward, exposed */
    double pp_comm_overlap; /* pipeline sends asynchronous behind other chunks' compute (1) or
                               blocking (0) */
    int pp_scatter_gather;  /* pipeline sends split over the TP ranks (SC'21 §4.1); 0: every TP
                               rank sends the whole activation */
    double grad_reduce_bytes; /* bytes per gradient element on the wire (fp32: 4, bf16: 2);
                                 0: the training's gradient bytes */
    double grad_accum_bytes;  /* bytes per parameter of the stage a memory pass moves after each
                                 micro-batch's backward to accumulate its gradients, apart from
                                 the weight-gradient GEMMs (DeepSpeed's BF16_Optimizer: convert
                                 to fp32 and add, 18); 0: accumulated inside them (Megatron-Core's
                                 gradient_accumulation_fusion) */
    double moe_a2a_overlap;   /* fraction of the EP dispatch/combine the stack hides under
                                 computation (train.moe_a2a_overlap's default; --moe-a2a-overlap
                                 overrides); TS_STACK_SYSTEM: no statement, the option's default */
    int grouped_gemm_streams; /* how its grouped GEMM (the local experts') runs: 0, one grouped
                                 kernel (CUTLASS, DeepGEMM, torch._grouped_mm); n > 0, one cuBLAS
                                 GEMM per expert, round-robin over n CUDA streams (Transformer
                                 Engine's GroupedLinear; planner/moe_cost.h) */
    double comm_sm_frac;      /* fraction of the GPU's SMs its communication kernels hold while
                                 they overlap computation (DeepSeek-V3: 20 of 132); 0: copy
                                 engines or NCCL's few SMs, nothing charged */
    int dtype;                /* the precision the stack trains in (a ts_dtype), the default of
                                 --dtype; -1: no statement */
    char fp8_recipe[16];      /* its FP8 scaling recipe (a name of ts_fp8_recipe_names), "" none */
} ts_stack;

/* The unrestricted stack: every schedule, policy and dimension, the system's overlaps. Library
 * callers that never name a stack get it; the CLI's default is megatron-core. */
void ts_stack_defaults(ts_stack *s);

/* Zoo name ("megatron-core", looked up in models/stacks/) or path; the name tables (NULL-
 * terminated) give the meaning of the schedule and recompute masks. TS_ERR_INPUT with one line
 * naming the file and the field on bad input. */
ts_status ts_stack_load(const char *name_or_path, const char *const *schedule_names,
                        const char *const *recompute_names, ts_stack *out);
ts_status ts_stack_from_json(const char *file, const cJSON *root, const char *const *schedule_names,
                             const char *const *recompute_names, ts_stack *out);

#endif
