#!/usr/bin/env python3
"""The decode worker of examples/disagg: receives a request's KV cache from the prefill worker over
splitzip.transfer (UCX) straight into its own KV cache, then generates greedily with SmolLM2-135M-Instruct.

It listens on a loopback port (printed in its first reply). For a request it allocates a cache for the prompt and the
tokens to generate and serves one transfer session whose destinations are that cache's per-layer K and V slices:
the transfer's decode thread decompresses (or, raw, copies) each message into place as it arrives, while the
prefill worker computes later layers. Then it runs the prompt's last token as its first decode step: the first
generated token, and the end of the time to first token.

Requests (JSON lines on stdin, from run.py):
  {"op": "decode", "id": N, "tokens": T, "new": K, "t_request": monotonic time}
      -> {"id", "tokens": [...], "t_kv", "t_first", "t_done", "raw": bool, "decompress_cpu_s", "kv_sha256"}
"""

import argparse
import hashlib
import sys

import _common as c
from splitzip import transfer


def decode(model, prompts, server, slots, req):
    ids = prompts.get(req["tokens"])
    n = len(ids) - 1
    cache = model.new_cache(n + req["new"])
    want = {c.tensor_name(req["id"], l, kv): cache[l, kv, :n] for l in range(model.n_layers) for kv in (0, 1)}
    slots.clear()
    slots.update(want)
    session = server.serve_one()  # every tensor verified and in place
    t_kv = c.now()
    got = {t.name for t in session.tensors}
    if got != set(want):
        raise RuntimeError(f"the session brought {sorted(got - set(want))[:3]}..., lacked "
                           f"{sorted(set(want) - got)[:3]}...")
    times = []
    tokens = model.generate(cache, n, ids[-1], req["new"], on_token=lambda i, t: times.append(c.now()))
    return {"id": req["id"], "tokens": tokens, "t_kv": t_kv, "t_first": times[0], "t_done": times[-1],
            "raw": session.raw, "decompress_cpu_s": session.codec_seconds,
            "kv_sha256": hashlib.sha256(cache[:, :, :n].tobytes()).hexdigest()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1, help="decode threads of the transfer session")
    ap.add_argument("--timeout", type=float, default=600,
                    help="seconds a session may go without a message (the prefill of a layer comes between)")
    args = ap.parse_args()
    started = c.start()
    if started is None:
        return 2
    model, prompts = started
    slots = {}  # the current request's destinations by tensor name

    def destination(name, dtype, nbytes):
        dst = slots.get(name)
        if dst is None or dtype != "bf16" or dst.nbytes != nbytes:
            c.log(f"refused tensor {name!r} ({dtype}, {nbytes} bytes): not one of this request's")
            return None
        return dst

    with transfer.Server(destination=destination, threads=args.threads, timeout=args.timeout,
                         max_sessions=1) as server:
        c.reply({"ready": True, "port": server.port})
        c.serve(lambda req: decode(model, prompts, server, slots, req))
    return 0


if __name__ == "__main__":
    sys.exit(main())
