"""The LMCache serde pair through its engine-facing interface (Serializer.serialize / estimate_serialized_size,
Deserializer.deserialize), on the host with real KV.

LMCache is not needed: the objects passed as src / dst carry what the serde reads from LMCache's MemoryObj (tensor,
get_shapes, get_dtypes, set_used_size, raw_tensor) and the layout what it reads from MemoryLayoutDesc (shapes,
dtypes). test_engine_lmcache.py runs the same round trip with LMCache's own TensorMemoryObj and its serde factory
(`pytest -m lmcache`, in a venv with LMCache).
"""

from types import SimpleNamespace as NS

import numpy as np
import pytest

import splitzip
from conftest import needs_ml_dtypes, numpy_dtype
from splitzip.integrations import lmcache as szlm


def chunk(kv_slice):
    """One LMCache-shaped chunk [2, layers, tokens, kv_heads * head_dim] of real bf16 KV."""
    kv = kv_slice.transpose(1, 0, 2, 3, 4).reshape(2, 8, 224, 256)
    return np.ascontiguousarray(kv).view(numpy_dtype("bf16"))


@needs_ml_dtypes
def test_round_trip_bit_exact_and_counted(kv_slice):
    src = chunk(kv_slice)
    ser, de = szlm.SplitZipSerializer(), szlm.SplitZipDeserializer()
    size = ser.estimate_serialized_size(NS(shapes=[src.shape], dtypes=[src.dtype]))
    assert size == splitzip.compress_bound(src.size, "bf16")
    tmp = szlm.BufferObj(np.zeros(size, dtype=np.uint8))
    n = ser.serialize(szlm.BufferObj(src), tmp, key=None)
    assert tmp.used == n and tmp.tensor.nbytes == n
    assert ser.bytes_in == src.nbytes and ser.bytes_out == n
    assert 1.3 < src.nbytes / n < 1.42, src.nbytes / n  # real BF16 KV, default codebook
    assert tmp.tensor.tobytes() == splitzip.compress(src).tobytes()  # a plain SplitZip frame
    out = szlm.BufferObj(np.zeros_like(src))
    de.deserialize(tmp, out, key=None)
    assert out.tensor.view(np.uint16).tobytes() == src.view(np.uint16).tobytes()


@needs_ml_dtypes
def test_codebook_and_options(kv_slice, tmp_path):
    src = chunk(kv_slice)
    book = splitzip.calibrate(src)
    book.save(tmp_path / "kv.book")
    plain = szlm.SplitZipSerializer()
    tuned = szlm.SplitZipSerializer(codebook=str(tmp_path / "kv.book"), chunk=1024, checksum=False)
    expected = (splitzip.compress(src), splitzip.compress(src, book, chunk=1024, checksum=False))
    for ser, frame in zip((plain, tuned), expected):
        tmp = szlm.BufferObj(np.zeros(ser.estimate_serialized_size(NS(shapes=[src.shape], dtypes=[src.dtype])), np.uint8))
        ser.serialize(szlm.BufferObj(src), tmp, None)
        assert tmp.tensor.tobytes() == frame.tobytes()  # the options reach the frame
        out = szlm.BufferObj(np.zeros_like(src))
        szlm.SplitZipDeserializer().deserialize(tmp, out, None)
        assert out.tensor.view(np.uint16).tobytes() == src.view(np.uint16).tobytes()


def test_contract_errors(kv_slice):
    ser, de = szlm.SplitZipSerializer(), szlm.SplitZipDeserializer()
    with pytest.raises(TypeError, match="int32"):
        ser.estimate_serialized_size(NS(shapes=[(4,)], dtypes=[np.dtype(np.int32)]))
    with pytest.raises(ValueError, match="mixes"):
        ser.estimate_serialized_size(NS(shapes=[(4,), (4,)], dtypes=[np.dtype(np.float16), np.dtype(np.float32)]))
    src = np.ones((2, 3, 64), dtype=np.float16)
    with pytest.raises(ValueError, match="estimate_serialized_size"):
        ser.serialize(szlm.BufferObj(src), szlm.BufferObj(np.zeros(16, np.uint8)), None)
    tmp = szlm.BufferObj(np.zeros(ser.estimate_serialized_size(NS(shapes=[src.shape], dtypes=[src.dtype])), np.uint8))
    ser.serialize(szlm.BufferObj(src), tmp, None)
    with pytest.raises(splitzip.InvalidArgumentError):  # a frame of another size than dst
        de.deserialize(tmp, szlm.BufferObj(np.zeros((2, 3, 65), dtype=np.float16)), None)
    with pytest.raises(splitzip.UnsupportedDtypeError):
        de.deserialize(tmp, szlm.BufferObj(np.zeros((2, 3, 64), dtype=np.float32)[..., :32].copy()), None)
    with pytest.raises(ValueError, match="no tensor"):
        de.deserialize(NS(tensor=None), szlm.BufferObj(src.copy()), None)


def test_without_lmcache_the_factory_says_so():
    if szlm.HAVE_LMCACHE:
        pytest.skip("LMCache is installed here (test_engine_lmcache.py covers the factory)")
    assert szlm.register() is False
    with pytest.raises(ImportError, match="pip install lmcache"):
        szlm.create_serde_processor({})
