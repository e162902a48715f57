#!/usr/bin/env bash
# Session 17, call 7 (4 GPUs): compute-sanitizer memcheck of the shipped build's line, chained and dependent-launch
# tests on 4 GPUs (line kernels on up to 8 blocks per SM, the line two-shot below 8 MiB).
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r7"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
timeout 150 "${mpirun[@]}" -np 4 "$sanitizer" --tool memcheck --error-exitcode 9 "$bin/gradagg_nvlink_gpu_tests" \
  --gtest_color=no --gtest_filter='*Dependent*:*LineOneShot*:*LineTwoShot*:*LinesAfter*' > "$out/memcheck_4gpus.txt" 2>&1
say "== memcheck 4 GPUs, line + chained tests: exit $? $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED)' "$out/memcheck_4gpus.txt" | sort | uniq -c | tr '\n' ' ')"
