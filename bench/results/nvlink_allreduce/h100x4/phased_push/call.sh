#!/usr/bin/env bash
# Session 17, call 6 (4 GPUs): the phased all-push (GRADAGG_NVLINK_PEER_ORDER=3: a block writes to one peer per step,
# rank + s at step s, its results a round later).
# 1. NVLink tests on 4 GPUs (phased in EveryPeerOrder, ManyRounds and PhasedAllPushChainedInPlace); the chained test
#    of a build without the final wait for the peers' results (.tmp_round/broken/).
# 2. 8 MiB - 1 GiB: the default order (rotated per block) against phased, alternating twice.
# 3. Tests on 2 GPUs.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r6"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
timeout 150 "${mpirun[@]}" -np 4 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no > "$out/tests_4gpus.txt" 2>&1
say "== tests 4 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_4gpus.txt" | tr '\n' ' ')"
timeout 60 "${mpirun[@]}" -np 4 .tmp_round/broken/gradagg_nvlink_gpu_tests --gtest_color=no \
  --gtest_filter='*PhasedAllPushChained*' --gtest_repeat=5 > "$out/broken_4gpus.txt" 2>&1
say "== broken build (no final wait), phased chained x5: exit $? ok=$(grep -c '^\[       OK \]' "$out/broken_4gpus.txt") $(grep -m2 'first wrong' "$out/broken_4gpus.txt" | tr '\n' ' ')"
tar -C "$OUT" -czf "$OUT/r6.tar.gz" r6
bench() {  # NAME GPUS [ENV...] -- ARGS
  local name=$1 n=$2; shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=(-x "$1"); shift; done; shift
  timeout 100 "${mpirun[@]}" -np "$n" "${envs[@]}" "$bin/gradagg_nvlink_benchmark" "$@" > "$out/$name.txt" 2>&1
  say "== $name: exit $? $(grep -v '^#' "$out/$name.txt" | awk '{print $1, $4, $6, $NF}' | tr '\n' ';')"
}
for i in 1 2; do
  bench "rotated_$i" 4 -- -b 8M -e 1G -f 2 -n 20 -w 5 -r 5
  bench "phased_$i" 4 GRADAGG_NVLINK_PEER_ORDER=3 -- -b 8M -e 1G -f 2 -n 20 -w 5 -r 5
  tar -C "$OUT" -czf "$OUT/r6.tar.gz" r6
done
timeout 100 "${mpirun[@]}" -np 2 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no > "$out/tests_2gpus.txt" 2>&1
say "== tests 2 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_2gpus.txt" | tr '\n' ' ')"
tar -C "$OUT" -czf "$OUT/r6.tar.gz" r6
