"""SplitZip as an LMCache serde: KV chunks stored to LMCache's L2 tiers (CPU, disk, remote) are stored compressed.

LMCache's storage controllers wrap an L2 adapter with a serde named in the adapter's JSON spec; the serde is built
by a factory registered under that name (``register_serde_factory``). Importing this module registers the factory
``"splitzip"`` when LMCache is installed, so enabling it is one import and one configuration key:

    import splitzip.integrations.lmcache                   # in the LMCache server process, before it reads its config
    {"type": "fs", "base_path": "/cache", "serde": {"type": "splitzip"}}

``SplitZipSerializer.serialize(src, dst, key)`` writes one SplitZip frame (docs/FORMAT.md §4) of the chunk's values
into ``dst`` and returns its size (LMCache then stores only those bytes); ``estimate_serialized_size(layout)`` is the
frame bound of the layout's values; ``SplitZipDeserializer.deserialize(src, dst, key)`` decodes the frame into the
KV-shaped ``dst``. The factory's keyword arguments (the serde dict less "type"): ``codebook`` (a codebook file path
or "key" / "value" / "generic"), ``chunk``, ``threads``, ``checksum``, ``max_workers`` (LMCache's serde thread
pool).

Without LMCache installed the module still loads: ``Serializer`` / ``Deserializer`` are then minimal local
definitions of LMCache's two abstract classes, and the objects passed as ``src`` / ``dst`` need only what LMCache's
MemoryObj offers that this serde reads: ``tensor`` (and, when present, ``get_shapes()`` / ``get_dtypes()`` /
``set_used_size()``); ``BufferObj`` is such an object over one array or tensor.
"""

from __future__ import annotations

import abc
import math
from typing import Any, Optional

from .._core import _FLOAT_ELEMENTS, Codebook, _Tensor, _chunk_log2
from .._errors import error_for
from ._codec import Codec

#: the serde type name this module registers
SERDE_NAME = "splitzip"

try:  # LMCache's own interface when it is installed
    from lmcache.v1.distributed.serde.base import Deserializer, Serializer
    HAVE_LMCACHE = True
except ImportError:
    HAVE_LMCACHE = False

    class Serializer(abc.ABC):  # type: ignore[no-redef]
        """Local stand-in of LMCache's Serializer (same methods) for use without LMCache."""

        @abc.abstractmethod
        def serialize(self, src: Any, dst: Any, key: Any) -> int: ...

        @abc.abstractmethod
        def estimate_serialized_size(self, layout_desc: Any) -> int: ...

    class Deserializer(abc.ABC):  # type: ignore[no-redef]
        """Local stand-in of LMCache's Deserializer (same method) for use without LMCache."""

        @abc.abstractmethod
        def deserialize(self, src: Any, dst: Any, key: Any) -> None: ...


class BufferObj:
    """What this serde reads of LMCache's MemoryObj, over one array or tensor (NumPy, torch; host or GPU): for
    calling the serializer and deserializer outside LMCache (a custom store, a benchmark, tests).
    ``set_used_size(n)`` narrows ``tensor`` to the first n bytes, as LMCache's TensorMemoryObj does."""

    def __init__(self, t: Any):
        self._t = t
        self.used: Optional[int] = None

    @property
    def tensor(self) -> Any:
        if self.used is None:
            return self._t
        flat = self._t.reshape(-1)
        if hasattr(flat, "numpy"):  # torch
            import torch
            flat = flat.view(torch.uint8)
        else:
            flat = flat.view("uint8")
        return flat[: self.used]

    def get_shapes(self) -> list:
        return [tuple(self._t.shape)]

    def get_dtypes(self) -> list:
        return [self._t.dtype]

    def set_used_size(self, n: int) -> None:
        self.used = n


def _dtype_name(dt: Any) -> str:
    name = str(dt)
    return name[len("torch."):] if name.startswith("torch.") else getattr(dt, "name", name)


def _layout_dtype(dtypes, what: str) -> int:
    """The one format dtype of a layout's groups (KV chunks are of one dtype)."""
    ids = set()
    for dt in dtypes:
        name = _dtype_name(dt)
        if name not in _FLOAT_ELEMENTS:
            raise TypeError(f"{what}: element type {name} is not bf16/fp16/fp32/fp8, which SplitZip codes")
        ids.add(_FLOAT_ELEMENTS[name])
    if len(ids) != 1:
        raise ValueError(f"{what}: the layout mixes element types {sorted(_dtype_name(d) for d in dtypes)}; "
                         f"the splitzip serde codes one dtype per object")
    return ids.pop()


def _values_tensor(obj: Any, what: str):
    """The object's values as one contiguous tensor: all groups of a multi-group MemoryObj (its raw bytes up to its
    size, viewed as the groups' one dtype), else its ``tensor``."""
    shapes = obj.get_shapes() if hasattr(obj, "get_shapes") else None
    if shapes is not None and len(shapes) > 1 and getattr(obj, "raw_tensor", None) is not None:
        raw = obj.raw_tensor
        did = _layout_dtype(obj.get_dtypes(), what)
        n_bytes = sum(math.prod(int(d) for d in s) for s in shapes) * Codec(did).value_size
        return raw.reshape(-1).view(_uint8_like(raw))[:n_bytes], did
    t = getattr(obj, "tensor", None)
    if t is None:
        raise ValueError(f"{what}: the object holds no tensor (an invalidated MemoryObj?)")
    return t, None


def _uint8_like(t: Any):
    if type(t).__module__.startswith("torch"):
        import torch
        return torch.uint8
    import numpy as np
    return np.uint8


class SplitZipSerializer(Serializer):
    """KV chunk → one SplitZip frame in the destination byte buffer."""

    def __init__(self, codebook=None, chunk: Optional[int] = None, threads: Optional[int] = None,
                 checksum: bool = True):
        self.codebook, self.chunk, self.threads, self.checksum = codebook, chunk, threads, checksum
        self._codecs: dict = {}
        #: totals over this serializer's calls: raw bytes in, frame bytes out
        self.bytes_in = 0
        self.bytes_out = 0

    def _codec(self, did: int) -> Codec:
        c = self._codecs.get(did)
        if c is None:
            c = self._codecs[did] = Codec(did, self.codebook, self.chunk, self.threads, self.checksum)
        return c

    def serialize(self, src: Any, dst: Any, key: Any) -> int:
        """Writes the frame of ``src``'s values into the start of ``dst.tensor`` (a byte buffer of
        ``estimate_serialized_size`` bytes), narrows ``dst`` to it (``set_used_size``) and returns its size."""
        values, did = _values_tensor(src, "serialize: src")
        s = _Tensor(values, "serialize: src")
        did = did if did is not None else s.format_dtype(None, "serialize: src")
        if getattr(dst, "tensor", None) is None:
            raise ValueError("serialize: dst holds no tensor")
        d = _Tensor(dst.tensor, "serialize: dst", writable=True)
        n = self._codec(did).compress_into(s, d, "serialize")
        if hasattr(dst, "set_used_size"):
            dst.set_used_size(n)
        self.bytes_in += s.nbytes
        self.bytes_out += n
        return n

    def estimate_serialized_size(self, layout_desc: Any) -> int:
        """The frame bound (docs/FORMAT.md §4.8) of the layout's values: what ``serialize`` may write."""
        shapes, dtypes = list(layout_desc.shapes), list(layout_desc.dtypes)
        if len(shapes) != len(dtypes) or not shapes:
            raise ValueError("estimate_serialized_size: the layout needs one dtype per shape")
        did = _layout_dtype(dtypes, "estimate_serialized_size")
        n = sum(math.prod(int(d) for d in s) for s in shapes)
        return self._codec(did).bound(n)


class SplitZipDeserializer(Deserializer):
    """One SplitZip frame → the KV-shaped destination (bit-exact)."""

    def __init__(self, threads: Optional[int] = None):
        self.threads = threads

    def deserialize(self, src: Any, dst: Any, key: Any) -> None:
        """Decodes the frame at the start of ``src.tensor`` into ``dst`` (all of its values: a frame of another
        size raises)."""
        if getattr(src, "tensor", None) is None:
            raise ValueError("deserialize: src holds no tensor")
        s = _Tensor(src.tensor, "deserialize: src")
        values, did = _values_tensor(dst, "deserialize: dst")
        d = _Tensor(values, "deserialize: dst", writable=True)
        did = did if did is not None else d.format_dtype(None, "deserialize: dst")
        codec = Codec(did, threads=self.threads)
        raw = codec.frame_header(s, "deserialize")
        if raw["decompressed_size"] != d.nbytes:
            raise error_for(1, f"deserialize: the frame holds {raw['decompressed_size']} bytes, dst {d.nbytes}")
        codec.decompress_into(s, d, "deserialize")


def create_serde_processor(kwargs: dict):
    """The factory registered as ``"splitzip"``: LMCache's AsyncSerdeProcessor over this module's pair."""
    if not HAVE_LMCACHE:
        raise ImportError("the splitzip serde processor needs LMCache (pip install lmcache)")
    from lmcache.v1.distributed.serde.async_processor import AsyncSerdeProcessor

    if not isinstance(kwargs, dict):
        raise TypeError(f"serde kwargs must be a dict, got {type(kwargs).__name__}")
    known = {"codebook", "chunk", "threads", "checksum", "max_workers"}
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise ValueError(f"splitzip serde: unknown keys {unknown} (known: {sorted(known)})")
    checksum = kwargs.get("checksum", True)
    if not isinstance(checksum, bool):
        raise TypeError(f"splitzip serde: checksum must be true or false, got {checksum!r}")
    threads = kwargs.get("threads")
    ser = SplitZipSerializer(codebook=kwargs.get("codebook"), chunk=kwargs.get("chunk"), threads=threads,
                             checksum=checksum)
    # a bad chunk size or codebook file fails here, when the adapter is built, not at the first store
    _chunk_log2(ser.chunk)
    if isinstance(ser.codebook, str) and ser.codebook not in ("key", "value", "generic"):
        ser.codebook = Codebook.load(ser.codebook)
    return AsyncSerdeProcessor(ser, SplitZipDeserializer(threads=threads),
                               max_workers=int(kwargs.get("max_workers", 1)))


def register() -> bool:
    """Registers the ``"splitzip"`` serde factory with LMCache (once; later calls do nothing). Returns whether
    LMCache knows it now."""
    if not HAVE_LMCACHE:
        return False
    from lmcache.v1.distributed.serde.factory import get_registered_serde_types, register_serde_factory

    if SERDE_NAME not in get_registered_serde_types():
        register_serde_factory(SERDE_NAME, create_serde_processor)
    return True


register()
