// test_channels.cpp — channel books and version 2 frames (docs/FORMAT.md §4.9, §5.2): the book file, calibration,
// the fast CPU codec against the reference (byte for byte, both directions), the book checks of §4.1 step 8,
// corrupt frames rejected like the reference, and the ratio gain on real KV.
#include <string.h>

#include <string>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "test_util.h"

namespace {

using sztest::Rng;

using Book = sztest::CalibratedBook;

std::vector<uint8_t> compress_ch(bool reference, const void* src, uint64_t n, sz_dtype dtype, const sz_channel_book& b,
                                 uint32_t tensor, const sz_params& p, sz_status* s) {
  std::vector<uint8_t> out(sz_compress_bound(n, dtype));
  size_t size = 0;
  *s = reference ? sz_compress_channels_reference(src, n, dtype, &b, tensor, &p, out.data(), out.size(), &size)
                 : sz_compress_channels(src, n, dtype, &b, tensor, &p, out.data(), out.size(), &size);
  out.resize(*s == SZ_OK ? size : 0);
  return out;
}

TEST(Channels, BookFileRoundTripAndRejections) {
  std::vector<uint8_t> bases(3 * 64);
  for (size_t i = 0; i < bases.size(); ++i) bases[i] = (uint8_t)(100 + i % 17);
  sz_channel_book b;
  ASSERT_EQ(sz_channel_book_init(&b, SZ_DTYPE_BF16, 3, 64, 3, bases.data()), SZ_OK);
  ASSERT_EQ(sz_channel_book_validate(&b), SZ_OK);
  std::vector<uint8_t> file(sz_channel_book_file_size(&b));
  ASSERT_EQ(file.size(), 20u + 192u);
  size_t size = 0;
  ASSERT_EQ(sz_channel_book_serialize(&b, file.data(), file.size(), &size), SZ_OK);
  sz_channel_book p;
  ASSERT_EQ(sz_channel_book_parse(file.data(), file.size(), &p), SZ_OK);
  EXPECT_EQ(p.id, b.id);
  EXPECT_EQ(p.period, 64u);
  EXPECT_EQ(p.tensors, 3u);
  EXPECT_EQ(memcmp(p.bases, bases.data(), bases.size()), 0);
  EXPECT_EQ((uint32_t)b.id, sztest::load_value(file.data() + file.size() - 4, 32)) << "checksum = low half of id";
  // §5.2's order of checks.
  EXPECT_EQ(sz_channel_book_parse(file.data(), 19, &p), SZ_ERROR_SRC_TRUNCATED);
  EXPECT_EQ(sz_channel_book_parse(file.data(), file.size() - 1, &p), SZ_ERROR_SRC_TRUNCATED);
  std::vector<uint8_t> t = file;
  t[0] ^= 1;
  EXPECT_EQ(sz_channel_book_parse(t.data(), t.size(), &p), SZ_ERROR_BAD_MAGIC);
  t = file;
  t[4] = 2;
  EXPECT_EQ(sz_channel_book_parse(t.data(), t.size(), &p), SZ_ERROR_UNSUPPORTED_VERSION);
  t = file;
  t[30] ^= 1;
  EXPECT_EQ(sz_channel_book_parse(t.data(), t.size(), &p), SZ_ERROR_CHECKSUM);
  // A base >= 2^E behind a valid checksum: corrupt. E4M3 has 16 exponents.
  std::vector<uint8_t> small(8, 3);
  sz_channel_book e4;
  ASSERT_EQ(sz_channel_book_init(&e4, SZ_DTYPE_FP8_E4M3, 2, 8, 1, small.data()), SZ_OK);
  std::vector<uint8_t> f4(sz_channel_book_file_size(&e4));
  ASSERT_EQ(sz_channel_book_serialize(&e4, f4.data(), f4.size(), &size), SZ_OK);
  f4[16] = 16;
  sztest::store_value(f4.data() + f4.size() - 4, 32, (uint32_t)XXH3_64bits(f4.data(), f4.size() - 4));
  EXPECT_EQ(sz_channel_book_parse(f4.data(), f4.size(), &p), SZ_ERROR_CORRUPT);
  // Arguments.
  EXPECT_EQ(sz_channel_book_init(&b, SZ_DTYPE_BF16, 0, 64, 3, bases.data()), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_channel_book_init(&b, SZ_DTYPE_BF16, 3, 0, 3, bases.data()), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_channel_book_init(&b, SZ_DTYPE_FP8_E4M3, 2, 8, 1, std::vector<uint8_t>(8, 200).data()),
            SZ_ERROR_BAD_CODEBOOK);
  sz_channel_book bad = b;
  bad.id ^= 1;
  EXPECT_EQ(sz_channel_book_validate(&bad), SZ_ERROR_BAD_CODEBOOK);
}

TEST(Channels, CalibrationFindsEachChannelsWindow) {
  // Channel c's values all have exponent 90 + c (E = 8); a 2-bit window must start at most 3 below and include it.
  const uint32_t P = 5, tokens = 50;
  std::vector<uint8_t> v((size_t)P * tokens * 2);
  for (uint32_t i = 0; i < P * tokens; ++i) {
    const uint16_t x = (uint16_t)((90 + i % P) << 7 | (i & 0x7F));
    memcpy(&v[2 * i], &x, 2);
  }
  std::vector<uint32_t> counts(sz_channel_histogram_size(SZ_DTYPE_BF16, 1, P) / 4, 0);
  ASSERT_EQ(sz_channel_histogram_add(counts.data(), SZ_DTYPE_BF16, 1, P, v.data(), tokens), SZ_OK);
  std::vector<uint8_t> bases(P);
  unsigned k = 0;
  double bits = 0;
  ASSERT_EQ(sz_channel_calibrate(counts.data(), SZ_DTYPE_BF16, 1, P, 0, bases.data(), &k, &bits), SZ_OK);
  EXPECT_EQ(k, 1u) << "one exponent per channel: the narrowest window wins";
  EXPECT_DOUBLE_EQ(bits, 1.0);
  for (uint32_t c = 0; c < P; ++c) EXPECT_EQ(bases[c], 89 + c) << "windows {89, 90} and {90, 91} tie: the lower";
  ASSERT_EQ(sz_channel_calibrate(counts.data(), SZ_DTYPE_BF16, 1, P, 3, bases.data(), &k, nullptr), SZ_OK);
  EXPECT_EQ(k, 3u);
  for (uint32_t c = 0; c < P; ++c) EXPECT_EQ(bases[c], 83 + c) << "the lowest window holding 90 + c";
  std::vector<uint32_t> empty(counts.size(), 0);
  EXPECT_EQ(sz_channel_calibrate(empty.data(), SZ_DTYPE_BF16, 1, P, 0, bases.data(), &k, nullptr),
            SZ_ERROR_INVALID_ARGUMENT);
}

TEST(Channels, FastEqualsReferenceEveryDtypeWidthShape) {
  int cases = 0;
  for (sz_dtype dtype : sztest::kAllDtypes) {
    const sztest::DtypeFacts f = sztest::dtype_facts(dtype);
    for (uint32_t period : {1u, 3u, 64u, 256u, 1000u}) {
      const uint32_t tensors = 3;
      const uint64_t tokens = period >= 256 ? 40 : 900;
      const std::vector<uint8_t> all = sztest::channel_values(dtype, tensors, tokens, period, 7 + period + dtype);
      for (unsigned k = 1; k <= 4 && k < f.E; ++k) {
        const Book b = sztest::calibrated_book(all, dtype, tensors, tokens, period, k);
        const size_t tensor_bytes = (size_t)tokens * period * (f.W / 8);
        for (uint32_t tensor : {0u, 2u}) {
          for (uint64_t n : {(uint64_t)0, (uint64_t)1, (uint64_t)tokens * period / 2 + 3, (uint64_t)tokens * period}) {
            for (unsigned log2 : {8u, 12u}) {
              for (uint32_t flags : sztest::kFlagSets) {
                const sz_params p = sztest::make_params(log2, flags, 2);
                const uint8_t* src = all.data() + tensor * tensor_bytes;
                sz_status s1, s2;
                const std::vector<uint8_t> ref = compress_ch(true, src, n, dtype, b.book, tensor, p, &s1);
                const std::vector<uint8_t> got = compress_ch(false, src, n, dtype, b.book, tensor, p, &s2);
                ASSERT_EQ(s1, SZ_OK);
                ASSERT_EQ(s2, SZ_OK);
                ASSERT_TRUE(got == ref) << "dtype " << dtype << " period " << period << " k " << k << " n " << n;
                ASSERT_EQ(ref[4], 2) << "§4.1: the version byte";
                std::vector<uint8_t> a(n * (f.W / 8) + 1), c(n * (f.W / 8) + 1);
                size_t sa = 0, sc = 0;
                ASSERT_EQ(sz_decompress_book_reference(ref.data(), ref.size(), &b.book, a.data(), a.size(), &sa),
                          SZ_OK);
                ASSERT_EQ(sz_decompress_book(ref.data(), ref.size(), &b.book, c.data(), c.size(), &sc, 2), SZ_OK);
                ASSERT_EQ(sa, n * (f.W / 8));
                ASSERT_EQ(memcmp(a.data(), src, sa), 0);
                ASSERT_EQ(memcmp(c.data(), src, sc), 0);
                ++cases;
              }
            }
          }
        }
      }
    }
  }
  printf("[ info ] %d version 2 cases: fast == reference, decoded both ways\n", cases);
}

TEST(Channels, BookChecksOfStep8) {
  const std::vector<uint8_t> all = sztest::channel_values(SZ_DTYPE_BF16, 2, 300, 64, 3);
  const Book b = sztest::calibrated_book(all, SZ_DTYPE_BF16, 2, 300, 64, 3);
  const uint64_t n = 300 * 64;
  sz_status s;
  const std::vector<uint8_t> frame = compress_ch(false, all.data(), n, SZ_DTYPE_BF16, b.book, 1, sztest::make_params(12, 1), &s);
  ASSERT_EQ(s, SZ_OK);
  std::vector<uint8_t> out(n * 2);
  size_t size = 0;
  for (int ref = 0; ref < 2; ++ref) {
    auto dec = [&](const sz_channel_book* book) {
      return ref ? sz_decompress_book_reference(frame.data(), frame.size(), book, out.data(), out.size(), &size)
                 : sz_decompress_book(frame.data(), frame.size(), book, out.data(), out.size(), &size, 1);
    };
    EXPECT_EQ(dec(nullptr), SZ_ERROR_BOOK_MISMATCH);
    sz_channel_book other = b.book;
    other.id ^= 1;
    EXPECT_EQ(dec(&other), SZ_ERROR_BOOK_MISMATCH);
    other = b.book;
    other.tensors = 1;  // the frame uses tensor 1
    EXPECT_EQ(dec(&other), SZ_ERROR_BOOK_MISMATCH);
    EXPECT_EQ(dec(&b.book), SZ_OK);
  }
  EXPECT_EQ(sz_decompress(frame.data(), frame.size(), out.data(), out.size(), &size, 1), SZ_ERROR_BOOK_MISMATCH);
  EXPECT_EQ(sz_decompress_reference(frame.data(), frame.size(), out.data(), out.size(), &size), SZ_ERROR_BOOK_MISMATCH);
  uint64_t id = 0;
  uint32_t tensor = 9, period = 0;
  ASSERT_EQ(sz_frame_book_ref(frame.data(), frame.size(), &id, &tensor, &period), SZ_OK);
  EXPECT_EQ(id, b.book.id);
  EXPECT_EQ(tensor, 1u);
  EXPECT_EQ(period, 64u);
  sz_frame_info info;
  ASSERT_EQ(sz_frame_info_get(frame.data(), frame.size(), &info), SZ_OK);
  EXPECT_EQ(info.version, 2);
  // A tensor the book does not have, and a version 1 decoder's view: version 2 is rejected as a version.
  EXPECT_EQ(compress_ch(false, all.data(), n, SZ_DTYPE_BF16, b.book, 2, sztest::make_params(12, 1), &s).size(), 0u);
  EXPECT_EQ(s, SZ_ERROR_INVALID_ARGUMENT);
}

TEST(Channels, CorruptFramesRejectedLikeReference) {
  const std::vector<uint8_t> all = sztest::channel_values(SZ_DTYPE_FP16, 1, 120, 64, 11);
  Book b = sztest::calibrated_book(all, SZ_DTYPE_FP16, 1, 120, 64, 2);
  // Push a few windows to the top of the exponent range, so that some codes decode to no exponent.
  for (size_t c = 0; c < 4; ++c) b.bases[c] = 30;
  ASSERT_EQ(sz_channel_book_init(&b.book, SZ_DTYPE_FP16, 2, 64, 1, b.bases.data()), SZ_OK);
  const uint64_t n = 120 * 64;
  sz_status s;
  for (uint32_t flags : sztest::kFlagSets) {
    const std::vector<uint8_t> frame =
        compress_ch(true, all.data(), n, SZ_DTYPE_FP16, b.book, 0, sztest::make_params(8, flags), &s);
    ASSERT_EQ(s, SZ_OK);
    Rng rng(5 + flags);
    std::vector<uint8_t> ro(n * 2), fo(n * 2);
    int rejected = 0;
    for (size_t byte = 0; byte < frame.size(); ++byte) {
      if (byte >= 64 + 8 * 30 && rng.below(5) != 0) continue;
      std::vector<uint8_t> t = frame;
      t[byte] ^= (uint8_t)(1u << rng.below(8));
      size_t rs = 0, fs = 0;
      const sz_status r = sz_decompress_book_reference(t.data(), t.size(), &b.book, ro.data(), ro.size(), &rs);
      const sz_status f = sz_decompress_book(t.data(), t.size(), &b.book, fo.data(), fo.size(), &fs, 1);
      ASSERT_EQ(r == SZ_OK, f == SZ_OK) << "byte " << byte << ": reference " << sztest::status_str(r) << ", fast "
                                        << sztest::status_str(f);
      if (byte < 64) {
        EXPECT_EQ(r, f) << "header byte " << byte;
      }
      if (r == SZ_OK) {
        ASSERT_TRUE(ro == fo);
      }
      rejected += r != SZ_OK;
    }
    EXPECT_GT(rejected, 50);
  }
}

// Real KV (trained-d512): a book calibrated on the code text, measured on the prose text, against one global
// codebook calibrated the same way.
TEST(Channels, RealKvRatioAboveGlobalCodebook) {
  std::string why;
  const std::string code = sztest::shared_file("kv/trained-d512/kv_code_bf16.bin", &why);
  const std::string prose = sztest::shared_file("kv/trained-d512/kv_prose_bf16.bin", &why);
  if (code.empty() || prose.empty()) GTEST_SKIP() << why;
  std::vector<uint8_t> cal, tst;
  ASSERT_TRUE(sztest::read_file(code, &cal));
  ASSERT_TRUE(sztest::read_file(prose, &tst));
  const uint32_t L = 8, H = 4, D = 64, P = H * D, T = 2 * L;
  const uint64_t tokens = cal.size() / 2 / T / P;
  ASSERT_EQ(tokens * T * P * 2, cal.size());
  const Book b = sztest::calibrated_book(cal, SZ_DTYPE_BF16, T, tokens, P, 0);
  sz_histogram hist;
  ASSERT_EQ(sz_histogram_init(&hist, SZ_DTYPE_BF16), SZ_OK);
  ASSERT_EQ(sz_histogram_add(&hist, cal.data(), cal.size() / 2), SZ_OK);
  sz_codebook cb;
  ASSERT_EQ(sz_calibrate(&hist, &cb, nullptr), SZ_OK);
  uint64_t ch_bytes = 0, gl_bytes = 0;
  const sz_params p = sztest::make_params(12, SZ_FLAG_CHECKSUMS, 2);
  for (uint32_t t = 0; t < T; ++t) {
    const uint8_t* src = tst.data() + (size_t)t * tokens * P * 2;
    sz_status s;
    const std::vector<uint8_t> f = compress_ch(false, src, tokens * P, SZ_DTYPE_BF16, b.book, t, p, &s);
    ASSERT_EQ(s, SZ_OK);
    std::vector<uint8_t> out(tokens * P * 2);
    size_t size = 0;
    ASSERT_EQ(sz_decompress_book(f.data(), f.size(), &b.book, out.data(), out.size(), &size, 2), SZ_OK);
    ASSERT_EQ(memcmp(out.data(), src, out.size()), 0);
    ch_bytes += f.size();
    std::vector<uint8_t> g(sz_compress_bound(tokens * P, SZ_DTYPE_BF16));
    ASSERT_EQ(sz_compress(src, tokens * P, SZ_DTYPE_BF16, &cb, &p, g.data(), g.size(), &size), SZ_OK);
    gl_bytes += size;
  }
  const double ch = (double)tst.size() / ch_bytes, gl = (double)tst.size() / gl_bytes;
  printf("[ info ] trained-d512 prose, calibrated on code: channel book k=%u ratio %.4f, global codebook %.4f\n",
         b.book.code_bits, ch, gl);
  EXPECT_GT(ch, gl * 1.02);
}

}  // namespace

// A container of a channel book (item kind 3) and a version 2 frame (§6.3): accepted and decodable with the book it
// holds; a book item that claims original bytes, a shape or a dtype is refused by the writer and the reader; a book
// item whose bytes are not a book is refused by the reader.
TEST(Channels, ContainerHoldsTheBookItsFramesUse) {
  const uint32_t period = 64, tensors = 2;
  const uint64_t tokens = 100, n = tokens * period;
  const std::vector<uint8_t> values = sztest::channel_values(SZ_DTYPE_BF16, tensors, tokens, period, 9);
  const Book b = sztest::calibrated_book(values, SZ_DTYPE_BF16, tensors, tokens, period, 3);
  std::vector<uint8_t> file(sz_channel_book_file_size(&b.book));
  size_t fs = 0;
  ASSERT_EQ(sz_channel_book_serialize(&b.book, file.data(), file.size(), &fs), SZ_OK);
  sz_status s;
  const std::vector<uint8_t> frame =
      compress_ch(false, values.data() + n * 2, n, SZ_DTYPE_BF16, b.book, 1, sz_params_default(), &s);
  ASSERT_EQ(s, SZ_OK);

  auto build = [&](const sz_item& book_item, std::vector<uint8_t>* c) {
    const uint64_t frame_at = (64 + file.size() + 63) / 64 * 64;
    std::vector<sz_item> items(2, sz_item{});
    items[0] = book_item;
    items[0].data_offset = 64;
    items[0].data_size = file.size();
    items[1].kind = SZ_ITEM_FRAME;
    items[1].dtype = SZ_DTYPE_BF16;
    items[1].name = "layer0.v";
    items[1].name_size = 8;
    items[1].original_size = n * 2;
    items[1].data_offset = frame_at;
    items[1].data_size = frame.size();
    const uint64_t index_offset = frame_at + frame.size();
    uint64_t tail = 0;
    sz_status st = sz_container_index_size(items.data(), 2, &tail);
    if (st != SZ_OK) return st;
    c->assign(index_offset + tail, 0);
    EXPECT_EQ(sz_container_write_header(c->data(), c->size()), SZ_OK);
    memcpy(c->data() + 64, file.data(), file.size());
    memcpy(c->data() + frame_at, frame.data(), frame.size());
    size_t w = 0;
    return sz_container_write_index(items.data(), 2, index_offset, c->data() + index_offset, (size_t)tail, &w);
  };
  sz_item bi{};
  bi.kind = SZ_ITEM_BOOK;
  bi.name = "channel_book";
  bi.name_size = 12;
  std::vector<uint8_t> c;
  ASSERT_EQ(build(bi, &c), SZ_OK);
  uint32_t count = 0;
  ASSERT_EQ(sz_container_open(c.data(), c.size(), &count), SZ_OK);
  ASSERT_EQ(count, 2u);
  sz_item items[2];
  ASSERT_EQ(sz_container_items(c.data(), c.size(), items, 2, &count), SZ_OK);
  EXPECT_EQ(items[0].kind, SZ_ITEM_BOOK);
  {  // the index read alone gives the same items
    std::vector<uint8_t> index;
    uint64_t index_offset = 0;
    std::vector<sz_item> part;
    ASSERT_EQ(sztest::container_items_from_index(c, &index, &index_offset, &part), SZ_OK);
    ASSERT_EQ(part.size(), 2u);
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(part[i].kind, items[i].kind);
      EXPECT_EQ(std::string(part[i].name, part[i].name_size), std::string(items[i].name, items[i].name_size));
      EXPECT_EQ(part[i].data_offset, items[i].data_offset);
      EXPECT_EQ(part[i].data_size, items[i].data_size);
      EXPECT_EQ(part[i].original_size, items[i].original_size);
    }
  }
  sz_channel_book in;
  ASSERT_EQ(sz_channel_book_parse(c.data() + items[0].data_offset, (size_t)items[0].data_size, &in), SZ_OK);
  EXPECT_EQ(in.id, b.book.id);
  std::vector<uint8_t> out(n * 2);
  size_t got = 0;
  EXPECT_EQ(sz_decompress(c.data() + items[1].data_offset, (size_t)items[1].data_size, out.data(), out.size(), &got, 1),
            SZ_ERROR_BOOK_MISMATCH);
  ASSERT_EQ(sz_decompress_book(c.data() + items[1].data_offset, (size_t)items[1].data_size, &in, out.data(),
                               out.size(), &got, 1),
            SZ_OK);
  EXPECT_EQ(memcmp(out.data(), values.data() + n * 2, out.size()), 0);

  // Writer: a book item is not part of the original file.
  for (int field = 0; field < 3; ++field) {
    sz_item bad = bi;
    if (field == 0) bad.original_size = 1;
    if (field == 1) bad.ndim = 1, bad.shape[0] = 1;
    if (field == 2) bad.dtype = SZ_DTYPE_BF16;
    std::vector<uint8_t> x;
    EXPECT_EQ(build(bad, &x), SZ_ERROR_INVALID_ARGUMENT) << "field " << field;
  }
  // Reader: a book item whose bytes no longer parse as a book.
  {
    std::vector<uint8_t> x = c;
    x[64 + 5] = 99;  // the book's dtype byte: the book no longer parses
    EXPECT_NE(sz_container_open(x.data(), x.size(), &count), SZ_OK);
    EXPECT_NE(sz_container_items(x.data(), x.size(), items, 2, &count), SZ_OK);
  }
}
