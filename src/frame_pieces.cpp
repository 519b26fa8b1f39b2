// frame_pieces.cpp — the layout of a frame's sections, and frames in pieces (docs/FORMAT.md §4, §4.2, §4.3): a
// frame assembled from the frames of its pieces (sz_frame_builder_*), and a piece of a frame cut out as a frame of
// its own (sz_frame_slice*). Every chunk is coded on its own (§4.2) and a chunk's index entry is the end of its
// record in the exponent section (§4.3), so a piece's frame is the whole frame's header with the piece's value count
// and exponent section size, the piece's index entries shifted by where its records begin, and the piece's slices
// of the checksum, rest and exponent sections. The offsets come from the header parse (common.cpp), the index
// checks from check_index_entries: nothing here restates a rule of the format.
#include <string.h>

#include "internal.h"

using namespace splitzip;
using namespace splitzip::layout;

namespace {

// The private contents of sz_frame_builder.
struct BuilderState {
  uint64_t magic;      // kBuilderMagic once begun
  uint64_t n;          // values of the whole frame
  uint64_t values;     // values added so far
  uint64_t exp_bytes;  // exponent section bytes added so far
  uint64_t pieces;     // pieces added so far
  uint8_t header[kHeaderSize];  // the first piece's header
};
static_assert(sizeof(BuilderState) <= sizeof(sz_frame_builder), "sz_frame_builder holds the builder's state");
constexpr uint64_t kBuilderMagic = 0x52444C4246505A53ull;  // "SZPFBLDR"

// Bits of the rest (version 3: raw) section per value.
unsigned rest_bits(const detail::FrameHeader& h) { return h.entropy ? h.split.raw_bits : h.t.rest_bits; }

// The frame header `src` with n values and exponent section size x, sealed, in out, and parsed into *h.
sz_status header_for(const uint8_t* src, uint64_t n, uint64_t x, uint8_t out[kHeaderSize], detail::FrameHeader* h) {
  detail::restamp_frame_header(out, src, n, x);
  return detail::parse_frame_header_only(out, kHeaderSize, h);
}

// The checks of a piece [first, first + m) of a frame h shared by pieces added and pieces cut out: a whole number of
// chunks from a chunk boundary (but the last chunk), at least one value unless the frame is empty, a multiple of
// the period from the start in versions 2 and 3, the frame's start in paired frames.
bool piece_fits(const detail::FrameHeader& h, uint64_t first, uint64_t m) {
  const uint64_t chunk_mask = ((uint64_t)1 << h.chunk_log2) - 1;
  if (first > h.n || m > h.n - first) return false;
  if (m == 0 && h.n != 0) return false;
  if ((first & chunk_mask) != 0) return false;
  if (first + m != h.n && (m & chunk_mask) != 0) return false;
  if ((h.channels || h.entropy) && first % h.period != 0) return false;
  // A paired frame's partners are rows counted from the frame's start, which a piece must therefore share (§4.10.6).
  if ((h.flags & kFlagPaired) && first != 0) return false;
  return true;
}

// Spans of the piece [first, first + m) of the frame `whole` whose own frame is `piece`: all but the exponents.
void place(const detail::FrameHeader& whole, const detail::FrameHeader& piece, uint64_t first, sz_frame_piece* p) {
  memset(p, 0, sizeof *p);
  const uint64_t c0 = first >> whole.chunk_log2;
  p->first_value = first;
  p->n_values = piece.n;
  p->first_chunk = c0;
  p->n_chunks = piece.chunks;
  p->index = sz_frame_span{whole.off.index + kIndexEntrySize * c0, piece.off.index, piece.off.checksums - piece.off.index};
  p->checksums = sz_frame_span{whole.checksums ? whole.off.checksums + kChecksumEntrySize * c0 : whole.off.checksums,
                               piece.off.checksums, piece.off.rest - piece.off.checksums};
  p->rest = sz_frame_span{whole.off.rest + packed_bytes(first, rest_bits(whole)), piece.off.rest,
                          piece.off.exponents - piece.off.rest};
  p->exponents = sz_frame_span{0, piece.off.exponents, 0};
}

// count index entries from `in` to `out` (which may be `in`), each end moved by delta (modulo 2^64: a piece's ends
// move up by where its records begin in the whole frame, a slice's down by where they begin in the frame cut).
void shift_entries(uint8_t* out, const uint8_t* in, uint64_t count, uint64_t delta) {
  for (uint64_t c = 0; c < count; ++c) {
    const uint64_t entry = load_u64(in + kIndexEntrySize * c);
    store_u64(out + kIndexEntrySize * c, (entry & ~kIndexEndMask) | ((entry & kIndexEndMask) + delta));
  }
}

// The piece [first, first + n) of the frame whose header is `header`: *wh the frame's parse, *p its spans but the
// exponents' (whose place needs the index), the index span including the entry before the piece's, whose end is
// where the piece's records begin.
sz_status locate(const void* header, size_t header_size, uint64_t first, uint64_t n, detail::FrameHeader* wh,
                 sz_frame_piece* p) {
  if (header == nullptr || p == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  const sz_status s = detail::parse_frame_header_only((const uint8_t*)header, header_size, wh);
  if (s != SZ_OK) return s;
  if (!piece_fits(*wh, first, n)) return SZ_ERROR_INVALID_ARGUMENT;
  uint8_t piece_header[kHeaderSize];
  detail::FrameHeader ph;
  if (header_for((const uint8_t*)header, n, 0, piece_header, &ph) != SZ_OK) return SZ_ERROR_INTERNAL;
  place(*wh, ph, first, p);
  if (p->first_chunk > 0) {
    p->index.frame_offset -= kIndexEntrySize;
    p->index.size += kIndexEntrySize;
  }
  return SZ_OK;
}

// Bytes 0..59 of two headers but n_values and exponent_section_size: the same frame parameters.
bool same_parameters(const uint8_t* a, const uint8_t* b) {
  return memcmp(a, b, kOffNValues) == 0 &&
         memcmp(a + kOffCodebook, b + kOffCodebook, kHeaderChecksummed - kOffCodebook) == 0;
}

}  // namespace

extern "C" {

SZ_API sz_status sz_frame_layout_get(const void* src, size_t src_size, sz_frame_layout* layout) {
  if (src == nullptr || layout == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  detail::FrameHeader h;
  const sz_status s = detail::parse_frame_header_only((const uint8_t*)src, src_size, &h);
  if (s != SZ_OK) return s;
  sz_frame_layout l;
  l.n_values = h.n;
  l.n_chunks = h.chunks;
  l.index_offset = h.off.index;
  l.index_size = h.off.checksums - h.off.index;
  l.checksums_offset = h.off.checksums;
  l.checksums_size = h.off.rest - h.off.checksums;
  l.rest_offset = h.off.rest;
  l.rest_size = h.off.exponents - h.off.rest;
  l.exponents_offset = h.off.exponents;
  l.exponents_size = h.exp_size;
  l.frame_size = h.off.end;
  *layout = l;
  return SZ_OK;
}

SZ_API sz_status sz_frame_builder_begin(sz_frame_builder* builder, uint64_t n_values) {
  if (builder == nullptr || n_values >= kMaxValues) return SZ_ERROR_INVALID_ARGUMENT;
  BuilderState st;
  memset(&st, 0, sizeof st);
  st.magic = kBuilderMagic;
  st.n = n_values;
  memset(builder, 0, sizeof *builder);
  memcpy(builder, &st, sizeof st);
  return SZ_OK;
}

SZ_API sz_status sz_frame_builder_add(sz_frame_builder* builder, const void* piece, size_t piece_size,
                                      void* index_out, size_t index_capacity, sz_frame_piece* placement) {
  if (builder == nullptr || piece == nullptr || placement == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  BuilderState st;
  memcpy(&st, builder, sizeof st);
  if (st.magic != kBuilderMagic || st.values > st.n) return SZ_ERROR_INVALID_ARGUMENT;
  const uint8_t* src = (const uint8_t*)piece;
  detail::FrameHeader ph;
  sz_status s = detail::parse_frame_header(src, piece_size, &ph);
  if (s != SZ_OK) return s;
  s = detail::check_frame_index(src, ph);
  if (s != SZ_OK) return s;
  const uint8_t* first = st.pieces == 0 ? src : st.header;
  if (!same_parameters(first, src)) return SZ_ERROR_INVALID_ARGUMENT;
  // The whole frame as far as its header says before the last piece: its offsets and the piece's checks.
  uint8_t whole_header[kHeaderSize];
  detail::FrameHeader wh;
  if (header_for(first, st.n, 0, whole_header, &wh) != SZ_OK) return SZ_ERROR_INVALID_ARGUMENT;
  if (!piece_fits(wh, st.values, ph.n) || (st.pieces > 0 && ph.n == 0)) return SZ_ERROR_INVALID_ARGUMENT;
  if (ph.exp_size > kIndexEndMask - st.exp_bytes) return SZ_ERROR_INVALID_ARGUMENT;
  sz_frame_piece p;
  place(wh, ph, st.values, &p);
  p.frame_size = ph.off.end;
  p.exponents.frame_offset = wh.off.exponents + st.exp_bytes;
  p.exponents.size = ph.exp_size;
  if (p.index.size > 0 && index_out == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  if (index_capacity < p.index.size) return SZ_ERROR_DST_TOO_SMALL;
  // Checked: now the outputs. Entry by entry, so index_out may be the piece's own index.
  shift_entries((uint8_t*)index_out, src + ph.off.index, ph.chunks, st.exp_bytes);
  if (st.pieces == 0) memcpy(st.header, src, kHeaderSize);
  st.values += ph.n;
  st.exp_bytes += ph.exp_size;
  st.pieces += 1;
  memcpy(builder, &st, sizeof st);
  *placement = p;
  return SZ_OK;
}

SZ_API sz_status sz_frame_builder_finish(const sz_frame_builder* builder, void* header_out, size_t header_capacity,
                                         uint64_t* frame_size) {
  if (builder == nullptr || header_out == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  BuilderState st;
  memcpy(&st, builder, sizeof st);
  if (st.magic != kBuilderMagic || st.pieces == 0 || st.values != st.n) return SZ_ERROR_INVALID_ARGUMENT;
  if (header_capacity < kHeaderSize) return SZ_ERROR_DST_TOO_SMALL;
  uint8_t header[kHeaderSize];
  detail::FrameHeader h;
  // Every piece passed the checks of its own header, so the whole one passes them too.
  if (header_for(st.header, st.n, st.exp_bytes, header, &h) != SZ_OK) return SZ_ERROR_INTERNAL;
  memcpy(header_out, header, kHeaderSize);
  if (frame_size) *frame_size = h.off.end;
  return SZ_OK;
}

SZ_API sz_status sz_frame_slice_locate(const void* header, size_t header_size, uint64_t first_value,
                                       uint64_t n_values, sz_frame_piece* piece) {
  detail::FrameHeader wh;
  sz_frame_piece p;
  const sz_status s = locate(header, header_size, first_value, n_values, &wh, piece ? &p : nullptr);
  if (s != SZ_OK) return s;
  *piece = p;
  return SZ_OK;
}

SZ_API sz_status sz_frame_slice(const void* header, size_t header_size, uint64_t first_value, uint64_t n_values,
                                const void* index, size_t index_size, void* dst, size_t dst_capacity,
                                sz_frame_piece* piece) {
  if (dst == nullptr) return SZ_ERROR_INVALID_ARGUMENT;
  detail::FrameHeader wh;
  sz_frame_piece p;
  sz_status s = locate(header, header_size, first_value, n_values, &wh, piece ? &p : nullptr);
  if (s != SZ_OK) return s;
  if ((index == nullptr && p.index.size > 0) || index_size != p.index.size) return SZ_ERROR_INVALID_ARGUMENT;
  const uint8_t* hdr = (const uint8_t*)header;
  const uint8_t* entries = (const uint8_t*)index;
  uint64_t begin = 0;
  if (p.first_chunk > 0) {  // the previous chunk's entry: only its end matters, which must lie in the section
    const uint64_t prev = load_u64(entries);
    const uint64_t mode = prev >> kIndexModeShift;
    begin = prev & kIndexEndMask;
    if ((mode != kModeCoded && mode != kModeRaw) || begin > wh.exp_size) return SZ_ERROR_CORRUPT;
    entries += kIndexEntrySize;
  }
  uint64_t end = 0;
  s = detail::check_index_entries(entries, wh, p.first_chunk, p.n_chunks, begin, nullptr, &end);
  if (s != SZ_OK) return s;
  if (p.first_chunk + p.n_chunks == wh.chunks && end != wh.exp_size) return SZ_ERROR_CORRUPT;
  uint8_t piece_header[kHeaderSize];
  detail::FrameHeader ph;
  if (header_for(hdr, n_values, end - begin, piece_header, &ph) != SZ_OK) return SZ_ERROR_CORRUPT;
  p.frame_size = ph.off.end;
  p.exponents.frame_offset = wh.off.exponents + begin;
  p.exponents.size = end - begin;
  if (dst_capacity < p.frame_size) return SZ_ERROR_DST_TOO_SMALL;
  uint8_t* out = (uint8_t*)dst;
  memcpy(out, piece_header, kHeaderSize);
  shift_entries(out + ph.off.index, entries, p.n_chunks, 0 - begin);
  *piece = p;
  return SZ_OK;
}

}  // extern "C"
