"""gradagg.torch.LocalSteps (local steps across nodes, DiLoCo-style) under mpirun, DDP over each node's ranks (gloo),
on CPU ranks in CTest and on GPUs where torch sees any (rank i on GPU i % count, so ranks may share one with
GRADAGG_NVLINK_SHARE_GPUS=1); prints SKIPPED and exits 0 without PyTorch:

  1. at 32 bits each synchronisation is DiLoCo's outer step computed apart: the anchor minus local rank 0's
     parameters on every node, summed over the nodes in node order, times 1 / nodes, one step of Nesterov SGD
     (lr 0.7, momentum 0.9) on the anchor; every rank then holds the new anchor, bitwise; with NesterovInside (the
     momentum summed inside the exchange) the same step to float rounding;
  2. at 1 bit a small regression learns, every rank holds bitwise the same parameters after each synchronisation,
     and what crossed the nodes is about 1 bit per element per synchronisation;
  3. the streaming form (2 fragments, a delay of 2 steps): each fragment's anchor changes only at the step its
     exchange is due, the same on every rank, and the fragment's parameters are the anchor then;
  4. a run checkpointed while an exchange is in flight and resumed into a new model, optimizer and LocalSteps ends
     bitwise as the run that never stopped (also with NesterovInside at 1 bit); resumed without LocalSteps' state
     it does not;
  5. refusals on every rank: bad sync_every / fragments / delay / mix, a DDP model, ranks that disagree on a
     setting (naming the rank), a model whose parameters changed, a checkpoint of other settings.

  mpirun -np 2 python3 test_local_steps.py       (GRADAGG_RANKS_PER_NODE=1: 2 nodes of 1; -np 4 with 2: 2 of 2)
Prints "python_local_steps_test: PASS" on rank 0 when every rank passed.
"""
import os
import sys

try:
    import torch
except ImportError:
    print("python_local_steps_test: SKIPPED (no PyTorch)")
    sys.exit(0)

import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import gradagg
import gradagg.torch
import torch_checks

INPUTS, OUTPUTS = 6, 3
TRUTH = torch.Generator().manual_seed(99)
TRUE_MAP = torch.randn(INPUTS, OUTPUTS, generator=TRUTH)


def build(rank=None):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(INPUTS, 128), torch.nn.Tanh(), torch.nn.Linear(128, OUTPUTS))
    return model.to(torch_checks.device_of(dist.get_rank() if rank is None else rank))


def batch(rank, step):
    generator = torch.Generator().manual_seed(1000 * rank + step)
    inputs = torch.randn(8, INPUTS, generator=generator) + rank  # the ranks' data differ
    targets = inputs @ TRUE_MAP + 0.1 * torch.randn(8, OUTPUTS, generator=generator)
    return inputs.to(torch_checks.device_of(rank)), targets.to(torch_checks.device_of(rank))


def inner_step(ddp, optimizer, rank, step):
    inputs, targets = batch(rank, step)
    loss = torch.nn.functional.mse_loss(ddp(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def flat(tensors):
    return torch.cat([t.detach().reshape(-1).float() for t in tensors])


def gathered(tensor):
    tensor = tensor.cpu()  # gloo gathers host tensors
    everyone = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, tensor)
    return everyone


def same_everywhere(tensor, what):
    for rank, theirs in enumerate(gathered(tensor)):
        assert torch.equal(theirs, tensor.cpu()), f"{what} differs on rank {rank}"


def setup(rank, sync_every, inner_lr=0.05, adam=False, **settings):
    model = build()
    local = gradagg.torch.LocalSteps(model, sync_every, **settings)
    ddp = DistributedDataParallel(model, process_group=local.node_group)
    optimizer = (torch.optim.AdamW(model.parameters(), lr=0.01) if adam else
                 torch.optim.SGD(model.parameters(), lr=inner_lr))
    return model, local, ddp, optimizer


def check_oracle(rank, size, inside=False):
    outer_optimizer = gradagg.torch.NesterovInside() if inside else None
    model, local, ddp, optimizer = setup(rank, 3, bits=32, outer_optimizer=outer_optimizer)
    places = [None] * size
    dist.all_gather_object(places, (local.node, local.local_rank))
    leaders = [places.index((node, 0)) for node in range(local.nodes)]  # each node's local rank 0, in node order
    anchor = [torch.nn.Parameter(p.detach().clone()) for p in model.parameters()]
    outer = torch.optim.SGD(anchor, lr=0.7, momentum=0.9, nesterov=True)
    synchronisations = 0
    for step in range(1, 10):
        inner_step(ddp, optimizer, rank, step)
        if step % 3 == 0:  # the outer step, computed here from every rank's parameters
            everyone = gathered(flat(model.parameters()))
            total = None
            for leader in leaders:
                delta = flat(anchor).cpu() - everyone[leader]
                total = delta if total is None else total + delta
            total = total * (1.0 / local.nodes)
            offset = 0
            for a in anchor:
                a.grad = total[offset:offset + a.numel()].view(a.shape).to(a.device)
                offset += a.numel()
            outer.step()
            synchronisations += 1
        local.step()
        if step % 3 == 0 and inside:  # the momentum summed inside the exchange: the same step to rounding
            assert torch.allclose(flat(model.parameters()), flat(anchor), rtol=1e-5, atol=1e-7), \
                f"step {step}: not Nesterov's step: {(flat(model.parameters()) - flat(anchor)).abs().max()}"
        elif step % 3 == 0:
            assert torch.equal(flat(model.parameters()), flat(anchor)), f"step {step}: not DiLoCo's outer step"
            assert torch.equal(flat(local.fragments[0].anchor), flat(anchor)), f"step {step}: the anchor"
    assert synchronisations == 3 and local.nodes >= 2, (synchronisations, local.nodes)
    return f"{local.nodes} nodes of {local.ranks_per_node}, device {torch_checks.device_of(rank).type}"


def check_one_bit(rank, size):
    assert setup(rank, 4)[1].bits == gradagg.torch.local_steps.DEFAULT_BITS == 4, "the default width"
    model, local, ddp, optimizer = setup(rank, 4, inner_lr=0.02, bits=1)
    first = last = None
    for step in range(1, 81):
        loss = inner_step(ddp, optimizer, rank, step)
        first = loss if first is None else first
        local.step()
        if step % 4 == 0:
            same_everywhere(flat(model.parameters()), f"step {step}: the parameters")
            last = loss
    losses = gathered(torch.tensor([first, last]))
    first, last = sum(t[0] for t in losses).item(), sum(t[1] for t in losses).item()
    assert last < 0.5 * first, f"loss {first:.4f} -> {last:.4f}: did not learn"
    bits = local.bits_per_element()
    assert bits is not None and bits < 1.6, f"{bits} bits per element across nodes"
    elements = sum(p.numel() for p in model.parameters())
    assert local.bytes_per_step() < 1.6 * elements / 8 / 4, (local.bytes_per_step(), elements)


def check_streaming(rank, size):
    model, local, ddp, optimizer = setup(rank, 4, fragments=2, delay=2, bits=1)
    assert [f.offset for f in local.fragments] == [0, 2]
    due = {0: {6, 10, 14}, 1: {4, 8, 12}}  # sent after steps 4, 8, 12 and 2, 6, 10, applied 2 steps later
    before = [flat(f.anchor) for f in local.fragments]
    for step in range(1, 15):
        inner_step(ddp, optimizer, rank, step)
        local.step()
        for index, fragment in enumerate(local.fragments):
            now = flat(fragment.anchor)
            assert (not torch.equal(now, before[index])) == (step in due[index]), \
                f"fragment {index}'s anchor changed at step {step}: due at {sorted(due[index])}"
            same_everywhere(now, f"step {step}: fragment {index}'s anchor")
            if step in due[index]:
                assert torch.equal(flat(fragment.parameters), now), f"step {step}: fragment {index}'s parameters"
            before[index] = now
    assert local.bits_per_element() < 2.0, local.bits_per_element()  # a 3-element bias is a bucket of its own


def check_resume(rank, size, inside=False):
    settings = dict(fragments=2, delay=2, adam=True)
    if inside:
        settings.update(bits=1, outer_optimizer=gradagg.torch.NesterovInside())

    def run(steps, resume_from=None, with_local_state=True):
        model, local, ddp, optimizer = setup(rank, 4, **settings)
        if resume_from is not None:
            optimizer.load_state_dict(resume_from["optimizer"])
            if with_local_state:
                local.load_state_dict(resume_from["local"])
        start = local.steps
        for step in range(start + 1, steps + 1):
            inner_step(ddp, optimizer, rank, step)
            local.step()
        return model, local, optimizer

    whole = flat(run(12)[0].parameters())
    model, local, optimizer = run(5)  # after step 5 fragment 0's exchange of step 4 is in flight (due at 6)
    assert local.fragments[0].pending is not None, "nothing in flight at the checkpoint"
    saved = {"optimizer": optimizer.state_dict(), "local": local.state_dict()}
    for p in model.parameters():  # the checkpoint holds its own copy of the parameters
        p.data.fill_(7.0)
    resumed = flat(run(12, saved)[0].parameters())
    assert torch.equal(resumed, whole), "the resumed run is not the uninterrupted one"
    without = flat(run(12, saved, with_local_state=False)[0].parameters())
    assert not torch.equal(without, whole), "resumed without LocalSteps' state, yet the same: the test sees nothing"


def refused(expected, make):
    try:
        make()
    except gradagg.UsageError as error:
        assert expected in str(error), f"{expected!r} not in {error}"
        return
    raise AssertionError(f"not refused: expected {expected!r}")


def check_refusals(rank, size):
    model = build()
    refused("sync_every must be a whole number >= 1", lambda: gradagg.torch.LocalSteps(model, 0))
    refused("fragments must be a whole number >= 1", lambda: gradagg.torch.LocalSteps(model, 4, fragments=0))
    refused("fragments (8) must be at most sync_every (4)", lambda: gradagg.torch.LocalSteps(model, 4, fragments=8))
    refused("delay (3) must be at most sync_every // fragments (2)",
            lambda: gradagg.torch.LocalSteps(model, 4, fragments=2, delay=3))
    refused("mix must be in [0, 1), and 0 without a delay", lambda: gradagg.torch.LocalSteps(model, 4, mix=0.5))
    refused("NesterovInside: lr must be > 0 and momentum in [0, 1)", lambda: gradagg.torch.NesterovInside(momentum=1))
    refused("a fragment holds one parameter at least", lambda: gradagg.torch.LocalSteps(model, 8, fragments=5))
    ddp = DistributedDataParallel(build(), device_ids=None)
    refused("pass the module before DDP wraps it", lambda: gradagg.torch.LocalSteps(ddp, 4))
    refused("sync_every is 8 on rank 1 but 4 on rank 0: every rank must pass the same",
            lambda: gradagg.torch.LocalSteps(model, 8 if rank == 1 else 4))
    refused("the outer momentum inside the exchange (NesterovInside) is True on rank 1 but False on rank 0",
            lambda: gradagg.torch.LocalSteps(model, 4, outer_optimizer=gradagg.torch.NesterovInside()
                                             if rank == 1 else None))
    refused("parameter shapes is 4 parameters of", lambda: gradagg.torch.LocalSteps(
        build() if rank != 1 else torch.nn.Sequential(torch.nn.Linear(INPUTS, 17), torch.nn.Linear(17, OUTPUTS)), 4))

    model, local, ddp, optimizer = setup(rank, 2)
    saved = local.state_dict()
    model[0].weight = torch.nn.Parameter(model[0].weight.detach().clone())
    local.step()
    refused(f"rank {rank}: the model's trainable parameters are no longer those it was made with", local.step)
    other = gradagg.torch.LocalSteps(build(), 3)
    refused("the checkpoint's settings", lambda: other.load_state_dict(saved))
    refused("takes what LocalSteps.state_dict() returned", lambda: other.load_state_dict({"anchor": []}))


def main():
    if torch.cuda.is_available():
        torch.cuda.set_device(torch_checks.device_of(int(os.environ["OMPI_COMM_WORLD_RANK"])))
    return torch_checks.run("python_local_steps_test", [
        ("the outer step at 32 bits", check_oracle),
        ("the outer momentum inside the exchange at 32 bits",
         lambda rank, size: check_oracle(rank, size, inside=True)),
        ("1 bit", check_one_bit),
        ("streaming", check_streaming),
        ("resume", check_resume),
        ("resume, the outer momentum inside", lambda rank, size: check_resume(rank, size, inside=True)),
        ("refusals", check_refusals)], 29702)


if __name__ == "__main__":
    sys.exit(main())
