#!/usr/bin/env bash
# The acceptance round of the whole GPU path on one node of N GPUs (issue 23: 8 H200s; issue 22's tests on 4), in
# calls of the device tool (each under 10 minutes). PARTS picks the parts, run in this order:
#   nvlink   the NVLink tests and the NVLink benchmark on the N GPUs, against NCCL in the same run, 1 KiB .. 1 GiB;
#   table    the end-to-end table on 1xN and 2x(N/2) at 1 bit against ncclAllReduce and MPI_Allreduce, staged (and
#            CUDA-aware with MPI_PREFIX);
#   layouts  bench/rounds/aggregation.sh: the device tests on 1xN, 2x(N/2), ..., Nx1 and --check at 1, 2, 4, 8
#            and 32 bits on each, staged and (with MPI_PREFIX) CUDA-aware; one compute-sanitizer memcheck;
#   train    bench/rounds/train.sh: the trainer on 2x(N/2), float32 and 1 bit (needs --with-data).
# Each part has a time limit; a part that would run past the round's (ROUND_SECONDS, default 560) is reported as not
# run, so the call returns in time. The data (30 MB) and a CUDA-aware Open MPI (14 MB) do not fit one carry with the
# binaries, so the prepared calls are (bench/rounds/stage.sh, the MPI from scripts/build_cuda_aware_openmpi.sh):
#   PARTS="nvlink table" bench/rounds/node_acceptance.sh .device-carry OUT .device-carry-mpi
#   PARTS=layouts        bench/rounds/node_acceptance.sh .device-carry OUT .device-carry-mpi
#   PARTS=train          bench/rounds/node_acceptance.sh .device-carry OUT          (staged --with-data)
#
#   bench/rounds/node_acceptance.sh BIN_DIR OUT_DIR [MPI_PREFIX]
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "$1" && pwd) out=$2 prefix=${3:-}
mkdir -p "$out"
[ -n "$prefix" ] && prefix=$(cd "$prefix" && pwd)
parts=" ${PARTS:-nvlink table layouts} "
limit=${ROUND_SECONDS:-560}
gpus=$(nvidia-smi -L | wc -l)
[ "$gpus" -gt 8 ] && gpus=8
if [ "$gpus" -lt 2 ]; then
  echo "gpu_node_acceptance_round: $gpus GPU(s) visible; the round is for a node of several" >&2
  exit 2
fi
export LD_LIBRARY_PATH="$bin:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE=0 GRADAGG_NVLINK_TIMEOUT=${GRADAGG_NVLINK_TIMEOUT:-20}
staged=(mpirun --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x GRADAGG_NVLINK_TIMEOUT)
summary="== $gpus x $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)"
status=0

# Runs "$@" if `seconds` still fit in the round, under that limit; notes the outcome in the summary.
step() {
  local label=$1 seconds=$2
  shift 2
  if ((seconds < 30 || SECONDS + seconds > limit)); then
    summary="$summary\n== $label: not run (it needs up to ${seconds} s; ${SECONDS} s of ${limit} s used)"
    status=1
    return
  fi
  timeout "$seconds" "$@"
  local code=$?
  ((code != 0)) && status=1
  summary="$summary\n== $label: exit $code"
}

if [[ $parts == *" nvlink "* ]]; then
  step "NVLink tests on $gpus GPUs" 120 "${staged[@]}" -np "$gpus" "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no \
    >"$out/nvlink_tests.txt" 2>&1
  summary="$summary $(grep -E '^\[  (PASSED|FAILED) ' "$out/nvlink_tests.txt" 2>/dev/null | tr '\n' ' ')"
  step "NVLink benchmark on $gpus GPUs against NCCL" 200 "${staged[@]}" -np "$gpus" "$bin/gradagg_nvlink_benchmark" \
    -b 1K -e 1G -f 4 >"$out/nvlink_benchmark.txt" 2>&1
  summary="$summary\n$(grep -v '^#' "$out/nvlink_benchmark.txt" 2>/dev/null | awk '{print $1, $4, $7, $8, $11, $12}')"
fi

if [[ $parts == *" table "* ]]; then
  transports=(staged)
  [ -n "$prefix" ] && [ -x "$prefix/bin/mpirun" ] && transports+=(aware)
  for transport in "${transports[@]}"; do
    launch=("${staged[@]}" -x GRADAGG_CUDA_AWARE_MPI=off)
    if [ "$transport" = aware ]; then
      launch=(env OPAL_PREFIX="$prefix" PATH="$prefix/bin:$PATH" LD_LIBRARY_PATH="$prefix/lib:$LD_LIBRARY_PATH"
        "$prefix/bin/mpirun" --allow-run-as-root --bind-to none -x OPAL_PREFIX -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE
        -x GRADAGG_NVLINK_TIMEOUT -x GRADAGG_CUDA_AWARE_MPI=on)
    fi
    for per in "$gpus" $((gpus / 2)); do
      name="table_$((gpus / per))x${per}_$transport"
      step "table $((gpus / per))x$per $transport" 120 "${launch[@]}" -np "$gpus" "$bin/gradagg" --device cuda \
        --ranks-per-node "$per" --bits 1 -b 1M -e 256M -f 4 -n 10 -w 3 --json "$out/$name.json" >"$out/$name.txt" 2>&1
      summary="$summary\n$(grep -v '^#' "$out/$name.txt" 2>/dev/null | awk '{print $1, $4, $15, $16, $17, $18}')"
    done
  done
fi

if [[ $parts == *" layouts "* ]]; then
  step "layouts (bench/rounds/aggregation.sh)" $((limit - SECONDS - 5)) "$root/bench/rounds/aggregation.sh" \
    "$bin" "$out/layouts" ${prefix:+"$prefix"} >"$out/layouts.txt" 2>&1
  summary="$summary\n$(cat "$out/layouts/summary.txt" 2>/dev/null)"
fi

if [[ $parts == *" train "* ]]; then
  step "trainer (bench/rounds/train.sh, 2 epochs)" $((limit - SECONDS - 5)) "$root/bench/rounds/train.sh" \
    "$bin" "$out/train" 2 ${prefix:+"$prefix"} >"$out/train.txt" 2>&1
  summary="$summary\n$(grep '^==' "$out/train.txt" 2>/dev/null)"
fi

echo -e "$summary" | tee "$out/summary.txt"
exit $status
