#!/usr/bin/env bash
# The NVLink allreduce benchmark once per variant of the GRADAGG_NVLINK_* settings, on every GPU of the machine (at
# most 8), each run with NCCL beside it, for comparing versions of a kernel in one device session.
#   bench/rounds/nvlink_variants.sh BIN_DIR OUT_DIR "NAME=VALUE ..." ["NAME=VALUE ..." ...] -- BENCHMARK_ARGS...
# A variant is a space-separated list of environment settings ("" for the defaults); GPUS=N runs on N of the GPUs
# instead of all of them. Writes
# OUT_DIR/variant_<i>.txt and prints, per variant, size, gradagg us, #wrong, NCCL us, the speedup, NCCL us on
# symmetric windows and the speedup against the faster NCCL.
set -uo pipefail
. "$(dirname "$0")/round_setup.sh"
round_setup "$1" "$2"
shift 2
variants=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do variants+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
[ -n "${GPUS:-}" ] && [ "$GPUS" -le "$gpus" ] && gpus=$GPUS
for i in "${!variants[@]}"; do
  exports=()
  for setting in ${variants[$i]}; do exports+=(-x "$setting"); done
  timeout 300 mpirun "${mpirun_args[@]}" "${exports[@]}" -np "$gpus" "$bin/gradagg_nvlink_benchmark" "$@" \
    >"$out/variant_$i.txt" 2>&1
  say "== variant $i (${variants[$i]:-defaults}) on $gpus GPUs: exit $?"
  say "$(grep -v '^#' "$out/variant_$i.txt" | awk '{print $1, $4, $7, $8, $12, $13, $15}')"
done
