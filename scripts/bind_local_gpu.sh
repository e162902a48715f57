#!/bin/sh
# Runs a command with one GPU per rank, chosen by the rank's index on its node (Open MPI's
# OMPI_COMM_WORLD_LOCAL_RANK, or SLURM's SLURM_LOCALID). Where CUDA_VISIBLE_DEVICES already lists the GPUs this
# rank may use (SLURM's --gpus, a site's prologue), it picks from that list, round robin; else it names the device of
# that index. Use as a prefix: mpirun ... bind_local_gpu.sh gradagg ... (or the sweep's --wrapper). On a node without
# GPUs the command simply sees none.
local_rank=${OMPI_COMM_WORLD_LOCAL_RANK:-${SLURM_LOCALID:-}}
if [ -z "$local_rank" ]; then
  echo "bind_local_gpu: no local rank (run under Open MPI's mpirun or srun)" >&2
  exit 2
fi
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  CUDA_VISIBLE_DEVICES=$(echo "$CUDA_VISIBLE_DEVICES" | awk -F, -v r="$local_rank" '{ print $((r % NF) + 1) }')
else
  CUDA_VISIBLE_DEVICES=$local_rank
fi
export CUDA_VISIBLE_DEVICES
exec "$@"
