#!/usr/bin/env bash
# Copies what a GPU-machine round runs (the GPU test and benchmark binaries, the trainer, the C API's library, and the
# shared libraries of Google Benchmark, Google Highway and the CUDA runtime) into .device-carry/ (git-ignored), to be named in the device tool's
# `carry`. With --with-data, also Fashion-MNIST (30 MB) into .device-carry/fashion-mnist for the trainer; with
# --with-package, the installed package (below).
# --only "BINARY ..." stages just those binaries (with the libraries): every binary links gradagg with its CUDA code,
# and all of them together pass the device tool's 64 MiB. Build first (scripts/build.sh); CUDA binaries exist only
# where nvcc was found.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
carry="$root/.device-carry"
rm -rf "$carry"
mkdir -p "$carry"
binaries="gradagg_gpu_tests gradagg_cuda_quantize_benchmark gradagg_decode_copies_benchmark gradagg_quantize_benchmark
  gradagg gradagg_mpi_tests train gradagg_nvlink_gpu_tests gradagg_nvlink_benchmark gradagg_device_gpu_tests
  gradagg_python_reference"
previous=""
for option in "$@"; do
  [ "$previous" = --only ] && binaries=$option
  previous=$option
done
for binary in $binaries; do
  [ -x "$root/build/bin/$binary" ] && cp "$root/build/bin/$binary" "$carry/"
done
library=$(ldconfig -p | awk '/libbenchmark\.so\.1debian/ && !found {print $NF; found = 1}')
[ -n "$library" ] && cp "$library" "$carry/"
hwy=$(ldconfig -p | awk '/libhwy\.so\.1 / && !found {print $NF; found = 1}')
[ -n "$hwy" ] && cp "$hwy" "$carry/"
# The CUDA runtime the binaries were linked with (shared by default), so they need nothing of the machine's but the
# driver; the C API's library, for the Python package (PYTHONPATH=python GRADAGG_LIBRARY=.device-carry/...); and the
# counter of CUDA runtime calls (bench/rounds/cuda_call_count.py).
for library in "$root"/build/lib/libgradagg_c.so "$root"/build/lib/libgradagg_cuda_call_counter.so $(ldd "$root/build/bin/gradagg" 2>/dev/null | awk '/libcudart/ {print $3}'); do
  [ -f "$library" ] && cp "$library" "$carry/"
done
# With --with-package, also the installed package (cmake --install) in .device-carry/package, Highway's library beside
# libgradagg.so (the GPU machine has none), for bench/rounds/package.sh.
for option in "$@"; do
  if [ "$option" = --with-package ]; then
    cmake --install "$root/build" --prefix "$carry/package" >/dev/null
    cp "$hwy" "$carry/package/lib/"
  fi
done
if [[ " $* " == *" --with-data "* ]]; then
  mkdir -p "$carry/fashion-mnist"
  cp /usr/share/datasets/fashion-mnist/*-ubyte.gz "$carry/fashion-mnist/"
fi
du -sh "$carry"
bytes=$(du -sb "$carry" | cut -f1)
[ "$bytes" -le $((64 << 20)) ] || echo "stage.sh: $bytes bytes: over the device tool's 64 MiB; use --only" >&2
