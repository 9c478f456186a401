#!/usr/bin/env bash
# The GPU checks of the CUDA backend in one command, for a machine with an NVIDIA GPU (sm_80+):
# builds with CUDA for sm_80 and sm_90 (warnings as errors), runs the GPU test suite (every CUDA
# kernel, the tiled attention and the bf16 tables against the CPU references, bf16 training within
# the stated tolerance of fp32), then bench/gpu_targets (bf16/fp8 GEMM rates, the tiled attention
# against FlashAttention-2's published H100 figure, launch latency, Llama-3.2-1B bf16 MFU), then
# `tessera calibrate --device cuda --quick` (its tables: fp32, bf16 and, with FP8, the fp8 GEMM grid
# and the fitted efficiency.gemm_fp8 curve; the profile in build-cuda/gpu-profile.json) and an fp8
# plan on that profile, and writes everything to one file. A few minutes on one H100.
#
#   bash scripts/gpu-check.sh [OUT]     OUT: the figures' file (default build-cuda/gpu-check.txt)
#   QUICK=0 for the full benchmark grids (longer); JOBS=N for make's parallelism.
# Exit status: 0 when every step passed, else the first failing step's (the file says which).
set -u
cd "$(dirname "$0")/.."
OUT=${1:-build-cuda/gpu-check.txt}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
QUICK=${QUICK:-1}
mkdir -p "$(dirname "$OUT")"
: >"$OUT"
status=0

step() { # step NAME TIMEOUT_S COMMAND...: runs it, appends its output to OUT, keeps the first failure
    local name=$1 limit=$2
    shift 2
    echo "== $name: $*" | tee -a "$OUT"
    local t0=$SECONDS
    timeout "$limit" "$@" 2>&1 | tee -a "$OUT"
    local rc=${PIPESTATUS[0]}
    echo "== $name: exit $rc after $((SECONDS - t0)) s" | tee -a "$OUT"
    [ "$rc" -ne 0 ] && [ "$status" -eq 0 ] && status=$rc
    return 0
}

step gpu 30 nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv
step build 900 make WERROR=1 CUDA=1 BUILD=build-cuda CUDA_ARCH="80 90" -j"$JOBS" \
    all build-cuda/tessera-tests build-cuda/bench/gpu_targets
export TESSERA_BIN=$PWD/build-cuda/tessera TESSERA_DATA=$PWD
step tests-cuda 600 build-cuda/tessera-tests --filter '@(cuda|cuda_gpu|bf16|flash_launch|gpu_bench|kernel_table|calibrate_fp8)/*' \
    --verbose
step bench 600 build-cuda/bench/gpu_targets $([ "$QUICK" = 1 ] && echo --quick) --min-s 0.1
PROFILE=$(dirname "$OUT")/gpu-profile.json
step calibrate 600 build-cuda/tessera calibrate --device cuda --quick --no-in-situ -o "$PROFILE"
# The tables end with the fit: "#   fp8: ..." (measured, or kept and why) and "#   efficiency.gemm_fp8:";
# where FP8 was measured, an fp8 plan is priced on that curve.
if grep -q '^#   fp8: measured' "$OUT"; then
    step plan-fp8 60 build-cuda/tessera plan -m megatron-gpt-1.7b -s "$PROFILE" --gpus 1 --global-batch 8 \
        --seq 2048 --dtype fp8
fi
echo "== gpu-check: exit $status, figures in $OUT" | tee -a "$OUT"
exit "$status"
