// API basics: version, status and dtype names, sizes, the compress bound, default parameters, and that every entry
// point answers NULL or out-of-range arguments with SZ_ERROR_INVALID_ARGUMENT instead of crashing.
#include <set>
#include <string>

#include "test_util.h"

using namespace sztest;

TEST(Version, NumberAndStringMatchTheHeader) {
  EXPECT_EQ(sz_version_number(), (unsigned)SZ_VERSION_NUMBER);
  const std::string expect = std::to_string(SZ_VERSION_MAJOR) + "." + std::to_string(SZ_VERSION_MINOR) + "." +
                             std::to_string(SZ_VERSION_PATCH);
  ASSERT_NE(sz_version_string(), nullptr);
  EXPECT_EQ(std::string(sz_version_string()), expect);
  EXPECT_EQ(SZ_FORMAT_VERSION, 1);
}

TEST(StatusNames, AreTheEnumeratorNamesPinnedForever) {
  // The numbers are pinned by the header; so are the names, which scripts and logs rely on.
  const char* expected[] = {"SZ_OK",
                            "SZ_ERROR_INVALID_ARGUMENT",
                            "SZ_ERROR_DST_TOO_SMALL",
                            "SZ_ERROR_SRC_TRUNCATED",
                            "SZ_ERROR_BAD_MAGIC",
                            "SZ_ERROR_UNSUPPORTED_VERSION",
                            "SZ_ERROR_UNSUPPORTED_DTYPE",
                            "SZ_ERROR_CORRUPT",
                            "SZ_ERROR_CHECKSUM",
                            "SZ_ERROR_BAD_CODEBOOK",
                            "SZ_ERROR_OUT_OF_MEMORY",
                            "SZ_ERROR_IO",
                            "SZ_ERROR_NOT_FOUND",
                            "SZ_ERROR_CUDA",
                            "SZ_ERROR_NOT_SUPPORTED",
                            "SZ_ERROR_WORKSPACE_TOO_SMALL",
                            "SZ_ERROR_INTERNAL",
                            "SZ_ERROR_BOOK_MISMATCH"};
  for (int i = 0; i <= 17; ++i) {
    const char* n = sz_status_name((sz_status)i);
    ASSERT_NE(n, nullptr) << i;
    EXPECT_STREQ(n, expected[i]) << "status " << i;
  }
}

TEST(StatusNames, AreDistinctAndUnknownNumbersHaveOneName) {
  std::set<std::string> names;
  for (int i = 0; i <= 17; ++i) names.insert(sz_status_name((sz_status)i));
  EXPECT_EQ(names.size(), 18u);
  for (int i : {18, 100, -1, 255}) {
    const char* n = sz_status_name((sz_status)i);
    ASSERT_NE(n, nullptr);
    EXPECT_STREQ(n, "SZ_ERROR_UNKNOWN") << i;
  }
}

TEST(StatusMessages, ExistForEveryStatusAndAreDistinct) {
  std::set<std::string> msgs;
  for (int i = 0; i <= 16; ++i) {
    const char* m = sz_status_message((sz_status)i);
    ASSERT_NE(m, nullptr) << i;
    EXPECT_GT(strlen(m), 3u) << i;
    EXPECT_EQ(strchr(m, '\n'), nullptr) << "one line: " << m;
    msgs.insert(m);
  }
  EXPECT_EQ(msgs.size(), 17u);
  EXPECT_NE(sz_status_message((sz_status)1000), nullptr);
}

TEST(Dtypes, SizesExponentWidthsAndNamesFollowFormatTable) {
  struct Row {
    sz_dtype d;
    size_t size;
    unsigned e;
    const char* name;
  } rows[] = {{SZ_DTYPE_BF16, 2, 8, "bf16"},
              {SZ_DTYPE_FP16, 2, 5, "fp16"},
              {SZ_DTYPE_FP32, 4, 8, "fp32"},
              {SZ_DTYPE_FP8_E4M3, 1, 4, "fp8_e4m3"},
              {SZ_DTYPE_FP8_E5M2, 1, 5, "fp8_e5m2"}};
  for (const Row& r : rows) {
    EXPECT_EQ(sz_dtype_size(r.d), r.size);
    EXPECT_EQ(sz_dtype_exponent_bits(r.d), r.e);
    ASSERT_NE(sz_dtype_name(r.d), nullptr);
    EXPECT_STREQ(sz_dtype_name(r.d), r.name);
  }
  for (int bad : {0, 6, 7, 255, -1}) {
    EXPECT_EQ(sz_dtype_size((sz_dtype)bad), 0u) << bad;
    EXPECT_EQ(sz_dtype_exponent_bits((sz_dtype)bad), 0u) << bad;
    EXPECT_EQ(sz_dtype_name((sz_dtype)bad), nullptr) << bad;
  }
}

TEST(Dtypes, NamesRoundTripThroughParser) {
  for (sz_dtype d : kAllDtypes) {
    sz_dtype back = (sz_dtype)0;
    ASSERT_EQ(sz_dtype_from_name(sz_dtype_name(d), &back), SZ_OK) << sz_dtype_name(d);
    EXPECT_EQ(back, d);
  }
}

TEST(Dtypes, ParserAcceptsDocumentedAliases) {
  const struct {
    const char* name;
    sz_dtype d;
  } aliases[] = {{"bfloat16", SZ_DTYPE_BF16},    {"float16", SZ_DTYPE_FP16},        {"half", SZ_DTYPE_FP16},
                 {"float32", SZ_DTYPE_FP32},     {"float", SZ_DTYPE_FP32},          {"e4m3", SZ_DTYPE_FP8_E4M3},
                 {"float8_e4m3fn", SZ_DTYPE_FP8_E4M3}};
  for (const auto& a : aliases) {
    sz_dtype back = (sz_dtype)0;
    EXPECT_EQ(sz_dtype_from_name(a.name, &back), SZ_OK) << a.name;
    EXPECT_EQ(back, a.d) << a.name;
  }
}

TEST(Dtypes, ParserRejectsUnknownNames) {
  for (const char* bad : {"", "bf", "int8", "fp64", "bf16 ", "e3m4", "float64"}) {
    sz_dtype back = SZ_DTYPE_BF16;
    EXPECT_EQ(sz_dtype_from_name(bad, &back), SZ_ERROR_UNSUPPORTED_DTYPE) << "'" << bad << "'";
  }
  sz_dtype back;
  EXPECT_NE(sz_dtype_from_name(nullptr, &back), SZ_OK);
  EXPECT_NE(sz_dtype_from_name("bf16", nullptr), SZ_OK);
}

TEST(CompressBound, EqualsFormulaOfFormatSection48) {
  const uint64_t ns[] = {0, 1, 7, 8, 9, 255, 256, 257, 4095, 4096, 4097, 1000003, (uint64_t)1 << 40};
  for (sz_dtype d : kAllDtypes) {
    const uint64_t W = dtype_facts(d).W;
    for (uint64_t n : ns) {
      const uint64_t expect = 64 + 12 * ((n + 255) / 256) + (n + 7) / 8 * W;
      EXPECT_EQ(sz_compress_bound(n, d), expect) << "n=" << n << " dtype=" << d;
      EXPECT_EQ(SZ_COMPRESS_BOUND(n, W / 8), expect) << "macro, n=" << n;
    }
  }
  EXPECT_EQ(sz_compress_bound(100, (sz_dtype)0), 0u);
  EXPECT_EQ(sz_compress_bound(100, (sz_dtype)9), 0u);
}

// A frame holds fewer than 2^48 values (§4.1), so the bound of more is 0 (no frame), never a wrapped small number
// that a caller would allocate and then overflow.
TEST(CompressBound, IsZeroForCountsNoFrameHolds) {
  for (sz_dtype d : kAllDtypes) {
    const uint64_t W = dtype_facts(d).W;
    const uint64_t last = ((uint64_t)1 << 48) - 1;
    EXPECT_EQ(sz_compress_bound(last, d), 64 + 12 * ((last + 255) / 256) + (last + 7) / 8 * W);
    for (uint64_t n : {(uint64_t)1 << 48, (uint64_t)1 << 62, (uint64_t)1 << 63, ((uint64_t)1 << 63) + 1,
                       UINT64_MAX - 7, UINT64_MAX})
      EXPECT_EQ(sz_compress_bound(n, d), 0u) << "n=" << n << " dtype=" << d;
    uint8_t dst[64];
    size_t size = 0;
    EXPECT_EQ(sz_compress(dst, (uint64_t)1 << 48, d, nullptr, nullptr, dst, sizeof dst, &size),
              SZ_ERROR_INVALID_ARGUMENT);
  }
}

TEST(Params, DefaultsAreDocumented) {
  const sz_params p = sz_params_default();
  EXPECT_EQ(p.chunk_log2, (uint32_t)SZ_DEFAULT_CHUNK_LOG2);
  EXPECT_EQ(p.flags, SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH);
  EXPECT_EQ(p.threads, 1u);
  EXPECT_EQ(p.reserved, 0u);
}

TEST(NullArguments, CompressRejectsEveryNullPointer) {
  const std::vector<uint8_t> src = random_bytes(64, 1);
  std::vector<uint8_t> dst(4096);
  size_t size = 0;
  for (bool ref : {false, true}) {
    auto call = [&](const void* s, void* d, size_t* ds) {
      return ref ? sz_compress_reference(s, 32, SZ_DTYPE_BF16, nullptr, nullptr, d, dst.size(), ds)
                 : sz_compress(s, 32, SZ_DTYPE_BF16, nullptr, nullptr, d, dst.size(), ds);
    };
    EXPECT_EQ(call(nullptr, dst.data(), &size), SZ_ERROR_INVALID_ARGUMENT) << "ref=" << ref;
    EXPECT_EQ(call(src.data(), nullptr, &size), SZ_ERROR_INVALID_ARGUMENT) << "ref=" << ref;
    EXPECT_EQ(call(src.data(), dst.data(), nullptr), SZ_ERROR_INVALID_ARGUMENT) << "ref=" << ref;
    EXPECT_EQ(call(src.data(), dst.data(), &size), SZ_OK) << "ref=" << ref;
  }
}

TEST(NullArguments, DecompressAndInfoRejectEveryNullPointer) {
  const std::vector<uint8_t> src = random_bytes(64, 2);
  std::vector<uint8_t> frame;
  ASSERT_EQ(compress_vec(true, src.data(), 32, SZ_DTYPE_BF16, nullptr, nullptr, &frame), SZ_OK);
  std::vector<uint8_t> out(64);
  size_t size = 0;
  EXPECT_EQ(sz_decompress(nullptr, frame.size(), out.data(), out.size(), &size, 1), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_decompress(frame.data(), frame.size(), nullptr, out.size(), &size, 1), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_decompress(frame.data(), frame.size(), out.data(), out.size(), nullptr, 1),
            SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_decompress_reference(nullptr, frame.size(), out.data(), out.size(), &size), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_decompress_reference(frame.data(), frame.size(), nullptr, out.size(), &size),
            SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_decompress_reference(frame.data(), frame.size(), out.data(), out.size(), nullptr),
            SZ_ERROR_INVALID_ARGUMENT);
  sz_frame_info info;
  EXPECT_EQ(sz_frame_info_get(nullptr, frame.size(), &info), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_frame_info_get(frame.data(), frame.size(), nullptr), SZ_ERROR_INVALID_ARGUMENT);
}

TEST(NullArguments, CodebookHistogramAndContainerFunctionsRejectNull) {
  sz_codebook cb;
  ASSERT_EQ(sz_default_codebook(SZ_DTYPE_BF16, SZ_KIND_GENERIC, &cb), SZ_OK);
  uint8_t buf[64];
  EXPECT_EQ(sz_codebook_validate(nullptr), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_default_codebook(SZ_DTYPE_BF16, SZ_KIND_GENERIC, nullptr), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_codebook_serialize(nullptr, buf, sizeof buf), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_codebook_serialize(&cb, nullptr, sizeof buf), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_codebook_deserialize(nullptr, 32, &cb), SZ_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(sz_codebook_serialize(&cb, buf, sizeof buf), SZ_OK);
  EXPECT_EQ(sz_codebook_deserialize(buf, 32, nullptr), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_codebook_save(nullptr, "/tmp/x.spzb"), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_codebook_save(&cb, nullptr), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_codebook_load(nullptr, &cb), SZ_ERROR_INVALID_ARGUMENT);

  sz_histogram h;
  EXPECT_EQ(sz_histogram_init(nullptr, SZ_DTYPE_BF16), SZ_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(sz_histogram_init(&h, SZ_DTYPE_BF16), SZ_OK);
  EXPECT_EQ(sz_histogram_add(nullptr, buf, 4), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_histogram_add(&h, nullptr, 4), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_calibrate(nullptr, &cb, nullptr), SZ_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(sz_histogram_add(&h, buf, 4), SZ_OK);
  EXPECT_EQ(sz_calibrate(&h, nullptr, nullptr), SZ_ERROR_INVALID_ARGUMENT);

  uint32_t count = 0, idx = 0;
  sz_item item;
  EXPECT_EQ(sz_container_open(nullptr, 100, &count), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_container_write_header(nullptr, 16), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_container_item(nullptr, 100, 0, &item), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_container_find(nullptr, 100, "a", 1, &idx), SZ_ERROR_INVALID_ARGUMENT);
  uint64_t isz = 0;
  EXPECT_EQ(sz_container_index_size(nullptr, 1, &isz), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_is_container(nullptr, 100), 0);
  EXPECT_EQ(sz_is_frame(nullptr, 100), 0);
}

TEST(InvalidParams, OutOfRangeChunkUnknownFlagsReservedAndDtypeAreInvalidArguments) {
  const std::vector<uint8_t> src = random_bytes(1024, 3);
  std::vector<uint8_t> dst((size_t)sz_compress_bound(512, SZ_DTYPE_BF16));
  size_t size = 0;
  for (bool ref : {false, true}) {
    auto call = [&](sz_dtype d, const sz_params& p) {
      return ref ? sz_compress_reference(src.data(), 512, d, nullptr, &p, dst.data(), dst.size(), &size)
                 : sz_compress(src.data(), 512, d, nullptr, &p, dst.data(), dst.size(), &size);
    };
    sz_params p = sz_params_default();
    p.chunk_log2 = 7;
    EXPECT_EQ(call(SZ_DTYPE_BF16, p), SZ_ERROR_INVALID_ARGUMENT) << "chunk_log2 7, ref=" << ref;
    p.chunk_log2 = 17;
    EXPECT_EQ(call(SZ_DTYPE_BF16, p), SZ_ERROR_INVALID_ARGUMENT) << "chunk_log2 17, ref=" << ref;
    p = sz_params_default();
    p.flags = 2;
    EXPECT_EQ(call(SZ_DTYPE_BF16, p), SZ_ERROR_INVALID_ARGUMENT) << "flags 2, ref=" << ref;
    p.flags = SZ_FLAG_LANE_HASH;  // a checksum kind without checksums
    EXPECT_EQ(call(SZ_DTYPE_BF16, p), SZ_ERROR_INVALID_ARGUMENT) << "LANE_HASH alone, ref=" << ref;
    p = sz_params_default();
    p.reserved = 1;
    EXPECT_EQ(call(SZ_DTYPE_BF16, p), SZ_ERROR_INVALID_ARGUMENT) << "reserved, ref=" << ref;
    p = sz_params_default();
    EXPECT_EQ(call((sz_dtype)0, p), SZ_ERROR_INVALID_ARGUMENT) << "dtype 0, ref=" << ref;
    EXPECT_EQ(call((sz_dtype)6, p), SZ_ERROR_INVALID_ARGUMENT) << "dtype 6, ref=" << ref;
    EXPECT_EQ(call(SZ_DTYPE_BF16, p), SZ_OK) << "ref=" << ref;
  }
}

TEST(InvalidParams, CodebookOfOtherDtypeOrInvalidIsBadCodebook) {
  const std::vector<uint8_t> src = random_bytes(1024, 4);
  std::vector<uint8_t> dst((size_t)sz_compress_bound(512, SZ_DTYPE_BF16));
  size_t size = 0;
  sz_codebook fp16cb;
  ASSERT_EQ(sz_default_codebook(SZ_DTYPE_FP16, SZ_KIND_GENERIC, &fp16cb), SZ_OK);
  sz_codebook broken = centered_codebook(SZ_DTYPE_BF16, 2, 4, 120);
  broken.values[1] = broken.values[0];  // duplicate entry
  for (bool ref : {false, true}) {
    auto call = [&](const sz_codebook* cb) {
      return ref ? sz_compress_reference(src.data(), 512, SZ_DTYPE_BF16, cb, nullptr, dst.data(), dst.size(), &size)
                 : sz_compress(src.data(), 512, SZ_DTYPE_BF16, cb, nullptr, dst.data(), dst.size(), &size);
    };
    EXPECT_EQ(call(&fp16cb), SZ_ERROR_BAD_CODEBOOK) << "ref=" << ref;
    EXPECT_EQ(call(&broken), SZ_ERROR_BAD_CODEBOOK) << "ref=" << ref;
  }
}
