// Properties of the API contract beyond single round trips: no alignment is assumed for any buffer
// (docs/FORMAT.md §1), every function is reentrant (concurrent calls on separate buffers), out-of-range value counts
// are refused without touching the input, and output buffers larger than needed are not written past the result.
#include <stdlib.h>

#include <thread>

#include "test_util.h"

using namespace sztest;

namespace {

// Copies bytes into a heap block at the given misalignment; the returned pointer is inside `storage`.
uint8_t* misaligned_copy(const std::vector<uint8_t>& bytes, size_t misalign, std::vector<uint8_t>* storage) {
  storage->assign(bytes.size() + 64, 0);
  uint8_t* base = storage->data();
  const size_t fix = (64 - ((uintptr_t)base & 63)) & 63;  // first 64-byte boundary, then the misalignment
  uint8_t* p = base + (fix + misalign) % 64;
  if (!bytes.empty()) memcpy(p, bytes.data(), bytes.size());
  return p;
}

const char* const kIsas[] = {"portable", "avx2", "avx512", nullptr};

}  // namespace

TEST(Alignment, UnalignedSourcesAndDestinationsGiveTheSameFramesAndValues) {
  for (sz_dtype d : kAllDtypes) {
    const unsigned E = dtype_facts(d).E;
    const uint64_t n = 20011;
    const std::vector<uint8_t> src = skewed_values(d, n, 5 + d, E == 8 ? 121 : 7, 0.5, 0.01);
    const sz_codebook cb = centered_codebook(d, E > 4 ? 4 : 3, E > 4 ? 16 : 8, E == 8 ? 121 : 7);
    const sz_params p = make_params(8, SZ_FLAG_CHECKSUMS, 2);
    std::vector<uint8_t> ref;
    ASSERT_EQ(compress_vec(true, src.data(), n, d, &cb, &p, &ref), SZ_OK);
    for (const char* isa : kIsas) {
      ASSERT_EQ(sz_set_cpu_isa(isa), SZ_OK);
      for (size_t mis : {1u, 2u, 3u, 5u, 7u, 13u, 33u}) {
        std::vector<uint8_t> s_store, d_store, f_store, o_store;
        const uint8_t* s = misaligned_copy(src, mis, &s_store);
        uint8_t* dst = misaligned_copy(std::vector<uint8_t>(ref.size() + 16), (mis * 3) % 64, &d_store);
        size_t size = 0;
        for (bool reference : {false, true}) {
          const sz_status st = reference
                                   ? sz_compress_reference(s, n, d, &cb, &p, dst, ref.size() + 16, &size)
                                   : sz_compress(s, n, d, &cb, &p, dst, ref.size() + 16, &size);
          ASSERT_EQ(st, SZ_OK) << sz_dtype_name(d) << " misalign " << mis;
          ASSERT_EQ(size, ref.size());
          EXPECT_EQ(memcmp(dst, ref.data(), size), 0) << sz_dtype_name(d) << " misalign " << mis;
        }
        const uint8_t* f = misaligned_copy(ref, mis, &f_store);
        uint8_t* out = misaligned_copy(std::vector<uint8_t>(src.size()), (mis * 5) % 64, &o_store);
        for (bool reference : {false, true}) {
          memset(out, 0, src.size());
          const sz_status st = reference ? sz_decompress_reference(f, ref.size(), out, src.size(), &size)
                                         : sz_decompress(f, ref.size(), out, src.size(), &size, 2);
          ASSERT_EQ(st, SZ_OK) << sz_dtype_name(d) << " misalign " << mis;
          EXPECT_EQ(memcmp(out, src.data(), src.size()), 0) << sz_dtype_name(d) << " misalign " << mis;
        }
      }
    }
    ASSERT_EQ(sz_set_cpu_isa(nullptr), SZ_OK);
  }
}

TEST(OutputBuffers, NothingIsWrittenPastTheResult) {
  for (sz_dtype d : kAllDtypes) {
    const uint64_t n = 3001;
    const std::vector<uint8_t> src = skewed_values(d, n, 9, dtype_facts(d).E == 8 ? 121 : 7, 0.5, 0.02);
    std::vector<uint8_t> ref;
    ASSERT_EQ(compress_vec(true, src.data(), n, d, nullptr, nullptr, &ref), SZ_OK);
    for (bool reference : {false, true}) {
      std::vector<uint8_t> dst(ref.size() + 256, 0xC3);
      size_t size = 0;
      ASSERT_EQ(reference ? sz_compress_reference(src.data(), n, d, nullptr, nullptr, dst.data(), dst.size(), &size)
                          : sz_compress(src.data(), n, d, nullptr, nullptr, dst.data(), dst.size(), &size),
                SZ_OK);
      for (size_t i = size; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xC3) << "compress wrote byte " << i;
      std::vector<uint8_t> out(src.size() + 256, 0x3C);
      ASSERT_EQ(reference ? sz_decompress_reference(ref.data(), ref.size(), out.data(), out.size(), &size)
                          : sz_decompress(ref.data(), ref.size(), out.data(), out.size(), &size, 2),
                SZ_OK);
      ASSERT_EQ(size, src.size());
      for (size_t i = size; i < out.size(); ++i) ASSERT_EQ(out[i], 0x3C) << "decompress wrote byte " << i;
    }
  }
}

TEST(ValueCounts, CountsOfTwoTo48AndMoreAreRefusedWithoutReadingTheInput) {
  // The format holds n < 2^48. A tiny source buffer: if the call read it, ASan would report it.
  const std::vector<uint8_t> src(16, 0);
  std::vector<uint8_t> dst(4096);
  for (uint64_t n : {(uint64_t)1 << 48, ((uint64_t)1 << 48) + 1, ~(uint64_t)0 / 4}) {
    for (bool reference : {false, true}) {
      size_t size = 0;
      const sz_status st =
          reference ? sz_compress_reference(src.data(), n, SZ_DTYPE_FP8_E4M3, nullptr, nullptr, dst.data(), dst.size(),
                                            &size)
                    : sz_compress(src.data(), n, SZ_DTYPE_FP8_E4M3, nullptr, nullptr, dst.data(), dst.size(), &size);
      EXPECT_TRUE(st == SZ_ERROR_INVALID_ARGUMENT || st == SZ_ERROR_DST_TOO_SMALL) << "n=" << n << " gave "
                                                                                   << status_str(st);
    }
  }
}

TEST(Reentrancy, ConcurrentCallsOnSeparateBuffersGiveTheSameResults) {
  struct Job {
    sz_dtype d;
    std::vector<uint8_t> src, frame;
  };
  std::vector<Job> jobs;
  for (sz_dtype d : kAllDtypes) {
    for (int r = 0; r < 2; ++r) {
      Job j{d, skewed_values(d, 150000 + 77 * r, 40 + r + d, dtype_facts(d).E == 8 ? 121 : 7, 0.5, 0.01), {}};
      ASSERT_EQ(compress_vec(true, j.src.data(), j.src.size() / value_bytes(d), d, nullptr, nullptr, &j.frame), SZ_OK);
      jobs.push_back(std::move(j));
    }
  }
  std::vector<int> ok(jobs.size(), 0);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < jobs.size(); ++i) {
    threads.emplace_back([&, i] {
      const Job& j = jobs[i];
      const uint64_t n = j.src.size() / value_bytes(j.d);
      int good = 1;
      for (int rep = 0; rep < 3; ++rep) {
        const sz_params p = make_params(12, sz_params_default().flags, 1 + rep);
        std::vector<uint8_t> f(sz_compress_bound(n, j.d)), out(j.src.size());
        size_t fs = 0, os = 0;
        good &= sz_compress(j.src.data(), n, j.d, nullptr, &p, f.data(), f.size(), &fs) == SZ_OK;
        f.resize(fs);
        good &= f == j.frame;
        good &= sz_decompress(j.frame.data(), j.frame.size(), out.data(), out.size(), &os, 1 + rep) == SZ_OK;
        good &= out == j.src;
        sz_histogram h;
        sz_codebook cb;
        good &= sz_histogram_init(&h, j.d) == SZ_OK && sz_histogram_add(&h, j.src.data(), n) == SZ_OK &&
                sz_calibrate(&h, &cb, nullptr) == SZ_OK;
      }
      ok[i] = good;
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(ok[i], 1) << "job " << i << " (" << sz_dtype_name(jobs[i].d) << ")";
}
