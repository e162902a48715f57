#!/usr/bin/env bash
# Session 17, call 4 (4 GPUs): the shipped defaults (line kernels on up to 8 blocks per SM; line two-shot below 8 MiB
# on 3-4 GPUs, to 8 MiB on 2).
# 1. The line protocol test; NVLink tests on 4 GPUs; the chained reproducer 50 times.
# 2. Sweeps on 4 and 2 GPUs, twice each, alternating; the sizes between the powers of two at 3-7 MiB.
# 3. Tests on 2 GPUs; gradagg --check on 1x4, 2x2, 4x1 (staged, 1 and 32 bits) and 2x2 CUDA-aware at 1 bit.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r4"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
timeout 60 "$bin/gradagg_gpu_tests" --gtest_color=no --gtest_filter='LinePackets*' > "$out/protocol.txt" 2>&1
say "== protocol test: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/protocol.txt" | tr '\n' ' ')"
timeout 150 "${mpirun[@]}" -np 4 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no > "$out/tests_4gpus.txt" 2>&1
say "== tests 4 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_4gpus.txt" | tr '\n' ' ')"
timeout 100 "${mpirun[@]}" -np 4 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no --gtest_filter='*LinesAfterPacketTwoShots*' \
  --gtest_repeat=50 > "$out/chain.txt" 2>&1
say "== chain x50: exit $? ok=$(grep -c '^\[       OK \]' "$out/chain.txt") failed=$(grep -c '^\[  FAILED  \] GpuNodeTest' "$out/chain.txt")"
tar -C "$OUT" -czf "$OUT/r4.tar.gz" r4
for i in 1 2; do
  for n in 4 2; do
    timeout 100 "${mpirun[@]}" -np $n "$bin/gradagg_nvlink_benchmark" -b 8 -e 1G -f 2 -n 20 -w 5 -r 5 \
      > "$out/sweep_${n}gpus_$i.txt" 2>&1
    say "== sweep $n GPUs #$i: exit $? $(grep '^# node' "$out/sweep_${n}gpus_$i.txt") $(grep -v '^#' "$out/sweep_${n}gpus_$i.txt" | awk '{print $1, $4, $NF}' | tr '\n' ';')"
  done
  tar -C "$OUT" -czf "$OUT/r4.tar.gz" r4
done
for n in 4 2; do
  for s in 3M 5M 6M 7M; do
    timeout 60 "${mpirun[@]}" -np $n "$bin/gradagg_nvlink_benchmark" -b $s -e $s -n 50 -w 10 -r 5 >> "$out/between_${n}gpus.txt" 2>&1
  done
  say "== between $n GPUs: $(grep -v '^#' "$out/between_${n}gpus.txt" | awk '{print $1, $4, $NF}' | tr '\n' ';')"
done
tar -C "$OUT" -czf "$OUT/r4.tar.gz" r4
timeout 100 "${mpirun[@]}" -np 2 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no > "$out/tests_2gpus.txt" 2>&1
say "== tests 2 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_2gpus.txt" | tr '\n' ' ')"
tar -C "$OUT" -czf "$OUT/r4.tar.gz" r4
for per in 4 2 1; do
  for bits in 1 32; do
    echo "===== --check, staged $((4 / per))x$per, $bits bits" >>"$out/check.txt"
    timeout 60 "${mpirun[@]}" -x GRADAGG_CUDA_AWARE_MPI=off -np 4 "$bin/gradagg" --device cuda --ranks-per-node "$per" \
      --bits "$bits" -b 1K -e 16M -f 64 -n 2 -w 1 --check --no-baseline >>"$out/check.txt" 2>&1
    say "== check staged $((4 / per))x$per bits $bits: exit $? $(grep '^# check' "$out/check.txt" | tail -n 1)"
  done
done
prefix=$(cd .device-carry-mpi && pwd)
echo "===== --check, aware 2x2, 1 bit" >>"$out/check.txt"
timeout 60 env OPAL_PREFIX="$prefix" PATH="$prefix/bin:$PATH" LD_LIBRARY_PATH="$prefix/lib:$LD_LIBRARY_PATH" \
  "$prefix/bin/mpirun" --allow-run-as-root --bind-to none -x OPAL_PREFIX -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
  -x GRADAGG_NVLINK_TIMEOUT -x GRADAGG_CUDA_AWARE_MPI=on -np 4 "$bin/gradagg" --device cuda --ranks-per-node 2 \
  --bits 1 -b 1K -e 16M -f 64 -n 2 -w 1 --check --no-baseline >>"$out/check.txt" 2>&1
say "== check aware 2x2 bits 1: exit $? $(grep '^# check' "$out/check.txt" | tail -n 1)"
tar -C "$OUT" -czf "$OUT/r4.tar.gz" r4
