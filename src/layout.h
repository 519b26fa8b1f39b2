// layout.h — the byte layout of docs/FORMAT.md as constants and tiny inline functions, shared by the reference
// codec, the fast CPU codec and the CUDA kernels (host and device). Nothing here allocates or does I/O.
//
// Any change here is a format change: bump the format version and docs/FORMAT.md first.
#pragma once

#include <stdint.h>
#include <stddef.h>

#if defined(__CUDACC__)
#define SZ_HD __host__ __device__ __forceinline__
#else
#define SZ_HD inline
#endif

namespace splitzip {
namespace layout {

// ---- §4.1 frame header -------------------------------------------------------------------------------------------
constexpr uint32_t kFrameMagic = 0x465A5053u;      // "SPZF"
constexpr uint32_t kCodebookMagic = 0x425A5053u;   // "SPZB"
constexpr uint32_t kContainerMagic = 0x435A5053u;  // "SPZC"
constexpr uint8_t kFormatVersion = 1;          // frames with a codebook (§4.1)
constexpr uint8_t kFormatVersionChannels = 2;  // frames with channel windows (§4.9)

constexpr size_t kHeaderSize = 64;
constexpr size_t kOffMagic = 0;
constexpr size_t kOffVersion = 4;
constexpr size_t kOffDtype = 5;
constexpr size_t kOffCodeBits = 6;
constexpr size_t kOffChunkLog2 = 7;
constexpr size_t kOffFlags = 8;
constexpr size_t kOffCodebookCount = 12;
constexpr size_t kOffNValues = 16;
constexpr size_t kOffExpSectionSize = 24;
constexpr size_t kOffCodebook = 32;
constexpr size_t kOffHeaderChecksum = 60;
constexpr size_t kHeaderChecksummed = 60;  // H32 covers bytes [0, 60)

constexpr uint32_t kFlagChecksums = 1u;
constexpr uint32_t kFlagChannels = 2u;  // set exactly in version 2 frames
constexpr uint32_t kFlagLaneHash = 8u;  // the chunk checksums are LH32 (§4.6.1), not H32; only with kFlagChecksums
constexpr uint32_t kKnownFlags = kFlagChecksums | kFlagLaneHash;  // what a caller may pass in sz_params.flags
// §4.1 step 6 (and a caller's sz_params.flags): LANE_HASH names the kind of the chunk checksums, so it needs them.
SZ_HD constexpr bool flags_consistent(uint32_t flags) {
  return (flags & kFlagLaneHash) == 0 || (flags & kFlagChecksums) != 0;
}

// Version 2: the codebook field holds the channel book reference (§4.1).
constexpr size_t kOffBookId = 32;
constexpr size_t kOffBookTensor = 40;
constexpr size_t kOffBookPeriod = 44;

// ---- §5.2 channel book file ---------------------------------------------------------------------------------------
constexpr uint32_t kChannelBookMagic = 0x4B5A5053u;  // "SPZK"
constexpr uint8_t kChannelBookVersion = 1;
constexpr size_t kChannelBookHeader = 16;
constexpr uint32_t kMaxPeriod = 1u << 24;
constexpr uint32_t kMaxTensors = 1u << 16;
constexpr uint64_t kMaxBookBases = (uint64_t)1 << 26;

constexpr unsigned kMinChunkLog2 = 8;
constexpr unsigned kMaxChunkLog2 = 16;
constexpr unsigned kDefaultChunkLog2 = 12;
constexpr uint64_t kMaxValues = (uint64_t)1 << 48;

// ---- §4.3 chunk index ------------------------------------------------------------------------------------------
constexpr size_t kIndexEntrySize = 8;
constexpr size_t kChecksumEntrySize = 4;
constexpr uint64_t kIndexEndMask = ((uint64_t)1 << 62) - 1;
constexpr unsigned kIndexModeShift = 62;
constexpr uint64_t kModeCoded = 0;
constexpr uint64_t kModeRaw = 1;

// ---- §4.5 escapes ---------------------------------------------------------------------------------------------
constexpr size_t kEscapeBytes = 3;  // u16 position + u8 exponent, stored as two arrays

// ---- §2 dtypes ---------------------------------------------------------------------------------------------------
// Index by dtype id (1..5); entry 0 is a placeholder for "unknown".
struct DtypeTraits {
  uint8_t value_bits;     // W
  uint8_t exponent_bits;  // E
  uint8_t rest_bits;      // R = W - E
  uint8_t mantissa_bits;  // M (rest = sign << M | mantissa)
};

SZ_HD DtypeTraits dtype_traits(unsigned dtype) {
  switch (dtype) {
    case 1: return DtypeTraits{16, 8, 8, 7};   // bf16
    case 2: return DtypeTraits{16, 5, 11, 10}; // fp16
    case 3: return DtypeTraits{32, 8, 24, 23}; // fp32
    case 4: return DtypeTraits{8, 4, 4, 3};    // fp8 e4m3
    case 5: return DtypeTraits{8, 5, 3, 2};    // fp8 e5m2
    default: return DtypeTraits{0, 0, 0, 0};
  }
}

SZ_HD bool dtype_known(unsigned dtype) { return dtype >= 1 && dtype <= 5; }

// Split a value (its W low bits) into exponent and rest fields, and join them back (§2).
SZ_HD uint32_t exponent_of(uint32_t x, DtypeTraits t) {
  return (x >> t.mantissa_bits) & ((1u << t.exponent_bits) - 1u);
}
SZ_HD uint32_t rest_of(uint32_t x, DtypeTraits t) {
  const uint32_t sign = (x >> (t.value_bits - 1)) & 1u;
  return (sign << t.mantissa_bits) | (x & ((1u << t.mantissa_bits) - 1u));
}
SZ_HD uint32_t join(uint32_t exponent, uint32_t rest, DtypeTraits t) {
  const uint32_t sign = (rest >> t.mantissa_bits) & 1u;
  return (sign << (t.value_bits - 1)) | (exponent << t.mantissa_bits) | (rest & ((1u << t.mantissa_bits) - 1u));
}

// ---- §4.10 entropy-coded frames (version 3) and §5.3 symbol table file ----------------------------------------
constexpr uint8_t kFormatVersionEntropy = 3;
constexpr uint32_t kFlagEntropy = 4u;  // set exactly in version 3 frames
// §4.10.6 paired rows: a version 3 FP8 frame names a row map (§5.4), and symbol kPairSymbol (a NaN in both FP8
// formats) of a coded chunk stands for the value of the paired row in the same column.
constexpr uint32_t kFlagPaired = 16u;
constexpr size_t kOffRowMapId = 48;
constexpr uint32_t kPairSymbol = 0x7Fu;
constexpr uint32_t kRowMapMagic = 0x525A5053u;  // "SPZR"
constexpr uint8_t kRowMapVersion = 1;
constexpr size_t kRowMapHeader = 16;
constexpr uint64_t kMaxRowMapRows = (uint64_t)1 << 28;
SZ_HD constexpr uint64_t row_map_file_size(uint64_t rows) { return kRowMapHeader + 4 * rows + 4; }
constexpr uint32_t kSymbolTableMagic = 0x545A5053u;  // "SPZT"
constexpr uint8_t kSymbolTableVersion = 1;
constexpr size_t kSymbolTableHeader = 24;
constexpr uint32_t kMaxGroups = 4096;
constexpr unsigned kRansLanes = 32;                 // value j of a chunk is coded by lane j mod 32
constexpr unsigned kRansProbBits = 12;              // frequencies of a group sum to 2^12
constexpr uint32_t kRansProbTotal = 1u << kRansProbBits;
constexpr uint32_t kRansLow = 1u << 16;             // states live in [2^16, 2^32)
constexpr unsigned kRansWordBits = 16;              // renormalisation emits / reads 16-bit words
constexpr size_t kRansStatesBytes = 4 * kRansLanes;
constexpr size_t kRansRecordHeader = kRansStatesBytes + 4;  // the states and the escape count X
// The default chunk of an entropy-coded call (not a format rule): 2^16 values (a coded chunk's 132 bytes of coder
// state are then 0.1% of BF16 KV), unless that leaves the call fewer than kEntropyCallChunks chunks; then the
// largest power of two that gives it that many, but at least 2^12. A GPU codes and decodes a chunk per warp, so a
// call needs a few chunks per warp to run at speed (an H100 or H200 holds 132 x 24 decoding warps): 16 MiB of BF16
// in chunks of 2^16 decode at 40-45 GB/s on an H100, in chunks of 2^12 at 320-340 (bench/results/entropy_gpu.md).
constexpr unsigned kEntropyChunkLog2 = 16;
constexpr unsigned kEntropyMinDefaultLog2 = 12;
constexpr uint64_t kEntropyCallChunks = 8192;
SZ_HD constexpr unsigned entropy_chunk_log2(uint64_t n_values) {
  unsigned k = kEntropyChunkLog2;
  while (k > kEntropyMinDefaultLog2 && (n_values >> k) < kEntropyCallChunks) --k;
  return k;
}

// The split of a value into the coded symbol and the raw part (§4.10.2): FP8 values are coded whole.
struct SymbolSplit {
  uint8_t symbol_bits;  // B
  uint8_t raw_bits;     // R' = W - B
  bool whole;           // the symbol is the whole value
};
SZ_HD SymbolSplit symbol_split(unsigned dtype) {
  const DtypeTraits t = dtype_traits(dtype);
  if (t.value_bits == 8) return SymbolSplit{8, 0, true};
  return SymbolSplit{t.exponent_bits, t.rest_bits, false};
}
SZ_HD uint32_t symbol_of(uint32_t x, DtypeTraits t, SymbolSplit sp) { return sp.whole ? x : exponent_of(x, t); }
SZ_HD uint32_t raw_of(uint32_t x, DtypeTraits t, SymbolSplit sp) { return sp.whole ? 0u : rest_of(x, t); }
SZ_HD uint32_t join_symbol(uint32_t symbol, uint32_t raw, DtypeTraits t, SymbolSplit sp) {
  return sp.whole ? symbol : join(symbol, raw, t);
}
// §4.10.4: before pushing a symbol of frequency f the encoder emits a word when x >= f * 2^20, that is
// f * ((kRansLow >> kRansProbBits) << kRansWordBits), so that the pushed state stays below 2^32.
constexpr unsigned kRansEncShift = 16 - kRansProbBits + kRansWordBits;  // 20
SZ_HD bool rans_enc_renorm(uint32_t x, uint32_t f) { return (uint64_t)x >= ((uint64_t)f << kRansEncShift); }

// ---- sizes -------------------------------------------------------------------------------------------------------
SZ_HD uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
// Bytes of n fields of b bits packed in groups of 8 (§3).
SZ_HD uint64_t packed_bytes(uint64_t n, unsigned bits) { return ceil_div(n, 8) * bits; }
// A shift rather than a division: a 64-bit division is a long software routine on a GPU, where the decoder's header
// parse sits on the critical path of every call; exact for every n.
SZ_HD uint64_t n_chunks(uint64_t n, unsigned chunk_log2) { return n == 0 ? 0 : ((n - 1) >> chunk_log2) + 1; }
SZ_HD uint64_t chunk_len(uint64_t n, unsigned chunk_log2, uint64_t c) {
  const uint64_t s = (uint64_t)1 << chunk_log2;
  const uint64_t begin = c * s;
  return (n - begin < s) ? (n - begin) : s;
}
// Field j of b bits (b <= 24) of a packed sequence (§3), read a byte at a time: the fast CPU coder and the kernels.
SZ_HD uint32_t load_field(const uint8_t* base, uint64_t j, unsigned b) {
  const uint64_t bit = j * b;
  const uint8_t* p = base + (bit >> 3);
  const unsigned sh = (unsigned)(bit & 7), bytes = (sh + b + 7) >> 3;
  uint64_t v = 0;
  for (unsigned k = 0; k < bytes; ++k) v |= (uint64_t)p[k] << (8 * k);
  return (uint32_t)(v >> sh) & ((1u << b) - 1u);
}
// Offset of the chunk index, checksum table, rest section and exponent section from the frame start (§4).
struct FrameOffsets {
  uint64_t index, checksums, rest, exponents, end;
};
SZ_HD FrameOffsets frame_offsets(uint64_t n, unsigned chunk_log2, bool checksums, DtypeTraits t,
                                 uint64_t exp_section_size) {
  FrameOffsets o;
  const uint64_t c = n_chunks(n, chunk_log2);
  o.index = kHeaderSize;
  o.checksums = o.index + kIndexEntrySize * c;
  o.rest = o.checksums + (checksums ? kChecksumEntrySize * c : 0);
  o.exponents = o.rest + packed_bytes(n, t.rest_bits);
  o.end = o.exponents + exp_section_size;
  return o;
}
// Version 3 (§4.10.2): the raw section has R' bits per value.
SZ_HD FrameOffsets entropy_frame_offsets(uint64_t n, unsigned chunk_log2, bool checksums, unsigned raw_bits,
                                         uint64_t symbol_section_size) {
  FrameOffsets o;
  const uint64_t c = n_chunks(n, chunk_log2);
  o.index = kHeaderSize;
  o.checksums = o.index + kIndexEntrySize * c;
  o.rest = o.checksums + (checksums ? kChecksumEntrySize * c : 0);
  o.exponents = o.rest + packed_bytes(n, raw_bits);
  o.end = o.exponents + symbol_section_size;
  return o;
}
// §4.8: the bound for every chunk_log2 >= 8.
SZ_HD uint64_t compress_bound(uint64_t n, unsigned value_bits) {
  return kHeaderSize + 12 * n_chunks(n, kMinChunkLog2) + ceil_div(n, 8) * value_bits;
}

// ---- little-endian loads and stores on unaligned bytes ------------------------------------------------------------
SZ_HD uint16_t load_u16(const uint8_t* p) { return (uint16_t)(p[0] | (p[1] << 8)); }
SZ_HD uint32_t load_u32(const uint8_t* p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
SZ_HD uint64_t load_u64(const uint8_t* p) { return (uint64_t)load_u32(p) | ((uint64_t)load_u32(p + 4) << 32); }
SZ_HD void store_u16(uint8_t* p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
SZ_HD void store_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = (uint8_t)(v >> (8 * i));
}
SZ_HD void store_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = (uint8_t)(v >> (8 * i));
}

}  // namespace layout
}  // namespace splitzip
