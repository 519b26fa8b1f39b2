// Checks of the test oracle itself and of the library against bytes written by hand from docs/FORMAT.md: a tiny
// BF16 frame assembled byte by byte must be what both the spec encoder (tests/spec_format.h) and the library's
// encoders write, and it must decode. So the spec encoder is not only compared with the library it tests.
#include <algorithm>

#include "spec_format.h"
#include "test_util.h"

using namespace sztest;

namespace {

// Six BF16 values: 1.0, -1.0, 2.0, +0, +Inf, 1.0078125.
const uint16_t kValues[6] = {0x3F80, 0xBF80, 0x4000, 0x0000, 0x7F80, 0x3F81};

std::vector<uint8_t> hand_frame(bool checksums) {
  // Exponents 127 127 128 0 255 127; codebook k=2 {127, 128}: codes 0 0 1 0 0 0, escapes at 3 (exp 0), 4 (exp 255).
  // Record: 2 code bytes + 2*2 position bytes + 2 exponent bytes = 8 = raw size 1*8, a tie: coded (§4.7).
  std::vector<uint8_t> f = {
      0x53, 0x50, 0x5A, 0x46,                          // magic "SPZF"
      0x01,                                            // version
      0x01,                                            // dtype bf16
      0x02,                                            // k
      0x08,                                            // chunk_log2
      (uint8_t)(checksums ? 1 : 0), 0x00, 0x00, 0x00,  // flags
      0x02,                                            // codebook_count
      0x00, 0x00, 0x00,                                // reserved
      0x06, 0, 0, 0, 0, 0, 0, 0,                       // n_values
      0x08, 0, 0, 0, 0, 0, 0, 0,                       // exponent_section_size
      0x7F, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  // codebook
      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,              // reserved
      0, 0, 0, 0,                                      // header checksum (below)
  };
  spec::put_le(f.data() + 60, (uint32_t)XXH3_64bits(f.data(), 60), 4);
  const uint8_t index[8] = {0x08, 0, 0, 0, 0, 0, 0, 0x00};  // end 8, mode 0
  f.insert(f.end(), index, index + 8);
  if (checksums) {
    uint8_t raw[12];
    for (int i = 0; i < 6; ++i) raw[2 * i] = (uint8_t)kValues[i], raw[2 * i + 1] = (uint8_t)(kValues[i] >> 8);
    const uint64_t h = XXH3_64bits(raw, 12);
    for (int i = 0; i < 4; ++i) f.push_back((uint8_t)(h >> (8 * i)));
  }
  const uint8_t rest[8] = {0x00, 0x80, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00};  // sign<<7 | mantissa, padded
  f.insert(f.end(), rest, rest + 8);
  const uint8_t record[8] = {0x10, 0x00,              // codes: field 2 = 1 -> bits 4..5 of byte 0
                             0x03, 0x00, 0x04, 0x00,  // escape positions
                             0x00, 0xFF};             // escape exponents
  f.insert(f.end(), record, record + 8);
  return f;
}

std::vector<uint8_t> hand_input() {
  std::vector<uint8_t> raw(12);
  for (int i = 0; i < 6; ++i) store_value(&raw[2 * i], 16, kValues[i]);
  return raw;
}

sz_codebook hand_codebook() {
  sz_codebook cb;
  memset(&cb, 0, sizeof cb);
  cb.dtype = SZ_DTYPE_BF16;
  cb.code_bits = 2;
  cb.count = 2;
  cb.values[0] = 127;
  cb.values[1] = 128;
  return cb;
}

}  // namespace

TEST(SpecOracle, HandAssembledFrameEqualsSpecEncoderAndLibraryEncoders) {
  for (bool checksums : {true, false}) {
    const std::vector<uint8_t> hand = hand_frame(checksums);
    EXPECT_EQ(hand.size(), checksums ? 92u : 88u);
    const uint32_t flags = checksums ? SZ_FLAG_CHECKSUMS : 0;
    const std::vector<uint8_t> spec_frame = spec::encode(hand_input(), SZ_DTYPE_BF16, hand_codebook(), 8, flags);
    EXPECT_TRUE(spec_frame == hand) << "spec encoder disagrees with the hand-assembled frame";
    const sz_codebook cb = hand_codebook();
    const std::vector<uint8_t> lib = check_roundtrip(hand_input(), SZ_DTYPE_BF16, &cb, make_params(8, flags), "hand");
    EXPECT_TRUE(lib == hand) << "library encoders disagree with the hand-assembled frame";
    for (bool ref : {true, false}) {
      std::vector<uint8_t> out;
      ASSERT_EQ(decompress_vec(ref, hand, 12, &out), SZ_OK);
      EXPECT_TRUE(out == hand_input());
    }
  }
}

TEST(SpecOracle, PackingMatchesTheExamplesOfFormatSection3) {
  // b = 4: field j is the low nibble of byte j/2 for even j, the high nibble for odd j.
  uint8_t four[4] = {0};
  for (int j = 0; j < 8; ++j) spec::put_field(four, j, 4, (uint32_t)(j + 1));
  EXPECT_EQ(four[0], 0x21);
  EXPECT_EQ(four[1], 0x43);
  EXPECT_EQ(four[3], 0x87);
  // b = 24: field j is bytes 3j..3j+2, little-endian.
  uint8_t t24[24] = {0};
  spec::put_field(t24, 1, 24, 0xABCDEF);
  EXPECT_EQ(t24[3], 0xEF);
  EXPECT_EQ(t24[4], 0xCD);
  EXPECT_EQ(t24[5], 0xAB);
  // b = 3: fields in one 24-bit little-endian integer.
  uint8_t t3[3] = {0};
  for (int j = 0; j < 8; ++j) spec::put_field(t3, j, 3, (uint32_t)j);
  const uint32_t all = t3[0] | (t3[1] << 8) | (t3[2] << 16);
  for (int j = 0; j < 8; ++j) EXPECT_EQ((all >> (3 * j)) & 7u, (uint32_t)j);
  for (int j = 0; j < 8; ++j) EXPECT_EQ(spec::get_field(t3, j, 3), (uint32_t)j);
}

TEST(SpecOracle, SplitOfEachDtypeFollowsTheFormatTable) {
  // The rest field formula of §2 for each dtype, on one value with all bits set but the exponent's lowest.
  struct Row {
    sz_dtype d;
    uint32_t x, exponent, rest;
  } rows[] = {
      {SZ_DTYPE_BF16, 0xFF7Fu, 0xFE, 0xFF},     {SZ_DTYPE_FP16, 0xFBFFu, 0x1E, 0x7FF},
      {SZ_DTYPE_FP32, 0xFF7FFFFFu, 0xFE, 0xFFFFFF}, {SZ_DTYPE_FP8_E4M3, 0xF7u, 0xE, 0xF},
      {SZ_DTYPE_FP8_E5M2, 0xFBu, 0x1E, 0x7},
  };
  for (const Row& r : rows) {
    const DtypeFacts f = dtype_facts(r.d);
    EXPECT_EQ(exponent_field(r.x, f), r.exponent) << sz_dtype_name(r.d);
    const uint32_t rest = ((r.x >> (f.W - 1)) << f.M) | (r.x & ((1u << f.M) - 1));
    EXPECT_EQ(rest, r.rest) << sz_dtype_name(r.d);
    EXPECT_EQ(make_value(rest >> f.M, r.exponent, rest, f), r.x) << sz_dtype_name(r.d);
  }
}

namespace {

// LH32 (docs/FORMAT.md §4.6.1) of the pattern byte i = 7 i + 3 for some lengths, as computed by two implementations
// written from the text alone (tests/spec_format.h and python/tests/format_oracle.py).
struct LhVector {
  size_t len;
  uint32_t lh32;
};
const LhVector kLhVectors[] = {{0, 0x438986ee},    {1, 0x3139221b},    {15, 0xbe97d999},   {16, 0x2f67f415},
                               {17, 0x1ed555c6},   {240, 0x1ba58e19},  {2047, 0xa40193ee}, {2048, 0xb6be3b7b},
                               {2049, 0xeb6007c4}, {5000, 0x58e56618}, {8192, 0x6f883356}};

std::vector<uint8_t> lh_pattern(size_t n) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = (uint8_t)(7 * i + 3);
  return b;
}

// The checksum entry of a one-chunk FP8 frame of `bytes` with LH32 checksums (reference or fast codec).
uint32_t lh_entry(const std::vector<uint8_t>& bytes, bool reference) {
  const sz_params p = make_params(16, SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH);
  std::vector<uint8_t> f;
  EXPECT_EQ(compress_vec(reference, bytes.data(), bytes.size(), SZ_DTYPE_FP8_E4M3, nullptr, &p, &f), SZ_OK);
  return f.size() >= 76 ? (uint32_t)spec::get_le(f.data() + 72, 4) : 0;  // header 64, one index entry, the sum
}

}  // namespace

TEST(SpecOracle, LaneHashOfTheSpecTextMatchesItsKnownAnswers) {
  for (const LhVector& v : kLhVectors) EXPECT_EQ(spec::lh32(lh_pattern(v.len).data(), v.len), v.lh32) << v.len;
}

TEST(SpecOracle, LibraryLaneHashChecksumsAreTheKnownAnswers) {
  for (const LhVector& v : kLhVectors) {
    if (v.len == 0) continue;  // a frame of no values has no chunk
    for (bool reference : {true, false})
      EXPECT_EQ(lh_entry(lh_pattern(v.len), reference), v.lh32) << v.len << (reference ? " reference" : " fast");
  }
}

// Every single-bit change of a 4 KiB chunk, and swaps of its 16-byte pieces or of its two 2 KiB rounds, change the
// LH32 entry: the lanes' keys depend on the word's place in its row, the row and the round.
TEST(SpecOracle, LaneHashSeesEveryBitFlipAndEveryPieceOrRoundSwap) {
  std::vector<uint8_t> b = lh_pattern(4096);
  for (size_t i = 0; i < b.size(); ++i) b[i] = (uint8_t)(b[i] ^ (i * 2654435761u >> 11));
  const uint32_t base = lh_entry(b, false);
  int same = 0;
  for (size_t bit = 0; bit < 8 * b.size(); ++bit) {
    b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    same += lh_entry(b, false) == base;
    b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
  }
  EXPECT_EQ(same, 0) << "bit flips that left the checksum unchanged";
  auto swapped = [&](size_t x, size_t y, size_t len) {
    std::vector<uint8_t> c = b;
    std::swap_ranges(c.begin() + x, c.begin() + x + len, c.begin() + y);
    return lh_entry(c, false);
  };
  for (size_t x = 0; x < 256; x += 7) {
    for (size_t y : {x + 1, x + 32, x + 64, x + 128}) {
      if (y < 256) {
        EXPECT_NE(swapped(16 * x, 16 * y, 16), base) << "pieces " << x << ", " << y;
      }
    }
  }
  EXPECT_NE(swapped(0, 2048, 2048), base) << "rounds";
}
