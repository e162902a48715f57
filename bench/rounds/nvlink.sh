#!/usr/bin/env bash
# One test round of the NVLink phase on a GPU machine: topology, the multi-rank GPU tests on 2 .. N GPUs (and, where
# N < 8, on up to 8 ranks sharing the N GPUs: the kernels for larger groups, for correctness only), the chained
# in-place test of lines 50 times on 3-4 GPUs, one memcheck run,
# and the allreduce benchmark against NCCL on 2 .. N GPUs (N = the GPUs present, at most 8), again with the pulled
# reduction (GRADAGG_NVLINK_ALL_PUSH=0).
#   bench/rounds/nvlink.sh BIN_DIR OUT_DIR [BENCHMARK_ARGS...]
# BIN_DIR holds gradagg_nvlink_gpu_tests and gradagg_nvlink_benchmark (bench/rounds/stage.sh). Logs go to
# OUT_DIR; a short summary is printed last. Environment:
#   REPEATS=N         the benchmark N times on each GPU count, the counts in turn (benchmark_<G>gpus_<r>.txt; default 1)
#   PULLED=0          no second benchmark with the pulled reduction
#   MEMCHECK_GPUS=G   the memcheck run on G GPUs (default 2), MEMCHECK_FILTER its tests (default: all but the
#                     failure tests and the staged ones)
set -uo pipefail
. "$(dirname "$0")/round_setup.sh"
round_setup "$1" "$2"
shift 2
mpirun=(mpirun "${mpirun_args[@]}")
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nvidia-smi topo -m; } >"$out/gpu.txt" 2>&1

summary=""
counts=""
for n in 2 4 8; do [ "$n" -le "$gpus" ] && counts="$counts $n"; done
for n in $counts; do
  timeout 300 "${mpirun[@]}" -np "$n" "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no >"$out/tests_${n}gpus.txt" 2>&1
  summary="$summary\n== tests on $n GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/tests_${n}gpus.txt" | tr '\n' ' ')"
done
# Lines torn between their halves showed in 7.5% of these chains with one flag a line (nvlink_allreduce/h100x4/
# two_flag_lines/): 50 repeats, 100 chains, where there are 3 or more GPUs (the line two-shot's groups).
if [ "$gpus" -ge 3 ]; then
  n=$(( gpus >= 4 ? 4 : 3 ))
  timeout 200 "${mpirun[@]}" -np "$n" "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no \
    --gtest_filter='*LinesAfterPacketTwoShots*' --gtest_repeat=50 >"$out/chained_${n}gpus.txt" 2>&1
  summary="$summary\n== chained in place on $n GPUs, 50 repeats: exit $? $(grep -c '^\[       OK \]' "$out/chained_${n}gpus.txt") passed"
fi
for n in 4 8; do
  [ "$n" -le "$gpus" ] && continue
  timeout 300 "${mpirun[@]}" --oversubscribe -x GRADAGG_NVLINK_SHARE_GPUS=1 -np "$n" "$bin/gradagg_nvlink_gpu_tests" \
    --gtest_color=no >"$out/tests_${n}ranks_shared.txt" 2>&1
  summary="$summary\n== tests on $n ranks sharing $gpus GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/tests_${n}ranks_shared.txt" | tr '\n' ' ')"
done
memcheck_gpus=${MEMCHECK_GPUS:-2}
timeout 240 "${mpirun[@]}" -np "$memcheck_gpus" "$sanitizer" --tool memcheck --error-exitcode 9 \
  "$bin/gradagg_nvlink_gpu_tests" --gtest_filter="${MEMCHECK_FILTER:--*Mismatch*:*NeverArrives*:*Staged*}" \
  >"$out/memcheck_${memcheck_gpus}gpus.txt" 2>&1
summary="$summary\n== memcheck on $memcheck_gpus GPUs: exit $? $(grep -E 'ERROR SUMMARY' "$out/memcheck_${memcheck_gpus}gpus.txt" | tr '\n' ' ')"
repeats=${REPEATS:-1}
for ((r = 1; r <= repeats; r++)); do
  suffix=""
  [ "$repeats" -gt 1 ] && suffix="_$r"
  for n in $counts; do
    log="$out/benchmark_${n}gpus$suffix.txt"
    timeout 300 "${mpirun[@]}" -np "$n" "$bin/gradagg_nvlink_benchmark" "$@" >"$log" 2>&1
    summary="$summary\n== benchmark on $n GPUs$suffix: exit $?\n$(grep -v '^# gradagg_nvlink\|^# NCCL\|^# busbw' "$log" | awk '{print $1, $4, $7, $8, $12, $13, $15}')"
    [ "${PULLED:-1}" = 0 ] && continue
    # The previous reduction (owners pull their shard) beside it; sizes up to the one-shot threshold run the same path.
    log="$out/benchmark_${n}gpus_pulled$suffix.txt"
    timeout 300 "${mpirun[@]}" -x GRADAGG_NVLINK_ALL_PUSH=0 -np "$n" "$bin/gradagg_nvlink_benchmark" "$@" >"$log" 2>&1
    summary="$summary\n== benchmark on $n GPUs, pulled (GRADAGG_NVLINK_ALL_PUSH=0)$suffix: exit $?\n$(grep -v '^#' "$log" | awk '{print $1, $4, $7, $8, $12, $13, $15}')"
  done
done
echo "== gpu: $(sed -n 2p "$out/gpu.txt")"
say "$(echo -e "$summary")"
grep -h -E "Failure|wrong element|rank [0-9]\]" "$out"/tests_*.txt | head -n 8
