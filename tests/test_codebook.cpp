// Codebooks (validate, serialize/deserialize against the 32-byte layout of docs/FORMAT.md §5, save/load, bad files),
// the default codebooks, histograms and calibration (known histograms give the documented choice).
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "spec_format.h"
#include "test_util.h"

using namespace sztest;

namespace {

sz_codebook make_cb(unsigned dtype, unsigned k, std::vector<unsigned> values) {
  sz_codebook cb;
  memset(&cb, 0, sizeof cb);
  cb.dtype = (uint8_t)dtype;
  cb.code_bits = (uint8_t)k;
  cb.count = (uint8_t)values.size();
  for (size_t i = 0; i < values.size() && i < 16; ++i) cb.values[i] = (uint8_t)values[i];
  return cb;
}

// The 32-byte file of §5, built by hand.
std::vector<uint8_t> file_bytes(const sz_codebook& cb) {
  std::vector<uint8_t> b(32, 0);
  spec::put_le(b.data(), 0x425A5053u, 4);
  b[4] = 1;
  b[5] = cb.dtype;
  b[6] = cb.code_bits;
  b[7] = cb.count;
  memcpy(&b[8], cb.values, 16);
  spec::put_le(b.data() + 28, spec::h32(b.data(), 28), 4);
  return b;
}
void reseal(std::vector<uint8_t>& b) { spec::put_le(b.data() + 28, spec::h32(b.data(), 28), 4); }

std::string temp_path(const std::string& tag) {
  return std::string(::testing::TempDir()) + "splitzip_test_" + tag + "_" + std::to_string(getpid()) + ".spzb";
}

}  // namespace

TEST(CodebookValidate, AcceptsEveryWidthAndCountWithinRange) {
  for (sz_dtype d : kAllDtypes) {
    const unsigned E = dtype_facts(d).E;
    for (unsigned k = 1; k <= 4 && k < E; ++k) {
      for (unsigned count = 1; count <= (1u << k); ++count) {
        const sz_codebook cb = centered_codebook(d, k, count, (1u << E) / 2);
        EXPECT_EQ(sz_codebook_validate(&cb), SZ_OK) << sz_dtype_name(d) << " k=" << k << " count=" << count;
      }
    }
  }
}

TEST(CodebookValidate, RejectsEveryInvalidField) {
  const sz_codebook good = make_cb(SZ_DTYPE_BF16, 2, {120, 121, 119});
  ASSERT_EQ(sz_codebook_validate(&good), SZ_OK);
  struct Bad {
    const char* what;
    sz_codebook cb;
    sz_status expect;
  };
  std::vector<Bad> bad;
  auto with = [&](const char* what, void (*edit)(sz_codebook&), sz_status st) {
    sz_codebook c = good;
    edit(c);
    bad.push_back({what, c, st});
  };
  with("dtype 0", [](sz_codebook& c) { c.dtype = 0; }, SZ_ERROR_UNSUPPORTED_DTYPE);
  with("dtype 6", [](sz_codebook& c) { c.dtype = 6; }, SZ_ERROR_UNSUPPORTED_DTYPE);
  with("k 0", [](sz_codebook& c) { c.code_bits = 0; }, SZ_ERROR_BAD_CODEBOOK);
  with("k 5", [](sz_codebook& c) { c.code_bits = 5; }, SZ_ERROR_BAD_CODEBOOK);
  with("count 0", [](sz_codebook& c) { c.count = 0; }, SZ_ERROR_BAD_CODEBOOK);
  with("count 5 > 2^2", [](sz_codebook& c) { c.count = 5, c.values[3] = 1, c.values[4] = 2; },
       SZ_ERROR_BAD_CODEBOOK);
  with("duplicate", [](sz_codebook& c) { c.values[2] = 120; }, SZ_ERROR_BAD_CODEBOOK);
  with("entry beyond count not zero", [](sz_codebook& c) { c.values[3] = 7; }, SZ_ERROR_BAD_CODEBOOK);
  with("entry beyond count not zero (last)", [](sz_codebook& c) { c.values[15] = 1; }, SZ_ERROR_BAD_CODEBOOK);
  // Exponent ranges by dtype.
  bad.push_back({"fp16 entry 32", make_cb(SZ_DTYPE_FP16, 2, {14, 32}), SZ_ERROR_BAD_CODEBOOK});
  bad.push_back({"e4m3 entry 16", make_cb(SZ_DTYPE_FP8_E4M3, 2, {16}), SZ_ERROR_BAD_CODEBOOK});
  bad.push_back({"e4m3 k=4 (not < E)", make_cb(SZ_DTYPE_FP8_E4M3, 4, {1, 2, 3}), SZ_ERROR_BAD_CODEBOOK});
  bad.push_back({"e5m2 entry 32", make_cb(SZ_DTYPE_FP8_E5M2, 1, {32}), SZ_ERROR_BAD_CODEBOOK});
  for (const Bad& b : bad) EXPECT_EQ(sz_codebook_validate(&b.cb), b.expect) << b.what;
  // Entry 0 is a valid exponent, and so is the largest (255 for BF16, 31 for FP16, 15 for E4M3).
  EXPECT_EQ(sz_codebook_validate(&(const sz_codebook&)make_cb(SZ_DTYPE_BF16, 1, {0, 255})), SZ_OK);
  EXPECT_EQ(sz_codebook_validate(&(const sz_codebook&)make_cb(SZ_DTYPE_FP16, 1, {31})), SZ_OK);
  EXPECT_EQ(sz_codebook_validate(&(const sz_codebook&)make_cb(SZ_DTYPE_FP8_E4M3, 3, {15, 0})), SZ_OK);
}

TEST(CodebookSerialize, WritesTheExactLayoutOfFormatSection5) {
  for (sz_dtype d : kAllDtypes) {
    sz_codebook cb;
    ASSERT_EQ(sz_default_codebook(d, SZ_KIND_GENERIC, &cb), SZ_OK);
    uint8_t buf[40];
    memset(buf, 0xEE, sizeof buf);
    ASSERT_EQ(sz_codebook_serialize(&cb, buf, 32), SZ_OK);
    const std::vector<uint8_t> expect = file_bytes(cb);
    EXPECT_EQ(memcmp(buf, expect.data(), 32), 0) << sz_dtype_name(d);
    EXPECT_EQ(buf[32], 0xEE) << "wrote past 32 bytes";
    sz_codebook back;
    memset(&back, 0x77, sizeof back);
    ASSERT_EQ(sz_codebook_deserialize(buf, 32, &back), SZ_OK);
    EXPECT_EQ(back.dtype, cb.dtype);
    EXPECT_EQ(back.code_bits, cb.code_bits);
    EXPECT_EQ(back.count, cb.count);
    EXPECT_EQ(memcmp(back.values, cb.values, 16), 0);
    EXPECT_EQ(sz_codebook_serialize(&cb, buf, 31), SZ_ERROR_DST_TOO_SMALL);
  }
  const sz_codebook bad = make_cb(SZ_DTYPE_BF16, 1, {3, 3});
  uint8_t buf[32];
  EXPECT_EQ(sz_codebook_serialize(&bad, buf, 32), SZ_ERROR_BAD_CODEBOOK);
}

TEST(CodebookDeserialize, RejectsDamagedFilesWithTheFrameHeaderErrors) {
  const sz_codebook cb = make_cb(SZ_DTYPE_FP16, 3, {14, 15, 13, 16, 12});
  const std::vector<uint8_t> good = file_bytes(cb);
  sz_codebook out;
  ASSERT_EQ(sz_codebook_deserialize(good.data(), 32, &out), SZ_OK);
  for (size_t len = 0; len < 32; ++len) {
    const std::vector<uint8_t> p(good.begin(), good.begin() + len);
    EXPECT_EQ(sz_codebook_deserialize(len ? p.data() : good.data(), len, &out), SZ_ERROR_SRC_TRUNCATED)
        << "len " << len;
  }
  struct Edit {
    const char* what;
    size_t off;
    uint8_t value;
    bool reseal;
    sz_status expect;
  } edits[] = {
      {"magic", 0, 'X', true, SZ_ERROR_BAD_MAGIC},
      {"frame magic", 3, 0x46, true, SZ_ERROR_BAD_MAGIC},
      {"version 2", 4, 2, true, SZ_ERROR_UNSUPPORTED_VERSION},
      {"version 0 unsealed", 4, 0, false, SZ_ERROR_UNSUPPORTED_VERSION},
      {"checksum", 29, 0x00, false, SZ_ERROR_CHECKSUM},
      {"count changed unsealed", 7, 4, false, SZ_ERROR_CHECKSUM},
      {"dtype 0", 5, 0, true, SZ_ERROR_UNSUPPORTED_DTYPE},
      {"dtype 9", 5, 9, true, SZ_ERROR_UNSUPPORTED_DTYPE},
      {"k 0", 6, 0, true, SZ_ERROR_CORRUPT},
      {"k 5 (E of fp16 is 5)", 6, 5, true, SZ_ERROR_CORRUPT},
      {"count 0", 7, 0, true, SZ_ERROR_CORRUPT},
      {"count 9 > 2^3", 7, 9, true, SZ_ERROR_CORRUPT},
      {"duplicate entry", 9, 14, true, SZ_ERROR_CORRUPT},
      {"entry 32 >= 2^5", 10, 32, true, SZ_ERROR_CORRUPT},
      {"entry beyond count", 20, 1, true, SZ_ERROR_CORRUPT},
      {"reserved 24", 24, 1, true, SZ_ERROR_CORRUPT},
      {"reserved 27", 27, 0x80, true, SZ_ERROR_CORRUPT},
  };
  for (const Edit& e : edits) {
    std::vector<uint8_t> b = good;
    if (e.what == std::string("checksum")) b[e.off] ^= 0x5A;
    else b[e.off] = e.value;
    if (e.reseal) reseal(b);
    EXPECT_EQ(sz_codebook_deserialize(b.data(), 32, &out), e.expect) << e.what;
  }
  // Bytes after the 32 are not part of the codebook (a longer buffer is accepted).
  std::vector<uint8_t> longer = good;
  longer.resize(40, 0xAB);
  EXPECT_EQ(sz_codebook_deserialize(longer.data(), longer.size(), &out), SZ_OK);
}

TEST(CodebookFiles, SaveThenLoadRoundTripsAndFilesHoldTheLayout) {
  const std::string path = temp_path("save");
  const sz_codebook cb = make_cb(SZ_DTYPE_BF16, 4, {120, 121, 119, 122, 118, 123, 117, 124, 116, 125, 115, 126, 114});
  ASSERT_EQ(sz_codebook_save(&cb, path.c_str()), SZ_OK);
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(read_file(path, &bytes));
  EXPECT_TRUE(bytes == file_bytes(cb));
  sz_codebook back;
  ASSERT_EQ(sz_codebook_load(path.c_str(), &back), SZ_OK);
  EXPECT_EQ(back.count, 13);
  EXPECT_EQ(memcmp(back.values, cb.values, 16), 0);
  remove(path.c_str());
}

TEST(CodebookFiles, MissingUnwritableAndDamagedFilesGiveErrors) {
  sz_codebook out;
  EXPECT_EQ(sz_codebook_load("/nonexistent-dir/none.spzb", &out), SZ_ERROR_IO);
  const sz_codebook cb = make_cb(SZ_DTYPE_BF16, 1, {120});
  EXPECT_EQ(sz_codebook_save(&cb, "/nonexistent-dir/none.spzb"), SZ_ERROR_IO);
  const sz_codebook bad = make_cb(SZ_DTYPE_BF16, 1, {120, 120});
  const std::string p0 = temp_path("bad");
  EXPECT_EQ(sz_codebook_save(&bad, p0.c_str()), SZ_ERROR_BAD_CODEBOOK);
  remove(p0.c_str());

  std::vector<uint8_t> good = file_bytes(cb);
  const std::string p = temp_path("damaged");
  ASSERT_TRUE(write_file(p, good.data(), 20));
  EXPECT_EQ(sz_codebook_load(p.c_str(), &out), SZ_ERROR_SRC_TRUNCATED);
  std::vector<uint8_t> b = good;
  b[0] = 'Q';
  ASSERT_TRUE(write_file(p, b.data(), b.size()));
  EXPECT_EQ(sz_codebook_load(p.c_str(), &out), SZ_ERROR_BAD_MAGIC);
  b = good;
  b[30] ^= 1;
  ASSERT_TRUE(write_file(p, b.data(), b.size()));
  EXPECT_EQ(sz_codebook_load(p.c_str(), &out), SZ_ERROR_CHECKSUM);
  ASSERT_TRUE(write_file(p, "", 0));
  EXPECT_EQ(sz_codebook_load(p.c_str(), &out), SZ_ERROR_SRC_TRUNCATED);
  remove(p.c_str());
}

TEST(DefaultCodebooks, ExistAndValidateForEveryDtypeAndKind) {
  for (sz_dtype d : kAllDtypes) {
    for (sz_tensor_kind kind : {SZ_KIND_GENERIC, SZ_KIND_KEY, SZ_KIND_VALUE}) {
      sz_codebook cb;
      memset(&cb, 0xEE, sizeof cb);
      ASSERT_EQ(sz_default_codebook(d, kind, &cb), SZ_OK) << sz_dtype_name(d) << " kind " << kind;
      EXPECT_EQ(cb.dtype, d);
      EXPECT_EQ(sz_codebook_validate(&cb), SZ_OK) << sz_dtype_name(d) << " kind " << kind;
    }
  }
  sz_codebook cb;
  EXPECT_NE(sz_default_codebook((sz_dtype)0, SZ_KIND_GENERIC, &cb), SZ_OK);
  EXPECT_NE(sz_default_codebook((sz_dtype)6, SZ_KIND_GENERIC, &cb), SZ_OK);
  EXPECT_NE(sz_default_codebook(SZ_DTYPE_BF16, (sz_tensor_kind)3, &cb), SZ_OK);
}

TEST(DefaultCodebooks, Bf16DefaultsCompressTheShippedRealKvSlice) {
  std::vector<uint8_t> kv;
  ASSERT_TRUE(read_file(repo_path("data/kv_code_bf16_slice.bin"), &kv)) << "data/kv_code_bf16_slice.bin missing";
  const uint64_t n = kv.size() / 2;
  for (sz_tensor_kind kind : {SZ_KIND_GENERIC, SZ_KIND_KEY, SZ_KIND_VALUE}) {
    sz_codebook cb;
    ASSERT_EQ(sz_default_codebook(SZ_DTYPE_BF16, kind, &cb), SZ_OK);
    std::vector<uint8_t> f;
    ASSERT_EQ(compress_vec(false, kv.data(), n, SZ_DTYPE_BF16, &cb, nullptr, &f), SZ_OK);
    EXPECT_LT(f.size(), kv.size()) << "kind " << kind;
    std::cout << "[ratio] data/kv_code_bf16_slice.bin (K and V) with default bf16 codebook kind " << kind << ": "
              << ratio_str(kv.size(), f.size()) << "\n";
  }
}

// ---- histograms and calibration ----------------------------------------------------------------------------------

TEST(Histogram, CountsExponentFieldsOfEveryDtype) {
  for (sz_dtype d : kAllDtypes) {
    const std::vector<uint8_t> src = skewed_values(d, 10007, 3 + d, dtype_facts(d).E == 8 ? 120 : 6, 0.5, 0.1);
    uint64_t expect[256] = {0};
    const DtypeFacts f = dtype_facts(d);
    for (size_t i = 0; i < 10007; ++i) ++expect[exponent_field(load_value(&src[i * (f.W / 8)], f.W), f)];
    sz_histogram h;
    ASSERT_EQ(sz_histogram_init(&h, d), SZ_OK);
    EXPECT_EQ(h.dtype, d);
    for (int e = 0; e < 256; ++e) EXPECT_EQ(h.counts[e], 0u);
    // Added in two pieces (the histogram accumulates).
    ASSERT_EQ(sz_histogram_add(&h, src.data(), 5000), SZ_OK);
    ASSERT_EQ(sz_histogram_add(&h, src.data() + 5000 * (f.W / 8), 5007), SZ_OK);
    ASSERT_EQ(sz_histogram_add(&h, src.data(), 0), SZ_OK);
    for (int e = 0; e < 256; ++e) EXPECT_EQ(h.counts[e], expect[e]) << sz_dtype_name(d) << " exponent " << e;
  }
  sz_histogram h;
  EXPECT_NE(sz_histogram_init(&h, (sz_dtype)0), SZ_OK);
}

namespace {

// The documented calibration rule (splitzip.h, sz_calibrate), written independently: for k = 1.. (k < E, k <= 4)
// take the top-2^k exponents (ties: smaller exponent first), cost k bits per value plus 24 bits per escape, capped
// at E bits per value (raw exponents); the cheapest k wins (ties: smaller k).
struct Choice {
  unsigned k;
  std::vector<unsigned> values;
  double bits;
};
Choice documented_choice(const sz_histogram& h) {
  const unsigned E = dtype_facts(h.dtype).E;
  std::vector<unsigned> order(1u << E);
  for (unsigned e = 0; e < order.size(); ++e) order[e] = e;
  std::stable_sort(order.begin(), order.end(), [&](unsigned a, unsigned b) { return h.counts[a] > h.counts[b]; });
  double total = 0;
  for (unsigned e = 0; e < (1u << E); ++e) total += (double)h.counts[e];
  Choice best{0, {}, 1e300};
  for (unsigned k = 1; k <= 4 && k < E; ++k) {
    double covered = 0;
    for (unsigned i = 0; i < (1u << k); ++i) covered += (double)h.counts[order[i]];
    const double bits = std::min((double)k + 24.0 * (total - covered) / total, (double)E);
    if (bits < best.bits - 1e-12) {
      best.k = k;
      best.bits = bits;
      best.values.assign(order.begin(), order.begin() + (1u << k));
    }
  }
  return best;
}

sz_histogram hist_of(sz_dtype d, std::vector<std::pair<unsigned, uint64_t>> counts) {
  sz_histogram h;
  EXPECT_EQ(sz_histogram_init(&h, d), SZ_OK);
  for (auto& c : counts) h.counts[c.first] = c.second;
  return h;
}

void expect_calibration(const sz_histogram& h, const std::string& what) {
  const Choice want = documented_choice(h);
  sz_codebook cb;
  double bits = -1;
  ASSERT_EQ(sz_calibrate(&h, &cb, &bits), SZ_OK) << what;
  EXPECT_EQ(sz_codebook_validate(&cb), SZ_OK) << what;
  EXPECT_EQ(cb.dtype, h.dtype) << what;
  EXPECT_EQ(cb.code_bits, want.k) << what;
  EXPECT_NEAR(bits, want.bits, 1e-9) << what;
  // Entries with a non-zero count must be exactly the documented ones, in the documented order.
  std::vector<unsigned> got_nonzero, want_nonzero;
  for (unsigned i = 0; i < cb.count; ++i)
    if (h.counts[cb.values[i]]) got_nonzero.push_back(cb.values[i]);
  for (unsigned v : want.values)
    if (h.counts[v]) want_nonzero.push_back(v);
  EXPECT_EQ(got_nonzero, want_nonzero) << what;
  EXPECT_GE(cb.count, want_nonzero.size()) << what;
  EXPECT_LE(cb.count, 1u << want.k) << what;
}

}  // namespace

TEST(Calibration, TwoExponentsGiveOneBitCodes) {
  const sz_histogram h = hist_of(SZ_DTYPE_BF16, {{121, 1000}, {120, 1000}});
  sz_codebook cb;
  double bits = 0;
  ASSERT_EQ(sz_calibrate(&h, &cb, &bits), SZ_OK);
  EXPECT_EQ(cb.code_bits, 1);
  EXPECT_EQ(cb.count, 2);
  EXPECT_EQ(cb.values[0], 120) << "equal counts: smaller exponent first";
  EXPECT_EQ(cb.values[1], 121);
  EXPECT_DOUBLE_EQ(bits, 1.0);
  expect_calibration(h, "two exponents");
}

TEST(Calibration, FourEqualExponentsGiveTwoBitCodesInOrder) {
  const sz_histogram h = hist_of(SZ_DTYPE_BF16, {{121, 100}, {118, 100}, {120, 100}, {119, 100}});
  sz_codebook cb;
  double bits = 0;
  ASSERT_EQ(sz_calibrate(&h, &cb, &bits), SZ_OK);
  EXPECT_EQ(cb.code_bits, 2);
  EXPECT_EQ(cb.count, 4);
  const uint8_t want[4] = {118, 119, 120, 121};
  EXPECT_EQ(memcmp(cb.values, want, 4), 0);
  EXPECT_DOUBLE_EQ(bits, 2.0);
}

TEST(Calibration, EntriesAreOrderedByDecreasingCount) {
  const sz_histogram h = hist_of(SZ_DTYPE_BF16, {{100, 5}, {101, 50}, {102, 500}, {103, 5000}, {104, 400},
                                                 {105, 40}, {106, 4}, {107, 3}, {99, 2}});
  expect_calibration(h, "ordered");
  sz_codebook cb;
  ASSERT_EQ(sz_calibrate(&h, &cb, nullptr), SZ_OK);  // NULL expected_bits is allowed
  EXPECT_EQ(cb.values[0], 103);
  EXPECT_EQ(cb.values[1], 102);
  EXPECT_EQ(cb.values[2], 104);
}

TEST(Calibration, PicksLargeCodesWhenEscapesWouldCostMore) {
  // 16 equally common exponents: anything below k = 4 escapes at least half of the values.
  std::vector<std::pair<unsigned, uint64_t>> c;
  for (unsigned e = 110; e < 126; ++e) c.push_back({e, 1000});
  const sz_histogram h = hist_of(SZ_DTYPE_BF16, c);
  sz_codebook cb;
  double bits = 0;
  ASSERT_EQ(sz_calibrate(&h, &cb, &bits), SZ_OK);
  EXPECT_EQ(cb.code_bits, 4);
  EXPECT_EQ(cb.count, 16);
  EXPECT_DOUBLE_EQ(bits, 4.0);
}

TEST(Calibration, PredictsRawExponentsWhenNoCodebookPays) {
  // 200 equally common BF16 exponents: every k costs more than 8 bits before the cap, so the prediction is raw
  // (8 bits per value) and the smallest k wins the tie.
  std::vector<std::pair<unsigned, uint64_t>> c;
  for (unsigned e = 20; e < 220; ++e) c.push_back({e, 77});
  const sz_histogram h = hist_of(SZ_DTYPE_BF16, c);
  sz_codebook cb;
  double bits = 0;
  ASSERT_EQ(sz_calibrate(&h, &cb, &bits), SZ_OK);
  EXPECT_DOUBLE_EQ(bits, 8.0);
  EXPECT_EQ(cb.code_bits, 1);
  EXPECT_EQ(sz_codebook_validate(&cb), SZ_OK);
}

TEST(Calibration, SkewedHistogramsOfEveryDtypeGetTheDocumentedChoice) {
  for (sz_dtype d : kAllDtypes) {
    const unsigned E = dtype_facts(d).E;
    for (double p : {0.2, 0.5, 0.7, 0.85}) {
      for (double wild : {0.0, 0.002, 0.05}) {
        const std::vector<uint8_t> src = skewed_values(d, 20000, 100 + (uint64_t)(p * 100) + d, E == 4 ? 7 : 13, p, wild);
        sz_histogram h;
        ASSERT_EQ(sz_histogram_init(&h, d), SZ_OK);
        ASSERT_EQ(sz_histogram_add(&h, src.data(), 20000), SZ_OK);
        expect_calibration(h, std::string(sz_dtype_name(d)) + " p=" + std::to_string(p) + " wild=" +
                                  std::to_string(wild));
      }
    }
  }
}

TEST(Calibration, PredictionMatchesTheExponentStreamOfTheFrame) {
  // On data whose escapes are spread evenly (no chunk goes raw), the predicted bits per value equal the size of
  // the exponent section exactly, up to the padding of the last group.
  const std::vector<uint8_t> src = skewed_values(SZ_DTYPE_BF16, 65536, 5, 120, 0.45, 0.001);
  sz_histogram h;
  ASSERT_EQ(sz_histogram_init(&h, SZ_DTYPE_BF16), SZ_OK);
  ASSERT_EQ(sz_histogram_add(&h, src.data(), 65536), SZ_OK);
  sz_codebook cb;
  double bits = 0;
  ASSERT_EQ(sz_calibrate(&h, &cb, &bits), SZ_OK);
  std::vector<uint8_t> f;
  const sz_params p = make_params(16, 0);
  ASSERT_EQ(compress_vec(false, src.data(), 65536, SZ_DTYPE_BF16, &cb, &p, &f), SZ_OK);
  sz_frame_info info;
  ASSERT_EQ(sz_frame_info_get(f.data(), f.size(), &info), SZ_OK);
  ASSERT_EQ(info.raw_chunks, 0u);
  const uint64_t exp_size = spec::get_le(&f[24], 8);
  EXPECT_NEAR((double)exp_size * 8.0 / 65536.0, bits, 1e-9);
}

TEST(Calibration, EmptyHistogramAndBadDtypeAreInvalidArguments) {
  sz_histogram h;
  ASSERT_EQ(sz_histogram_init(&h, SZ_DTYPE_FP16), SZ_OK);
  sz_codebook cb;
  EXPECT_EQ(sz_calibrate(&h, &cb, nullptr), SZ_ERROR_INVALID_ARGUMENT);
  h.dtype = 0;
  h.counts[3] = 10;
  EXPECT_NE(sz_calibrate(&h, &cb, nullptr), SZ_OK);
}
