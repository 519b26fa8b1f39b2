"""What the engine adapters share: compress into and decompress from caller-owned buffers of any framework.

Host buffers are coded in place (the library writes the frame straight into the caller's buffer and decodes straight
into the caller's tensor). On a GPU the module's calls return a new device frame, which is copied into the caller's
buffer (one device-to-device copy of the compressed bytes).
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from .. import _splitzip as _ext
from .._core import (
    _DTYPE_NAMES,
    _DTYPE_SIZES,
    _Tensor,
    _chunk_log2,
    _codebook_arg,
    _flags,
    _frame_info_host,
    _threads,
    compress,
    compress_pages,
    decompress,
    decompress_pages,
)
from .._errors import check, error_for


class Codec:
    """The codec settings of an adapter: dtype (format id), codebook, chunk, threads, checksums. ``compress_into``
    and ``decompress_into`` work on flat byte views (:class:`splitzip._core._Tensor`)."""

    def __init__(self, did: int, codebook=None, chunk: Optional[int] = None, threads: Optional[int] = None,
                 checksum: bool = True):
        self.did = did
        self.value_size = _DTYPE_SIZES[did]
        self.codebook = codebook
        self._cb = _codebook_arg(codebook, did)
        self.chunk = chunk
        self._log2 = _chunk_log2(chunk)
        self.threads = _threads(threads)
        self.checksum = checksum
        self._flags = _flags(checksum)

    @property
    def dtype(self) -> str:
        return _DTYPE_NAMES[self.did]

    def bound(self, n_values: int) -> int:
        """The largest frame of n values (docs/FORMAT.md §4.8)."""
        return int(_ext.compress_bound(n_values, self.did))

    def values_of(self, t: _Tensor, what: str) -> int:
        if t.nbytes % self.value_size:
            raise ValueError(f"{what}: {t.nbytes} bytes are not a whole number of {self.dtype} values")
        return t.nbytes // self.value_size

    def compress_into(self, src: _Tensor, dst: _Tensor, what: str = "compress_into") -> int:
        """Writes the frame of src's bytes into the start of dst; returns its size. dst must hold
        ``bound(values)`` bytes (so that the call never depends on the data)."""
        n = self.values_of(src, what)
        need = self.bound(n)
        if dst.nbytes < need:
            raise ValueError(f"{what}: dst holds {dst.nbytes} bytes, the bound for {n} {self.dtype} values is "
                             f"{need} (size it with max_output_bytes / estimate_serialized_size)")
        if src.device != dst.device:
            raise ValueError(f"{what}: src is in {src.device} memory, dst in {dst.device} memory")
        if src.device == "cpu":
            status, size = _ext.compress(src.bytes, n, self.did, self._cb, self._log2, self._flags, self.threads,
                                         dst.bytes)
            check(status, what)
            return int(size)
        frame = compress(src.bytes, self.codebook, chunk=self.chunk, checksum=self.checksum, dtype=self.dtype)
        size = int(frame.shape[0])
        dst.bytes[:size] = frame
        return size

    def compress_pages(self, pages: Sequence, what: str = "compress_pages", dst: Optional[_Tensor] = None):
        """One frame of equal-size pages in list order (one launch on a GPU): a device tensor, or for host pages a
        numpy array of its own. Host pages are gathered into, and compressed in, buffers this codec keeps from
        call to call (fresh allocations of that size cost more than the codec on a loaded host). With ``dst`` (a
        byte view of ``bound`` bytes on the pages' device) the frame is written into it and its size returned."""
        first = _Tensor(pages[0], f"{what}: pages[0]") if pages else None
        if first is None or first.device != "cpu":
            frame = compress_pages(pages, self.codebook, chunk=self.chunk, threads=self.threads,
                                   checksum=self.checksum, dtype=self.dtype)
            if dst is None:
                return frame
            f = _Tensor(frame, "frame")
            if f.device != dst.device:
                raise ValueError(f"{what}: dst is in {dst.device} memory, the pages in {f.device} memory")
            dst.bytes[: f.nbytes] = f.bytes
            return f.nbytes
        ts = [_Tensor(p, f"{what}: pages[{i}]") for i, p in enumerate(pages)]
        size = first.nbytes
        if any(t.nbytes != size for t in ts):
            raise ValueError(f"{what}: all pages must have the same size")
        total = size * len(ts)
        gathered = self._scratch("_gather", total)
        for i, t in enumerate(ts):
            gathered[i * size:(i + 1) * size] = t.bytes
        n = self.values_of(_Tensor(gathered, what), what)
        if dst is not None and dst.device != "cpu":
            raise ValueError(f"{what}: dst is in {dst.device} memory, the pages in host memory")
        return self._compress_gathered(gathered, n, None if dst is None else dst.bytes, what)

    def _compress_gathered(self, gathered: np.ndarray, n: int, dst: Optional[np.ndarray], what: str):
        """The frame of n values gathered in host memory: into dst (returns its size) or into this codec's frame
        buffer (returns a copy of the frame)."""
        out = self._scratch("_frame", self.bound(n)) if dst is None else dst
        status, fsize = _ext.compress(gathered, n, self.did, self._cb, self._log2, self._flags, self.threads, out)
        check(status, what)
        return out[:fsize].copy() if dst is None else int(fsize)

    @staticmethod
    def _check_holds(raw: dict, total: int, what: str) -> None:
        """The frame (its header raw) must hold exactly the pages' total bytes."""
        if raw["decompressed_size"] != total:
            raise error_for(2 if raw["decompressed_size"] > total else 1,
                            f"{what}: the frame holds {raw['decompressed_size']} bytes, the pages {total}")

    def _page_values(self, table, what: str) -> int:
        if table.page_bytes % self.value_size:
            raise ValueError(f"{what}: pages of {table.page_bytes} bytes are not whole {self.dtype} values")
        return table.page_bytes // self.value_size

    def compress_table(self, table, what: str = "compress_pages", dst=None):
        """One frame of a :class:`~splitzip.integrations._pagetable.PageTable`'s pages, in table order.

        GPU (torch CUDA pages): one launch over the device page-pointer table, enqueued on the current stream;
        returns ``(buffer, size)``: the frame at the start of ``buffer`` (``dst`` when given: a uint8 CUDA tensor
        of at least ``bound`` bytes, else a new one of ``bound`` bytes) and its size as an int64 device tensor of
        one element, so nothing waits. Host: the pages gathered into a buffer this codec keeps, coded into ``dst``
        (a uint8 numpy array of ``bound`` bytes; returns its size) or into a new array (returns it)."""
        page_values = self._page_values(table, what)
        n = page_values * table.n_pages
        if table.device == "cuda":
            import torch

            from .. import _torch_ops
            device = table.groups[0].obj.device
            if dst is None:
                dst = torch.empty(self.bound(n), dtype=torch.uint8, device=device)
            elif dst.device != device or dst.dtype != torch.uint8 or dst.dim() != 1:
                raise ValueError(f"{what}: dst must be a 1-D uint8 tensor on {device}")
            if dst.numel() < self.bound(n):
                raise ValueError(f"{what}: dst holds {dst.numel()} bytes, the bound for {n} {self.dtype} values is "
                                 f"{self.bound(n)}")
            size = torch.zeros(1, dtype=torch.int64, device=device)
            with torch.cuda.device(device):
                st, ws = _ext.cuda_compress_pages_workspace_size(table.n_pages, page_values, self.did, self._log2,
                                                                 self._flags)
                check(st, what)
                workspace = _torch_ops._workspace_for(ws, device)
                check(_ext.cuda_compress_pages(table.pointers(), table.n_pages, page_values, self.did, self._cb,
                                               self._log2, self._flags, dst, workspace, size,
                                               _torch_ops._stream(device)), what)
            return dst, size
        gathered = self._scratch("_gather", table.nbytes)
        table.gather(gathered)
        if dst is not None and (not isinstance(dst, np.ndarray) or dst.dtype != np.uint8):
            raise ValueError(f"{what}: dst must be a uint8 host array like the pages")
        return self._compress_gathered(gathered, n, dst, what)

    def decompress_table(self, frame, table, status=None, what: str = "decompress_pages", header=None) -> None:
        """Decodes a frame into a :class:`~splitzip.integrations._pagetable.PageTable`'s pages (its skipped pages
        left alone). ``header``: the frame's header as :meth:`frame_header` gives it (dtype and size checked), when
        the caller has read it already (else it is read here; for a device frame a 64-byte copy, which waits).

        GPU: ``frame`` a uint8 CUDA tensor; one launch over the page-pointer table, enqueued on the current stream
        with ``status`` (an int32 device tensor of at least one element) receiving the result, or waited for and
        checked when ``status`` is None. Host: decoded into a buffer this codec keeps and scattered."""
        page_values = self._page_values(table, what)
        raw = header if header is not None else self.frame_header(_Tensor(frame, "frame"), what)
        total = table.nbytes
        self._check_holds(raw, total, what)
        if table.device == "cuda":
            import torch

            from .. import _torch_ops
            device = table.groups[0].obj.device
            if not (isinstance(frame, torch.Tensor) and frame.device == device and frame.dtype == torch.uint8
                    and frame.dim() == 1):
                raise ValueError(f"{what}: the frame must be a 1-D uint8 tensor on {device}, like the pages")
            scratch = 0
            if table.skip:
                scratch = self._device_scratch(device, table.page_bytes).data_ptr()
            st = status if status is not None else torch.full((1,), -1, dtype=torch.int32, device=device)
            with torch.cuda.device(device):
                s_ws, ws = _ext.cuda_decompress_workspace_size(frame.numel(), total)
                check(s_ws, what)
                workspace = _torch_ops._workspace_for(ws, device)
                check(_ext.cuda_decompress_pages(frame, table.pointers(scratch), table.n_pages, page_values,
                                                 workspace, st, _torch_ops._stream(device)), what)
            if status is None:
                check(int(st.reshape(-1)[0].item()), what)
            return
        f = _Tensor(frame, "frame")
        if f.device != "cpu":
            raise ValueError(f"{what}: the frame is in {f.device} memory, the pages in host memory")
        tmp = self._scratch("_gather", total)
        st, _ = _ext.decompress(f.bytes[: int(raw["frame_size"])], tmp, self.threads)
        check(st, what)
        table.scatter(tmp)

    def _device_scratch(self, device, nbytes: int):
        """A device page that skipped pages decode into (never read)."""
        import torch
        cache = self.__dict__.setdefault("_dev_scratch", {})
        buf = cache.get(device)
        if buf is None or buf.numel() < nbytes:
            buf = cache[device] = torch.empty(nbytes, dtype=torch.uint8, device=device)
        return buf

    def _scratch(self, name: str, nbytes: int) -> np.ndarray:
        buf = getattr(self, name, None)
        if buf is None or buf.shape[0] < nbytes:
            buf = np.empty(nbytes, dtype=np.uint8)
            setattr(self, name, buf)
        return buf[:nbytes]

    def frame_header(self, src: _Tensor, what: str) -> dict:
        """The frame header at the start of src (for a device buffer: a copy of its first 64 bytes)."""
        head = src.bytes[: _ext.FRAME_HEADER_SIZE]
        if src.device != "cpu":
            head = head.cpu().numpy() if hasattr(head, "cpu") else head.get()
        raw = _frame_info_host(np.ascontiguousarray(head), what)
        if raw["dtype_id"] != self.did:
            raise error_for(6, f"{what}: the frame holds {_DTYPE_NAMES.get(raw['dtype_id'], raw['dtype_id'])} "
                               f"values, this adapter codes {self.dtype}")
        if raw["frame_size"] > src.nbytes:
            raise error_for(3, f"{what}: the frame header says {raw['frame_size']} bytes, the buffer holds "
                               f"{src.nbytes}")
        return raw

    def decompress_into(self, src: _Tensor, dst: _Tensor, what: str = "decompress_into", status=None) -> int:
        """Decodes the frame at the start of src into the start of dst; returns the bytes written. On a GPU the
        decode is enqueued with ``status`` (an int32 device tensor) when given, else waited for."""
        raw = self.frame_header(src, what)
        size = int(raw["decompressed_size"])
        if dst.nbytes < size:
            raise error_for(2, f"{what}: the frame holds {size} bytes, dst {dst.nbytes}")
        if src.device != dst.device:
            raise ValueError(f"{what}: src is in {src.device} memory, dst in {dst.device} memory")
        frame = src.bytes[: int(raw["frame_size"])]
        if src.device == "cpu":
            st, _ = _ext.decompress(frame, dst.bytes[:size], self.threads)
            check(st, what)
            return size
        decompress(frame, out=dst.bytes[:size], status=status)
        return size

    def decompress_pages(self, frame, pages: Sequence, status=None, what: str = "decompress_pages") -> None:
        """Decodes a frame into equal-size pages in list order: on a GPU one launch (enqueued with ``status``);
        on the host the frame is decoded into a buffer this codec keeps and scattered into the pages."""
        f = _Tensor(frame, "frame")
        if f.device != "cpu":
            if status is None:
                decompress_pages(frame, pages, threads=self.threads)
            else:
                decompress_pages(frame, pages, threads=self.threads, status=status)
            return
        ts = [_Tensor(p, f"{what}: pages[{i}]", writable=True) for i, p in enumerate(pages)]
        if not ts:
            raise ValueError(f"{what}: no pages")
        size = ts[0].nbytes
        if any(t.nbytes != size or t.device != "cpu" for t in ts):
            raise ValueError(f"{what}: all pages must be host tensors of the same size")
        raw = self.frame_header(f, what)
        total = size * len(ts)
        self._check_holds(raw, total, what)
        tmp = self._scratch("_gather", total)
        st, _ = _ext.decompress(f.bytes[: int(raw["frame_size"])], tmp, self.threads)
        check(st, what)
        for i, t in enumerate(ts):
            t.bytes[...] = tmp[i * size:(i + 1) * size]
