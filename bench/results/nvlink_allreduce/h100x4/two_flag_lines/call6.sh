#!/usr/bin/env bash
# Session 16, call 6 (4 GPUs): the shipped defaults (line two-shot to 3 MiB, lines with two flags).
# 1. Diagnostic build (.tmp_round/diag/, not committed): how often a waiting warp sees one half of a line carry the
#    flag and not the other (counted per spin, printed at powers of two), at 256 KiB, 2 MiB, 4 MiB in lines.
# 2. The line protocol test; the NVLink tests on 4 and 2 GPUs; the chained reproducer 50 times.
# 3. Sweeps on 4 and 2 GPUs, twice each, alternating.
# 4. gradagg --check on 1x4, 2x2, 4x1 at 1 and 32 bits with each transport; the device tests on 2x2 staged.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r6"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
for size in 256K 2M 4M; do
  timeout 60 "${mpirun[@]}" -np 4 -x GRADAGG_NVLINK_LINE_MAX=4194304 .tmp_round/diag/gradagg_nvlink_benchmark \
    -b $size -e $size -n 50 -w 10 -r 5 > "$out/diag_$size.txt" 2>&1
  say "== diag $size: exit $? $(grep -v '^#' "$out/diag_$size.txt" | grep -v DIAG | awk '{print $1, $4, $NF}' | tr '\n' ';') $(grep DIAG "$out/diag_$size.txt" | sort -k3 -n | awk '{last[$2]=$3} END {for (k in last) printf "%s %s; ", k, last[k]}')"
done
timeout 60 "$bin/gradagg_gpu_tests" --gtest_color=no --gtest_filter='LinePackets*' > "$out/protocol.txt" 2>&1
say "== protocol test: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/protocol.txt" | tr '\n' ' ')"
timeout 150 "${mpirun[@]}" -np 4 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no > "$out/tests_4gpus.txt" 2>&1
say "== tests 4 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_4gpus.txt" | tr '\n' ' ')"
timeout 100 "${mpirun[@]}" -np 2 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no > "$out/tests_2gpus.txt" 2>&1
say "== tests 2 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_2gpus.txt" | tr '\n' ' ')"
timeout 100 "${mpirun[@]}" -np 4 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no --gtest_filter='*LinesAfterPacketTwoShots*' \
  --gtest_repeat=50 > "$out/chain.txt" 2>&1
say "== chain x50: exit $? ok=$(grep -c '^\[       OK \]' "$out/chain.txt") failed=$(grep -c '^\[  FAILED  \] GpuNodeTest' "$out/chain.txt")"
tar -C "$OUT" -czf "$OUT/r6.tar.gz" r6
for i in 1 2; do
  for n in 4 2; do
    timeout 100 "${mpirun[@]}" -np $n "$bin/gradagg_nvlink_benchmark" -b 8 -e 1G -f 2 -n 20 -w 5 -r 5 \
      > "$out/sweep_${n}gpus_$i.txt" 2>&1
    say "== sweep $n GPUs #$i: exit $? $(grep '^# node' "$out/sweep_${n}gpus_$i.txt") $(grep -v '^#' "$out/sweep_${n}gpus_$i.txt" | awk '{print $1, $4, $NF}' | tr '\n' ';')"
  done
  tar -C "$OUT" -czf "$OUT/r6.tar.gz" r6
done
prefix=$(cd .device-carry-mpi && pwd)
staged=(mpirun "${mpirun_args[@]}" -x GRADAGG_CUDA_AWARE_MPI=off)
aware=(env OPAL_PREFIX="$prefix" PATH="$prefix/bin:$PATH" LD_LIBRARY_PATH="$prefix/lib:$LD_LIBRARY_PATH"
  "$prefix/bin/mpirun" --allow-run-as-root --bind-to none -x OPAL_PREFIX -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE
  -x GRADAGG_NVLINK_TIMEOUT -x GRADAGG_CUDA_AWARE_MPI=on)
for transport in staged aware; do
  declare -n launch=$transport
  for per in 4 2 1; do
    for bits in 1 32; do
      echo "===== --check, $transport $((4 / per))x$per, $bits bits" >>"$out/check.txt"
      timeout 90 "${launch[@]}" -np 4 "$bin/gradagg" --device cuda --ranks-per-node "$per" --bits "$bits" \
        -b 1K -e 4M -f 64 -n 2 -w 1 --check --no-baseline >>"$out/check.txt" 2>&1
      say "== check $transport $((4 / per))x$per bits $bits: exit $? $(grep '^# check' "$out/check.txt" | tail -n 1)"
    done
  done
done
tar -C "$OUT" -czf "$OUT/r6.tar.gz" r6
timeout 200 "${staged[@]}" -np 4 -x GRADAGG_TEST_RANKS_PER_NODE=2 "$bin/gradagg_device_gpu_tests" --gtest_color=no \
  > "$out/device_tests_2x2.txt" 2>&1
say "== device tests staged 2x2: exit $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/device_tests_2x2.txt" | tail -n 2 | tr '\n' ' ')"
tar -C "$OUT" -czf "$OUT/r6.tar.gz" r6
