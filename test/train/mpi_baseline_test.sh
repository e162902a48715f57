#!/bin/sh
# The trainer's MPI_Allreduce baseline (--exchange mpi) sums what AggregateGradients sums: on 2 ranks every float32
# sum has one order (a + b = b + a), so 2 epochs on a subset must print the same per-epoch losses and accuracies
# through either exchange, and the baseline's CSV must name its mode. Exits 77 (skipped) without the data set.
#   mpi_baseline_test.sh TRAIN_BINARY MPIEXEC
set -u
train=$1 mpiexec=$2
[ -d /usr/share/datasets/fashion-mnist ] || { echo "skipped: apt-get install dataset-fashion-mnist"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for exchange in gradagg mpi; do
  "$mpiexec" -np 2 --oversubscribe "$train" --ranks-per-node 1 --epochs 2 --train-subset 8000 --test-subset 2000 \
    --exchange "$exchange" --csv "$out/$exchange.csv" >"$out/$exchange.txt" 2>&1 || { cat "$out/$exchange.txt"; exit 1; }
done
# epoch, steps, train loss, train error, test accuracy: the rows' first five columns.
rows() { awk '$1 ~ /^[0-9]+$/ { print $1, $2, $3, $4, $5 }' "$1"; }
rows "$out/gradagg.txt" >"$out/gradagg.rows"
rows "$out/mpi.txt" >"$out/mpi.rows"
cat "$out/mpi.rows"
[ "$(wc -l <"$out/mpi.rows")" -eq 2 ] || { echo "FAIL: no epoch rows"; cat "$out/mpi.txt"; exit 1; }
cmp -s "$out/gradagg.rows" "$out/mpi.rows" || { echo "FAIL: the exchanges trained differently"; diff "$out/gradagg.rows" "$out/mpi.rows"; exit 1; }
grep -q "^MPI_Allreduce," "$out/mpi.csv" || { echo "FAIL: the CSV does not name the baseline"; head -3 "$out/mpi.csv"; exit 1; }
echo "PASS"
