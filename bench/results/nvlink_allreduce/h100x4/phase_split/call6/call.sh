#!/usr/bin/env bash
# Session 19, call 6 (4 GPUs): the copy-scatter allreduce (GRADAGG_NVLINK_COPY_SCATTER_MIN): its tests, then the
# benchmark from 8 MiB with it on every registered call against the default (off), alternating twice.
set -uo pipefail
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r6"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
timeout 120 "${mpirun[@]}" -np 4 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no \
  --gtest_filter='*CopyScatter*:*CopyInbox*' > "$out/tests_copy_scatter_4gpus.txt" 2>&1
say "== copy-scatter tests 4 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) |^\[  FAILED  \]' "$out/tests_copy_scatter_4gpus.txt" | tr '\n' ' ')"
for i in 1 2; do
  for min in default 0; do
    if [ $min = default ]; then env=(); else env=(-x GRADAGG_NVLINK_COPY_SCATTER_MIN=$min); fi
    timeout 120 "${mpirun[@]}" "${env[@]}" -np 4 "$bin/gradagg_nvlink_benchmark" -b 8M -e 1G -f 2 -n 20 -w 5 -r 3 \
      > "$out/sweep_min_${min}_$i.txt" 2>&1
    say "== min $min #$i: exit $? $(grep -v '^#' "$out/sweep_min_${min}_$i.txt" | awk '{print $1/1048576 "M", $4, $NF}' | tr '\n' ';')"
  done
done
tar -C "$OUT" -czf "$OUT/r6.tar.gz" r6
