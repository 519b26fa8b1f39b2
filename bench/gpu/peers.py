#!/usr/bin/env python3
"""nvCOMP peers on the same tensors as bench_gpu.cpp: ratio, encode and decode GB/s of uncompressed bytes.

Uses the nvCOMP Python API (PyPI nvidia-nvcomp-cu13, carried to the GPU machine) on CuPy device arrays, with the
input tiled to >= 1 GiB exactly as the SplitZip benchmark tiles it. Times are CUDA-synchronised wall clock around
each encode / decode call (the high-level API allocates its output inside the call, which is counted), median of
--reps runs after --warmup. Every decode is compared with the input. Same-run device-to-device copy bandwidth is
printed for reference. Output: a markdown table, and CSV rows with --csv.

    python3 bench/gpu/peers.py --data .devdata --gib 1 --csv peers.csv
"""
import argparse
import statistics
import sys
import time

import cupy as cp
import numpy as np


def tiled(path, gib):
    raw = np.fromfile(path, dtype=np.uint8)
    tiles = int(np.ceil(gib * (1 << 30) / raw.size))
    dev = cp.empty(raw.size * tiles, dtype=cp.uint8)
    one = cp.asarray(raw)
    for t in range(tiles):
        dev[t * raw.size:(t + 1) * raw.size] = one
    cp.cuda.Device().synchronize()
    return dev


def median_seconds(fn, warmup, reps):
    for _ in range(warmup):
        fn()
    cp.cuda.Device().synchronize()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        cp.cuda.Device().synchronize()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=".devdata")
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--csv", default="")
    ap.add_argument("--files", default="kv_code_bf16.bin:bf16,kv_code_e4m3.bin:e4m3,kv_code_e5m2.bin:e5m2")
    ap.add_argument("--algos", default="ANS,Bitcomp,Cascaded,LZ4,GDeflate,Zstd")
    args = ap.parse_args()

    from nvidia import nvcomp  # noqa: E402  (carried wheel)
    print(f"nvcomp {nvcomp.__version__} (CUDA {nvcomp.__cuda_version__}), cupy {cp.__version__}")
    rows = []
    print("\n| data | codec | ratio | encode GB/s | decode GB/s |\n|---|---|---:|---:|---:|")
    for spec in args.files.split(","):
        fname, label = spec.split(":")
        x = tiled(f"{args.data}/{fname}", args.gib)
        nbytes = x.size
        y = cp.empty_like(x)
        t = median_seconds(lambda: y.__setitem__(slice(None), x), args.warmup, args.reps)
        print(f"| {label} | cudaMemcpy D2D | - | {2 * nbytes / t / 1e9:.0f} (read+write) | - |")
        rows.append((label, "memcpy", 1.0, 2 * nbytes / t / 1e9, float("nan")))
        # Element type hints where the codec takes one (ANS / Bitcomp / Cascaded can model 2-byte words).
        for algo in args.algos.split(","):
            try:
                kw = {}
                if label == "bf16" and algo in ("Bitcomp", "Cascaded"):
                    arr = nvcomp.as_array(x.view(cp.uint16))
                else:
                    arr = nvcomp.as_array(x)
                codec = nvcomp.Codec(algorithm=algo, **kw)
                comp = codec.encode(arr)
                cp.cuda.Device().synchronize()
                csize = comp.buffer_size
                t_enc = median_seconds(lambda: codec.encode(arr), args.warmup, args.reps)
                out = codec.decode(comp)
                cp.cuda.Device().synchronize()
                back = cp.asarray(out).view(cp.uint8).reshape(-1)
                ok = back.size == nbytes and bool(cp.all(back == x))
                t_dec = median_seconds(lambda: codec.decode(comp), args.warmup, args.reps)
                ratio = nbytes / csize
                flag = "" if ok else " (DECODE MISMATCH)"
                print(f"| {label} | nvCOMP {algo} | {ratio:.4f} | {nbytes / t_enc / 1e9:.0f} | "
                      f"{nbytes / t_dec / 1e9:.0f}{flag} |")
                rows.append((label, algo, ratio, nbytes / t_enc / 1e9, nbytes / t_dec / 1e9))
                del comp, out, back
            except Exception as e:  # report and go on: one codec failing must not hide the others
                print(f"| {label} | nvCOMP {algo} | failed: {type(e).__name__}: {str(e)[:80]} | | |")
            sys.stdout.flush()
            cp.get_default_memory_pool().free_all_blocks()
        del x, y
        cp.get_default_memory_pool().free_all_blocks()
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("dataset,codec,ratio,encode_GBps,decode_GBps\n")
            for r in rows:
                f.write("%s,%s,%.5f,%.1f,%.1f\n" % r)


if __name__ == "__main__":
    main()
