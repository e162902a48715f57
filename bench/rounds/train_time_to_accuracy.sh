#!/usr/bin/env bash
# The C++ trainer's time to a test accuracy on a slow link: build/bin/train (the MLP on Fashion-MNIST, its default
# recipe) on 2 emulated nodes of one CPU rank (scripts/emulated_cluster.sh, root), each link shaped to RATE, with
# MPI_Allreduce of the float32 gradient (--exchange mpi, the baseline a user would pick) and with gradagg at 1 bit,
# one after the other per seed. Prints one table: for each target accuracy, the training seconds (compute plus
# aggregation, summed over epochs; the per-epoch test is not counted) until an epoch's test accuracy reached it,
# and the ratio to MPI_Allreduce. Every run's CSV and log stay in OUT_DIR; a run whose CSV is there is kept.
#   bench/rounds/train_time_to_accuracy.sh OUT_DIR [TRAIN_OPTIONS...]
# Environment: RATES (default "1gbit 100mbit"), SEEDS (default "1 2"), EPOCHS (default 10), TARGETS (test
# accuracies, default "0.85 0.87 0.88"). Run from the repository root after scripts/build.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$1
shift
mkdir -p "$out"
. "$root/scripts/mpi_env.sh"
declare -A runs=([mpi]="--exchange mpi" [gradagg1]="--bits 1")
for rate in ${RATES:-1gbit 100mbit}; do
  for seed in ${SEEDS:-1 2}; do
    for run in mpi gradagg1; do
      name="${run}_${rate}_s$seed"
      if [ -s "$out/$name.csv" ]; then echo "# $name: kept" >&2; continue; fi
      echo "# $name" >&2
      # shellcheck disable=SC2086  # the run's options are a word list
      "$root/scripts/emulated_cluster.sh" --nodes 2 --slots 1 --rate "$rate" --prefix gatta --subnet 10.78.0 -- \
        -np 2 "$root/build/bin/train" ${runs[$run]} --epochs "${EPOCHS:-10}" --seed "$seed" --csv "$out/$name.csv" \
        "$@" >"$out/$name.log" 2>&1 || { tail -n 20 "$out/$name.log" >&2; exit 1; }
    done
  done
done
# shellcheck disable=SC2086  # TARGETS is a list
python3 - "$out" ${TARGETS:-0.85 0.87 0.88} <<'PY' | tee "$out/table.md"
import csv, glob, os, sys
out, targets = sys.argv[1], [float(t) for t in sys.argv[2:]]
runs = {}
for path in sorted(glob.glob(os.path.join(out, "*.csv"))):
    run, rate, seed = os.path.basename(path)[:-4].rsplit("_", 2)
    rows = list(csv.DictReader(open(path)))
    clock, curve = 0.0, []
    for row in rows:
        clock += float(row["compute_s"]) + float(row["aggregate_s"])
        curve.append((clock, float(row["test_accuracy"])))
    runs[(rate, seed, run)] = curve
def seconds_to(curve, target):
    return next((s for s, accuracy in curve if accuracy >= target), None)
print("| link | seed | target accuracy | MPI_Allreduce, s | gradagg 1 bit, s | x MPI_Allreduce |")
print("| --- | --- | --- | --- | --- | --- |")
for rate, seed in sorted({(rate, seed) for rate, seed, _ in runs}):
    mpi, ours = runs.get((rate, seed, "mpi")), runs.get((rate, seed, "gradagg1"))
    if not mpi or not ours:
        continue
    for target in targets:
        a, b = seconds_to(mpi, target), seconds_to(ours, target)
        ratio = f"{a / b:.2f}" if a and b else ""
        print(f"| {rate} | {seed[1:]} | {target:.2f} | {f'{a:.1f}' if a else 'not reached'} | "
              f"{f'{b:.1f}' if b else 'not reached'} | {ratio} |")
    print(f"| {rate} | {seed[1:]} | last epoch | {mpi[-1][1]:.4f} in {mpi[-1][0]:.1f} | "
          f"{ours[-1][1]:.4f} in {ours[-1][0]:.1f} | {mpi[-1][0] / ours[-1][0]:.2f} |")
PY
