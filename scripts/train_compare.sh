#!/usr/bin/env bash
# The 1-bit-versus-float32 comparison of the MLP trainer: 4 CPU ranks as 2 emulated nodes of 2, 10 epochs of
# Fashion-MNIST, in four modes (float32; 1-bit with error feedback; without; with error feedback, one step stale).
# Writes OUT_PREFIX_<mode>.csv and OUT_PREFIX.png. Extra arguments go to every train run.
#   scripts/train_compare.sh bench/results/train_cpu_2x2
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=${1:?usage: train_compare.sh OUT_PREFIX [train options]}
shift
. "$root/scripts/mpi_env.sh"
run() {  # run NAME TRAIN_ARGS...
  local name=$1
  shift
  mpirun -np 4 "$root/build/bin/train" --ranks-per-node 2 --epochs 10 --csv "${prefix}_$name.csv" "$@"
}
run float32 --bits 32 "$@"
run 1bit_ef --bits 1 "$@"
run 1bit_noef --bits 1 --no-error-feedback "$@"
run 1bit_ef_stale --bits 1 --stale "$@"
python3 "$root/scripts/plot_training.py" "$prefix.png" "${prefix}"_{float32,1bit_ef,1bit_noef,1bit_ef_stale}.csv
