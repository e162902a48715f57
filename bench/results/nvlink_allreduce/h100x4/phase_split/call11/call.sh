#!/usr/bin/env bash
# Session 19, call 11 (4 GPUs): what between two calls' copies slows them: the copy-scatter probe, 5 calls a timing,
# with its barriers as spinning kernels, kernels polling every 2 us, stream memory operations, an empty kernel (no
# barrier) or nothing; and once single calls as a reference.
set -uo pipefail
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r11"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
for kind in kernel sleepy memop empty none kernel1; do
  calls=5; b=$kind; [ $kind = kernel1 ] && calls=1 && b=kernel
  timeout 60 "${mpirun[@]}" -x PROBE_CALLS=$calls -x PROBE_BARRIER=$b -np 4 "$bin/copy_scatter_probe" 256 \
    > "$out/scatter_${kind}.txt" 2>&1
  say "== $kind: exit $? $(grep -E '^1 piece, 4|its|^2 pieces' "$out/scatter_${kind}.txt" | cut -c1-75 | tr '\n' ';')"
done
tar -C "$OUT" -czf "$OUT/r11.tar.gz" r11
