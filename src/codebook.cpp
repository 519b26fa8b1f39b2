// codebook.cpp — codebook validation, the shipped default codebooks, exponent histograms, calibration, and the
// 32-byte codebook file of docs/FORMAT.md §5.
#include <stdio.h>
#include <string.h>

#include "internal.h"

using namespace splitzip;
using namespace splitzip::layout;

namespace {

struct DefaultCodebook {
  uint8_t dtype, kind, code_bits, count;
  uint8_t values[SZ_MAX_CODEBOOK];
};

#include "default_codebooks.inc"  // kDefaultCodebooks[]: one entry per (dtype, kind)

constexpr size_t kCbOffMagic = 0, kCbOffVersion = 4, kCbOffDtype = 5, kCbOffCodeBits = 6, kCbOffCount = 7,
                 kCbOffValues = 8, kCbOffReserved = 24, kCbOffChecksum = 28;

}  // namespace

extern "C" {

SZ_API sz_status sz_codebook_validate(const sz_codebook* cb) {
  if (cb == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  if (!dtype_known(cb->dtype)) return SZ_ERROR_UNSUPPORTED_DTYPE;
  const DtypeTraits t = dtype_traits(cb->dtype);
  if (cb->code_bits < 1 || cb->code_bits > 4 || cb->code_bits >= t.exponent_bits) return SZ_ERROR_BAD_CODEBOOK;
  if (cb->count < 1 || cb->count > (1u << cb->code_bits)) return SZ_ERROR_BAD_CODEBOOK;
  bool seen[256] = {};
  for (unsigned i = 0; i < SZ_MAX_CODEBOOK; ++i) {
    const unsigned e = cb->values[i];
    if (i >= cb->count) {
      if (e != 0) return SZ_ERROR_BAD_CODEBOOK;
      continue;
    }
    if (e >= (1u << t.exponent_bits) || seen[e]) return SZ_ERROR_BAD_CODEBOOK;
    seen[e] = true;
  }
  return SZ_OK;
}

SZ_API sz_status sz_default_codebook(sz_dtype dtype, sz_tensor_kind kind, sz_codebook* out) {
  if (out == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  if (!dtype_known((unsigned)dtype)) return SZ_ERROR_UNSUPPORTED_DTYPE;
  if (kind != SZ_KIND_GENERIC && kind != SZ_KIND_KEY && kind != SZ_KIND_VALUE) return SZ_ERROR_INVALID_ARGUMENT;
  for (const DefaultCodebook& d : kDefaultCodebooks) {
    if (d.dtype == (uint8_t)dtype && d.kind == (uint8_t)kind) {
      sz_codebook cb;
      memset(&cb, 0, sizeof cb);
      cb.dtype = d.dtype;
      cb.code_bits = d.code_bits;
      cb.count = d.count;
      memcpy(cb.values, d.values, SZ_MAX_CODEBOOK);
      *out = cb;
      return SZ_OK;
    }
  }
  return SZ_ERROR_INTERNAL;  // the table covers every (dtype, kind)
}

SZ_API sz_status sz_histogram_init(sz_histogram* hist, sz_dtype dtype) {
  if (hist == nullptr || !dtype_known((unsigned)dtype)) return SZ_ERROR_INVALID_ARGUMENT;
  memset(hist, 0, sizeof *hist);
  hist->dtype = (uint8_t)dtype;
  return SZ_OK;
}

SZ_API sz_status sz_histogram_add(sz_histogram* hist, const void* values, size_t n) {
  if (hist == nullptr || (values == nullptr && n != 0) || !dtype_known(hist->dtype)) return SZ_ERROR_INVALID_ARGUMENT;
  const DtypeTraits t = dtype_traits(hist->dtype);
  const uint8_t* p = (const uint8_t*)values;
  switch (t.value_bits) {
    case 8:
      for (size_t i = 0; i < n; ++i) ++hist->counts[exponent_of(p[i], t)];
      break;
    case 16: {
      // Four partial histograms hide the store-to-load dependency of repeated exponents.
      uint64_t part[4][256] = {};
      size_t i = 0;
      for (; i + 4 <= n; i += 4)
        for (int u = 0; u < 4; ++u) ++part[u][exponent_of(load_u16(p + 2 * (i + u)), t)];
      for (; i < n; ++i) ++part[0][exponent_of(load_u16(p + 2 * i), t)];
      for (int u = 0; u < 4; ++u)
        for (int e = 0; e < 256; ++e) hist->counts[e] += part[u][e];
      break;
    }
    default:
      for (size_t i = 0; i < n; ++i) ++hist->counts[exponent_of(load_u32(p + 4 * i), t)];
      break;
  }
  return SZ_OK;
}

SZ_API sz_status sz_calibrate(const sz_histogram* hist, sz_codebook* out, double* expected_bits_per_value) {
  if (hist == nullptr || out == nullptr || !dtype_known(hist->dtype)) return SZ_ERROR_INVALID_ARGUMENT;
  const DtypeTraits t = dtype_traits(hist->dtype);
  const unsigned exps = 1u << t.exponent_bits;
  uint64_t total = 0;
  for (unsigned e = 0; e < exps; ++e) total += hist->counts[e];
  if (total == 0) return SZ_ERROR_INVALID_ARGUMENT;

  // Exponents by decreasing count, ties by smaller exponent; only exponents that occur.
  uint8_t order[256];
  unsigned present = 0;
  for (unsigned e = 0; e < exps; ++e)
    if (hist->counts[e] != 0) order[present++] = (uint8_t)e;
  for (unsigned i = 1; i < present; ++i) {  // insertion sort: stable, so equal counts keep increasing exponents
    const uint8_t e = order[i];
    unsigned j = i;
    while (j > 0 && hist->counts[order[j - 1]] < hist->counts[e]) {
      order[j] = order[j - 1];
      --j;
    }
    order[j] = e;
  }

  const unsigned max_k = t.exponent_bits - 1 < 4 ? t.exponent_bits - 1 : 4;
  double best_bits = 0;
  unsigned best_k = 0;
  for (unsigned k = 1; k <= max_k; ++k) {
    const unsigned count = present < (1u << k) ? present : (1u << k);
    uint64_t covered = 0;
    for (unsigned i = 0; i < count; ++i) covered += hist->counts[order[i]];
    const double escape_rate = (double)(total - covered) / (double)total;
    double bits = k + 8.0 * kEscapeBytes * escape_rate;
    if (bits > t.exponent_bits) bits = t.exponent_bits;  // chunks would be stored as raw exponents
    if (best_k == 0 || bits < best_bits) {
      best_k = k;
      best_bits = bits;
    }
  }
  sz_codebook cb;
  memset(&cb, 0, sizeof cb);
  cb.dtype = hist->dtype;
  cb.code_bits = (uint8_t)best_k;
  cb.count = (uint8_t)(present < (1u << best_k) ? present : (1u << best_k));
  for (unsigned i = 0; i < cb.count; ++i) cb.values[i] = order[i];
  *out = cb;
  if (expected_bits_per_value) *expected_bits_per_value = best_bits;
  return SZ_OK;
}

SZ_API sz_status sz_codebook_serialize(const sz_codebook* cb, void* dst, size_t dst_capacity) {
  const sz_status s = sz_codebook_validate(cb);
  if (s != SZ_OK) return s;
  if (dst == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  if (dst_capacity < SZ_CODEBOOK_FILE_SIZE) return SZ_ERROR_DST_TOO_SMALL;
  uint8_t* p = (uint8_t*)dst;
  memset(p, 0, SZ_CODEBOOK_FILE_SIZE);
  store_u32(p + kCbOffMagic, kCodebookMagic);
  p[kCbOffVersion] = kFormatVersion;
  p[kCbOffDtype] = cb->dtype;
  p[kCbOffCodeBits] = cb->code_bits;
  p[kCbOffCount] = cb->count;
  memcpy(p + kCbOffValues, cb->values, SZ_MAX_CODEBOOK);
  store_u32(p + kCbOffChecksum, detail::h32(p, kCbOffChecksum));
  return SZ_OK;
}

SZ_API sz_status sz_codebook_deserialize(const void* src, size_t src_size, sz_codebook* out) {
  if (src == nullptr || out == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  const uint8_t* p = (const uint8_t*)src;
  if (src_size < SZ_CODEBOOK_FILE_SIZE) return SZ_ERROR_SRC_TRUNCATED;
  if (load_u32(p + kCbOffMagic) != kCodebookMagic) return SZ_ERROR_BAD_MAGIC;
  if (p[kCbOffVersion] != kFormatVersion) return SZ_ERROR_UNSUPPORTED_VERSION;
  if (load_u32(p + kCbOffChecksum) != detail::h32(p, kCbOffChecksum)) return SZ_ERROR_CHECKSUM;
  if (!dtype_known(p[kCbOffDtype])) return SZ_ERROR_UNSUPPORTED_DTYPE;
  if (load_u32(p + kCbOffReserved) != 0) return SZ_ERROR_CORRUPT;
  sz_codebook cb;
  memset(&cb, 0, sizeof cb);
  cb.dtype = p[kCbOffDtype];
  cb.code_bits = p[kCbOffCodeBits];
  cb.count = p[kCbOffCount];
  memcpy(cb.values, p + kCbOffValues, SZ_MAX_CODEBOOK);
  if (sz_codebook_validate(&cb) != SZ_OK) return SZ_ERROR_CORRUPT;
  *out = cb;
  return SZ_OK;
}

SZ_API sz_status sz_codebook_save(const sz_codebook* cb, const char* path) {
  if (path == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  uint8_t buf[SZ_CODEBOOK_FILE_SIZE];
  const sz_status s = sz_codebook_serialize(cb, buf, sizeof buf);
  if (s != SZ_OK) return s;
  FILE* f = fopen(path, "wb");
  if (f == nullptr) return SZ_ERROR_IO;
  const bool ok = fwrite(buf, 1, sizeof buf, f) == sizeof buf;
  if (fclose(f) != 0 || !ok) return SZ_ERROR_IO;
  return SZ_OK;
}

SZ_API sz_status sz_codebook_load(const char* path, sz_codebook* out) {
  if (path == nullptr || out == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  FILE* f = fopen(path, "rb");
  if (f == nullptr) return SZ_ERROR_IO;
  uint8_t buf[SZ_CODEBOOK_FILE_SIZE + 1];
  const size_t got = fread(buf, 1, sizeof buf, f);
  const bool err = ferror(f) != 0;
  fclose(f);
  if (err) return SZ_ERROR_IO;
  if (got > SZ_CODEBOOK_FILE_SIZE) return SZ_ERROR_CORRUPT;  // a codebook file is exactly 32 bytes
  return sz_codebook_deserialize(buf, got, out);
}

}  // extern "C"
