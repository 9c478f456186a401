#!/usr/bin/env bash
# Installs the Debian packages Tessera builds and tests with, only those that are missing.
# Idempotent: a second run installs nothing and says so.
set -euo pipefail

# package: what it gives us
pkgs=(
  build-essential     # gcc, make
  pkg-config
  libcjson-dev        # every file format (model, system, plan, trace JSON)
  libglpk-dev         # integer programs (pipeline stage partitioning)
  libopenmpi-dev      # ranks, groups, collectives
  openmpi-bin         # mpirun
  libopenblas-dev     # CPU GEMM (cblas_sgemm)
  libcriterion-dev    # unit tests
  clang               # make fuzz: libFuzzer harnesses (tests/fuzz/) need clang, not gcc
  libclang-rt-dev     # make fuzz: libFuzzer and the sanitizer runtimes for clang (only recommended by clang)
  valgrind            # make valgrind: memcheck over plan and sim examples
  libpng-dev          # tests: decode the report's screenshot
  chromium            # tests: render the HTML report headless to a PNG
  python3             # make check-docs (scripts/check-docs.py); make check-export
  python3-venv        # make check-export: megatron-core, Megatron-Bridge, DeepSpeed in build/export-venv
)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#pkgs[@]} packages present"
  exit 0
fi

echo "deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "deps: done"
