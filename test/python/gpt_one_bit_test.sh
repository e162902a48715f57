#!/bin/sh
# CI's run of examples/pytorch/train_gpt.py: 2 ranks as 2 nodes (GRADAGG_RANKS_PER_NODE=1 from CTest), a 2-layer
# byte-level GPT, 300 steps, 1 bit after 60 steps at 4 bits, the DDP recipe (clipping at 1.0). gradagg.torch.AdamW
# (the hook carries the first moment, the second is frozen after the warm-up) must end at least 0.1 nats per byte
# below torch's AdamW behind the same hook (the mechanism left out; the hook's check is waived for it). Measured on
# the development machine: 2.257 against 2.463 (DDP's allreduce: 2.256). Exits 77 (skipped) without PyTorch.
#   gpt_one_bit_test.sh MPIEXEC PYTHON OUT_DIR
set -eu
mpiexec=$1 python=$2 out=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
"$python" -c "import torch" 2>/dev/null || { echo "skipped: $python has no PyTorch"; exit 77; }
rm -rf "$out"
mkdir -p "$out"
tiny="--layers 2 --dim 64 --heads 4 --context 64 --batch 16 --steps 300 --eval-every 100 --eval-batches 8"
recipe="--lr 3e-3 --lr-warmup 30 --clip 1.0 --threads 1 --exchange gradagg --bits 1 --warmup-steps 60 --warmup-bits 4"
for optimizer in gradagg torch; do
  extra=""
  [ "$optimizer" = gradagg ] || extra=--unchecked
  # shellcheck disable=SC2086  # word lists
  "$mpiexec" -np 2 --oversubscribe -x MASTER_PORT "$python" "$root/examples/pytorch/train_gpt.py" $tiny $recipe \
    --optimizer "$optimizer" $extra --json "$out/$optimizer.json"
done
"$python" - "$out/gradagg.json" "$out/torch.json" <<'PY'
import json, sys
ours, theirs = (json.load(open(path)) for path in sys.argv[1:])
a, b = ours["final_validation_loss"], theirs["final_validation_loss"]
print(f"gpt_one_bit: gradagg.torch.AdamW {a} vs torch's AdamW {b} behind the 1-bit hook "
      f"({ours['bits_per_element']} bits per element)")
if not a < b - 0.1:
    sys.exit(f"gpt_one_bit: FAILED: {a} is not 0.1 below {b}")
print("gpt_one_bit: PASS")
PY
