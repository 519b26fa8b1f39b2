"""Whole files, as `splitzip compress` / `splitzip decompress` see them: a raw file of one dtype becomes a bare frame,
an .npy or .safetensors file a container whose items restore it byte for byte (cli/README.md, "Inputs").

The cutting of .npy and .safetensors files into items follows cli/inputs.cpp rule for rule, so that for the same file
and options this module and the CLI write the same bytes, and each decompresses what the other wrote.
"""

from __future__ import annotations

import ast
import json
import os
from dataclasses import dataclass, field
from typing import List, Optional, Tuple, Union

import numpy as np

from . import _splitzip as _ext
from ._container import Container, _assemble, _name_bytes
from ._core import (
    _DTYPE_NAMES,
    _DTYPE_SIZES,
    _KINDS,
    DTYPE_IDS,
    Codebook,
    CodebookLike,
    DTypeLike,
    _chunk_log2,
    _codebook_arg,
    _compress_host,
    _dtype_id,
    _flags,
    _frame_info_whole,
    _threads,
)
from ._errors import check, error_for

PathLike = Union[str, "os.PathLike[str]"]

_SUFFIX = ".spz"
_NPY_MAGIC = b"\x93NUMPY"
#: Raw files are cut into frames of this many values, back to back (kStreamFrameValues of cli/codec.h).
STREAM_FRAME_VALUES = 1 << 22


@dataclass
class _Segment:
    """A byte range of the original file: a frame of `did` (did > 0) or bytes stored as they are (did = 0)."""

    name: str
    offset: int
    size: int
    did: int = 0
    shape: Tuple[int, ...] = field(default_factory=tuple)


def _npy_dtype(descr: str, user: Optional[int], file: str) -> int:
    def need_user(width: int) -> int:
        if user is None:
            raise ValueError(f"{file}: .npy dtype '{descr}' does not say which float format it holds (pass dtype=)")
        if _DTYPE_SIZES[user] != width:
            raise ValueError(f"{file}: .npy dtype '{descr}' has {width}-byte elements but dtype "
                             f"{_DTYPE_NAMES[user]} has {_DTYPE_SIZES[user]}")
        return user

    def fixed(did: int) -> int:
        if user is not None and user != did:
            raise ValueError(f"{file}: .npy dtype '{descr}' is {_DTYPE_NAMES[did]} but dtype= says "
                             f"{_DTYPE_NAMES[user]}")
        return did

    if len(descr) >= 2 and descr[0] in "<>|=":
        code = descr[1:]
        width = int(code[1]) if len(code) == 2 and "1" <= code[1] <= "8" else 0
        if descr[0] == ">" and width > 1:
            raise ValueError(f"{file}: big-endian .npy data ('{descr}') is not supported")
        if code == "f2":
            return fixed(2)
        if code == "f4":
            return fixed(3)
        if code == "V2":  # ml_dtypes.bfloat16 saves as <V2
            return need_user(2) if user is not None else 1
        if code == "f1":  # older ml_dtypes float8_e5m2
            return need_user(1) if user is not None else 5
        if code in ("u2", "i2"):
            return need_user(2)
        if code in ("u1", "i1", "V1", "b1"):
            return need_user(1)
    else:
        status, did = _ext.dtype_from_name(descr)
        if status == 0 and "\0" not in descr:
            return fixed(did)
    raise ValueError(f"{file}: .npy dtype '{descr}' is not supported (floating types: <f2, <f4, bfloat16 (<V2), or "
                     f"<u2/|u1 with dtype=)")


def _plan_npy(data: bytes, file: str, user: Optional[int]) -> List[_Segment]:
    size = len(data)
    if size < 10:
        raise ValueError(f"{file}: truncated .npy header")
    major = data[6]
    if major == 1:
        len_bytes = 2
    elif major in (2, 3):
        len_bytes = 4
    else:
        raise ValueError(f"{file}: unsupported .npy format version {major}.{data[7]}")
    start = 8 + len_bytes
    if size < start:
        raise ValueError(f"{file}: truncated .npy header")
    hlen = int.from_bytes(data[8:start], "little")
    if hlen > size - start:
        raise ValueError(f"{file}: truncated .npy header")
    data_offset = start + hlen
    try:
        header = ast.literal_eval(data[start:data_offset].decode("latin-1"))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise ValueError(f"{file}: malformed .npy header") from None
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        raise ValueError(f"{file}: malformed .npy header (needs the keys descr, fortran_order and shape)")
    descr, order, shape = header["descr"], header["fortran_order"], header["shape"]
    if isinstance(descr, list):
        raise ValueError(f"{file}: structured .npy dtypes are not supported")
    if not isinstance(descr, str) or not isinstance(order, bool) or not isinstance(shape, tuple) or \
            not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise ValueError(f"{file}: malformed .npy header")
    did = _npy_dtype(descr, user, file)
    n = 1
    for d in shape:
        n *= d
    nbytes = n * _DTYPE_SIZES[did]
    if nbytes > 1 << 62:
        raise ValueError(f"{file}: .npy shape is too large")
    if nbytes > size - data_offset:
        raise ValueError(f"{file}: .npy data is truncated ({size - data_offset} bytes, shape needs {nbytes})")
    segs = [_Segment("npy_header", 0, data_offset),
            _Segment("array", data_offset, nbytes, did, tuple(shape) if len(shape) <= _ext.MAX_NDIM else ())]
    if data_offset + nbytes < size:
        segs.append(_Segment("trailer", data_offset + nbytes, size - data_offset - nbytes))
    return segs


_ST_SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I64": 8, "I32": 4, "I16": 2,
             "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1}
_ST_FRAMES = {"BF16": 1, "F16": 2, "F32": 3, "F8_E4M3": 4, "F8_E5M2": 5}


def _uint(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 1 << 64


def _plan_safetensors(data: bytes, file: str) -> List[_Segment]:
    size = len(data)
    if size < 8:
        raise ValueError(f"{file}: truncated .safetensors header")
    n = int.from_bytes(data[:8], "little")
    if n > size - 8:
        raise ValueError(f"{file}: .safetensors header length {n} exceeds the file")
    try:
        header = json.loads(data[8:8 + n])
    except (ValueError, RecursionError):
        raise ValueError(f"{file}: .safetensors header is not valid JSON") from None
    if not isinstance(header, dict):
        raise ValueError(f"{file}: .safetensors header is not a JSON object")
    base = 8 + n
    data_size = size - base
    tensors = []
    # The CLI's JSON object is a std::map: tensors are visited by name (UTF-8 byte order = code point order).
    for name in sorted(header):
        if name == "__metadata__":
            continue
        t = header[name]

        def bad(what: str) -> ValueError:
            return ValueError(f"{file}: tensor '{name}': {what}")

        if not isinstance(t, dict) or not {"dtype", "shape", "data_offsets"} <= set(t):
            raise bad("needs dtype, shape and data_offsets")
        if not isinstance(t["dtype"], str):
            raise bad("dtype is not a string")
        offs = t["data_offsets"]
        if not isinstance(offs, list) or len(offs) != 2 or not _uint(offs[0]) or not _uint(offs[1]):
            raise bad("data_offsets is not [begin, end]")
        begin, end = offs
        if end < begin or end > data_size:
            raise bad(f"data_offsets [{begin}, {end}] outside the data")
        shp = t["shape"]
        if not isinstance(shp, list):
            raise bad("shape is not a list")
        if not all(_uint(d) for d in shp):
            raise bad("shape holds a non-integer")
        elem = _ST_SIZES.get(t["dtype"], 0)
        count = 1
        for d in shp:
            count *= d
        if count > 1 << 62 or count * elem > 1 << 62:
            raise bad("shape is too large")
        if elem and count * elem != end - begin:
            raise bad(f"shape needs {count * elem} bytes but data_offsets span {end - begin}")
        if len(name.encode("utf-8", "surrogateescape")) > 4096:
            raise bad("name longer than 4096 bytes")
        tensors.append(_Segment(name, base + begin, end - begin, _ST_FRAMES.get(t["dtype"], 0),
                                tuple(shp) if len(shp) <= _ext.MAX_NDIM else ()))
    tensors.sort(key=lambda s: (s.offset, s.size))  # stable: empty tensors first, then by name
    segs = [_Segment("__header__", 0, base)]
    names = {"__header__"}
    pos = base
    for s in tensors:
        if s.offset < pos:
            raise ValueError(f"{file}: tensor '{s.name}' overlaps the tensor before it")
        if s.offset > pos:
            gap = f"__gap_{pos}__"
            segs.append(_Segment(gap, pos, s.offset - pos))
            names.add(gap)
        pos = s.offset + s.size
        if s.name in names:
            raise ValueError(f"{file}: tensor name '{s.name}' is used twice")
        names.add(s.name)
        segs.append(s)
    if pos < size:
        tail = f"__gap_{pos}__"
        if tail in names:
            raise ValueError(f"{file}: tensor name '{tail}' is used twice")
        segs.append(_Segment(tail, pos, size - pos))
    return segs


def _looks_like_safetensors(data: bytes) -> bool:
    size = len(data)
    if size < 10:
        return False
    n = int.from_bytes(data[:8], "little")
    if n < 2 or n > size - 8 or n > 100_000_000 or data[8:9] != b"{":  # the format caps headers at 100 MB
        return False
    text = data[8:8 + n].rstrip(b" ")
    if not text.endswith(b"}"):
        return False
    try:
        json.loads(data[8:8 + n])
    except (ValueError, RecursionError):
        return False
    return True


def _plan(data: bytes, file: str, fmt: str, user: Optional[int]) -> Tuple[str, List[_Segment]]:
    if fmt not in ("auto", "raw", "npy", "safetensors"):
        raise ValueError(f"format must be auto, raw, npy or safetensors, got {fmt!r}")
    detected = fmt == "auto"
    if detected:
        lower = file.lower()
        if lower.endswith(".npy"):
            fmt = "npy"
        elif lower.endswith(".safetensors"):
            fmt = "safetensors"
        elif data.startswith(_NPY_MAGIC):
            fmt = "npy"
        elif _looks_like_safetensors(data):
            fmt = "safetensors"
        else:
            fmt = "raw"
    if fmt == "npy":
        if not data.startswith(_NPY_MAGIC):
            raise ValueError(f"{file}: not an .npy file (no \\x93NUMPY magic)")
        return fmt, _plan_npy(data, file, user)
    if fmt == "safetensors":
        return fmt, _plan_safetensors(data, file)
    if detected and data[:4] in (b"SPZF", b"SPZC"):
        raise ValueError(f"{file}: is already SplitZip-compressed (pass format='raw' to compress it anyway)")
    if user is None:
        raise ValueError(f"{file}: raw input needs dtype= (bf16, fp16, fp32, fp8_e4m3 or fp8_e5m2)")
    width = _DTYPE_SIZES[user]
    if len(data) % width:
        raise ValueError(f"{file}: size {len(data)} is not a multiple of the {_DTYPE_NAMES[user]} value size "
                         f"({width} bytes)")
    return fmt, [_Segment("data", 0, len(data), user, (len(data) // width,))]


def compress_bytes(data: Union[bytes, bytearray, memoryview], name: str = "", *, format: str = "auto",
                   dtype: Optional[DTypeLike] = None, codebook: CodebookLike = None, chunk: Optional[int] = None,
                   threads: Optional[int] = None, checksum: Union[bool, str] = True) -> np.ndarray:
    """What `splitzip compress` writes for a file's bytes: a bare frame for raw data (needs ``dtype``), a container
    for .npy and .safetensors data. ``name`` is the file name used for detection by extension and in messages;
    ``format``: "auto" (extension, then magic), "raw", "npy" or "safetensors". ``codebook`` as in
    :func:`splitzip.compress`: a codebook is used for the frames of its dtype, the others get their default."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    if not isinstance(name, str):
        raise TypeError(f"name must be str, got {type(name).__name__}")
    data = bytes(data)
    file = name or "data"
    user = None if dtype is None else _dtype_id(dtype)
    nthreads = _threads(threads)
    log2 = _chunk_log2(chunk)
    flags = _flags(checksum)
    kind, book = "generic", None
    if isinstance(codebook, str) and codebook in _KINDS:
        kind = codebook
    elif isinstance(codebook, Codebook):
        book = codebook
    elif isinstance(codebook, (str, os.PathLike)):
        book = Codebook.load(codebook)
    elif codebook is not None:
        raise TypeError("codebook must be a Codebook, a codebook file path, 'generic', 'key', 'value' or None")
    fmt, segs = _plan(data, file, format, user)
    if book is not None and not any(s.did == DTYPE_IDS[book.dtype] for s in segs):
        have = [s.did for s in segs if s.did]
        holds = f"{_DTYPE_NAMES[have[-1]]} data" if have else "no floating tensors"
        raise error_for(9, f"{file}: the codebook is for {book.dtype} but the input holds {holds}")
    src = np.frombuffer(data, dtype=np.uint8)

    def frame(s: _Segment) -> np.ndarray:
        cb = book._as_tuple() if book is not None and DTYPE_IDS[book.dtype] == s.did else _codebook_arg(kind, s.did)
        return _compress_host(src[s.offset:s.offset + s.size], s.size // _DTYPE_SIZES[s.did], s.did, cb, log2,
                              flags, nthreads)

    if fmt == "raw":  # frames of STREAM_FRAME_VALUES values back to back, as the CLI streams them
        s = segs[0]
        step = STREAM_FRAME_VALUES * _DTYPE_SIZES[s.did]
        pieces = [frame(_Segment(s.name, off, min(step, s.size - off), s.did)) for off in range(0, s.size, step)]
        if not pieces:
            return frame(s)
        return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
    parts = []
    for s in segs:
        body = frame(s) if s.did else src[s.offset:s.offset + s.size]
        parts.append(((1 if s.did else 2, s.did, s.shape, _name_bytes(s.name), s.offset, s.size), body))
    return _assemble(parts)


def decompress_bytes(data: Union[bytes, bytearray, memoryview, np.ndarray], *,
                     threads: Optional[int] = None) -> bytes:
    """What `splitzip decompress` writes for a SplitZip file: a container's original file, or the concatenation of
    the values of frames back to back (docs/FORMAT.md §6.4; bytes after a frame that are not a frame are an
    error)."""
    t = np.frombuffer(data, dtype=np.uint8) if isinstance(data, (bytes, bytearray, memoryview)) else data
    if not isinstance(t, np.ndarray) or t.dtype != np.uint8 or t.ndim != 1:
        raise TypeError("data must be bytes or a 1-D uint8 array")
    nthreads = _threads(threads)
    if _ext.is_container(t):
        return Container(t).original(threads=nthreads)
    parts = []
    pos = 0
    while True:
        rest = t[pos:]
        if pos and rest[:4].tobytes() != b"SPZF":
            raise error_for(4, f"decompress: the bytes after frame {len(parts)} are not a SplitZip frame")
        raw = _frame_info_whole(rest, "decompress" if not pos else f"decompress: frame {len(parts) + 1}")
        out = np.empty(raw["decompressed_size"], dtype=np.uint8)
        st, _ = _ext.decompress(rest[:raw["frame_size"]], out, nthreads)
        check(st, "decompress")
        parts.append(out.tobytes())
        pos += raw["frame_size"]
        if pos == t.shape[0]:
            return b"".join(parts)


def _write_new(path: str, data: Union[bytes, np.ndarray], force: bool) -> None:
    """Writes a file through a temporary file in its folder, renamed into place: never a partial output."""
    if not force and os.path.exists(path):
        raise FileExistsError(f"{path} already exists (pass force=True to overwrite it)")
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.tobytes())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def compress_file(src: PathLike, dst: Optional[PathLike] = None, *, format: str = "auto",
                  dtype: Optional[DTypeLike] = None, codebook: CodebookLike = None, chunk: Optional[int] = None,
                  threads: Optional[int] = None, checksum: Union[bool, str] = True, force: bool = False) -> str:
    """`splitzip compress SRC -o DST`: writes DST (default SRC + ".spz") and returns its path. See
    :func:`compress_bytes` for the arguments; an existing DST is replaced only with ``force=True``."""
    src = os.fspath(src)
    out = os.fspath(dst) if dst is not None else src + _SUFFIX
    with open(src, "rb") as f:
        data = f.read()
    result = compress_bytes(data, os.path.basename(src), format=format, dtype=dtype, codebook=codebook, chunk=chunk,
                            threads=threads, checksum=checksum)
    _write_new(out, result, force)
    return out


def decompress_file(src: PathLike, dst: Optional[PathLike] = None, *, threads: Optional[int] = None,
                    force: bool = False) -> str:
    """`splitzip decompress SRC -o DST`: writes the original file to DST (default: SRC without ".spz") and returns its
    path; an existing DST is replaced only with ``force=True``."""
    src = os.fspath(src)
    if dst is None:
        if not src.endswith(_SUFFIX) or len(src) <= len(_SUFFIX):
            raise ValueError(f"{src}: unknown suffix (expected {_SUFFIX}; pass dst= to name the output)")
        out = src[:-len(_SUFFIX)]
    else:
        out = os.fspath(dst)
    data = np.fromfile(src, dtype=np.uint8)
    _write_new(out, decompress_bytes(data, threads=threads), force)
    return out


__all__ = ["compress_bytes", "compress_file", "decompress_bytes", "decompress_file"]
