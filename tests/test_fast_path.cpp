// The fast CPU codec against the reference codec: for every thread count and every CPU instruction-set variant
// the library exposes (sz_set_cpu_isa: portable | avx2 | avx512, read at every call), the fast encoder writes the
// reference frame byte for byte, and each decoder decodes the other's frames.
#include <stdlib.h>

#include "test_util.h"

using namespace sztest;

namespace {

struct Input {
  std::string name;
  sz_dtype dtype;
  std::vector<uint8_t> bytes;
  sz_codebook cb;
  unsigned chunk_log2;
  uint32_t flags;
};

std::vector<Input> inputs() {
  std::vector<Input> in;
  auto add = [&](std::string name, sz_dtype d, std::vector<uint8_t> b, unsigned k, unsigned count, unsigned center,
                 unsigned cl, uint32_t flags) {
    Input x{std::move(name), d, std::move(b), centered_codebook(d, k, count, center), cl, flags};
    in.push_back(std::move(x));
  };
  // Sizes chosen so that chunks do not divide evenly among threads, with escapes and some raw chunks.
  add("bf16_k4", SZ_DTYPE_BF16, skewed_values(SZ_DTYPE_BF16, 1000003, 1, 120, 0.55, 0.002), 4, 16, 120, 12,
      SZ_FLAG_CHECKSUMS);
  add("bf16_k3_chunk8", SZ_DTYPE_BF16, skewed_values(SZ_DTYPE_BF16, 300001, 2, 120, 0.55, 0.02), 3, 8, 120, 8, 0);
  // LH32 checksums on some inputs (the others H32) so that every ISA build of both is checked.
  const uint32_t lane = SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH;
  add("bf16_k1_mostly_raw", SZ_DTYPE_BF16, skewed_values(SZ_DTYPE_BF16, 200005, 3, 120, 0.7, 0.2), 1, 2, 120, 10,
      lane);
  add("fp16_k4", SZ_DTYPE_FP16, skewed_values(SZ_DTYPE_FP16, 500009, 4, 14, 0.5, 0.01), 4, 15, 14, 12,
      SZ_FLAG_CHECKSUMS);
  add("fp32_k4", SZ_DTYPE_FP32, skewed_values(SZ_DTYPE_FP32, 400017, 5, 125, 0.5, 0.005), 4, 16, 125, 16, lane);
  add("fp32_k2", SZ_DTYPE_FP32, skewed_values(SZ_DTYPE_FP32, 100003, 6, 125, 0.3, 0.01), 2, 3, 125, 9, 0);
  add("e4m3_k3", SZ_DTYPE_FP8_E4M3, skewed_values(SZ_DTYPE_FP8_E4M3, 1000001, 7, 7, 0.5, 0.01), 3, 8, 7, 12,
      SZ_FLAG_CHECKSUMS);
  add("e4m3_k2", SZ_DTYPE_FP8_E4M3, skewed_values(SZ_DTYPE_FP8_E4M3, 77777, 8, 7, 0.3, 0.0), 2, 4, 7, 8, 0);
  add("e5m2_k4", SZ_DTYPE_FP8_E5M2, skewed_values(SZ_DTYPE_FP8_E5M2, 1000001, 9, 15, 0.5, 0.01), 4, 16, 15, 14,
      SZ_FLAG_CHECKSUMS);
  add("e5m2_k1", SZ_DTYPE_FP8_E5M2, skewed_values(SZ_DTYPE_FP8_E5M2, 33333, 10, 15, 0.3, 0.05), 1, 1, 15, 8, lane);
  // Large enough (9 MB) that the fast path really spreads it over 8 threads.
  add("bf16_k4_large", SZ_DTYPE_BF16, skewed_values(SZ_DTYPE_BF16, 4500007, 12, 121, 0.55, 0.001), 4, 16, 121, 12,
      SZ_FLAG_CHECKSUMS);
  add("bf16_random", SZ_DTYPE_BF16, random_bytes(2 * 123457, 11), 4, 16, 120, 12, lane);
  std::vector<uint8_t> kv;
  if (read_file(repo_path("data/kv_code_bf16_slice.bin"), &kv)) {
    sz_codebook cb;
    sz_default_codebook(SZ_DTYPE_BF16, SZ_KIND_GENERIC, &cb);
    in.push_back(Input{"bf16_real_kv_slice", SZ_DTYPE_BF16, std::move(kv), cb, 12, SZ_FLAG_CHECKSUMS});
  }
  return in;
}

const std::vector<Input>& cached_inputs() {
  static const std::vector<Input> in = inputs();
  return in;
}

const unsigned kThreadCounts[] = {1, 2, 3, 4, 8, 0};

}  // namespace

class FastPath : public ::testing::TestWithParam<const char*> {};

TEST_P(FastPath, EveryThreadCountWritesTheReferenceFrameAndDecodesBitExact) {
  const char* isa = GetParam();
  if (!isa_supported(isa)) GTEST_SKIP() << "this CPU lacks " << isa << ": variant not testable here";
  ScopedIsa scoped(isa);
  for (const Input& in : cached_inputs()) {
    const size_t vb = value_bytes(in.dtype);
    const uint64_t n = in.bytes.size() / vb;
    ASSERT_EQ(sz_codebook_validate(&in.cb), SZ_OK) << in.name;
    std::vector<uint8_t> ref;
    const sz_params p1 = make_params(in.chunk_log2, in.flags, 1);
    ASSERT_EQ(compress_vec(true, in.bytes.data(), n, in.dtype, &in.cb, &p1, &ref), SZ_OK) << in.name;
    for (unsigned t : kThreadCounts) {
      const std::string what = in.name + " isa=" + isa + " threads=" + std::to_string(t);
      const sz_params p = make_params(in.chunk_log2, in.flags, t);
      std::vector<uint8_t> fast;
      ASSERT_EQ(compress_vec(false, in.bytes.data(), n, in.dtype, &in.cb, &p, &fast), SZ_OK) << what;
      EXPECT_TRUE(fast == ref) << what << ": fast frame differs from the reference frame (" << fast.size() << " vs "
                               << ref.size() << " bytes)";
      std::vector<uint8_t> out;
      ASSERT_EQ(decompress_vec(false, ref, in.bytes.size(), &out, t), SZ_OK) << what;
      EXPECT_TRUE(out == in.bytes) << what << ": fast decoder output differs from the input";
    }
    std::vector<uint8_t> out;
    ASSERT_EQ(decompress_vec(true, ref, in.bytes.size(), &out), SZ_OK) << in.name;
    EXPECT_TRUE(out == in.bytes) << in.name << ": reference decoder output differs from the input";
  }
}

TEST_P(FastPath, CompressingTwiceGivesIdenticalBytes) {
  const char* isa = GetParam();
  if (!isa_supported(isa)) GTEST_SKIP() << "this CPU lacks " << isa;
  ScopedIsa scoped(isa);
  const Input& in = cached_inputs()[0];
  const uint64_t n = in.bytes.size() / value_bytes(in.dtype);
  const sz_params p = make_params(in.chunk_log2, in.flags, 3);
  std::vector<uint8_t> a, b;
  ASSERT_EQ(compress_vec(false, in.bytes.data(), n, in.dtype, &in.cb, &p, &a), SZ_OK);
  ASSERT_EQ(compress_vec(false, in.bytes.data(), n, in.dtype, &in.cb, &p, &b), SZ_OK);
  EXPECT_TRUE(a == b);
}

INSTANTIATE_TEST_SUITE_P(Isa, FastPath, ::testing::Values("portable", "avx2", "avx512"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

TEST(FastPathIsa, VariantsDecodeEachOthersFrames) {
  std::vector<const char*> isas;
  for (const IsaVariant& v : isa_variants())
    if (v.supported) isas.push_back(v.name);
  if (isas.size() < 2) GTEST_SKIP() << "this CPU supports only one variant";
  for (const Input& in : cached_inputs()) {
    const uint64_t n = in.bytes.size() / value_bytes(in.dtype);
    const sz_params p = make_params(in.chunk_log2, in.flags, 2);
    std::vector<std::vector<uint8_t>> frames(isas.size());
    for (size_t i = 0; i < isas.size(); ++i) {
      ScopedIsa s(isas[i]);
      ASSERT_EQ(compress_vec(false, in.bytes.data(), n, in.dtype, &in.cb, &p, &frames[i]), SZ_OK) << isas[i];
    }
    for (size_t i = 1; i < isas.size(); ++i) EXPECT_TRUE(frames[i] == frames[0]) << in.name << " " << isas[i];
    // Each variant decodes the frame written by the next one.
    for (size_t i = 0; i < isas.size(); ++i) {
      ScopedIsa s(isas[i]);
      std::vector<uint8_t> out;
      ASSERT_EQ(decompress_vec(false, frames[(i + 1) % isas.size()], in.bytes.size(), &out, 2), SZ_OK);
      EXPECT_TRUE(out == in.bytes) << in.name << " decoded by " << isas[i];
    }
  }
}

TEST(FastPathIsa, SetCpuIsaLimitsAndLifts) {
  const std::string best = sz_cpu_isa();
  EXPECT_TRUE(isa_supported(best.c_str())) << best;
  EXPECT_EQ(sz_set_cpu_isa("no-such-isa"), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(best, sz_cpu_isa()) << "an unknown name must leave the choice unchanged";
  ASSERT_EQ(sz_set_cpu_isa("portable"), SZ_OK);
  EXPECT_STREQ(sz_cpu_isa(), "portable");
  ASSERT_EQ(sz_set_cpu_isa("avx512"), SZ_OK);  // at most the best this CPU has
  EXPECT_EQ(best, sz_cpu_isa());
  ASSERT_EQ(sz_set_cpu_isa("portable"), SZ_OK);
  ASSERT_EQ(sz_set_cpu_isa(nullptr), SZ_OK);
  EXPECT_EQ(best, sz_cpu_isa());
  ASSERT_EQ(sz_set_cpu_isa("portable"), SZ_OK);
  ASSERT_EQ(sz_set_cpu_isa("best"), SZ_OK);
  EXPECT_EQ(best, sz_cpu_isa());
}

TEST(FastPath, ThreadsNeverChangeSmallFrames) {
  // Fewer chunks than threads, one chunk, zero values.
  for (uint64_t n : {0ull, 1ull, 255ull, 256ull, 257ull, 1000ull}) {
    const std::vector<uint8_t> src = skewed_values(SZ_DTYPE_BF16, (size_t)n, n, 120, 0.5, 0.05);
    const sz_codebook cb = centered_codebook(SZ_DTYPE_BF16, 4, 16, 120);
    for (unsigned t : kThreadCounts) {
      check_roundtrip(src, SZ_DTYPE_BF16, &cb, make_params(8, SZ_FLAG_CHECKSUMS, t),
                      "n=" + std::to_string(n) + " threads=" + std::to_string(t));
    }
  }
}
