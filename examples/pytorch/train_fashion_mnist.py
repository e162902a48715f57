"""A small CNN on Fashion-MNIST with PyTorch's DistributedDataParallel: DDP's own allreduce, or gradagg's hook.

    mpirun -np 2 python3 examples/pytorch/train_fashion_mnist.py --mode allreduce
    mpirun -np 2 python3 examples/pytorch/train_fashion_mnist.py --mode gradagg --bits 1

The two lines a PyTorch user adds for gradagg are those in `if args.mode == "gradagg"` below. Data: Debian's
dataset-fashion-mnist package (/usr/share/datasets/fashion-mnist, or --data), read from its gzip files; nothing is
downloaded. Each rank trains on its own shard of the training set. The recipe: SGD, momentum 0.9 (inside the
aggregation with gradagg, as its hook does; in the optimizer with allreduce), lr 0.05 per 64 samples of the global
batch on a cosine schedule. Rank 0 prints one line per epoch (test accuracy, mean time per step) and, with --csv,
appends them to a CSV file.
"""
import argparse
import gzip
import os
import sys
import time

import numpy
import torch
import torch.distributed as dist
import torch.nn.functional as F

import gradagg
import gradagg.torch


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=["allreduce", "gradagg"], default="gradagg")
    parser.add_argument("--bits", type=int, default=1, help="gradagg: bits per element across nodes (1, 2, 4, 8, 32)")
    parser.add_argument("--full-precision-steps", type=int, default=0,
                        help="gradagg: steps sent in float32 before --bits takes over (a warm-up)")
    parser.add_argument("--mean-threshold", action="store_true",
                        help="gradagg: the 1-bit threshold at each bucket's mean instead of zero")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64, help="samples per rank per step")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--backend", default=None, help="torch.distributed backend (default nccl on GPUs, else gloo)")
    parser.add_argument("--csv", default=None, help="append rank 0's per-epoch rows to this CSV file")
    args = parser.parse_args()
    if args.epochs < 1 or args.batch < 1 or args.lr <= 0 or not 0 <= args.momentum < 1 or args.full_precision_steps < 0:
        parser.error("--epochs and --batch must be positive, --lr > 0, --momentum in [0, 1), "
                     "--full-precision-steps >= 0")
    return args


def load(directory, prefix):
    def read(name, offset):
        path = os.path.join(directory, name)
        if not os.path.exists(path):
            sys.exit(f"train_fashion_mnist: {path} is missing (apt-get install dataset-fashion-mnist, or --data)")
        with gzip.open(path, "rb") as handle:
            return numpy.frombuffer(handle.read(), dtype=numpy.uint8, offset=offset)
    images = read(f"{prefix}-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28).astype(numpy.float32) / 255.0
    labels = read(f"{prefix}-labels-idx1-ubyte.gz", 8).astype(numpy.int64)
    return torch.from_numpy((images - 0.2860) / 0.3530), torch.from_numpy(labels)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = torch.nn.Linear(64 * 7 * 7, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def main():
    args = parse_args()
    gradagg.torch.init_process_group_from_mpi(backend=args.backend)
    rank, size = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", rank % torch.cuda.device_count()) if torch.cuda.is_available() else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    torch.manual_seed(args.seed)
    train_x, train_y = load(args.data, "train")
    test_x, test_y = load(args.data, "t10k")
    shard = torch.arange(rank, len(train_x), size)
    train_x, train_y = train_x[shard].to(device), train_y[shard].to(device)
    test_x, test_y = test_x.to(device), test_y.to(device)

    model = torch.nn.parallel.DistributedDataParallel(Net().to(device))
    lr = args.lr * size * args.batch / 64
    if args.mode == "gradagg":  # the two lines: gradagg exchanges the gradients, with the momentum inside
        state = gradagg.torch.GradaggState(bits=args.bits, momentum=args.momentum,
                                           full_precision_steps=args.full_precision_steps,
                                           mean_threshold=args.mean_threshold)
        model.register_comm_hook(state, gradagg.torch.comm_hook)
        optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=args.momentum)
    steps_per_epoch = len(train_x) // args.batch
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs * steps_per_epoch)
    generator = torch.Generator().manual_seed(args.seed * 1000 + rank)
    variant = []  # what differs from the mode's defaults
    if args.mode == "gradagg" and args.full_precision_steps:
        variant.append(f"float32 for {args.full_precision_steps} steps")
    if args.mode == "gradagg" and args.mean_threshold:
        variant.append("mean threshold")
    variant = "; ".join(variant)
    label = f"{args.mode}" + (f" {args.bits} bit" if args.mode == "gradagg" else "") + (f" ({variant})" if variant else "")
    for epoch in range(1, args.epochs + 1):
        model.train()
        order = torch.randperm(len(train_x), generator=generator).to(device)
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for step in range(steps_per_epoch):
            batch = order[step * args.batch:(step + 1) * args.batch]
            optimizer.zero_grad()
            F.cross_entropy(model(train_x[batch]), train_y[batch]).backward()
            optimizer.step()
            schedule.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        step_ms = (time.perf_counter() - start) / steps_per_epoch * 1e3
        model.eval()
        with torch.no_grad():
            correct = sum(int((model.module(test_x[i:i + 1000]).argmax(1) == test_y[i:i + 1000]).sum())
                          for i in range(0, len(test_x), 1000))
        accuracy = 100.0 * correct / len(test_x)
        if rank == 0:
            print(f"{label}: epoch {epoch} test accuracy {accuracy:.2f}% step {step_ms:.2f} ms", flush=True)
            if args.csv:
                new = not os.path.exists(args.csv)
                with open(args.csv, "a") as handle:
                    if new:
                        handle.write("mode,bits,ranks,seed,epoch,test_accuracy,step_ms,variant\n")
                    handle.write(f"{args.mode},{args.bits if args.mode == 'gradagg' else 32},{size},{args.seed},"
                                 f"{epoch},{accuracy:.2f},{step_ms:.3f},{variant}\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
