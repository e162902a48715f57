#!/usr/bin/env bash
# Session 14, call 1 (4 GPUs): the peers' terms pushed into phase 2's quantizer (copy engines + stream-written flags).
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r1"
prefix=$(cd .device-carry-mpi && pwd)
aware=(env OPAL_PREFIX="$prefix" PATH="$prefix/bin:$PATH" LD_LIBRARY_PATH="$prefix/lib:$LD_LIBRARY_PATH"
  "$prefix/bin/mpirun" --allow-run-as-root --bind-to none -x OPAL_PREFIX -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE
  -x GRADAGG_NVLINK_TIMEOUT -x GRADAGG_CUDA_AWARE_MPI=on)
staged=(mpirun "${mpirun_args[@]}" -x GRADAGG_CUDA_AWARE_MPI=off)
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
timeout 60 "$bin/gradagg_gpu_tests" --gtest_color=no --gtest_filter='*Terms*' > "$out/quantizer_terms.txt" 2>&1
say "== quantizer *Terms*: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/quantizer_terms.txt" | tr '\n' ' ')"
for n in 2 4; do
  timeout 60 "${staged[@]}" -np $n "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no --gtest_filter='*LeftToTheReader*' \
    > "$out/nvlink_reader_${n}.txt" 2>&1
  say "== nvlink *LeftToTheReader* $n GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/nvlink_reader_${n}.txt" | tr '\n' ' ')"
done
for i in 1 2; do
  for push in 1 0; do
    timeout 90 "${aware[@]}" -np 4 -x GRADAGG_NVLINK_PUSH_TERMS=$push -x GRADAGG_TRACE=1 "$bin/gradagg" --device cuda \
      --ranks-per-node 2 --bits 1 -b 16M -e 256M -f 4 -n 10 -w 3 > "$out/table_push${push}_$i.txt" 2>&1
    say "== table aware push=$push #$i: exit $? $(grep -v '^#' "$out/table_push${push}_$i.txt" | awk '{print $1, $4, $7, $8, $10, $11, $12, $13, $14}' | tr '\n' ';')"
  done
done
grep -h "device path" "$out"/table_push1_1.txt | head -2 | tee -a "$out/summary.txt"
tar -C "$OUT" -czf "$OUT/r1.tar.gz" r1
timeout 150 "${aware[@]}" -np 4 -x GRADAGG_TEST_RANKS_PER_NODE=2 "$bin/gradagg_device_gpu_tests" --gtest_color=no \
  > "$out/device_tests_2x2_aware.txt" 2>&1
say "== device tests 2x2 aware: exit $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/device_tests_2x2_aware.txt" | tr '\n' ' ')"
for t in "aware 1" "aware 4" "staged 1" "aware 1 --tensors 2,5010,6" "staged 8 --tensors 2,5010,6"; do
  set -- $t; tr=$1; shift
  declare -n launch=$tr
  timeout 60 "${launch[@]}" -np 4 "$bin/gradagg" --device cuda --ranks-per-node 2 --bits "$@" -b 1K -e 64M -f 64 -n 2 \
    -w 1 --check --no-baseline >> "$out/check.txt" 2>&1
  say "== check 2x2 $t: exit $? $(grep '^# check' "$out/check.txt" | tail -n 1)"
done
tar -C "$OUT" -czf "$OUT/r1.tar.gz" r1
timeout 150 "${staged[@]}" -np 4 "$sanitizer" --tool memcheck --error-exitcode 9 "$bin/gradagg" --device cuda \
  --ranks-per-node 2 --bits 1 -b 1K -e 16M -f 16 -n 1 -w 0 --check --no-baseline > "$out/memcheck_2x2.txt" 2>&1
say "== memcheck gradagg 2x2 --check: exit $? $(grep -E 'ERROR SUMMARY' "$out/memcheck_2x2.txt" | tr '\n' ' ')"
tar -C "$OUT" -czf "$OUT/r1.tar.gz" r1
