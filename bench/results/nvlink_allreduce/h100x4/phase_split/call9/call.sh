#!/usr/bin/env bash
# Session 19, call 9 (4 GPUs): the copy-scatter probe timed as the benchmark times (20 calls back to back) and with
# its input exported to the peers as a registered buffer is: which of the two makes the library's copies slower.
set -uo pipefail
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r9"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
for calls in 1 20; do
  for export in 0 1; do
    timeout 90 "${mpirun[@]}" -x PROBE_CALLS=$calls -x PROBE_EXPORT_INPUT=$export -np 4 "$bin/copy_scatter_probe" 256 \
      > "$out/probe_calls${calls}_export${export}.txt" 2>&1
    say "== calls $calls export $export: exit $? $(grep -E '^1 piece, 4|its' "$out/probe_calls${calls}_export${export}.txt" | cut -c1-75 | tr '\n' ';')"
  done
done
tar -C "$OUT" -czf "$OUT/r9.tar.gz" r9
