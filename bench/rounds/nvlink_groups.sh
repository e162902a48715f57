#!/usr/bin/env bash
# One test round of nodes of several NVLink groups (intra_node/group_chain.h) on a GPU machine, every grouping forced on
# ranks that are one group (GRADAGG_NVLINK_GROUP_SIZE, GRADAGG_NVLINK_TOPOLOGY): with fewer GPUs than ranks the ranks
# share them (GRADAGG_NVLINK_SHARE_GPUS=1), correct but no measure of speed.
#   1. the NVLink phase tests (the chain's among them) on 2 and 4 ranks;
#   2. the device tests and gradagg --check with forced groupings: 2 groups of 1 (2 ranks), 2 groups of 2 and 4 of 1
#      (4 ranks, one node), 2 nodes of 2 groups of 1;
#   3. compute-sanitizer memcheck of the chain tests on 2 ranks;
#   4. the allreduce benchmark with 2 groups of 1 against the host fallback (--host-fallback) and, when every rank
#      has a GPU of its own, NCCL, in the same run.
#
#   bench/rounds/nvlink_groups.sh BIN_DIR OUT_DIR [BENCHMARK_ARGS...]
#
# BIN_DIR holds gradagg, gradagg_nvlink_gpu_tests, gradagg_device_gpu_tests and gradagg_nvlink_benchmark
# (bench/rounds/stage.sh). Logs go to OUT_DIR; a summary is printed last and kept in summary.txt.
# PARTS="nvlink device memcheck benchmark" (the default: all four) picks some, to fit a device call's time limit.
set -uo pipefail
. "$(dirname "$0")/round_setup.sh"
round_setup "$1" "$2"
shift 2
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -n 1)
mpirun=(mpirun "${mpirun_args[@]}" --oversubscribe -x GRADAGG_CUDA_AWARE_MPI=off)
# $1 ranks: the launcher's arguments, sharing GPUs where there are fewer.
launch() { if [ "$1" -gt "$gpus" ]; then echo "${mpirun[*]} -np $1 -x GRADAGG_NVLINK_SHARE_GPUS=1"; else echo "${mpirun[*]} -np $1"; fi; }
passed() { grep -E '^\[  (PASSED|FAILED) ' "$1" | tail -n 2 | tr '\n' ' '; }

parts=${PARTS:-nvlink device memcheck benchmark}
has() { [[ " $parts " == *" $1 "* ]]; }
summary=""
has nvlink && for ranks in 2 4; do
  # shellcheck disable=SC2046
  timeout 400 $(launch $ranks) "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no >"$out/nvlink_tests_${ranks}ranks.txt" 2>&1
  summary="$summary\n== NVLink phase tests, $ranks ranks on $gpus GPUs: exit $? $(passed "$out/nvlink_tests_${ranks}ranks.txt")"
done
# ranks, ranks per node, forced group size
has device && for layout in "2 2 1" "4 4 2" "4 4 1" "4 2 1"; do
  read -r ranks per size <<<"$layout"
  label="$((ranks / per))x$per, groups of $size"
  echo "===== device tests, $label" >>"$out/device_tests.txt"
  # shellcheck disable=SC2046
  timeout 300 $(launch "$ranks") -x GRADAGG_NVLINK_GROUP_SIZE="$size" -x GRADAGG_TEST_RANKS_PER_NODE="$per" \
    "$bin/gradagg_device_gpu_tests" --gtest_color=no >>"$out/device_tests.txt" 2>&1
  summary="$summary\n== device tests $label: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/device_tests.txt" | tail -n 1)"
  for check in "1" "4" "32" "1 --tensors 2,5010,6" "8 --tensors 2,5010,6"; do
    echo "===== --check, $label, bits $check" >>"$out/check.txt"
    # shellcheck disable=SC2046,SC2086
    timeout 120 $(launch "$ranks") -x GRADAGG_NVLINK_GROUP_SIZE="$size" "$bin/gradagg" --device cuda \
      --ranks-per-node "$per" --bits $check -b 1K -e 4M -f 64 -n 2 -w 1 --check --no-baseline --no-nccl >>"$out/check.txt" 2>&1
    summary="$summary\n== check $label bits $check: exit $? $(grep '^# check' "$out/check.txt" | tail -n 1)"
  done
done
if has memcheck; then
  # shellcheck disable=SC2046
  timeout 400 $(launch 2) "$sanitizer" --tool memcheck --error-exitcode 9 "$bin/gradagg_nvlink_gpu_tests" \
    --gtest_color=no --gtest_filter='GroupChain*:-*NeverArrives*' >"$out/memcheck.txt" 2>&1
  summary="$summary\n== memcheck of the chain, 2 ranks: exit $? $(grep -E 'ERROR SUMMARY' "$out/memcheck.txt" | tr '\n' ' ')"
fi
if has benchmark; then
  nccl=--no-nccl
  [ "$gpus" -ge 2 ] && nccl=""
  # shellcheck disable=SC2046
  timeout 300 $(launch 2) -x GRADAGG_NVLINK_GROUP_SIZE=1 "$bin/gradagg_nvlink_benchmark" --host-fallback $nccl "$@" \
    >"$out/benchmark_2groups_of_1.txt" 2>&1
  summary="$summary\n== benchmark, 2 groups of 1 on $gpus GPUs: exit $?\n$(grep -v '^# gradagg_nvlink\|^# busbw' "$out/benchmark_2groups_of_1.txt")"
fi
echo -e "== $gpus x $gpu$summary" | tee "$out/summary.txt"
grep -h -E "Failure|differs|rank [0-9]+\]" "$out"/*tests*.txt | head -n 12 || true  # none found is fine
