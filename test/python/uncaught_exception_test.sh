#!/bin/sh
# An uncaught Python exception on one rank of a 2-node job (GRADAGG_TIMEOUT=30) must end the job within 10 s,
# non-zero, with the exception and gradagg's line naming the rank printed; without gradagg's excepthook it took the
# timeout. Twice: gradagg's excepthook as it is, and wrapped as torch.distributed (torch 2) wraps it, sys.stderr
# pointed at a buffer meanwhile (where the traceback used to be lost).
#   uncaught_exception_test.sh MPIEXEC PYTHON
set -u
mpiexec=$1 python=$2
here=$(cd "$(dirname "$0")" && pwd)
output=$(mktemp)
trap 'rm -f "$output"' EXIT
for variant in plain wrapped; do
  start=$(date +%s)
  GRADAGG_TIMEOUT=30 GRADAGG_RANKS_PER_NODE=1 timeout 120 "$mpiexec" -np 2 --oversubscribe -x GRADAGG_TIMEOUT \
    -x GRADAGG_RANKS_PER_NODE "$python" "$here/uncaught_exception.py" "$variant" >"$output" 2>&1
  status=$?
  seconds=$(($(date +%s) - start))
  echo "uncaught_exception, $variant: exit status $status after $seconds s"
  grep -E "fails at step 3|gradagg: rank 1" "$output"
  [ "$status" -ne 0 ] || { echo "uncaught_exception: FAILED ($variant): the job ended with status 0"; exit 1; }
  grep -q "RuntimeError: rank 1 fails at step 3" "$output" ||
    { cat "$output"; echo "uncaught_exception: FAILED ($variant): no traceback"; exit 1; }
  grep -q "gradagg: rank 1: uncaught RuntimeError" "$output" ||
    { cat "$output"; echo "uncaught_exception: FAILED ($variant): no abort line"; exit 1; }
  [ "$seconds" -le 10 ] || { echo "uncaught_exception: FAILED ($variant): took $seconds s (bound 10)"; exit 1; }
done
echo "uncaught_exception: PASS"
