#!/usr/bin/env bash
# The NVLink allreduce benchmark once per variant of the GRADAGG_NVLINK_* settings, on every GPU of the machine (at
# most 8), each run with NCCL beside it, for comparing versions of a kernel in one device session.
#   bench/rounds/nvlink_variants.sh BIN_DIR OUT_DIR "NAME=VALUE ..." ["NAME=VALUE ..." ...] -- BENCHMARK_ARGS...
# A variant is a space-separated list of environment settings ("" for the defaults); GPUS=N runs on N of the GPUs
# instead of all of them. Writes
# OUT_DIR/variant_<i>.txt and prints, per variant, size, gradagg us, #wrong, NCCL us, the speedup, NCCL us on
# symmetric windows and the speedup against the faster NCCL.
set -uo pipefail
bin=$(cd "$1" && pwd) out=$2
shift 2
variants=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do variants+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
mkdir -p "$out"
gpus=$(nvidia-smi -L | wc -l)
[ "$gpus" -gt 8 ] && gpus=8
[ -n "${GPUS:-}" ] && [ "$GPUS" -le "$gpus" ] && gpus=$GPUS
for i in "${!variants[@]}"; do
  settings=(LD_LIBRARY_PATH="$bin:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE=0 ${variants[$i]})
  exports=()
  for setting in "${settings[@]}"; do exports+=(-x "$setting"); done
  timeout 300 mpirun --allow-run-as-root --bind-to none "${exports[@]}" -np "$gpus" "$bin/gradagg_nvlink_benchmark" \
    "$@" >"$out/variant_$i.txt" 2>&1
  echo "== variant $i (${variants[$i]:-defaults}) on $gpus GPUs: exit $?"
  grep -v '^#' "$out/variant_$i.txt" | awk '{print $1, $4, $7, $8, $12, $13, $16}'
done
