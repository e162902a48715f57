#!/usr/bin/env bash
# Session 16, call 8 (2 GPUs): is the second flag's cost the wait for the first half, or the 30-word layout? Three builds,
# alternating three times, the line two-shot forced on 2 GPUs: two flags (carry); two flags sent but only the last
# waited for (.tmp_round/lastflag/); one flag (.tmp_round/oneflag/).
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r8"
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
  run "two_$i" "$bin" 4194304
  run "last_$i" .tmp_round/lastflag 4194304
  run "one_$i" .tmp_round/oneflag 4194304
done
tar -C "$OUT" -czf "$OUT/r8.tar.gz" r8
