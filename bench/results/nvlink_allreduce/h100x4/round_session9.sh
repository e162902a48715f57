#!/usr/bin/env bash
# Session 9, call 6 (4 GPUs): this tree's NVLink code - the NVLink tests with the late-peer test enabled and the
# many-rounds all-push test, on 4 and 2 GPUs; the allreduce sweep against NCCL on 4 and 2 GPUs.
set -uo pipefail
C=$PWD/.device-carry; O=$1
. bench/rounds/round_setup.sh; round_setup $C $O >/dev/null
nvidia-smi -L > $O/gpus.txt
for n in 4 2; do
  timeout 150 mpirun "${mpirun_args[@]}" -np $n $C/gradagg_nvlink_gpu_tests --gtest_color=no > $O/nvlink_tests_${n}gpus.txt 2>&1
  say "NVLink tests $n GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' $O/nvlink_tests_${n}gpus.txt | tr '\n' ' ')"
done
for n in 4 2; do
  timeout 150 mpirun "${mpirun_args[@]}" -np $n $C/gradagg_nvlink_benchmark -b 8 -e 1G -f 2 -n 50 -w 10 > $O/benchmark_${n}gpus.txt 2>&1
  say "sweep $n GPUs: exit $? $(grep -E '^# (check|gradagg at least)' $O/benchmark_${n}gpus.txt | tr '\n' ' ')"
done
echo done
