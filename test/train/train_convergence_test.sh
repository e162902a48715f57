#!/bin/sh
# The trainer on 2 ranks as 2 emulated nodes (so 1-bit quantization crosses "nodes"), 600 steps on a subset:
# float32, 1-bit with error feedback and 1-bit double-buffered (--stale, aggregated in the background) must all lower
# the loss by a quarter; 1-bit's test accuracy must be within 3 percentage points of float32's at the same step
# count, the stale run's within 5. Exits 77 (skipped) without the data set.
#   train_convergence_test.sh TRAIN_BINARY MPIEXEC
set -u
train=$1 mpiexec=$2
[ -d /usr/share/datasets/fashion-mnist ] || { echo "skipped: apt-get install dataset-fashion-mnist"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for mode in 32 1 1s; do
  stale=""; [ "$mode" = 1s ] && stale=--stale
  "$mpiexec" -np 2 --oversubscribe "$train" --ranks-per-node 1 --epochs 3 --train-subset 12800 --test-subset 2000 \
    --batch 32 --bits "${mode%s}" $stale --csv "$out/bits$mode.csv" || exit 1
done
python3 - "$out/bits32.csv" "$out/bits1.csv" "$out/bits1s.csv" <<'PY'
import csv, sys
runs = [list(csv.DictReader(open(path))) for path in sys.argv[1:]]
ok = True
for rows in runs:
    first, last = float(rows[0]["train_loss"]), float(rows[-1]["train_loss"])
    print(f"{rows[0]['mode']}: train loss {first:.4f} -> {last:.4f}, test accuracy {float(rows[-1]['test_accuracy']):.4f}")
    ok &= last < 0.75 * first
for run, margin in ((runs[1], 0.03), (runs[2], 0.05)):
    gap = float(runs[0][-1]["test_accuracy"]) - float(run[-1]["test_accuracy"])
    print(f"float32 - {run[0]['mode']} test accuracy after {run[-1]['steps']} steps: {100 * gap:+.2f} points "
          f"(margin {100 * margin:.0f})")
    ok &= abs(gap) <= margin
sys.exit(0 if ok else 1)
PY
