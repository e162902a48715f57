#!/usr/bin/env bash
# Session 15, call 3 (4 GPUs): the 2 x 2 shape at 256 MiB with phases 1 and 3 inside phase 2 (the default) and through
# a stripe (GRADAGG_NVLINK_SUM_IN_READER=0), alternating twice, CUDA-aware; --check on 1x4, 2x2, 4x1 with both
# transports; the device tests on 2x2 staged; memcheck of gradagg --check on 2x2.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r3"
prefix=$(cd .device-carry-mpi && pwd)
aware=(env OPAL_PREFIX="$prefix" PATH="$prefix/bin:$PATH" LD_LIBRARY_PATH="$prefix/lib:$LD_LIBRARY_PATH"
  "$prefix/bin/mpirun" --allow-run-as-root --bind-to none -x OPAL_PREFIX -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE
  -x GRADAGG_NVLINK_TIMEOUT -x GRADAGG_CUDA_AWARE_MPI=on)
staged=(mpirun "${mpirun_args[@]}" -x GRADAGG_CUDA_AWARE_MPI=off)
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
for i in 1 2; do
  for fused in 1 0; do
    timeout 90 "${aware[@]}" -np 4 -x GRADAGG_NVLINK_SUM_IN_READER=$fused "$bin/gradagg" --device cuda \
      --ranks-per-node 2 --bits 1 -b 256M -e 256M -f 2 -n 10 -w 3 --no-baseline > "$out/phases_fused${fused}_$i.txt" 2>&1
    say "== 2x2 256 MiB aware fused=$fused #$i: exit $? $(grep -v '^#' "$out/phases_fused${fused}_$i.txt" | grep float | awk '{print $1, $4, $10, $11, $12, $13, $14, $NF}')"
  done
done
tar -C "$OUT" -czf "$OUT/r3.tar.gz" r3
for t in "aware 2 1" "aware 2 8" "aware 4 1" "aware 1 1" "staged 2 1" "staged 2 8" "staged 4 1" "staged 1 1" "aware 2 1 --tensors 2,5010,6" "staged 2 4 --tensors 2,5010,6"; do
  set -- $t; tr=$1; per=$2; shift 2
  declare -n launch=$tr
  echo "===== $t" >> "$out/check.txt"
  timeout 60 "${launch[@]}" -np 4 "$bin/gradagg" --device cuda --ranks-per-node "$per" --bits "$@" -b 1K -e 64M -f 64 -n 2 \
    -w 1 --check --no-baseline >> "$out/check.txt" 2>&1
  say "== check $((4 / per))x$per $t: exit $? $(grep '^# check' "$out/check.txt" | tail -n 1)"
done
tar -C "$OUT" -czf "$OUT/r3.tar.gz" r3
timeout 200 "${staged[@]}" -np 4 -x GRADAGG_TEST_RANKS_PER_NODE=2 "$bin/gradagg_device_gpu_tests" --gtest_color=no \
  > "$out/device_tests_2x2_staged.txt" 2>&1
say "== device tests 2x2 staged: exit $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/device_tests_2x2_staged.txt" | tr '\n' ' ')"
tar -C "$OUT" -czf "$OUT/r3.tar.gz" r3
timeout 150 "${staged[@]}" -np 4 "$sanitizer" --tool memcheck --error-exitcode 9 "$bin/gradagg" --device cuda \
  --ranks-per-node 2 --bits 1 -b 1K -e 16M -f 16 -n 1 -w 0 --check --no-baseline --no-nccl > "$out/memcheck_2x2.txt" 2>&1
say "== memcheck gradagg 2x2 --check: exit $? $(grep -E 'ERROR SUMMARY' "$out/memcheck_2x2.txt" | sort | uniq -c | tr '\n' ' ')"
tar -C "$OUT" -czf "$OUT/r3.tar.gz" r3
