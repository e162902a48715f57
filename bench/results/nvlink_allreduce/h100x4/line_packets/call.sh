#!/usr/bin/env bash
# Session 14, call 6 (4 GPUs): the packet two-shot in 128-byte lines (GRADAGG_NVLINK_PACKET_LINES=1) against 8-byte
# packets: tests, A/B 64 KiB - 4 MiB alternating, a full sweep with lines, memcheck of the line tests.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r6"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
for n in 4 2; do
  timeout 120 "${mpirun[@]}" -np $n "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no \
    --gtest_filter='*LineTwoShot*:*PacketTwoShot*:*OneShot*' > "$out/tests_${n}gpus.txt" 2>&1
  say "== packet/line tests $n GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_${n}gpus.txt" | tr '\n' ' ')"
done
for i in 1 2; do
  for lines in 0 1; do
    timeout 60 "${mpirun[@]}" -np 4 -x GRADAGG_NVLINK_PACKET_LINES=$lines -x GRADAGG_NVLINK_PACKET_MAX=4194304 \
      "$bin/gradagg_nvlink_benchmark" -b 64K -e 4M -f 2 -n 50 -w 10 -r 5 > "$out/ab_lines${lines}_$i.txt" 2>&1
    say "== 4 GPUs lines=$lines #$i: exit $? $(grep -v '^#' "$out/ab_lines${lines}_$i.txt" | awk '{print $1, $4, $7, $8, $(NF-2), $NF}' | tr '\n' ';')"
  done
done
tar -C "$OUT" -czf "$OUT/r6.tar.gz" r6
timeout 150 "${mpirun[@]}" -np 4 -x GRADAGG_NVLINK_PACKET_LINES=1 -x GRADAGG_NVLINK_PACKET_MAX=2097152 \
  "$bin/gradagg_nvlink_benchmark" -b 8 -e 1G -f 2 -n 20 -w 5 -r 5 > "$out/sweep_lines_4gpus.txt" 2>&1
say "== sweep lines up to 2 MiB, 4 GPUs: exit $? $(grep -v '^#' "$out/sweep_lines_4gpus.txt" | awk '{print $1, $4, $NF}' | tr '\n' ';')"
grep "^# gradagg at least" "$out/sweep_lines_4gpus.txt" | tee -a "$out/summary.txt"
tar -C "$OUT" -czf "$OUT/r6.tar.gz" r6
timeout 150 "${mpirun[@]}" -np 4 "$sanitizer" --tool memcheck --error-exitcode 9 "$bin/gradagg_nvlink_gpu_tests" \
  --gtest_color=no --gtest_filter='*LineTwoShotAllReduce*' > "$out/memcheck_lines_4gpus.txt" 2>&1
say "== memcheck line tests 4 GPUs: exit $? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$out/memcheck_lines_4gpus.txt" | sort | uniq -c | tr '\n' ' ')"
tar -C "$OUT" -czf "$OUT/r6.tar.gz" r6
