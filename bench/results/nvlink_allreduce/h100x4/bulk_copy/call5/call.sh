#!/usr/bin/env bash
# Session 18, call 5 (4 GPUs): all-push by bulk copies (GRADAGG_NVLINK_PUSH_BULK, experiment: 1 pushes, 2 results,
# 3 both) against thread stores (0). Tests with 3 on 4 GPUs first, then 64 MiB - 1 GiB alternating twice.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r3"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
GRADAGG_NVLINK_PUSH_BULK=3 timeout 150 "${mpirun[@]}" -np 4 -x GRADAGG_NVLINK_PUSH_BULK "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no > "$out/tests_4gpus_bulk3.txt" 2>&1
say "== tests 4 GPUs bulk 3: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_4gpus_bulk3.txt" | tr '\n' ' ')"
grep -E "FAILED|rror" "$out/tests_4gpus_bulk3.txt" | head -20 >> "$out/summary.txt"
bench() {  # NAME BULK
  GRADAGG_NVLINK_PUSH_BULK=$2 timeout 60 "${mpirun[@]}" -np 4 -x GRADAGG_NVLINK_PUSH_BULK "$bin/gradagg_nvlink_benchmark" -b 64M -e 1G -f 2 -n 20 -w 5 -r 5 > "$out/$1.txt" 2>&1
  say "== $1: exit $? $(grep -v '^#' "$out/$1.txt" | awk '{print $1, $4, $8, $NF}' | tr '\n' ';')"
}
for i in 1 2; do
  for b in 0 1 2 3; do bench "bulk${b}_$i" $b; done
done
tail -5 "$out/bulk3_1.txt" >> "$out/summary.txt"
tar -C "$OUT" -czf "$OUT/r3.tar.gz" r3
