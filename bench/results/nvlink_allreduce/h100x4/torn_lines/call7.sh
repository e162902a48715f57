#!/usr/bin/env bash
# Session 15, call 7 (4 GPUs): the chained in-place test, 25 times with every call launched dependent and 25 times with
# none (a build of the test with dependentLaunchMaxBytes = 0), to tell whether call 6's 16 wrong elements (the
# first half of one 128-byte line in a line two-shot) come from dependent launches.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r7"
mpirun=(mpirun "${mpirun_args[@]}")
for v in dep nodep dep2 nodep2; do
  case $v in dep|dep2) b="$bin/gradagg_nvlink_gpu_tests" ;; *) b=.tmp_round/nodep/gradagg_nvlink_gpu_tests ;; esac
  timeout 70 "${mpirun[@]}" -np 4 "$b" --gtest_color=no --gtest_filter='*Dependent*' --gtest_repeat=12 > "$out/$v.txt" 2>&1
  say "== $v: exit $? ok=$(grep -c '^\[       OK \]' "$out/$v.txt") failed=$(grep -c '^\[  FAILED  \] GpuNodeTest' "$out/$v.txt") $(grep -h 'first wrong' "$out/$v.txt" | sort | uniq -c | tr '\n' ' ')"
done
tar -C "$OUT" -czf "$OUT/r7.tar.gz" r7
