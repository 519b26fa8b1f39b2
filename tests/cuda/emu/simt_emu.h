// simt_emu.h — a host emulator of the SIMT primitives of src/cuda/simt.cuh, so that the CUDA codec's kernels run,
// unchanged, on a machine without a GPU (the tests compile them with SZ_SIMT_EMU).
//
// Every thread of a grid is a fiber (on a stack of its own) and one scheduler runs them in a seeded random order. A
// warp collective (shuffle, ballot, syncwarp) is a rendezvous of the 32 lanes of the warp; it fails the test if the
// lanes arrive from different source lines (divergent collectives), if a lane exits while others wait, or if no fiber
// can make progress (a deadlock, e.g. a look-back waiting for a chunk nobody holds). cp.async copies take their source
// bytes when issued and land in shared memory only when the issuing lane waits for their group, so a read before
// the wait sees stale data, as it may on the GPU; bulk copies likewise land only when a wait on their mbarrier
// succeeds. Atomics and fences are plain operations: the scheduler runs one fiber at a time, so the emulator checks
// logic, not the memory model (compute-sanitizer does that on the GPU).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <functional>

namespace simt_emu {

struct Ctx {
  unsigned tid, bid, nthreads, nblocks;
  uint8_t* smem;
};
// The context of the running fiber.
Ctx& ctx();

// Deposits v for the calling lane; returns when all 32 lanes of its warp have deposited, with every lane's value.
void warp_exchange(uint64_t v, int line, uint64_t out[32]);
// __syncthreads over the calling fiber's block.
void block_barrier(int line);
// bar.red.or over barrier `id` (1..15) of the calling fiber's block: returns, once `threads` threads have arrived
// (all from the same source line), whether any of them passed p = true.
bool named_barrier_or(unsigned id, unsigned threads, bool p, int line);
// Lets the other fibers run (spin loops call it).
void yield();
void async_copy(void* dst, const void* src, size_t n);
void async_commit();
void async_wait(int groups_left);
// mbarriers and bulk copies: a bulk copy takes its source bytes when issued and lands when a wait on its mbarrier
// finds the phase complete (every arrival in and exactly the announced bytes issued); misuse fails the launch.
void mbar_init(void* m, unsigned arrivals);
void mbar_arrive_expect(void* m, uint32_t bytes);
void bulk_copy(void* dst, const void* src, uint32_t n, void* m);
bool mbar_try_wait(void* m, uint32_t parity);

struct LaunchStats {
  uint64_t switches = 0;
};
// Runs body() once for every thread of a grid of `grid` blocks of `threads` threads (a multiple of 32), each block
// with `smem_bytes` of dynamic shared memory filled with garbage (seeded). Returns false, with the reason in *why, on a divergent
// collective, a deadlock or a lane that exits with copies in flight.
bool launch(unsigned grid, unsigned threads, size_t smem_bytes, const std::function<void()>& body, uint64_t seed,
            const char** why, LaunchStats* stats = nullptr);

}  // namespace simt_emu
