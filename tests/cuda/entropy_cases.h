// entropy_cases.h — version 3 (max mode) cases shared by the CUDA codec's test suites (the GPU one and the emulated
// one): CPU-encoded frames, and the hand-made tables that reach the coder's corners.
#pragma once

#include <string>
#include <vector>

#include "test_util.h"

namespace sztest {

// The CPU coder's version 3 frame of `values` (tensor `tensor` of the table).
inline std::vector<uint8_t> entropy_frame(const std::vector<uint8_t>& values, sz_dtype dtype,
                                          const sz_symbol_table& t, uint32_t tensor, unsigned chunk_log2,
                                          uint32_t flags) {
  const uint64_t n = values.size() / sz_dtype_size(dtype);
  std::vector<uint8_t> out(sz_compress_bound(n, dtype));
  sz_params p = sz_params_default();
  p.chunk_log2 = chunk_log2;
  p.flags = flags;
  size_t size = 0;
  EXPECT_EQ(sz_compress_entropy(values.data(), n, dtype, &t, tensor, &p, out.data(), out.size(), &size), SZ_OK);
  out.resize(size);
  return out;
}

// Hand-made tables that reach the coder's corners (a group that escapes everything, one of a single symbol, sparse
// random symbol sets with long runs of unused symbols), and the layouts off the fast path: a group map too long
// for shared memory (period 9000) and more groups than shared memory holds (tables read from the image). decode:
// (frame, table, capacity) -> a result with launch, status, guard_ok and out. Returns the cases run.
template <class Decode>
int entropy_hand_table_cases(Decode decode) {
  const sz_dtype dtypes[] = {SZ_DTYPE_BF16, SZ_DTYPE_FP16, SZ_DTYPE_FP32, SZ_DTYPE_FP8_E4M3, SZ_DTYPE_FP8_E5M2};
  const struct {
    uint32_t period, groups;
  } layouts[] = {{1, 7}, {33, 7}, {192, 200}, {9000, 7}};
  int cases = 0;
  for (sz_dtype dt : dtypes)
    for (const auto& lo : layouts) {
      auto h = hand_table(dt, 2, lo.period, lo.groups, 500 + lo.period);
      for (uint64_t n : {33ull, 4097ull, 70001ull}) {
        const std::vector<uint8_t> v = hand_values(*h, dt, 1, n, n % 2 ? 0.01 : 0.3, n + lo.period);
        for (unsigned log2 : {8u, 12u}) {
          const uint32_t flags = n == 33 ? 0u : n == 4097 ? (uint32_t)SZ_FLAG_CHECKSUMS
                                                          : (uint32_t)(SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH);
          SCOPED_TRACE("dtype " + std::to_string(dt) + " period " + std::to_string(lo.period) + " groups " +
                       std::to_string(lo.groups) + " n " + std::to_string(n) + " chunk 2^" + std::to_string(log2));
          const std::vector<uint8_t> frame = entropy_frame(v, dt, h->t, 1, log2, flags);
          const auto d = decode(frame, h->t, v.size());
          EXPECT_EQ(d.launch, SZ_OK);
          EXPECT_EQ(d.status, SZ_OK) << sz_status_name((sz_status)d.status);
          EXPECT_TRUE(d.guard_ok);
          EXPECT_TRUE(d.out == v);
          ++cases;
        }
      }
    }
  return cases;
}

// What an encoder under test returns: the launch's status, the frame (resized to *d_frame_size), and whether the
// bytes around the frame's buffer (and after the frame, up to the bound) were left alone.
struct EncodedFrame {
  sz_status launch = SZ_OK;
  uint64_t frame_size = ~0ull;
  std::vector<uint8_t> frame;
  bool guard_ok = true;
};

// The GPU encoder's frames against the reference coder's, byte for byte, and their decode on the GPU decoder: every
// dtype, every checksum kind, chunks of 2^8, 2^11 and (once per dtype) 2^16 values, n in {0, 1, 31, 33, S - 1, S + 1,
// 3 S + 17}, KV-like values and noise (raw chunks), inputs at offsets 0, 1 and 3 of their buffer (unaligned for
// every dtype but FP8), and hand-made tables at the coder's corners, including the layouts whose tables are read
// from the image (a group map too long for shared memory, more groups than shared memory holds).
// encode(values, offset, n, dtype, table, tensor, params) -> EncodedFrame; decode(frame, table, capacity) -> a
// result with launch, status, guard_ok and out. Returns the frames compared.
template <class Encode, class Decode>
int entropy_encoder_cases(Encode encode, Decode decode) {
  const sz_dtype dtypes[] = {SZ_DTYPE_BF16, SZ_DTYPE_FP16, SZ_DTYPE_FP32, SZ_DTYPE_FP8_E4M3, SZ_DTYPE_FP8_E5M2};
  const uint32_t kinds[] = {0, SZ_FLAG_CHECKSUMS, SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH};
  int cases = 0;
  auto check = [&](const std::vector<uint8_t>& buf, size_t off, uint64_t n, sz_dtype dt, const sz_symbol_table& t,
                   uint32_t tensor, unsigned log2, uint32_t flags, const std::string& what) {
    SCOPED_TRACE(what + " dtype " + std::to_string(dt) + " n " + std::to_string(n) + " chunk 2^" +
                 std::to_string(log2) + " flags " + std::to_string(flags) + " offset " + std::to_string(off));
    const size_t vb = sz_dtype_size(dt);
    const std::vector<uint8_t> values(buf.begin() + off, buf.begin() + off + n * vb);
    sz_params p = sz_params_default();
    p.chunk_log2 = log2;
    p.flags = flags;
    std::vector<uint8_t> want(sz_compress_bound(n, dt));
    size_t want_size = 0;
    ASSERT_EQ(sz_compress_entropy_reference(values.data(), n, dt, &t, tensor, &p, want.data(), want.size(),
                                            &want_size),
              SZ_OK);
    want.resize(want_size);
    const EncodedFrame e = encode(buf, off, n, dt, t, tensor, p);
    ASSERT_EQ(e.launch, SZ_OK);
    EXPECT_TRUE(e.guard_ok);
    EXPECT_EQ(e.frame_size, want.size());
    EXPECT_TRUE(e.frame == want) << "the GPU frame differs from the reference's";
    if (n > 0 && e.frame == want) {
      const auto d = decode(e.frame, t, values.size());
      EXPECT_EQ(d.status, SZ_OK);
      EXPECT_TRUE(d.out == values);
    }
    ++cases;
  };
  for (sz_dtype dt : dtypes) {
    constexpr uint32_t kTensors = 2, kPeriod = 48, kTokens = 200;
    const size_t vb = sz_dtype_size(dt);
    const std::vector<uint8_t> kv = channel_values(dt, kTensors, kTokens, kPeriod, 31 + dt);
    auto tb = calibrated_table(kv, dt, kTensors, kTokens, kPeriod, 6);
    const std::vector<uint8_t> t1(kv.begin() + (size_t)kTokens * kPeriod * vb, kv.end());  // 9600 values
    const std::vector<uint8_t> noise = random_bytes(t1.size(), 7 + dt);
    int i = 0;
    for (unsigned log2 : {8u, 11u}) {
      const uint64_t S = 1ull << log2;
      for (uint64_t n : {(uint64_t)0, (uint64_t)1, (uint64_t)31, (uint64_t)33, S - 1, S + 1, 3 * S + 17}) {
        const uint32_t flags = kinds[i % 3];
        const size_t off = (size_t)(i % 3 == 2 ? 3 : i % 3);
        ++i;
        if ((n + 1) * vb + off > t1.size()) continue;
        check(t1, off, n, dt, tb->t, 1, log2, flags, "kv");
        if (n > S) check(noise, off, n, dt, tb->t, 1, log2, kinds[(i + 1) % 3], "noise");
      }
    }
    // The recommended chunk, a partial second chunk.
    std::vector<uint8_t> big;
    while (big.size() < ((1u << 16) + 300) * vb) big.insert(big.end(), t1.begin(), t1.end());
    check(big, 0, (1u << 16) + 300, dt, tb->t, 1, 16, SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH, "kv");
    // Hand-made tables; the last two layouts are off the shared-memory path.
    const struct {
      uint32_t period, groups;
    } layouts[] = {{1, 7}, {33, 7}, {192, 200}, {9000, 7}};
    for (const auto& lo : layouts) {
      auto h = hand_table(dt, 2, lo.period, lo.groups, 700 + lo.period);
      const uint64_t n = 2500 + lo.period % 7;
      const std::vector<uint8_t> v = hand_values(*h, dt, 1, n, lo.period % 2 ? 0.01 : 0.3, n + lo.period);
      check(v, 0, n, dt, h->t, 1, 8, kinds[lo.period % 3], "hand period " + std::to_string(lo.period));
    }
  }
  return cases;
}

}  // namespace sztest
