#!/usr/bin/env bash
# Trains the example with DDP's allreduce and with gradagg's hook at 32 and 1 bit, for each seed, and prints the
# last epoch's test accuracy and time per step per run (rows appended to OUT_DIR/runs.csv; one log per run).
#   examples/pytorch/compare.sh OUT_DIR [MPIRUN_ARGUMENTS...]
# Environment: EPOCHS (default 10), SEEDS (default "1 2"), NP (default 2), BACKEND (DDP's own; default nccl on
# GPUs), DATA (the Fashion-MNIST directory), MODES (the runs per seed, separated by ";"; default
# "allreduce;gradagg --bits 32;gradagg --bits 1;gradagg --bits 1 --full-precision-steps 468", the last one 1 bit
# after one epoch in float32 on 2 ranks; any of the example's options may follow a mode).
# Run from the repository root, with the package importable
# (pip install . in the repository, or PYTHONPATH=python GRADAGG_LIBRARY=...).
set -euo pipefail
out=$1
shift
mkdir -p "$out"
epochs=${EPOCHS:-10} seeds=${SEEDS:-1 2} np=${NP:-2}
extra=()
[ -n "${BACKEND:-}" ] && extra+=(--backend "$BACKEND")
[ -n "${DATA:-}" ] && extra+=(--data "$DATA")
IFS=';' read -r -a modes <<<"${MODES:-allreduce;gradagg --bits 32;gradagg --bits 1;gradagg --bits 1 --full-precision-steps 468}"
for seed in $seeds; do
  for mode in "${modes[@]}"; do
    log="$out/$(echo "$mode" | tr -d '-' | tr ' ' '_')_seed$seed.txt"
    # shellcheck disable=SC2086
    mpirun --allow-run-as-root --oversubscribe "$@" -np "$np" python3 examples/pytorch/train_fashion_mnist.py \
      --mode $mode --epochs "$epochs" --seed "$seed" --csv "$out/runs.csv" "${extra[@]}" >"$log" 2>&1
    echo "seed $seed: $(tail -n 1 "$log")"
  done
done
