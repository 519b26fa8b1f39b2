// channels.cpp — channel books (docs/FORMAT.md §5.2): building, checking, (de)serialising, and calibrating them
// from per-channel exponent histograms; and the book reference of a version 2 frame (§4.1).
#include <string.h>

#include "internal.h"

using namespace splitzip;
using namespace splitzip::layout;

namespace {

bool book_shape_ok(unsigned dtype, unsigned k, uint32_t period, uint32_t tensors) {
  if (!dtype_known(dtype)) return false;
  const unsigned E = dtype_traits(dtype).exponent_bits;
  if (k < 1 || k > 4 || k >= E) return false;
  if (period < 1 || period > kMaxPeriod || tensors < 1 || tensors > kMaxTensors) return false;
  return (uint64_t)period * tensors <= kMaxBookBases;
}

// The 16 header bytes of a book file.
void book_header(const sz_channel_book& b, uint8_t h[kChannelBookHeader]) {
  memset(h, 0, kChannelBookHeader);
  store_u32(h, kChannelBookMagic);
  h[4] = kChannelBookVersion;
  h[5] = b.dtype;
  h[6] = b.code_bits;
  store_u32(h + 8, b.period);
  store_u32(h + 12, b.tensors);
}

// XXH3-64 of header + bases (the file without its checksum), streamed: no copy of the bases.
uint64_t book_hash(const sz_channel_book& b) {
  uint8_t h[kChannelBookHeader];
  book_header(b, h);
  return detail::h64_pair(h, kChannelBookHeader, b.bases, (size_t)b.period * b.tensors);
}

}  // namespace

extern "C" {

SZ_API sz_status sz_channel_book_init(sz_channel_book* book, sz_dtype dtype, unsigned code_bits, uint32_t period,
                                      uint32_t tensors, const uint8_t* bases) {
  if (book == nullptr || bases == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  if (!dtype_known((unsigned)dtype)) return SZ_ERROR_UNSUPPORTED_DTYPE;
  if (!book_shape_ok((unsigned)dtype, code_bits, period, tensors)) return SZ_ERROR_INVALID_ARGUMENT;
  const unsigned E = dtype_traits((unsigned)dtype).exponent_bits;
  for (uint64_t i = 0; i < (uint64_t)period * tensors; ++i)
    if (bases[i] >= (1u << E)) return SZ_ERROR_BAD_CODEBOOK;
  sz_channel_book b;
  memset(&b, 0, sizeof b);
  b.dtype = (uint8_t)dtype;
  b.code_bits = (uint8_t)code_bits;
  b.period = period;
  b.tensors = tensors;
  b.bases = bases;
  b.id = book_hash(b);
  *book = b;
  return SZ_OK;
}

SZ_API sz_status sz_channel_book_validate(const sz_channel_book* book) {
  if (book == nullptr || book->bases == nullptr) return SZ_ERROR_BAD_CODEBOOK;
  if (!book_shape_ok(book->dtype, book->code_bits, book->period, book->tensors)) return SZ_ERROR_BAD_CODEBOOK;
  if (book->reserved[0] || book->reserved[1]) return SZ_ERROR_BAD_CODEBOOK;
  const unsigned E = dtype_traits(book->dtype).exponent_bits;
  for (uint64_t i = 0; i < (uint64_t)book->period * book->tensors; ++i)
    if (book->bases[i] >= (1u << E)) return SZ_ERROR_BAD_CODEBOOK;
  if (book->id != book_hash(*book)) return SZ_ERROR_BAD_CODEBOOK;
  return SZ_OK;
}

SZ_API size_t sz_channel_book_file_size(const sz_channel_book* book) {
  if (book == nullptr || !book_shape_ok(book->dtype, book->code_bits, book->period, book->tensors)) return 0;
  return kChannelBookHeader + (size_t)book->period * book->tensors + 4;
}

SZ_API sz_status sz_channel_book_serialize(const sz_channel_book* book, void* dst_v, size_t dst_capacity,
                                           size_t* dst_size) {
  if (dst_v == nullptr || dst_size == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  const sz_status s = sz_channel_book_validate(book);
  if (s != SZ_OK) return s;
  const size_t size = sz_channel_book_file_size(book), nb = (size_t)book->period * book->tensors;
  if (dst_capacity < size) return SZ_ERROR_DST_TOO_SMALL;
  uint8_t* dst = (uint8_t*)dst_v;
  book_header(*book, dst);
  memcpy(dst + kChannelBookHeader, book->bases, nb);
  store_u32(dst + kChannelBookHeader + nb, (uint32_t)book->id);
  *dst_size = size;
  return SZ_OK;
}

SZ_API sz_status sz_channel_book_parse(const void* src_v, size_t src_size, sz_channel_book* book) {
  if (src_v == nullptr || book == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  const uint8_t* src = (const uint8_t*)src_v;
  if (src_size < kChannelBookHeader + 4) return SZ_ERROR_SRC_TRUNCATED;
  const uint32_t period = load_u32(src + 8), tensors = load_u32(src + 12);
  const uint64_t nb = (uint64_t)period * tensors;
  if ((uint64_t)src_size < kChannelBookHeader + nb + 4) return SZ_ERROR_SRC_TRUNCATED;
  if (load_u32(src) != kChannelBookMagic) return SZ_ERROR_BAD_MAGIC;
  if (src[4] != kChannelBookVersion) return SZ_ERROR_UNSUPPORTED_VERSION;
  const uint64_t id = detail::h64(src, (size_t)(kChannelBookHeader + nb));
  if (load_u32(src + kChannelBookHeader + nb) != (uint32_t)id) return SZ_ERROR_CHECKSUM;
  if (!dtype_known(src[5])) return SZ_ERROR_UNSUPPORTED_DTYPE;
  if (!book_shape_ok(src[5], src[6], period, tensors) || src[7] != 0) return SZ_ERROR_CORRUPT;
  const unsigned E = dtype_traits(src[5]).exponent_bits;
  for (uint64_t i = 0; i < nb; ++i)
    if (src[kChannelBookHeader + i] >= (1u << E)) return SZ_ERROR_CORRUPT;
  sz_channel_book b;
  memset(&b, 0, sizeof b);
  b.dtype = src[5];
  b.code_bits = src[6];
  b.period = period;
  b.tensors = tensors;
  b.bases = src + kChannelBookHeader;
  b.id = id;
  *book = b;
  return SZ_OK;
}

SZ_API size_t sz_channel_histogram_size(sz_dtype dtype, uint32_t tensors, uint32_t period) {
  if (!dtype_known((unsigned)dtype) || !book_shape_ok((unsigned)dtype, 1, period, tensors)) return 0;
  return (size_t)tensors * period * ((size_t)1 << dtype_traits((unsigned)dtype).exponent_bits) * sizeof(uint32_t);
}

SZ_API sz_status sz_channel_histogram_add(uint32_t* counts, sz_dtype dtype, uint32_t tensors, uint32_t period,
                                          const void* values_v, uint64_t tokens) {
  if (counts == nullptr || (values_v == nullptr && tokens > 0)) return SZ_ERROR_INVALID_ARGUMENT;
  if (sz_channel_histogram_size(dtype, tensors, period) == 0) return SZ_ERROR_INVALID_ARGUMENT;
  const DtypeTraits t = dtype_traits((unsigned)dtype);
  const unsigned vb = t.value_bits / 8, NE = 1u << t.exponent_bits;
  const uint8_t* values = (const uint8_t*)values_v;
  for (uint64_t tz = 0; tz < tensors; ++tz) {
    uint32_t* ct = counts + tz * period * NE;
    const uint8_t* v = values + tz * tokens * period * vb;
    for (uint64_t i = 0; i < tokens * period; ++i) {
      uint32_t x = 0;
      for (unsigned b = 0; b < vb; ++b) x |= (uint32_t)v[i * vb + b] << (8 * b);
      uint32_t& c = ct[(i % period) * NE + exponent_of(x, t)];
      if (c != 0xFFFFFFFFu) ++c;  // saturate rather than wrap on huge samples
    }
  }
  return SZ_OK;
}

SZ_API sz_status sz_channel_calibrate(const uint32_t* counts, sz_dtype dtype, uint32_t tensors, uint32_t period,
                                      unsigned code_bits, uint8_t* bases_out, unsigned* code_bits_out,
                                      double* bits_per_value) {
  if (counts == nullptr || bases_out == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  if (sz_channel_histogram_size(dtype, tensors, period) == 0) return SZ_ERROR_INVALID_ARGUMENT;
  const DtypeTraits t = dtype_traits((unsigned)dtype);
  const unsigned E = t.exponent_bits, NE = 1u << E;
  if (code_bits != 0 && (code_bits > 4 || code_bits >= E)) return SZ_ERROR_INVALID_ARGUMENT;
  const uint64_t channels = (uint64_t)tensors * period;
  uint64_t total = 0;
  for (uint64_t i = 0; i < channels * NE; ++i) total += counts[i];
  if (total == 0) return SZ_ERROR_INVALID_ARGUMENT;
  // For every width: each channel's best window, and the expected size (k bits a value, 24 bits an escape, or the
  // raw E bits of a value where a channel would be cheaper raw; the same model as sz_calibrate).
  unsigned best_k = 0;
  double best_bits = 0;
  for (unsigned k = 1; k <= 4 && k < E; ++k) {
    if (code_bits != 0 && k != code_bits) continue;
    const unsigned W = 1u << k;
    double bits = 0;
    for (uint64_t ch = 0; ch < channels; ++ch) {
      const uint32_t* h = counts + ch * NE;
      uint64_t all = 0, in = 0, best = 0;
      for (unsigned e = 0; e < NE; ++e) all += h[e];
      for (unsigned e = 0; e < W && e < NE; ++e) in += h[e];
      best = in;
      for (unsigned b = 1; b + W <= NE; ++b) {  // slide the window: ties keep the lower base
        in += h[b + W - 1];
        in -= h[b - 1];
        if (in > best) best = in;
      }
      const double coded = (double)all * k + 24.0 * (double)(all - best), raw = (double)all * E;
      bits += coded < raw ? coded : raw;
    }
    if (best_k == 0 || bits < best_bits) {
      best_k = k;
      best_bits = bits;
    }
  }
  if (best_k == 0) return SZ_ERROR_INVALID_ARGUMENT;
  const unsigned W = 1u << best_k;
  for (uint64_t ch = 0; ch < channels; ++ch) {
    const uint32_t* h = counts + ch * NE;
    uint64_t in = 0, best = 0;
    unsigned base = 0;
    for (unsigned e = 0; e < W && e < NE; ++e) in += h[e];
    best = in;
    for (unsigned b = 1; b + W <= NE; ++b) {
      in += h[b + W - 1];
      in -= h[b - 1];
      if (in > best) {
        best = in;
        base = b;
      }
    }
    bases_out[ch] = (uint8_t)base;
  }
  if (code_bits_out) *code_bits_out = best_k;
  if (bits_per_value) *bits_per_value = best_bits / (double)total;
  return SZ_OK;
}

SZ_API sz_status sz_frame_book_ref(const void* src, size_t src_size, uint64_t* book_id, uint32_t* tensor,
                                   uint32_t* period) {
  if (src == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  detail::FrameHeader h;
  const sz_status s = detail::parse_frame_header_only((const uint8_t*)src, src_size, &h);
  if (s != SZ_OK) return s;
  if (!h.channels) return SZ_ERROR_INVALID_ARGUMENT;
  if (book_id) *book_id = h.book_id;
  if (tensor) *tensor = h.tensor;
  if (period) *period = h.period;
  return SZ_OK;
}

}  // extern "C"
