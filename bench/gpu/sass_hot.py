#!/usr/bin/env python3
"""Reads an Nsight Compute SourceCounters CSV (run_device.sh step `sass`) and prints where a kernel's instructions
and stall samples go: totals, the top stall reasons, and the hot instructions in address order with their warp-level
executions per unit of work (--per, e.g. the number of 2 KiB rounds of the profiled call) and samples.

    python3 bench/gpu/sass_hot.py sass_decode_kernel.csv.gz --per 32768 --min 0.5
"""
import argparse
import signal
import csv
import gzip
import io


def rows(path):
    raw = gzip.open(path, "rt").read() if path.endswith(".gz") else open(path).read()
    lines = raw.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith('"Address"'))
    return list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))


def num(s):
    try:
        return float(s)
    except ValueError:
        return 0.0


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet when piped to head
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--per", type=float, default=1.0, help="divide executions by this (work units of the call)")
    ap.add_argument("--min", type=float, default=0.5, help="show instructions executed at least this often per unit")
    ap.add_argument("--stalls", action="store_true", help="also print each hot instruction's top stall reasons")
    a = ap.parse_args()
    rs = rows(a.csv)
    stall_cols = [c for c in rs[0] if c.startswith("stall_") and "Not Issued" not in c]
    tot_ex = sum(num(r["Instructions Executed"]) for r in rs)
    tot_s = sum(num(r["Warp Stall Sampling (All Samples)"]) for r in rs)
    print(f"{len(rs)} instructions in the listing; executed {tot_ex:.0f} ({tot_ex / a.per:.1f} per unit); "
          f"samples {tot_s:.0f}")
    by = {c: sum(num(r[c]) for r in rs) for c in stall_cols}
    print("samples by reason: " + ", ".join(f"{c[6:]} {100 * v / tot_s:.1f}%"
                                             for c, v in sorted(by.items(), key=lambda kv: -kv[1])[:8]))
    ops = {}
    for r in rs:
        op = r["Source"].split()[0] if r["Source"].split() else "?"
        if op.startswith("@"):
            op = r["Source"].split()[1]
        ops[op.split(".")[0]] = ops.get(op.split(".")[0], 0) + num(r["Instructions Executed"])
    print("per unit by opcode: " + ", ".join(f"{k} {v / a.per:.1f}" for k, v in
                                             sorted(ops.items(), key=lambda kv: -kv[1])[:16]))
    shown = 0.0
    prev = None
    for i, r in enumerate(rs):
        ex = num(r["Instructions Executed"]) / a.per
        if ex < a.min:
            continue
        if prev is not None and i != prev + 1:
            print("   ...")
        prev = i
        shown += ex
        s = num(r["Warp Stall Sampling (All Samples)"])
        line = f"{r['Address'][-5:]} {ex:7.2f} {100 * s / tot_s:5.2f}%  {r['Source'].strip()[:70]}"
        if a.stalls and s > 0:
            top = sorted(((num(r[c]), c[6:]) for c in stall_cols), reverse=True)[:2]
            line += "   [" + " ".join(f"{n} {v:.0f}" for v, n in top if v > 0) + "]"
        print(line)
    print(f"shown: {shown:.1f} per unit of {tot_ex / a.per:.1f}")


if __name__ == "__main__":
    main()
