// reference.cpp — the scalar reference codec: docs/FORMAT.md turned into plain value-by-value loops, for frames
// with a codebook (version 1) and with channel windows (version 2, §4.9: the same loops, another code mapping).
//
// This is the oracle that the fast CPU codec and the CUDA kernels are tested against, so it favours being obviously
// right over being fast: bit fields are read and written one bit at a time, every value is split and joined with
// the helpers of layout.h, and the decoder checks every rule of §4 in a fixed order:
//   header steps 1-8 (§4.1) -> destination capacity -> chunk index (§4.3, record sizes of §4.5) -> then chunk by
//   chunk, in order: codes < count, escape rules, padding bits of the record, padding bits of the rest section (last
//   chunk), and finally the chunk checksum (§4.6). The first failure is returned.
#include <string.h>

#include "internal.h"

using namespace splitzip;
using namespace splitzip::layout;

namespace {

// §3: field j of a packed stream of b-bit fields occupies bits [j*b, (j+1)*b) of the stream read LSB first.
uint32_t get_field(const uint8_t* base, uint64_t j, unsigned b) {
  uint32_t v = 0;
  for (unsigned i = 0; i < b; ++i) {
    const uint64_t bit = j * b + i;
    v |= (uint32_t)((base[bit / 8] >> (bit % 8)) & 1u) << i;
  }
  return v;
}

void put_field(uint8_t* base, uint64_t j, unsigned b, uint32_t v) {  // base must be zeroed
  for (unsigned i = 0; i < b; ++i) {
    const uint64_t bit = j * b + i;
    if ((v >> i) & 1u) base[bit / 8] |= (uint8_t)(1u << (bit % 8));
  }
}

// Values are little-endian words of W bits.
uint32_t load_value(const uint8_t* src, uint64_t i, unsigned value_bytes) {
  uint32_t v = 0;
  for (unsigned b = 0; b < value_bytes; ++b) v |= (uint32_t)src[i * value_bytes + b] << (8 * b);
  return v;
}

void store_value(uint8_t* dst, uint64_t i, unsigned value_bytes, uint32_t v) {
  for (unsigned b = 0; b < value_bytes; ++b) dst[i * value_bytes + b] = (uint8_t)(v >> (8 * b));
}

// The code of exponent e of value i of the frame, or -1 when e escapes (not in the codebook / the channel window).
int code_of(const detail::CodeMap& m, uint64_t i, uint32_t e) {
  if (m.bases) {
    const uint32_t b = m.bases[i % m.period];
    return e >= b && e - b < (1u << m.k) ? (int)(e - b) : -1;
  }
  return m.code_of[e] == detail::kEscape ? -1 : (int)m.code_of[e];
}

// The exponent that code q of value i stands for, or -1 when no exponent has that code.
int exponent_for(const detail::CodeMap& m, uint64_t i, uint32_t q) {
  if (m.bases) {
    const uint32_t e = m.bases[i % m.period] + q;
    return e < (1u << m.exponent_bits) ? (int)e : -1;
  }
  return q < m.count ? (int)m.exp_of[q] : -1;
}

// Padding fields [len, ceil(len/8)*8) of a packed stream must be all-zero bits (§3).
bool padding_is_zero(const uint8_t* base, uint64_t len, unsigned b) {
  for (uint64_t j = len; j < ceil_div(len, 8) * 8; ++j)
    if (get_field(base, j, b) != 0) return false;
  return true;
}

}  // namespace

extern "C" {

namespace {

sz_status compress_reference(const void* src_v, uint64_t n, sz_dtype dtype, const sz_codebook* codebook,
                             const sz_channel_book* book, uint32_t tensor, const sz_params* params, void* dst_v,
                             size_t dst_capacity, size_t* dst_size) {
  sz_codebook cb;
  sz_params p;
  sz_status s = detail::check_compress_args(src_v, n, dtype, codebook, params, dst_v, dst_size, &cb, &p);
  if (s != SZ_OK) return s;
  if (book && (s = detail::check_book_arg(book, dtype, tensor)) != SZ_OK) return s;
  detail::CodeMap map;
  detail::code_map_for(cb, book, tensor, &map);
  const uint8_t* src = (const uint8_t*)src_v;
  uint8_t* dst = (uint8_t*)dst_v;
  const DtypeTraits t = dtype_traits((unsigned)dtype);
  const unsigned value_bytes = t.value_bits / 8;
  const unsigned k = map.k;
  const uint64_t S = (uint64_t)1 << p.chunk_log2;
  const uint64_t C = n_chunks(n, p.chunk_log2);
  const bool checksums = (p.flags & kFlagChecksums) != 0;

  // Pass 1: the size of every chunk record (§4.5, §4.7), hence the frame size.
  uint64_t exp_size = 0;
  for (uint64_t c = 0; c < C; ++c) {
    const uint64_t len = chunk_len(n, p.chunk_log2, c);
    uint64_t escapes = 0;
    for (uint64_t j = 0; j < len; ++j)
      if (code_of(map, c * S + j, exponent_of(load_value(src, c * S + j, value_bytes), t)) < 0) ++escapes;
    const uint64_t coded = packed_bytes(len, k) + kEscapeBytes * escapes;
    const uint64_t raw = packed_bytes(len, t.exponent_bits);
    exp_size += coded <= raw ? coded : raw;
  }
  const FrameOffsets off = frame_offsets(n, p.chunk_log2, checksums, t, exp_size);
  if (off.end > (uint64_t)dst_capacity) return SZ_ERROR_DST_TOO_SMALL;

  // Pass 2: write the frame.
  memset(dst, 0, off.end);
  detail::write_frame_header(dst, cb, p.chunk_log2, p.flags, n, exp_size, book, tensor);
  for (uint64_t i = 0; i < n; ++i) put_field(dst + off.rest, i, t.rest_bits, rest_of(load_value(src, i, value_bytes), t));
  uint64_t end = 0;
  for (uint64_t c = 0; c < C; ++c) {
    const uint64_t len = chunk_len(n, p.chunk_log2, c);
    const uint8_t* values = src + c * S * value_bytes;
    uint8_t* record = dst + off.exponents + end;
    uint64_t escapes = 0;
    for (uint64_t j = 0; j < len; ++j)
      if (code_of(map, c * S + j, exponent_of(load_value(values, j, value_bytes), t)) < 0) ++escapes;
    const uint64_t g = packed_bytes(len, k);
    const uint64_t coded = g + kEscapeBytes * escapes;
    const uint64_t raw = packed_bytes(len, t.exponent_bits);
    uint64_t mode;
    if (coded <= raw) {
      mode = kModeCoded;
      uint8_t* positions = record + g;
      uint8_t* exponents = positions + 2 * escapes;
      uint64_t x = 0;
      for (uint64_t j = 0; j < len; ++j) {
        const uint32_t e = exponent_of(load_value(values, j, value_bytes), t);
        const int code = code_of(map, c * S + j, e);
        if (code >= 0) {
          put_field(record, j, k, (uint32_t)code);
        } else {  // escape: code 0 (already zero), position and raw exponent in the lists
          store_u16(positions + 2 * x, (uint16_t)j);
          exponents[x] = (uint8_t)e;
          ++x;
        }
      }
      end += coded;
    } else {
      mode = kModeRaw;
      for (uint64_t j = 0; j < len; ++j)
        put_field(record, j, t.exponent_bits, exponent_of(load_value(values, j, value_bytes), t));
      end += raw;
    }
    store_u64(dst + off.index + kIndexEntrySize * c, end | (mode << kIndexModeShift));
    if (checksums) store_u32(dst + off.checksums + kChecksumEntrySize * c, detail::chunk_checksum(p.flags, values, len * value_bytes));
  }
  *dst_size = (size_t)off.end;
  return SZ_OK;
}

sz_status decompress_reference(const void* src_v, size_t src_size, const sz_channel_book* book, void* dst_v,
                               size_t dst_capacity, size_t* dst_size) {
  if (src_v == nullptr || dst_size == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  const uint8_t* src = (const uint8_t*)src_v;
  uint8_t* dst = (uint8_t*)dst_v;
  detail::FrameHeader h;
  sz_status s = detail::parse_frame_header(src, src_size, &h);
  if (s != SZ_OK) return s;
  if ((s = detail::check_frame_book(h, book)) != SZ_OK) return s;  // step 8
  detail::CodeMap map;
  detail::code_map_of(h, book, &map);
  const DtypeTraits t = h.t;
  const unsigned value_bytes = t.value_bits / 8;
  const uint64_t out_size = h.n * value_bytes;
  if (out_size > (uint64_t)dst_capacity) return SZ_ERROR_DST_TOO_SMALL;
  if (dst == nullptr && out_size != 0) return SZ_ERROR_INVALID_ARGUMENT;
  s = detail::check_frame_index(src, h);
  if (s != SZ_OK) return s;

  const uint64_t S = (uint64_t)1 << h.chunk_log2;
  const unsigned k = h.code_bits;
  const uint8_t* rest = src + h.off.rest;
  uint64_t begin = 0;
  for (uint64_t c = 0; c < h.chunks; ++c) {
    const uint64_t entry = load_u64(src + h.off.index + kIndexEntrySize * c);
    const uint64_t end = entry & kIndexEndMask;
    const uint64_t mode = entry >> kIndexModeShift;
    const uint64_t len = chunk_len(h.n, h.chunk_log2, c);
    const uint8_t* record = src + h.off.exponents + begin;
    uint8_t* out = dst + c * S * value_bytes;
    const uint64_t first = c * S;  // index of the chunk's first value in the rest section

    if (mode == kModeRaw) {
      if (!padding_is_zero(record, len, t.exponent_bits)) return SZ_ERROR_CORRUPT;
    } else {
      const uint64_t g = packed_bytes(len, k);
      const uint64_t escapes = (end - begin - g) / kEscapeBytes;
      const uint8_t* positions = record + g;
      const uint8_t* exponents = positions + 2 * escapes;
      for (uint64_t j = 0; j < len; ++j)
        if (exponent_for(map, first + j, get_field(record, j, k)) < 0) return SZ_ERROR_CORRUPT;
      for (uint64_t x = 0; x < escapes; ++x) {
        const uint64_t pos = load_u16(positions + 2 * x);
        if (pos >= len) return SZ_ERROR_CORRUPT;
        if (x > 0 && pos <= load_u16(positions + 2 * (x - 1))) return SZ_ERROR_CORRUPT;
        if (get_field(record, pos, k) != 0) return SZ_ERROR_CORRUPT;
        if (exponents[x] >= (1u << t.exponent_bits) || code_of(map, first + pos, exponents[x]) >= 0)
          return SZ_ERROR_CORRUPT;
      }
      if (!padding_is_zero(record, len, k)) return SZ_ERROR_CORRUPT;
    }
    if (c + 1 == h.chunks && !padding_is_zero(rest + first * t.rest_bits / 8, len, t.rest_bits))
      return SZ_ERROR_CORRUPT;

    // Decode the chunk.
    if (mode == kModeRaw) {
      for (uint64_t j = 0; j < len; ++j) {
        const uint32_t e = get_field(record, j, t.exponent_bits);
        store_value(out, j, value_bytes, join(e, get_field(rest, first + j, t.rest_bits), t));
      }
    } else {
      const uint64_t g = packed_bytes(len, k);
      const uint64_t escapes = (end - begin - g) / kEscapeBytes;
      const uint8_t* positions = record + g;
      const uint8_t* exponents = positions + 2 * escapes;
      uint64_t x = 0;
      for (uint64_t j = 0; j < len; ++j) {
        uint32_t e;
        if (x < escapes && load_u16(positions + 2 * x) == j) {
          e = exponents[x];
          ++x;
        } else {
          e = (uint32_t)exponent_for(map, first + j, get_field(record, j, k));
        }
        store_value(out, j, value_bytes, join(e, get_field(rest, first + j, t.rest_bits), t));
      }
    }
    if (h.checksums) {
      const uint32_t expected = load_u32(src + h.off.checksums + kChecksumEntrySize * c);
      if (detail::chunk_checksum(h.flags, out, len * value_bytes) != expected) return SZ_ERROR_CHECKSUM;
    }
    begin = end;
  }
  *dst_size = (size_t)out_size;
  return SZ_OK;
}

}  // namespace

SZ_API sz_status sz_compress_reference(const void* src, uint64_t n, sz_dtype dtype, const sz_codebook* codebook,
                                       const sz_params* params, void* dst, size_t dst_capacity, size_t* dst_size) {
  return compress_reference(src, n, dtype, codebook, nullptr, 0, params, dst, dst_capacity, dst_size);
}

SZ_API sz_status sz_compress_channels_reference(const void* src, uint64_t n, sz_dtype dtype,
                                                const sz_channel_book* book, uint32_t tensor,
                                                const sz_params* params, void* dst, size_t dst_capacity,
                                                size_t* dst_size) {
  if (book == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  return compress_reference(src, n, dtype, nullptr, book, tensor, params, dst, dst_capacity, dst_size);
}

SZ_API sz_status sz_decompress_reference(const void* src, size_t src_size, void* dst, size_t dst_capacity,
                                         size_t* dst_size) {
  return decompress_reference(src, src_size, nullptr, dst, dst_capacity, dst_size);
}

SZ_API sz_status sz_decompress_book_reference(const void* src, size_t src_size, const sz_channel_book* book,
                                              void* dst, size_t dst_capacity, size_t* dst_size) {
  return decompress_reference(src, src_size, book, dst, dst_capacity, dst_size);
}

}  // extern "C"
