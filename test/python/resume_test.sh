#!/bin/sh
# A run stopped at step k and resumed from its checkpoint (model, optimizer and each rank's GradaggState) in a new
# mpirun must end at step 2k bitwise where the uninterrupted run does, at 1 bit with gradagg.torch.AdamW on 2 ranks
# as 2 nodes; the same resume without the hook's state must not (so the comparison can fail), nor one with
# residuals="reset" (the momentum kept, the carried error dropped: it differs from both); and the checkpoint loaded in
# another topology (one node of 2 ranks) must be refused with a message. GRADAGG_TEST_SECOND_MOMENT=synced
# runs it with the synchronised second moment (no warm-up) instead of the frozen one.
#   resume_test.sh MPIEXEC PYTHON [DEVICE]
set -u
export GRADAGG_TEST_SECOND_MOMENT=${GRADAGG_TEST_SECOND_MOMENT:-frozen}
mpiexec=$1 python=$2 device=${3:-cpu}
here=$(cd "$(dirname "$0")" && pwd)
directory=$(mktemp -d)
trap 'rm -rf "$directory"' EXIT
for mode in whole first resume resume_without_hook_state resume_reset; do
  GRADAGG_RANKS_PER_NODE=1 timeout 300 "$mpiexec" -np 2 --oversubscribe -x GRADAGG_RANKS_PER_NODE -x MASTER_PORT \
    -x GRADAGG_TEST_SECOND_MOMENT "$python" "$here/resume.py" "$mode" 4 "$directory" "$device" || { echo "resume: FAILED: $mode"; exit 1; }
done
[ -f "$directory/whole.pt" ] || { echo "resume: SKIPPED (no PyTorch)"; exit 0; }
"$python" - "$directory" <<'EOF' || exit 1
import sys
import torch
directory = sys.argv[1]
whole, resumed, fresh, reset = (torch.load(f"{directory}/{m}.pt")
                                 for m in ("whole", "resume", "resume_without_hook_state", "resume_reset"))
differing = int((whole.view(torch.int32) != resumed.view(torch.int32)).sum())
print(f"resume: resumed vs uninterrupted: {differing} of {whole.numel()} parameters differ")
print(f"resume: without the hook's state: {int((whole != fresh).sum())} differ, largest {float((whole - fresh).abs().max()):.3g}")
if differing:
    print("resume: FAILED: the resumed run is not bitwise the uninterrupted one")
    sys.exit(1)
if torch.equal(whole, fresh):
    print("resume: FAILED: leaving the hook's state out changes nothing, so the check cannot fail")
    sys.exit(1)
# residuals="reset" on the same topology: the momentum kept (not the run without hook state), the carried error
# dropped (not the uninterrupted run).
if torch.equal(reset, whole) or torch.equal(reset, fresh):
    print("resume: FAILED: residuals='reset' kept the carried error or lost the momentum")
    sys.exit(1)
print(f"resume: residuals='reset' on the same topology: {int((reset != whole).sum())} differ from the "
      f"uninterrupted run, {int((reset != fresh).sum())} from no hook state")
EOF
# The checkpoint of 2 nodes loaded by 2 ranks of one node: refused at the first step, on every rank, saying why.
if GRADAGG_RANKS_PER_NODE=0 timeout 120 "$mpiexec" -np 2 --oversubscribe -x GRADAGG_RANKS_PER_NODE -x MASTER_PORT \
  -x GRADAGG_TEST_SECOND_MOMENT "$python" "$here/resume.py" resume 4 "$directory" "$device" >"$directory/other_topology.txt" 2>&1; then
  echo "resume: FAILED: a checkpoint of 2 nodes was taken by one node"
  exit 1
fi
grep -m1 "resume on the same one" "$directory/other_topology.txt" ||
  { cat "$directory/other_topology.txt"; echo "resume: FAILED: no clear refusal of another topology"; exit 1; }
# The same checkpoint on that one node with residuals="reset": taken, the momentum kept (so it differs from the resume
# without the hook's state there), the carried error started afresh.
for mode in resume_reset resume_without_hook_state; do
  GRADAGG_RANKS_PER_NODE=0 timeout 120 "$mpiexec" -np 2 --oversubscribe -x GRADAGG_RANKS_PER_NODE -x MASTER_PORT \
    -x GRADAGG_TEST_SECOND_MOMENT "$python" "$here/resume.py" "$mode" 4 "$directory" "$device" ||
    { echo "resume: FAILED: $mode on another topology"; exit 1; }
done
"$python" - "$directory" <<'EOF' || exit 1
import sys
import torch
kept, fresh = (torch.load(f"{sys.argv[1]}/{m}.pt") for m in ("resume_reset", "resume_without_hook_state"))
if torch.equal(kept, fresh):
    print("resume: FAILED: residuals='reset' on another topology lost the momentum")
    sys.exit(1)
print(f"resume: another topology with residuals='reset': {int((kept != fresh).sum())} parameters differ from no hook state")
EOF
echo "resume: PASS"
