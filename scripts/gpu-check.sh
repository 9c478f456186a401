#!/usr/bin/env bash
# The GPU checks of the CUDA backend in one command, for a machine with an NVIDIA GPU (sm_80+), in
# this order (STEPS names): gpu (nvidia-smi), build (CUDA for sm_80 and sm_90, warnings as errors),
# tests-cuda (every CUDA kernel, the tiled attention and the bf16 tables against the CPU
# references, bf16 training within the stated tolerance of fp32), calibrate (`tessera calibrate
# --device cuda --quick`: fp32, bf16 and, with FP8, the fp8 GEMM grid and the fitted
# efficiency.gemm_fp8 curve, then the in-situ pass at sim-vs-run's shapes in bf16; the profile in
# WORK/gpu-profile.json), plan-fp8 (an fp8 plan on that
# profile), sim-vs-run (Llama-3.2-1B simulated on the in-situ profile against its bf16 run, op by op,
# at the pass's shapes and at held-out ones),
# validate (the one-GPU matrix), fp8-gemms (bench/fp8_gemms: the published FP8 rows' GEMMs in bf16
# and fp8 on this GPU beside the planner's FP8 curve), wgrad (bench/fp8_gemms --wgrad --gemms: what adding
# each published row's weight gradients into a bf16 or fp32 main_grad costs on this GPU, GEMM by
# GEMM), wgrad-sweep (the same on a grid of shapes; WGRAD_MIN_S sets both's timing,
# WGRAD_SYSTEM the zoo system of this GPU that prices the sweep's columns), bench (bench/gpu_targets: bf16/fp8 GEMM
# rates, the tiled attention against FlashAttention-2's published H100 figure, launch latency,
# Llama-3.2-1B bf16 MFU; the longest, so last). Everything goes to one file.
#
#   bash scripts/gpu-check.sh [OUT]     OUT: the figures' file (default build-cuda/gpu-check.txt)
#   QUICK=0 for the full benchmark grids (longer); JOBS=N for make's parallelism.
#   PACK=F runs the archive that scripts/gpu-pack.sh made instead of building (a machine with CUDA's
#   libraries and nothing else of Tessera's dependencies); STEPS="tests-cuda bench" runs only those.
# Exit status: 0 when every step passed, else the first failing step's (the file says which).
set -u
cd "$(dirname "$0")/.."
OUT=${1:-build-cuda/gpu-check.txt}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
QUICK=${QUICK:-1}
mkdir -p "$(dirname "$OUT")"
: >"$OUT"
status=0

run_step() { # run_step NAME TIMEOUT_S COMMAND...: runs it, appends its output to OUT, keeps the first failure
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

STEPS=${STEPS:-gpu build tests-cuda calibrate plan-fp8 sim-vs-run validate fp8-gemms wgrad wgrad-sweep bench}
WORK=${WORK:-$(dirname "$OUT")} # the profile, the unpacked PACK and the traces
mkdir -p "$WORK"
wanted() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
step() { # step NAME TIMEOUT_S COMMAND...: runs it if STEPS names it
    wanted "$1" && run_step "$@"
    return 0
}

step gpu 30 nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
if [ -n "${PACK:-}" ]; then
    # The pack's libraries come first; CUDA's are the machine's own. Open MPI and PMIx find their
    # plugins and help files in the pack (OPAL_PREFIX relocation); a one-rank run needs no daemon.
    DEV=$WORK/gpu-pack
    rm -rf "$DEV" && mkdir -p "$DEV" && tar -C "$DEV" -xJf "$PACK" || { echo "gpu-check: cannot unpack $PACK" | tee -a "$OUT"; exit 2; }
    DEV=$(cd "$DEV" && pwd)
    BIN=$DEV/bin
    export PATH=$DEV/usr/bin:$PATH LD_LIBRARY_PATH=$DEV/lib:${CUDA_HOME:-/usr/local/cuda}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export OPAL_PREFIX=$DEV/usr PMIX_INSTALL_PREFIX=$DEV/usr/lib/x86_64-linux-gnu/pmix2
    export PMIX_MCA_mca_base_component_path=$DEV/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
    export PMIX_MCA_pcompress_base_silence_warning=1 PMIX_MCA_mca_base_component_show_load_errors=0
    export OMPI_MCA_ess_singleton_isolated=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    missing=$(ldd "$BIN"/* | grep 'not found' | sort -u)
    [ -n "$missing" ] && echo "gpu-check: libraries not found: $missing" | tee -a "$OUT"
else
    step build 900 make WERROR=1 CUDA=1 BUILD=build-cuda CUDA_ARCH="80 90" -j"$JOBS" \
        all build-cuda/tessera-tests build-cuda/bench/gpu_targets build-cuda/bench/fp8_gemms
    BIN=$PWD/build-cuda
fi
GPU_TARGETS=$BIN/gpu_targets FP8_GEMMS=$BIN/fp8_gemms
[ -x "$GPU_TARGETS" ] || GPU_TARGETS=$BIN/bench/gpu_targets FP8_GEMMS=$BIN/bench/fp8_gemms
export TESSERA_BIN=$BIN/tessera TESSERA_DATA=$PWD
step tests-cuda 600 "$BIN/tessera-tests" --filter '@(cuda|cuda_gpu|bf16|flash_launch|gpu_bench|kernel_table|calibrate_fp8)/*' \
    --verbose --timeout 120
PROFILE=$WORK/gpu-profile.json
# In situ at sim-vs-run's plan (Llama-3.2-1B, batch 4 of 2048 tokens, micro-batches of 2, bf16): its
# factors are what sim-vs-run is predicted on. The microbenchmarks take seconds; the pass's 3
# steps about 1 s each after the model's initialisation.
step calibrate 600 "$BIN/tessera" calibrate --device cuda --quick --situ-model bench/llama3.2-1b.json \
    --situ-batch 4 --situ-seq 2048 --situ-mbs 2 -o "$PROFILE"
# The tables end with the fit: "#   fp8: ..." (measured, or kept and why) and "#   efficiency.gemm_fp8:";
# where FP8 was measured, an fp8 plan is priced on that curve.
if grep -q '^#   fp8: measured' "$OUT"; then
    step plan-fp8 60 "$BIN/tessera" plan -m megatron-gpt-1.7b -s "$PROFILE" --gpus 1 --global-batch 8 \
        --seq 2048 --dtype fp8
fi
# Simulated against measured on this GPU: Llama-3.2-1B (bench/llama3.2-1b.json), bf16, planned and
# simulated on the profile just measured, trained with --device cuda --precision bf16, compared op
# by op (tessera compare): at the in-situ pass's shapes (4 × 2048 tokens, micro-batches of 2), and
# at shapes the pass did not see (2 × 4096, micro-batches of 1: longer rows, a larger attention
# share), which is what says whether the factors carry; then validate's one-GPU matrix.
svr() { # svr DIR BATCH SEQ MBS
    local t=$TESSERA_BIN p=$PROFILE w=$1
    mkdir -p "$w"
    "$t" plan -m bench/llama3.2-1b.json -s "$p" --gpus 1 --global-batch "$2" --seq "$3" --dtype bf16 \
        --fix "mbs=$4,recompute=none" --top 1 -o "$w/plan.json" >/dev/null &&
        "$t" run --plan "$w/plan.json" --device cuda --precision bf16 --steps 4 --warmup 1 --trace "$w/run.trace.json" &&
        "$t" sim --plan "$w/plan.json" --trace "$w/sim.trace.json" | tail -3 &&
        "$t" compare --sim "$w/sim.trace.json" --measured "$w/run.trace.json" --ops 12
}
export -f svr
export PROFILE
if [ -f "$PROFILE" ] && wanted sim-vs-run; then
    run_step sim-vs-run 300 bash -c 'svr "$@"' _ "$WORK/sim-vs-run" 4 2048 2
    run_step sim-vs-run-held-out 300 bash -c 'svr "$@"' _ "$WORK/sim-vs-run-4k" 2 4096 1
fi
# validate calibrates itself, in situ at its matrix's shapes (the Llama-3.2-1B profile's factors do
# not carry to tiny: docs/gpu.md), and plans and trains its cases in bf16.
step validate 240 "$BIN/tessera" validate --device cuda --replay -k "$WORK/validate"
# The published FP8 rows' GEMMs, bf16 against fp8, beside the planner's curve (docs/moe.md).
step fp8-gemms 300 "$FP8_GEMMS" --min-s 0.1
step wgrad 300 "$FP8_GEMMS" --wgrad --gemms --min-s "${WGRAD_MIN_S:-0.05}"
step wgrad-sweep 300 "$FP8_GEMMS" --wgrad --sweep --min-s "${WGRAD_MIN_S:-0.05}" --system "${WGRAD_SYSTEM:-h100-sxm-dgx}"
# Last, as the longest (its parts' wall times are its last line): GEMM rates, the tiled attention
# against FlashAttention-2, Llama-3.2-1B's MFU.
step bench 600 "$GPU_TARGETS" $([ "$QUICK" = 1 ] && echo --quick) --min-s 0.1
echo "== gpu-check: exit $status, figures in $OUT" | tee -a "$OUT"
exit "$status"
