"""The SGLang compression backend's six operations and its fused gather / scatter, on the host with real KV.

The pools are laid out as SGLang's: per layer a K and a V buffer [slots, kv_heads, head_dim], page p being the
page_size slots from p * page_size; the staging buffer holds every layer's K rows of the request's pages, then every
layer's V rows (what SGLang's staging gather writes).
"""

import numpy as np
import pytest

import splitzip
from conftest import needs_ml_dtypes, numpy_dtype
from splitzip.integrations.sglang import CAPABILITY_FRAME, SplitZipBackend

L, H, D, PAGE = 8, 4, 64, 16


def pools(kv_slice, slots=448, fill=True):
    """K and V pools of bf16 (the slice's 224 real tokens, twice)."""
    bf16 = numpy_dtype("bf16")
    ks, vs = [], []
    for layer in range(L):
        k = np.zeros((slots, H, D), dtype=np.uint16)
        v = np.zeros((slots, H, D), dtype=np.uint16)
        if fill:
            k[:] = np.concatenate([kv_slice[layer, 0]] * (slots // 224))
            v[:] = np.concatenate([kv_slice[layer, 1]] * (slots // 224))
        ks.append(k.view(bf16))
        vs.append(v.view(bf16))
    return ks, vs


def staging(ks, vs, pages):
    rows = (np.asarray(pages)[:, None] * PAGE + np.arange(PAGE)).reshape(-1)
    return np.concatenate([pool[rows].reshape(-1) for pool in ks + vs])


@pytest.fixture
def backend():
    return SplitZipBackend(L, H, D, "bf16", page_size=PAGE)


@needs_ml_dtypes
def test_staging_round_trip_bit_exact_and_counted(kv_slice, backend):
    ks, vs = pools(kv_slice)
    buf = staging(ks, vs, [3, 0, 17, 9, 26])
    tokens = 5 * PAGE
    assert buf.nbytes == tokens * backend.token_bytes
    dst = np.empty(backend.max_output_bytes(tokens), dtype=np.uint8)
    size = backend.compress_into(buf.view(np.uint8), dst)
    assert size == splitzip.info(dst[:size])["frame_size"]
    assert 1.3 < buf.nbytes / size < 1.42  # real BF16 KV, default codebook
    out = np.zeros(buf.nbytes, dtype=np.uint8)
    assert backend.decompress_into(dst, out) == buf.nbytes
    assert out.tobytes() == buf.tobytes()
    backend.drain()


@needs_ml_dtypes
def test_fused_gather_is_the_staged_frame(kv_slice, backend):
    ks, vs = pools(kv_slice)
    pages = [3, 0, 17, 9, 26]
    a = np.empty(backend.max_output_bytes(len(pages) * PAGE), dtype=np.uint8)
    b = np.empty_like(a)
    na = backend.compress_into(staging(ks, vs, pages), a)
    nb = backend.gather_compress_into(ks, vs, np.asarray(pages, dtype=np.int32), b)
    assert na == nb and a[:na].tobytes() == b[:nb].tobytes()


@needs_ml_dtypes
def test_scatter_into_decode_pools(kv_slice, backend):
    ks, vs = pools(kv_slice)
    src_pages, dst_pages = [3, 0, 17, 9], [1, 20, 5, 11]
    frame = np.empty(backend.max_output_bytes(4 * PAGE), dtype=np.uint8)
    n = backend.gather_compress_into(ks, vs, src_pages, frame)
    dk, dv = pools(kv_slice, fill=False)
    assert backend.scatter_decompress(frame[:n], dk, dv, dst_pages) == 4 * PAGE * backend.token_bytes
    for sp_, dp in zip(src_pages, dst_pages):
        for a, b in zip(ks + vs, dk + dv):
            assert a[sp_ * PAGE:(sp_ + 1) * PAGE].tobytes() == b[dp * PAGE:(dp + 1) * PAGE].tobytes()
    # the staged decode of the same frame equals the staging buffer of the decode side's pages
    out = np.empty(4 * PAGE * backend.token_bytes, dtype=np.uint8)
    backend.decompress_into(frame[:n], out)
    assert out.tobytes() == staging(dk, dv, dst_pages).tobytes()
    untouched = sorted(set(range(448 // PAGE)) - set(dst_pages))
    rows = (np.asarray(untouched)[:, None] * PAGE + np.arange(PAGE)).reshape(-1)
    assert not any(p[rows].view(np.uint16).any() for p in dk + dv)


@needs_ml_dtypes
def test_batches(kv_slice, backend):
    ks, vs = pools(kv_slice)
    bufs = [staging(ks, vs, p) for p in ([1], [2, 3], [27, 4, 8])]
    dsts = [np.empty(backend.max_output_bytes(b.nbytes // backend.token_bytes), dtype=np.uint8) for b in bufs]
    sizes = backend.compress_batch(bufs, dsts)
    assert sizes == [backend.compress_into(b, np.empty_like(d)) for b, d in zip(bufs, dsts)]
    outs = [np.empty(b.nbytes, dtype=np.uint8) for b in bufs]
    assert backend.decompress_batch([d[:s] for d, s in zip(dsts, sizes)], outs) == [b.nbytes for b in bufs]
    assert all(o.tobytes() == b.tobytes() for o, b in zip(outs, bufs))
    backend.drain()


def test_contract_errors(kv_slice, backend):
    assert backend.capabilities[0] == CAPABILITY_FRAME and "dtype=bf16" in backend.capabilities
    assert backend.max_output_bytes(0) == splitzip.compress_bound(0, "bf16")
    assert backend.max_output_bytes(10) == splitzip.compress_bound(10 * 2 * L * H * D, "bf16")
    one = np.zeros(backend.token_bytes + 2, dtype=np.uint8)
    with pytest.raises(ValueError, match="whole tokens"):
        backend.compress_into(one, np.empty(backend.max_output_bytes(2), dtype=np.uint8))
    tok = np.zeros(backend.token_bytes, dtype=np.uint8)
    with pytest.raises(ValueError, match="max_output_bytes"):
        backend.compress_into(tok, np.empty(100, dtype=np.uint8))
    frame = np.empty(backend.max_output_bytes(1), dtype=np.uint8)
    n = backend.compress_into(tok, frame)
    with pytest.raises(splitzip.DstTooSmallError):
        backend.decompress_into(frame[:n], np.empty(backend.token_bytes - 1, dtype=np.uint8))
    bad = frame[:n].copy()
    bad[n // 2] ^= 0xFF
    with pytest.raises(splitzip.Error):
        backend.decompress_into(bad, np.empty(backend.token_bytes, dtype=np.uint8))
    with pytest.raises(splitzip.UnsupportedDtypeError):  # a frame of another dtype is refused before decoding
        SplitZipBackend(L, H, D, "fp16").decompress_into(frame[:n], np.empty(backend.token_bytes, dtype=np.uint8))
    with pytest.raises(ValueError, match="sources"):
        backend.compress_batch([tok], [])
    ks, vs = pools(kv_slice, slots=64, fill=False)
    with pytest.raises(ValueError, match="page 4 ends"):
        backend.gather_compress_into(ks, vs, [4], frame)
    with pytest.raises(ValueError, match="K and"):
        backend.gather_compress_into(ks[:-1], vs, [0], frame)
    with pytest.raises(ValueError, match="empty"):
        backend.gather_compress_into(ks, vs, [], frame)
    with pytest.raises(ValueError, match="shape"):
        SplitZipBackend(L, H, 32, page_size=PAGE).gather_compress_into(ks, vs, [0], frame)
    with pytest.raises(TypeError):
        backend.gather_compress_into(ks, vs, 3, frame)
