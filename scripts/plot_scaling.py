#!/usr/bin/env python3
"""Draws a scaling sweep (scripts/scaling_sweep.py's CSV): time and inter-node bytes per rank against the number
of nodes, one line per (algorithm, size), gradagg at each bit width beside MPI_Allreduce of the same gradient.

  scripts/plot_scaling.py bench/results/network_bound/sweeps/emulated_nodes_1gbit.csv bench/results/network_bound/sweeps/emulated_nodes_1gbit.png

Needs matplotlib (apt-get install python3-matplotlib, or pip install matplotlib).
"""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def human(size):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size // scale} {unit}"
    return f"{size} B"


def main(csv_path, png_path):
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise SystemExit(f"plot_scaling: {csv_path} has no rows")
    times = defaultdict(dict)   # (label, size) -> nodes -> ms
    wire = defaultdict(dict)
    # One node sends nothing across a network (with one rank per node the call is the identity): not drawn.
    for r in (r for r in rows if int(r["nodes"]) > 1):
        nodes, size, bits = int(r["nodes"]), int(r["bytes"]), int(r["bits"])
        times[(f"gradagg {bits}-bit", size)][nodes] = float(r["time_us"]) / 1e3
        if bits < 32:
            wire[(f"gradagg {bits}-bit", size)][nodes] = int(r["inter_node_bytes_per_rank"]) / 2**20
        wire[("float32 (gradagg 32-bit)", size)][nodes] = int(r["inter_node_float_bytes_per_rank"]) / 2**20
        if r["mpi_allreduce_time_us"]:
            times[("MPI_Allreduce", size)][nodes] = float(r["mpi_allreduce_time_us"]) / 1e3
    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    for (label, size), series in sorted(times.items()):
        nodes = sorted(series)
        left.plot(nodes, [series[n] for n in nodes], marker="o", linestyle="--" if label == "MPI_Allreduce" else "-",
                  label=f"{label}, {human(size)}")
    for (label, size), series in sorted(wire.items()):
        nodes = sorted(series)
        right.plot(nodes, [series[n] for n in nodes], marker="o", label=f"{label}, {human(size)}")
    rate = rows[0]["rate"]
    left.set(xlabel="nodes", ylabel="time per call (ms)", yscale="log", title=f"time per allreduce ({rate} links)")
    right.set(xlabel="nodes", ylabel="MiB sent across nodes per rank", yscale="log",
              title="inter-node bytes per rank per call")
    for axis in (left, right):
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=7)
        axis.set_xticks(sorted({int(r["nodes"]) for r in rows if int(r["nodes"]) > 1}))
    figure.tight_layout()
    figure.savefig(png_path, dpi=110)
    print(f"plot_scaling: wrote {png_path}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2])
