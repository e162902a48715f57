#!/usr/bin/env bash
# Session 9, call 9 (4 GPUs): wide all-push rounds (a call whose blocks' shares fit two slots takes one round, half of
# each chunk in the other parity's slot; a call's first push waits for every earlier round to be read).
# NVLink tests on 4 and 2 GPUs, then the previous build alternating (3 rounds), then the sweep on 4 GPUs.
set -uo pipefail
C=$PWD/.device-carry; O=$1
. bench/rounds/round_setup.sh; round_setup $C $O >/dev/null
for n in 4 2; do
  timeout 120 mpirun "${mpirun_args[@]}" -np $n $C/gradagg_nvlink_gpu_tests --gtest_color=no > $O/nvlink_tests_${n}gpus.txt 2>&1
  say "NVLink tests $n GPUs: exit $? $(grep -E '^\[  (PASSED|FAILED) ' $O/nvlink_tests_${n}gpus.txt | tr '\n' ' ')"
done
bench() {  # name, binary, ranks, arguments...
  local name=$1 binary=$2 ranks=$3; shift 3
  timeout 100 mpirun "${mpirun_args[@]}" -np $ranks $C/$binary "$@" > $O/$name.txt 2>&1
  say "$name: exit $? $(grep -E '^# (check|gradagg at least)' $O/$name.txt | tr '\n' ' ')"
  grep -v '^#' $O/$name.txt | awk -v n=$name '{print n, $1, $4, $6, $15}' >> $O/alternating.txt
}
for r in 1 2 3; do
  bench before_4gpus_$r gradagg_nvlink_benchmark_before 4 -b 64M -e 512M -f 2 -n 50 -w 10
  bench after_4gpus_$r gradagg_nvlink_benchmark 4 -b 64M -e 512M -f 2 -n 50 -w 10
done
bench sweep_4gpus gradagg_nvlink_benchmark 4 -b 8 -e 1G -f 2 -n 50 -w 10
echo done
