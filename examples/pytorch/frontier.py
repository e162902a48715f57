#!/usr/bin/env python3
"""The GPT example's frontier: final validation loss against the average bits per element actually sent (warm-up
included), one row per setting (runs grouped by label and model size, mean and spread over seeds), beside DDP's
allreduce (32 bits), from the JSON files that train_gpt.py --json writes. Prints a Markdown table; with OUT.png also
draws the frontier and each setting's validation loss against steps and against wall-clock (matplotlib).

  examples/pytorch/frontier.py RESULTS_DIR [OUT.png]
"""
import collections
import glob
import json
import os
import statistics
import sys


def load(directory):
    runs = []
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        with open(path) as handle:
            run = json.load(handle)
        if "final_validation_loss" in run:
            runs.append(run)
    return runs


def bits_of(run):
    """gradagg: what its hook counted; PyTorch's hooks: train_gpt.py's bytes per step over the elements a ring
    allreduce of the whole gradient would carry (DDP 32, bf16 16, PowerSGD what its factors and vectors cost)."""
    if run.get("bits_per_element") not in ("", None):
        return float(run["bits_per_element"])
    if "bytes_per_step" in run:
        ranks = run["ranks"]
        return 8 * run["bytes_per_step"] / (2 * (ranks - 1) / ranks * run["parameters"])
    return 32.0


def settings(runs):
    """(parameters, label) -> its runs, DDP's label per model size found by its name."""
    grouped = collections.defaultdict(list)
    for run in runs:
        grouped[(run["parameters"], run["label"])].append(run)
    return grouped


def table(grouped):
    lines = ["| model | setting | bits per element | seeds | final loss, mean (sd) | vs DDP's mean |",
             "| --- | --- | --- | --- | --- | --- |"]
    ddp = {size: statistics.mean(r["final_validation_loss"] for r in group)
           for (size, label), group in grouped.items() if label.startswith("ddp") and "_lr" not in label}
    for (size, label), group in sorted(grouped.items(), key=lambda item: (item[0][0], -bits_of(item[1][0]))):
        losses = [r["final_validation_loss"] for r in group]
        mean = statistics.mean(losses)
        spread = f" ({statistics.stdev(losses):.4f})" if len(losses) > 1 else ""
        versus = f"{100 * (mean / ddp[size] - 1):+.2f}%" if size in ddp and not label.startswith("ddp") else ""
        seeds = ", ".join(str(r["seed"]) for r in group)
        lines.append(f"| {size / 1e6:.1f}M | {label} | {statistics.mean(bits_of(r) for r in group):.2f} | {seeds} | "
                     f"{mean:.4f}{spread} | {versus} |")
    return "\n".join(lines)


def draw(grouped, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, (frontier, steps, clock) = plt.subplots(1, 3, figsize=(16, 4.5))
    for size in sorted({size for size, _ in grouped}):
        points = [(statistics.mean(bits_of(r) for r in group), statistics.mean(r["final_validation_loss"] for r in group),
                   label) for (s, label), group in grouped.items() if s == size and "_lr" not in label]
        points.sort()
        frontier.plot([p[0] for p in points], [p[1] for p in points], "o", label=f"{size / 1e6:.1f}M parameters")
        for bits, loss, label in points:
            frontier.annotate(label, (bits, loss), fontsize=6)
    frontier.set_xscale("log", base=2)
    frontier.set_xlabel("bits per element sent (average over the run)")
    frontier.set_ylabel("final validation loss (nats/byte)")
    frontier.legend()
    for (size, label), group in sorted(grouped.items()):
        if "_lr" in label:
            continue
        run = group[0]  # the first seed's curve
        rows = run.get("rows", [])
        name = f"{label} ({size / 1e6:.1f}M, seed {run['seed']})"
        steps.plot([r["step"] for r in rows], [r["validation_loss"] for r in rows], label=name)
        clock.plot([r["seconds"] for r in rows], [r["validation_loss"] for r in rows], label=name)
    for axis, what in ((steps, "step"), (clock, "seconds (ranks sharing one GPU)")):
        axis.set_xlabel(what)
        axis.set_ylabel("validation loss")
        axis.set_ylim(top=2.5)
    steps.legend(fontsize=6)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main(argv):
    if not argv or len(argv) > 2:
        sys.exit("usage: frontier.py RESULTS_DIR [OUT.png]")
    runs = load(argv[0])
    if not runs:
        sys.exit(f"frontier.py: no train_gpt.py JSON files in {argv[0]}")
    grouped = settings(runs)
    print(table(grouped))
    if len(argv) == 2:
        draw(grouped, argv[1])


if __name__ == "__main__":
    main(sys.argv[1:])
