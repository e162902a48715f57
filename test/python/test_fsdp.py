"""gradagg.torch.FSDPGradaggState under FSDP2 on CPU ranks (gloo), under mpirun; needs PyTorch 2.8 or later and
mpi4py, and prints SKIPPED and exits 0 without them (Debian's torch 1.13 in CI has no FSDP2):

  1. at 32 bits the gradients after each backward are bitwise what a gloo all-reduce over the replicate group gives
     with the same scaling (the sum over the node, divided by its ranks, summed over the nodes, divided by them);
  2. at 1 and 2 bits with momentum 0.9 in the hook and plain SGD a small regression learns (the loss falls below half
     its start), every rank ends with bitwise the same parameters, and at 1 bit the bytes across nodes are at most
     1/20 of float32's;
  3. a run resumed after 3 of 6 steps from the parameters and the hook's state_dict() (momentum, carried error) ends
     bitwise as the run that never stopped, and without the hook's state it does not;
  4. an Inf in one rank's gradient comes back non-finite everywhere and leaves the hook's momentum as it was;
  5. refusals naming the rank: a shard size that does not divide the ranks, a module sharded over another width, an
     HSDP (2-D) mesh, a checkpoint loaded after the first step;
  6. gradagg.torch.AdamW on the shards: at 32 bits with clipping it steps as torch's AdamW with clip_grad_norm_
     behind a float all-reduce (to float rounding: the clipping norm is summed over the node's shards); at 2 bits
     (the synchronised second moment) a small regression learns, every rank ends with the same parameters, each
     parameter's second-moment level and noise ratio are the same on every rank (summed over the shards), and a run
     resumed from the optimizer's, the hook's and the parameters' state ends bitwise as the run that never stopped.

  mpirun -np 2 python3 test_fsdp.py     (2 nodes of 1 rank; -np 4: 2 nodes of 2, each node an FSDP2 shard group)
Prints "python_fsdp_test: PASS" on rank 0 when every rank passed.
"""
import copy
import functools
import gc
import sys

try:
    import torch
    from mpi4py import MPI  # noqa: F401 (the hook's communicator)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FSDPModule, fully_shard
    if not hasattr(FSDPModule, "set_force_sum_reduction_for_comms"):
        raise ImportError("FSDPModule.set_force_sum_reduction_for_comms")
except ImportError as missing:
    print(f"python_fsdp_test: SKIPPED (needs PyTorch 2.8+ with FSDP2 and mpi4py: {missing})")
    sys.exit(0)

import torch.distributed as dist

import gradagg.torch
import torch_checks


def shard_size(size):
    return 2 if size % 2 == 0 and size > 2 else 1


@functools.lru_cache(maxsize=None)
def meshes(size):
    """The (node, shard) mesh, made once: every init_device_mesh makes process groups of its own."""
    per_node = shard_size(size)
    mesh = init_device_mesh("cpu", (size // per_node, per_node), mesh_dim_names=("node", "shard"))
    return mesh, per_node


def build(mesh, frozen=False):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(33, 65), torch.nn.Tanh(), torch.nn.Linear(65, 7))
    model[0].bias.requires_grad_(not frozen)  # frozen: a module with a parameter that never gets a gradient
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def batch(rank, step):
    generator = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(16, 33, generator=generator)
    return x, x[:, :7] * 0.5 + 0.1 * torch.randn(16, 7, generator=generator)


def gradients(model, rank, steps):
    out = []
    for step in range(steps):
        x, y = batch(rank, step)
        (model(x) - y).square().mean().backward()
        out.append([p.grad.to_local().clone() for p in model.parameters()])
        for p in model.parameters():
            p.grad = None
    return out


def check_float32_is_an_all_reduce(rank, size):
    mesh, per_node = meshes(size)
    nodes = size // per_node
    reference = build(mesh["shard"])
    across = mesh.get_group("node")
    for module in (reference[0], reference[2]):
        module.set_force_sum_reduction_for_comms(True)
        module.set_gradient_divide_factor(1.0)

        def all_reduce(shard):
            shard.div_(per_node)
            dist.all_reduce(shard, group=across)
            shard.div_(nodes)
        module.set_all_reduce_hook(all_reduce)
    expected = gradients(reference, rank, 3)
    model = build(mesh["shard"])
    state = gradagg.torch.FSDPGradaggState(per_node, bits=32).attach(model)
    got = gradients(model, rank, 3)
    state.close()
    for step, (want, have) in enumerate(zip(expected, got)):
        for index, (a, b) in enumerate(zip(want, have)):
            assert torch.equal(a, b), f"step {step}, parameter {index}: {float((a - b).abs().max())} from all_reduce"
    assert sum(state.calls.values()) == 3 * 2, state.calls  # two modules with parameters, three steps


def trains(rank, size, bits):
    mesh, per_node = meshes(size)
    model = build(mesh["shard"])
    state = gradagg.torch.FSDPGradaggState(per_node, bits=bits, momentum=0.9).attach(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for step in range(150):
        x, y = batch(rank, step % 20)
        loss = (model(x) - y).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        total = loss.detach().clone()
        dist.all_reduce(total)
        losses.append(float(total) / size)
    assert losses[-1] < 0.5 * losses[0], f"{bits} bits: the loss went from {losses[0]:.4f} to {losses[-1]:.4f}"
    for parameter in model.parameters():
        full = parameter.full_tensor()
        every = [torch.empty_like(full) for _ in range(size)]
        dist.all_gather(every, full)
        assert all(torch.equal(every[0], other) for other in every), f"{bits} bits: the ranks' parameters differ"
    sent = state.bits_per_element()
    state.close()
    return losses, sent


def check_low_bits_train(rank, size):
    notes = []
    for bits in (1, 2):
        losses, sent = trains(rank, size, bits)
        if bits == 1:
            assert sent is not None and sent <= 32 / 20, f"1 bit sent {sent} bits per element"
        notes.append(f"{bits} bit(s): loss {losses[0]:.3f} -> {losses[-1]:.3f} at {sent:.2f} bits per element")
    return "; ".join(notes)


def check_resume(rank, size):
    """A run resumed from the hook's state_dict (and the parameters) after 3 of 6 steps ends bitwise as the run that
    never stopped; the same resume without the hook's state does not (the momentum and the carried error matter)."""
    mesh, per_node = meshes(size)

    def steps(model, state, first, last):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        for step in range(first, last):
            x, y = batch(rank, step)
            (model(x) - y).square().mean().backward()
            optimizer.step()
            optimizer.zero_grad()

    def local(model):
        return [p.to_local().clone() for p in model.parameters()]

    model = build(mesh["shard"])
    state = gradagg.torch.FSDPGradaggState(per_node, bits=1, momentum=0.9).attach(model)
    steps(model, state, 0, 3)
    saved, halfway = state.state_dict(), local(model)
    steps(model, state, 3, 6)
    whole = local(model)
    state.close()
    for restore in (True, False):
        resumed = build(mesh["shard"])
        with torch.no_grad():
            for parameter, value in zip(resumed.parameters(), halfway):
                parameter.to_local().copy_(value)
        again = gradagg.torch.FSDPGradaggState(per_node, bits=1, momentum=0.9).attach(resumed)
        if restore:
            again.load_state_dict(saved)
        steps(resumed, again, 3, 6)
        same = all(torch.equal(a, b) for a, b in zip(whole, local(resumed)))
        again.close()
        assert same == restore, f"resumed {'with' if restore else 'without'} the hook's state: same as whole {same}"
    expect_refusal("late load", lambda: state.load_state_dict(saved), ["before the first step", f"rank {rank}"])


def check_overflow_keeps_momentum(rank, size):
    """An Inf in one rank's gradient (an AMP overflow): every rank's shards come back non-finite, and the momentum
    carried in the hook stays what it was, so the next finite step goes on from it."""
    mesh, per_node = meshes(size)
    model = build(mesh["shard"])
    state = gradagg.torch.FSDPGradaggState(per_node, bits=2, momentum=0.9).attach(model)
    gradients(model, rank, 2)
    before = {key: m.clone() for key, m in state.momenta.items()}
    x, y = batch(rank, 2)
    if rank == 0:
        x[0, 0] = float("inf")
    (model(x) - y).square().mean().backward()
    finite = all(bool(torch.isfinite(p.grad.to_local()).all()) for p in model.parameters())
    assert not finite, "an overflow on rank 0 came back finite"
    for key, m in state.momenta.items():
        assert torch.equal(m, before[key]), f"module {key[0]}: the momentum moved in an overflowed step"
    state.close()


def adamw_steps(model, state, optimizer, rank, first, last, clip=None):
    losses = []
    for step in range(first, last):
        x, y = batch(rank, step % 20)
        loss = (model(x) - y).square().mean()
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        optimizer.zero_grad()
        total = loss.detach().clone()
        dist.all_reduce(total)
        losses.append(float(total) / dist.get_world_size())
    return losses


def check_adamw_float32(rank, size):
    """At 32 bits gradagg's AdamW (the hook carrying beta1's momentum) is torch's AdamW with clip_grad_norm_ behind
    a float all-reduce, to float rounding; the clipping (0.05: every step clips) needs the norm over the node's
    shards."""
    mesh, per_node = meshes(size)
    settings = dict(lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1)
    reference = build(mesh["shard"])
    plain = gradagg.torch.FSDPGradaggState(per_node, bits=32).attach(reference)
    adamw_steps(reference, plain, torch.optim.AdamW(reference.parameters(), **settings), rank, 0, 8, clip=0.05)
    model = build(mesh["shard"])
    state = gradagg.torch.FSDPGradaggState(per_node, bits=32, momentum=0.9).attach(model)
    optimizer = gradagg.torch.AdamW(model.parameters(), state, max_grad_norm=0.05, **settings)
    assert optimizer.policy == "exact", optimizer.policy
    adamw_steps(model, state, optimizer, rank, 0, 8)
    for index, (a, b) in enumerate(zip(reference.parameters(), model.parameters())):
        a, b = a.to_local(), b.to_local()
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), \
            f"parameter {index}: {float((a - b).abs().max())} from torch's AdamW with clip_grad_norm_"
    plain.close()
    state.close()


def check_adamw_low_bits(rank, size):
    """2 bits, the synchronised second moment on the shards: learns, the same everywhere, resumes bitwise."""
    mesh, per_node = meshes(size)
    settings = dict(lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1, max_grad_norm=1.0)

    def start(load=None, frozen=False):
        model = build(mesh["shard"], frozen)
        state = gradagg.torch.FSDPGradaggState(per_node, bits=2, momentum=0.9).attach(model)
        optimizer = gradagg.torch.AdamW(model.parameters(), state, **settings)
        if load is not None:
            with torch.no_grad():
                for parameter, value in zip(model.parameters(), load["parameters"]):
                    parameter.to_local().copy_(value)
            state.load_state_dict(load["hook"])
            optimizer.load_state_dict(load["optimizer"])
        return model, state, optimizer

    model, state, optimizer = start()
    assert optimizer.policy == "synced", optimizer.policy
    losses = adamw_steps(model, state, optimizer, rank, 0, 40)
    saved = {"parameters": [p.to_local().clone() for p in model.parameters()], "hook": state.state_dict(),
             "optimizer": copy.deepcopy(optimizer.state_dict())}
    losses += adamw_steps(model, state, optimizer, rank, 40, 80)
    assert losses[-1] < 0.5 * losses[0], f"2 bits, AdamW: the loss went from {losses[0]:.4f} to {losses[-1]:.4f}"
    assert not optimizer.events, f"the guard fired on a healthy run: {optimizer.events}"
    for index, parameter in enumerate(model.parameters()):
        full = parameter.full_tensor()
        every = [torch.empty_like(full) for _ in range(size)]
        dist.all_gather(every, full)
        assert all(torch.equal(every[0], other) for other in every), f"parameter {index}: the ranks differ"
        figures = torch.tensor([optimizer.state[parameter][k] for k in ("shape_level", "noise_ratio")],
                               dtype=torch.float64)
        gathered = [torch.empty_like(figures) for _ in range(size)]
        dist.all_gather(gathered, figures)
        assert all(torch.equal(gathered[0], g) for g in gathered), \
            f"parameter {index}: level and noise ratio per rank {[g.tolist() for g in gathered]}"
    sent = state.bits_per_element()
    whole = [p.to_local().clone() for p in model.parameters()]
    state.close()
    model, state, optimizer = start(saved)
    adamw_steps(model, state, optimizer, rank, 40, 80)
    assert all(torch.equal(a, p.to_local()) for a, p in zip(whole, model.parameters())), \
        "AdamW resumed at step 40 did not end as the run that never stopped"
    state.close()
    # A module with a frozen parameter (FSDP2 reduce-scatters the others only): it learns, the frozen one stays.
    model, state, optimizer = start(frozen=True)
    before = model[0].bias.to_local().clone()
    frozen_losses = adamw_steps(model, state, optimizer, rank, 0, 40)
    assert frozen_losses[-1] < 0.5 * frozen_losses[0], f"with a frozen bias: {frozen_losses[0]} -> {frozen_losses[-1]}"
    assert torch.equal(model[0].bias.to_local(), before), "the frozen bias moved"
    state.close()
    return f"loss {losses[0]:.3f} -> {losses[-1]:.3f} at {sent:.2f} bits per element; resumed bitwise"


def expect_refusal(what, action, words):
    try:
        action()
    except (ValueError, RuntimeError) as error:
        assert all(w in str(error) for w in words), f"{what}: the message '{error}' lacks {words}"
        return
    raise AssertionError(f"{what}: accepted")


def check_refusals(rank, size):
    mesh, per_node = meshes(size)
    expect_refusal("shard size", lambda: gradagg.torch.FSDPGradaggState(size + 1), ["shard_size", f"rank {rank}"])
    default = gradagg.torch.FSDPGradaggState(per_node)
    assert default.bits == gradagg.torch.DEFAULT_BITS == 2, f"the FSDP2 hook's default width is {default.bits} bits"
    default.close()
    if size > 1:
        other = 2 if per_node == 1 else 1
        model = build(mesh["shard"])
        state = gradagg.torch.FSDPGradaggState(other)
        expect_refusal("width", lambda: state.attach(model), ["sharded over", f"rank {rank}"])
        state.close()
        model = build(mesh)  # HSDP: replicate across nodes, shard inside
        state = gradagg.torch.FSDPGradaggState(per_node)
        expect_refusal("HSDP", lambda: state.attach(model), ["HSDP", f"rank {rank}"])
        state.close()


def main():
    status = torch_checks.run("python_fsdp_test", [
        ("float32 is an all-reduce", check_float32_is_an_all_reduce),
        ("1 and 2 bits train", check_low_bits_train),
        ("resume", check_resume),
        ("overflow keeps the momentum", check_overflow_keeps_momentum),
        ("refusals", check_refusals),
        ("AdamW at 32 bits is torch's", check_adamw_float32),
        ("AdamW at 2 bits", check_adamw_low_bits)], 29661)
    # The meshes hold gloo process groups whose threads may still release tensors: let them go while Python runs
    # (dropped at interpreter exit instead, a thread's last Python call aborted the process 1 time in 4).
    meshes.cache_clear()
    gc.collect()
    return status


if __name__ == "__main__":
    sys.exit(main())
