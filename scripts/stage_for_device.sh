#!/usr/bin/env bash
# Copies what a GPU-machine round runs (the GPU test and benchmark binaries, and Google Benchmark's shared library,
# which that machine lacks) into .device-carry/ (git-ignored), to be named in the device tool's `carry`.
# Build first (scripts/build.sh); CUDA binaries exist only where nvcc was found.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
carry="$root/.device-carry"
rm -rf "$carry"
mkdir -p "$carry"
for binary in gradagg_gpu_tests gradagg_cuda_quantize_benchmark gradagg gradagg_mpi_tests; do
  [ -x "$root/build/bin/$binary" ] && cp "$root/build/bin/$binary" "$carry/"
done
library=$(ldconfig -p | awk '/libbenchmark\.so\.1debian/ {print $NF; exit}')
[ -n "$library" ] && cp "$library" "$carry/"
du -sh "$carry"
