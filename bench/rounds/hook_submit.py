#!/usr/bin/env python3
"""How long gradagg.torch.comm_hook takes to hand back its future, against the Aggregator's aggregate_async alone
on the same tensors: the hook's own Python per bucket (one rank, no exchange; a stand-in bucket of four parameters,
as examples/pytorch/hook_overhead.py builds it). One line of medians in microseconds.

  PYTHONPATH=python GRADAGG_LIBRARY=build/lib/libgradagg_c.so python3 bench/rounds/hook_submit.py [--size 1M]
      [--calls 250] [--device cpu|cuda]
Run it under two PYTHONPATHs in turn to compare two versions of the package."""
import argparse
import os
import statistics
import sys
import time

import torch

import gradagg
import gradagg.torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "pytorch"))
from hook_overhead import StandInBucket  # noqa: E402  (the same stand-in as the two-rank measurement)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="1M", help="bucket bytes (K, M suffixes)")
    parser.add_argument("--calls", type=int, default=250)
    parser.add_argument("--device", default="cpu")
    arguments = parser.parse_args()
    units = {"K": 1 << 10, "M": 1 << 20}
    size = arguments.size
    count = (int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)) // 4
    device = torch.device(arguments.device)
    shapes = [count // 2, count // 4, count // 8, count - count // 2 - count // 4 - count // 8]
    parameters = [torch.nn.Parameter(torch.zeros(n, device=device)) for n in shapes]
    buffer = torch.randn(count, device=device)
    bucket = StandInBucket(parameters, buffer)
    state = gradagg.torch.GradaggState(bits=1, check_optimizers=False)
    direct = gradagg.Aggregator(bits=1)
    views = list(buffer.split(shapes))
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else None
    hook, alone = [], []
    for call in range(arguments.calls + 50):  # 50 warm-ups
        start = time.perf_counter()
        future = gradagg.torch.comm_hook(state, bucket)
        returned = time.perf_counter()
        future.wait()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start_alone = time.perf_counter()
        pending = direct.aggregate_async(views, stream=stream)
        returned_alone = time.perf_counter()
        pending.wait()
        if call >= 50:
            hook.append((returned - start) * 1e6)
            alone.append((returned_alone - start_alone) * 1e6)
    direct.close()
    for aggregator in state.aggregators.values():
        aggregator.close()
    print(f"hook_submit: {arguments.size} bucket on {device}: comm_hook until its future returns "
          f"{statistics.median(hook):.1f} us, aggregate_async alone {statistics.median(alone):.1f} us")


if __name__ == "__main__":
    main()
