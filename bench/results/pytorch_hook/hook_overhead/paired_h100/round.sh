#!/usr/bin/env bash
# Session 9, call 8 (one H100): the hook's overhead as it is (waiter thread), with the paired estimate, 3 rounds at
# momentum 0 and 0.9, 2 ranks as 2 nodes sharing the GPU.
set -uo pipefail
C=$PWD/.device-carry; O=$1
. bench/rounds/round_setup.sh; round_setup $C $O >/dev/null
export GRADAGG_LIBRARY=$C/libgradagg_c.so PYTHONPATH=$PWD/python
P=(mpirun "${mpirun_args[@]}" --oversubscribe -x GRADAGG_LIBRARY -x PYTHONPATH -x GRADAGG_NVLINK_SHARE_GPUS=1 -np 2)
for r in 1 2 3; do for m in 0 0.9; do
  timeout 120 "${P[@]}" -x GRADAGG_RANKS_PER_NODE=1 python3 examples/pytorch/hook_overhead.py --device cuda \
    --sizes 1M,4M,25M --steps 40 --momentum $m > $O/hook_overhead_m${m}_$r.txt 2>&1
  say "hook overhead momentum $m round $r: exit $?"
  grep -E '^\| [0-9]+M \| [0-9]+ \|' $O/hook_overhead_m${m}_$r.txt | head -3 >> $O/summary.txt
done; done
echo done
