#!/usr/bin/env bash
# Session 15, call 5 (4 GPUs): all-push with 3 and 4 inbox slots (GRADAGG_NVLINK_PUSH_SLOTS: a block pushes up to 2
# or 3 rounds ahead of its peers' consumption) against 2, 256 MiB - 1 GiB, alternating twice, and 4 slots of 64 KiB
# (the inbox of 2 slots of 128 KiB); the NVLink tests on 4 GPUs; sweeps with 3 and 4 slots on 4 GPUs, 3 on 2.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r5"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
run() {  # NAME GPUS ENV... -- BENCH ARGS
  local name=$1 n=$2; shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=(-x "$1"); shift; done; shift
  timeout 100 "${mpirun[@]}" -np "$n" "${envs[@]}" "$bin/gradagg_nvlink_benchmark" "$@" > "$out/$name.txt" 2>&1
  say "== $name: exit $? $(grep -v '^#' "$out/$name.txt" | awk '{print $1, $4, $NF}' | tr '\n' ';')"
}
timeout 120 "${mpirun[@]}" -np 4 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no > "$out/tests_4gpus.txt" 2>&1
say "== tests 4 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_4gpus.txt" | tr '\n' ' ')"
for i in 1 2; do
  run "slots2_$i" 4 GRADAGG_NVLINK_PUSH_SLOTS=2 -- -b 256M -e 1G -f 2 -n 10 -w 3 -r 3
  run "slots3_$i" 4 GRADAGG_NVLINK_PUSH_SLOTS=3 -- -b 256M -e 1G -f 2 -n 10 -w 3 -r 3
  run "slots4_$i" 4 GRADAGG_NVLINK_PUSH_SLOTS=4 -- -b 256M -e 1G -f 2 -n 10 -w 3 -r 3
  run "slots4_64k_$i" 4 GRADAGG_NVLINK_PUSH_SLOTS=4 GRADAGG_NVLINK_PUSH_CHUNK=65536 -- -b 256M -e 1G -f 2 -n 10 -w 3 -r 3
done
tar -C "$OUT" -czf "$OUT/r5.tar.gz" r5
run g2_slots2 2 GRADAGG_NVLINK_PUSH_SLOTS=2 -- -b 256M -e 1G -f 2 -n 10 -w 3 -r 3
run g2_slots3 2 GRADAGG_NVLINK_PUSH_SLOTS=3 -- -b 256M -e 1G -f 2 -n 10 -w 3 -r 3
run sweep_4gpus_slots3 4 GRADAGG_NVLINK_PUSH_SLOTS=3 -- -b 8 -e 1G -f 2 -n 20 -w 5 -r 5
run sweep_4gpus_slots4 4 GRADAGG_NVLINK_PUSH_SLOTS=4 -- -b 8 -e 1G -f 2 -n 20 -w 5 -r 5
run sweep_2gpus_slots3 2 GRADAGG_NVLINK_PUSH_SLOTS=3 -- -b 8 -e 1G -f 2 -n 20 -w 5 -r 5
tar -C "$OUT" -czf "$OUT/r5.tar.gz" r5
