#!/bin/sh
# Runs a command with one GPU per rank: CUDA_VISIBLE_DEVICES = the rank's index on its node (Open MPI's
# OMPI_COMM_WORLD_LOCAL_RANK, or SLURM's SLURM_LOCALID). Use as a prefix: mpirun ... bind_local_gpu.sh gradagg ...
local_rank=${OMPI_COMM_WORLD_LOCAL_RANK:-${SLURM_LOCALID:-}}
if [ -z "$local_rank" ]; then
  echo "bind_local_gpu: no local rank (run under Open MPI's mpirun or srun)" >&2
  exit 2
fi
export CUDA_VISIBLE_DEVICES="$local_rank"
exec "$@"
