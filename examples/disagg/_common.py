"""What the driver and the two workers of examples/disagg share: the model, the prompt, tensor names, and the JSON
lines they exchange (one object per line; requests on a worker's stdin, replies on its stdout; logs on stderr)."""

import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "bench" / "models"  # smollm2.py: the model and its forward pass (one implementation)


def import_model():
    """The bench/models/smollm2 module; ImportError naming what to install when its packages are missing."""
    if str(MODELS) not in sys.path:
        sys.path.insert(0, str(MODELS))
    import smollm2
    return smollm2


def load_model():
    smollm2 = import_model()
    t0 = time.perf_counter()
    model = smollm2.Model(smollm2.find_gguf())
    log(f"model {model.name}: {model.n_layers} layers, {model.n_kv_heads} KV heads x {model.head_dim} "
        f"(loaded in {time.perf_counter() - t0:.1f} s)")
    return model


def start():
    """A worker's start: (model, prompts), or None once the driver was told why not (the model's packages or the
    transfer library missing)."""
    from splitzip import transfer
    if not transfer.available():
        reply({"error": "this splitzip has no transfer library (built without UCX)"})
        return None
    try:
        model = load_model()
    except (ImportError, FileNotFoundError) as e:
        reply({"error": f"cannot load the model: {e}"})
        return None
    return model, Prompts(model)


class Prompts:
    """Prompts of n tokens: the first n tokens of GPL-3 followed by the stdlib's argparse.py (both on every Debian
    machine), tokenized once."""

    def __init__(self, model):
        texts = import_model().load_texts()
        text = "\n\n".join(texts[k][1] for k in ("prose", "code") if k in texts)
        self.ids = model.encode(text)

    def get(self, n):
        if not 2 <= n <= len(self.ids):
            raise ValueError(f"prompt of {n} tokens: the texts have {len(self.ids)}")
        return self.ids[:n]


def tensor_name(request, layer, kv):
    """The transfer's name of one layer's K (kv 0) or V (kv 1) of a request."""
    return f"r{request}.L{layer}.{'KV'[kv]}"


def log(msg):
    print(f"[{Path(sys.argv[0]).stem}] {msg}", file=sys.stderr, flush=True)


_replies = None  # the stream replies go to (stdout unless private_stdout() moved it)


def private_stdout():
    """Keeps the process's stdout for replies only: anything else written to it (a library's log lines) goes to
    stderr from now on."""
    global _replies
    fd = os.dup(1)
    os.dup2(2, 1)
    _replies = os.fdopen(fd, "w", buffering=1)
    sys.stdout = sys.stderr


def reply(obj):
    out = _replies or sys.stdout
    out.write(json.dumps(obj) + "\n")
    out.flush()


def serve(handle):
    """Answers the requests on stdin with handle(request) until stdin closes; an exception is answered as an error
    (the driver stops at it)."""
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        try:
            out = handle(req)
        except Exception as e:
            out = {"id": req.get("id"), "error": f"{type(e).__name__}: {e}"}
        reply(out)


def now():
    """CLOCK_MONOTONIC: one clock for every process of the machine, so the workers' times compare."""
    return time.monotonic()
