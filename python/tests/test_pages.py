"""The batched page API on the host: a vLLM-like paged cache (2, num_blocks, block_size, kv_heads, head_size)."""

import numpy as np
import pytest

import splitzip
from conftest import numpy_dtype


def make_cache(kv_slice, num_blocks=32, block_size=16):
    # layer 0 of the real slice: K and V, 224 tokens x 4 heads x 64 dims -> 14 blocks of 16 tokens, tiled
    layer = kv_slice[0]  # (2, 224, 4, 64)
    blocks = layer.reshape(2, 224 // block_size, block_size, 4, 64)
    reps = -(-num_blocks // blocks.shape[1])
    cache = np.concatenate([blocks] * reps, axis=1)[:, :num_blocks].copy()
    return cache


def request_pages(cache, block_ids):
    return [cache[kv, b] for kv in range(2) for b in block_ids]


def test_pages_frame_is_the_frame_of_the_concatenation(kv_slice):
    cache = make_cache(kv_slice)
    blocks = [3, 17, 5, 30]
    pages = request_pages(cache, blocks)
    frame = splitzip.compress_pages(pages, dtype="bf16")
    concat = np.concatenate([p.reshape(-1) for p in pages])
    assert frame.tobytes() == splitzip.compress(concat, dtype="bf16").tobytes()


def test_pages_round_trip_into_other_cache(kv_slice):
    src = make_cache(kv_slice).view(numpy_dtype("bf16"))
    dst = np.zeros_like(src)
    src_blocks, dst_blocks = [1, 2, 9, 20, 31], [0, 7, 8, 3, 12]
    frame = splitzip.compress_pages(request_pages(src, src_blocks))
    splitzip.decompress_pages(frame, request_pages(dst, dst_blocks))
    for s, d in zip(src_blocks, dst_blocks):
        np.testing.assert_array_equal(dst[:, d].view(np.uint16), src[:, s].view(np.uint16))
    untouched = sorted(set(range(dst.shape[1])) - set(dst_blocks))
    assert not dst[:, untouched].view(np.uint16).any()


def test_page_count_mismatch(kv_slice):
    cache = make_cache(kv_slice)
    frame = splitzip.compress_pages(request_pages(cache, [1, 2]), dtype="bf16")
    with pytest.raises(splitzip.DstTooSmallError):
        splitzip.decompress_pages(frame, request_pages(cache.copy(), [1]))
    with pytest.raises(splitzip.InvalidArgumentError):
        splitzip.decompress_pages(frame, request_pages(cache.copy(), [1, 2, 3]))


def test_pages_must_match(kv_slice):
    cache = make_cache(kv_slice)
    with pytest.raises(ValueError, match="same size"):
        splitzip.compress_pages([cache[0, 0], cache[0, 1, :8]], dtype="bf16")
    with pytest.raises(ValueError, match="no pages"):
        splitzip.compress_pages([], dtype="bf16")
    strided = cache[:, 0]  # (2, 16, 4, 64) slice across the K/V axis: not contiguous
    with pytest.raises(ValueError, match="contiguous"):
        splitzip.compress_pages([strided], dtype="bf16")
