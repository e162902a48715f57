#!/usr/bin/env bash
# Session 17, call 2 (4 GPUs): the copy-engine gather (GRADAGG_NVLINK_COPY_GATHER_MIN) and line kernels on up to 8
# blocks per SM.
# 1. NVLink tests on 4 GPUs (the new CopyGatherAllReduceIsTheRankOrderSum among them); the copy-gather test of a build
#    without the end barrier (.tmp_round/broken/); the chained reproducer 50 times.
# 2. 8 MiB - 1 GiB: all-push (the carry's default) against the copy gather in 4 pieces, alternating twice; then 2 and
#    8 pieces from 64 MiB.
# 3. Lines: 2 - 8 MiB with the line two-shot forced to 8 MiB (the carry) against the shipped build (.tmp_round/cap2/).
# 4. 2 GPUs: tests; all-push against copy gather 8 MiB - 1 GiB.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r2"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
timeout 200 "${mpirun[@]}" -np 4 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no > "$out/tests_4gpus.txt" 2>&1
say "== tests 4 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_4gpus.txt" | tr '\n' ' ')"
timeout 100 "${mpirun[@]}" -np 4 .tmp_round/broken/gradagg_nvlink_gpu_tests --gtest_color=no --gtest_filter='*CopyGather*' > "$out/broken_4gpus.txt" 2>&1
say "== broken build (no end barrier), copy gather test: exit $? $(grep -E '^\[  (PASSED|FAILED) |first wrong' "$out/broken_4gpus.txt" | head -5 | tr '\n' ' ')"
timeout 100 "${mpirun[@]}" -np 4 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no --gtest_filter='*LinesAfterPacketTwoShots*' \
  --gtest_repeat=50 > "$out/chain.txt" 2>&1
say "== chain x50: exit $? ok=$(grep -c '^\[       OK \]' "$out/chain.txt") failed=$(grep -c '^\[  FAILED  \] GpuNodeTest' "$out/chain.txt")"
tar -C "$OUT" -czf "$OUT/r2.tar.gz" r2
bench() {  # NAME GPUS BINARY_DIR [ENV...] -- ARGS
  local name=$1 n=$2 dir=$3; shift 3
  local envs=()
  while [ "$1" != "--" ]; do envs+=(-x "$1"); shift; done; shift
  timeout 100 "${mpirun[@]}" -np "$n" "${envs[@]}" "$dir/gradagg_nvlink_benchmark" "$@" > "$out/$name.txt" 2>&1
  say "== $name: exit $? $(grep -v '^#' "$out/$name.txt" | awk '{print $1, $4, $NF}' | tr '\n' ';')"
}
for i in 1 2; do
  bench "push_4gpus_$i" 4 "$bin" -- -b 8M -e 1G -f 2 -n 20 -w 5 -r 5
  bench "gather4_4gpus_$i" 4 "$bin" GRADAGG_NVLINK_COPY_GATHER_MIN=8388608 -- -b 8M -e 1G -f 2 -n 20 -w 5 -r 5
done
for p in 2 8; do
  bench "gather${p}_4gpus" 4 "$bin" GRADAGG_NVLINK_COPY_GATHER_MIN=8388608 GRADAGG_NVLINK_COPY_GATHER_PIECES=$p -- -b 64M -e 1G -f 2 -n 20 -w 5 -r 5
done
tar -C "$OUT" -czf "$OUT/r2.tar.gz" r2
for i in 1 2; do
  bench "lines_old_$i" 4 .tmp_round/cap2 -- -b 2M -e 8M -f 2 -n 50 -w 10 -r 5
  bench "lines8_new_$i" 4 "$bin" GRADAGG_NVLINK_LINE_MAX=8388608 -- -b 2M -e 8M -f 2 -n 50 -w 10 -r 5
done
bench "lines8_new_6m" 4 "$bin" GRADAGG_NVLINK_LINE_MAX=8388608 -- -b 6M -e 6M -n 50 -w 10 -r 5
bench "lines_old_6m" 4 .tmp_round/cap2 -- -b 6M -e 6M -n 50 -w 10 -r 5
tar -C "$OUT" -czf "$OUT/r2.tar.gz" r2
timeout 100 "${mpirun[@]}" -np 2 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no > "$out/tests_2gpus.txt" 2>&1
say "== tests 2 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_2gpus.txt" | tr '\n' ' ')"
bench "push_2gpus" 2 "$bin" -- -b 8M -e 1G -f 2 -n 20 -w 5 -r 5
bench "gather4_2gpus" 2 "$bin" GRADAGG_NVLINK_COPY_GATHER_MIN=8388608 -- -b 8M -e 1G -f 2 -n 20 -w 5 -r 5
tar -C "$OUT" -czf "$OUT/r2.tar.gz" r2
