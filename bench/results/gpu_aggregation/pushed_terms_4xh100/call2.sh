#!/usr/bin/env bash
# Session 14, call 2 (4 GPUs): pushed terms A/B (pulled; pushed 8 MiB chunks without and with the waiting warps'
# backoff; pushed 2 and 32 MiB chunks), 2x2 CUDA-aware at 64 and 256 MiB; memcheck of 2x2 --check without NCCL.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r2"
prefix=$(cd .device-carry-mpi && pwd)
aware=(env OPAL_PREFIX="$prefix" PATH="$prefix/bin:$PATH" LD_LIBRARY_PATH="$prefix/lib:$LD_LIBRARY_PATH"
  "$prefix/bin/mpirun" --allow-run-as-root --bind-to none -x OPAL_PREFIX -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE
  -x GRADAGG_NVLINK_TIMEOUT -x GRADAGG_CUDA_AWARE_MPI=on)
staged=(mpirun "${mpirun_args[@]}" -x GRADAGG_CUDA_AWARE_MPI=off)
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
run() {  # NAME BINARY PUSH CHUNK
  timeout 60 "${aware[@]}" -np 4 -x GRADAGG_NVLINK_PUSH_TERMS=$3 -x GRADAGG_NVLINK_TERM_CHUNK=$4 "$bin/$2" --device cuda \
    --ranks-per-node 2 --bits 1 -b 64M -e 256M -f 4 -n 10 -w 3 --no-baseline > "$out/$1.txt" 2>&1
  say "== $1: exit $? $(grep -E '^ +[0-9]+ ' "$out/$1.txt" | awk '{print $1, $4, $10, $11, $12, $13, $14, $NF}' | tr '\n' ';')"
}
for i in 1 2; do
  run "pull_$i" gradagg 0 8388608
  run "push8m_nosleep_$i" gradagg_nosleep 1 8388608
  run "push8m_$i" gradagg 1 8388608
  run "push32m_$i" gradagg 1 33554432
  run "push2m_$i" gradagg 1 2097152
done
tar -C "$OUT" -czf "$OUT/r2.tar.gz" r2
timeout 200 "${staged[@]}" -np 4 "$sanitizer" --tool memcheck --error-exitcode 9 "$bin/gradagg" --device cuda \
  --ranks-per-node 2 --bits 1 -b 1K -e 16M -f 16 -n 1 -w 0 --check --no-baseline --no-nccl > "$out/memcheck_2x2.txt" 2>&1
say "== memcheck gradagg 2x2 --check (pushed terms), no NCCL: exit $? $(grep -E 'ERROR SUMMARY|# check' "$out/memcheck_2x2.txt" | sort | uniq -c | tr '\n' ' ')"
tar -C "$OUT" -czf "$OUT/r2.tar.gz" r2
