#!/usr/bin/env bash
# Session 18, call 8 (4 GPUs): 4-16 MiB, the build before push runs (a08343b) against the shipped one (8f1b41d), and
# the line two-shot to 8 MiB (GRADAGG_NVLINK_LINE_MAX=8388608) on the shipped build, alternating twice.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r8"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
bench() {  # NAME BINARY [VAR=VALUE]
  local xs=()
  [ -n "${3:-}" ] && { export "${3?}"; xs=(-x "${3%%=*}"); }
  timeout 60 "${mpirun[@]}" -np 4 "${xs[@]}" "$2" -b 4M -e 16M -f 2 -n 50 -w 10 -r 5 > "$out/$1.txt" 2>&1
  say "== $1: exit $? $(grep -v '^#' "$out/$1.txt" | awk '{print $1, $4, $8, $13, $NF}' | tr '\n' ';')"
  [ -n "${3:-}" ] && unset "${3%%=*}"
}
for i in 1 2; do
  bench "before_$i" .tmp_round/old/gradagg_nvlink_benchmark
  bench "shipped_$i" "$bin/gradagg_nvlink_benchmark"
  bench "lines8m_$i" "$bin/gradagg_nvlink_benchmark" GRADAGG_NVLINK_LINE_MAX=8388608
done
tar -C "$OUT" -czf "$OUT/r8.tar.gz" r8
