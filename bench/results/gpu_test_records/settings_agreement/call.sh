#!/usr/bin/env bash
# Session 18, call 10 (1 GPU, 2 ranks sharing it): GpuNode refuses settings that differ between ranks. The shipped
# build's test, a few all-push tests beside it, and the same test on a build without the check (must fail).
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r10"
export GRADAGG_NVLINK_SHARE_GPUS=1
mpirun=(mpirun "${mpirun_args[@]}" -x GRADAGG_NVLINK_SHARE_GPUS)
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
timeout 200 "${mpirun[@]}" -np 2 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no \
  --gtest_filter='*SettingsThatDiffer*:*AllPushWithOtherChunks*:*AllPushReduceScatterOfOddShards*:*AMismatchedAllPushCall*' > "$out/tests_shared_2ranks.txt" 2>&1
say "== shipped, 2 ranks on 1 GPU: exit $? $(grep -E '^\[  (PASSED|FAILED) |^\[       OK|^\[  FAILED  \] Gpu' "$out/tests_shared_2ranks.txt" | tr '\n' ' ')"
timeout 100 "${mpirun[@]}" -np 2 .tmp_round/nocheck/gradagg_nvlink_gpu_tests --gtest_color=no \
  --gtest_filter='*SettingsThatDiffer*' > "$out/without_check.txt" 2>&1
say "== without the check: exit $? $(grep -E '^\[  (PASSED|FAILED) |Failure|node was built' "$out/without_check.txt" | tr '\n' ' ')"
