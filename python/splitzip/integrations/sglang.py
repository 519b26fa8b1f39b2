"""SplitZip as a compression backend of SGLang's prefill → decode KV transfer.

SGLang's staging transfer gathers a request's KV into one contiguous buffer before it is sent: every layer's K for
the request's tokens, then every layer's V, each ``[tokens, kv_heads, head_dim]``, from the per-layer pools
``k_buffers[l]`` / ``v_buffers[l]`` of shape ``[slots, kv_heads, head_dim]`` in which page ``p`` is the
``page_size`` consecutive slots from ``p * page_size``. The decode side receives into a staging slot and scatters it
into its own pools. A compression backend sits between the staging buffer and the transfer; SGLang's draft
compression framework names six operations for it, and this module implements them as follows (the contract is
written out in docs/INTEGRATION.md):

    max_output_bytes(num_tokens) -> int         the largest blob of a staging buffer of num_tokens tokens
    compress_into(src, dst) -> int              staging buffer -> one frame in the start of dst; its size
    decompress_into(src, dst) -> int            frame at the start of src -> staging buffer; the bytes written
    compress_batch(srcs, dsts) -> list[int]     compress_into over pairs
    decompress_batch(srcs, dsts) -> list[int]   decompress_into over pairs
    drain() -> None                             waits for enqueued GPU decodes and raises the first failure

plus two calls that skip the staging copy: ``gather_compress_into(k_buffers, v_buffers, kv_indices, dst)`` makes the
frame straight from the pools' pages (on a GPU one launch over a device array of page pointers), byte-identical to
``compress_into`` of the gathered staging buffer; ``scatter_decompress(src, k_buffers, v_buffers, kv_indices)``
decodes a frame straight into the decode side's pages.

The blob is one SplitZip frame (docs/FORMAT.md §4) of the staging buffer's bytes, so either side may use the staged
or the fused path. Peers agree on ``capabilities`` (strings naming the frame format and the dtype) before they use
the backend. Buffers are caller-owned tensors of numpy, torch (CPU or CUDA) or cupy; ``dst`` must hold
``max_output_bytes`` bytes. No SGLang import is needed: the backend speaks tensors.
"""

from __future__ import annotations

import sys
from typing import List, Optional, Sequence

from .._core import DTypeLike, Tensor, _Tensor, _dtype_id, _int_arg, check_status
from . import _pagetable
from ._codec import Codec

#: the frame format this backend puts on the wire (peers must both list it)
CAPABILITY_FRAME = "splitzip-frame-v1"


class SplitZipBackend:
    """A lossless KV compression backend for SGLang's staging transfer.

    num_layers, kv_heads, head_dim: the shape of one rank's KV (the heads this rank sends); dtype: the KV dtype
        ("bf16", "fp16", "fp32", "fp8_e4m3", "fp8_e5m2" or a torch / numpy dtype); page_size: tokens per page of
        the pools (for the fused calls).
    codebook, chunk, threads, checksum: as in :func:`splitzip.compress`; both peers need no agreement on them (a
    frame carries its codebook and chunk size).
    """

    name = "splitzip"

    def __init__(self, num_layers: int, kv_heads: int, head_dim: int, dtype: DTypeLike = "bf16", page_size: int = 1,
                 *, codebook=None, chunk: Optional[int] = None, threads: Optional[int] = None, checksum: bool = True):
        self.num_layers = _int_arg(num_layers, "num_layers", 1, 1 << 20)
        self.kv_heads = _int_arg(kv_heads, "kv_heads", 1, 1 << 20)
        self.head_dim = _int_arg(head_dim, "head_dim", 1, 1 << 20)
        self.page_size = _int_arg(page_size, "page_size", 1, 1 << 20)
        self._codec = Codec(_dtype_id(dtype), codebook, chunk, threads, checksum)
        self.dtype = self._codec.dtype
        #: bytes of one token in the staging buffer: every layer's K and V row
        self.token_bytes = 2 * self.num_layers * self.kv_heads * self.head_dim * self._codec.value_size
        self._pending: List[object] = []  # device status tensors of enqueued decodes

    @property
    def capabilities(self) -> tuple:
        """What a peer must also list to exchange this backend's blobs."""
        return (CAPABILITY_FRAME, f"dtype={self.dtype}", "lossless")

    def __repr__(self) -> str:
        return (f"SplitZipBackend(num_layers={self.num_layers}, kv_heads={self.kv_heads}, head_dim={self.head_dim}, "
                f"dtype={self.dtype!r}, page_size={self.page_size})")

    # ---- the six operations -------------------------------------------------------------------------------------

    def max_output_bytes(self, num_tokens: int) -> int:
        """The most bytes ``compress_into`` writes for a staging buffer of ``num_tokens`` tokens."""
        t = _int_arg(num_tokens, "num_tokens", 0, 1 << 40)
        return self._codec.bound(t * self.token_bytes // self._codec.value_size)

    def _tokens(self, t: _Tensor, what: str) -> int:
        if t.nbytes % self.token_bytes:
            raise ValueError(f"{what}: {t.nbytes} bytes are not whole tokens of {self.token_bytes} bytes "
                             f"({self.num_layers} layers x K,V x {self.kv_heads} heads x {self.head_dim} "
                             f"{self.dtype})")
        return t.nbytes // self.token_bytes

    def compress_into(self, src: Tensor, dst: Tensor) -> int:
        """Compresses a staging buffer (whole tokens, any element type) into one frame at the start of ``dst`` (a
        buffer of ``max_output_bytes(tokens)`` bytes on src's device). Returns the frame's size."""
        s = _Tensor(src, "src")
        self._tokens(s, "compress_into: src")
        d = _Tensor(dst, "dst", writable=True)
        return self._codec.compress_into(s, d, "compress_into")

    def decompress_into(self, src: Tensor, dst: Tensor) -> int:
        """Decodes the frame at the start of ``src`` into the start of ``dst`` (a staging buffer on src's device
        with room for it). Returns the bytes written (whole tokens). On a GPU the decode is enqueued on the current
        stream and checked by :meth:`drain`; on the host it is done, and checked, when the call returns."""
        s = _Tensor(src, "src")
        d = _Tensor(dst, "dst", writable=True)
        status = self._new_status(s)
        size = self._codec.decompress_into(s, d, "decompress_into", status=status)
        if size % self.token_bytes:
            raise ValueError(f"decompress_into: the frame holds {size} bytes, not whole tokens of "
                             f"{self.token_bytes} bytes")
        return size

    def compress_batch(self, srcs: Sequence[Tensor], dsts: Sequence[Tensor]) -> List[int]:
        """``compress_into`` over (src, dst) pairs; the sizes in order."""
        pairs = self._pairs(srcs, dsts, "compress_batch")
        return [self.compress_into(s, d) for s, d in pairs]

    def decompress_batch(self, srcs: Sequence[Tensor], dsts: Sequence[Tensor]) -> List[int]:
        """``decompress_into`` over (src, dst) pairs; the sizes in order."""
        pairs = self._pairs(srcs, dsts, "decompress_batch")
        return [self.decompress_into(s, d) for s, d in pairs]

    def drain(self) -> None:
        """Waits for every decode this backend enqueued on a GPU and raises the first failure
        (:class:`splitzip.Error`). Nothing is outstanding on the host."""
        pending, self._pending = self._pending, []
        for st in pending:
            check_status(st)

    # ---- without the staging copy -------------------------------------------------------------------------------

    def gather_compress_into(self, k_buffers: Sequence[Tensor], v_buffers: Sequence[Tensor], kv_indices,
                             dst: Tensor) -> int:
        """Compresses the pages ``kv_indices`` of every layer's K then V pool into one frame at the start of ``dst``
        without a staging buffer: the frame is byte-identical to ``compress_into`` of the staging buffer that
        SGLang's gather would build. Returns its size. On a GPU: one launch over a page-pointer table built on the
        device, writing straight into ``dst``; the call waits for the frame's size (the one wait)."""
        table = self._pool_table(k_buffers, v_buffers, kv_indices, "gather_compress_into")
        if table is None:  # pools of another framework: the list-of-pages path
            pages = self._pool_pages(k_buffers, v_buffers, kv_indices, "gather_compress_into", writable=False)
            n_pages = len(pages)
        else:
            n_pages = table.n_pages
        tokens = n_pages // (2 * self.num_layers) * self.page_size
        d = _Tensor(dst, "dst", writable=True)
        need = self.max_output_bytes(tokens)
        if d.nbytes < need:
            raise ValueError(f"gather_compress_into: dst holds {d.nbytes} bytes, max_output_bytes({tokens}) is "
                             f"{need}")
        if table is None:
            return self._codec.compress_pages(pages, "gather_compress_into", dst=d)
        if d.device != table.device:
            raise ValueError(f"gather_compress_into: dst is in {d.device} memory, the pools in {table.device} "
                             f"memory")
        if table.device == "cuda":
            _, size = self._codec.compress_table(table, "gather_compress_into", dst=d.bytes)
            return int(size.item())
        return self._codec.compress_table(table, "gather_compress_into", dst=d.bytes)

    def scatter_decompress(self, src: Tensor, k_buffers: Sequence[Tensor], v_buffers: Sequence[Tensor],
                           kv_indices) -> int:
        """Decodes the frame at the start of ``src`` straight into the pages ``kv_indices`` of every layer's K then
        V pool (the decode side's pools), without a staging buffer. Returns the bytes written. On a GPU the decode
        is enqueued (one launch over a page-pointer table built on the device) and checked by :meth:`drain`."""
        table = self._pool_table(k_buffers, v_buffers, kv_indices, "scatter_decompress")
        s = _Tensor(src, "src")
        raw = self._codec.frame_header(s, "scatter_decompress")
        frame = s.bytes[: int(raw["frame_size"])]
        if table is None:  # pools of another framework: the list-of-pages path
            pages = self._pool_pages(k_buffers, v_buffers, kv_indices, "scatter_decompress", writable=True)
            self._codec.decompress_pages(frame, pages, status=self._new_status(s))
            return int(raw["decompressed_size"])
        if s.device != table.device:
            raise ValueError(f"scatter_decompress: src is in {s.device} memory, the pools in {table.device} memory")
        self._codec.decompress_table(frame, table, status=self._new_status(s), what="scatter_decompress",
                                     header=raw)
        return int(raw["decompressed_size"])

    # ---- helpers ------------------------------------------------------------------------------------------------

    def _new_status(self, s: _Tensor):
        if s.device == "cpu":
            return None
        if s.framework == "torch":
            import torch
            st = torch.full((1,), -1, dtype=torch.int32, device=s.obj.device)
        else:
            import cupy
            st = cupy.full(1, -1, dtype=cupy.int32)
        self._pending.append(st)
        return st

    @staticmethod
    def _pairs(srcs, dsts, what):
        srcs, dsts = list(srcs), list(dsts)
        if len(srcs) != len(dsts):
            raise ValueError(f"{what}: {len(srcs)} sources but {len(dsts)} destinations")
        return list(zip(srcs, dsts))

    def _indices(self, kv_indices, what: str) -> List[int]:
        if hasattr(kv_indices, "tolist") and not isinstance(kv_indices, (list, tuple)):
            torch = sys.modules.get("torch")
            if torch is not None and isinstance(kv_indices, torch.Tensor):
                kv_indices = kv_indices.detach().cpu()
            kv_indices = kv_indices.tolist()
        if isinstance(kv_indices, (str, bytes)) or not hasattr(kv_indices, "__iter__"):
            raise TypeError(f"{what}: kv_indices must be a list or 1-D array of page indices, got "
                            f"{type(kv_indices).__name__}")
        idx = [_int_arg(i, f"{what}: kv_indices[{n}]", 0, (1 << 63) - 1) for n, i in enumerate(kv_indices)]
        if not idx:
            raise ValueError(f"{what}: kv_indices is empty")
        return idx

    def _pools(self, k_buffers, v_buffers, what: str) -> list:
        """(kind, layer, pool, slots) of every K pool, then every V pool, each checked against the backend's
        shape."""
        ks, vs = list(k_buffers), list(v_buffers)
        if len(ks) != self.num_layers or len(vs) != self.num_layers:
            raise ValueError(f"{what}: {len(ks)} K and {len(vs)} V pools for a backend of {self.num_layers} layers")
        out = []
        for kind, pools in (("k_buffers", ks), ("v_buffers", vs)):
            for layer, pool in enumerate(pools):
                shape = tuple(int(d) for d in pool.shape)
                if len(shape) != 3 or shape[1:] != (self.kv_heads, self.head_dim):
                    raise ValueError(f"{what}: {kind}[{layer}] has shape {shape}, expected [slots, {self.kv_heads}, "
                                     f"{self.head_dim}]")
                out.append((kind, layer, pool, shape[0]))
        return out

    def _pool_table(self, k_buffers, v_buffers, kv_indices, what: str):
        """The pages ``kv_indices`` of every K pool, then every V pool, as a page table (one group per pool; no
        per-page Python work); None for pools the tables do not handle (cupy)."""
        pools = self._pools(k_buffers, v_buffers, what)
        if not all(_pagetable.supported(p) for _, _, p, _ in pools):
            return None
        groups, slots = [], None
        for kind, layer, pool, n in pools:
            if slots is None or n < slots[0]:
                slots = (n, kind, layer)
            groups += _pagetable.groups_of(pool, f"{what}: {kind}[{layer}]", group_axis=False,
                                           page_slots=self.page_size)
        ids = _pagetable.check_ids(kv_indices, None, f"{what}: kv_indices", kind="page")
        last = int(ids.max())
        if (last + 1) * self.page_size > slots[0]:
            raise ValueError(f"{what}: page {last} ends at slot {(last + 1) * self.page_size}, {slots[1]}[{slots[2]}] "
                             f"has {slots[0]} slots")
        return _pagetable.PageTable(groups, ids, what)

    def _pool_pages(self, k_buffers, v_buffers, kv_indices, what: str, writable: bool) -> list:
        pools = self._pools(k_buffers, v_buffers, what)
        idx = self._indices(kv_indices, what)
        ps = self.page_size
        pages = []
        for kind, layer, pool, slots in pools:
            for i in idx:
                if (i + 1) * ps > slots:
                    raise ValueError(f"{what}: page {i} ends at slot {(i + 1) * ps}, {kind}[{layer}] has {slots} slots")
                pages.append(pool[i * ps:(i + 1) * ps])
        return pages

