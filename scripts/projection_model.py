#!/usr/bin/env python3
"""A model of gradagg's time per call, calibrated on measured runs and projected to clusters no one here can run.

Per call, for M nodes x G ranks (GPUs) per node and a float32 gradient of S bytes (every term in seconds):

  gradagg (docs/DESIGN.md's three phases; stripe s = S/G, owned part p = s/M, r = wire bytes per float32 byte):
    phase 1, 3     (G-1)/G * S / B_intra each                   (0 for G = 1: the gradient is used in place)
    quantize       (s + p) / R_enc                              (the stripe, then the owned sum)
    decode         2 s / R_dec                                   (M parts of p twice: sum, then the all-gather)
    exchange       2 [ (M-1) p r / B_link + alpha + 2 (M-1) o ]  (scatter and all-gather: M-1 messages each way)
  float32 ring over all P = M G ranks (B_intra instead of B_link on one node):
                   2 (P-1)/P * S / B_link + (P-1)/P * S / R_red + 2 (P-1) (alpha + 2 o)
  float32 hierarchical: phase 1 + ring over the M nodes on the stripe (S/G) + phase 3.
  gradagg, two-level phase 2 (the remedy for large M): nodes in K = ceil(sqrt(M)) groups; the exchange runs
    among the K nodes of a group, then among the M/K group members of equal position, on 1/K of the stripe:
    messages 2 (K-1) + 2 (M/K-1) instead of 2 (M-1), one more quantize/decode round on s/K.

The per-message term 2 (M-1) o of phase 2 grows with M while its bytes (M-1) p r = s r (M-1)/M do not, so past
some M the exchange is bound by message count, not bandwidth: `project` prints that node count.

  scripts/projection_model.py calibrate CSV...   # fit on emulated runs, print each run's prediction error
  scripts/projection_model.py project --out bench/results/scaling_projection/projection_1024nodes   # CSV and PNG
"""
import argparse
import csv
import math
import sys
from dataclasses import dataclass, replace

BUCKET = 512


def wire_ratio(bits, bucket=BUCKET):
    """Wire bytes per float32 byte for whole buckets (quantize/wire_format.h)."""
    if bits == 32:
        return 1.0
    return (8 + 4 * math.ceil(bucket * bits / 32)) / (4 * bucket)


@dataclass
class Machine:
    ranks_per_node: int
    link: float        # bytes/s each rank can send (and receive) across nodes
    alpha: float       # s, one-way latency of a message
    overhead: float    # s, software cost per message sent or received
    intra_busbw: float  # bytes/s, intra-node reduce-scatter / all-gather bus bandwidth
    encode: float      # float32 bytes/s the quantizer encodes (with error feedback), bits 1-8
    decode: float      # float32 bytes/s decoded (decode or decode-accumulate), bits 1-8
    reduce: float      # float32 bytes/s a plain allreduce sums
    raw_encode: float = math.inf  # bits 32: the "quantize" and "decode" phases are copies and sums
    raw_decode: float = math.inf


def intra_phase(m, size):
    g = m.ranks_per_node
    return 0.0 if g == 1 else (g - 1) / g * size / m.intra_busbw


def gradagg(m, nodes, size, bits):
    stripe = size / m.ranks_per_node
    phases = {"intra": 2 * intra_phase(m, size), "quantize": 0.0, "decode": 0.0, "exchange": 0.0}
    if nodes > 1:
        part = stripe / nodes
        encode, decode = (m.raw_encode, m.raw_decode) if bits == 32 else (m.encode, m.decode)
        phases["quantize"] = (stripe + part) / encode
        phases["decode"] = 2 * stripe / decode
        phases["exchange"] = 2 * ((nodes - 1) * part * wire_ratio(bits) / m.link + m.alpha +
                                  2 * (nodes - 1) * m.overhead)
    phases["total"] = sum(phases.values())
    return phases


def gradagg_two_level(m, nodes, size, bits):
    """Phase 2 in two rounds: among the K = ceil(sqrt(M)) nodes of a group, then among the ceil(M/K) nodes of equal
    position in every group on 1/K of the stripe (phases 1 and 3 once, around both)."""
    groups = math.ceil(math.sqrt(nodes))
    if groups < 2 or groups >= nodes:
        return gradagg(m, nodes, size, bits)
    inner = gradagg(m, groups, size, bits)
    outer = gradagg(replace(m, ranks_per_node=1), math.ceil(nodes / groups), size / m.ranks_per_node / groups, bits)
    return {key: inner[key] + outer[key] for key in inner}


def ring(m, ranks, size, bandwidth=None):
    """A ring over `ranks` ranks with every hop at `bandwidth` (default: the network's)."""
    if ranks == 1:
        return 0.0
    bandwidth = m.link if bandwidth is None else bandwidth
    return (2 * (ranks - 1) / ranks * size / bandwidth + (ranks - 1) / ranks * size / m.reduce +
            2 * (ranks - 1) * (m.alpha + 2 * m.overhead))


def hierarchical(m, nodes, size):
    return 2 * intra_phase(m, size) + ring(m, nodes, size / m.ranks_per_node)


# ----------------------------------------------------------------------------------------------- calibration
def rate_bytes(text):
    units = {"gbit": 1e9, "mbit": 1e6, "kbit": 1e3}
    for unit, scale in units.items():
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale / 8
    raise ValueError(f"unknown rate '{text}'")


def least_squares(rows):
    """Solves min sum (x . beta - y)^2 for beta by the normal equations (few unknowns, no numpy needed)."""
    n = len(rows[0][0])
    a = [[sum(x[i] * x[j] for x, _ in rows) for j in range(n)] for i in range(n)]
    b = [sum(x[i] * y for x, y in rows) for i in range(n)]
    for col in range(n):  # Gaussian elimination with partial pivoting
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        a[col], a[pivot] = a[pivot], a[col]
        b[col], b[pivot] = b[pivot], b[col]
        for r in range(col + 1, n):
            f = a[r][col] / a[col][col]
            a[r] = [a[r][k] - f * a[col][k] for k in range(n)]
            b[r] -= f * b[col]
    beta = [0.0] * n
    for r in reversed(range(n)):
        beta[r] = (b[r] - sum(a[r][k] * beta[k] for k in range(r + 1, n))) / a[r][r]
    return beta


def median(values):
    values = sorted(values)
    return values[len(values) // 2] if len(values) % 2 else 0.5 * (values[len(values) // 2 - 1] + values[len(values) // 2])


def calibrate(rows):
    """Fits the emulated cluster (one rank per node) to measured runs, each constant from the measurement that
    isolates it. Returns (gradagg's machine for a tc rate, MPI_Allreduce's machine for a tc rate, notes)."""
    multi = [r for r in rows if r["nodes"] > 1]
    quantized = [r for r in multi if r["bits"] < 32]
    raw = [r for r in multi if r["bits"] == 32]

    def rates(runs):  # float32 bytes/s of the quantize and decode phases, medians over runs
        return (median([(r["bytes"] + r["bytes"] / r["nodes"]) / (r["quantize_us"] * 1e-6) for r in runs]),
                median([2 * r["bytes"] / (r["decode_us"] * 1e-6) for r in runs]))

    encode, decode = rates(quantized)
    raw_encode, raw_decode = rates(raw)
    # The link: the exchange phase of unquantized runs is network time alone; fit wire bytes against it.
    inverse_efficiency, fixed = least_squares(
        [([r["wire_bytes"] / rate_bytes(r["rate"]), 1.0], r["exchange_us"] * 1e-6) for r in raw])
    # MPI_Allreduce through Open MPI's own TCP path: its own efficiency and cost per ring step.
    mpi = [r for r in multi if r["mpi_allreduce_time_us"] > 0]
    mpi_inverse_efficiency, per_step = least_squares(
        [([2 * (r["nodes"] - 1) / r["nodes"] * r["bytes"] / rate_bytes(r["rate"]), 2 * (r["nodes"] - 1)],
          r["mpi_allreduce_time_us"] * 1e-6) for r in mpi])

    def gradagg_machine(rate):
        return Machine(ranks_per_node=1, link=rate_bytes(rate) / inverse_efficiency, alpha=max(fixed, 0.0) / 2,
                       overhead=0.0, intra_busbw=math.inf, encode=encode, decode=decode, reduce=math.inf,
                       raw_encode=raw_encode, raw_decode=raw_decode)

    def mpi_machine(rate):
        return Machine(ranks_per_node=1, link=rate_bytes(rate) / mpi_inverse_efficiency, alpha=per_step, overhead=0.0,
                       intra_busbw=math.inf, encode=math.inf, decode=math.inf, reduce=math.inf)

    notes = (f"per rank: encode {encode / 1e9:.2f} GB/s, decode {decode / 1e9:.2f} GB/s of float32 (1 bit; "
             f"{len(quantized)} runs), raw copy {raw_encode / 1e9:.2f} / {raw_decode / 1e9:.2f} GB/s (32 bits; "
             f"{len(raw)} runs); gradagg's exchange reaches {1 / inverse_efficiency:.3f} of the tc rate, "
             f"{max(fixed, 0) * 1e3:.1f} ms fixed; MPI_Allreduce reaches {1 / mpi_inverse_efficiency:.3f} of it, "
             f"{per_step * 1e3:.2f} ms per ring step ({len(mpi)} runs)")
    return gradagg_machine, mpi_machine, notes


def read_rows(paths):
    rows = []
    for path in paths:
        with open(path) as f:
            for r in csv.DictReader(f):
                rows.append({"nodes": int(r["nodes"]), "ranks_per_node": int(r["ranks_per_node"]),
                             "bits": int(r["bits"]), "rate": r["rate"], "bytes": int(r["bytes"]),
                             "time_us": float(r["time_us"]), "quantize_us": float(r["quantize_us"]),
                             "decode_us": float(r["decode_us"]), "exchange_us": float(r["exchange_us"]),
                             "wire_bytes": int(r["inter_node_bytes_per_rank"]),
                             "mpi_allreduce_time_us": float(r["mpi_allreduce_time_us"] or 0), "source": path})
    return rows


def command_calibrate(args):
    rows = [r for r in read_rows(args.csv) if r["ranks_per_node"] == 1]
    if args.fit_rate:
        fitted_rows = [r for r in rows if r["rate"] == args.fit_rate and r["nodes"] == args.fit_nodes]
    else:
        fitted_rows = rows
    gradagg_machine, mpi_machine, notes = calibrate(fitted_rows)
    print(f"# calibration on {len(fitted_rows)} runs ({args.fit_rate or 'all'} links, {args.fit_nodes} nodes): {notes}")
    print("# | nodes | rate | bits | MiB | algorithm | measured ms | model ms | error | fitted? |")
    print("# | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    errors = []
    for r in sorted(rows, key=lambda r: (r["rate"], r["nodes"], r["bits"], r["bytes"])):
        fitted = r in fitted_rows
        cases = [(f"gradagg {r['bits']}-bit", r["time_us"],
                  gradagg(gradagg_machine(r["rate"]), r["nodes"], r["bytes"], r["bits"])["total"])]
        if r["mpi_allreduce_time_us"] > 0 and r["bits"] == 1:
            cases.append(("MPI_Allreduce", r["mpi_allreduce_time_us"], ring(mpi_machine(r["rate"]), r["nodes"], r["bytes"])))
        for name, measured_us, model_s in cases:
            if r["nodes"] == 1:
                continue  # nothing crosses a network: both are copies and local sums
            error = model_s / (measured_us * 1e-6) - 1
            # A run in the fit set informed the constants (gradagg's through its phases, not its total).
            in_fit = fitted
            errors.append((abs(error), in_fit, name))
            print(f"| {r['nodes']} | {r['rate']} | {r['bits']} | {r['bytes'] >> 20} | {name} | "
                  f"{measured_us / 1e3:.1f} | {model_s * 1e3:.1f} | {error:+.0%} | {'yes' if in_fit else 'no'} |")
    for name in sorted({name for _, _, name in errors}):
        for label, wanted in (("fitted", True), ("held out", False)):
            group = [e for e, in_fit, n in errors if n == name and in_fit == wanted]
            if group:
                print(f"# {name}, {label}: {len(group)} runs, median |error| {median(group):.0%}, "
                      f"worst {max(group):.0%}, within 25%: {sum(e <= 0.25 for e in group)}/{len(group)}")


# ----------------------------------------------------------------------------------------------- projection
def gpu_cluster():
    """1024 nodes x 8 GPUs, 400 Gbit/s per GPU. Intra-node: NCCL's measured 8-GPU busbw (shared/DEVICE.md);
    quantizer: gradagg's CUDA kernels on an H100 (bench/results/quantizer/cuda_benchmark_h100.txt: 1-bit encode
    3.0 TB/s moving 12.14 B per element = 1.0 TB/s of float32 input, decode-accumulate 2.96 TB/s moving 8.14 B =
    1.45 TB/s); network: 90% of line rate, 3 us latency, 1 us software cost per message (assumptions, stated)."""
    return Machine(ranks_per_node=8, link=0.9 * 400e9 / 8, alpha=3e-6, overhead=1e-6, intra_busbw=349e9,
                   encode=1.0e12, decode=1.45e12, reduce=1.45e12, raw_encode=1.5e12, raw_decode=1.5e12)


def command_project(args):
    m = gpu_cluster()
    size = args.megabytes * 2**20
    counts = [2**k for k in range(11)]
    rows = []
    crossover = None
    for nodes in counts:
        g1 = gradagg(m, nodes, size, 1)
        two = gradagg_two_level(m, nodes, size, 1)
        part_bytes = size / m.ranks_per_node / nodes * wire_ratio(1) * (nodes - 1)
        message_term = 2 * 2 * (nodes - 1) * m.overhead
        if crossover is None and nodes > 1 and message_term > 2 * part_bytes / m.link:
            crossover = nodes
        rows.append({"nodes": nodes, "gpus": nodes * m.ranks_per_node,
                     "gradagg_1bit_ms": g1["total"] * 1e3, "gradagg_1bit_exchange_ms": g1["exchange"] * 1e3,
                     "gradagg_1bit_two_level_ms": two["total"] * 1e3,
                     "ring_fp32_ms": ring(m, nodes * m.ranks_per_node, size,
                                          m.intra_busbw if nodes == 1 else m.link) * 1e3,
                     "hierarchical_fp32_ms": hierarchical(m, nodes, size) * 1e3})
    with open(args.out + ".csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"# {args.megabytes} MiB float32 gradient, 8 GPUs per node, 400 Gbit/s per GPU")
    print("# nodes  gradagg-1bit  (exchange)  two-level  ring-fp32  hier-fp32   (ms)")
    for r in rows:
        print(f"  {r['nodes']:5d}  {r['gradagg_1bit_ms']:12.2f}  {r['gradagg_1bit_exchange_ms']:10.2f}  "
              f"{r['gradagg_1bit_two_level_ms']:9.2f}  {r['ring_fp32_ms']:9.2f}  {r['hierarchical_fp32_ms']:9.2f}")
    print(f"# phase 2 becomes bound by its 2(M-1) messages, not bytes, from {crossover} nodes on")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axis = plt.subplots(figsize=(8, 5))
    for key, label in (("gradagg_1bit_ms", "gradagg 1-bit"), ("gradagg_1bit_two_level_ms", "gradagg 1-bit, two-level phase 2"),
                       ("hierarchical_fp32_ms", "hierarchical float32 allreduce"), ("ring_fp32_ms", "flat float32 ring")):
        axis.plot(counts, [r[key] for r in rows], marker="o", label=label)
    axis.plot(counts, [r["gradagg_1bit_exchange_ms"] for r in rows], linestyle=":", label="gradagg 1-bit: phase 2 exchange")
    if crossover:
        axis.axvline(crossover, color="grey", linestyle="--", linewidth=0.8)
        axis.text(crossover, axis.get_ylim()[1] * 0.5, f" message-bound\n from {crossover} nodes", fontsize=8)
    axis.set(xscale="log", yscale="log", xlabel="nodes (8 GPUs each)", ylabel="time per call (ms)",
             title=f"Projected allreduce of {args.megabytes} MiB, 400 Gbit/s per GPU")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(args.out + ".png", dpi=110)
    print(f"# wrote {args.out}.csv and {args.out}.png")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    cal = sub.add_parser("calibrate", help="fit on measured sweeps and print each run's prediction error")
    cal.add_argument("csv", nargs="+", help="scaling_sweep.py CSV files (emulated, one rank per node)")
    cal.add_argument("--fit-rate", default="1gbit", help="fit on runs at this rate only ('' for all)")
    cal.add_argument("--fit-nodes", type=int, default=4, help="fit on runs with this many nodes only")
    proj = sub.add_parser("project", help="project 1..1024 nodes x 8 GPUs")
    proj.add_argument("--megabytes", type=int, default=1024, help="gradient size in MiB (float32)")
    proj.add_argument("--out", required=True, help="output path without extension")
    args = parser.parse_args(argv)
    (command_calibrate if args.command == "calibrate" else command_project)(args)


if __name__ == "__main__":
    main(sys.argv[1:])
