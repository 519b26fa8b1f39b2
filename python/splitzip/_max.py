"""The max mode (docs/FORMAT.md §4.10, §5.3): entropy-coded frames with a symbol table, on the CPU.

Each value's symbol (the exponent; for FP8 the whole byte) is coded by the library's 32-lane interleaved rANS coder
with static 12-bit probability tables, one per group of channels; sign and mantissa of the wider types stay raw. The
tables are calibrated offline from sample KV and shipped once as a symbol table file, which version 3 frames name by
its id. Channels are those of the channel books: a KV cache [layers][2][tokens][kv_heads][head_dim] is ``tensors =
2 * layers`` tensors (``2 l`` is layer l's K, ``2 l + 1`` its V) of ``period = kv_heads * head_dim`` channels.

    table = splitzip.calibrate_max(sample_kv)                   # sample_kv: [L, 2, T, H, D] array(s)
    box = splitzip.compress_kv_max(kv, table)                   # container: the table + one v3 frame per tensor
    kv2 = splitzip.Container(box).original()                    # the bytes of kv, as `splitzip decompress` gives
    frame = splitzip.compress(kv[3, 1], table, book_tensor=7)   # one tensor: layer 3's V
    values = splitzip.decompress(frame, table=table)

Both directions run where the data is. A CUDA tensor (torch or cupy) is coded on its GPU, on the current stream,
into the same bytes as the CPU coder's: ``splitzip.compress(kv_gpu[3, 1], table, book_tensor=7)`` gives the frame
in device memory; a frame in device memory decodes on its GPU: ``splitzip.decompress(frame_on_gpu, table=table)``.
The table's device image is built and copied once per table and device. Calibration, an offline step, copies device
samples to the host.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable, Optional, Sequence, Tuple, Union

import numpy as np

from . import _splitzip as _ext
from ._channels import _kv_layout, _tokens
from ._core import (
    _DTYPE_NAMES,
    _DTYPE_SIZES,
    DTYPE_IDS,
    BufferLike,
    DTypeLike,
    Tensor,
    _cupy_workspace,
    _device_to_host,
    _flags,
    _host_bytes,
    _int_arg,
    _Tensor,
    _threads,
    _to_device_like,
)
from ._errors import check, error_for

_MAGICS = {b"SPZK": "a channel book file (ChannelBook.load)", b"SPZB": "a codebook file (Codebook.load)",
           b"SPZF": "a SplitZip frame", b"SPZC": "a SplitZip container",
           b"SPZT": "a symbol table file (SymbolTable.load)", b"SPZR": "a row map file (RowMap.load)"}


class SymbolTable:
    """A symbol table (docs/FORMAT.md §5.3), parsed, checked and prepared for the codec once.

    ``tensors`` tensors of ``period`` channels, each channel mapped to one of ``groups`` probability tables of
    ``2**symbol_bits + 1`` 12-bit frequencies (the last one is the escape's). ``id`` is what version 3 frames refer
    to (XXH3-64 of the file without its checksum). ``group_of`` (uint16, shape (tensors, period)) and ``freq``
    (uint16, shape (groups, 2**symbol_bits + 1)) are read-only copies of the file's fields;
    ``expected_bits_per_value`` (the predicted symbol bits per value on the samples) is set by
    :func:`calibrate_max`.

    ``SymbolTable(data)`` (or :meth:`from_bytes`) parses the bytes of a table file, exactly the table: what
    ``splitzip calibrate --mode max`` writes and :meth:`to_bytes` / :meth:`save` give back. A damaged file raises the
    library's error (ChecksumError, CorruptError, SrcTruncatedError, BadMagicError, ...).
    """

    __slots__ = ("_t", "expected_bits_per_value", "_images")

    def __init__(self, data: Union[bytes, bytearray, memoryview, np.ndarray]):
        self._t = _parse(data, "symbol table")
        self.expected_bits_per_value: Optional[float] = None

    @classmethod
    def from_bytes(cls, data: Union[bytes, bytearray, memoryview, np.ndarray]) -> "SymbolTable":
        """Parses a symbol table file (exactly the table's bytes)."""
        return cls(data)

    @classmethod
    def load(cls, path: Union[str, "os.PathLike[str]"]) -> "SymbolTable":
        """Reads a symbol table file (``splitzip calibrate --mode max -o PATH``)."""
        p = os.fspath(path)
        with open(p, "rb") as f:
            data = f.read()
        table = cls.__new__(cls)
        table._t = _parse(data, f"symbol table {os.fsdecode(p)}")
        table.expected_bits_per_value = None
        return table

    def _device_image(self, like):
        """The table's device image (what the GPU decoder reads) on the device of ``like`` (a CUDA _Tensor), made
        and copied there once and kept: a uint8 array of that framework."""
        dev = like.obj.device
        key = (like.framework, str(dev))
        images = getattr(self, "_images", None)  # (tables made by load() or a container have none yet)
        if images is None:
            images = self._images = {}
        image = images.get(key)
        if image is None:
            status, data = _ext.symbol_table_image(self._t)
            check(status, "symbol table image")
            host = np.frombuffer(data, dtype=np.uint8).copy()
            if like.framework == "torch":
                import torch
                image = torch.from_numpy(host).to(dev)
            else:
                import cupy
                with dev:
                    image = cupy.asarray(host)
            images[key] = image
        return image

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the table file, byte for byte what it was parsed from or calibrated to."""
        with open(os.fspath(path), "wb") as f:
            f.write(self.to_bytes())

    def to_bytes(self) -> bytes:
        """The symbol table file (docs/FORMAT.md §5.3)."""
        return self._t.to_bytes()

    @property
    def dtype(self) -> str:
        return _DTYPE_NAMES[self._t.dtype]

    @property
    def symbol_bits(self) -> int:
        """B of docs/FORMAT.md §4.10.2: 8, or 5 for fp16."""
        return int(self._t.symbol_bits)

    @property
    def period(self) -> int:
        return int(self._t.period)

    @property
    def tensors(self) -> int:
        return int(self._t.tensors)

    @property
    def groups(self) -> int:
        return int(self._t.groups)

    @property
    def id(self) -> int:
        return int(self._t.id)

    @property
    def nbytes(self) -> int:
        """Size of the table file."""
        return int(self._t.nbytes)

    @property
    def group_of(self) -> np.ndarray:
        a = np.frombuffer(self._t.group_of_bytes(), dtype="<u2").reshape(self.tensors, self.period)
        return a  # frombuffer of bytes: read-only

    @property
    def freq(self) -> np.ndarray:
        return np.frombuffer(self._t.freq_bytes(), dtype="<u2").reshape(self.groups, (1 << self.symbol_bits) + 1)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SymbolTable) and self.id == other.id and self.to_bytes() == other.to_bytes()

    def __hash__(self) -> int:
        return hash(self.id)

    def __reduce__(self):
        return (SymbolTable, (self.to_bytes(),))

    def __repr__(self) -> str:
        return (f"SymbolTable(dtype={self.dtype!r}, tensors={self.tensors}, period={self.period}, "
                f"groups={self.groups}, id=0x{self.id:016x})")


def _parse(data: object, what: str):
    """The extension's prepared table of a table file's bytes, or the error that says what is wrong with them."""
    if not isinstance(data, (bytes, bytearray, memoryview, np.ndarray)):
        raise TypeError(f"{what}: expected the bytes of a symbol table file, got {type(data).__name__}")
    raw = bytes(data)
    if not raw:  # no bytes to point the library at: what it says of fewer than 28 (docs/FORMAT.md §5.3)
        raise error_for(3, f"{what}: no bytes")
    status, t = _ext.symbol_table_parse(np.frombuffer(raw, dtype=np.uint8))
    if status != 0:
        kind = _MAGICS.get(raw[:4]) if raw[:4] != b"SPZT" else None
        if kind is not None:
            what = f"{what}: this is {kind}, not a symbol table"
        elif status == 7:
            what = f"{what} ({len(raw)} bytes)"
        check(status, what)
    return t


class RowMap:
    """Pairs of rows for paired FP8 frames of the max mode (docs/FORMAT.md §4.10.6, §5.4).

    A KV tensor has a row of ``period`` values per token. Where a token occurs again, the early layers repeat much
    of the row of its previous occurrence (the first layer's V row is a function of the token); a paired frame codes
    a value equal to its paired row's value as one symbol. The map gives each row the earlier row it pairs with (or
    none); every tensor of a request uses the same map, and both ends build it from the request's token ids
    (:meth:`from_tokens`), so it need not be shipped; frames name it by ``id``.

        rows = splitzip.RowMap.from_tokens(token_ids)            # the request's tokens, 1-D integers < 2**32
        table = splitzip.calibrate_max(samples, row_maps=maps)   # FP8 tables calibrated on paired symbols
        frame = splitzip.compress(kv[l, 0], table, book_tensor=2 * l, row_map=rows)
        values = splitzip.decompress(frame, table=table, row_map=rows)

    Paired frames are coded and decoded on the CPU. ``RowMap(data)`` parses the bytes of a row map file (exactly the
    file: what :meth:`to_bytes` / :meth:`save` give); a damaged file raises the library's error.
    """

    __slots__ = ("_m",)

    def __init__(self, data: Union[bytes, bytearray, memoryview, np.ndarray]):
        if not isinstance(data, (bytes, bytearray, memoryview, np.ndarray)):
            raise TypeError(f"RowMap: expected the bytes of a row map file, got {type(data).__name__}")
        raw = bytes(data)
        if not raw:
            raise error_for(3, "row map: no bytes")
        status, m = _ext.row_map_parse(np.frombuffer(raw, dtype=np.uint8))
        if status != 0:
            kind = _MAGICS.get(raw[:4]) if raw[:4] != b"SPZR" else None
            check(status, f"row map: this is {kind}, not a row map" if kind else f"row map ({len(raw)} bytes)")
        self._m = m

    @classmethod
    def from_tokens(cls, tokens: Union[Sequence[int], np.ndarray]) -> "RowMap":
        """Each row paired with the previous row of the same token id: ``tokens`` is 1-D (numpy, list, or a CPU
        tensor) of integers in [0, 2**32), one per row (token) of the tensors the map serves."""
        a = np.asarray(tokens)
        if a.ndim != 1 or a.size == 0:
            raise ValueError(f"RowMap.from_tokens: tokens must be a non-empty 1-D sequence, got shape {a.shape}")
        if a.dtype.kind not in "iu":
            raise TypeError(f"RowMap.from_tokens: tokens must be integers, got {a.dtype}")
        if a.min() < 0 or int(a.max()) >= 1 << 32:
            raise ValueError("RowMap.from_tokens: token ids must lie in [0, 2**32)")
        ids = np.ascontiguousarray(a, dtype="<u4")
        status, data = _ext.row_map_build(ids, ids.size, 0, True)
        check(status, "RowMap.from_tokens")
        return cls(data)

    @classmethod
    def from_rows(cls, rows: np.ndarray) -> "RowMap":
        """Each row paired with the previous row of the same bytes, for callers without token ids: ``rows`` is a
        host array whose first axis is the row (token), e.g. the first layer's V of shape [tokens, kv_heads,
        head_dim], whose rows are a function of the token."""
        a = np.ascontiguousarray(np.asarray(rows))
        if a.ndim < 1 or a.shape[0] == 0:
            raise ValueError("RowMap.from_rows: rows must have a non-empty first axis")
        n = int(a.shape[0])
        status, data = _ext.row_map_build(a.reshape(-1).view(np.uint8), n, a.nbytes // n, False)
        check(status, "RowMap.from_rows")
        return cls(data)

    @classmethod
    def load(cls, path: Union[str, "os.PathLike[str]"]) -> "RowMap":
        with open(os.fspath(path), "rb") as f:
            return cls(f.read())

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        with open(os.fspath(path), "wb") as f:
            f.write(self.to_bytes())

    def to_bytes(self) -> bytes:
        """The row map file (docs/FORMAT.md §5.4)."""
        return self._m.to_bytes()

    @property
    def rows(self) -> int:
        return int(self._m.rows)

    @property
    def id(self) -> int:
        """XXH3-64 of the file without its checksum: what paired frames refer to."""
        return int(self._m.id)

    @property
    def pairs(self) -> np.ndarray:
        """int64, one per row: the row it pairs with, or -1."""
        return np.frombuffer(self._m.pair_bytes(), dtype="<u4").astype(np.int64) - 1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RowMap) and self.to_bytes() == other.to_bytes()

    def __hash__(self) -> int:
        return hash(self.id)

    def __reduce__(self):
        return (RowMap, (self.to_bytes(),))

    def __repr__(self) -> str:
        return f"RowMap(rows={self.rows}, paired={int((self.pairs >= 0).sum())}, id=0x{self.id:016x})"


def _row_map_arg(row_map: object, what: str) -> Optional[RowMap]:
    if row_map is None or isinstance(row_map, RowMap):
        return row_map
    raise TypeError(f"{what}: row_map must be a RowMap or None, got {type(row_map).__name__}")


def _table_arg(table: object, what: str = "table") -> SymbolTable:
    if isinstance(table, (str, os.PathLike)):
        return SymbolTable.load(table)
    if not isinstance(table, SymbolTable):
        raise TypeError(f"{what} must be a SymbolTable or a symbol table file path, got {type(table).__name__}")
    return table


def _check_table_shape(tensors: int, period: int, what: str) -> None:
    if tensors > _ext.MAX_TENSORS or period > _ext.MAX_PERIOD or tensors * period > 1 << 26:
        raise ValueError(f"{what}: {tensors} tensors (2 * layers) of {period} channels (kv_heads * head_dim): a "
                         f"symbol table holds at most {_ext.MAX_TENSORS} tensors of at most {_ext.MAX_PERIOD} "
                         f"channels, 2^26 channels in all")


def calibrate_max(kv: Union[Tensor, Iterable[Tensor]], kv_shape: Optional[Sequence[int]] = None,
                  dtype: Optional[DTypeLike] = None, groups: int = 64,
                  row_maps: Union["RowMap", Sequence["RowMap"], None] = None) -> SymbolTable:
    """A symbol table calibrated on sample KV caches (one or a list; host copies of device tensors are made), as
    ``splitzip calibrate --mode max --kv-shape L,2,*,H,D --groups N`` writes it for the same samples.

    kv: arrays of shape [layers, 2, tokens, kv_heads, head_dim] (tokens may differ between samples), or any
        contiguous tensors / bytes with ``kv_shape=(layers, kv_heads, head_dim)`` (or (L, 2, T, H, D)) and
        ``dtype=`` for element types that are not bf16 / fp16 / fp32 / fp8.
    groups: probability tables, 1..4096 (the channels are clustered into at most that many; the CLI's default 64).
    row_maps: FP8 only: the :class:`RowMap` of each sample (one, or a list as long as the samples), for tables of
        paired frames (the pair symbol's frequency is measured on the samples' paired rows).
    """
    samples = list(kv) if isinstance(kv, (list, tuple)) else [kv]
    if not samples:
        raise ValueError("calibrate_max: no samples")
    maps = None
    if row_maps is not None:
        maps = [row_maps] if isinstance(row_maps, RowMap) else list(row_maps)
        if len(maps) != len(samples) or not all(isinstance(m, RowMap) for m in maps):
            raise ValueError(f"calibrate_max: row_maps must be a RowMap for each of the {len(samples)} samples")
    g = _int_arg(groups, "groups", 1, _ext.MAX_GROUPS)
    did, layout, arrays = None, None, []
    for i, x in enumerate(samples):
        if isinstance(x, np.ndarray) and not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)  # calibration only reads: a strided view is copied
        t = _Tensor(x, f"kv[{i}]")
        d = t.format_dtype(dtype, f"kv[{i}]")
        lay = _kv_layout(t, kv_shape, f"kv[{i}]")
        if did is not None and (d != did or lay != layout):
            raise ValueError(f"calibrate_max: kv[{i}] is {_DTYPE_NAMES[d]} {lay}, kv[0] {_DTYPE_NAMES[did]} {layout}")
        did, layout = d, lay
        _check_table_shape(2 * lay[0], lay[1] * lay[2], f"kv[{i}]")
        _tokens(t, d, *lay, f"kv[{i}]")
        arrays.append(_host_bytes(t))
    L, H, D = layout
    if maps is not None:
        if _DTYPE_SIZES[did] != 1:
            raise ValueError(f"calibrate_max: row_maps are for FP8 KV (paired frames), not {_DTYPE_NAMES[did]}")
        for i, (a, m) in enumerate(zip(arrays, maps)):
            if m.rows < a.nbytes // (2 * L * H * D):
                raise ValueError(f"calibrate_max: row_maps[{i}] has {m.rows} rows, kv[{i}] "
                                 f"{a.nbytes // (2 * L * H * D)} tokens")
    status, bits, data = _ext.symbol_calibrate(arrays, [m._m for m in maps or []], did, 2 * L, H * D, g)
    check(status, "calibrate_max")
    table = SymbolTable(data)
    table.expected_bits_per_value = bits
    return table


def _chunk_log2_max(chunk: Optional[int], n: int) -> int:
    """log2 of the chunk; the max mode's default depends on the call's n values (sz_entropy_chunk_log2, as the
    CLI's --mode max and the C API): 2^16 values, smaller where that would leave a call fewer than 8192 chunks (a
    GPU codes a chunk per warp), but at least 2^12."""
    if chunk is None:
        return _ext.entropy_chunk_log2(n)
    chunk = _int_arg(chunk, "chunk", 1, (1 << 64) - 1)
    if chunk & (chunk - 1):
        raise ValueError(f"chunk must be a power of two (values per chunk, {1 << _ext.MIN_CHUNK_LOG2}.."
                         f"{1 << _ext.MAX_CHUNK_LOG2}), got {chunk}")
    return chunk.bit_length() - 1  # the library checks the range (InvalidArgumentError)


def _encode(src: np.ndarray, n: int, did: int, table: SymbolTable, tensor: int, log2: int, flags: int,
            reference: bool, what: str, row_map: Optional[RowMap] = None) -> np.ndarray:
    dst = np.empty(_ext.compress_bound(n, did), dtype=np.uint8)  # the library writes every byte of the frame
    status, size = _ext.compress_entropy(src, n, did, table._t, tensor, log2, flags, dst, bool(reference),
                                         row_map._m if row_map is not None else None)
    check(status, what)
    dst.resize((size,), refcheck=False)  # shrinks in place, no copy of the frame
    return dst


def _cuda_encode(t: _Tensor, spans: Sequence[Tuple[object, int]], n: int, did: int, table: SymbolTable, log2: int,
                 flags: int, what: str) -> list:
    """Version 3 frames coded on t's GPU: one per (flat uint8 device view of n values, table tensor) of ``spans``,
    enqueued on the device's current stream one after the other (they share its workspace); then one wait for their
    sizes. Returns the frames: uint8 device arrays of t's framework, views of compress_bound-sized allocations."""
    image = table._device_image(t)
    st, ws = _ext.cuda_compress_entropy_workspace_size(n, did, log2, flags)
    check(st, what)
    bound = _ext.compress_bound(n, did)
    if t.framework == "torch":
        import torch
        from . import _torch_ops
        dev = t.obj.device
        with torch.cuda.device(dev):
            stream = _torch_ops._stream(dev)
            workspace = _torch_ops._workspace_for(ws, dev)
            dsts = [torch.empty(bound, dtype=torch.uint8, device=dev) for _ in spans]
            sizes_d = torch.zeros(len(spans), dtype=torch.int64, device=dev)  # uint64 on the device, < 2^63
            for i, (src, tz) in enumerate(spans):
                check(_ext.cuda_compress_entropy(src, n, did, image, tz, log2, flags, dsts[i], workspace,
                                                 sizes_d[i:i + 1], stream), what)
            sizes = sizes_d.cpu().tolist()  # the one wait: the frames' lengths
    else:
        import cupy
        with t.obj.device:
            stream = cupy.cuda.get_current_stream().ptr
            workspace = _cupy_workspace(ws, stream)
            dsts = [cupy.empty(bound, dtype=cupy.uint8) for _ in spans]
            sizes_d = cupy.zeros(len(spans), dtype=cupy.uint64)
            for i, (src, tz) in enumerate(spans):
                check(_ext.cuda_compress_entropy(src, n, did, image, tz, log2, flags, dsts[i], workspace,
                                                 sizes_d[i:i + 1], stream), what)
            sizes = [int(v) for v in sizes_d.get()]
    if any(v == 0 for v in sizes):  # the kernel's report of an image or workspace it cannot use; not a frame
        raise error_for(1, f"{what}: the GPU encoder wrote no frame (the table's device image or the workspace "
                           f"was not usable)")
    return [d[:v] for d, v in zip(dsts, sizes)]


def compress_entropy(tensor: BufferLike, table: Union[SymbolTable, str, "os.PathLike[str]"], book_tensor: int,
                     chunk: Optional[int] = None, checksum: Union[bool, str] = True, dtype: Optional[DTypeLike] = None, *,
                     reference: bool = False, row_map: Optional[RowMap] = None) -> Tensor:
    """A version 3 frame of one tensor (tensor ``book_tensor`` of the table: 2 * layer for K, + 1 for V): value i
    belongs to channel i mod table.period. Host tensors give a 1-D uint8 numpy array; CUDA tensors (torch, cupy)
    are coded on their GPU, on the current stream, and give a 1-D uint8 array of their framework on that device,
    the same bytes (the frame size is needed for its length: one wait for the stream, as ``compress``).
    ``reference=True``: the library's scalar reference coder (the oracle; the same bytes; host tensors).
    ``row_map``: FP8 host tensors: a paired frame (docs/FORMAT.md §4.10.6) with this :class:`RowMap`, whose rows
    are the tensor's tokens (``table.period`` values each)."""
    b = _table_arg(table)
    rm = _row_map_arg(row_map, "compress")
    t = _Tensor(tensor, "tensor")
    did = t.format_dtype(dtype, "tensor")
    if DTYPE_IDS[b.dtype] != did:
        raise error_for(9, f"compress: the symbol table is for {b.dtype}, the tensor is {_DTYPE_NAMES[did]}")
    tz = _int_arg(book_tensor, "book_tensor", 0, b.tensors - 1)
    n = t.nbytes // _DTYPE_SIZES[did]
    log2, flags = _chunk_log2_max(chunk, n), _flags(checksum)
    if rm is not None:
        if _DTYPE_SIZES[did] != 1:
            raise ValueError(f"compress: row_map is for FP8 tensors (paired frames), not {_DTYPE_NAMES[did]}")
        if t.device == "cuda":
            raise ValueError("compress: paired frames (row_map=) are coded on the CPU: pass a host tensor")
        rows = -(-n // b.period)
        if rm.rows < rows:
            raise ValueError(f"compress: the row map has {rm.rows} rows, the tensor {rows} rows of {b.period} values")
        return _encode(t.bytes, n, did, b, tz, log2, flags, reference, "compress", rm)
    if t.device == "cuda":
        if reference:
            raise ValueError("compress: the reference coder runs on the host (reference=True takes host tensors)")
        if n == 0:  # zero-size device arrays do not cross DLPack: the bare header, made on the host, copied over
            return _to_device_like(t, _encode(np.empty(0, dtype=np.uint8), 0, did, b, tz, log2, flags, False,
                                              "compress"))
        return _cuda_encode(t, [(t.bytes, tz)], n, did, b, log2, flags, "compress")[0]
    return _encode(t.bytes, n, did, b, tz, log2, flags, reference, "compress")


def frame_table_id(frame: np.ndarray) -> Optional[Tuple[int, int]]:
    """(table id, table tensor) of a version 3 frame, None for frames of versions 1 and 2 (or no frame)."""
    st, table_id, tensor, _ = _ext.frame_table_ref(frame)
    return (table_id, tensor) if st == 0 else None


def decompress_entropy_into(frame: np.ndarray, table: SymbolTable, out: np.ndarray, threads: int, what: str, *,
                            reference: bool = False, row_map: Optional[RowMap] = None) -> None:
    """Decodes a version 3 frame into the host byte view ``out`` with its table (and a paired frame's row map);
    another table or map raises BookMismatchError naming both ids."""
    ref = frame_table_id(frame)
    if ref is not None and ref[0] != table.id:
        raise error_for(17, f"{what}: the frame was made with symbol table 0x{ref[0]:016x}, the table given is "
                            f"0x{table.id:016x}")
    st, map_id = _ext.frame_row_map_id(frame)
    if st == 0 and map_id != 0 and (row_map is None or row_map.id != map_id):
        given = "none was given (row_map=)" if row_map is None else f"the map given is 0x{row_map.id:016x}"
        raise error_for(17, f"{what}: a paired frame made with row map 0x{map_id:016x}; {given}")
    st, _ = _ext.decompress_entropy(frame, table._t, out, threads, bool(reference),
                                    row_map._m if row_map is not None else None)
    check(st, what)


def compress_kv_max(kv: Tensor, table: Union[SymbolTable, str, "os.PathLike[str]"],
                    kv_shape: Optional[Sequence[int]] = None, chunk: Optional[int] = None,
                    threads: Optional[int] = None, checksum: Union[bool, str] = True,
                    dtype: Optional[DTypeLike] = None, row_map: Optional[RowMap] = None) -> np.ndarray:
    """A KV cache [layers, 2, tokens, kv_heads, head_dim] as a container (docs/FORMAT.md §6): the table (item
    "symbol_table", kind 4), then one version 3 frame per tensor ("layer<l>.k", "layer<l>.v", shape [tokens,
    kv_heads, head_dim]) that together restore its bytes. Byte-identical to ``splitzip compress --mode max
    --kv-shape L,2,T,H,D --codebook TABLE`` (by default each frame's chunk is sz_entropy_chunk_log2 of its
    T * H * D values, as there). The container is a host array; a CUDA tensor (torch, cupy) is coded on its GPU, on
    the current stream (one wait, for the frames' sizes), and its frames are copied to the host.

    threads: host tensors: tensors coded at once (default 1; 0: one per CPU); each frame is coded by one thread and
    the bytes never depend on it. Checked but unused for CUDA tensors.
    row_map: FP8 host KV: paired frames (docs/FORMAT.md §4.10.6) with this :class:`RowMap` of the cache's tokens,
    stored in the container after the table (item "row_map", kind 5), as ``splitzip compress --mode max
    --row-map FILE`` writes it."""
    from ._container import _assemble

    b = _table_arg(table)
    if isinstance(kv, np.ndarray) and not kv.flags.c_contiguous:
        kv = np.ascontiguousarray(kv)
    t = _Tensor(kv, "kv")
    did = t.format_dtype(dtype, "kv")
    L, H, D = _kv_layout(t, kv_shape, "kv")
    if DTYPE_IDS[b.dtype] != did:
        raise error_for(9, f"compress_kv_max: the symbol table is for {b.dtype}, the KV cache is "
                           f"{_DTYPE_NAMES[did]}")
    if b.tensors != 2 * L or b.period != H * D:
        raise ValueError(f"compress_kv_max: the symbol table has {b.tensors} tensors of {b.period} channels, the "
                         f"KV cache {2 * L} of {H * D}")
    T = _tokens(t, did, L, H, D, "kv")
    n = T * H * D
    tensor_bytes = n * _DTYPE_SIZES[did]
    log2, flags, nthreads = _chunk_log2_max(chunk, n), _flags(checksum), _threads(threads)
    flat = t.bytes
    rm = _row_map_arg(row_map, "compress_kv_max")
    if rm is not None:
        if _DTYPE_SIZES[did] != 1:
            raise ValueError(f"compress_kv_max: row_map is for FP8 KV (paired frames), not {_DTYPE_NAMES[did]}")
        if t.device == "cuda":
            raise ValueError("compress_kv_max: paired frames (row_map=) are coded on the CPU: pass a host tensor")
        if rm.rows < T:
            raise ValueError(f"compress_kv_max: the row map has {rm.rows} rows, the KV cache {T} tokens")

    def one(tz: int) -> np.ndarray:
        return _encode(flat[tz * tensor_bytes:(tz + 1) * tensor_bytes], n, did, b, tz, log2, flags, False,
                       f"compress_kv_max: tensor {tz}", rm)

    workers = min(2 * L, nthreads if nthreads else (os.cpu_count() or 1))
    if t.device == "cuda":  # (at least one token: _tokens refuses an empty cache)
        spans = [(flat[tz * tensor_bytes:(tz + 1) * tensor_bytes], tz) for tz in range(2 * L)]
        frames = [_device_to_host(f) for f in _cuda_encode(t, spans, n, did, b, log2, flags, "compress_kv_max")]
    elif workers > 1:  # the extension releases the GIL while it codes
        with ThreadPoolExecutor(max_workers=workers) as pool:
            frames = list(pool.map(one, range(2 * L)))
    else:
        frames = [one(tz) for tz in range(2 * L)]
    parts = [((4, 0, (), b"symbol_table", 0, 0), np.frombuffer(b.to_bytes(), dtype=np.uint8))]
    if rm is not None:
        parts.append(((5, 0, (), b"row_map", 0, 0), np.frombuffer(rm.to_bytes(), dtype=np.uint8)))
    for tz, frame in enumerate(frames):
        name = f"layer{tz // 2}.{'v' if tz % 2 else 'k'}".encode()
        parts.append(((1, did, (T, H, D), name, tz * tensor_bytes, tensor_bytes), frame))
    return _assemble(parts)
