#!/usr/bin/env bash
# One test round of GPU aggregation end to end on a GPU machine (N = the GPUs present, at most 8):
#   1. the device tests on every emulated layout (1xN, 2x(N/2), ..., Nx1), staged transport (with fewer than 4
#      GPUs, also 1x4, 2x2 and 4x1 on ranks sharing them, with --check on 2x2 and 4x1: correctness only);
#   2. the same with a CUDA-aware Open MPI, when MPI_PREFIX holds one (scripts/build_cuda_aware_openmpi.sh);
#   3. gradagg --check on every layout and bit width, with each transport, on one tensor and on many (--tensors);
#   4. compute-sanitizer memcheck of the device tests on one layout;
#   5. the table (gradagg, ncclAllReduce, MPI_Allreduce) on 2x(N/2) at 1 bit, with each transport.
#
#   bench/rounds/aggregation.sh BIN_DIR OUT_DIR [MPI_PREFIX]
#   ROUND_TRANSPORTS=aware bench/rounds/aggregation.sh ...    (one transport only: staged or aware)
#
# On 4 GPUs both transports together take more than the device tool's 10 minutes a call: run each in
# a call of its own with ROUND_TRANSPORTS.
#
# BIN_DIR holds gradagg and gradagg_device_gpu_tests (bench/rounds/stage.sh). Logs go to OUT_DIR (at most
# eight files, as much as the device tool brings back); a summary is printed last and kept in summary.txt.
set -uo pipefail
. "$(dirname "$0")/round_setup.sh"
round_setup "$1" "$2"
prefix=${3:-}
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -n 1)

# The transports: staged runs under the machine's MPI; CUDA-aware runs under the prefix's, swapped in by soname.
staged=(mpirun "${mpirun_args[@]}" -x GRADAGG_CUDA_AWARE_MPI=off)
transports=(staged)
if [ -n "$prefix" ] && [ -x "$prefix/bin/mpirun" ]; then
  prefix=$(cd "$prefix" && pwd)
  aware=(env OPAL_PREFIX="$prefix" PATH="$prefix/bin:$PATH" LD_LIBRARY_PATH="$prefix/lib:$LD_LIBRARY_PATH"
    "$prefix/bin/mpirun" --allow-run-as-root --bind-to none -x OPAL_PREFIX -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE
    -x GRADAGG_NVLINK_TIMEOUT -x GRADAGG_CUDA_AWARE_MPI=on)
  transports+=(aware)
fi
case "${ROUND_TRANSPORTS:-}" in
  "") ;;
  staged) transports=(staged) ;;
  aware)
    if [ "${#transports[@]}" -ne 2 ]; then
      echo "aggregation.sh: ROUND_TRANSPORTS=aware needs a CUDA-aware MPI_PREFIX" >&2
      exit 2
    fi
    transports=(aware) ;;
  *) echo "aggregation.sh: ROUND_TRANSPORTS is staged or aware, not '$ROUND_TRANSPORTS'" >&2; exit 2 ;;
esac
layouts=()
for (( per = gpus; per >= 1; per /= 2 )); do layouts+=("$per"); done

summary=""
for transport in "${transports[@]}"; do
  declare -n launch=$transport
  for per in "${layouts[@]}"; do
    label="$transport $((gpus / per))x$per"
    echo "===== device tests, $label" >>"$out/tests.txt"
    timeout 300 "${launch[@]}" -np "$gpus" -x GRADAGG_TEST_RANKS_PER_NODE="$per" "$bin/gradagg_device_gpu_tests" \
      --gtest_color=no >>"$out/tests.txt" 2>&1
    summary="$summary\n== tests $label: exit $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/tests.txt" | tail -n 2 | tr '\n' ' ')"
    for bits in 1 2 4 8 32; do
      echo "===== --check, $label, $bits bits" >>"$out/check.txt"
      timeout 120 "${launch[@]}" -np "$gpus" "$bin/gradagg" --device cuda --ranks-per-node "$per" --bits "$bits" \
        -b 1K -e 4M -f 64 -n 2 -w 1 --check --no-baseline >>"$out/check.txt" 2>&1
      summary="$summary\n== check $label bits $bits: exit $? $(grep '^# check' "$out/check.txt" | tail -n 1)"
    done
    for bits in 1 4 8; do  # tensors of awkward lengths: buckets restart at every one
      echo "===== --check, $label, $bits bits, --tensors 2,5010,6" >>"$out/check.txt"
      timeout 120 "${launch[@]}" -np "$gpus" "$bin/gradagg" --device cuda --ranks-per-node "$per" --bits "$bits" \
        --tensors 2,5010,6 -b 1K -e 4M -f 64 -n 2 -w 1 --check --no-baseline >>"$out/check.txt" 2>&1
      summary="$summary\n== check $label bits $bits tensors: exit $? $(grep '^# check' "$out/check.txt" | tail -n 1)"
    done
  done
  [ "$gpus" -lt 2 ] && continue  # a table of one rank says nothing
  timeout 300 "${launch[@]}" -np "$gpus" "$bin/gradagg" --device cuda --ranks-per-node $((gpus / 2)) --bits 1 \
    -b 1M -e 256M -f 4 -n 10 -w 3 --json "$out/table_${transport}.json" >"$out/table_${transport}.txt" 2>&1
  summary="$summary\n== table $transport: exit $?\n$(grep -v '^#' "$out/table_${transport}.txt" | awk '{print $1, $4, $7, $8, $10, $11, $12, $13, $14, $15, $16, $17, $18}')"
done
# Fewer than 4 GPUs: the layouts of 4 ranks (1x4, 2x2, 4x1) on ranks sharing the GPUs, for correctness only, and
# --check on the layouts with several nodes (NCCL cannot share a GPU between ranks: left out).
if [ "$gpus" -lt 4 ]; then
  shared=("${staged[@]}" --oversubscribe -np 4 -x GRADAGG_NVLINK_SHARE_GPUS=1)
  for per in 4 2 1; do
    label="staged $((4 / per))x$per, 4 ranks sharing $gpus GPUs"
    echo "===== device tests, $label" >>"$out/tests.txt"
    timeout 200 "${shared[@]}" -x GRADAGG_TEST_RANKS_PER_NODE="$per" "$bin/gradagg_device_gpu_tests" \
      --gtest_color=no >>"$out/tests.txt" 2>&1
    summary="$summary\n== tests $label: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests.txt" | tail -n 1)"
    [ "$per" -eq 4 ] && continue
    for check in "1" "2" "4" "8" "32" "1 --tensors 2,5010,6" "8 --tensors 2,5010,6"; do
      echo "===== --check, $label, bits $check" >>"$out/check.txt"
      # shellcheck disable=SC2086
      timeout 120 "${shared[@]}" "$bin/gradagg" --device cuda --ranks-per-node "$per" --bits $check \
        -b 1K -e 4M -f 64 -n 2 -w 1 --check --no-baseline --no-nccl >>"$out/check.txt" 2>&1
      summary="$summary\n== check $label bits $check: exit $? $(grep '^# check' "$out/check.txt" | tail -n 1)"
    done
  done
fi
# The NVLink phase's own tests too, since this round's library carries its changes.
# With the staged transport (the round's first call when ROUND_TRANSPORTS splits it): the NVLink phase's tests and
# one memcheck.
if [[ " ${transports[*]} " == *" staged "* ]]; then
  echo "===== NVLink phase tests, $gpus GPUs" >>"$out/tests.txt"
  timeout 300 "${staged[@]}" -np "$gpus" "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no >>"$out/tests.txt" 2>&1
  summary="$summary\n== NVLink phase tests on $gpus GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests.txt" | tail -n 1)"
  timeout 300 "${staged[@]}" -np 2 -x GRADAGG_TEST_RANKS_PER_NODE=1 -x GRADAGG_NVLINK_SHARE_GPUS=1 "$sanitizer" \
    --tool memcheck --error-exitcode 9 "$bin/gradagg_device_gpu_tests" --gtest_color=no \
    --gtest_filter='-*Bad*:*HostAndDevice*' >"$out/memcheck.txt" 2>&1
  summary="$summary\n== memcheck 2x1 staged: exit $? $(grep -E 'ERROR SUMMARY' "$out/memcheck.txt" | tr '\n' ' ')"
fi
echo -e "== $gpus x $gpu$summary" | tee "$out/summary.txt"
grep -h -E "Failure|differs|rank [0-9]+\]|error" "$out/tests.txt" | head -n 12 || true  # none found is fine
