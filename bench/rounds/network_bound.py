#!/usr/bin/env python3
"""The network-bound round: where the network is the bottleneck, gradagg's 1-bit exchange against the float32
collectives, timed in the same run, and one table of the ratios with the phase times.

  1. cpu: 4 emulated nodes x 1 CPU rank on tc-shaped 1 Gbit/s links (scripts/emulated_cluster.sh; needs root),
     1 bit vs MPI_Allreduce at 4, 16 and 64 MiB; once as Open MPI comes, once with its TCP progress thread
     (--mca btl_tcp_progress_thread 1), which moves large messages while the ranks quantize.
  2. gpu: 2 GPUs as 2 nodes of 1, all traffic over TCP on loopback: NCCL forced to its socket transport, Open MPI
     to its TCP transport, gradagg's staged exchange; 1 bit vs ncclAllReduce and MPI_Allreduce, 1 MiB to 1 GiB.
     Skipped (and said so) where fewer than 2 GPUs are visible.

  bench/rounds/network_bound.py OUT_DIR [--bin DIR] [--parts cpu,gpu] [--iters N] [--eager-limit BYTES]

Open MPI's TCP eager limit is raised to 1 MiB by default (--eager-limit 0 keeps Open MPI's 64 KiB), as docs/multi-node.md
recommends for 1-bit traffic: a few MiB of gradient make 1-bit messages of tens of KB, which would otherwise each
wait for a rendezvous round trip. It applies to gradagg and MPI_Allreduce alike; NCCL does not use it.

Writes OUT_DIR/summary.md (the table, with the commands) and each run's JSON and log. Exit status 0 only if every
part that ran succeeded.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MIB = 1 << 20
# NCCL and Open MPI both over TCP on loopback, as between two hosts with one NIC each.
SOCKET_ENV = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_IB_DISABLE": "1", "NCCL_NET": "Socket",
              "NCCL_SOCKET_IFNAME": "lo", "NCCL_NVLS_ENABLE": "0"}
TCP_MCA = ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo"]


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="directory for summary.md, the JSON results and the logs")
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"), help="where gradagg is")
    parser.add_argument("--parts", default="cpu,gpu", help="which comparisons: cpu, gpu or both (default)")
    parser.add_argument("--iters", type=int, default=5, help="timed calls per size (default 5)")
    parser.add_argument("--eager-limit", type=int, default=1 << 20,
                        help="Open MPI's TCP eager limit in bytes (default 1 MiB; 0: Open MPI's own)")
    args = parser.parse_args(argv)
    args.parts = [p for p in args.parts.split(",") if p]
    unknown = [p for p in args.parts if p not in ("cpu", "gpu")]
    if unknown or not args.parts:
        parser.error(f"--parts takes cpu, gpu or cpu,gpu, not '{','.join(unknown) or args.parts}'")
    if args.iters < 1:
        parser.error("--iters must be at least 1")
    if args.eager_limit < 0:
        parser.error("--eager-limit must be 0 or more bytes")
    return args


def gpu_count():
    if shutil.which("nvidia-smi") is None:
        return 0
    result = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return sum(1 for line in result.stdout.splitlines() if line.startswith("GPU "))


def run(name, command, env, out):
    """Runs one gradagg launch; returns its JSON results (None on failure, with the log kept)."""
    log = os.path.join(out, name + ".log")
    with open(log, "w") as handle:
        handle.write("$ " + " ".join(command) + "\n")
        handle.flush()
        status = subprocess.run(command, env={**os.environ, **env}, stdout=handle, stderr=subprocess.STDOUT).returncode
    path = os.path.join(out, name + ".json")
    if status != 0 or not os.path.exists(path):
        print(f"network_bound_round: {name} failed (exit {status}); see {log}", file=sys.stderr)
        return None
    with open(path) as handle:
        return json.load(handle)


def rows_of(setup, results, baselines):
    rows = []
    for r in results["results"]:
        phases = r["phases_us"]
        row = {"setup": setup, "bytes": r["bytes"], "time": r["time_us"], "quantize": phases["quantize"],
               "exchange": phases["exchange"], "decode": phases["decode"], "wire": r["inter_node_bytes_per_rank"]}
        for key, label in baselines:
            base = r.get(key)
            row[label] = (base, base / r["time_us"]) if base else None
        rows.append(row)
    return rows


def size_text(n):
    return f"{n // MIB} MiB" if n < 1024 * MIB else f"{n // (1024 * MIB)} GiB"


def table(rows, labels):
    lines = ["| setup | size | gradagg 1 bit (us) | " + " | ".join(f"{l} (us) | vs {l}" for l in labels) +
             " | quantize | exchange | decode (us) | wire (B/rank) |",
             "| --- | --- | --- | " + " | ".join("--- | ---" for _ in labels) + " | --- | --- | --- | --- |"]
    for row in rows:
        cells = []
        for label in labels:
            value = row.get(label)
            cells.append(f"{value[0]:.0f} | {value[1]:.2f}x" if value else "- | -")
        lines.append(f"| {row['setup']} | {size_text(row['bytes'])} | {row['time']:.0f} | " + " | ".join(cells) +
                     f" | {row['quantize']:.0f} | {row['exchange']:.0f} | {row['decode']:.0f} | {row['wire']} |")
    return "\n".join(lines)


def main(argv):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    gradagg = os.path.join(args.bin, "gradagg")
    if not os.access(gradagg, os.X_OK):
        sys.exit(f"network_bound_round: no gradagg in {args.bin} (build first: scripts/build.sh)")
    sections, commands, failed = [], [], False
    common = ["--bits", "1", "-n", str(args.iters), "-w", "1"]
    eager = [] if args.eager_limit == 0 else ["--mca", "btl_tcp_eager_limit", str(args.eager_limit), "--mca",
                                              "btl_tcp_rndv_eager_limit", str(args.eager_limit)]

    if "cpu" in args.parts:
        rows = []
        for name, extra in (("cpu_emulated_1gbit", []), ("cpu_emulated_1gbit_progress_thread",
                                                          ["--mca", "btl_tcp_progress_thread", "1"])):
            json_path = os.path.join(os.path.abspath(args.out), name + ".json")
            command = [os.path.join(ROOT, "scripts", "emulated_cluster.sh"), "--nodes", "4", "--slots", "1", "--rate",
                       "1gbit", "--", *eager, *extra, "-np", "4", gradagg, "--device", "cpu", *common, "-b", "4M", "-e",
                       "64M", "-f", "4", "--json", json_path]
            commands.append(" ".join(command))
            results = run(name, command, {}, args.out)
            failed |= results is None
            if results:
                setup = "4x1 CPU, 1 Gbit/s" + (", progress thread" if extra else "")
                rows += rows_of(setup, results, [("mpi_allreduce_time_us", "MPI_Allreduce")])
        if rows:
            sections.append("## CPU ranks, emulated 1 Gbit/s links\n\n" + table(rows, ["MPI_Allreduce"]))

    if "gpu" in args.parts:
        gpus = gpu_count()
        if gpus < 2:
            sections.append(f"## GPUs over TCP loopback\n\nSkipped: {gpus} GPU(s) visible, 2 needed.")
        else:
            name = "gpu_2x1_tcp_loopback"
            json_path = os.path.join(os.path.abspath(args.out), name + ".json")
            env = {**SOCKET_ENV, "LD_LIBRARY_PATH": args.bin + ":" + os.environ.get("LD_LIBRARY_PATH", "")}
            command = ["mpirun", "--allow-run-as-root", "--bind-to", "none", *TCP_MCA, *eager, "-x", "LD_LIBRARY_PATH",
                       *[x for key in SOCKET_ENV for x in ("-x", key)], "-np", "2",
                       os.path.join(ROOT, "scripts", "bind_local_gpu.sh"), gradagg, "--device", "cuda",
                       "--ranks-per-node", "1", "--cuda-aware-mpi", "off", *common, "-b", "1M", "-e", "1G", "-f", "4",
                       "--json", json_path]
            commands.append(" ".join(f"{k}={v}" for k, v in SOCKET_ENV.items()) + " " + " ".join(command))
            results = run(name, command, env, args.out)
            failed |= results is None
            if results:
                rows = rows_of("2x1 GPU, TCP loopback", results,
                               [("nccl_allreduce_time_us", "ncclAllReduce"), ("mpi_allreduce_time_us", "MPI_Allreduce")])
                sections.append("## GPUs as 2 nodes over TCP loopback\n\n" + table(rows, ["ncclAllReduce", "MPI_Allreduce"]))

    commands = [c.replace(ROOT + "/", "") for c in commands]  # paths relative to the repository
    summary = "# Network-bound round\n\n" + "\n\n".join(sections) + "\n\nCommands:\n\n" + "\n".join(
        f"    {c}" for c in commands) + "\n"
    with open(os.path.join(args.out, "summary.md"), "w") as handle:
        handle.write(summary)
    print(summary)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
