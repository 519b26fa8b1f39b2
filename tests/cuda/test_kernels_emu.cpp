// test_kernels_emu.cpp — the CUDA codec's kernels, compiled for the host and run on the SIMT emulator
// (tests/cuda/emu), against the scalar reference codec: frames byte for byte, decodes value for value, corrupt frames
// rejected as the reference rejects them; the encoder of entropy-coded frames against the reference coder. The same source as the GPU build (src/cuda, through dispatch.cuh) runs
// here with every lane a fiber, so CI, which has no GPU, tests the kernels' logic; the GPU suite
// (test_cuda_codec.cpp) repeats the checks on the device, where races and the memory model are real.
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "codec_cases.h"
#include "entropy_cases.h"
#include "cuda/agent/entropy_decode.cuh"
#include "cuda/agent/entropy_encode.cuh"
#include "emu/kernels.h"
#include "emu/simt_emu.h"
#include "splitzip/splitzip_cuda.h"
#include "test_util.h"

namespace {

using namespace splitzip;
using namespace splitzip::cuda;
using sztest::Rng;
using sztest::test_values;

constexpr unsigned kMaxGrid = 3;  // CTAs per emulated launch: enough warps to contend for tickets and look-backs

using EncodeRunner = void (*)(const EncodeArgs&);
const EncodeRunner kEncodeRunners[kEncodeKernels] = {
#define SZ_X(D, K) emu_encode<D, K>,
    SZ_CUDA_ENCODE_KERNELS(SZ_X)
#undef SZ_X
};

uint64_t g_seed = 1;

// What sz_cuda_compress_workspace_size answers (the CPU-only library has no CUDA entry points).
size_t workspace_bytes(uint64_t n, const sz_params& p) {
  return encode_workspace_bytes(layout::n_chunks(n, p.chunk_log2));
}

// The encoder on the emulator; the frame (resized) or empty with *status set. ws: reused across calls when given.
std::vector<uint8_t> emu_compress(const std::vector<uint8_t>& data, uint64_t n, sz_dtype dtype, const sz_codebook* cb,
                                  const sz_params* p, sz_status* status, std::vector<uint8_t>* ws = nullptr,
                                  const void* const* pages = nullptr, uint64_t page_values = 0,
                                  const sz_channel_book* book = nullptr, uint32_t tensor = 0) {
  const size_t wsz = workspace_bytes(n, *p);
  std::vector<uint8_t> own;
  if (!ws) ws = &own;
  if (ws->size() < wsz) ws->resize(wsz, 0);
  const size_t bound = sz_compress_bound(n, dtype);
  std::vector<uint8_t> dst(bound + 64, 0xA5);  // poison: every byte of the frame must be written
  uint64_t frame_size = ~0ull;
  EncodeArgs a;
  *status = make_encode_args(pages ? nullptr : data.data(), pages, page_values, n, dtype, cb, p, dst.data(), bound,
                             ws->data(), ws->size(), &frame_size, &a, book, tensor);
  if (*status != SZ_OK) return {};
  const int idx = encode_kernel_index(a.dtype, a.k);
  EXPECT_GE(idx, 0);
  a.team = encode_team(a.n_chunks, a.chunk_log2, layout::dtype_traits(a.dtype).value_bits / 8,
                       (uint64_t)kMaxGrid * EncodePolicy::kWarps);
  uint64_t grid = (a.n_chunks * a.team + EncodePolicy::kWarps - 1) / EncodePolicy::kWarps;
  grid = grid < 1 ? 1 : (grid > kMaxGrid ? kMaxGrid : grid);
  const char* why = nullptr;
  const bool ok = simt_emu::launch((unsigned)grid, EncodePolicy::kWarps * 32, encode_kernel_smem(idx),
                                   [&] { kEncodeRunners[idx](a); }, g_seed++, &why);
  EXPECT_TRUE(ok) << "emulated encoder: " << (why ? why : "");
  if (!ok) {
    *status = SZ_ERROR_INTERNAL;
    return {};
  }
  EXPECT_LE(frame_size, bound);
  for (size_t i = bound; i < dst.size(); ++i) EXPECT_EQ(dst[i], 0xA5) << "encoder wrote past the bound";
  if (frame_size > bound) return {};
  dst.resize(frame_size);
  return dst;
}

struct Decoded {
  sz_status launch = SZ_OK;
  int32_t status = -1;
  uint64_t size = ~0ull;
  std::vector<uint8_t> out;
  bool guard_ok = true;
};

Decoded emu_decompress(const std::vector<uint8_t>& frame, size_t dst_capacity, std::vector<uint8_t>* ws = nullptr,
                       void* const* pages = nullptr, uint32_t n_pages = 0, uint64_t page_values = 0,
                       const sz_channel_book* book = nullptr) {
  Decoded r;
  constexpr size_t kGuard = 256;
  std::vector<uint8_t> dst(dst_capacity + kGuard, 0x5A);
  std::vector<uint8_t> own(kDecodeWorkspaceBytes, 0);
  if (!ws) ws = &own;
  // The frame in its own buffer: the decoder must not read past it (the emulator's memory is the host's, so an
  // over-read would show up under ASan / valgrind, not here; the bounds are also what the GPU suite checks).
  std::vector<uint8_t> src(frame);
  src.reserve(1);  // a non-null pointer also for an empty frame
  DecodeArgs a;
  r.launch = make_decode_args(src.data(), frame.size(), pages ? nullptr : dst.data(), dst_capacity, pages, n_pages,
                              page_values, ws->data(), ws->size(), &r.status, pages ? nullptr : &r.size, &a, book);
  if (r.launch != SZ_OK) return r;
  uint64_t grid = (max_chunks_of(frame.size()) + DecodePolicy::kWarps - 1) / DecodePolicy::kWarps;
  grid = grid < 1 ? 1 : (grid > kMaxGrid ? kMaxGrid : grid);
  const char* why = nullptr;
  const bool ok = simt_emu::launch((unsigned)grid, DecodePolicy::kWarps * 32, decode_smem_bytes(),
                                   [&] { decode_warps(a); }, g_seed++, &why);
  EXPECT_TRUE(ok) << "emulated decoder: " << (why ? why : "");
  if (!ok) {
    r.launch = SZ_ERROR_INTERNAL;
    return r;
  }
  for (size_t i = dst_capacity; i < dst.size(); ++i)
    if (dst[i] != 0x5A) r.guard_ok = false;
  if (!pages) {
    dst.resize(r.size == ~0ull ? 0 : std::min<uint64_t>(r.size, dst_capacity));
    r.out = std::move(dst);
  }
  return r;
}

std::vector<uint8_t> ref_compress(const std::vector<uint8_t>& data, uint64_t n, sz_dtype dtype, const sz_codebook& cb,
                                  const sz_params& p) {
  std::vector<uint8_t> out(sz_compress_bound(n, dtype));
  size_t size = 0;
  EXPECT_EQ(sz_compress_reference(data.data(), n, dtype, &cb, &p, out.data(), out.size(), &size), SZ_OK);
  out.resize(size);
  return out;
}

void check_case(const std::vector<uint8_t>& data, uint64_t n, sz_dtype dtype, const sz_codebook& cb,
                const sz_params& p, const std::string& what) {
  const std::vector<uint8_t> ref = ref_compress(data, n, dtype, cb, p);
  sz_status s;
  const std::vector<uint8_t> got = emu_compress(data, n, dtype, &cb, &p, &s);
  ASSERT_EQ(s, SZ_OK) << what;
  ASSERT_EQ(got.size(), ref.size()) << what;
  ASSERT_TRUE(got == ref) << "frames differ: " << what;
  const Decoded d = emu_decompress(ref, data.size());
  ASSERT_EQ(d.launch, SZ_OK) << what;
  ASSERT_EQ(d.status, SZ_OK) << sz_status_name((sz_status)d.status) << ": " << what;
  ASSERT_EQ(d.size, data.size()) << what;
  ASSERT_TRUE(d.out == data) << "decode differs: " << what;
  ASSERT_TRUE(d.guard_ok) << what;
}

std::string describe(unsigned dtype, uint64_t n, unsigned log2, uint32_t flags, unsigned k) {
  return "dtype " + std::to_string(dtype) + " n " + std::to_string(n) + " chunk_log2 " + std::to_string(log2) +
         " flags " + std::to_string(flags) + " k " + std::to_string(k);
}

// ---- the warp forms of XXH3 against libxxhash ---------------------------------------------------------------------

struct BufFetch {
  const uint8_t* p;
  uint8_t byte(uint64_t o) const { return p[o]; }
  uint64_t word(uint64_t o) const { return layout::load_u64(p + o); }
};

// One warp hashes whole chunks round by round (xxh_add_round / xxh_finish, as the kernels do) from their coalesced
// pieces, and buffers of any length through xxh3_64_warp.
TEST(CudaKernelsEmu, Xxh3WarpFormsEqualLibxxhash) {
  const std::vector<uint8_t> data = sztest::random_bytes(1 << 17, 77);
  std::vector<uint32_t> lens;
  for (uint32_t len = 256; len <= (1u << 17); len *= 2) lens.push_back(len);
  for (uint32_t len : {768u, 1280u, 3072u, 5120u, 12288u}) lens.push_back(len);
  for (uint32_t len : lens) {
    uint64_t got = 0;
    const char* why = nullptr;
    ASSERT_TRUE(simt_emu::launch(1, 32, 0, [&] {
      const XxhKeys k = xxh_keys();
      XxhState st = xxh_begin(true);
      const uint32_t rounds = (len + kRoundBytes - 1) / kRoundBytes;
      for (uint32_t r = 0; r < rounds; ++r) {
        uint64_t lo[4] = {0, 0, 0, 0}, hi[4] = {0, 0, 0, 0};
        for (int t = 0; t < 4; ++t) {
          const uint32_t o = r * kRoundBytes + 16 * (simt::lane_id() + 32 * t);
          if (o < len) {
            lo[t] = layout::load_u64(data.data() + o);
            hi[t] = layout::load_u64(data.data() + o + 8);
          }
        }
        xxh_add_round(st, lo, hi, k, r, rounds, len);
      }
      const uint64_t h = xxh_finish(st, k, len);
      if (simt::lane_id() == 5) got = h;
    }, 3, &why)) << why;
    ASSERT_EQ(got, (uint64_t)XXH3_64bits(data.data(), len)) << "round form, len " << len;
  }
  for (size_t len = 0; len < 3000; len += 1 + len / 7) {
    uint64_t got = 0;
    const char* why = nullptr;
    ASSERT_TRUE(simt_emu::launch(1, 32, 0, [&] {
      const uint64_t h = xxh3::xxh3_64_warp(BufFetch{data.data() + 3}, len);
      if (simt::lane_id() == 31) got = h;
    }, 4, &why)) << why;
    ASSERT_EQ(got, (uint64_t)XXH3_64bits(data.data() + 3, len)) << "fetch form, len " << len;
  }
}

// ---- byte equality with the reference ------------------------------------------------------------------------------

TEST(CudaKernelsEmu, FramesEqualReferenceEveryDtypeWidthFlags) {
  int cases = 0;
  for (sz_dtype dtype : sztest::kAllDtypes) {
    const sztest::DtypeFacts f = sztest::dtype_facts(dtype);
    for (size_t n : {(size_t)0, (size_t)1, (size_t)7, (size_t)9, (size_t)257, (size_t)4096, (size_t)3 * 4096 + 5,
                     (size_t)78695}) {
      unsigned center = 0;
      const std::vector<uint8_t> data = test_values(dtype, n, 1000 + n + dtype, &center);
      for (unsigned log2 : {8u, 12u}) {
        for (uint32_t flags : sztest::kFlagSets) {
          for (unsigned k = 1; k <= 4 && k < f.E; ++k) {
            // H32 frames at one width per case (the hash does not depend on it; the other flag sets run every width),
            // which keeps the sanitizer build's run of this loop short.
            if (flags == SZ_FLAG_CHECKSUMS && k != 2) continue;
            const unsigned count = (k == 3) ? 7 : (1u << k);  // one width with an unused code
            const sz_codebook cb = sztest::centered_codebook(dtype, k, count, center);
            check_case(data, n, dtype, cb, sztest::make_params(log2, flags), describe(dtype, n, log2, flags, k));
            if (HasFatalFailure()) return;
            ++cases;
          }
        }
      }
    }
  }
  printf("[ info ] %d emulated (dtype, size, chunk, flags, width) cases byte-identical and decoded\n", cases);
}

// Chunks of 2^16 values: records too large for the encoder's shared-memory record (second pass) and, with many
// escapes, escape lists the decoder reads in place. Plus a chunk size between (2^13).
TEST(CudaKernelsEmu, LargeChunksAndManyEscapes) {
  for (sz_dtype dtype : {SZ_DTYPE_BF16, SZ_DTYPE_FP8_E5M2, SZ_DTYPE_FP32}) {
    for (unsigned log2 : {13u, 16u}) {
      const size_t n = ((size_t)1 << log2) * 2 + 333;
      unsigned center = 0;
      std::vector<uint8_t> data = test_values(dtype, n, 7 + log2, &center);
      const std::vector<uint8_t> noisy = sztest::skewed_values(dtype, n, 8, center, 0.45, 0.25);
      std::copy(noisy.begin(), noisy.begin() + (ptrdiff_t)(noisy.size() / 2), data.begin());
      const sz_codebook cb = sztest::centered_codebook(dtype, 3, 8, center);
      for (uint32_t flags : sztest::kFlagSets) {
        check_case(data, n, dtype, cb, sztest::make_params(log2, flags), describe(dtype, n, log2, flags, 3));
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Real KV (the shipped slice) with a calibrated codebook, checksums on and off.
TEST(CudaKernelsEmu, RealKvSliceEqualsReference) {
  std::vector<uint8_t> data;
  ASSERT_TRUE(sztest::read_file(sztest::repo_path("data/kv_code_bf16_slice.bin"), &data));
  data.resize(std::min<size_t>(data.size(), 2 * 40000));
  const uint64_t n = data.size() / 2;
  sz_histogram hist;
  ASSERT_EQ(sz_histogram_init(&hist, SZ_DTYPE_BF16), SZ_OK);
  ASSERT_EQ(sz_histogram_add(&hist, data.data(), n), SZ_OK);
  sz_codebook cb;
  ASSERT_EQ(sz_calibrate(&hist, &cb, nullptr), SZ_OK);
  for (uint32_t flags : sztest::kFlagSets)
    check_case(data, n, SZ_DTYPE_BF16, cb, sztest::make_params(12, flags), "real KV, flags " + std::to_string(flags));
}

// One workspace for many calls of different sizes: each call leaves it ready for the next (epochs), and state words
// left by a larger earlier call never leak into a later one.
TEST(CudaKernelsEmu, WorkspaceReusedAcrossCalls) {
  std::vector<uint8_t> ws, dws(kDecodeWorkspaceBytes, 0);
  unsigned center = 0;
  for (size_t n : {(size_t)9 * 4096 + 1, (size_t)4096, (size_t)3 * 4096, (size_t)100, (size_t)9 * 4096 + 1}) {
    const std::vector<uint8_t> data = test_values(SZ_DTYPE_BF16, n, n, &center);
    const sz_codebook cb = sztest::centered_codebook(SZ_DTYPE_BF16, 3, 8, center);
    const sz_params p = sztest::make_params(12, SZ_FLAG_CHECKSUMS);
    if (ws.empty()) ws.assign(workspace_bytes(n, p), 0);
    sz_status s;
    const std::vector<uint8_t> got = emu_compress(data, n, SZ_DTYPE_BF16, &cb, &p, &s, &ws);
    ASSERT_EQ(s, SZ_OK);
    ASSERT_TRUE(got == ref_compress(data, n, SZ_DTYPE_BF16, cb, p)) << "n " << n;
    const Decoded d = emu_decompress(got, data.size(), &dws);
    ASSERT_EQ(d.status, SZ_OK);
    ASSERT_TRUE(d.out == data);
  }
  // A workspace that was never zero-filled is refused and left as it was.
  std::vector<uint8_t> junk = sztest::random_bytes(ws.size(), 5), before = junk;
  const std::vector<uint8_t> data = test_values(SZ_DTYPE_BF16, 5000, 3, &center);
  const sz_params p = sztest::make_params(12, 0);
  sz_status s;
  junk.resize(std::max(workspace_bytes(5000, p), junk.size()));
  before = junk;
  uint64_t frame_size = ~0ull;
  std::vector<uint8_t> dst(sz_compress_bound(5000, SZ_DTYPE_BF16));
  EncodeArgs a;
  ASSERT_EQ(make_encode_args(data.data(), nullptr, 0, 5000, SZ_DTYPE_BF16, nullptr, &p, dst.data(), dst.size(),
                             junk.data(), junk.size(), &frame_size, &a),
            SZ_OK);
  const char* why = nullptr;
  const int idx = encode_kernel_index(a.dtype, a.k);
  ASSERT_TRUE(simt_emu::launch(1, EncodePolicy::kWarps * 32, encode_kernel_smem(idx), [&] { kEncodeRunners[idx](a); },
                               1, &why))
      << why;
  EXPECT_EQ(frame_size, 0u) << "an uninitialised workspace must be reported";
  EXPECT_TRUE(junk == before);
  (void)s;
}

// ---- paged and unaligned ---------------------------------------------------------------------------------------------

TEST(CudaKernelsEmu, PagesEqualSingleFrame) {
  for (sz_dtype dtype : {SZ_DTYPE_BF16, SZ_DTYPE_FP16, SZ_DTYPE_FP8_E4M3, SZ_DTYPE_FP32}) {
    const size_t vb = sztest::value_bytes(dtype);
    for (uint64_t page_values : {1000ull, 4096ull, 256ull, 5ull}) {
      for (size_t misalign : {0u, 1u}) {
        const uint32_t n_pages = page_values == 5 ? 301 : 7;
        const uint64_t n = n_pages * page_values;
        unsigned center = 0;
        const std::vector<uint8_t> data = test_values(dtype, n, 4242 + page_values, &center);
        const sz_params p = sztest::make_params(12, SZ_FLAG_CHECKSUMS);
        sz_codebook cb;
        ASSERT_EQ(sz_default_codebook(dtype, SZ_KIND_GENERIC, &cb), SZ_OK);
        const std::vector<uint8_t> single = ref_compress(data, n, dtype, cb, p);
        // Pages scattered in one pool, in reverse order, each at an offset of misalign values.
        const size_t page_bytes = page_values * vb, stride = page_bytes + 64;
        std::vector<uint8_t> pool(stride * n_pages + 64);
        std::vector<void*> hp(n_pages);
        for (uint32_t i = 0; i < n_pages; ++i) {
          hp[i] = pool.data() + (size_t)(n_pages - 1 - i) * stride + misalign * vb;
          memcpy(hp[i], data.data() + i * page_bytes, page_bytes);
        }
        sz_status s;
        const std::vector<uint8_t> frame = emu_compress(data, n, dtype, &cb, &p, &s, nullptr, hp.data(), page_values);
        ASSERT_EQ(s, SZ_OK);
        ASSERT_TRUE(frame == single) << "paged frame differs: dtype " << dtype << " page_values " << page_values;
        std::fill(pool.begin(), pool.end(), 0);
        const Decoded d = emu_decompress(frame, 0, nullptr, hp.data(), n_pages, page_values);
        ASSERT_EQ(d.status, SZ_OK) << sz_status_name((sz_status)d.status);
        std::vector<uint8_t> back(n * vb);
        for (uint32_t i = 0; i < n_pages; ++i) memcpy(back.data() + i * page_bytes, hp[i], page_bytes);
        ASSERT_TRUE(back == data) << "dtype " << dtype << " page_values " << page_values;
        const Decoded fewer = emu_decompress(frame, 0, nullptr, hp.data(), n_pages - 1, page_values);
        EXPECT_EQ(fewer.status, SZ_ERROR_DST_TOO_SMALL);
      }
    }
  }
}

TEST(CudaKernelsEmu, UnalignedBuffers) {
  for (sz_dtype dtype : sztest::kAllDtypes) {
    const size_t vb = sztest::value_bytes(dtype);
    const size_t n = 3 * 4096 + 77;
    unsigned center = 0;
    const std::vector<uint8_t> data = test_values(dtype, n, 31 + dtype, &center);
    const sz_params p = sztest::make_params(12, SZ_FLAG_CHECKSUMS);
    sz_codebook cb;
    ASSERT_EQ(sz_default_codebook(dtype, SZ_KIND_GENERIC, &cb), SZ_OK);
    const std::vector<uint8_t> ref = ref_compress(data, n, dtype, cb, p);
    // Input at an odd value offset, frame at +3, output at +1: pages of one page cover any base address.
    std::vector<uint8_t> in(data.size() + 16);
    memcpy(in.data() + vb, data.data(), data.size());
    const void* one_page[1] = {in.data() + vb};
    sz_status s;
    const std::vector<uint8_t> frame = emu_compress(data, n, dtype, &cb, &p, &s, nullptr, one_page, n);
    ASSERT_EQ(s, SZ_OK);
    ASSERT_TRUE(frame == ref) << "dtype " << dtype;
    std::vector<uint8_t> shifted(ref.size() + 3);
    memcpy(shifted.data() + 3, ref.data(), ref.size());
    std::vector<uint8_t> out(data.size() + 1);
    std::vector<uint8_t> ws(kDecodeWorkspaceBytes, 0);
    int32_t status = -1;
    uint64_t size = 0;
    DecodeArgs a;
    ASSERT_EQ(make_decode_args(shifted.data() + 3, ref.size(), out.data() + 1, data.size(), nullptr, 0, 0, ws.data(),
                               ws.size(), &status, &size, &a),
              SZ_OK);
    const char* why = nullptr;
    ASSERT_TRUE(simt_emu::launch(2, DecodePolicy::kWarps * 32, decode_smem_bytes(), [&] { decode_warps(a); }, 9, &why))
        << why;
    ASSERT_EQ(status, SZ_OK) << sz_status_name((sz_status)status);
    ASSERT_TRUE(std::equal(data.begin(), data.end(), out.begin() + 1)) << "dtype " << dtype;
  }
}

// ---- corrupt frames --------------------------------------------------------------------------------------------------

// book: the channel book of version 2 frames (nullptr: codebook frames).
void check_like_reference(const std::vector<uint8_t>& frame, size_t out_bytes, const std::string& what,
                          sz_status* ref_status = nullptr, int32_t* got_status = nullptr,
                          const sz_channel_book* book = nullptr) {
  std::vector<uint8_t> ref_out(out_bytes + 1);
  size_t ref_size = 0;
  const sz_status ref =
      book ? sz_decompress_book_reference(frame.data(), frame.size(), book, ref_out.data(), out_bytes, &ref_size)
           : sz_decompress_reference(frame.data(), frame.size(), ref_out.data(), out_bytes, &ref_size);
  const Decoded d = emu_decompress(frame, out_bytes, nullptr, nullptr, 0, 0, book);
  if (ref_status) *ref_status = ref;
  if (got_status) *got_status = d.status;
  ASSERT_EQ(d.launch, SZ_OK);
  ASSERT_TRUE(d.guard_ok) << what << ": wrote past the output";
  if (ref == SZ_OK) {
    ASSERT_EQ(d.status, SZ_OK) << what << ": rejects (" << sz_status_name((sz_status)d.status)
                               << ") a frame the reference accepts";
    ref_out.resize(ref_size);
    ASSERT_TRUE(d.out == ref_out) << what;
  } else {
    ASSERT_NE(d.status, SZ_OK) << what << ": accepts a frame the reference rejects with " << sz_status_name(ref);
    ASSERT_EQ(d.size, 0u) << what;
  }
}

// Truncations and bit flips of one dtype's frames, both chunk sizes, with and without checksums. One test per
// dtype keeps each within the sanitizer build's per-test time limit.
void corrupt_frames_rejected_like_reference(sz_dtype dtype) {
  for (unsigned log2 : {8u, 12u}) {
    for (uint32_t flags : sztest::kFlagSets) {
      const sztest::DtypeFacts f = sztest::dtype_facts(dtype);
      const size_t n = 3 * ((size_t)1 << log2) + 9;
      unsigned center = 0;
      const std::vector<uint8_t> data = test_values(dtype, n, 9 + dtype, &center);
      const sz_codebook cb = sztest::centered_codebook(dtype, 2, 4, center);
      const std::vector<uint8_t> frame = ref_compress(data, n, dtype, cb, sztest::make_params(log2, flags));
      const size_t out_bytes = n * (f.W / 8);
      for (size_t len : {(size_t)0, (size_t)10, (size_t)63, (size_t)64, (size_t)100, frame.size() / 2,
                         frame.size() - 1}) {
        std::vector<uint8_t> t(frame.begin(), frame.begin() + (ptrdiff_t)len);
        sz_status ref = SZ_OK;
        int32_t got = -1;
        check_like_reference(t, out_bytes, "truncated to " + std::to_string(len), &ref, &got);
        if (::testing::Test::HasFatalFailure()) return;
        if (len > 0 && len < 64) EXPECT_EQ(got, (int32_t)ref);  // header errors in §4.1's order
      }
      Rng rng(flags + dtype);
      for (size_t byte = 0; byte < frame.size(); ++byte) {
        const bool dense = byte < 64 + 8 * 4 + 4 * 4;
        if (!dense && rng.below(log2 == 8 ? 6 : 48) != 0) continue;
        std::vector<uint8_t> t = frame;
        t[byte] ^= (uint8_t)(1u << rng.below(8));
        sz_status ref = SZ_OK;
        int32_t got = -1;
        check_like_reference(t, out_bytes, "flip at byte " + std::to_string(byte), &ref, &got);
        if (::testing::Test::HasFatalFailure()) return;
        if (byte < 64) EXPECT_EQ(got, (int32_t)ref) << "header flip at byte " << byte;
      }
      const Decoded small = emu_decompress(frame, out_bytes - 1);
      EXPECT_EQ(small.status, SZ_ERROR_DST_TOO_SMALL);
      EXPECT_TRUE(small.guard_ok);
    }
  }
}

TEST(CudaKernelsEmu, CorruptBf16FramesRejectedLikeReference) { corrupt_frames_rejected_like_reference(SZ_DTYPE_BF16); }
TEST(CudaKernelsEmu, CorruptFp16FramesRejectedLikeReference) { corrupt_frames_rejected_like_reference(SZ_DTYPE_FP16); }
TEST(CudaKernelsEmu, CorruptE4m3FramesRejectedLikeReference) {
  corrupt_frames_rejected_like_reference(SZ_DTYPE_FP8_E4M3);
}

// Codes outside the codebook (width 3 with 7 entries: code 7 is unused) in every dtype, at value positions across a
// lane's round (each byte of a chunk's codes set to all ones in turn, sampled): rejected, exactly as the reference.
TEST(CudaKernelsEmu, CodesOutsideTheCodebookRejectedLikeReference) {
  for (sz_dtype dtype : sztest::kAllDtypes) {
    const sztest::DtypeFacts f = sztest::dtype_facts(dtype);
    const size_t n = 2 * 4096 + 77;
    const unsigned center = (1u << (f.E - 1)) - 2;
    const sz_codebook cb = sztest::centered_codebook(dtype, 3, 7, center);
    std::vector<uint8_t> data(n * (f.W / 8));  // exponents from the codebook, but for every 50th value
    Rng rng(77 + dtype);
    for (size_t i = 0; i < n; ++i)
      sztest::store_value(data.data() + i * (f.W / 8), f.W,
                          sztest::make_value(rng.below(2), i % 50 ? cb.values[rng.below(7)] : (1u << f.E) - 1u,
                                             (uint32_t)rng.next(), f));
    const std::vector<uint8_t> frame = ref_compress(data, n, dtype, cb, sztest::make_params(12, 0));
    const layout::FrameOffsets o = layout::frame_offsets(n, 12, false, layout::dtype_traits(dtype), 0);
    const size_t codes = 4096 / 8 * 3;  // a full coded chunk's code bytes
    int rejected = 0;
    for (size_t i = 0; i < codes; i += 13) {
      std::vector<uint8_t> t = frame;
      t[o.exponents + i] = 0xFF;
      sz_status ref = SZ_OK;
      check_like_reference(t, n * (f.W / 8), "code byte " + std::to_string(i) + " of dtype " + std::to_string(dtype),
                           &ref);
      if (HasFatalFailure()) return;
      rejected += ref != SZ_OK;
    }
    EXPECT_GT(rejected, 50) << "dtype " << dtype << ": the first chunk is coded, so most rewrites are invalid";
  }
}

TEST(CudaKernelsEmu, RandomGarbageNeverCrashes) {
  for (unsigned log2 : {8u, 12u}) {
    const size_t n = log2 == 8 ? 5000 : 5 * 4096 + 100;
    unsigned center = 0;
    const std::vector<uint8_t> data = test_values(SZ_DTYPE_BF16, n, 5, &center);
    const sz_codebook cb = sztest::centered_codebook(SZ_DTYPE_BF16, 4, 16, center);
    const std::vector<uint8_t> frame = ref_compress(data, n, SZ_DTYPE_BF16, cb, sztest::make_params(log2, 0));
    Rng rng(1234 + log2);
    for (int iter = 0; iter < 60; ++iter) {
      std::vector<uint8_t> t = frame;
      const int flips = 1 + (int)rng.below(20);
      const size_t lo = 64, span = (iter & 1) ? t.size() - 64 : 8 * ((n + (1u << log2) - 1) >> log2);
      for (int i = 0; i < flips; ++i) t[lo + rng.below(span)] = (uint8_t)rng.next();
      check_like_reference(t, n * 2, "random bytes");
      if (HasFatalFailure()) return;
    }
  }
}

// A coded record larger than the raw one (more escapes than any encoder writes): decoded like the reference.
TEST(CudaKernelsEmu, OversizeCodedRecordDecodesLikeReference) {
  for (sz_dtype dtype : sztest::kAllDtypes) {
    for (uint32_t flags : sztest::kFlagSets) {
      const size_t n = 5 * 4096 + 3;
      unsigned center = 0;
      const std::vector<uint8_t> data = test_values(dtype, n, 71 + dtype, &center);
      const sz_codebook cb = sztest::centered_codebook(dtype, 2, 4, center);
      const std::vector<uint8_t> frame = ref_compress(data, n, dtype, cb, sztest::make_params(12, flags));
      uint64_t chunk = 0;
      const std::vector<uint8_t> big = sztest::recode_raw_chunk_as_coded(frame, &chunk);
      ASSERT_FALSE(big.empty()) << "the test data has no raw chunk (dtype " << dtype << ")";
      const Decoded d = emu_decompress(big, data.size());
      ASSERT_EQ(d.status, SZ_OK) << sz_status_name((sz_status)d.status) << " dtype " << dtype << " chunk " << chunk;
      ASSERT_TRUE(d.out == data) << "dtype " << dtype;
    }
  }
}

TEST(CudaKernelsEmu, EscapeListChecksLikeReference) {
  const uint64_t n = 4 * 4096;
  unsigned center = 0;
  std::vector<uint8_t> data = test_values(SZ_DTYPE_BF16, n, 123, &center);
  const std::vector<uint8_t> calm = sztest::skewed_values(SZ_DTYPE_BF16, n, 5, center, 0.45, 0.05);
  std::copy(calm.begin(), calm.begin() + 2 * 8192, data.begin());  // chunks 0 and 1 coded, with escapes
  const sz_codebook cb = sztest::centered_codebook(SZ_DTYPE_BF16, 3, 8, center);
  const std::vector<uint8_t> frame = ref_compress(data, n, SZ_DTYPE_BF16, cb, sztest::make_params(12, 0));
  namespace lay = splitzip::layout;
  const lay::FrameOffsets o = lay::frame_offsets(n, 12, false, lay::dtype_traits(SZ_DTYPE_BF16), 0);
  const uint64_t begin = lay::load_u64(frame.data() + o.index) & lay::kIndexEndMask;
  const uint64_t entry = lay::load_u64(frame.data() + o.index + 8);
  ASSERT_EQ(entry >> lay::kIndexModeShift, lay::kModeCoded);
  const uint64_t G = 512 * 3, size = (entry & lay::kIndexEndMask) - begin;
  ASSERT_GT((size - G) / 3, 40u) << "chunk 1 needs escapes";
  const size_t rec = o.exponents + begin;
  Rng rng(17);
  unsigned rejected = 0, accepted = 0;
  for (size_t i = G; i < size; ++i) {
    if (i >= G + 8 && rng.below(4) != 0) continue;
    std::vector<uint8_t> t = frame;
    t[rec + i] ^= (uint8_t)(1u << rng.below(8));
    sz_status ref = SZ_OK;
    check_like_reference(t, n * 2, "flip at record byte " + std::to_string(i), &ref);
    if (HasFatalFailure()) return;
    (ref == SZ_OK ? accepted : rejected)++;
  }
  EXPECT_GT(rejected, 30u);
  printf("[ info ] escape lists: %u corrupted records rejected, %u accepted, all like the reference\n", rejected,
         accepted);
}

// ---- channel windows (version 2 frames, docs/FORMAT.md §4.9) ------------------------------------------------------

using EmuBook = sztest::CalibratedBook;

TEST(CudaKernelsEmu, ChannelFramesEqualReference) {
  int cases = 0;
  for (sz_dtype dtype : sztest::kAllDtypes) {
    const sztest::DtypeFacts f = sztest::dtype_facts(dtype);
    for (uint32_t period : {1u, 13u, 48u, 192u, 1000u}) {  // 1, 13: bases wrap within 8 values
      const uint32_t tensors = 2;
      const uint64_t tokens = period >= 192 ? 60 : 700;
      const std::vector<uint8_t> all = sztest::channel_values(dtype, tensors, tokens, period, 3 + period + dtype);
      for (unsigned k = 1; k <= 4 && k < f.E; ++k) {
        const EmuBook b = sztest::calibrated_book(all, dtype, tensors, tokens, period, k);
        const size_t tensor_bytes = (size_t)tokens * period * (f.W / 8);
        for (uint64_t n : {(uint64_t)tokens * period, (uint64_t)tokens * period / 3 + 5}) {
          for (uint32_t flags : sztest::kFlagSets) {
            // 2^13 values: more than a chunk whose record is staged, so the encoder's second pass runs
            const sz_params p = sztest::make_params(period == 48 ? 8 : period == 1000 ? 13 : 12, flags);
            const std::vector<uint8_t> data(all.begin() + (ptrdiff_t)tensor_bytes,
                                            all.begin() + (ptrdiff_t)(tensor_bytes + n * (f.W / 8)));
            std::vector<uint8_t> ref(sz_compress_bound(n, dtype));
            size_t rs = 0;
            ASSERT_EQ(sz_compress_channels_reference(data.data(), n, dtype, &b.book, 1, &p, ref.data(), ref.size(),
                                                     &rs),
                      SZ_OK);
            ref.resize(rs);
            sz_status s;
            const std::vector<uint8_t> got = emu_compress(data, n, dtype, nullptr, &p, &s, nullptr, nullptr, 0,
                                                          &b.book, 1);
            ASSERT_EQ(s, SZ_OK);
            ASSERT_TRUE(got == ref) << "dtype " << dtype << " period " << period << " k " << k << " n " << n
                                    << " flags " << flags;
            const Decoded d = emu_decompress(ref, data.size(), nullptr, nullptr, 0, 0, &b.book);
            ASSERT_EQ(d.status, SZ_OK) << sz_status_name((sz_status)d.status);
            ASSERT_TRUE(d.out == data);
            ++cases;
          }
        }
      }
    }
  }
  printf("[ info ] %d emulated version 2 (channel window) cases byte-identical and decoded\n", cases);
}

TEST(CudaKernelsEmu, ChannelFramesBookChecksAndCorruption) {
  const uint32_t period = 64;
  const uint64_t tokens = 200, n = tokens * period;
  const std::vector<uint8_t> all = sztest::channel_values(SZ_DTYPE_BF16, 2, tokens, period, 77);
  EmuBook b = sztest::calibrated_book(all, SZ_DTYPE_BF16, 2, tokens, period, 2);
  for (size_t c = 0; c < 3; ++c) b.bases[c] = 254;  // windows at the top: codes 2 and 3 decode to no exponent there
  ASSERT_EQ(sz_channel_book_init(&b.book, SZ_DTYPE_BF16, 2, period, 2, b.bases.data()), SZ_OK);
  const std::vector<uint8_t> data(all.begin(), all.begin() + (ptrdiff_t)(n * 2));
  const sz_params p = sztest::make_params(8, SZ_FLAG_CHECKSUMS);
  std::vector<uint8_t> frame(sz_compress_bound(n, SZ_DTYPE_BF16));
  size_t fs = 0;
  ASSERT_EQ(sz_compress_channels_reference(data.data(), n, SZ_DTYPE_BF16, &b.book, 0, &p, frame.data(), frame.size(),
                                           &fs),
            SZ_OK);
  frame.resize(fs);
  EXPECT_EQ(emu_decompress(frame, n * 2).status, SZ_ERROR_BOOK_MISMATCH) << "no book";
  sz_channel_book other = b.book;
  other.id ^= 1;
  EXPECT_EQ(emu_decompress(frame, n * 2, nullptr, nullptr, 0, 0, &other).status, SZ_ERROR_BOOK_MISMATCH);
  other = b.book;
  other.code_bits = 3;
  EXPECT_EQ(emu_decompress(frame, n * 2, nullptr, nullptr, 0, 0, &other).status, SZ_ERROR_BOOK_MISMATCH);
  Rng rng(3);
  int rejected = 0;
  for (size_t byte = 0; byte < frame.size(); ++byte) {
    if (byte >= 64 && rng.below(byte < 64 + 8 * 50 ? 4 : 30) != 0) continue;
    std::vector<uint8_t> t = frame;
    t[byte] ^= (uint8_t)(1u << rng.below(8));
    sz_status ref = SZ_OK;
    int32_t got = -1;
    check_like_reference(t, n * 2, "flip at byte " + std::to_string(byte), &ref, &got, &b.book);
    if (HasFatalFailure()) return;
    rejected += ref != SZ_OK;
    if (byte < 64) {
      EXPECT_EQ((sz_status)got, ref) << "header byte " << byte;
    }
  }
  EXPECT_GT(rejected, 40);
}

// Codes that decode past the exponent range (windows at the top of it), without checksums to catch them: every code
// byte of the first chunks set to all ones in turn, decoded exactly as the reference decodes (or rejects) it.
TEST(CudaKernelsEmu, ChannelCodesPastTheExponentRangeRejectedLikeReference) {
  const uint32_t period = 64;
  const uint64_t tokens = 40, n = tokens * period;
  for (sz_dtype dtype : sztest::kAllDtypes) {
    const sztest::DtypeFacts f = sztest::dtype_facts(dtype);
    const unsigned k = 2;
    std::vector<uint8_t> all = sztest::channel_values(dtype, 1, tokens, period, 91 + dtype);
    // Every 16th channel at the top of the exponent range, in its window (code 0), where codes 2 and 3 mean no
    // exponent: the kernels must find that in the code itself, not through an escape list or a checksum.
    const uint32_t top = (1u << f.E) - 2;
    const size_t vb = f.W / 8;
    for (uint64_t i = 0; i < n; i += 16) {  // channels 0, 16, 32, 48 (period 64)
      const uint32_t x = sztest::load_value(all.data() + i * vb, f.W);
      sztest::store_value(all.data() + i * vb, f.W, sztest::make_value(x >> (f.W - 1), top, x, f));
    }
    EmuBook b = sztest::calibrated_book(all, dtype, 1, tokens, period, k);
    for (size_t c = 0; c < period; c += 16) b.bases[c] = (uint8_t)top;
    ASSERT_EQ(sz_channel_book_init(&b.book, dtype, k, period, 1, b.bases.data()), SZ_OK);
    const sz_params p = sztest::make_params(8, 0);
    std::vector<uint8_t> frame(sz_compress_bound(n, dtype));
    size_t fs = 0;
    ASSERT_EQ(sz_compress_channels_reference(all.data(), n, dtype, &b.book, 0, &p, frame.data(), frame.size(), &fs),
              SZ_OK);
    frame.resize(fs);
    const layout::FrameOffsets o = layout::frame_offsets(n, 8, false, layout::dtype_traits(dtype), 0);
    const size_t out_bytes = n * (f.W / 8);
    int rejected = 0;
    for (size_t i = 0; i < 3 * 256 / 8 * k && o.exponents + i < frame.size(); ++i) {
      std::vector<uint8_t> t = frame;
      t[o.exponents + i] = 0xFF;
      sz_status ref = SZ_OK;
      check_like_reference(t, out_bytes, "dtype " + std::to_string(dtype) + " code byte " + std::to_string(i), &ref,
                           nullptr, &b.book);
      if (HasFatalFailure()) return;
      rejected += ref != SZ_OK;
    }
    EXPECT_GT(rejected, 4) << "dtype " << dtype;
  }
}

TEST(CudaKernelsEmu, ChannelPagesEqualSingleFrame) {
  const uint32_t period = 128;  // one token of a [kv_heads 2][head_dim 64] tensor
  const std::vector<uint8_t> all = sztest::channel_values(SZ_DTYPE_BF16, 1, 300, period, 12);
  const EmuBook b = sztest::calibrated_book(all, SZ_DTYPE_BF16, 1, 300, period, 3);
  for (uint64_t page_values : {(uint64_t)period, (uint64_t)period * 16}) {  // SGLang one-token pages, vLLM blocks
    const uint32_t n_pages = (uint32_t)(300 * period / page_values);
    const uint64_t n = (uint64_t)n_pages * page_values;
    const sz_params p = sztest::make_params(12, SZ_FLAG_CHECKSUMS);
    std::vector<uint8_t> ref(sz_compress_bound(n, SZ_DTYPE_BF16));
    size_t rs = 0;
    ASSERT_EQ(sz_compress_channels_reference(all.data(), n, SZ_DTYPE_BF16, &b.book, 0, &p, ref.data(), ref.size(), &rs),
              SZ_OK);
    ref.resize(rs);
    std::vector<uint8_t> pool(n * 2 + 64 * n_pages);
    std::vector<void*> hp(n_pages);
    for (uint32_t i = 0; i < n_pages; ++i) {
      hp[i] = pool.data() + (size_t)(n_pages - 1 - i) * (page_values * 2 + 64);
      memcpy(hp[i], all.data() + i * page_values * 2, page_values * 2);
    }
    sz_status s;
    const std::vector<uint8_t> frame = emu_compress(all, n, SZ_DTYPE_BF16, nullptr, &p, &s, nullptr, hp.data(),
                                                    page_values, &b.book, 0);
    ASSERT_EQ(s, SZ_OK);
    ASSERT_TRUE(frame == ref) << "page_values " << page_values;
    std::fill(pool.begin(), pool.end(), 0);
    const Decoded d = emu_decompress(frame, 0, nullptr, hp.data(), n_pages, page_values, &b.book);
    ASSERT_EQ(d.status, SZ_OK);
    for (uint32_t i = 0; i < n_pages; ++i)
      ASSERT_EQ(memcmp(hp[i], all.data() + i * page_values * 2, page_values * 2), 0) << "page " << i;
  }
}

}  // namespace

// ---- entropy-coded frames (version 3) -------------------------------------------------------------------------

namespace {

using sztest::calibrated_table;
using sztest::entropy_frame;
using sztest::channel_values;
using sztest::random_bytes;

// The device image of a table, as the host builds it.
std::vector<uint8_t> table_image(const sz_symbol_table& t) {
  const size_t n = sz_cuda_symbol_table_image_size(&t);
  EXPECT_GT(n, 0u);
  std::vector<uint8_t> img(n, 0xEE);
  size_t got = 0;
  EXPECT_EQ(sz_cuda_symbol_table_image(&t, img.data(), img.size(), &got), SZ_OK);
  EXPECT_EQ(got, n);
  return img;
}

// The entropy decoder on the emulator; the output written at dst_offset of its buffer (an unaligned output), by at
// most max_grid CTAs.
Decoded emu_decompress_entropy(const std::vector<uint8_t>& frame, const std::vector<uint8_t>& image,
                               size_t dst_capacity, size_t dst_offset = 0, unsigned max_grid = kMaxGrid) {
  Decoded r;
  constexpr size_t kGuard = 256;
  std::vector<uint8_t> dst(dst_offset + dst_capacity + kGuard, 0x5A);
  std::vector<uint8_t> ws(kDecodeWorkspaceBytes, 0);
  std::vector<uint8_t> src(frame);
  src.reserve(1);
  std::vector<uint4> img((image.size() + 15) / 16 + 1);  // 16-byte aligned, as cudaMalloc gives
  memcpy(img.data(), image.data(), image.size());
  EntropyDecodeArgs a;
  r.launch = make_entropy_decode_args(src.data(), frame.size(), img.data(), image.size(), dst.data() + dst_offset,
                                      dst_capacity, ws.data(), ws.size(), &r.status, &r.size, &a);
  if (r.launch != SZ_OK) return r;
  uint64_t grid = entropy_grid_of(frame.size());
  grid = grid < 1 ? 1 : (grid > max_grid ? max_grid : grid);
  const char* why = nullptr;
  const bool ok = simt_emu::launch((unsigned)grid, EntropyDecodePolicy::kWarps * 32, entropy_decode_smem_bytes(),
                                   [&] { entropy_decode_warps(a); }, g_seed++, &why);
  EXPECT_TRUE(ok) << "emulated entropy decoder: " << (why ? why : "");
  if (!ok) {
    r.launch = SZ_ERROR_INTERNAL;
    return r;
  }
  for (size_t i = 0; i < dst_offset; ++i)
    if (dst[i] != 0x5A) r.guard_ok = false;
  for (size_t i = dst_offset + dst_capacity; i < dst.size(); ++i)
    if (dst[i] != 0x5A) r.guard_ok = false;
  r.out.assign(dst.begin() + dst_offset,
               dst.begin() + dst_offset + (r.size == ~0ull ? 0 : std::min<uint64_t>(r.size, dst_capacity)));
  return r;
}


// A (damaged) frame on the emulated kernel (at most max_grid CTAs) and on the CPU decoder: both fail, or both
// succeed with the same values; whether the CPU succeeded.
bool decodes_like_cpu(const std::vector<uint8_t>& frame, const sz_symbol_table& t, const std::vector<uint8_t>& image,
                      size_t capacity, unsigned max_grid) {
  std::vector<uint8_t> cpu(capacity + 1);
  size_t cpu_size = 0;
  const sz_status cs = sz_decompress_entropy(frame.data(), frame.size(), &t, cpu.data(), capacity, &cpu_size, 1);
  const Decoded d = emu_decompress_entropy(frame, image, capacity, 0, max_grid);
  EXPECT_EQ(d.launch, SZ_OK);
  EXPECT_EQ(cs == SZ_OK, d.status == SZ_OK)
      << "cpu " << sz_status_name(cs) << " gpu " << sz_status_name((sz_status)d.status);
  EXPECT_TRUE(d.guard_ok);
  if (cs == SZ_OK && d.status == SZ_OK) {
    cpu.resize(cpu_size);
    EXPECT_TRUE(d.out == cpu);
  }
  return cs == SZ_OK;
}

const sz_dtype kEntropyDtypes[] = {SZ_DTYPE_BF16, SZ_DTYPE_FP16, SZ_DTYPE_FP32, SZ_DTYPE_FP8_E4M3, SZ_DTYPE_FP8_E5M2};
const uint32_t kEntropyFlags[] = {0, SZ_FLAG_CHECKSUMS, SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH};

}  // namespace

// CPU-encoded version 3 frames decode on the emulated kernel to the input, for every dtype, checksum kind and
// chunk size, with coded and raw chunks and a partial last chunk, into aligned and unaligned outputs.
TEST(CudaKernelsEmu, EntropyFramesDecodeToTheInput) {
  constexpr uint32_t kTensors = 2, kPeriod = 48, kTokens = 37;  // 1776 values a tensor
  for (sz_dtype dt : kEntropyDtypes) {
    const std::vector<uint8_t> kv = channel_values(dt, kTensors, kTokens, kPeriod, 11 + dt);
    auto tb = calibrated_table(kv, dt, kTensors, kTokens, kPeriod, 6);
    const std::vector<uint8_t> image = table_image(tb->t);
    const size_t vb = sz_dtype_size(dt), per = (size_t)kTokens * kPeriod * vb;
    const std::vector<uint8_t> t1(kv.begin() + per, kv.end());
    // Values no table codes well: the encoder stores their chunks raw.
    const std::vector<uint8_t> noise = random_bytes(per, 99 + dt);
    for (unsigned log2 : {8u, 10u})
      for (uint32_t flags : kEntropyFlags)
        for (const auto* data : {&t1, &noise}) {
          const std::vector<uint8_t> frame = entropy_frame(*data, dt, tb->t, 1, log2, flags);
          for (size_t off : {(size_t)0, (size_t)3}) {
            SCOPED_TRACE("dtype " + std::to_string(dt) + " chunk 2^" + std::to_string(log2) + " flags " +
                         std::to_string(flags) + (data == &noise ? " noise" : " kv") + " offset " +
                         std::to_string(off));
            const Decoded d = emu_decompress_entropy(frame, image, data->size(), off);
            ASSERT_EQ(d.launch, SZ_OK);
            EXPECT_EQ(d.status, SZ_OK) << sz_status_name((sz_status)d.status);
            EXPECT_EQ(d.size, data->size());
            EXPECT_TRUE(d.guard_ok);
            EXPECT_TRUE(d.out == *data);
          }
        }
  }
}

// Damaged and truncated frames: the emulated kernel fails exactly where the CPU decoder does, and where both
// succeed (a damaged raw part without checksums) they give the same values.
TEST(CudaKernelsEmu, EntropyCorruptFramesLikeCpu) {
  constexpr uint32_t kTensors = 1, kPeriod = 64, kTokens = 40;
  for (sz_dtype dt : {SZ_DTYPE_BF16, SZ_DTYPE_FP8_E5M2}) {
    const std::vector<uint8_t> kv = channel_values(dt, kTensors, kTokens, kPeriod, 5 + dt);
    auto tb = calibrated_table(kv, dt, kTensors, kTokens, kPeriod, 4);
    const std::vector<uint8_t> image = table_image(tb->t);
    for (uint32_t flags : {0u, (uint32_t)(SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH)}) {
      const std::vector<uint8_t> frame = entropy_frame(kv, dt, tb->t, 0, 9, flags);
      Rng rng(flags + 7 * dt);
      int failed = 0;
      for (int trial = 0; trial < 60; ++trial) {
        std::vector<uint8_t> bad = frame;
        const int kind = trial % 3;
        if (kind < 2) {
          bad[(size_t)rng.below(bad.size())] ^= (uint8_t)(1u << rng.below(8));
        } else {
          bad.resize((size_t)rng.below(bad.size()));
        }
        SCOPED_TRACE("trial " + std::to_string(trial));
        failed += !decodes_like_cpu(bad, tb->t, image, kv.size(), kMaxGrid);
      }
      EXPECT_GT(failed, 20);  // the damage is seen (the test cannot pass by decoding nothing)
    }
  }
}

// Paired frames (FP8 with a row map, §4.10.6) are the CPU's: the kernel, which takes no map, answers
// SZ_ERROR_BOOK_MISMATCH as the CPU decoder does without the map; the flag on another dtype is corrupt.
TEST(CudaKernelsEmu, EntropyPairedFramesNeedTheirRowMap) {
  constexpr uint32_t kPeriod = 32, kTokens = 64;
  const sz_dtype dt = SZ_DTYPE_FP8_E4M3;
  std::vector<uint8_t> kv = channel_values(dt, 1, kTokens, kPeriod, 3);
  std::vector<uint32_t> tokens(kTokens);
  for (uint32_t r = 0; r < kTokens; ++r) tokens[r] = r % 5;
  auto rm = sztest::row_map_from_tokens(tokens);
  size_t size = 0;
  auto tb = calibrated_table(kv, dt, 1, kTokens, kPeriod, 2);
  const std::vector<uint8_t> image = table_image(tb->t);
  std::vector<uint8_t> frame(sz_compress_bound(kv.size(), dt));
  ASSERT_EQ(sz_compress_entropy_paired(kv.data(), kv.size(), dt, &tb->t, 0, &rm->m, nullptr, frame.data(), frame.size(),
                                       &size),
            SZ_OK);
  frame.resize(size);
  const Decoded d = emu_decompress_entropy(frame, image, kv.size());
  ASSERT_EQ(d.launch, SZ_OK);
  EXPECT_EQ(d.status, SZ_ERROR_BOOK_MISMATCH) << sz_status_name((sz_status)d.status);
  EXPECT_TRUE(d.guard_ok);
  std::vector<uint8_t> cpu(kv.size());
  EXPECT_EQ(sz_decompress_entropy(frame.data(), frame.size(), &tb->t, cpu.data(), cpu.size(), &size, 1),
            SZ_ERROR_BOOK_MISMATCH);
  // The flag on a BF16 frame (header resealed): corrupt on both.
  const std::vector<uint8_t> bkv = channel_values(SZ_DTYPE_BF16, 1, kTokens, kPeriod, 4);
  auto btb = calibrated_table(bkv, SZ_DTYPE_BF16, 1, kTokens, kPeriod, 2);
  std::vector<uint8_t> bad = entropy_frame(bkv, SZ_DTYPE_BF16, btb->t, 0, 9, SZ_FLAG_CHECKSUMS);
  bad[8] |= SZ_FLAG_PAIRED;
  const uint32_t h = (uint32_t)XXH3_64bits(bad.data(), 60);
  for (int i = 0; i < 4; ++i) bad[60 + i] = (uint8_t)(h >> (8 * i));
  EXPECT_FALSE(decodes_like_cpu(bad, btb->t, table_image(btb->t), bkv.size(), kMaxGrid));
  EXPECT_EQ(emu_decompress_entropy(bad, table_image(btb->t), bkv.size()).status, SZ_ERROR_CORRUPT);
}

// More chunks than warps: each warp decodes several chunks one after another in its area (coded and raw chunks, the
// frame's short last chunk), for every dtype and checksum kind, and fails on damage exactly where the CPU does.
TEST(CudaKernelsEmu, EntropyMoreChunksThanWarps) {
  constexpr uint32_t kPeriod = 48, kTokens = 214;  // 10272 values: 41 chunks of 2^8, the last of 32 values
  constexpr unsigned kLog2 = 8;
  int decoded = 0;
  for (sz_dtype dt : kEntropyDtypes) {
    const std::vector<uint8_t> kv0 = channel_values(dt, 1, kTokens, kPeriod, 21 + dt);
    auto tb = calibrated_table(kv0, dt, 1, kTokens, kPeriod, 5);
    const std::vector<uint8_t> image = table_image(tb->t);
    const size_t vb = sz_dtype_size(dt), chunk = ((size_t)1 << kLog2) * vb;
    std::vector<uint8_t> kv = kv0;
    const std::vector<uint8_t> noise = random_bytes(chunk, 77 + dt);  // chunk 20 stored raw
    std::copy(noise.begin(), noise.end(), kv.begin() + 20 * chunk);
    for (uint32_t flags : kEntropyFlags) {
      const std::vector<uint8_t> frame = entropy_frame(kv, dt, tb->t, 0, kLog2, flags);
      for (unsigned grid : {1u, 2u}) {  // one or two CTAs' warps for 41 chunks
        SCOPED_TRACE("dtype " + std::to_string(dt) + " flags " + std::to_string(flags) + " grid " +
                     std::to_string(grid));
        const Decoded d = emu_decompress_entropy(frame, image, kv.size(), 1, grid);
        ASSERT_EQ(d.launch, SZ_OK);
        EXPECT_EQ(d.status, SZ_OK) << sz_status_name((sz_status)d.status);
        EXPECT_EQ(d.size, kv.size());
        EXPECT_TRUE(d.guard_ok);
        EXPECT_TRUE(d.out == kv);
        ++decoded;
      }
      if (dt != SZ_DTYPE_BF16 && dt != SZ_DTYPE_FP8_E4M3) continue;
      Rng rng(flags + 13 * dt);
      int failed = 0;
      for (int trial = 0; trial < 30; ++trial) {
        std::vector<uint8_t> bad = frame;
        bad[(size_t)rng.below(bad.size())] ^= (uint8_t)(1u << rng.below(8));
        SCOPED_TRACE("trial " + std::to_string(trial));
        failed += !decodes_like_cpu(bad, tb->t, image, kv.size(), 1);
      }
      if (flags) EXPECT_GT(failed, 10);  // the damage is seen (without checksums a raw part's flip decodes)
    }
  }
  EXPECT_EQ(decoded, 30);
}

// The image must be the frame's table's; the call refuses other versions, short outputs and a bad image.
TEST(CudaKernelsEmu, EntropyImageAndArgumentChecks) {
  const sz_dtype dt = SZ_DTYPE_BF16;
  const std::vector<uint8_t> kv = channel_values(dt, 1, 32, 64, 3);
  auto tb = calibrated_table(kv, dt, 1, 32, 64, 4);
  auto other = calibrated_table(channel_values(dt, 1, 32, 64, 4), dt, 1, 32, 64, 3);
  const std::vector<uint8_t> image = table_image(tb->t), other_image = table_image(other->t);
  const std::vector<uint8_t> frame = entropy_frame(kv, dt, tb->t, 0, 10, SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH);
  EXPECT_EQ(emu_decompress_entropy(frame, image, kv.size()).status, SZ_OK);
  EXPECT_EQ(emu_decompress_entropy(frame, other_image, kv.size()).status, SZ_ERROR_BOOK_MISMATCH);
  std::vector<uint8_t> bad_magic = image;
  bad_magic[0] ^= 1;
  EXPECT_EQ(emu_decompress_entropy(frame, bad_magic, kv.size()).status, SZ_ERROR_BOOK_MISMATCH);
  const std::vector<uint8_t> cut(image.begin(), image.begin() + image.size() / 2);
  EXPECT_EQ(emu_decompress_entropy(frame, cut, kv.size()).status, SZ_ERROR_BOOK_MISMATCH);
  const Decoded small = emu_decompress_entropy(frame, image, kv.size() - 2);
  EXPECT_EQ(small.status, SZ_ERROR_DST_TOO_SMALL);
  EXPECT_TRUE(small.guard_ok);
  // A version 1 frame is not this call's.
  std::vector<uint8_t> v1(sz_compress_bound(kv.size() / 2, dt));
  size_t v1_size = 0;
  ASSERT_EQ(sz_compress(kv.data(), kv.size() / 2, dt, nullptr, nullptr, v1.data(), v1.size(), &v1_size), SZ_OK);
  v1.resize(v1_size);
  EXPECT_EQ(emu_decompress_entropy(v1, image, kv.size()).status, SZ_ERROR_INVALID_ARGUMENT);
  // An invalid table has no image; the image needs its whole size.
  sz_symbol_table broken = tb->t;
  broken.groups = 0;
  EXPECT_EQ(sz_cuda_symbol_table_image_size(&broken), 0u);
  std::vector<uint8_t> buf(image.size());
  EXPECT_EQ(sz_cuda_symbol_table_image(&broken, buf.data(), buf.size(), nullptr), SZ_ERROR_BAD_CODEBOOK);
  EXPECT_EQ(sz_cuda_symbol_table_image(&tb->t, buf.data(), buf.size() - 1, nullptr), SZ_ERROR_DST_TOO_SMALL);
}

// Hand-made tables at the coder's corners and the layouts off the fast path (entropy_cases.h).
TEST(CudaKernelsEmu, EntropyHandTablesEveryDtypeAndLayout) {
  const int cases = sztest::entropy_hand_table_cases([](const std::vector<uint8_t>& frame, const sz_symbol_table& t,
                                                        size_t capacity) {
    return emu_decompress_entropy(frame, table_image(t), capacity);
  });
  printf("[ info ] %d version 3 frames of hand-made tables decoded to their input\n", cases);
}

// ---- the encoder of entropy-coded frames ------------------------------------------------------------------------

namespace {

void run_entropy_encoder(const EntropyEncodeArgs& a) {
  switch (a.dtype) {
    case 1: entropy_encode_warps<1>(a); break;
    case 2: entropy_encode_warps<2>(a); break;
    case 3: entropy_encode_warps<3>(a); break;
    case 4: entropy_encode_warps<4>(a); break;
    default: entropy_encode_warps<5>(a); break;
  }
}

// A device-memory-like buffer: 16-byte aligned, zero-filled (a fresh workspace).
struct Aligned {
  std::vector<uint4> words;
  explicit Aligned(size_t bytes) : words(bytes / 16 + 2, uint4{0, 0, 0, 0}) {}
  uint8_t* data() { return reinterpret_cast<uint8_t*>(words.data()); }
  size_t size() const { return (words.size() - 2) * 16; }
};

// The entropy encoder on the emulator: values at src[off..], the frame written into a poisoned buffer of the bound's
// size (and a guard after it). ws: reused across calls when given (its size grows as needed, zero-filled).
sztest::EncodedFrame emu_compress_entropy(const std::vector<uint8_t>& src, size_t off, uint64_t n, sz_dtype dt,
                                          const std::vector<uint8_t>& image, uint32_t tensor, const sz_params& p,
                                          std::vector<uint8_t>* ws_keep = nullptr) {
  sztest::EncodedFrame r;
  size_t wsz = 0;
  EXPECT_EQ(entropy_encode_workspace_query(n, dt, &p, &wsz), SZ_OK);
  std::vector<uint8_t> own;
  std::vector<uint8_t>& keep = ws_keep ? *ws_keep : own;
  if (keep.size() < wsz) keep.resize(wsz, 0);
  Aligned ws(keep.size());
  memcpy(ws.data(), keep.data(), keep.size());
  Aligned img(image.size());
  memcpy(img.data(), image.data(), image.size());
  std::vector<uint8_t> in(src);
  in.reserve(1);
  const size_t bound = sz_compress_bound(n, dt);
  constexpr size_t kGuard = 64;
  std::vector<uint8_t> dst(bound + kGuard, 0xA5);
  EntropyEncodeArgs a;
  r.launch = make_entropy_encode_args(in.data() + off, n, dt, img.data(), image.size(), tensor, &p, dst.data(), bound,
                                      ws.data(), ws.size(), &r.frame_size, &a);
  if (r.launch != SZ_OK) return r;
  uint64_t grid = entropy_encode_grid(a);
  grid = grid < 1 ? 1 : (grid > kMaxGrid ? kMaxGrid : grid);
  const char* why = nullptr;
  const bool ok = simt_emu::launch((unsigned)grid, EntropyEncodePolicy::kWarps * 32, entropy_encode_smem_bytes(),
                                   [&] { run_entropy_encoder(a); }, g_seed++, &why);
  EXPECT_TRUE(ok) << "emulated entropy encoder: " << (why ? why : "");
  if (!ok) {
    r.launch = SZ_ERROR_INTERNAL;
    return r;
  }
  memcpy(keep.data(), ws.data(), keep.size());
  const uint64_t fs = r.frame_size;
  if (fs > bound) {
    r.guard_ok = false;
    return r;
  }
  for (size_t i = fs; i < dst.size(); ++i)
    if (dst[i] != 0xA5) r.guard_ok = false;
  dst.resize(fs);
  r.frame = std::move(dst);
  return r;
}

}  // namespace

// An image entry's division of a state by a frequency is exact for every frequency and state, and its renormalisation
// test and coded state are the reference coder's (§4.10.4).
TEST(CudaKernelsEmu, EntropyEncoderEntryExact) {
  Rng rng(5);
  for (uint32_t f = 1; f <= layout::kRansProbTotal; ++f) {
    const uint32_t cum = 4095 - (f - 1) % 4096;
    const uint32_t w = eimg::enc_word(f, cum), m = eimg::enc_magic(f);
    ASSERT_EQ(eimg::enc_comp(w), layout::kRansProbTotal - f);
    ASSERT_EQ(eimg::enc_cum(w), cum);
    ASSERT_EQ(w & eimg::kEncEscaped, 0u);
    auto check = [&](uint32_t x) {
      ASSERT_EQ(eimg::enc_div(x, w, m), x / f) << "f " << f << " x " << x;
      ASSERT_EQ(eimg::enc_renorm(x, w), layout::rans_enc_renorm(x, f)) << "f " << f << " x " << x;
      if (!layout::rans_enc_renorm(x, f)) {  // a state ready to code the symbol
        const uint32_t want = (x / f << layout::kRansProbBits) + x % f + cum;
        ASSERT_EQ(eimg::enc_push(x, w, m), want) << "f " << f << " x " << x;
      }
    };
    const uint32_t xs[] = {0u, 1u, f - 1, f, f + 1, 0xFFFFFFFFu, 0x80000000u, (uint32_t)(((uint64_t)f << 20) - 1),
                           (uint32_t)((uint64_t)f << 20)};
    for (uint32_t x : xs) check(x);
    for (int i = 0; i < 2000; ++i) check((uint32_t)rng.next());
    for (int i = 0; i < 500; ++i) check((uint32_t)(rng.next() % ((uint64_t)f << 20)));
  }
}

// The emulated encoder writes the reference coder's frames byte for byte (entropy_cases.h), and the emulated
// decoder gives their input back.
TEST(CudaKernelsEmu, EntropyEncoderFramesEqualReference) {
  const int cases = sztest::entropy_encoder_cases(
      [](const std::vector<uint8_t>& src, size_t off, uint64_t n, sz_dtype dt, const sz_symbol_table& t,
         uint32_t tensor, const sz_params& p) { return emu_compress_entropy(src, off, n, dt, table_image(t), tensor, p); },
      [](const std::vector<uint8_t>& frame, const sz_symbol_table& t, size_t capacity) {
        return emu_decompress_entropy(frame, table_image(t), capacity, 1);
      });
  printf("[ info ] %d version 3 frames encoded on the emulator equal the reference's\n", cases);
}

// One workspace for calls of every size in turn (each leaves it ready for the next), a workspace that was never
// zero-filled, images that are not the call's, and the host's argument checks.
TEST(CudaKernelsEmu, EntropyEncoderWorkspaceImageAndArguments) {
  const sz_dtype dt = SZ_DTYPE_BF16;
  const std::vector<uint8_t> kv = channel_values(dt, 2, 100, 64, 3);
  auto tb = calibrated_table(kv, dt, 2, 100, 64, 4);
  const std::vector<uint8_t> image = table_image(tb->t);
  sz_params p = sz_params_default();
  p.chunk_log2 = 9;
  std::vector<uint8_t> ws;
  for (uint64_t n : {3000ull, 5ull, 0ull, 6400ull, 600ull, 6400ull, 17ull}) {
    p.chunk_log2 = n == 6400 ? 8 : 9;  // 25 chunks: more than a CTA's warps, so CTAs wait for each other's sizes
    const sztest::EncodedFrame e = emu_compress_entropy(kv, 0, n, dt, image, 1, p, &ws);
    std::vector<uint8_t> want(sz_compress_bound(n, dt));
    size_t want_size = 0;
    ASSERT_EQ(sz_compress_entropy(kv.data(), n, dt, &tb->t, 1, &p, want.data(), want.size(), &want_size), SZ_OK);
    want.resize(want_size);
    EXPECT_TRUE(e.frame == want) << "n " << n;
  }
  p.chunk_log2 = 9;
  // A workspace that was never zero-filled: no frame.
  {
    size_t wsz = 0;
    ASSERT_EQ(entropy_encode_workspace_query(3000, dt, &p, &wsz), SZ_OK);
    std::vector<uint8_t> junk(wsz, 0x3C);
    const sztest::EncodedFrame e = emu_compress_entropy(kv, 0, 3000, dt, image, 1, p, &junk);
    EXPECT_EQ(e.frame_size, 0u);
    EXPECT_TRUE(e.frame.empty());
  }
  // Images that are not a valid one for this call: no frame, nothing written.
  std::vector<uint8_t> bad_magic = image;
  bad_magic[0] ^= 1;
  std::vector<uint8_t> cut(image.begin(), image.end() - 16);
  for (const auto* img : {&bad_magic, &cut}) {
    const sztest::EncodedFrame e = emu_compress_entropy(kv, 0, 3000, dt, *img, 1, p);
    EXPECT_EQ(e.launch, SZ_OK);
    EXPECT_EQ(e.frame_size, 0u);
    EXPECT_TRUE(e.guard_ok);
  }
  EXPECT_EQ(emu_compress_entropy(kv, 0, 3000, dt, image, 2, p).frame_size, 0u);            // tensor out of range
  EXPECT_EQ(emu_compress_entropy(kv, 0, 1000, SZ_DTYPE_FP16, image, 0, p).frame_size, 0u);  // another dtype's
  // Host checks: nothing is launched.
  EntropyEncodeArgs a;
  Aligned img(image.size()), w(1 << 20), dst(sz_compress_bound(3000, dt));
  memcpy(img.data(), image.data(), image.size());
  uint64_t fs = 0;
  size_t need = 0;
  ASSERT_EQ(entropy_encode_workspace_query(3000, dt, &p, &need), SZ_OK);
  EXPECT_EQ(need, entropy_encode_workspace_bytes(6, 9, 8));
  auto args = [&](const void* src, const void* im, size_t im_size, uint32_t tensor, size_t cap, void* wsp,
                  size_t wss, const sz_params* pp) {
    return make_entropy_encode_args(src, 3000, dt, im, im_size, tensor, pp, dst.data(), cap, wsp, wss, &fs, &a);
  };
  EXPECT_EQ(args(kv.data(), img.data(), image.size(), 1, dst.size(), w.data(), need, &p), SZ_OK);
  EXPECT_EQ(args(nullptr, img.data(), image.size(), 1, dst.size(), w.data(), need, &p), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(args(kv.data(), nullptr, image.size(), 1, dst.size(), w.data(), need, &p), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(args(kv.data(), img.data() + 8, image.size() - 8, 1, dst.size(), w.data(), need, &p),
            SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(args(kv.data(), img.data(), 63, 1, dst.size(), w.data(), need, &p), SZ_ERROR_BAD_CODEBOOK);
  EXPECT_EQ(args(kv.data(), img.data(), image.size(), 1, dst.size() - 1, w.data(), need, &p), SZ_ERROR_DST_TOO_SMALL);
  EXPECT_EQ(args(kv.data(), img.data(), image.size(), 1, dst.size(), w.data(), need - 1, &p),
            SZ_ERROR_WORKSPACE_TOO_SMALL);
  EXPECT_EQ(args(kv.data(), img.data(), image.size(), 1, dst.size(), nullptr, need, &p), SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(args(kv.data(), img.data(), image.size(), 1, dst.size(), w.data() + 4, need, &p),
            SZ_ERROR_INVALID_ARGUMENT);
  sz_params bad = p;
  bad.chunk_log2 = 17;
  EXPECT_EQ(args(kv.data(), img.data(), image.size(), 1, dst.size(), w.data(), need, &bad), SZ_ERROR_INVALID_ARGUMENT);
  bad = p;
  bad.flags = SZ_FLAG_LANE_HASH;  // without checksums
  EXPECT_EQ(args(kv.data(), img.data(), image.size(), 1, dst.size(), w.data(), need, &bad), SZ_ERROR_INVALID_ARGUMENT);
  // NULL params: the default chunk of 3000 values (2^12), as sz_compress_entropy.
  ASSERT_EQ(entropy_encode_workspace_query(3000, dt, nullptr, &need), SZ_OK);
  EXPECT_EQ(need, entropy_encode_workspace_bytes(1, 12, 8));
  Aligned w16(need);
  EXPECT_EQ(args(kv.data(), img.data(), image.size(), 1, dst.size(), w16.data(), need, nullptr), SZ_OK);
  EXPECT_EQ(a.chunk_log2, 12u);
}
