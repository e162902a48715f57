"""PyTorch's DistributedDataParallel with gradagg doing the gradient exchange: a communication hook.

    import gradagg.torch
    state = gradagg.torch.GradaggState(bits=1, momentum=0.9)
    model.register_comm_hook(state, gradagg.torch.comm_hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)   # momentum 0: the hook carries it (see below)

Launch with `mpirun -np N python3 train.py` and initialise torch.distributed from Open MPI's environment
(init_process_group_from_mpi) for DDP's own needs (the parameter broadcast); gradients go through gradagg.

Each DDP bucket gets its own gradagg Aggregator, so it keeps its own carried quantization error from step to step
(buckets differ in size, and DDP rebuilds them after the first iteration: a rebuilt bucket starts fresh), and each
parameter in a bucket is its own tensor to gradagg, with quantization buckets of its own. The hook
returns a torch.futures.Future that completes once the bucket is aggregated, averaged over the ranks as DDP expects.

momentum > 0 applies heavy-ball momentum inside the aggregation (docs/DESIGN.md, "Momentum and Adam"): each rank hands
beta * m + g to gradagg, and the average that comes back is the new momentum m, the same on every rank, which the hook
returns in place of the gradient. Use the optimizer without momentum then. At 1 bit this is what trains as well as
float32; momentum applied after a 1-bit aggregation diverges.

full_precision_steps > 0 sends each bucket's first that many calls in float32 (a warm-up, as 1-bit Adam has), then
switches to the options' bit width.

A bucket whose input holds a NaN or Inf (an AMP loss-scale overflow) comes back non-finite on every rank, so the
GradScaler skips the step; the momentum is left as it was.
"""
import contextlib
import os
import queue
import threading

import torch
import torch.distributed as dist

import gradagg

__all__ = ["GradaggState", "comm_hook", "init_process_group_from_mpi", "tensors_of"]


def init_process_group_from_mpi(backend=None, port=29500):
    """torch.distributed.init_process_group from Open MPI's environment (OMPI_COMM_WORLD_RANK and _SIZE); rank 0's
    host is found through MPI. backend: 'nccl' where CUDA is available, else 'gloo'."""
    gradagg.init()
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    if "MASTER_ADDR" not in os.environ:
        from mpi4py import MPI  # noqa: F401 (only for the address exchange)
        import socket
        os.environ["MASTER_ADDR"] = MPI.COMM_WORLD.bcast(socket.gethostname() if rank == 0 else None, root=0)
    os.environ.setdefault("MASTER_PORT", str(port))
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    dist.init_process_group(backend, rank=rank, world_size=size)


class GradaggState:
    """The hook's state: gradagg options (keyword arguments, as gradagg.Aggregator takes them), the momentum, and one
    Aggregator and momentum buffer per DDP bucket."""

    def __init__(self, momentum=0.0, comm=None, full_precision_steps=0, **options):
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"gradagg.torch: momentum must be in [0, 1), not {momentum}")
        if full_precision_steps < 0:
            raise ValueError(f"gradagg.torch: full_precision_steps must be >= 0, not {full_precision_steps}")
        self.momentum = momentum
        self.comm = comm
        self.full_precision_steps = full_precision_steps
        self.options = options
        self.aggregators = {}
        self.momenta = {}
        self.calls = {}
        self.world_size = None
        self._queue = queue.Queue()
        self._waiter = threading.Thread(target=self._complete, daemon=True, name="gradagg-hook")
        self._waiter.start()

    def aggregator(self, key):
        """The bucket's Aggregator for this call: float32 for its first full_precision_steps calls, then the
        options' (whose carried error starts fresh there)."""
        calls = self.calls[key] = self.calls.get(key, 0) + 1
        if calls <= self.full_precision_steps:
            key, options = key + ("float32",), dict(self.options, bits=32)
        else:
            options = self.options
            # The warm-up is over: its Aggregator is closed now, in step on every rank, not whenever it is collected.
            if calls == self.full_precision_steps + 1:
                warmup = self.aggregators.pop(key + ("float32",), None)
                if warmup is not None:
                    warmup.close()
        if key not in self.aggregators:  # collective: DDP hands buckets over in the same order on every rank
            self.aggregators[key] = gradagg.Aggregator(comm=self.comm, **options)
            self.world_size = self.aggregators[key].size
        return self.aggregators[key]

    def _complete(self):
        while True:
            pending, finish, future = self._queue.get()
            try:
                pending.wait()
                future.set_result(finish())
            except Exception as error:  # the training step sees it when it waits on the future
                future.set_exception(error)


def tensors_of(bucket):
    """The bucket's flat buffer as views, one per parameter, so that each gets quantization buckets of its own (a
    small bias never shares statistics with a large weight); the whole buffer where the sizes do not add up."""
    buffer = bucket.buffer()
    sizes = [parameter.numel() for parameter in bucket.parameters()]
    return list(buffer.split(sizes)) if sizes and sum(sizes) == buffer.numel() else [buffer]


def comm_hook(state, bucket):
    """DDP communication hook: the bucket's gradients averaged over the ranks through gradagg."""
    buffer = bucket.buffer()
    key = (bucket.index(), buffer.numel(), buffer.dtype, buffer.device)
    aggregator = state.aggregator(key)
    momentum = state.momenta.get(key) if state.momentum > 0.0 else None
    if state.momentum > 0.0 and momentum is None:
        momentum = state.momenta[key] = torch.zeros_like(buffer)
    if momentum is not None:
        buffer.add_(momentum, alpha=state.momentum)  # beta * m + g: the sum over ranks is size * (beta m + mean g)
    stream = torch.cuda.current_stream(buffer.device) if buffer.is_cuda else None
    pending = aggregator.aggregate_async(tensors_of(bucket), stream=stream.cuda_stream if stream is not None else None)
    size = state.world_size

    def finish():
        with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
            buffer.div_(size)
            if momentum is not None and bool(torch.isfinite(buffer).all()):
                momentum.copy_(buffer)
            if stream is not None:
                stream.synchronize()
        return buffer

    future = torch.futures.Future()
    state._queue.put((pending, finish, future))
    return future

