// Real KV caches: data/kv_code_bf16_slice.bin (shipped, always run) and, when present, ../shared/data/kv
// (trained-d512 BF16/FP8 K and V, stories260K BF16). Every file round-trips bit-exactly through both codecs; the
// log prints the ratio of K and V with the default and the calibrated codebook next to the ideal of the same
// codebook, 16 / (W - E + k + 24·ε) bits (for BF16 with k = 4: 2 / (1.5 + 3ε)).
#include <stdio.h>

#include "test_util.h"

using namespace sztest;

namespace {

struct KvLayout {
  uint64_t layers, tokens, per_token;  // [layer][kv][token][per_token]
};

// Splits a [layer][kv][token][...] tensor into its K part and its V part (each in layer order).
void split_kv(const std::vector<uint8_t>& all, size_t vb, const KvLayout& L, std::vector<uint8_t>* k,
              std::vector<uint8_t>* v) {
  const size_t block = (size_t)(L.tokens * L.per_token * vb);
  ASSERT_EQ(all.size(), (size_t)(L.layers * 2) * block) << "unexpected file size";
  k->clear();
  v->clear();
  for (uint64_t l = 0; l < L.layers; ++l) {
    const uint8_t* base = all.data() + (size_t)(2 * l) * block;
    k->insert(k->end(), base, base + block);
    v->insert(v->end(), base + block, base + 2 * block);
  }
}

// Round-trips one tensor with a codebook, prints the ratio and the ideal for that codebook, returns the ratio.
double measure(const std::string& label, const std::vector<uint8_t>& data, sz_dtype d, const sz_codebook& cb) {
  const std::vector<uint8_t> f = check_roundtrip(data, d, &cb, make_params(12, SZ_FLAG_CHECKSUMS, 2), label);
  if (f.empty()) return 0;
  sz_frame_info info;
  EXPECT_EQ(sz_frame_info_get(f.data(), f.size(), &info), SZ_OK);
  const DtypeFacts fa = dtype_facts(d);
  const double n = (double)info.n_values;
  const double eps = n > 0 ? (double)info.escapes / n : 0;
  const double ideal = (double)fa.W / ((double)(fa.W - fa.E) + cb.code_bits + 24.0 * eps);
  const double ratio = (double)data.size() / (double)f.size();
  printf("[ratio] %-44s %-9s k=%u ratio %.4f  ideal %.4f  escapes %.4f%%  raw chunks %llu/%llu\n", label.c_str(),
         sz_dtype_name(d), cb.code_bits, ratio, ideal, 100.0 * eps, (unsigned long long)info.raw_chunks,
         (unsigned long long)info.n_chunks);
  ::testing::Test::RecordProperty(label + " ratio", ratio_str(data.size(), f.size()));
  return ratio;
}

sz_codebook calibrated(const std::vector<uint8_t>& data, sz_dtype d) {
  sz_histogram h;
  sz_codebook cb;
  EXPECT_EQ(sz_histogram_init(&h, d), SZ_OK);
  EXPECT_EQ(sz_histogram_add(&h, data.data(), data.size() / value_bytes(d)), SZ_OK);
  EXPECT_EQ(sz_calibrate(&h, &cb, nullptr), SZ_OK);
  return cb;
}

sz_codebook default_cb(sz_dtype d, sz_tensor_kind kind) {
  sz_codebook cb;
  EXPECT_EQ(sz_default_codebook(d, kind, &cb), SZ_OK);
  return cb;
}

void run_kv_file(const std::string& label, const std::vector<uint8_t>& all, sz_dtype d, const KvLayout& L,
                 double min_ratio) {
  std::vector<uint8_t> k, v;
  split_kv(all, value_bytes(d), L, &k, &v);
  if (::testing::Test::HasFatalFailure()) return;
  const double rk = measure(label + " K default", k, d, default_cb(d, SZ_KIND_KEY));
  const double rv = measure(label + " V default", v, d, default_cb(d, SZ_KIND_VALUE));
  measure(label + " K calibrated", k, d, calibrated(k, d));
  measure(label + " V calibrated", v, d, calibrated(v, d));
  measure(label + " K+V generic", all, d, default_cb(d, SZ_KIND_GENERIC));
  // Real KV compresses with the shipped codebooks (BF16 only; FP8 may legitimately stay near 1).
  EXPECT_GT(rk, min_ratio) << label << " K";
  EXPECT_GT(rv, min_ratio) << label << " V";
}

}  // namespace

TEST(RealKv, ShippedBf16SliceRoundTripsAndCompresses) {
  std::vector<uint8_t> all;
  ASSERT_TRUE(read_file(repo_path("data/kv_code_bf16_slice.bin"), &all)) << "data/kv_code_bf16_slice.bin missing";
  ASSERT_EQ(all.size(), 1835008u);
  run_kv_file("data/kv_code_bf16_slice.bin", all, SZ_DTYPE_BF16, KvLayout{8, 224, 256}, 1.05);
}

struct SharedFile {
  const char* rel;
  sz_dtype dtype;
  KvLayout layout;
  double min_ratio;  // a ratio every sane codec reaches with the shipped codebooks; 0 for FP8 (no claim)
};

void PrintTo(const SharedFile& f, std::ostream* os) { *os << f.rel; }

class SharedKv : public ::testing::TestWithParam<SharedFile> {};

TEST_P(SharedKv, RoundTripsBitExactAndReportsRatio) {
  const SharedFile sf = GetParam();
  std::vector<uint8_t> all;
  SZ_LOAD_SHARED_OR_SKIP(sf.rel, all);
  run_kv_file(sf.rel, all, sf.dtype, sf.layout, sf.min_ratio);
}

INSTANTIATE_TEST_SUITE_P(
    Files, SharedKv,
    ::testing::Values(SharedFile{"kv/trained-d512/kv_code_bf16.bin", SZ_DTYPE_BF16, {8, 1536, 256}, 1.05},
                      SharedFile{"kv/trained-d512/kv_prose_bf16.bin", SZ_DTYPE_BF16, {8, 1536, 256}, 1.05},
                      SharedFile{"kv/trained-d512/kv_code_e4m3.bin", SZ_DTYPE_FP8_E4M3, {8, 1536, 256}, 0.0},
                      SharedFile{"kv/trained-d512/kv_prose_e4m3.bin", SZ_DTYPE_FP8_E4M3, {8, 1536, 256}, 0.0},
                      SharedFile{"kv/trained-d512/kv_code_e5m2.bin", SZ_DTYPE_FP8_E5M2, {8, 1536, 256}, 0.0},
                      SharedFile{"kv/trained-d512/kv_prose_e5m2.bin", SZ_DTYPE_FP8_E5M2, {8, 1536, 256}, 0.0},
                      SharedFile{"kv/stories260K/selfgen_greedy.bf16", SZ_DTYPE_BF16, {5, 345, 32}, 1.05},
                      SharedFile{"kv/stories260K/shakespeare_0.bf16", SZ_DTYPE_BF16, {5, 512, 32}, 1.05},
                      SharedFile{"kv/stories260K/shakespeare_1.bf16", SZ_DTYPE_BF16, {5, 512, 32}, 1.05},
                      SharedFile{"kv/stories260K/shakespeare_2.bf16", SZ_DTYPE_BF16, {5, 512, 32}, 1.05},
                      SharedFile{"kv/stories260K/shakespeare_3.bf16", SZ_DTYPE_BF16, {5, 512, 32}, 1.05}),
    [](const ::testing::TestParamInfo<SharedFile>& i) {
      std::string s = i.param.rel;
      for (char& c : s)
        if (!isalnum((unsigned char)c)) c = '_';
      return s;
    });
