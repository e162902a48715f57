#!/usr/bin/env bash
# Every test on a fresh Debian 12 machine: install what is missing, build from scratch, run CTest (unit tests,
# multi-rank tests under mpirun on 1-4 ranks, the CLI end to end, failure drills, the benchmark smoke run); then
# build the CPU code again under AddressSanitizer and UndefinedBehaviorSanitizer (build-asan/, CUDA off) and run the
# same tests but the slow end-to-end ones, where any report fails. GPU tests skip themselves without a GPU.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install_deps.sh"
rm -rf "$root/build"
"$root/scripts/build.sh"
. "$root/scripts/mpi_env.sh"
(cd "$root/build" && ctest --output-on-failure -j 2)

rm -rf "$root/build-asan"
cmake -S "$root" -B "$root/build-asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGRADAGG_ENABLE_CUDA=OFF \
  -DGRADAGG_SANITIZE=ON -DGRADAGG_BUILD_BENCHMARKS=OFF
cmake --build "$root/build-asan" -j "$(nproc)"
# Leaks are not judged: Open MPI keeps its own allocations until exit. UBSan stops at the first report.
export ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd "$root/build-asan" &&
  ctest --output-on-failure -j 2 -E "train_convergence|cluster_|scaling_sweep|package_|projection|slurm_|docs_commands")
