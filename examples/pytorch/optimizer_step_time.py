#!/usr/bin/env python3
"""What one optimizer step costs, alone, on the GPT example's parameters (examples/pytorch/train_gpt.py's model):
torch's AdamW (its default implementation on this device, and per tensor with foreach=False) against
gradagg.torch.AdamW while its second moment learns (the hook's warm-up) and after it is frozen (1 bit), the same
gradients, in one process (no hook runs: p.grad stands in for the momentum the hook would return).

  python3 examples/pytorch/optimizer_step_time.py [--device cpu|cuda] [--layers 4 --dim 256 --heads 4] [--steps 50]

Prints the median milliseconds per step of each.
"""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gradagg.torch  # noqa: E402
from train_gpt import GPT  # noqa: E402


def median_ms(optimizer, parameters, steps, synchronize):
    times = []
    for _ in range(steps):
        for p in parameters:
            p.grad.normal_()
        synchronize()
        start = time.perf_counter()
        optimizer.step()
        synchronize()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1, help="torch threads on CPUs (default 1, as a rank uses)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    synchronize = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    model = GPT(args.layers, args.dim, args.heads, 32).to(device)
    parameters = list(model.parameters())
    for p in parameters:
        p.grad = torch.zeros_like(p)
    groups = [{"params": [p for p in parameters if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in parameters if p.dim() < 2], "weight_decay": 0.0}]
    elements = sum(p.numel() for p in parameters)
    print(f"optimizer_step_time: {elements} parameters in {len(parameters)} tensors on {device}, torch "
          f"{torch.__version__}, median of {args.steps} steps")
    rows = [("torch.optim.AdamW (default)", torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.95))),
            ("torch.optim.AdamW (foreach=False)", torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.95),
                                                                    foreach=False))]
    # The hook's state only gives the optimizer its settings here; nothing is aggregated.
    for label, warmup in (("gradagg.torch.AdamW, second moment learning", 10 ** 9),
                          ("gradagg.torch.AdamW, second moment frozen (1 bit)", 1)):
        state = gradagg.torch.GradaggState(bits=1, momentum=0.9, warmup_steps=warmup, warmup_bits=2)
        rows.append((label, gradagg.torch.AdamW(groups, state, lr=1e-3, betas=(0.9, 0.95))))
    for label, optimizer in rows:
        median_ms(optimizer, parameters, 2, synchronize)  # first steps: state allocated, v frozen
        print(f"  {label:52} {median_ms(optimizer, parameters, args.steps, synchronize):8.2f} ms")


if __name__ == "__main__":
    main()
