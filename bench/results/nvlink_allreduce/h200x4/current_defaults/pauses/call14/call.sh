#!/usr/bin/env bash
# Session 19, call 14 (4 GPUs): do the small sizes pause only in sweeps that reach 1 GiB? Sweeps -b 8 -e 1G with and
# without NCCL's symmetric windows, and -b 8 -e 256K, alternating twice; the small sizes of each.
set -uo pipefail
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r14"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
for i in 1 2; do
  for v in to1g to1g_nosym to256k; do
    case $v in to1g) args=(-e 1G) ;; to1g_nosym) args=(-e 1G --no-symmetric) ;; to256k) args=(-e 256K) ;; esac
    timeout 100 "${mpirun[@]}" -np 4 "$bin/gradagg_nvlink_benchmark" -b 8 "${args[@]}" -f 2 -n 20 -w 5 -r 5 \
      > "$out/sweep_${v}_$i.txt" 2>&1
    say "== $v #$i: exit $? $(grep -v '^#' "$out/sweep_${v}_$i.txt" | awk '$1 <= 262144 {printf "%s %s %s;", $1, $4, $NF}') $(grep 'launch floor' "$out/sweep_${v}_$i.txt")"
  done
done
tar -C "$OUT" -czf "$OUT/r14.tar.gz" r14
