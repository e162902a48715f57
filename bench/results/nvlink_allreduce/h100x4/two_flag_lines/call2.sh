#!/usr/bin/env bash
# Session 16, call 2 (4 GPUs, warm): 512 KiB - 8 MiB, the line two-shot (two flags) against the pulled two-shot
# (GRADAGG_NVLINK_LINE_MAX=0), with and without dependent launches for it, alternating three times.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r2"
mpirun=(mpirun "${mpirun_args[@]}")
run() {  # NAME ENV... -- BENCH ARGS
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=(-x "$1"); shift; done; shift
  timeout 60 "${mpirun[@]}" -np 4 "${envs[@]}" "$bin/gradagg_nvlink_benchmark" "$@" > "$out/$name.txt" 2>&1
  say "== $name: exit $? $(grep -v '^#' "$out/$name.txt" | awk '{print $1, $4, $NF}' | tr '\n' ';')"
}
for i in 1 2 3; do
  run "lines_$i" GRADAGG_NVLINK_DUMMY=1 -- -b 512K -e 8M -f 2 -n 50 -w 10 -r 5
  run "pulled_$i" GRADAGG_NVLINK_LINE_MAX=0 -- -b 512K -e 8M -f 2 -n 50 -w 10 -r 5
  run "lines_nodep_$i" GRADAGG_NVLINK_DEPENDENT_LAUNCH_MAX=0 -- -b 512K -e 8M -f 2 -n 50 -w 10 -r 5
done
tar -C "$OUT" -czf "$OUT/r2.tar.gz" r2
