"""A DDP training run through gradagg's hook at 1 bit with gradagg.torch.AdamW, stopped and resumed from a checkpoint
in a new mpirun (resume_test.sh drives it). Each rank saves its GradaggState.state_dict() beside the model and
optimizer; the resumed run must end bitwise where the uninterrupted one does.

  mpirun -np 2 python3 resume.py MODE STEPS DIRECTORY [DEVICE]

MODE: whole (2 * STEPS steps), first (STEPS steps, then the checkpoint), resume (the checkpoint, then STEPS more
steps), resume_without_hook_state (the same, the hook's state left out: must differ), resume_reset (the hook's
state loaded with residuals="reset": the momentum kept, the carried error afresh, as on another topology). Rank 0
writes the final parameters to DIRECTORY/MODE.pt. The model's forward order is not its parameter order, so DDP
rebuilds its buckets after the first iteration: the resumed run's first step has DDP's first buckets, not the saved
ones.
"""
import os
import sys

try:
    import torch
except ImportError:
    print("resume: SKIPPED (no PyTorch)")
    sys.exit(0)

import torch.distributed as dist

import gradagg
import gradagg.torch

DDP = torch.nn.parallel.DistributedDataParallel


class Reversed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.last, self.middle, self.first = torch.nn.Linear(64, 10), torch.nn.Linear(64, 64), torch.nn.Linear(32, 64)

    def forward(self, x):
        return self.last(torch.relu(self.middle(torch.relu(self.first(x)))))


def batch(step, rank, device):
    generator = torch.Generator().manual_seed(7919 * step + rank)
    return torch.randn(16, 32, generator=generator).to(device), torch.randn(16, 10, generator=generator).to(device)


def main():
    mode, steps, directory = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    device = torch.device(sys.argv[4] if len(sys.argv) > 4 else "cpu")
    gradagg.init()
    rank, size = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("gloo", rank=rank, world_size=size)
    torch.manual_seed(0)
    model = DDP(Reversed().to(device), bucket_cap_mb=0.01)
    # The second moment frozen after a 2-step warm-up, or (GRADAGG_TEST_SECOND_MOMENT=synced) each rank's own,
    # averaged over the ranks at steps 1, 2, 4, 8: its state is in the optimizer's state_dict.
    synced = os.environ.get("GRADAGG_TEST_SECOND_MOMENT") == "synced"

    def make_state(**options):
        return gradagg.torch.GradaggState(bits=1, momentum=0.9, warmup_steps=0 if synced else 2, warmup_bits=4,
                                          **options)
    state = make_state()
    model.register_comm_hook(state, gradagg.torch.comm_hook)
    optimizer = gradagg.torch.AdamW(model.parameters(), state, lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1,
                                    max_grad_norm=1.0)
    first = 0
    if mode.startswith("resume"):
        checkpoint = torch.load(os.path.join(directory, f"checkpoint_rank{rank}.pt"))
        model.module.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        if mode == "resume":
            other = dict(checkpoint["gradagg"], settings=dict(checkpoint["gradagg"]["settings"], bits=2))
            try:
                state.load_state_dict(other)
                raise AssertionError("a checkpoint of other hook settings was taken")
            except ValueError as error:
                assert "settings" in str(error), error
            # Options that change no result (the deadline, timing) do not block a resume; one set through the
            # environment that does (GRADAGG_BUCKET) does.
            make_state(timeout_seconds=77, timing=True).load_state_dict(checkpoint["gradagg"])
            os.environ["GRADAGG_BUCKET"] = "64"
            try:
                make_state().load_state_dict(checkpoint["gradagg"])
                raise AssertionError("a checkpoint taken under another GRADAGG_BUCKET was taken")
            except ValueError as error:
                assert "settings" in str(error), error
            finally:
                del os.environ["GRADAGG_BUCKET"]
            # The size of the pieces moves the same numbers (PiecesLeaveEveryBitAsItWas): it blocks nothing.
            make_state(piece_bytes=1 << 16).load_state_dict(checkpoint["gradagg"])
            # Checkpoints of earlier versions held the options under "options": as given, or for a
            # while every result-changing one as it took effect (piece_bytes among them). Each one saved there
            # that changes results is compared with its value now; the others block nothing.
            settings = {k: v for k, v in checkpoint["gradagg"]["settings"].items() if k != "result_options"}
            effective = checkpoint["gradagg"]["settings"]["result_options"]
            # (saved, given now, taken): an option given now that the checkpoint lacks must be the default.
            for options, now, taken in (({}, {}, True), ({"timing": True}, {}, True), ({"bucket_size": 64}, {}, False),
                                        ({}, {"bucket_size": 64}, False),
                                        ({}, {"bucket_size": effective["bucket_size"]}, True),
                                        (dict(effective, piece_bytes=1 << 16), {}, True),
                                        (dict(effective, mean_threshold=effective["mean_threshold"] + 1), {}, False)):
                earlier = dict(checkpoint["gradagg"], settings=dict(settings, options=options))
                try:
                    make_state(**now).load_state_dict(earlier)
                    assert taken, f"an earlier checkpoint with options {options} was taken with {now}"
                except ValueError as error:
                    assert not taken and "settings" in str(error), (options, now, error)
        if mode in ("resume", "resume_reset"):
            # resume_reset: the momentum kept, the carried error started afresh (another topology may load it)
            state.load_state_dict(checkpoint["gradagg"], residuals="reset" if mode == "resume_reset" else "restore")
        first = checkpoint["step"]
    last = steps if mode == "first" else first + steps if mode.startswith("resume") else 2 * steps
    for step in range(first, last):
        inputs, targets = batch(step, rank, device)
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    if mode == "first":
        torch.save({"step": last, "model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
                    "gradagg": state.state_dict()}, os.path.join(directory, f"checkpoint_rank{rank}.pt"))
    flat = torch.cat([p.detach().reshape(-1).cpu() for p in model.parameters()])
    gathered = [torch.zeros_like(flat) for _ in range(size)]
    dist.all_gather(gathered, flat)
    assert all(torch.equal(gathered[0], other) for other in gathered[1:]), f"{mode}: ranks differ"
    if rank == 0:
        torch.save(flat, os.path.join(directory, f"{mode}.pt"))
        bits = state.bits_per_element()  # None where nothing crossed nodes (one node)
        print(f"resume: {mode}: {last - first} steps, {'-' if bits is None else f'{bits:.3f}'} bits per element")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
