#!/usr/bin/env bash
# Session 19, call 1 (4 GPUs): the allreduce's halves timed apart, and the copy engines' all-gather between processes.
set -uo pipefail
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r1"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
timeout 90 "${mpirun[@]}" -np 4 "$bin/gather_probe" 16 64 256 > "$out/gather_probe.txt" 2>&1
say "== gather probe: exit $?"; cat "$out/gather_probe.txt" | tee -a "$out/summary.txt"
for i in 1 2; do
  timeout 120 "${mpirun[@]}" -np 4 "$bin/gradagg_nvlink_benchmark" -b 16M -e 1G -f 4 -n 20 -w 5 -r 3 --phases \
    > "$out/phases_4gpus_$i.txt" 2>&1
  say "== phases #$i: exit $?"; grep -v '^# [bNn]' "$out/phases_4gpus_$i.txt" | cut -c1-20,30-50,75-100,125-200 | tee -a "$out/summary.txt"
done
for chunk in 65536 262144; do
  timeout 120 "${mpirun[@]}" -x GRADAGG_NVLINK_PUSH_CHUNK=$chunk -np 4 "$bin/gradagg_nvlink_benchmark" -b 256M -e 1G -f 4 \
    -n 20 -w 5 -r 3 --phases --no-nccl > "$out/phases_chunk${chunk}.txt" 2>&1
  say "== phases chunk $chunk: exit $?"; grep -v '^#' "$out/phases_chunk${chunk}.txt" | tee -a "$out/summary.txt"
done
for i in 1 2 3; do
  timeout 60 "${mpirun[@]}" -np 4 "$bin/gradagg_nvlink_benchmark" -b 8 -e 256K -f 2 -n 20 -w 5 -r 5 \
    > "$out/small_$i.txt" 2>&1
  say "== small #$i: exit $? $(grep -v '^#' "$out/small_$i.txt" | awk '{print $1, $4, $NF}' | tr '\n' ';')"
done
tar -C "$OUT" -czf "$OUT/r1.tar.gz" r1
