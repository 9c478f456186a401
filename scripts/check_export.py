#!/usr/bin/env python3
"""make check-export: tessera's exports checked by the tools that run them (issue 19).

For a fixed set of plans (dense, MoE, MLA + MTP with an uneven ILP split, CP, uneven stages,
ZeRO-3, FP8) it exports each layout and checks:
  megatron         the flags line, read by a parser of the flags tessera writes (a flag it does not
                   know fails), becomes megatron-core's TransformerConfig / MLATransformerConfig and
                   ModelParallelConfig the way Megatron-LM's core_transformer_config_from_args
                   builds them (their __post_init__ validation runs), then GPTModel is built from that
                   config on the meta device (one rank: parallel sizes 1) and its parameters counted:
                   they must equal the planner's total + MTP modules exactly.
                   With MEGATRON_LM=/path/to/Megatron-LM also Megatron-LM's own parse_args and
                   validate_args on the line (optional: Megatron-LM is not on PyPI).
  megatron-bridge  the recipe file is imported, its ConfigContainer built and validate()d under the
                   plan's world size; its model provider counts the same parameters.
  deepspeed        DeepSpeedConfig(config, mpu) as deepspeed.initialize builds it under the plan's
                   world (pipeline: the PipelineModule grid's data-parallel size; AutoTP: the
                   model's mpu; otherwise the world / sequence_parallel_size), and AutoEP's
                   validate_autoep_config.
Usage: check_export.py TESSERA_BIN WORKDIR. Exit 0 when every check passes.
"""
import dataclasses
import json
import os
import shlex
import subprocess
import sys
import types
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29517")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

# The plans: name, tessera plan arguments.
CASES = [
    ("dense", "--model llama3-8b --system h100-sxm-dgx --gpus 16 --global-batch 64 --fix tp=2,pp=2,zero=1"),
    ("moe", "--model mixtral-8x7b --system h100-sxm-dgx --gpus 64 --global-batch 256 --fix tp=2,pp=2,ep=4"),
    ("mla-mtp-ilp", "--model deepseek-v3 --system h800-dgx --gpus 2048 --global-batch 4096 "
                    "--fix tp=1,pp=16,ep=64 --partition ilp"),
    ("cp", "--model llama3-8b --system h100-sxm-dgx --gpus 16 --global-batch 16 --seq 8192 "
           "--fix tp=2,sp=1,cp=2,pp=1,zero=1"),
    ("uneven", "--model llama2-7b --system h100-sxm-dgx --gpus 24 --global-batch 48 --fix tp=2,pp=3 --partition ilp"),
    ("zero3", "--model llama2-7b --system h100-sxm-dgx --gpus 8 --global-batch 64 --fix tp=1,pp=1,zero=3"),
    ("fp8", "--model llama2-70b --system h100-sxm-dgx --gpus 64 --dtype fp8 --fix tp=4,pp=4"),
    ("fp8-tensorwise", "--model llama3-8b --system h100-sxm-dgx --gpus 16 --global-batch 64 --dtype fp8 "
                       "--fp8-recipe tensorwise --fix tp=2,pp=2"),
    ("mxfp8", "--model llama3-8b --system b200-dgx --gpus 16 --global-batch 64 --dtype fp8 "
              "--fp8-recipe mxfp8 --fix tp=2,pp=2"),
    ("flash", "--model llama3-8b --system h100-sxm-dgx --gpus 16 --global-batch 64 --seq 8192 "
              "--fix tp=2,pp=2 --attention-backend flash"),
    ("interleaved", "--model llama2-13b --system h100-sxm-dgx --gpus 16 --global-batch 32 "
                    "--fix tp=2,pp=4,vpp=5,sched=interleaved,zero=0,recompute=full"),
    ("moe-combined-1f1b", "--model mixtral-8x7b --system h100-sxm-dgx --gpus 64 --global-batch 256 "
                          "--fix tp=1,pp=4,ep=8,vpp=2,sched=interleaved,recompute=none "
                          "--overlap-moe-expert-parallel-comm"),
    ("attn-gate", "--model tests/data/models/gated-gqa-1b.json --system h100-sxm-dgx --gpus 8 --global-batch 64 "
                  "--fix tp=2,pp=1"),
    ("moe-shared-overlap", "--model tests/data/hf/deepseek-moe-16b.json --system h100-sxm-dgx --gpus 64 "
                           "--global-batch 512 --moe-dispatcher alltoall --fix tp=1,pp=2,ep=16 --moe-shared-expert-overlap"),
    ("recompute-modules", "--model mixtral-8x7b --system h100-sxm-dgx --gpus 64 --global-batch 256 "
                          "--fix tp=2,pp=2,ep=4,recompute=selective --recompute-modules layernorm,moe_act,core_attn"),
]

# Flags tessera writes: name -> type (None: store_true). Their names were checked against
# Megatron-LM's parse_args (docs/export.md); an unknown flag fails the check.
FLAGS = {
    "tensor-model-parallel-size": int, "pipeline-model-parallel-size": int,
    "num-layers-per-virtual-pipeline-stage": int, "pipeline-model-parallel-layout": str,
    "decoder-first-pipeline-num-layers": int, "decoder-last-pipeline-num-layers": int,
    "sequence-parallel": None, "context-parallel-size": int, "num-experts": int, "moe-router-topk": int,
    "moe-ffn-hidden-size": int, "moe-shared-expert-intermediate-size": int, "moe-layer-freq": str,
    "moe-token-dispatcher-type": str, "moe-grouped-gemm": None, "overlap-moe-expert-parallel-comm": None, "moe-shared-expert-overlap": None, "expert-model-parallel-size": int, "expert-tensor-parallel-size": int,
    "moe-router-score-function": str, "moe-router-enable-expert-bias": None, "moe-router-num-groups": int,
    "moe-router-group-topk": int, "moe-router-topk-scaling-factor": float, "moe-expert-capacity-factor": float,
    "num-layers": int, "hidden-size": int, "ffn-hidden-size": int, "num-attention-heads": int,
    "multi-latent-attention": None, "q-lora-rank": int, "kv-lora-rank": int, "qk-head-dim": int,
    "qk-pos-emb-head-dim": int, "v-head-dim": int, "group-query-attention": None, "num-query-groups": int,
    "kv-channels": int, "qk-layernorm": None, "softmax-type": str, "attention-output-gate": None, "window-size": str,
    "window-attn-skip-freq": int, "seq-length": int, "max-position-embeddings": int,
    "position-embedding-type": str, "rotary-base": int, "swiglu": None, "squared-relu": None,
    "normalization": str, "untie-embeddings-and-output-weights": None, "disable-bias-linear": None,
    "add-qkv-bias": None, "attention-dropout": float, "hidden-dropout": float, "mtp-num-layers": int,
    "vocab-size": int, "make-vocab-size-divisible-by": int, "micro-batch-size": int, "global-batch-size": int,
    "attention-backend": str, "recompute-granularity": str, "recompute-method": str,
    "recompute-num-layers": int, "use-distributed-optimizer": None, "use-megatron-fsdp": None,
    "data-parallel-sharding-strategy": str, "ckpt-format": str, "bf16": None, "fp16": None,
    "fp8-format": str, "fp8-recipe": str, "cross-entropy-loss-fusion": None,
    "recompute-modules": list,
}

failures = []


def fail(case, what, why):
    failures.append(f"{case}: {what}: {why}")
    print(f"FAIL {case} {what}: {why}", flush=True)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def parse_flags(line):
    """The flags line as a dict (flag name with '_' -> value); unknown flags raise."""
    words, out, i = shlex.split(line), {}, 0
    while i < len(words):
        w = words[i]
        if not w.startswith("--") or w[2:] not in FLAGS:
            raise ValueError(f"unknown flag {w}")
        t = FLAGS[w[2:]]
        if t is None:
            out[w[2:].replace("-", "_")] = True
            i += 1
        elif t is list:  # nargs='*': the words up to the next flag
            j = i + 1
            while j < len(words) and not words[j].startswith("--"):
                j += 1
            out[w[2:].replace("-", "_")] = words[i + 1:j]
            i = j
        else:
            out[w[2:].replace("-", "_")] = t(words[i + 1])
            i += 2
    return out


def moe_freq(text):
    # Megatron-LM's moe_freq_type: an int, or a Python list expression.
    return eval(text, {"__builtins__": {}}) if "[" in text else int(text)  # noqa: S307


def transformer_kwargs(a):
    """megatron-core config fields from the flags, as core_transformer_config_from_args maps them."""
    kw = dict(num_layers=a["num_layers"], hidden_size=a["hidden_size"], ffn_hidden_size=a["ffn_hidden_size"],
              num_attention_heads=a["num_attention_heads"],
              num_query_groups=a.get("num_query_groups") if a.get("group_query_attention") else None,
              kv_channels=a.get("kv_channels"), normalization=a.get("normalization", "LayerNorm"),
              add_bias_linear=not a.get("disable_bias_linear", False), add_qkv_bias=a.get("add_qkv_bias", False),
              qk_layernorm=a.get("qk_layernorm", False), hidden_dropout=a.get("hidden_dropout", 0.1),
              attention_dropout=a.get("attention_dropout", 0.1), mtp_num_layers=a.get("mtp_num_layers"),
              tensor_model_parallel_size=a["tensor_model_parallel_size"],
              pipeline_model_parallel_size=a["pipeline_model_parallel_size"],
              context_parallel_size=a.get("context_parallel_size", 1),
              sequence_parallel=a.get("sequence_parallel", False),
              expert_model_parallel_size=a.get("expert_model_parallel_size", 1),
              expert_tensor_parallel_size=a.get("expert_tensor_parallel_size"),
              bf16=a.get("bf16", False), fp16=a.get("fp16", False),
              params_dtype=torch.bfloat16 if a.get("bf16") else torch.float16 if a.get("fp16") else torch.float32,
              recompute_granularity=a.get("recompute_granularity"), recompute_method=a.get("recompute_method"),
              recompute_num_layers=a.get("recompute_num_layers"), recompute_modules=a.get("recompute_modules"),
              cross_entropy_loss_fusion=a.get("cross_entropy_loss_fusion", False), use_cpu_initialization=True,
              perform_initialization=False)
    if a["pipeline_model_parallel_size"] > 1:
        kw["pipeline_dtype"] = kw["params_dtype"]
    if "num_layers_per_virtual_pipeline_stage" in a:
        per_stage = a["num_layers"] // a["pipeline_model_parallel_size"]
        kw["virtual_pipeline_model_parallel_size"] = per_stage // a["num_layers_per_virtual_pipeline_stage"]
    if "pipeline_model_parallel_layout" in a:
        kw["pipeline_model_parallel_layout"] = a["pipeline_model_parallel_layout"]
    kw["num_layers_in_first_pipeline_stage"] = a.get("decoder_first_pipeline_num_layers")
    kw["num_layers_in_last_pipeline_stage"] = a.get("decoder_last_pipeline_num_layers")
    if a.get("swiglu"):
        kw.update(gated_linear_unit=True, activation_func=F.silu)
    if a.get("fp8_format"):
        kw.update(fp8=a["fp8_format"], fp8_recipe=a.get("fp8_recipe", "delayed"))
    if a.get("attention_backend"):
        from megatron.core.transformer.enums import AttnBackend
        kw["attention_backend"] = AttnBackend[a["attention_backend"]]
    if a.get("softmax_type"):
        kw["softmax_type"] = a["softmax_type"]
    if a.get("attention_output_gate"):
        kw["attention_output_gate"] = True
    if a.get("window_size"):
        kw["window_size"] = tuple(int(v) for v in a["window_size"].strip("()").split(","))
        kw["window_attn_skip_freq"] = a.get("window_attn_skip_freq")
    if a.get("num_experts"):
        kw.update(num_moe_experts=a["num_experts"], moe_router_topk=a["moe_router_topk"],
                  moe_ffn_hidden_size=a.get("moe_ffn_hidden_size"),
                  moe_shared_expert_intermediate_size=a.get("moe_shared_expert_intermediate_size"),
                  moe_layer_freq=moe_freq(a.get("moe_layer_freq", "1")),
                  moe_token_dispatcher_type=a.get("moe_token_dispatcher_type", "allgather"),
                  moe_grouped_gemm=a.get("moe_grouped_gemm", False),
                  moe_router_score_function=a.get("moe_router_score_function", "softmax"),
                  moe_router_enable_expert_bias=a.get("moe_router_enable_expert_bias", False),
                  moe_router_num_groups=a.get("moe_router_num_groups"),
                  moe_router_group_topk=a.get("moe_router_group_topk"),
                  moe_router_topk_scaling_factor=a.get("moe_router_topk_scaling_factor"),
                  moe_expert_capacity_factor=a.get("moe_expert_capacity_factor"),
                  overlap_moe_expert_parallel_comm=a.get("overlap_moe_expert_parallel_comm", False),
                  moe_shared_expert_overlap=a.get("moe_shared_expert_overlap", False))
    if a.get("multi_latent_attention"):
        kw.update(multi_latent_attention=True, q_lora_rank=a.get("q_lora_rank"), kv_lora_rank=a["kv_lora_rank"],
                  qk_head_dim=a["qk_head_dim"], qk_pos_emb_head_dim=a["qk_pos_emb_head_dim"],
                  v_head_dim=a["v_head_dim"], rotary_base=a.get("rotary_base", 10000))
    return kw


_dist_ready = False


def count_params(cfg, vocab, untie, seq, position):
    """Parameters of megatron-core's GPTModel for `cfg` on one rank, built on the meta device with
    the local (non-Transformer-Engine) layer specs."""
    global _dist_ready
    import torch.distributed as dist
    from megatron.core import parallel_state as ps
    import megatron.core.transformer.multi_latent_attention as mla_mod
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec, get_gpt_mtp_block_spec
    if not _dist_ready:
        dist.init_process_group("gloo", rank=0, world_size=1)
        ps.initialize_model_parallel(1, 1)
        _dist_ready = True
    # CPU only: rotary tables ask torch.cuda for a device; MLA probes Transformer Engine classes.
    torch.cuda.current_device = lambda: "cpu"
    mla_mod.HAVE_TE = False
    one = dataclasses.replace(
        cfg, tensor_model_parallel_size=1, pipeline_model_parallel_size=1, context_parallel_size=1,
        expert_model_parallel_size=1, expert_tensor_parallel_size=1, sequence_parallel=False,
        virtual_pipeline_model_parallel_size=None, pipeline_model_parallel_layout=None,
        num_layers_in_first_pipeline_stage=None, num_layers_in_last_pipeline_stage=None,
        moe_token_dispatcher_type="allgather", fp8=None, recompute_granularity=None, recompute_method=None,
        overlap_moe_expert_parallel_comm=False,  # a schedule, no parameters: it needs ep > 1
        moe_shared_expert_overlap=False,  # a schedule too: it needs the alltoall dispatcher
        recompute_num_layers=None, use_cpu_initialization=True, perform_initialization=False,
        # the grouped kernel's package (grouped_gemm) needs CUDA; SequentialMLP holds the same weights
        moe_grouped_gemm=False)
    spec = get_gpt_decoder_block_spec(one, use_transformer_engine=False)
    if getattr(one, "multi_latent_attention", False):
        # megatron-core's local DotProductAttention lacks MLA's k_channels; core attention has no
        # parameters, so a parameterless module stands in for counting.
        class NoParams(torch.nn.Module):
            def __init__(self, *a, **k):
                super().__init__()
        for ls in spec.layer_specs:
            ls.submodules.self_attention.submodules.core_attention = NoParams
    kw = {}
    if one.mtp_num_layers:
        kw["mtp_block_spec"] = get_gpt_mtp_block_spec(one, spec.layer_specs[-1], use_transformer_engine=False)
    with torch.device("meta"):
        model = GPTModel(one, spec, vocab_size=vocab, max_sequence_length=seq, position_embedding_type=position,
                         share_embeddings_and_output_weights=not untie, **kw)
    return sum(p.numel() for p in model.parameters())


def planned_params(text):
    """(total, active, mtp) from the export's '# parameters:' comment."""
    for line in text.splitlines():
        if line.startswith("# parameters:"):
            w = line.split()
            return int(w[2]), int(w[4]), int(w[8].lstrip("("))
    raise ValueError("no '# parameters:' line")


def fresh_attention_env():
    """TransformerConfig.__post_init__ sets NVTE_FLASH_ATTN / NVTE_FUSED_ATTN / NVTE_UNFUSED_ATTN for
    its attention_backend and refuses values a previous config left: each launch is one process,
    this check builds many configs in one."""
    for k in ("NVTE_FLASH_ATTN", "NVTE_FUSED_ATTN", "NVTE_UNFUSED_ATTN"):
        os.environ.pop(k, None)


def check_megatron(case, text, plan):
    fresh_attention_env()
    from megatron.core.model_parallel_config import ModelParallelConfig
    from megatron.core.transformer import MLATransformerConfig, TransformerConfig
    line = [ln for ln in text.splitlines() if ln and not ln.startswith("#")][-1]
    a = parse_flags(line)
    kw = transformer_kwargs(a)
    cls = MLATransformerConfig if a.get("multi_latent_attention") else TransformerConfig
    cfg = cls(**kw)  # __post_init__ validates
    mp_fields = {f.name for f in dataclasses.fields(ModelParallelConfig)}
    ModelParallelConfig(**{k: v for k, v in kw.items() if k in mp_fields})
    tp = a["tensor_model_parallel_size"]
    vocab = -(-a["vocab_size"] // (a["make_vocab_size_divisible_by"] * tp)) * a["make_vocab_size_divisible_by"] * tp
    got = count_params(cfg, vocab, a.get("untie_embeddings_and_output_weights", False), a["max_position_embeddings"],
                       a.get("position_embedding_type", "learned_absolute"))
    total, _, mtp = planned_params(text)
    # Megatron's MTP module ends with its own final norm (DeepSeek-V3's shared_head.norm), which
    # Tessera's MTP figure leaves out: hidden per MTP layer.
    want = total + mtp + (a.get("mtp_num_layers") or 0) * a["hidden_size"]
    if got != want:
        fail(case, "megatron parameters", f"megatron-core builds {got}, the planner counts {want}")
    else:
        print(f"ok   {case} megatron: TransformerConfig valid, {got} parameters = planner's", flush=True)
    mlm = os.environ.get("MEGATRON_LM")
    if mlm:
        check_megatron_lm(case, line, plan, mlm)


def check_megatron_lm(case, line, plan, mlm):
    """Megatron-LM's own parse_args + validate_args on the line (Hopper: device arch 9)."""
    code = f"""
import os, sys, typing, typing_extensions
typing.override = typing_extensions.override
sys.path.insert(0, {mlm!r})
import megatron.training.arguments as A
import torch
A.get_device_arch_version = lambda: 9
torch.cuda.get_device_capability = lambda *a: (9, 0)  # --moe-grouped-gemm asks the device (Hopper)
sys.argv = ['pretrain_gpt.py'] + {shlex.split(line)!r} + ['--mock-data', '--tokenizer-type', 'NullTokenizer',
           '--lr', '1e-4', '--train-iters', '10']
args = A.parse_args(); A.validate_args(args)
print('dp', args.data_parallel_size)
"""
    env = dict(os.environ, WORLD_SIZE=str(plan["request"]["gpus"]), RANK="0")
    if "--use-megatron-fsdp" in line:
        env.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)
    else:
        env["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        fail(case, "Megatron-LM validate_args", r.stderr.strip().splitlines()[-1])
    else:
        print(f"ok   {case} Megatron-LM parse_args + validate_args", flush=True)


def install_te_stub():
    """megatron-bridge 0.3.1 imports transformer_engine.pytorch unconditionally (peft/lora*.py), and
    Transformer Engine builds only with CUDA. The configs never touch it, so after megatron-core has
    been imported without it a stand-in module satisfies the import."""
    import megatron.core.distributed  # noqa: F401
    import megatron.core.fp8_utils  # noqa: F401
    import megatron.core.models.gpt  # noqa: F401
    import megatron.core.optimizer  # noqa: F401
    if "transformer_engine" in sys.modules:
        return
    te, tp, ops = (types.ModuleType(n) for n in ("transformer_engine", "transformer_engine.pytorch",
                                                 "transformer_engine.pytorch.ops"))
    tp.Linear = type("Linear", (torch.nn.Module,), {})
    tp.LayerNormLinear = type("LayerNormLinear", (torch.nn.Module,), {})
    ops.Sequential = type("Sequential", (torch.nn.Module,), {})
    tp.ops, te.pytorch = ops, tp
    sys.modules.update({"transformer_engine": te, "transformer_engine.pytorch": tp,
                        "transformer_engine.pytorch.ops": ops})


def check_bridge(case, path, plan, text):
    fresh_attention_env()
    install_te_stub()
    import importlib.util
    spec = importlib.util.spec_from_file_location(f"recipe_{case.replace('-', '_')}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cfg = mod.tessera_pretrain_config()
    # validate() asks get_world_size_safe() for the world: the plan's GPUs.
    import megatron.bridge.training.config as bridge_config
    bridge_config.get_world_size_safe = lambda: plan["request"]["gpus"]
    cfg.validate()
    total, _, mtp = planned_params(text)
    m = cfg.model
    got = count_params(m, m.vocab_size, not m.share_embeddings_and_output_weights, m.seq_length,
                       m.position_embedding_type)
    want = total + mtp + (m.mtp_num_layers or 0) * m.hidden_size
    if got != want:
        fail(case, "megatron-bridge parameters", f"provider builds {got}, the planner counts {want}")
    else:
        print(f"ok   {case} megatron-bridge: ConfigContainer.validate() passed, {got} parameters", flush=True)


class FakeMpu:
    """What deepspeed.initialize passes as mpu: the data-parallel size of the layout."""

    def __init__(self, dp):
        self.dp = dp

    def get_data_parallel_world_size(self):
        return self.dp


def check_deepspeed(case, config, layout, gpus):
    import deepspeed.comm as dscomm
    from deepspeed.module_inject.auto_ep_config import validate_autoep_config
    from deepspeed.runtime.config import DeepSpeedConfig
    # The launch's world: every rank sees `gpus` processes.
    dscomm.get_world_size = lambda group=None: gpus
    dscomm.get_rank = lambda group=None: 0
    tp, pp, dp, cp = layout["tp"], layout["pp"], layout["dp"], layout["cp"]
    mpu = FakeMpu(dp) if pp > 1 or tp > 1 else None
    cfg = DeepSpeedConfig(dict(config), mpu)
    if cfg.world_size != dp:
        fail(case, "deepspeed", f"DeepSpeedConfig counts {cfg.world_size} data-parallel ranks, the plan {dp}")
        return
    autotp = config.get("tensor_parallel", {}).get("autotp_size", 1)
    validate_autoep_config(cfg.expert_parallel_config, gpus, pp, autotp, cp, zero_stage=cfg.zero_optimization_stage)
    print(f"ok   {case} deepspeed: DeepSpeedConfig accepted, train_batch_size {cfg.train_batch_size} = "
          f"{cfg.train_micro_batch_size_per_gpu} x {cfg.gradient_accumulation_steps} x {cfg.world_size}", flush=True)


def layout_of(plan):
    text = plan["layouts"][0]["layout"]
    return {k: (int(v) if v.isdigit() else v) for k, v in (kv.split("=") for kv in text.split(","))}


def check_case(tessera, work, case, args):
    plan_path = os.path.join(work, f"{case}.json")
    run([tessera, "plan", *shlex.split(args), "--top", "1", "-o", plan_path])
    plan = json.load(open(plan_path))
    layout = layout_of(plan)
    base = os.path.join(work, case)
    for fmt, ext in (("megatron", ".mlm"), ("megatron-bridge", "_bridge.py"), ("deepspeed", ".ds.json"),
                     ("torchrun", ".torchrun.sh"), ("sbatch", ".sbatch")):
        run([tessera, "export", "--plan", plan_path, "--format", fmt, "-o", base + ext])
    text = open(base + ".mlm").read()
    checks = (("megatron", lambda: check_megatron(case, text, plan)),
              ("megatron-bridge", lambda: check_bridge(case, base + "_bridge.py", plan, text)),
              ("deepspeed", lambda: check_deepspeed(case, json.load(open(base + ".ds.json")), layout,
                                                    plan["request"]["gpus"])),
              ("scripts", lambda: [run(["bash", "-n", base + s]) for s in (".torchrun.sh", ".sbatch")]))
    for what, check in checks:
        try:
            check()
        except Exception as e:  # a tool's refusal: report it and go on with the next check
            fail(case, what, f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}")


def main():
    tessera, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    for case, args in CASES:
        try:
            check_case(tessera, work, case, args)
        except Exception as e:
            fail(case, "plan/export", str(e))
    n = len(CASES) * 4
    print(f"check-export: {n - len(failures)} passed, {len(failures)} failed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
