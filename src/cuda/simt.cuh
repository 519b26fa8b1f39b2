// simt.cuh — the SIMT primitives the CUDA codec is written in, for two targets:
//   - the GPU (nvcc, device pass): each primitive is one intrinsic or one PTX instruction;
//   - the host emulator of the tests (SZ_SIMT_EMU, tests/cuda/emu): every thread is a fiber, warp collectives are
//     rendezvous points that check that all 32 lanes arrive at the same one, and cp.async copies land only when the
//     issuing lane waits for them. The kernels' logic is thereby tested bit for bit on machines without a GPU.
// Kernel code uses only what is declared here (plus plain loads and stores), never threadIdx or intrinsics directly.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "layout.h"  // SZ_HD

#if defined(SZ_SIMT_EMU)
#include <string.h>

#include "emu/simt_emu.h"
#define SZ_DEV inline
// Out of line as on the GPU; with external linkage, so that the emulator tests compile each dtype's kernel code in
// a TU of its own (tests/cuda/emu/kernels.h).
#define SZ_NOINLINE inline __attribute__((noinline))
#define SZ_KERNEL
#define SZ_LINE_ARG , int line = __builtin_LINE()
struct uint2 {
  unsigned x, y;
};
struct uint4 {
  unsigned x, y, z, w;
};
inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
#else
#include <cuda_runtime.h>
#define SZ_DEV __device__ __forceinline__
#define SZ_NOINLINE static __device__ __noinline__
#define SZ_KERNEL __global__
#define SZ_LINE_ARG
#endif

namespace splitzip {
namespace cuda {
namespace simt {

constexpr unsigned kFull = 0xFFFFFFFFu;

#if !defined(SZ_SIMT_EMU)
// ---- GPU ----------------------------------------------------------------------------------------------------------
SZ_DEV unsigned thread_id() { return threadIdx.x; }
SZ_DEV unsigned lane_id() { return threadIdx.x & 31u; }
SZ_DEV unsigned warp_id() { return threadIdx.x >> 5; }
SZ_DEV unsigned block_id() { return blockIdx.x; }
SZ_DEV unsigned grid_blocks() { return gridDim.x; }
SZ_DEV unsigned block_threads() { return blockDim.x; }
// The dynamic shared memory, 1 KiB-aligned: a table of at most 1 KiB at its start has a base that indices can be
// ORed into (lds_u32), which saves the add of the base before each load.
SZ_DEV uint8_t* dyn_smem() {
  extern __shared__ __align__(1024) uint8_t sz_smem[];
  return sz_smem;
}

template <class T>
SZ_DEV T shfl(T v, int src) { return __shfl_sync(kFull, v, src); }
template <class T>
SZ_DEV T shfl_xor(T v, int m) { return __shfl_xor_sync(kFull, v, m); }
template <class T>
SZ_DEV T shfl_up(T v, unsigned d) { return __shfl_up_sync(kFull, v, d); }
SZ_DEV unsigned ballot(bool p) { return __ballot_sync(kFull, p); }
SZ_DEV bool any(bool p) { return __any_sync(kFull, p) != 0; }
SZ_DEV void syncwarp() { __syncwarp(); }
SZ_DEV void syncthreads() { __syncthreads(); }
// Barrier `id` (1..15; 0 is __syncthreads) over `threads` threads of the block (whole warps), returning whether p held
// in any of them: the warps of a team meet here once per chunk.
SZ_DEV bool barrier_or(unsigned id, unsigned threads, bool p) {
  unsigned r;
  asm volatile(
      "{\n .reg .pred q;\n setp.ne.u32 q, %1, 0;\n bar.red.or.pred q, %2, %3, q;\n selp.u32 %0, 1, 0, q;\n}"
      : "=r"(r)
      : "r"((unsigned)p), "r"(id), "r"(threads)
      : "memory");
  return r != 0;
}

SZ_DEV int popc(uint32_t v) { return __popc(v); }
SZ_DEV int popc64(uint64_t v) { return __popcll(v); }
SZ_DEV int ffs(uint32_t v) { return __ffs(v); }
SZ_DEV int ffs64(uint64_t v) { return __ffsll((long long)v); }
// PTX prmt (default mode): byte i of the result is byte (s_i & 7) of {b, a} (a = bytes 0..3), sign-replicated when
// bit 3 of selector nibble s_i is set.
SZ_DEV uint32_t prmt(uint32_t a, uint32_t b, uint32_t s) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(s));
  return r;
}
SZ_DEV uint32_t funnel_r(uint32_t lo, uint32_t hi, uint32_t sh) { return __funnelshift_r(lo, hi, sh); }
// The mask of the lanes below `lane` ((1 << lane) - 1) as a clamped funnel shift, which ptxas keeps in a register
// where it would recompute the shift's form in every use under register pressure.
SZ_DEV uint32_t lanes_below(unsigned lane) { return ~__funnelshift_lc(0u, 0xFFFFFFFFu, lane); }
SZ_DEV uint64_t umulhi64(uint64_t a, uint64_t b) { return __umul64hi(a, b); }

SZ_DEV uint64_t atomic_add(uint64_t* p, uint64_t v) {
  return (uint64_t)atomicAdd((unsigned long long*)p, (unsigned long long)v);
}
SZ_DEV uint64_t atomic_cas(uint64_t* p, uint64_t cmp, uint64_t v) {
  return (uint64_t)atomicCAS((unsigned long long*)p, (unsigned long long)cmp, (unsigned long long)v);
}
// The same with acquire semantics (device scope): later memory operations of the thread stay after it, while earlier
// stores need not have completed (unlike a fence).
SZ_DEV uint64_t atomic_add_acquire(uint64_t* p, uint64_t v) {
  uint64_t o;
  asm volatile("atom.acquire.gpu.add.u64 %0, [%1], %2;" : "=l"(o) : "l"(p), "l"(v) : "memory");
  return o;
}
SZ_DEV uint64_t atomic_cas_acquire(uint64_t* p, uint64_t cmp, uint64_t v) {
  uint64_t o;
  asm volatile("atom.acquire.gpu.cas.b64 %0, [%1], %2, %3;" : "=l"(o) : "l"(p), "l"(cmp), "l"(v) : "memory");
  return o;
}
SZ_DEV uint64_t ld_relaxed(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
SZ_DEV void st_relaxed(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// A 16-byte word read or written in one access (16-byte aligned; the hardware does not split it, as CUB's tile
// status words rely on), bypassing L1.
struct Word128 {
  uint64_t a, b;
};
SZ_DEV Word128 ld_word128(const Word128* p) {
  Word128 w;
  asm volatile("ld.global.cg.v2.u64 {%0, %1}, [%2];" : "=l"(w.a), "=l"(w.b) : "l"(p) : "memory");
  return w;
}
SZ_DEV void st_word128(Word128* p, Word128 w) {
  asm volatile("st.global.cg.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(w.a), "l"(w.b) : "memory");
}
SZ_DEV void fence() { __threadfence(); }
// Programmatic dependent launch (the host launches every kernel with programmatic stream serialization): a kernel
// may start while the stream's previous kernel finishes. grid_dependency_wait returns once that kernel has completed
// and its writes are visible; a kernel reads or writes no global memory before it (its parameters and shared memory
// only). launch_dependents lets the stream's next kernel start its own prologue as this one's CTAs finish.
SZ_DEV void grid_dependency_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
SZ_DEV void launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
SZ_DEV void nanosleep(unsigned ns) { __nanosleep(ns); }

// cp.async of 16 / 8 / 4 bytes global -> shared (both aligned to the size); groups per thread.
SZ_DEV void cp_async16(void* s, const void* g) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((uint32_t)__cvta_generic_to_shared(s)), "l"(g)
               : "memory");
}
SZ_DEV void cp_async8(void* s, const void* g) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"((uint32_t)__cvta_generic_to_shared(s)), "l"(g)
               : "memory");
}
SZ_DEV void cp_async4(void* s, const void* g) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"((uint32_t)__cvta_generic_to_shared(s)), "l"(g)
               : "memory");
}
SZ_DEV void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
SZ_DEV void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// Bulk copies global -> shared (the copy engine, one instruction for a whole range) completing on an mbarrier: an
// 8-byte shared-memory word that counts one arrival per phase plus the bytes announced for it, and flips its phase
// when both are in. Source, destination and size are multiples of 16 bytes.
SZ_DEV uint32_t smem_addr(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
// The 32-bit word at shared address a (smem_addr's form). Volatile: the loads keep their order against the barriers
// after which the tables they read are complete.
SZ_DEV uint32_t lds_u32(uint32_t a) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(a));
  return v;
}
SZ_DEV uint2 lds_v2_u32(uint32_t a) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(a));
  return v;
}
// Reads of a table that no thread writes while the reads run (after the barrier that completes it, in a function
// that does not inline into the code before that barrier): not volatile, so that they schedule freely. The byte
// at shared address a, and the word at a + kOff (the offset folds into the load).
SZ_DEV uint32_t lds_table_u8(uint32_t a) {
  uint32_t v;
  asm("ld.shared.u8 %0, [%1];" : "=r"(v) : "r"(a));
  return v;
}
template <uint32_t kOff>
SZ_DEV uint32_t lds_table_u32(uint32_t a) {
  uint32_t v;
  asm("ld.shared.u32 %0, [%1+%2];" : "=r"(v) : "r"(a), "n"(kOff));
  return v;
}
// The 16-bit word at shared address a + 2 i, the address formed as one multiply-add off a (which the compiler
// cannot fold back into the terms that made a): volatile, so it stays after the stores that fill its buffer.
SZ_DEV uint32_t lds_u16_at(uint32_t a, uint32_t i) {
  uint32_t v;
  asm volatile(
      "{\n\t.reg .u32 t;\n\tmad.lo.u32 t, %2, 2, %1;\n\tld.shared.u16 %0, [t];\n\t}" : "=r"(v) : "r"(a), "r"(i));
  return v;
}
SZ_DEV void mbar_init(uint64_t* m, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(m)), "r"(arrivals) : "memory");
}
// Makes initialised mbarriers visible to the copy engine.
SZ_DEV void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
// One arrival on m, announcing `bytes` that bulk copies of this phase will deliver.
SZ_DEV void mbar_arrive_expect(uint64_t* m, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(m)), "r"(bytes) : "memory");
}
// Whether the phase of parity `parity` of m has completed (its copies have landed and are visible).
SZ_DEV bool mbar_try_wait(uint64_t* m, uint32_t parity) {
  uint32_t ok;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
      : "=r"(ok)
      : "r"(smem_addr(m)), "r"(parity)
      : "memory");
  return ok != 0;
}
SZ_DEV void bulk_copy(void* s, const void* g, uint32_t bytes, uint64_t* m) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_addr(s)),
               "l"(g), "r"(bytes), "r"(smem_addr(m))
               : "memory");
}
// Orders this thread's earlier shared-memory accesses before later bulk copies into the same bytes.
SZ_DEV void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// Global loads and stores of streamed data (evict-first: read or written once).
SZ_DEV uint4 ld_stream16(const void* p) { return __ldcs(reinterpret_cast<const uint4*>(p)); }
SZ_DEV void st_stream16(void* p, uint4 v) { __stcs(reinterpret_cast<uint4*>(p), v); }
SZ_DEV void st_stream8(void* p, uint2 v) { __stcs(reinterpret_cast<uint2*>(p), v); }
SZ_DEV void st_stream4(void* p, uint32_t v) { __stcs(reinterpret_cast<unsigned*>(p), v); }

#else
// ---- host emulator (tests) ----------------------------------------------------------------------------------------
inline unsigned thread_id() { return simt_emu::ctx().tid; }
inline unsigned lane_id() { return simt_emu::ctx().tid & 31u; }
inline unsigned warp_id() { return simt_emu::ctx().tid >> 5; }
inline unsigned block_id() { return simt_emu::ctx().bid; }
inline unsigned grid_blocks() { return simt_emu::ctx().nblocks; }
inline unsigned block_threads() { return simt_emu::ctx().nthreads; }
inline uint8_t* dyn_smem() { return simt_emu::ctx().smem; }
// Shared addresses are offsets from the block's shared memory.
inline uint32_t smem_addr(const void* p) { return (uint32_t)(static_cast<const uint8_t*>(p) - simt_emu::ctx().smem); }
inline uint32_t lds_u32(uint32_t a) {
  uint32_t v;
  memcpy(&v, simt_emu::ctx().smem + a, 4);
  return v;
}
inline uint2 lds_v2_u32(uint32_t a) {
  uint2 v;
  memcpy(&v, simt_emu::ctx().smem + a, 8);
  return v;
}
inline uint32_t lds_table_u8(uint32_t a) { return simt_emu::ctx().smem[a]; }
inline uint32_t lds_u16_at(uint32_t a, uint32_t i) {
  uint16_t v;
  memcpy(&v, simt_emu::ctx().smem + a + 2 * i, 2);
  return v;
}
template <uint32_t kOff>
inline uint32_t lds_table_u32(uint32_t a) {
  uint32_t v;
  memcpy(&v, simt_emu::ctx().smem + a + kOff, 4);
  return v;
}

template <class T>
inline T shfl(T v, int src SZ_LINE_ARG) {
  uint64_t all[32];
  simt_emu::warp_exchange((uint64_t)v, line, all);
  return (T)all[src & 31];
}
template <class T>
inline T shfl_xor(T v, int m SZ_LINE_ARG) {
  uint64_t all[32];
  simt_emu::warp_exchange((uint64_t)v, line, all);
  return (T)all[(lane_id() ^ (unsigned)m) & 31u];
}
template <class T>
inline T shfl_up(T v, unsigned d SZ_LINE_ARG) {
  uint64_t all[32];
  simt_emu::warp_exchange((uint64_t)v, line, all);
  const unsigned l = lane_id();
  return l >= d ? (T)all[l - d] : v;
}
inline unsigned ballot(bool p SZ_LINE_ARG) {
  uint64_t all[32];
  simt_emu::warp_exchange(p ? 1 : 0, line, all);
  unsigned m = 0;
  for (unsigned i = 0; i < 32; ++i) m |= (unsigned)(all[i] & 1u) << i;
  return m;
}
inline bool any(bool p SZ_LINE_ARG) { return ballot(p, line) != 0; }
inline void syncwarp(int line = __builtin_LINE()) {
  uint64_t all[32];
  simt_emu::warp_exchange(0, line, all);
}
inline void syncthreads(int line = __builtin_LINE()) { simt_emu::block_barrier(line); }
inline bool barrier_or(unsigned id, unsigned threads, bool p, int line = __builtin_LINE()) {
  return simt_emu::named_barrier_or(id, threads, p, line);
}

inline int popc(uint32_t v) { return __builtin_popcount(v); }
inline int popc64(uint64_t v) { return __builtin_popcountll(v); }
inline int ffs(uint32_t v) { return __builtin_ffs((int)v); }
inline int ffs64(uint64_t v) { return __builtin_ffsll((long long)v); }
inline uint32_t prmt(uint32_t a, uint32_t b, uint32_t s) {
  const uint64_t x = (uint64_t)a | ((uint64_t)b << 32);
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t sel = (s >> (4 * i)) & 0xFu;
    uint32_t byte = (uint32_t)(x >> (8 * (sel & 7u))) & 0xFFu;
    if (sel & 8u) byte = (byte & 0x80u) ? 0xFFu : 0u;
    r |= byte << (8 * i);
  }
  return r;
}
inline uint32_t lanes_below(unsigned lane) { return (uint32_t)((1ull << lane) - 1u); }
inline uint32_t funnel_r(uint32_t lo, uint32_t hi, uint32_t sh) {
  const uint64_t x = (uint64_t)lo | ((uint64_t)hi << 32);
  return (uint32_t)(x >> (sh & 31u));
}
inline uint64_t umulhi64(uint64_t a, uint64_t b) { return (uint64_t)(((unsigned __int128)a * b) >> 64); }

inline uint64_t atomic_add(uint64_t* p, uint64_t v) {
  const uint64_t o = *p;
  *p = o + v;
  return o;
}
inline uint64_t atomic_cas(uint64_t* p, uint64_t cmp, uint64_t v) {
  const uint64_t o = *p;
  if (o == cmp) *p = v;
  return o;
}
inline uint64_t atomic_add_acquire(uint64_t* p, uint64_t v) { return atomic_add(p, v); }
inline uint64_t atomic_cas_acquire(uint64_t* p, uint64_t cmp, uint64_t v) { return atomic_cas(p, cmp, v); }
inline uint64_t ld_relaxed(const uint64_t* p) { return *p; }
inline void st_relaxed(uint64_t* p, uint64_t v) { *p = v; }
struct Word128 {
  uint64_t a, b;
};
inline Word128 ld_word128(const Word128* p) {
  simt_emu::yield();  // a spinning reader lets the others run
  return *p;
}
inline void st_word128(Word128* p, Word128 w) { *p = w; }
inline void fence() {}
inline void grid_dependency_wait() {}  // one kernel at a time
inline void launch_dependents() {}
inline void nanosleep(unsigned) { simt_emu::yield(); }

inline void cp_async16(void* s, const void* g) { simt_emu::async_copy(s, g, 16); }
inline void cp_async8(void* s, const void* g) { simt_emu::async_copy(s, g, 8); }
inline void cp_async4(void* s, const void* g) { simt_emu::async_copy(s, g, 4); }
inline void cp_async_commit() { simt_emu::async_commit(); }
template <int N>
inline void cp_async_wait() {
  simt_emu::async_wait(N);
}

inline void mbar_init(uint64_t* m, unsigned arrivals) { simt_emu::mbar_init(m, arrivals); }
inline void mbar_init_fence() {}
inline void mbar_arrive_expect(uint64_t* m, uint32_t bytes) { simt_emu::mbar_arrive_expect(m, bytes); }
inline bool mbar_try_wait(uint64_t* m, uint32_t parity) { return simt_emu::mbar_try_wait(m, parity); }
inline void bulk_copy(void* s, const void* g, uint32_t bytes, uint64_t* m) { simt_emu::bulk_copy(s, g, bytes, m); }
inline void fence_proxy_async() {}

inline uint4 ld_stream16(const void* p) {
  uint4 v;
  memcpy(&v, p, 16);
  return v;
}
inline void st_stream16(void* p, uint4 v) { memcpy(p, &v, 16); }
inline void st_stream8(void* p, uint2 v) { memcpy(p, &v, 8); }
inline void st_stream4(void* p, uint32_t v) { memcpy(p, &v, 4); }
#endif

// Waits for the phase of parity `parity` of m.
SZ_DEV void mbar_wait(uint64_t* m, uint32_t parity) {
  while (!mbar_try_wait(m, parity)) {
  }
}

// The inclusive sum of v over lanes 0..lane (Kogge-Stone over shfl_up); called by all 32 lanes.
SZ_DEV uint32_t warp_inclusive_sum(uint32_t v) {
  const unsigned lane = lane_id();
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const uint32_t o = shfl_up(v, (unsigned)d);
    if (lane >= (unsigned)d) v += o;
  }
  return v;
}

}  // namespace simt
}  // namespace cuda
}  // namespace splitzip
