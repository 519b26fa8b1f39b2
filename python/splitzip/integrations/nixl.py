"""A store (the four methods of :class:`~splitzip.integrations.transport.Transport`) whose objects live in one
process's NIXL-registered memory and are written and read by another process over NIXL (NVIDIA's transfer library,
its UCX backend).

Two sides, one namespace of objects:

    NixlStore(port=P)                    the holder: an arena of ``capacity`` bytes registered with NIXL once, where
                                         every object lives; it answers the requests of the clients
    NixlStore(address="host:port")       a client: ``put`` writes into the holder's arena (NIXL WRITE), ``get`` reads
                                         from it (NIXL READ), ``contains`` / ``delete`` ask the holder

Both sides have the same four methods with the same meaning (a client's ``contains`` is the holder's). In a
prefill -> decode pair the decode instance holds (its loads are local copies) and the prefill instance connects.

How a client's ``put`` goes. The client asks the holder for room (a NIXL notification); the holder bounds the size
(``max_object_bytes``, its free room after evicting the least recently used objects if ``evict``) and reserves a
region of its arena for it. The client copies the object, chunk by chunk, into staging slots of its own (registered
once, ``staging_bytes`` in all) and writes each chunk to the reserved region; the last chunk's WRITE carries a
notification that NIXL delivers after its bytes landed. Only then does the holder publish the object (replacing an
older one of the same key) and acknowledge: when ``put`` returns, the object is visible to every reader, and
until then no reader sees any of it. A ``get`` asks the holder, which pins the object and says where it is; the
client bounds the announced size by its own ``max_object_bytes``, reads chunk by chunk through its staging slots
into a new array, and unpins it.

Control messages are NIXL notifications (small JSON, at most 8 KiB, every field checked). A TCP connection to the
holder's port carries the handshake (both agents' metadata, the holder's limits, an optional shared ``token``) and
stays open: when either process goes, the other sees the connection close and fails what was in flight at once
(``splitzip.IoError``), and the holder drops the client's reservations and pins (nothing of an unfinished put is
ever visible). Every wait is bounded by ``timeout`` seconds (``IoError`` that says so). Memory: the holder's
arena (``capacity``), each client's staging (``staging_bytes``), and the arrays ``get`` returns; nothing is
registered per object.

Memory kinds: ``device=None`` keeps arena and staging in host memory (numpy, NIXL ``DRAM``); ``device="cuda:N"``
in that GPU's memory (torch tensors, NIXL ``VRAM``), for CUDA frames (``get`` then returns a CUDA tensor). Objects
given to ``put`` may be bytes, 1-D uint8 numpy arrays or torch tensors (CPU or CUDA), or a list of those that are
the object's bytes back to back.

:func:`send_tensors` compresses tensors and puts them, compressing the next while the previous is on the wire;
:func:`get_tensor` gets one and decompresses it.

Needs a NIXL Python package: ``nixl`` (the meta package), or ``nixl-cu13`` / ``nixl-cu12`` (imported as
``nixl_cu13`` / ``nixl_cu12``). This module loads without it; a store raises ``splitzip.NotSupportedError``.
"""

from __future__ import annotations

import collections
import hmac
import importlib
import itertools
import json
import logging
import os
import queue
import select
import socket
import struct
import sys
import threading
import time
import uuid
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

import numpy as np

from .._errors import InvalidArgumentError, IoError, NotSupportedError

_log = logging.getLogger(__name__)

#: the NIXL modules tried, in order (the meta package first)
_NIXL_MODULES = ("nixl._api", "nixl_cu13", "nixl_cu12")
_NIXL_DISTRIBUTIONS = ("nixl", "nixl-cu13", "nixl-cu12")

_MAGIC = "splitzip-nixl"
_VERSION = 1
_NOTIF_PREFIX = b"SZN1"
#: the longest control message either side accepts
MAX_MESSAGE = 8192
#: the longest key, in bytes of UTF-8
MAX_KEY = 1024
_MAX_HANDSHAKE = 1 << 20
_MAX_METADATA = 16 << 20
_ALIGN = 512

_nixl_module: Any = None
_nixl_error: Optional[str] = None


def _nixl() -> Any:
    """The NIXL Python module (its nixl_agent and nixl_agent_config), or NotSupportedError saying what to install."""
    global _nixl_module, _nixl_error
    if _nixl_module is None and _nixl_error is None:
        errors = []
        for name in _NIXL_MODULES:
            try:
                m = importlib.import_module(name)
            except Exception as e:  # ImportError, or a native library that does not load
                errors.append(f"{name}: {type(e).__name__}: {e}")
                continue
            if hasattr(m, "nixl_agent") and hasattr(m, "nixl_agent_config"):
                _nixl_module = m
                break
            errors.append(f"{name}: has no nixl_agent")
        else:
            _nixl_error = "; ".join(errors)
    if _nixl_module is None:
        raise NotSupportedError(f"the NIXL store needs NIXL's Python package (pip install nixl-cu13, or nixl-cu12): "
                                f"{_nixl_error}")
    return _nixl_module


def nixl_available() -> bool:
    """Whether a NIXL Python package can be imported here."""
    try:
        _nixl()
        return True
    except NotSupportedError:
        return False


def nixl_version() -> str:
    """The installed NIXL distribution and version (e.g. ``"nixl-cu13 1.5.1"``), or "" when none is."""
    from importlib import metadata
    for dist in _NIXL_DISTRIBUTIONS:
        try:
            return f"{dist} {metadata.version(dist)}"
        except metadata.PackageNotFoundError:
            continue
    return ""


# ---- buffers -----------------------------------------------------------------------------------------------------

def _torch() -> Any:
    import torch
    return torch


def _is_torch(obj: object) -> bool:
    t = sys.modules.get("torch")
    return t is not None and isinstance(obj, t.Tensor)


def _pieces(data: Any) -> List[Any]:
    """The object's bytes as a list of flat pieces: 1-D uint8 numpy arrays (host) or 1-D uint8 CUDA tensors."""
    items = list(data) if isinstance(data, (list, tuple)) else [data]
    out = []
    for d in items:
        if isinstance(d, (bytes, bytearray, memoryview)):
            out.append(np.frombuffer(memoryview(d).cast("B"), dtype=np.uint8))
        elif isinstance(d, np.ndarray):
            if d.dtype != np.uint8 or d.ndim != 1:
                raise TypeError(f"store objects are bytes or 1-D uint8 arrays, got a {d.dtype} array of shape "
                                f"{d.shape}")
            out.append(np.ascontiguousarray(d))
        elif _is_torch(d):
            torch = _torch()
            if d.dtype != torch.uint8 or d.dim() != 1:
                raise TypeError(f"store objects are bytes or 1-D uint8 tensors, got a {d.dtype} tensor of shape "
                                f"{tuple(d.shape)}")
            d = d.contiguous()
            out.append(d if d.is_cuda else d.numpy())
        else:
            raise TypeError(f"store objects are bytes, 1-D uint8 arrays or tensors, got {type(d).__name__}")
    return out


def _nbytes(piece: Any) -> int:
    return int(piece.nbytes) if isinstance(piece, np.ndarray) else int(piece.numel())


def _copy(dst: Any, src: Any) -> None:
    """dst[:] = src for two 1-D uint8 buffers of one length, numpy or torch, host or device, in any combination."""
    if isinstance(dst, np.ndarray) and isinstance(src, np.ndarray):
        np.copyto(dst, src)
        return
    torch = _torch()
    with warnings.catch_warnings():  # torch.from_numpy of a read-only array (a view of bytes) warns; it is only read
        warnings.simplefilter("ignore")
        d = torch.from_numpy(dst) if isinstance(dst, np.ndarray) else dst
        s = torch.from_numpy(src) if isinstance(src, np.ndarray) else src
    d.copy_(s)


class _Region:
    """One buffer registered with a NIXL agent for the store's lifetime: host memory (numpy) or one GPU's (torch)."""

    def __init__(self, agent: Any, nbytes: int, device: Optional[str]):
        self.nbytes = nbytes
        if device is None:
            self.array: Any = np.empty(nbytes, dtype=np.uint8)
            self.addr, self.mem, self.dev = int(self.array.ctypes.data), "DRAM", 0
        else:
            torch = _torch()
            self.array = torch.empty(nbytes, dtype=torch.uint8, device=device)
            self.addr, self.mem = int(self.array.data_ptr()), "VRAM"
            self.dev = int(self.array.device.index or 0)
        self.device = device
        self._agent = agent
        self._reg = agent.register_memory([(self.addr, nbytes, self.dev, "")], self.mem)

    def view(self, offset: int, n: int) -> Any:
        return self.array[offset:offset + n]

    def descs(self, offset: int, n: int) -> Any:
        return self._agent.get_xfer_descs([(self.addr + offset, n, self.dev)], self.mem)

    def sync(self) -> None:
        """Waits for copies into or out of a device region (none for host memory)."""
        if self.device is not None:
            _torch().cuda.current_stream(self.array.device).synchronize()

    def new(self, n: int) -> Any:
        """A fresh buffer of n bytes of this region's kind (what get returns)."""
        if self.device is None:
            return np.empty(n, dtype=np.uint8)
        torch = _torch()
        return torch.empty(n, dtype=torch.uint8, device=self.array.device)

    def close(self) -> None:
        reg, self._reg = self._reg, None
        if reg is not None:
            try:
                self._agent.deregister_memory(reg)
            except Exception as e:  # the agent is going away anyway
                _log.debug("splitzip NIXL store: deregistering %d bytes: %s", self.nbytes, e)


def _device_arg(device: Any) -> Optional[str]:
    if device is None or device == "cpu":
        return None
    d = str(device)
    if not (d == "cuda" or d.startswith("cuda:")):
        raise ValueError(f"NIXL store: device must be None, 'cpu' or 'cuda[:N]', got {device!r}")
    torch = _torch()
    if not torch.cuda.is_available():
        raise NotSupportedError(f"NIXL store: device {d!r}: torch sees no CUDA device")
    return str(torch.device(d))


def _readonly(buf: Any) -> Any:
    if isinstance(buf, np.ndarray):
        buf.flags.writeable = False
    return buf


class _Allocator:
    """First-fit allocation of aligned extents of one arena; free extents are kept sorted and merged."""

    def __init__(self, size: int):
        self.size = size
        self._free: List[List[int]] = [[0, size]]  # [offset, length]
        self.used = 0

    @staticmethod
    def _extent(n: int) -> int:
        """The bytes an object of n bytes takes: a whole number of _ALIGN, at least one."""
        return max(_ALIGN, (n + _ALIGN - 1) // _ALIGN * _ALIGN)

    def alloc(self, n: int) -> Optional[int]:
        need = self._extent(n)
        for i, (off, length) in enumerate(self._free):
            if length >= need:
                if length == need:
                    del self._free[i]
                else:
                    self._free[i] = [off + need, length - need]
                self.used += need
                return off
        return None

    def free(self, offset: int, n: int) -> None:
        need = self._extent(n)
        self.used -= need
        lo, hi = 0, len(self._free)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._free[mid][0] < offset:
                lo = mid + 1
            else:
                hi = mid
        self._free.insert(lo, [offset, need])
        if lo + 1 < len(self._free) and offset + need == self._free[lo + 1][0]:
            self._free[lo][1] += self._free[lo + 1][1]
            del self._free[lo + 1]
        if lo > 0 and self._free[lo - 1][0] + self._free[lo - 1][1] == offset:
            self._free[lo - 1][1] += self._free[lo][1]
            del self._free[lo]


# ---- messages ----------------------------------------------------------------------------------------------------

def _encode(msg: Dict[str, Any]) -> bytes:
    b = _NOTIF_PREFIX + json.dumps(msg, separators=(",", ":")).encode("ascii")
    if len(b) > MAX_MESSAGE:
        raise InvalidArgumentError(f"NIXL store: a control message of {len(b)} bytes (at most {MAX_MESSAGE})")
    return b


def _decode(raw: bytes) -> Optional[Dict[str, Any]]:
    """A control message, or None for anything else (foreign, too long, not a JSON object)."""
    if not isinstance(raw, (bytes, bytearray)) or len(raw) > MAX_MESSAGE or not raw.startswith(_NOTIF_PREFIX):
        return None
    try:
        msg = json.loads(bytes(raw[len(_NOTIF_PREFIX):]).decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        return None
    return msg if isinstance(msg, dict) else None


def _int_field(msg: Dict[str, Any], name: str, lo: int, hi: int) -> Optional[int]:
    v = msg.get(name)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        return None
    return v


def _key_arg(key: object) -> str:
    if not isinstance(key, str):
        raise TypeError(f"store keys are str, got {type(key).__name__}")
    if not key:
        raise ValueError("store keys must not be empty")
    if len(key.encode("utf-8", "surrogatepass")) > MAX_KEY:
        raise ValueError(f"NIXL store keys are at most {MAX_KEY} bytes of UTF-8")
    return key


def _key_field(msg: Dict[str, Any]) -> Optional[str]:
    k = msg.get("key")
    try:
        return _key_arg(k)
    except (TypeError, ValueError):
        return None


def _send_frame(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(struct.pack("<I", len(payload)) + payload)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        b = sock.recv(min(n - len(out), 1 << 20))
        if not b:
            raise ConnectionError("the connection closed during the handshake")
        out += b
    return bytes(out)


def _recv_frame(sock: socket.socket, limit: int) -> bytes:
    (n,) = struct.unpack("<I", _recv_exact(sock, 4))
    if n > limit:
        raise ConnectionError(f"a handshake message of {n} bytes (at most {limit})")
    return _recv_exact(sock, n)


def _address_arg(address: object) -> Tuple[str, int]:
    if not isinstance(address, str) or address.count(":") < 1:
        raise ValueError(f"NIXL store: address must be 'host:port', got {address!r}")
    host, _, port = address.rpartition(":")
    try:
        p = int(port)
    except ValueError:
        p = -1
    if not host or not 0 < p < 65536:
        raise ValueError(f"NIXL store: address must be 'host:port', got {address!r}")
    return host.strip("[]"), p


def _number(v: object, what: str, positive: bool = True) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v > 0 if positive else v >= 0):
        raise ValueError(f"NIXL store: {what} must be a number {'> 0' if positive else '>= 0'}, got {v!r}")
    return float(v)


def _count(v: object, what: str, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ValueError(f"NIXL store: {what} must be an integer in [{lo}, {hi}], got {v!r}")
    return int(v)


def _ucx_environment() -> None:
    """On a host without RDMA devices, keeps UCX from loading its InfiniBand module (UCX_MODULES=^ib) unless the
    user set UCX_MODULES: there it has nothing to drive, and the libnl that nixl-cu13 1.5.1 bundles for it crashes
    (or spins in) the process's exit once a UCX backend was created. Read by UCX when the first agent starts."""
    if "UCX_MODULES" in os.environ:
        return
    try:
        rdma = bool(os.listdir("/sys/class/infiniband"))
    except OSError:
        rdma = False
    if not rdma:
        os.environ["UCX_MODULES"] = "^ib"


def _new_agent(role: str) -> Tuple[Any, str]:
    nx = _nixl()
    _ucx_environment()
    name = f"splitzip-{role}-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    # No progress thread of NIXL's own: with it a notification took ~15 ms each way on loopback (it polls UCX at
    # intervals); this store's service threads poll the agent (get_new_notifs progresses UCX) and the thread that
    # waits for a transfer polls its state, so UCX is progressed whenever something is in flight.
    kwargs: Dict[str, Any] = dict(enable_prog_thread=False, enable_listen_thread=False, backends=["UCX"])
    sync = getattr(nx, "nixl_thread_sync_t", None)
    if sync is not None:  # several threads of this process use the agent: its own locking
        kwargs["sync_mode"] = sync.NIXL_THREAD_SYNC_STRICT
    try:
        agent = nx.nixl_agent(name, nx.nixl_agent_config(**kwargs))
    except Exception as e:
        raise IoError(f"NIXL store: creating a NIXL agent with the UCX backend failed: {type(e).__name__}: {e}") \
            from None
    if "UCX" not in getattr(agent, "backends", {"UCX": None}):
        raise NotSupportedError("NIXL store: this NIXL has no UCX backend (its plugin did not load)")
    return agent, name


def _str_name(name: Any) -> str:
    return name.decode("utf-8", "replace") if isinstance(name, (bytes, bytearray)) else str(name)


# ---- the holder --------------------------------------------------------------------------------------------------

@dataclass
class _Object:
    offset: int
    size: int
    pins: int = 0
    retired: bool = False  # replaced or deleted while pinned: freed at the last unpin


@dataclass
class _Reservation:
    client: str
    key: str
    offset: int
    size: int
    deadline: float


@dataclass
class _Pin:
    client: str
    obj: _Object
    deadline: float


@dataclass
class _Peer:
    name: str
    sock: socket.socket
    where: str
    reservations: Set[int] = field(default_factory=set)
    pins: Set[int] = field(default_factory=set)


class _Holder:
    """The arena, its objects and the service thread that answers clients (see the module docstring)."""

    def __init__(self, host: str, port: int, capacity: int, max_object_bytes: int, device: Optional[str],
                 token: str, timeout: float, evict: bool, max_clients: int):
        self.capacity, self.max_object_bytes, self.token = capacity, max_object_bytes, token
        self.timeout, self.evict, self.max_clients = timeout, evict, max_clients
        self.agent, self.name = _new_agent("holder")
        self.arena = _Region(self.agent, capacity, device)
        self._alloc = _Allocator(capacity)
        self._lock = threading.RLock()
        self._objects: "collections.OrderedDict[str, _Object]" = collections.OrderedDict()  # least recent first
        self._reserved: Dict[int, _Reservation] = {}
        self._pins: Dict[int, _Pin] = {}
        self._peers: Dict[str, _Peer] = {}
        self._ids = itertools.count(1)
        self.stats = {"clients": 0, "puts": 0, "gets": 0, "bytes_in": 0, "bytes_out": 0, "refused": 0,
                      "evicted": 0, "dropped": 0, "bad_messages": 0}
        self._closing = False
        self._listener = socket.create_server((host, port), reuse_port=False)
        self._listener.setblocking(False)
        self.host, self.port = host, self._listener.getsockname()[1]
        self._metadata = self.agent.get_agent_metadata()
        self._active = 0.0
        self._thread = threading.Thread(target=self._serve, name=f"splitzip-nixl-holder-{self.port}", daemon=True)
        self._thread.start()

    # -- the arena --

    def _free_extent(self, offset: int, size: int) -> None:
        if size:  # an empty object has no extent (_reserve gives it offset 0 without allocating)
            self._alloc.free(offset, size)

    def _retire(self, obj: _Object) -> None:
        if obj.pins:
            obj.retired = True
        else:
            self._free_extent(obj.offset, obj.size)

    def _drop_reservation(self, rid: int) -> None:
        """An unfinished put ends without its object (lock held): its room is free again."""
        r = self._reserved.pop(rid, None)
        if r is not None:
            self.stats["dropped"] += 1
            self._free_extent(r.offset, r.size)

    def _drop_pin(self, pid: int, peer: Optional[_Peer]) -> None:
        """A client's read ends (lock held): the object is unpinned, and freed if it was retired meanwhile."""
        if peer is not None:
            peer.pins.discard(pid)
        p = self._pins.pop(pid, None)
        if p is not None:
            self._unpin(p.obj)

    def _reserve(self, key: str, size: int) -> Tuple[Optional[int], str]:
        """A region for a new object of size bytes (lock held): (offset, "") or (None, why)."""
        if size > self.max_object_bytes:
            return None, (f"an object of {size} bytes is larger than this store's max_object_bytes "
                          f"({self.max_object_bytes})")
        if size == 0:
            return 0, ""
        off = self._alloc.alloc(size)
        while off is None and self.evict:
            victim = next((k for k, o in self._objects.items() if not o.pins), None)
            if victim is None:
                break
            self._retire(self._objects.pop(victim))
            self.stats["evicted"] += 1
            off = self._alloc.alloc(size)
        if off is None:
            return None, (f"the store is full: no room for {size} bytes in its {self.capacity} bytes "
                          f"({self._alloc.used} in use{'' if self.evict else ', evict is off'})")
        return off, ""

    def _publish(self, key: str, offset: int, size: int) -> None:
        old = self._objects.pop(key, None)
        if old is not None:
            self._retire(old)
        self._objects[key] = _Object(offset, size)
        self.stats["puts"] += 1
        self.stats["bytes_in"] += size

    # -- local use --

    def put(self, key: str, pieces: List[Any]) -> None:
        size = sum(_nbytes(p) for p in pieces)
        with self._lock:
            self._check_open()
            off, why = self._reserve(key, size)
            if off is None:
                self.stats["refused"] += 1
                raise IoError(f"NIXL store: put of {key!r}: {why}")
            rid = next(self._ids)  # a local reservation: dropped by close, never by a lease
            self._reserved[rid] = _Reservation("", key, off, size, float("inf"))
        try:
            at = off
            for p in pieces:
                n = _nbytes(p)
                _copy(self.arena.view(at, n), p)
                at += n
            self.arena.sync()
        except BaseException:
            with self._lock:
                if self._reserved.pop(rid, None) is not None:
                    self._free_extent(off, size)
            raise
        with self._lock:
            if self._reserved.pop(rid, None) is None:
                raise IoError("NIXL store: the store was closed during put")
            self._publish(key, off, size)

    def get(self, key: str) -> Optional[Any]:
        with self._lock:
            self._check_open()
            obj = self._objects.get(key)
            if obj is None:
                return None
            self._objects.move_to_end(key)
            obj.pins += 1
        try:
            out = self.arena.new(obj.size)
            _copy(out, self.arena.view(obj.offset, obj.size))
            self.arena.sync()
        finally:
            with self._lock:
                self._unpin(obj)
        with self._lock:
            self.stats["gets"] += 1
            self.stats["bytes_out"] += obj.size
        return _readonly(out)

    def contains(self, key: str) -> bool:
        with self._lock:
            self._check_open()
            return key in self._objects

    def delete(self, key: str) -> None:
        with self._lock:
            self._check_open()
            obj = self._objects.pop(key, None)
            if obj is not None:
                self._retire(obj)

    def _unpin(self, obj: _Object) -> None:
        obj.pins -= 1
        if obj.pins == 0 and obj.retired:
            self._free_extent(obj.offset, obj.size)

    def _check_open(self) -> None:
        if self._closing:
            raise IoError("NIXL store: the store is closed")

    @property
    def bytes_stored(self) -> int:
        with self._lock:
            return sum(o.size for o in self._objects.values())

    def snapshot(self) -> Dict[str, int]:
        with self._lock:
            return dict(self.stats, objects=len(self._objects), bytes_stored=self.bytes_stored,
                        arena_used=self._alloc.used, reservations=len(self._reserved), pins=len(self._pins),
                        peers=len(self._peers))

    # -- the service thread --

    def _serve(self) -> None:
        while not self._closing:
            with self._lock:
                socks = [p.sock for p in self._peers.values()]
                # a client's WRITE or READ in flight needs this side's UCX progressed too (over TCP the bytes move
                # only while it is): poll every 50 us then (a pause, so that a 2-core host keeps a core for the
                # copies: spinning measured no faster), every 0.2 ms soon after a message, else every 2 ms
                flight = bool(self._reserved or self._pins)
                pause = 0.00005 if flight else 0.0002 if time.monotonic() - self._active < 0.1 else 0.002
            try:
                ready, _, _ = select.select([self._listener] + socks, [], [], pause)
            except (OSError, ValueError):
                ready = []
            if self._closing:
                break
            for s in ready:
                if s is self._listener:
                    self._accept()
                else:
                    self._peer_readable(s)
            try:
                notifs = self.agent.get_new_notifs()
            except Exception as e:
                if self._closing:
                    break
                _log.warning("splitzip NIXL store: reading notifications failed: %s", e)
                notifs = {}
            for sender, msgs in notifs.items():
                for raw in msgs:
                    self._active = time.monotonic()
                    self._handle(_str_name(sender), raw)
            self._expire()

    def _accept(self) -> None:
        try:
            sock, where = self._listener.accept()
        except (BlockingIOError, OSError):
            return
        threading.Thread(target=self._handshake, args=(sock, "%s:%d" % where[:2]), daemon=True,
                         name="splitzip-nixl-handshake").start()

    def _handshake(self, sock: socket.socket, where: str) -> None:
        """One client's handshake (a thread of its own, bounded by timeout): its hello and metadata in, ours out."""
        name = None
        try:
            sock.settimeout(min(self.timeout, 30.0))
            hello = json.loads(_recv_frame(sock, _MAX_HANDSHAKE).decode("utf-8"))
            md = _recv_frame(sock, _MAX_METADATA)
            if not isinstance(hello, dict) or hello.get("magic") != _MAGIC or hello.get("version") != _VERSION:
                raise ConnectionError("not a splitzip NIXL client of this version")
            token = hello.get("token")
            if not isinstance(token, str) or not hmac.compare_digest(token.encode(), self.token.encode()):
                self._refuse(sock, "the token does not match the holder's")
                return
            with self._lock:
                if len(self._peers) >= self.max_clients:
                    self._refuse(sock, f"the holder serves at most {self.max_clients} clients")
                    return
            name = _str_name(self.agent.add_remote_agent(md))
            if not name.startswith("splitzip-client-") or hello.get("agent") != name:
                raise ConnectionError(f"the metadata names agent {name!r}, the hello {hello.get('agent')!r}")
            reply = {"ok": True, "agent": self.name, "base": self.arena.addr, "capacity": self.capacity,
                     "max_object_bytes": self.max_object_bytes, "mem": self.arena.mem, "dev": self.arena.dev,
                     "lease": self.timeout}
            _send_frame(sock, json.dumps(reply).encode("utf-8"))
            _send_frame(sock, self._metadata)
            sock.settimeout(None)
            sock.setblocking(False)
            with self._lock:
                if self._closing:
                    raise ConnectionError("the holder closed")
                self._peers[name] = _Peer(name, sock, where)
                self.stats["clients"] += 1
            _log.info("splitzip NIXL store %s:%d: client %s from %s", self.host, self.port, name, where)
        except Exception as e:
            _log.warning("splitzip NIXL store %s:%d: handshake with %s failed: %s", self.host, self.port, where, e)
            self._drop_agent(name)
            try:
                sock.close()
            except OSError:
                pass

    def _refuse(self, sock: socket.socket, why: str) -> None:
        _log.warning("splitzip NIXL store %s:%d: refused a client: %s", self.host, self.port, why)
        try:
            _send_frame(sock, json.dumps({"ok": False, "why": why}).encode("utf-8"))
        finally:
            sock.close()

    def _drop_agent(self, name: Optional[str]) -> None:
        if name:
            try:
                self.agent.remove_remote_agent(name)
            except Exception:
                pass

    def _peer_readable(self, sock: socket.socket) -> None:
        """A client's connection is readable: it closed (the client went), or it sent what it must not."""
        try:
            data = sock.recv(1)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        with self._lock:
            peer = next((p for p in self._peers.values() if p.sock is sock), None)
        if peer is not None:
            self._drop_peer(peer, "its connection closed" if not data else "it sent bytes after the handshake")

    def _drop_peer(self, peer: _Peer, why: str) -> None:
        """Forgets a client: its reservations (unfinished puts, never visible) and pins go; its agent is removed
        first, so that nothing of it lands in the arena afterwards."""
        with self._lock:
            if self._peers.pop(peer.name, None) is None:
                return
        self._drop_agent(peer.name)
        with self._lock:
            for rid in list(peer.reservations):
                self._drop_reservation(rid)
            for pid in list(peer.pins):
                self._drop_pin(pid, peer)
        try:
            peer.sock.close()
        except OSError:
            pass
        _log.info("splitzip NIXL store %s:%d: client %s left (%s)", self.host, self.port, peer.name, why)

    def _expire(self) -> None:
        """Ends leases that ran out. A reservation whose put outlived its lease drops its client altogether (its
        agent removed first): a WRITE of it still in flight must not land in room given to another object."""
        now = time.monotonic()
        late: Dict[str, _Peer] = {}
        with self._lock:
            for rid, r in list(self._reserved.items()):
                if r.deadline < now:
                    peer = self._peers.get(r.client)
                    if peer is not None:
                        late[peer.name] = peer  # _drop_peer frees its reservations
                    else:
                        self._drop_reservation(rid)
            for pid, p in list(self._pins.items()):
                if p.deadline < now:
                    self._drop_pin(pid, self._peers.get(p.client))
        for peer in late.values():
            self._drop_peer(peer, "a put of it outlived its lease")

    def _reply(self, client: str, msg: Dict[str, Any]) -> None:
        try:
            self.agent.send_notif(client, _encode(msg))
        except Exception as e:
            _log.warning("splitzip NIXL store %s:%d: a reply to %s failed: %s", self.host, self.port, client, e)

    def _handle(self, client: str, raw: bytes) -> None:
        msg = _decode(raw)
        with self._lock:
            peer = self._peers.get(client)
        if msg is None or peer is None:
            with self._lock:
                self.stats["bad_messages"] += 1
            _log.warning("splitzip NIXL store %s:%d: ignored a message from %s (%s)", self.host, self.port, client,
                         "not a client of this store" if peer is None else "malformed")
            return
        op = msg.get("op")
        rid = _int_field(msg, "id", 0, 1 << 62)
        if op in ("unpin", "abort"):  # no reply
            ref = _int_field(msg, "ref", 1, 1 << 62)
            with self._lock:
                if op == "unpin" and ref in peer.pins:
                    self._drop_pin(ref, peer)
                elif op == "abort" and ref in peer.reservations:
                    peer.reservations.discard(ref)
                    self._drop_reservation(ref)
            return
        if rid is None:
            with self._lock:
                self.stats["bad_messages"] += 1
            return
        reply: Dict[str, Any] = {"id": rid, "ok": True}
        key = _key_field(msg) if op != "done" else None
        with self._lock:
            if op == "done":
                ref = _int_field(msg, "ref", 1, 1 << 62)
                r = self._reserved.pop(ref, None) if ref in peer.reservations else None
                if r is None:
                    reply = {"id": rid, "ok": False, "why": "the put's reservation expired or is unknown"}
                else:
                    peer.reservations.discard(ref)
                    self._publish(r.key, r.offset, r.size)
            elif key is None:
                self.stats["bad_messages"] += 1
                reply = {"id": rid, "ok": False, "why": f"a message {op!r} without a valid key"}
            elif op == "put":
                size = _int_field(msg, "size", 0, 1 << 62)
                if size is None:
                    reply = {"id": rid, "ok": False, "why": "a put without a valid size"}
                elif len(peer.reservations) >= 64:
                    reply = {"id": rid, "ok": False, "why": "64 puts of this client are unfinished"}
                else:
                    off, why = self._reserve(key, size)
                    if off is None:
                        self.stats["refused"] += 1
                        reply = {"id": rid, "ok": False, "why": why}
                    else:
                        ref = next(self._ids)
                        self._reserved[ref] = _Reservation(client, key, off, size, time.monotonic() + self.timeout)
                        peer.reservations.add(ref)
                        reply.update(ref=ref, offset=off)
            elif op == "get":
                obj = self._objects.get(key)
                if obj is None:
                    reply["missing"] = True
                elif len(peer.pins) >= 64:
                    reply = {"id": rid, "ok": False, "why": "64 gets of this client are unfinished"}
                else:
                    self._objects.move_to_end(key)
                    obj.pins += 1
                    ref = next(self._ids)
                    self._pins[ref] = _Pin(client, obj, time.monotonic() + self.timeout)
                    peer.pins.add(ref)
                    self.stats["gets"] += 1
                    self.stats["bytes_out"] += obj.size
                    reply.update(ref=ref, offset=obj.offset, size=obj.size)
            elif op == "has":
                reply["has"] = key in self._objects
            elif op == "delete":
                obj = self._objects.pop(key, None)
                if obj is not None:
                    self._retire(obj)
            else:
                self.stats["bad_messages"] += 1
                reply = {"id": rid, "ok": False, "why": f"unknown operation {op!r}"}
        self._reply(client, reply)

    def close(self) -> None:
        with self._lock:
            if self._closing:
                return
            self._closing = True
        self._thread.join(timeout=5)
        for peer in list(self._peers.values()):
            self._drop_peer(peer, "the holder closed")
        self._listener.close()
        with self._lock:
            self._objects.clear()
            self._reserved.clear()
            self._pins.clear()
        self.arena.close()


# ---- a client ----------------------------------------------------------------------------------------------------

class _Client:
    """One connection to a holder: staging slots, the service thread that collects replies, and the transfers."""

    def __init__(self, host: str, port: int, max_object_bytes: int, staging_bytes: int, chunk_bytes: int,
                 device: Optional[str], token: str, timeout: float, inflight: int):
        self.timeout, self.inflight = timeout, inflight
        self.max_object_bytes = max_object_bytes
        self.agent, self.name = _new_agent("client")
        chunk = min(chunk_bytes, staging_bytes)
        slots = max(1, staging_bytes // chunk)
        self.staging = _Region(self.agent, slots * chunk, device)
        self.chunk = chunk
        self._slots: "queue.Queue[int]" = queue.Queue()
        for i in range(slots):
            self._slots.put(i * chunk)
        self._cv = threading.Condition()
        self._replies: Dict[int, Dict[str, Any]] = {}
        self._waiting: Set[int] = set()
        self._ids = itertools.count(1)
        self.dead: Optional[str] = None
        self._closing = False
        self.stats = {"puts": 0, "gets": 0, "bytes_out": 0, "bytes_in": 0, "transfers": 0}
        self._executor: Optional[ThreadPoolExecutor] = None
        where = f"{host}:{port}"
        self.where = where
        try:
            self.sock = socket.create_connection((host, port), timeout=min(timeout, 30.0))
        except OSError as e:
            self.staging.close()
            raise IoError(f"NIXL store: connecting to the holder at {where}: {e}") from None
        try:
            hello = {"magic": _MAGIC, "version": _VERSION, "token": token, "agent": self.name}
            _send_frame(self.sock, json.dumps(hello).encode("utf-8"))
            _send_frame(self.sock, self.agent.get_agent_metadata())
            info = json.loads(_recv_frame(self.sock, _MAX_HANDSHAKE).decode("utf-8"))
            if not isinstance(info, dict) or not info.get("ok"):
                why = info.get("why") if isinstance(info, dict) else None
                raise IoError(f"NIXL store: the holder at {where} refused this client: {why or 'no reason given'}")
            md = _recv_frame(self.sock, _MAX_METADATA)
            self.peer = _str_name(self.agent.add_remote_agent(md))
            if self.peer != info.get("agent") or not self.peer.startswith("splitzip-holder-"):
                raise IoError(f"NIXL store: the holder at {where} sent metadata of agent {self.peer!r}")
            for k in ("base", "capacity", "max_object_bytes", "dev"):
                if _int_field(info, k, 0, 1 << 63) is None:
                    raise IoError(f"NIXL store: the holder at {where} sent no valid {k!r}")
            if info.get("mem") not in ("DRAM", "VRAM") or not isinstance(info.get("lease"), (int, float)):
                raise IoError(f"NIXL store: the holder at {where} sent an invalid handshake")
        except (OSError, ValueError, ConnectionError, UnicodeDecodeError) as e:
            self.sock.close()
            self.staging.close()
            raise IoError(f"NIXL store: the handshake with the holder at {where} failed: {e}") from None
        except BaseException:
            self.sock.close()
            self.staging.close()
            raise
        self.base, self.capacity = int(info["base"]), int(info["capacity"])
        self.peer_max = int(info["max_object_bytes"])
        self.peer_mem, self.peer_dev = info["mem"], int(info["dev"])
        # a transfer must finish well within the holder's lease of the room it was given
        self.transfer_deadline = min(self.timeout, 0.8 * float(info["lease"]))
        self.sock.settimeout(None)
        self.sock.setblocking(False)
        try:
            self.agent.make_connection(self.peer)
        except Exception as e:  # optional: the first transfer connects otherwise
            _log.debug("splitzip NIXL store: make_connection: %s", e)
        self._thread = threading.Thread(target=self._serve, name="splitzip-nixl-client", daemon=True)
        self._thread.start()

    # -- replies --

    def _serve(self) -> None:
        while not self._closing:
            with self._cv:
                busy = bool(self._waiting)
            try:
                ready, _, _ = select.select([self.sock], [], [], 0.0002 if busy else 0.005)
            except (OSError, ValueError):
                ready = [self.sock]
            if self._closing:
                break
            if ready:
                try:
                    data = self.sock.recv(1)
                except BlockingIOError:
                    data = None
                except OSError:
                    data = b""
                if data is not None:
                    self._die("the holder's connection closed (the holder process is gone or closed the store)"
                              if not data else "the holder sent bytes after the handshake")
                    break
            try:
                notifs = self.agent.get_new_notifs()
            except Exception as e:
                self._die(f"reading NIXL notifications failed: {e}")
                break
            for sender, msgs in notifs.items():
                if _str_name(sender) != self.peer:
                    continue
                for raw in msgs:
                    msg = _decode(raw)
                    rid = None if msg is None else _int_field(msg, "id", 0, 1 << 62)
                    if rid is None:
                        continue
                    with self._cv:
                        if rid in self._waiting:
                            self._replies[rid] = msg
                            self._cv.notify_all()

    def _die(self, why: str) -> None:
        with self._cv:
            if self.dead is None:
                self.dead = why
                _log.warning("splitzip NIXL store: holder %s: %s", self.where, why)
            self._cv.notify_all()

    def _check(self) -> None:
        if self._closing:
            raise IoError("NIXL store: the store is closed")
        if self.dead is not None:
            raise IoError(f"NIXL store: holder {self.where}: {self.dead}")

    def _notify(self, msg: Dict[str, Any]) -> None:
        try:
            self.agent.send_notif(self.peer, _encode(msg))
        except Exception as e:
            raise IoError(f"NIXL store: sending to the holder at {self.where} failed: {e}") from None

    def _call(self, msg: Dict[str, Any], what: str) -> Dict[str, Any]:
        """Sends a request and waits for its reply (IoError on a refusal, the holder gone, or the timeout)."""
        self._check()
        rid = next(self._ids)
        msg = dict(msg, id=rid)
        with self._cv:
            self._waiting.add(rid)
        try:
            self._notify(msg)
            return self._reply(rid, what, "answer")
        finally:
            self._forget(rid)

    def _reply(self, rid: int, what: str, verb: str) -> Dict[str, Any]:
        """Waits for the holder's reply to request ``rid`` (IoError on a refusal, the holder gone, or the timeout)."""
        deadline = time.monotonic() + self.timeout
        with self._cv:
            while rid not in self._replies:
                self._check()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise IoError(f"NIXL store: {what}: the holder at {self.where} did not {verb} within "
                                  f"{self.timeout:g} s (timeout)")
                self._cv.wait(min(left, 0.05))
            reply = self._replies.pop(rid)
        if not reply.get("ok"):
            why = reply.get("why")
            raise IoError(f"NIXL store: {what}: the holder refused: {why if isinstance(why, str) else 'no reason'}")
        return reply

    def _forget(self, rid: int) -> None:
        with self._cv:
            self._waiting.discard(rid)
            self._replies.pop(rid, None)

    # -- transfers --

    def _slot(self, deadline: float, posted: Any, drain: Any) -> int:
        """A free staging slot. While this transfer has chunks on the wire it finishes one of them rather than
        wait (so that two transfers never wait for each other's slots); otherwise it waits up to the deadline."""
        while True:
            self._check()
            try:
                return self._slots.get_nowait()
            except queue.Empty:
                pass
            if posted:
                drain()
                continue
            try:
                return self._slots.get(timeout=0.05)
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise IoError(f"NIXL store: no staging slot became free within {self.transfer_deadline:g} s "
                                  f"(timeout)") from None

    def _post(self, op: str, slot: int, remote: int, n: int, notif: bytes = b"") -> Any:
        local = self.staging.descs(slot, n)
        far = self.agent.get_xfer_descs([(self.base + remote, n, self.peer_dev)], self.peer_mem)
        try:
            h = self.agent.initialize_xfer(op, local, far, self.peer, notif)
            state = self.agent.transfer(h)
        except Exception as e:
            raise IoError(f"NIXL store: a NIXL {op} of {n} bytes to {self.where} failed: {e}") from None
        if state == "ERR":
            self._release(h)
            raise IoError(f"NIXL store: a NIXL {op} of {n} bytes to {self.where} failed to start")
        return h

    def _release(self, h: Any) -> None:
        try:
            h.release()
        except Exception as e:  # a transfer that could not be cancelled: the agent keeps it
            _log.debug("splitzip NIXL store: releasing a transfer: %s", e)

    def _wait(self, h: Any, deadline: float, what: str) -> None:
        """Waits for one transfer (IoError on its failure, the holder gone, or the deadline); releases it."""
        spin = 0
        try:
            while True:
                state = self.agent.check_xfer_state(h)
                if state == "DONE":
                    self.stats["transfers"] += 1
                    return
                if state == "ERR":
                    raise IoError(f"NIXL store: {what}: the NIXL transfer to {self.where} failed")
                self._check()
                if time.monotonic() > deadline:
                    raise IoError(f"NIXL store: {what}: the transfer did not finish within "
                                  f"{self.transfer_deadline:g} s (timeout)")
                spin += 1  # each check progresses UCX: poll closely (sleep(0) lets the other threads run)
                time.sleep(0 if spin < 20000 else 0.0002)
        finally:
            self._release(h)

    def _bound(self, size: int, what: str) -> None:
        if size > self.max_object_bytes:
            raise InvalidArgumentError(f"NIXL store: {what}: an object of {size} bytes is larger than this side's "
                                       f"max_object_bytes ({self.max_object_bytes})")
        if size > self.peer_max:
            raise InvalidArgumentError(f"NIXL store: {what}: an object of {size} bytes is larger than the holder's "
                                       f"max_object_bytes ({self.peer_max})")

    def put(self, key: str, pieces: List[Any]) -> None:
        size = sum(_nbytes(p) for p in pieces)
        what = f"put of {key!r}"
        self._bound(size, what)
        reply = self._call({"op": "put", "key": key, "size": size}, what)
        ref, off = _int_field(reply, "ref", 1, 1 << 62), _int_field(reply, "offset", 0, self.capacity)
        if ref is None or off is None or off + size > self.capacity:
            raise IoError(f"NIXL store: {what}: the holder gave room outside its arena")
        try:
            self._write(key, pieces, size, off, ref, what)
        except BaseException:
            try:
                self._notify({"op": "abort", "ref": ref})
            except IoError:
                pass
            raise
        with self._cv:
            self.stats["puts"] += 1
            self.stats["bytes_out"] += size

    def _write(self, key: str, pieces: List[Any], size: int, off: int, ref: int, what: str) -> None:
        """Copies the object into staging slots chunk by chunk and WRITEs each to its place in the holder's room;
        the last chunk, sent once all others finished, carries the notification that publishes the object."""
        deadline = time.monotonic() + self.transfer_deadline
        rid = next(self._ids)  # the holder's confirmation comes to this id
        done = {"op": "done", "ref": ref, "id": rid}
        with self._cv:
            self._waiting.add(rid)
        try:
            if size == 0:
                self._notify(done)
            else:
                self._stream_out(pieces, size, off, deadline, _encode(done), what)
            self._reply(rid, what, "confirm")
        finally:
            self._forget(rid)

    def _stream_out(self, pieces: List[Any], size: int, off: int, deadline: float, done: bytes, what: str) -> None:
        posted: "collections.deque[Tuple[Any, int]]" = collections.deque()  # (handle, slot)
        cursor = [0, 0]  # piece index, offset in it

        def fill(slot: int, n: int) -> None:
            at = 0
            while at < n:
                p = pieces[cursor[0]]
                take = min(n - at, _nbytes(p) - cursor[1])
                _copy(self.staging.view(slot + at, take), p[cursor[1]:cursor[1] + take])
                at += take
                cursor[1] += take
                if cursor[1] == _nbytes(p):
                    cursor[0] += 1
                    cursor[1] = 0
            self.staging.sync()

        def drain() -> None:
            self._drain(posted, deadline, what)

        try:
            at = 0
            while at < size:
                n = min(self.chunk, size - at)
                last = at + n == size
                while posted and (last or len(posted) >= self.inflight):
                    drain()
                slot = self._slot(deadline, posted, drain)
                try:
                    fill(slot, n)
                    if last:
                        self._write_last(slot, off + at, n, done, deadline, what)
                    else:
                        posted.append((self._post("WRITE", slot, off + at, n), slot))
                        slot = -1
                finally:
                    if slot >= 0:
                        self._slots.put(slot)
                at += n
        finally:
            self._settle(posted, deadline, what)

    def _write_last(self, slot: int, remote: int, n: int, done: bytes, deadline: float, what: str) -> None:
        """The put's last chunk, carrying the notification that publishes the object."""
        self._wait(self._post("WRITE", slot, remote, n, done), deadline, what)

    def _drain(self, posted: Any, deadline: float, what: str, landed: Any = None) -> None:
        """Finishes the oldest transfer of a put or get (posted: entries of handle, slot, ...), then landed(entry)
        if given (a READ's copy out of its slot), and frees its slot whatever happened."""
        entry = posted.popleft()
        try:
            self._wait(entry[0], deadline, what)
            if landed is not None:
                landed(entry)
        finally:
            self._slots.put(entry[1])

    def _settle(self, posted: Any, deadline: float, what: str) -> None:
        """Waits out the transfers of a put or get still on the wire (there are some only when it failed), so that
        their slots are free again; their own errors add nothing to the one that propagates."""
        while posted:
            try:
                self._drain(posted, deadline, what)
            except IoError:
                pass

    def get(self, key: str) -> Optional[Any]:
        what = f"get of {key!r}"
        reply = self._call({"op": "get", "key": key}, what)
        if reply.get("missing"):
            return None
        ref = _int_field(reply, "ref", 1, 1 << 62)
        off, size = _int_field(reply, "offset", 0, self.capacity), _int_field(reply, "size", 0, self.capacity)
        try:
            if ref is None or off is None or size is None or off + size > self.capacity:
                raise IoError(f"NIXL store: {what}: the holder announced an object outside its arena")
            if size > self.max_object_bytes:  # before anything is allocated
                raise IoError(f"NIXL store: {what}: the holder announced {size} bytes, more than this side's "
                              f"max_object_bytes ({self.max_object_bytes})")
            out = self.staging.new(size)
            self._read(out, off, size, what)
        finally:
            if ref is not None:
                try:
                    self._notify({"op": "unpin", "ref": ref})
                except IoError:
                    pass
        with self._cv:
            self.stats["gets"] += 1
            self.stats["bytes_in"] += size
        return _readonly(out)

    def _read(self, out: Any, off: int, size: int, what: str) -> None:
        deadline = time.monotonic() + self.transfer_deadline
        posted: "collections.deque[Tuple[Any, int, int, int]]" = collections.deque()  # (handle, slot, at, n)

        def landed(entry: Tuple[Any, int, int, int]) -> None:
            _, s, a, n = entry
            self.staging.sync()
            _copy(out[a:a + n], self.staging.view(s, n))

        def drain_one() -> None:
            self._drain(posted, deadline, what, landed)

        try:
            at = 0
            while at < size:
                n = min(self.chunk, size - at)
                while len(posted) >= self.inflight:
                    drain_one()
                slot = self._slot(deadline, posted, drain_one)
                try:
                    posted.append((self._post("READ", slot, off + at, n), slot, at, n))
                except BaseException:
                    self._slots.put(slot)
                    raise
                at += n
            while posted:
                drain_one()
        finally:
            self._settle(posted, deadline, what)
        self.staging.sync()

    def contains(self, key: str) -> bool:
        return bool(self._call({"op": "has", "key": key}, f"contains {key!r}").get("has"))

    def delete(self, key: str) -> None:
        self._call({"op": "delete", "key": key}, f"delete of {key!r}")

    def executor(self) -> ThreadPoolExecutor:
        with self._cv:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=self.inflight, thread_name_prefix="splitzip-nixl-put")
            return self._executor

    def close(self) -> None:
        if self._closing:
            return
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        self._closing = True
        with self._cv:
            self._cv.notify_all()
        self._thread.join(timeout=5)
        try:
            self.sock.close()
        except OSError:
            pass
        try:
            self.agent.remove_remote_agent(self.peer)
        except Exception:
            pass
        self.staging.close()


# ---- the store ---------------------------------------------------------------------------------------------------

#: the options of NixlStore (and of a ``{"transport": "nixl", ...}`` configuration, see :meth:`NixlStore.from_config`)
NIXL_OPTIONS = ("address", "port", "host", "capacity", "max_object_bytes", "staging_bytes", "chunk_bytes", "device",
                "token", "timeout", "evict", "inflight", "max_clients")


class NixlStore:
    """A store over NIXL: the holder (``port``) or a client of one (``address``); see the module docstring.

    Holder options: ``capacity`` (bytes of its arena, default 1 GiB), ``max_clients`` (default 16), ``evict`` (when
    the arena is full, drop the least recently used objects that no one is reading; default True: a KV store whose
    users never delete; False: a put that does not fit is refused). A client's ``staging_bytes`` (default 64 MiB)
    in slots of ``chunk_bytes`` (default 8 MiB: one NIXL transfer each, ``inflight`` of them at once, default 2) is
    all the registered memory it uses, whatever an object's size. Both: ``max_object_bytes`` (default: the
    capacity on a holder, 4 GiB on a client; a client refuses to put, or to read, anything larger, and so does the
    holder), ``device`` (None: host memory; ``"cuda:N"``: that GPU's), ``token`` (a shared secret the holder
    checks), ``timeout`` (seconds any wait may take, default 30; on the holder also the lease of a reservation or a
    pin), ``host`` (the holder's interface, default 127.0.0.1).

    ``stats`` counts what went through; ``bytes_stored`` is the holder's bytes of objects (a client asks nothing:
    there it is the bytes it put).
    """

    def __init__(self, address: Optional[str] = None, port: Optional[int] = None, host: str = "127.0.0.1", *,
                 capacity: int = 1 << 30, max_object_bytes: Optional[int] = None, staging_bytes: int = 64 << 20,
                 chunk_bytes: int = 8 << 20, device: Any = None, token: str = "", timeout: float = 30.0,
                 evict: bool = True, inflight: int = 2, max_clients: int = 16):
        if (address is None) == (port is None):
            raise ValueError("NIXL store: give 'port' (this process holds the objects) or 'address' (the holder's "
                             "host:port), not both")
        if not isinstance(token, str):
            raise TypeError(f"NIXL store: token must be a str, got {type(token).__name__}")
        if not isinstance(evict, bool):
            raise TypeError(f"NIXL store: evict must be true or false, got {evict!r}")
        timeout = _number(timeout, "timeout")
        inflight = _count(inflight, "inflight", 1, 64)
        dev = _device_arg(device)
        self.device = dev
        self.address: Optional[str] = None
        self._holder: Optional[_Holder] = None
        self._client: Optional[_Client] = None
        if port is not None:
            port = _count(port, "port", 0, 65535)
            capacity = _count(capacity, "capacity", _ALIGN, 1 << 62)
            cap = capacity if max_object_bytes is None else _count(max_object_bytes, "max_object_bytes", 0, 1 << 62)
            if not isinstance(host, str) or not host:
                raise ValueError(f"NIXL store: host must be an address to listen on, got {host!r}")
            _nixl()
            self._holder = _Holder(host, port, capacity, min(cap, capacity), dev, token, timeout, evict,
                                   _count(max_clients, "max_clients", 1, 1024))
        else:
            h, p = _address_arg(address)
            self.address = f"{h}:{p}"
            cap = 4 << 30 if max_object_bytes is None else _count(max_object_bytes, "max_object_bytes", 0, 1 << 62)
            staging = _count(staging_bytes, "staging_bytes", _ALIGN, 1 << 40)
            chunk = _count(chunk_bytes, "chunk_bytes", _ALIGN, 1 << 40)
            _nixl()
            self._client = _Client(h, p, cap, staging, chunk, dev, token, timeout, inflight)

    @classmethod
    def from_config(cls, spec: Dict[str, Any]) -> "NixlStore":
        """A store from a configuration dict: ``{"transport": "nixl", "port": P, ...}`` or ``{"transport": "nixl",
        "address": "host:port", ...}`` with the options of the constructor."""
        if not isinstance(spec, dict):
            raise TypeError(f"NIXL store: a configuration is a dict, got {type(spec).__name__}")
        options = {k: v for k, v in spec.items() if k != "transport"}
        if spec.get("transport", "nixl") != "nixl":
            raise ValueError(f"NIXL store: transport must be 'nixl', got {spec.get('transport')!r}")
        unknown = sorted(set(options) - set(NIXL_OPTIONS))
        if unknown:
            raise ValueError(f"transport 'nixl': unknown options {unknown} (known: {sorted(NIXL_OPTIONS)})")
        return cls(**options)

    # -- the store's four methods --

    def put(self, key: str, data: Any) -> None:
        """Stores ``data`` (bytes, a 1-D uint8 array or tensor, or a list of those: its bytes back to back) under
        ``key``, replacing an earlier object of that key. Returns once the object is visible to every reader of the
        store; nothing of it is visible before. ``data`` is copied (into the arena, or through staging slots)."""
        k = _key_arg(key)
        pieces = _pieces(data)
        if self._holder is not None:
            self._holder.put(k, pieces)
        else:
            self._side().put(k, pieces)

    def put_async(self, key: str, data: Any) -> "Future[None]":
        """Starts :meth:`put` and returns at once: a Future whose ``result()`` returns once the object is visible
        (or raises what put raises). At most ``inflight`` puts run at a time; ``data`` must not change until the
        future is done."""
        k = _key_arg(key)
        pieces = _pieces(data)
        if self._holder is not None:
            f: "Future[None]" = Future()
            try:
                self._holder.put(k, pieces)
                f.set_result(None)
            except BaseException as e:
                f.set_exception(e)
            return f
        client = self._side()
        return client.executor().submit(client.put, k, pieces)

    def get(self, key: str) -> Optional[Any]:
        """The object's bytes as a new read-only 1-D uint8 array (a CUDA tensor with ``device="cuda:N"``), or None
        when there is none."""
        k = _key_arg(key)
        return self._holder.get(k) if self._holder is not None else self._side().get(k)

    def contains(self, key: str) -> bool:
        """Whether a complete object is stored under ``key`` (a client asks the holder)."""
        k = _key_arg(key)
        return self._holder.contains(k) if self._holder is not None else self._side().contains(k)

    def delete(self, key: str) -> None:
        """Removes the object (no error when there is none); one being read is freed when its reader is done."""
        k = _key_arg(key)
        if self._holder is not None:
            self._holder.delete(k)
        else:
            self._side().delete(k)

    # -- the rest --

    def _side(self) -> _Client:
        if self._client is None:
            raise IoError("NIXL store: the store is closed")
        return self._client

    @property
    def port(self) -> Optional[int]:
        """The holder's port (the one picked, with port 0), or None on a client."""
        return self._holder.port if self._holder is not None else None

    @property
    def holder_address(self) -> str:
        """Where clients connect: ``host:port`` of the holder (this side's, or the one a client connected to)."""
        if self._holder is not None:
            return f"{self._holder.host}:{self._holder.port}"
        return str(self.address)

    @property
    def is_holder(self) -> bool:
        return self._holder is not None

    @property
    def bytes_stored(self) -> int:
        """On the holder the bytes of the objects held now; on a client the bytes it put."""
        if self._holder is not None:
            return self._holder.bytes_stored
        return self._client.stats["bytes_out"] if self._client is not None else 0

    @property
    def stats(self) -> Dict[str, int]:
        """Holder: clients, puts, gets, bytes_in, bytes_out, refused (puts refused: too large, no room), evicted,
        dropped (unfinished puts whose client went or whose lease ran out), bad_messages, and now: objects,
        bytes_stored, arena_used, reservations, pins, peers. Client: puts, gets, bytes_out, bytes_in, transfers."""
        if self._holder is not None:
            return self._holder.snapshot()
        c = self._client
        return dict(c.stats) if c is not None else {}

    def close(self) -> None:
        """Ends the store: a holder's clients see it go; a client's connection closes. Idempotent."""
        h, c = self._holder, self._client
        self._holder, self._client = None, None
        if h is not None:
            h.close()
        if c is not None:
            c.close()

    def __enter__(self) -> "NixlStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._holder is not None:
            return f"NixlStore(port={self._holder.port}, host={self._holder.host!r})"
        return f"NixlStore(address={self.address!r})"


# ---- tensors, compressed -----------------------------------------------------------------------------------------

def send_tensors(store: NixlStore, items: Iterable[Tuple[str, Any]], *, raw: bool = False, codebook: Any = None,
                 threads: Optional[int] = None) -> Dict[str, float]:
    """Compresses each (key, tensor) of ``items`` into a SplitZip frame and puts it under its key, compressing the
    next tensor while the previous frame is on the wire (``store.put_async``). Host tensors are stored as a
    container that records their shape (``splitzip.compress(..., keep_shape=True)``), CUDA tensors as a frame
    (``get_tensor`` needs ``out`` for them). ``raw=True`` puts the tensors' bytes instead (for comparisons). Returns
    counts: objects, raw_bytes, stored_bytes, ratio, seconds."""
    import splitzip
    t0 = time.perf_counter()
    pending: Optional[Future] = None
    objects, raw_bytes, stored = 0, 0, 0
    try:
        for key, tensor in items:
            if raw:
                blob = _raw_bytes(tensor)
            else:
                cuda = _is_torch(tensor) and tensor.is_cuda
                blob = splitzip.compress(tensor, codebook, threads=threads, keep_shape=not cuda)
            n_raw = (int(tensor.nbytes) if isinstance(tensor, np.ndarray)
                     else int(tensor.numel() * tensor.element_size()))
            if pending is not None:
                pending.result()
            pending = store.put_async(key, blob)
            objects += 1
            raw_bytes += n_raw
            stored += _nbytes(blob)
        if pending is not None:
            pending.result()
            pending = None
    finally:
        if pending is not None:
            pending.exception()  # wait for it; the error in flight is the one that propagates
    dt = time.perf_counter() - t0
    return {"objects": objects, "raw_bytes": raw_bytes, "stored_bytes": stored,
            "ratio": raw_bytes / stored if stored else 0.0, "seconds": dt}


def _raw_bytes(tensor: Any) -> Any:
    if isinstance(tensor, np.ndarray):
        return np.ascontiguousarray(tensor).reshape(-1).view(np.uint8)
    t = tensor.contiguous().reshape(-1)
    return t.view(_torch().uint8)


def get_tensor(store: NixlStore, key: str, out: Any = None, *, threads: Optional[int] = None) -> Optional[Any]:
    """Gets the object ``key`` that :func:`send_tensors` put and decompresses it (into ``out`` when given; a host
    tensor comes back in its shape). None when there is none. The frame is checked by the decoder (checksums)."""
    import splitzip
    blob = store.get(key)
    if blob is None:
        return None
    return splitzip.decompress(blob, out=out, threads=threads)
