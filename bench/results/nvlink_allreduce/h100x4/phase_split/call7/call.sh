#!/usr/bin/env bash
# Session 19, call 7 (4 GPUs): why the library's copy-scatter (6.3 ms at 1 GiB) is slower than the probe (4.5 ms):
# its copies alone (GRADAGG_EXPERIMENT=2: no kernel), its kernel alone (=1: no copies), a kernel taking interleaved
# parts as the probe does against contiguous slices; the probe in the same call.
set -uo pipefail
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r7"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
for i in 1 2; do
  timeout 90 "${mpirun[@]}" -np 4 "$bin/copy_scatter_probe" 256 > "$out/probe_$i.txt" 2>&1
  say "== probe #$i: exit $? $(grep -E '^1 piece|its' "$out/probe_$i.txt" | cut -c1-75 | tr '\n' ';')"
  for b in bench_contiguous bench_interleaved_exp; do
    for e in 0 1 2; do
      [ $b = bench_contiguous ] && [ $e != 0 ] && continue
      timeout 120 "${mpirun[@]}" -x GRADAGG_NVLINK_COPY_SCATTER_MIN=0 -x GRADAGG_EXPERIMENT=$e -np 4 "$bin/$b" \
        -b 256M -e 1G -f 4 -n 20 -w 5 -r 3 --no-nccl -c $([ $e = 0 ] && echo 1 || echo 0) > "$out/${b}_e${e}_$i.txt" 2>&1
      say "== $b experiment $e #$i: exit $? $(grep -v '^#' "$out/${b}_e${e}_$i.txt" | awk '{print $1/1048576 "M", $4, $7}' | tr '\n' ';')"
    done
  done
done
tar -C "$OUT" -czf "$OUT/r7.tar.gz" r7
