"""gradagg.torch's Adam and AdamW under mpirun (CTest: 2 CPU ranks; the GPU machine's PyTorch too):

  1. at 32 bits they are torch's AdamW (with clip_grad_norm_ before it) and Adam (weight decay as L2) over DDP's
     allreduce: the same parameters after 6 steps, to float rounding, through DDP's bucket rebuild;
  2. the pairings that would train wrong are refused with a message: amsgrad, beta1 other than the hook's momentum, a
     1-bit hook without a warm-up, torch's AdamW behind a 1-bit hook, a momentum in both hook and optimizer;
  3. the warm-up's second moment is frozen after it, and bits_per_element counts the warm-up: 2 steps at 32 bits
     and 2 at 1 bit, between 2 nodes, average between 1 and 32 bits;
  4. every step is Adam's formula with the second moment frozen after the warm-up, in chunks of any size.

  mpirun -np 2 python3 test_torch_adam.py     (GRADAGG_RANKS_PER_NODE=1 makes the 2 ranks 2 nodes)
Prints "python_torch_adam_test: PASS" on rank 0 when every rank passed.
"""
import sys

try:
    import torch
except ImportError:
    print("python_torch_adam_test: SKIPPED (no PyTorch)")
    sys.exit(0)

import gradagg.torch
import torch_checks


def model_and_ddp():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    return model, torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.001)  # several buckets


def train(rank, make_optimizer, hook=None, clip=None, steps=6):
    model, ddp = model_and_ddp()
    if hook is not None:
        ddp.register_comm_hook(hook, gradagg.torch.comm_hook)
    optimizer = make_optimizer(model)
    generator = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        optimizer.zero_grad()
        ddp(torch.randn(16, 8, generator=generator)).square().mean().backward()
        if clip is not None and hook is None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
    return model, optimizer


def close(hook):
    for aggregator in hook.aggregators.values():
        aggregator.close()


def check_same_as_torch(rank):
    for name, clip, ours, theirs in [
            ("AdamW", None, gradagg.torch.AdamW, torch.optim.AdamW),
            ("AdamW clipped", 0.05, gradagg.torch.AdamW, torch.optim.AdamW),
            ("Adam with L2", None, gradagg.torch.Adam, torch.optim.Adam)]:
        hook = gradagg.torch.GradaggState(bits=32, momentum=0.9)
        settings = dict(lr=0.01, betas=(0.9, 0.95), weight_decay=0.1)
        mine, _ = train(rank, lambda m: ours(m.parameters(), hook, max_grad_norm=clip, **settings), hook, clip)
        reference, _ = train(rank, lambda m: theirs(m.parameters(), **settings), None, clip)
        close(hook)
        for a, b in zip(mine.parameters(), reference.parameters()):
            assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), (
                f"{name}: differs from torch's by {(a - b).abs().max().item()}")


def expect_error(what, action, words):
    try:
        action()
    except Exception as error:  # the hook's refusal reaches backward() wrapped by DDP's reducer
        assert all(w in str(error) for w in words), f"{what}: the message '{error}' lacks {words}"
        return
    raise AssertionError(f"{what}: accepted")


def check_refusals(rank):
    hook = gradagg.torch.GradaggState(bits=1, momentum=0.9, warmup_steps=2)
    params = list(model_and_ddp()[0].parameters())
    expect_error("amsgrad", lambda: gradagg.torch.AdamW(params, hook, amsgrad=True), ["amsgrad"])
    expect_error("beta1", lambda: gradagg.torch.AdamW(params, hook, betas=(0.8, 0.99)), ["beta1", "momentum"])
    no_warmup = gradagg.torch.GradaggState(bits=1, momentum=0.9)
    expect_error("no warm-up", lambda: gradagg.torch.AdamW(params, no_warmup), ["warm-up"])
    expect_error("torch's AdamW behind 1 bit",
                 lambda: train(rank, lambda m: torch.optim.AdamW(m.parameters()), gradagg.torch.GradaggState(bits=1),
                               steps=1), ["AdamW", "gradagg.torch.AdamW"])
    expect_error("momentum twice",
                 lambda: train(rank, lambda m: torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
                               gradagg.torch.GradaggState(bits=1, momentum=0.9), steps=1), ["momentum", "twice"])


def check_warmup_and_bits(rank, size):
    hook = gradagg.torch.GradaggState(bits=1, momentum=0.9, warmup_steps=2, warmup_bits=32)
    _, optimizer = train(rank, lambda m: gradagg.torch.AdamW(m.parameters(), hook, lr=0.01), hook, steps=4)
    for state in optimizer.state.values():
        assert state["step"] == 4 and state["variance_step"] == 2, "the second moment must freeze after the warm-up"
    bits = hook.bits_per_element()
    nodes = next(iter(hook.aggregators.values())).nodes
    if nodes > 1:
        assert bits is not None and 1.0 < bits < 32.0, f"2 steps at 32 bits and 2 at 1 bit averaged {bits} bits"
    close(hook)


class SettingsOnly:
    """A hook state that only gives the optimizer its settings: the steps below hand it p.grad directly."""
    bits, momentum, warmup_steps = 1, 0.9, 3

    def momentum_of(self, parameter):
        return None


def check_frozen_steps(rank):
    """Every step against Adam's formula written out per parameter, the second moment frozen after 3 steps: on CPUs
    the optimizer works in chunks of parameters and keeps the frozen denominators, so chunks of one tensor, of
    several, and the whole list each run 8 steps, with a parameter that misses a step (it then lags by one); on a GPU
    (where torch sees one) the whole list, through torch's multi-tensor kernels."""
    import gradagg.torch_adam as torch_adam
    lr, beta1, beta2, eps, decay = 0.01, 0.9, 0.95, 1e-8, 0.1
    runs = [("cpu", 1), ("cpu", 100), ("cpu", 1 << 40)] + ([("cuda", 0)] if torch.cuda.is_available() else [])
    for device, chunk in runs:
        torch_adam._CPU_CHUNK, saved = chunk, torch_adam._CPU_CHUNK
        try:
            generator = torch.Generator().manual_seed(7 + rank)
            params = [torch.nn.Parameter(torch.randn(shape, generator=generator).to(device))
                      for shape in ((6, 5), (5,), (9,))]
            reference = [{"p": p.detach().clone(), "previous": torch.zeros_like(p), "v": torch.zeros_like(p),
                          "step": 0, "variance_step": 0} for p in params]
            optimizer = gradagg.torch.AdamW(params, SettingsOnly(), lr=lr, betas=(beta1, beta2), eps=eps,
                                            weight_decay=decay)
            for step in range(8):
                for index, (p, r) in enumerate(zip(params, reference)):
                    fresh = torch.randn(p.shape, generator=generator).to(device)
                    p.grad = None if (index == 2 and step == 1) else fresh
                    if p.grad is None:
                        continue
                    m = p.grad
                    r["step"] += 1
                    if r["step"] <= SettingsOnly.warmup_steps:
                        g = m - beta1 * r["previous"]
                        r["v"] = beta2 * r["v"] + (1 - beta2) * g * g
                        r["variance_step"] = r["step"]
                    first = (1 - beta1) / (1 - beta1 ** r["step"])
                    denominator = (r["v"] / (1 - beta2 ** r["variance_step"])).sqrt() + eps
                    r["p"] = r["p"] * (1 - lr * decay) - lr * first * m / denominator
                    r["previous"] = m.clone()
                optimizer.step()
                for index, (p, r) in enumerate(zip(params, reference)):
                    assert torch.allclose(p, r["p"], rtol=1e-6, atol=1e-7), (
                        f"{device}, chunks of {chunk}: parameter {index} after step {step + 1} differs from the "
                        f"formula by {(p - r['p']).abs().max().item()}")
        finally:
            torch_adam._CPU_CHUNK = saved


def main():
    return torch_checks.run("python_torch_adam_test", [
        ("same as torch", lambda rank, size: check_same_as_torch(rank)),
        ("refusals", lambda rank, size: check_refusals(rank)),
        ("warm-up and bits", check_warmup_and_bits),
        ("frozen steps", lambda rank, size: check_frozen_steps(rank))], 29521)


if __name__ == "__main__":
    sys.exit(main())
