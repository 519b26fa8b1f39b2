"""The adapters' page tables (splitzip.integrations._pagetable): built with array operations instead of one Python
object per page, so a wrong stride, origin, base or id order would put the wrong bytes in a frame or a decode in
the wrong block. Checked here against each page's own view (its address, its bytes) for shuffled and repeated ids,
caches that are not contiguous, the same ids across layers, and leading pages to skip. The pointer table that the
GPU calls take is computed by the same function on host arrays (numpy) and torch CPU tensors, and compared with
the pages' addresses; the host gather / scatter and the connector and backend round trips run on both."""

import itertools
from types import SimpleNamespace as NS

import numpy as np
import pytest

import splitzip
from conftest import needs_ml_dtypes, numpy_dtype
from splitzip import _splitzip as ext
from splitzip.integrations import _pagetable as pt
from splitzip.integrations.sglang import SplitZipBackend
from splitzip.integrations.vllm import KVConnectorRole, SplitZipConnector

try:
    import torch
except ImportError:
    torch = None

FRAMEWORKS = ["numpy", pytest.param("torch", marks=pytest.mark.skipif(torch is None, reason="needs torch"))]
BLOCK, H, D = 16, 4, 64
_names = itertools.count()


def as_fw(a, fw):
    """A uint16 numpy array (bit patterns) as bf16 of the framework, sharing no memory with ``a``."""
    if fw == "numpy":
        return np.array(a).view(numpy_dtype("bf16"))
    return torch.from_numpy(np.array(a).view(np.int16)).view(torch.bfloat16)


def bits(x):
    """The uint16 bit patterns of a page (a copy, in logical order)."""
    if torch is not None and isinstance(x, torch.Tensor):
        return x.contiguous().view(torch.int16).numpy().view(np.uint16)
    return np.ascontiguousarray(x).view(np.uint16)


def addr(x):
    if torch is not None and isinstance(x, torch.Tensor):
        return x.data_ptr()
    return x.__array_interface__["data"][0]


def caches(kv_slice, fw, kind, layers=3):
    """Per layer a vLLM cache of logical shape (2, 20, 16, 4, 64) filled with real KV, in one of several memory
    layouts: 'contiguous'; 'sliced' (blocks 3..22 of a larger cache: an offset base); 'blocks_outer' (memory
    [block][kv][...]: the K / V stride smaller than the block stride); 'permuted' (each block dense but in
    [heads][tokens][dim] order)."""
    out = []
    for layer in range(layers):
        src = kv_slice[layer].reshape(2, 14, BLOCK, H, D)
        logical = np.stack([src[:, (5 * b + layer) % 14] for b in range(20)], axis=1)  # (2, 20, 16, 4, 64)
        if kind == "contiguous":
            c = as_fw(logical, fw)
        elif kind == "sliced":
            big = np.zeros((2, 26, BLOCK, H, D), np.uint16)
            big[:, 3:23] = logical
            c = as_fw(big, fw)[:, 3:23]
        elif kind == "blocks_outer":
            c = as_fw(np.ascontiguousarray(logical.transpose(1, 0, 2, 3, 4)), fw)
            c = c.transpose(0, 1) if fw == "torch" else c.transpose(1, 0, 2, 3, 4)
        else:  # permuted
            phys = np.ascontiguousarray(logical.transpose(0, 1, 3, 2, 4))  # (2, 20, H, BLOCK, D) in memory
            c = as_fw(phys, fw)
            c = c.permute(0, 1, 3, 2, 4) if fw == "torch" else c.transpose(0, 1, 3, 2, 4)
        out.append(c)
    return out


def page_bytes(c, kv, b):
    """The bytes of page (kv, b) in physical order (what a frame holds)."""
    page = c[kv, b]
    if torch is not None and isinstance(page, torch.Tensor):
        return page.as_strided((page.numel(),), (1,)).contiguous().view(torch.int16).numpy().tobytes()
    return np.lib.stride_tricks.as_strided(page, (page.size,), (page.itemsize,)).tobytes()


LAYOUTS = ["contiguous", "sliced", "blocks_outer", "permuted"]
IDS = [7, 0, 19, 7, 3, 12]  # shuffled, with a repeat


@needs_ml_dtypes
@pytest.mark.parametrize("fw", FRAMEWORKS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_pointer_table_is_each_pages_address(kv_slice, fw, layout):
    for c in caches(kv_slice, fw, layout):
        groups = pt.groups_of(c, "cache", group_axis=True)
        assert [g.num_pages for g in groups] == [20, 20]
        ids = pt.check_ids(IDS, 20, "t")
        table = pt.PageTable(groups, ids, "t")
        ptrs = table.pointers()
        assert ptrs.dtype == (torch.int64 if fw == "torch" else np.int64)
        assert [int(p) for p in ptrs] == [addr(c[kv, b]) for kv in (0, 1) for b in IDS]
        skipped = pt.PageTable(groups, ids, "t", skip=2).pointers(scratch=12345)
        assert [int(p) for p in skipped] == [12345 if i < 2 else addr(c[kv, b])
                                             for kv in (0, 1) for i, b in enumerate(IDS)]


@needs_ml_dtypes
@pytest.mark.parametrize("fw", FRAMEWORKS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_gather_and_scatter_touch_exactly_the_pages(kv_slice, fw, layout):
    c = caches(kv_slice, fw, layout, layers=1)[0]
    table = pt.PageTable(pt.groups_of(c, "cache", group_axis=True), pt.check_ids(IDS, 20, "t"), "t")
    out = np.empty(table.nbytes, np.uint8)
    table.gather(out)
    assert out.tobytes() == b"".join(page_bytes(c, kv, b) for kv in (0, 1) for b in IDS)
    # scatter into a zeroed cache of the same layout, skipping each group's first id
    dst = caches(kv_slice, fw, layout, layers=1)[0]
    dst[...] = 0
    ids = [4, 11, 2]
    t2 = pt.PageTable(pt.groups_of(dst, "dst", group_axis=True), pt.check_ids(ids, 20, "t"), "t", skip=1)
    t2.scatter(out[: t2.nbytes])
    pb = t2.page_bytes
    for kv in (0, 1):
        for b in range(20):
            got = page_bytes(dst, kv, b)
            if b in ids[1:]:
                i = kv * len(ids) + ids.index(b)
                assert got == out[i * pb:(i + 1) * pb].tobytes(), (kv, b)
            else:  # the skipped block 4 and every other block stay zero
                assert not any(got), (kv, b)


@needs_ml_dtypes
@pytest.mark.parametrize("fw", FRAMEWORKS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_vllm_round_trip_through_every_layout(kv_slice, fw, layout):
    """Every layer saves the same (shuffled, repeated) block ids of a cache at another address; the frames must be
    each layer's own pages, and the load must land them in the consumer's blocks, skipping its computed prefix."""
    extra = {"transport": "inprocess", "name": f"pt-{next(_names)}"}
    cfg = lambda role: NS(kv_transfer_config=NS(kv_role=role, kv_connector_extra_config=extra),  # noqa: E731
                          cache_config=NS(block_size=BLOCK), model_config=NS(model="m"))
    src = {f"l{i}": c for i, c in enumerate(caches(kv_slice, fw, layout))}
    dst = {f"l{i}": c for i, c in enumerate(caches(kv_slice, fw, layout))}
    for c in dst.values():
        c[...] = 0
    ps, pw = (SplitZipConnector(cfg("kv_producer"), r) for r in (KVConnectorRole.SCHEDULER, KVConnectorRole.WORKER))
    cs, cw = (SplitZipConnector(cfg("kv_consumer"), r) for r in (KVConnectorRole.SCHEDULER, KVConnectorRole.WORKER))
    pw.register_kv_caches(src)
    cw.register_kv_caches(dst)
    prompt = list(range(4 * BLOCK + 1))
    sblocks, dblocks = [9, 2, 9, 17], [0, 13, 5, 8]
    new = lambda blocks: NS(req_id="r", prompt_token_ids=prompt, block_ids=(blocks,), num_computed_tokens=0)  # noqa
    stp = lambda reqs, n: NS(scheduled_new_reqs=reqs, scheduled_cached_reqs=None, num_scheduled_tokens={"r": n})  # noqa
    pw.bind_connector_metadata(ps.build_connector_meta(stp([new(sblocks)], len(prompt))))
    for name, c in src.items():
        pw.save_kv_layer(name, c, None)
    pw.wait_for_save()
    box = splitzip.Container(pw.transport.get(pw.object_key(pw.request_key(prompt, 4 * BLOCK), 0)))
    for name, c in src.items():
        raw = np.frombuffer(b"".join(page_bytes(c, kv, b) for kv in (0, 1) for b in sblocks), np.uint8)
        assert box.data(name).tobytes() == splitzip.compress(raw, dtype="bf16").tobytes(), name
    req = NS(request_id="r", prompt_token_ids=prompt)
    assert cs.get_num_new_matched_tokens(req, BLOCK) == (3 * BLOCK, False)
    cs.update_state_after_alloc(req, None, 3 * BLOCK)  # the consumer computed block 0 itself: not written
    cw.bind_connector_metadata(cs.build_connector_meta(stp([new(dblocks)], 1)))
    cw.start_load_kv(None)
    for name in dst:
        cw.wait_for_layer_load(name)
    for name in src:
        for kv in (0, 1):
            for b in range(20):
                got = page_bytes(dst[name], kv, b)
                if b in dblocks[1:]:
                    assert got == page_bytes(src[name], kv, sblocks[dblocks.index(b)]), (name, kv, b)
                else:
                    assert not any(got), (name, kv, b)


@needs_ml_dtypes
@pytest.mark.parametrize("fw", FRAMEWORKS)
@pytest.mark.parametrize("page", [1, 4])
def test_sglang_fused_calls_with_shuffled_repeated_pages_and_offset_pools(kv_slice, fw, page):
    L = 3
    slots = 224
    big = [[np.zeros((slots + 8, H, D), np.uint16) for _ in range(L)] for _ in range(2)]
    for kind in range(2):
        for layer in range(L):
            big[kind][layer][8:] = kv_slice[layer, kind]
    ks = [as_fw(b, fw)[8:] for b in big[0]]  # each pool a view at an offset into a larger buffer
    vs = [as_fw(b, fw)[8:] for b in big[1]]
    idx = [5, 0, 31, 5, 2] if page == 4 else [100, 3, 223, 3]
    b = SplitZipBackend(L, H, D, "bf16", page_size=page)
    rows = (np.asarray(idx)[:, None] * page + np.arange(page)).reshape(-1)
    staged = np.concatenate([bits(p)[rows].reshape(-1) for p in ks + vs]).view(np.uint8)
    dst = np.empty(b.max_output_bytes(len(idx) * page), np.uint8)
    n = b.gather_compress_into(ks, vs, np.asarray(idx, dtype=np.int32), dst)
    assert dst[:n].tobytes() == splitzip.compress(staged, dtype="bf16").tobytes()
    outk = [as_fw(np.zeros((slots, H, D), np.uint16), fw) for _ in range(L)]
    outv = [as_fw(np.zeros((slots, H, D), np.uint16), fw) for _ in range(L)]
    didx = [7, 1, 30, 12, 4] if page == 4 else [9, 0, 200, 50]
    assert b.scatter_decompress(dst[:n], outk, outv, didx) == staged.nbytes
    for pools_in, pools_out in ((ks, outk), (vs, outv)):
        for pin, pout in zip(pools_in, pools_out):
            a, o = bits(pin), bits(pout)
            for s, d in zip(idx, didx):  # decoded page j is source page idx[j]
                assert np.array_equal(a[s * page:(s + 1) * page], o[d * page:(d + 1) * page])
            untouched = np.ones(slots, bool)
            for d in didx:
                untouched[d * page:(d + 1) * page] = False
            assert not o[untouched].any()


def test_ids_are_checked_before_any_table_is_built():
    ok = pt.check_ids([3, 0, 3], 4, "t")
    assert ok.dtype == np.int64 and ok.tolist() == [3, 0, 3]
    assert pt.check_ids(np.array([1, 2], np.uint8), 4, "t").tolist() == [1, 2]
    for bad, err, msg in (([1.0], TypeError, "integers"), ([True], TypeError, "bool"), ([0, -1], ValueError, "-1"),
                          ([4], ValueError, "outside the 4"), ([], ValueError, "empty"), (3, TypeError, "list"),
                          (np.zeros((2, 2), np.int64), TypeError, "1-D"), (["1"], TypeError, "integers")):
        with pytest.raises(err, match=msg):
            pt.check_ids(bad, 4, "t")
    if torch is not None:
        assert pt.check_ids(torch.tensor([2, 1]), 4, "t").tolist() == [2, 1]
        with pytest.raises(TypeError, match="integers"):
            pt.check_ids(torch.tensor([1.0]), 4, "t")


def test_pages_that_are_not_one_run_of_memory_are_refused():
    c = np.zeros((2, 4, 16, 4, 128), np.float16)[..., ::2]
    with pytest.raises(ValueError, match="dense run"):
        pt.groups_of(c, "cache", group_axis=True)
    with pytest.raises(ValueError, match="negative"):
        pt.groups_of(np.zeros((2, 4, 16), np.float16)[:, ::-1], "cache", group_axis=True)
    with pytest.raises(TypeError, match="numpy array or a torch tensor"):
        pt.groups_of([1, 2], "cache", group_axis=False)
    a, b = np.zeros((4, 8), np.float16), np.zeros((4, 16), np.float16)
    with pytest.raises(ValueError, match="group 1 differs"):
        pt.PageTable(pt.groups_of(a, "a", False) + pt.groups_of(b, "b", False), np.array([0]), "t")


def test_extension_refuses_a_bad_pointer_table():
    """The GPU paged entry points take the device page-pointer table as an array: its element type, rank and
    length are checked first (on any machine), so a wrong table is an exception, never a wild read."""
    u8 = np.zeros(64, np.uint8)
    for bad, err, msg in ((np.zeros(4, np.float64), TypeError, "int64 or uint64"),
                          (np.zeros(4, np.int32), TypeError, "int64 or uint64"),
                          (np.zeros((2, 2), np.int64), ValueError, "1-D"),
                          (np.zeros(3, np.int64), ValueError, "3 addresses for 4 pages"),
                          (np.zeros(4, np.uint64), ValueError, "CUDA device memory")):
        with pytest.raises(err, match=msg):
            ext.cuda_compress_pages(bad, 4, 16, 1, None, 12, 1, u8, u8, u8, 0)
        with pytest.raises(err, match=msg):
            ext.cuda_decompress_pages(u8, bad, 4, 16, u8, u8, 0)
