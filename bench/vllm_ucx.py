#!/usr/bin/env python3
"""A request's save -> load through the vLLM connector over UCX (transport "ucx"), raw against compressed.

Two processes on this machine: this one is the prefill instance's worker (kv_producer), a child started by it is
the decode instance's scheduler and worker (kv_consumer, listening on a loopback port). Per run, one request of
--tokens tokens on a Llama-3-8B-shaped cache (32 layers, 8 KV heads, head size 128, bf16, blocks of 16; layer l's
K / V tiled from the shipped real KV slice's layer l mod 8, as bench/integrations.py does) goes through the
connector's engine-facing calls: bind_connector_metadata, save_kv_layer per layer (with --layer-ms of emulated
compute before each, 0 by default: no overlap to hide anything behind), wait_for_save; then the decode side is
told the request's prompt, matches it, and start_load_kv writes it into its blocks, which it checks against the
prefill's (SHA-256 of the blocks' bytes). Each configuration first sends one request that is not timed (its
staging memory is then touched; a first request on a fresh instance pays for that too).

Times (CLOCK_MONOTONIC, one clock for both processes): save->load = from bind_connector_metadata to the decode
side's start_load_kv having written every block; save_kv_layer x 32 = the layers' saves (gathers into staging, the
emulated compute between them included); wait_for_save = its own wait (the transfer not hidden behind the
layers); load = the decode side's start_load_kv (checks and scatters into the blocks). The link: the transfer's
emulated rate (--rates, GB/s, 0 = uncapped loopback) over UCX's transports on loopback (UCX_TLS=tcp for TCP).

    UCX_TLS=tcp python bench/vllm_ucx.py --tokens 4096 --rates 0.5,1,2,0 --repeat 3 --threads 2
"""

import argparse
import hashlib
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time
from types import SimpleNamespace as NS

import numpy as np

import splitzip
from splitzip.integrations.vllm import KVConnectorRole, SplitZipConnector

REPO = pathlib.Path(__file__).resolve().parents[1]
LAYERS, HEADS, HEAD, BLOCK = 32, 8, 128, 16


def caches(tokens, fill):
    """Per layer a (2, blocks + 16, 16, 8, 128) bf16 cache (as uint16 bit patterns viewed as ml_dtypes.bfloat16)."""
    import ml_dtypes
    total = tokens // BLOCK + 16
    raw = np.fromfile(REPO / "data" / "kv_code_bf16_slice.bin", dtype="<u2").reshape(8, 2, -1)
    out = {}
    for layer in range(LAYERS):
        c = np.zeros((2, total, BLOCK, HEADS, HEAD), dtype=np.uint16)
        if fill:
            for kv in range(2):
                c[kv] = np.resize(raw[layer % 8, kv], c[kv].size).reshape(c[kv].shape)
        out[f"model.layers.{layer}.self_attn.attn"] = c.view(ml_dtypes.bfloat16)
    return out


def blocks_of(tokens, seed):
    total = tokens // BLOCK + 16
    return [int(b) for b in np.random.default_rng(seed).permutation(total)[:tokens // BLOCK]]


def blocks_digest(kv, blocks):
    h = hashlib.sha256()
    for c in kv.values():
        for kvi in range(2):
            h.update(np.ascontiguousarray(c[kvi, blocks]).view(np.uint8))
    return h.hexdigest()


def config(role, extra):
    return NS(kv_transfer_config=NS(kv_role=role, kv_connector_extra_config=extra), cache_config=NS(block_size=BLOCK),
              model_config=NS(model="bench"), parallel_config=NS(tensor_parallel_size=1, pipeline_parallel_size=1,
                                                                 rank=0))


def step(req_id, prompt, blocks, scheduled):
    return NS(scheduled_new_reqs=[NS(req_id=req_id, prompt_token_ids=prompt, block_ids=(blocks,),
                                     num_computed_tokens=0)],
              scheduled_cached_reqs=None, num_scheduled_tokens={req_id: scheduled})


def decode_main(args):
    """The decode instance: listens, then per request line on stdin matches, loads and answers on stdout."""
    extra = {"transport": "ucx", "port": 0, "threads": args.threads, "timeout": 60}
    work = SplitZipConnector(config("kv_consumer", extra), KVConnectorRole.WORKER)
    sched = SplitZipConnector(config("kv_consumer", dict(extra, port=work.transport.port)), KVConnectorRole.SCHEDULER)
    dst = caches(args.tokens, fill=False)
    work.register_kv_caches(dst)
    blocks = blocks_of(args.tokens, 2)
    print(json.dumps({"port": work.transport.port}), flush=True)
    for line in sys.stdin:
        t_told = time.monotonic()
        req = json.loads(line)
        prompt = list(range(req["first"], req["first"] + args.tokens + 1))
        r = NS(request_id=req["id"], prompt_token_ids=prompt)
        n, _ = sched.get_num_new_matched_tokens(r, 0)
        if n != args.tokens:
            print(json.dumps({"error": f"matched {n} tokens"}), flush=True)
            continue
        sched.update_state_after_alloc(r, None, n)
        work.bind_connector_metadata(sched.build_connector_meta(step(req["id"], prompt, blocks, 1)))
        t_load = time.monotonic()
        work.start_load_kv(None)
        for name in dst:
            work.wait_for_layer_load(name)
        t_loaded = time.monotonic()
        work.clear_connector_metadata()
        print(json.dumps({"t_told": t_told, "t_load": t_load, "t_loaded": t_loaded,
                          "digest": blocks_digest(dst, blocks),
                          "wire_bytes": work.transport.receiver_stats["wire_bytes"]}), flush=True)
    work.shutdown()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--rates", default="0.5,1,2,0", help="emulated link rates, GB/s (0: uncapped)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2, help="codec threads of each side's transfer session")
    ap.add_argument("--layer-ms", type=float, default=0.0, help="emulated compute before each layer's save")
    ap.add_argument("--save-after-compute", action="store_true",
                    help="compute every layer first, then save them all (what per-layer sending saves, measured)")
    ap.add_argument("--decode", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.tokens % BLOCK or args.tokens <= 0:
        raise SystemExit(f"--tokens must be a positive multiple of {BLOCK}")
    if args.decode:
        return decode_main(args)
    child = subprocess.Popen([sys.executable, __file__, "--decode", "--tokens", str(args.tokens), "--threads",
                              str(args.threads)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    port = json.loads(child.stdout.readline())["port"]
    src = caches(args.tokens, fill=True)
    blocks = blocks_of(args.tokens, 1)
    want = blocks_digest(src, blocks)
    rows, run = [], 0
    try:
        for rate in [float(r) for r in args.rates.split(",")]:
            for raw in (True, False):
                extra = {"transport": "ucx", "address": f"127.0.0.1:{port}", "raw": raw, "rate": rate * 1e9,
                         "threads": args.threads, "timeout": 60}
                sched = SplitZipConnector(config("kv_producer", extra), KVConnectorRole.SCHEDULER)
                work = SplitZipConnector(config("kv_producer", extra), KVConnectorRole.WORKER)
                work.register_kv_caches(src)
                times, waits, saves, loads = [], [], [], []
                for rep in range(args.repeat + 1):  # the first run warms up (staging memory touched once)
                    run += 1
                    first = 10_000_000 * run  # a new prompt per run: a new key
                    prompt = list(range(first, first + args.tokens + 1))
                    meta = sched.build_connector_meta(step(f"r{run}", prompt, blocks, args.tokens + 1))
                    before = dict(work.stats)
                    t0 = time.monotonic()
                    work.bind_connector_metadata(meta)
                    if args.save_after_compute and args.layer_ms:
                        time.sleep(len(src) * args.layer_ms / 1e3)
                    t_saves = time.monotonic()
                    for name, cache in src.items():
                        if args.layer_ms and not args.save_after_compute:
                            time.sleep(args.layer_ms / 1e3)
                        work.save_kv_layer(name, cache, None)
                    t_last = time.monotonic()
                    work.wait_for_save()
                    t_saved = time.monotonic()
                    work.clear_connector_metadata()
                    if work.send_errors:
                        raise SystemExit(f"send failed: {work.send_errors}")
                    child.stdin.write(json.dumps({"id": f"r{run}", "first": first}) + "\n")
                    child.stdin.flush()
                    got = json.loads(child.stdout.readline())
                    if "error" in got or got["digest"] != want:
                        raise SystemExit(f"decode side: {got.get('error', 'blocks differ from the prefill side')}")
                    sent = {k: work.stats[k] - before[k] for k in work.stats}
                    if rep:
                        times.append(got["t_loaded"] - t0)
                        waits.append(t_saved - t_last)
                        saves.append(t_last - t_saves)
                        loads.append(got["t_loaded"] - got["t_load"])
                work.shutdown()
                rows.append(dict(rate=rate, raw=raw, t=statistics.median(times), lo=min(times), hi=max(times),
                                 wait=statistics.median(waits), saves=statistics.median(saves),
                                 load=statistics.median(loads), raw_bytes=sent["raw_bytes_saved"],
                                 wire=sent["wire_bytes_saved"]))
    finally:
        child.stdin.close()
        child.wait(timeout=60)
    print(f"splitzip {splitzip.__version__}; {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"UCX_TLS={os.environ.get('UCX_TLS', '(default)')}; Llama-3-8B shape ({LAYERS} x {HEADS} x {HEAD}, bf16), "
          f"{args.tokens} tokens ({rows[0]['raw_bytes'] / 2**20:.0f} MiB); {args.threads} codec threads per side; "
          f"{args.layer_ms:g} ms of emulated compute per layer"
          f"{' (all layers computed before the first save)' if args.save_after_compute else ''}; "
          f"median (min-max) of {args.repeat} after one warm-up request; every load bit-exact")
    print()
    print("| link | mode | wire MiB | save->load ms | save_kv_layer x 32 ms | wait_for_save ms | load ms | "
          "compressed / raw time |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for i in range(0, len(rows), 2):
        for r in rows[i:i + 2]:
            link = f"{r['rate']:g} GB/s" if r["rate"] else "uncapped"
            speed = f"{r['t'] / rows[i]['t']:.3f}" if not r["raw"] else ""
            print(f"| {link} | {'raw' if r['raw'] else 'compressed'} | {r['wire'] / 2**20:.1f} | "
                  f"{r['t'] * 1e3:.0f} ({r['lo'] * 1e3:.0f}-{r['hi'] * 1e3:.0f}) | {r['saves'] * 1e3:.0f} | "
                  f"{r['wait'] * 1e3:.0f} | {r['load'] * 1e3:.0f} | {speed} |")


if __name__ == "__main__":
    sys.exit(main())
