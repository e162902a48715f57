#!/usr/bin/env bash
# The trainer on the GPU machine: the CUDA model's tests (against the CPU model), then the four modes of
# scripts/train_compare.sh with --device cuda, one GPU per rank, the machine's N GPUs (at most 8) as 2 emulated
# nodes of N/2 (2x4 on 8 GPUs; one GPU: 2 ranks share it as 2x1). Gradients go to AggregateGradients from device
# memory: phases 1 and 3 over NVLink inside each emulated node, phase 2 through MPI (staged through pinned host
# memory, or CUDA-aware under MPI_PREFIX from scripts/build_cuda_aware_openmpi.sh).
#   bench/rounds/train.sh BIN_DIR OUT_DIR [EPOCHS [MPI_PREFIX]]
# BIN_DIR comes from bench/rounds/stage.sh --with-data. Writes OUT_DIR/train_cuda_<layout>_<mode>.csv, the
# runs' output in train.txt and the tests' in cuda_model_test.txt (six files: the device tool brings back eight).
set -uo pipefail
bin=$(cd "$1" && pwd) out=$2 epochs=${3:-10} prefix=${4:-}
mkdir -p "$out"
gpus=$(nvidia-smi -L | wc -l)
[ "$gpus" -gt 8 ] && gpus=8
ranks=$gpus per=$((gpus / 2))
[ "$gpus" -eq 1 ] && ranks=2 per=1
layout="$((ranks / per))x$per"
cuda_libs=$(ls -d /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib 2>/dev/null | tr "\n" :)
export LD_LIBRARY_PATH="$bin:$cuda_libs${LD_LIBRARY_PATH:-}" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0
launch=(mpirun --oversubscribe --bind-to none -x LD_LIBRARY_PATH)
if [ -n "$prefix" ] && [ -x "$prefix/bin/mpirun" ]; then
  prefix=$(cd "$prefix" && pwd)
  export OPAL_PREFIX="$prefix" PATH="$prefix/bin:$PATH" LD_LIBRARY_PATH="$prefix/lib:$LD_LIBRARY_PATH"
  launch=("$prefix/bin/mpirun" --oversubscribe --bind-to none -x OPAL_PREFIX -x LD_LIBRARY_PATH)
fi

"$bin/gradagg_gpu_tests" --gtest_color=no --gtest_filter='CudaModel*' >"$out/cuda_model_test.txt" 2>&1
echo "== CudaModel tests: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/cuda_model_test.txt" | tr '\n' ' ')"
# Plain SGD at lr 0.1, as these four modes were recorded (bench/rounds/train_recipes.sh runs momentum and Adam).
modes=("float32 --bits 32" "1bit_ef --bits 1" "1bit_noef --bits 1 --no-error-feedback" "1bit_ef_stale --bits 1 --stale")
for mode in "${modes[@]}"; do
  read -r -a words <<<"$mode"
  csv="$out/train_cuda_${layout}_${words[0]}.csv"
  echo "===== ${words[0]} on $layout" >>"$out/train.txt"
  timeout 600 "${launch[@]}" -np "$ranks" "$bin/train" --device cuda --data "$bin/fashion-mnist" \
    --ranks-per-node "$per" --epochs "$epochs" --optimizer sgd --lr 0.1 --csv "$csv" "${words[@]:1}" >>"$out/train.txt" 2>&1
  echo "== train ${words[0]} $layout: exit $? $(tail -n 1 "$csv" 2>/dev/null)"
done
