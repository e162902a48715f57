#!/usr/bin/env bash
# Session 14, call 5 (4 GPUs): the shipped code (c97c646's library), the aggregation round with the CUDA-aware transport.
set -uo pipefail
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH="$PWD/.device-carry:${LD_LIBRARY_PATH:-}"
ROUND_TRANSPORTS=aware bench/rounds/aggregation.sh .device-carry "$OUT/agg" .device-carry-mpi
