// Frames in pieces (sz_frame_layout_get, sz_frame_builder_*, sz_frame_slice*): a frame spliced from the frames of
// its pieces is byte for byte the frame of one call, a piece cut out of a frame is byte for byte the frame of the
// piece's values (so it decodes to them), for every dtype, chunk size, checksum kind and frame version; and every
// malformed piece, header, index or buffer is rejected with its status and changes nothing.
#include <cstring>
#include <functional>

#include "test_util.h"

using namespace sztest;

namespace {

// Compresses m values at p into a frame (one coder: version 1, 2 or 3 with fixed parameters).
using Coder = std::function<std::vector<uint8_t>(const uint8_t* p, uint64_t m)>;
// Decodes a whole frame of m values.
using Decoder = std::function<std::vector<uint8_t>(const std::vector<uint8_t>& frame, uint64_t m)>;

Coder v1_coder(sz_dtype dt, const sz_params& params) {
  return [dt, params](const uint8_t* p, uint64_t m) {
    std::vector<uint8_t> out;
    static const uint8_t zero[8] = {0};
    EXPECT_EQ(compress_vec(false, m ? p : zero, m, dt, nullptr, &params, &out), SZ_OK);
    return out;
  };
}

Decoder v1_decoder(sz_dtype dt) {
  return [dt](const std::vector<uint8_t>& frame, uint64_t m) {
    std::vector<uint8_t> out;
    EXPECT_EQ(decompress_vec(false, frame, size_t(m * sz_dtype_size(dt)), &out), SZ_OK);
    return out;
  };
}

// The frame of values[0, n) spliced from the frames of pieces of `piece` values, through a builder.
std::vector<uint8_t> splice(const Coder& code, const std::vector<uint8_t>& values, sz_dtype dt, uint64_t piece) {
  const size_t vb = sz_dtype_size(dt);
  const uint64_t n = values.size() / vb;
  sz_frame_builder b;
  EXPECT_EQ(sz_frame_builder_begin(&b, n), SZ_OK);
  std::vector<uint8_t> whole(size_t(sz_compress_bound(n, dt)), 0xEE);
  uint64_t v0 = 0;
  do {
    const uint64_t m = std::min(piece, n - v0);
    std::vector<uint8_t> f = code(values.data() + v0 * vb, m);
    std::vector<uint8_t> index(f.size());
    sz_frame_piece p;
    EXPECT_EQ(sz_frame_builder_add(&b, f.data(), f.size(), index.data(), index.size(), &p), SZ_OK);
    EXPECT_EQ(p.first_value, v0);
    EXPECT_EQ(p.n_values, m);
    EXPECT_EQ(p.frame_size, f.size());
    for (const sz_frame_span* s : {&p.index, &p.checksums, &p.rest, &p.exponents}) {
      EXPECT_LE(s->frame_offset + s->size, whole.size());
      EXPECT_LE(s->piece_offset + s->size, f.size());
    }
    std::memcpy(whole.data() + p.index.frame_offset, index.data(), size_t(p.index.size));
    for (const sz_frame_span* s : {&p.checksums, &p.rest, &p.exponents})
      if (s->size) std::memcpy(whole.data() + s->frame_offset, f.data() + s->piece_offset, size_t(s->size));
    v0 += m;
  } while (v0 < n);
  uint64_t size = 0;
  EXPECT_EQ(sz_frame_builder_finish(&b, whole.data(), whole.size(), &size), SZ_OK);
  whole.resize(size_t(size));
  return whole;
}

// Cuts `whole` into pieces of `piece` values; each must be the frame of its values and decode to them.
void check_slices(const Coder& code, const Decoder& decode, const std::vector<uint8_t>& whole,
                  const std::vector<uint8_t>& values, sz_dtype dt, uint64_t piece, const std::string& what) {
  const size_t vb = sz_dtype_size(dt);
  const uint64_t n = values.size() / vb;
  uint64_t v0 = 0;
  do {
    const uint64_t m = std::min(piece, n - v0);
    sz_frame_piece loc, p;
    ASSERT_EQ(sz_frame_slice_locate(whole.data(), SZ_FRAME_HEADER_SIZE, v0, m, &loc), SZ_OK) << what;
    ASSERT_LE(loc.index.frame_offset + loc.index.size, whole.size()) << what;
    std::vector<uint8_t> dst(size_t(sz_compress_bound(m, dt)), 0xEE);
    ASSERT_EQ(sz_frame_slice(whole.data(), SZ_FRAME_HEADER_SIZE, v0, m, whole.data() + loc.index.frame_offset,
                             size_t(loc.index.size), dst.data(), dst.size(), &p),
              SZ_OK)
        << what << " piece at " << v0;
    EXPECT_EQ(p.checksums.frame_offset, loc.checksums.frame_offset);
    EXPECT_EQ(p.rest.frame_offset, loc.rest.frame_offset);
    for (const sz_frame_span* s : {&p.checksums, &p.rest, &p.exponents})
      if (s->size) std::memcpy(dst.data() + s->piece_offset, whole.data() + s->frame_offset, size_t(s->size));
    dst.resize(size_t(p.frame_size));
    EXPECT_TRUE(dst == code(values.data() + v0 * vb, m)) << what << ": piece at " << v0 << " is not its frame";
    const std::vector<uint8_t> out = decode(dst, m);
    EXPECT_TRUE(out.size() == m * vb && std::equal(out.begin(), out.end(), values.begin() + long(v0 * vb)))
        << what << ": piece at " << v0 << " decodes to other values";
    v0 += m;
  } while (v0 < n);
}

}  // namespace

TEST(FrameLayout, MatchesTheFrameOfOneCall) {
  for (sz_dtype dt : {SZ_DTYPE_BF16, SZ_DTYPE_FP32, SZ_DTYPE_FP8_E4M3})
    for (uint32_t flags : kFlagSets) {
      const uint64_t n = 3000;
      const std::vector<uint8_t> v = skewed_values(dt, n, 1, dt == SZ_DTYPE_FP8_E4M3 ? 7 : 120, 0.5, 0.05);
      const std::vector<uint8_t> f = v1_coder(dt, make_params(8, flags))(v.data(), n);
      sz_frame_layout l;
      ASSERT_EQ(sz_frame_layout_get(f.data(), SZ_FRAME_HEADER_SIZE, &l), SZ_OK);
      EXPECT_EQ(l.n_values, n);
      EXPECT_EQ(l.n_chunks, (n + 255) / 256);
      EXPECT_EQ(l.index_offset, uint64_t(SZ_FRAME_HEADER_SIZE));
      EXPECT_EQ(l.index_size, 8 * l.n_chunks);
      EXPECT_EQ(l.checksums_offset, l.index_offset + l.index_size);
      EXPECT_EQ(l.checksums_size, (flags & SZ_FLAG_CHECKSUMS) ? 4 * l.n_chunks : 0);
      EXPECT_EQ(l.rest_offset, l.checksums_offset + l.checksums_size);
      EXPECT_EQ(l.rest_size, (n + 7) / 8 * (8 * sz_dtype_size(dt) - sz_dtype_exponent_bits(dt)));
      EXPECT_EQ(l.exponents_offset, l.rest_offset + l.rest_size);
      EXPECT_EQ(l.exponents_offset + l.exponents_size, f.size());
      EXPECT_EQ(l.frame_size, f.size());
    }
}

TEST(FrameLayout, RejectsWhatTheDecodersReject) {
  const std::vector<uint8_t> v = skewed_values(SZ_DTYPE_BF16, 100, 2, 120);
  std::vector<uint8_t> f = v1_coder(SZ_DTYPE_BF16, sz_params_default())(v.data(), 100);
  sz_frame_layout l;
  EXPECT_EQ(sz_frame_layout_get(nullptr, 64, &l), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_frame_layout_get(f.data(), 64, nullptr), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_frame_layout_get(f.data(), 63, &l), SZ_ERROR_SRC_TRUNCATED);
  f[20] ^= 1;  // a header byte: the header checksum no longer matches
  EXPECT_EQ(sz_frame_layout_get(f.data(), 64, &l), SZ_ERROR_CHECKSUM);
  f[0] ^= 1;
  EXPECT_EQ(sz_frame_layout_get(f.data(), 64, &l), SZ_ERROR_BAD_MAGIC);
}

TEST(FramePieces, SplicedFrameIsTheFrameOfOneCallAndSlicesAreThePiecesFrames) {
  unsigned counter = 0;
  for (sz_dtype dt : {SZ_DTYPE_BF16, SZ_DTYPE_FP16, SZ_DTYPE_FP32, SZ_DTYPE_FP8_E4M3, SZ_DTYPE_FP8_E5M2})
    for (unsigned chunk_log2 : {8u, 10u, 12u})
      for (uint32_t flags : kFlagSets)
        for (uint64_t n : {0ull, 1ull, 255ull, 256ull, 257ull, 4096ull, 5000ull, 20001ull}) {
          if (!thin(&counter)) continue;
          const uint64_t S = uint64_t(1) << chunk_log2;
          const unsigned center = sz_dtype_exponent_bits(dt) == 8 ? 120 : sz_dtype_exponent_bits(dt) == 5 ? 15 : 7;
          const std::vector<uint8_t> v = skewed_values(dt, size_t(n), n + chunk_log2, center, 0.6, 0.03);
          const Coder code = v1_coder(dt, make_params(chunk_log2, flags));
          const std::vector<uint8_t> one = code(v.data(), n);
          for (uint64_t piece : {S, 3 * S}) {
            const std::string what = std::string(sz_dtype_name(dt)) + " chunk 2^" + std::to_string(chunk_log2) +
                                     " flags " + std::to_string(flags) + " n " + std::to_string(n) + " pieces of " +
                                     std::to_string(piece);
            EXPECT_TRUE(splice(code, v, dt, piece) == one) << what << ": spliced frame differs";
            check_slices(code, v1_decoder(dt), one, v, dt, piece, what);
          }
        }
}

TEST(FramePieces, ChannelWindowFramesSpliceAndSliceAtMultiplesOfThePeriod) {
  const sz_dtype dt = SZ_DTYPE_BF16;
  const uint32_t period = 64, tensors = 2;
  const uint64_t tokens = 300;  // 19200 values a tensor
  const std::vector<uint8_t> sample = channel_values(dt, tensors, tokens, period, 5);
  CalibratedBook cb = calibrated_book(sample, dt, tensors, tokens, period, 0);
  const sz_params params = make_params(8, SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH);
  const std::vector<uint8_t> v(sample.begin() + long(tokens * period * 2), sample.end());  // tensor 1
  const sz_channel_book* book = &cb.book;
  uint32_t tensor = 1;
  const Coder code = [&](const uint8_t* p, uint64_t m) {
    std::vector<uint8_t> out(size_t(sz_compress_bound(m, dt)));
    size_t size = 0;
    EXPECT_EQ(sz_compress_channels(p, m, dt, book, tensor, &params, out.data(), out.size(), &size), SZ_OK);
    out.resize(size);
    return out;
  };
  const Decoder decode = [&](const std::vector<uint8_t>& f, uint64_t m) {
    std::vector<uint8_t> out(size_t(m * 2));
    size_t size = 0;
    EXPECT_EQ(sz_decompress_book(f.data(), f.size(), book, out.data(), out.size(), &size, 1), SZ_OK);
    return out;
  };
  const uint64_t n = v.size() / 2;
  const std::vector<uint8_t> one = code(v.data(), n);
  for (uint64_t piece : {256ull, 4096ull}) {
    EXPECT_TRUE(splice(code, v, dt, piece) == one) << piece;
    check_slices(code, decode, one, v, dt, piece, "channels, pieces of " + std::to_string(piece));
  }
  // With a period of 96 values, chunk boundaries 256 and 512 are not period boundaries; 768 is.
  const std::vector<uint8_t> s96 = channel_values(dt, 1, 20, 96, 6);
  CalibratedBook b96 = calibrated_book(s96, dt, 1, 20, 96, 0);
  book = &b96.book;
  tensor = 0;
  std::vector<uint8_t> f(size_t(sz_compress_bound(1920, dt)));
  size_t size = 0;
  ASSERT_EQ(sz_compress_channels(s96.data(), 1920, dt, book, 0, &params, f.data(), f.size(), &size), SZ_OK);
  sz_frame_piece p;
  EXPECT_EQ(sz_frame_slice_locate(f.data(), 64, 256, 512, &p), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_frame_slice_locate(f.data(), 64, 768, 768, &p), SZ_OK);
  sz_frame_builder b;
  ASSERT_EQ(sz_frame_builder_begin(&b, 1920), SZ_OK);
  std::vector<uint8_t> first = code(s96.data(), 256), second = code(s96.data() + 512, 256);
  std::vector<uint8_t> index(64);
  ASSERT_EQ(sz_frame_builder_add(&b, first.data(), first.size(), index.data(), index.size(), &p), SZ_OK);
  EXPECT_EQ(sz_frame_builder_add(&b, second.data(), second.size(), index.data(), index.size(), &p),
            SZ_ERROR_INVALID_ARGUMENT);
}

TEST(FramePieces, EntropyCodedFramesSpliceAndSlice) {
  for (sz_dtype dt : {SZ_DTYPE_BF16, SZ_DTYPE_FP8_E4M3}) {
    const uint32_t period = 32;
    auto table = hand_table(dt, 1, period, 6, 77);
    const uint64_t n = 9000;
    const std::vector<uint8_t> v = hand_values(*table, dt, 0, n, 0.05, 3);
    const sz_params params = make_params(9, SZ_FLAG_CHECKSUMS);
    const sz_symbol_table* t = &table->t;
    const Coder code = [&](const uint8_t* p, uint64_t m) {
      std::vector<uint8_t> out(size_t(sz_compress_bound(m, dt)));
      size_t size = 0;
      static const uint8_t zero[8] = {0};
      EXPECT_EQ(sz_compress_entropy(m ? p : zero, m, dt, t, 0, &params, out.data(), out.size(), &size), SZ_OK);
      out.resize(size);
      return out;
    };
    const Decoder decode = [&](const std::vector<uint8_t>& f, uint64_t m) {
      std::vector<uint8_t> out(size_t(m * sz_dtype_size(dt)));
      size_t size = 0;
      EXPECT_EQ(sz_decompress_entropy(f.data(), f.size(), t, out.data(), out.size(), &size, 1), SZ_OK);
      return out;
    };
    const std::vector<uint8_t> one = code(v.data(), n);
    for (uint64_t piece : {512ull, 2048ull}) {
      EXPECT_TRUE(splice(code, v, dt, piece) == one) << sz_dtype_name(dt) << " " << piece;
      check_slices(code, decode, one, v, dt, piece, std::string("entropy ") + sz_dtype_name(dt));
    }
  }
}

// ---- malformed input ---------------------------------------------------------------------------------------------

namespace {
struct Pieces {
  sz_dtype dt = SZ_DTYPE_BF16;
  std::vector<uint8_t> values = skewed_values(SZ_DTYPE_BF16, 1000, 9, 120, 0.6, 0.05);
  Coder code = v1_coder(SZ_DTYPE_BF16, make_params(8, SZ_FLAG_CHECKSUMS));
  std::vector<uint8_t> frame(uint64_t v0, uint64_t m) const { return code(values.data() + v0 * 2, m); }
};
bool same_bytes(const void* a, const void* b, size_t n) { return std::memcmp(a, b, n) == 0; }
}  // namespace

TEST(FramePieces, BuilderRejectsMismatchedOrMisplacedPiecesAndChangesNothing) {
  Pieces ps;
  sz_frame_builder b;
  ASSERT_EQ(sz_frame_builder_begin(&b, 1000), SZ_OK);
  std::vector<uint8_t> first = ps.frame(0, 512);
  std::vector<uint8_t> index(8 * 4);
  sz_frame_piece p;
  ASSERT_EQ(sz_frame_builder_add(&b, first.data(), first.size(), index.data(), index.size(), &p), SZ_OK);
  sz_frame_builder before = b;
  std::vector<uint8_t> out(64, 0x5A), index2(64, 0x5A);
  const std::vector<uint8_t> untouched = index2;
  auto rejected = [&](const std::vector<uint8_t>& f, sz_status want, const char* what) {
    EXPECT_EQ(sz_frame_builder_add(&b, f.data(), f.size(), index2.data(), index2.size(), &p), want) << what;
    EXPECT_TRUE(same_bytes(&b, &before, sizeof b)) << what << ": the builder changed";
    EXPECT_TRUE(index2 == untouched) << what << ": index_out changed";
  };
  // Other parameters: chunk size, flags, codebook, dtype.
  rejected(v1_coder(ps.dt, make_params(9, SZ_FLAG_CHECKSUMS))(ps.values.data() + 1024, 256), SZ_ERROR_INVALID_ARGUMENT,
           "chunk size");
  rejected(v1_coder(ps.dt, make_params(8, 0))(ps.values.data() + 1024, 256), SZ_ERROR_INVALID_ARGUMENT, "flags");
  {
    sz_codebook cb = centered_codebook(SZ_DTYPE_BF16, 2, 4, 121);
    const sz_params pr = make_params(8, SZ_FLAG_CHECKSUMS);
    std::vector<uint8_t> f;
    ASSERT_EQ(compress_vec(false, ps.values.data() + 1024, 256, ps.dt, &cb, &pr, &f), SZ_OK);
    rejected(f, SZ_ERROR_INVALID_ARGUMENT, "codebook");
    const std::vector<uint8_t> h = skewed_values(SZ_DTYPE_FP16, 256, 3, 15);
    rejected(v1_coder(SZ_DTYPE_FP16, pr)(h.data(), 256), SZ_ERROR_INVALID_ARGUMENT, "dtype");
  }
  // Not a whole number of chunks but at the end; more values than remain; none.
  rejected(ps.frame(512, 300), SZ_ERROR_INVALID_ARGUMENT, "part of a chunk in the middle");
  rejected(ps.code(ps.values.data(), 0), SZ_ERROR_INVALID_ARGUMENT, "an empty piece");
  {
    std::vector<uint8_t> more = skewed_values(SZ_DTYPE_BF16, 600, 4, 120);
    rejected(v1_coder(ps.dt, make_params(8, SZ_FLAG_CHECKSUMS))(more.data(), 600), SZ_ERROR_INVALID_ARGUMENT,
             "too many values");
  }
  // Broken piece frames: the decoders' statuses.
  std::vector<uint8_t> f = ps.frame(512, 488);
  std::vector<uint8_t> bad = f;
  bad[16] ^= 1;
  rejected(bad, SZ_ERROR_CHECKSUM, "header checksum");
  bad = f;
  bad.resize(bad.size() - 1);
  rejected(bad, SZ_ERROR_SRC_TRUNCATED, "truncated piece");
  bad = f;
  bad[64 + 7] |= 0x80;  // chunk 0's mode: 2, reserved
  rejected(bad, SZ_ERROR_CORRUPT, "index entry");
  // index_out too small.
  EXPECT_EQ(sz_frame_builder_add(&b, f.data(), f.size(), index2.data(), 8, &p), SZ_ERROR_DST_TOO_SMALL);
  EXPECT_TRUE(same_bytes(&b, &before, sizeof b));
  // Finishing early, then the last piece (rebased in place) and finishing.
  EXPECT_EQ(sz_frame_builder_finish(&b, out.data(), out.size(), nullptr), SZ_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(sz_frame_builder_add(&b, f.data(), f.size(), f.data() + 64, 8 * 2, &p), SZ_OK);
  EXPECT_EQ(p.first_value, 512u);
  EXPECT_EQ(sz_frame_builder_finish(&b, out.data(), 63, nullptr), SZ_ERROR_DST_TOO_SMALL);
  uint64_t size = 0;
  ASSERT_EQ(sz_frame_builder_finish(&b, out.data(), out.size(), &size), SZ_OK);
  const std::vector<uint8_t> one = ps.frame(0, 1000);
  EXPECT_EQ(size, one.size());
  EXPECT_TRUE(same_bytes(out.data(), one.data(), 64));
  // After the last piece nothing more fits.
  before = b;
  rejected(ps.frame(0, 256), SZ_ERROR_INVALID_ARGUMENT, "after the end");
}

TEST(FramePieces, BuilderArgumentsAreChecked) {
  sz_frame_builder b;
  sz_frame_piece p;
  uint8_t buf[64];
  EXPECT_EQ(sz_frame_builder_begin(nullptr, 10), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_frame_builder_begin(&b, uint64_t(1) << 48), SZ_ERROR_INVALID_ARGUMENT);
  std::memset(&b, 0, sizeof b);  // never begun
  Pieces ps;
  std::vector<uint8_t> f = ps.frame(0, 256);
  std::vector<uint8_t> index(8);
  EXPECT_EQ(sz_frame_builder_add(&b, f.data(), f.size(), index.data(), index.size(), &p), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_frame_builder_finish(&b, buf, sizeof buf, nullptr), SZ_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(sz_frame_builder_begin(&b, 256), SZ_OK);
  EXPECT_EQ(sz_frame_builder_add(&b, nullptr, 0, index.data(), index.size(), &p), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_frame_builder_add(&b, f.data(), f.size(), nullptr, 8, &p), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_frame_builder_add(&b, f.data(), f.size(), index.data(), index.size(), nullptr),
            SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_frame_builder_finish(&b, buf, sizeof buf, nullptr), SZ_ERROR_INVALID_ARGUMENT);  // no piece yet
  EXPECT_EQ(sz_frame_builder_finish(nullptr, buf, sizeof buf, nullptr), SZ_ERROR_INVALID_ARGUMENT);
}

TEST(FramePieces, SliceRejectsMisplacedPiecesBadIndexesAndSmallBuffers) {
  Pieces ps;
  const std::vector<uint8_t> one = ps.frame(0, 1000);
  sz_frame_piece loc, p;
  // Off a chunk boundary, part of a chunk in the middle, past the end, empty, NULLs.
  EXPECT_EQ(sz_frame_slice_locate(one.data(), 64, 100, 256, &loc), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_frame_slice_locate(one.data(), 64, 256, 300, &loc), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_frame_slice_locate(one.data(), 64, 768, 256, &loc), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_frame_slice_locate(one.data(), 64, 256, 0, &loc), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_frame_slice_locate(nullptr, 64, 0, 256, &loc), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_frame_slice_locate(one.data(), 63, 0, 256, &loc), SZ_ERROR_SRC_TRUNCATED);
  ASSERT_EQ(sz_frame_slice_locate(one.data(), 64, 256, 512, &loc), SZ_OK);
  EXPECT_EQ(loc.first_chunk, 1u);
  EXPECT_EQ(loc.n_chunks, 2u);
  EXPECT_EQ(loc.index.frame_offset, 64u);  // the entry of chunk 0 first
  EXPECT_EQ(loc.index.size, 24u);
  std::vector<uint8_t> idx(one.begin() + 64, one.begin() + 88);
  std::vector<uint8_t> dst(size_t(sz_compress_bound(512, ps.dt)), 0x5A);
  const std::vector<uint8_t> untouched = dst;
  auto rejected = [&](const std::vector<uint8_t>& index, size_t cap, sz_status want, const char* what) {
    EXPECT_EQ(sz_frame_slice(one.data(), 64, 256, 512, index.data(), index.size(), dst.data(), cap, &p), want) << what;
    EXPECT_TRUE(dst == untouched) << what << ": dst changed";
  };
  rejected(std::vector<uint8_t>(idx.begin(), idx.begin() + 16), dst.size(), SZ_ERROR_INVALID_ARGUMENT, "short index");
  std::vector<uint8_t> bad = idx;
  bad[8] = bad[9] = 0;  // chunk 1 ends before chunk 0
  bad[10] = bad[11] = 0;
  rejected(bad, dst.size(), SZ_ERROR_CORRUPT, "decreasing ends");
  bad = idx;
  bad[23] |= 0xC0;  // chunk 2's mode 3
  rejected(bad, dst.size(), SZ_ERROR_CORRUPT, "reserved mode");
  bad = idx;
  bad[6] = 0x10;  // chunk 0 ends far past the section
  rejected(bad, dst.size(), SZ_ERROR_CORRUPT, "end past the section");
  rejected(idx, 64 + 8, SZ_ERROR_DST_TOO_SMALL, "small dst");
  ASSERT_EQ(sz_frame_slice(one.data(), 64, 256, 512, idx.data(), idx.size(), dst.data(), dst.size(), &p), SZ_OK);
  EXPECT_LE(p.frame_size, sz_compress_bound(512, ps.dt));
  // The last piece must end where the exponent section does.
  ASSERT_EQ(sz_frame_slice_locate(one.data(), 64, 768, 232, &loc), SZ_OK);
  std::vector<uint8_t> last(one.begin() + long(loc.index.frame_offset),
                            one.begin() + long(loc.index.frame_offset + loc.index.size));
  last[8] = uint8_t(last[8] - 1);  // its end one byte short (a raw record would also mismatch: either is CORRUPT)
  EXPECT_EQ(sz_frame_slice(one.data(), 64, 768, 232, last.data(), last.size(), dst.data(), dst.size(), &p),
            SZ_ERROR_CORRUPT);
}
