#!/usr/bin/env bash
# The trainer on the GPU machine: the GPU tests (the CUDA model against the CPU model), then float32 and 1-bit
# training with --device cuda, 2 ranks as 2 emulated nodes sharing the machine's GPUs (by rank within the host).
#   scripts/gpu_train_round.sh BIN_DIR OUT_DIR [EPOCHS]
# BIN_DIR comes from scripts/stage_for_device.sh --with-data. Logs and CSVs go to OUT_DIR.
set -uo pipefail
bin=$(cd "$1" && pwd) out=$2 epochs=${3:-10}
mkdir -p "$out"
cuda_libs=$(ls -d /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib 2>/dev/null | tr "\n" :)
export LD_LIBRARY_PATH="$bin:$cuda_libs${LD_LIBRARY_PATH:-}" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$bin/gradagg_gpu_tests" --gtest_filter='CudaModel*' >"$out/cuda_model_test.txt" 2>&1
echo "== CudaModel test exit $?: $(grep -E '^\[  (PASSED|FAILED) ' "$out/cuda_model_test.txt" | tr '\n' ' ')"
for bits in 32 1; do
  mpirun --oversubscribe -np 2 "$bin/train" --device cuda --data "$bin/fashion-mnist" --ranks-per-node 1 \
    --epochs "$epochs" --bits "$bits" --csv "$out/train_cuda_2x1_bits$bits.csv" >"$out/train_cuda_bits$bits.txt" 2>&1
  echo "== train --device cuda --bits $bits exit $?"
  tail -n 3 "$out/train_cuda_bits$bits.txt"
done
