"""The frame of the PyTorch tests under mpirun: torch.distributed over gloo from Open MPI's environment, each named
check run on every rank, a traceback per failure, and one verdict for all ranks."""
import os
import sys
import traceback

import torch
import torch.distributed as dist

import gradagg


def device_of(rank):
    """Rank i's device: GPU i % count where torch sees any (ranks may share one), else the CPU."""
    if not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda", rank % torch.cuda.device_count())


def run(test, checks, default_port):
    """Runs checks (name, callable(rank, size) returning nothing or a note for the verdict) and returns the exit
    status; rank 0 prints "TEST: PASS on N ranks, ..." when every check passed on every rank."""
    gradagg.init()
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(default_port))
    dist.init_process_group("gloo", rank=rank, world_size=size)  # DDP's own broadcast; gradients go through gradagg
    failures, notes = 0, []
    for name, check in checks:
        try:
            note = check(rank, size)
            if note:
                notes.append(note)
        except Exception:
            failures += 1
            print(f"{test}: rank {rank}: {name} failed:\n{traceback.format_exc()}", file=sys.stderr)
    total = torch.tensor([float(failures)])
    dist.all_reduce(total)
    if rank == 0 and total.item() == 0:
        print(f"{test}: PASS on {size} ranks, {''.join(n + ', ' for n in notes[:1])}torch {torch.__version__}")
    dist.barrier()  # no rank tears its groups down while another's last operation may still be on the wire
    dist.destroy_process_group()
    return 0 if total.item() == 0 else 1


def replay(references, key, bits, before, parameters, sizes, momenta, momentum, size):
    """What gradagg.torch.comm_hook must return for one bucket, computed apart: its input `before` plus `momentum`
    times each parameter's carried momentum (per parameter, as the hook adds it), aggregated by the reference
    Aggregator of `key` (made at `bits` on first use) one tensor per parameter, and averaged over `size` ranks; the
    parameters' momenta in `momenta` become the result."""
    if key not in references:
        references[key] = gradagg.Aggregator(bits=bits)
    reference = before.clone()
    views = list(reference.split(sizes))
    if momentum > 0.0:
        carried = [momenta.get(p, torch.zeros_like(p)).reshape(-1) for p in parameters]
        torch._foreach_add_(views, carried, alpha=momentum)
    references[key].aggregate(views)
    reference.div_(size)
    if momentum > 0.0:
        for parameter, view in zip(parameters, views):
            momenta[parameter] = view.clone()
    return reference
