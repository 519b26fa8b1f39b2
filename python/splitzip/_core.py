"""The Python edge of splitzip: tensors in, frames out (docs/FORMAT.md), over the C ABI in _splitzip.

Tensors cross to C as DLPack arrays. Every tensor is first reinterpreted as a flat, contiguous uint8 view of its own
memory (no copy), so the C side sees bytes plus a dtype id and never needs to know bfloat16 or float8. Outputs and
GPU workspaces are allocated here, through the tensor's own framework (numpy, torch or cupy), never in C.
"""

from __future__ import annotations

import operator
import os
import sys
from typing import TYPE_CHECKING, Iterable, Optional, Sequence, Tuple, Union

import numpy as np

from . import _splitzip as _ext
from ._errors import Error, check, error_for

if TYPE_CHECKING:
    import cupy
    import torch

    from ._channels import ChannelBook
    from ._max import SymbolTable

# ---- argument types -----------------------------------------------------------------------------------------------

#: A tensor the codec reads or writes: a numpy array, a torch tensor (CPU or CUDA) or a cupy array.
Tensor = Union[np.ndarray, "torch.Tensor", "cupy.ndarray"]
#: A buffer holding a frame or container: a tensor of bytes, or a Python bytes-like object.
BufferLike = Union[Tensor, bytes, bytearray, memoryview]
#: A dtype: an id of docs/FORMAT.md §2, a name ("bf16", "bfloat16", "float8_e4m3fn", ...), a numpy or torch dtype.
DTypeLike = Union[int, str, np.dtype, type, "torch.dtype"]
#: A codebook argument: a Codebook, a codebook file path, "generic" / "key" / "value", or None for the default.
CodebookLike = Union["Codebook", str, "os.PathLike[str]", None]


def _int_arg(value: object, what: str, lo: int, hi: int) -> int:
    """value as an int in [lo, hi], else TypeError / ValueError naming the argument."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an integer, got a bool")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, got {type(value).__name__}") from None
    if not lo <= v <= hi:
        raise ValueError(f"{what} must be in {lo}..{hi}, got {v}")
    return v


_U32_MAX = (1 << 32) - 1
_U64_MAX = (1 << 64) - 1

# ---- dtypes ---------------------------------------------------------------------------------------------------------

#: format dtype ids (docs/FORMAT.md §2) by the CLI's name
DTYPE_IDS = {"bf16": 1, "fp16": 2, "fp32": 3, "fp8_e4m3": 4, "fp8_e5m2": 5}
_DTYPE_NAMES = {v: k for k, v in DTYPE_IDS.items()}
_DTYPE_SIZES = {1: 2, 2: 2, 3: 4, 4: 1, 5: 1}
# element type names (numpy/ml_dtypes, torch without "torch.", cupy) that are the format's floats
_FLOAT_ELEMENTS = {"bfloat16": 1, "float16": 2, "float32": 3, "float8_e4m3fn": 4, "float8_e5m2": 5}
_KINDS = {"generic": 0, "key": 1, "k": 1, "value": 2, "v": 2}


def _dtype_id(spec: DTypeLike) -> int:
    """A format dtype id from an id, a name ("bf16", "bfloat16", "float8_e4m3fn", ...), a numpy or torch dtype."""
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        if int(spec) in _DTYPE_NAMES:
            return int(spec)
        raise error_for(6, f"dtype id {int(spec)}")
    if isinstance(spec, str):
        name = spec
    elif isinstance(spec, np.dtype) or (isinstance(spec, type) and issubclass(spec, np.generic)):
        name = np.dtype(spec).name
    elif type(spec).__name__ == "dtype" and type(spec).__module__ == "torch":
        name = str(spec)
    else:
        raise TypeError(f"dtype must be a name such as 'bf16', a format dtype id, or a numpy / torch dtype; got "
                        f"{type(spec).__name__}")
    if "\0" in name:
        raise error_for(6, f"dtype {spec!r}")
    if name.startswith("torch."):
        name = name[len("torch."):]
    if name in _FLOAT_ELEMENTS:
        return _FLOAT_ELEMENTS[name]
    status, did = _ext.dtype_from_name(name)
    check(status, f"dtype {spec!r}")
    return did


def dtype_name(dtype: DTypeLike) -> str:
    """The CLI's name of a dtype ("bf16", "fp16", "fp32", "fp8_e4m3", "fp8_e5m2")."""
    return _DTYPE_NAMES[_dtype_id(dtype)]


def _numpy_dtype(did: int) -> np.dtype:
    """The numpy dtype that decompressed values of a format dtype get: ml_dtypes' bfloat16 / float8 when installed,
    else the unsigned integer of the same width (the same bits)."""
    if did == 2:
        return np.dtype(np.float16)
    if did == 3:
        return np.dtype(np.float32)
    try:
        import ml_dtypes
    except ImportError:
        return np.dtype(np.uint16 if did == 1 else np.uint8)
    return np.dtype({1: ml_dtypes.bfloat16, 4: ml_dtypes.float8_e4m3fn, 5: ml_dtypes.float8_e5m2}[did])


def _torch_dtype(did: int):
    import torch
    return {1: torch.bfloat16, 2: torch.float16, 3: torch.float32, 4: torch.float8_e4m3fn,
            5: torch.float8_e5m2}[did]


def _cupy_dtype(did: int):
    # cupy has no bfloat16 / float8: those frames come back as the unsigned integers of the same width.
    return {1: np.uint16, 2: np.float16, 3: np.float32, 4: np.uint8, 5: np.uint8}[did]


# ---- tensors ------------------------------------------------------------------------------------------------------

class _Tensor:
    """A tensor of numpy, torch or cupy, seen as flat bytes.

    framework: "numpy" | "torch" | "cupy"; device: "cpu" | "cuda"; obj: the original object; bytes: a flat uint8
    view of its memory of the same framework (for torch CPU tensors: a numpy view); element: the element type's name.
    """

    __slots__ = ("framework", "device", "obj", "bytes", "element", "itemsize", "nbytes", "shape")

    def __init__(self, x: object, what: str, writable: bool = False):
        torch = sys.modules.get("torch")
        cupy = sys.modules.get("cupy")
        if torch is not None and isinstance(x, torch.Tensor):
            if not x.is_contiguous():
                raise ValueError(f"{what}: tensor must be contiguous (call .contiguous() first)")
            self.framework = "torch"
            self.device = "cuda" if x.is_cuda else "cpu"
            if self.device == "cpu" and x.device.type != "cpu":
                raise ValueError(f"{what}: tensors on {x.device.type} are not supported (cpu and cuda are)")
            self.element = str(x.dtype)[len("torch."):]
            self.itemsize = x.element_size()
            self.shape = tuple(int(d) for d in x.shape)
            flat = x.detach().reshape(-1)
            if flat.numel() == 0:  # an empty tensor may carry stride 0, which view() refuses
                b = torch.empty(0, dtype=torch.uint8, device=x.device)
            else:
                b = flat.view(torch.uint8) if self.itemsize != 1 or flat.dtype != torch.uint8 else flat
            self.bytes = b.numpy() if self.device == "cpu" else b
        elif cupy is not None and isinstance(x, cupy.ndarray):
            if not x.flags.c_contiguous:
                raise ValueError(f"{what}: array must be C-contiguous (cupy.ascontiguousarray)")
            self.framework, self.device = "cupy", "cuda"
            self.element, self.itemsize = x.dtype.name, x.itemsize
            self.shape = tuple(int(d) for d in x.shape)
            self.bytes = x.reshape(-1).view(cupy.uint8)
        else:
            if isinstance(x, (bytes, bytearray, memoryview)):
                x = np.frombuffer(x, dtype=np.uint8)
            elif not isinstance(x, np.ndarray):
                if hasattr(x, "__array_interface__") or hasattr(x, "__array__"):
                    x = np.asarray(x)
                elif hasattr(x, "__dlpack__"):
                    x = np.from_dlpack(x)
                else:
                    raise TypeError(f"{what}: expected a numpy/torch/cupy array or a bytes-like object, "
                                    f"got {type(x).__name__}")
            if x.dtype.hasobject:
                raise TypeError(f"{what}: arrays of Python objects hold no values to compress")
            if not x.flags.c_contiguous:
                raise ValueError(f"{what}: array must be C-contiguous (np.ascontiguousarray)")
            if writable and not x.flags.writeable:
                raise ValueError(f"{what}: array is read-only")
            if x.dtype.itemsize > 1 and _big_endian(x.dtype):
                # The format's values are little-endian (docs/FORMAT.md §1): an input is converted (a copy), an
                # output cannot be written in place.
                if writable:
                    raise ValueError(f"{what}: big-endian array ({x.dtype.str}): splitzip writes little-endian "
                                     f"values; pass a little-endian array and convert it afterwards")
                x = x.astype(x.dtype.newbyteorder("<"))
            self.framework, self.device = "numpy", "cpu"
            self.element, self.itemsize = x.dtype.name, x.itemsize
            self.shape = tuple(int(d) for d in x.shape)
            self.bytes = x.reshape(-1).view(np.uint8)
        self.obj = x
        self.nbytes = int(self.bytes.shape[0])

    def format_dtype(self, dtype: Optional[DTypeLike], what: str) -> int:
        """The format dtype of this tensor: its own float type, or `dtype` (any element type of the same width, or
        bytes: uint8 elements, whose count must then be a whole number of values)."""
        if dtype is None:
            did = _FLOAT_ELEMENTS.get(self.element)
            if did is None:
                raise TypeError(f"{what}: element type {self.element} is not bf16/fp16/fp32/fp8: "
                                f"pass dtype= (for example dtype='bf16' for a uint16 view)")
            return did
        did = _dtype_id(dtype)
        size = _DTYPE_SIZES[did]
        if self.element == "uint8" and self.itemsize == 1:
            if self.nbytes % size:
                raise ValueError(f"{what}: {self.nbytes} bytes are not a whole number of {_DTYPE_NAMES[did]} values "
                                 f"({size} bytes each)")
            return did
        if self.itemsize != size:
            raise ValueError(f"{what}: elements of {self.itemsize} bytes cannot hold {_DTYPE_NAMES[did]} values")
        return did


def _big_endian(dt: np.dtype) -> bool:
    return dt.byteorder == ">" or (dt.byteorder == "=" and sys.byteorder == "big")


def _host_bytes(t: _Tensor) -> np.ndarray:
    """The tensor's bytes in host memory (a copy for device tensors)."""
    if t.device == "cpu":
        return t.bytes
    if t.framework == "torch":
        return t.bytes.cpu().numpy()
    return t.bytes.get()


# ---- codebooks ----------------------------------------------------------------------------------------------------

class Codebook:
    """A codebook (docs/FORMAT.md §4.1, §5): code i stands for exponent field ``values[i]`` of ``dtype``.

    ``expected_bits_per_value`` is set by :func:`calibrate`: the predicted size of the exponent stream.
    """

    __slots__ = ("dtype", "code_bits", "values", "expected_bits_per_value", "histogram")

    def __init__(self, dtype: DTypeLike, code_bits: int, values: Iterable[int]):
        self.dtype = dtype_name(dtype)
        self.code_bits = _int_arg(code_bits, "code_bits", 0, 255)
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise TypeError(f"values must be an iterable of exponent values, got {type(values).__name__}")
        self.values = tuple(_int_arg(v, f"values[{i}]", 0, 255) for i, v in enumerate(values))
        if len(self.values) > 16:
            raise error_for(9, f"codebook of {len(self.values)} entries (at most 16)")
        self.expected_bits_per_value: float | None = None
        self.histogram: np.ndarray | None = None
        check(_ext.codebook_validate(self._as_tuple()), "codebook")

    @classmethod
    def _from_tuple(cls, t: tuple) -> "Codebook":
        return cls(t[0], t[1], t[2])

    def _as_tuple(self) -> tuple:
        return (DTYPE_IDS[self.dtype], self.code_bits, list(self.values))

    @classmethod
    def default(cls, dtype: DTypeLike = "bf16", kind: str = "generic") -> "Codebook":
        """The codebook shipped with the library for a dtype and tensor kind ("generic", "key" or "value")."""
        if not isinstance(kind, str) or kind not in _KINDS:
            raise ValueError(f"kind must be one of generic, key, value; got {kind!r}")
        status, t = _ext.default_codebook(_dtype_id(dtype), _KINDS[kind])
        check(status, "default codebook")
        return cls._from_tuple(t)

    def to_bytes(self) -> bytes:
        """The 32-byte codebook file layout (docs/FORMAT.md §5)."""
        status, data = _ext.codebook_serialize(self._as_tuple())
        check(status, "codebook")
        return data

    @classmethod
    def from_bytes(cls, data: Union[bytes, bytearray, memoryview]) -> "Codebook":
        """Parses the 32-byte codebook file layout (docs/FORMAT.md §5)."""
        if not isinstance(data, (bytes, bytearray, memoryview, np.ndarray)):
            raise TypeError(f"data must be bytes, got {type(data).__name__}")
        status, t = _ext.codebook_deserialize(bytes(data))
        check(status, "codebook")
        return cls._from_tuple(t)

    def save(self, path: str | os.PathLike) -> None:
        """Writes the codebook file (what `splitzip calibrate` writes)."""
        check(_ext.codebook_save(self._as_tuple(), os.fsdecode(path)), f"saving codebook {os.fsdecode(path)}")

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Codebook":
        status, t = _ext.codebook_load(os.fsdecode(path))
        check(status, f"loading codebook {os.fsdecode(path)}")
        return cls._from_tuple(t)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Codebook) and self.dtype == other.dtype and self.code_bits == other.code_bits
                and self.values == other.values)

    def __hash__(self) -> int:
        return hash((self.dtype, self.code_bits, self.values))

    def __repr__(self) -> str:
        return f"Codebook(dtype={self.dtype!r}, code_bits={self.code_bits}, values={list(self.values)})"


def _codebook_arg(codebook: CodebookLike, did: int) -> Optional[tuple]:
    """None (the library's default) or the (id, k, values) tuple for the C side."""
    if codebook is None:
        return None
    if isinstance(codebook, str) and codebook in _KINDS:
        codebook = Codebook.default(did, codebook)
    elif isinstance(codebook, (str, os.PathLike)):
        codebook = Codebook.load(codebook)
    if not isinstance(codebook, Codebook):
        raise TypeError("codebook must be a Codebook, a codebook file path, 'generic', 'key', 'value' or None")
    if DTYPE_IDS[codebook.dtype] != did:
        raise error_for(9, f"codebook is for {codebook.dtype}, the tensor is {_DTYPE_NAMES[did]}")
    return codebook._as_tuple()


def calibrate(tensors: Union[Tensor, Iterable[Tensor]], dtype: Optional[DTypeLike] = None) -> Codebook:
    """Builds the codebook that minimises the expected frame size for data like `tensors` (one tensor or an iterable
    of tensors of one dtype). Device tensors, and strided numpy views, are copied: calibration is an offline step."""
    if isinstance(tensors, (list, tuple)) or (hasattr(tensors, "__iter__") and not hasattr(tensors, "__dlpack__")
                                              and not isinstance(tensors, (np.ndarray, bytes, bytearray))):
        items = list(tensors)
    else:
        items = [tensors]
    if not items:
        raise ValueError("calibrate: no tensors")
    did = None
    arrays = []
    for i, x in enumerate(items):
        if isinstance(x, np.ndarray) and not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)  # calibration only reads: a strided view is copied
        t = _Tensor(x, f"tensors[{i}]")
        d = t.format_dtype(dtype, f"tensors[{i}]")
        if did is not None and d != did:
            raise ValueError(f"calibrate: tensors[{i}] is {_DTYPE_NAMES[d]}, tensors[0] is {_DTYPE_NAMES[did]}")
        did = d
        arrays.append(_host_bytes(t))
    status, t, bits, counts = _ext.calibrate(arrays, did)
    check(status, "calibrate")
    cb = Codebook._from_tuple(t)
    cb.expected_bits_per_value = bits
    cb.histogram = np.asarray(counts[: 1 << _ext.dtype_exponent_bits(did)], dtype=np.uint64)
    return cb


# ---- frames -------------------------------------------------------------------------------------------------------

def _chunk_log2(chunk: Optional[int]) -> int:
    if chunk is None:
        return _ext.DEFAULT_CHUNK_LOG2
    chunk = _int_arg(chunk, "chunk", 1, _U64_MAX)
    if chunk & (chunk - 1):
        raise ValueError(f"chunk must be a power of two (values per chunk, {1 << _ext.MIN_CHUNK_LOG2}.."
                         f"{1 << _ext.MAX_CHUNK_LOG2}), got {chunk}")
    return chunk.bit_length() - 1  # the library checks the range (InvalidArgumentError)


def _threads(threads: Optional[int]) -> int:
    """CPU threads of a call: 1 by default, as sz_params_default() and the CLI; 0 means one per hardware thread."""
    return 1 if threads is None else _int_arg(threads, "threads", 0, _U32_MAX)


def _flags(checksum: Union[bool, str]) -> int:
    """Frame flags of a checksum argument: True (the default kind, "lh32"), "lh32", "h32" (XXH3) or False."""
    if isinstance(checksum, str):
        if checksum == "lh32":
            return _ext.FLAG_CHECKSUMS | _ext.FLAG_LANE_HASH
        if checksum == "h32":
            return _ext.FLAG_CHECKSUMS
        raise ValueError(f"checksum must be True, False, 'lh32' or 'h32', not {checksum!r}")
    if not isinstance(checksum, (bool, np.bool_)):
        raise TypeError(f"checksum must be True, False, 'lh32' or 'h32', got {type(checksum).__name__}")
    return _ext.FLAG_CHECKSUMS | _ext.FLAG_LANE_HASH if checksum else 0


def compress(tensor: BufferLike, codebook: Union[CodebookLike, "ChannelBook", "SymbolTable"] = None,
             chunk: Optional[int] = None,
             threads: Optional[int] = None, checksum: Union[bool, str] = True, dtype: Optional[DTypeLike] = None, *,
             keep_shape: bool = False, book_tensor: Optional[int] = None, row_map: Optional["RowMap"] = None) -> Tensor:
    """Compresses one tensor into a SplitZip frame (docs/FORMAT.md §4).

    tensor: a C-contiguous numpy array (bfloat16 / float8 from ml_dtypes, float16, float32), torch tensor (CPU or
        CUDA) or cupy array; any other element type of the right width (uint16, int8, ...) with ``dtype=``; bytes
        (or a uint8 array) with ``dtype=``. A big-endian numpy array is converted to little-endian first (a copy).
    codebook: None (the library's default for the dtype), a :class:`Codebook`, a codebook file path, or "key" /
        "value" / "generic" for a default codebook of that kind; or a :class:`ChannelBook` with ``book_tensor``
        (which of its tensors this is: 2 * layer, + 1 for V) for a version 2 frame (host tensors); or a
        :class:`SymbolTable` with ``book_tensor`` for an entropy-coded version 3 frame (the max mode: host tensors
        on one thread, CUDA tensors on their GPU, the same bytes).
    chunk: values per chunk, a power of two from 256 to 65536 (default 4096; with a SymbolTable 65536, or less for
        tensors of fewer than 2^29 values so that a GPU gets at least 8192 chunks, but at least 4096: see
        ``sz_entropy_chunk_log2``).
    threads: CPU threads (default 1, as in the C API and the CLI; 0: one per hardware thread); never changes the
        bytes.
    checksum: store per-chunk checksums (flag CHECKSUMS): True or "lh32" for LH32 (the default kind, fast on GPUs),
        "h32" for XXH3 (what readers older than LH32 know), False for none.
    row_map: with a SymbolTable and an FP8 host tensor, a :class:`RowMap` for a paired frame (docs/FORMAT.md
        §4.10.6): each row (token, ``table.period`` values) paired with an earlier row of the same token.
    keep_shape: return a container (docs/FORMAT.md §6) of one frame item named "tensor" that records the tensor's
        shape, so that :func:`decompress` gives the tensor back in its shape (host tensors, at most 8 dimensions).
        A frame itself records only the number of values.

    Returns a 1-D uint8 array holding exactly the frame: a numpy array for host tensors, else a tensor of the input's
    framework on its device. GPU: the frame size is needed for the returned length, so this call waits for the
    current stream once (a copy of 8 bytes to the host), and the result is a view of the first ``frame_size``
    bytes of a ``compress_bound``-sized allocation (``.clone()`` it to release the slack).
    """
    if not isinstance(keep_shape, (bool, np.bool_)):
        raise TypeError(f"keep_shape must be True or False, got {type(keep_shape).__name__}")
    from ._channels import ChannelBook, compress_channels
    from ._max import SymbolTable, compress_entropy
    if isinstance(codebook, SymbolTable):
        if book_tensor is None:
            raise ValueError("compress: a SymbolTable needs book_tensor= (which of its tensors this is: 2 * layer, "
                             "+ 1 for V)")
        if keep_shape:
            raise ValueError("compress: keep_shape with a SymbolTable: use compress_kv_max for a container")
        _threads(threads)  # checked; the entropy coder codes a frame on one thread
        return compress_entropy(tensor, codebook, book_tensor, chunk=chunk, checksum=checksum, dtype=dtype,
                                row_map=row_map)
    if row_map is not None:
        raise ValueError("compress: row_map= pairs rows of max-mode frames: it needs a SymbolTable")
    if isinstance(codebook, ChannelBook):
        if book_tensor is None:
            raise ValueError("compress: a ChannelBook needs book_tensor= (which of its tensors this is)")
        if keep_shape:
            raise ValueError("compress: keep_shape with a ChannelBook: use compress_kv for a container")
        return compress_channels(tensor, codebook, book_tensor, chunk=chunk, threads=threads, checksum=checksum,
                                 dtype=dtype)
    if book_tensor is not None:
        raise ValueError("compress: book_tensor= is for a ChannelBook or SymbolTable codebook")
    if keep_shape:
        from ._container import compress_container
        return compress_container({"tensor": tensor if dtype is None else (tensor, dtype)}, codebook=codebook,
                                  chunk=chunk, threads=threads, checksum=checksum)
    t = _Tensor(tensor, "tensor")
    did = t.format_dtype(dtype, "tensor")
    n = t.nbytes // _DTYPE_SIZES[did]
    cb = _codebook_arg(codebook, did)
    log2 = _chunk_log2(chunk)
    flags = _flags(checksum)
    if t.device == "cuda":
        return _cuda_compress(t, n, did, cb, log2, flags)
    return _compress_host(t.bytes, n, did, cb, log2, flags, _threads(threads))


def _compress_host(src: np.ndarray, n: int, did: int, cb: Optional[tuple], log2: int, flags: int,
                   threads: int) -> np.ndarray:
    dst = np.empty(_ext.compress_bound(n, did), dtype=np.uint8)
    status, size = _ext.compress(src, n, did, cb, log2, flags, threads, dst)
    check(status, "compress")
    dst.resize((size,), refcheck=False)  # shrinks in place (realloc), no copy of the frame
    return dst


def compress_reference(tensor: BufferLike, codebook: CodebookLike = None, chunk: Optional[int] = None,
                       checksum: Union[bool, str] = True, dtype: Optional[DTypeLike] = None) -> np.ndarray:
    """The frame of the library's scalar reference encoder (the oracle; slow). Host tensors only."""
    t = _Tensor(tensor, "tensor")
    if t.device != "cpu":
        raise ValueError("compress_reference: host tensors only")
    did = t.format_dtype(dtype, "tensor")
    n = t.nbytes // _DTYPE_SIZES[did]
    dst = np.empty(_ext.compress_bound(n, did), dtype=np.uint8)
    status, size = _ext.compress(t.bytes, n, did, _codebook_arg(codebook, did), _chunk_log2(chunk),
                                 _flags(checksum), 1, dst, True)
    check(status, "compress_reference")
    return dst[:size].copy()


def _info_dict(raw: dict, frame: Optional[np.ndarray] = None) -> dict:
    did = raw["dtype_id"]
    cb = raw["codebook"]
    channels = raw["version"] == _ext.FORMAT_VERSION_CHANNELS
    entropy = raw["version"] == _ext.FORMAT_VERSION_ENTROPY
    d = {
        "type": "frame",
        "version": raw["version"],
        "dtype": _DTYPE_NAMES.get(did, did),
        "n_values": raw["n_values"],
        "decompressed_size": raw["decompressed_size"],
        "frame_size": raw["frame_size"],
        "chunk_log2": raw["chunk_log2"],
        "chunk": 1 << raw["chunk_log2"],
        "n_chunks": raw["n_chunks"],
        "flags": raw["flags"],
        "checksums": bool(raw["flags"] & _ext.FLAG_CHECKSUMS),
        "checksum_kind": (None if not raw["flags"] & _ext.FLAG_CHECKSUMS
                          else "lh32" if raw["flags"] & _ext.FLAG_LANE_HASH else "h32"),
        "codebook": None if channels or entropy else Codebook._from_tuple(cb),
        "stats_valid": raw["stats_valid"],
    }
    if channels:  # version 2: channel windows of a channel book (docs/FORMAT.md §4.9)
        d["code_bits"] = cb[1]
        if frame is not None:
            st, book_id, tensor, period = _ext.frame_book_ref(frame)
            check(st, "info")
            d.update(book_id=book_id, book_tensor=tensor, period=period)
    if entropy:  # version 3: entropy-coded with a symbol table (docs/FORMAT.md §4.10)
        d["entropy_coded"] = True
        if frame is not None:
            st, table_id, tensor, period = _ext.frame_table_ref(frame)
            check(st, "info")
            d.update(table_id=table_id, table_tensor=tensor, period=period)
            st, map_id = _ext.frame_row_map_id(frame)
            check(st, "info")
            d["row_map_id"] = map_id or None  # a paired frame's row map (docs/FORMAT.md §4.10.6)
    if raw["stats_valid"]:
        d["coded_chunks"] = raw["coded_chunks"]
        d["raw_chunks"] = raw["raw_chunks"]
        d["escapes"] = raw["escapes"]
        d["ratio"] = raw["decompressed_size"] / raw["frame_size"] if raw["frame_size"] else 0.0
    return d


def _frame_info_host(buf: np.ndarray, what: str = "info") -> dict:
    status, raw = _ext.frame_info(buf)
    check(status, what)
    return raw


def _frame_info_whole(buf: np.ndarray, what: str) -> dict:
    """The header of a frame that buf must hold entirely: checked before anything is allocated from it."""
    raw = _frame_info_host(buf, what)
    if raw["frame_size"] > buf.shape[0]:
        raise error_for(3, f"{what}: the frame header says {raw['frame_size']} bytes, the buffer holds "
                           f"{buf.shape[0]}")
    return raw


def info(buffer: BufferLike) -> dict:
    """What a frame holds: type "frame", dtype, n_values, decompressed_size, frame_size, chunk, codebook, checksums
    and, when the whole frame is given, coded_chunks / raw_chunks / escapes / ratio. For a container: type
    "container", compressed_size, decompressed_size, ratio and "items", one dict per item (name, kind, dtype, shape,
    sizes, and for frames the frame's info). A device buffer is copied to the host."""
    t = _Tensor(buffer, "buffer")
    host = _host_bytes(t)
    if _ext.is_container(host):
        from ._container import Container
        return Container(host).info()
    return _info_dict(_frame_info_host(host), host)


def decompress(buffer: BufferLike, out: Optional[Tensor] = None, *, threads: Optional[int] = None,
               status: Optional[Tensor] = None, book: Optional["ChannelBook"] = None,
               table: Union["SymbolTable", str, "os.PathLike[str]", None] = None,
               row_map: Optional["RowMap"] = None) -> Tensor:
    """Decompresses a frame, or a container of one frame item (what ``compress(..., keep_shape=True)`` makes).

    buffer: the frame, a uint8 array (numpy, torch, cupy) or bytes. Host buffers decode on the CPU, CUDA buffers on
        their GPU.
    out: optional C-contiguous tensor on the buffer's device with room for the values (any shape and element type,
        at least ``decompressed_size`` bytes, little-endian): the values are written straight into it (zero-copy) and
        it is returned. Without it a new array of the frame's dtype is returned: 1-D for a frame, in the recorded
        shape for a container (numpy without ml_dtypes and cupy return bfloat16 / float8 values as uint16 / uint8).
    threads: CPU threads (default 1; 0: one per hardware thread).
    status: GPU only: an int32 CUDA tensor of one element that receives the decoder's sz_status. With it, the call
        enqueues the decode and returns at once (use :func:`check_status` later); without it the call waits for
        the stream to read the status and raises on error. With ``out=None`` the GPU path also waits once to read
        the 64-byte header (the output size).

    book: the :class:`ChannelBook` of a version 2 frame (host buffers); without it such a frame raises
        BookMismatchError, and so does a book other than the frame's.
    table: the :class:`SymbolTable` (or its file path) of a version 3 frame, the max mode. Host buffers decode on
        the CPU; a CUDA buffer with a table decodes on its GPU (the table's device image is made and copied to the
        device once per table and device, then kept), as version 3 frames only. Without it such a frame raises
        BookMismatchError, and so does a table other than the frame's (on the GPU: in ``status``, or raised when
        the call waits). ``book`` and ``table`` are used by the frames they belong to: on the host a version 1
        frame decodes with either given.
    row_map: the :class:`RowMap` of a paired version 3 frame (FP8, host buffers); without it, or with another map,
        such a frame raises BookMismatchError.

    A buffer shorter than the frame its header describes raises SrcTruncatedError before anything is allocated.
    Of several frames back to back (a file of a long raw input) this decodes the first; :func:`decompress_bytes`
    decodes them all.
    """
    t = _Tensor(buffer, "buffer")
    nthreads = _threads(threads)
    if book is not None:
        from ._channels import _book_arg
        from ._max import SymbolTable
        if isinstance(book, SymbolTable):
            raise TypeError("decompress: book= takes a ChannelBook; a SymbolTable goes in table=")
        book = _book_arg(book)
        if t.device == "cuda":
            raise ValueError("decompress: channel books: the Python module decodes host buffers (the C API has "
                             "sz_cuda_decompress_book for device memory)")
    if table is not None:
        from ._max import _table_arg
        table = _table_arg(table)
    if row_map is not None:
        from ._max import _row_map_arg
        row_map = _row_map_arg(row_map, "decompress")
        if t.device == "cuda":
            raise ValueError("decompress: paired frames (row_map=) are decoded on the CPU: pass a host buffer")
    if t.device == "cuda":
        if table is not None:
            return _cuda_decompress_entropy(t, out, status, table)
        return _cuda_decompress(t, out, status)
    if status is not None:
        raise ValueError("status= is for CUDA buffers only")
    if _ext.is_container(t.bytes):
        from ._container import Container
        c = Container(t.bytes)
        frames = [it for it in c.items if it.kind == "frame"]
        if len(c.items) != 1 or len(frames) != 1 or book is not None or table is not None:
            raise ValueError(f"decompress: a container of {len(c.items)} items; read them by name with "
                             f"splitzip.Container(buffer)[name]")
        return c.read(frames[0].name, out=out, threads=nthreads)
    raw = _frame_info_whole(t.bytes, "decompress")
    did = raw["dtype_id"]
    if out is None:
        result = np.empty(raw["n_values"], dtype=_numpy_dtype(did))
        o = _Tensor(result, "out", writable=True)
    else:
        o = _Tensor(out, "out", writable=True)
        if o.device != "cpu":
            raise ValueError("out: must be in host memory like the buffer")
        _check_out_element(o, did)
        result = out
    if raw["version"] == _ext.FORMAT_VERSION_ENTROPY:
        if table is None:
            raise error_for(17, "decompress: an entropy-coded (version 3, max mode) frame needs its symbol table "
                                "(table=)")
        from ._max import decompress_entropy_into
        decompress_entropy_into(t.bytes, table, o.bytes, nthreads, "decompress", row_map=row_map)
        return result
    if book is None:
        st, _ = _ext.decompress(t.bytes, o.bytes, nthreads)
    else:
        st, _ = _ext.decompress_book(t.bytes, book._as_tuple(), o.bytes, nthreads)
    check(st, "decompress")
    return result


def decompress_reference(buffer: BufferLike) -> np.ndarray:
    """The values as decoded by the library's scalar reference decoder (the oracle), as a 1-D numpy array."""
    t = _Tensor(buffer, "buffer")
    host = _host_bytes(t)
    raw = _frame_info_whole(host, "decompress_reference")
    result = np.empty(raw["n_values"], dtype=_numpy_dtype(raw["dtype_id"]))
    st, _ = _ext.decompress(host, result.reshape(-1).view(np.uint8), 1, True)
    check(st, "decompress_reference")
    return result


def _check_out_element(o: _Tensor, did: int) -> None:
    od = _FLOAT_ELEMENTS.get(o.element)
    if od is not None and od != did:
        raise ValueError(f"out: element type {o.element} but the frame holds {_DTYPE_NAMES[did]} values "
                         f"(pass a {_DTYPE_NAMES[did]} or same-width integer array)")


def check_status(status: Tensor) -> None:
    """Raises the splitzip.Error for a device status tensor filled by a GPU call (waits for it)."""
    if hasattr(status, "item"):
        value = int(status.reshape(-1)[0].item())
    else:
        value = int(np.asarray(status).reshape(-1)[0])
    check(value, "GPU decode")


# ---- pages --------------------------------------------------------------------------------------------------------

def _pages(pages: Sequence[Tensor], what: str, writable: bool) -> list[_Tensor]:
    if isinstance(pages, (bytes, bytearray, memoryview, str)) or not hasattr(pages, "__iter__"):
        raise TypeError(f"{what}: expected a list of tensors, got {type(pages).__name__}")
    if hasattr(pages, "__dlpack__") or hasattr(pages, "__array_interface__"):
        raise TypeError(f"{what}: expected a list of tensors, got one {type(pages).__name__} (pass list(x) to "
                        f"take its first axis as the pages)")
    ts = [_Tensor(p, f"{what}[{i}]", writable=writable) for i, p in enumerate(pages)]
    if not ts:
        raise ValueError(f"{what}: no pages")
    first = ts[0]
    for i, p in enumerate(ts):
        if p.framework != first.framework or p.device != first.device:
            raise ValueError(f"{what}[{i}]: all pages must be of one framework and device")
        if p.nbytes != first.nbytes or p.element != first.element:
            raise ValueError(f"{what}[{i}]: all pages must have the same size and element type")
    if len(ts) >= 1 << 32:
        raise ValueError(f"{what}: too many pages")
    return ts


def compress_pages(pages: Sequence[Tensor], codebook: CodebookLike = None, chunk: Optional[int] = None,
                   threads: Optional[int] = None, checksum: Union[bool, str] = True,
                   dtype: Optional[DTypeLike] = None) -> Tensor:
    """Compresses equal-size pages (for example the KV blocks of one request, ``cache[kv, block]``) into one frame:
    exactly the frame of their concatenation in list order. GPU pages go to the library's batched kernel through a
    device array of page pointers (one launch); host pages are gathered into one buffer and compressed on the CPU.
    Same arguments and result as :func:`compress`."""
    ts = _pages(pages, "pages", writable=False)
    did = ts[0].format_dtype(dtype, "pages[0]")
    page_values = ts[0].nbytes // _DTYPE_SIZES[did]
    nthreads = _threads(threads)
    if ts[0].device == "cuda":
        return _cuda_compress_pages(ts, page_values, did, _codebook_arg(codebook, did), _chunk_log2(chunk),
                                    _flags(checksum))
    gathered = np.concatenate([p.bytes for p in ts]) if len(ts) > 1 else ts[0].bytes
    return _compress_host(gathered, page_values * len(ts), did, _codebook_arg(codebook, did), _chunk_log2(chunk),
                          _flags(checksum), nthreads)


def decompress_pages(buffer: BufferLike, pages: Sequence[Tensor], *, threads: Optional[int] = None,
                     status: Optional[Tensor] = None) -> None:
    """Decompresses a frame of ``len(pages) * page_values`` values into the pages, in list order (zero-copy on the
    GPU: one launch writes every page; on the host the frame is decoded once and scattered). The frame must hold
    exactly that many values: DstTooSmallError if it holds more, InvalidArgumentError if fewer. ``status``: as in
    :func:`decompress`."""
    t = _Tensor(buffer, "buffer")
    ts = _pages(pages, "pages", writable=True)
    nthreads = _threads(threads)
    if t.device != ts[0].device:
        raise ValueError("pages: must be on the buffer's device")
    if t.device == "cuda":
        return _cuda_decompress_pages(t, ts, status)
    if status is not None:
        raise ValueError("status= is for CUDA buffers only")
    raw = _frame_info_host(t.bytes, "decompress_pages")
    for p in ts:
        _check_out_element(p, raw["dtype_id"])
    total = ts[0].nbytes * len(ts)
    if raw["decompressed_size"] > total:
        raise error_for(2, f"decompress_pages: the frame holds {raw['decompressed_size']} bytes, "
                           f"the pages {total}")
    if raw["decompressed_size"] < total:
        raise error_for(1, f"decompress_pages: the frame holds {raw['decompressed_size']} bytes, "
                           f"the pages {total}")
    if len(ts) == 1:
        st, _ = _ext.decompress(t.bytes, ts[0].bytes, nthreads)
        check(st, "decompress_pages")
        return None
    tmp = np.empty(total, dtype=np.uint8)
    st, _ = _ext.decompress(t.bytes, tmp, nthreads)
    check(st, "decompress_pages")
    size = ts[0].nbytes
    for i, p in enumerate(ts):
        p.bytes[...] = tmp[i * size:(i + 1) * size]
    return None


# ---- GPU paths --------------------------------------------------------------------------------------------------

def _to_device_like(t: _Tensor, host: np.ndarray):
    """A copy of a host uint8 array on t's framework and device."""
    if t.framework == "torch":
        import torch
        return torch.from_numpy(host).to(t.obj.device)
    import cupy
    with t.obj.device:
        return cupy.asarray(host)


def _device_to_host(b) -> np.ndarray:
    return b.cpu().numpy() if hasattr(b, "cpu") else b.get()


def _cupy_workspace(nbytes: int, stream: int):
    import cupy
    from . import _workspace
    return _workspace.get("cupy", cupy.cuda.Device().id, stream, nbytes,
                          lambda n: cupy.zeros(n, dtype=cupy.uint8))


def _cuda_compress(t: _Tensor, n: int, did: int, cb, log2: int, flags: int):
    if n == 0:
        # Zero-size device arrays do not cross DLPack as contiguous arrays: the frame of no values is a bare header,
        # made on the host (the same bytes the kernel writes) and copied over.
        return _to_device_like(t, _compress_host(np.empty(0, dtype=np.uint8), 0, did, cb, log2, flags, 1))
    if t.framework == "torch":
        from . import _torch_ops
        dst, size_t = _torch_ops.compress_op(t.bytes, did, _torch_ops.pack_codebook(cb), log2, flags)
        size = int(size_t.item())  # the one wait: the frame's length
        return dst[:size]
    import cupy
    with t.obj.device:
        stream = cupy.cuda.get_current_stream().ptr
        status, ws = _ext.cuda_compress_workspace_size(n, did, log2, flags)
        check(status, "compress")
        workspace = _cupy_workspace(ws, stream)
        dst = cupy.empty(_ext.compress_bound(n, did), dtype=cupy.uint8)
        size_d = cupy.zeros(1, dtype=cupy.uint64)
        check(_ext.cuda_compress(t.bytes, n, did, cb, log2, flags, dst, workspace, size_d, stream), "compress")
        size = int(size_d.get()[0])
        return dst[:size]


def _cuda_out(t: _Tensor, out: Optional[Tensor]) -> Tuple[Tensor, _Tensor]:
    """The output of a GPU decode: ``out`` checked, or a new tensor of the frame's dtype and size on the buffer's
    device (its size from the header, copied to the host: one wait)."""
    if out is None:
        head = _device_to_host(t.bytes[: _ext.FRAME_HEADER_SIZE])
        raw = _frame_info_host(head, "decompress")
        if raw["frame_size"] > t.nbytes:
            raise error_for(3, f"decompress: the frame header says {raw['frame_size']} bytes, the buffer holds "
                               f"{t.nbytes}")
        did = raw["dtype_id"]
        if t.framework == "torch":
            import torch
            out = torch.empty(raw["n_values"], dtype=_torch_dtype(did), device=t.obj.device)
        else:
            import cupy
            with t.obj.device:
                out = cupy.empty(raw["n_values"], dtype=_cupy_dtype(did))
    o = _Tensor(out, "out", writable=True)
    if o.device != "cuda" or o.framework != t.framework:
        raise ValueError("out: must be a CUDA tensor of the buffer's framework")
    return out, o


def _cuda_decompress(t: _Tensor, out: Optional[Tensor], status: Optional[Tensor]) -> Tensor:
    out, o = _cuda_out(t, out)
    if o.nbytes == 0:
        # Nothing to write (zero-size arrays do not cross DLPack): validate the frame on the host, where the same
        # checks run; a frame of more values than fit raises DstTooSmallError there.
        st_host = _ext.decompress(_device_to_host(t.bytes), np.empty(0, dtype=np.uint8), 1, True)[0]
        if status is None:
            check(st_host, "decompress")
        else:
            status[...] = int(st_host)
        return out
    if t.framework == "torch":
        from . import _torch_ops
        st = _torch_ops.decompress_op(t.bytes, o.bytes)
    else:
        st = _cupy_decode(t, o, lambda ws, st, stream: _ext.cuda_decompress(t.bytes, o.bytes, ws, st, stream))
    _finish_status(st, status)
    return out


def _cuda_decompress_entropy(t: _Tensor, out: Optional[Tensor], status: Optional[Tensor], table) -> Tensor:
    """A version 3 frame in device memory, decoded on its GPU with the table's device image."""
    out, o = _cuda_out(t, out)
    if o.nbytes == 0:  # nothing to write (zero-size arrays do not cross DLPack): the CPU decoder checks the frame
        from ._max import decompress_entropy_into
        try:
            decompress_entropy_into(_device_to_host(t.bytes), table, np.empty(0, dtype=np.uint8), 1, "decompress")
            st_host = 0
        except Error as e:
            if status is None:
                raise
            st_host = e.status
        if status is not None:
            status[...] = int(st_host)
        return out
    image = table._device_image(t)
    if t.framework == "torch":
        import torch
        from . import _torch_ops
        dev = t.obj.device
        with torch.cuda.device(dev):
            stream = _torch_ops._stream(dev)
            st_ws, ws = _ext.cuda_decompress_workspace_size(t.nbytes, o.nbytes)
            check(st_ws, "decompress")
            workspace = _torch_ops._workspace_for(ws, dev)
            st = torch.full((1,), -1, dtype=torch.int32, device=dev)
            check(_ext.cuda_decompress_entropy(t.bytes, image, o.bytes, workspace, st, stream), "decompress")
    else:
        st = _cupy_decode(t, o, lambda ws, st, stream: _ext.cuda_decompress_entropy(t.bytes, image, o.bytes, ws, st,
                                                                                    stream))
    _finish_status(st, status)
    return out


def _cupy_decode(t: _Tensor, o: _Tensor, launch):
    """A cupy decode of t into o on the current stream: launch(workspace, status, stream) enqueues the kernel;
    returns the device status."""
    import cupy
    with t.obj.device:
        stream = cupy.cuda.get_current_stream().ptr
        st_ws, ws = _ext.cuda_decompress_workspace_size(t.nbytes, o.nbytes)
        check(st_ws, "decompress")
        workspace = _cupy_workspace(ws, stream)
        st = cupy.full(1, -1, dtype=cupy.int32)
        check(launch(workspace, st, stream), "decompress")
    return st


def _finish_status(st, status):
    """Either wait and raise (status=None), or copy the device status into the caller's tensor (no wait)."""
    if status is None:
        check_status(st)
    elif hasattr(status, "copy_"):
        status.view(-1)[:1].copy_(st.view(-1)[:1])
    else:
        status.reshape(-1)[:1] = st.reshape(-1)[:1]


def _page_pointers(ts: list[_Tensor]):
    """A cupy device array of the pages' addresses (the torch path builds its own in _torch_ops)."""
    import cupy
    ptrs = np.array([p.bytes.data.ptr for p in ts], dtype=np.uint64)
    return cupy.asarray(ptrs)


def _cuda_compress_pages(ts: list[_Tensor], page_values: int, did: int, cb, log2: int, flags: int):
    n_pages = len(ts)
    n = n_pages * page_values
    if ts[0].framework == "torch":
        from . import _torch_ops
        dst, size_t = _torch_ops.compress_pages_op([p.bytes for p in ts], page_values, did,
                                                   _torch_ops.pack_codebook(cb), log2, flags)
        size = int(size_t.item())  # the one wait: the frame's length
        return dst[:size]
    import cupy
    with ts[0].obj.device:
        ptrs = _page_pointers(ts)
        stream = cupy.cuda.get_current_stream().ptr
        status, ws = _ext.cuda_compress_pages_workspace_size(n_pages, page_values, did, log2, flags)
        check(status, "compress_pages")
        workspace = _cupy_workspace(ws, stream)
        dst = cupy.empty(_ext.compress_bound(n, did), dtype=cupy.uint8)
        size_d = cupy.zeros(1, dtype=cupy.uint64)
        check(_ext.cuda_compress_pages(ptrs, n_pages, page_values, did, cb, log2, flags, dst, workspace, size_d,
                                       stream), "compress_pages")
        return dst[: int(size_d.get()[0])]


def _cuda_decompress_pages(t: _Tensor, ts: list[_Tensor], status: Optional[Tensor]) -> None:
    # The kernel needs the page size in values of the frame's dtype: the pages' element width must be the frame's
    # value width (a wrong one fails on the device with SZ_ERROR_INVALID_ARGUMENT or SZ_ERROR_DST_TOO_SMALL).
    n_pages = len(ts)
    page_values = ts[0].nbytes // ts[0].itemsize
    if t.framework == "torch":
        from . import _torch_ops
        st = _torch_ops.decompress_pages_op(t.bytes, [p.bytes for p in ts], page_values)
    else:
        import cupy
        with t.obj.device:
            ptrs = _page_pointers(ts)
            stream = cupy.cuda.get_current_stream().ptr
            st_ws, ws = _ext.cuda_decompress_workspace_size(t.nbytes, ts[0].nbytes * n_pages)
            check(st_ws, "decompress_pages")
            workspace = _cupy_workspace(ws, stream)
            st = cupy.full(1, -1, dtype=cupy.int32)
            check(_ext.cuda_decompress_pages(t.bytes, ptrs, n_pages, page_values, workspace, st, stream),
                  "decompress_pages")
    _finish_status(st, status)
