// Bit-exact round trips through the reference and fast codecs: every bit pattern of the 8- and 16-bit dtypes,
// sampled FP32 patterns with all special values, sizes around chunk boundaries, every chunk size, flags, every code
// width and partial codebooks, all-escape input against the bound. Small frames are also compared byte for byte with
// the independent spec encoder of tests/spec_format.h.
#include <algorithm>

#include "spec_format.h"
#include "test_util.h"

using namespace sztest;

namespace {

// Frames up to this many values are also built by the (slow) spec encoder and compared byte for byte.
constexpr uint64_t kSpecCompareMax = 1u << 18;

std::vector<uint8_t> roundtrip_and_spec(const std::vector<uint8_t>& src, sz_dtype dtype, const sz_codebook& cb,
                                        const sz_params& params, const std::string& what,
                                        spec::Stats* stats = nullptr) {
  std::vector<uint8_t> frame = check_roundtrip(src, dtype, &cb, params, what);
  const uint64_t n = src.size() / value_bytes(dtype);
  if (n <= kSpecCompareMax && !frame.empty()) {
    spec::Stats st;
    const std::vector<uint8_t> expect = spec::encode(src, dtype, cb, params.chunk_log2, params.flags, &st);
    EXPECT_TRUE(frame == expect) << what << ": library frame (" << frame.size()
                                 << " B) differs from the spec encoder's (" << expect.size() << " B)";
    if (stats) *stats = st;
  }
  return frame;
}

sz_codebook default_cb(sz_dtype d) {
  sz_codebook cb;
  EXPECT_EQ(sz_default_codebook(d, SZ_KIND_GENERIC, &cb), SZ_OK);
  return cb;
}

std::vector<uint8_t> all_patterns_16(uint64_t shuffle_seed) {
  std::vector<uint16_t> v(65536);
  for (uint32_t i = 0; i < 65536; ++i) v[i] = (uint16_t)i;
  if (shuffle_seed) shuffle(v, shuffle_seed);
  std::vector<uint8_t> out(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) store_value(&out[2 * i], 16, v[i]);
  return out;
}

}  // namespace

// ---- every bit pattern -----------------------------------------------------------------------------------------

class AllPatterns16 : public ::testing::TestWithParam<sz_dtype> {};

TEST_P(AllPatterns16, Every16BitPatternRoundTripsInOrderAndShuffled) {
  const sz_dtype d = GetParam();
  const sz_codebook cb = default_cb(d);
  for (uint64_t seed : {0ull, 11ull, 12ull, 13ull}) {
    const std::vector<uint8_t> src = all_patterns_16(seed);
    roundtrip_and_spec(src, d, cb, sz_params_default(), std::string(sz_dtype_name(d)) + " all patterns, shuffle " +
                                                            std::to_string(seed));
  }
}

TEST_P(AllPatterns16, Every16BitPatternRoundTripsWithSmallChunksAndNoChecksums) {
  const sz_dtype d = GetParam();
  const unsigned E = dtype_facts(d).E;
  // A 1-bit codebook: nearly everything escapes, so chunks go raw; and a 4-bit one.
  for (unsigned k : {1u, 4u}) {
    const sz_codebook cb = centered_codebook(d, k, 1u << k, E == 8 ? 120 : 14);
    const std::vector<uint8_t> src = all_patterns_16(77 + k);
    roundtrip_and_spec(src, d, cb, make_params(8, 0), std::string(sz_dtype_name(d)) + " k=" + std::to_string(k));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AllPatterns16, ::testing::Values(SZ_DTYPE_BF16, SZ_DTYPE_FP16),
                         [](const ::testing::TestParamInfo<sz_dtype>& i) { return std::string(sz_dtype_name(i.param)); });

class AllPatterns8 : public ::testing::TestWithParam<sz_dtype> {};

TEST_P(AllPatterns8, Every8BitPatternRoundTripsWithEveryCodeWidth) {
  const sz_dtype d = GetParam();
  const unsigned E = dtype_facts(d).E;
  // 256 patterns repeated 40 times, shuffled: 10240 values, several chunks of 256 and 4096.
  std::vector<uint8_t> src;
  for (int r = 0; r < 40; ++r)
    for (int i = 0; i < 256; ++i) src.push_back((uint8_t)i);
  shuffle(src, 5);
  std::vector<sz_codebook> cbs = {default_cb(d)};
  for (unsigned k = 1; k <= 4 && k < E; ++k) cbs.push_back(centered_codebook(d, k, 1u << k, E == 4 ? 7 : 14));
  for (const sz_codebook& cb : cbs) {
    for (unsigned cl : {8u, 12u}) {
      roundtrip_and_spec(src, d, cb, make_params(cl, SZ_FLAG_CHECKSUMS),
                         std::string(sz_dtype_name(d)) + " k=" + std::to_string(cb.code_bits) +
                             " chunk_log2=" + std::to_string(cl));
    }
  }
  // Each of the 256 patterns alone.
  for (int i = 0; i < 256; ++i) {
    const std::vector<uint8_t> one = {(uint8_t)i};
    roundtrip_and_spec(one, d, default_cb(d), sz_params_default(), "single byte " + std::to_string(i));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AllPatterns8, ::testing::Values(SZ_DTYPE_FP8_E4M3, SZ_DTYPE_FP8_E5M2),
                         [](const ::testing::TestParamInfo<sz_dtype>& i) { return std::string(sz_dtype_name(i.param)); });

TEST(Fp32Patterns, SampledPatternsWithEveryExponentAndSpecialValuesRoundTrip) {
  // 2^24 values: exponent field = i mod 256 (all 256 exponents, so NaN/Inf/subnormal exponents too), sign and
  // mantissa pseudo-random, then the special values spliced in at the start.
  const uint64_t n = (uint64_t)1 << 24;
  std::vector<uint8_t> src(n * 4);
  Rng rng(0xF32);
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t r = rng.next();
    const uint32_t x = ((uint32_t)(r >> 63) << 31) | ((uint32_t)(i & 0xFF) << 23) | ((uint32_t)r & 0x7FFFFF);
    store_value(&src[4 * i], 32, x);
  }
  const uint32_t specials[] = {
      0x00000000u, 0x80000000u,                            // +0, -0
      0x00000001u, 0x80000001u, 0x007FFFFFu, 0x807FFFFFu,  // smallest and largest subnormals, both signs
      0x00800000u, 0x7F7FFFFFu, 0xFF7FFFFFu,               // smallest normal, largest finite
      0x7F800000u, 0xFF800000u,                            // +Inf, -Inf
      0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u,  // quiet and signalling NaNs
      0x7FFFFFFFu, 0xFFFFFFFFu, 0x7FA5A5A5u, 0xFFDEADBEu,  // NaN payloads
      0x3F800000u, 0xBF800000u};
  for (size_t i = 0; i < sizeof specials / sizeof specials[0]; ++i) store_value(&src[4 * i], 32, specials[i]);
  const sz_codebook cb = default_cb(SZ_DTYPE_FP32);
  check_roundtrip(src, SZ_DTYPE_FP32, &cb, sz_params_default(), "fp32 2^24 sampled");
  // The special values alone through the spec comparison, with a codebook that holds 0 and 255 (so they are coded).
  std::vector<uint8_t> sp(src.begin(), src.begin() + sizeof specials);
  sz_codebook cb2 = centered_codebook(SZ_DTYPE_FP32, 2, 4, 127);
  cb2.values[2] = 0;
  cb2.values[3] = 255;
  ASSERT_EQ(sz_codebook_validate(&cb2), SZ_OK);
  roundtrip_and_spec(sp, SZ_DTYPE_FP32, cb2, sz_params_default(), "fp32 specials coded");
  roundtrip_and_spec(sp, SZ_DTYPE_FP32, cb, sz_params_default(), "fp32 specials default codebook");
}

TEST(Fp32Patterns, SkewedDataWithEscapesMatchesSpecEncoder) {
  const std::vector<uint8_t> src = skewed_values(SZ_DTYPE_FP32, 70001, 21, 124, 0.5, 0.01);
  for (unsigned k = 1; k <= 4; ++k) {
    const sz_codebook cb = centered_codebook(SZ_DTYPE_FP32, k, 1u << k, 124);
    roundtrip_and_spec(src, SZ_DTYPE_FP32, cb, make_params(10, SZ_FLAG_CHECKSUMS), "fp32 k=" + std::to_string(k));
  }
}

// ---- sizes around chunk boundaries -------------------------------------------------------------------------------

struct SizeCase {
  sz_dtype dtype;
  unsigned chunk_log2;
};

void PrintTo(const SizeCase& c, std::ostream* os) { *os << sz_dtype_name(c.dtype) << " chunk_log2 " << c.chunk_log2; }

class Sizes : public ::testing::TestWithParam<SizeCase> {};

TEST_P(Sizes, BoundarySizesRoundTripAndMatchSpec) {
  const SizeCase c = GetParam();
  const uint64_t S = (uint64_t)1 << c.chunk_log2;
  const unsigned E = dtype_facts(c.dtype).E;
  const unsigned center = E == 8 ? 122 : (E == 5 ? 13 : 6);
  const uint64_t sizes[] = {0, 1, 2, 7, 8, 9, 15, 16, 17, S - 1, S, S + 1, 2 * S - 7, 3 * S + 5};
  const sz_codebook cb = centered_codebook(c.dtype, E > 4 ? 4 : 3, E > 4 ? 16 : 8, center);
  for (uint64_t n : sizes) {
    const std::vector<uint8_t> src = skewed_values(c.dtype, (size_t)n, 1000 + n, center, 0.6, 0.02);
    for (uint32_t flags : sztest::kFlagSets) {
      const std::vector<uint8_t> f =
          roundtrip_and_spec(src, c.dtype, cb, make_params(c.chunk_log2, flags),
                             std::string(sz_dtype_name(c.dtype)) + " n=" + std::to_string(n) +
                                 " flags=" + std::to_string(flags));
      if (!f.empty()) {
        const uint64_t C = (n + S - 1) / S;
        EXPECT_GE(f.size(), 64 + 8 * C + (flags ? 4 * C : 0) + (n + 7) / 8 * (dtype_facts(c.dtype).W - E));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    DtypeChunk, Sizes,
    ::testing::Values(SizeCase{SZ_DTYPE_BF16, 8}, SizeCase{SZ_DTYPE_BF16, 12}, SizeCase{SZ_DTYPE_FP16, 8},
                      SizeCase{SZ_DTYPE_FP16, 12}, SizeCase{SZ_DTYPE_FP32, 8}, SizeCase{SZ_DTYPE_FP32, 12},
                      SizeCase{SZ_DTYPE_FP8_E4M3, 8}, SizeCase{SZ_DTYPE_FP8_E4M3, 12},
                      SizeCase{SZ_DTYPE_FP8_E5M2, 8}, SizeCase{SZ_DTYPE_FP8_E5M2, 12}),
    [](const ::testing::TestParamInfo<SizeCase>& i) {
      return std::string(sz_dtype_name(i.param.dtype)) + "_chunk" + std::to_string(i.param.chunk_log2);
    });

TEST(LargeInput, FourMillionBf16ValuesRoundTrip) {
  const uint64_t n = (4u << 20) + 3;
  const std::vector<uint8_t> src = skewed_values(SZ_DTYPE_BF16, (size_t)n, 4242, 121, 0.55, 0.001);
  const sz_codebook cb = centered_codebook(SZ_DTYPE_BF16, 4, 16, 121);
  const std::vector<uint8_t> f = check_roundtrip(src, SZ_DTYPE_BF16, &cb, sz_params_default(), "bf16 4M");
  ASSERT_FALSE(f.empty());
  EXPECT_LT(f.size(), src.size()) << "skewed BF16 data must compress";
  RecordProperty("ratio", ratio_str(src.size(), f.size()));
  std::cout << "[ratio] synthetic skewed bf16 4M values, 16-entry codebook: " << ratio_str(src.size(), f.size())
            << "\n";
}

// ---- every chunk size ------------------------------------------------------------------------------------------

class ChunkLog2 : public ::testing::TestWithParam<unsigned> {};

TEST_P(ChunkLog2, EveryChunkSizeRoundTripsAndMatchesSpec) {
  const unsigned cl = GetParam();
  const uint64_t n = 3 * 65536 + 77;  // several chunks even at 2^16, last one partial
  const std::vector<uint8_t> src = skewed_values(SZ_DTYPE_BF16, (size_t)n, 77 + cl, 120, 0.5, 0.004);
  const sz_codebook cb = centered_codebook(SZ_DTYPE_BF16, 3, 8, 120);
  spec::Stats st;
  const std::vector<uint8_t> f =
      roundtrip_and_spec(src, SZ_DTYPE_BF16, cb, make_params(cl, SZ_FLAG_CHECKSUMS), "chunk_log2=" + std::to_string(cl),
                         &st);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[7], cl);
  sz_frame_info info;
  ASSERT_EQ(sz_frame_info_get(f.data(), f.size(), &info), SZ_OK);
  EXPECT_EQ(info.n_chunks, (n + (1u << cl) - 1) >> cl);
  EXPECT_EQ(info.coded_chunks, st.coded_chunks);
  EXPECT_EQ(info.raw_chunks, st.raw_chunks);
  EXPECT_EQ(info.escapes, st.escapes);
}

INSTANTIATE_TEST_SUITE_P(AllSizes, ChunkLog2, ::testing::Range(8u, 17u));

// ---- codebooks of every width, partial codebooks -----------------------------------------------------------------

class CodeWidths : public ::testing::TestWithParam<sz_dtype> {};

TEST_P(CodeWidths, EveryWidthAndPartialCountRoundTripsAndMatchesSpec) {
  const sz_dtype d = GetParam();
  const unsigned E = dtype_facts(d).E;
  const unsigned center = E == 8 ? 125 : (E == 5 ? 14 : 7);
  const std::vector<uint8_t> src = skewed_values(d, 5000, 31 + d, center, 0.45, 0.01);
  for (unsigned k = 1; k <= 4 && k < E; ++k) {
    for (unsigned count : {1u, (1u << k) - 1, 1u << k}) {
      if (count == 0) continue;
      const sz_codebook cb = centered_codebook(d, k, count, center);
      ASSERT_EQ(sz_codebook_validate(&cb), SZ_OK);
      roundtrip_and_spec(src, d, cb, make_params(8, SZ_FLAG_CHECKSUMS),
                         std::string(sz_dtype_name(d)) + " k=" + std::to_string(k) + " count=" + std::to_string(count));
    }
  }
  // A codebook in a non-sorted order: the frame keeps the caller's order.
  sz_codebook cb = centered_codebook(d, 2, 4, center);
  std::reverse(cb.values, cb.values + 4);
  const std::vector<uint8_t> f = roundtrip_and_spec(src, d, cb, sz_params_default(), "reversed codebook");
  ASSERT_FALSE(f.empty());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(f[32 + i], cb.values[i]);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CodeWidths, ::testing::ValuesIn(kAllDtypes),
                         [](const ::testing::TestParamInfo<sz_dtype>& i) { return std::string(sz_dtype_name(i.param)); });

// ---- escapes and the size bound ----------------------------------------------------------------------------------

TEST(Escapes, AllEscapeInputStaysWithinBoundForEveryDtypeAndChunk) {
  for (sz_dtype d : kAllDtypes) {
    const unsigned E = dtype_facts(d).E;
    // Every value has exponent 0; the codebook holds only the largest exponent, so every value escapes.
    sz_codebook cb = centered_codebook(d, 1, 1, (1u << E) - 1);
    for (unsigned cl : {8u, 12u, 16u}) {
      for (uint64_t n : {1ull, 9ull, 1000ull, 70000ull}) {
        std::vector<uint8_t> src = random_bytes((size_t)n * value_bytes(d), n + cl);
        const DtypeFacts f = dtype_facts(d);
        for (uint64_t i = 0; i < n; ++i) {
          uint32_t x = load_value(&src[i * value_bytes(d)], f.W);
          x &= ~(((1u << f.E) - 1u) << f.M);
          store_value(&src[i * value_bytes(d)], f.W, x);
        }
        spec::Stats st;
        const std::vector<uint8_t> fr =
            roundtrip_and_spec(src, d, cb, make_params(cl, SZ_FLAG_CHECKSUMS),
                               std::string(sz_dtype_name(d)) + " all-escape n=" + std::to_string(n), &st);
        ASSERT_FALSE(fr.empty());
        EXPECT_LE(fr.size(), sz_compress_bound(n, d));
        sz_frame_info info;
        ASSERT_EQ(sz_frame_info_get(fr.data(), fr.size(), &info), SZ_OK);
        EXPECT_EQ(info.coded_chunks, st.coded_chunks);
        EXPECT_EQ(info.escapes, st.escapes);
        if (n >= 9) {
          // From 9 values on, 3 bytes per escape always exceed the raw exponent bytes: every chunk is raw.
          EXPECT_EQ(st.coded_chunks, 0u) << "every chunk must fall back to raw exponents";
          EXPECT_EQ(info.raw_chunks, info.n_chunks);
          EXPECT_EQ(info.escapes, 0u) << "escapes count only coded chunks";
        }
      }
    }
  }
}

TEST(Escapes, RandomBytesStayWithinBoundForEveryDtype) {
  for (sz_dtype d : kAllDtypes) {
    for (uint64_t n : {0ull, 1ull, 255ull, 256ull, 100000ull}) {
      const std::vector<uint8_t> src = random_bytes((size_t)n * value_bytes(d), 9 * n + d);
      sz_codebook cb = default_cb(d);
      for (unsigned cl : {8u, 12u}) {
        const std::vector<uint8_t> f =
            check_roundtrip(src, d, &cb, make_params(cl, SZ_FLAG_CHECKSUMS),
                            std::string(sz_dtype_name(d)) + " random n=" + std::to_string(n));
        ASSERT_FALSE(f.empty());
        EXPECT_LE(f.size(), sz_compress_bound(n, d));
      }
    }
  }
}

TEST(Escapes, ModeIsCodedExactlyWhenRecordFitsRawSize) {
  // BF16, k=2, one chunk of 256 values: G = 32*2 = 64 bytes, raw = 32*8 = 256 bytes. Coded iff 64 + 3X <= 256,
  // i.e. X <= 64. X = 64 (a tie) must be coded, X = 65 raw (§4.7).
  const sz_codebook cb = centered_codebook(SZ_DTYPE_BF16, 2, 4, 120);  // {120, 121, 119, 122}
  for (int X : {0, 1, 63, 64, 65, 66, 256}) {
    std::vector<uint8_t> s2(512);
    for (int j = 0; j < 256; ++j) {
      const uint32_t e = (j < X) ? 1 + (j % 100) : 120 + (j % 2);
      store_value(&s2[2 * j], 16, make_value(j & 1, e, (uint32_t)j * 37, dtype_facts(SZ_DTYPE_BF16)));
    }
    spec::Stats st;
    const std::vector<uint8_t> f =
        roundtrip_and_spec(s2, SZ_DTYPE_BF16, cb, make_params(8, SZ_FLAG_CHECKSUMS), "X=" + std::to_string(X), &st);
    ASSERT_FALSE(f.empty());
    sz_frame_info info;
    ASSERT_EQ(sz_frame_info_get(f.data(), f.size(), &info), SZ_OK);
    EXPECT_EQ(info.coded_chunks, X <= 64 ? 1u : 0u) << "X=" << X;
    EXPECT_EQ(info.raw_chunks, X <= 64 ? 0u : 1u) << "X=" << X;
    EXPECT_EQ(info.escapes, X <= 64 ? (uint64_t)X : 0u) << "X=" << X;
    const uint64_t exp_size = spec::get_le(&f[24], 8);
    EXPECT_EQ(exp_size, X <= 64 ? 64u + 3u * X : 256u) << "X=" << X;
  }
}

// ---- frame info ------------------------------------------------------------------------------------------------

TEST(FrameInfo, FieldsDescribeTheFrame) {
  const std::vector<uint8_t> src = skewed_values(SZ_DTYPE_FP16, 10000, 8, 14, 0.5, 0.05);
  const sz_codebook cb = centered_codebook(SZ_DTYPE_FP16, 3, 7, 14);
  spec::Stats st;
  const std::vector<uint8_t> f =
      roundtrip_and_spec(src, SZ_DTYPE_FP16, cb, make_params(9, SZ_FLAG_CHECKSUMS), "fp16 info", &st);
  ASSERT_FALSE(f.empty());
  sz_frame_info info;
  memset(&info, 0xEE, sizeof info);
  ASSERT_EQ(sz_frame_info_get(f.data(), f.size(), &info), SZ_OK);
  EXPECT_EQ(info.version, 1);
  EXPECT_EQ(info.dtype, SZ_DTYPE_FP16);
  EXPECT_EQ(info.chunk_log2, 9);
  EXPECT_EQ(info.flags, SZ_FLAG_CHECKSUMS);
  EXPECT_EQ(info.codebook.dtype, SZ_DTYPE_FP16);
  EXPECT_EQ(info.codebook.code_bits, 3);
  EXPECT_EQ(info.codebook.count, 7);
  EXPECT_EQ(memcmp(info.codebook.values, cb.values, 16), 0);
  EXPECT_EQ(info.n_values, 10000u);
  EXPECT_EQ(info.decompressed_size, 20000u);
  EXPECT_EQ(info.frame_size, f.size());
  EXPECT_EQ(info.n_chunks, (10000u + 511) / 512);
  EXPECT_EQ(info.stats_valid, 1u);
  EXPECT_EQ(info.coded_chunks, st.coded_chunks);
  EXPECT_EQ(info.raw_chunks, st.raw_chunks);
  EXPECT_EQ(info.escapes, st.escapes);
  EXPECT_GT(st.escapes, 0u);
  EXPECT_EQ(info.coded_chunks + info.raw_chunks, info.n_chunks);

  // Header only: the header fields, and no statistics.
  sz_frame_info head;
  memset(&head, 0xEE, sizeof head);
  ASSERT_EQ(sz_frame_info_get(f.data(), 64, &head), SZ_OK);
  EXPECT_EQ(head.n_values, 10000u);
  EXPECT_EQ(head.frame_size, f.size());
  EXPECT_EQ(head.stats_valid, 0u);
  EXPECT_EQ(head.coded_chunks, 0u);
  EXPECT_EQ(head.raw_chunks, 0u);
  EXPECT_EQ(head.escapes, 0u);
  EXPECT_EQ(sz_frame_info_get(f.data(), 63, &head), SZ_ERROR_SRC_TRUNCATED);
}

TEST(FrameInfo, IsFrameAndIsContainerLookAtTheMagic) {
  const std::vector<uint8_t> src = random_bytes(100, 1);
  std::vector<uint8_t> f;
  ASSERT_EQ(compress_vec(true, src.data(), 50, SZ_DTYPE_BF16, nullptr, nullptr, &f), SZ_OK);
  EXPECT_EQ(sz_is_frame(f.data(), f.size()), 1);
  EXPECT_EQ(sz_is_container(f.data(), f.size()), 0);
  EXPECT_EQ(sz_is_frame(f.data(), 3), 0);
  const uint8_t cmagic[4] = {0x53, 0x50, 0x5A, 0x43};
  EXPECT_EQ(sz_is_container(cmagic, 4), 1);
  EXPECT_EQ(sz_is_frame(cmagic, 4), 0);
}

TEST(Determinism, CompressingTwiceGivesIdenticalBytes) {
  const std::vector<uint8_t> src = skewed_values(SZ_DTYPE_BF16, 300000, 99, 120, 0.5, 0.003);
  std::vector<uint8_t> a, b, c;
  const sz_params p = make_params(12, SZ_FLAG_CHECKSUMS, 2);
  ASSERT_EQ(compress_vec(false, src.data(), 300000, SZ_DTYPE_BF16, nullptr, &p, &a), SZ_OK);
  ASSERT_EQ(compress_vec(false, src.data(), 300000, SZ_DTYPE_BF16, nullptr, &p, &b), SZ_OK);
  ASSERT_EQ(compress_vec(true, src.data(), 300000, SZ_DTYPE_BF16, nullptr, &p, &c), SZ_OK);
  EXPECT_TRUE(a == b);
  EXPECT_TRUE(a == c);
  // NULL codebook means the generic default codebook.
  sz_codebook cb = default_cb(SZ_DTYPE_BF16);
  std::vector<uint8_t> d;
  ASSERT_EQ(compress_vec(false, src.data(), 300000, SZ_DTYPE_BF16, &cb, &p, &d), SZ_OK);
  EXPECT_TRUE(a == d);
  // NULL params means sz_params_default().
  std::vector<uint8_t> e1, e2;
  const sz_params dp = sz_params_default();
  ASSERT_EQ(compress_vec(false, src.data(), 300000, SZ_DTYPE_BF16, nullptr, nullptr, &e1), SZ_OK);
  ASSERT_EQ(compress_vec(false, src.data(), 300000, SZ_DTYPE_BF16, nullptr, &dp, &e2), SZ_OK);
  EXPECT_TRUE(e1 == e2);
}
