#!/usr/bin/env python3
"""Cost and saving of the engine adapters (splitzip.integrations) on a Llama-3-8B-shaped KV cache.

Shape: 32 layers, 8 KV heads, head size 128, bf16; one request of --tokens tokens (default 4096: 8 MiB of K and
8 MiB of V per layer, 512 MiB in all). Values: the shipped real KV (data/kv_code_bf16_slice.bin), layer l's K / V
tiled from the slice's layer l mod 8, so the exponents are real KV's (the channel layout is not).

Measures, per adapter, through its engine-facing calls (median of --repeat runs, wall clock, host memory unless
--device cuda):
  vLLM    save_kv_layer (one paged frame of the request's 2 x tokens/16 blocks) and the load's decode, per layer
  SGLang  compress_into / decompress_into of the staging buffer, gather_compress_into / scatter_decompress, per layer
          (the whole request's time / 32)
  LMCache serialize / deserialize of one 256-token chunk [2, 32, 256, 1024]
and the bytes before and after. Prints a Markdown table (the rows of docs/INTEGRATION.md).

    python bench/integrations.py                    # CPU, 1 thread
    python bench/integrations.py --device cuda      # torch on a GPU
    python bench/integrations.py --quick            # small sizes (4 layers, 256 tokens, 2 runs): a smoke test

The vLLM connector and the fused SGLang calls go through the adapters' page tables (one launch per frame over a
page-pointer table built on the device; on the host one vectorised gather / scatter per page group); the vLLM
save keeps its frames on the GPU until wait_for_save, so its row's compress time is the enqueue plus the kernel
(each timed call ends with a device synchronisation) and the note gives wait_for_save, which brings the frames to
the host.
"""

import argparse
import os
import pathlib
import platform
import statistics
import time
from types import SimpleNamespace as NS

import numpy as np

import splitzip
from splitzip.integrations import lmcache as szlm
from splitzip.integrations.sglang import SplitZipBackend
from splitzip.integrations.vllm import KVConnectorRole, SplitZipConnector

REPO = pathlib.Path(__file__).resolve().parents[1]
LAYERS, HEADS, HEAD, BLOCK = 32, 8, 128, 16


def set_layers(n):
    global LAYERS
    if n < 1:
        raise SystemExit("--layers must be at least 1")
    LAYERS = n


def real_values(n, layer, kv):
    raw = np.fromfile(REPO / "data" / "kv_code_bf16_slice.bin", dtype="<u2").reshape(8, 2, -1)
    src = raw[layer % 8, kv]
    return np.resize(src, n)


def to_device(a, device):
    if device == "cpu":
        import ml_dtypes
        return a.view(ml_dtypes.bfloat16)
    import torch
    return torch.from_numpy(a.view(np.int16)).to(device).view(torch.bfloat16)


def sync(device):
    if device != "cpu":
        import torch
        torch.cuda.synchronize()


def timed(fn, device, repeat):
    out, times = None, []
    for _ in range(repeat):
        sync(device)
        t0 = time.perf_counter()
        out = fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def bench_vllm(tokens, device, repeat, threads):
    nblk = tokens // BLOCK
    rng = np.random.default_rng(0)
    total = nblk + 64
    caches, dsts = {}, {}
    for l in range(LAYERS):
        c = np.empty((2, total, BLOCK, HEADS, HEAD), dtype=np.uint16)
        for kv in range(2):
            c[kv] = real_values(total * BLOCK * HEADS * HEAD, l, kv).reshape(total, BLOCK, HEADS, HEAD)
        caches[f"layers.{l}"] = to_device(c, device)
        dsts[f"layers.{l}"] = to_device(np.zeros_like(c), device)
    extra = {"transport": "inprocess", "name": "bench", "threads": threads}
    cfg = lambda role: NS(kv_transfer_config=NS(kv_role=role, kv_connector_extra_config=extra),  # noqa: E731
                          cache_config=NS(block_size=BLOCK), model_config=NS(model="bench"))
    prompt = list(range(tokens + 1))
    src_blocks = [int(b) for b in rng.permutation(total)[:nblk]]
    dst_blocks = [int(b) for b in rng.permutation(total)[:nblk]]
    sp, wp = (SplitZipConnector(cfg("kv_producer"), r) for r in (KVConnectorRole.SCHEDULER, KVConnectorRole.WORKER))
    sc, wc = (SplitZipConnector(cfg("kv_consumer"), r) for r in (KVConnectorRole.SCHEDULER, KVConnectorRole.WORKER))
    wp.register_kv_caches(caches)
    wc.register_kv_caches(dsts)
    new = NS(req_id="r", prompt_token_ids=prompt, block_ids=(src_blocks,), num_computed_tokens=0)
    meta = sp.build_connector_meta(NS(scheduled_new_reqs=[new], scheduled_cached_reqs=None,
                                      num_scheduled_tokens={"r": tokens + 1}))
    wp.bind_connector_metadata(meta)
    save_t = []
    for name, cache in caches.items():
        _, t = timed(lambda: wp.save_kv_layer(name, cache, None), device, repeat)
        save_t.append(t)
    _, put_t = timed(wp.wait_for_save, device, 1)
    raw, frame = wp.stats["raw_bytes_saved"], wp.stats["frame_bytes_saved"]
    # the same request saved again: wait_for_save once its buffers (pinned host memory on a GPU) have been made
    for name, cache in caches.items():
        wp.save_kv_layer(name, cache, None)
    _, put_again_t = timed(wp.wait_for_save, device, 1)
    req = NS(request_id="r", prompt_token_ids=prompt)
    n, _ = sc.get_num_new_matched_tokens(req, 0)
    sc.update_state_after_alloc(req, None, n)
    new_c = NS(req_id="r", prompt_token_ids=prompt, block_ids=(dst_blocks,), num_computed_tokens=0)
    wc.bind_connector_metadata(sc.build_connector_meta(NS(scheduled_new_reqs=[new_c], scheduled_cached_reqs=None,
                                                           num_scheduled_tokens={"r": 1})))

    def load():
        wc.start_load_kv(None)
        for name in dsts:
            wc.wait_for_layer_load(name)
    _, load_t = timed(load, device, repeat)
    for name in caches:  # bit-exact check of the last load
        a, b = caches[name], dsts[name]
        for s, d in zip(src_blocks, dst_blocks):
            same = (a[:, s].view(np.uint16) == b[:, d].view(np.uint16)).all() if device == "cpu" else \
                bool((a[:, s].view(dtype=__import__("torch").int16) == b[:, d].view(dtype=__import__("torch").int16)).all())
            assert same, f"{name}: block {s} -> {d} differs"
    return dict(adapter="vLLM connector", unit=f"layer (K+V, {nblk} blocks)", raw=raw / LAYERS, out=frame / LAYERS,
                enc=statistics.median(save_t), dec=load_t / LAYERS,
                note=f"wait_for_save (frames to the host, container, in-process put) {put_t * 1e3:.1f} ms per "
                     f"request, {put_again_t * 1e3:.1f} ms for the next")


def bench_sglang(tokens, device, repeat, threads):
    slots = tokens + 1024
    page = BLOCK
    rng = np.random.default_rng(1)
    ks, vs, dks, dvs = [], [], [], []
    for l in range(LAYERS):
        for kv, pools in ((0, ks), (1, vs)):
            pools.append(to_device(real_values(slots * HEADS * HEAD, l, kv).reshape(slots, HEADS, HEAD), device))
        dks.append(to_device(np.zeros((slots, HEADS, HEAD), np.uint16), device))
        dvs.append(to_device(np.zeros((slots, HEADS, HEAD), np.uint16), device))
    idx = [int(p) for p in rng.permutation(slots // page)[: tokens // page]]
    didx = [int(p) for p in rng.permutation(slots // page)[: tokens // page]]
    b = SplitZipBackend(LAYERS, HEADS, HEAD, "bf16", page_size=page, threads=threads)
    cap = b.max_output_bytes(tokens)
    if device == "cpu":
        dst = np.empty(cap, np.uint8)
        staging = np.empty(tokens * b.token_bytes, np.uint8)
    else:
        import torch
        dst = torch.empty(cap, dtype=torch.uint8, device=device)
        staging = torch.empty(tokens * b.token_bytes, dtype=torch.uint8, device=device)
    n, t_gc = timed(lambda: b.gather_compress_into(ks, vs, idx, dst), device, repeat)
    # the staged path: a staging buffer gathered the way SGLang's gather lays it out, then compressed
    if device == "cpu":
        rows = (np.asarray(idx)[:, None] * page + np.arange(page)).reshape(-1)
        staging[:] = np.concatenate([p[rows].reshape(-1).view(np.uint8) for p in ks + vs])
    else:
        import torch
        rows = (torch.tensor(idx, device=device)[:, None] * page + torch.arange(page, device=device)).reshape(-1)
        staging[:] = torch.cat([p[rows].reshape(-1).view(torch.uint8) for p in ks + vs])
    n2, t_c = timed(lambda: b.compress_into(staging, dst), device, repeat)
    assert n2 == n
    out = staging.clone() if device != "cpu" else staging.copy()
    _, t_d = timed(lambda: (b.decompress_into(dst[:n], out), b.drain()), device, repeat)
    _, t_sd = timed(lambda: (b.scatter_decompress(dst[:n], dks, dvs, didx), b.drain()), device, repeat)
    same = (out == staging).all()
    assert bool(same), "staging round trip differs"
    raw = tokens * b.token_bytes
    return dict(adapter="SGLang backend", unit=f"layer (K+V, {tokens} tokens)", raw=raw / LAYERS, out=n / LAYERS,
                enc=t_c / LAYERS, dec=t_d / LAYERS,
                note=f"fused gather_compress_into {t_gc / LAYERS * 1e3:.2f} ms, scatter_decompress "
                     f"{t_sd / LAYERS * 1e3:.2f} ms per layer")


def bench_lmcache(device, repeat, threads, chunk_tokens=256):
    c = np.empty((2, LAYERS, chunk_tokens, HEADS * HEAD), np.uint16)
    for l in range(LAYERS):
        for kv in range(2):
            c[kv, l] = real_values(chunk_tokens * HEADS * HEAD, l, kv).reshape(chunk_tokens, HEADS * HEAD)
    src = to_device(c, device)
    ser, de = szlm.SplitZipSerializer(threads=threads), szlm.SplitZipDeserializer(threads=threads)
    size = ser.estimate_serialized_size(NS(shapes=[tuple(src.shape)], dtypes=[src.dtype]))
    if device == "cpu":
        buf, back = np.empty(size, np.uint8), np.zeros_like(src)
    else:
        import torch
        buf, back = torch.empty(size, dtype=torch.uint8, device=device), torch.zeros_like(src)

    def ser_once():
        o = szlm.BufferObj(buf)
        return ser.serialize(szlm.BufferObj(src), o, None), o
    (n, tmp), t_s = timed(ser_once, device, repeat)
    _, t_d = timed(lambda: de.deserialize(tmp, szlm.BufferObj(back), None), device, repeat)
    same = (back.view(np.uint16) == src.view(np.uint16)).all() if device == "cpu" else \
        bool((back.view(dtype=__import__("torch").int16) == src.view(dtype=__import__("torch").int16)).all())
    assert same
    return dict(adapter="LMCache serde", unit=f"chunk of {chunk_tokens} tokens, all layers", raw=c.nbytes, out=n,
                enc=t_s, dec=t_d, note="")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--layers", type=int, default=LAYERS)
    ap.add_argument("--quick", action="store_true", help="4 layers, 256 tokens, 2 runs (unless given)")
    args = ap.parse_args()
    if args.quick:
        defaults = {"tokens": 4096, "repeat": 5, "layers": LAYERS}
        for k, v in {"tokens": 256, "repeat": 2, "layers": 4}.items():
            if getattr(args, k) == defaults[k]:
                setattr(args, k, v)
    set_layers(args.layers)
    rows = [bench_vllm(args.tokens, args.device, args.repeat, args.threads),
            bench_sglang(args.tokens, args.device, args.repeat, args.threads),
            bench_lmcache(args.device, args.repeat, args.threads)]
    where = (f"{args.device}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
             f"{args.threads} codec thread(s)" if args.device == "cpu" else args.device)
    print(f"splitzip {splitzip.__version__}; {where}; Llama-3-8B shape ({LAYERS} x 8 x 128, bf16), {args.tokens} "
          f"tokens; median of {args.repeat}")
    print()
    print("| adapter | unit | raw MiB | compressed MiB | ratio | compress ms | GB/s | decompress ms | GB/s | note |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['adapter']} | {r['unit']} | {r['raw'] / 2**20:.2f} | {r['out'] / 2**20:.2f} | "
              f"{r['raw'] / r['out']:.3f} | {r['enc'] * 1e3:.2f} | {r['raw'] / r['enc'] / 1e9:.2f} | "
              f"{r['dec'] * 1e3:.2f} | {r['raw'] / r['dec'] / 1e9:.2f} | {r['note']} |")
    print("\nall round trips bit-exact")


if __name__ == "__main__":
    main()
