#!/usr/bin/env python3
"""The table of a local-steps round (bench/rounds/local_steps.sh): one row per run JSON in DIR (train_gpt.py --json),
its final validation loss against DDP's and float32 DiLoCo's of the same seed (the runs labelled DDP_LABEL and
DILOCO_LABEL), the bits per element of each synchronisation and the bytes a rank sent across nodes per step, counted
by gradagg, against DDP's float32 ring allreduce over NODES ranks (2 (N - 1) / N of 4 bytes per parameter). Then, for
the held-out seeds, each label's mean and range, and its per-seed distance to float32 DiLoCo and to DDP (mean, range)
over the seeds where both ran.
    bench/rounds/local_steps_table.py DIR [--nodes 4] [--ddp ddp] [--diloco diloco32] [--held-out 4 5 6]"""
import argparse
import glob
import json
import os


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder")
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--ddp", default="ddp", help="DDP_LABEL")
    parser.add_argument("--diloco", default="diloco32", help="DILOCO_LABEL")
    parser.add_argument("--held-out", type=int, nargs="+", default=[4, 5, 6], help="the seeds kept out of tuning")
    args = parser.parse_args()
    runs = [json.load(open(path)) for path in sorted(glob.glob(os.path.join(args.folder, "*.json")))]
    final = {(r["label"], r["seed"]): r["final_validation_loss"] for r in runs}
    print("| run | seed | steps | validation | vs DDP | vs float32 DiLoCo | bits per element a sync | "
          "bytes a step, rank | fewer than DDP | seconds |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in sorted(runs, key=lambda r: (r["seed"], r["label"])):
        loss = r["final_validation_loss"]
        ddp_bytes = 2 * (args.nodes - 1) / args.nodes * 4 * r["parameters"]

        def versus(label):
            other = final.get((label, r["seed"]))
            return "" if other is None or label == r["label"] else f"{100 * (loss / other - 1):+.2f}%"
        local = r["args"]["exchange"] == "local"
        sent = r["bytes_per_step"] if local else ddp_bytes
        print(f"| {r['label']} | {r['seed']} | {r['steps']} | {loss:.4f} | {versus(args.ddp)} | {versus(args.diloco)} "
              f"| {r['bits_per_element'] if local else 32} | {sent / 1e3:,.0f} kB | "
              f"{ddp_bytes / sent:,.0f}x | {r['seconds']} |")
    held_out(final, args)


def held_out(final, args):
    """The held-out seeds' summary: mean and range of each label, and of its per-seed distance to the baselines."""
    def spread(values, form):
        values = sorted(values)
        if len(values) < 2:
            return "".join(form(v) for v in values)
        return f"{form(sum(values) / len(values))} ({form(values[0])} to {form(values[-1])})"

    def distance(label, baseline):
        return [100 * (final[(label, s)] / final[(baseline, s)] - 1)
                for s in args.held_out if (label, s) in final and (baseline, s) in final and label != baseline]
    labels = sorted({label for label, seed in final if seed in args.held_out})
    print(f"\nHeld-out seeds {', '.join(map(str, args.held_out))}: mean (range)\n")
    print("| run | seeds | validation | vs float32 DiLoCo | vs DDP |")
    print("| --- | --- | --- | --- | --- |")
    for label in labels:
        seeds = [s for s in args.held_out if (label, s) in final]
        losses = [final[(label, s)] for s in seeds]
        print(f"| {label} | {', '.join(map(str, seeds))} | {spread(losses, lambda v: f'{v:.4f}')} | "
              f"{spread(distance(label, args.diloco), lambda v: f'{v:+.2f}%')} | "
              f"{spread(distance(label, args.ddp), lambda v: f'{v:+.2f}%')} |")


if __name__ == "__main__":
    main()
