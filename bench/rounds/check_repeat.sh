#!/usr/bin/env bash
# gradagg --check again and again on GPU layouts, to catch what fails only now and then (a race shows as a rare
# FAIL). Each run sweeps 1 KiB .. 4 MiB, the bit widths taking turns; a failing run's per-rank lines (which elements
# differ, from which step) are kept. Every other round cuts the gradient into the tensors 2,5010,6 (--tensors). With fewer GPUs than ranks the ranks share them: correctness only.
#   bench/rounds/check_repeat.sh BIN_DIR OUT_DIR SECONDS [LAYOUT...]
# LAYOUT is RANKS:RANKS_PER_NODE:GROUP_SIZE[:ENV=VALUE,...] (default 4:2:1 and 4:2:2); layouts take turns until
# SECONDS have passed. BIN_DIR holds gradagg and its libraries (bench/rounds/stage.sh); GRADAGG_PROGRAM names
# another build of it there (to compare two builds).
set -uo pipefail
. "$(dirname "$0")/round_setup.sh"
round_setup "$1" "$2"
seconds=$3 program=${GRADAGG_PROGRAM:-gradagg}
shift 3
layouts=("$@")
[ ${#layouts[@]} -eq 0 ] && layouts=("4:2:1" "4:2:2")
bits=(1 4 32 2 8)
declare -A runs fails
start=$SECONDS round=0
while [ $((SECONDS - start)) -lt "$seconds" ]; do
  for layout in "${layouts[@]}"; do
    IFS=: read -r ranks per size extra <<<"$layout"
    share=()
    [ "$ranks" -gt "$gpus" ] && share=(-x GRADAGG_NVLINK_SHARE_GPUS=1)
    env_args=()
    for pair in ${extra//,/ }; do env_args+=(-x "$pair"); done
    b=${bits[$((round % ${#bits[@]}))]}
    tensors=()
    [ $((round % 2)) -eq 1 ] && tensors=(--tensors 2,5010,6)
    log="$out/run_${round}_$(echo "$layout" | tr ':=,' '___')_bits$b${tensors[*]:+_tensors}.txt"
    timeout 120 mpirun "${mpirun_args[@]}" --oversubscribe -np "$ranks" \
      -x GRADAGG_CUDA_AWARE_MPI=off -x GRADAGG_NVLINK_GROUP_SIZE="$size" "${share[@]}" \
      "${env_args[@]}" "$bin/$program" --device cuda --ranks-per-node "$per" --bits "$b" -b 1K -e 4M -f 64 -n 2 -w 1 \
      "${tensors[@]}" --check --no-baseline --no-nccl >"$log" 2>&1
    rc=$?
    runs[$layout]=$((${runs[$layout]:-0} + 1))
    if [ $rc -ne 0 ] || ! grep -q '^# check: PASS' "$log"; then
      fails[$layout]=$((${fails[$layout]:-0} + 1))
      echo "== FAIL: layout $layout bits $b ${tensors[*]} exit $rc ($log)"
      grep -E 'gradagg: check|FAIL|error' "$log" | head -n 8
    else
      rm -f "$log"
    fi
  done
  round=$((round + 1))
done
{
  echo "== $gpus GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)"
  for layout in "${layouts[@]}"; do echo "== layout $layout: ${fails[$layout]:-0} of ${runs[$layout]:-0} runs failed"; done
} | tee "$out/summary.txt"
