// Entropy-coded frames (docs/FORMAT.md §4.10) and symbol tables (§5.3): round trips of every bit pattern, fast
// coder == reference coder byte for byte, the raw fallback and size bound, rejection of corrupt and truncated frames
// and tables with the statuses of the spec, and the real KV slice shipped in data/.
#include <string.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "test_util.h"

using namespace sztest;

namespace {

const sz_dtype kDtypes[] = {SZ_DTYPE_BF16, SZ_DTYPE_FP16, SZ_DTYPE_FP32, SZ_DTYPE_FP8_E4M3, SZ_DTYPE_FP8_E5M2};

using Table = CalibratedTable;

std::vector<uint8_t> compress(const std::vector<uint8_t>& values, sz_dtype dtype, const sz_symbol_table& t,
                              uint32_t tensor, const sz_params* p, bool reference = false) {
  const uint64_t n = values.size() / sz_dtype_size(dtype);
  // Garbage, not zeros: the encoders must write every byte of the frame themselves (a reused buffer is dirty).
  std::vector<uint8_t> out(sz_compress_bound(n, dtype), 0xA5);
  size_t size = 0;
  const sz_status s = reference ? sz_compress_entropy_reference(values.data(), n, dtype, &t, tensor, p, out.data(),
                                                                out.size(), &size)
                                : sz_compress_entropy(values.data(), n, dtype, &t, tensor, p, out.data(), out.size(),
                                                      &size);
  EXPECT_EQ(s, SZ_OK) << sz_status_name(s);
  EXPECT_LE(size, sz_compress_bound(n, dtype));
  out.resize(size);
  return out;
}

// Decodes with both decoders and checks they agree with `expected`.
void expect_round_trip(const std::vector<uint8_t>& frame, const sz_symbol_table& t,
                       const std::vector<uint8_t>& expected, unsigned threads = 1) {
  std::vector<uint8_t> a(expected.size() + 1, 0xAA), b(expected.size() + 1, 0x55);
  size_t wa = 0, wb = 0;
  ASSERT_EQ(sz_decompress_entropy(frame.data(), frame.size(), &t, a.data(), a.size(), &wa, threads), SZ_OK);
  ASSERT_EQ(sz_decompress_entropy_reference(frame.data(), frame.size(), &t, b.data(), b.size(), &wb), SZ_OK);
  ASSERT_EQ(wa, expected.size());
  ASSERT_EQ(wb, expected.size());
  if (expected.empty()) return;  // memcmp must not see the null data() of an empty vector
  EXPECT_EQ(memcmp(a.data(), expected.data(), expected.size()), 0);
  EXPECT_EQ(memcmp(b.data(), expected.data(), expected.size()), 0);
}

// Every bit pattern of the dtype (FP32: every exponent with 512 mantissa/sign patterns each), shuffled.
std::vector<uint8_t> all_patterns(sz_dtype dtype) {
  const DtypeFacts f = dtype_facts(dtype);
  const unsigned vb = f.W / 8;
  std::vector<uint32_t> v;
  if (f.W <= 16) {
    for (uint32_t x = 0; x < (1u << f.W); ++x) v.push_back(x);
  } else {
    Rng rng(7);
    for (uint32_t e = 0; e < 256; ++e)
      for (unsigned k = 0; k < 512; ++k)
        v.push_back(make_value((uint32_t)(k & 1), e, k < 4 ? (k < 2 ? 0u : 0x7FFFFFu) : (uint32_t)rng.next(), f));
  }
  shuffle(v, 11);
  std::vector<uint8_t> out(v.size() * vb);
  for (size_t i = 0; i < v.size(); ++i) store_value(out.data() + i * vb, f.W, v[i]);
  return out;
}

}  // namespace

TEST(EntropyFrames, EveryBitPatternRoundTripsAndFastEqualsReference) {
  for (sz_dtype dt : kDtypes) {
    SCOPED_TRACE(sz_dtype_name(dt));
    const uint32_t period = 64, tensors = 2;
    // Calibrated on KV-like values, applied to every bit pattern: most patterns escape or fall back to raw.
    const uint64_t tokens = 512;
    const std::vector<uint8_t> sample = channel_values(dt, tensors, tokens, period, 3);
    auto tb = calibrated_table(sample, dt, tensors, tokens, period, 8);
    std::vector<uint8_t> v = all_patterns(dt);
    if (sz_dtype_size(dt) == 1) {  // 256 patterns: repeated, so that chunks of every size hold them many times
      const std::vector<uint8_t> once = v;
      for (int r = 0; r < 255; ++r) v.insert(v.end(), once.rbegin(), once.rend());
    }
    ASSERT_EQ(v.size() / sz_dtype_size(dt) % period, 0u);
    for (unsigned cl : {8u, 12u, 16u}) {
      sz_params p = sz_params_default();
      p.chunk_log2 = cl;
      const std::vector<uint8_t> fast = compress(v, dt, tb->t, 1, &p);
      const std::vector<uint8_t> ref = compress(v, dt, tb->t, 1, &p, true);
      ASSERT_EQ(fast, ref) << "chunk_log2 " << cl;
      expect_round_trip(fast, tb->t, v, cl == 8 ? 4 : 1);
    }
    // And the calibration data itself, which codes well: every chunk coded, smaller than raw.
    std::vector<uint8_t> t0(sample.begin(), sample.begin() + sample.size() / 2);
    const std::vector<uint8_t> fr = compress(t0, dt, tb->t, 0, nullptr);
    EXPECT_EQ(fr, compress(t0, dt, tb->t, 0, nullptr, true));
    expect_round_trip(fr, tb->t, t0);
    sz_frame_info info;
    ASSERT_EQ(sz_frame_info_get(fr.data(), fr.size(), &info), SZ_OK);
    EXPECT_EQ(info.version, SZ_FORMAT_VERSION_ENTROPY);
    EXPECT_EQ(info.flags, SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH | SZ_FLAG_ENTROPY);
    EXPECT_EQ(info.chunk_log2, 12u);  // NULL params: sz_entropy_chunk_log2 of 32768 values
    EXPECT_EQ(info.raw_chunks, 0u);
    EXPECT_LT(fr.size(), t0.size());
  }
}

// The default chunk: 2^16 for calls of at least 8192 such chunks, else the largest with 8192 chunks, at least 2^12; what
// NULL params and a chunk_log2 of 0 give, the same frame as that chunk given.
TEST(EntropyFrames, DefaultChunkDependsOnTheCallsSize) {
  const uint64_t k = 8192;
  EXPECT_EQ(sz_entropy_chunk_log2(0), 12u);
  EXPECT_EQ(sz_entropy_chunk_log2(1000), 12u);
  EXPECT_EQ(sz_entropy_chunk_log2((k << 13) - 1), 12u);
  EXPECT_EQ(sz_entropy_chunk_log2(k << 13), 13u);
  EXPECT_EQ(sz_entropy_chunk_log2(k << 14), 14u);  // 256 MiB of BF16
  EXPECT_EQ(sz_entropy_chunk_log2((k << 16) - 1), 15u);
  EXPECT_EQ(sz_entropy_chunk_log2(k << 16), (uint32_t)SZ_ENTROPY_CHUNK_LOG2);
  EXPECT_EQ(sz_entropy_chunk_log2(UINT64_MAX), (uint32_t)SZ_ENTROPY_CHUNK_LOG2);
  const sz_dtype dt = SZ_DTYPE_BF16;
  const uint32_t period = 64, tokens = 512;
  const std::vector<uint8_t> v = channel_values(dt, 1, tokens, period, 5);  // 32768 values: 8 chunks of 2^12
  auto tb = calibrated_table(v, dt, 1, tokens, period, 4);
  sz_params zero = sz_params_default(), twelve = zero, sixteen = zero;
  zero.chunk_log2 = 0;
  twelve.chunk_log2 = 12;
  sixteen.chunk_log2 = 16;
  for (bool ref : {false, true}) {
    const std::vector<uint8_t> f12 = compress(v, dt, tb->t, 0, &twelve, ref);
    EXPECT_EQ(compress(v, dt, tb->t, 0, nullptr, ref), f12);
    EXPECT_EQ(compress(v, dt, tb->t, 0, &zero, ref), f12);
    EXPECT_NE(compress(v, dt, tb->t, 0, &sixteen, ref), f12);
  }
}

TEST(EntropyFrames, SizesAroundChunksAndLanes) {
  const sz_dtype dt = SZ_DTYPE_BF16;
  const uint32_t period = 8;
  const std::vector<uint8_t> sample = channel_values(dt, 1, 4096, period, 5);
  auto tb = calibrated_table(sample, dt, 1, 4096, period, 2);
  for (uint64_t n : {0ull, 1ull, 7ull, 31ull, 32ull, 33ull, 255ull, 256ull, 257ull, 1000ull, 4095ull, 4096ull,
                     4097ull, 32768ull}) {
    std::vector<uint8_t> v(sample.begin(), sample.begin() + n * 2);
    for (unsigned cl : {8u, 12u}) {
      sz_params p = sz_params_default();
      p.chunk_log2 = cl;
      p.flags = n % 2 ? 0 : SZ_FLAG_CHECKSUMS;
      const std::vector<uint8_t> f = compress(v, dt, tb->t, 0, &p);
      ASSERT_EQ(f, compress(v, dt, tb->t, 0, &p, true)) << n;
      expect_round_trip(f, tb->t, v, 3);
    }
  }
}

TEST(EntropyFrames, UniformDataFallsBackToRawWithinTheBound) {
  for (sz_dtype dt : kDtypes) {
    SCOPED_TRACE(sz_dtype_name(dt));
    const std::vector<uint8_t> sample = channel_values(dt, 1, 1024, 16, 9);
    auto tb = calibrated_table(sample, dt, 1, 1024, 16, 4);
    const std::vector<uint8_t> v = random_bytes(70000 * sz_dtype_size(dt), 12);
    const std::vector<uint8_t> f = compress(v, dt, tb->t, 0, nullptr);
    sz_frame_info info;
    ASSERT_EQ(sz_frame_info_get(f.data(), f.size(), &info), SZ_OK);
    EXPECT_EQ(info.coded_chunks, 0u);
    EXPECT_EQ(info.raw_chunks, 18u);  // the default chunk of 70000 values: 2^12
    EXPECT_LE(f.size(), sz_compress_bound(70000, dt));
    expect_round_trip(f, tb->t, v);
  }
}

TEST(EntropyFrames, OutputBufferExactlyLargeEnoughAndOneByteShort) {
  const sz_dtype dt = SZ_DTYPE_FP8_E5M2;
  const std::vector<uint8_t> sample = channel_values(dt, 2, 3000, 64, 13);
  auto tb = calibrated_table(sample, dt, 2, 3000, 64, 8);
  const std::vector<uint8_t> v(sample.begin() + 3000 * 64, sample.end());
  sz_params p = sz_params_default();
  p.chunk_log2 = 14;  // several chunks, the last one in the local buffer when dst is tight
  const std::vector<uint8_t> f = compress(v, dt, tb->t, 1, &p);
  std::vector<uint8_t> out(f.size());
  size_t size = 0;
  ASSERT_EQ(sz_compress_entropy(v.data(), v.size(), dt, &tb->t, 1, &p, out.data(), out.size(), &size), SZ_OK);
  EXPECT_EQ(out, f);
  EXPECT_EQ(sz_compress_entropy(v.data(), v.size(), dt, &tb->t, 1, &p, out.data(), out.size() - 1, &size),
            SZ_ERROR_DST_TOO_SMALL);
  std::vector<uint8_t> back(v.size());
  EXPECT_EQ(sz_decompress_entropy(f.data(), f.size(), &tb->t, back.data(), back.size() - 1, &size, 1),
            SZ_ERROR_DST_TOO_SMALL);
}

TEST(EntropyFrames, WrongTableOrEntryPointIsRejected) {
  const sz_dtype dt = SZ_DTYPE_BF16;
  const std::vector<uint8_t> sample = channel_values(dt, 2, 256, 32, 17);
  auto tb = calibrated_table(sample, dt, 2, 256, 32, 4);
  auto other = calibrated_table(channel_values(dt, 2, 256, 32, 18), dt, 2, 256, 32, 4);
  const std::vector<uint8_t> v(sample.begin(), sample.begin() + 256 * 32 * 2);
  const std::vector<uint8_t> f = compress(v, dt, tb->t, 1, nullptr);
  std::vector<uint8_t> back(v.size());
  size_t w = 0;
  EXPECT_EQ(sz_decompress_entropy(f.data(), f.size(), &other->t, back.data(), back.size(), &w, 1),
            SZ_ERROR_BOOK_MISMATCH);
  EXPECT_EQ(sz_decompress_entropy(f.data(), f.size(), nullptr, back.data(), back.size(), &w, 1),
            SZ_ERROR_BOOK_MISMATCH);
  EXPECT_EQ(sz_decompress_entropy_reference(f.data(), f.size(), &other->t, back.data(), back.size(), &w),
            SZ_ERROR_BOOK_MISMATCH);
  // The fixed-length decoders do not guess at a version 3 frame.
  EXPECT_EQ(sz_decompress(f.data(), f.size(), back.data(), back.size(), &w, 1), SZ_ERROR_BOOK_MISMATCH);
  EXPECT_EQ(sz_decompress_reference(f.data(), f.size(), back.data(), back.size(), &w), SZ_ERROR_BOOK_MISMATCH);
  EXPECT_EQ(sz_decompress_book(f.data(), f.size(), nullptr, back.data(), back.size(), &w, 1), SZ_ERROR_BOOK_MISMATCH);
  // The table reference of the frame.
  uint64_t id = 0;
  uint32_t tensor = 9, period = 0;
  ASSERT_EQ(sz_frame_table_ref(f.data(), f.size(), &id, &tensor, &period), SZ_OK);
  EXPECT_EQ(id, tb->t.id);
  EXPECT_EQ(tensor, 1u);
  EXPECT_EQ(period, 32u);
  EXPECT_EQ(sz_frame_book_ref(f.data(), f.size(), &id, &tensor, &period), SZ_ERROR_INVALID_ARGUMENT);
  // A version 1 frame is not for this entry point.
  std::vector<uint8_t> v1(sz_compress_bound(v.size() / 2, dt));
  ASSERT_EQ(sz_compress(v.data(), v.size() / 2, dt, nullptr, nullptr, v1.data(), v1.size(), &w), SZ_OK);
  EXPECT_EQ(sz_decompress_entropy(v1.data(), w, &tb->t, back.data(), back.size(), &w, 1), SZ_ERROR_INVALID_ARGUMENT);
  // Arguments: another dtype's table, a tensor outside it, an unprepared table for the fast coder.
  std::vector<uint8_t> out(sz_compress_bound(v.size() / 2, dt));
  EXPECT_EQ(sz_compress_entropy(v.data(), v.size() / 2, SZ_DTYPE_FP16, &tb->t, 0, nullptr, out.data(), out.size(), &w),
            SZ_ERROR_BAD_CODEBOOK);
  EXPECT_EQ(sz_compress_entropy(v.data(), v.size() / 2, dt, &tb->t, 2, nullptr, out.data(), out.size(), &w),
            SZ_ERROR_INVALID_ARGUMENT);
  sz_symbol_table raw = tb->t;
  raw.prepared = nullptr;
  EXPECT_EQ(sz_compress_entropy(v.data(), v.size() / 2, dt, &raw, 0, nullptr, out.data(), out.size(), &w),
            SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_compress_entropy_reference(v.data(), v.size() / 2, dt, &raw, 0, nullptr, out.data(), out.size(), &w),
            SZ_OK);
}

TEST(EntropyFrames, EveryTruncationAndEverySingleByteChangeIsRejected) {
  for (sz_dtype dt : {SZ_DTYPE_BF16, SZ_DTYPE_FP8_E4M3, SZ_DTYPE_FP16}) {
    SCOPED_TRACE(sz_dtype_name(dt));
    const std::vector<uint8_t> sample = channel_values(dt, 1, 600, 16, 21);
    auto tb = calibrated_table(sample, dt, 1, 600, 16, 3);
    sz_params p = sz_params_default();
    p.chunk_log2 = 10;
    const std::vector<uint8_t> f = compress(sample, dt, tb->t, 0, &p);
    sz_frame_info info;
    ASSERT_EQ(sz_frame_info_get(f.data(), f.size(), &info), SZ_OK);
    ASSERT_GT(info.coded_chunks, 3u);
    std::vector<uint8_t> back(sample.size());
    size_t w = 0;
    for (size_t cut = 0; cut < f.size(); cut += (cut < 300 ? 1 : 37)) {
      EXPECT_EQ(sz_decompress_entropy(f.data(), cut, &tb->t, back.data(), back.size(), &w, 1), SZ_ERROR_SRC_TRUNCATED)
          << cut;
      EXPECT_EQ(sz_decompress_entropy_reference(f.data(), cut, &tb->t, back.data(), back.size(), &w),
                SZ_ERROR_SRC_TRUNCATED)
          << cut;
    }
    // With chunk checksums every change of one byte is caught, by a structural check or a checksum.
    std::vector<uint8_t> g = f;
    Rng rng(5);
    for (size_t i = 0; i < g.size(); i += (i < 2000 ? 1 : 13)) {
      const uint8_t old = g[i];
      g[i] = (uint8_t)(old ^ (1u + rng.below(255)));
      const sz_status a = sz_decompress_entropy(g.data(), g.size(), &tb->t, back.data(), back.size(), &w, 2);
      const sz_status b = sz_decompress_entropy_reference(g.data(), g.size(), &tb->t, back.data(), back.size(), &w);
      EXPECT_NE(a, SZ_OK) << "byte " << i;
      EXPECT_EQ(a, b) << "byte " << i;
      g[i] = old;
    }
  }
}

TEST(SymbolTables, ParseRejectsEveryDamageWithTheSpecStatus) {
  const sz_dtype dt = SZ_DTYPE_FP8_E5M2;
  const std::vector<uint8_t> sample = channel_values(dt, 2, 200, 8, 23);
  auto tb = calibrated_table(sample, dt, 2, 200, 8, 3);
  const std::vector<uint8_t>& file = tb->file;
  ASSERT_EQ(file.size(), sz_symbol_table_file_size(dt, 2, 8, 3));
  EXPECT_EQ(file.size(), 24u + 2 * 16 + 2 * 3 * 257 + 4);
  sz_symbol_table t;
  for (size_t cut = 0; cut < file.size(); ++cut)
    EXPECT_EQ(sz_symbol_table_parse(file.data(), cut, &t), SZ_ERROR_SRC_TRUNCATED) << cut;
  std::vector<uint8_t> b = file;
  b[0] ^= 1;
  EXPECT_EQ(sz_symbol_table_parse(b.data(), b.size(), &t), SZ_ERROR_BAD_MAGIC);
  b = file;
  b[4] = 2;
  EXPECT_EQ(sz_symbol_table_parse(b.data(), b.size(), &t), SZ_ERROR_UNSUPPORTED_VERSION);
  for (size_t i = 5; i < file.size(); i += 7) {
    b = file;
    b[i] ^= 0x10;
    const sz_status s = sz_symbol_table_parse(b.data(), b.size(), &t);
    EXPECT_NE(s, SZ_OK) << i;
  }
  // Contents checked after the checksum: a table with a bad sum, a zero escape or a bad group id, built in memory.
  sz_symbol_table bad = tb->t;
  std::vector<uint8_t> freq(bad.freq, bad.freq + 2 * 3 * 257), groups(bad.group_of, bad.group_of + 2 * 16);
  bad.freq = freq.data();
  bad.group_of = groups.data();
  bad.prepared = nullptr;
  std::vector<uint8_t> ws(sz_symbol_table_workspace_size(&bad));
  ASSERT_EQ(sz_symbol_table_prepare(&bad, ws.data(), ws.size()), SZ_OK);
  EXPECT_EQ(sz_symbol_table_prepare(&bad, ws.data(), ws.size() - 1), SZ_ERROR_WORKSPACE_TOO_SMALL);
  freq[2 * 256] += 1;  // group 0's escape: the sum is now 4097
  EXPECT_EQ(sz_symbol_table_prepare(&bad, ws.data(), ws.size()), SZ_ERROR_BAD_CODEBOOK);
  freq[2 * 256] -= 1;
  groups[0] = 3;  // group id >= groups
  EXPECT_EQ(sz_symbol_table_prepare(&bad, ws.data(), ws.size()), SZ_ERROR_BAD_CODEBOOK);
  // The reference coder checks a table it is handed just the same.
  size_t w = 0;
  std::vector<uint8_t> out(sz_compress_bound(800, dt));
  EXPECT_EQ(sz_compress_entropy_reference(sample.data(), 800, dt, &bad, 0, nullptr, out.data(), out.size(), &w),
            SZ_ERROR_BAD_CODEBOOK);
}

TEST(SymbolTables, CalibrationArgumentsAndShape) {
  std::vector<uint32_t> counts(sz_symbol_histogram_size(SZ_DTYPE_FP16, 1, 4) / 4, 0);
  EXPECT_EQ(counts.size(), 4u * 32);
  EXPECT_EQ(sz_symbol_histogram_size(SZ_DTYPE_BF16, 0, 4), 0u);
  EXPECT_EQ(sz_symbol_table_file_size(SZ_DTYPE_BF16, 1, 4, 0), 0u);
  EXPECT_EQ(sz_symbol_table_file_size(SZ_DTYPE_BF16, 1, 4, SZ_MAX_GROUPS + 1), 0u);
  std::vector<uint8_t> file(sz_symbol_table_file_size(SZ_DTYPE_FP16, 1, 4, 8));
  size_t size = 0;
  // No samples at all: a valid table in which every symbol escapes; groups capped by the channels.
  ASSERT_EQ(sz_symbol_calibrate(counts.data(), SZ_DTYPE_FP16, 1, 4, 8, file.data(), file.size(), &size, nullptr), SZ_OK);
  EXPECT_EQ(size, sz_symbol_table_file_size(SZ_DTYPE_FP16, 1, 4, 4));
  sz_symbol_table t;
  ASSERT_EQ(sz_symbol_table_parse(file.data(), size, &t), SZ_OK);
  EXPECT_EQ(t.groups, 4u);
  EXPECT_EQ(t.symbol_bits, 5u);
  EXPECT_EQ(sz_symbol_calibrate(counts.data(), SZ_DTYPE_FP16, 1, 4, 8, file.data(), size - 1, &size, nullptr),
            SZ_ERROR_DST_TOO_SMALL);
  // It still codes (every value an escape) and round-trips, within the bound.
  std::vector<uint8_t> ws(sz_symbol_table_workspace_size(&t));
  ASSERT_EQ(sz_symbol_table_prepare(&t, ws.data(), ws.size()), SZ_OK);
  const std::vector<uint8_t> v = random_bytes(4000 * 2, 3);
  const std::vector<uint8_t> f = compress(v, SZ_DTYPE_FP16, t, 0, nullptr);
  expect_round_trip(f, t, v);
}

TEST(EntropyFrames, RealKvSliceBeatsTheChannelBookAndRoundTrips) {
  std::vector<uint8_t> kv;
  if (!read_file(repo_path("data/kv_code_bf16_slice.bin"), &kv)) GTEST_SKIP() << "data/kv_code_bf16_slice.bin absent";
  // [8 layers][2][224 tokens][4 heads][64 dims]: calibrate on the first 112 tokens of each tensor, code the rest.
  const uint32_t tensors = 16, period = 256, tokens = 224, half = 112;
  ASSERT_EQ(kv.size(), (size_t)tensors * tokens * period * 2);
  std::vector<uint8_t> cal, test;
  for (uint32_t t = 0; t < tensors; ++t) {
    const uint8_t* base = kv.data() + (size_t)t * tokens * period * 2;
    cal.insert(cal.end(), base, base + (size_t)half * period * 2);
  }
  auto tb = calibrated_table(cal, SZ_DTYPE_BF16, tensors, half, period, 32);
  uint64_t raw = 0, coded = 0, fast_mode = 0;
  for (uint32_t t = 0; t < tensors; ++t) {
    const uint8_t* base = kv.data() + ((size_t)t * tokens + half) * period * 2;
    const std::vector<uint8_t> v(base, base + (size_t)(tokens - half) * period * 2);
    const std::vector<uint8_t> f = compress(v, SZ_DTYPE_BF16, tb->t, t, nullptr);
    if (t < 2) {
      ASSERT_EQ(f, compress(v, SZ_DTYPE_BF16, tb->t, t, nullptr, true));
    }
    expect_round_trip(f, tb->t, v);
    std::vector<uint8_t> g(sz_compress_bound(v.size() / 2, SZ_DTYPE_BF16));
    size_t w = 0;
    ASSERT_EQ(sz_compress(v.data(), v.size() / 2, SZ_DTYPE_BF16, nullptr, nullptr, g.data(), g.size(), &w), SZ_OK);
    raw += v.size();
    coded += f.size();
    fast_mode += w;
  }
  const double ratio = (double)raw / coded, fixed = (double)raw / fast_mode;
  printf("real KV slice, BF16: entropy-coded ratio %.4f, default codebook %.4f\n", ratio, fixed);
  EXPECT_GT(ratio, fixed * 1.05);
}

// ---- every CPU kernel set against the reference ------------------------------------------------------------------
namespace {

class EntropyKernels : public ::testing::TestWithParam<const char*> {};

}  // namespace

TEST_P(EntropyKernels, EveryDtypePeriodAndSizeEncodesAsTheReferenceAndRoundTrips) {
  const char* isa = GetParam();
  if (!isa_supported(isa)) GTEST_SKIP() << "this CPU lacks " << isa << ": variant not testable here";
  ScopedIsa scoped(isa);
  uint64_t escapes = 0, coded = 0, raw = 0;
  for (sz_dtype dt : kDtypes) {
    for (uint32_t period : {1u, 7u, 20u, 33u, 192u}) {  // 20: the 16-value channel loads wrap once
      auto h = hand_table(dt, 2, period, 7, 100 + period);
      for (uint64_t n : {1ull, 33ull, 1000ull, 4097ull, 70001ull}) {
        const std::vector<uint8_t> v = hand_values(*h, dt, 1, n, n % 2 ? 0.01 : 0.3, n + period);
        for (unsigned cl : {8u, 16u}) {
          SCOPED_TRACE(std::string(sz_dtype_name(dt)) + " period " + std::to_string(period) + " n " +
                       std::to_string(n) + " chunk_log2 " + std::to_string(cl));
          sz_params p = sz_params_default();
          p.chunk_log2 = cl;
          p.flags = cl == 8 ? SZ_FLAG_CHECKSUMS : 0;
          const std::vector<uint8_t> fast = compress(v, dt, h->t, 1, &p);
          ASSERT_EQ(fast, compress(v, dt, h->t, 1, &p, true));
          expect_round_trip(fast, h->t, v, n % 3 + 1);
          sz_frame_info info;
          ASSERT_EQ(sz_frame_info_get(fast.data(), fast.size(), &info), SZ_OK);
          escapes += info.escapes;
          coded += info.coded_chunks;
          raw += info.raw_chunks;
        }
      }
    }
  }
  // The data reach every path: coded chunks with escapes, and chunks stored raw.
  EXPECT_GT(escapes, 1000u);
  EXPECT_GT(coded, 100u);
  EXPECT_GT(raw, 10u);
}

// Every damaged frame is decoded whole by the reference (the cost of this test) once, and by each supported kernel set.
TEST(EntropyKernelSets, DamagedFramesGetTheReferenceStatus) {
  for (sz_dtype dt : {SZ_DTYPE_BF16, SZ_DTYPE_FP16, SZ_DTYPE_FP32, SZ_DTYPE_FP8_E4M3}) {
    for (uint32_t flags : sztest::kFlagSets) {
      SCOPED_TRACE(std::string(sz_dtype_name(dt)) + (flags ? " with checksums" : " without checksums"));
      auto h = hand_table(dt, 1, 33, 6, 7);
      const std::vector<uint8_t> v = hand_values(*h, dt, 0, 6000, 0.02, 8);
      sz_params p = sz_params_default();
      p.chunk_log2 = 10;
      p.flags = flags;
      const std::vector<uint8_t> f = compress(v, dt, h->t, 0, &p);
      sz_frame_info info;
      ASSERT_EQ(sz_frame_info_get(f.data(), f.size(), &info), SZ_OK);
      ASSERT_GT(info.coded_chunks, 4u);
      ASSERT_GT(info.escapes, 20u);
      std::vector<uint8_t> a(v.size(), 0xA5), b(v.size(), 0x5A), g = f;
      size_t wa = 0, wb = 0;
      Rng rng(9);
      unsigned rejected = 0, sets = 0;
      for (size_t i = 64; i < g.size(); i += 1 + (size_t)rng.below(31)) {  // ~1 byte in 16
        const uint8_t old = g[i];
        g[i] = (uint8_t)(old ^ (1u << rng.below(8)));
        const sz_status sb = sz_decompress_entropy_reference(g.data(), g.size(), &h->t, b.data(), b.size(), &wb);
        sets = 0;
        for (const IsaVariant& isa : isa_variants()) {
          if (!isa.supported) continue;
          ScopedIsa scoped(isa.name);
          ++sets;
          const sz_status sa = sz_decompress_entropy(g.data(), g.size(), &h->t, a.data(), a.size(), &wa, 1 + i % 2);
          ASSERT_EQ(sa, sb) << isa.name << ", byte " << i;
          if (sa == SZ_OK) {
            ASSERT_EQ(a, b) << isa.name << ", byte " << i;
          }
        }
        rejected += sb != SZ_OK;
        g[i] = old;
      }
      EXPECT_GT(rejected, 100u);
      EXPECT_GE(sets, 1u);
    }
  }
}

TEST_P(EntropyKernels, TightOutputBuffersFitExactlyOrAreTooSmall) {
  const char* isa = GetParam();
  if (!isa_supported(isa)) GTEST_SKIP() << "this CPU lacks " << isa << ": variant not testable here";
  ScopedIsa scoped(isa);
  for (sz_dtype dt : kDtypes) {
    SCOPED_TRACE(sz_dtype_name(dt));
    auto h = hand_table(dt, 1, 64, 6, 11);
    const std::vector<uint8_t> v = hand_values(*h, dt, 0, 50000, 0.02, 12);
    const uint64_t n = v.size() / sz_dtype_size(dt);
    sz_params p = sz_params_default();
    p.chunk_log2 = 14;  // several chunks; with a tight dst the last ones do not fit at their raw size
    const std::vector<uint8_t> f = compress(v, dt, h->t, 0, &p, true);
    // Exactly the frame's size: the same bytes; anything less: too small, for both encoders.
    for (size_t cut : {(size_t)0, (size_t)1, (size_t)2, (size_t)131, (size_t)1000, f.size() / 2}) {
      const size_t cap = f.size() - cut;
      std::vector<uint8_t> a(cap + 1, 0xA5), b(cap + 1, 0x5A);
      size_t wa = 0, wb = 0;
      const sz_status sa = sz_compress_entropy(v.data(), n, dt, &h->t, 0, &p, a.data(), cap, &wa);
      const sz_status sb = sz_compress_entropy_reference(v.data(), n, dt, &h->t, 0, &p, b.data(), cap, &wb);
      ASSERT_EQ(sa, cut == 0 ? SZ_OK : SZ_ERROR_DST_TOO_SMALL) << "capacity " << cap;
      ASSERT_EQ(sb, sa) << "capacity " << cap;
      if (sa == SZ_OK) {
        ASSERT_EQ(wa, f.size());
        ASSERT_TRUE(std::equal(f.begin(), f.end(), a.begin()));
      }
      EXPECT_EQ(a[cap], 0xA5) << "a byte past the capacity was written";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, EntropyKernels, ::testing::Values("portable", "avx2", "avx512"));

// ---- an independent decoder written from docs/FORMAT.md §4.10 and §5.3 (no code shared with src/) ------------------
namespace {

uint64_t le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Decodes a version 3 frame with a table file (and a paired frame's row map file, §4.10.6); returns false on any
// violation it notices.
bool spec_decode_v3(const std::vector<uint8_t>& fr, const std::vector<uint8_t>& tab, std::vector<uint8_t>* out,
                    const std::vector<uint8_t>* rowmap = nullptr) {
  if (fr.size() < 64 || le(&fr[0], 4) != 0x465A5053u || fr[4] != 3) return false;
  const unsigned dtype = fr[5], chunk_log2 = fr[7];
  const uint32_t flags = (uint32_t)le(&fr[8], 4);
  const uint64_t n = le(&fr[16], 8), sym_size = le(&fr[24], 8);
  const uint32_t tensor = (uint32_t)le(&fr[40], 4), P = (uint32_t)le(&fr[44], 4);
  const DtypeFacts f = dtype_facts(dtype);
  const unsigned W = f.W, E = f.E, M = f.M;
  const bool whole = W == 8;
  const unsigned B = whole ? 8 : E, Rp = W - B, A = 1u << B;
  if (le(&tab[0], 4) != 0x545A5053u || tab[5] != dtype || tab[6] != B || tab[7] != 12) return false;
  const uint64_t TP = le(&tab[12], 4) * le(&tab[8], 4);
  if (le(&tab[8], 4) != P) return false;
  const uint8_t* group_of = &tab[24];
  const uint8_t* freq = group_of + 2 * TP;
  auto F = [&](uint32_t g, uint32_t s) { return (uint32_t)le(freq + 2 * ((uint64_t)g * (A + 1) + s), 2); };
  const uint64_t S = 1ull << chunk_log2, C = (n + S - 1) / S;
  const bool ck = flags & 1, paired = flags & 16;
  if (paired && (!whole || rowmap == nullptr || rowmap->size() < 20 || le(rowmap->data(), 4) != 0x525A5053u ||
                 le(rowmap->data() + 8, 4) < (n + P - 1) / P))
    return false;
  const uint64_t index = 64, rest = index + 8 * C + (ck ? 4 * C : 0), syms = rest + (n + 7) / 8 * Rp;
  if (fr.size() < syms + sym_size) return false;
  auto bits = [&](const uint8_t* base, uint64_t j, unsigned b) {
    uint32_t v = 0;
    for (unsigned i = 0; i < b; ++i) v |= (uint32_t)((base[(j * b + i) / 8] >> ((j * b + i) % 8)) & 1) << i;
    return v;
  };
  out->assign(n * (W / 8), 0);
  uint64_t begin = 0;
  for (uint64_t c = 0; c < C; ++c) {
    const uint64_t e = le(&fr[index + 8 * c], 8), end = e & ((1ull << 62) - 1), mode = e >> 62;
    const uint64_t L = std::min<uint64_t>(S, n - c * S);
    const uint8_t* rec = &fr[syms + begin];
    std::vector<uint32_t> sym(L);
    if (mode == 1) {
      for (uint64_t j = 0; j < L; ++j) sym[j] = bits(rec, j, B);
    } else if (mode == 0) {
      uint32_t x[32];
      for (int l = 0; l < 32; ++l) x[l] = (uint32_t)le(rec + 4 * l, 4);
      const uint64_t X = le(rec + 128, 4), w = (end - begin - 132 - X) / 2;
      uint64_t p = 0, q = 0;
      for (uint64_t j = 0; j < L; ++j) {
        const uint64_t ch = (c * S + j) % P;
        const uint32_t g = (uint32_t)le(group_of + 2 * ((uint64_t)tensor * P + ch), 2);
        uint32_t& s = x[j % 32];
        const uint32_t slot = s % 4096;
        uint32_t k = 0, cum = 0;
        while (cum + F(g, k) <= slot) cum += F(g, k++);
        s = F(g, k) * (s >> 12) + slot - cum;
        if (s < 65536) {
          if (p == w) return false;
          s = (s << 16) | (uint32_t)le(rec + 132 + X + 2 * p++, 2);
        }
        if (k == A) {
          if (q == X) return false;
          k = rec[132 + q++];
        }
        sym[j] = k;
      }
      if (p != w || q != X) return false;
      for (int l = 0; l < 32; ++l)
        if (x[l] != 65536) return false;
    } else {
      return false;
    }
    for (uint64_t j = 0; j < L; ++j) {
      const uint64_t i = c * S + j;
      uint32_t v = sym[j];
      if (paired && mode == 0 && v == 0x7F) {  // the paired row's value in the same column, already final
        const uint64_t pr = le(rowmap->data() + 16 + 4 * (i / P), 4);
        if (pr == 0) return false;
        v = (*out)[(pr - 1) * P + i % P];
      }
      if (!whole) {
        const uint32_t r = bits(&fr[rest], i, Rp);
        v = ((r >> M) << (W - 1)) | (sym[j] << M) | (r & ((1u << M) - 1));
      }
      store_value(out->data() + i * (W / 8), W, v);
    }
    begin = end;
  }
  return begin == sym_size;
}

}  // namespace

TEST(EntropyFrames, AnIndependentDecoderFromTheSpecReadsTheLibrarysFrames) {
  for (sz_dtype dt : kDtypes) {
    SCOPED_TRACE(sz_dtype_name(dt));
    const std::vector<uint8_t> sample = channel_values(dt, 2, 700, 24, 31);
    auto tb = calibrated_table(sample, dt, 2, 700, 24, 5);
    sz_params p = sz_params_default();
    p.chunk_log2 = 12;
    const std::vector<uint8_t> v(sample.begin() + sample.size() / 2, sample.end());
    const std::vector<uint8_t> f = compress(v, dt, tb->t, 1, &p);
    std::vector<uint8_t> out;
    ASSERT_TRUE(spec_decode_v3(f, tb->file, &out));
    EXPECT_EQ(out, v);
  }
}

// Paired FP8 frames (§4.10.6) read by the same independent decoder given the row map file.
TEST(EntropyFrames, AnIndependentDecoderFromTheSpecReadsPairedFrames) {
  for (sz_dtype dt : {SZ_DTYPE_FP8_E4M3, SZ_DTYPE_FP8_E5M2}) {
    SCOPED_TRACE(sz_dtype_name(dt));
    const uint32_t P = 24, rows = 700;
    std::vector<uint8_t> v = channel_values(dt, 1, rows, P, 41);
    std::vector<uint32_t> tokens(rows);
    Rng rng(2);
    for (uint32_t r = 0; r < rows; ++r) {
      tokens[r] = (uint32_t)rng.below(30);
      for (uint32_t q = 0; q < r; ++q)  // a repeat of the token's latest row, value by value
        if (tokens[r - 1 - q] == tokens[r]) {
          for (uint32_t c = 0; c < P; ++c)
            if (rng.below(3) != 0) v[r * P + c] = v[(r - 1 - q) * P + c];
          break;
        }
    }
    auto rm = row_map_from_tokens(tokens);
    auto tb = calibrated_table(v, dt, 1, rows, P, 3);
    sz_params p = sz_params_default();
    p.chunk_log2 = 10;
    std::vector<uint8_t> f(sz_compress_bound(v.size(), dt));
    size_t size = 0;
    ASSERT_EQ(sz_compress_entropy_paired(v.data(), v.size(), dt, &tb->t, 0, &rm->m, &p, f.data(), f.size(), &size),
              SZ_OK);
    f.resize(size);
    std::vector<uint8_t> out;
    ASSERT_TRUE(spec_decode_v3(f, tb->file, &out, &rm->file));
    EXPECT_EQ(out, v);
  }
}

// Golden files: a symbol table and a frame written once by the library and checked here by the independent decoder
// and against the library's encoder (canonical: the same bytes again), so a change of the layout shows up.
TEST(EntropyFrames, GoldenFrameAndTable) {
  std::vector<uint8_t> table, frame, raw;
  ASSERT_TRUE(read_file(repo_path("tests/golden/valid/entropy_bf16.spzt"), &table));
  ASSERT_TRUE(read_file(repo_path("tests/golden/valid/entropy_bf16.spz"), &frame));
  ASSERT_TRUE(read_file(repo_path("tests/golden/valid/entropy_bf16.raw"), &raw));
  std::vector<uint8_t> out;
  ASSERT_TRUE(spec_decode_v3(frame, table, &out));
  EXPECT_EQ(out, raw);
  sz_symbol_table t;
  ASSERT_EQ(sz_symbol_table_parse(table.data(), table.size(), &t), SZ_OK);
  std::vector<uint8_t> ws(sz_symbol_table_workspace_size(&t));
  ASSERT_EQ(sz_symbol_table_prepare(&t, ws.data(), ws.size()), SZ_OK);
  expect_round_trip(frame, t, raw);
  uint32_t tensor = 0;
  ASSERT_EQ(sz_frame_table_ref(frame.data(), frame.size(), nullptr, &tensor, nullptr), SZ_OK);
  sz_params p = sz_params_default();
  p.chunk_log2 = frame[7];
  p.flags = (uint32_t)frame[8] & ~(uint32_t)SZ_FLAG_ENTROPY;  // the golden frame's checksum kind
  EXPECT_EQ(compress(raw, SZ_DTYPE_BF16, t, tensor, &p), frame);
}

// A paired FP8 E5M2 frame (§4.10.6) with its symbol table and row map, written once by the library (the CLI test's
// synthetic KV, tests/golden/README.md): the independent decoder reads it, and the library writes it again.
TEST(EntropyFrames, GoldenPairedFrame) {
  std::vector<uint8_t> table, map_file, frame, raw;
  ASSERT_TRUE(read_file(repo_path("tests/golden/valid/paired_e5m2.spzt"), &table));
  ASSERT_TRUE(read_file(repo_path("tests/golden/valid/paired_e5m2.spzr"), &map_file));
  ASSERT_TRUE(read_file(repo_path("tests/golden/valid/paired_e5m2.spz"), &frame));
  ASSERT_TRUE(read_file(repo_path("tests/golden/valid/paired_e5m2.raw"), &raw));
  std::vector<uint8_t> out;
  ASSERT_TRUE(spec_decode_v3(frame, table, &out, &map_file));
  EXPECT_EQ(out, raw);
  sz_symbol_table t;
  ASSERT_EQ(sz_symbol_table_parse(table.data(), table.size(), &t), SZ_OK);
  std::vector<uint8_t> ws(sz_symbol_table_workspace_size(&t));
  ASSERT_EQ(sz_symbol_table_prepare(&t, ws.data(), ws.size()), SZ_OK);
  sz_row_map m;
  ASSERT_EQ(sz_row_map_parse(map_file.data(), map_file.size(), &m), SZ_OK);
  std::vector<uint8_t> back(raw.size());
  size_t w = 0;
  ASSERT_EQ(sz_decompress_entropy_paired(frame.data(), frame.size(), &t, &m, back.data(), back.size(), &w, 1), SZ_OK);
  EXPECT_EQ(back, raw);
  sz_params p = sz_params_default();
  p.chunk_log2 = frame[7];
  p.flags = (uint32_t)frame[8] & (SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH);
  std::vector<uint8_t> again(sz_compress_bound(raw.size(), SZ_DTYPE_FP8_E5M2));
  ASSERT_EQ(sz_compress_entropy_paired(raw.data(), raw.size(), SZ_DTYPE_FP8_E5M2, &t, 0, &m, &p, again.data(),
                                       again.size(), &w),
            SZ_OK);
  again.resize(w);
  EXPECT_EQ(again, frame);
}
