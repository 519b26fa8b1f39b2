"""Optional tier: the splitzip serde through LMCache's own serde factory and AsyncSerdeProcessor, on LMCache's
TensorMemoryObj holding real KV (CPU).

    pip install lmcache pytest ml_dtypes && pip install --no-deps <splitzip wheel>
    pytest -m lmcache python/tests/test_engine_lmcache.py
"""

import os
import select
import time

import pytest

pytestmark = pytest.mark.lmcache

lmcache = pytest.importorskip("lmcache")
torch = pytest.importorskip("torch")

from lmcache.v1.distributed.api import MemoryLayoutDesc, ObjectKey  # noqa: E402
from lmcache.v1.distributed.serde import (  # noqa: E402
    SerdeConfig,
    create_serde_processor,
    get_registered_serde_types,
    serialized_layout_desc,
)
from lmcache.v1.memory_management import MemoryObjMetadata, TensorMemoryObj  # noqa: E402

import splitzip  # noqa: E402
import splitzip.integrations.lmcache as szlm  # noqa: E402


def memory_obj(shape, dtype, fill=None):
    """A TensorMemoryObj over a flat uint8 buffer, as LMCache's allocators make them."""
    nbytes = int(torch.Size(shape).numel()) * dtype.itemsize
    raw = torch.zeros(nbytes, dtype=torch.uint8)
    if fill is not None:
        raw.copy_(fill.reshape(-1).view(torch.uint8))
    meta = MemoryObjMetadata(shape=torch.Size(shape), dtype=dtype, address=0, phy_size=nbytes, ref_count=1,
                             shapes=[torch.Size(shape)], dtypes=[dtype])
    return TensorMemoryObj(raw, meta, None)


def chunk(kv_slice):
    kv = kv_slice.transpose(1, 0, 2, 3, 4).reshape(2, 8, 224, 256).copy()
    return torch.from_numpy(kv.view("<i2")).view(torch.bfloat16)


def wait(fd, query, task, timeout=30.0):
    end = time.time() + timeout
    while time.time() < end:
        select.select([fd], [], [], 0.5)
        result = query(task)
        if result is not None:
            return result
    raise TimeoutError("serde task did not finish")


def test_factory_registered():
    assert szlm.HAVE_LMCACHE and szlm.register()
    assert "splitzip" in get_registered_serde_types()


def test_round_trip_through_lmcache_processor(kv_slice):
    src_t = chunk(kv_slice)
    proc = create_serde_processor(SerdeConfig(type="splitzip", kwargs={"codebook": "generic", "max_workers": 1}))
    try:
        layout = MemoryLayoutDesc(shapes=[src_t.shape], dtypes=[src_t.dtype])
        out_layout = serialized_layout_desc(layout, proc)
        assert out_layout.shapes[0][0] == splitzip.compress_bound(src_t.numel(), "bf16")
        src = memory_obj(src_t.shape, src_t.dtype, src_t)
        tmp = memory_obj(out_layout.shapes[0], torch.uint8)
        key = ObjectKey(chunk_hash=os.urandom(16), model_name="test", kv_rank=0)
        task = proc.submit_serialize([src], [tmp], [key])
        assert wait(proc.get_serialize_event_fd(), proc.query_serialize_result, task) is True
        n = tmp.get_size()
        assert n < src_t.numel() * 2 and tmp.tensor.numel() == n
        assert bytes(tmp.byte_array) == splitzip.compress(src_t).tobytes()
        ratio = src_t.numel() * 2 / n
        assert 1.3 < ratio < 1.42, ratio
        dst = memory_obj(src_t.shape, src_t.dtype)
        task = proc.submit_deserialize([tmp], [dst], [key])
        assert wait(proc.get_deserialize_event_fd(), proc.query_deserialize_result, task) is True
        assert torch.equal(dst.tensor.view(torch.int16), src_t.view(torch.int16))
    finally:
        proc.close()


def test_bad_configuration():
    with pytest.raises(ValueError, match="unknown keys"):
        create_serde_processor(SerdeConfig(type="splitzip", kwargs={"level": 3}))
    with pytest.raises(splitzip.Error):
        create_serde_processor(SerdeConfig(type="splitzip", kwargs={"codebook": "/nonexistent/kv.book"}))
