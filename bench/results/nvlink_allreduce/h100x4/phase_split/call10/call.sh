#!/usr/bin/env bash
# Session 19, call 10 (4 GPUs): the copy engines' gather back to back with nothing between (PROBE_CALLS=20) against
# single gathers; the copy-scatter probe at 1 and 3 calls a timing.
set -uo pipefail
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r10"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
for calls in 1 20; do
  timeout 90 "${mpirun[@]}" -x PROBE_CALLS=$calls -np 4 "$bin/gather_probe" 64 256 > "$out/gather_calls${calls}.txt" 2>&1
  say "== gather, calls $calls: exit $?"; grep -v '^#' "$out/gather_calls${calls}.txt" | cut -c1-110 | tee -a "$out/summary.txt"
done
for calls in 1 3; do
  timeout 90 "${mpirun[@]}" -x PROBE_CALLS=$calls -np 4 "$bin/copy_scatter_probe" 256 > "$out/scatter_calls${calls}.txt" 2>&1
  say "== copy-scatter, calls $calls: exit $? $(grep -E '^1 piece, 4|its' "$out/scatter_calls${calls}.txt" | cut -c1-75 | tr '\n' ';')"
done
tar -C "$OUT" -czf "$OUT/r10.tar.gz" r10
