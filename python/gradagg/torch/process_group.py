"""torch.distributed started from MPI's own ranks and size, whatever launched them: DDP's own needs beside gradagg (the
parameter broadcast), FSDP2's and LocalSteps'."""
import os
import socket

import torch
import torch.distributed as dist

import gradagg


def init_process_group_from_mpi(backend=None, port=29500):
    """torch.distributed.init_process_group with MPI's own rank and size in MPI_COMM_WORLD (whatever launched the
    ranks: mpirun, srun, mpiexec); rank 0's host is MASTER_ADDR where set, else found through mpi4py. backend: 'nccl'
    where CUDA is available, else 'gloo'."""
    rank, size = gradagg.world()
    if "MASTER_ADDR" not in os.environ:
        try:
            from mpi4py import MPI  # noqa: F401 (only for the address exchange)
        except ImportError:
            raise gradagg.UsageError(f"gradagg.torch.init_process_group_from_mpi: rank {rank}: set MASTER_ADDR to rank "
                                     "0's host name or address (or install mpi4py, which finds it)") from None
        os.environ["MASTER_ADDR"] = MPI.COMM_WORLD.bcast(socket.gethostname() if rank == 0 else None, root=0)
    os.environ.setdefault("MASTER_PORT", str(port))
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    dist.init_process_group(backend, rank=rank, world_size=size)
