"""torch.library custom ops over the splitzip codec: splitzip::compress, splitzip::decompress,
splitzip::compress_pages and splitzip::decompress_pages; splitzip::compress_into and splitzip::decompress_sized (into a
caller's buffer, e.g. a receive slot in a peer's memory; with the decoded size); splitzip::signal and splitzip::wait,
the stream-ordered flags of a GPU-to-GPU hand-off (sz_cuda_signal / sz_cuda_wait, on the current device's current
stream, so that the flags may live in a peer's memory).

They take flat uint8 views of tensors (splitzip's Python layer makes those), run on torch's current CUDA stream for
CUDA tensors (on the CPU codec for CPU tensors), allocate every output and workspace through torch's caching
allocator and never wait for the GPU: sizes and statuses come back as device tensors. Registering them as custom ops
lets torch.compile and CUDA graphs see them as opaque calls with known output shapes.

Not from __future__ import annotations here: torch infers the op schemas from real annotations.
"""

from typing import List, Tuple

import numpy as np
import torch

from . import _splitzip as _ext
from ._errors import check

_SIZES = {1: 2, 2: 2, 3: 4, 4: 1, 5: 1}


def pack_codebook(cb) -> List[int]:
    """(dtype, code_bits, values) or None -> the int list the ops take ([] for the library's default)."""
    return [] if cb is None else [int(cb[0]), int(cb[1])] + [int(v) for v in cb[2]]


def _unpack_codebook(lst: List[int]):
    return None if len(lst) == 0 else (lst[0], lst[1], list(lst[2:]))


def _stream(device: torch.device) -> int:
    return torch.cuda.current_stream(device).cuda_stream


def _workspace_for(nbytes: int, device: torch.device):
    """The cached workspace of the device's current stream (see _workspace)."""
    from . import _workspace
    return _workspace.get("torch", device.index if device.index is not None else torch.cuda.current_device(),
                          _stream(device), nbytes,
                          lambda n: torch.zeros(n, dtype=torch.uint8, device=device))


def _bound_for(nbytes: int, dtype: int) -> int:
    if dtype not in _SIZES:
        return 0
    return int(_ext.compress_bound(nbytes // _SIZES[dtype], dtype))


def _compress_to(src: torch.Tensor, dtype: int, codebook: List[int], chunk_log2: int, flags: int,
                 dst: torch.Tensor, size: torch.Tensor) -> None:
    """Encodes src into dst (at least the bound; on a GPU it may be a peer's memory, imported by CUDA IPC) and writes
    the frame size to size (int64[1], on src's device)."""
    n = src.numel() // _SIZES.get(dtype, 1)
    cb = _unpack_codebook(codebook)
    if src.is_cuda:
        if not dst.is_cuda:
            raise ValueError("compress: a CUDA source needs a CUDA destination")
        with torch.cuda.device(src.device):
            st, ws = _ext.cuda_compress_workspace_size(n, dtype, chunk_log2, flags)
            check(st, "compress")
            workspace = _workspace_for(ws, src.device)
            check(_ext.cuda_compress(src, n, dtype, cb, chunk_log2, flags, dst, workspace, size,
                                     _stream(src.device)), "compress")
    else:
        if dst.is_cuda:
            raise ValueError("compress: a host source needs a host destination")
        st, nbytes = _ext.compress(src.numpy(), n, dtype, cb, chunk_log2, flags, 0, dst.numpy())
        check(st, "compress")
        size.fill_(nbytes)


def _compress_impl(src: torch.Tensor, dtype: int, codebook: List[int], chunk_log2: int,
                   flags: int) -> Tuple[torch.Tensor, torch.Tensor]:
    dst = torch.empty(_bound_for(src.numel(), dtype), dtype=torch.uint8, device=src.device)
    size = torch.zeros(1, dtype=torch.int64, device=src.device)
    _compress_to(src, dtype, codebook, chunk_log2, flags, dst, size)
    return dst, size


def _compress_into_impl(src: torch.Tensor, dtype: int, codebook: List[int], chunk_log2: int, flags: int,
                        dst: torch.Tensor) -> torch.Tensor:
    """compress into the caller's dst (a flat uint8 tensor of at least the bound: a receive slot, say); returns the
    frame size as a device int64[1]."""
    size = torch.zeros(1, dtype=torch.int64, device=src.device)
    _compress_to(src, dtype, codebook, chunk_log2, flags, dst, size)
    return size


def _decompress_to(frame: torch.Tensor, out: torch.Tensor, status: torch.Tensor, size) -> None:
    """Decodes frame (which may be followed by unused bytes: a receive slot) into out; the status (int32[1]) and,
    if size is a tensor, the bytes written (int64[1], 0 on error) go to device tensors."""
    if frame.is_cuda:
        with torch.cuda.device(frame.device):
            st, ws = _ext.cuda_decompress_workspace_size(frame.numel(), out.numel())
            check(st, "decompress")
            workspace = _workspace_for(ws, frame.device)
            check(_ext.cuda_decompress(frame, out, workspace, status, _stream(frame.device), size), "decompress")
    else:
        st, nbytes = _ext.decompress(frame.numpy(), out.numpy(), 0)
        status.fill_(st)
        if size is not None:
            size.fill_(nbytes if st == 0 else 0)


def _decompress_impl(frame: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    status = torch.full((1,), -1, dtype=torch.int32, device=frame.device)
    _decompress_to(frame, out, status, None)
    return status


def _decompress_sized_impl(frame: torch.Tensor, out: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """decompress, also returning the bytes written (int64[1]) so that a caller can check them without a host wait."""
    status = torch.full((1,), -1, dtype=torch.int32, device=frame.device)
    size = torch.zeros(1, dtype=torch.int64, device=frame.device)
    _decompress_to(frame, out, status, size)
    return status, size


def _flag_args(flags: torch.Tensor, value: int, what: str) -> int:
    """Checks a flag call's arguments before anything touches CUDA; returns the stream to enqueue on."""
    if not flags.is_cuda:
        raise ValueError(f"{what}: the flags must be a CUDA tensor (device memory, or a peer's by CUDA IPC)")
    if not 0 <= value < 1 << 64:
        raise ValueError(f"{what}: a flag value is a uint64, got {value}")
    return torch.cuda.current_stream().cuda_stream


def _signal_impl(flags: torch.Tensor, index: int, value: int) -> None:
    """After the earlier work of the current device's current stream, makes its writes visible system-wide and sets
    flags' 8-byte word `index` to value (sz_cuda_signal). flags may live in a peer's memory (CUDA IPC)."""
    stream = _flag_args(flags, value, "signal")
    check(_ext.cuda_signal(flags, index, value, stream), "signal")


def _wait_impl(flags: torch.Tensor, index: int, value: int) -> None:
    """Later work of the current device's current stream starts once flags' 8-byte word `index` is at least value
    (sz_cuda_wait; no host wait). flags may live in a peer's memory (CUDA IPC)."""
    stream = _flag_args(flags, value, "wait")
    check(_ext.cuda_wait(flags, index, value, stream), "wait")


def _pointer_array(pages: List[torch.Tensor], device: torch.device) -> torch.Tensor:
    """The pages' device addresses as a device int64 tensor (copied from pinned memory, asynchronously)."""
    host = torch.from_numpy(np.array([p.data_ptr() for p in pages], dtype=np.uint64).view(np.int64))
    return host.pin_memory().to(device, non_blocking=True)


def _compress_pages_impl(pages: List[torch.Tensor], page_values: int, dtype: int, codebook: List[int],
                         chunk_log2: int, flags: int) -> Tuple[torch.Tensor, torch.Tensor]:
    device = pages[0].device
    n_pages = len(pages)
    if not pages[0].is_cuda:
        return _compress_impl(torch.cat(pages), dtype, codebook, chunk_log2, flags)
    cb = _unpack_codebook(codebook)
    dst = torch.empty(_bound_for(n_pages * pages[0].numel(), dtype), dtype=torch.uint8, device=device)
    size = torch.zeros(1, dtype=torch.int64, device=device)
    with torch.cuda.device(device):
        ptrs = _pointer_array(pages, device)
        st, ws = _ext.cuda_compress_pages_workspace_size(n_pages, page_values, dtype, chunk_log2, flags)
        check(st, "compress_pages")
        workspace = _workspace_for(ws, device)
        check(_ext.cuda_compress_pages(ptrs, n_pages, page_values, dtype, cb, chunk_log2, flags, dst, workspace,
                                       size, _stream(device)), "compress_pages")
    return dst, size


def _decompress_pages_impl(frame: torch.Tensor, pages: List[torch.Tensor], page_values: int) -> torch.Tensor:
    device = frame.device
    status = torch.full((1,), -1, dtype=torch.int32, device=device)
    if not frame.is_cuda:
        total = sum(p.numel() for p in pages)
        tmp = torch.empty(total, dtype=torch.uint8)
        st, _ = _ext.decompress(frame.numpy(), tmp.numpy(), 0)
        if st == 0:
            offset = 0
            for p in pages:
                p.view(-1).copy_(tmp[offset:offset + p.numel()])
                offset += p.numel()
        status.fill_(st)
        return status
    with torch.cuda.device(device):
        ptrs = _pointer_array(pages, device)
        st, ws = _ext.cuda_decompress_workspace_size(frame.numel(), sum(p.numel() for p in pages))
        check(st, "decompress_pages")
        workspace = _workspace_for(ws, device)
        check(_ext.cuda_decompress_pages(frame, ptrs, len(pages), page_values, workspace, status,
                                         _stream(device)), "decompress_pages")
    return status


compress_op = _compress_impl
compress_into_op = _compress_into_impl
decompress_op = _decompress_impl
decompress_sized_op = _decompress_sized_impl
signal_op = _signal_impl
wait_op = _wait_impl
compress_pages_op = _compress_pages_impl
decompress_pages_op = _decompress_pages_impl
registered = False

if hasattr(torch, "library") and hasattr(torch.library, "custom_op"):
    try:
        _c = torch.library.custom_op("splitzip::compress", mutates_args=())(_compress_impl)
        _d = torch.library.custom_op("splitzip::decompress", mutates_args=("out",))(_decompress_impl)
        _cp = torch.library.custom_op("splitzip::compress_pages", mutates_args=())(_compress_pages_impl)
        _dp = torch.library.custom_op("splitzip::decompress_pages", mutates_args=("pages",))(_decompress_pages_impl)
        _ci = torch.library.custom_op("splitzip::compress_into", mutates_args=("dst",))(_compress_into_impl)
        _ds = torch.library.custom_op("splitzip::decompress_sized", mutates_args=("out",))(_decompress_sized_impl)
        # A wait writes nothing, but is declared to mutate its flags so that no graph pass drops or reorders it.
        _sg = torch.library.custom_op("splitzip::signal", mutates_args=("flags",))(_signal_impl)
        _wt = torch.library.custom_op("splitzip::wait", mutates_args=("flags",))(_wait_impl)

        @_c.register_fake
        def _(src, dtype, codebook, chunk_log2, flags):
            return (src.new_empty(_bound_for(src.numel(), dtype)), src.new_empty(1, dtype=torch.int64))

        @_d.register_fake
        def _(frame, out):
            return frame.new_empty(1, dtype=torch.int32)

        @_cp.register_fake
        def _(pages, page_values, dtype, codebook, chunk_log2, flags):
            n = len(pages) * pages[0].numel()
            return (pages[0].new_empty(_bound_for(n, dtype)), pages[0].new_empty(1, dtype=torch.int64))

        @_dp.register_fake
        def _(frame, pages, page_values):
            return frame.new_empty(1, dtype=torch.int32)

        @_ci.register_fake
        def _(src, dtype, codebook, chunk_log2, flags, dst):
            return src.new_empty(1, dtype=torch.int64)

        @_ds.register_fake
        def _(frame, out):
            return frame.new_empty(1, dtype=torch.int32), frame.new_empty(1, dtype=torch.int64)

        @_sg.register_fake
        def _(flags, index, value):
            return None

        @_wt.register_fake
        def _(flags, index, value):
            return None

        compress_op = torch.ops.splitzip.compress
        compress_into_op = torch.ops.splitzip.compress_into
        decompress_sized_op = torch.ops.splitzip.decompress_sized
        signal_op = torch.ops.splitzip.signal
        wait_op = torch.ops.splitzip.wait
        decompress_op = torch.ops.splitzip.decompress
        compress_pages_op = torch.ops.splitzip.compress_pages
        decompress_pages_op = torch.ops.splitzip.decompress_pages
        registered = True
    except (RuntimeError, TypeError, ValueError) as exc:  # an old torch, or registered twice
        import warnings
        warnings.warn(f"splitzip: torch custom ops not registered ({exc}); using plain calls")
