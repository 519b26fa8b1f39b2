#!/usr/bin/env python3
"""DFloat11 (PyPI dfloat11 0.5.0) as a GPU peer on the same BF16 KV tensor as bench_gpu.cpp and peers.py.

DFloat11 ships only model-level entry points (compress_model / DFloat11Model); underneath, one compressed blob
is made by dfloat11_utils (get_codec -> get_32bit_codec -> get_luts -> encode_weights, a CPU-side Python
Huffman coder of the 8 exponent bits, sign and mantissa kept raw) and decoded by one launch of the package's
`decode` kernel (decode.ptx, loaded with CuPy). This script calls exactly those pieces on a flat BF16 tensor,
launching the kernel with the arguments, grid and shared-memory size that the package's own code uses.

The encoder is a per-element Python loop (about 2.6 M values/s on one core), so the tensor (--mib, tiled from
the KV file) is split into --segments equal pieces encoded in parallel processes; every piece shares the one
Huffman table built from the whole tensor, and the timed decode is one kernel launch per piece, back to back on
one stream (what DFloat11 does for a model: one launch per compressed block). --segments 0 picks the fewest
pieces whose encode is projected (from a 1 M-value probe) to take at most --encode-budget seconds.

Reported: ratio (input bytes / all compressed bytes, LUTs and per-thread/per-block index included), decode GB/s
of uncompressed bytes (CUDA events, median of --reps after --warmup), the same run's D2D copy GB/s (read+write,
as peers.py), the CPU encode GB/s (wall clock, parallel), and a bit-exactness check of every piece.

    python3 bench/gpu/dfloat11_peer.py --data .devdata --mib 256 --csv dfloat11.csv
    python3 bench/gpu/dfloat11_peer.py --cpu-check --mib 1      # no GPU: encode, then decode with dahuffman
"""
import argparse
import contextlib
import importlib.util
import io
import math
import multiprocessing as mp
import os
import statistics
import sys
import time

os.environ.setdefault("TQDM_DISABLE", "1")  # encode_weights wraps its loop in tqdm
import warnings  # noqa: E402

warnings.filterwarnings("ignore", message="The given NumPy array is not writable")

import numpy as np

BYTES_PER_THREAD = 8     # dfloat11.dfloat11.bytes_per_thread (0.5.0)
THREADS_PER_BLOCK = 512  # dfloat11.dfloat11.threads_per_block[0] (0.5.0)


def dfloat11_dir():
    spec = importlib.util.find_spec("dfloat11")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("dfloat11 is not importable: install the wheels from .whl/dfl (see run_device.sh)")
    return list(spec.submodule_search_locations)[0]


def load_utils():
    """dfloat11/dfloat11_utils.py by path: the package __init__ would load CUDA, unwanted in encoder workers."""
    spec = importlib.util.spec_from_file_location("dfloat11_utils", os.path.join(dfloat11_dir(), "dfloat11_utils.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def tiled_values(path, mib):
    raw = np.fromfile(path, dtype=np.uint16)
    n = int(mib * (1 << 20)) // 2
    return np.resize(raw, n)  # repeats the file, like the other benchmarks' tiling


def encode_piece(job):
    """Worker: DFloat11's encode_weights on one piece with the shared codec. Returns numpy arrays."""
    values, codec = job
    import torch
    utils = load_utils()
    w = torch.from_numpy(values).view(torch.bfloat16)
    with contextlib.redirect_stdout(io.StringIO()):
        encoded, other, positions, gaps, _ = utils.encode_weights([w], codec, BYTES_PER_THREAD, THREADS_PER_BLOCK)
    return (encoded.numpy().copy(), other.numpy().copy(), np.asarray(positions.numpy(), dtype=np.uint32).copy(),
            gaps.numpy().copy())


def build_codec(values):
    """DFloat11's table for the whole tensor: Huffman over exponent bytes, capped at 32-bit codes, plus LUTs."""
    import torch
    utils = load_utils()
    w = torch.from_numpy(values).view(torch.bfloat16)
    with contextlib.redirect_stdout(io.StringIO()):
        _, counter = utils.get_codec(w)
        codec, _, table = utils.get_32bit_codec(counter)
        luts = utils.get_luts(table)
    return utils, codec, luts.numpy().copy()


def probe_rate(utils, codec, values):
    import torch
    n = min(values.size, 1 << 20)
    w = torch.from_numpy(values[:n].copy()).view(torch.bfloat16)
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        utils.encode_weights([w], codec, BYTES_PER_THREAD, THREADS_PER_BLOCK)
    return n / (time.perf_counter() - t0)


def encode_all(values, segments, codec):
    bounds = np.linspace(0, values.size, segments + 1).astype(np.int64)
    jobs = [(values[bounds[i]:bounds[i + 1]].copy(), codec) for i in range(segments)]
    if segments == 1:
        return [encode_piece(jobs[0])], bounds
    ctx = mp.get_context("spawn")  # no fork after torch threads; workers never touch CUDA
    with ctx.Pool(min(segments, os.cpu_count() or 1)) as pool:
        return pool.map(encode_piece, jobs), bounds


def compressed_bytes(pieces, luts):
    return luts.nbytes + sum(e.nbytes + o.nbytes + p.nbytes + g.nbytes for e, o, p, g in pieces)


def cpu_check(values, pieces, bounds, codec):
    """No GPU: decode each piece's exponent stream with dahuffman and rebuild the BF16 bits."""
    for (enc, other, _, _), a, b in zip(pieces, bounds[:-1], bounds[1:]):
        exps = np.array(codec.decode(enc.tobytes()), dtype=np.uint16)
        if exps.size != b - a:
            return False
        o = other.astype(np.uint16)
        back = ((o & 0x80) << 8) | (exps << 7) | (o & 0x7F)
        if not np.array_equal(back, values[a:b]):
            return False
    return True


def load_kernel():
    """The package's own decode kernel object; falls back to its PTX only if the package import fails."""
    try:
        try:
            import pkg_resources  # noqa: F401  (dfloat11.py uses it to find decode.ptx)
        except ImportError:  # setuptools >= 81 dropped it: the one call the package makes, nothing more
            import types
            shim = types.ModuleType("pkg_resources")
            shim.resource_filename = lambda pkg, name: os.path.join(dfloat11_dir(), name)
            sys.modules["pkg_resources"] = shim
        from dfloat11 import dfloat11 as dfl
        return dfl._decode, "dfloat11.dfloat11._decode"
    except Exception as e:  # e.g. a setuptools without pkg_resources
        import cupy as cp
        why = f"{type(e).__name__}: {str(e)[:100]}"
        return cp.RawModule(path=os.path.join(dfloat11_dir(), "decode.ptx")).get_function("decode"), \
            f"decode.ptx loaded directly (package import failed: {why})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=".devdata")
    ap.add_argument("--file", default="kv_code_bf16.bin")
    ap.add_argument("--mib", type=float, default=256.0)
    ap.add_argument("--segments", type=int, default=0, help="0: fewest pieces within --encode-budget")
    ap.add_argument("--encode-budget", type=float, default=25.0, help="seconds per piece for --segments 0")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--csv", default="")
    ap.add_argument("--cpu-check", action="store_true", help="no GPU: check the encoding with dahuffman")
    args = ap.parse_args()

    values = tiled_values(os.path.join(args.data, args.file), args.mib)
    nbytes = values.nbytes
    t0 = time.perf_counter()
    utils, codec, luts = build_codec(values)
    t_table = time.perf_counter() - t0
    segments = args.segments
    if segments <= 0:
        rate = probe_rate(utils, codec, values)
        segments = max(1, min(os.cpu_count() or 1, math.ceil(values.size / rate / args.encode_budget)))
        print(f"probe: {rate / 1e6:.2f} M values/s per process -> {segments} piece(s) "
              f"(projected {values.size / rate:.0f} s on one process)")
    t0 = time.perf_counter()
    pieces, bounds = encode_all(values, segments, codec)
    t_enc = time.perf_counter() - t0
    csize = compressed_bytes(pieces, luts)
    ratio = nbytes / csize
    print(f"dfloat11 CPU encode: {nbytes / (1 << 20):.0f} MiB BF16 ({values.size} values) in {segments} piece(s), "
          f"table {t_table:.1f} s, encode {t_enc:.1f} s on {min(segments, os.cpu_count() or 1)} process(es); "
          f"ratio {ratio:.4f} ({luts.shape[0]} LUTs)")
    sys.stdout.flush()

    if args.cpu_check:
        ok = cpu_check(values, pieces, bounds, codec)
        print("cpu check (dahuffman decode + sign/mantissa):", "bit-exact" if ok else "MISMATCH")
        sys.exit(0 if ok else 1)

    import cupy as cp
    kernel, source = load_kernel()
    print(f"kernel: {source}; cupy {cp.__version__}")
    dev_luts = cp.asarray(luts)
    launches = []
    for (enc, other, pos, gaps), a, b in zip(pieces, bounds[:-1], bounds[1:]):
        n_elem, n_enc = int(b - a), int(enc.size)
        # Grid and shared memory exactly as the package computes them for a compressed block.
        grid = (int(math.ceil(n_enc / (THREADS_PER_BLOCK * BYTES_PER_THREAD))),)
        smem = THREADS_PER_BLOCK * 4 + 4 + int(np.diff(pos.astype(np.int64)).max()) * 2
        launches.append(dict(enc=cp.asarray(enc), other=cp.asarray(other), pos=cp.asarray(pos.view(np.uint8)),
                             gaps=cp.asarray(gaps), n_elem=n_elem, n_enc=n_enc, grid=grid, smem=smem, a=int(a)))
    max_smem = max(l["smem"] for l in launches)
    if max_smem > 48 * 1024:  # the package does not raise the limit; allow it so a skewed table still launches
        cp.cuda.driver.funcSetAttribute(kernel.ptr, 8, max_smem)  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    x = cp.asarray(values)
    y = cp.empty_like(x)

    def decode_all(only=None):
        for l in launches[:only]:
            kernel(l["grid"], (THREADS_PER_BLOCK,), (dev_luts.data.ptr, l["enc"].data.ptr, l["other"].data.ptr,
                   l["pos"].data.ptr, l["gaps"].data.ptr, y.data.ptr + 2 * l["a"],
                   np.int32(luts.shape[0]), np.int32(l["n_enc"]), np.int32(l["n_elem"])), shared_mem=l["smem"])

    def median_ms(fn):
        for _ in range(args.warmup):
            fn()
        cp.cuda.Device().synchronize()
        ts = []
        for _ in range(args.reps):
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            ts.append(cp.cuda.get_elapsed_time(start, stop))
        return statistics.median(ts)

    y.fill(0)
    decode_all()
    cp.cuda.Device().synchronize()
    exact = bool(cp.array_equal(x, y))
    y.fill(0)
    t_dec = median_ms(decode_all) / 1e3
    exact = exact and bool(cp.array_equal(x, y))  # the timed runs' output too
    t_one = median_ms(lambda: decode_all(1)) / 1e3  # the first piece alone: one launch, no launch gaps
    one_bytes = 2 * launches[0]["n_elem"]
    z = cp.empty_like(x)
    t_cpy = median_ms(lambda: z.data.copy_from_device(x.data, nbytes)) / 1e3  # cudaMemcpyAsync D2D
    grids = sorted({l["grid"][0] for l in launches})
    print(f"launches: {len(launches)} x grid {grids} x {THREADS_PER_BLOCK} threads, shared memory <= {max_smem} B")
    flag = "" if exact else " (DECODE MISMATCH)"
    print("\n| data | codec | ratio | encode GB/s | decode GB/s |\n|---|---|---:|---:|---:|")
    print(f"| bf16 | cudaMemcpy D2D | - | {2 * nbytes / t_cpy / 1e9:.0f} (read+write) | - |")
    print(f"| bf16 | DFloat11 0.5.0 | {ratio:.4f} | {nbytes / t_enc / 1e9:.3f} (CPU, {segments} proc) | "
          f"{nbytes / t_dec / 1e9:.0f}{flag} |")
    print(f"decode median {t_dec * 1e3:.3f} ms over {args.reps} reps; bit-exact: {exact}; first piece alone "
          f"({one_bytes / (1 << 20):.0f} MiB, one launch): {one_bytes / t_one / 1e9:.0f} GB/s")
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("dataset,codec,ratio,encode_GBps,decode_GBps\n")
            f.write("bf16,memcpy,%.5f,%.1f,%.1f\n" % (1.0, 2 * nbytes / t_cpy / 1e9, float("nan")))
            f.write("bf16,DFloat11,%.5f,%.3f,%.1f\n" % (ratio, nbytes / t_enc / 1e9, nbytes / t_dec / 1e9))
    sys.exit(0 if exact else 1)


if __name__ == "__main__":
    main()
