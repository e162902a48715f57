#!/usr/bin/env python3
"""Summarises the runs of scripts/train_compare.sh: OUT_DIR/<recipe>__<mode>__seed<N>.csv.

Writes OUT_DIR/summary.md: per recipe and mode, the last epoch's test accuracy over the seeds (mean, sample
standard deviation, min, max) and the gap to float32's mean; and OUT_DIR/accuracy.png (where matplotlib is
installed: apt-get install python3-matplotlib): test accuracy per epoch, the mean over seeds as a line, min to max
as a band, one panel per recipe.

  scripts/training_report.py /tmp/cpu_2x2
"""
import csv
import glob
import os
import statistics
import sys
from collections import defaultdict

MODE_ORDER = ["float32", "1bit", "1bit_zero", "2bit", "4bit", "8bit", "1bit_after"]
MODE_LABEL = {"float32": "float32", "1bit": "1 bit", "1bit_zero": "1 bit, zero threshold (CNTK)", "2bit": "2 bits",
              "4bit": "4 bits", "8bit": "8 bits", "1bit_after": "1 bit (zero), momentum after the aggregation"}


def load(directory):
    """{recipe: {mode: {seed: [accuracy per epoch]}}}"""
    runs = defaultdict(lambda: defaultdict(dict))
    for path in sorted(glob.glob(os.path.join(directory, "*__*__seed*.csv"))):
        recipe, mode, seed = os.path.basename(path)[: -len(".csv")].split("__")
        with open(path) as f:
            rows = list(csv.DictReader(f))
        if not rows:
            raise SystemExit(f"training_report: {path} has no rows")
        runs[recipe][mode][int(seed[len("seed"):])] = [100.0 * float(r["test_accuracy"]) for r in rows]
    if not runs:
        raise SystemExit(f"training_report: no <recipe>__<mode>__seed<N>.csv in {directory}")
    return runs


def ordered(modes):
    return sorted(modes, key=lambda m: MODE_ORDER.index(m) if m in MODE_ORDER else len(MODE_ORDER))


def summary(runs):
    lines = ["| recipe | mode | seeds | test accuracy, last epoch: mean | std | min | max | vs float32 (points) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for recipe in sorted(runs):
        finals = {mode: [curve[-1] for curve in seeds.values()] for mode, seeds in runs[recipe].items()}
        base = statistics.mean(finals["float32"]) if "float32" in finals else None
        for mode in ordered(finals):
            values = finals[mode]
            mean = statistics.mean(values)
            std = statistics.stdev(values) if len(values) > 1 else 0.0
            gap = f"{mean - base:+.2f}" if base is not None else "-"
            lines.append(f"| {recipe} | {MODE_LABEL.get(mode, mode)} | {len(values)} | {mean:.2f}% | {std:.2f} | "
                         f"{min(values):.2f}% | {max(values):.2f}% | {gap} |")
    return "\n".join(lines) + "\n"


def figure(runs, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("training_report: matplotlib is not installed; no figure")
        return
    recipes = sorted(runs)
    fig, axes = plt.subplots(1, len(recipes), figsize=(5.5 * len(recipes), 4.5), squeeze=False)
    for axis, recipe in zip(axes[0], recipes):
        for mode in ordered(runs[recipe]):
            curves = list(runs[recipe][mode].values())
            epochs = range(1, min(len(c) for c in curves) + 1)
            columns = [[c[e - 1] for c in curves] for e in epochs]
            mean = [statistics.mean(col) for col in columns]
            line, = axis.plot(epochs, mean, marker="o", markersize=3, label=MODE_LABEL.get(mode, mode))
            axis.fill_between(epochs, [min(col) for col in columns], [max(col) for col in columns],
                              color=line.get_color(), alpha=0.2)
        axis.set(title=f"{recipe} ({len(curves)} seeds: mean, min to max)", xlabel="epoch",
                 ylabel="test accuracy (%)")
        low = min(statistics.mean(c[-1] for c in runs[recipe][m].values()) for m in runs[recipe] if m != "1bit_after")
        axis.set_ylim(max(low - 6.0, 0.0), min(low + 4.0, 100.0))
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"training_report: wrote {path}")


def main(directory):
    runs = load(directory)
    table = summary(runs)
    with open(os.path.join(directory, "summary.md"), "w") as f:
        f.write(table)
    print(table, end="")
    figure(runs, os.path.join(directory, "accuracy.png"))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
