#!/usr/bin/env bash
# The soak run of issue 17 (not in CI: it takes minutes): 10,000 calls on 2 emulated nodes of 2 CPU ranks at 1 bit,
# the tensor list changing every 1,000 steps, checked against the simulation at every step, ranks compared every 100,
# resident memory flat after the first pass through the lists. Build first (scripts/build.sh).
#   scripts/soak.sh [STEPS] [OUT_FILE]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/mpi_env.sh"
steps=${1:-10000}
run=(env GRADAGG_RANKS_PER_NODE=2 GRADAGG_BITS=1 mpirun -np 4 "$root/build/bin/gradagg_soak" "$steps")
if [ -n "${2:-}" ]; then
  "${run[@]}" | tee "$2"
else
  "${run[@]}"
fi
