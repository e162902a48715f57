#!/usr/bin/env bash
# Time to a target loss on a slow link, the reason gradagg exists: examples/pytorch/train_gpt.py on NODES emulated
# nodes of one CPU rank each (scripts/emulated_cluster.sh, root), each link shaped to RATE, with DDP's allreduce
# (gloo), PyTorch's PowerSGD hook and gradagg's 1-bit hook with gradagg.torch.AdamW, one after the other, the same
# model, data, seed and recipe. Prints one table: seconds to the target validation loss (evaluations every
# --eval-every steps; their time counts), the ratio to DDP, the bytes per step each rank sends across nodes (gradagg:
# counted by the hook; DDP: a ring allreduce's 2 (N-1)/N x 4 bytes per parameter; PowerSGD: not counted), and the
# final loss. The target is DDP's final validation loss plus TARGET_MARGIN (default 2%). A run whose JSON is in
# OUT_DIR already is kept, not run again.
#   examples/pytorch/time_to_target.sh OUT_DIR [TRAIN_GPT_OPTIONS...]
# Environment: RATE (default 1gbit), NODES (default 2), TARGET_MARGIN (default 0.02), RUNS (default "ddp powersgd
# gradagg"), PYTHON (default /usr/bin/python3). Run from the repository root after scripts/build.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$1
shift
rate=${RATE:-1gbit} nodes=${NODES:-2} python=${PYTHON:-/usr/bin/python3}
mkdir -p "$out"
export PYTHONPATH="$root/python" GRADAGG_LIBRARY="$root/build/lib/libgradagg_c.so" MASTER_ADDR=10.79.0.1 \
  GLOO_SOCKET_IFNAME=eth0 OMP_NUM_THREADS=1
port=29950
for run in ${RUNS:-ddp powersgd gradagg}; do
  case "$run" in
    ddp) options=(--exchange ddp) ;;
    powersgd) options=(--exchange powersgd) ;;
    gradagg) options=(--exchange gradagg --bits 1 --warmup-steps 120 --warmup-bits 2) ;;
    *) echo "time_to_target: unknown run '$run' (ddp, powersgd, gradagg)" >&2; exit 2 ;;
  esac
  port=$((port + 1))
  if [ -s "$out/$run.json" ]; then echo "# $run: kept from $out/$run.json" >&2; continue; fi
  echo "# $run at $rate" >&2
  MASTER_PORT=$port "$root/scripts/emulated_cluster.sh" --nodes "$nodes" --slots 1 --rate "$rate" --prefix gattt \
    --subnet 10.79.0 -- -np "$nodes" -x PYTHONPATH -x GRADAGG_LIBRARY -x MASTER_ADDR -x MASTER_PORT \
    -x GLOO_SOCKET_IFNAME -x OMP_NUM_THREADS "$python" "$root/examples/pytorch/train_gpt.py" --threads 1 \
    "${options[@]}" --json "$out/$run.json" "$@" >"$out/$run.log" 2>&1 ||
    { tail -n 20 "$out/$run.log" >&2; exit 1; }
done
# shellcheck disable=SC2086  # RUNS is a list
"$python" - "$out" "$rate" "$nodes" "${TARGET_MARGIN:-0.02}" ${RUNS:-ddp powersgd gradagg} <<'PY' | tee "$out/table.md"
import json, os, sys
out, rate, nodes, margin, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5:]
results = {run: json.load(open(os.path.join(out, run + ".json"))) for run in runs}
ddp = results.get("ddp")
target = (ddp or results[runs[0]])["final_validation_loss"] * (1 + margin)
parameters = next(iter(results.values()))["parameters"]
def bytes_per_step(run, r):
    if run == "ddp":
        return 2 * (nodes - 1) / nodes * 4 * parameters
    if run == "gradagg":
        return r["bits_per_element"] / 8 * parameters  # what the hook counted, per element of gradient
    return None
print(f"{nodes} nodes at {rate}, {parameters} parameters; target: validation loss {target:.4f} "
      f"(DDP's final {'+' if margin >= 0 else ''}{margin:.0%})\n")
print("| exchange | seconds to target | x DDP | bytes per step per rank | final loss | seconds, whole run |")
print("| --- | --- | --- | --- | --- | --- |")
reached = {}
for run, r in results.items():
    hit = next((row["seconds"] for row in r["rows"] if row["validation_loss"] <= target), None)
    reached[run] = hit
    b = bytes_per_step(run, r)
    ratio = f"{reached['ddp'] / hit:.2f}" if hit and reached.get("ddp") else ""
    print(f"| {r['label']} | {hit if hit is not None else 'not reached'} | {ratio} | "
          f"{f'{b / 2**20:.2f} MiB' if b else ''} | {r['final_validation_loss']} | {r['seconds']} |")
PY
