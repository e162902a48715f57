#!/usr/bin/env bash
# Session 16, call 9 (2 GPUs): the review's changes. The line defaults now need native atomics between every two GPUs of
# a group: on NVLink they must stay on (the benchmark's header says "in lines above 524288"). The protocol test
# (1 ms between a half's data and its flag, skip if the launch waited), the NVLink tests, and a short sweep.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r9"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -2 | tee -a "$out/summary.txt"
nvidia-smi topo -m > "$out/topo.txt" 2>&1
timeout 60 "$bin/gradagg_gpu_tests" --gtest_color=no --gtest_filter='LinePackets*' > "$out/protocol.txt" 2>&1
say "== protocol test: exit $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/protocol.txt" | tr '\n' ' ')"
timeout 120 "${mpirun[@]}" -np 2 -x GRADAGG_TRACE=1 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no > "$out/tests_2gpus.txt" 2>&1
say "== tests 2 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_2gpus.txt" | tr '\n' ' ') $(grep -c 'packets, not lines' "$out/tests_2gpus.txt") 'packets, not lines'"
timeout 60 "${mpirun[@]}" -np 2 "$bin/gradagg_nvlink_benchmark" -b 256K -e 4M -f 2 -n 20 -w 5 -r 3 > "$out/sweep_2gpus.txt" 2>&1
say "== sweep 2 GPUs: exit $? $(grep '^# node' "$out/sweep_2gpus.txt") $(grep -v '^#' "$out/sweep_2gpus.txt" | awk '{print $1, $4, $NF}' | tr '\n' ';')"
tar -C "$OUT" -czf "$OUT/r9.tar.gz" r9
