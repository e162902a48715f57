#!/usr/bin/env python3
"""What the DDP hook costs beyond the aggregation itself: per bucket and size, the time from handing a bucket to
gradagg.torch.comm_hook until its future's value is ready, against calling a gradagg Aggregator directly on the
same tensors (split per parameter, averaged, as the hook does; with --momentum, the same momentum arithmetic), in the
same run, alternating. No DDP: a stand-in bucket with DDP's GradBucket methods, so only the hook's own work (Python,
the future, the waiter thread) differs between the two.

  mpirun -np 2 python3 examples/pytorch/hook_overhead.py [--device cpu|cuda] [--sizes 1M,4M,25M] [--steps 40]
      [--bits 1] [--momentum 0]

Every call's average (and momentum) through the hook must be bitwise the direct call's, or the run stops with an
error. Rank 0 prints a table: size, the direct call's and the hook's median time (us), the hook's overhead in us and as a
share of the direct call, how long the hook took to hand back its future (on DDP's thread: its Python and the
start of the aggregation, which the direct call pays too; the overhead less that is at least the hand-off to the
library's thread and back through the waiter thread), and the paired overhead (the median over steps of the hook's
time less the direct call's of the same step, steadier when the machine drifts); then the time to the future in
pieces, measured apart: the Aggregator's aggregate_async until it returns, making a future like the hook's, and the
rest, the hook's own work (its Python and, with --momentum, the momentum's add); and one hand-off between Python
threads with no work (a queue to a waiting thread, which completes a future like the hook's that this thread waits
on): what completing the future from the library's side costs a library that does not link torch, at least once per
bucket.
GRADAGG_RANKS_PER_NODE=1 makes the ranks nodes (the exchange then runs at --bits).
"""
import argparse
import os
import queue
import statistics
import sys
import threading
import time

import torch

import gradagg
import gradagg.torch


class StandInBucket:
    """The GradBucket methods the hook uses: a flat buffer and the parameters laid out in it."""

    def __init__(self, parameters, buffer):
        self._parameters, self._buffer = parameters, buffer

    def buffer(self):
        return self._buffer

    def parameters(self):
        return self._parameters

    def index(self):
        return 0

    def is_last(self):
        return True


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def rank():
    return int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))


def measure(size_bytes, device, steps, bits, momentum, meeting):
    count = size_bytes // 4
    shapes = [count // 2, count // 4, count // 8, count - count // 2 - count // 4 - count // 8]  # four "parameters"
    parameters = [torch.nn.Parameter(torch.zeros(n, device=device)) for n in shapes]
    source = torch.randn(count, generator=torch.Generator().manual_seed(rank())).to(device)
    buffer = torch.empty(count, device=device)
    bucket = StandInBucket(parameters, buffer)
    state = gradagg.torch.GradaggState(bits=bits, momentum=momentum, check_optimizers=False)
    direct = gradagg.Aggregator(bits=bits)
    views = list(buffer.split(shapes))
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else None
    size = direct.size

    carried = torch.zeros(count, device=device)  # the direct call's momentum, as a caller of the Aggregator keeps it
    carried_views = list(carried.split(shapes))

    def direct_call():
        if momentum > 0.0:  # the same arithmetic as the hook's: beta * m + g in, the new m out unless non-finite
            torch._foreach_add_(views, carried_views, alpha=momentum)
        direct.aggregate(views, stream=stream)
        torch._foreach_div_([buffer], size)  # as the hook divides: buffer.div_ multiplies by 1 / size on a GPU
        if momentum > 0.0:
            torch.where(torch.isfinite(buffer).all(), buffer, carried, out=carried)

    returned = []  # when comm_hook handed back its future: the hook's Python up to there is on DDP's thread

    def hook_call():
        future = gradagg.torch.comm_hook(state, bucket)
        returned.append(time.perf_counter())
        future.wait()

    def ready():
        """The same input on every call, the device idle and every rank at the start line; returns the clock."""
        buffer.copy_(source)
        synchronize(device)
        meeting()
        return time.perf_counter()

    times = {"direct": [], "hook": [], "submit": [], "async": [], "future": [], "handoff": []}
    differ = 0  # calls whose average or momentum through the hook is not bitwise the direct call's
    for step in range(steps + 5):  # 5 warm-ups
        for name, call in (("direct", direct_call), ("hook", hook_call)):
            start = ready()
            call()
            synchronize(device)
            if step >= 5:
                times[name].append(time.perf_counter() - start)
                if name == "hook":
                    times["submit"].append(returned[-1] - start)
            # Checked outside the timed span: the same inputs and the same arithmetic give the same bits.
            if name == "direct":
                expected = buffer.clone()
            else:
                hook_momentum = next(iter(state.momenta.values()), None)
                differ += not torch.equal(buffer, expected) or (
                    hook_momentum is not None and not torch.equal(hook_momentum, carried))
    # Pieces of the hook's time to its future, apart: the Aggregator's own aggregate_async until it returns (the
    # direct call pays it too), and making a future like the hook's.
    for step in range(steps + 5):
        start = ready()
        pending = direct.aggregate_async(views, stream=stream)
        started = time.perf_counter()
        pending.wait()
        synchronize(device)
        future_start = time.perf_counter()
        torch.futures.Future(devices=[device]) if device.type == "cuda" else torch.futures.Future()
        if step >= 5:
            times["async"].append(started - start)
            times["future"].append(time.perf_counter() - future_start)
    times["handoff"] = handoffs(device, steps)
    direct.close()
    for aggregator in state.aggregators.values():
        aggregator.close()
    # The calls alternate, so each step's hook and direct call share the machine's state of the moment: the median of
    # their differences is steadier than the difference of the medians when the direct call drifts between rounds.
    paired = statistics.median(h - d for h, d in zip(times["hook"], times["direct"]))
    if differ:
        raise SystemExit(f"hook_overhead: rank {rank()}: at {size_bytes} bytes the hook's average or momentum differed "
                         f"from the direct call's in {differ} of {steps + 5} calls")
    return tuple(statistics.median(times[name]) for name in ("direct", "hook", "submit", "async", "future")) + (
        paired, statistics.median(times["handoff"]))


def handoffs(device, steps):
    """Times of one hand-off between Python threads with no work, as the hook's waiter completes a bucket's future:
    this thread queues a future to a waiting thread, which sets its result; this thread waits for it."""
    inbox = queue.SimpleQueue()

    def complete():
        while (future := inbox.get()) is not None:
            future.set_result(None)

    waiter = threading.Thread(target=complete, daemon=True)
    waiter.start()
    times = []
    for step in range(steps + 5):
        future = torch.futures.Future(devices=[device]) if device.type == "cuda" else torch.futures.Future()
        start = time.perf_counter()
        inbox.put(future)
        future.wait()
        if step >= 5:
            times.append(time.perf_counter() - start)
    inbox.put(None)
    waiter.join()
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--sizes", default="1M,4M,25M")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--bits", type=int, default=1)
    parser.add_argument("--momentum", type=float, default=0.0)
    arguments = parser.parse_args()
    device = torch.device(arguments.device)
    if device.type == "cuda":
        device = torch.device("cuda", rank() % torch.cuda.device_count())
        torch.cuda.set_device(device)
    barrier = gradagg.Aggregator(bits=32)  # a one-element aggregation: every rank meets before each timed call
    token = torch.zeros(1)
    rows = []
    for text in arguments.sizes.split(","):
        rows.append((text, *measure(parse_size(text), device, arguments.steps, arguments.bits, arguments.momentum,
                                    lambda: barrier.aggregate([token]))))
    ranks = barrier.size
    barrier.close()
    if rank() == 0:
        print(f"# hook_overhead: {ranks} ranks, device {device.type}, {arguments.bits} bits, momentum "
              f"{arguments.momentum}, medians of {arguments.steps} calls each, alternating; torch {torch.__version__}")
        print("| bucket | direct Aggregator (us) | hook (us) | overhead (us) | overhead / direct | hook until its "
              "future returns (us) | paired overhead (us) | paired / direct |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for text, direct, hook, submit, _, _, paired, _ in rows:
            print(f"| {text} | {1e6 * direct:.0f} | {1e6 * hook:.0f} | {1e6 * (hook - direct):.0f} | "
                  f"{100 * (hook - direct) / direct:.1f}% | {1e6 * submit:.0f} | {1e6 * paired:.0f} | "
                  f"{100 * paired / direct:.1f}% |")
        print("\n| bucket | hook until its future returns (us) | of it, Aggregator.aggregate_async alone (us) | "
              "a future like the hook's (us) | the rest: the hook's own work (us) | a hand-off between Python threads "
              "(us) |")
        print("| --- | --- | --- | --- | --- | --- |")
        for text, _, _, submit, started, future, _, handoff in rows:
            print(f"| {text} | {1e6 * submit:.0f} | {1e6 * started:.0f} | {1e6 * future:.0f} | "
                  f"{1e6 * (submit - started - future):.0f} | {1e6 * handoff:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
