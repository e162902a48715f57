#!/usr/bin/env python3
"""Draws training runs of build/bin/train (their --csv files) on one figure: test accuracy and train loss per
epoch, one line per mode.

  scripts/plot_training.py bench/results/train.png bench/results/train_*.csv

Needs matplotlib (apt-get install python3-matplotlib, or pip install matplotlib).
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(png_path, csv_paths):
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for path in csv_paths:
        with open(path) as f:
            rows = list(csv.DictReader(f))
        if not rows:
            raise SystemExit(f"plot_training: {path} has no rows")
        epochs = [int(r["epoch"]) for r in rows]
        label = rows[0]["mode"]
        left.plot(epochs, [100 * float(r["test_accuracy"]) for r in rows], marker="o", label=label)
        right.plot(epochs, [float(r["train_loss"]) for r in rows], marker="o", label=label)
    left.set(xlabel="epoch", ylabel="test accuracy (%)", title="Fashion-MNIST test accuracy")
    right.set(xlabel="epoch", ylabel="train loss (cross-entropy)", yscale="log", title="train loss")
    for axis in (left, right):
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(png_path, dpi=110)
    print(f"plot_training: wrote {png_path}")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2:])
