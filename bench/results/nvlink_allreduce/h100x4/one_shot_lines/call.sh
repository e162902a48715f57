#!/usr/bin/env bash
# Session 14, call 9 (4 GPUs): the one-shot in 128-byte lines (GRADAGG_NVLINK_ONE_SHOT_LINES=1) against packets and
# against the defaults, 32 KiB - 1 MiB on 4 GPUs and 32 KiB - 2 MiB on 2, alternating twice; its tests.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r9"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
timeout 60 "${mpirun[@]}" -np 4 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no --gtest_filter='*OneShot*' \
  > "$out/tests_4gpus.txt" 2>&1
say "== one-shot tests 4 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_4gpus.txt" | tr '\n' ' ')"
run() {  # NAME GPUS ENV... -- BENCH ARGS
  local name=$1 n=$2; shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=(-x "$1"); shift; done; shift
  timeout 40 "${mpirun[@]}" -np "$n" "${envs[@]}" "$bin/gradagg_nvlink_benchmark" "$@" -f 2 -n 50 -w 10 -r 5 \
    > "$out/$name.txt" 2>&1
  say "== $name: exit $? $(grep -v '^#' "$out/$name.txt" | awk '{print $1, $4, $7, $NF}' | tr '\n' ';')"
}
for i in 1 2; do
  run "g4_defaults_$i" 4 GRADAGG_NVLINK_ONE_SHOT_LINES=0 -- -b 32K -e 1M
  run "g4_oneshot_packets_$i" 4 GRADAGG_NVLINK_ONE_SHOT_LINES=0 GRADAGG_NVLINK_ONE_SHOT_MAX=1048576 -- -b 32K -e 1M
  run "g4_oneshot_lines_$i" 4 GRADAGG_NVLINK_ONE_SHOT_LINES=1 GRADAGG_NVLINK_ONE_SHOT_MAX=1048576 -- -b 32K -e 1M
done
for i in 1 2; do
  run "g2_packets_$i" 2 GRADAGG_NVLINK_ONE_SHOT_LINES=0 -- -b 32K -e 2M
  run "g2_lines_$i" 2 GRADAGG_NVLINK_ONE_SHOT_LINES=1 -- -b 32K -e 2M
done
timeout 40 "${mpirun[@]}" -np 2 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no --gtest_filter='*OneShot*' \
  > "$out/tests_2gpus.txt" 2>&1
say "== one-shot tests 2 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_2gpus.txt" | tr '\n' ' ')"
tar -C "$OUT" -czf "$OUT/r9.tar.gz" r9
