"""The Python package with PyTorch, under mpirun: in CTest on CPU ranks (Debian's python3-torch), and on the GPU machine
(prints SKIPPED and exits 0 without PyTorch):

  1. tensors: CPU float32 and CUDA float32 / bfloat16 sums at 32 bits on one node are exact (bf16 rounded once);
  2. the DDP hook: over 3 steps, each bucket's averaged result is bitwise what a gradagg Aggregator of its own gives
     on the same bucket input, one tensor per parameter (so every bucket keeps its own carried error and every
     parameter its own quantization buckets), with momentum 0 and 0.9 (then the hook's
     output is the aggregated momentum, beta * m + g averaged); with a float32 warm-up (full_precision_steps), a
     float32 Aggregator's for the first steps, then a fresh 1-bit one's;
  3. an overflow (an Inf in one rank's gradients, as AMP's loss scaling makes): every rank gets non-finite
     gradients back, so the GradScaler skips the step, the momentum keeps its value, and the next step is finite;
  4. a bucket whose buffer moved to other memory between calls is aggregated where it is now, and one DDP no longer
     hands over is not kept alive.
  5. gradagg.torch_adam, gradagg.torch_fsdp and gradagg.torch_local_steps, the older paths, hand out the same classes.

  mpirun -np N python3 test_torch.py     (GRADAGG_RANKS_PER_NODE chooses the emulated nodes; GPUs: rank i uses
                                          GPU i % count, so ranks may share one with GRADAGG_NVLINK_SHARE_GPUS=1)
Prints "python_torch_test: PASS" on rank 0 when every rank passed.
"""
import gc
import sys
import weakref

try:
    import torch
except ImportError:
    print("python_torch_test: SKIPPED (no PyTorch)")
    sys.exit(0)

import gradagg
import gradagg.torch
import gradagg.torch_adam
import gradagg.torch_fsdp
import gradagg.torch_local_steps
import torch_checks


def check_tensors(rank, size, device):
    with gradagg.Aggregator(bits=32, ranks_per_node=0) as agg:
        cpu = torch.full((1000,), float(rank + 1))
        agg.aggregate([cpu])
        assert torch.all(cpu == size * (size + 1) / 2), cpu[:4]
        if device.type == "cuda":
            f32 = torch.arange(5000, dtype=torch.float32, device=device) + rank
            bf16 = torch.full((333,), 0.5 * (rank + 1), dtype=torch.bfloat16, device=device)
            agg.aggregate([f32, bf16])
            torch.cuda.synchronize()
            expected = size * torch.arange(5000, dtype=torch.float32, device=device) + size * (size - 1) / 2
            assert torch.equal(f32, expected), (f32[:4], expected[:4])
            assert torch.equal(bf16, torch.full_like(bf16, 0.25 * size * (size + 1))), bf16[:4]


def check_hook(rank, size, device, momentum, full_precision_steps=0, steps=3):
    torch.manual_seed(0)  # the same initial model everywhere (DDP broadcasts rank 0's anyway)
    model = torch.nn.Sequential(torch.nn.Linear(64, 300), torch.nn.ReLU(), torch.nn.Linear(300, 10)).to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.05)  # several buckets
    state = gradagg.torch.GradaggState(bits=1, momentum=momentum, full_precision_steps=full_precision_steps)
    seen = []

    def capturing_hook(hook_state, bucket):
        before = bucket.buffer().clone()
        sizes = [view.numel() for view in gradagg.torch.tensors_of(bucket)]
        assert len(sizes) == len(list(bucket.parameters())), "the hook must hand gradagg one tensor per parameter"
        future = gradagg.torch.comm_hook(hook_state, bucket)
        parameters = list(bucket.parameters())
        return future.then(lambda f: seen.append((bucket.index(), parameters, before, sizes, f.value().clone())) or
                           f.value())

    ddp.register_comm_hook(state, capturing_hook)
    references, momenta, calls = {}, {}, {}
    generator = torch.Generator().manual_seed(1000 + rank)
    for step in range(steps):
        seen.clear()
        ddp.zero_grad()
        inputs = torch.randn(32, 64, generator=generator).to(device)
        ddp(inputs).square().mean().backward()
        assert seen, "the hook never ran"
        for index, parameters, before, sizes, after in seen:
            # A bucket is its parameters in order (DDP's rebuild may reorder them under the same index and size);
            # calls, and so the warm-up, count per index; momentum belongs to each parameter, whatever its bucket.
            bucket_key = (index, tuple(map(id, parameters)))
            calls[index] = calls.get(index, 0) + 1
            bits = 32 if calls[index] <= full_precision_steps else 1  # the warm-up, then a fresh 1-bit one
            key = bucket_key + (bits,)
            reference = torch_checks.replay(references, key, bits, before, parameters, sizes, momenta, momentum,
                                            size)
            if device.type == "cuda":
                torch.cuda.synchronize()
            assert torch.equal(after.view(torch.int32), reference.view(torch.int32)), (
                f"momentum {momentum} step {step} bucket {index} ({bits} bits): the hook's result differs from "
                "the Aggregator's")
    if full_precision_steps > 0:
        assert any(key[2] == 32 for key in references) and any(key[2] == 1 for key in references), (
            "the warm-up test must see both widths")
    for aggregator in list(references.values()) + list(state.aggregators.values()):
        aggregator.close()


def check_overflow(rank, size, device):
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 4).to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    state = gradagg.torch.GradaggState(bits=1, momentum=0.9)
    ddp.register_comm_hook(state, gradagg.torch.comm_hook)
    inputs = torch.ones(8, 16, device=device) * (rank + 1)
    ddp(inputs).sum().backward()  # a finite step: the momentum is set
    momenta = {p: state.momentum_of(p).clone() for p in model.parameters()}  # per parameter: buckets may be rebuilt
    assert all(bool(torch.isfinite(m).all()) for m in momenta.values())
    ddp.zero_grad()
    scale = float("inf") if rank == size - 1 else 1.0  # one rank overflows
    (ddp(inputs).sum() * scale).backward()
    for parameter in model.parameters():
        assert not bool(torch.isfinite(parameter.grad).all()), "an overflow on one rank must reach every rank"
    for parameter, before in momenta.items():
        assert torch.equal(before, state.momentum_of(parameter)), "the momentum changed on an overflowed step"
    ddp.zero_grad()
    ddp(inputs).sum().backward()
    for parameter in model.parameters():
        assert bool(torch.isfinite(parameter.grad).all()), "the step after an overflow must be finite"
    for aggregator in state.aggregators.values():
        aggregator.close()


class StandInBucket:
    """The GradBucket methods the hook uses."""

    def __init__(self, parameters, buffer, index=0, last=True):
        self._parameters, self._buffer, self._index, self._last = parameters, buffer, index, last

    def buffer(self):
        return self._buffer

    def parameters(self):
        return self._parameters

    def index(self):
        return self._index

    def is_last(self):
        return self._last


def check_moved_buffer(rank, size, device):
    """A bucket whose buffer is another tensor at its next call (the same parameters, index and size): the hook,
    which keeps a bucket's views between calls, aggregates the new buffer and returns it, not the old one's views.
    Needs two ranks or more (with one, the mean is the input)."""
    if size < 2:
        return
    parameters = [torch.nn.Parameter(torch.zeros(n, device=device)) for n in (300, 200)]
    state = gradagg.torch.GradaggState(bits=32, check_optimizers=False)  # exact: the mean of small integers
    kept = []
    for call in range(3):
        buffer = torch.full((500,), float(rank + 1 + 10 * call), device=device)
        kept.append(buffer)  # the old buffers stay alive: a new one never reuses their memory
        result = gradagg.torch.comm_hook(state, StandInBucket(parameters, buffer)).wait()
        expected = (size + 1) / 2 + 10 * call
        assert result.data_ptr() == buffer.data_ptr(), f"call {call}: the hook returned another tensor"
        assert torch.all(buffer == expected), (f"call {call}: the new buffer holds {buffer[:3].tolist()}, not the "
                                               f"mean {expected}")
    for aggregator in state.aggregators.values():
        aggregator.close()


def check_gone_bucket(rank, size, device):
    """A bucket that DDP no longer hands over (its rebuild may make fewer) is not kept alive by the hook's views."""
    first = [torch.nn.Parameter(torch.zeros(100, device=device))]
    second = [torch.nn.Parameter(torch.zeros(50, device=device))]
    state = gradagg.torch.GradaggState(bits=32, check_optimizers=False)
    gone = torch.ones(50, device=device)
    gradagg.torch.comm_hook(state, StandInBucket(first, torch.ones(100, device=device), 0, False)).wait()
    gradagg.torch.comm_hook(state, StandInBucket(second, gone, 1, True)).wait()
    watch = weakref.ref(gone)
    del gone
    gradagg.torch.comm_hook(state, StandInBucket(first, torch.ones(100, device=device), 0, True)).wait()
    gc.collect()
    assert watch() is None, "the hook still holds the buffer of a bucket that is gone"
    for aggregator in state.aggregators.values():
        aggregator.close()


def check_older_paths(rank, size):
    """gradagg.torch_adam, gradagg.torch_fsdp and gradagg.torch_local_steps, the modules gradagg.torch grew out of,
    still hand out its classes."""
    assert gradagg.torch_adam.AdamW is gradagg.torch.AdamW and gradagg.torch_adam.Adam is gradagg.torch.Adam
    assert gradagg.torch_fsdp.FSDPGradaggState is gradagg.torch.FSDPGradaggState
    assert gradagg.torch_local_steps.LocalSteps is gradagg.torch.LocalSteps
    assert gradagg.torch_local_steps.DEFAULT_BITS == 4 and gradagg.torch.DEFAULT_BITS == 2


def on_device(check):
    """The check on this rank's device (set as the current one), named in the verdict."""
    def run(rank, size):
        device = torch_checks.device_of(rank)
        if device.type == "cuda":
            torch.cuda.set_device(device)
        check(rank, size, device)
        return f"device {device.type}"
    return run


def check_shard_group_layout(rank, size):
    """FSDP2's shard group must be gradagg's node of this rank: the consecutive ranks that hold it, in order (issue 69,
    item 1: a strided mesh, or torch ranks numbered otherwise than MPI's, summed unrelated shards). Checked on the MPI
    ranks the group's members report, without FSDP2 (PyTorch 1 has none)."""
    from gradagg.torch.fsdp import shard_group_mismatch
    assert shard_group_mismatch([2, 3], rank=3, shard_size=2) is None
    assert shard_group_mismatch([0, 1, 2, 3], rank=0, shard_size=4) is None
    strided = shard_group_mismatch([0, 2], rank=2, shard_size=2)
    assert strided and "[0, 2]" in strided and "[2, 3]" in strided and "rank 2" in strided, strided
    assert shard_group_mismatch([1, 0], rank=0, shard_size=2), "a node's ranks out of order were let through"


def main():
    return torch_checks.run("python_torch_test", [
        ("tensors", on_device(check_tensors)),
        ("hook", on_device(lambda rank, size, device: check_hook(rank, size, device, 0.0))),
        ("hook with momentum", on_device(lambda rank, size, device: check_hook(rank, size, device, 0.9))),
        ("hook with a float32 warm-up",
         on_device(lambda rank, size, device: check_hook(rank, size, device, 0.9, 2, 5))),
        ("overflow", on_device(check_overflow)),
        ("a bucket's buffer moved", on_device(check_moved_buffer)),
        ("a bucket gone", on_device(check_gone_bucket)),
        ("the older module paths", check_older_paths),
        ("FSDP2's shard group is the node", check_shard_group_layout)], 29511)


if __name__ == "__main__":
    sys.exit(main())
