#!/usr/bin/env bash
# Session 18, call 9 (4 GPUs): the shipped build (all-push pushes in runs of 4 vectors a thread, the peers in turn,
# the runs counted on).
# 0. 4 MiB - 1 GiB on 4 GPUs, alternating twice: the build before push runs (a08343b, .tmp_round/ab/before), push runs
#    with a division per vector (8f1b41d, .tmp_round/ab/runs_divided) and the shipped build.
# 1. NVLink tests on 4 GPUs; sweeps on 4 and 2 GPUs, twice each, alternating.
# 2. Tests on 2 GPUs; gradagg --check on 1x4, 2x2, 4x1 (staged, 1 and 32 bits) and 2x2 CUDA-aware at 1 bit.
# 3. compute-sanitizer memcheck of the all-push tests on 4 GPUs.
# Staged: bench/rounds/stage.sh --only "gradagg_nvlink_gpu_tests gradagg_nvlink_benchmark gradagg"; carried with
# .device-carry-mpi (CUDA-aware Open MPI). Run from the repository root: bash <this file>.
set -uo pipefail
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
. bench/rounds/round_setup.sh
round_setup .device-carry "$OUT/r9"
mpirun=(mpirun "${mpirun_args[@]}")
nvidia-smi -L | head -1 | tee -a "$out/summary.txt"
timeout 150 "${mpirun[@]}" -np 4 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no > "$out/tests_4gpus.txt" 2>&1
say "== tests 4 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_4gpus.txt" | tr '\n' ' ')"
for i in 1 2; do
  for build in before runs_divided shipped; do
    case $build in shipped) b=$bin/gradagg_nvlink_benchmark ;; *) b=.tmp_round/ab/$build ;; esac
    timeout 60 "${mpirun[@]}" -np 4 "$b" -b 4M -e 1G -f 2 -n 20 -w 5 -r 5 > "$out/ab_${build}_$i.txt" 2>&1
    say "== $build #$i: exit $? $(grep -v '^#' "$out/ab_${build}_$i.txt" | awk '{print $1, $4, $NF}' | tr '\n' ';')"
  done
done
for i in 1 2; do
  for n in 4 2; do
    timeout 100 "${mpirun[@]}" -np $n "$bin/gradagg_nvlink_benchmark" -b 8 -e 1G -f 2 -n 20 -w 5 -r 5 \
      > "$out/sweep_${n}gpus_$i.txt" 2>&1
    say "== sweep $n GPUs #$i: exit $? $(grep -v '^#' "$out/sweep_${n}gpus_$i.txt" | awk '{print $1, $4, $NF}' | tr '\n' ';')"
  done
  tar -C "$OUT" -czf "$OUT/r9.tar.gz" r9
done
timeout 100 "${mpirun[@]}" -np 2 "$bin/gradagg_nvlink_gpu_tests" --gtest_color=no > "$out/tests_2gpus.txt" 2>&1
say "== tests 2 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/tests_2gpus.txt" | tr '\n' ' ')"
for per in 4 2 1; do
  for bits in 1 32; do
    echo "===== --check, staged $((4 / per))x$per, $bits bits" >>"$out/check.txt"
    timeout 60 "${mpirun[@]}" -x GRADAGG_CUDA_AWARE_MPI=off -np 4 "$bin/gradagg" --device cuda --ranks-per-node "$per" \
      --bits "$bits" -b 1K -e 32M -f 8 -n 2 -w 1 --check --no-baseline >>"$out/check.txt" 2>&1
    say "== check staged $((4 / per))x$per bits $bits: exit $? $(grep '^# check' "$out/check.txt" | tail -n 1)"
  done
done
prefix=$(cd .device-carry-mpi && pwd)
echo "===== --check, aware 2x2, 1 bit" >>"$out/check.txt"
timeout 60 env OPAL_PREFIX="$prefix" PATH="$prefix/bin:$PATH" LD_LIBRARY_PATH="$prefix/lib:$LD_LIBRARY_PATH" \
  "$prefix/bin/mpirun" --allow-run-as-root --bind-to none -x OPAL_PREFIX -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
  -x GRADAGG_NVLINK_TIMEOUT -x GRADAGG_CUDA_AWARE_MPI=on -np 4 "$bin/gradagg" --device cuda --ranks-per-node 2 \
  --bits 1 -b 1K -e 32M -f 8 -n 2 -w 1 --check --no-baseline >>"$out/check.txt" 2>&1
say "== check aware 2x2 bits 1: exit $? $(grep '^# check' "$out/check.txt" | tail -n 1)"
tar -C "$OUT" -czf "$OUT/r9.tar.gz" r9
timeout 240 "${mpirun[@]}" -np 4 "$sanitizer" --tool memcheck --error-exitcode 9 "$bin/gradagg_nvlink_gpu_tests" \
  --gtest_color=no --gtest_filter='*AllPush*:*EveryPeerOrder*:*ReduceScatterAndAllGather*' > "$out/memcheck_4gpus.txt" 2>&1
say "== memcheck 4 GPUs, all-push tests: exit $? $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED)' "$out/memcheck_4gpus.txt" | sort | uniq -c | tr '\n' ' ')"
tar -C "$OUT" -czf "$OUT/r9.tar.gz" r9
