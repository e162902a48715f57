"""The DDP hook's features that need CUDA, on the GPU machine under mpirun (ranks may share one GPU with
GRADAGG_NVLINK_SHARE_GPUS=1; DDP's own broadcast over gloo). Prints SKIPPED and exits 0 without CUDA.

  bf16_parameters  a model whose parameters are bfloat16: the buckets are bfloat16 device tensors; every hook call is
                   bitwise an Aggregator's of the hook's keying on the same input, and the ranks end equal;
  grad_scaler      AMP with float16 autocast and a GradScaler (GradaggState(grad_scaler=...); refused without it)
                   whose first scale overflows, and later an Inf in one bucket of one rank (not the step's last
                   bucket): the scaler skips those steps (parameters unchanged), every bucket's momentum keeps its
                   value through them (in gradient units: it follows the loss scale), no carried error turns
                   non-finite, and the steps after train (loss down, ranks equal);
  side_stream      forward and backward on a side stream: every bucket's finish on the hook's waiter thread (the
                   division, the momentum's commit, the future's event) runs with the bucket's stream current, and
                   every call is bitwise the reference Aggregator's.

  mpirun -np 2 python3 test_ddp_gpu.py     (GRADAGG_RANKS_PER_NODE=1: 2 ranks as 2 nodes, 1 bit across them)
"""
import sys

try:
    import torch
except ImportError:
    print("python_ddp_gpu_test: SKIPPED (no PyTorch)")
    sys.exit(0)
if not torch.cuda.is_available():
    print("python_ddp_gpu_test: SKIPPED (no CUDA)")
    sys.exit(0)

import os

os.environ["GRADAGG_TEST_DEVICE"] = "cuda"  # noqa: E402 (before test_ddp_features places its models)

import gradagg.torch
import torch_checks
from test_ddp_features import DDP, CheckedHook, batches, mlp, same_on_every_rank, wide_mlp


def check_bf16_parameters(rank, size):
    ddp = DDP(mlp(dtype=torch.bfloat16), bucket_cap_mb=0.02)
    hook = CheckedHook(momentum=0.9)
    hook.register(ddp)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    for batch in batches(rank, 3, torch.bfloat16):
        ddp(batch).float().square().mean().backward()
        optimizer.step()
        optimizer.zero_grad()
    torch.cuda.synchronize()
    assert all(view.dtype == torch.bfloat16 for view in hook.state.momenta.values()), "buckets were not bfloat16"
    same_on_every_rank(ddp, "bf16 parameters")
    hook.close()
    return f"bf16 buckets: {hook.calls} hook calls checked"


def check_grad_scaler(rank, size):
    # The hook's momentum beside a GradScaler it was not given is refused at the first step, on every rank.
    refused = DDP(mlp(), bucket_cap_mb=0.02)
    scaler = torch.amp.GradScaler("cuda", init_scale=2.0 ** 24)  # the first steps' float16 gradients overflow
    refused.register_comm_hook(gradagg.torch.GradaggState(bits=1, momentum=0.9), gradagg.torch.comm_hook)
    try:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = refused(batches(rank, 1)[0]).float().square().mean()
        scaler.scale(loss).backward()
        raise AssertionError("the hook's momentum ran beside a GradScaler it was not given")
    except (ValueError, RuntimeError) as error:
        assert "grad_scaler" in str(error), error
    del refused

    ddp = DDP(wide_mlp(), bucket_cap_mb=0.02)  # two buckets, 4.bias's not the last
    state = gradagg.torch.GradaggState(bits=1, momentum=0.9, grad_scaler=scaler)
    ddp.register_comm_hook(state, gradagg.torch.comm_hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    skipped, losses, poisoned = 0, [], None  # poisoned: 3 steps after the first that did not overflow
    for step, batch in enumerate(batches(rank, 24)):
        before = [p.detach().clone() for p in ddp.parameters()]
        momenta = {key: m / state.momentum_scales[key] for key, m in state.momenta.items()}  # in gradient units
        handle = None
        if step == poisoned and rank == 0:  # an Inf in one bucket that is not the step's last, on one rank
            handle = ddp.module[4].bias.register_hook(lambda g: torch.full_like(g, float("inf")))
        with torch.autocast("cuda", dtype=torch.float16):
            loss = ddp(batch).float().square().mean()
        scale = scaler.get_scale()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        if handle is not None:
            handle.remove()
        torch.cuda.synchronize()
        if scaler.get_scale() < scale:  # this step overflowed and was skipped
            skipped += 1
            assert all(torch.equal(b, p) for b, p in zip(before, ddp.parameters())), "a skipped step moved a weight"
            for key, momentum in momenta.items():  # the buckets DDP still has (it rebuilds them after step 0)
                assert key not in state.momenta or torch.equal(
                    momentum, state.momenta[key] / state.momentum_scales[key]), (
                    f"step {step} overflowed and bucket {key[0]}'s momentum changed")
        else:
            assert step != poisoned, "the poisoned step was not skipped"
            losses.append(float(loss))
            poisoned = step + 3 if poisoned is None else poisoned
        for aggregator in state.aggregators.values():
            residuals = aggregator.export_residuals()
            assert all(bool(torch.isfinite(torch.from_numpy(residuals[n])).all()) for n in ("stripe", "own")), (
                "an overflow left a non-finite carried error")
    assert poisoned is not None and poisoned < step and len(state.momenta) > 1, (
        "no overflow after momentum built up: the check cannot fail")
    assert len(losses) >= 3 and losses[-1] < losses[0], f"the steps after the overflows did not train: {losses}"
    same_on_every_rank(ddp, "GradScaler")
    for aggregator in state.aggregators.values():
        aggregator.close()
    return f"GradScaler: {skipped} overflowed steps skipped"


def check_side_stream(rank, size):
    finished_on_stream = []  # per finish on the waiter thread: whether the bucket's stream was the current one
    buckets_on_side = []  # per call: whether DDP handed the bucket over on the side stream
    start = gradagg.torch.ddp_bucket.start

    def recording_start(*arguments, **options):
        pending, finish = start(*arguments, **options)
        buckets_on_side.append(finish.stream.cuda_stream == side.cuda_stream)

        def recorded(then=None, on_stream=False):
            if on_stream:
                current = torch.cuda.current_stream(finish.stream.device)
                finished_on_stream.append(current.cuda_stream == finish.stream.cuda_stream)
            finish(then, on_stream)

        recorded.stream = finish.stream
        return pending, recorded

    gradagg.torch.ddp_bucket.start = recording_start
    try:
        ddp = DDP(mlp(), bucket_cap_mb=0.02)
        hook = CheckedHook(momentum=0.9)
        hook.register(ddp)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
        inputs = batches(rank, 3)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for batch in inputs:
                ddp(batch).square().mean().backward()
                optimizer.step()
                optimizer.zero_grad()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
    finally:
        gradagg.torch.ddp_bucket.start = start
    finished = finished_on_stream
    assert len(finished) == hook.calls > 0, f"{len(finished)} finishes on the waiter thread for {hook.calls} calls"
    assert all(finished), f"the waiter finished {finished.count(False)} of {len(finished)} buckets off their stream"
    same_on_every_rank(ddp, "side stream")
    hook.close()
    return (f"side stream: {hook.calls} hook calls finished on the bucket's stream, {sum(buckets_on_side)} of them "
            "handed over on the side stream")


def main():
    return torch_checks.run("python_ddp_gpu_test", [
        ("bf16_parameters", check_bf16_parameters),
        ("grad_scaler", check_grad_scaler),
        # After grad_scaler: its GradScaler, held by a state whose model is gone, must not make the hook refuse this
        # check's momentum (it did while a state's waiter thread kept the state alive).
        ("side_stream", check_side_stream)], 29671)


if __name__ == "__main__":
    sys.exit(main())
