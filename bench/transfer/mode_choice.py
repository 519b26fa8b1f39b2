#!/usr/bin/env python3
"""mode_choice.py — fast mode or max mode for a KV transfer: the transfer term of TTFT for each, per link rate, from
GPU codec rates measured in the same kind of run (bench/gpu/bench_gpu.cpp for the fast mode, bench_entropy_gpu.cpp
for the max mode).

The model is ttft_model.py's pipelined transfer of a request of B bytes in messages of c bytes:

    T = max(B / E, B / (r * L), B / D) + c / E + c / D

with each mode's encode / decode rates E / D (bytes of uncompressed KV per second) and ratio r measured at the
message size c (a warp codes a chunk, so both codecs are slower on small messages). Max mode has the higher ratio
and the slower codec: it wins while the link, not its codec, bounds the transfer, i.e. below about
min(E, D) / r_fast of the max mode's rates. The codecs are taken alone on the GPU: in a serving engine they share
the SMs with the model.

Usage: python3 bench/transfer/mode_choice.py FAST.csv MAX.csv [--data smol_bf16] [--checksums 2]
  FAST.csv: rows of bench_gpu (`--csv`; columns data, MiB, checksums, layout, ratio, enc_GBps, dec_GBps; several
            runs: medians); MAX.csv: rows of bench_entropy_gpu (`--csv`; data, mib, chunk_log2, flags, ratio,
            enc_gbps, dec_gbps). For each message size both have, the max mode's chunk size with the fastest codec.
"""
import argparse
import csv
import statistics

from ttft_model import t_comp, t_raw  # the same pipelined transfer model

LINKS_GBIT = [25, 100, 200, 400, 800, 1600, 3600]  # 3600: NVLink 4 one way (450 GB/s)
REQUEST = ("Llama-3-8B, 4096 tokens", 131072 * 4096)  # bytes of BF16 KV (../shared/NOTES.md §5)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fast")
    ap.add_argument("max")
    ap.add_argument("--data", default="smol_bf16")
    ap.add_argument("--checksums", default="2", help="fast mode's checksum kind: 0 none, 1 H32, 2 LH32 (max: LH32)")
    a = ap.parse_args()
    fast = {}
    for r in csv.DictReader(open(a.fast)):
        if r["data"] == a.data and r["checksums"] == a.checksums and r["layout"] == "contig":
            fast.setdefault(int(float(r["MiB"])), []).append((float(r["enc_GBps"]), float(r["dec_GBps"]),
                                                               float(r["ratio"])))
    best = {}
    for r in csv.DictReader(open(a.max)):
        if r["data"] != a.data or int(r["flags"]) & 1 == 0:
            continue
        m, e, d = int(r["mib"]), float(r["enc_gbps"]), float(r["dec_gbps"])
        if m not in best or min(e, d) > min(best[m][0], best[m][1]):
            best[m] = (e, d, float(r["ratio"]), int(r["chunk_log2"]))
    sizes = sorted(set(fast) & set(best))
    name, b = REQUEST
    print(f"{a.data}: KV transfer term of TTFT in ms for {name} ({b / 2**20:.0f} MiB), raw vs fast vs max mode\n")
    print("| message MiB | mode | ratio | encode GB/s | decode GB/s | " +
          " | ".join(f"{g} Gb/s" for g in LINKS_GBIT) + " | max mode wins below |")
    print("|---:|---|---:|---:|---:|" + "---:|" * len(LINKS_GBIT) + "---:|")
    for m in sizes:
        fe, fd, fr = (statistics.median(x[i] for x in fast[m]) for i in range(3))
        me, md, mr, mc = best[m]
        msg = m * 2**20
        # The link rate below which max mode's transfer is shorter (bisection over 1 Gb/s .. 100 Tb/s).
        lo, hi = 1e9 / 8, 1e14 / 8
        for _ in range(200):
            mid = (lo * hi) ** 0.5
            if t_comp(b, mid, mr, me * 1e9, md * 1e9, msg) < t_comp(b, mid, fr, fe * 1e9, fd * 1e9, msg):
                lo = mid
            else:
                hi = mid
        cross = f"{lo * 8 / 1e9:.0f} Gb/s"
        raw = [t_raw(b, g * 1e9 / 8) * 1e3 for g in LINKS_GBIT]
        print(f"| {m} | raw | 1 | – | – | " + " | ".join(f"{x:.1f}" for x in raw) + " | |")
        for mode, e, d, r, note in (("fast", fe, fd, fr, ""), (f"max (chunks 2^{mc})", me, md, mr, cross)):
            ts = [t_comp(b, g * 1e9 / 8, r, e * 1e9, d * 1e9, msg) * 1e3 for g in LINKS_GBIT]
            print(f"| {m} | {mode} | {r:.3f} | {e:.0f} | {d:.0f} | " + " | ".join(f"{x:.1f}" for x in ts) +
                  f" | {note} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
