#!/usr/bin/env python3
"""Scaling sweep: run the gradagg CLI over nodes x ranks per node x bits (sizes inside each run) and write one
JSON and one CSV table. The same script drives the emulated cluster on one host and a real cluster.

  # one host, emulated nodes on a 1 Gbit/s network (root):
  scripts/scaling_sweep.py --emulated --rate 1gbit --nodes 1,2,4 --ranks-per-node 1 --bits 1,32 \
      --min 4M --max 256M --out /tmp/sweep_1gbit
  # a real cluster (one host per line in the hostfile; the first N are used for N nodes), one GPU per rank:
  scripts/scaling_sweep.py --hostfile hosts --nodes 2,4,8 --ranks-per-node 8 --bits 1,32 \
      --wrapper scripts/bind_local_gpu.sh --out sweep

Every row holds the device the run used, gradagg's time, MPI_Allreduce's time for the same gradient in the same run
(and NCCL's on GPUs), per-phase times and the bytes each rank sent across nodes; the table is printed at the end.
Extra mpirun options: --mpirun-args "..."; a program that each rank runs gradagg through: --wrapper "...".
"""
import argparse
import csv
import json
import os
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLUMNS = ["nodes", "ranks_per_node", "ranks", "bits", "rate", "device", "bytes", "time_us", "mpi_allreduce_time_us",
           "speedup_vs_mpi", "nccl_allreduce_time_us", "inter_node_bytes_per_rank", "inter_node_float_bytes_per_rank",
           "reduce_scatter_us", "quantize_us", "exchange_us", "decode_us", "all_gather_us", "check"]


def int_list(text):
    try:
        values = [int(v) for v in text.split(",") if v]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma-separated list of integers")
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"'{text}' must list positive integers")
    return values


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--emulated", action="store_true", help="emulated nodes on this host (root; see emulated_cluster.sh)")
    where.add_argument("--hostfile", help="a real cluster: one host name per line (extra columns are ignored)")
    parser.add_argument("--nodes", type=int_list, default=[1, 2, 4], help="node counts, e.g. 1,2,4")
    parser.add_argument("--ranks-per-node", type=int_list, default=[1], help="ranks per node, e.g. 1,2")
    parser.add_argument("--bits", type=int_list, default=[1, 32], help="gradagg --bits values")
    parser.add_argument("--min", default="4M", help="smallest size (gradagg -b)")
    parser.add_argument("--max", default="64M", help="largest size (gradagg -e)")
    parser.add_argument("--factor", type=int, default=4, help="size factor (gradagg -f)")
    parser.add_argument("--iters", type=int, default=5, help="timed iterations (gradagg -n)")
    parser.add_argument("--warmups", type=int, default=1, help="warm-ups (gradagg -w)")
    parser.add_argument("--rate", default="", help="emulated link rate, tc syntax (e.g. 1gbit); unshaped if empty")
    parser.add_argument("--check", action="store_true", help="also --check every run")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="gradagg --device (default auto: GPUs where every rank sees one, else CPU; the table "
                             "says which ran)")
    parser.add_argument("--wrapper", default="",
                        help="a command each rank runs gradagg through, e.g. scripts/bind_local_gpu.sh")
    parser.add_argument("--bind-to", default="core", help="real cluster: mpirun --bind-to (core, socket, none)")
    parser.add_argument("--gradagg", default=os.path.join(ROOT, "build", "bin", "gradagg"), help="the CLI binary")
    parser.add_argument("--mpirun-args", default="", help="extra mpirun options (real cluster: binding, btl, ...)")
    parser.add_argument("--out", required=True, help="output path without extension: writes OUT.json and OUT.csv")
    args = parser.parse_args(argv)
    if args.rate and not args.emulated:
        parser.error("--rate shapes the emulated network only")
    if not os.access(args.gradagg, os.X_OK):
        parser.error(f"{args.gradagg} is not an executable; build first (scripts/build.sh)")
    return args


def hosts_from(path):
    with open(path) as f:
        return [line.split()[0] for line in f if line.strip() and not line.lstrip().startswith("#")]


def launch_command(args, nodes, per_node, json_path, bits, workdir):
    gradagg = shlex.split(args.wrapper) + [
        args.gradagg, "--device", args.device, "--bits", str(bits), "-b", args.min, "-e", args.max, "-f",
        str(args.factor), "-n", str(args.iters), "-w", str(args.warmups), "--json", json_path]
    if args.check:
        gradagg.append("--check")
    ranks = ["-np", str(nodes * per_node)]
    extra = shlex.split(args.mpirun_args)
    if args.emulated:
        cluster = [os.path.join(ROOT, "scripts", "emulated_cluster.sh"), "--nodes", str(nodes), "--slots",
                   str(per_node)]
        if args.rate:
            cluster += ["--rate", args.rate]
        return cluster + ["--"] + extra + ranks + gradagg
    hosts = hosts_from(args.hostfile)
    if len(hosts) < nodes:
        raise SystemExit(f"scaling_sweep: {args.hostfile} lists {len(hosts)} hosts, {nodes} needed")
    hostfile = os.path.join(workdir, f"hosts.{nodes}x{per_node}")
    with open(hostfile, "w") as f:
        f.writelines(f"{host} slots={per_node}\n" for host in hosts[:nodes])
    return (["mpirun", "--hostfile", hostfile, "--map-by", f"ppr:{per_node}:node", "--bind-to", args.bind_to] +
            extra + ranks + gradagg)


def rows_from(result, nodes, per_node, bits, rate):
    for r in result["results"]:
        phases = r["phases_us"]
        mpi = r.get("mpi_allreduce_time_us", 0.0)
        nccl = r.get("nccl_allreduce_time_us", 0.0)
        yield {
            "nodes": nodes, "ranks_per_node": per_node, "ranks": nodes * per_node, "bits": bits, "rate": rate,
            "device": result["device"], "bytes": r["bytes"], "time_us": round(r["time_us"], 1),
            "mpi_allreduce_time_us": round(mpi, 1),
            "speedup_vs_mpi": round(mpi / r["time_us"], 3) if mpi and r["time_us"] else "",
            "nccl_allreduce_time_us": round(nccl, 1) if nccl else "",
            "inter_node_bytes_per_rank": r["inter_node_bytes_per_rank"],
            "inter_node_float_bytes_per_rank": r["inter_node_float_bytes_per_rank"],
            "reduce_scatter_us": round(phases["reduce_scatter"], 1), "quantize_us": round(phases["quantize"], 1),
            "exchange_us": round(phases["exchange"], 1), "decode_us": round(phases["decode"], 1),
            "all_gather_us": round(phases["all_gather"], 1), "check": result["check"] or "",
        }


def main(argv):
    args = parse_args(argv)
    rows = []
    rate = (args.rate or "unshaped") if args.emulated else "site"
    with tempfile.TemporaryDirectory(prefix="gradagg-sweep-") as workdir:
        for nodes in args.nodes:
            for per_node in args.ranks_per_node:
                for bits in args.bits:
                    json_path = os.path.join(workdir, f"run.{nodes}.{per_node}.{bits}.json")
                    command = launch_command(args, nodes, per_node, json_path, bits, workdir)
                    print(f"# {nodes} nodes x {per_node} ranks, {bits} bits: {shlex.join(command)}", flush=True)
                    completed = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                    if completed.returncode != 0:
                        sys.stderr.write(completed.stdout)
                        raise SystemExit(f"scaling_sweep: run failed with exit code {completed.returncode}")
                    with open(json_path) as f:
                        rows.extend(rows_from(json.load(f), nodes, per_node, bits, rate))
    with open(args.out + ".json", "w") as f:
        json.dump({"command": shlex.join(["scripts/scaling_sweep.py"] + argv), "rows": rows}, f, indent=1)
    with open(args.out + ".csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print_table(rows)
    print(f"# wrote {len(rows)} rows to {args.out}.json and {args.out}.csv")


TABLE = [("nodes", "nodes"), ("ranks_per_node", "per node"), ("bits", "bits"), ("device", "device"),
         ("bytes", "bytes"), ("time_us", "gradagg us"), ("mpi_allreduce_time_us", "MPI_Allreduce us"),
         ("speedup_vs_mpi", "x MPI"), ("nccl_allreduce_time_us", "NCCL us"),
         ("inter_node_bytes_per_rank", "bytes across nodes per rank"), ("check", "check")]


def print_table(rows):
    """The rows as an aligned text table, the columns a reader compares first (the files hold them all)."""
    cells = [[title for _, title in TABLE]] + [[str(row[key]) for key, _ in TABLE] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(TABLE))]
    for line in cells:
        print("  ".join(cell.rjust(width) for cell, width in zip(line, widths)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
