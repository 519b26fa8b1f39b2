"""splitzip: bit-exact lossless compression of LLM KV caches (numpy, torch and cupy tensors; CPU and CUDA).

    import splitzip
    frame = splitzip.compress(kv)            # uint8 array on kv's device
    back = splitzip.decompress(frame)        # 1-D array of kv's dtype; or decompress(frame, out=kv2)
    splitzip.info(frame)                     # {'dtype': 'bf16', 'n_values': ..., 'ratio': ...}
    box = splitzip.compress(kv, keep_shape=True)   # a container that records kv's shape: decompress(box) has it
    splitzip.Container("model.safetensors.spz")["model.layers.0.k"]   # the CLI's containers, items by name
    splitzip.compress_file("kv.npy")         # kv.npy.spz, as `splitzip compress kv.npy` writes it
    book = splitzip.calibrate_channels(sample_kv)   # per-channel windows from [L, 2, T, H, D] sample KV
    box = splitzip.compress_kv(kv, book)     # the book + one version 2 frame per (layer, K/V): more ratio
    table = splitzip.calibrate_max(sample_kv)       # max mode: a symbol table (per channel group) from sample KV
    box = splitzip.compress_kv_max(kv, table)       # the table + one entropy-coded version 3 frame per tensor
    splitzip.decompress(splitzip.compress(kv[0, 1], table, book_tensor=1), table=table)   # one tensor

Frames follow docs/FORMAT.md (format v1; v2 with channel books; v3, the max mode, with symbol tables) and are
byte-identical to the C library's and the CLI's.
Errors raise a subclass of splitzip.Error named after the library status (CorruptError, ChecksumError, ...).
"""

import sys as _sys

from . import _splitzip
from ._channels import ChannelBook, calibrate_channels, compress_kv
from ._container import Container, Item, compress_container
from ._max import RowMap, SymbolTable, calibrate_max, compress_kv_max
from ._core import (
    DTYPE_IDS,
    BufferLike,
    Codebook,
    CodebookLike,
    DTypeLike,
    Tensor,
    _int_arg,
    calibrate,
    check_status,
    compress,
    compress_pages,
    compress_reference,
    decompress,
    decompress_pages,
    decompress_reference,
    dtype_name,
    info,
)
from ._files import compress_bytes, compress_file, decompress_bytes, decompress_file
from ._errors import *  # noqa: F401,F403  (Error and one subclass per status)
from ._errors import __all__ as _error_names

__version__ = _splitzip.version()
FORMAT_VERSION = _splitzip.FORMAT_VERSION


def cuda_available() -> bool:
    """True when the extension was built with CUDA and a CUDA device is visible."""
    return bool(_splitzip.cuda_available())


def compress_bound(n_values: int, dtype: DTypeLike) -> int:
    """Upper bound of a frame's size for n values of dtype (docs/FORMAT.md §4.8); 0 when no frame can hold n values
    (n >= 2^48)."""
    n = _int_arg(n_values, "n_values", 0, (1 << 64) - 1)
    return int(_splitzip.compress_bound(n, DTYPE_IDS[dtype_name(dtype)]))


def register_torch_ops() -> bool:
    """Imports torch and registers the custom ops splitzip::compress / decompress / compress_pages /
    decompress_pages (done automatically when torch was imported before splitzip, or on first use of a torch
    tensor). Returns whether they are registered."""
    from . import _torch_ops
    return _torch_ops.registered


if "torch" in _sys.modules:
    try:
        register_torch_ops()
    except ImportError:
        pass

__all__ = [
    "BufferLike", "ChannelBook", "Codebook", "CodebookLike", "Container", "DTYPE_IDS", "DTypeLike", "FORMAT_VERSION",
    "Item", "RowMap", "SymbolTable", "Tensor", "calibrate", "calibrate_channels", "calibrate_max", "check_status",
    "compress", "compress_bound", "compress_bytes", "compress_container", "compress_file", "compress_kv",
    "compress_kv_max", "compress_pages", "compress_reference", "cuda_available", "decompress", "decompress_bytes",
    "decompress_file", "decompress_pages", "decompress_reference", "dtype_name", "info", "register_torch_ops",
    *_error_names,
]
