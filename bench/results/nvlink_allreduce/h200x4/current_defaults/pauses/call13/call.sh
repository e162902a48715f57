#!/usr/bin/env bash
# Session 19, call 13 (4 GPUs): the small sizes' pauses, with each rank bound to a core of its own against unbound
# ranks (the rounds' default), three runs each, alternating.
set -uo pipefail
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r13"
unbound=(mpirun "${mpirun_args[@]}")
bound=(mpirun --allow-run-as-root --bind-to core --map-by core -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x GRADAGG_NVLINK_TIMEOUT)
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
nproc | tee -a "$out/summary.txt"
for i in 1 2 3; do
  for b in unbound bound; do
    if [ $b = bound ]; then run=("${bound[@]}"); else run=("${unbound[@]}"); fi
    timeout 60 "${run[@]}" -np 4 "$bin/gradagg_nvlink_benchmark" -b 8 -e 256K -f 2 -n 20 -w 5 -r 5 \
      > "$out/small_${b}_$i.txt" 2>&1
    say "== $b #$i: exit $? $(grep -v '^#' "$out/small_${b}_$i.txt" | awk '{printf "%s %s %s;", $1, $4, $NF}') $(grep 'launch floor' "$out/small_${b}_$i.txt")"
  done
done
tar -C "$OUT" -czf "$OUT/r13.tar.gz" r13
