"""The Python edge of splitzip: tensors in, frames out (docs/FORMAT.md), over the C ABI in _splitzip.

Tensors cross to C as DLPack arrays. Every tensor is first reinterpreted as a flat, contiguous uint8 view of its own
memory (no copy), so the C side sees bytes plus a dtype id and never needs to know bfloat16 or float8. Outputs and
GPU workspaces are allocated here, through the tensor's own framework (numpy, torch or cupy), never in C.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any, Iterable, Sequence

import numpy as np

from . import _splitzip as _ext
from ._errors import check, error_for

# ---- dtypes ---------------------------------------------------------------------------------------------------------

#: format dtype ids (docs/FORMAT.md §2) by the CLI's name
DTYPE_IDS = {"bf16": 1, "fp16": 2, "fp32": 3, "fp8_e4m3": 4, "fp8_e5m2": 5}
_DTYPE_NAMES = {v: k for k, v in DTYPE_IDS.items()}
_DTYPE_SIZES = {1: 2, 2: 2, 3: 4, 4: 1, 5: 1}
# element type names (numpy/ml_dtypes, torch without "torch.", cupy) that are the format's floats
_FLOAT_ELEMENTS = {"bfloat16": 1, "float16": 2, "float32": 3, "float8_e4m3fn": 4, "float8_e5m2": 5}
_KINDS = {"generic": 0, "key": 1, "k": 1, "value": 2, "v": 2}


def _dtype_id(spec: Any) -> int:
    """A format dtype id from an id, a name ("bf16", "bfloat16", "float8_e4m3fn", ...), a numpy or torch dtype."""
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        if int(spec) in _DTYPE_NAMES:
            return int(spec)
        raise error_for(6, f"dtype id {int(spec)}")
    if isinstance(spec, str):
        name = spec
    elif isinstance(spec, np.dtype) or (isinstance(spec, type) and issubclass(spec, np.generic)):
        name = np.dtype(spec).name
    else:
        name = str(spec)
    if name.startswith("torch."):
        name = name[len("torch."):]
    if name in _FLOAT_ELEMENTS:
        return _FLOAT_ELEMENTS[name]
    status, did = _ext.dtype_from_name(name)
    check(status, f"dtype {spec!r}")
    return did


def dtype_name(dtype: Any) -> str:
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

    __slots__ = ("framework", "device", "obj", "bytes", "element", "itemsize", "nbytes")

    def __init__(self, x: Any, what: str, writable: bool = False):
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
            if not x.flags.c_contiguous:
                raise ValueError(f"{what}: array must be C-contiguous (np.ascontiguousarray)")
            if writable and not x.flags.writeable:
                raise ValueError(f"{what}: array is read-only")
            self.framework, self.device = "numpy", "cpu"
            self.element, self.itemsize = x.dtype.name, x.itemsize
            self.bytes = x.reshape(-1).view(np.uint8)
        self.obj = x
        self.nbytes = int(self.bytes.shape[0])

    def format_dtype(self, dtype: Any, what: str) -> int:
        """The format dtype of this tensor: its own float type, or `dtype` (any element type of the same width)."""
        if dtype is None:
            did = _FLOAT_ELEMENTS.get(self.element)
            if did is None:
                raise TypeError(f"{what}: element type {self.element} is not bf16/fp16/fp32/fp8: "
                                f"pass dtype= (for example dtype='bf16' for a uint16 view)")
            return did
        did = _dtype_id(dtype)
        if self.itemsize != _DTYPE_SIZES[did]:
            raise ValueError(f"{what}: elements of {self.itemsize} bytes cannot hold {_DTYPE_NAMES[did]} values")
        return did


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

    def __init__(self, dtype: Any, code_bits: int, values: Iterable[int]):
        self.dtype = dtype_name(dtype)
        self.code_bits = int(code_bits)
        self.values = tuple(int(v) for v in values)
        self.expected_bits_per_value: float | None = None
        self.histogram: np.ndarray | None = None
        check(_ext.codebook_validate(self._as_tuple()), "codebook")

    @classmethod
    def _from_tuple(cls, t) -> "Codebook":
        return cls(t[0], t[1], t[2])

    def _as_tuple(self):
        return (DTYPE_IDS[self.dtype], self.code_bits, list(self.values))

    @classmethod
    def default(cls, dtype: Any = "bf16", kind: str = "generic") -> "Codebook":
        """The codebook shipped with the library for a dtype and tensor kind ("generic", "key" or "value")."""
        if kind not in _KINDS:
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
    def from_bytes(cls, data: bytes) -> "Codebook":
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


def _codebook_arg(codebook: Any, did: int):
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


def calibrate(tensors: Any, dtype: Any = None) -> Codebook:
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

def _chunk_log2(chunk: int | None) -> int:
    if chunk is None:
        return _ext.DEFAULT_CHUNK_LOG2
    chunk = int(chunk)
    if chunk <= 0 or chunk & (chunk - 1):
        raise ValueError(f"chunk must be a power of two (values per chunk, {1 << _ext.MIN_CHUNK_LOG2}.."
                         f"{1 << _ext.MAX_CHUNK_LOG2}), got {chunk}")
    return int(math.log2(chunk))


def _threads(threads: int | None) -> int:
    return 0 if threads is None else int(threads)


def compress(tensor: Any, codebook: Any = None, chunk: int | None = None, threads: int | None = None,
             checksum: bool = True, dtype: Any = None):
    """Compresses one tensor into a SplitZip frame (docs/FORMAT.md §4).

    tensor: a C-contiguous numpy array (bfloat16 / float8 from ml_dtypes, float16, float32), torch tensor (CPU or
        CUDA) or cupy array; any other element type of the right width (uint16, int8, ...) with ``dtype=``.
    codebook: None (the library's default for the dtype), a :class:`Codebook`, a codebook file path, or "key" /
        "value" / "generic" for a default codebook of that kind.
    chunk: values per chunk, a power of two from 256 to 65536 (default 4096).
    threads: CPU threads (default: one per hardware thread); never changes the bytes.
    checksum: store per-chunk XXH3 checksums (flag CHECKSUMS).

    Returns a 1-D uint8 array holding exactly the frame: a numpy array for host tensors, else a tensor of the input's
    framework on its device. GPU: the frame size is needed for the returned length, so this call waits for the
    current stream once (a copy of 8 bytes to the host), and the result is a view of the first ``frame_size``
    bytes of a ``compress_bound``-sized allocation (``.clone()`` it to release the slack).
    """
    t = _Tensor(tensor, "tensor")
    did = t.format_dtype(dtype, "tensor")
    n = t.nbytes // _DTYPE_SIZES[did]
    cb = _codebook_arg(codebook, did)
    log2 = _chunk_log2(chunk)
    flags = _ext.FLAG_CHECKSUMS if checksum else 0
    if t.device == "cuda":
        return _cuda_compress(t, n, did, cb, log2, flags)
    return _compress_host(t.bytes, n, did, cb, log2, flags, threads)


def _compress_host(src: np.ndarray, n: int, did: int, cb, log2: int, flags: int, threads) -> np.ndarray:
    dst = np.empty(_ext.compress_bound(n, did), dtype=np.uint8)
    status, size = _ext.compress(src, n, did, cb, log2, flags, _threads(threads), dst)
    check(status, "compress")
    dst.resize((size,), refcheck=False)  # shrinks in place (realloc), no copy of the frame
    return dst


def compress_reference(tensor: Any, codebook: Any = None, chunk: int | None = None, checksum: bool = True,
                       dtype: Any = None) -> np.ndarray:
    """The frame of the library's scalar reference encoder (the oracle; slow). Host tensors only."""
    t = _Tensor(tensor, "tensor")
    if t.device != "cpu":
        raise ValueError("compress_reference: host tensors only")
    did = t.format_dtype(dtype, "tensor")
    n = t.nbytes // _DTYPE_SIZES[did]
    dst = np.empty(_ext.compress_bound(n, did), dtype=np.uint8)
    status, size = _ext.compress(t.bytes, n, did, _codebook_arg(codebook, did), _chunk_log2(chunk),
                                 _ext.FLAG_CHECKSUMS if checksum else 0, 1, dst, True)
    check(status, "compress_reference")
    return dst[:size].copy()


def _info_dict(raw: dict) -> dict:
    did = raw["dtype_id"]
    cb = raw["codebook"]
    d = {
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
        "codebook": Codebook._from_tuple(cb),
        "stats_valid": raw["stats_valid"],
    }
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


def info(buffer: Any) -> dict:
    """What a frame holds: dtype, n_values, decompressed_size, frame_size, chunk, codebook, checksums and, when the
    whole frame is given, coded_chunks / raw_chunks / escapes / ratio. A device buffer is copied to the host."""
    t = _Tensor(buffer, "buffer")
    return _info_dict(_frame_info_host(_host_bytes(t)))


def decompress(buffer: Any, out: Any = None, *, threads: int | None = None, status: Any = None):
    """Decompresses a frame.

    buffer: the frame, a uint8 array (numpy, torch, cupy) or bytes. Host buffers decode on the CPU, CUDA buffers on
        their GPU.
    out: optional C-contiguous tensor on the buffer's device with room for the values (any shape and element type,
        at least ``decompressed_size`` bytes): the values are written straight into it (zero-copy) and it is
        returned. Without it a new 1-D array of the frame's dtype is returned (numpy without ml_dtypes and cupy
        return bfloat16 / float8 values as uint16 / uint8).
    status: GPU only: an int32 CUDA tensor of one element that receives the decoder's sz_status. With it, the call
        enqueues the decode and returns at once (use :func:`check_status` later); without it the call waits for
        the stream to read the status and raises on error. With ``out=None`` the GPU path also waits once to read
        the 64-byte header (the output size).
    """
    t = _Tensor(buffer, "buffer")
    if t.device == "cuda":
        return _cuda_decompress(t, out, status)
    if status is not None:
        raise ValueError("status= is for CUDA buffers only")
    raw = _frame_info_host(t.bytes, "decompress")
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
    st, _ = _ext.decompress(t.bytes, o.bytes, _threads(threads))
    check(st, "decompress")
    return result


def decompress_reference(buffer: Any) -> np.ndarray:
    """The values as decoded by the library's scalar reference decoder (the oracle), as a 1-D numpy array."""
    t = _Tensor(buffer, "buffer")
    raw = _frame_info_host(_host_bytes(t), "decompress_reference")
    result = np.empty(raw["n_values"], dtype=_numpy_dtype(raw["dtype_id"]))
    st, _ = _ext.decompress(_host_bytes(t), result.reshape(-1).view(np.uint8), 1, True)
    check(st, "decompress_reference")
    return result


def _check_out_element(o: _Tensor, did: int) -> None:
    od = _FLOAT_ELEMENTS.get(o.element)
    if od is not None and od != did:
        raise ValueError(f"out: element type {o.element} but the frame holds {_DTYPE_NAMES[did]} values "
                         f"(pass a {_DTYPE_NAMES[did]} or same-width integer array)")


def check_status(status: Any) -> None:
    """Raises the splitzip.Error for a device status tensor filled by a GPU call (waits for it)."""
    if hasattr(status, "item"):
        value = int(status.reshape(-1)[0].item())
    else:
        value = int(np.asarray(status).reshape(-1)[0])
    check(value, "GPU decode")


# ---- pages --------------------------------------------------------------------------------------------------------

def _pages(pages: Any, what: str, writable: bool) -> list[_Tensor]:
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


def compress_pages(pages: Sequence[Any], codebook: Any = None, chunk: int | None = None, threads: int | None = None,
                   checksum: bool = True, dtype: Any = None):
    """Compresses equal-size pages (for example the KV blocks of one request, ``cache[kv, block]``) into one frame:
    exactly the frame of their concatenation in list order. GPU pages go to the library's batched kernel through a
    device array of page pointers (one launch); host pages are gathered into one buffer and compressed on the CPU.
    Same arguments and result as :func:`compress`."""
    ts = _pages(pages, "pages", writable=False)
    did = ts[0].format_dtype(dtype, "pages[0]")
    page_values = ts[0].nbytes // _DTYPE_SIZES[did]
    if ts[0].device == "cuda":
        return _cuda_compress_pages(ts, page_values, did, _codebook_arg(codebook, did), _chunk_log2(chunk),
                                    _ext.FLAG_CHECKSUMS if checksum else 0)
    gathered = np.concatenate([p.bytes for p in ts]) if len(ts) > 1 else ts[0].bytes
    return _compress_host(gathered, page_values * len(ts), did, _codebook_arg(codebook, did), _chunk_log2(chunk),
                          _ext.FLAG_CHECKSUMS if checksum else 0, threads)


def decompress_pages(buffer: Any, pages: Sequence[Any], *, threads: int | None = None, status: Any = None) -> None:
    """Decompresses a frame of ``len(pages) * page_values`` values into the pages, in list order (zero-copy on the
    GPU: one launch writes every page; on the host the frame is decoded once and scattered). The frame must hold
    exactly that many values: DstTooSmallError if it holds more, InvalidArgumentError if fewer. ``status``: as in
    :func:`decompress`."""
    t = _Tensor(buffer, "buffer")
    ts = _pages(pages, "pages", writable=True)
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
        st, _ = _ext.decompress(t.bytes, ts[0].bytes, _threads(threads))
        check(st, "decompress_pages")
        return None
    tmp = np.empty(total, dtype=np.uint8)
    st, _ = _ext.decompress(t.bytes, tmp, _threads(threads))
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


def _cuda_decompress(t: _Tensor, out: Any, status: Any):
    if out is None:
        head = _device_to_host(t.bytes[: _ext.FRAME_HEADER_SIZE])
        raw = _frame_info_host(head, "decompress")
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
        import cupy
        with t.obj.device:
            stream = cupy.cuda.get_current_stream().ptr
            st_ws, ws = _ext.cuda_decompress_workspace_size(t.nbytes, o.nbytes)
            check(st_ws, "decompress")
            workspace = _cupy_workspace(ws, stream)
            st = cupy.full(1, -1, dtype=cupy.int32)
            check(_ext.cuda_decompress(t.bytes, o.bytes, workspace, st, stream), "decompress")
    _finish_status(st, status)
    return out


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


def _cuda_decompress_pages(t: _Tensor, ts: list[_Tensor], status: Any):
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
