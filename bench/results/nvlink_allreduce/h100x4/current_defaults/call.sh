#!/usr/bin/env bash
# Session 14, call 7 (4 GPUs): the new defaults on 4 GPUs (one-shot to 128 KiB, packet two-shot to 256 KiB, line
# two-shot to 4 MiB): NVLink tests on 4 and 2 GPUs, full sweeps on 4 and 2 GPUs, device tests and --check on 1x4.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r7"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
for n in 4 2; do
  timeout 120 "${mpirun[@]}" -np $n "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no > "$out/tests_${n}gpus.txt" 2>&1
  say "== NVLink tests $n GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_${n}gpus.txt" | tr '\n' ' ')"
done
for n in 4 2; do
  timeout 150 "${mpirun[@]}" -np $n "$bin/gradagg_nvlink_benchmark" -b 8 -e 1G -f 2 -n 20 -w 5 -r 5 > "$out/sweep_${n}gpus.txt" 2>&1
  say "== sweep $n GPUs: exit $? $(grep -v '^#' "$out/sweep_${n}gpus.txt" | awk '{print $1, $4, $7, $NF}' | tr '\n' ';')"
  grep "^# gradagg at least\|^# node" "$out/sweep_${n}gpus.txt" | tee -a "$out/summary.txt"
done
tar -C "$OUT" -czf "$OUT/r7.tar.gz" r7
timeout 120 "${mpirun[@]}" -np 4 -x GRADAGG_TEST_RANKS_PER_NODE=4 -x GRADAGG_CUDA_AWARE_MPI=off \
  "$bin/gradagg_device_gpu_tests" --gtest_color=no > "$out/device_tests_1x4.txt" 2>&1
say "== device tests 1x4: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/device_tests_1x4.txt" | tr '\n' ' ')"
for bits in 1 32; do
  timeout 60 "${mpirun[@]}" -np 4 -x GRADAGG_CUDA_AWARE_MPI=off "$bin/gradagg" --device cuda --ranks-per-node 4 \
    --bits $bits -b 1K -e 64M -f 4 -n 2 -w 1 --check --no-baseline >> "$out/check_1x4.txt" 2>&1
  say "== check 1x4 bits $bits: exit $? $(grep '^# check' "$out/check_1x4.txt" | tail -n 1)"
done
tar -C "$OUT" -czf "$OUT/r7.tar.gz" r7
