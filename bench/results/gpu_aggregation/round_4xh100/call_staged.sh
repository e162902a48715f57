#!/usr/bin/env bash
# Session 14, call 4 (4 GPUs): the shipped code (c97c646's library) - the quantizer's GPU tests (at most 10^7
# elements), the decode-copies benchmark, then the aggregation round with the staged transport.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p "$OUT/extra"
export LD_LIBRARY_PATH="$PWD/.device-carry:${LD_LIBRARY_PATH:-}"
nvidia-smi -L > "$OUT/extra/gpus.txt"
GRADAGG_GPU_TEST_MAX_ELEMENTS=10000000 timeout 90 .device-carry/gradagg_gpu_tests --gtest_color=no > "$OUT/extra/quantizer_tests.txt" 2>&1
echo "== quantizer gpu_tests (at most 10^7): exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/extra/quantizer_tests.txt" | tr '\n' ' ')"
timeout 60 .device-carry/gradagg_decode_copies_benchmark 128 15 > "$OUT/extra/decode_copies_128mib.txt" 2>&1
echo "exit $?" >> "$OUT/extra/decode_copies_128mib.txt"; tail -8 "$OUT/extra/decode_copies_128mib.txt"
tar -C "$OUT" -czf "$OUT/extra.tar.gz" extra && rm -rf "$OUT/extra"
ROUND_TRANSPORTS=staged bench/rounds/aggregation.sh .device-carry "$OUT/agg" .device-carry-mpi
