"""Where the vLLM connector puts the compressed KV of a request, and where the other side finds it.

Two kinds of transport. A *store* (the ``Transport`` protocol) holds immutable objects (bytes) under string keys: the
connector writes one object per request (a container, docs/FORMAT.md §6, of one frame per layer) after every layer
of the request was compressed, and the reading side asks ``contains`` before it commits to loading. An object
becomes visible only once it is complete.

    InProcessTransport("name")   objects in this process's memory, shared by every transport of the same name
    FileTransport("/shared/kv")  one file per object in a directory (local disk, NFS, a shared volume)

Any object with the same four methods is a store. A *stream* moves each object part by part to one peer, as the
parts are computed:

    UcxTransport(address="host:port")   sends parts over splitzip.transfer (UCX), each as soon as it is ready
    UcxTransport(port=P)                receives them (a transfer.Server on port P) and keeps whole objects until taken

The vLLM connector streams a request's layers through a ``UcxTransport``: each layer leaves as soon as
``save_kv_layer`` has it, compressed by the transfer's codec threads (or raw), and lands in the receiving process's
memory, where the consumer's ``start_load_kv`` takes it.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import re
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Protocol, Sequence, Tuple, Union, runtime_checkable

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


def make_transport(spec: object) -> Union[Transport, "UcxTransport"]:
    """A transport from a configuration value: a Transport or UcxTransport object as is; ``{"transport":
    "inprocess", "name": N}``; ``{"transport": "file", "path": P}``; ``{"transport": "ucx", "address": "host:port"}``
    (a sender) and / or ``"port": P`` (a receiver), with the options of :class:`UcxTransport`; ``{"transport":
    "nixl", "port": P}`` (the holder) or ``"address": "host:port"`` (a client), with the options of
    :class:`~splitzip.integrations.nixl.NixlStore`."""
    if isinstance(spec, UcxTransport):
        return spec
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
    if kind == "ucx":
        options = {k: v for k, v in spec.items() if k != "transport"}
        unknown = sorted(set(options) - set(UCX_OPTIONS))
        if unknown:
            raise ValueError(f"transport 'ucx': unknown options {unknown} (known: {sorted(UCX_OPTIONS)})")
        return UcxTransport(**options)
    if kind == "nixl":
        from .nixl import NixlStore
        return NixlStore.from_config(spec)
    raise ValueError(f"transport must be 'inprocess', 'file', 'ucx' or 'nixl', got {kind!r}")


# ---- streams over splitzip.transfer ----------------------------------------------------------------------------

_log = logging.getLogger(__name__)

#: the options of UcxTransport (and of a ``{"transport": "ucx", ...}`` configuration)
UCX_OPTIONS = ("address", "port", "host", "token", "raw", "rate", "threads", "timeout", "max_pending_bytes",
               "pending_seconds", "arrival_wait", "max_sessions")
#: the most parts one object may have (the transfer's handshake carries at most 4096 tensors)
MAX_PARTS = 4096
_PART = re.compile(r"([0-9a-f]{40})\.([0-9]{1,4})of([0-9]{1,4})")


def part_name(key: str, index: int, count: int) -> str:
    """The transfer's tensor name of part ``index`` of ``count`` of the object ``key``: a 160-bit SHA-256 prefix of
    the key (so that any key makes a valid name) and the part's place."""
    digest = hashlib.sha256(_key_arg(key).encode("utf-8", "surrogateescape")).hexdigest()[:40]
    return f"{digest}.{index}of{count}"


def _digest(key: str) -> str:
    return part_name(key, 0, 1).partition(".")[0]


@dataclass
class ReceivedObject:
    """An object a :class:`UcxTransport` received whole: its parts in order (flat uint8 host arrays, each exactly
    the bytes that were sent) and the dtype each was sent as. Hand it to :meth:`UcxTransport.recycle` once its
    parts were copied where they go: their memory then takes the next object's parts."""

    parts: List[np.ndarray]
    dtypes: List[str]
    _buffers: List[np.ndarray] = field(default_factory=list, repr=False)

    @property
    def nbytes(self) -> int:
        return sum(int(p.nbytes) for p in self.parts)


class _Incoming:
    """One object on its way in: its parts whose destination was given (index -> the buffer, the part's view of
    it, the dtype), how many of them a session still holds, and the bytes of their buffers."""

    __slots__ = ("digest", "count", "parts", "held", "failed", "nbytes", "t_done")

    def __init__(self, digest: str, count: int):
        self.digest, self.count = digest, count
        self.parts: Dict[int, Tuple[np.ndarray, np.ndarray, str]] = {}
        self.held, self.failed, self.nbytes, self.t_done = 0, False, 0, 0.0

    def buffers(self) -> List[np.ndarray]:
        return [b for b, _, _ in self.parts.values()]


class _Receiver:
    """A transfer.Server that keeps what arrives: each part decoded straight into a host buffer of its own, an
    object visible once every part of it verified (the session's release says so), whole objects kept until taken
    or until ``pending_seconds`` passed, all of it within ``max_pending_bytes``. Buffers of objects that were
    recycled or dropped are kept for later parts (within the same cap): on this kind of host, writing fresh memory
    costs several times what writing reused memory does (first-touch page faults). One per listening address of a
    process, shared by the transports that name it (the scheduler-side and worker-side connectors of one process)."""

    def __init__(self, host: str, port: int, options: tuple):
        from .. import transfer
        token, threads, timeout, max_pending, pending_s, max_sessions = options
        self.options = options
        self._max_pending, self._pending_s = max_pending, pending_s
        self._cv = threading.Condition()  # over an RLock: guards everything below
        self._arriving: Dict[str, _Incoming] = {}
        self._complete: Dict[str, _Incoming] = {}
        self._by_buffer: Dict[int, _Incoming] = {}
        self._pool: List[np.ndarray] = []  # free buffers
        self.pending_bytes = 0  # the buffers of arriving and whole objects
        self.pool_bytes = 0
        self.stats = {"sessions": 0, "sessions_failed": 0, "wire_bytes": 0, "raw_bytes": 0, "objects": 0,
                      "objects_dropped": 0, "parts_refused": 0}
        self.last_error = ""
        self.users = 0
        self._closing = False
        self.server = transfer.Server(host, port, destination=self._destination, release=self._release,
                                      threads=threads, timeout=timeout, token=token, max_sessions=max_sessions,
                                      max_tensor_bytes=max_pending)
        self.host, self.port = host, self.server.port
        self._thread = threading.Thread(target=self._serve, name=f"splitzip-ucx-recv-{self.port}", daemon=True)
        self._thread.start()

    # -- the transfer's callbacks (session threads) --

    def _refuse(self, name: str, why: str) -> None:
        with self._cv:  # a re-entrant lock: also called with it held
            self.stats["parts_refused"] += 1
        _log.warning("splitzip UCX receiver %s:%d: refused tensor %r: %s", self.host, self.port, name, why)
        return None

    def _destination(self, name: str, dtype: str, nbytes: int) -> Optional[np.ndarray]:
        m = _PART.fullmatch(name)
        if m is None:
            return self._refuse(name, "not a part of an object (<sha256 prefix>.<i>of<n>)")
        digest, index, count = m.group(1), int(m.group(2)), int(m.group(3))
        if not (0 <= index < count <= MAX_PARTS):
            return self._refuse(name, f"part {index} of {count}")
        with self._cv:
            self._expire()
            entry = self._arriving.get(digest)
            if entry is None:
                entry = self._arriving[digest] = _Incoming(digest, count)
            elif entry.count != count or index in entry.parts or entry.failed:
                return self._refuse(name, "another sender is sending this object now (or sent it inconsistently)")
            buf = self._buffer(nbytes)
            if buf is None:
                if not entry.parts:
                    del self._arriving[digest]
                return self._refuse(name, f"{nbytes} more bytes would pass max_pending_bytes ({self._max_pending}; "
                                          f"{self.pending_bytes} held)")
            view = buf[:nbytes]
            entry.parts[index] = (buf, view, dtype)
            entry.held += 1
            entry.nbytes += buf.nbytes
            self._by_buffer[id(view)] = entry
            self.pending_bytes += buf.nbytes
        return view

    def _buffer(self, nbytes: int) -> Optional[np.ndarray]:
        """A buffer of at least nbytes (lock held): the smallest free one that fits without wasting more than half,
        else fresh memory, for which free buffers are let go as far as the cap needs; None past the cap."""
        fits = [i for i, b in enumerate(self._pool) if nbytes <= b.nbytes <= 2 * nbytes + (1 << 16)]
        if fits:
            buf = self._pool.pop(min(fits, key=lambda i: self._pool[i].nbytes))
            self.pool_bytes -= buf.nbytes
            return buf
        while self._pool and self.pending_bytes + self.pool_bytes + nbytes > self._max_pending:
            self.pool_bytes -= self._pool.pop(0).nbytes  # the oldest first
        if self.pending_bytes + nbytes > self._max_pending:
            return None
        return np.empty(max(nbytes, 1), dtype=np.uint8)

    def _give_back(self, buffers: List[np.ndarray]) -> None:
        """Keeps buffers for later parts as far as the cap allows (lock held)."""
        for b in buffers:
            if self.pending_bytes + self.pool_bytes + b.nbytes <= self._max_pending and len(self._pool) < MAX_PARTS:
                self._pool.append(b)
                self.pool_bytes += b.nbytes

    def _release(self, name: str, buf: np.ndarray, complete: bool) -> None:
        with self._cv:
            entry = self._by_buffer.pop(id(buf), None)
            if entry is None:
                return
            entry.held -= 1
            entry.failed = entry.failed or not complete
            if entry.held:
                return
            if self._arriving.get(entry.digest) is entry:
                del self._arriving[entry.digest]
            if entry.failed or len(entry.parts) != entry.count:
                self.pending_bytes -= entry.nbytes
                self._give_back(entry.buffers())
                self.stats["objects_dropped"] += 1
                if not entry.failed:
                    _log.warning("splitzip UCX receiver %s:%d: an object arrived with %d of its %d parts; dropped",
                                 self.host, self.port, len(entry.parts), entry.count)
            else:
                old = self._complete.pop(entry.digest, None)
                if old is not None:
                    self.pending_bytes -= old.nbytes
                    self._give_back(old.buffers())
                entry.t_done = time.monotonic()
                self._complete[entry.digest] = entry
                self.stats["objects"] += 1
            self._cv.notify_all()

    def _serve(self) -> None:
        from .._errors import Error
        while True:
            try:
                s = self.server.serve_one()
            except Error as e:
                if self._closing:
                    return
                with self._cv:
                    self.stats["sessions_failed"] += 1
                    self.last_error = str(e)
                _log.warning("splitzip UCX receiver %s:%d: a session failed (nothing of it is kept): %s", self.host,
                             self.port, e)
                continue
            with self._cv:
                self.stats["sessions"] += 1
                self.stats["wire_bytes"] += s.wire_bytes
                self.stats["raw_bytes"] += s.raw_bytes

    # -- the transports' calls --

    def _expire(self) -> None:
        """Drops whole objects nobody took within pending_seconds (the lock is held)."""
        if not self._complete:
            return
        cutoff = time.monotonic() - self._pending_s
        for digest in [d for d, e in self._complete.items() if e.t_done < cutoff]:
            entry = self._complete.pop(digest)
            self.pending_bytes -= entry.nbytes
            self._give_back(entry.buffers())
            self.stats["objects_dropped"] += 1
            _log.warning("splitzip UCX receiver %s:%d: an object was not taken within %g s; dropped", self.host,
                         self.port, self._pending_s)

    def contains(self, digest: str, wait: float) -> bool:
        deadline = time.monotonic() + wait
        with self._cv:
            while True:
                self._expire()
                if digest in self._complete:
                    return True
                left = deadline - time.monotonic()
                if digest not in self._arriving or left <= 0:
                    return False
                self._cv.wait(left)

    def take(self, digest: str) -> Optional[ReceivedObject]:
        with self._cv:
            self._expire()
            entry = self._complete.pop(digest, None)
            if entry is None:
                return None
            self.pending_bytes -= entry.nbytes
        parts = [entry.parts[i] for i in range(entry.count)]
        return ReceivedObject([v for _, v, _ in parts], [d for _, _, d in parts], [b for b, _, _ in parts])

    def recycle(self, obj: ReceivedObject) -> None:
        buffers, obj._buffers, obj.parts = obj._buffers, [], []
        with self._cv:
            self._give_back(buffers)

    def incoming(self, digest: str) -> Dict[int, np.ndarray]:
        with self._cv:
            entry = self._arriving.get(digest)
            return {i: view for i, (_, view, _) in entry.parts.items()} if entry is not None else {}

    def close(self) -> None:
        self._closing = True
        self.server.stop()
        self._thread.join()
        self.server.close()
        with self._cv:
            self._arriving.clear()
            self._complete.clear()
            self._by_buffer.clear()
            self._pool.clear()
            self.pending_bytes = self.pool_bytes = 0


_receivers: Dict[Tuple[str, int], _Receiver] = {}
_receivers_lock = threading.Lock()


@atexit.register
def _close_receivers() -> None:
    """At exit, ends the sessions of receivers still open (their threads wait in the library)."""
    with _receivers_lock:
        open_now = list(_receivers.values())
        _receivers.clear()
    for r in open_now:
        r.close()


def _address_arg(address: object) -> Tuple[str, int]:
    if not isinstance(address, str) or address.count(":") < 1:
        raise ValueError(f"transport 'ucx': address must be 'host:port' (the consumer's), got {address!r}")
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"transport 'ucx': address must be 'host:port' with a port 1..65535, got {address!r}")
    return host, int(port)


class UcxTransport:
    """Objects streamed part by part over splitzip.transfer (UCX) to one peer, and received from peers.

    A sender (``address="host:port"``, the receiving peer): :meth:`send` starts one transfer session for the parts
    of one or more objects; its handshake goes out at once and each part leaves as soon as ``ready(i)`` marks it,
    compressed by the transfer's codec threads (``raw``: uncompressed through the same path; ``rate``: an emulated
    link of that many bytes per second). A receiver (``port``, on ``host``, 127.0.0.1 by default): :meth:`listen`
    opens a transfer.Server that decodes every part into a host array of its own; an object is visible to
    :meth:`contains` / :meth:`take` once every part of it verified, and nothing of a failed session is kept. One
    receiver per address and process is shared by every UcxTransport that names it. Parts are named by the transfer
    with :func:`part_name` (the key's SHA-256 prefix, ``<i>of<n>``), so that a receiver knows an object's part
    count from any of its parts.

    Limits of the receiver: ``max_pending_bytes`` of parts held (arriving or whole and not yet taken; a part beyond
    it is refused, and its sender's session fails), ``pending_seconds`` for a whole object to be taken before it is
    dropped, ``max_sessions`` at once, ``timeout`` seconds without a message before a session fails (it must cover
    the longest pause of the producer between two parts). ``token``: a shared secret; a receiver with one refuses
    senders without it. ``arrival_wait``: how long :meth:`contains` waits for an object that is arriving right now.
    """

    def __init__(self, address: Optional[str] = None, port: Optional[int] = None, host: str = "127.0.0.1", *,
                 token: str = "", raw: bool = False, rate: float = 0.0, threads: Optional[int] = None,
                 timeout: float = 60.0, max_pending_bytes: int = 4 << 30, pending_seconds: float = 300.0,
                 arrival_wait: float = 2.0, max_sessions: int = 16):
        from .. import transfer
        from .._core import _int_arg
        transfer._need()  # NotSupportedError, saying what to install, in a build without the transfer library
        if address is None and port is None:
            raise ValueError("transport 'ucx' needs 'address' (the consumer's host:port, to send to) and / or 'port' "
                             "(to listen on)")
        self.address = None if address is None else "%s:%d" % _address_arg(address)
        self._port = None if port is None else _int_arg(port, "transport 'ucx': port", 0, 65535)
        if not isinstance(host, str) or not host:
            raise ValueError(f"transport 'ucx': host must be an address to listen on, got {host!r}")
        if not isinstance(token, str):
            raise TypeError(f"transport 'ucx': token must be a str, got {type(token).__name__}")
        if not isinstance(raw, bool):
            raise TypeError(f"transport 'ucx': raw must be true or false, got {raw!r}")
        for what, v, positive in (("rate", rate, False), ("timeout", timeout, True),
                                  ("pending_seconds", pending_seconds, True), ("arrival_wait", arrival_wait, False)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v > 0 if positive else v >= 0):
                raise ValueError(f"transport 'ucx': {what} must be a number {'> 0' if positive else '>= 0'}, "
                                 f"got {v!r}")
        self.host, self.token, self.raw, self.rate = host, token, raw, float(rate)
        self.threads = 1 if threads is None else _int_arg(threads, "transport 'ucx': threads", 1, 256)
        self.timeout, self.arrival_wait = float(timeout), float(arrival_wait)
        self._options = (token, self.threads, self.timeout,
                         _int_arg(max_pending_bytes, "transport 'ucx': max_pending_bytes", 1, 1 << 62),
                         float(pending_seconds), _int_arg(max_sessions, "transport 'ucx': max_sessions", 1, 1024))
        self._receiver: Optional[_Receiver] = None
        self._warned_no_receiver = False

    # -- receiving --

    @property
    def port(self) -> Optional[int]:
        """The port this side listens on (the one picked, after listen() with port 0), or None."""
        return self._receiver.port if self._receiver is not None else self._port

    def listen(self) -> int:
        """Opens this process's receiver on host:port (or joins the one already open there); returns the port."""
        if self._receiver is not None:
            return self._receiver.port
        if self._port is None:
            raise ValueError("transport 'ucx': listening needs 'port' (0: any free one)")
        with _receivers_lock:
            r = _receivers.get((self.host, self._port)) if self._port else None
            if r is None:
                r = _Receiver(self.host, self._port, self._options)
                _receivers[(self.host, r.port)] = r
            elif r.options != self._options:
                raise ValueError(f"transport 'ucx': a receiver on {self.host}:{self._port} is open in this process "
                                 f"with other options (token, threads, timeout or limits)")
            r.users += 1
        self._receiver = r
        return r.port

    def _find_receiver(self) -> Optional[_Receiver]:
        if self._receiver is None and self._port:
            with _receivers_lock:
                r = _receivers.get((self.host, self._port))
            if r is None:
                if not self._warned_no_receiver:
                    self._warned_no_receiver = True
                    _log.warning("splitzip UCX transport: no receiver listens on %s:%d in this process (it is opened "
                                 "by the consumer's worker): no object is found here", self.host, self._port)
                return None
            return r
        return self._receiver

    def contains(self, key: str, wait: Optional[float] = None) -> bool:
        """Whether a whole object ``key`` arrived at this process's receiver (and was not taken yet). While it is
        arriving, waits up to ``wait`` seconds (default ``arrival_wait``) for it to complete."""
        r = self._find_receiver()
        return r is not None and r.contains(_digest(key), self.arrival_wait if wait is None else float(wait))

    def take(self, key: str) -> Optional[ReceivedObject]:
        """Removes a whole object ``key`` from the receiver and returns it (None when there is none)."""
        r = self._find_receiver()
        return r.take(_digest(key)) if r is not None else None

    def recycle(self, obj: ReceivedObject) -> None:
        """Gives a taken object's memory back to the receiver, for later parts; ``obj`` is empty afterwards."""
        r = self._find_receiver()
        if r is not None:
            r.recycle(obj)

    def incoming(self, key: str) -> Dict[int, np.ndarray]:
        """The parts of object ``key`` that are arriving now (for monitoring; their bytes may be partly written)."""
        r = self._find_receiver()
        return r.incoming(_digest(key)) if r is not None else {}

    @property
    def receiver_stats(self) -> Dict[str, int]:
        """The receiver's counts: sessions (and failed ones), wire and raw bytes received, objects whole and dropped,
        parts refused; ``pending_bytes`` held now by arriving and whole objects, ``pool_bytes`` kept for reuse."""
        r = self._find_receiver()
        if r is None:
            return {}
        with r._cv:
            return dict(r.stats, pending_bytes=r.pending_bytes, pool_bytes=r.pool_bytes)

    # -- sending --

    def send(self, parts: Sequence[Tuple[str, int, int, str, Any]]):
        """Starts one gated transfer session to ``address`` for ``parts``: (key, index, count, dtype, buffer) each,
        part ``index`` of the ``count`` parts of object ``key``, ``buffer`` a C-contiguous host array (its bytes are
        sent as values of ``dtype``). Returns the :class:`splitzip.transfer.Sender`: ``ready(i)`` sends parts[i] (in
        order), ``fail(why)`` gives up, ``wait()`` returns the SendStats once the receiver verified every byte."""
        if self.address is None:
            raise ValueError("transport 'ucx': sending needs 'address' (the consumer's host:port)")
        from .. import transfer
        tensors = []
        for key, index, count, dtype, buf in parts:
            if not (0 <= index < count <= MAX_PARTS):
                raise ValueError(f"part {index} of {count}: an object has 1..{MAX_PARTS} parts")
            tensors.append((part_name(key, index, count), buf, dtype))
        return transfer.Sender(self.address, tensors, gated=True, raw=self.raw, rate=self.rate, threads=self.threads,
                               timeout=self.timeout, token=self.token)

    def close(self) -> None:
        """Leaves the receiver (the last transport to leave closes it: its sessions end, what it held is freed)."""
        r, self._receiver = self._receiver, None
        if r is None:
            return
        with _receivers_lock:
            r.users -= 1
            last = r.users == 0
            if last:
                _receivers.pop((r.host, r.port), None)
        if last:
            r.close()

    def __repr__(self) -> str:
        return f"UcxTransport(address={self.address!r}, port={self.port!r})"
