#!/usr/bin/env bash
# Session 19, call 12 (4 H200s): the shipped build's sweeps (the library as in session 18; the benchmark now warms every library
# up at the largest and the smallest size before the sweep, as nccl-tests does): 4 GPUs twice and 2 GPUs twice,
# alternating.
set -uo pipefail
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r12"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | tee -a "$out/summary.txt"
for i in 1 2; do
  for n in 4 2; do
    timeout 100 "${mpirun[@]}" -np $n "$bin/gradagg_nvlink_benchmark" -b 8 -e 1G -f 2 -n 20 -w 5 -r 5 \
      > "$out/sweep_${n}gpus_$i.txt" 2>&1
    say "== sweep $n GPUs #$i: exit $? $(grep -v '^#' "$out/sweep_${n}gpus_$i.txt" | awk '{print $1, $4, $NF}' | tr '\n' ';')"
  done
  tar -C "$OUT" -czf "$OUT/r12.tar.gz" r12
done
