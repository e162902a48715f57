#!/usr/bin/env bash
# Session 15, call 6 (4 GPUs): the review's changes (ReceiveLine, the launch check of the kernels' PTX, the packet
# two-shot in the dependent-launch test): NVLink tests on 4 and 2 GPUs, memcheck of the line and dependent tests on
# 4, a sweep up to 4 MiB on 4 GPUs (dependent launches still on: the header's "launched dependent up to").
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r6"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
timeout 120 "${mpirun[@]}" -np 4 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no > "$out/tests_4gpus.txt" 2>&1
say "== tests 4 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_4gpus.txt" | tr '\n' ' ')"
timeout 60 "${mpirun[@]}" -np 4 "$bin/gradagg_nvlink_benchmark" -b 8 -e 4M -f 2 -n 50 -w 10 -r 5 > "$out/sweep_4gpus_to_4m.txt" 2>&1
say "== sweep 4 GPUs to 4 MiB: exit $? $(grep '^# node' "$out/sweep_4gpus_to_4m.txt") $(grep -v '^#' "$out/sweep_4gpus_to_4m.txt" | awk '{print $1, $4, $NF}' | tr '\n' ';')"
tar -C "$OUT" -czf "$OUT/r6.tar.gz" r6
timeout 200 "${mpirun[@]}" -np 4 "$sanitizer" --tool memcheck --error-exitcode 9 "$bin/gradagg_nvlink_gpu_tests" \
  --gtest_color=no --gtest_filter='*Dependent*:*LineOneShot*:*LineTwoShot*' > "$out/memcheck_4gpus.txt" 2>&1
say "== memcheck 4 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/memcheck_4gpus.txt" | tr '\n' ' ') $(grep -h 'ERROR SUMMARY' "$out/memcheck_4gpus.txt" | sort | uniq -c | tr '\n' ' ')"
tar -C "$OUT" -czf "$OUT/r6.tar.gz" r6
timeout 90 "${mpirun[@]}" -np 2 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no > "$out/tests_2gpus.txt" 2>&1
say "== tests 2 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_2gpus.txt" | tr '\n' ' ')"
tar -C "$OUT" -czf "$OUT/r6.tar.gz" r6
