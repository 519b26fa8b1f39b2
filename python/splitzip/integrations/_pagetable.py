"""Page tables of paged KV caches, built with array operations: no Python object and no Python loop per page.

A cache (one tensor) holds one or more *groups* of equal-size pages at a fixed stride: a vLLM cache
``(2, num_blocks, ...)`` has two (its K half and its V half), a blocks-first cache one, each of SGLang's per-layer
pools one. A :class:`Group` is found once per tensor from its shape and strides (no page is sliced): the byte offset
of its page 0 from the tensor's first element, the page stride, the page size and the number of pages. A
:class:`PageTable` is the pages ``ids`` of every group, group after group, in id order within a group: exactly the
order of the frame of the pages' concatenation.

- On a GPU (torch CUDA tensors) the table is an int64 device tensor of page addresses, ``base_g + stride_g * id``,
  computed on the device from one small non-blocking upload of the groups' bases and strides and the ids; it is
  handed straight to the library's paged calls (one launch for all pages). Leading pages marked to be skipped
  point at a scratch page instead. :func:`pointer_table` is that computation; on CPU tensors it gives the host
  addresses of the same pages (the tests check it there against each page's own address).
- On the host (numpy arrays, torch CPU tensors) each group is a 2-D byte view (one row per page) and the pages are
  gathered with one ``numpy.take`` per group, or scattered with one indexed assignment per group.

The ids are checked once, vectorised, against the groups' page counts; a page must be one dense run of memory
(a permuted dense block is taken in its physical order, as :func:`splitzip.integrations.vllm._dense` does).
"""

from __future__ import annotations

import sys
from typing import Any, List, Optional, Sequence

import numpy as np

from .._core import _FLOAT_ELEMENTS

_INT_VIEWS = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}


def _framework(x: Any) -> str:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        if x.device.type not in ("cpu", "cuda"):
            raise ValueError(f"tensors on {x.device.type} are not supported (cpu and cuda are)")
        return "torch"
    if isinstance(x, np.ndarray):
        return "numpy"
    return "other"


def supported(x: Any) -> bool:
    """Whether ``x`` is a tensor the page tables handle (numpy arrays, torch CPU / CUDA tensors); others (cupy)
    take the list-of-pages path."""
    return _framework(x) in ("numpy", "torch")


class Group:
    """Equal-size pages of one tensor at a fixed stride: page ``i`` is the ``page_bytes`` bytes from
    ``origin + i * stride`` (bytes from the tensor's first element)."""

    __slots__ = ("obj", "framework", "device", "element", "itemsize", "origin", "stride", "num_pages",
                 "page_bytes", "page_shape")

    def __init__(self, obj: Any, origin: int, stride: int, num_pages: int, page_bytes: int, page_shape: tuple,
                 framework: str, device: str, element: str, itemsize: int):
        self.obj, self.origin, self.stride, self.num_pages = obj, origin, stride, num_pages
        self.page_bytes, self.page_shape = page_bytes, page_shape
        self.framework, self.device, self.element, self.itemsize = framework, device, element, itemsize

    def base(self) -> int:
        """The address of page 0 (host or device)."""
        return _address(self.obj, self.framework) + self.origin

    def rows(self) -> np.ndarray:
        """Host tensors: a (num_pages, page_bytes) uint8 view, row i page i (writable when the tensor is)."""
        x = self.obj
        if self.framework == "torch":
            x = x.detach().view(getattr(sys.modules["torch"], _INT_VIEWS[self.itemsize])).numpy()
        span = self.origin + (self.num_pages - 1) * self.stride + self.page_bytes
        flat = np.lib.stride_tricks.as_strided(x, shape=(-(-span // self.itemsize),), strides=(self.itemsize,))
        flat = flat.view(np.uint8)
        return np.lib.stride_tricks.as_strided(flat[self.origin:], shape=(self.num_pages, self.page_bytes),
                                               strides=(self.stride, 1))


def _address(x: Any, framework: str) -> int:
    return int(x.data_ptr()) if framework == "torch" else int(x.__array_interface__["data"][0])


def groups_of(x: Any, name: str, group_axis: bool, page_slots: int = 1) -> List[Group]:
    """The page groups of tensor ``x``. ``group_axis``: axis 0 separates groups (vLLM's K / V axis) and the pages
    run along axis 1; otherwise the pages run along axis 0. ``page_slots``: entries of the page axis per page
    (SGLang's page_size over a pool's slot axis; 1 for a vLLM block). A page is every later axis (and its
    ``page_slots`` entries of the page axis); it must be one dense run of memory."""
    framework = _framework(x)
    if framework == "other":
        raise TypeError(f"{name}: expected a numpy array or a torch tensor, got {type(x).__name__}")
    shape = tuple(int(d) for d in x.shape)
    if framework == "torch":
        strides, itemsize = tuple(int(s) for s in x.stride()), int(x.element_size())
        element, device = str(x.dtype)[len("torch."):], ("cuda" if x.is_cuda else "cpu")
    else:
        itemsize = int(x.itemsize)
        strides, element, device = tuple(int(s) // itemsize for s in x.strides), x.dtype.name, "cpu"
        if any(int(s) % itemsize for s in x.strides):
            raise ValueError(f"{name}: strides {x.strides} are not whole elements")
    axis = 1 if group_axis else 0
    if len(shape) <= axis:
        raise ValueError(f"{name}: shape {shape} has no page axis")
    dims = [(page_slots, strides[axis])] + list(zip(shape[axis + 1:], strides[axis + 1:]))
    if any(s < 0 for n, s in dims if n != 1) or strides[axis] < 0 or (group_axis and strides[0] < 0):
        raise ValueError(f"{name}: negative strides {strides} are not supported")
    expect = 1
    for st, n in sorted((s, n) for n, s in dims if n != 1):
        if st != expect:
            raise ValueError(f"{name}: a page of strides {tuple(strides[axis:])} is not one dense run of memory")
        expect *= n
    page_elems = expect
    # the page's logical shape when its axes are in C order, else one flat run (its physical order)
    logical = ([page_slots] if page_slots > 1 else []) + list(shape[axis + 1:])
    lstrides = ([strides[axis]] if page_slots > 1 else []) + list(strides[axis + 1:])
    c_order = all(st == int(np.prod(logical[i + 1:], dtype=np.int64))
                  for i, (n, st) in enumerate(zip(logical, lstrides)) if n != 1)
    page_shape = tuple(logical) if c_order else (page_elems,)
    num_pages = shape[axis] // page_slots
    origins = [g * strides[0] * itemsize for g in range(shape[0])] if group_axis else [0]
    return [Group(x, o, page_slots * strides[axis] * itemsize, num_pages, page_elems * itemsize, page_shape,
                  framework, device, element, itemsize) for o in origins]


def check_ids(ids: Any, limit: Optional[int], what: str, kind: str = "block") -> np.ndarray:
    """ids as a 1-D int64 numpy array in [0, limit) (limit None: not negative): a list of ints, or an integer numpy
    array or torch tensor (a device tensor is copied to the host: one wait). TypeError / ValueError otherwise."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(ids, torch.Tensor):
        if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
            raise TypeError(f"{what}: {kind} ids must be integers, got a {ids.dtype} tensor")
        a = ids.detach().cpu().numpy()
    elif isinstance(ids, np.ndarray):
        a = ids
    elif isinstance(ids, (list, tuple, range)):
        if any(isinstance(i, bool) for i in ids):
            raise TypeError(f"{what}: {kind} ids must be integers, got a bool")
        a = np.asarray(ids) if len(ids) else np.zeros(0, dtype=np.int64)
    else:
        raise TypeError(f"{what}: {kind} ids must be a list or a 1-D integer array, got {type(ids).__name__}")
    if a.dtype.kind not in "iu" or a.ndim != 1:
        raise TypeError(f"{what}: {kind} ids must be a 1-D array of integers, got {a.dtype} of shape {a.shape}")
    if a.shape[0] == 0:
        raise ValueError(f"{what}: no {kind} ids (it is empty)")
    a = a.astype(np.int64, copy=False)
    lo, hi = int(a.min()), int(a.max())
    if lo < 0:
        raise ValueError(f"{what}: {kind} {lo} is negative")
    if limit is not None and hi >= limit:
        raise ValueError(f"{what}: {kind} {hi} outside the {limit} {kind}s of the cache")
    return a


def pointer_table(groups: Sequence[Group], ids: np.ndarray, skip: int = 0, scratch: int = 0):
    """The page addresses of ``ids`` in every group, group after group: ``base_g + stride_g * id``, int64, computed
    where the groups live: for torch groups a torch tensor on their device (for CUDA after one non-blocking upload
    of ``bases, strides, ids`` from pinned memory, so the host does not wait), for numpy groups a numpy array (the
    same expression). The first ``skip`` ids of each group get the address ``scratch`` instead."""
    g = len(groups)
    host = np.empty(2 * g + ids.shape[0], dtype=np.int64)
    host[:g] = [p.base() for p in groups]
    host[g:2 * g] = [p.stride for p in groups]
    host[2 * g:] = ids
    packed = host
    first = groups[0]
    if first.framework == "torch":
        import torch
        packed = torch.from_numpy(host)
        if first.device == "cuda":
            packed = packed.pin_memory().to(first.obj.device, non_blocking=True)
    ptrs = packed[:g, None] + packed[g:2 * g, None] * packed[None, 2 * g:]
    if skip:
        ptrs[:, :skip] = scratch
    return ptrs.reshape(-1)


class PageTable:
    """The pages ``ids`` of each of ``groups`` (all of one framework and device, pages of one size and element
    type), in group order. ``skip``: for a decode, the first ``skip`` ids of each group are not written (their
    pages decode into a scratch page on a GPU, are left out on the host)."""

    __slots__ = ("groups", "ids", "skip", "device", "framework", "page_bytes", "n_pages", "element", "itemsize",
                 "page_shape")

    def __init__(self, groups: Sequence[Group], ids: np.ndarray, what: str, skip: int = 0):
        if not groups:
            raise ValueError(f"{what}: no pages")
        first = groups[0]
        for i, p in enumerate(groups):
            if (p.framework, p.device, p.page_bytes, p.element) != (first.framework, first.device, first.page_bytes,
                                                                    first.element):
                raise ValueError(f"{what}: all pages must be of one framework, device, size and element type "
                                 f"(group {i} differs from group 0)")
            if p.framework == "torch" and p.device == "cuda" and p.obj.device != first.obj.device:
                raise ValueError(f"{what}: all pages must be on one device (group {i} is on {p.obj.device})")
        if first.element not in _FLOAT_ELEMENTS and first.element != "uint8":
            raise TypeError(f"{what}: pages hold {first.element} values; SplitZip codes {sorted(_FLOAT_ELEMENTS)}")
        self.groups, self.ids, self.skip = list(groups), ids, int(skip)
        self.device, self.framework = first.device, first.framework
        self.page_bytes, self.element, self.itemsize = first.page_bytes, first.element, first.itemsize
        self.page_shape = first.page_shape
        self.n_pages = len(self.groups) * int(ids.shape[0])
        if self.n_pages >= 1 << 32:
            raise ValueError(f"{what}: too many pages")

    @property
    def nbytes(self) -> int:
        return self.n_pages * self.page_bytes

    def pointers(self, scratch: int = 0):
        """The address table (see :func:`pointer_table`): what the GPU calls take."""
        return pointer_table(self.groups, self.ids, self.skip, scratch)

    def gather(self, out: np.ndarray) -> None:
        """Host: the pages' bytes back to back into ``out`` (a uint8 array of ``nbytes``)."""
        n = self.ids.shape[0]
        rows = out.reshape(len(self.groups), n, self.page_bytes)
        for g, p in enumerate(self.groups):
            np.take(p.rows(), self.ids, axis=0, out=rows[g], mode="clip")  # ids checked already

    def scatter(self, src: np.ndarray) -> None:
        """Host: ``src`` (``nbytes`` bytes, the pages back to back) into the pages, leaving out the skipped ones."""
        n, k = self.ids.shape[0], self.skip
        rows = src.reshape(len(self.groups), n, self.page_bytes)
        if k >= n:
            return
        for g, p in enumerate(self.groups):
            view = p.rows()
            if not view.flags.writeable:
                raise ValueError("pages: array is read-only")
            view[self.ids[k:]] = rows[g, k:]
