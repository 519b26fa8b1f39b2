// fuzz_decode — arbitrary bytes through every parser of docs/FORMAT.md: the frame decoders (fast and reference),
// sz_frame_info_get, the container parser (open, all items at once, every item, lookup by name, decoding frame
// items) and the codebook and channel book parsers (a book followed by a version 2 frame decodes with it). Nothing may crash or touch memory outside the buffers (ASan/UBSan); the two frame
// decoders must accept the same inputs, and when both accept they must write identical bytes; the two container
// validations must agree.
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
  fuzz_container(p, size);
  fuzz_codebook(p, size);
  fuzz_book(p, size);
  return 0;
}
