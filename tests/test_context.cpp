// CPU codec contexts (sz_cctx, sz_dctx): the same frames and statuses as the one-shot calls for every dtype, chunk
// size, flag and thread count; reusable across calls of any size and dtype; and a call on a context allocates
// nothing and starts no thread (the one-shot calls do both), counted by replacing the global operator new, which
// std::thread and the library both go through. Its own executable, so the counting sees only these tests.
#include <atomic>
#include <cstdlib>
#include <new>

#include "test_util.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<uint64_t> g_allocations{0};

void* counted_alloc(size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
}  // namespace

// The replacements pair operator new with malloc and operator delete with free, which GCC's heuristic takes for a
// mismatch once it inlines them into a caller.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

void* operator new(size_t n) {
  void* p = counted_alloc(n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new[](size_t n) {
  void* p = counted_alloc(n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new(size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

using namespace sztest;

namespace {

// Allocations made while fn runs.
template <class Fn>
uint64_t allocations_during(Fn fn) {
  g_allocations = 0;
  g_counting = true;
  fn();
  g_counting = false;
  return g_allocations.load();
}

struct Contexts {
  sz_cctx* c;
  sz_dctx* d;
  explicit Contexts(unsigned threads) : c(sz_cctx_create(threads)), d(sz_dctx_create(threads)) {}
  ~Contexts() {
    sz_cctx_free(c);
    sz_dctx_free(d);
  }
};

std::vector<uint8_t> compress_ctx(sz_cctx* c, const std::vector<uint8_t>& src, sz_dtype d, const sz_params& p,
                                  sz_status* st) {
  const uint64_t n = src.size() / value_bytes(d);
  std::vector<uint8_t> out((size_t)sz_compress_bound(n, d));
  size_t size = 0;
  *st = sz_compress_cctx(c, src.data(), n, d, nullptr, &p, out.data(), out.size(), &size);
  out.resize(*st == SZ_OK ? size : 0);
  return out;
}

}  // namespace

TEST(Context, CreateGivesTheThreadsAskedForAndNullIsHarmless) {
  Contexts one(1), four(4);
  ASSERT_NE(one.c, nullptr);
  ASSERT_NE(four.d, nullptr);
  EXPECT_EQ(sz_cctx_threads(one.c), 1u);
  EXPECT_EQ(sz_dctx_threads(four.d), 4u);
  EXPECT_EQ(sz_cctx_threads(nullptr), 0u);
  sz_cctx* all = sz_cctx_create(0);
  ASSERT_NE(all, nullptr);
  EXPECT_GE(sz_cctx_threads(all), 1u);
  sz_cctx_free(all);
  sz_cctx_free(nullptr);
  sz_dctx_free(nullptr);
  size_t size = 0;
  uint8_t buf[256];
  EXPECT_EQ(sz_compress_cctx(nullptr, buf, 1, SZ_DTYPE_BF16, nullptr, nullptr, buf, sizeof buf, &size),
            SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sz_decompress_dctx(nullptr, buf, sizeof buf, buf, sizeof buf, &size), SZ_ERROR_INVALID_ARGUMENT);
}

// Sizes from empty to several MiB (several threads' worth), every dtype, chunk sizes 2^8 / 2^12 / 2^16, with and
// without checksums, on contexts of 1, 2 and 3 threads: the one-shot frame, and the input back.
TEST(Context, SameFramesAsOneShotCallsForEveryDtypeChunkSizeAndThreadCount) {
  unsigned pick = 0;
  for (unsigned threads : {1u, 2u, 3u}) {
    Contexts ctx(threads);
    ASSERT_NE(ctx.c, nullptr);
    ASSERT_NE(ctx.d, nullptr);
    for (sz_dtype d : kAllDtypes) {
      for (size_t n : {(size_t)0, (size_t)1, (size_t)4097, (size_t)3 << 20}) {
        const std::vector<uint8_t> src = skewed_values(d, n, 7 * n + d, d == SZ_DTYPE_FP16 ? 14 : 7, 0.5, 0.02);
        for (unsigned log2 : {8u, 12u, 16u}) {
          for (uint32_t flags : sztest::kFlagSets) {
            if (!sztest::thin(&pick)) continue;
            const std::string what = "threads " + std::to_string(threads) + " dtype " + std::to_string(d) + " n " +
                                     std::to_string(n) + " chunk_log2 " + std::to_string(log2) + " flags " +
                                     std::to_string(flags);
            sz_params p = sz_params_default();
            p.chunk_log2 = log2;
            p.flags = flags;
            p.threads = threads;
            std::vector<uint8_t> one;
            ASSERT_EQ(compress_vec(false, src.data(), n, d, nullptr, &p, &one), SZ_OK) << what;
            sz_status st;
            const std::vector<uint8_t> frame = compress_ctx(ctx.c, src, d, p, &st);
            ASSERT_EQ(st, SZ_OK) << what;
            ASSERT_EQ(frame, one) << what;
            std::vector<uint8_t> back(src.size() + 1, 0xA5);
            size_t size = 0;
            ASSERT_EQ(sz_decompress_dctx(ctx.d, frame.data(), frame.size(), back.data(), back.size(), &size), SZ_OK)
                << what;
            ASSERT_EQ(size, src.size()) << what;
            if (size != 0) {
              ASSERT_EQ(memcmp(back.data(), src.data(), size), 0) << what;
            }
          }
        }
      }
    }
  }
}

TEST(Context, ErrorsAreThoseOfTheOneShotCalls) {
  Contexts ctx(2);
  const std::vector<uint8_t> src = skewed_values(SZ_DTYPE_BF16, (size_t)1 << 20, 3, 120, 0.5, 0.01);
  const uint64_t n = src.size() / 2;
  std::vector<uint8_t> frame;
  ASSERT_EQ(compress_vec(false, src.data(), n, SZ_DTYPE_BF16, nullptr, nullptr, &frame), SZ_OK);
  std::vector<uint8_t> small(frame.size() - 1);
  size_t size = 0;
  EXPECT_EQ(sz_compress_cctx(ctx.c, src.data(), n, SZ_DTYPE_BF16, nullptr, nullptr, small.data(), small.size(), &size),
            SZ_ERROR_DST_TOO_SMALL);
  EXPECT_EQ(sz_compress_cctx(ctx.c, src.data(), n, (sz_dtype)9, nullptr, nullptr, small.data(), small.size(), &size),
            sz_compress(src.data(), n, (sz_dtype)9, nullptr, nullptr, small.data(), small.size(), &size));
  std::vector<uint8_t> out(src.size());
  EXPECT_EQ(sz_decompress_dctx(ctx.d, frame.data(), frame.size(), out.data(), out.size() - 1, &size),
            SZ_ERROR_DST_TOO_SMALL);
  // A flipped bit in the rest section of the last chunk: both report the checksum error.
  std::vector<uint8_t> bad = frame;
  bad[bad.size() / 2] ^= 0x10;
  const sz_status one = sz_decompress(bad.data(), bad.size(), out.data(), out.size(), &size, 2);
  EXPECT_NE(one, SZ_OK);
  EXPECT_EQ(sz_decompress_dctx(ctx.d, bad.data(), bad.size(), out.data(), out.size(), &size), one);
  // The context still works after errors.
  EXPECT_EQ(sz_decompress_dctx(ctx.d, frame.data(), frame.size(), out.data(), out.size(), &size), SZ_OK);
  EXPECT_EQ(out, src);
}

TEST(Context, CallsOnAContextAllocateNothingAndStartNoThread) {
  const std::vector<uint8_t> big = skewed_values(SZ_DTYPE_BF16, (size_t)4 << 20, 5, 120, 0.5, 0.01);  // 8 MiB
  const std::vector<uint8_t> small = skewed_values(SZ_DTYPE_FP16, 1000, 6, 14, 0.5, 0.01);
  std::vector<uint8_t> frame(sz_compress_bound(big.size() / 2, SZ_DTYPE_BF16)), out(big.size());
  Contexts ctx(4);
  size_t size = 0, frame_size = 0;
  sz_params p = sz_params_default();
  p.threads = 4;
  // The one-shot calls allocate their scratch and std::thread state for every call.
  EXPECT_GT(allocations_during([&] {
              sz_compress(big.data(), big.size() / 2, SZ_DTYPE_BF16, nullptr, &p, frame.data(), frame.size(),
                          &frame_size);
            }),
            0u);
  EXPECT_GT(allocations_during([&] {
              sz_decompress(frame.data(), frame_size, out.data(), out.size(), &size, 4);
            }),
            0u);
  sz_status s1 = SZ_ERROR_INTERNAL, s2 = s1, s3 = s1, s4 = s1;
  const uint64_t a = allocations_during([&] {
    for (int round = 0; round < 3; ++round) {
      s1 = sz_compress_cctx(ctx.c, big.data(), big.size() / 2, SZ_DTYPE_BF16, nullptr, nullptr, frame.data(),
                            frame.size(), &frame_size);
      s2 = sz_decompress_dctx(ctx.d, frame.data(), frame_size, out.data(), out.size(), &size);
      s3 = sz_compress_cctx(ctx.c, small.data(), small.size() / 2, SZ_DTYPE_FP16, nullptr, nullptr, frame.data(),
                            frame.size(), &frame_size);
      s4 = sz_decompress_dctx(ctx.d, frame.data(), frame_size, out.data(), out.size(), &size);
    }
  });
  EXPECT_EQ(a, 0u) << "allocations during calls on contexts";
  EXPECT_EQ(s1, SZ_OK);
  EXPECT_EQ(s2, SZ_OK);
  EXPECT_EQ(s3, SZ_OK);
  EXPECT_EQ(s4, SZ_OK);
  EXPECT_EQ(memcmp(out.data(), small.data(), small.size()), 0);
}
