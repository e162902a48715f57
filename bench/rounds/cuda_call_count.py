#!/usr/bin/env python3
"""CUDA runtime calls per aggregation call: kernel launches, copies, event records and queries, and host waits.

  bench/rounds/cuda_call_count.py [--counter LIB] [--iters A,B] [--json FILE] -- mpirun ... gradagg ... [gradagg options]

Runs the gradagg command twice, with -n A and then -n B timed calls appended (the command must not set -n; use
--size for one size and --no-baseline --no-nccl, so that only gradagg's calls differ between the runs), each rank
preloading the counter (build/lib/libgradagg_cuda_call_counter.so, built with CUDA and the shared runtime). The
difference of each rank's counts, divided by B - A, is what one call costs: setup, warm-up and exit cancel out.
Exit status 0 only if both runs succeed and every rank reports.
"""
import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINE = re.compile(r"^# cuda calls \(rank (\d+)\): (.*)$")


def counts_of(command, iters, counter):
    """Runs the command with -n iters; returns {rank: {counter: count}}."""
    command = list(command)
    if os.path.basename(command[0]) in ("mpirun", "mpiexec"):
        command[1:1] = ["-x", "LD_PRELOAD"]
    env = dict(os.environ, LD_PRELOAD=counter)
    result = subprocess.run(command + ["-n", str(iters)], env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stdout + result.stderr)
        raise SystemExit(f"cuda_call_count: the run with -n {iters} failed (exit {result.returncode})")
    ranks = {}
    for line in result.stderr.splitlines():
        match = LINE.match(line)
        if match:
            ranks[int(match.group(1))] = {k: int(v) for k, v in (item.split("=") for item in match.group(2).split())}
    if not ranks:
        raise SystemExit("cuda_call_count: no rank reported counts (was the counter preloaded? is the runtime shared?)")
    return ranks


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--counter", default=os.path.join(ROOT, "build", "lib", "libgradagg_cuda_call_counter.so"))
    parser.add_argument("--iters", default="10,30", help="the two timed-call counts A,B (default 10,30)")
    parser.add_argument("--json", help="also write the per-call counts here")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the gradagg command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    if any(word in ("-n", "--iters") for word in command):
        parser.error("the command must not set -n/--iters: this script sets it")
    try:
        low, high = (int(x) for x in args.iters.split(","))
    except ValueError:
        parser.error(f"--iters takes A,B, not '{args.iters}'")
    if not 0 <= low < high:
        parser.error("--iters needs 0 <= A < B")
    if not os.path.exists(args.counter):
        parser.error(f"no counter library at {args.counter} (build with CUDA: scripts/build.sh)")

    first, second = counts_of(command, low, args.counter), counts_of(command, high, args.counter)
    if sorted(first) != sorted(second):
        raise SystemExit("cuda_call_count: the two runs reported different ranks")
    per_call = {rank: {name: (second[rank][name] - first[rank][name]) / (high - low) for name in second[rank]}
                for rank in sorted(second)}
    names = list(per_call[min(per_call)])
    print("# CUDA runtime calls per aggregation call (runs with -n %d and -n %d): %s" % (low, high, " ".join(command)))
    print("| call | " + " | ".join(f"rank {r}" for r in per_call) + " |")
    print("| --- |" + " --- |" * len(per_call))
    for name in names:
        print(f"| {name} | " + " | ".join(f"{per_call[r][name]:g}" for r in per_call) + " |")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"command": command, "iters": [low, high], "per_call": per_call}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
