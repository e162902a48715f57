#!/usr/bin/env bash
# Session 15, call 2 (4 GPUs): dependent launches by default (<= 1 MiB on 4 GPUs, 512 KiB on 2): the NVLink tests on 4
# and 2 GPUs, two sweeps on 4 and one on 2, the 256 KiB paths against each other, all-push on 96 and 112 blocks at
# 512 MiB - 1 GiB, memcheck of the line and dependent tests.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r2"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
tests() {  # NAME GPUS SECONDS ENV... -- GTEST ARGS
  local name=$1 n=$2 t=$3; shift 3
  local envs=()
  while [ "$1" != "--" ]; do envs+=(-x "$1"); shift; done; shift
  timeout "$t" "${mpirun[@]}" -np "$n" "${envs[@]}" "$@" --gtest_color=no > "$out/$name.txt" 2>&1
  say "== $name: exit $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |tests? FAILED|FAILED  \]' "$out/$name.txt" | tr '\n' ' ' | cut -c1-400)"
}
run() {  # NAME GPUS ENV... -- BENCH ARGS
  local name=$1 n=$2; shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=(-x "$1"); shift; done; shift
  timeout 60 "${mpirun[@]}" -np "$n" "${envs[@]}" "$bin/gradagg_nvlink_benchmark" "$@" > "$out/$name.txt" 2>&1
  say "== $name: exit $? $(grep -v '^#' "$out/$name.txt" | awk '{print $1, $4, $NF}' | tr '\n' ';')"
}
tests tests_4gpus 4 120 -- "$bin/gradagg_nvlink_gpu_tests"
run sweep_4gpus_1 4 -- -b 8 -e 1G -f 2 -n 20 -w 5 -r 5
tar -C "$OUT" -czf "$OUT/r2.tar.gz" r2
for i in 1 2; do
  run "p256_default_$i" 4 -- -b 64K -e 1M -f 2 -n 50 -w 10 -r 5
  run "p256_oneshot_lines_$i" 4 GRADAGG_NVLINK_ONE_SHOT_MAX=262144 -- -b 64K -e 1M -f 2 -n 50 -w 10 -r 5
  run "p256_line_two_shot_$i" 4 GRADAGG_NVLINK_PACKET_MAX=131072 -- -b 64K -e 1M -f 2 -n 50 -w 10 -r 5
done
for i in 1 2; do
  run "large_default_$i" 4 -- -b 512M -e 1G -f 2 -n 10 -w 3 -r 3
  run "large_blocks96_$i" 4 GRADAGG_NVLINK_BLOCKS=96 -- -b 512M -e 1G -f 2 -n 10 -w 3 -r 3
  run "large_blocks112_$i" 4 GRADAGG_NVLINK_BLOCKS=112 -- -b 512M -e 1G -f 2 -n 10 -w 3 -r 3
done
tar -C "$OUT" -czf "$OUT/r2.tar.gz" r2
run sweep_2gpus 2 -- -b 8 -e 1G -f 2 -n 20 -w 5 -r 5
tests tests_2gpus 2 90 -- "$bin/gradagg_nvlink_gpu_tests"
tar -C "$OUT" -czf "$OUT/r2.tar.gz" r2
run sweep_4gpus_2 4 -- -b 8 -e 1G -f 2 -n 20 -w 5 -r 5
tar -C "$OUT" -czf "$OUT/r2.tar.gz" r2
tests memcheck_4gpus 4 $((585 - SECONDS)) -- "$sanitizer" --tool memcheck --error-exitcode 9 "$bin/gradagg_nvlink_gpu_tests" --gtest_filter='*Dependent*:*LineOneShot*:*LineTwoShotAll*'
grep -h "ERROR SUMMARY" "$out/memcheck_4gpus.txt" | sort | uniq -c | tee -a "$out/summary.txt"
tar -C "$OUT" -czf "$OUT/r2.tar.gz" r2
