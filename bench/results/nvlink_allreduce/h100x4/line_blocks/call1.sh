#!/usr/bin/env bash
# Session 17, call 1 (4 GPUs).
# 1. Copy-engine probe (.tmp_round/ce_probe.cu): per-GPU egress of cudaMemcpyPeerAsync to every peer at once, in a
#    ring, one pair; chunked with fenced flags; under an HBM load; against SM stores (132 x 512), same process.
# 2. Line kernels on up to 4 blocks per SM (the carry) against 2 (.tmp_round/cap2/): tests on 4 and 2 GPUs, the
#    chained reproducer 50 times; 256 KiB - 4 MiB with the line two-shot forced to 4 MiB, alternating twice.
# 3. A sweep of the carry's defaults on 4 GPUs.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r1"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | tee -a "$out/summary.txt"
timeout 120 .tmp_round/ce_probe 256 > "$out/ce_probe.txt" 2>&1; say "== ce_probe exit $?"; cat "$out/ce_probe.txt" >> "$out/summary.txt"
timeout 150 "${mpirun[@]}" -np 4 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no > "$out/tests_4gpus.txt" 2>&1
say "== tests 4 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_4gpus.txt" | tr '\n' ' ')"
timeout 100 "${mpirun[@]}" -np 4 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no --gtest_filter='*LinesAfterPacketTwoShots*' \
  --gtest_repeat=50 > "$out/chain.txt" 2>&1
say "== chain x50: exit $? ok=$(grep -c '^\[       OK \]' "$out/chain.txt") failed=$(grep -c '^\[  FAILED  \] GpuNodeTest' "$out/chain.txt")"
tar -C "$OUT" -czf "$OUT/r1.tar.gz" r1
run() {  # NAME BINARY_DIR GPUS
  timeout 60 "${mpirun[@]}" -np $3 -x GRADAGG_NVLINK_LINE_MAX=4194304 \
    "$2/gradagg_nvlink_benchmark" -b 256K -e 4M -f 2 -n 50 -w 10 -r 5 > "$out/$1.txt" 2>&1
  timeout 60 "${mpirun[@]}" -np $3 -x GRADAGG_NVLINK_LINE_MAX=4194304 \
    "$2/gradagg_nvlink_benchmark" -b 3M -e 3M -n 50 -w 10 -r 5 >> "$out/$1.txt" 2>&1
  say "== $1: exit $? $(grep -v '^#' "$out/$1.txt" | awk '{print $1, $4, $NF}' | tr '\n' ';')"
}
for i in 1 2; do
  run "cap2_4gpus_$i" .tmp_round/cap2 4
  run "cap4_4gpus_$i" "$bin" 4
done
run cap2_2gpus .tmp_round/cap2 2
run cap4_2gpus "$bin" 2
tar -C "$OUT" -czf "$OUT/r1.tar.gz" r1
timeout 100 "${mpirun[@]}" -np 4 "$bin/gradagg_nvlink_benchmark" -b 8 -e 1G -f 2 -n 20 -w 5 -r 5 > "$out/sweep_4gpus.txt" 2>&1
say "== sweep 4 GPUs: exit $? $(grep -v '^#' "$out/sweep_4gpus.txt" | awk '{print $1, $4, $NF}' | tr '\n' ';')"
timeout 100 "${mpirun[@]}" -np 2 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no > "$out/tests_2gpus.txt" 2>&1
say "== tests 2 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_2gpus.txt" | tr '\n' ' ')"
tar -C "$OUT" -czf "$OUT/r1.tar.gz" r1
