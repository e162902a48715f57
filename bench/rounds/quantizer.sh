#!/usr/bin/env bash
# One test round of the CUDA quantizer on the GPU machine: the GPU tests, the throughput benchmark against the
# device's copy bandwidth, the decode into two GPUs' copies against an NVLink copy (with two GPUs), and the tests under
# compute-sanitizer (memcheck, racecheck, initcheck; not the line protocol test, whose kernel waits for the host's
# writes while it runs, which a sanitizer may not allow).
#   bench/rounds/quantizer.sh BIN_DIR OUT_DIR
# BIN_DIR holds gradagg_gpu_tests, gradagg_cuda_quantize_benchmark, gradagg_decode_copies_benchmark and
# libbenchmark.so.1debian (built on the Debian machine); logs go to OUT_DIR. Prints a short summary last.
set -uo pipefail
. "$(dirname "$0")/round_setup.sh"
round_setup "$1" "$2"

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv >"$out/gpu.txt" 2>&1

"$bin/gradagg_gpu_tests" >"$out/gpu_tests.txt" 2>&1
tests=$?
"$bin/gradagg_cuda_quantize_benchmark" --benchmark_min_time=0.1 --benchmark_counters_tabular=true \
  >"$out/benchmark.txt" 2>&1
bench=$?
# The decode into both GPUs of a node against an NVLink copy of the same bytes (says SKIP on one GPU).
"$bin/gradagg_decode_copies_benchmark" >"$out/decode_copies.txt" 2>&1
copies=$?
summary=""
for tool in memcheck racecheck initcheck; do
  GRADAGG_GPU_TEST_MAX_ELEMENTS=1000000 timeout 170 "$sanitizer" --tool "$tool" --error-exitcode 9 \
    "$bin/gradagg_gpu_tests" --gtest_brief=1 --gtest_filter='-LinePackets*' >"$out/sanitizer_$tool.txt" 2>&1
  summary="$summary $tool=$? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer_$tool.txt" | tail -n 1))"
done

echo "== gpu: $(tail -n 1 "$out/gpu.txt")"
echo "== tests exit $tests: $(grep -E '^\[  (PASSED|FAILED) ' "$out/gpu_tests.txt" | tr '\n' ' ')"
grep -E "Failure|differs|wrote past" "$out/gpu_tests.txt" | head -n 5
echo "== sanitizer:$summary"
echo "== decode into copies exit $copies:"
cat "$out/decode_copies.txt"
echo "== benchmark exit $bench (GB/s, of_copy):"
grep -E "^(Copy|Encode|DecodeAccumulate)" "$out/benchmark.txt" | awk '{print $1, $(NF-1), $NF}' | grep -E "bytes:(67108864|1073741824)"
