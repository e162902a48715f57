#!/usr/bin/env bash
# Session 19, call 2 (4 GPUs): the reduce-scatter alone on more, smaller blocks; the gather probe with its check fixed.
set -uo pipefail
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r2"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
timeout 90 "${mpirun[@]}" -np 4 "$bin/gather_probe" 64 256 > "$out/gather_probe.txt" 2>&1
say "== gather probe: exit $?"; cat "$out/gather_probe.txt" | tee -a "$out/summary.txt"
for i in 1 2; do
  for tb in 512x132 256x264 128x512; do
    timeout 120 "${mpirun[@]}" -x GRADAGG_NVLINK_THREADS=${tb%x*} -x GRADAGG_NVLINK_BLOCKS=${tb#*x} -np 4 \
      "$bin/gradagg_nvlink_benchmark" -b 64M -e 1G -f 4 -n 20 -w 5 -r 3 --phases --no-nccl > "$out/phases_${tb}_$i.txt" 2>&1
    say "== phases $tb #$i: exit $? $(grep -v '^#' "$out/phases_${tb}_$i.txt" | awk '{print $1, $4, $(NF-2), $(NF-1), $NF}' | tr '\n' ';')"
  done
done
tar -C "$OUT" -czf "$OUT/r2.tar.gz" r2
