"""Tensors between processes over UCX, compressed with SplitZip on the way (the transfer library, transfer/README.md).

    from splitzip import transfer
    server = transfer.Server(destination=lambda name, dtype, nbytes: cache[name])   # decode into your arrays
    ...                                              # in another process:
    stats = transfer.send(f"127.0.0.1:{port}", {"L0.K": k0, "L0.V": v0})           # every byte verified

A send can start before its tensors hold their data: ``Sender(..., gated=True)`` makes the handshake at once and
sends each tensor as soon as ``ready(name)`` marks it final, so a model's next layer computes while the codec threads
encode and the link carries the layers before it. ``raw=True`` sends the same tensors uncompressed through the same
path; ``rate`` emulates a link of that many bytes per second. The wire protocol is transfer/PROTOCOL.md; CPU (host)
tensors only in this module. Errors raise the subclasses of splitzip.Error named after the library status
(``IoError`` for the network, ``ChecksumError``, ``CorruptError``, ...).
"""

from __future__ import annotations

import functools
import os
import threading
from dataclasses import dataclass, field
from typing import Callable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _splitzip
from ._core import DTypeLike, Tensor, _int_arg, _Tensor, dtype_name
from ._errors import check as _check, error_for

_ext = getattr(_splitzip, "transfer", None)

#: Tensors to send: a mapping name -> tensor, or a sequence of (name, tensor) or (name, tensor, dtype); a dtype is
#: needed only for byte or integer views of float values (as in splitzip.compress).
TensorsLike = Union[Mapping[str, Tensor], Sequence[Union[Tuple[str, Tensor], Tuple[str, Tensor, DTypeLike]]]]
#: A destination: called as destination(name, dtype, nbytes) on a session's thread; returns a writable C-contiguous
#: host tensor of at least nbytes bytes that the tensor's values are decoded into, or None to refuse the transfer.
Destination = Callable[[str, str, int], Optional[Tensor]]
#: A release: called as release(name, tensor, complete) on a session's thread, once for every tensor a destination
#: returned, when the session ended and writes no more to it; complete: every byte of it verified.
Release = Callable[[str, Tensor, bool], None]


def available() -> bool:
    """Whether this build of splitzip has the transfer library (it needs UCX when it is built: libucx-dev)."""
    return _ext is not None


def _need() -> None:
    if _ext is None:
        raise error_for(14, "splitzip.transfer: this build has no transfer library (UCX was not found when splitzip "
                            "was built; install libucx-dev and reinstall)")


def _address(address: Union[str, Tuple[str, int]]) -> Tuple[str, int]:
    if isinstance(address, tuple):
        host, port = address
    elif isinstance(address, str) and ":" in address:
        host, _, p = address.rpartition(":")
        try:
            port = int(p)
        except ValueError:
            raise ValueError(f"address {address!r}: the port is not a number") from None
    else:
        raise ValueError(f"address must be 'host:port' or (host, port), got {address!r}")
    if not isinstance(host, str) or not host:
        raise ValueError(f"address {address!r}: no host")
    return host, _int_arg(port, "port", 1, 65535)


@dataclass
class SendStats:
    """What one send moved. ``seconds``: from the end of the handshake until the receiver confirmed every byte (for
    a gated send, including the wait for the producer); ``codec_seconds``: CPU time of the codec threads."""
    raw_bytes: int
    payload_bytes: int
    wire_bytes: int
    messages: int
    seconds: float
    handshake_seconds: float
    codec_seconds: float

    @property
    def ratio(self) -> float:
        """Tensor bytes per payload byte (1.0 for a raw send)."""
        return self.raw_bytes / self.payload_bytes if self.payload_bytes else 1.0


@dataclass
class ReceivedTensor:
    name: str
    dtype: str
    nbytes: int
    path: str  # the file in out_dir, or "" (discarded, or decoded into a destination)


@dataclass
class SessionStats:
    """One received session. ``seconds``: from its handshake until every tensor verified; ``codec_seconds``: CPU
    time of the decode threads."""
    raw: bool
    raw_bytes: int
    wire_bytes: int
    messages: int
    seconds: float
    codec_seconds: float
    tensors: List[ReceivedTensor] = field(default_factory=list)


def _tensor_list(tensors: TensorsLike) -> List[Tuple[str, int, np.ndarray, object]]:
    """(name, dtype id, flat uint8 host view, the caller's object) for each tensor, in order."""
    items = list(tensors.items()) if isinstance(tensors, Mapping) else list(tensors)
    out = []
    for it in items:
        if not isinstance(it, tuple) or len(it) not in (2, 3):
            raise TypeError("tensors: expected a mapping name -> tensor or (name, tensor[, dtype]) tuples")
        name, x = it[0], it[1]
        if not isinstance(name, str):
            raise TypeError(f"tensor names are str, got {type(name).__name__}")
        t = _Tensor(x, f"tensor {name!r}")
        if t.device != "cpu":
            raise error_for(14, f"tensor {name!r}: splitzip.transfer sends host tensors only")
        out.append((name, t.format_dtype(it[2] if len(it) == 3 else None, f"tensor {name!r}"), t.bytes, x))
    return out


class Sender:
    """One send to a Server, running on a thread of its own from construction; ``wait()`` returns its SendStats.

    With ``gated=True`` the tensors' data need not be final yet: the handshake goes out at once, and each tensor is
    encoded and sent once ``ready(name)`` (or ``ready(index)``) marks it; tensors go out in their order. A producer
    that gives up calls ``fail(reason)``; used as a context manager, an exception in the block does that. Without
    ``gated`` every tensor is read as it is now. Do not modify a tensor once it is ready (or, ungated, at all) until
    ``wait()`` returned.

    raw: send the bytes uncompressed through the same path. rate: emulated link rate in bytes per second of wire
    bytes (0: as fast as the transport goes). threads: codec threads. chunk_values: values per message. window:
    messages in flight. timeout: seconds without progress before the send fails (waiting for ``ready`` does not
    count). token: the shared secret a Server may require.
    """

    def __init__(self, address: Union[str, Tuple[str, int]], tensors: TensorsLike, *, gated: bool = False,
                 raw: bool = False, rate: float = 0.0, threads: int = 1, chunk_values: int = 1 << 20,
                 window: int = 8, timeout: float = 10.0, token: str = ""):
        _need()
        host, port = _address(address)
        self._tensors = _tensor_list(tensors)
        self._index = {name: i for i, (name, _, _, _) in enumerate(self._tensors)}
        if not rate >= 0:
            raise ValueError(f"rate must be a number of bytes per second >= 0, got {rate!r}")
        if not timeout > 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        args = (host, port, [(n, d, b) for n, d, b, _ in self._tensors], bool(raw), float(rate),
                _int_arg(threads, "threads", 1, 256), str(token), _int_arg(chunk_values, "chunk_values", 1, 1 << 28),
                _int_arg(window, "window", 1, 1024), float(timeout))
        self._gate = _ext.ReadyGate(len(self._tensors)) if gated else None
        self._result: Optional[tuple] = None
        self._thread = threading.Thread(target=self._run, args=args, name="splitzip-send", daemon=True)
        self._thread.start()

    def _run(self, *args) -> None:
        try:
            self._result = _ext.send(*args, self._gate)
        except BaseException as e:  # an argument the binding refused: reported by wait()
            self._result = (-1, repr(e), {})

    def ready(self, tensor: Union[str, int]) -> None:
        """Marks a tensor (by name or index) final: the sender may read it from now on."""
        if self._gate is None:
            raise ValueError("ready() is for a gated Sender (gated=True)")
        if isinstance(tensor, str):
            i = self._index.get(tensor)
        else:
            i = _int_arg(tensor, "tensor", 0, len(self._tensors) - 1)
        if i is None:
            raise KeyError(f"no tensor named {tensor!r} in this send")
        _check(self._gate.ready(i), f"ready({tensor!r})")

    def fail(self, why: str) -> None:
        """The producer gave up: the send stops, and wait() raises IoError with this reason."""
        if self._gate is not None:
            self._gate.fail(str(why))

    def done(self) -> bool:
        return not self._thread.is_alive()

    def wait(self) -> SendStats:
        """Waits until the receiver confirmed every byte; raises the library's error otherwise."""
        self._thread.join()
        status, error, stats = self._result
        if status == -1:
            raise TypeError(error)
        _check(status, error or "send failed")
        return SendStats(**stats)

    def __enter__(self) -> "Sender":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is not None:
            self.fail(f"{exc_type.__name__}: {exc}")
            self._thread.join()
            return
        self.wait()


def send(address: Union[str, Tuple[str, int]], tensors: TensorsLike, **options) -> SendStats:
    """Sends the tensors to a Server and waits until it confirmed every byte (options: those of Sender, except
    gated)."""
    if "gated" in options:
        raise TypeError("send() sends tensors as they are; use Sender(..., gated=True) for a gated send")
    return Sender(address, tensors, **options).wait()


def _destination_bytes(destination: Destination, given: Optional[dict], name: str, did: int,
                       nbytes: int) -> Optional[np.ndarray]:
    """The user's destination as the flat uint8 view the library writes into (its base keeps it alive); with a
    release, ``given`` maps the view's id to the user's tensor until its release. Module functions, so that the
    binding's references to them hold no reference to the Server."""
    got = destination(name, dtype_name(did), nbytes)
    if got is None:
        return None
    t = _Tensor(got, f"destination of {name!r}", writable=True)
    if t.device != "cpu":
        raise ValueError(f"destination of {name!r}: splitzip.transfer decodes into host memory only")
    if t.nbytes < nbytes:
        raise ValueError(f"destination of {name!r}: {t.nbytes} bytes for a tensor of {nbytes}")
    view = t.bytes
    if given is not None:
        given[id(view)] = got  # the binding holds the view until it releases it: its id stays unique until then
    return view


def _release_tensor(release: Release, given: dict, name: str, view: np.ndarray, complete: bool) -> None:
    got = given.pop(id(view), None)
    if got is not None:
        release(name, got, bool(complete))


class Server:
    """A receiver: one listening TCP socket (``address``, loopback by default; ``port`` 0 picks a free one, see
    ``.port``); each peer's session gets its own UCX worker after its handshake was checked.

    Where tensors go: ``destination(name, dtype, nbytes)`` returns a writable host tensor (at least nbytes bytes,
    C-contiguous) that the values are decoded into; it is called on the session's thread, once per tensor, before
    the tensor's first message is decoded, and the tensor is kept referenced until the session ended. Then
    ``release(name, tensor, complete)``, if given, gets each such tensor back on the session's thread (``complete``:
    every byte of it verified; a failed session releases the rest with False), so that a caller can tell which
    tensors of which session arrived whole. Or
    ``out_dir`` (a file per tensor, never replacing one unless ``overwrite``), or ``discard`` (verify only).

    threads: decode threads per session. timeout: seconds without progress before a session fails.
    accept_timeout: how long serve_one() waits for a peer (0: forever). token: peers must present it.
    """

    def __init__(self, address: str = "127.0.0.1", port: int = 0, *, destination: Optional[Destination] = None,
                 release: Optional[Release] = None, out_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
                 discard: bool = False, overwrite: bool = False, threads: int = 1, timeout: float = 10.0,
                 accept_timeout: float = 0.0,
                 token: str = "", max_sessions: int = 4, max_tensor_bytes: int = 64 << 30,
                 max_session_bytes: int = 1 << 30, max_server_bytes: int = 4 << 30):
        _need()
        if sum(x is not None and x is not False for x in (destination, out_dir, discard or None)) != 1:
            raise ValueError("Server: give exactly one of destination=, out_dir= or discard=True")
        if destination is not None and not callable(destination):
            raise TypeError("destination must be callable as destination(name, dtype, nbytes)")
        if release is not None and (destination is None or not callable(release)):
            raise TypeError("release must be callable as release(name, tensor, complete), and goes with destination=")
        given: Optional[dict] = {} if release is not None else None
        self._server = _ext.Server()
        st, err = self._server.open(
            address, _int_arg(port, "port", 0, 65535),
            functools.partial(_destination_bytes, destination, given) if destination is not None else None,
            functools.partial(_release_tensor, release, given) if release is not None else None,
            os.fspath(out_dir) if out_dir is not None else "", bool(discard), bool(overwrite),
            _int_arg(threads, "threads", 1, 256), float(timeout), float(accept_timeout), str(token),
            _int_arg(max_sessions, "max_sessions", 1, 1024), _int_arg(max_tensor_bytes, "max_tensor_bytes", 0, 1 << 62),
            _int_arg(max_session_bytes, "max_session_bytes", 0, 1 << 62),
            _int_arg(max_server_bytes, "max_server_bytes", 0, 1 << 62))
        _check(st, err or "cannot open the server")

    @property
    def port(self) -> int:
        return self._server.port

    def serve_one(self) -> SessionStats:
        """Waits for the next peer whose connection ends and returns its session; raises the library's error when
        that session failed or the peer was refused (peers that arrive meanwhile are served, and reported by later
        calls)."""
        status, error, s = self._server.serve_one()
        _check(status, error or "session failed")
        tensors = [ReceivedTensor(t["name"], dtype_name(t["dtype"]), t["size"], t["path"]) for t in s["tensors"]]
        return SessionStats(s["raw"], s["raw_bytes"], s["wire_bytes"], s["messages"], s["seconds"],
                            s["codec_seconds"], tensors)

    def stop(self) -> None:
        """Makes a waiting serve_one() return (with IoError) and ends running sessions; thread safe."""
        self._server.stop()

    def close(self) -> None:
        """Ends every session and closes the listening socket."""
        self._server.close()

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
