#!/usr/bin/env bash
# make check-export (issue 19): tessera's Megatron-LM, Megatron-Bridge and DeepSpeed exports checked
# by those tools' own validation (scripts/check_export.py says what is checked; docs/export.md).
#
# The tools come from PyPI into a virtual environment, build/export-venv (EXPORT_VENV), made once
# and reused (the stamp file says it is complete): torch (CPU wheels from the PyTorch index when it
# answers, else PyPI's default wheel, which pulls several GB of CUDA libraries), megatron-core,
# deepspeed (its C++/CUDA ops not built: DS_BUILD_OPS=0) and megatron-bridge (without its GPU-only
# dependencies: Transformer Engine, mamba-ssm, causal-conv1d ...; its config code needs none).
# MEGATRON_LM=/path/to/a/Megatron-LM checkout adds Megatron-LM's own parse_args/validate_args.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${EXPORT_VENV:-build/export-venv}
BIN=${TESSERA_BIN:-build/tessera}
STAMP="$VENV/.tessera-check-export-v1"
PY="$VENV/bin/python"

die() { echo "check-export: $*" >&2; exit 1; }

install() {
    python3 -m venv "$VENV" || die "python3 -m venv $VENV failed (is python3-venv installed?)"
    "$PY" -m pip install -q --upgrade pip setuptools wheel || die "cannot reach PyPI to install pip/setuptools/wheel"
    if ! "$PY" -m pip install -q --timeout 20 --retries 0 torch --index-url https://download.pytorch.org/whl/cpu; then
        echo "check-export: the PyTorch CPU index is unreachable; installing PyPI's torch (several GB)" >&2
        "$PY" -m pip install -q torch || die "missing torch: pip install torch failed"
    fi
    "$PY" -m pip install -q numpy packaging einops pyyaml megatron-core==0.16.1 \
        || die "missing megatron-core 0.16.1: pip install failed"
    DS_BUILD_OPS=0 "$PY" -m pip install -q --no-build-isolation deepspeed==0.19.8 \
        || die "missing deepspeed 0.19.8: pip install failed"
    "$PY" -m pip install -q --no-deps megatron-bridge==0.3.1 || die "missing megatron-bridge 0.3.1: pip install failed"
    "$PY" -m pip install -q 'transformers<5' omegaconf 'hydra-core>1.3,<=1.3.2' rich tqdm regex six \
        'huggingface-hub<1.0' 'datasets<4' || die "missing megatron-bridge's config dependencies: pip install failed"
    touch "$STAMP"
}

[ -x "$BIN" ] || die "$BIN is missing: run make first"
[ -f "$STAMP" ] || install
"$PY" -c 'import torch, megatron.core, deepspeed' 2>/dev/null \
    || die "$VENV lacks torch, megatron-core or deepspeed: remove $VENV and run make check-export again"
exec "$PY" scripts/check_export.py "$BIN" "${EXPORT_WORK:-build/check-export}"
