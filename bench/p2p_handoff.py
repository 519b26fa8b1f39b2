#!/usr/bin/env python3
"""A request's KV from a prefill GPU to a decode GPU with splitzip.p2p, raw against compressed, in the same run.

    python bench/p2p_handoff.py --data ../shared/data/kv/trained-d512/kv_code_bf16.bin     # two GPUs: NCCL + IPC
    python bench/p2p_handoff.py --data ... --links ipc --one-gpu                             # one GPU, two processes
    python bench/p2p_handoff.py --data ... --loopback                                        # one GPU, one process

Links (--links, comma-separated; default nccl,ipc on two GPUs):
  nccl  two processes (one GPU each) over torch.distributed's NCCL (NVLink multicast off: NCCL_NVLS_ENABLE=0),
        splitzip.p2p.Sender / Receiver: each layer's frame size goes through the host (NCCL counts are host values).
  ipc   two processes, splitzip.p2p.IpcRing / IpcSender / IpcReceiver: the sender encodes straight into a ring of
        --depth slots in the receiver's GPU memory (CUDA IPC) and the streams order themselves by device flags; no
        size or completion crosses the host per layer. Raw through the same ring: a copy into the slot and one out.
        With --one-gpu both processes share GPU 0 (their kernels time-slice: that checks the path and its host
        cost, not a link).
--loopback: one process, the sender and receiver in two threads, the link a device-to-device copy on the receiver's
stream (the NCCL design's pipeline cost on a link of ~memcpy speed).
For each per-layer size (--sizes MiB) a request of --layers layers of real BF16 KV (the file tiled) goes over each
link raw and compressed (--reps times each, alternating, after one warm-up round; medians): time from the first
send to the last decode, effective GB/s of raw bytes, the same-run raw baseline of the same link (and the raw NCCL
time when NCCL ran too), and the codec's own time per layer on the receiver's GPU. overlap: how much of the work the
pipeline hid, (serial - t) / (serial - ideal) with serial = L*enc + raw_t/ratio + L*dec and ideal = the largest of the
three (raw_t/ratio: the compressed bytes' time on this link, estimated from the same-run raw time); 1 = perfectly
overlapped, 0 = no better than one stage after another. The receiver checks every byte once per link and mode.
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


def overlap(t_comp, t_raw, enc_ms, dec_ms, ratio, layers):
    e, d, link = enc_ms * layers / 1e3, dec_ms * layers / 1e3, t_raw / ratio
    serial, ideal = e + link + d, max(e, link, d)
    return round((serial - t_comp) / (serial - ideal), 2) if serial > ideal else None


def row(link, mib, layers, times, enc, dec, ratio, raw_nccl=None):
    raw_b = (mib << 20) * layers
    tr, tc = statistics.median(times[False]), statistics.median(times[True])
    r = {"link": link, "MiB per layer": mib, "layers": layers, "ratio": round(ratio, 4),
         "raw ms": round(tr * 1e3, 2), "compressed ms": round(tc * 1e3, 2),
         "raw GB/s": round(raw_b / tr / 1e9, 1), "compressed GB/s": round(raw_b / tc / 1e9, 1),
         "speedup": round(tr / tc, 3), "encode ms/layer": round(enc, 3), "decode ms/layer": round(dec, 3),
         "overlap": overlap(tc, tr, enc, dec, ratio, layers)}
    r["vs raw NCCL"] = round(raw_nccl / tc, 3) if raw_nccl else None
    return r


LINK_NAMES = {("nccl", False): "NCCL, 2 GPUs (NVLink)", ("ipc", False): "CUDA IPC ring, 2 GPUs (NVLink)",
              ("ipc", True): "CUDA IPC ring, 2 processes on 1 GPU"}


def _one_request(link_kind, rank, compress, layers, outs, ring):
    if link_kind == "nccl":
        link = p2p.TorchLink(peer=1 - rank)
        side = p2p.Sender(link, compress=compress) if rank == 0 else p2p.Receiver(link, compress=compress)
    elif rank == 0:
        side = p2p.IpcSender(ring, compress=compress)
    else:
        side = p2p.IpcReceiver(ring, compress=compress)
    if rank == 0:
        for t in layers:
            side.send(t)
    else:
        for o in outs:
            side.recv(o)
    if link_kind == "ipc":
        side.finish(timeout=300)
    else:
        side.finish()


def _rank(rank, port, args, q, rings, devices):
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NCCL_NVLS_ENABLE="0")
    dev = torch.device(devices[rank])
    torch.cuda.set_device(dev)
    if "nccl" in args.links:
        dist.init_process_group("nccl", rank=rank, world_size=2, device_id=dev)
    else:  # barriers only
        dist.init_process_group("gloo", rank=rank, world_size=2)
    data = np.fromfile(args.data, dtype="<i2")
    for mib in args.sizes:
        layers = layers_for(data, mib, args.layers, dev)
        outs = [torch.empty_like(t) for t in layers]
        enc = dec = ratio = 0.0
        if rank == 1:
            enc, dec, ratio = codec_times(layers, args.reps)
        ring = None
        if "ipc" in args.links:  # the receiver's ring, handed to the sender by CUDA IPC
            if rank == 1:
                ring = p2p.IpcRing.for_tensor(layers[0], depth=args.depth)
                rings.put(ring)
            else:
                ring = rings.get(timeout=300)
        times = {(k, c): [] for k in args.links for c in (False, True)}
        for rep in range(args.reps + 1):  # the first round warms connections, rings and workspaces up
            for kind in args.links:
                for compress in (False, True):
                    if rank == 1:
                        for o in outs:
                            o.view(torch.int16).fill_(0)
                    dist.barrier()
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    _one_request(kind, rank, compress, layers, outs, ring)
                    torch.cuda.synchronize()
                    dist.barrier()
                    t1 = time.perf_counter()
                    if rep > 0:
                        times[(kind, compress)].append(t1 - t0)
                    if rank == 1 and rep == 1:
                        same = all(torch.equal(t.view(torch.int16), o.view(torch.int16)) for t, o in zip(layers, outs))
                        assert same, f"{kind} compress={compress}: not bit-exact"
        if ring is not None:  # the sender lets go of the ring before the receiver frees it
            if rank == 0:
                del ring
                torch.cuda.synchronize()
            dist.barrier()
            ring = None
        if rank == 1:
            raw_nccl = statistics.median(times[("nccl", False)]) if "nccl" in args.links else None
            for kind in args.links:
                t = {c: times[(kind, c)] for c in (False, True)}
                q.put(row(LINK_NAMES[(kind, args.one_gpu)], mib, args.layers, t, enc, dec, ratio, raw_nccl))
    dist.destroy_process_group()


def two_processes(args):
    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q, rings = ctx.Queue(), ctx.Queue()
    devices = ["cuda:0", "cuda:0"] if args.one_gpu else ["cuda:0", "cuda:1"]
    mp.start_processes(_rank, args=(port, args, q, rings, devices), nprocs=2, join=True, start_method="spawn")
    return [q.get() for _ in range(len(args.sizes) * len(args.links))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="raw little-endian BF16 KV (e.g. trained-d512's kv_code_bf16.bin)")
    ap.add_argument("--sizes", default="4,16,64,256", help="MiB per layer")
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--links", default=None, help="nccl,ipc (default: both on two GPUs, ipc with --one-gpu)")
    ap.add_argument("--depth", type=int, default=2, help="slots of the IPC ring")
    ap.add_argument("--one-gpu", action="store_true", help="both processes on GPU 0 (the ipc link only)")
    ap.add_argument("--loopback", action="store_true", help="one GPU, one process: the in-process loopback link")
    ap.add_argument("--csv")
    args = ap.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    if not (torch.cuda.is_available() and splitzip.cuda_available()):
        sys.exit("p2p_handoff: needs a CUDA GPU and splitzip built with CUDA")
    if args.links is None:
        args.links = "ipc" if args.one_gpu else "nccl,ipc"
    args.links = [k for k in args.links.split(",") if k]
    if any(k not in ("nccl", "ipc") for k in args.links):
        sys.exit(f"p2p_handoff: --links takes nccl and ipc, got {args.links}")
    if args.one_gpu and "nccl" in args.links:
        sys.exit("p2p_handoff: NCCL refuses two ranks on one GPU; --one-gpu runs --links ipc")
    if not args.loopback and not args.one_gpu and torch.cuda.device_count() < 2:
        print("p2p_handoff: one GPU visible: the loopback link in one process (not NVLink); "
              "--one-gpu runs the IPC ring between two processes on it", file=sys.stderr)
        args.loopback = True
    rows = loopback(args) if args.loopback else two_processes(args)
    print(f"device: {torch.cuda.get_device_name(0)} x {torch.cuda.device_count()}, torch {torch.__version__}")
    keys = list(dict.fromkeys(k for r in rows for k in r))
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for r in rows:
        print("| " + " | ".join(str(r.get(k, "")) for k in keys) + " |")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
