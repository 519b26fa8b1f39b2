#!/usr/bin/env python3
"""Compares two builds measured in the same call (run_device.sh step `ab`): per (data, MiB, checksums, layout) the
median over runs of encode and decode speed / same-run roofline for build A and build B, and B / A as the ratio of
the speeds themselves (GB/s: the same-run memcpy that sets each run's roofline moves by up to 30% at 1-4 MiB, the
codec's speed does not); then the microseconds of one isolated call, warm and (where both benches measured it)
cold, for A and B. CSVs of the max mode's bench (bench_entropy_gpu: a chunk_log2 column) are keyed by (data, MiB,
chunk) and give GB/s and roofline fractions only.

    python3 bench/gpu/ab_table.py A_run1.csv A_run2.csv ... -- B_run1.csv B_run2.csv ...
"""
import csv
import signal
import statistics
import sys

FIELDS = ("enc_roof", "dec_roof", "enc_us", "dec_us", "enc_cold_us", "dec_cold_us", "enc_GBps", "dec_GBps")
# The max mode's bench: its column of each field above (None: not measured there).
ENTROPY = {"enc_roof": "enc_roof", "dec_roof": "dec_roof", "enc_GBps": "enc_gbps", "dec_GBps": "dec_gbps"}


def load(paths):
    by = {}
    for p in paths:
        for r in csv.DictReader(open(p)):
            if "chunk_log2" in r:  # max mode: (data, MiB, chunk) in the checksums and layout columns' places
                k = (r["data"], float(r["mib"]), f"2^{r['chunk_log2']}", "contiguous")
                by.setdefault(k, []).append(tuple(float(r[ENTROPY[f]]) if f in ENTROPY else None for f in FIELDS))
                continue
            k = (r["data"], float(r["MiB"]), r["checksums"], r["layout"])
            by.setdefault(k, []).append(tuple(float(r[f]) if r.get(f) else None for f in FIELDS))
    out = {}
    for k, vs in by.items():
        cols = []
        for i in range(len(FIELDS)):
            got = [v[i] for v in vs if v[i] is not None]
            cols.append(statistics.median(got) if got else None)
        out[k] = dict(zip(FIELDS, cols))
    return out


def us(x):
    return "–" if x is None else f"{x:.1f}"


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet when piped to head
    args = sys.argv[1:]
    cut = args.index("--")
    a, b = load(args[:cut]), load(args[cut + 1:])
    print("| data | MiB | cks | layout | enc A | enc B | B/A | dec A | dec B | B/A | enc us A / B | dec us A / B "
          "| cold enc us A / B | cold dec us A / B |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for k in sorted(a, key=lambda k: (k[0], k[1], k[2], k[3])):
        if k not in b:
            continue
        x, y = a[k], b[k]
        print(f"| {k[0]} | {k[1]:g} | {k[2]} | {k[3]} | {x['enc_roof']:.3f} | {y['enc_roof']:.3f} | "
              f"{y['enc_GBps'] / x['enc_GBps']:.3f} | {x['dec_roof']:.3f} | {y['dec_roof']:.3f} | "
              f"{y['dec_GBps'] / x['dec_GBps']:.3f} | {us(x['enc_us'])} / {us(y['enc_us'])} | "
              f"{us(x['dec_us'])} / {us(y['dec_us'])} | {us(x['enc_cold_us'])} / {us(y['enc_cold_us'])} | "
              f"{us(x['dec_cold_us'])} / {us(y['dec_cold_us'])} |")


if __name__ == "__main__":
    main()
