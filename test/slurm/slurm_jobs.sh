#!/usr/bin/env bash
# Runs inside node 0 of scripts/slurm_test_cluster.sh (2 nodes, shaped links): what a cluster user does.
#   1. sbatch the unchanged template on 1 node x 2 ranks and on 2 nodes x 1 rank; each job must end COMPLETED and
#      its table hold every row it promises (node counts x bits x sizes), every run checked; across 2 nodes the
#      32-bit call must take longer than the 1-bit one (the link is shaped, and 1 bit sends ~1/28 of the bytes).
#   2. srun --mpi=pmix of the CLI on 2 nodes, bare and through scripts/bind_local_gpu.sh, and mpirun inside salloc:
#      each --check must PASS.
#   3. scripts/plot_scaling.py draws the 2-node table.
#   slurm_jobs.sh GRADAGG_BINARY OUT_DIR PYTHON_WITH_MATPLOTLIB
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
gradagg=$1 out=$2 python=$3
cd "$root"
fail() { echo "slurm_jobs: FAILED: $*" >&2; exit 1; }

# Small sizes and few iterations: CI has 2 cores for both nodes.
export SWEEP_ARGS="--bits 1,32 --min 1M --max 4M --factor 4 --iters 3 --warmups 1 --check --gradagg $gradagg"
submit() {  # NAME NODES RANKS_PER_NODE: submit the template, wait (with a deadline), check the job and its rows
  local name=$1 nodes=$2 per_node=$3 job state rows
  job=$(RESULTS="$out/$name" timeout 600 sbatch --parsable --wait --nodes="$nodes" --ntasks-per-node="$per_node" \
    --output="$out/$name.out" scripts/slurm_scaling.sbatch) || { cat "$out/$name.out" >&2 || true; fail "job $name"; }
  cat "$out/$name.out"
  state=$(scontrol show job "$job" | grep -o 'JobState=[A-Z_]*')
  [ "$state" = JobState=COMPLETED ] || fail "job $name ($job) ended $state"
  # node counts 1..nodes (powers of two) x 2 bit widths x 2 sizes, each checked
  rows=$(tail -n +2 "$out/$name.csv" | grep -c ',PASS$' || true)
  [ "$rows" -eq $(( ($(echo "$nodes" | awk '{ n = 0; for (c = 1; c <= $1; c *= 2) n++; print n }')) * 4 )) ] ||
    fail "job $name: $rows checked rows in $out/$name.csv"
  echo "slurm_jobs: job $name ($job) COMPLETED with $rows checked rows"
}
submit one_node 1 2
submit two_nodes 2 1

# Across the shaped link 1 bit must beat 32 bits at 4 MiB (columns: nodes, ..., bits, ..., bytes, time_us).
"$python" - "$out/two_nodes.csv" <<'PY'
import csv, sys
rows = {(int(r["nodes"]), int(r["bits"]), int(r["bytes"])): r for r in csv.DictReader(open(sys.argv[1]))}
one, full = rows[(2, 1, 4 << 20)], rows[(2, 32, 4 << 20)]
assert int(one["inter_node_bytes_per_rank"]) > 0, "2 nodes sent nothing across"
assert float(full["time_us"]) > 2 * float(one["time_us"]), f"32 bits {full['time_us']} us vs 1 bit {one['time_us']} us"
print(f"slurm_jobs: across 2 nodes at 4 MiB: 1 bit {one['time_us']} us, 32 bits {full['time_us']} us")
PY

for launch in "srun --mpi=pmix --nodes=2 --ntasks-per-node=1" \
  "srun --mpi=pmix --nodes=2 --ntasks-per-node=1 scripts/bind_local_gpu.sh" \
  "salloc --nodes=2 --ntasks-per-node=1 mpirun"; do
  # shellcheck disable=SC2086  # the launcher is a list of words
  verdict=$(timeout 300 $launch "$gradagg" --size 1M -n 2 -w 1 --bits 1 --check 2>&1 | tee -a "$out/launches.txt" |
    grep '^# check:' || true)
  [ "$verdict" = "# check: PASS" ] || { cat "$out/launches.txt" >&2; fail "$launch: '$verdict'"; }
  echo "slurm_jobs: $launch ... --check: PASS"
done

"$python" scripts/plot_scaling.py "$out/two_nodes.csv" "$out/two_nodes.png"
[ -s "$out/two_nodes.png" ] || fail "plot_scaling.py drew nothing"
echo "slurm_jobs: PASS"
