// agent/header.cuh — the frame header of docs/FORMAT.md §4.1 on the device: written by the encoder's last chunk,
// parsed and checked by every CTA of the decoder (the host never reads a frame that lives in device memory).
#pragma once

#include "cuda/simt.cuh"
#include "cuda/xxh3.cuh"
#include "layout.h"
#include "splitzip/splitzip.h"

namespace splitzip {
namespace cuda {

struct Header {
  uint32_t dtype, k, chunk_log2, flags, count;
  uint8_t codebook[16];
  bool channels;  // version 2: channel windows, with the book reference below
  uint64_t book_id;
  uint32_t tensor, period;
  uint64_t n, exp_size, n_chunks;
  uint64_t index_off, checksum_off, rest_off, exp_off;
};

// §4.1 steps 1-4, the start of every version's header checks (b: the frame's first 64 bytes, src_size its bytes):
// SZ_OK with the frame's version, or the first failing step's error.
SZ_DEV sz_status parse_header_start(const uint8_t* b, uint64_t src_size, uint32_t* version) {
  if (src_size < layout::kHeaderSize) return SZ_ERROR_SRC_TRUNCATED;
  if (layout::load_u32(b) != layout::kFrameMagic) return SZ_ERROR_BAD_MAGIC;
  *version = b[layout::kOffVersion];
  if (*version != layout::kFormatVersion && *version != layout::kFormatVersionChannels &&
      *version != layout::kFormatVersionEntropy)
    return SZ_ERROR_UNSUPPORTED_VERSION;
  if (xxh3::h32(b, layout::kHeaderChecksummed) != layout::load_u32(b + layout::kOffHeaderChecksum))
    return SZ_ERROR_CHECKSUM;
  return SZ_OK;
}

// §4.1 steps 1-7 in the spec's order, for a frame of src_size bytes whose first 64 bytes (if it has them) the caller
// copied to b, so that the header costs one round trip to memory rather than one per check. One thread, on the
// critical path of every decode call: the fields and checks stay in registers (the codebook's duplicates by
// unrolled pairwise compares, not a bit set indexed at run time, which would live in local memory), and *h is
// written once, when every check has passed.
SZ_NOINLINE sz_status parse_header(const uint8_t* b, uint64_t src_size, Header* h) {
  uint32_t version = 0;
  const sz_status s0 = parse_header_start(b, src_size, &version);
  if (s0 != SZ_OK) return s0;
  // Entropy-coded frames (§4.10) are known to the format but not decoded by these kernels.
  if (version == layout::kFormatVersionEntropy) return SZ_ERROR_NOT_SUPPORTED;
  const uint32_t dtype = b[layout::kOffDtype];
  if (!layout::dtype_known(dtype)) return SZ_ERROR_UNSUPPORTED_DTYPE;
  const layout::DtypeTraits t = layout::dtype_traits(dtype);
  Header x;
  x.dtype = dtype;
  x.k = b[layout::kOffCodeBits];
  x.chunk_log2 = b[layout::kOffChunkLog2];
  x.flags = layout::load_u32(b + layout::kOffFlags);
  x.count = b[layout::kOffCodebookCount];
  x.n = layout::load_u64(b + layout::kOffNValues);
  x.exp_size = layout::load_u64(b + layout::kOffExpSectionSize);
  if (x.k < 1 || x.k > 4 || x.k >= t.exponent_bits) return SZ_ERROR_CORRUPT;
  if (x.chunk_log2 < layout::kMinChunkLog2 || x.chunk_log2 > layout::kMaxChunkLog2) return SZ_ERROR_CORRUPT;
  x.channels = version == layout::kFormatVersionChannels;
  if ((x.flags & ~(layout::kKnownFlags | layout::kFlagChannels)) || !layout::flags_consistent(x.flags))
    return SZ_ERROR_CORRUPT;
  if (((x.flags & layout::kFlagChannels) != 0) != x.channels) return SZ_ERROR_CORRUPT;
  if (x.count < 1 || x.count > (1u << x.k) || (x.channels && x.count != (1u << x.k))) return SZ_ERROR_CORRUPT;
  if (b[13] | b[14] | b[15]) return SZ_ERROR_CORRUPT;
  if (x.n >= layout::kMaxValues) return SZ_ERROR_CORRUPT;
  x.book_id = 0;
  x.tensor = x.period = 0;
  bool bad = false;
  if (x.channels) {
    x.book_id = layout::load_u64(b + layout::kOffBookId);
    x.tensor = layout::load_u32(b + layout::kOffBookTensor);
    x.period = layout::load_u32(b + layout::kOffBookPeriod);
    if (x.period < 1 || x.period > layout::kMaxPeriod || x.tensor >= layout::kMaxTensors) return SZ_ERROR_CORRUPT;
#pragma unroll
    for (int i = 0; i < 16; ++i) x.codebook[i] = 0;
  } else {
    // Entries below count: exponents in range, no two equal; entries past it: zero.
#pragma unroll
    for (int i = 0; i < 16; ++i) x.codebook[i] = b[layout::kOffCodebook + i];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const uint32_t v = x.codebook[i];
      if ((uint32_t)i < x.count) {
        bad |= v >= (1u << t.exponent_bits);
#pragma unroll
        for (int j = 0; j < i; ++j) bad |= x.codebook[j] == v;
      } else {
        bad |= v != 0;
      }
    }
  }
#pragma unroll
  for (int i = 48; i < 60; ++i) bad |= b[i] != 0;
  if (bad) return SZ_ERROR_CORRUPT;
  const bool checksums = (x.flags & layout::kFlagChecksums) != 0;
  const layout::FrameOffsets o = layout::frame_offsets(x.n, x.chunk_log2, checksums, t, 0);
  x.n_chunks = layout::n_chunks(x.n, x.chunk_log2);
  x.index_off = o.index;
  x.checksum_off = o.checksums;
  x.rest_off = o.rest;
  x.exp_off = o.exponents;
  if (o.exponents > src_size || x.exp_size > src_size - o.exponents) return SZ_ERROR_SRC_TRUNCATED;
  *h = x;
  return SZ_OK;
}

// Writes the 64-byte header with its checksum: version 1 with the codebook, or version 2 (channels) with the book
// reference. One thread.
SZ_NOINLINE void write_header(uint8_t* dst, uint32_t dtype, uint32_t k, uint32_t chunk_log2, uint32_t flags,
                              uint32_t count, const uint8_t* codebook, uint64_t n, uint64_t exp_size, bool channels,
                              uint64_t book_id, uint32_t tensor, uint32_t period) {
  uint8_t h[64];
  for (int i = 0; i < 64; ++i) h[i] = 0;
  layout::store_u32(h + layout::kOffMagic, layout::kFrameMagic);
  h[layout::kOffVersion] = channels ? layout::kFormatVersionChannels : layout::kFormatVersion;
  h[layout::kOffDtype] = (uint8_t)dtype;
  h[layout::kOffCodeBits] = (uint8_t)k;
  h[layout::kOffChunkLog2] = (uint8_t)chunk_log2;
  layout::store_u32(h + layout::kOffFlags, channels ? flags | layout::kFlagChannels : flags);
  h[layout::kOffCodebookCount] = (uint8_t)(channels ? 1u << k : count);
  layout::store_u64(h + layout::kOffNValues, n);
  layout::store_u64(h + layout::kOffExpSectionSize, exp_size);
  if (channels) {
    layout::store_u64(h + layout::kOffBookId, book_id);
    layout::store_u32(h + layout::kOffBookTensor, tensor);
    layout::store_u32(h + layout::kOffBookPeriod, period);
  } else {
    for (uint32_t i = 0; i < count; ++i) h[layout::kOffCodebook + i] = codebook[i];
  }
  layout::store_u32(h + layout::kOffHeaderChecksum, xxh3::h32(h, layout::kHeaderChecksummed));
  for (int i = 0; i < 64; ++i) dst[i] = h[i];
}

}  // namespace cuda
}  // namespace splitzip
