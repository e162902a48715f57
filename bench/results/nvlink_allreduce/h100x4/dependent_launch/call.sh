#!/usr/bin/env bash
# Session 15, call 1 (4 GPUs): dependent launches (GRADAGG_NVLINK_DEPENDENT_LAUNCH) against the defaults, 8 B - 4 MiB
# on 4 and 2 GPUs and 256 MiB - 1 GiB on 4 (with block, thread and chunk variants), alternating; the NVLink tests
# with it on and off; memcheck of the line and dependent tests; the test against a build without the wait.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r1"
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
tests dependent_4gpus 4 60 GRADAGG_NVLINK_DEPENDENT_LAUNCH=1 -- "$bin/gradagg_nvlink_gpu_tests" --gtest_filter='*Dependent*:*Line*'
tests nowait_dependent_4gpus 4 60 -- .tmp_round/nowait/gradagg_nvlink_gpu_tests --gtest_filter='*Dependent*'
for i in 1 2; do
  run "g4_small_default_$i" 4 GRADAGG_NVLINK_DEPENDENT_LAUNCH=0 -- -b 8 -e 4M -f 2 -n 50 -w 10 -r 5
  run "g4_small_dependent_$i" 4 GRADAGG_NVLINK_DEPENDENT_LAUNCH=1 -- -b 8 -e 4M -f 2 -n 50 -w 10 -r 5
done
tar -C "$OUT" -czf "$OUT/r1.tar.gz" r1
for i in 1 2; do
  run "g4_large_default_$i" 4 GRADAGG_NVLINK_DEPENDENT_LAUNCH=0 -- -b 256M -e 1G -f 2 -n 10 -w 3 -r 3
  run "g4_large_dependent_$i" 4 GRADAGG_NVLINK_DEPENDENT_LAUNCH=1 -- -b 256M -e 1G -f 2 -n 10 -w 3 -r 3
  run "g4_large_blocks128_$i" 4 GRADAGG_NVLINK_BLOCKS=128 -- -b 256M -e 1G -f 2 -n 10 -w 3 -r 3
  run "g4_large_chunk192k_$i" 4 GRADAGG_NVLINK_PUSH_CHUNK=196608 -- -b 256M -e 1G -f 2 -n 10 -w 3 -r 3
  run "g4_large_threads256_$i" 4 GRADAGG_NVLINK_THREADS=256 GRADAGG_NVLINK_BLOCKS=264 -- -b 256M -e 1G -f 2 -n 10 -w 3 -r 3
done
tar -C "$OUT" -czf "$OUT/r1.tar.gz" r1
for i in 1 2; do
  run "g2_small_default_$i" 2 GRADAGG_NVLINK_DEPENDENT_LAUNCH=0 -- -b 8 -e 4M -f 2 -n 50 -w 10 -r 5
  run "g2_small_dependent_$i" 2 GRADAGG_NVLINK_DEPENDENT_LAUNCH=1 -- -b 8 -e 4M -f 2 -n 50 -w 10 -r 5
done
tar -C "$OUT" -czf "$OUT/r1.tar.gz" r1
run sweep_4gpus_dependent 4 GRADAGG_NVLINK_DEPENDENT_LAUNCH=1 -- -b 8 -e 1G -f 2 -n 20 -w 5 -r 5
tar -C "$OUT" -czf "$OUT/r1.tar.gz" r1
