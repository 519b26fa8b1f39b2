"""Containers (docs/FORMAT.md §6): many named items in one buffer, each a frame or stored bytes, with an index that
records every item's name, shape and place in an original file. What `splitzip compress` makes of .npy and
.safetensors files, and what ``compress(..., keep_shape=True)`` makes of one tensor.

Reading validates the whole index once (sz_container_items) and then finds items by name in a dict; writing lays
the items out here (header, items at 64-byte aligned offsets, zero gaps) and has the library write and check the
index and footer.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping, Optional, Tuple, Union

import numpy as np

from . import _splitzip as _ext
from ._core import (
    _DTYPE_NAMES,
    _KINDS,
    DTYPE_IDS,
    Codebook,
    _DTYPE_SIZES,
    _FLOAT_ELEMENTS,
    BufferLike,
    CodebookLike,
    DTypeLike,
    Tensor,
    _check_out_element,
    _chunk_log2,
    _codebook_arg,
    _compress_host,
    _flags,
    _frame_info_whole,
    _info_dict,
    _numpy_dtype,
    _Tensor,
    _threads,
)
from ._errors import check, error_for

_KIND_NAMES = {1: "frame", 2: "stored", 3: "book", 4: "table", 5: "rowmap"}

#: An item to write: a tensor (a frame when its element type is bf16 / fp16 / fp32 / fp8, else its bytes stored),
#: bytes (stored), or (tensor, dtype) to compress a tensor of another element type (uint16 bit patterns, bytes).
ItemValue = Union[Tensor, bytes, bytearray, memoryview, Tuple[BufferLike, DTypeLike]]


@dataclass(frozen=True)
class Item:
    """One entry of a container index (docs/FORMAT.md §6.3).

    kind: "frame", "stored", "book" (a channel book that the container's version 2 frames use; not part of the
    original file), "table" (a symbol table for its version 3 frames, likewise) or "rowmap" (a row map for its
    paired frames, likewise). dtype: the frame's dtype name
    ("bf16", ...), None for the other kinds. shape: the
    recorded shape, () when none is recorded (ndim 0: a scalar, or a shape that was not recorded). The offsets and
    sizes are in bytes: original_* in the original file, data_* in the container.
    """

    name: str
    kind: str
    dtype: Optional[str]
    shape: Tuple[int, ...]
    original_offset: int
    original_size: int
    data_offset: int
    data_size: int


def _name_bytes(name: str) -> bytes:
    if not isinstance(name, str):
        raise TypeError(f"item names must be str, got {type(name).__name__}")
    raw = name.encode("utf-8", "surrogateescape")
    if b"\0" in raw:
        raise ValueError(f"item name {name!r} holds a NUL character")
    if len(raw) > 4096:
        raise ValueError(f"item name of {len(raw)} bytes (at most 4096)")
    return raw


def _host_buffer(data: Union[BufferLike, str, "os.PathLike[str]"], what: str) -> np.ndarray:
    if isinstance(data, (str, os.PathLike)):
        return np.fromfile(os.fspath(data), dtype=np.uint8)
    t = _Tensor(data, what)
    if t.device != "cpu":
        raise ValueError(f"{what}: containers are read in host memory (copy the buffer to the host)")
    return t.bytes


class Container:
    """A read-only view of a container: ``Container(buffer_or_path)``.

    ``c.names`` lists the items in index order; ``c[name]`` (or ``c.read(name)``) decompresses a frame item into a
    new array of its dtype and recorded shape, or returns a stored item's bytes as a uint8 array; ``c.item(name)``
    is the index entry; ``c.original()`` rebuilds the original file (what ``splitzip decompress`` writes). The
    whole index is validated when the container is opened; each frame is validated when it is read.
    """

    def __init__(self, data: Union[BufferLike, str, "os.PathLike[str]"]):
        self._buf = _host_buffer(data, "container")
        status, entries = _ext.container_items(self._buf)
        check(status, "container")
        items = []
        for kind, did, shape, name, ooff, osize, doff, dsize in entries:
            items.append(Item(name.decode("utf-8", "surrogateescape"), _KIND_NAMES[kind],
                              _DTYPE_NAMES.get(did) if kind == 1 else None, tuple(int(d) for d in shape),
                              int(ooff), int(osize), int(doff), int(dsize)))
        self.items: Tuple[Item, ...] = tuple(items)
        self._by_name = {it.name: it for it in items}
        from ._channels import ChannelBook
        from ._max import _parse, RowMap, SymbolTable
        self._books = {}  # id -> ChannelBook of the book items (validated with the index)
        self._tables = {}  # id -> SymbolTable of the table items, parsed and prepared once
        self._row_maps = {}  # id -> RowMap of the row map items
        for it in items:
            data = self._buf[it.data_offset:it.data_offset + it.data_size]
            if it.kind == "rowmap":
                m = RowMap(data)
                self._row_maps[m.id] = m
            elif it.kind == "book":
                b = ChannelBook.from_bytes(data)
                self._books[b.id] = b
            elif it.kind == "table":
                tb = SymbolTable.__new__(SymbolTable)
                tb._t = _parse(data, f"container: item {it.name!r}")
                tb.expected_bits_per_value = None
                self._tables[tb.id] = tb

    @property
    def books(self) -> list:
        """The channel books the container holds (its book items)."""
        return list(self._books.values())

    @property
    def tables(self) -> list:
        """The symbol tables the container holds (its table items, for its version 3 frames)."""
        return list(self._tables.values())

    def _decode_into(self, frame: np.ndarray, out: np.ndarray, threads: int, what: str) -> None:
        """Decodes a frame of any version into the host byte view ``out``, with the container's book or table."""
        from ._max import decompress_entropy_into, frame_table_id
        ref = frame_table_id(frame)
        if ref is not None:
            table = self._tables.get(ref[0])
            if table is None:
                raise error_for(17, f"{what}: its symbol table (id 0x{ref[0]:016x}) is not in the container")
            st, map_id = _ext.frame_row_map_id(frame)
            row_map = self._row_maps.get(map_id) if st == 0 and map_id else None
            if st == 0 and map_id and row_map is None:
                raise error_for(17, f"{what}: its row map (id 0x{map_id:016x}) is not in the container")
            decompress_entropy_into(frame, table, out, threads, what, row_map=row_map)
            return
        from ._channels import decompress_into
        decompress_into(frame, self._book_of(frame, what), out, threads, what)

    def _book_of(self, frame: np.ndarray, what: str):
        """The container's book for a version 2 frame, None for a version 1 frame."""
        from ._channels import frame_book_id
        ref = frame_book_id(frame)
        if ref is None:
            return None
        book = self._books.get(ref[0])
        if book is None:
            raise error_for(17, f"{what}: its channel book (id 0x{ref[0]:016x}) is not in the container")
        return book

    @property
    def names(self) -> list[str]:
        return [it.name for it in self.items]

    @property
    def original_size(self) -> int:
        """Size of the original file: the items' original ranges tile [0, original_size)."""
        return sum(it.original_size for it in self.items)

    @property
    def nbytes(self) -> int:
        return int(self._buf.shape[0])

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __getitem__(self, name: str) -> np.ndarray:
        return self.read(name)

    def __repr__(self) -> str:
        return f"<splitzip.Container of {len(self.items)} items, {self.nbytes} bytes>"

    def item(self, name: str) -> Item:
        """The index entry of an item; NotFoundError (a KeyError) if there is none of that name."""
        if not isinstance(name, str):
            raise TypeError(f"item names are str, got {type(name).__name__}")
        it = self._by_name.get(name)
        if it is None:
            raise error_for(12, f"container: no item {name!r}")
        return it

    def data(self, name: str) -> np.ndarray:
        """The item's bytes in the container (its frame, or the stored bytes), a view of the buffer."""
        it = self.item(name)
        return self._buf[it.data_offset:it.data_offset + it.data_size]

    def read(self, name: str, out: Optional[np.ndarray] = None, *, threads: Optional[int] = None) -> np.ndarray:
        """A frame item's values in its recorded shape (1-D when none is recorded), or into ``out`` (any host
        array with room for them, as in :func:`splitzip.decompress`; version 2 frames with the container's channel
        book, version 3 frames with its symbol table); a stored item's bytes (a uint8 array); a book item's
        :class:`ChannelBook`; a table item's :class:`SymbolTable`; a row map item's :class:`RowMap`."""
        it = self.item(name)
        nthreads = _threads(threads)
        data = self.data(name)
        if it.kind == "book":
            from ._channels import ChannelBook
            return ChannelBook.from_bytes(data)
        if it.kind == "table":
            from ._max import SymbolTable
            return SymbolTable(data)
        if it.kind == "rowmap":
            from ._max import RowMap
            return RowMap(data)
        if it.kind == "stored":
            if out is None:
                return data.copy()
            o = _Tensor(out, "out", writable=True)
            if o.nbytes < it.data_size:
                raise error_for(2, f"item {name!r}: {it.data_size} bytes, out holds {o.nbytes}")
            o.bytes[:it.data_size] = data
            return out
        raw = _frame_info_whole(data, f"item {name!r}")
        if out is None:
            shape = it.shape if (it.shape or raw["n_values"] == 1) else (raw["n_values"],)
            result = np.empty(shape, dtype=_numpy_dtype(raw["dtype_id"]))
            o = _Tensor(result, "out", writable=True)
        else:
            o = _Tensor(out, "out", writable=True)
            if o.device != "cpu":
                raise ValueError("out: must be in host memory like the container")
            _check_out_element(o, raw["dtype_id"])
            result = out
        self._decode_into(data, o.bytes, nthreads, f"item {name!r}")
        return result

    def original(self, *, threads: Optional[int] = None) -> bytes:
        """The original file, byte for byte: every item's uncompressed bytes at its original offset."""
        nthreads = _threads(threads)
        out = np.empty(self.original_size, dtype=np.uint8)
        for it in self.items:
            dst = out[it.original_offset:it.original_offset + it.original_size]
            src = self._buf[it.data_offset:it.data_offset + it.data_size]
            if it.kind == "stored":
                dst[...] = src
                continue
            if it.kind in ("book", "table", "rowmap"):
                continue  # not part of the original file
            raw = _frame_info_whole(src, f"item {it.name!r}")
            if raw["decompressed_size"] != it.original_size:
                raise error_for(7, f"item {it.name!r}")
            self._decode_into(src, dst, nthreads, f"item {it.name!r}")
        return out.tobytes()

    def info(self) -> dict:
        """What :func:`splitzip.info` says of a container."""
        items = []
        for it in self.items:
            d = {"name": it.name, "kind": it.kind, "dtype": it.dtype, "shape": it.shape,
                 "original_offset": it.original_offset, "original_size": it.original_size,
                 "data_offset": it.data_offset, "data_size": it.data_size}
            if it.kind == "frame":
                status, raw = _ext.frame_info(self.data(it.name))
                check(status, f"item {it.name!r}")
                d["frame"] = _info_dict(raw, self.data(it.name))
            elif it.kind == "book":
                d["book"] = self.read(it.name)
            elif it.kind == "table":
                d["table"] = self.read(it.name)
            elif it.kind == "rowmap":
                d["row_map"] = self.read(it.name)
            items.append(d)
        size = self.nbytes
        return {"type": "container", "n_items": len(items), "compressed_size": size,
                "decompressed_size": self.original_size,
                "ratio": self.original_size / size if size else 0.0, "items": items}


def _align(x: int) -> int:
    a = _ext.CONTAINER_ALIGN
    return (x + a - 1) // a * a


def _entries(items: Union[Mapping[str, ItemValue], Iterable[Tuple[str, ItemValue]]]) -> list:
    if isinstance(items, Mapping):
        return list(items.items())
    if isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
        raise TypeError(f"items must be a mapping of names to tensors or bytes, got {type(items).__name__}")
    out = []
    for e in items:
        if not isinstance(e, tuple) or len(e) != 2:
            raise TypeError("items must be (name, value) pairs")
        out.append(e)
    return out


def compress_container(items: Union[Mapping[str, ItemValue], Iterable[Tuple[str, ItemValue]]], *,
                       codebook: CodebookLike = None, chunk: Optional[int] = None, threads: Optional[int] = None,
                       checksum: Union[bool, str] = True) -> np.ndarray:
    """A container of named items, in the given order, as one uint8 array (docs/FORMAT.md §6).

    items: a mapping (or (name, value) pairs) of item names to: a host tensor of bf16 / fp16 / fp32 / fp8 elements
        (a frame that records the tensor's shape, at most 8 dimensions); ``(tensor, dtype)`` to compress another
        element type (for example uint16 bit patterns, or bytes) as that dtype; any other tensor or bytes-like
        object (stored verbatim). The original file the container describes is the items' bytes back to back.
    codebook, chunk, threads, checksum: as in :func:`splitzip.compress`, for every frame. As in the CLI, a codebook
        is used for the frames of its dtype; the others get the default codebook of their dtype (and kind).
    """
    entries = _entries(items)
    nthreads = _threads(threads)
    log2 = _chunk_log2(chunk)
    flags = _flags(checksum)
    kind, user = "generic", None
    if isinstance(codebook, str) and codebook in _KINDS:
        kind = codebook
    elif isinstance(codebook, Codebook):
        user = codebook
    elif isinstance(codebook, (str, os.PathLike)):
        user = Codebook.load(codebook)
    elif codebook is not None:
        raise TypeError("codebook must be a Codebook, a codebook file path, 'generic', 'key', 'value' or None")
    used = False
    seen = set()
    parts = []  # (entry tuple without data_offset, bytes as a uint8 array)
    original = 0
    for name, value in entries:
        raw_name = _name_bytes(name)
        if raw_name in seen:
            raise ValueError(f"item name {name!r} is used twice")
        seen.add(raw_name)
        dtype = None
        if isinstance(value, tuple):
            if len(value) != 2:
                raise TypeError(f"item {name!r}: expected a tensor, bytes or (tensor, dtype)")
            value, dtype = value
        t = _Tensor(value, f"item {name!r}")
        if t.device != "cpu":
            raise ValueError(f"item {name!r}: containers are written from host tensors")
        frame = dtype is not None or t.element in _FLOAT_ELEMENTS
        if isinstance(value, (bytes, bytearray, memoryview)):
            shape: Tuple[int, ...] = ()
        else:
            shape = t.shape
        if frame:
            did = t.format_dtype(dtype, f"item {name!r}")
            if t.itemsize != _DTYPE_SIZES[did]:  # bytes read as wider values: their shape is the value count
                shape = (t.nbytes // _DTYPE_SIZES[did],)
            if len(shape) > _ext.MAX_NDIM:
                raise ValueError(f"item {name!r}: {len(shape)} dimensions, a container records at most "
                                 f"{_ext.MAX_NDIM}")
            if user is not None and DTYPE_IDS[user.dtype] == did:
                cb, used = user._as_tuple(), True
            else:
                cb = _codebook_arg(kind, did)
            data = _compress_host(t.bytes, t.nbytes // _DTYPE_SIZES[did], did, cb, log2, flags, nthreads)
            parts.append(((1, did, shape, raw_name, original, t.nbytes), data))
        else:
            if len(shape) > _ext.MAX_NDIM:
                shape = ()
            parts.append(((2, 0, shape, raw_name, original, t.nbytes), t.bytes))
        original += t.nbytes
    if user is not None and not used:
        raise error_for(9, f"the codebook is for {user.dtype} but no item holds {user.dtype} values")
    return _assemble(parts)


def _assemble(parts: list) -> np.ndarray:
    """The container of parts ((kind, dtype id, shape, name bytes, original_offset, original_size), item bytes):
    header, each item at the next 64-byte aligned offset (zero gaps), index and footer written by the library."""
    pieces = _assemble_pieces(parts)
    out = np.empty(sum(int(p.shape[0]) for p in pieces), dtype=np.uint8)
    pos = 0
    for p in pieces:
        out[pos:pos + p.shape[0]] = p
        pos += int(p.shape[0])
    return out


def _assemble_pieces(parts: list) -> list:
    """The container of parts as the list of byte arrays that, back to back, are its bytes (the items themselves,
    not copies): what a writer that takes several buffers (a file, a socket) sends without building it first."""
    pos = _ext.CONTAINER_HEADER_SIZE
    index_entries = []
    for (kind, did, shape, raw_name, ooff, osize), data in parts:
        start = _align(pos)
        index_entries.append((kind, did, list(shape), raw_name, ooff, osize, start, int(data.shape[0])))
        pos = start + int(data.shape[0])
    status, index = _ext.container_index(index_entries, pos)
    check(status, "container index")
    pieces = [np.frombuffer(_ext.container_header(), dtype=np.uint8)]
    at = _ext.CONTAINER_HEADER_SIZE
    for entry, (_, data) in zip(index_entries, parts):
        start, size = entry[6], entry[7]
        if start > at:
            pieces.append(np.zeros(start - at, dtype=np.uint8))
        pieces.append(np.asarray(data, dtype=np.uint8).reshape(-1))
        at = start + size
    pieces.append(np.frombuffer(index, dtype=np.uint8))
    return pieces
