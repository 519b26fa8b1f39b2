"""Where the vLLM connector puts the compressed KV of a request, and where the other side finds it.

A transport stores immutable objects (bytes) under string keys. The connector writes one object per request (a
container, docs/FORMAT.md §6, of one frame per layer) after every layer of the request was compressed, and the
reading side asks ``contains`` before it commits to loading. An object becomes visible only once it is complete.

    InProcessTransport("name")   objects in this process's memory, shared by every transport of the same name
    FileTransport("/shared/kv")  one file per object in a directory (local disk, NFS, a shared volume)

Any object with the same four methods is a transport (``Transport`` is the protocol). The project's UCX transfer
library is in Python as ``splitzip.transfer`` (a sender streams named tensors to a server that decodes them into the
caller's memory: examples/disagg), but it is not a store of objects by key, so no transport here wraps it yet; a
transport over NIXL, Mooncake or UCX would implement these four methods over the engine's own transfer agent.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from typing import Dict, List, Optional, Protocol, Sequence, Union, runtime_checkable

import numpy as np

#: what ``put`` accepts: bytes, a 1-D uint8 numpy array (a frame or container in host memory), or a list of those
#: that are the object's bytes back to back (written without joining them first)
Blob = Union[bytes, bytearray, memoryview, np.ndarray, Sequence[Union[bytes, bytearray, memoryview, np.ndarray]]]


@runtime_checkable
class Transport(Protocol):
    """Stores and finds immutable byte objects by key."""

    def put(self, key: str, data: Blob) -> None:
        """Stores ``data`` (one buffer, or a list of buffers that are its bytes back to back) under ``key``,
        replacing an earlier object of that key; visible to ``get`` and ``contains`` only once complete."""

    def get(self, key: str) -> Optional[np.ndarray]:
        """The object's bytes as a read-only 1-D uint8 array, or None when there is none."""

    def contains(self, key: str) -> bool:
        """Whether a complete object is stored under ``key``."""

    def delete(self, key: str) -> None:
        """Removes the object (no error when there is none)."""


def _key_arg(key: object) -> str:
    if not isinstance(key, str):
        raise TypeError(f"transport keys are str, got {type(key).__name__}")
    if not key:
        raise ValueError("transport keys must not be empty")
    return key


def _blob_view(data: Blob) -> memoryview:
    """data as a flat memoryview of bytes (no copy), or TypeError."""
    if isinstance(data, np.ndarray):
        if data.dtype != np.uint8 or data.ndim != 1:
            raise TypeError(f"transport objects are bytes or 1-D uint8 arrays, got a {data.dtype} array of "
                            f"shape {data.shape}")
        return memoryview(np.ascontiguousarray(data))
    if isinstance(data, (bytes, bytearray, memoryview)):
        return memoryview(data).cast("B")
    raise TypeError(f"transport objects are bytes or 1-D uint8 arrays, got {type(data).__name__}")


def _pieces(data: Blob) -> List[memoryview]:
    """The object's bytes as a list of flat memoryviews (one for a single buffer)."""
    if isinstance(data, (list, tuple)):
        return [_blob_view(d) for d in data]
    return [_blob_view(data)]


def _readonly(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)  # a view of immutable bytes: read-only


class InProcessTransport:
    """Objects in this process's memory. Every ``InProcessTransport`` of the same ``name`` sees the same objects, so a
    producer and a consumer connector in one process (tests, a single-process engine, a loopback check) meet there.
    ``bytes_stored`` counts the bytes of the objects held now."""

    _stores: Dict[str, Dict[str, Union[bytes, np.ndarray]]] = {}
    _lock = threading.Lock()

    def __init__(self, name: str = "default"):
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, got {type(name).__name__}")
        self.name = name
        with InProcessTransport._lock:
            self._objects = InProcessTransport._stores.setdefault(name, {})

    def put(self, key: str, data: Blob) -> None:
        """Stores a copy of bytes-like data or of a list of pieces; a numpy array is kept by reference (no copy of
        a large object within one process): do not modify it after the call."""
        k = _key_arg(key)
        if isinstance(data, np.ndarray):
            _blob_view(data)  # checks the type
            b = data.view()
            b.flags.writeable = False
        elif isinstance(data, (list, tuple)):
            views = _pieces(data)
            b = np.empty(sum(v.nbytes for v in views), dtype=np.uint8)
            at = 0
            for v in views:
                b[at:at + v.nbytes] = np.frombuffer(v, dtype=np.uint8)
                at += v.nbytes
            b.flags.writeable = False
        else:
            b = bytes(_blob_view(data))
        with InProcessTransport._lock:
            self._objects[k] = b

    def get(self, key: str) -> Optional[np.ndarray]:
        k = _key_arg(key)
        with InProcessTransport._lock:
            b = self._objects.get(k)
        if b is None:
            return None
        return b if isinstance(b, np.ndarray) else _readonly(b)

    def contains(self, key: str) -> bool:
        k = _key_arg(key)
        with InProcessTransport._lock:
            return k in self._objects

    def delete(self, key: str) -> None:
        k = _key_arg(key)
        with InProcessTransport._lock:
            self._objects.pop(k, None)

    @property
    def bytes_stored(self) -> int:
        with InProcessTransport._lock:
            return sum(len(b) for b in self._objects.values())

    def __repr__(self) -> str:
        return f"InProcessTransport({self.name!r})"


class FileTransport:
    """One file per object in ``directory`` (created if missing), named by the SHA-256 of the key, written to a
    temporary file in the same directory and renamed into place, so a reader on another host of a shared file system
    sees either no object or the complete one."""

    SUFFIX = ".spzkv"

    def __init__(self, directory: Union[str, "os.PathLike[str]"]):
        if not isinstance(directory, (str, os.PathLike)):
            raise TypeError(f"directory must be a path, got {type(directory).__name__}")
        self.directory = os.fspath(directory)
        if not self.directory:
            raise ValueError("directory must not be empty")
        os.makedirs(self.directory, exist_ok=True)

    def path(self, key: str) -> str:
        """The file that holds ``key``'s object."""
        digest = hashlib.sha256(_key_arg(key).encode("utf-8", "surrogateescape")).hexdigest()
        return os.path.join(self.directory, digest + self.SUFFIX)

    def put(self, key: str, data: Blob) -> None:
        target = self.path(key)
        views = _pieces(data)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".partial-", suffix=self.SUFFIX)
        try:
            with os.fdopen(fd, "wb") as f:
                for v in views:
                    f.write(v)
            os.replace(tmp, target)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise

    def get(self, key: str) -> Optional[np.ndarray]:
        try:
            with open(self.path(key), "rb") as f:
                return _readonly(f.read())
        except FileNotFoundError:
            return None

    def contains(self, key: str) -> bool:
        return os.path.isfile(self.path(key))

    def delete(self, key: str) -> None:
        try:
            os.unlink(self.path(key))
        except FileNotFoundError:
            pass

    def __repr__(self) -> str:
        return f"FileTransport({self.directory!r})"


def make_transport(spec: object) -> Transport:
    """A transport from a configuration value: a Transport object as is; ``{"transport": "inprocess", "name": N}``;
    ``{"transport": "file", "path": P}``."""
    if isinstance(spec, Transport) and not isinstance(spec, dict):
        return spec
    if not isinstance(spec, dict):
        raise TypeError(f"transport: expected a Transport or a dict such as {{'transport': 'file', 'path': ...}}, "
                        f"got {type(spec).__name__}")
    kind = spec.get("transport", "inprocess")
    if kind == "inprocess":
        return InProcessTransport(str(spec.get("name", "default")))
    if kind == "file":
        if "path" not in spec:
            raise ValueError("transport 'file' needs 'path' (a directory both sides can reach)")
        return FileTransport(spec["path"])
    raise ValueError(f"transport must be 'inprocess' or 'file', got {kind!r}")
