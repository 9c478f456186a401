/* The problem flags plan, sim, sweep, export, run and report share: parsing, checking and loading
 * them, the one plan made under them (in memory, or in a private temporary file for a reader by
 * path), the layout plan picks, and their help (see cli.h). */
#include "cli/cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/interrupt.h"
#include "common/json.h"
#include "common/output.h"
#include "planner/stack_rules.h"
#include "reports/budget.h"
#include "reports/ranking.h"

void cli_problem_args_init(cli_problem_args *a) {
    memset(a, 0, sizeof *a);
    ts_train_defaults(&a->train);
    ts_search_opts_defaults(&a->search);
    ts_partition_opts_defaults(&a->partition);
    a->stack = "megatron-core";
    a->train.mem_headroom_frac = TS_MEM_HEADROOM_DEFAULT_FRAC;
}

/* --mem-headroom X: a fraction of the usable memory below 1, gigabytes from 1 on. */
static void parse_headroom(const char *cmd, const char *arg, ts_train *t) {
    double x = cli_num(cmd, "--mem-headroom", arg, 0, 1e6);
    t->mem_headroom_frac = x < 1 ? x : 0;
    t->mem_headroom_bytes = x < 1 ? 0 : x * 1e9;
}

/* --attention-backend fused|flash|unfused, as Megatron-LM's flag names them. */
static void parse_attn_backend(const char *cmd, const char *arg, ts_train *t) {
    static const char *const names[] = {"fused", "flash", "unfused", NULL};
    int found = cli_enum(cmd, "--attention-backend", arg, names);
    t->flash_attention = found != 2;
    t->attn_backend = found == 1 ? TS_ATTN_FLASH : TS_ATTN_FUSED;
}

/* A comma-separated list of `names` -> a bit per name; an unknown one is refused listing `expected`. */
static unsigned parse_name_set(const char *cmd, const char *flag, const char *list, const char *const *names,
                               const char *expected) {
    cli_list_check(cmd, flag, list);
    char buf[256];
    if (snprintf(buf, sizeof buf, "%s", list) >= (int)sizeof buf) cli_usage_error(cmd, "%s: list too long", flag);
    unsigned mask = 0;
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        int found = cli_name_index(names, item);
        if (found < 0) cli_usage_error(cmd, "%s: expected a list of %s, got \"%s\"", flag, expected, item);
        mask |= 1u << found;
    }
    return mask;
}

/* "1f1b,interleaved" -> a bit per schedule. */
static unsigned parse_schedules(const char *cmd, const char *list) {
    unsigned mask = parse_name_set(cmd, "--schedules", list, ts_schedule_names,
                                   "gpipe, 1f1b, interleaved, zb-h1, dualpipe, zb-v");
    if (!mask) cli_usage_error(cmd, "--schedules: expected at least one schedule");
    return mask;
}

int cli_problem_arg(const char *cmd, int c, const char *arg, cli_problem_args *a) {
    int found;
    switch (c) {
    case 'm': a->model = arg, a->given = "--model"; break;
    case 's': a->system = arg, a->given = "--system"; break;
    case 'g': a->gpus = (int)cli_int(cmd, "--gpus", arg, 1, 1 << 24), a->given = "--gpus"; break;
    case 'b':
        a->train.global_batch = cli_int(cmd, "--global-batch", arg, 1, 1 << 30);
        a->given = "--global-batch";
        break;
    case 'l':
        a->train.seq = cli_int(cmd, "--seq", arg, 1, 1LL << 27);
        a->seq_given = 1, a->given = "--seq";
        break;
    case 'f': a->fix = arg, a->given = "--fix"; break;
    case CLI_OPT_OBJECTIVE:
        found = cli_enum(cmd, "--objective", arg, ts_objective_names);
        a->search.objective = (ts_objective)found, a->given = "--objective";
        break;
    case CLI_OPT_DTYPE:
        found = cli_enum(cmd, "--dtype", arg, ts_dtype_names);
        ts_train_set_dtype(&a->train, (ts_dtype)found);
        a->given = "--dtype", a->given_mask |= TS_GIVEN_DTYPE;
        break;
    case CLI_OPT_FP8_RECIPE:
        found = cli_enum(cmd, "--fp8-recipe", arg, ts_fp8_recipe_names);
        a->train.fp8_recipe = (ts_fp8_recipe)found, a->given = "--fp8-recipe", a->given_mask |= TS_GIVEN_FP8_RECIPE;
        break;
    case CLI_OPT_FP8_ATTN: a->train.fp8_attention = 1, a->given = "--fp8-attention"; break;
    case CLI_OPT_FP8_PARAM_GATHER: a->train.fp8_param_gather = 1, a->given = "--fp8-param-gather"; break;
    case CLI_OPT_SCHEDULES: a->search.schedules = parse_schedules(cmd, arg), a->given = "--schedules"; break;
    case CLI_OPT_NO_FLASH: a->train.flash_attention = 0, a->given = "--no-flash-attn"; break;
    case CLI_OPT_ATTN_BACKEND: parse_attn_backend(cmd, arg, &a->train), a->given = "--attention-backend"; break;
    case CLI_OPT_CROSS_ENTROPY:
        a->train.ce_fusion = cli_enum(cmd, "--cross-entropy", arg, ts_ce_names) == 0;
        a->given = "--cross-entropy";
        break;
    case CLI_OPT_CP_KIND:
        a->train.cp_kind = (ts_cp_kind)cli_enum(cmd, "--cp-kind", arg, ts_cp_kind_names);
        a->given = "--cp-kind";
        break;
    case CLI_OPT_MOE_DISPATCHER:
        a->train.moe_dispatcher = (ts_moe_dispatcher)cli_enum(cmd, "--moe-dispatcher", arg, ts_moe_dispatcher_names);
        a->given = "--moe-dispatcher";
        break;
    case CLI_OPT_MOE_OVERLAP:
        a->train.moe_a2a_overlap = cli_num(cmd, "--moe-a2a-overlap", arg, 0, 1);
        a->given = "--moe-a2a-overlap", a->given_mask |= TS_GIVEN_MOE_A2A_OVERLAP;
        break;
    case CLI_OPT_MOE_FP8_DISPATCH: a->train.moe_fp8_dispatch = 1, a->given = "--moe-fp8-dispatch"; break;
    case CLI_OPT_NO_GROUPED_GEMM: a->train.moe_grouped_gemm = 0, a->given = "--no-moe-grouped-gemm"; break;
    case CLI_OPT_MOE_COMBINED:
        a->train.moe_combined_1f1b = 1, a->given = "--overlap-moe-expert-parallel-comm";
        break;
    case CLI_OPT_MOE_SHARED_OVERLAP:
        a->train.moe_shared_expert_overlap = 1, a->given = "--moe-shared-expert-overlap";
        break;
    case CLI_OPT_RECOMPUTE_MODULES:
        a->train.recompute_modules = parse_name_set(cmd, "--recompute-modules", arg, ts_recompute_module_names,
                                                    "core_attn, mla_up_proj, layernorm, mlp, moe_act, shared_experts, moe");
        a->given = "--recompute-modules";
        break;
    case CLI_OPT_ACROSS: a->train.tp_across_nodes = 1, a->given = "--tp-across-nodes"; break;
    case CLI_OPT_NO_PRUNE: a->search.prune = 0, a->given = "--no-prune"; break;
    case CLI_OPT_STACK: a->stack = arg, a->stack_given = 1, a->given = "--stack"; break;
    case CLI_OPT_HEADROOM: parse_headroom(cmd, arg, &a->train), a->given = "--mem-headroom"; break;
    case CLI_OPT_MAX_SLOWDOWN:
        a->search.max_slowdown = cli_num(cmd, "--max-slowdown", arg, 1, INFINITY);
        a->given = "--max-slowdown", a->max_slowdown_given = 1;
        break;
    case CLI_OPT_GPUS_MAX:
        a->budget.gpus_max = (int)cli_int(cmd, "--gpus-max", arg, 1, 1 << 24), a->given = "--gpus-max";
        break;
    case CLI_OPT_BATCH_TOL:
        a->budget.batch_tolerance = cli_fraction(cmd, "--batch-tolerance", arg, 0, 0.5);
        a->given = "--batch-tolerance";
        break;
    case CLI_OPT_PARTITION:
        a->partition.mode = (ts_partition_mode)cli_enum(cmd, "--partition", arg, ts_partition_mode_names);
        a->given = "--partition";
        break;
    case CLI_OPT_PARTITION_NODES:
        a->partition.node_limit = a->partition.node_limit_max = (long)cli_int(cmd, "--partition-node-limit", arg, 1, 1L << 30);
        a->given = "--partition-node-limit";
        break;
    case CLI_OPT_PARTITION_OBJECTIVE:
        found = cli_enum(cmd, "--partition-objective", arg, ts_partition_objective_names);
        a->partition.objective = (ts_partition_objective)found, a->given = "--partition-objective";
        break;
    default: return 0;
    }
    return 1;
}

/* Whether every one of the systems runs dtype (a tensor-core peak for it). */
static int systems_run_dtype(const ts_system *systems, int n_systems, int dtype) {
    for (int i = 0; i < n_systems; i++)
        if (!(systems[i].peak_flops[dtype] > 0)) return 0;
    return n_systems > 0;
}

void cli_problem_load_stack(const char *cmd, cli_problem_args *a, const ts_system *systems, int n_systems) {
    ts_stack *sk = &a->train.stack;
    ts_status st = ts_stack_load(a->stack, ts_schedule_names, ts_recompute_names, sk);
    if (st != TS_OK) cli_fail(cmd, st);
    unsigned keep = a->given_mask;
    const char *why = a->stack_given ? NULL : ts_stack_refuses_pins(sk, &a->search.pins);
    if (why) { /* the default cannot run the pins: price them on a stack that can, and say so */
        char default_name[64];
        snprintf(default_name, sizeof default_name, "%s", sk->name);
        int found = 0;
        st = ts_stack_for_pins(&a->search.pins, sk, &found);
        if (st != TS_OK) cli_fail(cmd, st);
        /* The stack's precision comes with it (DeepSeek-V3's DualPipe is priced as it trained, in
         * FP8) unless --dtype is given or a system lacks that precision. */
        int own = found && sk->dtype >= 0 && !(keep & TS_GIVEN_DTYPE);
        int runs = own && systems_run_dtype(systems, n_systems, sk->dtype);
        if (found)
            snprintf(a->stack_note, sizeof a->stack_note,
                     "tessera %s: warning: the default stack %s cannot run the pins (%s); priced with the %s stack, "
                     "which runs them%s%s%s (--dtype, --stack NAME to choose)\n",
                     cmd, default_name, why, sk->name, own ? (runs ? ", in its precision " : "; its precision ") : "",
                     own ? ts_dtype_names[sk->dtype] : "", own && !runs ? " is not on every system, so not taken" : "");
        if (!runs) keep |= TS_GIVEN_DTYPE | TS_GIVEN_FP8_RECIPE;
    }
    /* what the stack states is the default; a flag given overrides it */
    st = ts_stack_train_defaults(sk, keep, &a->train);
    if (st != TS_OK) cli_fail(cmd, st);
}

/* The FP8 flags need fp8, given or the stack's default; the MoE flags a model with experts;
 * --max-slowdown needs --objective memory. Each would otherwise change nothing, unsaid. */
static void check_flag_needs(const char *cmd, const cli_problem_args *a, const ts_model *m) {
    const ts_train *t = &a->train;
    const char *moe = t->moe_dispatcher != TS_MOE_DISPATCH_AUTO                ? "--moe-dispatcher"
                      : (a->given_mask & TS_GIVEN_MOE_A2A_OVERLAP) ? "--moe-a2a-overlap"
                      : t->moe_fp8_dispatch                           ? "--moe-fp8-dispatch"
                      : !t->moe_grouped_gemm                          ? "--no-moe-grouped-gemm"
                      : t->moe_combined_1f1b                          ? "--overlap-moe-expert-parallel-comm"
                      : t->moe_shared_expert_overlap                  ? "--moe-shared-expert-overlap"
                                                                      : NULL;
    if (moe && m->moe.experts == 0) cli_usage_error(cmd, "%s needs a MoE model, %s is dense", moe, m->name);
    if (t->moe_shared_expert_overlap && m->moe.experts > 0 && m->moe.shared_experts == 0)
        cli_usage_error(cmd, "--moe-shared-expert-overlap needs shared experts, %s has none", m->name);
    if (t->moe_shared_expert_overlap && t->moe_combined_1f1b) /* Megatron-Core asserts it */
        cli_usage_error(cmd, "--moe-shared-expert-overlap and --overlap-moe-expert-parallel-comm exclude each other "
                             "(Megatron-Core: \"disable moe_shared_expert_overlap when enabling "
                             "overlap_moe_expert_parallel_comm\")");
    /* combined 1F1B hides the all-to-all by its pairing; a fraction on top would hide it twice */
    if (t->moe_combined_1f1b && t->moe_a2a_overlap > 0)
        cli_usage_error(cmd, "--overlap-moe-expert-parallel-comm prices the EP overlap by its pairs: it takes "
                             "--moe-a2a-overlap 0, got %g%s", t->moe_a2a_overlap,
                        a->given_mask & TS_GIVEN_MOE_A2A_OVERLAP ? "" : " (the stack's)");
    const char *flag = t->fp8_attention ? "--fp8-attention"
                       : t->fp8_param_gather ? "--fp8-param-gather"
                       : (a->given_mask & TS_GIVEN_FP8_RECIPE) && t->fp8_recipe != TS_FP8_DELAYED ? "--fp8-recipe"
                                                                                                 : NULL;
    if (flag && t->dtype != TS_DTYPE_FP8)
        cli_usage_error(cmd, "%s needs --dtype fp8, got --dtype %s", flag, ts_dtype_names[t->dtype]);
    if (a->max_slowdown_given && a->search.objective != TS_OBJ_MEMORY) /* it bounds that objective alone */
        cli_usage_error(cmd, "--max-slowdown needs --objective memory, got --objective %s",
                        ts_objective_names[a->search.objective]);
}

void cli_problem_load(const char *cmd, cli_problem_args *a, ts_problem *pb) {
    if (!a->model) cli_usage_error(cmd, "--model is required");
    if (!a->system) cli_usage_error(cmd, "--system is required");
    if (!a->gpus) cli_usage_error(cmd, "--gpus is required");
    ts_status st = TS_OK;
    if (a->fix) st = ts_pins_parse("--fix", a->fix, &a->search.pins);
    if (st != TS_OK) cli_fail(cmd, st);
    ts_model m;
    ts_system s;
    st = ts_model_load(a->model, &m);
    if (st == TS_OK) st = ts_system_load(a->system, &s);
    if (st == TS_OK) cli_problem_load_stack(cmd, a, &s, 1);
    if (st == TS_OK) check_flag_needs(cmd, a, &m);
    if (st == TS_OK && !a->seq_given && a->train.seq > m.max_seq) a->train.seq = m.max_seq;
    if (st == TS_OK) st = ts_problem_init(pb, &m, &s, &a->train, a->gpus);
    if (st != TS_OK) cli_fail(cmd, st);
}

void cli_problem_plan(const char *cmd, cli_problem_args *a, const ts_ranking_opts *ro, cli_plan *out) {
    memset(out, 0, sizeof *out);
    ts_budget_opts bo = a->budget;
    if (bo.gpus_max && a->gpus) cli_usage_error(cmd, "--gpus and --gpus-max exclude each other");
    int use_budget = bo.gpus_max || bo.batch_tolerance > 0;
    if (!bo.gpus_max) bo.gpus_max = a->gpus, bo.exact_gpus = 1;
    else a->gpus = bo.gpus_max;
    cli_problem_load(cmd, a, &out->pb);
    out->ro = *ro;
    out->ro.fix = a->fix;
    out->ro.partition = a->partition;
    a->budget = bo;
    ts_status st = TS_OK;
    if (use_budget) { /* the plan is made on the budget's pick */
        out->batch_requested = out->pb.train.global_batch;
        st = ts_budget_search(&out->pb, &a->search, &a->partition, &bo, &out->budget);
        ts_problem base = out->pb;
        if (st == TS_OK) base.train.global_batch = out->budget.choices[0].global_batch;
        if (st == TS_OK) st = ts_problem_init(&out->pb, &base.model, &base.sys, &base.train, out->budget.choices[0].gpus);
    }
    if (st == TS_OK) st = ts_ranking_make(&out->pb, &a->search, &out->ro, &out->r);
    if (out->r.search.partition_errors) /* also on stderr: with --json the table's note is not printed */
        fprintf(stderr, "tessera %s: warning: GLPK failed on %d layouts, which keep their even split: %s\n", cmd,
                out->r.search.partition_errors, out->r.search.partition_error);
    if (st != TS_OK) {
        cli_plan_free(out);
        cli_fail(cmd, st);
    }
    /* warnings only once the plan is made, so that an error stays one line */
    cli_warn_context_extension(cmd, &out->pb.model, out->pb.train.seq);
    if (out->r.search.n_best > 0) cli_warn_stack(cmd, a, &out->pb, &out->r.search.best[0].layout);
}

ts_status cli_plan_json(const cli_plan *p, const cli_problem_args *a, cJSON **out) {
    TS_CHECK(ts_ranking_json(&p->pb, &a->search, &p->ro, &p->r, out));
    ts_status st = TS_OK;
    if (p->budget.n) st = ts_budget_add_json(*out, p->batch_requested, &a->budget, &p->budget);
    if (st != TS_OK) {
        cJSON_Delete(*out);
        *out = NULL;
    }
    return st;
}

void cli_plan_free(cli_plan *p) {
    ts_ranking_free(&p->r);
    ts_budget_result_free(&p->budget);
}

/* The one temporary plan file of this process, removed at exit (and by the signal handler of
 * common/interrupt.h through common/output.h's registry). */
static char temp_plan[4096];

void cli_plan_temp_remove(void) { ts_output_temp_remove(temp_plan); }

const char *cli_problem_plan_file(const char *cmd, cli_problem_args *a) {
    ts_interrupt_install(cmd, "planning", TS_INTERRUPT_EXIT); /* removes the file once written */
    ts_ranking_opts ro;
    ts_ranking_opts_defaults(&ro);
    cli_plan p;
    cli_problem_plan(cmd, a, &ro, &p);
    cJSON *root = NULL;
    char *text = NULL;
    ts_status st = cli_plan_json(&p, a, &root);
    cli_plan_free(&p);
    if (st == TS_OK) {
        text = cJSON_PrintUnformatted(root);
        if (text == NULL) st = TS_FAIL(TS_ERR_NOMEM, "out of memory for the plan");
    }
    if (st == TS_OK && atexit(cli_plan_temp_remove) != 0) st = TS_FAIL(TS_ERR_NOMEM, "atexit: no room");
    if (st == TS_OK) st = ts_output_temp_write("tessera-plan", text, strlen(text), temp_plan, sizeof temp_plan);
    free(text);
    cJSON_Delete(root);
    if (st != TS_OK) cli_fail(cmd, st);
    return temp_plan;
}

void cli_problem_pick(const char *cmd, cli_problem_args *a, ts_problem *pb, ts_layout *layout, double *step_s,
                      ts_split *split, int *has_split) {
    ts_ranking_opts ro;
    ts_ranking_opts_defaults(&ro);
    ro.order_only = 1; /* sim and export read the pick alone: no band that cannot change it */
    a->search.top_k = 1;
    cli_plan p;
    cli_problem_plan(cmd, a, &ro, &p);
    ts_status st = TS_OK;
    *has_split = 0;
    if (p.r.search.splits && p.r.search.splits[0].pp > 0) {
        st = ts_split_copy(split, &p.r.search.splits[0]);
        *has_split = st == TS_OK;
    }
    *pb = p.pb;
    *layout = p.r.search.best[0].layout;
    *step_s = p.r.search.best[0].step_s;
    cli_plan_free(&p);
    if (st != TS_OK) cli_fail(cmd, st);
}

void cli_warn_context_extension(const char *cmd, const ts_model *m, int64_t seq) {
    if (ts_seq_extends(m, seq) > 0)
        fprintf(stderr,
                "tessera %s: warning: --seq %lld is beyond %s's max_seq %lld: planned as context extension "
                "(%s positions; the model is trained further at this length)\n",
                cmd, (long long)seq, m->name, (long long)m->max_seq, ts_position_names[m->position]);
}

void cli_problem_help(void) {
    printf("  -m, --model M          zoo name (tessera models), model JSON or Hugging Face config.json\n"
           "  -s, --system S         zoo name (tessera systems) or system JSON\n"
           "  -g, --gpus N           number of GPUs (k = ×1024)\n"
           "  -b, --global-batch B   sequences per step (default 1024)\n"
           "  -l, --seq L            tokens per sequence (default 4096, at most the model's max_seq;\n"
           "                         beyond it with RoPE or ALiBi: context extension, a warning)\n"
           "  -f, --fix PINS         pin fields, e.g. tp=8,pp=16,cp=2,vpp=5,mbs=1,sched=interleaved\n"
           "      --schedules LIST   schedules to consider, e.g. 1f1b,interleaved (default: all but dualpipe, zb-v)\n"
           "      --objective O      time (default) | memory: the least memory within --max-slowdown\n"
           "                         of the fastest | cost: GPU-seconds per token (with --gpus-max,\n"
           "                         the cheapest count within the budget)\n"
           "      --max-slowdown F   with --objective memory: at most F × the fastest step time\n"
           "                         (default 1.10; inf: least memory at any speed)\n"
           "      --dtype D          bf16 (default) | fp16 | fp8 | fp32\n"
           "      --fp8-recipe R     with --dtype fp8: delayed (default) | tensorwise | mxfp8 (B200) |\n"
           "                         blockwise (1x128 / 128x128 scales, DeepSeek-V3)\n"
           "      --fp8-attention    with --dtype fp8: the fused attention in FP8 too (default BF16)\n"
           "      --fp8-param-gather with --dtype fp8: FP8 primary weights, all-gathered in FP8\n"
           "      --no-flash-attn    unfused attention (s×s scores in memory), as in 2021 Megatron-LM\n"
           "      --attention-backend B  fused (default: cuDNN) | flash (FlashAttention-2, as recipes\n"
           "                         with NVTE_FUSED_ATTN=0 run) | unfused (= --no-flash-attn)\n"
           "      --cross-entropy C  the loss: fused (Megatron-LM --cross-entropy-loss-fusion) |\n"
           "                         unfused (fp32 passes); default: the stack's (megatron-core fused)\n"
           "      --cp-kind K        context parallelism's exchange: ring (default: K/V blocks around\n"
           "                         the ring beside the attention) | allgather (Llama 3) | a2a (Ulysses)\n"
           "      --moe-dispatcher D MoE tokens to experts: auto (default: deepep for node-limited\n"
           "                         routers, else alltoall) | alltoall | allgather | deepep\n"
           "      --moe-a2a-overlap F  fraction of the EP dispatch/combine hidden under compute\n"
           "                         (default 0, as Megatron-Core without EP overlap)\n"
           "      --moe-fp8-dispatch dispatch tokens in FP8 (default: with --dtype fp8 and deepep)\n"
           "      --no-moe-grouped-gemm  the local experts one GEMM after another (Megatron-Core's\n"
           "                         SequentialMLP) instead of one grouped GEMM\n"
           "      --overlap-moe-expert-parallel-comm  Megatron-Core's combined 1F1B: each forward\n"
           "                         paired with an earlier micro-batch's backward, one's EP\n"
           "                         dispatch and combine beside the other's computation (ep > 1;\n"
           "                         pp=1 or sched=interleaved; not with recompute=full)\n"
           "      --moe-shared-expert-overlap  Megatron-Core's: the shared experts beside the EP\n"
           "                         dispatch and combine (alltoall dispatcher)\n"
           "      --recompute-modules LIST  what recompute=selective recomputes, as Megatron-Core's\n"
           "                         --recompute-modules: core_attn (default), mla_up_proj, layernorm,\n"
           "                         mlp, moe_act, shared_experts, moe, e.g. mla_up_proj,mlp\n"
           "      --tp-across-nodes  allow TP groups larger than a node\n"
           "      --no-prune         evaluate every layout (no branch and bound; same answer, slower)\n"
           "      --stack NAME       software stack (models/stacks/): megatron-core (default),\n"
           "                         megatron-lm-2021, megatron-deepspeed, deepspeed, torchtitan,\n"
           "                         deepseek-v3, or\n"
           "                         a JSON file; only layouts it runs are ranked, priced with its\n"
           "                         overlaps, attention kernels and gradient-reduction dtype\n"
           "      --mem-headroom X   memory kept free below the usable bytes: a fraction of them\n"
           "                         (< 1) or GB (>= 1); default 0.10 (allocator fragmentation)\n");
    cli_partition_help();
}

void cli_layout_help(void) {
    cli_problem_help();
    printf("      --gpus-max N       a budget instead of --gpus: the best layouts on at most N GPUs\n"
           "                         (whole nodes below N), saying how many GPUs stay idle\n"
           "      --batch-tolerance T  let the global batch move by up to T (5%% or 0.05) to the\n"
           "                         nearest batches the layouts divide, saying by how much\n");
}

void cli_warn_stack(const char *cmd, const cli_problem_args *a, const ts_problem *pb, const ts_layout *l) {
    fputs(a->stack_note, stderr);
    char why[512];
    if (ts_stack_refusal(&pb->train.stack, l, 0, why, sizeof why))
        fprintf(stderr, "tessera %s: warning: pinned: %s; --stack NAME for one that runs it\n", cmd, why);
}

void cli_partition_help(void) {
    printf("      --partition MODE   uniform | ilp | auto (default): uneven pipeline stages and a\n"
           "                         recompute policy per stage, by a GLPK integer program over the\n"
           "                         best layouts and those that do not fit evenly (ilp also finds\n"
           "                         interleavings whose pp×vpp does not divide the layers); auto\n"
           "                         does it when the model mixes dense and MoE layers, nothing fits\n"
           "                         evenly, the pins leave no even layout, or a best layout's even\n"
           "                         split recomputes or has a stage slower than the rest by more\n"
           "                         than a layer\n"
           "      --partition-objective O  stage (default): the slowest stage's time per\n"
           "                         micro-batch; step: the step with its bubble, which may take a\n"
           "                         slightly slower slowest stage for less recompute elsewhere\n"
           "      --partition-node-limit N  GLPK's branch-and-bound nodes per layout (default %d;\n"
           "                         a count, not a time: the same answer on a busy machine); a\n"
           "                         split found when it strikes is marked node-limit, not optimal\n",
           TS_PART_DEFAULT_NODES);
}

