#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install what is missing, build, and run gradagg on 4 ranks as 2
# emulated nodes of 2 ranks, 1-bit, checked bitwise against the serial simulation. Extra arguments go to gradagg.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install_deps.sh"
"$root/scripts/build.sh"
. "$root/scripts/mpi_env.sh"
exec mpirun -np 4 "$root/build/bin/gradagg" --device cpu --ranks-per-node 2 -b 1K -e 16M -f 4 --bits 1 --check "$@"
