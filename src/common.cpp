// common.cpp — version, status names, dtype helpers, parameters, the frame header (docs/FORMAT.md §4.1), the chunk
// index checks (§4.3) and sz_frame_info_get.
#include <string.h>

#include "internal.h"

namespace splitzip {
namespace detail {

using namespace layout;

static bool reserved_zero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != 0) return false;
  return true;
}

sz_status parse_frame_header_only(const uint8_t* src, size_t src_size, FrameHeader* h) {
  if (src_size < kHeaderSize) return SZ_ERROR_SRC_TRUNCATED;                            // 1
  if (load_u32(src + kOffMagic) != kFrameMagic) return SZ_ERROR_BAD_MAGIC;              // 2
  const unsigned version = src[kOffVersion];
  if (version != kFormatVersion && version != kFormatVersionChannels && version != kFormatVersionEntropy)
    return SZ_ERROR_UNSUPPORTED_VERSION;                                                 // 3
  if (load_u32(src + kOffHeaderChecksum) != h32(src, kHeaderChecksummed)) return SZ_ERROR_CHECKSUM;  // 4
  const unsigned dtype = src[kOffDtype];
  if (!dtype_known(dtype)) return SZ_ERROR_UNSUPPORTED_DTYPE;                           // 5
  // 6: every other field in range, reserved bits and bytes zero.
  const DtypeTraits t = dtype_traits(dtype);
  const unsigned k = src[kOffCodeBits];
  const unsigned chunk_log2 = src[kOffChunkLog2];
  const uint32_t flags = load_u32(src + kOffFlags);
  const unsigned count = src[kOffCodebookCount];
  const uint64_t n = load_u64(src + kOffNValues);
  const uint64_t exp_size = load_u64(src + kOffExpSectionSize);
  const bool channels = version == kFormatVersionChannels, entropy = version == kFormatVersionEntropy;
  if (chunk_log2 < kMinChunkLog2 || chunk_log2 > kMaxChunkLog2 || !flags_consistent(flags)) return SZ_ERROR_CORRUPT;
  if (entropy) {  // §4.10.1
    if (k != 0 || count != 0 || (flags & ~(kKnownFlags | kFlagEntropy | kFlagPaired)) || !(flags & kFlagEntropy))
      return SZ_ERROR_CORRUPT;
    if ((flags & kFlagPaired) && t.value_bits != 8) return SZ_ERROR_CORRUPT;  // §4.10.6: FP8 only
  } else {
    if (k < 1 || k > 4 || k >= t.exponent_bits) return SZ_ERROR_CORRUPT;
    if (flags & ~(kKnownFlags | kFlagChannels)) return SZ_ERROR_CORRUPT;
    if (((flags & kFlagChannels) != 0) != channels) return SZ_ERROR_CORRUPT;
    if (count < 1 || count > (1u << k) || (channels && count != (1u << k))) return SZ_ERROR_CORRUPT;
  }
  if (!reserved_zero(src + 13, 3)) return SZ_ERROR_CORRUPT;
  if (n >= kMaxValues) return SZ_ERROR_CORRUPT;
  if (channels || entropy) {
    const uint32_t period = load_u32(src + kOffBookPeriod), tensor = load_u32(src + kOffBookTensor);
    if (period < 1 || period > kMaxPeriod || tensor >= kMaxTensors) return SZ_ERROR_CORRUPT;
    h->book_id = load_u64(src + kOffBookId);
    h->tensor = tensor;
    h->period = period;
  } else {
    bool seen[256] = {};
    for (unsigned i = 0; i < SZ_MAX_CODEBOOK; ++i) {
      const unsigned e = src[kOffCodebook + i];
      if (i >= count) {
        if (e != 0) return SZ_ERROR_CORRUPT;
        continue;
      }
      if (e >= (1u << t.exponent_bits) || seen[e]) return SZ_ERROR_CORRUPT;
      seen[e] = true;
    }
    h->book_id = 0;
    h->tensor = h->period = 0;
  }
  // §4.10.1: a paired frame's row map identifier; otherwise (and in versions 1 and 2) the bytes are reserved.
  const bool paired = (flags & kFlagPaired) != 0;
  h->row_map_id = paired ? load_u64(src + kOffRowMapId) : 0;
  if (!reserved_zero(src + (paired ? kOffRowMapId + 8 : kOffRowMapId), paired ? 4 : 12)) return SZ_ERROR_CORRUPT;
  const SymbolSplit split = symbol_split(dtype);
  if (entropy) {
    // Every record is at most its raw size (§4.10.3).
    if (exp_size > packed_bytes(n, split.symbol_bits)) return SZ_ERROR_CORRUPT;
  } else {
    // No valid index can describe an exponent section larger than codes for every value plus an escape for every
    // value (each record is at most max(G_c + 3 L_c, raw size) = G_c + 3 L_c bytes).
    if (exp_size > packed_bytes(n, k) + kEscapeBytes * n) return SZ_ERROR_CORRUPT;
  }

  h->dtype = dtype;
  h->t = t;
  h->code_bits = k;
  h->chunk_log2 = chunk_log2;
  h->flags = flags;
  h->count = count;
  memcpy(h->codebook, src + kOffCodebook, SZ_MAX_CODEBOOK);
  h->n = n;
  h->exp_size = exp_size;
  h->chunks = n_chunks(n, chunk_log2);
  h->checksums = (flags & kFlagChecksums) != 0;
  h->channels = channels;
  h->entropy = entropy;
  h->split = split;
  h->off = entropy ? entropy_frame_offsets(n, chunk_log2, h->checksums, split.raw_bits, exp_size)
                   : frame_offsets(n, chunk_log2, h->checksums, t, exp_size);
  return SZ_OK;
}

sz_status parse_frame_header(const uint8_t* src, size_t src_size, FrameHeader* h) {
  const sz_status s = parse_frame_header_only(src, src_size, h);
  if (s != SZ_OK) return s;
  if ((uint64_t)src_size < h->off.end) return SZ_ERROR_SRC_TRUNCATED;  // 7
  return SZ_OK;
}

void write_frame_header(uint8_t* dst, const sz_codebook& cb, unsigned chunk_log2, uint32_t flags, uint64_t n,
                        uint64_t exp_size, const sz_channel_book* book, uint32_t tensor) {
  memset(dst, 0, kHeaderSize);
  store_u32(dst + kOffMagic, kFrameMagic);
  store_u64(dst + kOffNValues, n);
  store_u64(dst + kOffExpSectionSize, exp_size);
  dst[kOffChunkLog2] = (uint8_t)chunk_log2;
  if (book) {
    dst[kOffVersion] = kFormatVersionChannels;
    dst[kOffDtype] = book->dtype;
    dst[kOffCodeBits] = book->code_bits;
    store_u32(dst + kOffFlags, flags | kFlagChannels);
    dst[kOffCodebookCount] = (uint8_t)(1u << book->code_bits);
    store_u64(dst + kOffBookId, book->id);
    store_u32(dst + kOffBookTensor, tensor);
    store_u32(dst + kOffBookPeriod, book->period);
  } else {
    dst[kOffVersion] = kFormatVersion;
    dst[kOffDtype] = cb.dtype;
    dst[kOffCodeBits] = cb.code_bits;
    store_u32(dst + kOffFlags, flags);
    dst[kOffCodebookCount] = cb.count;
    for (unsigned i = 0; i < cb.count; ++i) dst[kOffCodebook + i] = cb.values[i];
  }
  seal_frame_header(dst);
}

void seal_frame_header(uint8_t* dst) { store_u32(dst + kOffHeaderChecksum, h32(dst, kHeaderChecksummed)); }

void restamp_frame_header(uint8_t* dst, const uint8_t* src, uint64_t n, uint64_t exp_size) {
  memmove(dst, src, kHeaderSize);
  store_u64(dst + kOffNValues, n);
  store_u64(dst + kOffExpSectionSize, exp_size);
  seal_frame_header(dst);
}

sz_status check_frame_book(const FrameHeader& h, const sz_channel_book* book) {
  if (h.entropy) return SZ_ERROR_BOOK_MISMATCH;  // needs its symbol table (sz_decompress_entropy)
  if (!h.channels) return SZ_OK;
  if (book == nullptr || book->id != h.book_id || book->dtype != h.dtype || book->code_bits != h.code_bits ||
      book->period != h.period || h.tensor >= book->tensors || book->bases == nullptr)
    return SZ_ERROR_BOOK_MISMATCH;
  return SZ_OK;
}

static void fill_v1(const uint8_t* values, unsigned count, CodeMap* m) {
  memset(m->code_of, kEscape, sizeof m->code_of);
  memset(m->exp_of, 0, sizeof m->exp_of);
  for (unsigned i = 0; i < count; ++i) {
    m->code_of[values[i]] = (uint8_t)i;
    m->exp_of[i] = values[i];
  }
}

void code_map_of(const FrameHeader& h, const sz_channel_book* book, CodeMap* m) {
  m->k = h.code_bits;
  m->count = h.count;
  m->exponent_bits = h.t.exponent_bits;
  if (h.channels) {
    m->bases = book->bases + (uint64_t)h.tensor * book->period;
    m->period = book->period;
    fill_v1(nullptr, 0, m);
  } else {
    m->bases = nullptr;
    m->period = 0;
    fill_v1(h.codebook, h.count, m);
  }
}

void code_map_for(const sz_codebook& cb, const sz_channel_book* book, uint32_t tensor, CodeMap* m) {
  if (book) {
    m->k = book->code_bits;
    m->count = 1u << book->code_bits;
    m->exponent_bits = dtype_traits(book->dtype).exponent_bits;
    m->bases = book->bases + (uint64_t)tensor * book->period;
    m->period = book->period;
    fill_v1(nullptr, 0, m);
  } else {
    m->k = cb.code_bits;
    m->count = cb.count;
    m->exponent_bits = dtype_traits(cb.dtype).exponent_bits;
    m->bases = nullptr;
    m->period = 0;
    fill_v1(cb.values, cb.count, m);
  }
}

sz_status check_book_arg(const sz_channel_book* book, sz_dtype dtype, uint32_t tensor) {
  if (book == nullptr || book->bases == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  if (book->dtype != (uint8_t)dtype) return SZ_ERROR_BAD_CODEBOOK;
  if (sz_channel_book_validate(book) != SZ_OK) return SZ_ERROR_BAD_CODEBOOK;
  if (tensor >= book->tensors) return SZ_ERROR_INVALID_ARGUMENT;
  return SZ_OK;
}

sz_status check_index_entries(const uint8_t* entries, const FrameHeader& h, uint64_t first_chunk, uint64_t count,
                              uint64_t begin, const uint8_t* section, uint64_t* end_out) {
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t c = first_chunk + i;
    const uint64_t entry = load_u64(entries + kIndexEntrySize * i);
    const uint64_t end = entry & kIndexEndMask;
    const uint64_t mode = entry >> kIndexModeShift;
    if (mode != kModeCoded && mode != kModeRaw) return SZ_ERROR_CORRUPT;
    if (end < begin || end > h.exp_size) return SZ_ERROR_CORRUPT;
    const uint64_t size = end - begin;
    const uint64_t len = chunk_len(h.n, h.chunk_log2, c);
    if (h.entropy) {  // §4.10.3
      const uint64_t raw = packed_bytes(len, h.split.symbol_bits);
      if (mode == kModeRaw) {
        if (size != raw) return SZ_ERROR_CORRUPT;
      } else {
        if (size > raw || size < kRansRecordHeader) return SZ_ERROR_CORRUPT;
        if (section != nullptr) {
          const uint64_t x = load_u32(section + begin + kRansStatesBytes);
          if (x > len || x > size - kRansRecordHeader || (size - kRansRecordHeader - x) % 2 != 0)
            return SZ_ERROR_CORRUPT;
        }
      }
    } else if (mode == kModeRaw) {  // §4.5
      if (size != packed_bytes(len, h.t.exponent_bits)) return SZ_ERROR_CORRUPT;
    } else {
      const uint64_t g = packed_bytes(len, h.code_bits);
      if (size < g || (size - g) % kEscapeBytes != 0 || (size - g) / kEscapeBytes > len) return SZ_ERROR_CORRUPT;
    }
    begin = end;
  }
  *end_out = begin;
  return SZ_OK;
}

sz_status check_frame_index(const uint8_t* frame, const FrameHeader& h) {
  uint64_t end = 0;
  const uint8_t* section = h.entropy ? frame + h.off.exponents : nullptr;
  const sz_status s = check_index_entries(frame + h.off.index, h, 0, h.chunks, 0, section, &end);
  if (s != SZ_OK) return s;
  return end == h.exp_size ? SZ_OK : SZ_ERROR_CORRUPT;
}

sz_status check_compress_args(const void* src, uint64_t n, sz_dtype dtype, const sz_codebook* codebook,
                              const sz_params* params, const void* dst, const size_t* dst_size, sz_codebook* cb_out,
                              sz_params* params_out) {
  if ((src == nullptr && n != 0) || dst == nullptr || dst_size == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  if (!dtype_known((unsigned)dtype)) return SZ_ERROR_INVALID_ARGUMENT;
  if (n >= kMaxValues) return SZ_ERROR_INVALID_ARGUMENT;
  const sz_params p = params ? *params : sz_params_default();
  if (p.chunk_log2 < kMinChunkLog2 || p.chunk_log2 > kMaxChunkLog2 || (p.flags & ~kKnownFlags) ||
      !flags_consistent(p.flags) || p.reserved != 0)
    return SZ_ERROR_INVALID_ARGUMENT;
  sz_codebook cb;
  if (codebook) {
    cb = *codebook;
  } else {
    const sz_status s = sz_default_codebook(dtype, SZ_KIND_GENERIC, &cb);
    if (s != SZ_OK) return s;
  }
  if (cb.dtype != (uint8_t)dtype) return SZ_ERROR_BAD_CODEBOOK;
  if (sz_codebook_validate(&cb) != SZ_OK) return SZ_ERROR_BAD_CODEBOOK;
  *cb_out = cb;
  *params_out = p;
  return SZ_OK;
}

void build_encode_table(const sz_codebook& cb, uint8_t table[256]) {
  memset(table, kEscape, 256);
  for (unsigned i = 0; i < cb.count; ++i) table[cb.values[i]] = (uint8_t)i;
}

}  // namespace detail
}  // namespace splitzip

using namespace splitzip;
using namespace splitzip::layout;

extern "C" {

SZ_API unsigned sz_version_number(void) { return SZ_VERSION_NUMBER; }
SZ_API const char* sz_version_string(void) { return "1.0.0"; }

SZ_API const char* sz_status_name(sz_status status) {
  switch (status) {
    case SZ_OK: return "SZ_OK";
    case SZ_ERROR_INVALID_ARGUMENT: return "SZ_ERROR_INVALID_ARGUMENT";
    case SZ_ERROR_DST_TOO_SMALL: return "SZ_ERROR_DST_TOO_SMALL";
    case SZ_ERROR_SRC_TRUNCATED: return "SZ_ERROR_SRC_TRUNCATED";
    case SZ_ERROR_BAD_MAGIC: return "SZ_ERROR_BAD_MAGIC";
    case SZ_ERROR_UNSUPPORTED_VERSION: return "SZ_ERROR_UNSUPPORTED_VERSION";
    case SZ_ERROR_UNSUPPORTED_DTYPE: return "SZ_ERROR_UNSUPPORTED_DTYPE";
    case SZ_ERROR_CORRUPT: return "SZ_ERROR_CORRUPT";
    case SZ_ERROR_CHECKSUM: return "SZ_ERROR_CHECKSUM";
    case SZ_ERROR_BAD_CODEBOOK: return "SZ_ERROR_BAD_CODEBOOK";
    case SZ_ERROR_OUT_OF_MEMORY: return "SZ_ERROR_OUT_OF_MEMORY";
    case SZ_ERROR_IO: return "SZ_ERROR_IO";
    case SZ_ERROR_NOT_FOUND: return "SZ_ERROR_NOT_FOUND";
    case SZ_ERROR_CUDA: return "SZ_ERROR_CUDA";
    case SZ_ERROR_NOT_SUPPORTED: return "SZ_ERROR_NOT_SUPPORTED";
    case SZ_ERROR_WORKSPACE_TOO_SMALL: return "SZ_ERROR_WORKSPACE_TOO_SMALL";
    case SZ_ERROR_INTERNAL: return "SZ_ERROR_INTERNAL";
    case SZ_ERROR_BOOK_MISMATCH: return "SZ_ERROR_BOOK_MISMATCH";
  }
  return "SZ_ERROR_UNKNOWN";
}

SZ_API const char* sz_status_message(sz_status status) {
  switch (status) {
    case SZ_OK: return "success";
    case SZ_ERROR_INVALID_ARGUMENT: return "invalid argument (a NULL pointer, an out-of-range parameter or an unknown dtype)";
    case SZ_ERROR_DST_TOO_SMALL: return "the destination buffer is too small";
    case SZ_ERROR_SRC_TRUNCATED: return "the input is truncated";
    case SZ_ERROR_BAD_MAGIC: return "not a SplitZip frame, container or codebook (bad magic number)";
    case SZ_ERROR_UNSUPPORTED_VERSION: return "unsupported format version";
    case SZ_ERROR_UNSUPPORTED_DTYPE: return "unsupported data type";
    case SZ_ERROR_CORRUPT: return "corrupt data (a structural check of the format failed)";
    case SZ_ERROR_CHECKSUM: return "checksum mismatch";
    case SZ_ERROR_BAD_CODEBOOK: return "invalid codebook for this data type";
    case SZ_ERROR_OUT_OF_MEMORY: return "out of memory";
    case SZ_ERROR_IO: return "file input/output error";
    case SZ_ERROR_NOT_FOUND: return "item not found in the container";
    case SZ_ERROR_CUDA: return "a CUDA runtime call failed";
    case SZ_ERROR_NOT_SUPPORTED: return "feature not compiled into this library";
    case SZ_ERROR_WORKSPACE_TOO_SMALL: return "the GPU workspace is too small";
    case SZ_ERROR_INTERNAL: return "internal error (a bug in splitzip)";
    case SZ_ERROR_BOOK_MISMATCH:
      return "the frame needs a channel book, symbol table or row map that was not given or does not match";
  }
  return "unknown status code";
}

SZ_API size_t sz_dtype_size(sz_dtype dtype) { return dtype_traits((unsigned)dtype).value_bits / 8; }
SZ_API unsigned sz_dtype_exponent_bits(sz_dtype dtype) { return dtype_traits((unsigned)dtype).exponent_bits; }

SZ_API const char* sz_dtype_name(sz_dtype dtype) {
  switch (dtype) {
    case SZ_DTYPE_BF16: return "bf16";
    case SZ_DTYPE_FP16: return "fp16";
    case SZ_DTYPE_FP32: return "fp32";
    case SZ_DTYPE_FP8_E4M3: return "fp8_e4m3";
    case SZ_DTYPE_FP8_E5M2: return "fp8_e5m2";
  }
  return nullptr;
}

SZ_API sz_status sz_dtype_from_name(const char* name, sz_dtype* dtype) {
  if (name == nullptr || dtype == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  static const struct {
    const char* name;
    sz_dtype dtype;
  } kNames[] = {
      {"bf16", SZ_DTYPE_BF16},         {"bfloat16", SZ_DTYPE_BF16},        {"BF16", SZ_DTYPE_BF16},
      {"fp16", SZ_DTYPE_FP16},         {"float16", SZ_DTYPE_FP16},         {"half", SZ_DTYPE_FP16},
      {"f16", SZ_DTYPE_FP16},          {"F16", SZ_DTYPE_FP16},             {"FP16", SZ_DTYPE_FP16},
      {"fp32", SZ_DTYPE_FP32},         {"float32", SZ_DTYPE_FP32},         {"float", SZ_DTYPE_FP32},
      {"f32", SZ_DTYPE_FP32},          {"F32", SZ_DTYPE_FP32},             {"FP32", SZ_DTYPE_FP32},
      {"fp8_e4m3", SZ_DTYPE_FP8_E4M3}, {"float8_e4m3fn", SZ_DTYPE_FP8_E4M3}, {"e4m3", SZ_DTYPE_FP8_E4M3},
      {"e4m3fn", SZ_DTYPE_FP8_E4M3},   {"F8_E4M3", SZ_DTYPE_FP8_E4M3},     {"fp8_e4m3fn", SZ_DTYPE_FP8_E4M3},
      {"fp8_e5m2", SZ_DTYPE_FP8_E5M2}, {"float8_e5m2", SZ_DTYPE_FP8_E5M2}, {"e5m2", SZ_DTYPE_FP8_E5M2},
      {"F8_E5M2", SZ_DTYPE_FP8_E5M2},
  };
  for (const auto& e : kNames) {
    if (strcmp(e.name, name) == 0) {
      *dtype = e.dtype;
      return SZ_OK;
    }
  }
  return SZ_ERROR_UNSUPPORTED_DTYPE;
}

SZ_API uint64_t sz_compress_bound(uint64_t n_values, sz_dtype dtype) {
  const DtypeTraits t = dtype_traits((unsigned)dtype);
  if (t.value_bits == 0 || n_values >= kMaxValues) return 0;  // no frame holds 2^48 values (and the sum would wrap)
  return compress_bound(n_values, t.value_bits);
}

SZ_API sz_params sz_params_default(void) {
  sz_params p;
  p.chunk_log2 = SZ_DEFAULT_CHUNK_LOG2;
  p.flags = SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH;
  p.threads = 1;
  p.reserved = 0;
  return p;
}

SZ_API int sz_is_frame(const void* src, size_t src_size) {
  return src != nullptr && src_size >= 4 && load_u32((const uint8_t*)src) == kFrameMagic;
}

SZ_API sz_status sz_frame_info_get(const void* src, size_t src_size, sz_frame_info* info) {
  if (src == nullptr || info == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  const uint8_t* p = (const uint8_t*)src;
  detail::FrameHeader h;
  const sz_status s = detail::parse_frame_header_only(p, src_size, &h);
  if (s != SZ_OK) return s;
  sz_frame_info fi;
  memset(&fi, 0, sizeof fi);
  fi.version = h.entropy ? kFormatVersionEntropy : h.channels ? kFormatVersionChannels : kFormatVersion;
  fi.dtype = (uint8_t)h.dtype;
  fi.chunk_log2 = (uint8_t)h.chunk_log2;
  fi.flags = h.flags;
  fi.codebook.dtype = (uint8_t)h.dtype;
  fi.codebook.code_bits = (uint8_t)h.code_bits;
  fi.codebook.count = (uint8_t)h.count;
  memcpy(fi.codebook.values, h.codebook, SZ_MAX_CODEBOOK);
  fi.n_values = h.n;
  fi.decompressed_size = h.n * (h.t.value_bits / 8);
  fi.frame_size = h.off.end;
  fi.n_chunks = h.chunks;
  if ((uint64_t)src_size >= h.off.end) {  // the whole frame: its chunks' modes and escape counts
    const sz_status si = detail::check_frame_index(p, h);
    if (si != SZ_OK) return si;
    uint64_t begin = 0;
    for (uint64_t c = 0; c < h.chunks; ++c) {
      const uint64_t entry = load_u64(p + h.off.index + kIndexEntrySize * c);
      const uint64_t end = entry & kIndexEndMask;
      if ((entry >> kIndexModeShift) == kModeRaw) {
        ++fi.raw_chunks;
      } else {
        ++fi.coded_chunks;
        if (h.entropy)  // §4.10.3: the record's escape count
          fi.escapes += load_u32(p + h.off.exponents + begin + kRansStatesBytes);
        else  // §4.5: what the codes leave of the record
          fi.escapes += (end - begin - packed_bytes(chunk_len(h.n, h.chunk_log2, c), h.code_bits)) / kEscapeBytes;
      }
      begin = end;
    }
    fi.stats_valid = 1;
  }
  *info = fi;
  return SZ_OK;
}

}  // extern "C"
