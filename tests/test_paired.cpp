// Paired rows (docs/FORMAT.md §4.10.6) and row map files (§5.4): the builders' pairs, the parser's statuses, paired
// frames byte for byte between the fast coder (every kernel set) and the reference, round trips of every byte value
// including the reserved pair symbol, the raw fallback for literal pair symbols, and damaged frames and wrong maps
// rejected with the same status by both decoders.
#include <string.h>

#include <map>
#include <memory>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "test_util.h"

using namespace sztest;

namespace {

uint64_t xxh3_64(const void* p, size_t n) { return (uint64_t)XXH3_64bits(p, n); }

const sz_dtype kFp8[] = {SZ_DTYPE_FP8_E4M3, SZ_DTYPE_FP8_E5M2};

uint32_t pair_of(const sz_row_map& m, uint64_t r) {
  const uint8_t* p = m.pair + 4 * r;
  return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// Tokens from a small vocabulary (a few frequent ones), so rows repeat as in real prompts.
std::vector<uint32_t> some_tokens(uint64_t rows, uint32_t vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint32_t> t(rows);
  for (auto& x : t) x = rng.uniform() < 0.5 ? (uint32_t)rng.below(4) : (uint32_t)rng.below(vocab);
  return t;
}

// FP8 KV-like rows (channel_values) in which a row of a token seen before repeats each value of that token's previous
// row with probability `same`; a fraction `nan` of the values are the byte 0x7F (literal pair symbols).
std::vector<uint8_t> paired_values(sz_dtype dt, const std::vector<uint32_t>& tokens, uint32_t period, double same,
                                   double nan, uint64_t seed) {
  std::vector<uint8_t> v = channel_values(dt, 1, tokens.size(), period, seed);
  for (uint8_t& x : v) x = x == 0x7F ? 0x7E : x;  // no NaN but the ones asked for (the wild values reach every byte)
  Rng rng(seed + 1);
  std::map<uint32_t, uint64_t> last;
  for (uint64_t r = 0; r < tokens.size(); ++r) {
    auto it = last.find(tokens[r]);
    for (uint32_t c = 0; c < period; ++c) {
      uint8_t& x = v[r * period + c];
      if (it != last.end() && rng.uniform() < same) x = v[it->second * period + c];
      if (rng.uniform() < nan) x = 0x7F;
    }
    last[tokens[r]] = r;
  }
  return v;
}

std::unique_ptr<CalibratedTable> paired_table(const std::vector<uint8_t>& v, sz_dtype dt, uint64_t rows, uint32_t period,
                                              const sz_row_map& m, uint32_t groups) {
  auto tb = std::make_unique<CalibratedTable>();
  std::vector<uint32_t> counts(sz_symbol_histogram_size(dt, 1, period) / 4, 0);
  EXPECT_EQ(sz_symbol_histogram_add_paired(counts.data(), dt, 1, period, v.data(), rows, &m), SZ_OK);
  tb->file.resize(sz_symbol_table_file_size(dt, 1, period, groups));
  size_t size = 0;
  EXPECT_EQ(sz_symbol_calibrate(counts.data(), dt, 1, period, groups, tb->file.data(), tb->file.size(), &size, nullptr),
            SZ_OK);
  tb->file.resize(size);
  EXPECT_EQ(sz_symbol_table_parse(tb->file.data(), tb->file.size(), &tb->t), SZ_OK);
  tb->workspace.resize(sz_symbol_table_workspace_size(&tb->t));
  EXPECT_EQ(sz_symbol_table_prepare(&tb->t, tb->workspace.data(), tb->workspace.size()), SZ_OK);
  return tb;
}

std::vector<uint8_t> compress_paired(const std::vector<uint8_t>& v, sz_dtype dt, const sz_symbol_table& t,
                                     const sz_row_map* m, const sz_params* p, bool reference) {
  std::vector<uint8_t> out(sz_compress_bound(v.size(), dt), 0xA5);
  size_t size = 0;
  const sz_status s =
      reference ? sz_compress_entropy_paired_reference(v.data(), v.size(), dt, &t, 0, m, p, out.data(), out.size(), &size)
                : sz_compress_entropy_paired(v.data(), v.size(), dt, &t, 0, m, p, out.data(), out.size(), &size);
  EXPECT_EQ(s, SZ_OK) << sz_status_name(s);
  out.resize(size);
  return out;
}

void expect_paired_round_trip(const std::vector<uint8_t>& frame, const sz_symbol_table& t, const sz_row_map* m,
                              const std::vector<uint8_t>& expected, unsigned threads) {
  std::vector<uint8_t> a(expected.size(), 0xAA), b(expected.size(), 0x55);
  size_t wa = 0, wb = 0;
  ASSERT_EQ(sz_decompress_entropy_paired(frame.data(), frame.size(), &t, m, a.data(), a.size(), &wa, threads), SZ_OK);
  ASSERT_EQ(sz_decompress_entropy_paired_reference(frame.data(), frame.size(), &t, m, b.data(), b.size(), &wb), SZ_OK);
  EXPECT_EQ(a, expected);
  EXPECT_EQ(b, expected);
}

// A tensor of paired rows with everything a test needs: its tokens, their row map, the values (each repeating its
// token's previous row's value with probability `same`) and a table calibrated on their paired symbols.
struct PairedCase {
  std::vector<uint32_t> tokens;
  std::unique_ptr<OwnedRowMap> rm;
  std::vector<uint8_t> v;
  std::unique_ptr<CalibratedTable> tb;
};

PairedCase paired_case(sz_dtype dt, uint32_t period, uint64_t rows, uint32_t vocab, uint64_t seed, double same,
                       uint32_t groups) {
  PairedCase c;
  c.tokens = some_tokens(rows, vocab, seed);
  c.rm = row_map_from_tokens(c.tokens);
  c.v = paired_values(dt, c.tokens, period, same, 0, seed + 1);
  c.tb = paired_table(c.v, dt, rows, period, c.rm->m, groups);
  return c;
}

}  // namespace

TEST(RowMaps, BuildersPairEachRowWithThePreviousRowOfItsKey) {
  const std::vector<uint32_t> tokens = {5, 7, 5, 5, 9, 7, 0xFFFFFFFFu, 5, 0xFFFFFFFFu};
  auto r = row_map_from_tokens(tokens);
  const uint32_t want[] = {0, 0, 1, 3, 0, 2, 0, 4, 7};  // the previous row + 1
  ASSERT_EQ(r->m.rows, tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) EXPECT_EQ(pair_of(r->m, i), want[i]) << i;
  // From rows of bytes: the same pairs when equal tokens give equal rows; rows are compared whole.
  const size_t rb = 37;
  std::vector<uint8_t> rows(tokens.size() * rb);
  for (size_t i = 0; i < tokens.size(); ++i)
    for (size_t j = 0; j < rb; ++j) rows[i * rb + j] = (uint8_t)(tokens[i] * 31 + j);
  std::vector<uint8_t> ws(sz_row_map_workspace_size(tokens.size())), file(sz_row_map_file_size(tokens.size()));
  size_t size = 0;
  ASSERT_EQ(sz_row_map_from_rows(rows.data(), tokens.size(), rb, ws.data(), ws.size(), file.data(), file.size(), &size),
            SZ_OK);
  EXPECT_EQ(file, r->file);
  // Many rows, few distinct: every pair is the previous equal token's (checked against a plain scan).
  const std::vector<uint32_t> many = some_tokens(20000, 3000, 4);
  auto big = row_map_from_tokens(many);
  std::map<uint32_t, uint64_t> last;
  for (uint64_t i = 0; i < many.size(); ++i) {
    auto it = last.find(many[i]);
    ASSERT_EQ(pair_of(big->m, i), it == last.end() ? 0u : (uint32_t)(it->second + 1)) << i;
    last[many[i]] = i;
  }
  // Arguments: no rows, a workspace one byte short, a destination one byte short.
  ASSERT_EQ(sz_row_map_from_tokens(tokens.data(), 0, ws.data(), ws.size(), file.data(), file.size(), &size),
            SZ_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(sz_row_map_from_tokens(tokens.data(), tokens.size(), ws.data(), sz_row_map_workspace_size(tokens.size()) - 1,
                                   file.data(), file.size(), &size),
            SZ_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(sz_row_map_from_tokens(tokens.data(), tokens.size(), ws.data(), ws.size(), file.data(), file.size() - 1,
                                   &size),
            SZ_ERROR_DST_TOO_SMALL);
  EXPECT_EQ(sz_row_map_file_size(0), 0u);
  EXPECT_EQ(sz_row_map_file_size((1ull << 28) + 1), 0u);
  EXPECT_EQ(sz_row_map_file_size(3), 16u + 12u + 4u);
}

TEST(RowMaps, ParseRejectsEveryDamageWithTheSpecStatus) {
  auto r = row_map_from_tokens({1, 2, 1, 1});
  const std::vector<uint8_t> f = r->file;
  sz_row_map m;
  for (size_t cut = 0; cut < f.size(); ++cut) EXPECT_EQ(sz_row_map_parse(f.data(), cut, &m), SZ_ERROR_SRC_TRUNCATED);
  auto reseal = [](std::vector<uint8_t> g) {  // a valid checksum over changed bytes: the field checks must catch it
    const size_t body = g.size() - 4;
    const uint64_t id = xxh3_64(g.data(), body);  // §5.4: the checksum is the low 32 bits of XXH3-64 of the body
    for (int i = 0; i < 4; ++i) g[body + i] = (uint8_t)(id >> (8 * i));
    return g;
  };
  std::vector<uint8_t> g = f;
  g[0] ^= 1;
  EXPECT_EQ(sz_row_map_parse(g.data(), g.size(), &m), SZ_ERROR_BAD_MAGIC);
  g = f;
  g[4] = 2;
  EXPECT_EQ(sz_row_map_parse(g.data(), g.size(), &m), SZ_ERROR_UNSUPPORTED_VERSION);
  for (size_t i = 16; i < f.size(); ++i) {  // any change of the pairs or the checksum
    g = f;
    g[i] ^= 0x10;
    EXPECT_EQ(sz_row_map_parse(g.data(), g.size(), &m), SZ_ERROR_CHECKSUM) << i;
  }
  g = f;
  g[5] = 1;  // reserved
  EXPECT_EQ(sz_row_map_parse(reseal(g).data(), g.size(), &m), SZ_ERROR_CORRUPT);
  g = f;
  g[12] = 1;  // reserved
  EXPECT_EQ(sz_row_map_parse(reseal(g).data(), g.size(), &m), SZ_ERROR_CORRUPT);
  g = f;
  g[16 + 4 * 2] = 3;  // row 2 paired with itself (p(r) < r required)
  EXPECT_EQ(sz_row_map_parse(reseal(g).data(), g.size(), &m), SZ_ERROR_CORRUPT);
  g = f;
  g[16 + 4 * 2] = 2;  // row 2 paired with row 1: valid
  EXPECT_EQ(sz_row_map_parse(reseal(g).data(), g.size(), &m), SZ_OK);
  g = f;
  g[8] = 0;  // no rows
  g.resize(20);
  EXPECT_EQ(sz_row_map_parse(reseal(g).data(), g.size(), &m), SZ_ERROR_CORRUPT);
  ASSERT_EQ(sz_row_map_parse(f.data(), f.size(), &m), SZ_OK);
  EXPECT_EQ(m.id, r->m.id);
  EXPECT_EQ(sz_row_map_parse(nullptr, f.size(), &m), SZ_ERROR_INVALID_ARGUMENT);
}

TEST(PairedFrames, FastEqualsReferenceOnEveryKernelSetAndRoundTrips) {
  uint64_t coded = 0, raw = 0;
  for (sz_dtype dt : kFp8) {
    for (uint32_t period : {1u, 7u, 64u, 192u}) {
      const uint64_t rows = period == 1 ? 30000 : 60000 / period + 3;
      const std::vector<uint32_t> tokens = some_tokens(rows, 50, period);
      auto rm = row_map_from_tokens(tokens);
      for (double nan : {0.0, 0.0005}) {
        const std::vector<uint8_t> v = paired_values(dt, tokens, period, 0.6, nan, period + 3);
        auto tb = paired_table(v, dt, rows, period, rm->m, 4);
        for (unsigned cl : {8u, 12u, 16u}) {
          for (uint32_t flags : kFlagSets) {
            SCOPED_TRACE(std::string(sz_dtype_name(dt)) + " period " + std::to_string(period) + " nan " +
                         std::to_string(nan) + " chunk_log2 " + std::to_string(cl) + " flags " + std::to_string(flags));
            sz_params p = make_params(cl, flags);
            const std::vector<uint8_t> ref = compress_paired(v, dt, tb->t, &rm->m, &p, true);
            for (const IsaVariant& isa : isa_variants()) {
              if (!isa.supported) continue;
              ScopedIsa scoped(isa.name);
              ASSERT_EQ(compress_paired(v, dt, tb->t, &rm->m, &p, false), ref) << isa.name;
              expect_paired_round_trip(ref, tb->t, &rm->m, v, 1 + cl % 3);
            }
            sz_frame_info info;
            ASSERT_EQ(sz_frame_info_get(ref.data(), ref.size(), &info), SZ_OK);
            EXPECT_EQ(info.flags, flags | SZ_FLAG_ENTROPY | SZ_FLAG_PAIRED);
            uint64_t id = 0;
            ASSERT_EQ(sz_frame_row_map_ref(ref.data(), ref.size(), &id), SZ_OK);
            EXPECT_EQ(id, rm->m.id);
            coded += info.coded_chunks;
            raw += info.raw_chunks;
            if (nan == 0 && cl == 16 && flags == 0) {
              // The pairs pay: smaller than the frame without them (tables calibrated each on its own symbols).
              auto plain = calibrated_table(v, dt, 1, rows, period, 4);
              const std::vector<uint8_t> unpaired = compress_paired(v, dt, plain->t, nullptr, &p, false);
              EXPECT_LT(ref.size() * 1.15, unpaired.size());
              if (period == 64) {
                // nan = 0: no chunk needs the raw fallback
                EXPECT_EQ(info.raw_chunks, 0u);
              }
            }
            if (nan > 0 && cl == 16) {
              EXPECT_GT(info.raw_chunks, 0u);  // literal 0x7F in every chunk of 2^16
            }
          }
        }
      }
    }
  }
  EXPECT_GT(coded, 100u);
  EXPECT_GT(raw, 10u);
}

// Every byte value, 0x7F included, equal to its partner or not, in rows with and without pairs.
TEST(PairedFrames, EveryByteValueRoundTrips) {
  for (sz_dtype dt : kFp8) {
    const uint32_t period = 256;
    const uint64_t rows = 300;
    std::vector<uint32_t> tokens(rows);
    for (uint64_t r = 0; r < rows; ++r) tokens[r] = (uint32_t)(r % 7);
    auto rm = row_map_from_tokens(tokens);
    std::vector<uint8_t> v(rows * period);
    Rng rng(3);
    for (uint64_t r = 0; r < rows; ++r)
      for (uint32_t c = 0; c < period; ++c) {
        uint8_t x = (uint8_t)((c + r * 13) & 0xFF);
        if (r >= 7 && rng.uniform() < 0.5) x = v[(r - 7) * period + c];  // equal to the partner, 0x7F too
        v[r * period + c] = x;
      }
    for (bool calibrate_paired : {false, true}) {
      auto tb = calibrate_paired ? paired_table(v, dt, rows, period, rm->m, 3)
                                 : calibrated_table(v, dt, 1, rows, period, 3);
      for (unsigned cl : {8u, 10u, 16u}) {
        sz_params p = make_params(cl, SZ_FLAG_CHECKSUMS);
        const std::vector<uint8_t> ref = compress_paired(v, dt, tb->t, &rm->m, &p, true);
        ASSERT_EQ(compress_paired(v, dt, tb->t, &rm->m, &p, false), ref);
        expect_paired_round_trip(ref, tb->t, &rm->m, v, 2);
      }
    }
  }
}

TEST(PairedFrames, WrongMapsAndArgumentsAreRejected) {
  const sz_dtype dt = SZ_DTYPE_FP8_E5M2;
  const uint32_t period = 16;
  const auto [tokens, rm, v, tb] = paired_case(dt, period, 500, 20, 9, 0.7, 2);
  sz_params p = make_params(10, SZ_FLAG_CHECKSUMS);
  const std::vector<uint8_t> f = compress_paired(v, dt, tb->t, &rm->m, &p, false);
  std::vector<uint8_t> out(v.size());
  size_t w = 0;
  // No map, another map, a map with too few rows: the frame is not decoded.
  std::vector<uint32_t> other_tokens = tokens;
  other_tokens[3] ^= 1;
  auto other = row_map_from_tokens(other_tokens);
  std::vector<uint32_t> short_tokens(tokens.begin(), tokens.end() - 1);
  auto shorter = row_map_from_tokens(short_tokens);
  for (const sz_row_map* m : {(const sz_row_map*)nullptr, (const sz_row_map*)&other->m, (const sz_row_map*)&shorter->m}) {
    EXPECT_EQ(sz_decompress_entropy_paired(f.data(), f.size(), &tb->t, m, out.data(), out.size(), &w, 1),
              SZ_ERROR_BOOK_MISMATCH);
    EXPECT_EQ(sz_decompress_entropy_paired_reference(f.data(), f.size(), &tb->t, m, out.data(), out.size(), &w),
              SZ_ERROR_BOOK_MISMATCH);
  }
  EXPECT_EQ(sz_decompress_entropy(f.data(), f.size(), &tb->t, out.data(), out.size(), &w, 1), SZ_ERROR_BOOK_MISMATCH);
  // A longer map serves (rows beyond the frame are not read); a map given with a frame without pairs is not used.
  std::vector<uint32_t> long_tokens = tokens;
  long_tokens.push_back(1);
  auto longer = row_map_from_tokens(long_tokens);
  const std::vector<uint8_t> f2 = compress_paired(v, dt, tb->t, &longer->m, &p, false);
  expect_paired_round_trip(f2, tb->t, &longer->m, v, 1);
  const std::vector<uint8_t> plain = compress_paired(v, dt, tb->t, nullptr, &p, false);
  expect_paired_round_trip(plain, tb->t, &rm->m, v, 1);
  // Compression: a map short of the rows, a dtype other than FP8, a hand-made map with a forward pair.
  std::vector<uint8_t> dst(sz_compress_bound(v.size(), dt));
  EXPECT_EQ(sz_compress_entropy_paired(v.data(), v.size(), dt, &tb->t, 0, &shorter->m, &p, dst.data(), dst.size(), &w),
            SZ_ERROR_INVALID_ARGUMENT);
  const std::vector<uint8_t> bf = channel_values(SZ_DTYPE_BF16, 1, tokens.size(), period, 1);
  auto btb = calibrated_table(bf, SZ_DTYPE_BF16, 1, tokens.size(), period, 2);
  std::vector<uint8_t> bdst(sz_compress_bound(tokens.size() * period, SZ_DTYPE_BF16));
  EXPECT_EQ(sz_compress_entropy_paired(bf.data(), tokens.size() * period, SZ_DTYPE_BF16, &btb->t, 0, &rm->m, &p,
                                       bdst.data(), bdst.size(), &w),
            SZ_ERROR_INVALID_ARGUMENT);
  std::vector<uint8_t> forged(rm->file.begin() + 16, rm->file.end() - 4);
  forged[4 * 5] = 9;  // row 5 paired with row 8
  sz_row_map bad = rm->m;
  bad.pair = forged.data();
  EXPECT_EQ(sz_compress_entropy_paired(v.data(), v.size(), dt, &tb->t, 0, &bad, &p, dst.data(), dst.size(), &w),
            SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_decompress_entropy_paired(f.data(), f.size(), &tb->t, &bad, out.data(), out.size(), &w, 1),
            SZ_ERROR_INVALID_ARGUMENT);
  std::vector<uint32_t> counts(sz_symbol_histogram_size(dt, 1, period) / 4, 0);
  EXPECT_EQ(sz_symbol_histogram_add_paired(counts.data(), dt, 1, period, v.data(), tokens.size(), &shorter->m),
            SZ_ERROR_INVALID_ARGUMENT);
}

// Damage anywhere in a paired frame: both decoders give the same status (with and without checksums), and with
// checksums every change is caught. Without checksums a pair symbol can land in a row without a pair: corrupt.
TEST(PairedFrames, DamagedFramesGetTheReferenceStatus) {
  const sz_dtype dt = SZ_DTYPE_FP8_E4M3;
  const auto [tokens, rm, v, tb] = paired_case(dt, 24, 400, 30, 12, 0.5, 3);
  for (uint32_t flags : kFlagSets) {
    SCOPED_TRACE(flags);
    sz_params p = make_params(9, flags);
    const std::vector<uint8_t> f = compress_paired(v, dt, tb->t, &rm->m, &p, false);
    std::vector<uint8_t> a(v.size()), b(v.size()), g = f;
    size_t wa = 0, wb = 0;
    Rng rng(17);
    unsigned rejected = 0, corrupt = 0, tried = 0;
    for (size_t i = 64; i < g.size(); i += 1 + (size_t)rng.below(15 * kSanitizerThin)) {
      const uint8_t old = g[i];
      g[i] = (uint8_t)(old ^ (1u << rng.below(8)));
      const sz_status sb = sz_decompress_entropy_paired_reference(g.data(), g.size(), &tb->t, &rm->m, b.data(),
                                                                  b.size(), &wb);
      for (const IsaVariant& isa : isa_variants()) {
        if (!isa.supported) continue;
        ScopedIsa scoped(isa.name);
        const sz_status sa =
            sz_decompress_entropy_paired(g.data(), g.size(), &tb->t, &rm->m, a.data(), a.size(), &wa, 1 + i % 3);
        ASSERT_EQ(sa, sb) << isa.name << ", byte " << i;
        if (sa == SZ_OK) {
          ASSERT_EQ(a, b) << isa.name << ", byte " << i;
        }
      }
      ++tried;
      rejected += sb != SZ_OK;
      corrupt += sb == SZ_ERROR_CORRUPT;
      if (flags != 0) {
        EXPECT_NE(sb, SZ_OK) << "byte " << i;
      }
      g[i] = old;
    }
    EXPECT_GT(rejected, tried / 4);
    EXPECT_GT(corrupt, 10u);
  }
}

// The first rows of every token carry no pair: a pair symbol decoded there is rejected by both decoders, even when
// the chunk's checksum (over its symbols) matches.
TEST(PairedFrames, PairSymbolInARowWithoutPairIsCorrupt) {
  const sz_dtype dt = SZ_DTYPE_FP8_E5M2;
  const uint32_t period = 8;
  std::vector<uint32_t> tokens(64);
  for (size_t r = 0; r < tokens.size(); ++r) tokens[r] = (uint32_t)(r % 4);
  auto rm = row_map_from_tokens(tokens);
  std::vector<uint8_t> v = paired_values(dt, tokens, period, 0.8, 0, 3);
  auto tb = paired_table(v, dt, tokens.size(), period, rm->m, 1);
  sz_params p = make_params(8, SZ_FLAG_CHECKSUMS);
  const std::vector<uint8_t> f = compress_paired(v, dt, tb->t, &rm->m, &p, true);
  // The same frame under a map whose row 5 has no pair (row 5 = token 1's second row, which holds pair symbols).
  std::vector<uint32_t> t2 = tokens;
  t2[1] = 99;  // row 5's partner was row 1: now row 5 pairs with nothing
  auto rm2 = row_map_from_tokens(t2);
  ASSERT_EQ(pair_of(rm2->m, 5), 0u);
  std::vector<uint8_t> g = f;
  for (int i = 0; i < 8; ++i) g[48 + i] = (uint8_t)(rm2->m.id >> (8 * i));
  const uint64_t h = xxh3_64(g.data(), 60);
  for (int i = 0; i < 4; ++i) g[60 + i] = (uint8_t)(h >> (8 * i));
  std::vector<uint8_t> out(v.size());
  size_t w = 0;
  EXPECT_EQ(sz_decompress_entropy_paired_reference(g.data(), g.size(), &tb->t, &rm2->m, out.data(), out.size(), &w),
            SZ_ERROR_CORRUPT);
  EXPECT_EQ(sz_decompress_entropy_paired(g.data(), g.size(), &tb->t, &rm2->m, out.data(), out.size(), &w, 2),
            SZ_ERROR_CORRUPT);
}

// Pieces of a paired frame: partners are rows counted from the frame's start, so a slice must start there (a prefix
// decodes with the same map) and a later piece is refused.
TEST(PairedFrames, OnlyPrefixesAreSlicedOut) {
  const sz_dtype dt = SZ_DTYPE_FP8_E5M2;
  const auto [tokens, rm, v, tb] = paired_case(dt, 16, 256, 10, 2, 0.6, 2);
  sz_params p = make_params(8, SZ_FLAG_CHECKSUMS);
  const std::vector<uint8_t> f = compress_paired(v, dt, tb->t, &rm->m, &p, false);
  sz_frame_piece piece;
  EXPECT_EQ(sz_frame_slice_locate(f.data(), f.size(), 256, 256, &piece), SZ_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(sz_frame_slice_locate(f.data(), f.size(), 0, 1024, &piece), SZ_OK);
  std::vector<uint8_t> out(sz_compress_bound(1024, dt));
  ASSERT_EQ(sz_frame_slice(f.data(), f.size(), 0, 1024, f.data() + piece.index.frame_offset, piece.index.size,
                           out.data(), out.size(), &piece),
            SZ_OK);
  // The slice's frame: its header and index, then the sections as they lie in the whole frame.
  out.resize(piece.frame_size);
  for (const sz_frame_span* sp : {&piece.checksums, &piece.rest, &piece.exponents})
    memcpy(out.data() + sp->piece_offset, f.data() + sp->frame_offset, (size_t)sp->size);
  const std::vector<uint8_t> want(v.begin(), v.begin() + 1024);
  expect_paired_round_trip(out, tb->t, &rm->m, want, 1);
}
