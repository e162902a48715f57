#!/usr/bin/env bash
# The learning-rate sweep behind the trainer's recipes: float32 only, 4 CPU ranks as 2 emulated nodes of 2, 10 epochs
# with a cosine schedule, seed 1, for plain SGD, momentum 0.9 and Adam. Writes OUT_DIR/sweep_<optimizer>_lr<lr>.csv
# and prints the final test accuracy of each (bench/NOTES.md takes the best per optimizer).
#   bench/rounds/train_lr_sweep.sh /tmp/lr_sweep
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: train_lr_sweep.sh OUT_DIR}
mkdir -p "$out"
. "$root/scripts/mpi_env.sh"
# Override with OPTIMIZERS="momentum" MOMENTUM_RATES="0.2", say, to add points to a sweep.
declare -A rates=([sgd]="${SGD_RATES:-0.1 0.2 0.4 0.8}" [momentum]="${MOMENTUM_RATES:-0.01 0.02 0.05 0.1 0.2}"
                  [adam]="${ADAM_RATES:-0.0003 0.001 0.003}")
printf "%-10s %-8s %s\n" optimizer lr test_accuracy
for optimizer in ${OPTIMIZERS:-sgd momentum adam}; do
  for lr in ${rates[$optimizer]}; do
    csv="$out/sweep_${optimizer}_lr$lr.csv"
    mpirun -np 4 "$root/build/bin/train" --ranks-per-node 2 --epochs 10 --schedule cosine --optimizer "$optimizer" \
      --lr "$lr" --bits 32 --seed 1 --csv "$csv" > /dev/null
    printf "%-10s %-8s %s\n" "$optimizer" "$lr" "$(tail -1 "$csv" | cut -d, -f9)"
  done
done
