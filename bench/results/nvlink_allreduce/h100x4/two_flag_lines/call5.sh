#!/usr/bin/env bash
# Session 16, call 5: thresholds at 2-8 MiB, alternating three times.
# 4 GPUs, 2-4 MiB: the line two-shot (two flags) to 4 MiB, the pulled two-shot above 2 MiB, and the one-flag build's
#   line two-shot (.tmp_round/oneflag/: what the second flag costs).
# 2 GPUs, 2-8 MiB: the defaults (pulled above the 2 MiB one-shot) against the one-shot in lines to 4 and 8 MiB.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r5"
mpirun=(mpirun "${mpirun_args[@]}")
run() {  # NAME GPUS BINARY_DIR ENV... -- BENCH ARGS
  local name=$1 n=$2 dir=$3; shift 3
  local envs=()
  while [ "$1" != "--" ]; do envs+=(-x "$1"); shift; done; shift
  timeout 60 "${mpirun[@]}" -np "$n" "${envs[@]}" "$dir/gradagg_nvlink_benchmark" "$@" > "$out/$name.txt" 2>&1
  say "== $name: exit $? $(grep -v '^#' "$out/$name.txt" | awk '{print $1, $4, $NF}' | tr '\n' ';')"
}
for i in 1 2 3; do
  for size in 2M 3M 4M; do
    run "g4_lines_${size}_$i" 4 "$bin" GRADAGG_NVLINK_LINE_MAX=4194304 -- -b $size -e $size -n 50 -w 10 -r 5
    run "g4_pulled_${size}_$i" 4 "$bin" GRADAGG_NVLINK_LINE_MAX=0 -- -b $size -e $size -n 50 -w 10 -r 5
    run "g4_oneflag_${size}_$i" 4 .tmp_round/oneflag GRADAGG_NVLINK_LINE_MAX=4194304 -- -b $size -e $size -n 50 -w 10 -r 5
  done
  run "g2_default_$i" 2 "$bin" GRADAGG_NVLINK_DUMMY=1 -- -b 2M -e 8M -f 2 -n 50 -w 10 -r 5
  run "g2_oneshot4m_$i" 2 "$bin" GRADAGG_NVLINK_ONE_SHOT_MAX=4194304 -- -b 2M -e 8M -f 2 -n 50 -w 10 -r 5
  run "g2_oneshot8m_$i" 2 "$bin" GRADAGG_NVLINK_ONE_SHOT_MAX=8388608 -- -b 2M -e 8M -f 2 -n 50 -w 10 -r 5
  tar -C "$OUT" -czf "$OUT/r5.tar.gz" r5
done
