#!/usr/bin/env bash
# Session 16, call 10 (2 GPUs): line kernels on up to 4 blocks per SM (.tmp_round/cap4/) against 2 (the carry): is the
# two-flag build slow where many warps take one more group of lines than the rest? The line two-shot forced on 2 GPUs,
# alternating three times.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r10"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -2 | tee -a "$out/summary.txt"
run() {  # NAME BINARY_DIR LINE_MAX
  timeout 60 "${mpirun[@]}" -np 2 -x GRADAGG_NVLINK_ONE_SHOT_MAX=65536 -x GRADAGG_NVLINK_LINE_MAX=$3 \
    "$2/gradagg_nvlink_benchmark" -b 1M -e 4M -f 2 -n 50 -w 10 -r 5 > "$out/$1.txt" 2>&1
  timeout 60 "${mpirun[@]}" -np 2 -x GRADAGG_NVLINK_ONE_SHOT_MAX=65536 -x GRADAGG_NVLINK_LINE_MAX=$3 \
    "$2/gradagg_nvlink_benchmark" -b 3M -e 3M -n 50 -w 10 -r 5 >> "$out/$1.txt" 2>&1
  say "== $1: exit $? $(grep '^# node' "$out/$1.txt" | head -1 | sed 's/.*packet/packet/') $(grep -v '^#' "$out/$1.txt" | awk '{print $1, $4, $NF}' | tr '\n' ';')"
}
for i in 1 2 3; do
  run "cap2_$i" "$bin" 4194304
  run "cap4_$i" .tmp_round/cap4 4194304
done
tar -C "$OUT" -czf "$OUT/r10.tar.gz" r10
