#!/usr/bin/env bash
# The NVLink allreduce benchmark once per variant of the GRADAGG_NVLINK_* settings, on every GPU of the machine (at
# most 8), each run with NCCL beside it, for comparing versions of a kernel on one machine.
#   bench/rounds/nvlink_variants.sh BIN_DIR OUT_DIR "NAME=VALUE ..." ["NAME=VALUE ..." ...] -- BENCHMARK_ARGS...
# A variant is a space-separated list of environment settings ("" for the defaults); in it, BENCHMARK=PATH runs
# another build's gradagg_nvlink_benchmark (to compare builds in one run). GPUS=N runs on N of the GPUs instead of
# all of them; REPEATS=N runs every variant N times, the variants in turn. Writes OUT_DIR/variant_<i>.txt (with
# REPEATS, variant_<i>_<r>.txt) and prints, per variant, size, gradagg us, #wrong, NCCL us, the speedup, NCCL us on
# symmetric windows and the speedup against the faster NCCL.
set -uo pipefail
. "$(dirname "$0")/round_setup.sh"
round_setup "$1" "$2"
shift 2
variants=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do variants+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
[ -n "${GPUS:-}" ] && [ "$GPUS" -le "$gpus" ] && gpus=$GPUS
repeats=${REPEATS:-1}
for ((r = 1; r <= repeats; r++)); do
  suffix=""
  [ "$repeats" -gt 1 ] && suffix="_$r"
  for i in "${!variants[@]}"; do
    exports=()
    benchmark="$bin/gradagg_nvlink_benchmark"
    for setting in ${variants[$i]}; do
      case $setting in
        BENCHMARK=*) benchmark=${setting#BENCHMARK=} ;;
        *) exports+=(-x "$setting") ;;
      esac
    done
    log="$out/variant_$i$suffix.txt"
    timeout 300 mpirun "${mpirun_args[@]}" "${exports[@]}" -np "$gpus" "$benchmark" "$@" >"$log" 2>&1
    say "== variant $i$suffix (${variants[$i]:-defaults}) on $gpus GPUs: exit $?"
    say "$(grep -v '^#' "$log" | awk '{print $1, $4, $7, $8, $12, $13, $15}')"
  done
done
