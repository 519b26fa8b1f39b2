// fuzz_decode — arbitrary bytes through every parser of docs/FORMAT.md: the frame decoders (fast and reference),
// sz_frame_info_get, the frame-piece calls (layout, slice, builder), the container parser (open, all items at once, every item, lookup by name, decoding frame
// items; the index alone as a file reader reads it: locate, index items) and the codebook and channel book parsers (a book followed by a version 2 frame decodes with it). Nothing may crash or touch memory outside the buffers (ASan/UBSan); the two frame
// decoders must accept the same inputs, and when both accept they must write identical bytes; the two container
// validations must agree, and the index read alone must give the items of every container they accept.
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "splitzip/splitzip.h"
#include "fuzz_isa.h"

namespace {

constexpr uint64_t kMaxOutput = 64ull << 20;  // larger claims are answered with a smaller buffer

void fail(const char* what, sz_status a, sz_status b) {
  fprintf(stderr, "fuzz_decode: %s (%s vs %s)\n", what, sz_status_name(a), sz_status_name(b));
  abort();
}

void fuzz_frame(const uint8_t* data, size_t size) {
  sz_frame_info info;
  const sz_status is = sz_frame_info_get(data, size, &info);
  uint64_t cap = 4096;
  if (is == SZ_OK) {
    cap = info.decompressed_size < kMaxOutput ? info.decompressed_size : kMaxOutput;
    if (info.stats_valid && info.coded_chunks + info.raw_chunks != info.n_chunks) fail("chunk counts", is, is);
  }
  std::vector<uint8_t> a(cap ? cap : 1, 0xA5), b(cap ? cap : 1, 0x5A);
  size_t na = 0, nb = 0;
  const unsigned threads = 1 + (unsigned)(size % 3);
  const sz_status sa = sz_decompress(data, size, a.data(), cap, &na, threads);
  const sz_status sb = sz_decompress_reference(data, size, b.data(), cap, &nb);
  if ((sa == SZ_OK) != (sb == SZ_OK)) fail("one decoder accepts what the other rejects", sa, sb);
  if (sa == SZ_OK) {
    if (is != SZ_OK) fail("decoders accept a frame whose info is rejected", sa, is);
    if (na != nb || na != info.decompressed_size) fail("decoded sizes differ", sa, sb);
    if (memcmp(a.data(), b.data(), na) != 0) fail("decoders disagree on the output", sa, sb);
  }
}

// The frame-piece calls on the same bytes: the layout agrees with the frame info; a chunk range (chosen from the
// input) is located and sliced into a buffer of its bound, with every span inside the frame and the buffer; the
// frame given to a builder as its one piece. When the frame decodes, every slice of it must decode to the same
// values, and the builder must give back its header.
void fuzz_pieces(const uint8_t* data, size_t size) {
  sz_frame_info info;
  sz_frame_layout l;
  // The header alone: sz_frame_info_get also checks the chunk index when the whole frame is there.
  const size_t head = size < SZ_FRAME_HEADER_SIZE ? size : SZ_FRAME_HEADER_SIZE;
  const sz_status si = sz_frame_info_get(data, head, &info), sl = sz_frame_layout_get(data, size, &l);
  if (si != sl) fail("layout and info disagree", si, sl);
  if (sl != SZ_OK) return;
  if (l.frame_size != info.frame_size || l.n_chunks != info.n_chunks ||
      l.exponents_offset + l.exponents_size != l.frame_size || l.index_offset + l.index_size != l.checksums_offset ||
      l.checksums_offset + l.checksums_size != l.rest_offset || l.rest_offset + l.rest_size != l.exponents_offset)
    fail("layout is not contiguous", sl, sl);
  const size_t vb = sz_dtype_size(sz_dtype(info.dtype));
  const bool whole = (uint64_t)size >= info.frame_size && info.decompressed_size <= kMaxOutput;
  std::vector<uint8_t> all(whole ? info.decompressed_size + 1 : 1);
  size_t n_all = 0;
  const bool decodes = whole && sz_decompress(data, size, all.data(), info.decompressed_size, &n_all, 1) == SZ_OK;
  // Pieces of 1 or more chunks from a byte of the input; one range starting at a chunk from another.
  const uint64_t S = (uint64_t)1 << info.chunk_log2;
  const uint64_t per = 1 + (size > 64 ? data[64] % 4 : 0);
  for (uint64_t c0 = size > 65 ? data[65] % (info.n_chunks + 1) : 0; c0 < info.n_chunks || (c0 == 0 && info.n_values == 0);
       c0 += per) {
    const uint64_t v0 = c0 * S, m = v0 + per * S < info.n_values ? per * S : info.n_values - v0;
    sz_frame_piece p;
    sz_status s = sz_frame_slice_locate(data, size, v0, m, &p);
    if (s != SZ_OK) {
      if (info.version == SZ_FORMAT_VERSION) fail("a chunk range of a version 1 frame is not located", s, s);
      break;
    }
    if (p.index.frame_offset + p.index.size > info.frame_size) fail("index span outside the frame", s, s);
    if (p.index.frame_offset + p.index.size > size || m * vb > kMaxOutput) break;
    std::vector<uint8_t> dst((size_t)sz_compress_bound(m, sz_dtype(info.dtype)));
    s = sz_frame_slice(data, size, v0, m, data + p.index.frame_offset, (size_t)p.index.size, dst.data(), dst.size(), &p);
    if (decodes && s != SZ_OK) fail("a slice of a frame that decodes is rejected", s, s);
    if (s != SZ_OK) break;
    for (const sz_frame_span* sp : {&p.checksums, &p.rest, &p.exponents}) {
      if (sp->frame_offset + sp->size > info.frame_size || sp->piece_offset + sp->size > p.frame_size)
        fail("span outside the frame or the piece", s, s);
      if (sp->frame_offset + sp->size <= size) memcpy(dst.data() + sp->piece_offset, data + sp->frame_offset, sp->size);
    }
    if (p.frame_size > dst.size()) fail("piece frame above its bound", s, s);
    std::vector<uint8_t> out(m * vb + 1);
    size_t n_out = 0;
    s = sz_decompress(dst.data(), (size_t)p.frame_size, out.data(), m * vb, &n_out, 1);
    if (decodes && (s != SZ_OK || n_out != m * vb || memcmp(out.data(), all.data() + v0 * vb, n_out) != 0))
      fail("a slice decodes otherwise than its frame", s, s);
    if (info.n_values == 0) break;
  }
  sz_frame_builder b;
  if (sz_frame_builder_begin(&b, info.n_values) != SZ_OK) fail("builder of a frame's count", sl, sl);
  std::vector<uint8_t> index((size_t)l.index_size + 1);
  sz_frame_piece p;
  sz_status s = sz_frame_builder_add(&b, data, size, index.data(), index.size(), &p);
  if (decodes && s != SZ_OK) fail("a frame that decodes is not a piece", s, s);
  if (s != SZ_OK) return;
  if (p.n_values != info.n_values || p.frame_size != info.frame_size || memcmp(index.data(), data + l.index_offset, (size_t)l.index_size) != 0)
    fail("one piece is not placed as the frame itself", s, s);
  uint8_t header[SZ_FRAME_HEADER_SIZE];
  uint64_t fsize = 0;
  s = sz_frame_builder_finish(&b, header, sizeof header, &fsize);
  if (s != SZ_OK || fsize != info.frame_size || memcmp(header, data, sizeof header) != 0)
    fail("the builder of one piece does not give back its header", s, s);
}

// The container read as a file reader reads it: its last footer bytes (sz_container_locate_index), then the index
// they locate (sz_container_index_items), each in a heap block of its own so ASan sees a read outside it. `whole`
// and `all`: what sz_container_items said of the whole buffer.
void fuzz_container_index(const uint8_t* data, size_t size, sz_status whole, const std::vector<sz_item>& all) {
  const size_t tail_size = size < SZ_CONTAINER_FOOTER_SIZE ? size : SZ_CONTAINER_FOOTER_SIZE;
  std::vector<uint8_t> tail(data + size - tail_size, data + size);
  tail.reserve(tail_size);
  uint64_t at = 0, index_size = 0;
  sz_status s = sz_container_locate_index(tail_size ? tail.data() : (const uint8_t*)"", tail_size, size, &at,
                                          &index_size);
  uint32_t count = 0;
  std::vector<uint8_t> index;
  std::vector<sz_item> items;
  if (s == SZ_OK) {
    if (at < SZ_CONTAINER_HEADER_SIZE || index_size < SZ_CONTAINER_FOOTER_SIZE || at + index_size != size)
      fail("the index located is not between header and end", s, s);
    index.assign(data + at, data + size);
    index.reserve(index.size());
    s = sz_container_index_items(index.data(), index.size(), size, nullptr, 0, &count);
    // The same index as that of a file one byte longer is misplaced.
    uint32_t other = 0;
    if (sz_container_index_items(index.data(), index.size(), uint64_t(size) + 1, nullptr, 0, &other) == SZ_OK)
      fail("an index accepted for the wrong file size", s, s);
  }
  if (s == SZ_OK) {
    items.resize(count);
    s = sz_container_index_items(index.data(), index.size(), size, items.data(), count, &count);
  }
  uint8_t header[SZ_CONTAINER_HEADER_SIZE];
  sz_container_write_header(header, sizeof header);
  const bool header_intact = size >= sizeof header && memcmp(data, header, sizeof header) == 0;
  if (whole == SZ_OK && s != SZ_OK) fail("the index alone is rejected where the whole container is not", whole, s);
  if (s != SZ_OK) {
    if (header_intact && s != whole) fail("the index alone is rejected otherwise than the whole container", whole, s);
    return;
  }
  for (uint32_t i = 0; i < count; ++i) {
    const sz_item& it = items[i];
    if (it.data_offset < SZ_CONTAINER_HEADER_SIZE || it.data_offset > at || it.data_size > at - it.data_offset)
      fail("an item of the index alone outside the container's items", s, s);
    const char* ix = (const char*)index.data();
    if (it.name_size && (it.name < ix || it.name + it.name_size > ix + index.size()))
      fail("a name of the index alone outside the index", s, s);
    if (whole != SZ_OK) continue;
    sz_item a = all[i], b = it;
    if ((const uint8_t*)a.name - data != (ptrdiff_t)at + ((const uint8_t*)b.name - index.data()))
      fail("the index alone names an item elsewhere", s, s);
    a.name = b.name = nullptr;
    if (memcmp(&a, &b, sizeof a) != 0) fail("the index alone gives other items than the whole container", s, s);
  }
}

void fuzz_container(const uint8_t* data, size_t size) {
  uint32_t count = 0;
  const sz_status so = sz_container_open(data, size, &count);
  // sz_container_items validates exactly what sz_container_open does (by sorting instead of pairwise checks).
  uint32_t n = 0;
  std::vector<sz_item> all;
  sz_status si = sz_container_items(data, size, nullptr, 0, &n);
  if (si == SZ_OK) {
    all.resize(n);
    si = sz_container_items(data, size, all.data(), n, &n);
  }
  if ((so == SZ_OK) != (si == SZ_OK) || (so != SZ_OK && so != si)) fail("container_items disagrees with open", so, si);
  fuzz_container_index(data, size, si, all);
  if (so != SZ_OK) return;
  if (n != count) fail("container_items counts differently", so, si);
  for (uint32_t i = 0; i < count; ++i) {
    sz_item it;
    const sz_status st = sz_container_item(data, size, i, &it);
    if (st != SZ_OK) fail("item of an accepted container", st, st);
    if (memcmp(&it, &all[i], sizeof it) != 0) fail("container_items and container_item differ", st, st);
    if (it.data_offset + it.data_size > size) fail("item outside the container", st, st);
    uint32_t found = ~0u;
    const sz_status fs = sz_container_find(data, size, it.name, it.name_size, &found);
    if (fs != SZ_OK || found != i) fail("names must be unique and found", fs, st);
    if (it.kind == SZ_ITEM_FRAME && it.original_size <= kMaxOutput) {
      std::vector<uint8_t> out(it.original_size ? it.original_size : 1);
      size_t n = 0;
      sz_decompress_reference(data + it.data_offset, it.data_size, out.data(), it.original_size, &n);
    }
  }
  sz_item it;
  if (sz_container_item(data, size, count, &it) == SZ_OK) fail("item past the count", SZ_OK, SZ_OK);
}

void fuzz_codebook(const uint8_t* data, size_t size) {
  sz_codebook cb;
  const sz_status st = sz_codebook_deserialize(data, size, &cb);
  if (st != SZ_OK) return;
  if (sz_codebook_validate(&cb) != SZ_OK) fail("accepted codebook does not validate", st, st);
  uint8_t again[SZ_CODEBOOK_FILE_SIZE];
  if (sz_codebook_serialize(&cb, again, sizeof again) != SZ_OK || memcmp(again, data, sizeof again) != 0)
    fail("codebook does not serialize back to its bytes", st, st);
}

// A channel book file, then a version 2 frame: the book parser (an accepted book validates and serialises back to its
// bytes) and both frame decoders given that book (they must agree as in fuzz_frame).
void fuzz_book(const uint8_t* data, size_t size) {
  sz_channel_book book;
  const sz_status st = sz_channel_book_parse(data, size, &book);
  if (st != SZ_OK) return;
  if (sz_channel_book_validate(&book) != SZ_OK) fail("accepted channel book does not validate", st, st);
  const size_t bs = sz_channel_book_file_size(&book);
  std::vector<uint8_t> again(bs);
  size_t written = 0;
  if (bs > size || sz_channel_book_serialize(&book, again.data(), bs, &written) != SZ_OK || written != bs ||
      memcmp(again.data(), data, bs) != 0)
    fail("channel book does not serialize back to its bytes", st, st);
  const uint8_t* frame = data + bs;
  const size_t fsize = size - bs;
  sz_frame_info info;
  uint64_t cap = 4096;
  if (sz_frame_info_get(frame, fsize, &info) == SZ_OK)
    cap = info.decompressed_size < kMaxOutput ? info.decompressed_size : kMaxOutput;
  std::vector<uint8_t> a(cap ? cap : 1, 0xA5), b(cap ? cap : 1, 0x5A);
  size_t na = 0, nb = 0;
  const sz_status sa = sz_decompress_book(frame, fsize, &book, a.data(), cap, &na, 1 + (unsigned)(size % 3));
  const sz_status sb = sz_decompress_book_reference(frame, fsize, &book, b.data(), cap, &nb);
  if ((sa == SZ_OK) != (sb == SZ_OK)) fail("one decoder accepts what the other rejects (channel book)", sa, sb);
  if (sa == SZ_OK && (na != nb || memcmp(a.data(), b.data(), na) != 0))
    fail("decoders disagree on the output (channel book)", sa, sb);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Copy to a heap block of exactly `size` bytes so ASan sees any read past the end (libFuzzer's buffer is exact
  // too; the copy also keeps a NULL pointer for size 0 away from the API).
  std::vector<uint8_t> buf(data, data + size);
  buf.reserve(size);
  const uint8_t* p = size ? buf.data() : (const uint8_t*)"";
  fuzz_frame(p, size);
  fuzz_pieces(p, size);
  fuzz_container(p, size);
  fuzz_codebook(p, size);
  fuzz_book(p, size);
  return 0;
}
