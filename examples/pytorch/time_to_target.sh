#!/usr/bin/env bash
# Time to a target loss on a slow link, the reason gradagg exists: examples/pytorch/train_gpt.py on NODES emulated
# nodes of SLOTS ranks each (scripts/emulated_cluster.sh, root), each link shaped to RATE, with DDP's allreduce (gloo),
# PyTorch's PowerSGD hook and gradagg's 1-bit hook with gradagg.torch.AdamW, one after the other, the same model,
# data, seed and recipe. The ranks run on CPUs, or share the GPUs where torch sees any. Prints one table: seconds to
# the target validation loss (evaluations every --eval-every steps; their time counts), the ratio to DDP, the bytes
# per step each rank sends (gradagg: counted by the hook; DDP and PyTorch's hooks: a ring allreduce of what they
# reduce, train_gpt.py's bytes_per_step), and the last loss; with matplotlib, OUT_DIR/time_to_target.png. A run
# whose JSON is in OUT_DIR already is kept, not run again.
#   examples/pytorch/time_to_target.sh OUT_DIR [TRAIN_GPT_OPTIONS...]
# Environment:
#   RATE           link rate, tc syntax (default 1gbit)
#   NODES          emulated nodes (default 2)
#   SLOTS          ranks per emulated node (default 1; 2 with --shard 2: FSDP2 inside the node, the link between)
#   RUNS           runs separated by ";", each "NAME [TRAIN_GPT_OPTIONS...]" (default "ddp;powersgd;gradagg"); without
#                  options NAME picks: ddp, bf16, powersgd (rank 4 from step 120), gradagg (1 bit after 120 steps at
#                  2 bits); such names alone may be separated by spaces
#   TARGET         the target loss: each run stops when it reaches it (--target-loss); without it every run goes the
#                  whole way and the target is DDP's last loss plus TARGET_MARGIN (default 2%)
#   TIME_LIMIT     seconds of training after which a run stops (--time-limit); default none
#   PYTHON         default /usr/bin/python3; GRADAGG_LIBRARY: default build/lib/libgradagg_c.so
#   PREFIX, SUBNET the emulated cluster's name and /24 (default gattt, 10.79.0): two invocations side by side need
#                  both apart
#   NCCL_*         passed to the ranks as set (--backend nccl: NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 keep NCCL on the
#                  shaped link between the namespaces, NCCL_SOCKET_IFNAME=eth0 on its interface)
# Run from the repository root after scripts/build.sh (or with GRADAGG_LIBRARY and LD_LIBRARY_PATH set).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$1
shift
rate=${RATE:-1gbit} nodes=${NODES:-2} slots=${SLOTS:-1} python=${PYTHON:-/usr/bin/python3}
prefix=${PREFIX:-gattt} subnet=${SUBNET:-10.79.0}
mkdir -p "$out"
export PYTHONPATH="$root/python" GRADAGG_LIBRARY="${GRADAGG_LIBRARY:-$root/build/lib/libgradagg_c.so}" \
  LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" GRADAGG_NVLINK_SHARE_GPUS="${GRADAGG_NVLINK_SHARE_GPUS:-0}" \
  MASTER_ADDR=$subnet.1 GLOO_SOCKET_IFNAME=eth0 OMP_NUM_THREADS=1
stop=() nccl=()
for variable in $(compgen -e | grep '^NCCL_' || true); do nccl+=(-x "$variable"); done
[ -z "${TARGET:-}" ] || stop+=(--target-loss "$TARGET")
[ -z "${TIME_LIMIT:-}" ] || stop+=(--time-limit "$TIME_LIMIT")
runs_text=${RUNS:-ddp;powersgd;gradagg}
# Known names alone may also be separated by spaces ("ddp gradagg"), as the records of the first runs wrote them.
[[ "$runs_text" == *";"* || ! "$runs_text" =~ ^[[:space:]]*((ddp|bf16|powersgd|gradagg)[[:space:]]*)+$ ]] ||
  runs_text=$(echo "$runs_text" | xargs | tr ' ' ';')
IFS=';' read -r -a runs <<<"$runs_text"
names=() port=29950
for run in "${runs[@]}"; do
  read -r name options <<<"$run"
  [[ "$name" =~ ^[A-Za-z0-9_.-]+$ ]] || { echo "time_to_target: bad run name '$name' in RUNS" >&2; exit 2; }
  if [ -z "$options" ]; then
    case "$name" in
      ddp) options="--exchange ddp" ;;
      bf16) options="--exchange bf16" ;;
      powersgd) options="--exchange powersgd" ;;
      gradagg) options="--exchange gradagg --bits 1 --warmup-steps 120 --warmup-bits 2" ;;
      *) echo "time_to_target: run '$name' needs options (known without: ddp, bf16, powersgd, gradagg)" >&2; exit 2 ;;
    esac
  fi
  names+=("$name")
  port=$((port + 1))
  if [ -s "$out/$name.json" ]; then echo "# $name: kept from $out/$name.json" >&2; continue; fi
  echo "# $name at $rate: $options" >&2
  # shellcheck disable=SC2086  # options is a word list
  MASTER_PORT=$port "$root/scripts/emulated_cluster.sh" --nodes "$nodes" --slots "$slots" --rate "$rate" \
    --prefix "$prefix" --subnet "$subnet" -- -np $((nodes * slots)) -x PYTHONPATH -x GRADAGG_LIBRARY -x LD_LIBRARY_PATH \
    -x MASTER_ADDR -x MASTER_PORT -x GLOO_SOCKET_IFNAME -x OMP_NUM_THREADS -x GRADAGG_NVLINK_SHARE_GPUS "${nccl[@]}" \
    "$python" "$root/examples/pytorch/train_gpt.py" --threads 1 $options "${stop[@]}" \
    --json "$out/$name.json" "$@" >"$out/$name.log" 2>&1 || { tail -n 20 "$out/$name.log" >&2; exit 1; }
done
"$python" - "$out" "$rate" "$nodes" "${TARGET:-}" "${TARGET_MARGIN:-0.02}" "${names[@]}" <<'PY' | tee "$out/table.md"
import json, os, sys
out, rate, nodes, target, margin, names = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], \
    float(sys.argv[5]), sys.argv[6:]
results = {name: json.load(open(os.path.join(out, name + ".json"))) for name in names}
first = next(iter(results.values()))
baseline = next((name for name, r in results.items() if r["args"]["exchange"] == "ddp"), None)
if target:
    target, how = float(target), "given"
else:
    target = results[baseline or names[0]]["final_validation_loss"] * (1 + margin)
    how = f"{baseline or names[0]}'s last {'+' if margin >= 0 else ''}{margin:.0%}"
print(f"{nodes} nodes of {os.environ.get('SLOTS', '1')} rank(s) at {rate}, {first.get('device', 'cpu')}, "
      f"torch {first.get('torch', '?')}, {first['parameters']} parameters; "
      f"target: validation loss {target:.4f} ({how})\n")
print("| run | seconds to target | x DDP | steps to target | bytes per step per rank | last loss (step) |")
print("| --- | --- | --- | --- | --- | --- |")
hits = {name: next((row for row in r["rows"] if row["validation_loss"] <= target), None)
        for name, r in results.items()}
for name, r in results.items():
    hit, base = hits[name], hits.get(baseline) if baseline else None
    ratio = f"{base['seconds'] / hit['seconds']:.2f}" if hit and base else ""
    sent = r.get("bytes_per_step")
    reached = hit["seconds"] if hit else f"not reached in {r['seconds']} s"
    print(f"| {name} ({r['label']}) | {reached} | {ratio} | {hit['step'] if hit else ''} | "
          f"{f'{sent / 2**20:.3f} MiB' if sent else ''} | {r['final_validation_loss']} ({r['rows'][-1]['step']}) |")
try:  # the figure, where matplotlib is at hand
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit(0)
figure, axis = plt.subplots(figsize=(7, 4.5))
for name, r in results.items():
    axis.plot([row["seconds"] for row in r["rows"]], [row["validation_loss"] for row in r["rows"]], marker=".",
              label=f"{name} ({r['label']})")
axis.axhline(target, color="gray", linestyle="--", linewidth=0.8, label=f"target {target:.3f}")
axis.set_xlabel(f"seconds of training, {nodes} nodes at {rate}")
axis.set_ylabel("validation loss (nats/byte)")
axis.set_ylim(top=min(3.0, max(row["validation_loss"] for r in results.values() for row in r["rows"])))
axis.legend(fontsize=7)
figure.tight_layout()
figure.savefig(os.path.join(out, "time_to_target.png"), dpi=120)
PY
