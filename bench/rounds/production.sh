#!/usr/bin/env bash
# The DDP hook's production round on the GPU machine (issue 35), ranks sharing its GPUs (GRADAGG_NVLINK_SHARE_GPUS=1):
#   1. the failure drills on device tensors (test/failure/drill_test.sh: the job ends within 10 s, non-zero, naming
#      the rank), then no drill process may be left running; the stall drill also with a tensor of 16 MB (phase 2
#      staged through pinned host buffers, not mapped); and GRADAGG_TIMEOUT inside phase 2 on both device transports
#      (gradagg_device_gpu_tests' APeerThatNeverComesTimesOutAndTheStreamDrains, staged and mapped, 2 and 3 ranks);
#   2. a run checkpointed and resumed on the GPU, bitwise the uninterrupted one (test/python/resume_test.sh cuda);
#   3. the DDP-feature checks with torch's GPU build: test_ddp_features.py on the GPU, then test_ddp_gpu.py
#      (bfloat16 parameters, GradScaler, a side stream);
#   4. the hook against a direct Aggregator call (examples/pytorch/hook_overhead.py, 2 ranks as 2 nodes, momentum 0.9
#      and 0): every call bitwise the direct call's, and the overhead per bucket.
#   bench/rounds/production.sh BIN_DIR OUT_DIR
# BIN_DIR holds gradagg_failure_drill, gradagg_device_gpu_tests, libgradagg_c.so and the shared libraries:
#   bench/rounds/stage.sh --only "gradagg_failure_drill gradagg_device_gpu_tests"
set -uo pipefail
. "$(dirname "$0")/round_setup.sh"
round_setup "$1" "$2"
root=$(cd "$(dirname "$0")/../.." && pwd)
export GRADAGG_LIBRARY="$bin/libgradagg_c.so" PYTHONPATH="$root/python:$root/test/python" GRADAGG_NVLINK_SHARE_GPUS=1
{ nvidia-smi -L; python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"; } \
  >"$out/env.txt" 2>&1
status=0
run=(mpirun "${mpirun_args[@]}" -x GRADAGG_LIBRARY -x PYTHONPATH
  -x GRADAGG_NVLINK_SHARE_GPUS)

# name ranks per_node regex env... -- drill arguments
drill() {
  local name=$1 ranks=$2 per=$3 regex=$4
  shift 4
  local environment=()
  while [ "$1" != "--" ]; do environment+=(-x "$1"); shift; done
  shift
  "$root/test/failure/drill_test.sh" 10 "$regex" -- "${run[@]}" -np "$ranks" -x "GRADAGG_RANKS_PER_NODE=$per" \
    "${environment[@]}" "$bin/gradagg_failure_drill" "$@" >"$out/drill_$name.txt" 2>&1
  local code=$?
  sleep 1
  local left
  left=$(pgrep -fc gradagg_failure_drill)
  if [ "$left" -ne 0 ]; then
    echo "FAIL: $left drill processes left running" >>"$out/drill_$name.txt"
    code=1
    pkill -9 -f gradagg_failure_drill
  fi
  status=$((status | code))
  say "drill $name: exit $code; $(grep -E '^exit ' "$out/drill_$name.txt"); processes left: $left"
}
drill throw_2x2 4 2 "rank 2 caught: a data error" GRADAGG_TIMEOUT=30 -- throw 2 device
drill throw_1x2 2 0 "rank 1 caught: a data error" GRADAGG_TIMEOUT=30 -- throw 1 device
drill die_2x2 4 2 "exited on signal|exiting improperly|exited with status|non-zero status" GRADAGG_TIMEOUT=30 -- \
  die 1 device
drill stall_2x2 4 2 "waited 5 s .*for rank 3, which did not call AggregateGradients" GRADAGG_TIMEOUT=5 -- \
  stall 3 device
drill stall_2x1 2 1 "waited 5 s .*for rank 1, which did not call AggregateGradients" GRADAGG_TIMEOUT=5 -- \
  stall 1 device
drill stall_2x1_16MB 2 1 "waited 5 s .*for rank 1, which did not call AggregateGradients" GRADAGG_TIMEOUT=5 \
  GRADAGG_DRILL_ELEMENTS=4000000 -- stall 1 device
# part LABEL LOG PATTERN COMMAND...: runs COMMAND into $out/LOG, adds its exit code to the status, and says LABEL
# with the exit code and LOG's lines that match PATTERN (grep -E).
part() {
  local label=$1 log=$out/$2 pattern=$3
  shift 3
  "$@" >"$log" 2>&1
  local code=$?
  status=$((status | code))
  say "$label: exit $code $(grep -hE "$pattern" "$log" | head -4 | tr '\n' ' ')"
}
for ranks in 2 3; do
  part "phase 2 timeout on device transports, $ranks ranks" "phase2_timeout_${ranks}ranks.txt" 'PASSED|FAILED' \
    timeout 120 "${run[@]}" -np $ranks -x GRADAGG_RANKS_PER_NODE=1 "$bin/gradagg_device_gpu_tests" \
    --gtest_filter='*APeerThatNeverComes*'
done
part "resume on the GPU" resume_cuda.txt 'differ|PASS|FAILED' \
  env MASTER_PORT=29681 timeout 400 "$root/test/python/resume_test.sh" mpirun python3 cuda
for per in 1 0; do
  part "DDP features on the GPU, ranks per node $per" "ddp_features_cuda_per$per.txt" PASS \
    env MASTER_PORT=$((29691 + per)) GRADAGG_TEST_DEVICE=cuda timeout 300 "${run[@]}" -np 2 \
    -x GRADAGG_RANKS_PER_NODE=$per -x MASTER_PORT -x GRADAGG_TEST_DEVICE python3 \
    "$root/test/python/test_ddp_features.py"
  part "bf16 parameters and GradScaler, ranks per node $per" "ddp_gpu_per$per.txt" PASS \
    env MASTER_PORT=$((29693 + per)) timeout 300 "${run[@]}" -np 2 -x GRADAGG_RANKS_PER_NODE=$per -x MASTER_PORT \
    python3 "$root/test/python/test_ddp_gpu.py"
done
for momentum in 0.9 0; do
  part "hook against a direct call, momentum $momentum" "hook_overhead_m$momentum.txt" '^\| [0-9]+M \| [0-9]+ \||differed' \
    env GRADAGG_RANKS_PER_NODE=1 timeout 120 "${run[@]}" -np 2 -x GRADAGG_RANKS_PER_NODE python3 \
    "$root/examples/pytorch/hook_overhead.py" --device cuda --sizes 1M,4M,25M --steps 40 --momentum "$momentum"
done
cat "$out/env.txt"
exit $status
