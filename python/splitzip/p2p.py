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
"""

from __future__ import annotations

import contextlib
import queue
import threading
from typing import Any, Dict, List, Optional

import torch

from ._core import DTYPE_IDS, _chunk_log2, _codebook_arg, _flags
from ._errors import CorruptError, error_for
from ._torch_ops import _bound_for, compress_op, decompress_op, pack_codebook

__all__ = ["TorchLink", "LoopbackLink", "Sender", "Receiver"]

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
        self._codebook = codebook
        self._packed: Dict[int, List[int]] = {}  # the codebook as the op takes it, resolved once per dtype
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
        cb = self._packed.get(did)
        if cb is None:
            cb = self._packed[did] = pack_codebook(_codebook_arg(self._codebook, did))
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
