"""The DDP hook under the DDP features people train with, under mpirun on CPU ranks (Debian's python3-torch in CTest;
prints SKIPPED and exits 0 without PyTorch). Every check trains a few steps and requires, for every call of the
hook, that its result is bitwise what an Aggregator of the hook's own keying (bucket index and parameters; the
momentum per parameter) gives on the same bucket input, and that every rank ends with bitwise the same parameters:

  no_sync         gradient accumulation: the hook runs once per accumulated step, on the accumulated gradients;
  static_graph    DDP(static_graph=True);
  bucket_view     DDP(gradient_as_bucket_view=True);
  unused          DDP(find_unused_parameters=True) with a layer that only even steps use;
  join            uneven inputs under model.join() with momentum: the rank that runs out joins, its zero buckets
                  (plus its momentum) go through the hook in step with the other rank's (the same calls on every
                  rank), and no rank hangs;
  rebuild         DDP's bucket rebuild after the first iteration (a model whose forward order is not its parameter
                  order): the rebuilt buckets are re-keyed, the old ones' Aggregators closed, nothing owed is lost
                  or applied twice (the momentum carries per parameter);
  two_models      two DDP models in one process, each with its own GradaggState, stepped in turn;
  state_freed     a GradaggState whose model is gone is freed (its momentum, a GradScaler it holds) and its waiter
                  thread ends, while its Aggregators stay open until they are closed in order (at exit, or here);
  overflow_in_one_bucket  an Inf in one parameter of one rank: non-finite everywhere, no bucket's momentum moves;
  bf16_autocast   forward and backward under torch.autocast("cpu", torch.bfloat16), float32 parameters.
A model whose parameters are bfloat16 needs the GPU machine (gloo in Debian's PyTorch cannot broadcast bfloat16, so
DDP cannot even start on CPU ranks); AMP's GradScaler needs CUDA too: test_ddp_gpu.py.

  mpirun -np 2 python3 test_ddp_features.py     (GRADAGG_RANKS_PER_NODE=1: 2 ranks as 2 nodes, 1 bit across them)
GRADAGG_TEST_DEVICE=cuda runs every check with the models and batches on GPU rank % count (the GPU machine).
"""
import contextlib
import gc
import os
import sys
import weakref

try:
    import torch
except ImportError:
    print("python_ddp_features_test: SKIPPED (no PyTorch)")
    sys.exit(0)

import torch.distributed as dist

import gradagg
import gradagg.torch
import torch_checks

DEVICE = torch.device(os.environ.get("GRADAGG_TEST_DEVICE", "cpu"))
if DEVICE.type == "cuda":
    DEVICE = torch.device("cuda", int(os.environ.get("OMPI_COMM_WORLD_RANK", "0")) % torch.cuda.device_count())


def DDP(module, **options):  # noqa: N802 (torch's DDP, on the test's device)
    if DEVICE.type == "cuda":
        torch.cuda.set_device(DEVICE)
        return torch.nn.parallel.DistributedDataParallel(module.to(DEVICE), device_ids=[DEVICE], **options)
    return torch.nn.parallel.DistributedDataParallel(module, **options)


class CheckedHook:
    """gradagg.torch.comm_hook, each call replayed through reference Aggregators keyed as the hook keys them, and
    compared bit for bit."""

    def __init__(self, momentum):
        self.state = gradagg.torch.GradaggState(bits=1, momentum=momentum)
        self.momentum = momentum
        self.references, self.momenta = {}, {}
        self.calls = 0

    def register(self, ddp):
        ddp.register_comm_hook(self.state, self.hook)

    def hook(self, state, bucket):
        self.calls += 1
        before = bucket.buffer().clone()
        parameters = list(bucket.parameters())
        sizes = [view.numel() for view in gradagg.torch.tensors_of(bucket)]
        key = (bucket.index(), tuple(map(id, parameters)))
        if key not in self.references:
            # Made here, on DDP's thread, in the same order on every rank: making an Aggregator is collective, and
            # the comparisons run on the thread that completes the hook's futures, beside the hook's next calls.
            self.references[key] = gradagg.Aggregator(bits=1)
        future = gradagg.torch.comm_hook(state, bucket)
        return future.then(lambda f: self.compare(key, parameters, sizes, before, f.value()))

    def compare(self, key, parameters, sizes, before, after):
        assert key in self.references, f"bucket {key[0]}: its reference Aggregator was not made in the hook"
        reference = torch_checks.replay(self.references, key, 1, before, parameters, sizes, self.momenta,
                                        self.momentum, self.state.world_size)
        assert torch.equal(after.view(torch.int32), reference.view(torch.int32)), (
            f"bucket {key[0]}: the hook's result differs from the Aggregator's on the same input")
        return after

    def close(self):
        for aggregator in list(self.references.values()) + list(self.state.aggregators.values()):
            aggregator.close()


def same_on_every_rank(model, what):
    flat = torch.cat([p.detach().reshape(-1).float().cpu() for p in model.parameters()])
    gathered = [torch.zeros_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flat)
    for other in gathered[1:]:
        assert torch.equal(gathered[0].view(torch.int32), other.view(torch.int32)), f"{what}: ranks differ"


def mlp(seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(32, 200), torch.nn.ReLU(), torch.nn.Linear(200, 10)).to(dtype)


def wide_mlp():
    """Two buckets even after DDP's rebuild (whose first bucket takes up to 1 MB): {4.bias, 4.weight, 2.bias,
    2.weight}, then {0.bias, 0.weight}, the last."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 10))


def batches(rank, count, dtype=torch.float32):
    generator = torch.Generator().manual_seed(1000 + rank)
    return [torch.randn(16, 32, generator=generator).to(dtype=dtype, device=DEVICE) for _ in range(count)]


def train(ddp, hook, inputs, accumulate=1, autocast=False):
    """SGD steps over `inputs`, `accumulate` micro-batches per step (the first ones under no_sync)."""
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    for start in range(0, len(inputs), accumulate):
        group = inputs[start:start + accumulate]
        for index, batch in enumerate(group):
            context = ddp.no_sync() if index < len(group) - 1 else contextlib.nullcontext()
            with context:
                with torch.autocast(DEVICE.type, dtype=torch.bfloat16, enabled=autocast):
                    loss = ddp(batch).float().square().mean()
                loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return optimizer


def check_no_sync(rank, size):
    ddp = DDP(mlp(), bucket_cap_mb=0.02)
    hook = CheckedHook(momentum=0.9)
    hook.register(ddp)
    train(ddp, hook, batches(rank, 2), accumulate=1)  # DDP settles its buckets first
    calls = hook.calls
    train(ddp, hook, batches(rank + 7, 6), accumulate=3)
    buckets = len(hook.state.keys)
    assert hook.calls - calls == 2 * buckets, (
        f"6 micro-batches in steps of 3 make 2 exchanges of {buckets} buckets, not {hook.calls - calls} hook calls")
    same_on_every_rank(ddp, "no_sync")
    hook.close()


def check_plain(options, momentum=0.9, autocast=False):
    def check(rank, size):
        ddp = DDP(mlp(), bucket_cap_mb=0.02, **options)
        hook = CheckedHook(momentum)
        hook.register(ddp)
        train(ddp, hook, batches(rank, 4), autocast=autocast)
        assert hook.calls > 0, "the hook never ran"
        same_on_every_rank(ddp, str(options))
        hook.close()
    return check


class Branchy(torch.nn.Module):
    """A layer that only even steps use."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.trunk, self.even, self.head = torch.nn.Linear(32, 64), torch.nn.Linear(64, 64), torch.nn.Linear(64, 10)
        self.step = 0

    def forward(self, x):
        x = torch.relu(self.trunk(x))
        if self.step % 2 == 0:
            x = torch.relu(self.even(x))
        self.step += 1
        return self.head(x)


def check_unused(rank, size):
    model = Branchy()
    ddp = DDP(model, find_unused_parameters=True, bucket_cap_mb=0.01)
    hook = CheckedHook(momentum=0.9)
    hook.register(ddp)
    train(ddp, hook, batches(rank, 5))
    same_on_every_rank(ddp, "find_unused_parameters")
    hook.close()


def check_join(rank, size):
    ddp = DDP(mlp(), bucket_cap_mb=0.02)
    # A joined rank hands zeros plus its momentum (the same as every rank's), so the new momentum is beta * m plus
    # the mean gradient with zeros for the joined: DDP's own averaging rule.
    hook = CheckedHook(momentum=0.9)
    hook.register(ddp)
    steps = 4 if rank == 0 else 2  # uneven inputs
    with ddp.join():
        train(ddp, hook, batches(rank, steps))
    calls = [None] * size
    dist.all_gather_object(calls, hook.calls)
    assert len(set(calls)) == 1, f"every rank must make the same hook calls under join, not {calls}"
    same_on_every_rank(ddp, "join")
    hook.close()


class Reversed(torch.nn.Module):
    """Parameters registered in one order, used in another: DDP rebuilds its buckets after the first iteration."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.last, self.middle, self.first = torch.nn.Linear(64, 10), torch.nn.Linear(64, 64), torch.nn.Linear(32, 64)

    def forward(self, x):
        return self.last(torch.relu(self.middle(torch.relu(self.first(x)))))


def check_rebuild(rank, size):
    ddp = DDP(Reversed(), bucket_cap_mb=0.01)
    hook = CheckedHook(momentum=0.9)
    hook.register(ddp)
    train(ddp, hook, batches(rank, 4))
    live = {key for key in hook.state.aggregators}
    current = set(hook.state.keys.values())
    assert live == current, f"Aggregators of buckets DDP no longer has are still open: {live - current}"
    same_on_every_rank(ddp, "bucket rebuild")
    hook.close()


def check_overflow_in_one_bucket(rank, size):
    """An Inf in one parameter of a bucket that is not the step's last, on one rank: that parameter comes back
    non-finite on every rank (its quantization buckets are its own), the others finite, and no bucket's momentum
    moves (a loss scaler skips the whole step); the next step is clean."""
    ddp = DDP(wide_mlp(), bucket_cap_mb=0.02)
    state = gradagg.torch.GradaggState(bits=1, momentum=0.9)
    ddp.register_comm_hook(state, gradagg.torch.comm_hook)
    for step, batch in enumerate(batches(rank, 4)):
        momenta = {key: m.clone() for key, m in state.momenta.items()}
        handle = None
        if step == 2 and rank == 0:
            handle = ddp.module[4].bias.register_hook(lambda g: torch.full_like(g, float("inf")))
        ddp(batch).square().mean().backward()
        if handle is not None:
            handle.remove()
        finite = [bool(torch.isfinite(p.grad).all()) for p in ddp.module.parameters()]
        if step == 2:
            assert finite == [True] * 5 + [False], f"which gradients came back finite: {finite}"
            assert len(momenta) == 2 and all(torch.equal(m, state.momenta[k]) for k, m in momenta.items()), (
                f"a step with an Inf in one bucket moved a momentum ({len(momenta)} buckets: {[k[:2] for k in momenta]})")
        else:
            assert all(finite), f"step {step} is not finite: {finite}"
        ddp.zero_grad()
    same_on_every_rank(ddp, "overflow in one bucket")
    for aggregator in state.aggregators.values():
        aggregator.close()


def check_two_models(rank, size):
    first, second = DDP(mlp(1), bucket_cap_mb=0.02), DDP(mlp(2), bucket_cap_mb=0.05)
    hooks = [CheckedHook(0.9), CheckedHook(0.0)]
    hooks[0].register(first)
    hooks[1].register(second)
    for batch in batches(rank, 3):
        for ddp in (first, second):
            ddp(batch).square().mean().backward()
    same_on_every_rank(first, "first of two models")
    same_on_every_rank(second, "second of two models")
    for hook in hooks:
        hook.close()


def check_shared_state(rank, size):
    """One GradaggState registered on two models: refused at the second model's first bucket, on every rank (before,
    the two models' buckets of one index replaced each other's Aggregators and momentum at every call)."""
    first, second = DDP(mlp(1), bucket_cap_mb=0.02), DDP(mlp(2), bucket_cap_mb=0.02)
    state = gradagg.torch.GradaggState(bits=1, momentum=0.9)
    for ddp in (first, second):
        ddp.register_comm_hook(state, gradagg.torch.comm_hook)
    batch = batches(rank, 1)[0]
    first(batch).square().mean().backward()
    try:
        second(batch).square().mean().backward()
    except Exception as error:  # DDP may wrap what the hook raised
        assert "GradaggState of its own" in str(error), f"another error than the refusal: {error}"
    else:
        raise AssertionError("a GradaggState shared by two models was not refused")
    for aggregator in sorted(state.aggregators.values(), key=lambda a: a._serial):
        aggregator.close()


def check_state_freed(rank, size):
    ddp = DDP(mlp(3), bucket_cap_mb=0.02)
    state = gradagg.torch.GradaggState(bits=1, momentum=0.9)
    ddp.register_comm_hook(state, gradagg.torch.comm_hook)
    train(ddp, None, batches(rank, 2))
    assert state.momenta and state.aggregators, "the hook did not run"
    owner, waiter = weakref.ref(state), state._waiter
    aggregators = [weakref.ref(a) for a in state.aggregators.values()]
    del state, ddp
    gc.collect()
    assert owner() is None, "a GradaggState whose model is gone is still alive, with its momentum buffers"
    waiter.join(10)
    assert not waiter.is_alive(), "the freed state's waiter thread did not end"
    kept = [reference() for reference in aggregators]
    assert all(a is not None and a._handle for a in kept), "a freed state's Aggregator was closed by the collector"
    for aggregator in sorted(kept, key=lambda a: a._serial):  # the same order on every rank, as at exit
        aggregator.close()


def main():
    return torch_checks.run("python_ddp_features_test", [
        ("no_sync", check_no_sync),
        ("static_graph", check_plain({"static_graph": True})),
        ("bucket_view", check_plain({"gradient_as_bucket_view": True})),
        ("unused", check_unused),
        ("join", check_join),
        ("rebuild", check_rebuild),
        ("two_models", check_two_models),
        ("shared_state", check_shared_state),
        ("state_freed", check_state_freed),
        ("overflow_in_one_bucket", check_overflow_in_one_bucket),
        ("bf16_autocast", check_plain({}, autocast=True))], 29531)


if __name__ == "__main__":
    sys.exit(main())
