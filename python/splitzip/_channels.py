"""Channel books (docs/FORMAT.md §4.9, §5.2): per-channel exponent windows for KV caches.

KV exponents depend on the channel (layer, K/V, kv_head, dim). A channel book gives each channel of each tensor a
window of 2^k consecutive exponents, calibrated offline from sample KV; a version 2 frame codes every value against
its channel's window and names the book by its id. A KV cache laid out [layers][2][tokens][kv_heads][head_dim] is
``tensors = 2 * layers`` tensors (tensor ``2 l`` is layer l's K, ``2 l + 1`` its V) of ``period = kv_heads *
head_dim`` channels.

    book = splitzip.calibrate_channels(sample_kv)            # sample_kv: [L, 2, T, H, D] bf16 array(s)
    box = splitzip.compress_kv(kv, book)                     # container: the book + one frame per tensor
    kv2 = splitzip.Container(box).original()                 # the bytes of kv, as `splitzip decompress` gives
    frame = splitzip.compress(kv[3, 1], book, book_tensor=7) # one tensor: layer 3's V
    values = splitzip.decompress(frame, book=book)
"""

from __future__ import annotations

import os
from typing import Iterable, Optional, Sequence, Tuple, Union

import numpy as np

from . import _splitzip as _ext
from ._core import (
    _DTYPE_NAMES,
    _DTYPE_SIZES,
    DTYPE_IDS,
    BufferLike,
    DTypeLike,
    Tensor,
    _Tensor,
    _chunk_log2,
    _flags,
    _host_bytes,
    _int_arg,
    _threads,
    dtype_name,
)
from ._errors import check, error_for


class ChannelBook:
    """A channel book: ``tensors`` tensors of ``period`` channels, each with a base exponent (its window is
    ``base .. base + 2**code_bits - 1``). ``bases`` is a read-only uint8 array of shape (tensors, period); ``id`` is
    what version 2 frames refer to (XXH3-64 of the book file without its checksum). ``expected_bits_per_value`` is
    set by :func:`calibrate_channels`."""

    __slots__ = ("dtype", "code_bits", "period", "tensors", "bases", "id", "expected_bits_per_value")

    def __init__(self, dtype: DTypeLike, code_bits: int, bases: Union[np.ndarray, Sequence[Sequence[int]]]):
        self.dtype = dtype_name(dtype)
        self.code_bits = _int_arg(code_bits, "code_bits", 0, 255)
        b = np.array(bases, dtype=np.uint8, copy=True)
        if b.ndim != 2 or b.size == 0:
            raise ValueError(f"bases must be a (tensors, period) array of exponents, got shape {b.shape}")
        self.tensors, self.period = int(b.shape[0]), int(b.shape[1])
        b.setflags(write=False)
        self.bases = b
        status, self.id, _ = _ext.channel_book_serialize(self._as_tuple())
        check(status, "channel book")
        self.expected_bits_per_value: Optional[float] = None

    def _as_tuple(self) -> tuple:
        return (DTYPE_IDS[self.dtype], self.code_bits, self.period, self.tensors, self.bases.reshape(-1))

    def to_bytes(self) -> bytes:
        """The channel book file (docs/FORMAT.md §5.2), what `splitzip calibrate --kv-shape` writes."""
        status, _, data = _ext.channel_book_serialize(self._as_tuple())
        check(status, "channel book")
        return data

    @classmethod
    def from_bytes(cls, data: Union[bytes, bytearray, memoryview, np.ndarray]) -> "ChannelBook":
        """Parses a channel book file (exactly the book's bytes)."""
        if not isinstance(data, (bytes, bytearray, memoryview, np.ndarray)):
            raise TypeError(f"data must be bytes, got {type(data).__name__}")
        buf = np.frombuffer(bytes(data), dtype=np.uint8)
        status, t = _ext.channel_book_parse(buf)
        check(status, "channel book")
        did, k, period, tensors, _, bases = t
        return cls(did, k, np.frombuffer(bases, dtype=np.uint8).reshape(tensors, period))

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        with open(os.fspath(path), "wb") as f:
            f.write(self.to_bytes())

    @classmethod
    def load(cls, path: Union[str, "os.PathLike[str]"]) -> "ChannelBook":
        with open(os.fspath(path), "rb") as f:
            return cls.from_bytes(f.read())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChannelBook) and self.id == other.id and self.to_bytes() == other.to_bytes()

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return (f"ChannelBook(dtype={self.dtype!r}, code_bits={self.code_bits}, tensors={self.tensors}, "
                f"period={self.period}, id=0x{self.id:016x})")


def _kv_layout(t: _Tensor, kv_shape: Optional[Sequence[int]], what: str) -> Tuple[int, int, int]:
    """(layers, kv_heads, head_dim) of a KV cache: from kv_shape (L, H, D) or (L, 2, T, H, D) (T may be None), else
    from the tensor's own 5-D shape [L, 2, T, H, D]."""
    if kv_shape is not None:
        dims = tuple(kv_shape)
        if len(dims) == 5:
            if dims[1] != 2:
                raise ValueError(f"{what}: kv_shape {dims}: the second dimension is K and V, it must be 2")
            dims = (dims[0], dims[3], dims[4])
        if len(dims) != 3:
            raise ValueError(f"{what}: kv_shape must be (layers, kv_heads, head_dim) or (L, 2, T, H, D)")
        L, H, D = (_int_arg(d, "kv_shape", 1, 1 << 30) for d in dims)
        return L, H, D
    if len(t.shape) != 5 or t.shape[1] != 2:
        raise ValueError(f"{what}: expected a KV cache of shape [layers, 2, tokens, kv_heads, head_dim], got "
                         f"{t.shape} (or give kv_shape=(layers, kv_heads, head_dim))")
    return int(t.shape[0]), int(t.shape[3]), int(t.shape[4])


def _tokens(t: _Tensor, did: int, L: int, H: int, D: int, what: str) -> int:
    token_bytes = 2 * L * H * D * _DTYPE_SIZES[did]
    if t.nbytes == 0 or t.nbytes % token_bytes:
        raise ValueError(f"{what}: {t.nbytes} bytes are not whole tokens of {2 * L} tensors of {H * D} channels")
    return t.nbytes // token_bytes


def calibrate_channels(kv: Union[Tensor, Iterable[Tensor]], kv_shape: Optional[Sequence[int]] = None,
                       dtype: Optional[DTypeLike] = None, code_bits: int = 0) -> ChannelBook:
    """A channel book calibrated on sample KV caches (one or an iterable; host copies of device tensors are made).

    kv: arrays of shape [layers, 2, tokens, kv_heads, head_dim] (tokens may differ between samples), or any
        contiguous tensors / bytes with ``kv_shape=(layers, kv_heads, head_dim)``.
    code_bits: 1..4, or 0 for the width with the smallest expected size.
    """
    if isinstance(kv, (list, tuple)):
        samples = list(kv)
    else:
        samples = [kv]
    if not samples:
        raise ValueError("calibrate_channels: no samples")
    k = _int_arg(code_bits, "code_bits", 0, 4)
    did, layout, arrays = None, None, []
    for i, x in enumerate(samples):
        if isinstance(x, np.ndarray) and not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        t = _Tensor(x, f"kv[{i}]")
        d = t.format_dtype(dtype, f"kv[{i}]")
        lay = _kv_layout(t, kv_shape, f"kv[{i}]")
        if did is not None and (d != did or lay != layout):
            raise ValueError(f"calibrate_channels: kv[{i}] is {_DTYPE_NAMES[d]} {lay}, kv[0] {_DTYPE_NAMES[did]} "
                             f"{layout}")
        did, layout = d, lay
        _tokens(t, d, *lay, f"kv[{i}]")
        arrays.append(_host_bytes(t))
    L, H, D = layout
    status, got_k, bits, bases = _ext.channel_calibrate(arrays, did, 2 * L, H * D, k)
    check(status, "calibrate_channels")
    book = ChannelBook(did, got_k, np.frombuffer(bases, dtype=np.uint8).reshape(2 * L, H * D))
    book.expected_bits_per_value = bits
    return book


def _book_arg(book: object) -> ChannelBook:
    if isinstance(book, (str, os.PathLike)):
        return ChannelBook.load(book)
    if not isinstance(book, ChannelBook):
        raise TypeError(f"book must be a ChannelBook or a channel book file path, got {type(book).__name__}")
    return book


def compress_channels(tensor: BufferLike, book: Union[ChannelBook, str, "os.PathLike[str]"], book_tensor: int,
                      chunk: Optional[int] = None, threads: Optional[int] = None, checksum: Union[bool, str] = True,
                      dtype: Optional[DTypeLike] = None, *, reference: bool = False) -> np.ndarray:
    """A version 2 frame of one tensor (tensor ``book_tensor`` of the book: 2 * layer + 0 for K, + 1 for V): value i
    is coded against the window of channel i mod book.period. Host tensors (as a 1-D uint8 numpy array)."""
    b = _book_arg(book)
    t = _Tensor(tensor, "tensor")
    if t.device != "cpu":
        raise ValueError("channel books: the Python module codes host tensors (the C API has "
                         "sz_cuda_compress_channels for device memory)")
    did = t.format_dtype(dtype, "tensor")
    if DTYPE_IDS[b.dtype] != did:
        raise error_for(9, f"the channel book is for {b.dtype}, the tensor is {_DTYPE_NAMES[did]}")
    tz = _int_arg(book_tensor, "book_tensor", 0, b.tensors - 1)
    n = t.nbytes // _DTYPE_SIZES[did]
    dst = np.empty(_ext.compress_bound(n, did), dtype=np.uint8)
    status, size = _ext.compress_channels(t.bytes, n, did, b._as_tuple(), tz, _chunk_log2(chunk), _flags(checksum),
                                          _threads(threads), dst, bool(reference))
    check(status, "compress")
    dst.resize((size,), refcheck=False)
    return dst


def decompress_into(frame: np.ndarray, book: Optional[ChannelBook], out: np.ndarray, threads: int,
                    what: str) -> None:
    """Decodes a frame (either version) into the host byte view ``out``; version 2 frames need their book."""
    if book is None:
        st, _ = _ext.decompress(frame, out, threads)
    else:
        st, _ = _ext.decompress_book(frame, book._as_tuple(), out, threads)
    check(st, what)


def frame_book_id(frame: np.ndarray) -> Optional[Tuple[int, int]]:
    """(book id, book tensor) of a version 2 frame, None for a version 1 frame."""
    st, book_id, tensor, _ = _ext.frame_book_ref(frame)
    return (book_id, tensor) if st == 0 else None


def compress_kv(kv: Tensor, book: Union[ChannelBook, str, "os.PathLike[str]"],
                kv_shape: Optional[Sequence[int]] = None, chunk: Optional[int] = None,
                threads: Optional[int] = None, checksum: Union[bool, str] = True, dtype: Optional[DTypeLike] = None) -> np.ndarray:
    """A KV cache [layers, 2, tokens, kv_heads, head_dim] as a container (docs/FORMAT.md §6): the book (item
    "channel_book", kind 3), then one version 2 frame per tensor ("layer<l>.k", "layer<l>.v", shape [tokens,
    kv_heads, head_dim]) that together restore its bytes. Byte-identical to ``splitzip compress --kv-shape
    L,2,T,H,D --codebook BOOK``. Host tensors. Given a :class:`SymbolTable` instead of a book, this is
    :func:`compress_kv_max` (as the CLI's ``--codebook`` takes either with its ``--mode``)."""
    from ._container import _assemble
    from ._max import SymbolTable, compress_kv_max

    if isinstance(book, SymbolTable):
        return compress_kv_max(kv, book, kv_shape=kv_shape, chunk=chunk, threads=threads, checksum=checksum,
                               dtype=dtype)
    b = _book_arg(book)
    t = _Tensor(kv if not (isinstance(kv, np.ndarray) and not kv.flags.c_contiguous) else np.ascontiguousarray(kv),
                "kv")
    if t.device != "cpu":
        raise ValueError("compress_kv: host tensors (the C API has sz_cuda_compress_channels for device memory)")
    did = t.format_dtype(dtype, "kv")
    L, H, D = _kv_layout(t, kv_shape, "kv")
    if DTYPE_IDS[b.dtype] != did:
        raise error_for(9, f"the channel book is for {b.dtype}, the KV cache is {_DTYPE_NAMES[did]}")
    if b.tensors != 2 * L or b.period != H * D:
        raise ValueError(f"the channel book has {b.tensors} tensors of {b.period} channels, the KV cache "
                         f"{2 * L} of {H * D}")
    T = _tokens(t, did, L, H, D, "kv")
    n = T * H * D
    tensor_bytes = n * _DTYPE_SIZES[did]
    log2, flags, nthreads = _chunk_log2(chunk), _flags(checksum), _threads(threads)
    book_bytes = np.frombuffer(b.to_bytes(), dtype=np.uint8)
    parts = [((3, 0, (), b"channel_book", 0, 0), book_bytes)]
    flat = t.bytes
    for tz in range(2 * L):
        src = flat[tz * tensor_bytes:(tz + 1) * tensor_bytes]
        dst = np.empty(_ext.compress_bound(n, did), dtype=np.uint8)
        status, size = _ext.compress_channels(src, n, did, b._as_tuple(), tz, log2, flags, nthreads, dst)
        check(status, f"compress_kv: tensor {tz}")
        name = f"layer{tz // 2}.{'v' if tz % 2 else 'k'}".encode()
        parts.append(((1, did, (T, H, D), name, tz * tensor_bytes, tensor_bytes), dst[:size]))
    return _assemble(parts)
