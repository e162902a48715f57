#!/usr/bin/env bash
# Session 9, call 4 (one H100): the hook queued on the GPU - Python GPU tests (DDP features, tensors, FSDP on CPU
# meshes), and the hook's overhead queued vs its waiter thread, alternating, 3 rounds each at momentum 0 and 0.9.
set -uo pipefail
C=$PWD/.device-carry; O=$1
. bench/rounds/round_setup.sh; round_setup $C $O >/dev/null
export GRADAGG_LIBRARY=$C/libgradagg_c.so PYTHONPATH=$PWD/python:$PWD/test/python
P=(mpirun "${mpirun_args[@]}" --oversubscribe -x GRADAGG_LIBRARY -x PYTHONPATH -x GRADAGG_NVLINK_SHARE_GPUS=1 -np 2)
for per in 1 0; do
  timeout 150 "${P[@]}" -x GRADAGG_RANKS_PER_NODE=$per python3 test/python/test_ddp_gpu.py > $O/ddp_gpu_per$per.txt 2>&1
  say "test_ddp_gpu.py, ranks per node $per: exit $? $(grep -h 'PASS\|FAIL\|SKIPPED\|Error' $O/ddp_gpu_per$per.txt | head -5 | tr '\n' ' ')"
  timeout 150 "${P[@]}" -x GRADAGG_RANKS_PER_NODE=$per python3 test/python/test_torch.py > $O/torch_per$per.txt 2>&1
  say "test_torch.py, ranks per node $per: exit $? $(grep -h 'PASS\|FAIL\|SKIPPED\|Error' $O/torch_per$per.txt | head -5 | tr '\n' ' ')"
done
timeout 200 "${P[@]}" -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29662 python3 test/python/test_fsdp.py > $O/fsdp_2ranks.txt 2>&1
say "test_fsdp.py, 2 ranks: exit $? $(grep -h 'PASS\|FAIL\|SKIPPED\|Error' $O/fsdp_2ranks.txt | head -3 | tr '\n' ' ')"
for r in 1 2 3; do for m in 0 0.9; do
  timeout 120 "${P[@]}" -x GRADAGG_RANKS_PER_NODE=1 python3 examples/pytorch/hook_overhead.py --device cuda \
    --sizes 1M,4M,25M --steps 40 --momentum $m > $O/hook_overhead_m${m}_$r.txt 2>&1
  say "hook overhead momentum $m round $r: exit $?"
  grep -E '^\| [0-9]+M \| [0-9]+ \|' $O/hook_overhead_m${m}_$r.txt | head -3 >> $O/summary.txt
done; done
echo done
