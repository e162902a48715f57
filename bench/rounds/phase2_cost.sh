#!/usr/bin/env bash
# Issue 19's fixed cost of the GPU phase 2: 2 ranks as 2 nodes of 1, all traffic over TCP on loopback (Open MPI's
# TCP transport, gradagg's staged exchange), 1 bit. Runs
#   1. CUDA runtime calls per aggregation call (bench/rounds/cuda_call_count.py), with and without per-phase timing;
#   2. each call's host timeline of steps (GRADAGG_TRACE=3) at 1 and 4 MiB;
#   3. whole-call times of this build and, where given, an earlier one, interleaved, 3 rounds;
#   4. settings: Open MPI's TCP transport (eager limit, links per peer) and the staging chunk, 4 MiB to 256 MiB, each
#      variant against the defaults in the same run, 2 rounds interleaved.
# PARTS (default "calls timeline times settings") picks the steps; ROUNDS the rounds of steps 3 and 4 (default 3 and 2),
# SIZES the sizes of step 3 (default "-b 256K -e 64M -f 4"); MPI_OPTIONS are added to every mpirun; VARIANTS replaces
# step 4's list ("label|mpirun options|gradagg options;..."); TIMELINES replaces step 2's ("label|size|gradagg
# options;...", default the 1 and 4 MiB calls).
# With one GPU both ranks share it through MPS (started here, stopped at the end), so that neither waits for the
# other's time slice; with two or more, one GPU each.
#
#   bench/rounds/phase2_cost.sh BIN_DIR OUT_DIR [EARLIER_BIN_DIR]
#
# BIN_DIR holds gradagg and libgradagg_cuda_call_counter.so (bench/rounds/stage.sh); logs go to OUT_DIR.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "$1" && pwd)
out=$2
earlier=${3:+$(cd "$3" && pwd)}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bin:${LD_LIBRARY_PATH:-}"
status=0

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
# shellcheck disable=SC2206,SC2054
launch=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl tcp,self
  --mca btl_tcp_if_include lo ${MPI_OPTIONS:-} -x LD_LIBRARY_PATH -np 2)
if [ "$gpus" -ge 2 ]; then
  launch+=("$root/scripts/bind_local_gpu.sh")
  echo "# $gpus GPUs: one per rank" | tee "$out/setup.txt"
elif [ "$gpus" -eq 1 ]; then
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/gradagg-mps CUDA_MPS_LOG_DIRECTORY=/tmp/gradagg-mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d || { echo "MPS would not start" >&2; exit 1; }
  trap 'echo quit | nvidia-cuda-mps-control' EXIT
  launch=("${launch[@]:0:1}" -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY "${launch[@]:1}")
  echo "# one GPU: both ranks share it through MPS" | tee "$out/setup.txt"
else
  echo "no GPU" >&2
  exit 1
fi
nvidia-smi --query-gpu=name --format=csv,noheader >> "$out/setup.txt"
parts=" ${PARTS:-calls timeline times settings} "
common=(--device cuda --ranks-per-node 1 --cuda-aware-mpi off --bits 1 --no-baseline --no-nccl)

# 1. Calls per aggregation call.
[[ $parts == *" calls "* ]] && for size in 1M 4M; do
  for timing in "" --no-phase-times; do
    name="calls_${size}${timing:+_untimed}"
    python3 "$root/bench/rounds/cuda_call_count.py" --counter "$bin/libgradagg_cuda_call_counter.so" --json "$out/$name.json" \
      -- "${launch[@]}" "$bin/gradagg" "${common[@]}" --size "$size" -w 3 $timing > "$out/$name.md" 2>&1 || status=1
  done
done

# 2. Timelines: the last calls of each rank.
# shellcheck disable=SC2206
[ -n "${TIMELINES:-}" ] && IFS=';' read -r -a timelines <<<"$TIMELINES" || timelines=("1M|1M|" "4M|4M|")
[[ $parts == *" timeline "* ]] && for entry in "${timelines[@]}"; do
  IFS='|' read -r label size gradagg_options <<<"$entry"
  # shellcheck disable=SC2086
  "${launch[@]}" "$bin/gradagg" "${common[@]}" --size "$size" -w 5 -n 10 --trace 3 $gradagg_options \
    > "$out/timeline_${label// /_}.log" 2>&1 || status=1
done

# 3. Whole calls, interleaved: the earlier build and this one with per-phase timing (what the CLI always did), and
#    this one without.
# shellcheck disable=SC2206
sizes=(${SIZES:--b 256K -e 64M -f 4} -w 5 -n 50)
[[ $parts == *" times "* ]] && for round in $(seq "${ROUNDS:-3}"); do
  if [ -n "$earlier" ]; then
    "${launch[@]}" "$earlier/gradagg" "${common[@]}" "${sizes[@]}" > "$out/times_earlier_$round.log" 2>&1 || status=1
  fi
  "${launch[@]}" "$bin/gradagg" "${common[@]}" "${sizes[@]}" > "$out/times_this_$round.log" 2>&1 || status=1
  "${launch[@]}" "$bin/gradagg" "${common[@]}" "${sizes[@]}" --no-phase-times > "$out/times_this_untimed_$round.log" \
    2>&1 || status=1
done
# 4. Settings: label|mpirun options|gradagg options.
# shellcheck disable=SC2206
[ -n "${VARIANTS:-}" ] && IFS=';' read -r -a variants <<<"$VARIANTS" || variants=(
  "defaults||"
  "eager 1 MiB|--mca btl_tcp_eager_limit 1048576 --mca btl_tcp_rndv_eager_limit 1048576|"
  "2 links|--mca btl_tcp_links 2|"
  "4 links|--mca btl_tcp_links 4|"
  "4 links, eager 1 MiB|--mca btl_tcp_links 4 --mca btl_tcp_eager_limit 1048576 --mca btl_tcp_rndv_eager_limit 1048576|"
  "chunk 1 MiB||--staging-chunk 1M"
  "chunk 16 MiB||--staging-chunk 16M")
[[ $parts == *" settings "* ]] && for round in $(seq "${ROUNDS:-2}"); do
  for index in "${!variants[@]}"; do
    IFS='|' read -r label mpi_options gradagg_options <<<"${variants[$index]}"
    echo "# $label" > "$out/settings_${index}_$round.log"
    # shellcheck disable=SC2086
    "${launch[@]:0:1}" $mpi_options "${launch[@]:1}" "$bin/gradagg" "${common[@]}" -b 4M -e 256M -f 4 -w 3 -n 20 \
      $gradagg_options >> "$out/settings_${index}_$round.log" 2>&1 || status=1
  done
done
# Medians of step 3 per build and size (us per call, slowest rank), and of step 4 per variant.
python3 - "$out" <<'SUMMARY' | tee "$out/summary.md"
import glob, os, re, statistics, sys
out = sys.argv[1]
def rows(path):
    for line in open(path):
        fields = line.split()
        if re.match(r"^\s+\d", line) and len(fields) > 12:
            yield int(fields[0]), float(fields[3]), float(fields[11])  # size, time, exchange
def table(title, groups):
    if not groups:
        return
    sizes = sorted({size for runs in groups.values() for run in runs for size in run})
    print(f"{title}\n\n| | " + " | ".join(f"{s >> 10} KiB" if s < 1 << 20 else f"{s >> 20} MiB" for s in sizes) + " |")
    print("| --- |" + " --- |" * len(sizes))
    for name, runs in groups.items():
        cells = []
        for size in sizes:
            times = [run[size][0] for run in runs if size in run]
            exchange = [run[size][1] for run in runs if size in run]
            cells.append(f"{statistics.median(times):.0f} ({statistics.median(exchange):.0f}, n={len(times)})")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()
times = {}
for tag in ("earlier", "this", "this_untimed"):
    runs = [{size: (t, x) for size, t, x in rows(path)} for path in sorted(glob.glob(f"{out}/times_{tag}_[0-9]*.log"))]
    if runs:
        times[tag] = runs
table("Whole calls, median us (median exchange us)", times)
settings = {}
for path in sorted(glob.glob(f"{out}/settings_*_*.log")):
    label = open(path).readline().lstrip("# ").strip()
    settings.setdefault(label, []).append({size: (t, x) for size, t, x in rows(path)})
table("Settings, median us (median exchange us)", settings)
SUMMARY
exit $status
