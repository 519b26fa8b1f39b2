// internal.h — declarations shared by the TUs of the library (not installed).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "layout.h"
#include "splitzip/splitzip.h"

static_assert(splitzip::layout::kFlagChecksums == SZ_FLAG_CHECKSUMS && splitzip::layout::kFlagChannels == SZ_FLAG_CHANNELS &&
                  splitzip::layout::kFlagEntropy == SZ_FLAG_ENTROPY && splitzip::layout::kFlagLaneHash == SZ_FLAG_LANE_HASH,
              "the public frame flags are the format's");
static_assert(splitzip::layout::kFormatVersionEntropy == SZ_FORMAT_VERSION_ENTROPY &&
                  splitzip::layout::kSymbolTableHeader == SZ_SYMBOL_TABLE_HEADER &&
                  splitzip::layout::kMaxGroups == SZ_MAX_GROUPS && splitzip::layout::kRansLanes == SZ_ENTROPY_LANES &&
                  splitzip::layout::kEntropyChunkLog2 == SZ_ENTROPY_CHUNK_LOG2,
              "the public entropy-mode constants are the format's");

namespace splitzip {
namespace detail {

// ---- hash.cpp: xxHash XXH3 (docs/FORMAT.md §1) ---------------------------------------------------------------------
uint64_t h64(const void* data, size_t size);  // XXH3_64bits, seed 0
uint32_t h32(const void* data, size_t size);  // low 32 bits of h64
uint64_t h64_pair(const void* a, size_t a_size, const void* b, size_t b_size);  // h64 of the concatenation
uint32_t lh32(const void* data, size_t size);  // LH32 (§4.6.1), portable build
// A chunk's checksum (§4.6) as the frame's flags name it: LH32 with kFlagLaneHash, else H32.
uint32_t chunk_checksum(uint32_t flags, const void* data, size_t size);

// ---- common.cpp: frame header ------------------------------------------------------------------------------------
struct FrameHeader {
  unsigned dtype;
  layout::DtypeTraits t;
  unsigned code_bits;
  unsigned chunk_log2;
  uint32_t flags;
  unsigned count;
  uint8_t codebook[SZ_MAX_CODEBOOK];
  uint64_t n;
  uint64_t exp_size;
  uint64_t chunks;
  layout::FrameOffsets off;  // off.end = total frame size
  bool checksums;
  // Version 2 (channel windows, §4.9): the book reference; version 3 (entropy-coded, §4.10): the table reference
  // in the same fields.
  bool channels;
  bool entropy;
  layout::SymbolSplit split;  // version 3
  uint64_t book_id;
  uint32_t tensor, period;
  uint64_t row_map_id;  // version 3 with kFlagPaired (§4.10.6), else 0
};

// The exponent <-> code mapping of a frame: its codebook (version 1) or its channel windows (version 2).
struct CodeMap {
  const uint8_t* bases;  // version 2: the frame's tensor's P bases; nullptr for version 1
  uint32_t period;
  uint8_t code_of[256];  // version 1: exponent -> code, kEscape outside the codebook
  uint8_t exp_of[16];    // version 1: code -> exponent
  unsigned count, k, exponent_bits;
};

// Parses and checks a frame header in the order of docs/FORMAT.md §4.1, steps 1-7 (step 7 = whole frame present).
sz_status parse_frame_header(const uint8_t* src, size_t src_size, FrameHeader* h);
// Same without step 7 (for sz_frame_info_get on a prefix).
sz_status parse_frame_header_only(const uint8_t* src, size_t src_size, FrameHeader* h);
// Writes the 64-byte header (including its checksum): version 1 with the codebook, or version 2 (book != nullptr)
// with the reference to tensor `tensor` of the channel book (the code width is the book's).
void write_frame_header(uint8_t* dst, const sz_codebook& cb, unsigned chunk_log2, uint32_t flags, uint64_t n,
                        uint64_t exp_size, const sz_channel_book* book = nullptr, uint32_t tensor = 0);
// Writes the header checksum (§4.1) of the 64 header bytes at dst.
void seal_frame_header(uint8_t* dst);
// The header src (64 bytes; dst may be src) with n_values n and exponent_section_size exp_size, sealed, to dst.
void restamp_frame_header(uint8_t* dst, const uint8_t* src, uint64_t n, uint64_t exp_size);
// Step 8 of §4.1: the channel book a version 2 frame needs (SZ_OK for version 1 frames, whatever book).
sz_status check_frame_book(const FrameHeader& h, const sz_channel_book* book);
// The mapping of a parsed frame (book checked by check_frame_book before).
void code_map_of(const FrameHeader& h, const sz_channel_book* book, CodeMap* m);
// The mapping of a compress call.
void code_map_for(const sz_codebook& cb, const sz_channel_book* book, uint32_t tensor, CodeMap* m);
// Checks a channel book argument for compressing values of dtype with tensor `tensor`.
sz_status check_book_arg(const sz_channel_book* book, sz_dtype dtype, uint32_t tensor);

// The index checks of §4.3 and the record-size rules of §4.5 (version 3: §4.10.3) for the `count` entries at
// `entries`, those of chunks first_chunk.. of the frame h, the first record beginning at `begin` of the section;
// every end at most h.exp_size. Version 3 coded records are checked against their escape count only when `section`
// (the frame's symbol section) is given. *end_out receives the last entry's end (begin for count 0).
sz_status check_index_entries(const uint8_t* entries, const FrameHeader& h, uint64_t first_chunk, uint64_t count,
                              uint64_t begin, const uint8_t* section, uint64_t* end_out);
// The index checks of §4.3 over all chunks of a whole frame, with the record-size rule of §4.5 (version 3: those of
// §4.10.3, escape counts included), and the last end equal to the exponent section's size. SZ_OK or
// SZ_ERROR_CORRUPT.
sz_status check_frame_index(const uint8_t* frame, const FrameHeader& h);

// Resolves and checks the arguments of a compress call (NULL codebook/params -> defaults).
sz_status check_compress_args(const void* src, uint64_t n, sz_dtype dtype, const sz_codebook* codebook,
                              const sz_params* params, const void* dst, const size_t* dst_size, sz_codebook* cb_out,
                              sz_params* params_out);

// Exponent -> code table for a codebook: 0..count-1 for codebook entries, kEscape for others.
constexpr uint8_t kEscape = 0xFF;
void build_encode_table(const sz_codebook& cb, uint8_t table[256]);

// ---- fast.cpp: ISA selection -------------------------------------------------------------------------------------
enum class Isa { kPortable = 0, kAvx2 = 1, kAvx512 = 2 };
// The ISA the fast codec uses: the fastest for this CPU among those compiled in (the richest it runs, except AVX2
// where BMI2 is microcode), or the one sz_set_cpu_isa named (the richest set at most that one which the CPU runs).
// Read at every one-shot call and at the creation of a context (sz_cctx, sz_dctx), so tests can run each compiled
// variant.
Isa selected_isa();
const char* isa_name(Isa isa);

// ---- entropy-coded frames: the parameters of a compress call, for the CPU and the GPU coder alike -----------------
// NULL gives the default chunk for n values (layout::entropy_chunk_log2) and the default flags; a chunk_log2 of 0
// the same chunk with the params' flags; anything else must be valid as is.
inline sz_status resolve_entropy_params(const sz_params* params, uint64_t n, sz_params* out) {
  sz_params p = sz_params_default();
  if (params) p = *params;
  if (!params || p.chunk_log2 == 0) p.chunk_log2 = layout::entropy_chunk_log2(n);
  if (p.chunk_log2 < layout::kMinChunkLog2 || p.chunk_log2 > layout::kMaxChunkLog2 ||
      (p.flags & ~layout::kKnownFlags) || !layout::flags_consistent(p.flags) || p.reserved != 0)
    return SZ_ERROR_INVALID_ARGUMENT;
  *out = p;
  return SZ_OK;
}

}  // namespace detail
}  // namespace splitzip
