#!/usr/bin/env bash
# The optimizer recipes on the GPU machine: the CUDA model's tests (every optimizer against the CPU model), then
# scripts/train_compare.sh with --device cuda for momentum 0.9 and Adam, float32 against 1 bit (and 1 bit with the
# momentum applied after the aggregation), 3 seeds. 2 ranks as 2 emulated nodes of 1: one GPU each where the machine
# has two, sharing it where it has one.
#   bench/rounds/train_recipes.sh BIN_DIR OUT_DIR
# BIN_DIR comes from bench/rounds/stage.sh --with-data. Writes OUT_DIR/cuda_model_test.txt,
# OUT_DIR/summary.md and OUT_DIR/runs.tar (the CSVs and logs: the device tool brings back eight files).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "$1" && pwd) out=$2
mkdir -p "$out/runs"
cuda_libs=$(ls -d /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib 2>/dev/null | tr "\n" :)
export LD_LIBRARY_PATH="$bin:$cuda_libs${LD_LIBRARY_PATH:-}"
"$bin/gradagg_gpu_tests" --gtest_color=no --gtest_filter='CudaModel*' >"$out/cuda_model_test.txt" 2>&1
echo "== CudaModel tests: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/cuda_model_test.txt" | tr '\n' ' ')"
nvidia-smi -L >"$out/gpus.txt"
TRAIN="$bin/train" NP=2 RANKS_PER_NODE=1 RECIPES="momentum adam" BITS="32 1" MPIRUN_ARGS="--bind-to none -x LD_LIBRARY_PATH" \
  "$root/scripts/train_compare.sh" "$out/runs" --device cuda --data "$bin/fashion-mnist"
status=$?
cp "$out/runs/summary.md" "$out/summary.md" 2>/dev/null
tar -C "$out" -cf "$out/runs.tar" runs && rm -rf "$out/runs"
exit $status
