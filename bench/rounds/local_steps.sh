#!/usr/bin/env bash
# On the GPU machine: local steps across nodes (issue 68) on one GPU. Builds the corpus (make_corpus.py, its size and
# SHA-256 into OUT/summary.txt), runs test/python/test_local_steps.py on CUDA tensors (2 nodes of 1, and 2 nodes of 2,
# the ranks sharing the GPU), then the GPT runs of RUNS_LOCAL on NODES ranks as nodes of one rank (the local-step arms)
# and RUNS_ONE on one rank (DDP's arithmetic at NODES x 32 sequences: --batch NODES * 32 reads the same windows a step
# as NODES ranks of 32 do under --corpus), every run at once, sharing the GPU. Each RUNS_* is gpt.sh's RUNS.
#   bench/rounds/local_steps.sh CARRY_DIR OUT
# Environment: RUNS_LOCAL, RUNS_ONE, NODES (default 4), EXTRA (options for every run), LIMIT (seconds a run), TESTS
# (0 skips the tests: a second round on a machine still warm), GPUS and GPUS_ONE (gpt.sh's GPUS for the runs of
# RUNS_LOCAL and of RUNS_ONE; GPUS_ONE defaults to GPUS). A corpus left by an earlier round on the same machine
# is kept; its size and SHA-256 are printed again.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
carry=$(cd "$1" && pwd) out=$2
mkdir -p "$out"
nodes=${NODES:-4}
corpus=/tmp/local_steps_corpus.bin
if [ -s "$corpus" ]; then
  echo "make_corpus: $corpus kept: $(stat -c %s "$corpus") bytes, sha256 $(sha256sum "$corpus" | cut -d' ' -f1)"
else
  python3 "$root/examples/pytorch/make_corpus.py" "$corpus" --min-bytes 200M
fi | tee -a "$out/summary.txt"
. "$root/scripts/mpi_env.sh"
export PYTHONPATH="$root/python" GRADAGG_LIBRARY="$carry/libgradagg_c.so" LD_LIBRARY_PATH="$carry:${LD_LIBRARY_PATH:-}"
export GRADAGG_NVLINK_SHARE_GPUS=1 MASTER_ADDR=127.0.0.1
[ "${TESTS:-1}" = 0 ] || for layout in "2 1" "4 2"; do
  read -r ranks per_node <<<"$layout"
  GRADAGG_RANKS_PER_NODE=$per_node MASTER_PORT=$((29790 + ranks)) timeout 300 mpirun --bind-to none -np "$ranks" \
    -x PYTHONPATH -x GRADAGG_LIBRARY -x LD_LIBRARY_PATH -x GRADAGG_NVLINK_SHARE_GPUS -x GRADAGG_RANKS_PER_NODE \
    -x MASTER_ADDR -x MASTER_PORT python3 "$root/test/python/test_local_steps.py" 2>&1 |
    tail -n 30 | tee -a "$out/summary.txt"
done
extra="--corpus $corpus ${EXTRA:-}"
[ -z "${RUNS_LOCAL:-}" ] || RUNS="$RUNS_LOCAL" NP=$nodes JOBS=8 PORT=29900 EXTRA="$extra" \
  "$root/bench/rounds/gpt.sh" "$carry" "$out/local" &
[ -z "${RUNS_ONE:-}" ] || GPUS="${GPUS_ONE:-${GPUS:-}}" RUNS="$RUNS_ONE" NP=1 JOBS=8 PORT=29950 \
  EXTRA="$extra --batch $((32 * nodes))" \
  "$root/bench/rounds/gpt.sh" "$carry" "$out/one" &
wait
cat "$out"/local/summary.txt "$out"/one/summary.txt 2>/dev/null | tee -a "$out/summary.txt"
