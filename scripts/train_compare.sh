#!/usr/bin/env bash
# Test accuracy per epoch of float32 against 1, 2, 4 and 8 bits, for three optimizer recipes, over several seeds:
# 4 CPU ranks as 2 emulated nodes of 2 (so quantization crosses "nodes"), 10 epochs of Fashion-MNIST each.
#   sgd:      plain SGD, cosine schedule, lr $SGD_LR
#   momentum: momentum 0.9, cosine schedule, lr $MOMENTUM_LR, the momentum inside the aggregation (the default);
#             plus 1 bit with the momentum applied after the aggregation (--aggregate gradient), the old way
#   adam:     Adam, cosine schedule, lr $ADAM_LR
# 1 bit runs with the trainer's default mean threshold, and again with CNTK's zero threshold (mode 1bit_zero).
# The learning rates default to float32's best of bench/rounds/train_lr_sweep.sh. Writes OUT_DIR/<recipe>__<mode>__seed<N>.csv,
# then OUT_DIR/summary.md (mean and spread of the last epoch's test accuracy) and OUT_DIR/accuracy.png
# (scripts/training_report.py). Extra arguments go to every train run (for example --device cuda).
#   scripts/train_compare.sh /tmp/cpu_2x2     (bench/results/trainer/ keeps the committed run)
# Environment: SEEDS (default "1 2 3"), RECIPES (default "sgd momentum adam"), BITS (default "32 1 2 4 8"),
# NP (default 4), RANKS_PER_NODE (default 2), EPOCHS (default 10), TRAIN (default build/bin/train), MPIRUN_ARGS
# (extra mpirun arguments, for example "--bind-to none -x LD_LIBRARY_PATH" on the GPU machine).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: train_compare.sh OUT_DIR [train options]}
shift
mkdir -p "$out"
. "$root/scripts/mpi_env.sh"
: "${SGD_LR:=0.4}" "${MOMENTUM_LR:=0.1}" "${ADAM_LR:=0.003}"
: "${SEEDS:=1 2 3}" "${RECIPES:=sgd momentum adam}" "${BITS:=32 1 2 4 8}"
: "${NP:=4}" "${RANKS_PER_NODE:=2}" "${EPOCHS:=10}" "${TRAIN:=$root/build/bin/train}" "${MPIRUN_ARGS:=}"

recipe_args() {
  case $1 in
    sgd) echo "--optimizer sgd --schedule cosine --lr $SGD_LR" ;;
    momentum) echo "--optimizer momentum --momentum 0.9 --schedule cosine --lr $MOMENTUM_LR" ;;
    adam) echo "--optimizer adam --schedule cosine --lr $ADAM_LR" ;;
    *) echo "train_compare: unknown recipe $1" >&2; exit 2 ;;
  esac
}

run() {  # run RECIPE MODE SEED TRAIN_ARGS...
  local recipe=$1 mode=$2 seed=$3
  shift 3
  local csv="$out/${recipe}__${mode}__seed$seed.csv"
  # shellcheck disable=SC2046
  mpirun $MPIRUN_ARGS -np "$NP" "$TRAIN" --ranks-per-node "$RANKS_PER_NODE" --epochs "$EPOCHS" --seed "$seed" \
    $(recipe_args "$recipe") --csv "$csv" "$@" > "${csv%.csv}.log"
  echo "train_compare: $recipe $mode seed $seed: test accuracy $(tail -1 "$csv" | cut -d, -f9)"
}

for seed in $SEEDS; do
  for recipe in $RECIPES; do
    for bits in $BITS; do
      mode=$([ "$bits" = 32 ] && echo float32 || echo "${bits}bit")
      run "$recipe" "$mode" "$seed" --bits "$bits" "$@"
      if [ "$bits" = 1 ]; then
        run "$recipe" 1bit_zero "$seed" --bits 1 --threshold zero "$@"
        if [ "$recipe" = momentum ]; then
          run momentum 1bit_after "$seed" --bits 1 --threshold zero --aggregate gradient "$@"
        fi
      fi
    done
  done
done
python3 "$root/scripts/training_report.py" "$out"
