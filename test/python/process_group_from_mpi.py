"""gradagg.torch.init_process_group_from_mpi under a launcher that is not Open MPI's mpirun: run under mpirun with
every OMPI_* variable removed from the environment first (as srun, MPICH's or Intel's mpiexec leave them unset), it
must still give each rank its MPI rank and size (from MPI itself), and name MASTER_ADDR where it cannot find rank 0's
host without mpi4py. Prints "process_group_from_mpi: PASS" on rank 0; SKIPPED without PyTorch.
    mpirun -np 2 python3 process_group_from_mpi.py"""
import os
import sys

try:
    import torch
except ImportError:
    print("process_group_from_mpi: SKIPPED (no PyTorch)")
    sys.exit(0)

import torch.distributed as dist

import gradagg
import gradagg.torch

rank, size = gradagg.world()  # from MPI: what the launcher's variables must agree with
assert (rank, size) == (int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"]))
for name in [name for name in os.environ if name.startswith("OMPI_COMM_WORLD")]:
    del os.environ[name]
address = os.environ.pop("MASTER_ADDR")
try:
    import mpi4py  # noqa: F401
except ImportError:  # without mpi4py and MASTER_ADDR the error must say what to set
    try:
        gradagg.torch.init_process_group_from_mpi(backend="gloo")
        raise AssertionError("no MASTER_ADDR and no mpi4py, yet no error")
    except gradagg.UsageError as error:
        assert "MASTER_ADDR" in str(error), error
os.environ["MASTER_ADDR"] = address
gradagg.torch.init_process_group_from_mpi(backend="gloo")
assert (dist.get_rank(), dist.get_world_size()) == (rank, size), (dist.get_rank(), dist.get_world_size(), rank, size)
total = torch.tensor([float(rank + 1)])
dist.all_reduce(total)
assert total.item() == size * (size + 1) / 2, total
dist.barrier()
dist.destroy_process_group()
if rank == 0:
    print(f"process_group_from_mpi: PASS on {size} ranks")
