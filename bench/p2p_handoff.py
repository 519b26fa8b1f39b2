#!/usr/bin/env python3
"""A request's KV from a prefill GPU to a decode GPU with splitzip.p2p, raw against compressed, in the same run.

    python bench/p2p_handoff.py --data ../shared/data/kv/trained-d512/kv_code_bf16.bin     # two GPUs: NCCL
    python bench/p2p_handoff.py --data ... --loopback                                        # one GPU: see below

Two GPUs: two processes (one GPU each) over torch.distributed's NCCL (NVLink multicast off: NCCL_NVLS_ENABLE=0).
One GPU (or --loopback): one process, the sender and receiver in two threads, the link a device-to-device copy on
the receiver's stream; that measures the pipeline's own cost on a link of ~memcpy speed, not NVLink.
For each per-layer size (--sizes MiB) a request of --layers layers of real BF16 KV (the file tiled) goes over the
link raw and compressed (--reps times each, alternating; medians): time from the first send to the last decode,
effective GB/s of raw bytes, and the codec's own time per layer on one GPU. The receiver checks every byte once.
Output: a markdown table on stdout (and --csv).
"""

import argparse
import csv
import os
import socket
import statistics
import sys
import threading
import time

import numpy as np
import torch

import splitzip
from splitzip import p2p
from splitzip._core import _flags
from splitzip._torch_ops import compress_op, decompress_op


def layers_for(data, mib, count, device):
    n = (mib << 20) // 2
    reps = -(-n // data.size)
    base = torch.from_numpy(np.tile(data, reps)[:n].copy()).to(device).view(torch.bfloat16)
    # each layer its own buffer (rotating through them keeps one layer out of L2 when the next goes)
    return [base.clone() for _ in range(count)]


def codec_times(layers, reps):
    """Median encode and decode time of one layer on this GPU (ms), and the ratio."""
    src = layers[0].view(torch.uint8)
    frame, size = compress_op(src, 1, [], 12, _flags(True))
    n = int(size.item())
    out = torch.empty_like(src)
    decompress_op(frame[:n], out)  # the first calls (allocations, workspaces) are not timed
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    enc, dec = [], []
    for _ in range(reps):
        e0.record()
        compress_op(src, 1, [], 12, _flags(True))
        e1.record()
        e1.synchronize()
        enc.append(e0.elapsed_time(e1))
        e0.record()
        decompress_op(frame[:n], out)
        e1.record()
        e1.synchronize()
        dec.append(e0.elapsed_time(e1))
    return statistics.median(enc), statistics.median(dec), src.numel() / n


def one_request(tx_side, rx_side, layers, outs):
    """Times one request through a sender / receiver pair in two threads (loopback)."""
    err = []

    def receive():
        try:
            for o in outs:
                rx_side.recv(o)
            rx_side.finish()
        except Exception as e:
            err.append(e)

    torch.cuda.synchronize()
    th = threading.Thread(target=receive)
    t0 = time.perf_counter()
    th.start()
    for t in layers:
        tx_side.send(t)
    tx_side.finish()
    th.join()
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    if err:
        raise err[0]
    return t1 - t0


def loopback(args):
    dev = torch.device("cuda:0")
    data = np.fromfile(args.data, dtype="<i2")
    rows = []
    for mib in args.sizes:
        layers = layers_for(data, mib, args.layers, dev)
        outs = [torch.empty_like(t) for t in layers]
        enc, dec, ratio = codec_times(layers, args.reps)
        times = {True: [], False: []}
        for rep in range(args.reps):
            for compress in (False, True):
                a, b = p2p.LoopbackLink.pair()
                tx, rx = p2p.Sender(a, compress=compress), p2p.Receiver(b, compress=compress)
                times[compress].append(one_request(tx, rx, layers, outs))
                if rep == 0:
                    assert all(torch.equal(t.view(torch.int16), o.view(torch.int16)) for t, o in zip(layers, outs))
        rows.append(row("loopback (D2D copy, 1 GPU)", mib, args.layers, times, enc, dec, ratio))
    return rows


def row(link, mib, layers, times, enc, dec, ratio):
    raw_b = (mib << 20) * layers
    tr, tc = statistics.median(times[False]), statistics.median(times[True])
    return {"link": link, "MiB per layer": mib, "layers": layers, "ratio": round(ratio, 4),
            "raw ms": round(tr * 1e3, 2), "compressed ms": round(tc * 1e3, 2),
            "raw GB/s": round(raw_b / tr / 1e9, 1), "compressed GB/s": round(raw_b / tc / 1e9, 1),
            "speedup": round(tr / tc, 3), "encode ms/layer": round(enc, 3), "decode ms/layer": round(dec, 3)}


def _rank(rank, port, args, q):
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NCCL_NVLS_ENABLE="0")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=2, device_id=torch.device("cuda", rank))
    data = np.fromfile(args.data, dtype="<i2")
    for mib in args.sizes:
        layers = layers_for(data, mib, args.layers, torch.device("cuda", rank))
        outs = [torch.empty_like(t) for t in layers]
        enc = dec = ratio = 0.0
        if rank == 1:
            enc, dec, ratio = codec_times(layers, args.reps)
        times = {True: [], False: []}
        for rep in range(args.reps + 1):  # the first round warms NCCL's connections up
            for compress in (False, True):
                link = p2p.TorchLink(peer=1 - rank)
                dist.barrier()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                if rank == 0:
                    side = p2p.Sender(link, compress=compress)
                    for t in layers:
                        side.send(t)
                else:
                    side = p2p.Receiver(link, compress=compress)
                    for o in outs:
                        side.recv(o)
                side.finish()
                torch.cuda.synchronize()
                dist.barrier()
                t1 = time.perf_counter()
                if rep > 0:
                    times[compress].append(t1 - t0)
                if rank == 1 and rep == 1:
                    assert all(torch.equal(t.view(torch.int16), o.view(torch.int16)) for t, o in zip(layers, outs))
        if rank == 1:
            q.put(row("NCCL, 2 GPUs (NVLink)", mib, args.layers, times, enc, dec, ratio))
    dist.destroy_process_group()


def two_gpus(args):
    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    mp.start_processes(_rank, args=(port, args, q), nprocs=2, join=True, start_method="spawn")
    return [q.get() for _ in args.sizes]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="raw little-endian BF16 KV (e.g. trained-d512's kv_code_bf16.bin)")
    ap.add_argument("--sizes", default="4,16,64,256", help="MiB per layer")
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--loopback", action="store_true", help="one GPU: the in-process loopback link")
    ap.add_argument("--csv")
    args = ap.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    if not (torch.cuda.is_available() and splitzip.cuda_available()):
        sys.exit("p2p_handoff: needs a CUDA GPU and splitzip built with CUDA")
    if not args.loopback and torch.cuda.device_count() < 2:
        print("p2p_handoff: one GPU visible: the loopback link in one process (not NVLink)", file=sys.stderr)
        args.loopback = True
    rows = loopback(args) if args.loopback else two_gpus(args)
    print(f"device: {torch.cuda.get_device_name(0)} x {torch.cuda.device_count()}, torch {torch.__version__}")
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for r in rows:
        print("| " + " | ".join(str(r[k]) for k in keys) + " |")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
