#!/usr/bin/env bash
# On the GPU machine: examples/pytorch/train_gpt.py at the issue's recipe (6 layers, d 384, 1200 steps of 32 x 256
# bytes per rank, AdamW 1e-3, betas 0.9/0.95, weight decay 0.1, clipping 1.0, bf16 autocast), NP ranks (default 2)
# as nodes of one rank sharing the GPU (DDP over gloo: NCCL refuses two ranks on one GPU), JOBS runs at a time. Each run is one line of
# RUNS (separated by ";"): NAME SEED EXAMPLE_OPTIONS... Writes OUT/summary.txt (a row per run) and OUT/runs.tar.gz
# (every run's log and JSON).
#   bench/rounds/gpt.sh CARRY_DIR OUT
# Environment: RUNS, JOBS (default 3), LIMIT (seconds per run, default 540), EXTRA (options for every run), GPUS (the
# runs' CUDA_VISIBLE_DEVICES in turn, separated by spaces: "0,1 2 3" puts the first run on GPUs 0 and 1, one rank each,
# as --backend nccl needs, the second on GPU 2, the third on 3, the fourth on 0 and 1 again; default: every GPU), NP, PORT
# (the first run's rendezvous port less one, default 29900: rounds side by side need ports apart).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
carry=$(cd "$1" && pwd) out=$2
mkdir -p "$out/runs"
. "$root/scripts/mpi_env.sh"
export PYTHONPATH="$root/python" GRADAGG_LIBRARY="$carry/libgradagg_c.so" LD_LIBRARY_PATH="$carry:${LD_LIBRARY_PATH:-}"
export GRADAGG_NVLINK_SHARE_GPUS=1 GRADAGG_RANKS_PER_NODE=1 MASTER_ADDR=127.0.0.1
jobs=${JOBS:-3} limit=${LIMIT:-540}
# The logs are packed on the way out, also when the round is stopped (the device tool brings back a few files only).
finish() {
  local running
  running=$(jobs -p)
  [ -n "$running" ] && kill $running 2>/dev/null && wait  # stopped: end the runs before their logs are packed
  for log in "$out"/runs/*.log; do
    [ -e "$log" ] && echo "$(basename "$log" .log): $(grep 'train_gpt: [^s]' "$log" | tail -n 1)"
  done | tee "$out/summary.txt"
  [ -d "$out/runs" ] && tar -C "$out" -czf "$out/runs.tar.gz" runs && rm -rf "$out/runs"
}
trap finish EXIT
trap 'exit 143' TERM INT
IFS=';' read -r -a runs <<<"${RUNS:?RUNS: NAME SEED OPTIONS...; NAME SEED OPTIONS...}"
read -r -a gpus <<<"${GPUS:-}"
port=${PORT:-29900}
for i in "${!runs[@]}"; do
  read -r name seed options <<<"${runs[$i]}"
  port=$((port + 1))
  visible=()
  [ ${#gpus[@]} -gt 0 ] && visible=(-x CUDA_VISIBLE_DEVICES="${gpus[$((i % ${#gpus[@]}))]}")
  # Unbound: Open MPI binds 2 ranks to cores 0 and 1, the same two cores for every run of the round.
  # shellcheck disable=SC2086  # option lists
  MASTER_PORT=$port timeout "$limit" mpirun --bind-to none -np "${NP:-2}" -x MASTER_PORT -x MASTER_ADDR -x PYTHONPATH \
    -x GRADAGG_LIBRARY -x LD_LIBRARY_PATH -x GRADAGG_NVLINK_SHARE_GPUS -x GRADAGG_RANKS_PER_NODE "${visible[@]}" \
    python3 "$root/examples/pytorch/train_gpt.py" --seed "$seed" --label "$name" --json "$out/runs/$name.s$seed.json" \
    ${EXTRA:-} $options >"$out/runs/$name.s$seed.log" 2>&1 &
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 2; done
done
wait
