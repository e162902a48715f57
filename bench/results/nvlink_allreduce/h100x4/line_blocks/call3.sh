#!/usr/bin/env bash
# Session 17, call 3 (4 GPUs). The carry: line two-shot to 6 MiB on 3-4 GPUs by default, a warp per line group.
# 1. Copy gather in one piece (the reduce-scatter, then the copies, no overlap) against all-push, alternating twice.
# 2. 4 GPUs at 4-8 MiB: the default (lines to 6 MiB) against lines to 8 MiB, alternating twice.
# 3. 2 GPUs at 1-8 MiB: the default (one-shot to 2 MiB, pulled, all-push from 8 MiB) against the line two-shot to
#    8 MiB, and against the one-shot to 1 MiB with lines above, alternating twice.
# 4. memcheck of the line two-shot and copy-gather tests on 2 GPUs.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r3"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
bench() {  # NAME GPUS [ENV...] -- ARGS
  local name=$1 n=$2; shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=(-x "$1"); shift; done; shift
  timeout 100 "${mpirun[@]}" -np "$n" "${envs[@]}" "$bin/gradagg_nvlink_benchmark" "$@" >> "$out/$name.txt" 2>&1
  say "== $name: exit $? $(grep -v '^#' "$out/$name.txt" | awk '{print $1, $4, $NF}' | tr '\n' ';')"
}
for i in 1 2; do
  bench "push_4gpus_$i" 4 -- -b 64M -e 1G -f 2 -n 20 -w 5 -r 5
  bench "gather1_4gpus_$i" 4 GRADAGG_NVLINK_COPY_GATHER_MIN=8388608 GRADAGG_NVLINK_COPY_GATHER_PIECES=1 -- -b 64M -e 1G -f 2 -n 20 -w 5 -r 5
done
tar -C "$OUT" -czf "$OUT/r3.tar.gz" r3
for i in 1 2; do
  for s in 4M 5M 6M 7M 8M; do bench "lines6_4gpus_$i" 4 -- -b $s -e $s -n 50 -w 10 -r 5; done
  for s in 4M 5M 6M 7M 8M; do bench "lines8_4gpus_$i" 4 GRADAGG_NVLINK_LINE_MAX=8388608 -- -b $s -e $s -n 50 -w 10 -r 5; done
done
tar -C "$OUT" -czf "$OUT/r3.tar.gz" r3
for i in 1 2; do
  for s in 1M 2M 3M 4M 6M 8M; do bench "default_2gpus_$i" 2 -- -b $s -e $s -n 50 -w 10 -r 5; done
  for s in 1M 2M 3M 4M 6M 8M; do bench "lines8_2gpus_$i" 2 GRADAGG_NVLINK_LINE_MAX=8388608 -- -b $s -e $s -n 50 -w 10 -r 5; done
  for s in 1M 2M 3M 4M; do bench "oneshot1m_lines8_2gpus_$i" 2 GRADAGG_NVLINK_ONE_SHOT_MAX=1048576 GRADAGG_NVLINK_LINE_MAX=8388608 -- -b $s -e $s -n 50 -w 10 -r 5; done
done
tar -C "$OUT" -czf "$OUT/r3.tar.gz" r3
timeout 240 "${mpirun[@]}" -np 2 "$sanitizer" --tool memcheck --error-exitcode 9 "$bin/gradagg_nvlink_gpu_tests" \
  --gtest_filter='*LineTwoShotAllReduce*:*CopyGather*' > "$out/memcheck_2gpus.txt" 2>&1
say "== memcheck 2 GPUs lines + copy gather: exit $? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$out/memcheck_2gpus.txt" | tr '\n' ' ')"
tar -C "$OUT" -czf "$OUT/r3.tar.gz" r3
