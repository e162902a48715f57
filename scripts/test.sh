#!/usr/bin/env bash
# Every test on a fresh Debian 12 machine: install what is missing, build from scratch, run CTest (unit tests,
# multi-rank tests under mpirun on 1-4 ranks, the CLI end to end, the benchmark smoke run).
# GPU tests, where they exist, skip themselves on a machine without a GPU.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install_deps.sh"
rm -rf "$root/build"
"$root/scripts/build.sh"
. "$root/scripts/mpi_env.sh"
cd "$root/build"
ctest --output-on-failure -j 2
