#!/usr/bin/env python3
"""Disaggregated serving in miniature: move one request's KV cache from a prefill engine to a decode engine.

Each engine holds, per layer, a vLLM-style paged KV cache of shape (2, num_blocks, block_size, kv_heads, head_size)
(K and V, then blocks). The request owns some blocks of the prefill cache; the decode engine gives it other blocks
of its own cache. For each layer this script gathers the request's pages (cache[kv, block]), compresses them into
one SplitZip frame with the page API (on the GPU: one kernel launch over a device array of page pointers), hands
the bytes to a transfer, decompresses them straight into the decode cache's blocks and checks that every block is
bit-identical.

The caches are filled with real KV values: data/kv_code_bf16_slice.bin (BF16, [8 layers, 2, 224 tokens, 4 heads, 64
dims] from a trained Llama-style model; see data/README.md), tokens laid into blocks in order.

Transfer: a plain byte copy through host memory (as a network send would make), and the output says so;
examples/disagg moves a real model's KV cache between two processes over the UCX transfer (splitzip.transfer).

    python examples/paged_kv.py                  # CPU, numpy
    python examples/paged_kv.py --device cuda    # GPU, torch
"""

import argparse
import pathlib
import sys
import time

import numpy as np

import splitzip

REPO = pathlib.Path(__file__).resolve().parents[1]
DATA = REPO / "data" / "kv_code_bf16_slice.bin"
LAYERS, TOKENS, KV_HEADS, HEAD_SIZE = 8, 224, 4, 64


def load_kv():
    raw = np.fromfile(DATA, dtype="<u2")
    if raw.size != LAYERS * 2 * TOKENS * KV_HEADS * HEAD_SIZE:
        sys.exit(f"{DATA}: unexpected size {raw.size * 2} bytes")
    return raw.reshape(LAYERS, 2, TOKENS, KV_HEADS, HEAD_SIZE)


def build_cache(layer_kv, num_blocks, block_size, rng):
    """(2, num_blocks, block_size, heads, dims) uint16 bit patterns of real BF16 KV: block b holds tokens
    starting at a random offset, in order, wrapping around the 224 real tokens."""
    cache = np.empty((2, num_blocks, block_size, KV_HEADS, HEAD_SIZE), dtype=np.uint16)
    starts = rng.integers(0, TOKENS, size=num_blocks)
    for b, s in enumerate(starts):
        idx = (s + np.arange(block_size)) % TOKENS
        cache[:, b] = layer_kv[:, idx]
    return cache


def transfer(frame, device):
    """Hands the frame's bytes to the other engine. Returns the frame as the receiver sees it, on `device`."""
    wire = bytes(frame.cpu().numpy() if device == "cuda" else frame)  # what goes on the wire
    if device == "cuda":
        import torch
        host = torch.frombuffer(bytearray(wire), dtype=torch.uint8).pin_memory()
        return host.to("cuda", non_blocking=True)
    return np.frombuffer(wire, dtype=np.uint8)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--num-blocks", type=int, default=256, help="blocks per layer in each engine's cache")
    ap.add_argument("--block-size", type=int, default=16, help="tokens per block")
    ap.add_argument("--request-blocks", type=int, default=48, help="blocks owned by the request")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.request_blocks > args.num_blocks:
        sys.exit("--request-blocks must not exceed --num-blocks")

    transport = "byte copy through host memory"

    rng = np.random.default_rng(args.seed)
    kv = load_kv()
    prefill_blocks = [int(b) for b in rng.choice(args.num_blocks, size=args.request_blocks, replace=False)]
    decode_blocks = [int(b) for b in rng.choice(args.num_blocks, size=args.request_blocks, replace=False)]

    if args.device == "cuda":
        import torch
        if not torch.cuda.is_available():
            sys.exit("--device cuda: torch sees no CUDA device")
        if not splitzip.cuda_available():
            sys.exit("--device cuda: this splitzip was built without CUDA")

    raw_total = frame_total = 0
    t_compress = t_decompress = 0.0
    for layer in range(LAYERS):
        host_cache = build_cache(kv[layer], args.num_blocks, args.block_size, rng)
        if args.device == "cuda":
            src = torch.from_numpy(host_cache.view(np.int16)).cuda().view(torch.bfloat16)
            dst = torch.zeros_like(src)
            sync = torch.cuda.synchronize
        else:
            import ml_dtypes
            src = host_cache.view(ml_dtypes.bfloat16)
            dst = np.zeros_like(src)
            sync = lambda: None  # noqa: E731

        pages = [src[k, b] for k in range(2) for b in prefill_blocks]
        sync()
        t0 = time.perf_counter()
        frame = splitzip.compress_pages(pages)
        sync()
        t_compress += time.perf_counter() - t0

        received = transfer(frame, args.device)

        targets = [dst[k, b] for k in range(2) for b in decode_blocks]
        sync()
        t0 = time.perf_counter()
        splitzip.decompress_pages(received, targets)
        sync()
        t_decompress += time.perf_counter() - t0

        for k in range(2):
            for s, d in zip(prefill_blocks, decode_blocks):
                a, b = src[k, s], dst[k, d]
                same = (torch.equal(a.view(torch.int16), b.view(torch.int16)) if args.device == "cuda"
                        else np.array_equal(a.view(np.uint16), b.view(np.uint16)))
                if not same:
                    sys.exit(f"layer {layer}: block {s} -> {d} ({'KV'[k]}) differs after the round trip")
        raw = sum(int(p.nbytes) for p in pages)
        raw_total += raw
        frame_total += int(frame.shape[0])

    print(f"device {args.device}; transfer: {transport}")
    print(f"{LAYERS} layers x {2 * args.request_blocks} pages of {args.block_size}x{KV_HEADS}x{HEAD_SIZE} bf16: "
          f"{raw_total} bytes -> {frame_total} bytes on the wire, ratio {raw_total / frame_total:.4f}")
    print(f"compress_pages {raw_total / t_compress / 1e9:.3f} GB/s, decompress_pages "
          f"{raw_total / t_decompress / 1e9:.3f} GB/s (wall clock, first calls included)")
    print("all blocks bit-identical: OK")


if __name__ == "__main__":
    main()
