#!/usr/bin/env bash
# On the GPU machine: the installed CUDA build of the package, staged by `bench/rounds/stage.sh --with-package`
# into .device-carry/package, used as a user would with the machine's own CMake, compiler and MPI: test/package's
# check (a C++-only and a C-only consumer, and the trainer of docs/cpp-api.md at 32 bits on 2 ranks as 2 emulated nodes).
# Writes OUT/toolchain.txt and OUT/package.txt.
#   bench/rounds/package.sh PREFIX OUT
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
prefix=$(cd "$1" && pwd) out=$2
mkdir -p "$out"
. "$root/scripts/mpi_env.sh"
{
  cmake --version | head -1
  c++ --version | head -1
  mpirun --version 2>&1 | head -1
  echo "mpicxx: $(mpicxx --showme 2>&1)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  readelf -d "$prefix/lib/libgradagg.so" | grep -E 'NEEDED|RUNPATH'
} >"$out/toolchain.txt" 2>&1
cat "$out/toolchain.txt"
"$root/test/package/check_package.sh" "$prefix" "$root/test/package" "$root/docs/cpp-api.md" "$(command -v mpiexec)" shared \
  2>&1 | tee "$out/package.txt"
exit "${PIPESTATUS[0]}"
