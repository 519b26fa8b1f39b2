// probe_lean_decode.cu — a steering probe for the decoder's next design, not product code: it decodes BF16 version 1
// frames (codebook, chunk 4096, no checksums or LH32, contiguous output) with a structure built for latency, and
// times it in the same run as cudaMemcpy and the library's decoder on the same frames of real KV.
//
// The library's decoder gives each chunk to one warp that streams its rounds through a ring of bulk copies (a team
// of warps only for calls with few chunks), so a call is at least one warp's way through a chunk, behind a serial
// prologue; its loop runs ~670 instructions a 2 KiB round. The probe asks what a shorter path gives:
//   - a CTA of 4 warps per chunk, warp m decoding round m (rounds m, m + 4, ... of longer chunks): a chunk's rounds in
//     parallel in every call, not only small ones;
//   - loads straight into registers (rest fields and codes), no ring, no mbarriers, no producer bookkeeping;
//   - each warp copies the chunk's escape lists into its own shared buffer and checks a quarter of them;
//   - the round goes through the same swizzled stage (escape patch, coalesced pieces, LH32) and out by 16-byte
//     streaming stores; LH32 states meet once per chunk at one CTA barrier (none without checksums);
//   - kPrefetch: the next chunk's index entries and rest fields are loaded while this one decodes.
// The header is read by every CTA from shared memory (one 64-byte load), its checksum is not verified here (the
// product would give that to one warp, off the critical path). The rest of §4's checks on what a chunk reads are
// made (index entries, record size, escape lists, code 0 of escapes, codes in the codebook, the LH32 checksum).
//
// Variants since: the library's header parse run once or twice before the tables (what it costs a small call), and
// --parse-cycles (its cycles alone).
//
// Run: probe_lean_decode DATA_DIR [SIZES_MIB] [REPS] [--parse-cycles]
//      (DATA_DIR holds kv_code_bf16.bin, kv_prose_bf16.bin)
// Results and what they led to: bench/NOTES.md (v9.7, v9.9), bench/results/gpu_v9_7_ab.md, gpu_v9_9_probe.md.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/agent/header.cuh"
#include "cuda/dtype.cuh"
#include "cuda/warp/io.cuh"
#include "cuda/warp/lh32_rounds.cuh"
#include "gpu_util.h"
#include "layout.h"
#include "splitzip/splitzip.h"
#include "splitzip/splitzip_cuda.h"

namespace probe {
using namespace splitzip::cuda;
namespace layout = splitzip::layout;

constexpr int kWarps = 4;
constexpr uint32_t kListCap = 512;
constexpr uint32_t kListBytes = 3 * kListCap + 32;

struct Shared {
  uint32_t pair[256];
  uint8_t in_cb[256];
  uint8_t hdr[64];
  LhState lh[2][kWarps][32];
  LhKeys keys[32];
  uint8_t stage[kWarps][kRoundBytes];
  uint8_t list[kWarps][kListBytes];
  Header h;  // after the 16-byte aligned arrays above
  bool parse_err;
};

struct Ws {
  unsigned long long err;
  unsigned long long tickets;
};

__device__ __forceinline__ uint32_t ldw(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

template <int K, bool kPrefetch, int kMinBlocks, int kParse>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks)
    lean_decode(const uint8_t* __restrict__ src, uint64_t src_size, uint8_t* __restrict__ dst, Ws* ws, int* status) {
  __shared__ __align__(16) Shared sh;
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  if (threadIdx.x < 16) reinterpret_cast<uint32_t*>(sh.hdr)[threadIdx.x] = ldw(src + 4 * threadIdx.x);
  __syncthreads();
  // kParse: thread 0 runs the library's header parse and checks (docs/FORMAT.md §4.1, the header hash included) kParse
  // times, as the library's decoder does once in every CTA before its tables: what that costs a small call, and (a
  // second time, its code then in the instruction cache) how much of it is fetching cold code.
  if (kParse) {
    if (threadIdx.x == 0) {
      bool e = false;
      for (int i = 0; i < kParse; ++i) e |= parse_header(sh.hdr, src_size, &sh.h) != SZ_OK;  // twice: warm code
      sh.parse_err = e;
    }
    __syncthreads();
  }
  const uint8_t* hb = sh.hdr;
  const uint32_t chunk_log2 = hb[layout::kOffChunkLog2], flags = layout::load_u32(hb + layout::kOffFlags);
  const uint32_t count = hb[layout::kOffCodebookCount];
  const uint64_t n = layout::load_u64(hb + layout::kOffNValues);
  const uint32_t S = 1u << chunk_log2;
  const uint64_t C = layout::n_chunks(n, chunk_log2);
  const bool cks = (flags & layout::kFlagChecksums) != 0;
  const layout::FrameOffsets fo = layout::frame_offsets(n, chunk_log2, cks, layout::dtype_traits(1), 0);
  const uint64_t ck_off = fo.checksums, rest_off = fo.rest, exp_off = fo.exponents;
  for (uint32_t i = threadIdx.x; i < 256; i += blockDim.x) {
    bool in = false;
    for (uint32_t j = 0; j < count; ++j) in |= hb[layout::kOffCodebook + j] == i;
    sh.in_cb[i] = in;
  }
  build_decode_tables<1>(sh.pair, hb + layout::kOffCodebook, K, count);
  __syncthreads();
  // only the CTAs that have a chunk take part (the grid is sized for the most chunks the buffer could hold)
  const uint64_t ctas = C < gridDim.x ? C : gridDim.x;
  if (blockIdx.x >= ctas) return;
  const uint32_t cb0 = hb[layout::kOffCodebook];
  if (threadIdx.x < 32) sh.keys[threadIdx.x] = kLhKeys[threadIdx.x];
  __syncthreads();
  const LhKeys& keys = sh.keys[lane];
  const uint32_t NR = S * 2 / kRoundBytes;
  bool bad = false;
  uint8_t* const stage = sh.stage[warp];
  uint8_t* const listb = sh.list[warp];

  auto load_rest = [&](uint64_t c, uint32_t r, uint32_t rest[8]) {
    const uint8_t* p = src + rest_off + c * S + r * 1024u + 32u * lane;
    if (((uintptr_t)p & 15u) == 0) {
      const uint4 a = __ldcs(reinterpret_cast<const uint4*>(p)), b = __ldcs(reinterpret_cast<const uint4*>(p) + 1);
      rest[0] = a.x; rest[1] = a.y; rest[2] = a.z; rest[3] = a.w;
      rest[4] = b.x; rest[5] = b.y; rest[6] = b.z; rest[7] = b.w;
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) rest[i] = __ldcs(reinterpret_cast<const unsigned*>(p) + i);
    }
  };
  uint64_t c = blockIdx.x;
  uint64_t e_cur = 0, e_prev = 0;
  uint32_t rest[8], nrest[8];
  uint64_t n_cur = 0, n_prev = 0;
  if (c < C) {
    e_cur = reinterpret_cast<const uint64_t*>(src + 64)[c];
    e_prev = c ? reinterpret_cast<const uint64_t*>(src + 64)[c - 1] : 0;
    if (warp < NR) load_rest(c, warp, rest);
  }
  uint32_t parity = 0;
  for (; c < C; c += gridDim.x) {
    const uint64_t nc = c + gridDim.x;
    if (kPrefetch && nc < C) {
      n_cur = reinterpret_cast<const uint64_t*>(src + 64)[nc];
      n_prev = reinterpret_cast<const uint64_t*>(src + 64)[nc - 1];
      if (warp < NR) load_rest(nc, warp, nrest);
    }
    const uint32_t want = cks ? layout::load_u32(src + ck_off + 4 * c) : 0u;
    // §4.3 / §4.5 for this chunk (full chunks only in this probe: n is a multiple of S)
    const uint64_t end = e_cur & layout::kIndexEndMask, begin = c ? (e_prev & layout::kIndexEndMask) : 0;
    const uint32_t mode = (uint32_t)(e_cur >> layout::kIndexModeShift);
    const uint32_t Gn = S / 8, G = Gn * K;
    const uint64_t size = end - begin;
    const bool raw = mode == 1;
    bool ok = mode <= 1 && end >= begin && (raw ? size == Gn * 8ull : (size >= G && (size - G) % 3 == 0));
    const uint32_t X = ok && !raw ? (uint32_t)((size - G) / 3) : 0;
    if (X > kListCap) ok = false;  // the product reads longer lists in place
    const uint8_t* rec = src + exp_off + begin;
    LhState ls = lh_zero();
    if (ok) {
      // this warp's copy of the escape lists (3X bytes) at the phase of their address
      const uint8_t* eg = rec + G;
      const uintptr_t a0 = (uintptr_t)eg & ~(uintptr_t)15;
      const uint32_t nb = X ? (uint32_t)((((uintptr_t)eg + 3 * X + 15) & ~(uintptr_t)15) - a0) / 16 : 0;
      for (uint32_t i = lane; i < nb; i += 32)
        reinterpret_cast<uint4*>(listb)[i] = __ldcs(reinterpret_cast<const uint4*>(a0) + i);
      const uint8_t* es = listb + ((uintptr_t)eg & 15u);
      for (uint32_t r = warp; r < NR; r += kWarps) {
        // codes: 4K bytes of the lane at any alignment
        uint32_t cw[8];  // codes of the lane's 4 groups, or (raw records) its 8 words of exponent fields
        if (!raw) {
          const uint8_t* cp = rec + r * 128u * K + 4u * K * lane;
          const uint32_t sh8 = ((uintptr_t)cp & 3u) * 8u;
          const uint8_t* ca = cp - ((uintptr_t)cp & 3u);
          uint32_t w[K + 1];
#pragma unroll
          for (int i = 0; i <= K; ++i) w[i] = __ldcs(reinterpret_cast<const unsigned*>(ca) + i);
          uint32_t v[K];
#pragma unroll
          for (int i = 0; i < K; ++i) v[i] = __funnelshift_r(w[i], w[i + 1], sh8);
#pragma unroll
          for (int g = 0; g < 4; ++g) {
            const uint32_t bit = 8 * K * g, i = bit / 32, s = bit % 32;
            uint32_t x = v[i] >> s;
            if (s + 8 * K > 32) x |= v[i + 1] << (32 - s);
            cw[g] = K == 4 ? x : x & ((1u << (8 * K)) - 1u);
          }
        } else {
          const uint8_t* ep = rec + r * 1024u + 32u * lane;
#pragma unroll
          for (int i = 0; i < 8; ++i) cw[i] = layout::load_u32(ep + 4 * i);
        }
        simt::syncwarp();  // the list copy
        if (r != warp) load_rest(c, r, rest);  // rounds past the first of a warp (chunks over 4 rounds)
        auto put = [&](int t, uint4 v) { *reinterpret_cast<uint4*>(stage + swz(4 * lane + t)) = v; };
        if (raw) decode_lane<1, true>(cw, rest, reinterpret_cast<const uint8_t*>(sh.pair), K, put);
        else if (decode_lane<1, false>(cw, rest, reinterpret_cast<const uint8_t*>(sh.pair), K, put)) bad = true;
        // a quarter of the lists' checks (every warp has the whole list)
        if (r == warp && X) {
          const uint32_t per = (X + kWarps - 1) / kWarps, i0 = warp * per, i1 = min(X, i0 + per);
          for (uint32_t i = i0 + lane; i < i1; i += 32) {
            const uint32_t p = es[2 * i] | (es[2 * i + 1] << 8), e = es[2 * X + i];
            const uint32_t pp = i ? es[2 * i - 2] | (es[2 * i - 1] << 8) : 0;
            if (p >= S || (i && pp >= p) || sh.in_cb[e]) bad = true;
          }
        }
        simt::syncwarp();
        // this round's escapes: positions [r 1024, r 1024 + 1024)
        const uint32_t lo = r * 1024u, hi = lo + 1024u;
        for (uint32_t b0 = 0; b0 < X; b0 += 32) {
          const uint32_t i = b0 + lane;
          const uint32_t p = i < X ? (es[2 * i] | (es[2 * i + 1] << 8)) : 0xFFFFu;
          if (p >= lo && p < hi) {
            const uint32_t o = (p - lo) * 2;
            uint16_t* v = reinterpret_cast<uint16_t*>(stage + swz(o / 16) + o % 16);
            uint32_t x = *v;
            if (((x >> 7) & 0xFFu) != cb0) bad = true;
            x = (x & 0x807Fu) | ((uint32_t)es[2 * X + i] << 7);
            *v = (uint16_t)x;
          }
          if (simt::ballot(p < hi) == 0u) break;
        }
        simt::syncwarp();
        uint64_t plo[4], phi[4];
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          const uint4 q = *reinterpret_cast<const uint4*>(stage + swz(lane + 32 * t));
          plo[t] = (uint64_t)q.x | ((uint64_t)q.y << 32);
          phi[t] = (uint64_t)q.z | ((uint64_t)q.w << 32);
        }
        if (cks) lh_round<false>(ls, plo, phi, keys, r, S * 2);
        uint8_t* g = dst + c * S * 2 + r * kRoundBytes;
#pragma unroll
        for (int t = 0; t < 4; ++t)
          __stcs(reinterpret_cast<uint4*>(g + 16u * (lane + 32 * t)),
                 make_uint4((uint32_t)plo[t], (uint32_t)(plo[t] >> 32), (uint32_t)phi[t], (uint32_t)(phi[t] >> 32)));
        simt::syncwarp();
      }
    } else {
      bad = true;
    }
    if (cks) {
      sh.lh[parity][warp][lane] = ls;
      __syncthreads();
      if (warp == 0) {
        LhState t = lh_begin(keys);
#pragma unroll
        for (int w = 0; w < kWarps; ++w) lh_add(t, sh.lh[parity][w][lane]);
        if (lh_finish(t, S * 2) != want) bad = true;
      }
      parity ^= 1u;
    }
    if (kPrefetch) {
      e_cur = n_cur;
      e_prev = n_prev;
#pragma unroll
      for (int i = 0; i < 8; ++i) rest[i] = nrest[i];
    } else if (nc < C) {
      e_cur = reinterpret_cast<const uint64_t*>(src + 64)[nc];
      e_prev = reinterpret_cast<const uint64_t*>(src + 64)[nc - 1];
      if (warp < NR) load_rest(nc, warp, rest);
    }
  }
  if (kParse && sh.parse_err) bad = true;
  if (__any_sync(0xFFFFFFFFu, bad) && lane == 0) atomicCAS(&ws->err, 0ull, (unsigned long long)SZ_ERROR_CORRUPT);
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned long long t = atomicAdd(&ws->tickets, 1ull);
    if (t == ctas - 1) {
      __threadfence();
      *status = (int)atomicExch(&ws->err, 0ull);
      ws->tickets = 0;
    }
  }
}

using Kernel = void (*)(const uint8_t*, uint64_t, uint8_t*, Ws*, int*);
template <bool P, int MB, int H>
Kernel kernel_for(int k) {
  switch (k) {
    case 1: return lean_decode<1, P, MB, H>;
    case 2: return lean_decode<2, P, MB, H>;
    case 3: return lean_decode<3, P, MB, H>;
    default: return lean_decode<4, P, MB, H>;
  }
}
// The variants measured: (prefetch, CTAs per SM the registers are cut for, times the library's header parse runs).
constexpr int kVariants = 4;
const char* const kVariantNames[kVariants] = {"probe (8 CTAs/SM)", "probe+prefetch (8)", "probe+header parse (8)",
                                              "probe+parse twice (8)"};
Kernel variant(int v, int k) {
  return v == 0   ? kernel_for<false, 8, 0>(k)
         : v == 1 ? kernel_for<true, 8, 0>(k)
         : v == 2 ? kernel_for<false, 8, 1>(k)
                  : kernel_for<false, 8, 2>(k);
}

// The parse's cost in SM cycles of one thread (clock64), on a real header copied to shared memory: the whole parse,
// and the header hash alone (each call's length depends on the previous result, so the calls form one chain and
// none can be hoisted). Each timed reps times back to back; out[0..1] cycles a call.
__global__ void parse_cycles(const uint8_t* src, uint64_t src_size, int reps, long long* out) {
  __shared__ __align__(16) uint8_t hdr[64];
  __shared__ Header h;
  if (threadIdx.x < 16) reinterpret_cast<uint32_t*>(hdr)[threadIdx.x] = ldw(src + 4 * threadIdx.x);
  __syncthreads();
  if (threadIdx.x != 0) return;
  unsigned sink = 0;
  const long long t0 = clock64();
  for (int i = 0; i < reps; ++i) sink += (unsigned)parse_header(hdr, src_size + (uint64_t)(i & 1), &h);
  const long long t1 = clock64();
  for (int i = 0; i < reps; ++i) sink += splitzip::xxh3::h32(hdr, layout::kHeaderChecksummed - (sink & 1));
  const long long t2 = clock64();
  out[0] = (t1 - t0) / reps;
  out[1] = (t2 - t1) / reps;
  out[2] = sink;
}

__global__ void count_diff(const uint4* a, const uint4* b, uint64_t n16, unsigned long long* out) {
  unsigned long long d = 0;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n16; i += (uint64_t)gridDim.x * blockDim.x) {
    const uint4 x = a[i], y = b[i];
    d += (x.x != y.x) + (x.y != y.y) + (x.z != y.z) + (x.w != y.w);
  }
  if (d) atomicAdd(out, d);
}

}  // namespace probe

int main(int argc, char** argv) {
  using namespace probe;
  if (argc < 2) {
    fprintf(stderr, "usage: %s DATA_DIR [SIZES_MIB] [REPS]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  std::vector<int> sizes = {1, 4, 16, 64, 256, 1024};
  if (argc > 2) {
    sizes.clear();
    for (const char* p = argv[2]; *p;) {
      sizes.push_back(atoi(p));
      while (*p && *p != ',') ++p;
      if (*p) ++p;
    }
  }
  const int reps = argc > 3 ? atoi(argv[3]) : 7;
  const bool parse_only = argc > 4 && std::string(argv[4]) == "--parse-cycles";
  std::vector<uint8_t> tile = szbench::read_file(dir + "/kv_code_bf16.bin");
  const std::vector<uint8_t> t2 = szbench::read_file(dir + "/kv_prose_bf16.bin");
  tile.insert(tile.end(), t2.begin(), t2.end());
  if (tile.empty()) {
    fprintf(stderr, "no data in %s\n", dir.c_str());
    return 2;
  }
  sz_histogram hist;
  SZ(sz_histogram_init(&hist, SZ_DTYPE_BF16));
  SZ(sz_histogram_add(&hist, tile.data(), tile.size() / 2));
  sz_codebook cb;
  SZ(sz_calibrate(&hist, &cb, nullptr));
  int dev = 0, sms = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  printf("device %s, %d SMs; codebook k=%u count=%u\n", prop.name, sms, cb.code_bits, cb.count);
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  Ws* ws;
  int* d_status;
  unsigned long long* d_diff;
  CK(cudaMalloc(&ws, sizeof(Ws)));
  CK(cudaMemset(ws, 0, sizeof(Ws)));
  CK(cudaMalloc(&d_status, 4 * 64));
  CK(cudaMalloc(&d_diff, 8));
  int occ[kVariants];
  for (int v = 0; v < kVariants; ++v) {
    for (int k = 1; k <= 4; ++k)
      CK(cudaFuncSetAttribute((const void*)variant(v, k), cudaFuncAttributePreferredSharedMemoryCarveout, 100));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ[v], variant(v, cb.code_bits), kWarps * 32, 0));
    printf("%s: %d CTAs/SM resident\n", kVariantNames[v], occ[v]);
  }
  struct Row {
    int mib;
    const char* cks;
    double ratio, memcpy_gbs, lib, p[kVariants];
    long long bad_lib, bad_p[kVariants];
  };
  std::vector<Row> rows;
  for (int mib : sizes) {
    const size_t bytes = (size_t)mib << 20, n = bytes / 2;
    const int R = std::max(2, (int)((768 + mib - 1) / mib));
    std::vector<uint8_t*> in(R), out(R);
    std::vector<uint8_t*> fr(R);
    std::vector<uint8_t> host(bytes);
    const size_t cap = sz_compress_bound(n, SZ_DTYPE_BF16) + 64;
    for (int i = 0; i < R; ++i) {
      const size_t rot = ((size_t)i * 7919 * 2 * 192) % tile.size();
      for (size_t o = 0; o < bytes;) {
        const size_t at = (rot + o) % tile.size(), len = std::min(bytes - o, tile.size() - at);
        memcpy(host.data() + o, tile.data() + at, len);
        o += len;
      }
      CK(cudaMalloc(&in[i], bytes));
      CK(cudaMalloc(&out[i], bytes));
      CK(cudaMalloc(&fr[i], cap));
      CK(cudaMemcpy(in[i], host.data(), bytes, cudaMemcpyHostToDevice));
    }
    for (const char* ck : {"none", "lh32"}) {
      sz_params p = sz_params_default();
      p.flags = strcmp(ck, "none") == 0 ? 0u : (SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH);
      size_t cws = 0;
      SZ(sz_cuda_compress_workspace_size(n, SZ_DTYPE_BF16, &p, &cws));
      void* cw = nullptr;
      CK(cudaMalloc(&cw, cws));
      CK(cudaMemset(cw, 0, cws));
      uint64_t* d_fs;
      CK(cudaMalloc(&d_fs, 8 * R));
      for (int i = 0; i < R; ++i)
        SZ(sz_cuda_compress(in[i], n, SZ_DTYPE_BF16, &cb, &p, fr[i], cap, cw, cws, d_fs + i, nullptr, st));
      std::vector<uint64_t> fs(R);
      CK(cudaMemcpyAsync(fs.data(), d_fs, 8 * R, cudaMemcpyDeviceToHost, st));
      CK(cudaStreamSynchronize(st));
      // the first frame against the CPU codec, byte for byte
      {
        std::vector<uint8_t> cpu(cap), gpu(fs[0]);
        size_t cs = 0;
        CK(cudaMemcpy(host.data(), in[0], bytes, cudaMemcpyDeviceToHost));
        p.threads = 0;
        SZ(sz_compress(host.data(), n, SZ_DTYPE_BF16, &cb, &p, cpu.data(), cpu.size(), &cs));
        CK(cudaMemcpy(gpu.data(), fr[0], fs[0], cudaMemcpyDeviceToHost));
        if (cs != fs[0] || memcmp(cpu.data(), gpu.data(), cs) != 0) {
          fprintf(stderr, "GPU frame differs from the CPU frame at %d MiB %s\n", mib, ck);
          return 1;
        }
      }
      if (parse_only) {  // the header parse's cycles, then the next case
        long long* d_out = nullptr;
        long long c[3];
        CK(cudaMalloc(&d_out, sizeof c));
        parse_cycles<<<1, 32, 0, st>>>(fr[0], fs[0], 64, d_out);
        CK(cudaGetLastError());
        CK(cudaMemcpy(c, d_out, sizeof c, cudaMemcpyDeviceToHost));
        CK(cudaFree(d_out));
        printf("%5d MiB %-4s header parse %lld cycles, header hash %lld\n", mib, ck, c[0], c[1]);
        CK(cudaFree(cw));
        CK(cudaFree(d_fs));
        continue;
      }
      double fb = 0;
      for (int i = 0; i < R; ++i) fb += (double)fs[i];
      fb /= R;
      size_t dws = 0;
      SZ(sz_cuda_decompress_workspace_size(fs[0], bytes, &dws));
      void* dw = nullptr;
      CK(cudaMalloc(&dw, dws));
      CK(cudaMemset(dw, 0, dws));
      auto batch = [&](int what) {  // 0 memcpy, 1 library, 2 + v probe variant v
        Kernel kf = what >= 2 ? variant(what - 2, cb.code_bits) : nullptr;
        const uint64_t maxc = fs[0] / 104 + 1;
        const int o = what >= 2 ? occ[what - 2] : 1;
        const unsigned grid = (unsigned)std::min<uint64_t>(maxc, (uint64_t)sms * o);
        for (int i = 0; i < R; ++i) {
          if (what == 0) CK(cudaMemcpyAsync(out[i], in[i], bytes, cudaMemcpyDeviceToDevice, st));
          else if (what == 1)
            SZ(sz_cuda_decompress(fr[i], fs[i], out[i], bytes, dw, dws, d_status + (i % 64), nullptr, st));
          else kf<<<grid, kWarps * 32, 0, st>>>(fr[i], fs[i], out[i], ws, d_status + (i % 64));
        }
      };
      auto verify = [&](int what) -> long long {
        long long bad = 0;
        for (int i = 0; i < R; ++i) CK(cudaMemsetAsync(out[i], 0xA5, bytes, st));
        CK(cudaMemsetAsync(d_status, 0x7F, 4 * 64, st));
        batch(what);
        CK(cudaGetLastError());
        for (int i = 0; i < R; ++i) {
          CK(cudaMemsetAsync(d_diff, 0, 8, st));
          count_diff<<<512, 256, 0, st>>>((const uint4*)in[i], (const uint4*)out[i], bytes / 16, d_diff);
          unsigned long long d = 0;
          CK(cudaMemcpyAsync(&d, d_diff, 8, cudaMemcpyDeviceToHost, st));
          CK(cudaStreamSynchronize(st));
          bad += (long long)d;
        }
        std::vector<int> s(64);
        CK(cudaMemcpy(s.data(), d_status, 4 * 64, cudaMemcpyDeviceToHost));
        for (int i = 0; i < std::min(R, 64); ++i)
          if (s[i] != 0) {
            fprintf(stderr, "variant %d: status %d on buffer %d at %d MiB %s\n", what, s[i], i, mib, ck);
            ++bad;
          }
        return bad;
      };
      auto timed = [&](int what) {
        batch(what);
        std::vector<float> t;
        for (int r = 0; r < reps; ++r) {
          CK(cudaEventRecord(e0, st));
          batch(what);
          CK(cudaEventRecord(e1, st));
          CK(cudaEventSynchronize(e1));
          float ms = 0;
          CK(cudaEventElapsedTime(&ms, e0, e1));
          t.push_back(ms);
        }
        std::sort(t.begin(), t.end());
        return (double)t[t.size() / 2] * 1e-3 / R;  // seconds per call
      };
      Row row{};
      row.mib = mib;
      row.cks = ck;
      row.ratio = (double)bytes / fb;
      row.bad_lib = verify(1);
      for (int v = 0; v < kVariants; ++v) row.bad_p[v] = verify(2 + v);
      // interleaved timing: memcpy, library, the probe variants, twice; the better of the two medians each
      double tm = 1e9, tl = 1e9, tp[kVariants];
      for (int v = 0; v < kVariants; ++v) tp[v] = 1e9;
      for (int pass = 0; pass < 2; ++pass) {
        tm = std::min(tm, timed(0));
        tl = std::min(tl, timed(1));
        for (int v = 0; v < kVariants; ++v) tp[v] = std::min(tp[v], timed(2 + v));
      }
      row.memcpy_gbs = 2.0 * bytes / tm * 1e-9;
      row.lib = bytes / tl * 1e-9;
      for (int v = 0; v < kVariants; ++v) row.p[v] = bytes / tp[v] * 1e-9;
      rows.push_back(row);
      printf("%5d MiB %-4s ratio %.3f memcpy %7.1f GB/s | us/call memcpy %.2f lib %.2f", mib, ck, row.ratio,
             row.memcpy_gbs, tm * 1e6, tl * 1e6);
      for (int v = 0; v < kVariants; ++v) printf(" v%d %.2f", v, tp[v] * 1e6);
      printf("\n");
      fflush(stdout);
      CK(cudaFree(dw));
      CK(cudaFree(cw));
      CK(cudaFree(d_fs));
    }
    for (int i = 0; i < R; ++i) {
      CK(cudaFree(in[i]));
      CK(cudaFree(out[i]));
      CK(cudaFree(fr[i]));
    }
  }
  printf("\n| MiB | cks | ratio | memcpy GB/s | library decode GB/s (/roof)");
  for (int v = 0; v < kVariants; ++v) printf(" | %s (/roof)", kVariantNames[v]);
  printf(" | wrong words or statuses, library / variants |\n|---:|---|---:|---:|---:|");
  for (int v = 0; v < kVariants; ++v) printf("---:|");
  printf("---|\n");
  for (const Row& r : rows) {
    const double roof = r.memcpy_gbs * r.ratio / (r.ratio + 1.0);
    printf("| %d | %s | %.3f | %.0f | %.0f (%.2f)", r.mib, r.cks, r.ratio, r.memcpy_gbs, r.lib, r.lib / roof);
    for (int v = 0; v < kVariants; ++v) printf(" | %.0f (%.2f)", r.p[v], r.p[v] / roof);
    printf(" | %lld", r.bad_lib);
    for (int v = 0; v < kVariants; ++v) printf(" / %lld", r.bad_p[v]);
    printf(" |\n");
  }
  return 0;
}
