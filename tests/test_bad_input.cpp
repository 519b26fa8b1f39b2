// Bad input must give an error status, never a crash or an out-of-bounds access (run this under ASan+UBSan):
// every truncation of small frames, every single-bit flip of small checksummed frames (both decoders), the precise
// header errors of docs/FORMAT.md §4.1 in their documented order, and SZ_ERROR_DST_TOO_SMALL exactly when the
// output buffer is too small. On error the decoders must not report output bytes as valid.
#include "spec_format.h"
#include "test_util.h"

using namespace sztest;

namespace {

constexpr size_t kSentinel = (size_t)0x5A5A5A5A;

// Decodes with one decoder into an exactly-sized heap buffer (so ASan sees any overrun); returns the status and
// checks that an error leaves *dst_size either untouched or 0.
sz_status decode(bool reference, const uint8_t* src, size_t size, size_t capacity, std::vector<uint8_t>* out = nullptr,
                 unsigned threads = 1) {
  std::vector<uint8_t> buf(capacity ? capacity : 1);
  static const uint8_t empty_input[1] = {0};
  if (size == 0) src = empty_input;  // an empty input, not a NULL pointer
  size_t got = kSentinel;
  const sz_status st = reference ? sz_decompress_reference(src, size, buf.data(), capacity, &got)
                                 : sz_decompress(src, size, buf.data(), capacity, &got, threads);
  if (st != SZ_OK) {
    EXPECT_TRUE(got == kSentinel || got == 0)
        << "on error " << status_str(st) << " the decoder reported " << got << " output bytes";
  } else {
    EXPECT_EQ(got, capacity);
    if (out) {
      buf.resize(got);
      *out = buf;
    }
  }
  return st;
}

// Copies the first `len` bytes to their own heap block, so a read past `len` is an ASan error.
std::vector<uint8_t> prefix(const std::vector<uint8_t>& f, size_t len) {
  return std::vector<uint8_t>(f.begin(), f.begin() + len);
}

struct SmallFrame {
  std::string name;
  sz_dtype dtype;
  std::vector<uint8_t> src;
  std::vector<uint8_t> frame;
};

// Small checksummed frames that together hold every part of the format: header, index of several chunks, chunk
// checksums, rest section with padding, coded chunks with escapes, a raw chunk, and a partial last chunk.
std::vector<SmallFrame> small_frames(uint32_t flags) {
  std::vector<SmallFrame> out;
  auto add = [&](std::string name, sz_dtype d, std::vector<uint8_t> src, const sz_codebook& cb, unsigned cl) {
    spec::Options o;
    o.chunk_log2 = cl;
    o.flags = flags;
    std::vector<uint8_t> f = spec::encode(src.data(), src.size() / value_bytes(d), d, cb, o);
    out.push_back(SmallFrame{std::move(name), d, std::move(src), std::move(f)});
  };
  {
    // BF16, 3 chunks of 256/256/85: chunk 0 coded with a few escapes, chunk 1 all-escape (raw), chunk 2 coded.
    const DtypeFacts f = dtype_facts(SZ_DTYPE_BF16);
    std::vector<uint8_t> src(2 * 597);
    Rng rng(17);
    for (int i = 0; i < 597; ++i) {
      uint32_t e = 118 + (uint32_t)rng.below(4);
      if (i >= 256 && i < 512) e = 3 + (uint32_t)rng.below(50);  // all escapes: raw chunk
      if (i == 5 || i == 77 || i == 255 || i == 520 || i == 596) e = 200;
      store_value(&src[2 * i], 16, make_value((uint32_t)rng.below(2), e, (uint32_t)rng.next(), f));
    }
    add("bf16_3chunks", SZ_DTYPE_BF16, src, centered_codebook(SZ_DTYPE_BF16, 2, 4, 120), 8);
  }
  {
    std::vector<uint8_t> src = skewed_values(SZ_DTYPE_FP8_E4M3, 301, 5, 7, 0.5, 0.05);
    add("e4m3_2chunks", SZ_DTYPE_FP8_E4M3, src, centered_codebook(SZ_DTYPE_FP8_E4M3, 3, 6, 7), 8);
  }
  {
    std::vector<uint8_t> src = skewed_values(SZ_DTYPE_FP16, 45, 6, 14, 0.5, 0.1);
    add("fp16_45values", SZ_DTYPE_FP16, src, centered_codebook(SZ_DTYPE_FP16, 4, 16, 14), 12);
  }
  {
    std::vector<uint8_t> src = skewed_values(SZ_DTYPE_FP32, 13, 7, 127, 0.5, 0.2);
    add("fp32_13values", SZ_DTYPE_FP32, src, centered_codebook(SZ_DTYPE_FP32, 1, 2, 127), 8);
  }
  {
    std::vector<uint8_t> src = skewed_values(SZ_DTYPE_FP8_E5M2, 9, 8, 15, 0.5, 0.2);
    add("e5m2_9values", SZ_DTYPE_FP8_E5M2, src, centered_codebook(SZ_DTYPE_FP8_E5M2, 2, 3, 15), 8);
  }
  add("bf16_empty", SZ_DTYPE_BF16, {}, centered_codebook(SZ_DTYPE_BF16, 4, 16, 120), 12);
  return out;
}

}  // namespace

TEST(BadInputSmallFrames, AreValidAndDecodeBeforeBeingDamaged) {
  for (uint32_t flags : sztest::kFlagSets) {
    for (const SmallFrame& s : small_frames(flags)) {
      for (bool ref : {true, false}) {
        std::vector<uint8_t> out;
        ASSERT_EQ(decode(ref, s.frame.data(), s.frame.size(), s.src.size(), &out), SZ_OK) << s.name;
        EXPECT_TRUE(out == s.src) << s.name;
      }
    }
  }
  // The BF16 frame really has both chunk modes and escapes (so the flips below reach every part).
  const SmallFrame s = small_frames(SZ_FLAG_CHECKSUMS)[0];
  sz_frame_info info;
  ASSERT_EQ(sz_frame_info_get(s.frame.data(), s.frame.size(), &info), SZ_OK);
  EXPECT_EQ(info.n_chunks, 3u);
  EXPECT_EQ(info.raw_chunks, 1u);
  EXPECT_EQ(info.coded_chunks, 2u);
  EXPECT_GE(info.escapes, 5u);
}

TEST(Truncation, EveryPrefixOfSmallFramesIsSrcTruncated) {
  for (uint32_t flags : sztest::kFlagSets) {
    for (const SmallFrame& s : small_frames(flags)) {
      for (size_t len = 0; len < s.frame.size(); ++len) {
        const std::vector<uint8_t> p = prefix(s.frame, len);
        for (bool ref : {true, false}) {
          EXPECT_EQ(decode(ref, p.data(), p.size(), s.src.size()), SZ_ERROR_SRC_TRUNCATED)
              << s.name << " cut to " << len << " of " << s.frame.size() << " bytes, "
              << (ref ? "reference" : "fast") << " decoder";
        }
        sz_frame_info info;
        const sz_status st = sz_frame_info_get(len ? p.data() : s.frame.data(), p.size(), &info);
        if (len < 64) {
          EXPECT_EQ(st, SZ_ERROR_SRC_TRUNCATED) << s.name << " len " << len;
        } else {
          EXPECT_EQ(st, SZ_OK) << s.name << " len " << len << ": the header alone is readable";
          if (st == SZ_OK) {
            EXPECT_EQ(info.stats_valid, 0u) << s.name << " len " << len;
          }
        }
      }
    }
  }
}

TEST(BitFlips, EverySingleBitFlipOfChecksummedFramesIsRejectedByBothDecoders) {
  for (const SmallFrame& s : small_frames(SZ_FLAG_CHECKSUMS)) {
    const spec::Layout L = spec::layout_of(s.frame.data());
    std::vector<uint8_t> f = s.frame;
    size_t failures = 0;
    for (size_t byte = 0; byte < f.size(); ++byte) {
      for (int bit = 0; bit < 8; ++bit) {
        f[byte] ^= (uint8_t)(1u << bit);
        for (bool ref : {true, false}) {
          const sz_status st = decode(ref, f.data(), f.size(), s.src.size());
          // Where the documented check order makes the error precise, require it.
          sz_status expect = SZ_OK;
          if (byte < 4) expect = SZ_ERROR_BAD_MAGIC;
          else if (byte == 4)  // versions 1, 2 and 3 are known: their header checksum is checked next
            expect = (f[4] >= 1 && f[4] <= 3) ? SZ_ERROR_CHECKSUM : SZ_ERROR_UNSUPPORTED_VERSION;
          else if (byte < 64) expect = SZ_ERROR_CHECKSUM;
          else if (byte >= L.checksums && byte < L.rest) expect = SZ_ERROR_CHECKSUM;
          const bool ok = expect == SZ_OK ? st != SZ_OK : st == expect;
          if (!ok && ++failures <= 20) {
            ADD_FAILURE() << s.name << ": flipping bit " << bit << " of byte " << byte << " (frame of " << f.size()
                          << " bytes) gave " << status_str(st) << " from the " << (ref ? "reference" : "fast")
                          << " decoder; expected "
                          << (expect == SZ_OK ? std::string("an error") : status_str(expect));
          }
        }
        f[byte] ^= (uint8_t)(1u << bit);
      }
    }
    EXPECT_EQ(failures, 0u) << s.name;
  }
}

TEST(BitFlips, FlipsOfUnchecksummedFramesNeverCrashAndDecodersAgree) {
  // Without checksums some flips are undetectable (that is documented); they must still be safe, and when both
  // decoders accept, they must agree on the output.
  for (const SmallFrame& s : small_frames(0)) {
    std::vector<uint8_t> f = s.frame;
    for (size_t byte = 0; byte < f.size(); ++byte) {
      for (int bit = 0; bit < 8; ++bit) {
        f[byte] ^= (uint8_t)(1u << bit);
        std::vector<uint8_t> a, b;
        const sz_status sa = decode(true, f.data(), f.size(), s.src.size(), &a);
        const sz_status sb = decode(false, f.data(), f.size(), s.src.size(), &b);
        EXPECT_EQ(sa, sb) << s.name << " byte " << byte << " bit " << bit;
        if (sa == SZ_OK && sb == SZ_OK) {
          EXPECT_TRUE(a == b) << s.name << " byte " << byte << " bit " << bit;
        }
        f[byte] ^= (uint8_t)(1u << bit);
      }
    }
  }
}

TEST(DstTooSmall, DecompressIntoOneByteLessIsExactlyDstTooSmall) {
  for (const SmallFrame& s : small_frames(SZ_FLAG_CHECKSUMS)) {
    if (s.src.empty()) continue;
    for (bool ref : {true, false}) {
      for (size_t cap : {s.src.size() - 1, s.src.size() / 2, (size_t)0}) {
        EXPECT_EQ(decode(ref, s.frame.data(), s.frame.size(), cap), SZ_ERROR_DST_TOO_SMALL)
            << s.name << " capacity " << cap << (ref ? " reference" : " fast");
      }
      // More room than needed is fine and reports the exact size.
      std::vector<uint8_t> big(s.src.size() + 100);
      size_t got = 0;
      const sz_status st = ref ? sz_decompress_reference(s.frame.data(), s.frame.size(), big.data(), big.size(), &got)
                               : sz_decompress(s.frame.data(), s.frame.size(), big.data(), big.size(), &got, 1);
      EXPECT_EQ(st, SZ_OK) << s.name;
      EXPECT_EQ(got, s.src.size()) << s.name;
      EXPECT_EQ(memcmp(big.data(), s.src.data(), s.src.size()), 0) << s.name;
    }
  }
}

TEST(DstTooSmall, DecompressOfALargeFrameAtManyThreadsIsExactlyDstTooSmall) {
  const std::vector<uint8_t> src = skewed_values(SZ_DTYPE_BF16, 100000, 3, 120, 0.5, 0.01);
  std::vector<uint8_t> f;
  ASSERT_EQ(compress_vec(false, src.data(), 100000, SZ_DTYPE_BF16, nullptr, nullptr, &f), SZ_OK);
  for (unsigned t : {1u, 4u, 0u}) EXPECT_EQ(decode(false, f.data(), f.size(), src.size() - 2, nullptr, t), SZ_ERROR_DST_TOO_SMALL);
}

TEST(DstTooSmall, CompressIntoLessThanTheFrameIsExactlyDstTooSmallAndExactSizeWorks) {
  for (sz_dtype d : kAllDtypes) {
    for (uint64_t n : {1ull, 100ull, 5000ull}) {
      const std::vector<uint8_t> src = skewed_values(d, (size_t)n, n, dtype_facts(d).E == 8 ? 120 : 7, 0.5, 0.02);
      std::vector<uint8_t> ref;
      ASSERT_EQ(compress_vec(true, src.data(), n, d, nullptr, nullptr, &ref), SZ_OK);
      for (bool reference : {true, false}) {
        for (size_t cap : {ref.size() - 1, ref.size() / 2, (size_t)63, (size_t)0}) {
          std::vector<uint8_t> dst(cap ? cap : 1);
          size_t got = kSentinel;
          const sz_status st =
              reference ? sz_compress_reference(src.data(), n, d, nullptr, nullptr, dst.data(), cap, &got)
                        : sz_compress(src.data(), n, d, nullptr, nullptr, dst.data(), cap, &got);
          EXPECT_EQ(st, SZ_ERROR_DST_TOO_SMALL) << sz_dtype_name(d) << " n=" << n << " cap=" << cap;
          EXPECT_TRUE(got == kSentinel || got == 0) << "size reported on error: " << got;
        }
        std::vector<uint8_t> dst(ref.size());
        size_t got = 0;
        const sz_status st =
            reference ? sz_compress_reference(src.data(), n, d, nullptr, nullptr, dst.data(), dst.size(), &got)
                      : sz_compress(src.data(), n, d, nullptr, nullptr, dst.data(), dst.size(), &got);
        EXPECT_EQ(st, SZ_OK) << sz_dtype_name(d) << " n=" << n << ": a buffer of exactly the frame size is enough";
        EXPECT_EQ(got, ref.size());
        EXPECT_TRUE(dst == ref);
      }
    }
  }
}

// ---- header checks of §4.1, in their documented order -------------------------------------------------------------

namespace {

std::vector<uint8_t> base_frame() {
  const std::vector<uint8_t> src = skewed_values(SZ_DTYPE_BF16, 1000, 42, 120, 0.5, 0.01);
  return spec::encode(src, SZ_DTYPE_BF16, centered_codebook(SZ_DTYPE_BF16, 4, 16, 120), 8, SZ_FLAG_CHECKSUMS);
}

void expect_all_decoders(const std::vector<uint8_t>& f, sz_status expect, const std::string& what,
                         bool also_info = true) {
  for (bool ref : {true, false}) EXPECT_EQ(decode(ref, f.data(), f.size(), 2000), expect) << what << (ref ? " (reference)" : " (fast)");
  if (also_info) {
    sz_frame_info info;
    EXPECT_EQ(sz_frame_info_get(f.data(), f.size(), &info), expect) << what << " (sz_frame_info_get)";
  }
}

}  // namespace

TEST(HeaderChecks, BadMagicComesFirst) {
  std::vector<uint8_t> f = base_frame();
  f[0] = 'X';
  f[4] = 9;  // also a bad version: magic is checked first
  expect_all_decoders(f, SZ_ERROR_BAD_MAGIC, "magic");
  std::vector<uint8_t> c = base_frame();
  c[3] = 0x43;  // a container's magic is not a frame's
  expect_all_decoders(c, SZ_ERROR_BAD_MAGIC, "container magic");
}

TEST(HeaderChecks, UnknownVersionIsUnsupportedVersionBeforeChecksum) {
  for (int v : {0, 4, 5, 255}) {
    std::vector<uint8_t> f = base_frame();
    f[4] = (uint8_t)v;
    expect_all_decoders(f, SZ_ERROR_UNSUPPORTED_VERSION, "version " + std::to_string(v) + " unsealed");
    spec::reseal_header(f);
    expect_all_decoders(f, SZ_ERROR_UNSUPPORTED_VERSION, "version " + std::to_string(v) + " resealed");
  }
}

// Version 3 is known (entropy-coded, §4.10): its code width and codebook count must be 0 and the ENTROPY flag set,
// and that flag is only for version 3; the fixed-length decoders reject a valid version 3 header as needing its
// symbol table.
TEST(HeaderChecks, VersionThreeFieldsAndEntropyFlagGoTogether) {
  std::vector<uint8_t> f = base_frame();
  f[4] = 3;
  spec::reseal_header(f);
  expect_all_decoders(f, SZ_ERROR_CORRUPT, "version 3 with a version 1 code width");
  f[6] = 0;
  f[12] = 0;
  memset(f.data() + 32, 0, 16);
  f[44] = 1;  // period 1
  spec::reseal_header(f);
  expect_all_decoders(f, SZ_ERROR_CORRUPT, "version 3 without the ENTROPY flag");
  f[8] |= 4;
  spec::put_le(f.data() + 24, 1001, 8);  // 1000 BF16 values: at most 1000 bytes of 8-bit symbols
  spec::reseal_header(f);
  expect_all_decoders(f, SZ_ERROR_CORRUPT, "version 3 whose symbol section exceeds its raw size");
  std::vector<uint8_t> g = base_frame();
  g[8] |= 4;
  spec::reseal_header(g);
  expect_all_decoders(g, SZ_ERROR_CORRUPT, "ENTROPY flag in a version 1 frame");
}

// LANE_HASH names the kind of the chunk checksums (§4.6): without CHECKSUMS it is corrupt; set on a frame whose sums
// are H32 it makes every chunk fail its check.
TEST(HeaderChecks, LaneHashNeedsChecksumsAndSelectsTheirKind) {
  std::vector<uint8_t> f = base_frame();
  expect_all_decoders(f, SZ_OK, "the H32 base frame");
  f[8] = SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH;
  spec::reseal_header(f);
  expect_all_decoders(f, SZ_ERROR_CHECKSUM, "H32 sums read as LH32", false);  // info does not verify chunks
  std::vector<uint8_t> g = base_frame();
  g[8] = SZ_FLAG_LANE_HASH;
  spec::reseal_header(g);
  expect_all_decoders(g, SZ_ERROR_CORRUPT, "LANE_HASH without CHECKSUMS");
}

// Version 2 is known (channel windows, §4.9), and must come with the CHANNELS flag, and that flag with version 2.
TEST(HeaderChecks, VersionAndChannelsFlagGoTogether) {
  std::vector<uint8_t> f = base_frame();
  f[4] = 2;
  expect_all_decoders(f, SZ_ERROR_CHECKSUM, "version 2 unsealed");
  spec::reseal_header(f);
  expect_all_decoders(f, SZ_ERROR_CORRUPT, "version 2 without CHANNELS");
  f = base_frame();
  f[8] |= 2;  // CHANNELS in a version 1 frame
  spec::reseal_header(f);
  expect_all_decoders(f, SZ_ERROR_CORRUPT, "CHANNELS in version 1");
}

TEST(HeaderChecks, HeaderChecksumIsCheckedBeforeDtypeAndFields) {
  std::vector<uint8_t> f = base_frame();
  f[5] = 0;  // bad dtype, but the checksum no longer matches: CHECKSUM comes first
  expect_all_decoders(f, SZ_ERROR_CHECKSUM, "dtype 0 unsealed");
  std::vector<uint8_t> g = base_frame();
  g[61] ^= 1;
  expect_all_decoders(g, SZ_ERROR_CHECKSUM, "header checksum");
}

TEST(HeaderChecks, UnknownDtypeIsUnsupportedDtype) {
  for (int d : {0, 6, 7, 128, 255}) {
    std::vector<uint8_t> f = base_frame();
    f[5] = (uint8_t)d;
    f[6] = 9;  // also a bad code width: dtype is checked first
    spec::reseal_header(f);
    expect_all_decoders(f, SZ_ERROR_UNSUPPORTED_DTYPE, "dtype " + std::to_string(d));
  }
}

TEST(HeaderChecks, FieldsOutOfRangeAreCorrupt) {
  struct Edit {
    const char* what;
    void (*apply)(std::vector<uint8_t>&);
  };
  const Edit edits[] = {
      {"code_bits 0", [](std::vector<uint8_t>& f) { f[6] = 0; }},
      {"code_bits 5", [](std::vector<uint8_t>& f) { f[6] = 5; }},
      {"chunk_log2 7", [](std::vector<uint8_t>& f) { f[7] = 7; }},
      {"chunk_log2 17", [](std::vector<uint8_t>& f) { f[7] = 17; }},
      {"flag bit 1", [](std::vector<uint8_t>& f) { f[8] |= 2; }},
      {"flag bit 31", [](std::vector<uint8_t>& f) { f[11] |= 0x80; }},
      {"codebook_count 0", [](std::vector<uint8_t>& f) { f[12] = 0; }},
      {"codebook_count 17", [](std::vector<uint8_t>& f) { f[12] = 17; }},
      {"reserved byte 13", [](std::vector<uint8_t>& f) { f[13] = 1; }},
      {"reserved byte 15", [](std::vector<uint8_t>& f) { f[15] = 0x80; }},
      {"n_values 2^48", [](std::vector<uint8_t>& f) { f[22] = 1; }},
      {"n_values 2^63", [](std::vector<uint8_t>& f) { f[23] = 0x80; }},
      {"duplicate codebook entry", [](std::vector<uint8_t>& f) { f[33] = f[32]; }},
      {"reserved byte 48", [](std::vector<uint8_t>& f) { f[48] = 1; }},
      {"reserved byte 59", [](std::vector<uint8_t>& f) { f[59] = 1; }},
  };
  for (const Edit& e : edits) {
    std::vector<uint8_t> f = base_frame();
    e.apply(f);
    spec::reseal_header(f);
    expect_all_decoders(f, SZ_ERROR_CORRUPT, e.what);
  }
}

TEST(HeaderChecks, CodeWidthMustBeBelowExponentWidthAndEntriesInRange) {
  // FP8 E4M3 has E = 4: k = 4 is out of range. FP16 has E = 5: an entry of 32 is out of range.
  {
    const std::vector<uint8_t> src = skewed_values(SZ_DTYPE_FP8_E4M3, 64, 1, 7);
    std::vector<uint8_t> f = spec::encode(src, SZ_DTYPE_FP8_E4M3, centered_codebook(SZ_DTYPE_FP8_E4M3, 3, 8, 7), 8, 0);
    f[6] = 4;
    spec::reseal_header(f);
    for (bool ref : {true, false}) EXPECT_EQ(decode(ref, f.data(), f.size(), 64), SZ_ERROR_CORRUPT) << "k=E";
  }
  {
    const std::vector<uint8_t> src = skewed_values(SZ_DTYPE_FP16, 64, 1, 14);
    std::vector<uint8_t> f = spec::encode(src, SZ_DTYPE_FP16, centered_codebook(SZ_DTYPE_FP16, 2, 3, 14), 8, 0);
    std::vector<uint8_t> g = f;
    g[32 + 1] = 32;
    spec::reseal_header(g);
    for (bool ref : {true, false}) EXPECT_EQ(decode(ref, g.data(), g.size(), 128), SZ_ERROR_CORRUPT) << "entry 32";
    std::vector<uint8_t> h = f;
    h[32 + 3] = 5;  // entry beyond count must be zero
    spec::reseal_header(h);
    for (bool ref : {true, false}) EXPECT_EQ(decode(ref, h.data(), h.size(), 128), SZ_ERROR_CORRUPT) << "entry 3";
  }
}

TEST(HeaderChecks, HugeCountsAndSectionSizesAreRejectedWithoutOverflow) {
  struct Case {
    uint64_t n, exp_size;
  } cases[] = {{((uint64_t)1 << 48) - 1, 0},
               {((uint64_t)1 << 48) - 1, ~(uint64_t)0},
               {1000, ~(uint64_t)0},
               {1000, ~(uint64_t)0 - 2000},
               {1000, (uint64_t)1 << 62},
               {(uint64_t)1 << 40, 12345}};
  for (const Case& c : cases) {
    std::vector<uint8_t> f = base_frame();
    spec::put_le(f.data() + 16, c.n, 8);
    spec::put_le(f.data() + 24, c.exp_size, 8);
    spec::reseal_header(f);
    for (bool ref : {true, false}) {
      const sz_status st = decode(ref, f.data(), f.size(), 2000);
      EXPECT_TRUE(st == SZ_ERROR_SRC_TRUNCATED || st == SZ_ERROR_CORRUPT || st == SZ_ERROR_DST_TOO_SMALL)
          << "n=" << c.n << " exp_size=" << c.exp_size << " gave " << status_str(st);
    }
    sz_frame_info info;
    EXPECT_NE(sz_frame_info_get(f.data(), f.size(), &info) == SZ_OK && info.stats_valid == 1, true)
        << "n=" << c.n << " exp_size=" << c.exp_size;
  }
}

TEST(GarbageInput, RandomBytesAfterAValidLookingMagicAreRejected) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    std::vector<uint8_t> g = random_bytes(64 + (size_t)(seed * 7 % 500), seed);
    g[0] = 0x53, g[1] = 0x50, g[2] = 0x5A, g[3] = 0x46, g[4] = 1;
    if (seed % 2) spec::reseal_header(g);
    for (bool ref : {true, false}) EXPECT_NE(decode(ref, g.data(), g.size(), 4096), SZ_OK) << "seed " << seed;
  }
}
