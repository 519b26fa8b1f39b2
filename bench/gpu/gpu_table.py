#!/usr/bin/env python3
"""Markdown table of a splitzip_gpu_bench CSV (run with --checksums both): per (data, MiB, layout) the speed without
and with checksums over the same-run roofline, and the single-call times with checksums.

    python3 bench/gpu/gpu_table.py bench/results/gpu_v8_4.csv [--rows d512_bf16:1,16,256,1024 smol_fp16:1024 ...]
"""
import argparse
import csv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--rows", nargs="*", help="data:MiB,MiB... (default: every data set and size)")
    ap.add_argument("--paged", action="store_true", help="also the paged rows")
    a = ap.parse_args()
    rs = list(csv.DictReader(open(a.csv)))
    by = {}
    for r in rs:
        by[(r["data"], float(r["MiB"]), r["layout"], r["checksums"])] = r
    want = []
    if a.rows:
        for spec in a.rows:
            d, sizes = spec.split(":")
            want += [(d, float(s)) for s in sizes.split(",")]
    else:
        seen = []
        for r in rs:
            k = (r["data"], float(r["MiB"]))
            if k not in seen:
                seen.append(k)
        want = seen
    print("| data | k | MiB/call | layout | ratio | memcpy GB/s | enc GB/s / roof | dec / roof | enc+cks / roof |"
          " dec+cks / roof | enc+cks µs | dec+cks µs | memcpy µs |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for d, mib in want:
        layouts = sorted({k[2] for k in by if k[0] == d and k[1] == mib}, key=lambda s: s != "contig")
        for lay in layouts:
            if lay != "contig" and not a.paged:
                continue
            off, on = by.get((d, mib, lay, "0")), by.get((d, mib, lay, "1"))
            if on is None:
                continue
            def sp(r, w):
                return "–" if r is None else f"{float(r[w + '_GBps']):.0f} / {float(r[w + '_roof']):.2f}"
            print(f"| {d} | {on['k']} | {mib:g} | {lay} | {float(on['ratio']):.4f} | {float(on['memcpy_GBps']):.0f} |"
                  f" {sp(off, 'enc')} | {sp(off, 'dec')} | {sp(on, 'enc')} | {sp(on, 'dec')} |"
                  f" {float(on['enc_us']):.1f} | {float(on['dec_us']):.1f} | {float(on['memcpy_us']):.1f} |")


if __name__ == "__main__":
    main()
