#!/usr/bin/env bash
# Session 19, call 15 (4 GPUs): --phases at odd sizes (3, 9, 27, ... elements: shards with tails, and calls smaller
# than one vector a rank), the fixed shard cut against the first one (rounded down: the last elements never reduced).
set -uo pipefail
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r15"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
for b in gradagg_nvlink_benchmark phases_first_cut; do
  timeout 120 "${mpirun[@]}" -np 4 "$bin/$b" -b 12 -e 40M -f 3 -n 5 -w 2 --phases --no-symmetric > "$out/odd_$b.txt" 2>&1
  say "== $b: exit $? $(grep -v '^#' "$out/odd_$b.txt" | awk '{printf "%s:%s/%s ", $2, $7, $NF}') $(grep '^# check' "$out/odd_$b.txt")"
done
tar -C "$OUT" -czf "$OUT/r15.tar.gz" r15
