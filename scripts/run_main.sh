#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install what is missing, build, and show what gradagg is for: 4 ranks as
# 2 nodes of 2, the nodes joined by a 1 Gbit/s link (network namespaces shaped with tc, scripts/emulated_cluster.sh),
# 1 bit across nodes, every size checked bitwise against the serial simulation, MPI_Allreduce of the same gradients
# timed in the same run (vs_mpi above 1: gradagg is faster). Where namespaces cannot be made (not root, no ip, tc or
# unshare, or a sandbox that forbids them), the 4 ranks share this host as 2 emulated nodes instead, said in one line:
# with no network to save, gradagg then trails MPI_Allreduce. Extra arguments go to gradagg.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install_deps.sh"
"$root/scripts/build.sh"
. "$root/scripts/mpi_env.sh"
arguments=(--device cpu -b 4M -e 64M -f 4 -n 5 -w 2 --bits 1 --check "$@")

why=""
if [ "$(id -u)" -ne 0 ]; then
  why="not root"
else
  for tool in ip tc unshare; do
    command -v "$tool" >/dev/null 2>&1 || why="'$tool' not found"
  done
  if [ -z "$why" ]; then
    if ip netns add gaemainprobe 2>/dev/null; then ip netns del gaemainprobe; else why="network namespaces forbidden"; fi
  fi
fi
if [ -z "$why" ]; then
  exec "$root/scripts/emulated_cluster.sh" --nodes 2 --slots 2 --rate 1gbit --prefix gamain --subnet 10.77.9 -- \
    -np 4 "$root/build/bin/gradagg" "${arguments[@]}"
fi
echo "# run_main: no emulated network here ($why): 4 ranks on this host as 2 nodes, where gradagg has no bytes to save"
exec mpirun -np 4 "$root/build/bin/gradagg" --ranks-per-node 2 "${arguments[@]}"
