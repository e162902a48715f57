#!/usr/bin/env bash
# Session 16, call 7 (2 GPUs): does the second flag's cost at 2-4 MiB (4 H100s, call 5: 11-13% at 2 and 4 MiB, 2-3% at
# 3 MiB) show on 2 GPUs, and does it move with the inbox's slot stride (GRADAGG_NVLINK_LINE_MAX sizes the slots)?
# The line two-shot forced on 2 GPUs (one-shot to 64 KiB), two flags (carry) against one (.tmp_round/oneflag/), slots
# sized for 4 MiB and for 16 MiB, alternating three times.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r7"
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
  run "two_4m_$i" "$bin" 4194304
  run "one_4m_$i" .tmp_round/oneflag 4194304
  run "two_16m_$i" "$bin" 16777216
  run "one_16m_$i" .tmp_round/oneflag 16777216
done
tar -C "$OUT" -czf "$OUT/r7.tar.gz" r7
