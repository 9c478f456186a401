/* A training system: GPUs, the node they sit in, and the fabric between nodes, with the
 * efficiencies that real software achieves on them.
 *
 * Loaded from models/systems/NAME.json (schema in README "File formats"); every figure may be
 * written as {"value": x, "source": "..."}. `tessera calibrate` writes the same schema from measurements.
 * Efficiencies live here, never in code: the cost model reads them from this struct. A ts_system
 * is a plain value (no heap memory, no _free). */
#ifndef TS_SYSTEM_H
#define TS_SYSTEM_H

#include <cjson/cJSON.h>

#include "common/status.h"
#include "models/coll.h"

typedef enum { TS_DTYPE_BF16, TS_DTYPE_FP16, TS_DTYPE_FP8, TS_DTYPE_FP32, TS_DTYPE_COUNT } ts_dtype;
extern const char *const ts_dtype_names[]; /* "bf16", "fp16", "fp8", "fp32"; NULL-terminated */

#define TS_EFF_POINTS_MAX 16
#define TS_TIERS_MAX 3 /* leaf, spine, core */

/* One tier of a switched scale-out fabric (leaf, spine, core). Traffic between two GPUs climbs to
 * the lowest tier whose switch group holds both. Tier k's `gpus` is how many GPUs one of its
 * switch groups reaches (blocks of consecutive GPUs; 0 on the top tier: all of them; on a
 * rail-optimised fabric the leaf's group is the rail group: NIC i of each of its nodes on leaf i);
 * `oversubscription` (>= 1) is the ratio of the bandwidth entering tier k from below to what
 * tier k carries on (leaf downlinks : uplinks for the spine), so traffic reaching tier k gets
 * nic_bytes_per_s / (o_0 · ... · o_k) per GPU when every GPU below drives it (the lockstep
 * collectives of data parallelism); `latency_s` is what one crossing of tier k adds (switch
 * hops and cable) to the fabric's base latency. docs/systems.md gives the model and sources. */
typedef struct {
    char name[16];
    int gpus;
    double oversubscription;
    double latency_s;
} ts_tier;

/* GEMM efficiency (achieved / peak) as a function of one GEMM's FLOPs (2*m*n*k): piecewise
 * linear in log10(flops) between points, flat outside. Fitted to published or measured GEMM
 * throughput; the system file says which. */
typedef struct {
    int n;
    double flops[TS_EFF_POINTS_MAX];
    double eff[TS_EFF_POINTS_MAX];
} ts_eff_curve;

typedef struct {
    char name[64];
    char source[256];

    /* GPU */
    char gpu_name[64];
    double hbm_bytes;                    /* device memory */
    double hbm_bytes_per_s;              /* peak HBM bandwidth */
    double peak_flops[TS_DTYPE_COUNT];   /* dense tensor-core peak per dtype; 0 = unsupported */
    double power_w;                      /* board power, 0 = unknown */
    int sms;                             /* streaming multiprocessors, 0 = not stated */
    double kernel_latency_s;             /* fixed time of one memory-bound or attention kernel
                                            beyond its bytes or FLOPs (launch, ramp-up); 0: none */
    int mxfp8;                           /* tensor cores run block-scaled MXFP8 (Blackwell) */
    int fp8_any_layout;                  /* FP8 GEMMs take any operand layout, not only TN
                                            (compute capability 10.x): tensor-scaled FP8 keeps no
                                            transposed copies (program/recipe.c) */
    double peak_fp4_flops;               /* dense FP4 (NVFP4 / MXFP4) tensor peak, 0 = none;
                                            reported, never trained in */

    /* node: the host (CPU memory, NICs, CPU cores); the scale-up domain may be larger */
    int gpus_per_node;
    int domain_gpus;         /* GPUs sharing the NVLink / Infinity Fabric domain (72 on an
                                NVL72 rack); gpus_per_node unless the file has a "domain" */
    double link_bytes_per_s; /* scale-up link per GPU, one direction (the domain's) */
    double link_latency_s;
    int cores_per_node;        /* CPU cores the node's ranks share; 0: a device per rank */
    double speed_cv;           /* coefficient of variation of ranks' compute times over the same
                                  span (a shared machine's noise; 0: steady); planner/cost.h
                                  ts_lockstep_scale */
    double speed_cv_window_s;  /* the span speed_cv holds for (0: any) */
    double speed_cv_decay;     /* over a span w the spread is speed_cv · (w / window)^-decay */
    double sync_jitter_s;      /* standard deviation of the instant a rank reaches a blocking
                                  collective that spans model replicas, beyond what its TP×CP
                                  group's own collectives already cost (0: none); planner/cost.h
                                  ts_sync_wait_s */
    double gauge_flops_per_s;  /* the speed gauge's reading (exec/speed_gauge.h) while this spec
                                  was measured, 0 unknown: the speed its compute figures hold at;
                                  tessera compare scales measured times to it */

    /* fabric between nodes */
    double nic_bytes_per_s; /* per GPU, one direction */
    double nic_latency_s;
    int rail_optimized;     /* GPU i of every node of a rail group shares a leaf switch, so
                               tiers[0].gpus is the rail group (docs/systems.md) */
    int n_tiers;            /* 0: a flat fabric (every crossing at nic_bytes_per_s) */
    ts_tier tiers[TS_TIERS_MAX];

    /* what it costs to run (reports and sweeps; never the step time) */
    double price_per_gpu_hour; /* USD, 0 = not given */
    int price_is_example;      /* an illustrative price, not a published one */
    double rack_power_w;       /* power of one rack or node as sold, 0 = unknown */
    int rack_gpus;             /* GPUs that rack_power_w feeds */

    /* what software achieves */
    ts_eff_curve gemm_eff;
    ts_eff_curve gemm_eff_bf16; /* 16-bit GEMMs (bf16, fp16; efficiency vs their peak) where measured
                                   apart from gemm_eff (a GPU calibration's bf16 grid beside its
                                   fp32 one); n = 0: gemm_eff serves them */
    ts_eff_curve gemm_eff_fp8; /* FP8 GEMMs (efficiency vs the FP8 peak); n = 0: none given, FP8
                                  GEMMs use gemm_eff scaled (planner/cost.h ts_gemm_eff) */
    double gemm_fp8_bwd_eff;   /* the backward's FP8 GEMMs (dgrad, wgrad) against that curve, where
                                  they run slower than the forward's (Hopper: split accumulation);
                                  0: as the curve */
    double attention_eff;      /* fused attention's FLOP efficiency vs peak (the default kernel:
                                  cuDNN on Hopper and later, FlashAttention-2 before) */
    double attention_flash_eff; /* the FlashAttention-2 package's, where it differs (Hopper: FA2
                                   does not use its asynchronous tensor cores); 0: as attention_eff */
    double hbm_eff;            /* fraction of HBM bandwidth memory-bound kernels reach */
    double optimizer_eff;      /* the optimizer step's bandwidth over the other memory-bound
                                  kernels' (1 on GPUs; CPU ranks measure it in situ) */
    double link_busbw_eff;     /* NCCL bus bandwidth / link bandwidth inside a node */
    double nic_busbw_eff;      /* NCCL bus bandwidth / NIC bandwidth across nodes */
    double overlap_slowdown;   /* compute slows by this fraction while communication overlaps */
    double coll_busbw[TS_COLL_COUNT]; /* per collective kind, a factor on the links' bus bandwidth
                                         (efficiency.collective_busbw; 0 or 1: NCCL's kinds run at
                                         one bus bandwidth, nccl-tests' busbw; CPU ranks' MPI
                                         reductions are slower, tessera calibrate fits each) */
    double tp_comm_overlap;    /* fraction of TP communication hidden behind GEMMs */
    double dp_comm_overlap;    /* fraction of the overlappable window DP/ZeRO traffic can use */
    double pp_comm_overlap;    /* fraction of interleaving's extra pipeline transfers hidden */
    int serial_ops;            /* a rank runs one op at a time: no communication overlaps compute
                                  (CPU ranks with blocking MPI) */

    /* memory the model cannot use */
    double reserved_bytes;     /* CUDA context, NCCL and library workspaces */
    double headroom_frac;      /* allocator fragmentation reserve, fraction of hbm_bytes */
} ts_system;

/* Zoo name ("h100-sxm-dgx", looked up in models/systems/) or path. */
ts_status ts_system_load(const char *name_or_path, ts_system *out);
ts_status ts_system_from_json(const char *file, const cJSON *root, ts_system *out);
cJSON *ts_system_to_json(const ts_system *s);

/* The efficiency curve at `flops` (log-linear interpolation, clamped at the ends). */
double ts_eff_at(const ts_eff_curve *c, double flops);

/* GPUs in one scale-up domain: domain_gpus, or the node's when a spec built in code left it 0.
 * A domain may also be smaller than a node (NVLink bridges of 4 PCIe cards in an 8-card host). */
int ts_system_domain_gpus(const ts_system *s);

/* Watts per GPU at the wall of the rack (rack_power_w / rack_gpus), or the board power when the
 * rack's is unknown. */
double ts_system_power_per_gpu_w(const ts_system *s);

/* Whether the system is the executor's CPU ranks (blocking MPI, or cores shared among ranks: what
 * `tessera calibrate` writes) rather than GPUs: its ranks run Tessera's own kernels and buffers,
 * not Megatron-Core's. */
int ts_system_cpu_ranks(const ts_system *s);

/* Bytes the model may use on one GPU: hbm * (1 - headroom) - reserved. */
double ts_system_usable_bytes(const ts_system *s);

#endif
