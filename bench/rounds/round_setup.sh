# shellcheck shell=bash disable=SC2034  # the variables are for the rounds that source this
# Sourced by the GPU rounds, after `set -uo pipefail`: `round_setup CARRY_DIR OUT_DIR` sets
#   bin        the staged carry (bench/rounds/stage.sh), as an absolute path
#   out        the round's output folder, created
#   gpus       the GPUs present, at most 8
#   sanitizer  compute-sanitizer's path ("" where there is none)
# and exports what every round runs under: the carry's libraries first, NCCL's NVLink SHARP off (NCCL_NVLS_ENABLE=0),
# a broken NVLink barrier failing in 20 s (GRADAGG_NVLINK_TIMEOUT), Open MPI allowed to run as root and oversubscribe.
# `mpirun_args` holds what every mpirun of a round takes (no binding: concurrent jobs would share cores 0 and 1).
# `say LINE` prints a line and appends it to OUT/summary.txt; `pack NAME DIR` packs DIR into OUT/NAME.tar.gz and removes
# it (the device tool brings back a few files of a call, so rounds with many logs pack them).
round_setup() {
  bin=$(cd "$1" && pwd) || { echo "round_setup: no carry folder '$1'" >&2; exit 2; }
  out=$2
  mkdir -p "$out"
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  [ "$gpus" -gt 8 ] && gpus=8
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n 1)
  . "$(dirname "${BASH_SOURCE[0]}")/../../scripts/mpi_env.sh"
  export LD_LIBRARY_PATH="$bin:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE=0
  export GRADAGG_NVLINK_TIMEOUT=${GRADAGG_NVLINK_TIMEOUT:-20}
  mpirun_args=(--allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x GRADAGG_NVLINK_TIMEOUT)
  : >"$out/summary.txt"
}

say() { echo "$*" | tee -a "$out/summary.txt"; }

pack() {
  [ -d "$2" ] || return 0
  tar -C "$(dirname "$2")" -czf "$out/$1.tar.gz" "$(basename "$2")" && rm -rf "$2"
}
