// The C++ layer (include/splitzip/splitzip.hpp) over the C ABI: vector-based compress/decompress, Codebook and
// Histogram wrappers, and a container written by ContainerWriter and read back by ContainerReader, including empty
// items (a zero-byte stored item, a frame of zero values).
#include "splitzip/splitzip.hpp"

#include "spec_format.h"
#include "test_util.h"

using namespace sztest;

TEST(CppApi, CompressDecompressVectorsRoundTripAndMatchTheCApi) {
  const std::vector<uint8_t> src = skewed_values(SZ_DTYPE_BF16, 12345, 1, 120, 0.5, 0.01);
  std::vector<uint8_t> frame, out, c_frame;
  ASSERT_EQ(splitzip::compress(src.data(), 12345, SZ_DTYPE_BF16, frame), SZ_OK);
  ASSERT_EQ(compress_vec(true, src.data(), 12345, SZ_DTYPE_BF16, nullptr, nullptr, &c_frame), SZ_OK);
  EXPECT_TRUE(frame == c_frame);
  ASSERT_EQ(splitzip::decompress(frame.data(), frame.size(), out, 2), SZ_OK);
  EXPECT_TRUE(out == src);
  // Errors leave an empty output and pass the C status through.
  std::vector<uint8_t> bad = frame;
  bad[0] ^= 1;
  EXPECT_EQ(splitzip::decompress(bad.data(), bad.size(), out), SZ_ERROR_BAD_MAGIC);
  EXPECT_TRUE(out.empty() || out == src);
  EXPECT_EQ(splitzip::compress(src.data(), 10, (sz_dtype)0, frame), SZ_ERROR_INVALID_ARGUMENT);
}

TEST(CppApi, CodebookAndHistogramWrappersCalibrateAndSerialize) {
  const std::vector<uint8_t> src = skewed_values(SZ_DTYPE_FP16, 5000, 2, 14, 0.5, 0.01);
  splitzip::Histogram h(SZ_DTYPE_FP16);
  ASSERT_EQ(h.status(), SZ_OK);
  ASSERT_EQ(h.add(src.data(), 5000), SZ_OK);
  splitzip::Codebook cb;
  double bits = 0;
  ASSERT_EQ(h.calibrate(&cb, &bits), SZ_OK);
  EXPECT_EQ(cb.validate(), SZ_OK);
  EXPECT_EQ(cb.dtype(), SZ_DTYPE_FP16);
  EXPECT_GT(bits, 0.0);
  uint8_t bytes[SZ_CODEBOOK_FILE_SIZE];
  ASSERT_EQ(cb.serialize(bytes), SZ_OK);
  splitzip::Codebook back;
  ASSERT_EQ(splitzip::Codebook::deserialize(bytes, sizeof bytes, &back), SZ_OK);
  EXPECT_EQ(memcmp(back.get(), cb.get(), sizeof(sz_codebook)), 0);
  std::vector<uint8_t> f1, f2;
  ASSERT_EQ(splitzip::compress(src.data(), 5000, SZ_DTYPE_FP16, f1, cb), SZ_OK);
  ASSERT_EQ(compress_vec(true, src.data(), 5000, SZ_DTYPE_FP16, cb.get(), nullptr, &f2), SZ_OK);
  EXPECT_TRUE(f1 == f2);
  splitzip::Histogram bad((sz_dtype)9);
  EXPECT_NE(bad.status(), SZ_OK);
  EXPECT_NE(bad.add(src.data(), 10), SZ_OK);
}

TEST(CppApi, ContainerWriterAndReaderRoundTripWithEmptyItems) {
  const std::vector<uint8_t> meta = {'h', 'e', 'a', 'd'};
  const std::vector<uint8_t> k = skewed_values(SZ_DTYPE_BF16, 1000, 3, 120, 0.5, 0.01);
  const std::vector<uint8_t> v = skewed_values(SZ_DTYPE_FP8_E4M3, 777, 4, 7, 0.5, 0.01);
  splitzip::ContainerWriter w;
  ASSERT_EQ(w.add_stored("meta", meta.data(), meta.size()), SZ_OK);
  ASSERT_EQ(w.add_stored("empty_stored", nullptr, 0), SZ_OK);
  ASSERT_EQ(w.add_compressed("k", k.data(), 1000, SZ_DTYPE_BF16, {10, 100}), SZ_OK);
  ASSERT_EQ(w.add_compressed("empty_frame", k.data(), 0, SZ_DTYPE_BF16, {0}), SZ_OK);
  ASSERT_EQ(w.add_compressed("v", v.data(), 777, SZ_DTYPE_FP8_E4M3), SZ_OK);
  std::vector<uint8_t> c;
  ASSERT_EQ(w.finish(c), SZ_OK);

  splitzip::ContainerReader r;
  ASSERT_EQ(r.open(c.data(), c.size()), SZ_OK);
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(r.original_size(), meta.size() + k.size() + v.size());
  const std::vector<std::vector<uint8_t>> want = {meta, {}, k, {}, v};
  const char* names[] = {"meta", "empty_stored", "k", "empty_frame", "v"};
  for (uint32_t i = 0; i < 5; ++i) {
    std::vector<uint8_t> out;
    ASSERT_EQ(r.extract(i, out), SZ_OK) << names[i];
    EXPECT_TRUE(out == want[i]) << names[i];
    uint32_t idx = 99;
    ASSERT_EQ(r.find(names[i], &idx), SZ_OK) << names[i];
    EXPECT_EQ(idx, i);
  }
  // The same bytes the spec assembler writes for these items.
  std::vector<spec::Item> items;
  for (uint32_t i = 0; i < 5; ++i) {
    sz_item it;
    ASSERT_EQ(r.item(i, &it), SZ_OK);
    spec::Item s;
    s.kind = it.kind, s.dtype = it.dtype, s.ndim = it.ndim, s.name = std::string(it.name, it.name_size);
    s.shape.assign(it.shape, it.shape + it.ndim);
    s.original_offset = it.original_offset, s.original_size = it.original_size;
    s.data_offset = it.data_offset, s.data_size = it.data_size;
    s.data.assign(c.begin() + it.data_offset, c.begin() + it.data_offset + it.data_size);
    items.push_back(s);
  }
  EXPECT_TRUE(spec::container(items) == c);
}

TEST(CppApi, ContainerWriterRejectsDuplicateNamesAtFinish) {
  splitzip::ContainerWriter w;
  const uint8_t b[3] = {1, 2, 3};
  ASSERT_EQ(w.add_stored("x", b, 3), SZ_OK);
  ASSERT_EQ(w.add_stored("x", b, 3), SZ_OK);
  std::vector<uint8_t> c;
  EXPECT_NE(w.finish(c), SZ_OK);
}
