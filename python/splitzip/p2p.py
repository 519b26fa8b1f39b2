"""splitzip.p2p: a request's KV, layer by layer, from one GPU (or process) to another over a point-to-point link,
compressed on the way, with encode, send and decode overlapped.

The link is torch.distributed's ``isend`` / ``irecv`` (NCCL between two GPUs of a node, as vLLM's P2P NCCL connector
uses it, or gloo between CPU processes) or :class:`LoopbackLink`, a pair of endpoints inside one process (two
threads; for tests and for a one-GPU machine, where NCCL refuses two ranks on one device).

    # prefill side (rank 0)                                  # decode side (rank 1)
    tx = splitzip.p2p.Sender(TorchLink(peer=1))             rx = splitzip.p2p.Receiver(TorchLink(peer=0))
    for layer in range(L):                                   for layer in range(L):
        tx.send(kv[layer])       # returns at once               rx.recv(cache[layer])   # decode enqueued
    tx.finish()                                              rx.finish()                 # raises on a bad frame

Per layer the sender encodes on its own CUDA stream (``torch.ops.splitzip.compress``: one launch, no host wait), then
sends the frame's size (8 bytes) and exactly the frame's bytes; the receiver reads the size (its one host wait per
layer, while earlier layers still move and decode), receives the frame and decodes it into the caller's tensor on
its own stream. ``depth`` layers are encoded ahead of the one being sent. ``compress=False`` sends the raw bytes
through the same calls: the baseline to measure against (bench/p2p_handoff.py).

NCCL counts are host values, so over torch.distributed each side waits on the host for every frame's size (~1 ms
per layer on an H200, more than the codec or NVLink take). Between two processes of one node (each its own GPU, or
both on one GPU) :class:`IpcRing` with :class:`IpcSender` / :class:`IpcReceiver` keeps every size on the device:

    # decode side (owns the ring)                            # prefill side
    ring = IpcRing.for_tensor(cache[0], depth=2)             ring = queue.get()          # CUDA IPC, by torch
    queue.put(ring)                                          tx = IpcSender(ring)
    rx = IpcReceiver(ring)                                   for layer in range(L):
    for layer in range(L):                                       tx.send(kv[layer])      # returns at once
        rx.recv(cache[layer])   # returns at once            tx.finish()
    rx.finish()                 # raises on a bad frame

The ring is ``depth`` slots of the compress bound in the receiver's GPU memory and two rows of flags (``full[s]``:
frames written into slot s; ``free[s]``: frames of slot s decoded), shared with the sender by CUDA IPC. Per layer
the sender's stream waits in-stream until its slot is free (``splitzip::wait``), encodes straight into the slot
(``splitzip::compress_into``: the encoder only stores to its output, so it may be a peer's memory) and signals the
slot full (``splitzip::signal``); the receiver's stream waits for full, decodes from the slot (the frame's size comes
from its header; the slot's unused tail is not read) into the caller's tensor and signals the slot free. The host
only enqueues: no size, status or completion crosses it per layer.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from typing import Any, Dict, List, Optional

import torch

from . import _splitzip as _ext
from ._core import DTYPE_IDS, _chunk_log2, _codebook_arg, _flags
from ._errors import CorruptError, check, error_for
from ._torch_ops import (_bound_for, compress_into_op, compress_op, decompress_op, decompress_sized_op, pack_codebook,
                         signal_op, wait_op)

__all__ = ["TorchLink", "LoopbackLink", "Sender", "Receiver", "IpcRing", "IpcSender", "IpcReceiver"]

_TORCH_DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}
for _name, _id in (("float8_e4m3fn", "fp8_e4m3"), ("float8_e5m2", "fp8_e5m2")):
    if hasattr(torch, _name):
        _TORCH_DTYPES[getattr(torch, _name)] = _id


class TorchLink:
    """torch.distributed point-to-point calls to one peer rank (the process group must be initialised). With NCCL
    the calls are ordered on the caller's current CUDA stream; with gloo (CPU tensors) ``wait`` blocks."""

    def __init__(self, peer: int, group: Any = None):
        import torch.distributed as dist
        self._dist = dist
        self.peer = int(peer)
        self.group = group

    def send(self, t: torch.Tensor):
        return self._dist.isend(t, self.peer, group=self.group)

    def recv(self, t: torch.Tensor):
        return self._dist.irecv(t, self.peer, group=self.group)


class _Done:
    def wait(self) -> bool:
        return True


class _Taken:
    """A loopback send: done once the receiving thread has copied the tensor (its copy's event, for CUDA)."""

    def __init__(self):
        self._taken = threading.Event()
        self.copied = None

    def wait(self) -> bool:
        self._taken.wait()
        if self.copied is not None:
            self.copied.synchronize()
        return True


class LoopbackLink:
    """Two endpoints of one process (``a, b = LoopbackLink.pair()``): what one sends the other receives, in order,
    as a copy on the receiver's current stream once the sender's stream has produced it. Each endpoint is used by
    one thread; a send is complete (``wait``) once the receiver's copy is."""

    def __init__(self, out_q: "queue.Queue", in_q: "queue.Queue"):
        self._out, self._in = out_q, in_q

    @staticmethod
    def pair():
        q1, q2 = queue.Queue(), queue.Queue()
        return LoopbackLink(q1, q2), LoopbackLink(q2, q1)

    def send(self, t: torch.Tensor):
        ev = None
        if t.is_cuda:
            ev = torch.cuda.Event()
            ev.record(torch.cuda.current_stream(t.device))
        taken = _Taken()
        self._out.put((t, ev, taken))
        return taken

    def recv(self, t: torch.Tensor):
        src, ev, taken = self._in.get()
        try:
            if src.numel() != t.numel() or src.dtype != t.dtype:
                raise ValueError(f"LoopbackLink: {src.numel()} {src.dtype} sent, {t.numel()} {t.dtype} expected")
            if ev is not None:
                torch.cuda.current_stream(t.device).wait_event(ev)
            t.copy_(src, non_blocking=True)
            if t.is_cuda or src.is_cuda:
                taken.copied = torch.cuda.Event()
                taken.copied.record(torch.cuda.current_stream(t.device if t.is_cuda else src.device))
        finally:
            taken._taken.set()
        return _Done()


def _byte_view(t: torch.Tensor, what: str) -> torch.Tensor:
    if not t.is_contiguous():
        raise ValueError(f"{what}: the tensor must be contiguous")
    return t.reshape(-1).view(torch.uint8)


def _did(t: torch.Tensor) -> int:
    name = _TORCH_DTYPES.get(t.dtype)
    if name is None:
        raise ValueError(f"splitzip.p2p: {t.dtype} is not a SplitZip dtype (bf16, fp16, fp32, fp8 e4m3 / e5m2)")
    return DTYPE_IDS[name]


def _on(stream):
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


class _Books:
    """A sender's codebook argument (as splitzip.compress takes it) resolved and packed for the op once per dtype."""

    def __init__(self, codebook):
        self._codebook = codebook
        self._packed: Dict[int, List[int]] = {}

    def __call__(self, did: int) -> List[int]:
        cb = self._packed.get(did)
        if cb is None:
            cb = self._packed[did] = pack_codebook(_codebook_arg(self._codebook, did))
        return cb


class _Side:
    def __init__(self, link, compress: bool):
        self.link = link
        self.compress = bool(compress)
        self._device: Optional[torch.device] = None  # the first tensor's; every later one must live there too
        self._stream = None  # the codec's stream (CUDA tensors)
        self._link_stream = None  # where link calls are posted, so that they wait only for what they carry
        self.raw_bytes = 0
        self.sent_bytes = 0  # frame (or raw) bytes over the link, sizes excluded

    def _bind(self, t: torch.Tensor):
        if self._device is None:
            self._device = t.device
            if t.is_cuda:
                self._stream = torch.cuda.Stream(t.device)
                self._link_stream = torch.cuda.Stream(t.device)
        elif t.device != self._device:
            raise ValueError(f"all tensors of a {type(self).__name__} live on {self._device}, got {t.device}")


class Sender(_Side):
    """Sends tensors (one layer's K and V, say) to the peer in call order. ``codebook``: as splitzip.compress (None:
    the library's default for the dtype); ``chunk`` and ``checksum`` likewise. The tensors must not change until
    :meth:`finish` returns."""

    def __init__(self, link, codebook=None, chunk: Optional[int] = None, checksum=True, compress: bool = True,
                 depth: int = 2):
        super().__init__(link, compress)
        self._books = _Books(codebook)
        self._log2 = _chunk_log2(chunk)
        self._flags = _flags(checksum)
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        self.depth = int(depth)
        self._encoded: List[tuple] = []  # (frame, size, host size, event, source), encoded, not yet sent
        self._held: List[Any] = []       # what the link may still read: kept alive until finish
        self._works: List[Any] = []

    def send(self, t: torch.Tensor) -> None:
        self._bind(t)
        src = _byte_view(t, "Sender.send")
        self.raw_bytes += src.numel()
        if not self.compress:
            self._works.append(self.link.send(src))
            self._held.append(src)
            self.sent_bytes += src.numel()
            return
        did = _did(t)
        cb = self._books(did)
        if self._stream is not None:
            self._stream.wait_stream(torch.cuda.current_stream(t.device))  # t is ready where the caller made it
        with _on(self._stream):
            frame, size = compress_op(src, did, cb, self._log2, self._flags)
            host = torch.empty(1, dtype=torch.int64, pin_memory=t.is_cuda)
            host.copy_(size, non_blocking=True)
            ev = None
            if self._stream is not None:
                ev = torch.cuda.Event()
                ev.record(self._stream)
        self._encoded.append((frame, size, host, ev, src))
        while len(self._encoded) > self.depth:
            self._send_oldest()

    def _send_oldest(self) -> None:
        frame, size, host, ev, src = self._encoded.pop(0)
        if ev is not None:
            ev.synchronize()
            self._link_stream.wait_event(ev)  # this layer's frame, not the layers encoded after it
        n = int(host.item())
        with _on(self._link_stream):
            self._works.append(self.link.send(size))
            self._works.append(self.link.send(frame[:n]))
        self._held.extend((frame, size, src))
        self.sent_bytes += n

    def finish(self) -> None:
        """Sends what is still encoded and waits until the link has taken every message."""
        while self._encoded:
            self._send_oldest()
        with _on(self._link_stream):
            for w in self._works:
                w.wait()
        if self._link_stream is not None:
            self._link_stream.synchronize()
            self._stream.synchronize()
        self._works.clear()
        self._held.clear()


class Receiver(_Side):
    """Receives what the peer's :class:`Sender` sends, in order, into the caller's tensors (shape and dtype as sent).
    Frames are decoded on the receiver's stream; :meth:`finish` waits for the decodes and raises the first error
    (splitzip.CorruptError, ChecksumError, ...) of a bad frame."""

    def __init__(self, link, compress: bool = True):
        super().__init__(link, compress)
        self._statuses: List[torch.Tensor] = []
        self._held: List[Any] = []

    def recv(self, out: torch.Tensor) -> None:
        self._bind(out)
        dst = _byte_view(out, "Receiver.recv")
        self.raw_bytes += dst.numel()
        if not self.compress:
            with _on(self._stream):
                self.link.recv(dst).wait()
            self.sent_bytes += dst.numel()
            return
        bound = _bound_for(dst.numel(), _did(out))
        with _on(self._link_stream):  # not behind the decodes of earlier layers
            size = torch.empty(1, dtype=torch.int64, device=out.device)
            self.link.recv(size).wait()
            n = int(size.item())  # the host waits for this layer's size only
        if n < 64 or n > bound:
            raise CorruptError(f"Receiver.recv: the peer announced a frame of {n} bytes for {dst.numel()} raw "
                               f"bytes (a frame of them has 64 to {bound})")
        with _on(self._stream):
            frame = torch.empty(n, dtype=torch.uint8, device=out.device)
            self.link.recv(frame).wait()
            self._statuses.append(decompress_op(frame, dst))
        self._held.append(frame)
        self.sent_bytes += n

    def finish(self) -> None:
        if self._stream is not None:
            self._stream.synchronize()
        statuses = [int(st.item()) for st in self._statuses]
        self._statuses.clear()
        self._held.clear()
        for i, st in enumerate(statuses):
            if st != 0:
                raise error_for(st, f"Receiver: message {i} did not decode")


# ---- two processes of one node: the ring in the receiver's GPU memory, shared by CUDA IPC --------------------------

_SLOT_ALIGN = 256  # slot starts (the encoder takes any alignment; 256 keeps its stores whole)


class IpcRing:
    """``depth`` receive slots of ``slot_bytes`` each and their flags, in the receiver's GPU memory (``device``: a CUDA
    device; default the current one). The receiver makes it and hands it to the sender's process through
    torch.multiprocessing (a ``Queue``, or an argument of a spawned process): torch shares its CUDA tensors by IPC
    handle; hand it over before its first layer. The receiver's object must outlive the sender's use of it. A ring
    counts the layers sent and received through it (a copy that another process receives starts at 0 and 0), so it
    serves one sender and one receiver at a time for any number of requests. Both sides may also be in one process
    (two streams of one GPU, or two GPUs): then enqueue each send before the receive that waits for it, since both
    order themselves after the caller's current stream."""

    def __init__(self, slot_bytes: int, depth: int = 2, device=None):
        if depth < 1:
            raise ValueError(f"IpcRing: depth must be at least 1, got {depth}")
        if slot_bytes < 64:
            raise ValueError(f"IpcRing: a slot holds a frame, at least 64 bytes; got slot_bytes={slot_bytes}")
        if not torch.cuda.is_available():
            raise RuntimeError("IpcRing: needs a CUDA device (the ring lives in GPU memory)")
        device = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
        if device.type != "cuda":
            raise ValueError(f"IpcRing: the ring lives in GPU memory, got device {device}")
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        self.depth = int(depth)
        self.slot_bytes = int(slot_bytes)
        stride = -(-self.slot_bytes // _SLOT_ALIGN) * _SLOT_ALIGN
        self.slots = torch.empty((self.depth, stride), dtype=torch.uint8, device=device)
        self.flags = torch.zeros((2, self.depth), dtype=torch.int64, device=device)  # row 0: full, row 1: free
        torch.cuda.synchronize(device)  # the zeros are in memory before a peer reads them
        self.sent = self.received = 0

    @classmethod
    def for_tensor(cls, like: torch.Tensor, depth: int = 2, device=None) -> "IpcRing":
        """A ring whose slots hold the frame of any tensor of like's size and dtype (or smaller), on like's device
        unless ``device`` is given."""
        nbytes = like.numel() * like.element_size()
        return cls(max(_bound_for(nbytes, _did(like)), 64), depth, like.device if device is None else device)

    @property
    def device(self) -> torch.device:
        return self.slots.device

    def __getstate__(self):
        return {"depth": self.depth, "slot_bytes": self.slot_bytes, "slots": self.slots, "flags": self.flags}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.sent = self.received = 0

    def _slot_of(self, k: int):
        """Layer k's slot and how many layers used that slot before it."""
        return k % self.depth, k // self.depth


def _wait_done(stream, timeout: Optional[float], what: str) -> None:
    """Waits on the host until stream has run everything enqueued so far; TimeoutError after timeout seconds (the
    stream stays blocked: a peer that never signals holds it)."""
    if timeout is None:
        stream.synchronize()
        return
    ev = torch.cuda.Event()
    ev.record(stream)
    deadline = time.monotonic() + timeout
    while not ev.query():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: the peer did not answer within {timeout} s")
        time.sleep(0.0005)


class IpcSender(_Side):
    """Sends tensors (CUDA, contiguous) to the :class:`IpcReceiver` of ``ring`` in call order: each is encoded
    (``compress=False``: copied raw) straight into the next slot of the ring in the receiver's memory, on this
    sender's stream, after the caller's current stream has produced it; ``codebook``, ``chunk``, ``checksum`` as
    :class:`Sender`. ``send`` never waits on the host; the tensors must not change until :meth:`finish` returns."""

    def __init__(self, ring: IpcRing, codebook=None, chunk: Optional[int] = None, checksum=True,
                 compress: bool = True):
        if not isinstance(ring, IpcRing):
            raise TypeError(f"IpcSender: expected an IpcRing, got {type(ring).__name__}")
        super().__init__(ring, compress)
        self.ring = ring
        self._books = _Books(codebook)
        self._log2 = _chunk_log2(chunk)
        self._flags = _flags(checksum)
        self._sizes: List[torch.Tensor] = []
        self._held: List[Any] = []

    def _bind(self, t: torch.Tensor):
        if not t.is_cuda:
            raise ValueError("IpcSender.send: the tensor must be a CUDA tensor")
        first = self._device is None
        super()._bind(t)
        if first and self.ring.device != t.device:  # the ring is in another GPU's memory: kernels here reach it
            with torch.cuda.device(t.device):
                check(_ext.cuda_enable_peer_access(self.ring.device.index),
                      f"IpcSender: peer access from {t.device} to {self.ring.device}")

    def send(self, t: torch.Tensor) -> None:
        self._bind(t)
        src = _byte_view(t, "IpcSender.send")
        n = src.numel()
        did = _did(t)
        need = _bound_for(n, did) if self.compress else n
        if need > self.ring.slots.shape[1]:
            raise ValueError(f"IpcSender.send: {n} bytes need a slot of {need} bytes, the ring's have "
                             f"{self.ring.slots.shape[1]}")
        cb = self._books(did) if self.compress else None
        s, r = self.ring._slot_of(self.ring.sent)
        self.ring.sent += 1
        slot = self.ring.slots[s]
        with torch.cuda.device(self._device):
            self._stream.wait_stream(torch.cuda.current_stream(self._device))  # t is ready where the caller made it
            with torch.cuda.stream(self._stream):
                if r > 0:
                    wait_op(self.ring.flags[1], s, r)  # the receiver has decoded the slot's previous frame
                if self.compress:
                    self._sizes.append(compress_into_op(src, did, cb, self._log2, self._flags, slot))
                else:
                    slot[:n].copy_(src, non_blocking=True)
                    self.sent_bytes += n
                signal_op(self.ring.flags[0], s, r + 1)
        self.raw_bytes += n
        self._held.append(src)

    def finish(self, timeout: Optional[float] = None) -> None:
        """Waits until every tensor is in the ring (not until it is decoded: that is the receiver's finish) and adds
        the frames' sizes to ``sent_bytes``. ``timeout`` (seconds): TimeoutError if the receiver stops freeing slots."""
        if self._stream is not None:
            _wait_done(self._stream, timeout, "IpcSender.finish")
        self.sent_bytes += sum(int(z.item()) for z in self._sizes)
        self._sizes.clear()
        self._held.clear()


class IpcReceiver(_Side):
    """Receives what the :class:`IpcSender` of ``ring`` sends, in order, into the caller's tensors (CUDA, on the
    ring's device, contiguous; the same number of bytes and dtype as sent). Each is decoded from its slot on the
    receiver's stream once the sender has signalled it, after the caller's current stream has reached the call (so
    a tensor still in use is not overwritten); then the caller's current stream waits for the decode (in-stream), so
    work enqueued after ``recv`` sees the layer. :meth:`finish` waits for every decode and raises the first error
    (splitzip.CorruptError, ChecksumError, ...) of a bad frame, or CorruptError for a frame of another size."""

    def __init__(self, ring: IpcRing, compress: bool = True):
        if not isinstance(ring, IpcRing):
            raise TypeError(f"IpcReceiver: expected an IpcRing, got {type(ring).__name__}")
        super().__init__(ring, compress)
        self.ring = ring
        self._checks: List[tuple] = []
        self._held: List[Any] = []

    def recv(self, out: torch.Tensor) -> None:
        if not out.is_cuda or out.device != self.ring.device:
            raise ValueError(f"IpcReceiver.recv: the tensor must live on the ring's device {self.ring.device}, "
                             f"got {out.device}")
        self._bind(out)
        dst = _byte_view(out, "IpcReceiver.recv")
        n = dst.numel()
        if self.compress:
            _did(out)
        elif n > self.ring.slots.shape[1]:
            raise ValueError(f"IpcReceiver.recv: {n} bytes, the ring's slots have {self.ring.slots.shape[1]}")
        s, r = self.ring._slot_of(self.ring.received)
        self.ring.received += 1
        slot = self.ring.slots[s]
        caller = torch.cuda.current_stream(self._device)
        with torch.cuda.device(self._device):
            self._stream.wait_stream(caller)
            with torch.cuda.stream(self._stream):
                wait_op(self.ring.flags[0], s, r + 1)  # the sender has written the slot
                if self.compress:
                    status, size = decompress_sized_op(slot, dst)
                    self._checks.append((status, size, n))
                else:
                    dst.copy_(slot[:n], non_blocking=True)
                    self.sent_bytes += n
                signal_op(self.ring.flags[1], s, r + 1)  # the slot is free again
            caller.wait_stream(self._stream)
        self.raw_bytes += n
        self._held.append(dst)

    def finish(self, timeout: Optional[float] = None) -> None:
        """``timeout`` (seconds): TimeoutError if the sender stops sending (the receiver's stream stays blocked)."""
        if self._stream is not None:
            _wait_done(self._stream, timeout, "IpcReceiver.finish")
        checks = [(int(st.item()), int(z.item()), n) for st, z, n in self._checks]
        self._checks.clear()
        self._held.clear()
        for i, (st, got, n) in enumerate(checks):
            if st != 0:
                raise error_for(st, f"IpcReceiver: message {i} did not decode")
            if got != n:
                raise CorruptError(f"IpcReceiver: message {i} decoded to {got} bytes, the tensor has {n}")
