#!/usr/bin/env bash
# Session 9, call 1 (4 GPUs): all-push rounds spread evenly over the blocks (gradagg_nvlink_benchmark_before: the
# previous commit), alternating; the late-peer test with and without the mend; NVLink tests on 4 and 2 GPUs; --check
# 1x4 and 2x2; memcheck of a 2x2 --check; full sweeps for the table.
set -uo pipefail
C=$PWD/.device-carry; O=$1
. bench/rounds/round_setup.sh; round_setup $C $O >/dev/null
nvidia-smi -L > $O/gpus.txt; nvidia-smi topo -m >> $O/gpus.txt 2>&1
for b in gradagg_nvlink_gpu_tests gradagg_nvlink_gpu_tests_nomend; do
  CUDA_VISIBLE_DEVICES=0 timeout 60 mpirun "${mpirun_args[@]}" --oversubscribe -x CUDA_VISIBLE_DEVICES \
    -x GRADAGG_NVLINK_SHARE_GPUS=1 -np 2 $C/$b --gtest_color=no --gtest_also_run_disabled_tests \
    --gtest_filter='*Late*' > $O/late_shared_$b.txt 2>&1
  say "late peer, $b, 2 ranks sharing GPU 0: exit $? $(grep -E '^\[  (PASSED|FAILED) ' $O/late_shared_$b.txt | tr '\n' ' ')"
  timeout 60 mpirun "${mpirun_args[@]}" -np 4 $C/$b --gtest_color=no --gtest_also_run_disabled_tests \
    --gtest_filter='*Late*' > $O/late_4gpus_$b.txt 2>&1
  say "late peer, $b, 4 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' $O/late_4gpus_$b.txt | tr '\n' ' ')"
done
timeout 240 mpirun "${mpirun_args[@]}" -np 4 $C/gradagg_nvlink_gpu_tests --gtest_color=no > $O/nvlink_tests_4gpus.txt 2>&1
say "NVLink tests 4 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' $O/nvlink_tests_4gpus.txt | tr '\n' ' ')"
timeout 120 mpirun "${mpirun_args[@]}" -np 2 $C/gradagg_nvlink_gpu_tests --gtest_color=no > $O/nvlink_tests_2gpus.txt 2>&1
say "NVLink tests 2 GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' $O/nvlink_tests_2gpus.txt | tr '\n' ' ')"
bench() {  # name, binary, ranks, arguments...
  local name=$1 binary=$2 ranks=$3; shift 3
  timeout 150 mpirun "${mpirun_args[@]}" -np $ranks $C/$binary "$@" > $O/$name.txt 2>&1
  say "$name: exit $? $(grep -E '^# (check|gradagg at least)' $O/$name.txt | tr '\n' ' ')"
  grep -v '^#' $O/$name.txt | awk -v n=$name '{print n, $1, $4, $6, $12, $15}' >> $O/alternating.txt
}
for r in 1 2 3; do
  bench before_4gpus_$r gradagg_nvlink_benchmark_before 4 -b 8M -e 1G -f 2 -n 30 -w 5
  bench after_4gpus_$r gradagg_nvlink_benchmark 4 -b 8M -e 1G -f 2 -n 30 -w 5
done
bench sweep_4gpus gradagg_nvlink_benchmark 4 -b 8 -e 1G -f 2 -n 50 -w 10
bench sweep_2gpus gradagg_nvlink_benchmark 2 -b 8 -e 1G -f 2 -n 50 -w 10
S=(mpirun "${mpirun_args[@]}" -x GRADAGG_CUDA_AWARE_MPI=off -np 4)
for shape in "2 --bits 1 -b 1K -e 16M -f 16" "2 --bits 1 -b 16M -e 256M -f 4" "2 --bits 2 -b 1K -e 16M -f 16" \
    "4 --bits 1 -b 1K -e 256M -f 16" "1 --bits 1 -b 1K -e 16M -f 16"; do
  # shellcheck disable=SC2086
  timeout 120 "${S[@]}" $C/gradagg --device cuda --ranks-per-node $shape -n 2 -w 1 --check --no-baseline \
    > $O/check_tmp.txt 2>&1
  status=$?; cat $O/check_tmp.txt >> $O/check.txt
  say "check ranks per node $shape: exit $status $(grep '^# check' $O/check_tmp.txt | tail -n 1)"
done
head -n 30 $O/check.txt > $O/preamble_2x2.txt
timeout 200 "${S[@]}" -x GRADAGG_NVLINK_TIMEOUT=150 $sanitizer --tool memcheck --error-exitcode 9 $C/gradagg --device cuda \
  --ranks-per-node 2 --bits 1 -b 4K -e 64K -f 16 -n 1 -w 0 --check --no-baseline --no-nccl > $O/memcheck_check_2x2.txt 2>&1
say "memcheck --check 2x2: exit $? $(grep -E 'ERROR SUMMARY|^# check' $O/memcheck_check_2x2.txt | tr '\n' ' ')"
echo done
