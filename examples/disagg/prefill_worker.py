#!/usr/bin/env python3
"""The prefill worker of examples/disagg: runs a request's prompt through SmolLM2-135M-Instruct and sends the KV
cache to the decode worker over splitzip.transfer (UCX), each layer's K and V as soon as that layer computed them.

The send starts with the request (handshake first) and is gated: after layer l's K and V are in the prefill cache,
ready() lets the transfer's codec thread compress them (or, raw, copy them) and send them while this process goes
on with layer l's attention and the layers after it. The prompt's last token is not prefilled here: the decode
worker runs it as its first decode step, which gives the first generated token (as an engine that receives the
whole prompt's cache from elsewhere recomputes the last position to get its logits).

Requests (JSON lines on stdin, from run.py):
  {"op": "prefill", "id": N, "tokens": T, "port": P, "mode": "raw"|"compressed", "rate": bytes/s (0: uncapped),
   "threads": codec threads, "overlap": true|false, "t_request": monotonic time}
      -> {"id", "t_start", "t_kv_ready" (the last K and V computed and marked ready), "t_compute_end", "t_sent",
          "raw_bytes", "payload_bytes", "wire_bytes", "encode_cpu_s", "kv_sha256"}
  {"op": "reference", "tokens": T, "new": K}   the single-process run: prefill + greedy decode here, no transfer
      -> {"tokens": [...]}
"""

import hashlib
import sys

import _common as c
from splitzip import transfer


def prefill(model, prompts, req):
    ids = prompts.get(req["tokens"])
    n = len(ids) - 1
    cache = model.new_cache(n)  # [L, 2, n, G, d]: cache[l, kv] is one contiguous tensor
    tensors = [(c.tensor_name(req["id"], l, kv), cache[l, kv]) for l in range(model.n_layers) for kv in (0, 1)]
    t_start = c.now()
    sender = transfer.Sender(("127.0.0.1", req["port"]), tensors, gated=True, raw=req["mode"] == "raw",
                             rate=float(req["rate"]), threads=req["threads"], timeout=60)

    t_kv_ready = None

    def layer_done(li):
        nonlocal t_kv_ready
        if req["overlap"]:
            sender.ready(2 * li)
            sender.ready(2 * li + 1)
            t_kv_ready = c.now()

    with sender:
        model.prefill(ids[:-1], cache, on_layer=layer_done)
        t_compute_end = c.now()
        if not req["overlap"]:
            for i in range(len(tensors)):
                sender.ready(i)
            t_kv_ready = c.now()
    stats = sender.wait()
    t_sent = c.now()
    return {"id": req["id"], "t_start": t_start, "t_kv_ready": t_kv_ready, "t_compute_end": t_compute_end,
            "t_sent": t_sent,
            "raw_bytes": stats.raw_bytes, "payload_bytes": stats.payload_bytes, "wire_bytes": stats.wire_bytes,
            "encode_cpu_s": stats.codec_seconds, "kv_sha256": hashlib.sha256(cache.tobytes()).hexdigest()}


def reference(model, prompts, req):
    ids = prompts.get(req["tokens"])
    n = len(ids) - 1
    cache = model.new_cache(n + req["new"])
    model.prefill(ids[:-1], cache)
    return {"tokens": model.generate(cache, n, ids[-1], req["new"])}


def main():
    started = c.start()
    if started is None:
        return 2
    model, prompts = started
    c.reply({"ready": True, "prompt_tokens_available": len(prompts.ids)})
    c.serve(lambda req: (prefill if req["op"] == "prefill" else reference)(model, prompts, req))
    return 0


if __name__ == "__main__":
    sys.exit(main())
