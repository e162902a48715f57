#!/usr/bin/env bash
# Session 9, call 7 (4 GPUs): all-push calls of one round take chunks up to a 256 KiB slot, calls of several rounds
# half of it (gradagg_nvlink_benchmark_before: 128 KiB chunks for all). NVLink tests on 4 and 2 GPUs, the two builds
# alternating (3 rounds on 4 GPUs, 2 on 2), then the full sweep on 4 and 2 GPUs.
set -uo pipefail
C=$PWD/.device-carry; O=$1
. bench/rounds/round_setup.sh; round_setup $C $O >/dev/null
for n in 4 2; do
  timeout 150 mpirun "${mpirun_args[@]}" -np $n $C/gradagg_nvlink_gpu_tests --gtest_color=no > $O/nvlink_tests_${n}gpus.txt 2>&1
  say "NVLink tests $n GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' $O/nvlink_tests_${n}gpus.txt | tr '\n' ' ')"
done
bench() {  # name, binary, ranks, arguments...
  local name=$1 binary=$2 ranks=$3; shift 3
  timeout 150 mpirun "${mpirun_args[@]}" -np $ranks $C/$binary "$@" > $O/$name.txt 2>&1
  say "$name: exit $? $(grep -E '^# (check|gradagg at least)' $O/$name.txt | tr '\n' ' ')"
  grep -v '^#' $O/$name.txt | awk -v n=$name '{print n, $1, $4, $6, $15}' >> $O/alternating.txt
}
for r in 1 2 3; do
  bench before_4gpus_$r gradagg_nvlink_benchmark_before 4 -b 32M -e 512M -f 2 -n 50 -w 10
  bench after_4gpus_$r gradagg_nvlink_benchmark 4 -b 32M -e 512M -f 2 -n 50 -w 10
done
for r in 1 2; do
  bench before_2gpus_$r gradagg_nvlink_benchmark_before 2 -b 16M -e 128M -f 2 -n 50 -w 10
  bench after_2gpus_$r gradagg_nvlink_benchmark 2 -b 16M -e 128M -f 2 -n 50 -w 10
done
bench sweep_4gpus gradagg_nvlink_benchmark 4 -b 8 -e 1G -f 2 -n 50 -w 10
bench sweep_2gpus gradagg_nvlink_benchmark 2 -b 8 -e 1G -f 2 -n 50 -w 10
echo done
