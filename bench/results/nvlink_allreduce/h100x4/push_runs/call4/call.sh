#!/usr/bin/env bash
# Session 18, call 4 (4 GPUs): all-push at 256 MiB - 1 GiB. Push runs (GRADAGG_NVLINK_PUSH_RUN, experiment) of 2048
# and 4096 vectors against whole chunks, and with 256 threads on 264 blocks (64 or 128 KiB chunks), alternating twice.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r2"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
bench() {  # NAME VAR=VALUE...
  local name=$1; shift
  local xs=()
  for kv in "$@"; do export "${kv?}"; xs+=(-x "${kv%%=*}"); done
  timeout 60 "${mpirun[@]}" -np 4 "${xs[@]}" "$bin/gradagg_nvlink_benchmark" -b 256M -e 1G -f 2 -n 20 -w 5 -r 5 > "$out/$name.txt" 2>&1
  say "== $name: exit $? $(grep -v '^#' "$out/$name.txt" | awk '{print $1, $4, $8, $NF}' | tr '\n' ';')"
  for kv in "$@"; do unset "${kv%%=*}"; done
}
for i in 1 2; do
  bench "chunk_$i"
  bench "run2048_$i" GRADAGG_NVLINK_PUSH_RUN=2048
  bench "run4096_$i" GRADAGG_NVLINK_PUSH_RUN=4096
  bench "t256_b264_run2048_$i" GRADAGG_NVLINK_PUSH_RUN=2048 GRADAGG_NVLINK_THREADS=256 GRADAGG_NVLINK_BLOCKS=264
  bench "t256_b264_c64k_run2048_$i" GRADAGG_NVLINK_PUSH_RUN=2048 GRADAGG_NVLINK_THREADS=256 GRADAGG_NVLINK_BLOCKS=264 GRADAGG_NVLINK_PUSH_CHUNK=65536
  bench "t256_b264_$i" GRADAGG_NVLINK_THREADS=256 GRADAGG_NVLINK_BLOCKS=264
done
tar -C "$OUT" -czf "$OUT/r2.tar.gz" r2
