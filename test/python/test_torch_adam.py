"""gradagg.torch's Adam and AdamW under mpirun (CTest: 2 CPU ranks; the GPU machine's PyTorch too):

  1. at 32 bits they are torch's AdamW (with clip_grad_norm_ before it) and Adam (weight decay as L2) over DDP's
     allreduce: the same parameters after 6 steps, to float rounding, through DDP's bucket rebuild;
  2. the pairings that would train wrong are refused with a message: amsgrad, beta1 other than the hook's momentum,
     torch's AdamW behind a 1-bit hook, a momentum in both hook and optimizer, settings out of range, a frozen
     second moment or an early phase at no more bits behind the automatic early phase; without bits= or
     GRADAGG_BITS the hook sends 1 bit in buckets of 256 behind that phase, and its AdamW synchronises the second
     moment;
  3. the warm-up's second moment is frozen after it, and bits_per_element counts the warm-up: 2 steps at 32 bits
     and 2 at 1 bit, between 2 nodes, average between 1 and 32 bits;
  4. every step is Adam's formula with the second moment frozen after the warm-up and the step bounded by Adam's own
     bound, in chunks of any size; an element with no gradient in the warm-up (attention's key bias) and a 1-bit
     momentum after it steps by at most lr times that bound;
  5. the synchronised second moment (a 1-bit hook without a warm-up): each rank's own second moment is what its
     gradients make it, the denominators are that average (bias-corrected) where the ranks' gradients agree, and
     they, the guard's decisions and the parameters are identical on every rank;
  6. the guard: silent on a healthy run; a loss spike restarts the synchronisation, a NaN step is skipped, 20 in a
     row stop the run with an error;
  7. the hook's first step warns of nothing (its heap search read torch's deprecated reduce_op); on PyTorch 2 it
     searches no heap at all (optimizers are checked before their first step) and still refuses torch's AdamW
     behind a 1-bit hook, also one that steps only a later bucket's parameters;
  8. a parameter whose first gradient comes at a step that does not average is averaged then;
  9. the automatic early phase: 2 bits while the ranks' gradients agree, 1 bit in every bucket from the step after
     the first averaging that finds them noisy (a noise ratio of 1.25 on 2 ranks, not 1.249), alike on every rank;
     never behind SGD; a checkpoint resumes it during and after the phase.

  mpirun -np 2 python3 test_torch_adam.py     (GRADAGG_RANKS_PER_NODE=1 makes the 2 ranks 2 nodes)
Prints "python_torch_adam_test: PASS" on rank 0 when every rank passed.
"""
import math
import os
import shutil
import sys
import tempfile

try:
    import torch
except ImportError:
    print("python_torch_adam_test: SKIPPED (no PyTorch)")
    sys.exit(0)

import gradagg.torch
import torch_checks


def model_and_ddp(hidden=32, bucket_cap_mb=0.001):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 4))
    return model, torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=bucket_cap_mb)


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
    assert gradagg.torch.AdamW(params, no_warmup).policy == "synced", "no warm-up: the synchronised second moment"
    check_default_bits(params)
    assert gradagg.torch.AdamW(params, hook).policy == "frozen", "a warm-up: the frozen second moment"
    assert gradagg.torch.AdamW(params, hook, second_moment="synced").policy == "synced", "chosen with a warm-up"
    expect_error("second moment", lambda: gradagg.torch.AdamW(params, hook, second_moment="x"), ["second_moment"])
    # Frozen with nothing to learn it from: every denominator would be eps (sign descent at max_update).
    expect_error("frozen without a warm-up", lambda: gradagg.torch.AdamW(params, no_warmup, second_moment="frozen"),
                 ["frozen", "warmup_steps", "variance_steps"])
    expect_error("frozen after 0 steps", lambda: gradagg.torch.AdamW(params, hook, variance_steps=0),
                 ["frozen", "variance_steps"])
    expect_error("variance bits", lambda: gradagg.torch.AdamW(params, no_warmup, variance_bits=3), ["variance_bits"])
    expect_error("guard", lambda: gradagg.torch.AdamW(params, no_warmup, guard=0.5), ["guard"])
    expect_error("unbounded betas", lambda: gradagg.torch.AdamW(params, no_warmup, betas=(0.9, 0.5)), ["max_update"])
    expect_error("torch's AdamW behind 1 bit",
                 lambda: train(rank, lambda m: torch.optim.AdamW(m.parameters()), gradagg.torch.GradaggState(bits=1),
                               steps=1), ["AdamW", "gradagg.torch.AdamW"])
    # A hook never registered: AdamW would take the raw gradient for the hook's momentum, silently.
    for bits in (32, 1):
        expect_error(f"no hook registered, {bits} bits",
                     lambda: train(rank, lambda m: gradagg.torch.AdamW(
                         m.parameters(), gradagg.torch.GradaggState(bits=bits, momentum=0.9, warmup_steps=2)),
                         steps=1), ["register_comm_hook"])
    expect_error("momentum twice",
                 lambda: train(rank, lambda m: torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
                               gradagg.torch.GradaggState(bits=1, momentum=0.9), steps=1), ["momentum", "twice"])
    # Adam's beta1 is a momentum too, at any width; NAdam, RAdam and Adamax rescale each coordinate as Adam does.
    expect_error("Adam's beta1 beside the hook's momentum, 32 bits",
                 lambda: train(rank, lambda m: torch.optim.Adam(m.parameters()),
                               gradagg.torch.GradaggState(bits=32, momentum=0.9), steps=1), ["momentum", "twice"])
    for name in ("NAdam", "RAdam", "Adamax"):
        expect_error(f"torch's {name} behind 1 bit",
                     lambda: train(rank, lambda m: getattr(torch.optim, name)(m.parameters()),
                                   gradagg.torch.GradaggState(bits=1), steps=1), [name, "gradagg.torch.AdamW"])
    refused_again(rank)


def refused_again(rank):
    """A refusal caught by the caller refuses the next step too: the optimizer is not taken as checked. PyTorch 2
    only, where the refusal comes from the optimizer's step pre-hook; PyTorch 1's comes from inside DDP's backward,
    after which DDP's reducer cannot run another backward at all."""
    try:
        from torch.optim.optimizer import register_optimizer_step_pre_hook  # noqa: F401 (PyTorch 2)
    except ImportError:
        return
    model, ddp = model_and_ddp()
    hook = gradagg.torch.GradaggState(bits=1)
    ddp.register_comm_hook(hook, gradagg.torch.comm_hook)
    optimizer = torch.optim.AdamW(model.parameters())
    generator = torch.Generator().manual_seed(100 + rank)
    refusals = 0
    for _ in range(2):
        optimizer.zero_grad()
        try:
            ddp(torch.randn(16, 8, generator=generator)).square().mean().backward()
            optimizer.step()
        except Exception as error:  # the hook (PyTorch 1) or the step pre-hook (PyTorch 2) refuses
            if "AdamW" not in str(error):
                raise
            refusals += 1
    assert refusals == 2, f"refused {refusals} of 2 steps: a caught refusal let the next step through"


def check_default_bits(params):
    """The hook's width without bits=: 1 bit in buckets of 256 behind an automatic early phase at 2 bits, which its
    AdamW ends; GRADAGG_BITS where set (then no early phase), bits= over both."""
    default = gradagg.torch.GradaggState(momentum=0.9)
    assert (default.bits, default.warmup, default.warmup_bits) == (1, "auto", 2), (
        f"the hook's defaults are {default.bits} bits after warmup_steps={default.warmup!r} at {default.warmup_bits}")
    assert default.options["bucket_size"] == gradagg.torch.AUTO_BUCKET == 256, f"buckets: {default.options}"
    assert gradagg.torch.AdamW(params, default).policy == "synced", "the defaults: the synchronised second moment"
    expect_error("frozen behind an automatic phase",
                 lambda: gradagg.torch.AdamW(params, default, second_moment="frozen"), ["frozen", "auto"])
    expect_error("variance_steps behind an automatic phase",
                 lambda: gradagg.torch.AdamW(params, default, variance_steps=2), ["variance_steps", "auto"])
    expect_error("warmup_steps", lambda: gradagg.torch.GradaggState(momentum=0.9, warmup_steps="soon"),
                 ["warmup_steps", "soon"])
    for bits in (2, 32):
        expect_error(f"an automatic phase at {bits} bits",
                     lambda: gradagg.torch.GradaggState(bits=bits, momentum=0.9, warmup_steps="auto"),
                     ["warmup_bits", "fewer"])
    expect_error("end_warmup of a fixed warm-up",
                 lambda: gradagg.torch.GradaggState(bits=1, warmup_steps=3).end_warmup(), ["end_warmup", "auto"])
    explicit = gradagg.torch.GradaggState(bits=1, momentum=0.9)
    assert explicit.warmup == 0 and "bucket_size" not in explicit.options, "bits=1 alone: no early phase"
    fixed = gradagg.torch.GradaggState(momentum=0.9, warmup_steps=0)
    assert (fixed.bits, fixed.warmup) == (2, 0) and "bucket_size" not in fixed.options, (
        "warmup_steps=0 without a width: 2 bits (DEFAULT_BITS), as before the automatic phase")
    assert gradagg.torch.GradaggState(momentum=0.9, full_precision_steps=5, warmup_steps=0).warmup_steps == 5
    saved = os.environ.get("GRADAGG_BITS")
    os.environ["GRADAGG_BITS"] = "4"
    try:
        chosen = gradagg.torch.GradaggState(momentum=0.9)
        assert (chosen.bits, chosen.warmup) == (4, 0), "GRADAGG_BITS=4 is the hook's width, with no early phase"
        assert gradagg.torch.GradaggState(bits=1, momentum=0.9).bits == 1, "bits=1 did not win over GRADAGG_BITS"
    finally:
        if saved is None:
            del os.environ["GRADAGG_BITS"]
        else:
            os.environ["GRADAGG_BITS"] = saved
    close(default)


def early_phase_run(rank, agree, steps, optimizer="adamw", hook=None):
    """The default hook and AdamW (or SGD) for `steps` steps on a model of 3.6 MB that DDP's rebuild after its first
    step cuts into buckets of 1 MB (a bucket index first met at step 2); with `agree` every rank draws the same data,
    so the ranks' gradients are equal (noise ratio 1), else each its own, the noise far over the signal. Returns the
    hook, the width its calls of each step went at (an early phase's Aggregator is closed at the bucket's first call
    after it; "mixed" where buckets differ) and the parameters."""
    model, ddp = model_and_ddp(hidden=70000, bucket_cap_mb=1.0)
    hook = hook or gradagg.torch.GradaggState(momentum=0.9)
    ddp.register_comm_hook(hook, gradagg.torch.comm_hook)
    if optimizer == "adamw":
        step_with = gradagg.torch.AdamW(model.parameters(), hook, lr=0.01, betas=(0.9, 0.95))
    else:
        step_with = torch.optim.SGD(model.parameters(), lr=0.01)
    generator = torch.Generator().manual_seed(100 if agree else 100 + rank)
    widths = []
    for _ in range(steps):
        step_with.zero_grad()
        targets = 10.0 * torch.randn(16, 4, generator=generator)
        (ddp(torch.randn(16, 8, generator=generator)) - targets).square().mean().backward()
        early = [key[-1] == "warmup" for key in hook.aggregators]
        widths.append(hook.warmup_bits if all(early) else hook.bits if not any(early) else "mixed")
        step_with.step()
    return hook, widths, [p.detach().clone() for p in model.parameters()]


def check_early_phase(rank, size):
    """The automatic early phase: while the ranks' gradients agree (noise ratio 1) it goes on at 2 bits; where each
    rank draws its own data the first averaging (step 1) measures a ratio of about 2 and every bucket sends 1 bit
    from step 2 (also the one DDP's rebuild makes then), on every rank alike; it ends at a ratio of 1.25 on 2 ranks and
    not below; SGD never ends it; a checkpoint carries whether and where it ended."""
    nodes = gradagg.Aggregator(bits=1).nodes
    hook, widths, _ = early_phase_run(rank, agree=True, steps=6)
    assert widths == [2] * 6 and hook.in_warmup(), f"ranks in agreement: widths {widths}, not 2 bits throughout"
    assert len(hook.calls) > 1, f"DDP made {len(hook.calls)} bucket(s), not several"
    two_bits = hook.bits_per_element()  # the averagings of the second moment included, as below
    during = hook.state_dict()
    close(hook)
    resumed, widths, _ = early_phase_run(rank, agree=True, steps=2, hook=load(during))
    assert widths == [2, 2] and resumed.in_warmup(), f"a hook resumed in its early phase sent at widths {widths}"
    close(resumed)
    hook, widths, params = early_phase_run(rank, agree=False, steps=6)
    assert widths == [2] + [1] * 5 and hook.early_steps == 1, (
        f"ranks apart: widths {widths} (early phase {hook.early_steps} steps), not 2 bits then 1 from step 2")
    if nodes > 1:
        assert hook.bits_per_element() < two_bits, (
            f"{hook.bits_per_element()} bits per element after the switch, not fewer than 2 bits' {two_bits}")
    gathered = [torch.zeros(sum(p.numel() for p in params)) for _ in range(size)]
    torch.distributed.all_gather(gathered, torch.cat([p.flatten() for p in params]))
    assert all(torch.equal(gathered[0], g) for g in gathered), "the ranks' parameters differ after the switch"
    after = hook.state_dict()
    assert after["early_steps"] == 1, f"the checkpoint says the early phase took {after['early_steps']} steps"
    close(hook)
    resumed, widths, _ = early_phase_run(rank, agree=True, steps=2, hook=load(after))
    assert widths == [1, 1], f"a hook resumed after its early phase sent at widths {widths}, not 1 bit"
    close(resumed)
    hook, widths, _ = early_phase_run(rank, agree=False, steps=3, optimizer="sgd")
    assert widths == [2] * 3 and hook.in_warmup(), f"behind SGD the early phase must go on: widths {widths}"
    close(hook)
    check_early_threshold()


def load(saved):
    hook = gradagg.torch.GradaggState(momentum=0.9)
    hook.load_state_dict(saved)
    return hook


def check_early_threshold():
    """The phase ends where the model's noise ratio N sum ||g_rank||^2 / ||sum g_rank||^2 reaches 1.25 on 2 ranks:
    rows as _synchronise makes them (sum of ||g_rank||^2, level, ||sum g_rank||^2, root square) just under and at it."""
    for ratio, ends in ((1.249, False), (1.25, True)):
        hook = gradagg.torch.GradaggState(momentum=0.9)
        optimizer = gradagg.torch.AdamW(list(model_and_ddp()[0].parameters()), hook)
        optimizer._end_early_phase(2, [[ratio * 3.0, 1.0, 4.0, 1.0], [ratio * 1.0, 1.0, 4.0, 1.0]])
        assert hook.in_warmup() != ends, f"noise ratio {ratio} on 2 ranks: the early phase ended {not ends}"


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


# Adam's largest step over lr at betas (0.9, 0.95), by Cauchy-Schwarz: (1 - b1) / sqrt((1 - b2) (1 - b1^2 / b2))
ADAM_BOUND = 0.1 / math.sqrt(0.05 * (1 - 0.81 / 0.95))


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
    lr, beta1, beta2, eps, decay = 0.01, 0.9, 0.95, 1e-8, 0.1
    bound = ADAM_BOUND
    runs = [("cpu", 1), ("cpu", 100), ("cpu", 1 << 40)] + ([("cuda", 0)] if torch.cuda.is_available() else [])
    for device, chunk in runs:
        gradagg.torch.adamw._CPU_CHUNK, saved = chunk, gradagg.torch.adamw._CPU_CHUNK
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
                    step_size = (first * m / denominator).clamp(-bound, bound)
                    r["p"] = r["p"] * (1 - lr * decay) - lr * step_size
                    r["previous"] = m.clone()
                optimizer.step()
                for index, (p, r) in enumerate(zip(params, reference)):
                    assert torch.allclose(p, r["p"], rtol=1e-6, atol=1e-7), (
                        f"{device}, chunks of {chunk}: parameter {index} after step {step + 1} differs from the "
                        f"formula by {(p - r['p']).abs().max().item()}")
        finally:
            gradagg.torch.adamw._CPU_CHUNK = saved


def check_bounded_step(rank):
    """An element whose gradient is zero through the warm-up (its v is 0) and whose 1-bit momentum afterwards is plus
    or minus its bucket's scale steps by at most lr times Adam's bound (1.17 at 0.9 / 0.95): unbounded it would step
    by scale / eps, 1e5 here."""
    lr, bound = 1e-3, ADAM_BOUND
    key_bias = torch.nn.Parameter(torch.zeros(8))
    optimizer = gradagg.torch.AdamW([key_bias], SettingsOnly(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    for step in range(8):
        key_bias.grad = torch.zeros(8) if step < SettingsOnly.warmup_steps else torch.full((8,), 1e-3 * (-1) ** step)
        before = key_bias.detach().clone()
        optimizer.step()
        moved = (key_bias - before).abs().max().item()
        assert moved <= lr * bound * (1 + 1e-6), f"step {step + 1}: the element moved by {moved}, over lr x {bound}"


class Recorder:
    """An observer beside the optimizer's: keeps each step's own gradients of this rank, per parameter."""

    def __init__(self):
        self.seen = {}

    def __call__(self, parameters, gradients, scale):
        for p, g in zip(parameters, gradients):
            self.seen.setdefault(p, []).append(g.detach().clone())


def gathered(tensor):
    import torch.distributed as dist
    parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, tensor.contiguous())
    return parts


def train_synced(rank, steps, same_data, spike=None, nan=None, hidden=32, **options):
    """A DDP model behind a 1-bit hook with the synchronised second moment: `steps` steps, the loss multiplied by
    1e4 at step `spike` and NaN at step `nan` (counted from 1)."""
    model, ddp = model_and_ddp(hidden)
    hook = gradagg.torch.GradaggState(bits=1, momentum=0.9)
    ddp.register_comm_hook(hook, gradagg.torch.comm_hook)
    optimizer = gradagg.torch.AdamW(model.parameters(), hook, lr=0.01, betas=(0.9, 0.95), **options)
    recorder = Recorder()
    hook.observers.append(recorder)
    generator = torch.Generator().manual_seed(100 + (0 if same_data else rank))
    for step in range(1, steps + 1):
        optimizer.zero_grad()
        loss = ddp(torch.randn(16, 8, generator=generator)).square().mean()
        if step == spike:
            loss = loss * 1e4
        if step == nan or (isinstance(nan, range) and step in nan):
            loss = loss * float("nan")
        loss.backward()
        optimizer.step()
    return model, optimizer, hook, recorder


def check_synchronised(rank, size):
    """Same data on every rank: the gradients agree, so the average over ranks is each rank's and the denominator at a
    synchronising step (4, 8) is sqrt(u / (1 - beta2^t)) + eps of the rank's own u = EMA(g^2), which must be what the
    recorded gradients make; then other data per rank: everything identical across ranks. The hidden layer's
    weights (2048) are large enough that the noise ratio reads a sample of them."""
    for same_data in (True, False):
        model, optimizer, hook, recorder = train_synced(rank, 8, same_data, hidden=256, variance_bits=32)
        for p in model.parameters():
            state = optimizer.state[p]
            u = torch.zeros(p.numel())
            for g in recorder.seen[p]:
                u = 0.95 * u + 0.05 * g * g
            assert torch.allclose(state["local_exp_avg_sq"], u, rtol=1e-5, atol=1e-12), "u is not EMA(g^2)"
            if same_data:  # the gradients' sum crosses at 8 bits: the ratio is 1 to its rounding
                assert state["noise_ratio"] < 1.05, f"equal gradients, yet a noise ratio of {state['noise_ratio']}"
                expected = (u / (1 - 0.95 ** 8)).sqrt().view_as(p)
                assert torch.allclose(state["root_shape"], expected, rtol=2e-2, atol=1e-10), (
                    f"the synchronised sqrt(v) differs from the rank's own by "
                    f"{(state['root_shape'] - expected).abs().max().item()}")
            for name in ("root_shape",):
                parts = gathered(state[name])
                assert all(torch.equal(parts[0], x) for x in parts), f"{name} differs between ranks"
            parts = gathered(p.detach())
            assert all(torch.equal(parts[0], x) for x in parts), "the parameters differ between ranks"
        bits = hook.bits_per_element()
        if hook.aggregators and next(iter(hook.aggregators.values())).nodes > 1:
            assert bits is not None and bits > 1.0, f"the synchronisations must count: {bits} bits per element"
        close(hook)


def check_guard(rank, size):
    _, healthy, hook, _ = train_synced(rank, 40, False)
    assert not healthy.events, f"the guard fired on a healthy run: {healthy.events}"
    close(hook)
    model, spiked, hook, _ = train_synced(rank, 40, False, spike=30, nan=35)
    steps = [step for step, _ in spiked.events]
    assert 30 in steps and 35 in steps, f"the guard missed the spike at 30 or the NaN at 35: {spiked.events}"
    assert spiked._guard["step"] == 39, f"the NaN step must be skipped: {spiked._guard['step']} steps taken of 40"
    for p in model.parameters():
        assert torch.isfinite(p).all(), "a NaN reached the parameters"
    events = torch.tensor(steps, dtype=torch.float64)
    assert all(torch.equal(events, x) for x in gathered(events)), "the ranks decided differently"
    close(hook)
    try:  # a run whose momentum stays NaN has diverged: the optimizer stops it, on every rank, rather than skip on
        _, _, hook, _ = train_synced(rank, 40, False, nan=range(10, 41))
    except RuntimeError as error:
        assert "non-finite 20 times in a row" in str(error) and "step 10:" in str(error), str(error)
    else:
        raise AssertionError("20 steps in a row with a NaN momentum went on without an error")


class BareHook:
    """The hook's side of the synchronised second moment alone: the steps below call its observers and set p.grad."""
    bits, momentum, warmup_steps, comm, options, bytes_sent = 1, 0.9, 0, None, {}, 0

    def __init__(self):
        self.observers = []

    def momentum_of(self, parameter):
        return None


def check_late_parameter(rank):
    """A parameter whose first gradient comes at step 3, which is no averaging step (DDP's unused parameters, a
    layer switched on later): it is averaged in that step, the others keep their ratio, nothing raises."""
    generator, shared = torch.Generator().manual_seed(5 + rank), torch.Generator().manual_seed(4)
    early = torch.nn.Parameter(torch.randn(40, generator=shared))
    late = torch.nn.Parameter(torch.randn(30, generator=shared))
    hook = BareHook()
    optimizer = gradagg.torch.AdamW([early, late], hook, lr=0.01, betas=(0.9, 0.95))
    for step in range(1, 7):
        present = [early] + ([late] if step >= 3 else [])
        gradients = [torch.randn(p.numel(), generator=generator) for p in present]
        for observe in hook.observers:
            observe(present, gradients, None)
        for p in present:  # the hook's result, the same on every rank
            p.grad = torch.randn(p.shape, generator=shared)
        optimizer.step()
        if step == 3:
            assert "root_shape" in optimizer.state[late], "the late parameter was not averaged when it came"
    for p in (early, late):
        assert torch.isfinite(p).all()
        parts = gathered(p.detach())
        assert all(torch.equal(parts[0], x) for x in parts), "the ranks differ"
    for aggregator in optimizer._aggregators.values():
        aggregator.close()


def check_no_warnings(rank):
    """The hook's first step (its check of the optimizers, one pass over the heap) reads no deprecated object of
    torch's: reading torch.distributed.reduce_op warned once per rank in every user's log."""
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hook = gradagg.torch.GradaggState(bits=1, momentum=0.9)
        train(rank, lambda m: gradagg.torch.AdamW(m.parameters(), hook), hook, steps=2)
    close(hook)
    ours = [w for w in caught if "reduce_op" in str(w.message) or "gradagg" in w.filename]
    assert not ours, f"warnings: {[f'{w.filename}:{w.lineno}: {w.message}' for w in ours]}"


def check_pairing_without_heap_search(rank):
    """PyTorch 2: the optimizers are checked by a step pre-hook, before they change anything; the heap is not read."""
    try:
        from torch.optim.optimizer import register_optimizer_step_pre_hook  # noqa: F401 (PyTorch 2)
    except ImportError:
        return
    import gc
    real = gc.get_objects

    def searched(*args, **kwargs):
        raise AssertionError("the hook searched the heap")

    gc.get_objects = searched
    try:
        expect_error("torch's AdamW behind 1 bit, no heap search",
                     lambda: train(rank, lambda m: torch.optim.AdamW(m.parameters()), gradagg.torch.GradaggState(bits=1),
                                   steps=1), ["AdamW", "gradagg.torch.AdamW"])
        # An optimizer of the last layer only: its parameters are not in the first bucket DDP hands over.
        expect_error("torch's AdamW on a later bucket",
                     lambda: train(rank, lambda m: torch.optim.AdamW(list(m.parameters())[:1]),
                                   gradagg.torch.GradaggState(bits=1), steps=1), ["AdamW"])
    finally:
        gc.get_objects = real


def check_distributed_checkpoint(rank):
    """torch.distributed.checkpoint (PyTorch 2.2+) keeps one copy of what every rank holds under one name, and
    initialises an optimizer by a step at lr 0 on zero gradients: gradagg's per-rank states (each rank's second
    moment, the carried error) would be lost or stepped wrongly. Refused, before and after training, with what to use
    instead."""
    try:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict
    except ImportError:
        return
    words = ["torch.distributed.checkpoint", "torch.save", f"rank {rank}"]
    hook = gradagg.torch.GradaggState(bits=1, momentum=0.9)
    model, ddp = model_and_ddp()
    ddp.register_comm_hook(hook, gradagg.torch.comm_hook)
    optimizer = gradagg.torch.AdamW(model.parameters(), hook, lr=0.01)
    expect_error("DCP's optimizer state before a step", lambda: get_optimizer_state_dict(ddp, optimizer), words)
    # DCP's step at lr 0 was left undone, so that DCP put the lr back: the optimizer trains on.
    assert optimizer.param_groups[0]["lr"] == 0.01 and not optimizer.state, "DCP's refusal changed the optimizer"
    assert all(p.grad is None for p in model.parameters()), "DCP's zero gradients were left behind"
    model, optimizer = train(rank, lambda m: gradagg.torch.AdamW(m.parameters(), hook), hook, steps=2)
    expect_error("DCP's optimizer state after training", lambda: get_optimizer_state_dict(model, optimizer), words)
    directory = tempfile.mkdtemp(prefix="gradagg_dcp_")  # this rank's own: DCP writes its files where its id says
    mine = os.path.join(directory, f"rank{rank}.pt")
    expect_error("the hook's state saved by DCP",
                 lambda: dcp.save({"hook": hook}, checkpoint_id=os.path.join(directory, "hook")), words)

    class PerRank:  # what the message asks for: a state of the user's own that DCP calls saves gradagg's per rank
        def state_dict(self):
            torch.save({"optimizer": optimizer.state_dict(), "gradagg": hook.state_dict()}, mine)
            return {"model": model.state_dict()}

        def load_state_dict(self, saved):
            pass

    dcp.save({"app": PerRank()}, checkpoint_id=os.path.join(directory, "app"))
    saved = os.path.exists(mine)
    shutil.rmtree(directory)
    assert saved, "the user's own per-rank save under DCP was refused"
    close(hook)


def main():
    return torch_checks.run("python_torch_adam_test", [
        ("same as torch", lambda rank, size: check_same_as_torch(rank)),
        ("refusals", lambda rank, size: check_refusals(rank)),
        ("warm-up and bits", check_warmup_and_bits),
        ("automatic early phase", check_early_phase),
        ("frozen steps", lambda rank, size: check_frozen_steps(rank)),
        ("bounded step", lambda rank, size: check_bounded_step(rank)),
        ("synchronised second moment", check_synchronised),
        ("guard", check_guard),
        ("no warnings", lambda rank, size: check_no_warnings(rank)),
        ("pairing without a heap search", lambda rank, size: check_pairing_without_heap_search(rank)),
        ("late parameter", lambda rank, size: check_late_parameter(rank)),
        ("distributed checkpoint", lambda rank, size: check_distributed_checkpoint(rank))], 29521)


if __name__ == "__main__":
    sys.exit(main())
