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

}  // namespace sztest
