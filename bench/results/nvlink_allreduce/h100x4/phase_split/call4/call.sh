#!/usr/bin/env bash
# Session 19, call 4 (4 GPUs): the copy-scatter probe (reduce-scatter on the copy engines, sums and all-gather on the
# SMs) against all-push and NCCL, same call, alternating twice.
set -uo pipefail
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r4"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
for i in 1 2; do
  timeout 90 "${mpirun[@]}" -np 4 "$bin/copy_scatter_probe" 16 64 256 > "$out/copy_scatter_probe_$i.txt" 2>&1
  say "== copy-scatter probe #$i: exit $?"; cat "$out/copy_scatter_probe_$i.txt" | tee -a "$out/summary.txt"
  timeout 120 "${mpirun[@]}" -np 4 "$bin/gradagg_nvlink_benchmark" -b 64M -e 1G -f 4 -n 20 -w 5 -r 3 \
    > "$out/benchmark_$i.txt" 2>&1
  say "== benchmark #$i: exit $? $(grep -v '^#' "$out/benchmark_$i.txt" | awk '{print $1, $4, $9, $14, $NF}' | tr '\n' ';')"
done
tar -C "$OUT" -czf "$OUT/r4.tar.gz" r4
