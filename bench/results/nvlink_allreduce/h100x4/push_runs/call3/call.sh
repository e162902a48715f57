#!/usr/bin/env bash
# Session 18, call 3 (4 GPUs): all-push pushes in runs of R vectors a peer, peers in turn (GRADAGG_NVLINK_PUSH_RUN,
# experiment), against whole chunks a peer (unset). Tests with R = 1024 on 4 GPUs first.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r1"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
GRADAGG_NVLINK_PUSH_RUN=1024 timeout 150 "${mpirun[@]}" -np 4 -x GRADAGG_NVLINK_PUSH_RUN "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no > "$out/tests_4gpus_run1024.txt" 2>&1
say "== tests 4 GPUs R=1024: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_4gpus_run1024.txt" | tr '\n' ' ')"
bench() {  # NAME RUN
  if [ -n "$2" ]; then export GRADAGG_NVLINK_PUSH_RUN=$2; else unset GRADAGG_NVLINK_PUSH_RUN; fi
  timeout 60 "${mpirun[@]}" -np 4 ${2:+-x GRADAGG_NVLINK_PUSH_RUN} "$bin/gradagg_nvlink_benchmark" -b 64M -e 1G -f 2 -n 20 -w 5 -r 5 > "$out/$1.txt" 2>&1
  say "== $1: exit $? $(grep -v '^#' "$out/$1.txt" | awk '{print $1, $4, $NF}' | tr '\n' ';')"
}
for i in 1 2; do
  bench "chunk_$i" ""
  bench "run1024_$i" 1024
  bench "run512_$i" 512
  bench "run2048_$i" 2048
done
tar -C "$OUT" -czf "$OUT/r1.tar.gz" r1
