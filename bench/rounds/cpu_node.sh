#!/usr/bin/env bash
# The CPU node's phases 1 and 3 (issue 37), measured as the issue asks, into OUT:
#   node_benchmark_1x2.txt, node_benchmark_1x4.txt  gradagg_node_benchmark, 64 KiB to 256 MiB: the phases beside
#                                                   MPI_Allreduce, MPI's reduce-scatter + all-gather and memcpy
#   cli_1x2.txt        the issue's command three times: gradagg against MPI_Allreduce on 2 ranks of one node
#   main_job_2x2.txt   the emulated main job (scripts/run_main.sh's network, 64 MiB, 1 bit) three times, with the
#                      rs and ag columns; given BEFORE (another build's gradagg), that build in turn, run for run
# Usage: bench/rounds/cpu_node.sh OUT [BEFORE]   (root, for the emulated network; after scripts/build.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: cpu_node.sh OUT [BEFORE]}
before=${2:-}
. "$root/scripts/mpi_env.sh"
mkdir -p "$out"
bin=$root/build/bin

for ranks in 2 4; do
  mpirun -np "$ranks" "$bin/gradagg_node_benchmark" -b 64K -e 256M -f 4 -n 10 -w 2 | tee "$out/node_benchmark_1x$ranks.txt"
done

{
  echo "# mpirun -np 2 build/bin/gradagg --device cpu -b 64K -e 64M -f 4 -n 10 -w 3 --no-phase-times, three runs"
  echo "# size: gradagg us / MPI_Allreduce us = vs_mpi"
  for run in 1 2 3; do
    mpirun -np 2 "$bin/gradagg" --device cpu -b 64K -e 64M -f 4 -n 10 -w 3 --no-phase-times |
      awk -v run="$run" '!/^#/ { line = line sprintf("  %s: %s/%s=%s", $1, $4, $15, $16) } END { print "run " run line }'
  done
} | tee "$out/cli_1x2.txt"

main_job() {
  "$root/scripts/emulated_cluster.sh" --nodes 2 --slots 2 --rate 1gbit --prefix gacpu --subnet 10.77.19 -- \
    -np 4 "$1" --device cpu -b 64M -e 64M -n 5 -w 2 --bits 1 |
    awk -v build="$2" '!/^#/ { printf "%s: time %s us, rs %s us, ag %s us, rs+ag %.1f ms\n", build, $4, $10, $14,
                                 ($10 + $14) / 1000 }'
}
{
  echo "# scripts/emulated_cluster.sh --nodes 2 --slots 2 --rate 1gbit -- -np 4 gradagg --device cpu -b 64M -e 64M"
  echo "#   -n 5 -w 2 --bits 1 (2 emulated nodes of 2 ranks on this host's cores; per-phase means of the slowest rank)"
  for run in 1 2 3; do
    [ -z "$before" ] || main_job "$before" before
    main_job "$bin/gradagg" after
  done
} | tee "$out/main_job_2x2.txt"
