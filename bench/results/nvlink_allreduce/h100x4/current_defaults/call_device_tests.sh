#!/usr/bin/env bash
# Session 14, call 8 (4 GPUs): the device tests on 1x4 again, the registered-buffer tests' "large" tensor now above the
# line two-shot's 4 MiB (with the new defaults a 4 MiB tensor is reduced in place from any buffer).
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r8"
timeout 120 mpirun "${mpirun_args[@]}" -np 4 -x GRADAGG_TEST_RANKS_PER_NODE=4 -x GRADAGG_CUDA_AWARE_MPI=off \
  "$bin/gradagg_device_gpu_tests" --gtest_color=no > "$out/device_tests_1x4.txt" 2>&1
say "== device tests 1x4: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/device_tests_1x4.txt" | tr '\n' ' ')"
