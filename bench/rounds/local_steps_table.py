#!/usr/bin/env python3
"""The table of a local-steps round (bench/rounds/local_steps.sh): one row per run JSON in DIR (train_gpt.py --json),
its final validation loss against DDP's and float32 DiLoCo's of the same seed (the runs labelled DDP_LABEL and
DILOCO_LABEL), the bits per element of each synchronisation and the bytes a rank sent across nodes per step, counted
by gradagg, against DDP's float32 ring allreduce over NODES ranks (2 (N - 1) / N of 4 bytes per parameter).
    bench/rounds/local_steps_table.py DIR [--nodes 4] [--ddp ddp] [--diloco diloco32]"""
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


if __name__ == "__main__":
    main()
