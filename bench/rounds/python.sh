#!/usr/bin/env bash
# The Python package on the GPU machine (PyTorch there): on 2 ranks as 1 node of 2 and as 2 nodes of 1, sharing the
# machine's GPUs (GRADAGG_NVLINK_SHARE_GPUS=1 where there is one), test/python/test_numpy.py against the C++ API
# (gradagg_python_reference) and test/python/test_torch.py (tensors, the DDP hook bitwise against an Aggregator).
#   bench/rounds/python.sh BIN_DIR OUT_DIR
# BIN_DIR holds libgradagg_c.so, gradagg_python_reference and the shared libraries (bench/rounds/stage.sh).
set -uo pipefail
. "$(dirname "$0")/round_setup.sh"
round_setup "$1" "$2"
root=$(cd "$(dirname "$0")/../.." && pwd)
export GRADAGG_LIBRARY="$bin/libgradagg_c.so" PYTHONPATH="$root/python"
{ command -v python3; python3 -c "import sys, torch, numpy; print(sys.version.split()[0], 'torch', torch.__version__,
'numpy', numpy.__version__, 'cuda', torch.cuda.is_available(), torch.version.cuda)"
  python3 -c "import mpi4py; print('mpi4py', mpi4py.__version__)"; nvidia-smi -L; } >"$out/env.txt" 2>&1
run=(mpirun "${mpirun_args[@]}" --oversubscribe -x GRADAGG_LIBRARY -x PYTHONPATH -x GRADAGG_NVLINK_SHARE_GPUS=1)
status=0
for per in 0 1; do
  reference=$(mktemp)
  timeout 200 "${run[@]}" -np 2 -x GRADAGG_RANKS_PER_NODE=$per "$bin/gradagg_python_reference" "$reference" \
    >"$out/numpy_per$per.txt" 2>&1 &&
    timeout 200 "${run[@]}" -np 2 -x GRADAGG_RANKS_PER_NODE=$per python3 "$root/test/python/test_numpy.py" \
      "$reference" >>"$out/numpy_per$per.txt" 2>&1
  code=$?
  status=$((status | code))
  say "numpy, ranks per node $per: exit $code $(grep -h 'PASS' "$out/numpy_per$per.txt")"
  rm -f "$reference".*
  timeout 300 "${run[@]}" -np 2 -x GRADAGG_RANKS_PER_NODE=$per python3 "$root/test/python/test_torch.py" \
    >"$out/torch_per$per.txt" 2>&1
  code=$?
  status=$((status | code))
  say "torch, ranks per node $per: exit $code $(grep -h 'PASS\|SKIPPED' "$out/torch_per$per.txt")"
done
cat "$out/env.txt"
exit $status
