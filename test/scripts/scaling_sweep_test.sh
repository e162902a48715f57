#!/bin/sh
# The sweep end to end on a tiny emulated cluster: 1 and 2 nodes, one size, checked; the CSV must hold a row per
# run with a PASSed check. Exits 77 (skipped) where the emulated cluster cannot be built.
#   scaling_sweep_test.sh GRADAGG_BINARY
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null 2>&1; then echo "skipped: needs root and iproute2"; exit 77; fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$root/scripts/scaling_sweep.py" --emulated --nodes 1,2 --bits 1,32 --min 64K --max 64K --iters 1 --warmups 0 \
  --check --gradagg "$1" --out "$out/sweep" || exit 1
rows=$(tail -n +2 "$out/sweep.csv" | grep -c ",PASS$")
echo "rows that passed their check: $rows"
[ "$rows" -eq 4 ]
