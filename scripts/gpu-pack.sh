#!/usr/bin/env bash
# Packs the CUDA build for a GPU machine that has CUDA's own libraries (cudart, cuBLAS, NCCL) and
# nothing else of Tessera's dependencies: the binaries (tessera, tessera-tests, bench/gpu_targets,
# bench/fp8_gemms, debug info stripped) and every other shared library they and Open MPI's plugins
# load, with Open MPI's and PMIx's plugin trees and help files so that a one-rank run initialises MPI there
# (OPAL_PREFIX relocation, set up by scripts/gpu-check.sh). Built here, it runs where no compiler,
# header or package registry is reachable.
#
#   bash scripts/gpu-pack.sh [PACK]     PACK: the archive (default build-cuda/gpu-pack.tar.xz)
#   then, on the GPU machine:  PACK=build-cuda/gpu-pack.tar.xz bash scripts/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build-cuda}
PACK=${1:-$B/gpu-pack.tar.xz}
make WERROR=1 CUDA=1 BUILD="$B" CUDA_ARCH="${CUDA_ARCH:-80 90}" -j"$(nproc)" \
    all "$B/tessera-tests" "$B/bench/gpu_targets" "$B/bench/fp8_gemms"

MULTI=/usr/lib/x86_64-linux-gnu
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/usr/bin" "$stage/usr/lib/x86_64-linux-gnu" "$stage/usr/share"
cp "$B/tessera" "$B/tessera-tests" "$B/bench/gpu_targets" "$B/bench/fp8_gemms" "$stage/bin/"
strip --strip-debug "$stage"/bin/*
# Open MPI's plugins are found under $OPAL_PREFIX/lib/x86_64-linux-gnu/openmpi/lib/openmpi3 once
# OPAL_PREFIX points at the copy; PMIx's under pmix2/lib/pmix.
cp -a "$MULTI/openmpi" "$MULTI/pmix2" "$stage/usr/lib/x86_64-linux-gnu/"
rm -rf "$stage/usr/lib/x86_64-linux-gnu/openmpi/include"
# tessera run starts mpirun (orterun) itself, which starts the local ranks without a daemon.
cp "$(readlink -f /usr/bin/orterun)" "$stage/usr/bin/orterun"
ln -s orterun "$stage/usr/bin/mpirun"
cp "$(readlink -f /usr/bin/orted)" "$stage/usr/bin/orted"
for d in openmpi pmix; do [ -d "/usr/share/$d" ] && cp -a "/usr/share/$d" "$stage/usr/share/"; done

# Every library the binaries and plugins load, less the C runtime and CUDA's (the GPU machine's
# own driver-matched copies are used).
skip='/(libc|libm|libdl|libpthread|librt|libresolv|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcudart|libcublas|libcublasLt|libnccl|libcuda)\.so'
{
    ldd "$stage"/bin/* "$stage/usr/bin/orterun" "$stage/usr/bin/orted"
    find "$stage/usr/lib" -name '*.so*' -type f -exec ldd {} + 2>/dev/null
} | awk '/=> \//{print $3}' | sort -u | grep -Ev "$skip" | while read -r lib; do
    cp -L "$lib" "$stage/lib/"
done
tar -C "$stage" -cJf "$PACK.tmp" .
mv "$PACK.tmp" "$PACK"
echo "gpu-pack: $PACK ($(du -h "$PACK" | cut -f1)): $(ls "$stage/lib" | wc -l) libraries"
