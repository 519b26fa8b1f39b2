"""Codebooks: defaults, save/load, bytes, calibration."""

import numpy as np
import pytest

import splitzip
from conftest import ALL_DTYPES, kv_like_bits, numpy_dtype


@pytest.mark.parametrize("name", ALL_DTYPES)
@pytest.mark.parametrize("kind", ["generic", "key", "value"])
def test_default_codebooks_are_valid(name, kind):
    cb = splitzip.Codebook.default(name, kind)
    assert cb.dtype == name
    assert 1 <= cb.code_bits <= 4 and 1 <= len(cb.values) <= 1 << cb.code_bits
    assert len(set(cb.values)) == len(cb.values)


def test_default_is_what_compress_uses():
    x = kv_like_bits("bf16", 3000, seed=1)
    assert (splitzip.compress(x, dtype="bf16").tobytes()
            == splitzip.compress(x, dtype="bf16", codebook=splitzip.Codebook.default("bf16")).tobytes())
    assert splitzip.info(splitzip.compress(x, dtype="bf16", codebook="key"))["codebook"] == \
        splitzip.Codebook.default("bf16", "key")


def test_save_load_bytes(tmp_path):
    cb = splitzip.Codebook("fp16", 3, [15, 14, 13, 16, 12])
    p = tmp_path / "cb.spzb"
    cb.save(p)
    data = p.read_bytes()
    assert len(data) == 32 and data[:4] == b"SPZB" and data == cb.to_bytes()
    assert data[5] == 2 and data[6] == 3 and data[7] == 5 and list(data[8:13]) == [15, 14, 13, 16, 12]
    back = splitzip.Codebook.load(p)
    assert back == cb and hash(back) == hash(cb)
    assert splitzip.Codebook.from_bytes(data) == cb
    x = kv_like_bits("fp16", 2000, seed=2)
    assert splitzip.compress(x, dtype="fp16", codebook=str(p)).tobytes() == \
        splitzip.compress(x, dtype="fp16", codebook=cb).tobytes()


def _expected_top(hist, k):
    order = sorted(range(len(hist)), key=lambda e: (-int(hist[e]), e))
    return [e for e in order[: 1 << k] if hist[e] > 0]


def test_calibrate_on_real_kv(kv_slice):
    keys = kv_slice[:, 0]
    values = kv_slice[:, 1]
    cb = splitzip.calibrate([keys, values], dtype="bf16")
    assert cb.dtype == "bf16" and cb.expected_bits_per_value is not None
    # the histogram is the exponent field of every value
    exps = (kv_slice.reshape(-1) >> 7) & 0xFF
    np.testing.assert_array_equal(cb.histogram, np.bincount(exps, minlength=256))
    # entries are the most frequent exponents, by decreasing count
    assert list(cb.values) == _expected_top(cb.histogram, cb.code_bits)[: len(cb.values)]
    # a calibrated codebook never does worse on its own data than the expected size predicts by much, and beats
    # or matches the default codebook there
    own = splitzip.compress(kv_slice, dtype="bf16", codebook=cb).size
    default = splitzip.compress(kv_slice, dtype="bf16").size
    assert own <= default * 1.001
    exp_bytes = splitzip.info(splitzip.compress(kv_slice, dtype="bf16", codebook=cb))
    assert exp_bytes["ratio"] > 1.25


@pytest.mark.parametrize("name", ALL_DTYPES)
def test_calibrate_every_dtype(name):
    bits = kv_like_bits(name, 50_000, seed=4)
    cb = splitzip.calibrate(bits.view(numpy_dtype(name)))
    assert cb.dtype == name
    y = splitzip.decompress(splitzip.compress(bits, dtype=name, codebook=cb), out=np.empty_like(bits))
    np.testing.assert_array_equal(y, bits)


def test_calibrate_mixed_dtypes_refused():
    with pytest.raises(ValueError):
        splitzip.calibrate([np.ones(8, np.float16), np.ones(8, np.float32)])
    with pytest.raises(ValueError):
        splitzip.calibrate([])
