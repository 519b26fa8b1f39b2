#!/usr/bin/env python3
"""Compares two builds measured in the same call (run_device.sh step `ab`): per (data, MiB, checksums, layout) the
median over runs of encode and decode speed / same-run roofline for build A and build B, and B / A.

    python3 bench/gpu/ab_table.py A_run1.csv A_run2.csv ... -- B_run1.csv B_run2.csv ...
"""
import csv
import statistics
import sys


def load(paths):
    by = {}
    for p in paths:
        for r in csv.DictReader(open(p)):
            k = (r["data"], float(r["MiB"]), r["checksums"], r["layout"])
            by.setdefault(k, []).append((float(r["enc_roof"]), float(r["dec_roof"]), float(r["dec_us"])))
    return {k: tuple(statistics.median(v[i] for v in vs) for i in range(3)) for k, vs in by.items()}


def main():
    args = sys.argv[1:]
    cut = args.index("--")
    a, b = load(args[:cut]), load(args[cut + 1:])
    print("| data | MiB | cks | layout | enc A | enc B | B/A | dec A | dec B | B/A | dec us A | dec us B |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for k in sorted(a, key=lambda k: (k[0], k[1], k[2], k[3])):
        if k not in b:
            continue
        (ea, da, ua), (eb, db, ub) = a[k], b[k]
        print(f"| {k[0]} | {k[1]:g} | {k[2]} | {k[3]} | {ea:.3f} | {eb:.3f} | {eb / ea:.3f} | {da:.3f} | {db:.3f} | "
              f"{db / da:.3f} | {ua:.1f} | {ub:.1f} |")


if __name__ == "__main__":
    main()
