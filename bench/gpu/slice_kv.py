#!/usr/bin/env python3
"""Cut raw KV files ([layer][kv][token][kv_head][head_dim], little-endian, no header) down to their first T tokens
of every (layer, K/V) tensor, so that a benchmark can carry real KV of every layer and head within the device
machine's transfer limit. The channel structure (which layer, head and dim a value belongs to) is kept.

    python3 bench/gpu/slice_kv.py --layers 8 --kv-heads 4 --head-dim 64 --tokens 512 IN OUT
"""
import argparse
import os
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--kv-heads", type=int, required=True)
    ap.add_argument("--head-dim", type=int, required=True)
    ap.add_argument("--tokens", type=int, required=True, help="tokens to keep per (layer, K/V)")
    ap.add_argument("--value-bytes", type=int, default=0, help="bytes per value (default: from the file name)")
    ap.add_argument("src")
    ap.add_argument("dst")
    a = ap.parse_args()
    vb = a.value_bytes or (1 if ("e4m3" in a.src or "e5m2" in a.src) else 4 if "fp32" in a.src else 2)
    size = os.path.getsize(a.src)
    row = a.kv_heads * a.head_dim * vb  # one token of one (layer, K/V)
    tensors = a.layers * 2
    if size % (tensors * row):
        sys.exit(f"{a.src}: {size} bytes is not [{a.layers}][2][T][{a.kv_heads}][{a.head_dim}] x {vb} bytes")
    total_tokens = size // (tensors * row)
    keep = min(a.tokens, total_tokens)
    with open(a.src, "rb") as f, open(a.dst, "wb") as g:
        for t in range(tensors):
            f.seek(t * total_tokens * row)
            g.write(f.read(keep * row))
    print(f"{a.dst}: {keep} of {total_tokens} tokens, {os.path.getsize(a.dst)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
