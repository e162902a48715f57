#!/usr/bin/env bash
# Session 14, call 3 (4 GPUs): pushed terms against pulled, whole calls only (--no-phase-times), 2x2 CUDA-aware and
# staged, alternating three times.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r3"
prefix=$(cd .device-carry-mpi && pwd)
aware=(env OPAL_PREFIX="$prefix" PATH="$prefix/bin:$PATH" LD_LIBRARY_PATH="$prefix/lib:$LD_LIBRARY_PATH"
  "$prefix/bin/mpirun" --allow-run-as-root --bind-to none -x OPAL_PREFIX -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE
  -x GRADAGG_NVLINK_TIMEOUT -x GRADAGG_CUDA_AWARE_MPI=on)
staged=(mpirun "${mpirun_args[@]}" -x GRADAGG_CUDA_AWARE_MPI=off)
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
run() {  # NAME TRANSPORT PUSH CHUNK
  declare -n launch=$2
  timeout 60 "${launch[@]}" -np 4 -x GRADAGG_NVLINK_PUSH_TERMS=$3 -x GRADAGG_NVLINK_TERM_CHUNK=$4 "$bin/gradagg" \
    --device cuda --ranks-per-node 2 --bits 1 -b 16M -e 256M -f 4 -n 20 -w 3 --no-baseline --no-phase-times \
    > "$out/$1.txt" 2>&1
  say "== $1: exit $? $(grep -E '^ +[0-9]+ ' "$out/$1.txt" | awk '{print $1, $4, $(NF-1), $NF}' | tr '\n' ';')"
}
for i in 1 2 3; do
  run "aware_pull_$i" aware 0 8388608
  run "aware_push8m_$i" aware 1 8388608
  run "aware_push16m_$i" aware 1 16777216
done
for i in 1 2; do
  run "staged_pull_$i" staged 0 8388608
  run "staged_push8m_$i" staged 1 8388608
done
tar -C "$OUT" -czf "$OUT/r3.tar.gz" r3
