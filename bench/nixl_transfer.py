#!/usr/bin/env python3
"""Raw against compressed KV through the NIXL store (splitzip.integrations.nixl) between two processes.

This process is the holder (a NixlStore(port=0): the decode side, where objects land); a child started by it is
the client (the prefill side) and puts objects of real KV into it over NIXL's UCX backend. The KV: the shipped BF16
slice (data/kv_code_bf16_slice.bin) tiled to each object's size (real KV values, repeated). For each object size
(--sizes, MiB) and mode, the child times:

    raw          put(the object's bytes): until the object is visible at the holder
    compressed   splitzip.compress (--threads codec threads) + put(the frame)
    pipelined    --count objects through send_tensors: compressing object i+1 while object i is on the wire

MB/s are of the raw KV (raw bytes / time; 1 MB = 10^6 bytes), so the modes compare directly. After each size the
holder checks every object it got (SHA-256 of the decoded KV against the original's) and times its decode
(splitzip.decompress, --threads threads): the column "decode ms". Medians over --repeat after one warm-up.

The link: NIXL's UCX backend between two processes of one host (loopback; on a host without RDMA devices UCX
uses TCP, see docs/INTEGRATION.md). --rates emulates slower links (GB/s; 0: uncapped loopback): a transfer the
client posts counts as done no earlier than its last byte would have arrived over a link of that rate that carries
the chunks one after another (the real loopback transfer is the lower bound). Done by wrappers around the store's
private _Client._post and _Client._wait in the child, for this benchmark only.

    python bench/nixl_transfer.py --sizes 1,4,16,64 --rates 0,1 --repeat 5 --threads 2 --markdown out.md
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

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
SLICE = REPO / "data" / "kv_code_bf16_slice.bin"


def kv_object(nbytes):
    """nbytes of real BF16 KV (the slice tiled), as a bf16 array."""
    import ml_dtypes
    raw = np.fromfile(SLICE, dtype="<u2")
    return np.resize(raw, nbytes // 2).view(ml_dtypes.bfloat16)


def sha(a):
    return hashlib.sha256(np.ascontiguousarray(a).view(np.uint8).tobytes()).hexdigest()


# ---- the client (child process) ------------------------------------------------------------------------------

def client(args):
    import splitzip
    from splitzip.integrations import nixl
    store = nixl.NixlStore(address=args.client, timeout=60, chunk_bytes=args.chunk << 20,
                           staging_bytes=args.staging << 20, inflight=args.inflight)
    link = {"rate": 0.0, "free_at": 0.0, "due": {}}
    post, wait = nixl._Client._post, nixl._Client._wait

    def paced_post(self, op, slot, remote, n, notif=b""):
        h = post(self, op, slot, remote, n, notif)
        if link["rate"] > 0:  # when its last byte would arrive over the link, chunks carried one after another
            link["free_at"] = max(time.perf_counter(), link["free_at"]) + n / link["rate"]
            link["due"][id(h)] = link["free_at"]
        return h

    def paced_wait(self, h, deadline, what):
        due = link["due"].pop(id(h), 0.0)
        wait(self, h, deadline, what)
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)

    nixl._Client._post, nixl._Client._wait = paced_post, paced_wait
    for rate in args.rate_list:
        link["rate"] = rate * 1e9
        for size in args.size_list:
            kv = kv_object(size << 20)
            raw = kv.view(np.uint8)
            times = {"raw": [], "compressed": [], "pipelined": []}
            frame_bytes = 0
            for rep in range(args.repeat + 1):
                t = time.perf_counter()
                store.put(f"raw/{size}", raw)
                dt_raw = time.perf_counter() - t
                t = time.perf_counter()
                frame = splitzip.compress(kv, threads=args.threads)
                store.put(f"frame/{size}", frame)
                dt_comp = time.perf_counter() - t
                frame_bytes = int(frame.nbytes)
                del frame
                sent = nixl.send_tensors(store, ((f"pipe/{size}/{i}", kv) for i in range(args.count)),
                                         threads=args.threads)
                if rep:  # the first is a warm-up
                    times["raw"].append(dt_raw)
                    times["compressed"].append(dt_comp)
                    times["pipelined"].append(sent["seconds"] / args.count)
            print(json.dumps({"rate": rate, "size": size, "raw_bytes": int(raw.nbytes), "frame_bytes": frame_bytes,
                              "pipe_stored": sent["stored_bytes"] // args.count,
                              **{k: statistics.median(v) for k, v in times.items()}}), flush=True)
            if sys.stdin.readline().strip() != "go":  # the holder checked this size's objects
                raise SystemExit("the holder stopped")
    store.close()


# ---- the holder (this process) -------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1,2,4,8,16,32,64", help="object sizes, MiB")
    ap.add_argument("--rates", default="0", help="emulated link rates, GB/s (0: uncapped loopback)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--count", type=int, default=4, help="objects per pipelined run")
    ap.add_argument("--threads", type=int, default=1, help="codec threads, each side")
    ap.add_argument("--chunk", type=int, default=8, help="the client's chunk (one NIXL transfer), MiB")
    ap.add_argument("--staging", type=int, default=64, help="the client's staging, MiB")
    ap.add_argument("--inflight", type=int, default=2)
    ap.add_argument("--markdown", help="also write the table here")
    ap.add_argument("--client", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.size_list = [int(s) for s in args.sizes.split(",")]
    args.rate_list = [float(r) for r in args.rates.split(",")]
    if args.client:
        return client(args)

    import splitzip
    from splitzip.integrations import nixl
    biggest = max(args.size_list) << 20
    h = nixl.NixlStore(port=0, capacity=(args.count + 3) * biggest + (64 << 20), timeout=60)
    cmd = [sys.executable, __file__, "--client", h.holder_address, "--sizes", args.sizes, "--rates", args.rates,
           "--repeat", str(args.repeat), "--count", str(args.count), "--threads", str(args.threads),
           "--chunk", str(args.chunk), "--staging", str(args.staging), "--inflight", str(args.inflight)]
    child = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    rows = []
    try:
        for line in child.stdout:
            if not line.startswith("{"):
                continue  # NIXL's log lines
            r = json.loads(line)
            kv = kv_object(r["size"] << 20)
            want = sha(kv)
            assert h.get(f"raw/{r['size']}").tobytes() == kv.view(np.uint8).tobytes(), "raw object differs"
            decode = []
            for key in [f"frame/{r['size']}"] + [f"pipe/{r['size']}/{i}" for i in range(args.count)]:
                blob = h.get(key)
                t = time.perf_counter()
                back = splitzip.decompress(blob, threads=args.threads)
                decode.append(time.perf_counter() - t)
                assert sha(back.reshape(-1)) == want, f"{key} decodes to other KV"
            for key in [f"raw/{r['size']}", f"frame/{r['size']}"] + [f"pipe/{r['size']}/{i}"
                                                                     for i in range(args.count)]:
                h.delete(key)
            r["decode"] = statistics.median(decode)
            rows.append(r)
            print(f"  {r['size']:>3} MiB at {r['rate'] or 'uncapped'}: raw {r['raw'] * 1e3:.1f} ms, compressed "
                  f"{r['compressed'] * 1e3:.1f} ms, pipelined {r['pipelined'] * 1e3:.1f} ms/object "
                  f"(checked bit-exact)", file=sys.stderr, flush=True)
            child.stdin.write("go\n")
            child.stdin.flush()
    finally:
        child.stdin.close()
        rc = child.wait()
        h.close()
    if rc != 0:
        raise SystemExit(f"the client failed (exit {rc})")

    mb = lambda r, k: r["raw_bytes"] / r[k] / 1e6  # noqa: E731
    out = [f"nixl: {nixl.nixl_version()}; splitzip {splitzip.__version__}; Python {platform.python_version()}; "
           f"{os.cpu_count()} CPUs; UCX_TLS={os.environ.get('UCX_TLS', '(unset)')}, "
           f"UCX_MODULES={os.environ.get('UCX_MODULES', '(unset)')}; codec threads {args.threads}; chunk "
           f"{args.chunk} MiB, staging {args.staging} MiB, inflight {args.inflight}; median of {args.repeat}",
           "",
           "| link | object | raw ms | raw MB/s | compressed ms | compressed MB/s | pipelined ms/object | "
           "pipelined MB/s | ratio | decode ms |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        link = f"{r['rate']:g} GB/s" if r["rate"] else "uncapped"
        out.append(f"| {link} | {r['size']} MiB | {r['raw'] * 1e3:.1f} | {mb(r, 'raw'):.0f} | "
                   f"{r['compressed'] * 1e3:.1f} | {mb(r, 'compressed'):.0f} | {r['pipelined'] * 1e3:.1f} | "
                   f"{mb(r, 'pipelined'):.0f} | {r['raw_bytes'] / r['frame_bytes']:.3f} | {r['decode'] * 1e3:.1f} |")
    text = "\n".join(out)
    print(text)
    if args.markdown:
        pathlib.Path(args.markdown).write_text(text + "\n")


if __name__ == "__main__":
    main()
