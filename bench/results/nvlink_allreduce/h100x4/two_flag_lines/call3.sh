#!/usr/bin/env bash
# Session 16, call 3 (4 GPUs, warm): 2 - 8 MiB, the line two-shot against all-push (GRADAGG_NVLINK_ALL_PUSH=1,
# GRADAGG_NVLINK_LINE_MAX=2 MiB), alternating three times.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r3"
mpirun=(mpirun "${mpirun_args[@]}")
run() {  # NAME ENV... -- BENCH ARGS
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=(-x "$1"); shift; done; shift
  timeout 60 "${mpirun[@]}" -np 4 "${envs[@]}" "$bin/gradagg_nvlink_benchmark" "$@" > "$out/$name.txt" 2>&1
  say "== $name: exit $? $(grep -v '^#' "$out/$name.txt" | awk '{print $1, $4, $NF}' | tr '\n' ';')"
}
for i in 1 2 3; do
  run "lines_$i" GRADAGG_NVLINK_DUMMY=1 -- -b 2M -e 8M -f 2 -n 50 -w 10 -r 5
  run "allpush_$i" GRADAGG_NVLINK_ALL_PUSH=1 GRADAGG_NVLINK_LINE_MAX=2097152 -- -b 2M -e 8M -f 2 -n 50 -w 10 -r 5
done
tar -C "$OUT" -czf "$OUT/r3.tar.gz" r3
