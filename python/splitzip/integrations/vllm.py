"""SplitZip as a vLLM v1 KV connector: a request's KV blocks leave the producer compressed and land bit-exact in the
consumer's blocks.

Enable it with one configuration line (the module is loaded by vLLM's connector factory):

    --kv-transfer-config '{"kv_connector": "SplitZipConnector", "kv_connector_module_path":
        "splitzip.integrations.vllm", "kv_role": "kv_both",
        "kv_connector_extra_config": {"transport": "file", "path": "/shared/kv"}}'

What it does, on the two sides of vLLM's connector interface (``KVConnectorBase_V1``):

- Scheduler side. A request's transferable prefix is its prompt less the last token, rounded down to whole blocks
  (the consumer computes at least one token itself). Its key is a SHA-256 of those token ids (and the namespace,
  the model name by default). ``get_num_new_matched_tokens`` reports the prefix beyond the locally computed tokens
  when the transport holds the key; ``update_state_after_alloc`` marks such a request for loading;
  ``build_connector_meta`` lists, per step, the requests to load (with their new blocks) and the requests whose
  prefill completes in this step, to save (producer roles only, and only when the key is not stored yet);
  ``request_finished`` frees blocks at once (saves finish within the step that computes them).
- Worker side. ``register_kv_caches`` takes each layer's paged cache: ``(2, num_blocks, block_size, kv_heads,
  head_size)`` (K and V first; pages ``cache[0, b]`` for every block, then ``cache[1, b]``), or any cache whose
  first axis is the block (vLLM 0.33's standardized ``[num_blocks, kv_heads, block_size, 2 * head_size]``, MLA's
  ``[num_blocks, block_size, head_size]``; one page ``cache[b]`` per block). A page must be one dense run of memory
  (a permuted view is taken in its physical order). ``save_kv_layer`` compresses the request's pages of that layer
  into one frame with the page API (on a GPU: one kernel launch over a device array of page pointers);
  ``wait_for_save`` puts one object per request into the transport: a container (docs/FORMAT.md §6) of one frame
  item per layer, named by the layer. ``start_load_kv`` fetches each request's object and decodes every layer's
  frame straight into the consumer's blocks (on a GPU: enqueued, one launch per layer, checked in
  ``wait_for_layer_load``); blocks whose tokens the consumer had computed already are decoded into a scratch page,
  never over the prefix cache. ``get_finished`` reports nothing pending (loads and saves are synchronous with the
  step).
- The UCX transport (``"transport": "ucx"``) streams instead of storing: the producer's worker opens one gated
  ``splitzip.transfer`` session per step for the step's saved requests when the step's metadata is bound, and
  ``save_kv_layer`` gathers each request's pages of the layer into a host staging buffer (one arena, reused) and
  marks it ready, so the transfer's codec threads compress it and UCX carries it while later layers compute;
  ``wait_for_save`` waits until the consumer verified every byte. The consumer's worker listens (a
  ``transfer.Server``), decodes each layer into host memory of its own as it arrives and keeps a request once all
  its layers verified; its scheduler matches that request by its key, and ``start_load_kv`` checks every layer's
  size and dtype against this worker's caches, then writes them into the request's blocks. Host caches only.

Options in ``kv_connector_extra_config``: ``transport`` ("inprocess" with ``name``, "file" with ``path``, or "ucx"
with ``address`` on a producer and ``port`` on a consumer; see :mod:`splitzip.integrations.transport`),
``codebook`` (a codebook file, or "key" / "value" / "generic"), ``chunk``, ``threads``, ``checksum``,
``namespace``, ``layout`` ("kv_first", "blocks_first": for a cache whose first axes are ambiguous); with "ucx" not
``codebook``, ``chunk`` or ``checksum`` (the transfer codes its messages itself) but ``host``, ``token``, ``raw``,
``rate``, ``timeout``, ``max_pending_bytes``, ``pending_seconds``, ``arrival_wait``, ``max_sessions``
(:class:`~splitzip.integrations.transport.UcxTransport`) and ``max_send_bytes``; "nixl" with ``port`` on the
instance that holds the objects (the consumer) and ``address`` on the other, and the options of
:class:`~splitzip.integrations.nixl.NixlStore`.

Without vLLM installed the module still loads: ``KVConnectorBase_V1``, ``KVConnectorMetadata`` and
``KVConnectorRole`` are then minimal local definitions of vLLM's, and the connector reads from vLLM's objects only
the attributes named in docs/INTEGRATION.md.
"""

from __future__ import annotations

import abc
import enum
import hashlib
import logging
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .._container import Container, _assemble_pieces
from .._core import _FLOAT_ELEMENTS, _Tensor, _int_arg, dtype_name
from .._errors import Error, check
from . import _pagetable
from ._codec import Codec
from .nixl import NIXL_OPTIONS
from .transport import UCX_OPTIONS, UcxTransport, make_transport

_log = logging.getLogger(__name__)

try:  # vLLM's own interface when it is installed
    from vllm.distributed.kv_transfer.kv_connector.v1.base import (
        KVConnectorBase_V1,
        KVConnectorMetadata,
        KVConnectorRole,
    )
    HAVE_VLLM = True
except ImportError:
    HAVE_VLLM = False

    class KVConnectorRole(enum.Enum):  # type: ignore[no-redef]
        """Local stand-in of vLLM's KVConnectorRole."""
        SCHEDULER = 0
        WORKER = 1

    class KVConnectorMetadata:  # type: ignore[no-redef]
        """Local stand-in of vLLM's KVConnectorMetadata."""

    class KVConnectorBase_V1(abc.ABC):  # type: ignore[no-redef]  # noqa: N801
        """Local stand-in of vLLM's KVConnectorBase_V1: the constructor and the metadata binding the connector
        relies on; the abstract methods are the ones vLLM calls."""

        def __init__(self, vllm_config: Any, role: Any, kv_cache_config: Any = None):
            if getattr(vllm_config, "kv_transfer_config", None) is None:
                raise ValueError("kv_transfer_config must be set for KVConnectorBase_V1")
            self._connector_metadata = None
            self._vllm_config = vllm_config
            self._kv_transfer_config = vllm_config.kv_transfer_config
            self._kv_cache_config = kv_cache_config
            self._role = role

        @property
        def role(self):
            return self._role

        def bind_connector_metadata(self, connector_metadata) -> None:
            self._connector_metadata = connector_metadata

        def clear_connector_metadata(self) -> None:
            self._connector_metadata = None

        def has_connector_metadata(self) -> bool:
            return self._connector_metadata is not None

        def _get_connector_metadata(self):
            if self._connector_metadata is None:
                raise RuntimeError("no connector metadata bound for this step")
            return self._connector_metadata

        def register_kv_caches(self, kv_caches) -> None:
            return None

        def get_finished(self, finished_req_ids):
            return None, None

        def request_finished(self, request, block_ids):
            return False, None

        @abc.abstractmethod
        def start_load_kv(self, forward_context, **kwargs) -> None: ...

        @abc.abstractmethod
        def wait_for_layer_load(self, layer_name: str) -> None: ...

        @abc.abstractmethod
        def save_kv_layer(self, layer_name: str, kv_layer, attn_metadata, **kwargs) -> None: ...

        @abc.abstractmethod
        def wait_for_save(self) -> None: ...

        @abc.abstractmethod
        def get_num_new_matched_tokens(self, request, num_computed_tokens: int): ...

        @abc.abstractmethod
        def update_state_after_alloc(self, request, blocks, num_external_tokens: int): ...

        @abc.abstractmethod
        def build_connector_meta(self, scheduler_output): ...


_STORE_KEYS = {"name", "path"}
_CODEC_KEYS = {"codebook", "chunk", "checksum"}
_UCX_KEYS = set(UCX_OPTIONS) - {"threads"} | {"max_send_bytes"}
_NIXL_KEYS = set(NIXL_OPTIONS)
_EXTRA_KEYS = {"transport", "threads", "namespace", "layout"} | _STORE_KEYS | _CODEC_KEYS | _UCX_KEYS | _NIXL_KEYS
_LAYOUTS = ("kv_first", "blocks_first")


@dataclass
class SplitZipRequestMeta:
    """One request of a step: its transport key, its blocks (the transferable prefix's, in order), and whether the
    worker saves or loads it. ``skip_blocks``: leading blocks a load must not write (the consumer computed them)."""

    req_id: str
    key: str
    block_ids: List[int]
    is_store: bool
    skip_blocks: int = 0


@dataclass
class SplitZipConnectorMetadata(KVConnectorMetadata):
    """What the scheduler side tells the workers for one step."""

    requests: List[SplitZipRequestMeta] = field(default_factory=list)


def _first_group(block_ids: Any) -> List[int]:
    """vLLM gives block ids per KV cache group (a tuple of lists); this connector uses the first group. A flat list
    is taken as is."""
    if block_ids is None:
        return []
    seq = list(block_ids)
    if seq and isinstance(seq[0], (list, tuple)):
        seq = list(seq[0])
    return [int(b) for b in seq]


def _role_name(role: Any) -> str:
    return getattr(role, "name", str(role)).upper()


class SplitZipConnector(KVConnectorBase_V1):
    """A vLLM KV connector that moves requests' KV as SplitZip frames through a :class:`Transport`.

    ``stats`` counts what went through: requests saved / loaded, raw and compressed bytes each way.
    """

    def __init__(self, vllm_config: Any, role: Any, kv_cache_config: Any = None):
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        ktc = self._kv_transfer_config
        extra = dict(getattr(ktc, "kv_connector_extra_config", None) or {})
        unknown = sorted(set(extra) - _EXTRA_KEYS)
        if unknown:
            raise ValueError(f"SplitZipConnector: unknown kv_connector_extra_config keys {unknown} "
                             f"(known: {sorted(_EXTRA_KEYS)})")
        self._block_size = _int_arg(vllm_config.cache_config.block_size, "cache_config.block_size", 1, 1 << 20)
        spec = extra.get("transport", "inprocess")
        ucx = spec == "ucx" or isinstance(spec, UcxTransport)
        nixl = spec == "nixl"
        # the transfer codes its messages itself (the dtype's default codebook and chunk, checksums always on)
        allowed = _UCX_KEYS if ucx else (_NIXL_KEYS if nixl else _STORE_KEYS) | _CODEC_KEYS
        misplaced = sorted(set(extra) & ((_STORE_KEYS | _UCX_KEYS | _CODEC_KEYS | _NIXL_KEYS) - allowed))
        if misplaced:
            raise ValueError(f"SplitZipConnector: kv_connector_extra_config keys {misplaced} do not apply to "
                             f"transport {spec if isinstance(spec, str) else type(spec).__name__!r}")
        self._max_send_bytes = _int_arg(extra.get("max_send_bytes", 4 << 30), "max_send_bytes", 1, 1 << 62)
        if isinstance(spec, str):
            keys = (_UCX_KEYS - {"max_send_bytes"}) | {"threads"} if ucx else _NIXL_KEYS if nixl else _STORE_KEYS
            spec = {"transport": spec, **{k: extra[k] for k in keys if k in extra}}
        self._transport: Any = make_transport(spec)
        # the UCX transport streams each layer to the consumer as it is saved (its own code paths, below)
        self._stream: Optional[UcxTransport] = self._transport if isinstance(self._transport, UcxTransport) else None
        self._codebook = extra.get("codebook")
        self._chunk = extra.get("chunk")
        self._threads = extra.get("threads")
        self._checksum = extra.get("checksum", True)
        if not isinstance(self._checksum, bool):
            raise TypeError(f"SplitZipConnector: checksum must be true or false, got {self._checksum!r}")
        self._layout = extra.get("layout")
        if self._layout is not None and self._layout not in _LAYOUTS:
            raise ValueError(f"SplitZipConnector: layout must be one of {_LAYOUTS}, got {self._layout!r}")
        model = getattr(getattr(vllm_config, "model_config", None), "model", None)
        self._namespace = str(extra.get("namespace", model or ""))
        kv_role = str(getattr(ktc, "kv_role", "kv_both") or "kv_both")
        if kv_role not in ("kv_producer", "kv_consumer", "kv_both"):
            raise ValueError(f"SplitZipConnector: kv_role must be kv_producer, kv_consumer or kv_both, got {kv_role!r}")
        self._produce = kv_role in ("kv_producer", "kv_both")
        self._consume = kv_role in ("kv_consumer", "kv_both")
        if self._stream is not None:
            if self._produce and self._stream.address is None:
                raise ValueError(f"SplitZipConnector: transport 'ucx' with kv_role {kv_role} needs 'address' (the "
                                 f"consumer's host:port, where its KV is sent)")
            if self._consume and self._stream.port is None:
                raise ValueError(f"SplitZipConnector: transport 'ucx' with kv_role {kv_role} needs 'port' (where "
                                 f"this instance receives KV)")
            if self._consume and self._stream.port == 0 and _role_name(role) != "WORKER":
                raise ValueError("SplitZipConnector: transport 'ucx': a consumer's scheduler needs the port its "
                                 "worker listens on (port 0, any free port, is for a worker alone)")
        # every tensor- / pipeline-parallel worker holds a part of each request's KV and stores it as its own object
        parallel = getattr(vllm_config, "parallel_config", None)
        self._world = (int(getattr(parallel, "tensor_parallel_size", 1) or 1)
                       * int(getattr(parallel, "pipeline_parallel_size", 1) or 1))
        self._rank: Optional[int] = None  # a worker's rank among them, found when its caches are registered
        # scheduler side
        self._need_load: Dict[str, Tuple[Any, int]] = {}     # req_id -> (request, skip_blocks)
        self._unfinished: Dict[str, Tuple[str, List[int], int]] = {}  # req_id -> (key, blocks so far, tokens)
        # worker side
        self._kv_caches: Dict[str, Any] = {}
        self._layouts: Dict[str, str] = {}
        self._codecs: Dict[int, Codec] = {}
        self._saves: Dict[str, Dict[str, Tuple[np.ndarray, int, Tuple[int, ...], int]]] = {}
        self._load_status: Dict[str, List[Tuple[_RequestStatus, int]]] = {}
        self._load_errors: set = set()
        self._outgoing: Optional[_Outgoing] = None  # the step's UCX send (one session for its saved requests)
        self._sent_meta: Any = None  # the metadata whose send was started (none may have been needed)
        self._arena: Optional[np.ndarray] = None    # host staging of the send, reused from step to step
        #: with the UCX transport: (request ids, reason) of each send that failed, and of requests not sent
        self.send_errors: List[Tuple[List[str], str]] = []
        self.stats = {"requests_saved": 0, "raw_bytes_saved": 0, "frame_bytes_saved": 0, "wire_bytes_saved": 0,
                      "requests_loaded": 0, "raw_bytes_loaded": 0, "frame_bytes_loaded": 0, "send_errors": 0,
                      "load_errors": 0}
        if self._stream is not None and self._consume and _role_name(role) == "WORKER":
            self._stream.listen()  # this worker's receiver: the producer sends here as it computes

    @property
    def transport(self) -> Any:
        """The :class:`Transport` (a store) or :class:`UcxTransport` (a stream) this connector uses."""
        return self._transport

    # ---- keys ---------------------------------------------------------------------------------------------------

    def transfer_tokens(self, num_prompt_tokens: int) -> int:
        """Tokens of a prompt that are transferred: all but the last, rounded down to whole blocks."""
        return max(0, (int(num_prompt_tokens) - 1) // self._block_size * self._block_size)

    def request_key(self, token_ids: Sequence[int], num_tokens: int) -> str:
        """The transport key of a request's first num_tokens tokens."""
        ids = np.asarray(list(token_ids)[:num_tokens], dtype="<i8")
        h = hashlib.sha256()
        h.update(self._namespace.encode("utf-8", "surrogateescape") + b"\0")
        h.update(b"%d\0" % self._block_size)
        h.update(ids.tobytes())
        return "splitzip-vllm/" + h.hexdigest()

    def object_key(self, key: str, rank: int) -> str:
        """The transport key of one worker's part (rank among the tensor x pipeline parallel workers)."""
        return f"{key}/rank{rank}of{self._world}"

    def _stored(self, key: str) -> bool:
        """Whether every worker's part of a request is in the transport."""
        return all(self._transport.contains(self.object_key(key, r)) for r in range(self._world))

    def _worker_rank(self) -> int:
        if self._rank is None:
            rank = None
            if HAVE_VLLM and self._world > 1:
                try:
                    from vllm.distributed.parallel_state import get_pp_group, get_tp_group
                    tp = get_tp_group()
                    rank = tp.rank_in_group + tp.world_size * get_pp_group().rank_in_group
                except (AssertionError, AttributeError, RuntimeError, ImportError):
                    rank = None
            if rank is None:
                parallel = getattr(self._vllm_config, "parallel_config", None)
                rank = int(getattr(parallel, "rank", 0) or 0) % self._world
            self._rank = int(rank)
        return self._rank

    @staticmethod
    def _prompt(obj: Any) -> List[int]:
        ids = getattr(obj, "prompt_token_ids", None)
        return list(ids) if ids is not None else []

    # ---- scheduler side -----------------------------------------------------------------------------------------

    def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int) -> Tuple[int, bool]:
        """Tokens beyond ``num_computed_tokens`` that the transport holds for this request (0 when none);
        loads are synchronous (False)."""
        if not self._consume:
            return 0, False
        prompt = self._prompt(request)
        n = self.transfer_tokens(len(prompt))
        if n <= num_computed_tokens or not self._stored(self.request_key(prompt, n)):
            return 0, False
        return n - num_computed_tokens, False

    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        """Marks a request whose external tokens were granted for loading in the next step."""
        if num_external_tokens <= 0:
            return
        n = self.transfer_tokens(len(self._prompt(request)))
        skip = max(0, n - int(num_external_tokens)) // self._block_size
        self._need_load[str(request.request_id)] = (request, skip)

    def build_connector_meta(self, scheduler_output: Any) -> SplitZipConnectorMetadata:
        """The step's loads and saves (and resets the per-step state)."""
        meta = SplitZipConnectorMetadata()
        scheduled = getattr(scheduler_output, "num_scheduled_tokens", None) or {}
        for new in getattr(scheduler_output, "scheduled_new_reqs", None) or []:
            req_id = str(new.req_id)
            prompt = self._prompt(new)
            n = self.transfer_tokens(len(prompt))
            blocks = _first_group(new.block_ids)
            if n == 0:
                continue
            key = self.request_key(prompt, n)
            if req_id in self._need_load:
                _, skip = self._need_load.pop(req_id)
                meta.requests.append(SplitZipRequestMeta(req_id, key, blocks[: n // self._block_size], False, skip))
            elif self._produce and not self._stored(key):
                done = int(getattr(new, "num_computed_tokens", 0) or 0) + int(scheduled.get(new.req_id, n))
                if done >= n:
                    meta.requests.append(SplitZipRequestMeta(req_id, key, blocks[: n // self._block_size], True))
                else:  # chunked prefill: saved in the step that computes its last transferred token
                    self._unfinished[req_id] = (key, blocks, n)
        cached = getattr(scheduler_output, "scheduled_cached_reqs", None)
        if cached is not None:
            req_ids = list(getattr(cached, "req_ids", None) or [])
            new_blocks = list(getattr(cached, "new_block_ids", None) or [None] * len(req_ids))
            computed = list(getattr(cached, "num_computed_tokens", None) or [0] * len(req_ids))
            resumed = set(getattr(cached, "resumed_req_ids", None) or ())
            for i, rid in enumerate(req_ids):
                req_id = str(rid)
                if req_id in self._need_load:  # resumed after preemption: new_block_ids are all its blocks
                    request, skip = self._need_load.pop(req_id)
                    prompt = self._prompt(request)
                    n = self.transfer_tokens(len(prompt))
                    meta.requests.append(SplitZipRequestMeta(req_id, self.request_key(prompt, n),
                                                             _first_group(new_blocks[i])[: n // self._block_size],
                                                             False, skip))
                elif req_id in self._unfinished:
                    key, blocks, n = self._unfinished[req_id]
                    if rid in resumed:  # preempted: its blocks were freed and given anew
                        blocks = []
                    blocks = blocks + _first_group(new_blocks[i])
                    self._unfinished[req_id] = (key, blocks, n)
                    if int(computed[i]) + int(scheduled.get(rid, 0)) >= n:
                        del self._unfinished[req_id]
                        meta.requests.append(SplitZipRequestMeta(req_id, key, blocks[: n // self._block_size],
                                                                 True))
        self._need_load.clear()
        return meta

    def request_finished(self, request: Any, block_ids: List[int]) -> Tuple[bool, Optional[dict]]:
        """Blocks may be freed at once: a request's save completed in the step that computed it."""
        self._unfinished.pop(str(request.request_id), None)
        return False, None

    # ---- worker side --------------------------------------------------------------------------------------------

    def register_kv_caches(self, kv_caches: Dict[str, Any]) -> None:
        """Takes each layer's paged cache (see the module docstring for the layouts)."""
        if not isinstance(kv_caches, dict) or not kv_caches:
            raise TypeError("register_kv_caches: expected a dict of layer name -> KV cache tensor")
        for name, cache in kv_caches.items():
            self._layouts[name] = self._layout_of(name, cache)
            if self._stream is not None and not (_pagetable.supported(cache) and _Tensor(cache, name).device == "cpu"):
                raise ValueError(f"register_kv_caches: layer {name!r} is not in host memory (numpy or torch CPU): the "
                                 f"UCX transport stages KV in host memory and sends host tensors only so far (use the "
                                 f"'file' or 'inprocess' transport for GPU caches)")
        self._kv_caches = dict(kv_caches)
        self._worker_rank()

    def _layout_of(self, name: str, cache: Any) -> str:
        shape = tuple(int(d) for d in cache.shape)
        if self._layout is not None:
            layout = self._layout
        elif len(shape) == 5 and shape[0] == 2:
            layout = "kv_first"
        elif len(shape) >= 2:
            layout = "blocks_first"
        else:
            raise ValueError(f"register_kv_caches: layer {name!r} has shape {shape}; expected (2, num_blocks, "
                             f"block_size, kv_heads, head_size) or a cache whose first axis is the block")
        if layout == "kv_first" and (len(shape) < 3 or shape[0] != 2):
            raise ValueError(f"register_kv_caches: layer {name!r} has shape {shape}, not (2, num_blocks, ...)")
        element = str(getattr(cache, "dtype", "")).replace("torch.", "")
        if element not in _FLOAT_ELEMENTS:
            raise TypeError(f"register_kv_caches: layer {name!r} holds {element} values; SplitZip codes "
                            f"{sorted(_FLOAT_ELEMENTS)}")
        return layout

    def _codec(self, cache: Any) -> Codec:
        did = _FLOAT_ELEMENTS[str(cache.dtype).replace("torch.", "")]
        c = self._codecs.get(did)
        if c is None:
            c = self._codecs[did] = Codec(did, self._codebook, self._chunk, self._threads, self._checksum)
        return c

    def _pages(self, name: str, cache: Any, block_ids: Sequence[int], skip: int = 0) -> list:
        layout = self._layouts.get(name) or self._layout_of(name, cache)
        num_blocks = int(cache.shape[1] if layout == "kv_first" else cache.shape[0])
        for b in block_ids:
            if not 0 <= b < num_blocks:
                raise ValueError(f"layer {name!r}: block {b} outside its {num_blocks} blocks")
        if skip:
            scratch = _dense(_empty_like(cache[0, 0] if layout == "kv_first" else cache[0]), name)

        def page(kv, i, b):
            if i < skip:
                return scratch
            return _dense(cache[kv, b] if kv is not None else cache[b], name)

        if layout == "kv_first":
            return [page(kv, i, b) for kv in (0, 1) for i, b in enumerate(block_ids)]
        return [page(None, i, b) for i, b in enumerate(block_ids)]

    def _table(self, name: str, cache: Any, block_ids: Sequence[int], skip: int = 0):
        """The request's pages of this layer as a page table (K pages of its blocks, then V pages): built with
        array operations, on the cache's device; None for caches the tables do not handle (cupy)."""
        if not _pagetable.supported(cache):
            return None
        layout = self._layouts.get(name) or self._layout_of(name, cache)
        groups = _pagetable.groups_of(cache, f"layer {name!r}", group_axis=(layout == "kv_first"))
        ids = _pagetable.check_ids(block_ids, groups[0].num_pages, f"layer {name!r}")
        return _pagetable.PageTable(groups, ids, f"layer {name!r}", skip=skip)

    def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs: Any) -> None:
        """Compresses the saved requests' blocks of this layer into one frame each (the paged API). On a GPU the
        compression is enqueued on the current stream and the frame stays on the device, with its size, until
        :meth:`wait_for_save`: nothing waits here."""
        meta = self._get_connector_metadata()
        if self._stream is not None:
            return self._stream_layer(meta, layer_name, kv_layer)
        for req in meta.requests:
            if not req.is_store or not req.block_ids:
                continue
            codec = self._codec(kv_layer)
            table = self._table(layer_name, kv_layer, req.block_ids)
            if table is None:  # a cache of another framework: the list-of-pages path
                pages = self._pages(layer_name, kv_layer, req.block_ids)
                frame = _host_frame(codec.compress_pages(pages))
                shape = (len(pages),) + tuple(int(d) for d in pages[0].shape)
                raw = sum(int(p.nbytes) for p in pages)
            else:
                frame = codec.compress_table(table, f"save_kv_layer: layer {layer_name!r}")
                shape, raw = (table.n_pages,) + tuple(table.page_shape), table.nbytes
            self._saves.setdefault(req.key, {})[layer_name] = (frame, codec.did, shape, raw)

    def wait_for_save(self) -> None:
        """Puts each saved request into the transport: one container of its layers' frames. Frames still on a GPU
        come to the host here: one copy of all their sizes (the one wait for the sizes), then each frame's exact
        bytes into pinned host memory, and one wait for those copies."""
        if self._stream is not None:
            return self._finish_send()
        saves, self._saves = self._saves, {}
        _frames_to_host(saves)
        for key, layers in saves.items():
            if self._kv_caches and set(layers) != set(self._kv_caches):
                missing = sorted(set(self._kv_caches) - set(layers))
                raise RuntimeError(f"wait_for_save: layers {missing} were not saved for {key}")
            parts, offset, raw_total = [], 0, 0
            for name, (frame, did, shape, raw) in layers.items():
                parts.append(((1, did, shape, name.encode("utf-8", "surrogateescape"), offset, raw), frame))
                offset += raw
                raw_total += raw
            pieces = _assemble_pieces(parts)  # the container's bytes, written without joining them
            self._transport.put(self.object_key(key, self._worker_rank()), pieces)
            self.stats["requests_saved"] += 1
            self.stats["raw_bytes_saved"] += raw_total
            self.stats["frame_bytes_saved"] += sum(int(p.shape[0]) for p in pieces)

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        """Decodes every loaded request's frames into its blocks of every registered layer. On a GPU the request's
        object is copied to the device once and each layer's decode is enqueued on the current stream (one launch
        over a device page table), its status checked by :meth:`wait_for_layer_load`."""
        meta = self._get_connector_metadata()
        if self._stream is not None:
            return self._load_streamed(meta)
        for req in meta.requests:
            if req.is_store or not req.block_ids:
                continue
            blob = self._transport.get(self.object_key(req.key, self._worker_rank()))
            if blob is None:
                self._load_errors.update(req.block_ids[req.skip_blocks:])
                continue
            box = Container(blob)
            for name in self._kv_caches:
                if name not in box:
                    raise ValueError(f"start_load_kv: the stored KV of request {req.req_id} has no layer {name!r}")
            raw_total, on_device, statuses = 0, None, None
            for i, (name, cache) in enumerate(self._kv_caches.items()):
                codec = self._codec(cache)
                what = f"start_load_kv: layer {name!r}"
                table = self._table(name, cache, req.block_ids, req.skip_blocks)
                frame = box.data(name)
                if table is None:  # a cache of another framework: the list-of-pages path
                    pages = self._pages(name, cache, req.block_ids, req.skip_blocks)
                    status = None
                    t = _Tensor(pages[0], "page")
                    if t.device != "cpu":
                        frame, status = _to_device(frame, t)
                        self._load_status.setdefault(name, []).append((_RequestStatus(status), 0))
                    codec.decompress_pages(frame, pages, status=status)
                    raw_total += sum(int(p.nbytes) for p in pages)
                    continue
                header = codec.frame_header(_Tensor(frame, "frame"), what)  # the host copy's header
                if table.device == "cuda":
                    if on_device is None:  # the whole object, once per request
                        on_device, st_dev = _upload(blob, table.groups[0].obj.device, len(self._kv_caches))
                        statuses = _RequestStatus(st_dev)
                    item = box.item(name)
                    frame = on_device[item.data_offset:item.data_offset + int(header["frame_size"])]
                    codec.decompress_table(frame, table, status=statuses.tensor[i:i + 1], what=what, header=header)
                    self._load_status.setdefault(name, []).append((statuses, i))
                else:
                    codec.decompress_table(frame, table, what=what, header=header)
                raw_total += table.nbytes
            self.stats["requests_loaded"] += 1
            self.stats["raw_bytes_loaded"] += raw_total
            self.stats["frame_bytes_loaded"] += int(blob.shape[0])

    def wait_for_layer_load(self, layer_name: str) -> None:
        """Raises if this layer's GPU decode failed (host decodes finished, and were checked, already). The
        statuses of all a request's layers come to the host together, at the first wait for one of them: one
        wait per request, not per layer (all its decodes are enqueued by then)."""
        for st, index in self._load_status.pop(layer_name, []):
            st.check(index, f"load of layer {layer_name!r}")

    def get_finished(self, finished_req_ids: set) -> Tuple[Optional[set], Optional[set]]:
        """Nothing is in flight between steps: saves and loads complete within their step."""
        return None, None

    def get_block_ids_with_load_errors(self) -> set:
        """Blocks of requests whose stored KV had disappeared from the transport, or (UCX) arrived in a shape that
        does not fit this worker's caches (they are recomputed)."""
        errors, self._load_errors = self._load_errors, set()
        return errors

    def shutdown(self) -> None:
        """Ends a send in flight and, with the UCX transport, leaves this process's receiver (the last to leave
        closes it)."""
        if self._outgoing is not None:
            self._finish_send(abandon="the connector shut down")
        if self._stream is not None:
            self._stream.close()

    # ---- the UCX stream: each layer sent as soon as it is saved ---------------------------------------------------

    def bind_connector_metadata(self, connector_metadata: Any) -> None:
        """Takes the step's metadata; with the UCX transport a producer's worker also starts the step's send here
        (its handshake overlaps the first layer's computation)."""
        super().bind_connector_metadata(connector_metadata)
        if self._stream is not None and self._produce and self._kv_caches:
            self._start_send(connector_metadata)

    def _start_send(self, meta: Any) -> None:
        """One gated transfer session for the step's saved requests: for each layer (in the registered order) and
        request, a host staging buffer of the request's pages of that layer (K pages of its blocks, then V pages),
        all in one arena reused from step to step. Requests beyond ``max_send_bytes`` are not sent (recorded)."""
        if self._outgoing is not None:
            self._finish_send(abandon="a new step began before wait_for_save")
        self._sent_meta = meta
        reqs = [r for r in getattr(meta, "requests", []) if r.is_store and r.block_ids]
        if not reqs:
            return
        layers = list(self._kv_caches.items())
        rank = self._worker_rank()
        chosen, tables, total = [], {}, 0
        for req in reqs:
            t = [self._table(name, cache, req.block_ids) for name, cache in layers]
            need = sum(x.nbytes for x in t)
            if total + need > self._max_send_bytes:
                self._send_failed([req.req_id], f"its {need} bytes of KV would pass max_send_bytes "
                                                f"({self._max_send_bytes}) in this step: not sent")
                continue
            chosen.append(req)
            tables[req.req_id] = t
            total += need
        if not chosen:
            return
        if self._arena is None or self._arena.shape[0] < total:
            self._arena = None
            self._arena = np.empty(total, dtype=np.uint8)
        parts, index, at = [], {}, 0
        for li, (name, cache) in enumerate(layers):
            dtype = dtype_name(_FLOAT_ELEMENTS[str(cache.dtype).replace("torch.", "")])
            for req in chosen:
                table = tables[req.req_id][li]
                buf = self._arena[at:at + table.nbytes]
                at += table.nbytes
                index[(name, req.req_id)] = len(parts)
                parts.append((self.object_key(req.key, rank), li, len(layers), dtype, buf, table))
        sender = self._stream.send([p[:5] for p in parts])
        self._outgoing = _Outgoing(sender, [r.req_id for r in chosen], {r.req_id: r for r in chosen}, index,
                                   [(p[4], p[5]) for p in parts])

    def _stream_layer(self, meta: Any, layer_name: str, kv_layer: Any) -> None:
        """Gathers each saved request's pages of this layer into its staging buffer and lets the send take it."""
        if self._outgoing is None:
            if self._sent_meta is meta or not any(r.is_store and r.block_ids for r in meta.requests):
                return  # nothing to send in this step (or nothing could be)
            if not self._kv_caches:
                raise RuntimeError("save_kv_layer: register_kv_caches was not called")
            self._start_send(meta)
            if self._outgoing is None:
                return
        out = self._outgoing
        for req_id in out.req_ids:
            i = out.index.get((layer_name, req_id))
            if i is None:
                out.sender.fail(f"save_kv_layer: layer {layer_name!r} is not a registered layer")
                raise ValueError(f"save_kv_layer: layer {layer_name!r} is not one of the registered layers")
            if i in out.ready:
                continue  # saved already: its buffer may be on its way
            buf, table = out.parts[i]
            try:
                if kv_layer is not self._kv_caches[layer_name]:
                    table = self._table(layer_name, kv_layer, out.requests[req_id].block_ids)
                    if table.nbytes != buf.nbytes:
                        raise ValueError(f"save_kv_layer: layer {layer_name!r} has {table.nbytes} bytes for request "
                                         f"{req_id}, its registered cache {buf.nbytes}")
                table.gather(buf)
            except BaseException as e:
                out.sender.fail(f"save_kv_layer of layer {layer_name!r}: {e}")
                raise
            out.sender.ready(i)
            out.ready.add(i)

    def _send_failed(self, req_ids: List[str], why: str) -> None:
        self.send_errors.append((list(req_ids), why))
        del self.send_errors[:-64]  # the latest only
        self.stats["send_errors"] += 1
        _log.warning("SplitZipConnector: KV of requests %s not sent to %s: %s (the consumer recomputes them)",
                     req_ids, self._stream.address if self._stream else None, why)

    def _finish_send(self, abandon: Optional[str] = None) -> None:
        """Waits for the step's send: every byte verified by the consumer. A send that failed (consumer gone or
        refusing, network) is logged and recorded in ``send_errors``; it does not raise (the consumer recomputes
        what it did not get). Layers never saved fail the send, and raise."""
        out, self._outgoing, self._sent_meta = self._outgoing, None, None
        if out is None:
            return
        missing = sorted({name for (name, _), i in out.index.items() if i not in out.ready})
        if abandon is None and missing:
            out.sender.fail(f"layers {missing} were not saved")
        elif abandon is not None:
            out.sender.fail(abandon)
        try:
            st = out.sender.wait()
        except Error as e:
            self._send_failed(out.req_ids, str(e) if abandon is None else abandon)
            if abandon is None and missing:
                raise RuntimeError(f"wait_for_save: layers {missing} were not saved for requests "
                                   f"{out.req_ids}") from None
            return
        self.stats["requests_saved"] += len(out.req_ids)
        self.stats["raw_bytes_saved"] += st.raw_bytes
        self.stats["frame_bytes_saved"] += st.payload_bytes
        self.stats["wire_bytes_saved"] += st.wire_bytes

    def _load_streamed(self, meta: Any) -> None:
        """Takes each loaded request's layers from this process's receiver and writes them into its blocks: every
        layer's size and dtype checked against this worker's caches first, so a request whose KV does not fit is
        written nowhere (its blocks are reported as load errors and recomputed)."""
        rank = self._worker_rank()
        layers = list(self._kv_caches.items())
        for req in meta.requests:
            if req.is_store or not req.block_ids:
                continue
            got = self._stream.take(self.object_key(req.key, rank))
            if got is None:
                self._load_errors.update(req.block_ids[req.skip_blocks:])
                continue
            tables, problem = [], None
            if len(got.parts) != len(layers):
                problem = f"{len(got.parts)} layers arrived, this worker has {len(layers)}"
            for (name, cache), part, dtype in zip(layers, got.parts, got.dtypes):
                if problem is not None:
                    break
                table = self._table(name, cache, req.block_ids, req.skip_blocks)
                want = dtype_name(_FLOAT_ELEMENTS[str(cache.dtype).replace("torch.", "")])
                if part.nbytes != table.nbytes or dtype != want:
                    problem = (f"layer {name!r} arrived as {part.nbytes} bytes of {dtype}, its blocks here are "
                               f"{table.nbytes} bytes of {want}")
                tables.append(table)
            if problem is not None:
                _log.warning("SplitZipConnector: the KV of request %s does not fit this worker's cache (another "
                             "model or parallel layout at the producer?): %s; recomputed", req.req_id, problem)
                self.stats["load_errors"] += 1
                self._load_errors.update(req.block_ids[req.skip_blocks:])
                self._stream.recycle(got)
                continue
            for table, part in zip(tables, got.parts):
                table.scatter(part)
            self._stream.recycle(got)
            self.stats["requests_loaded"] += 1
            self.stats["raw_bytes_loaded"] += sum(t.nbytes for t in tables)


@dataclass
class _Outgoing:
    """The step's send: the transfer Sender, the requests in it, the part index of each (layer, request), each
    part's (staging buffer, page table), and the parts marked ready."""

    sender: Any
    req_ids: List[str]
    requests: Dict[str, SplitZipRequestMeta]
    index: Dict[Tuple[str, str], int]
    parts: List[Tuple[np.ndarray, Any]]
    ready: set = field(default_factory=set)


def _dense(page: Any, name: str):
    """A block as one flat run of memory: the block itself when contiguous; for a block laid out in another
    physical order than its shape (a permuted, dense view, as some attention backends give), a 1-D view of its
    memory in physical order, so that a block lands in a block of the same layout byte for byte."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(page, torch.Tensor):
        if page.is_contiguous():
            return page
        shape, strides = list(page.shape), list(page.stride())
        flat = lambda: page.as_strided((page.numel(),), (1,))  # noqa: E731
    else:
        if page.flags.c_contiguous:
            return page
        shape, strides = list(page.shape), [s // page.itemsize for s in page.strides]
        flat = lambda: np.lib.stride_tricks.as_strided(page, (page.size,), (page.itemsize,))  # noqa: E731
    dims = sorted((st, n) for st, n in zip(strides, shape) if n != 1)
    expect = 1
    for st, n in dims:
        if st != expect:
            raise ValueError(f"layer {name!r}: a block of strides {tuple(strides)} is not one dense run of memory")
        expect *= n
    return flat()


def _empty_like(x: Any):
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return torch.empty_like(x)
    if type(x).__module__.startswith("cupy"):
        import cupy
        return cupy.empty_like(x)
    return np.empty_like(x)


def _host_frame(frame: Any) -> np.ndarray:
    if isinstance(frame, np.ndarray):
        return frame
    return frame.cpu().numpy() if hasattr(frame, "cpu") else frame.get()


def _to_device(frame: np.ndarray, like: _Tensor):
    """A device copy of a host frame next to ``like``, and a status tensor for its decode."""
    if like.framework == "torch":
        import torch
        dev = like.obj.device
        return (torch.from_numpy(np.array(frame)).to(dev, non_blocking=False),
                torch.full((1,), -1, dtype=torch.int32, device=dev))
    import cupy
    return cupy.asarray(frame), cupy.full(1, -1, dtype=cupy.int32)


class _RequestStatus:
    """A request's device status tensor (one entry per layer), copied to the host at its first check, so that a
    request's layers cost one wait, not one each."""

    __slots__ = ("tensor", "host")

    def __init__(self, tensor: Any):
        self.tensor, self.host = tensor, None

    def check(self, index: int, what: str) -> None:
        if self.host is None:
            t = self.tensor.reshape(-1)
            self.host = t.cpu().numpy() if hasattr(t, "cpu") else t.get()
            self.tensor = None
        check(int(self.host[index]), what)


def _upload(blob: np.ndarray, device: Any, layers: int):
    """A device copy of a host object (one copy; the host does not wait for the device's queue) and a status
    tensor of one entry per layer."""
    import torch
    on_device = torch.empty(int(blob.shape[0]), dtype=torch.uint8, device=device)
    with warnings.catch_warnings():  # the transport's array is read-only: torch only reads it here
        warnings.simplefilter("ignore", UserWarning)
        on_device.copy_(torch.from_numpy(blob), non_blocking=True)
    return on_device, torch.full((layers,), -1, dtype=torch.int32, device=device)


def _frames_to_host(saves: Dict[str, Dict[str, Any]]) -> None:
    """Replaces the (buffer, size) device frames of ``saves`` by host arrays of their exact bytes, in place: one
    copy of all sizes per device (the wait for the sizes), then the frames into one pinned host buffer per device
    by non-blocking copies, and one wait for them."""
    pending: Dict[Any, list] = {}
    for layers in saves.values():
        for name, (frame, _, _, _) in layers.items():
            if isinstance(frame, tuple):
                pending.setdefault(frame[0].device, []).append((layers, name))
    if not pending:
        return
    import torch
    for device, entries in pending.items():
        bufs = [layers[name][0] for layers, name in entries]
        sizes = [int(s) for s in torch.cat([size for _, size in bufs]).cpu().tolist()]
        host = torch.empty(sum(sizes), dtype=torch.uint8, pin_memory=True)
        at = 0
        with torch.cuda.device(device):
            for (buf, _), size in zip(bufs, sizes):
                host[at:at + size].copy_(buf[:size], non_blocking=True)
                at += size
            torch.cuda.current_stream(device).synchronize()
        host_np, at = host.numpy(), 0
        for (layers, name), size in zip(entries, sizes):
            _, did, shape, raw = layers[name]
            layers[name] = (host_np[at:at + size], did, shape, raw)
            at += size


__all__ = ["HAVE_VLLM", "KVConnectorBase_V1", "KVConnectorMetadata", "KVConnectorRole", "SplitZipConnector",
           "SplitZipConnectorMetadata", "SplitZipRequestMeta"]
