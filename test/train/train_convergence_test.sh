#!/bin/sh
# The trainer on 2 ranks as 2 emulated nodes (so 1-bit quantization crosses "nodes"), 600 steps on a subset:
#   momentum 0.9 (the trainer's default recipe) in float32 and at 1 bit with error feedback;
#   plain SGD in float32 and at 1 bit double-buffered (--stale, aggregated in the background).
# Every run must lower the train loss by a quarter and end with a finite loss; 1 bit with momentum must end within
# 2 percentage points of float32's test accuracy with the same recipe (seeds 1, 2, 3 measured float32 minus 1 bit at
# -0.15, -1.00 and +0.60 points), the stale run within 5 of float32 SGD. With the momentum applied after the
# aggregation instead (--aggregate gradient), 1 bit diverges here (10%, loss NaN), so this test fails if the trainer
# stops carrying the momentum inside.
# Exits 77 (skipped) without the data set.
#   train_convergence_test.sh TRAIN_BINARY MPIEXEC
set -u
train=$1 mpiexec=$2
[ -d /usr/share/datasets/fashion-mnist ] || { echo "skipped: apt-get install dataset-fashion-mnist"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() {  # run NAME TRAIN_ARGS...
  name=$1
  shift
  "$mpiexec" -np 2 --oversubscribe "$train" --ranks-per-node 1 --epochs 3 --train-subset 12800 --test-subset 2000 \
    --batch 32 --csv "$out/$name.csv" "$@" || exit 1
}
run momentum32 --bits 32
run momentum1 --bits 1
run sgd32 --bits 32 --optimizer sgd --lr 0.1
run sgd1stale --bits 1 --optimizer sgd --lr 0.1 --stale
python3 - "$out" <<'PY'
import csv, math, os, sys
runs = {name: list(csv.DictReader(open(os.path.join(sys.argv[1], name + ".csv"))))
        for name in ("momentum32", "momentum1", "sgd32", "sgd1stale")}
ok = True
for name, rows in runs.items():
    first, last = float(rows[0]["train_loss"]), float(rows[-1]["train_loss"])
    print(f"{name} ({rows[0]['mode']}, {rows[0]['optimizer']}): train loss {first:.4f} -> {last:.4f}, "
          f"test accuracy {float(rows[-1]['test_accuracy']):.4f}")
    ok &= math.isfinite(last) and last < 0.75 * first
for run, base, margin in (("momentum1", "momentum32", 0.02), ("sgd1stale", "sgd32", 0.05)):
    gap = float(runs[base][-1]["test_accuracy"]) - float(runs[run][-1]["test_accuracy"])
    print(f"{base} - {run} test accuracy after {runs[run][-1]['steps']} steps: {100 * gap:+.2f} points "
          f"(margin {100 * margin:.0f})")
    ok &= abs(gap) <= margin
sys.exit(0 if ok else 1)
PY
