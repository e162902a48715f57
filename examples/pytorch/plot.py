#!/usr/bin/env python3
"""Draws the example's runs: test accuracy per epoch for each mode (mean over seeds, the band from min to max) and
the mean time per step. Needs matplotlib (Debian: python3-matplotlib).

  examples/pytorch/plot.py RUNS_CSV [MORE_CSV...] OUT.png
"""
import collections
import csv
import sys


def main(argv):
    if len(argv) < 2:
        sys.exit("usage: plot.py RUNS_CSV [MORE_CSV...] OUT.png")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    accuracy = collections.defaultdict(lambda: collections.defaultdict(list))
    step_ms = collections.defaultdict(list)
    for path in argv[:-1]:
        with open(path) as handle:
            for row in csv.DictReader(handle):
                label = "DDP allreduce" if row["mode"] == "allreduce" else f"gradagg hook, {row['bits']} bit"
                if row.get("variant"):  # files written before the column existed have none
                    label += f" ({row['variant']})"
                accuracy[label][int(row["epoch"])].append(float(row["test_accuracy"]))
                step_ms[label].append(float(row["step_ms"]))
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for label, epochs in sorted(accuracy.items()):
        xs = sorted(epochs)
        means = [sum(epochs[x]) / len(epochs[x]) for x in xs]
        left.plot(xs, means, marker="o", label=f"{label} (n={len(epochs[xs[-1]])})")
        left.fill_between(xs, [min(epochs[x]) for x in xs], [max(epochs[x]) for x in xs], alpha=0.2)
    left.set_xlabel("epoch")
    left.set_ylabel("test accuracy (%)")
    left.legend()
    labels = sorted(step_ms)
    right.bar(range(len(labels)), [sum(step_ms[l]) / len(step_ms[l]) for l in labels])
    right.set_xticks(range(len(labels)), labels, rotation=15)
    right.set_ylabel("time per step (ms)")
    figure.tight_layout()
    figure.savefig(argv[-1], dpi=120)
    print(f"wrote {argv[-1]}")


if __name__ == "__main__":
    main(sys.argv[1:])
