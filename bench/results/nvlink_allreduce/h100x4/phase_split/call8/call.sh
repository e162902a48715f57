#!/usr/bin/env bash
# Session 19, call 8 (4 GPUs): copy inbox slots at 2 MiB (large pages) instead of 256 bytes past each 256 MiB: the
# copies alone (GRADAGG_EXPERIMENT=2), the whole call with NCCL and all-push in the same run.
set -uo pipefail
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r8"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
for i in 1 2; do
  for e in 2 0; do
    timeout 120 "${mpirun[@]}" -x GRADAGG_NVLINK_COPY_SCATTER_MIN=0 -x GRADAGG_EXPERIMENT=$e -np 4 "$bin/bench_slot2m_exp" \
      -b 64M -e 1G -f 4 -n 20 -w 5 -r 3 $([ $e = 0 ] && echo "-c 1" || echo "-c 0 --no-nccl") > "$out/slot2m_e${e}_$i.txt" 2>&1
    say "== slot 2 MiB experiment $e #$i: exit $? $(grep -v '^#' "$out/slot2m_e${e}_$i.txt" | awk '{print $1/1048576 "M", $4, $7, $NF}' | tr '\n' ';')"
  done
  timeout 120 "${mpirun[@]}" -np 4 "$bin/bench_slot2m_exp" -b 64M -e 1G -f 4 -n 20 -w 5 -r 3 > "$out/default_$i.txt" 2>&1
  say "== default #$i: exit $? $(grep -v '^#' "$out/default_$i.txt" | awk '{print $1/1048576 "M", $4, $7, $NF}' | tr '\n' ';')"
done
tar -C "$OUT" -czf "$OUT/r8.tar.gz" r8
