#!/usr/bin/env bash
# Configures and builds gradagg into build/ at the repository root (CLI: build/bin/gradagg).
# CUDA code is built when nvcc is found (it needs no GPU to compile). Extra arguments go to cmake.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$root/build" -j "$(nproc)"
