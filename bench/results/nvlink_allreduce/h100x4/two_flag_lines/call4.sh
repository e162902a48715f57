#!/usr/bin/env bash
# Session 16, call 4 (4 GPUs): the line waits with a 128 ns __nanosleep between polls (.tmp_round/sleep/) against
# without (the carry), 128 KiB - 8 MiB, alternating three times: do the spinning warps slow the lines landing in L2?
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r4"
mpirun=(mpirun "${mpirun_args[@]}")
run() {  # NAME BINARY_DIR
  timeout 60 "${mpirun[@]}" -np 4 "$2/gradagg_nvlink_benchmark" -b 128K -e 8M -f 2 -n 50 -w 10 -r 5 > "$out/$1.txt" 2>&1
  say "== $1: exit $? $(grep -v '^#' "$out/$1.txt" | awk '{print $1, $4, $NF}' | tr '\n' ';')"
}
for i in 1 2 3; do
  run "spin_$i" "$bin"
  run "sleep_$i" .tmp_round/sleep
done
tar -C "$OUT" -czf "$OUT/r4.tar.gz" r4
