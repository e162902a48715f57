#!/usr/bin/env bash
# Session 19, call 3 (4 GPUs): what the reduce-scatter alone spends its time on. An experimental build
# (GRADAGG_EXPERIMENT: 1 leaves out the sums, 2 the pushes, 3 both; the flags and waits stay), results unchecked.
set -uo pipefail
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r3"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
for i in 1 2; do
  for e in 0 1 2 3; do
    timeout 120 "${mpirun[@]}" -x GRADAGG_EXPERIMENT=$e -np 4 "$bin/exp_benchmark" -b 64M -e 1G -f 4 -n 20 -w 5 -r 3 \
      --phases --no-nccl -c 0 > "$out/exp${e}_$i.txt" 2>&1
    say "== experiment $e #$i: exit $? $(grep -v '^#' "$out/exp${e}_$i.txt" | awk '{print $1, $4, $(NF-2), $(NF-1)}' | tr '\n' ';')"
  done
done
tar -C "$OUT" -czf "$OUT/r3.tar.gz" r3
