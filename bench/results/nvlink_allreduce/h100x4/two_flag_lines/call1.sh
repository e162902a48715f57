#!/usr/bin/env bash
# Session 16, call 1 (4 GPUs): lines with a flag in each 64-byte half (30 data words) against the one-flag build
# (.tmp_round/oneflag/), and the line paths back in the defaults.
# 1. The line protocol test (a line whose halves land 50 ms apart, in mapped host memory): both builds.
# 2. Packet two-shots among line calls, chained in place: 100 repeats (200 chains) of each build, alternating.
# 3. The NVLink tests on 4 and 2 GPUs; memcheck of the line and chained tests on 4.
# 4. Sweeps of the defaults on 4 and 2 GPUs, twice each, alternating.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r1"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
one=.tmp_round/oneflag
for v in two one; do
  b="$bin"; [ $v = one ] && b=$one
  timeout 60 "$b/gradagg_gpu_tests" --gtest_color=no --gtest_filter='LinePackets*' > "$out/protocol_$v.txt" 2>&1
  say "== protocol test, $v flag(s): exit $? $(grep -E '^\[  (PASSED|FAILED) |stale|never came|took a line' "$out/protocol_$v.txt" | tr '\n' ' ')"
done
chain() {  # NAME BUILD_DIR REPEATS
  timeout 150 "${mpirun[@]}" -np 4 "$2/gradagg_nvlink_gpu_tests" --gtest_color=no --gtest_filter='*LinesAfterPacketTwoShots*' \
    --gtest_repeat="$3" > "$out/$1.txt" 2>&1
  say "== $1: exit $? ok=$(grep -c '^\[       OK \]' "$out/$1.txt") failed=$(grep -c '^\[  FAILED  \] GpuNodeTest' "$out/$1.txt") $(grep -h 'first wrong' "$out/$1.txt" | sort | uniq -c | tr '\n' ' ')"
}
chain chain_two_1 "$bin" 50
chain chain_one_1 "$one" 50
chain chain_two_2 "$bin" 50
chain chain_one_2 "$one" 50
tar -C "$OUT" -czf "$OUT/r1.tar.gz" r1
timeout 150 "${mpirun[@]}" -np 4 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no > "$out/tests_4gpus.txt" 2>&1
say "== tests 4 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_4gpus.txt" | tr '\n' ' ')"
timeout 100 "${mpirun[@]}" -np 2 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no > "$out/tests_2gpus.txt" 2>&1
say "== tests 2 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_2gpus.txt" | tr '\n' ' ')"
tar -C "$OUT" -czf "$OUT/r1.tar.gz" r1
for i in 1 2; do
  for n in 4 2; do
    timeout 100 "${mpirun[@]}" -np $n "$bin/gradagg_nvlink_benchmark" -b 8 -e 1G -f 2 -n 20 -w 5 -r 5 \
      > "$out/sweep_${n}gpus_$i.txt" 2>&1
    say "== sweep $n GPUs #$i: exit $? $(grep '^# node' "$out/sweep_${n}gpus_$i.txt") $(grep -v '^#' "$out/sweep_${n}gpus_$i.txt" | awk '{print $1, $4, $NF}' | tr '\n' ';')"
  done
  tar -C "$OUT" -czf "$OUT/r1.tar.gz" r1
done
timeout 150 "${mpirun[@]}" -np 4 "$sanitizer" --tool memcheck --error-exitcode 9 "$bin/gradagg_nvlink_gpu_tests" \
  --gtest_color=no --gtest_filter='*Dependent*:*LineOneShot*:*LineTwoShot*:*LinesAfter*' > "$out/memcheck_4gpus.txt" 2>&1
say "== memcheck 4 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/memcheck_4gpus.txt" | tr '\n' ' ') $(grep -h 'ERROR SUMMARY' "$out/memcheck_4gpus.txt" | sort | uniq -c | tr '\n' ' ')"
tar -C "$OUT" -czf "$OUT/r1.tar.gz" r1
