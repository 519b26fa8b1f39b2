// simt_emu.cpp — the fiber scheduler behind simt_emu.h.
//
// A switch between fibers is a switch of stacks. On x86-64 it is simt_emu_switch_stack below: push the six callee-saved
// registers, swap the stack pointer, pop them. Elsewhere it is swapcontext, which also saves and restores the signal
// mask (a system call per switch) and, under AddressSanitizer, whose interceptor clears the shadow of the whole target
// stack on every switch; with those two, switching took most of the emulated kernels' time. Either way the switches
// tell AddressSanitizer which stack runs (its fiber annotations), so that it checks fiber stacks as it checks the
// thread's.
#include "simt_emu.h"

#include <sys/mman.h>
#include <ucontext.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define SZ_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SZ_EMU_ASAN 1
#endif
#endif
#if defined(SZ_EMU_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__x86_64__) && defined(__ELF__)
#define SZ_EMU_SWITCH_STACK 1
// switch_stack(save, to): saves the caller's callee-saved registers on its stack and that stack pointer in *save, then
// continues on stack `to`, which switch_stack itself (or make_stack) left in the same shape.
extern "C" void simt_emu_switch_stack(void** save, void* to);
asm(R"(
  .pushsection .text
  .p2align 4
  .globl simt_emu_switch_stack
  .hidden simt_emu_switch_stack
  .type simt_emu_switch_stack, @function
simt_emu_switch_stack:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size simt_emu_switch_stack, .-simt_emu_switch_stack
  .popsection
)");
#endif

namespace simt_emu {
namespace {

constexpr size_t kStack = 256 * 1024;
constexpr uint64_t kMaxIdleSwitches = 20000000;  // this many switches without progress: a deadlock

struct Copy {
  void* dst;
  std::vector<uint8_t> bytes;
};

struct Warp;
struct Block;

struct Fiber {
#if defined(SZ_EMU_SWITCH_STACK)
  void* sp = nullptr;  // saved stack pointer while switched out
#else
  ucontext_t uc;
#endif
  void* fake_stack = nullptr;  // AddressSanitizer's fake stack of the fiber while switched out
  void* stack = nullptr;
  Ctx c{};
  Warp* warp = nullptr;
  Block* block = nullptr;
  unsigned lane = 0;
  bool done = false;
  std::vector<Copy> open;
  std::vector<std::vector<Copy>> groups;
};

struct Warp {
  uint64_t vals[32];
  uint64_t snap[2][32];
  int arrived = 0;
  int line = 0;
  uint64_t gen = 0;
  int exited = 0;
};

struct Named {
  unsigned arrived = 0, threads = 0;
  int line = 0;
  uint64_t gen = 0;
  bool acc = false, result[2] = {false, false};
};

struct Block {
  std::vector<uint8_t> smem;
  int arrived = 0;
  int line = 0;
  uint64_t gen = 0;
  int threads = 0;
  int exited = 0;
  Named named[16];
};

// An mbarrier of the emulated shared memory (keyed by its address): arrivals and announced bytes of the current
// phase, and the bulk copies issued for it, which land when a wait finds the phase complete.
struct Mbar {
  unsigned arrivals = 0, pending = 0;
  uint64_t expected = 0, issued = 0;
  uint32_t phase = 0;  // completed phases
  std::vector<Copy> copies;
};

struct Sched {
  std::map<void*, Mbar> bars;
#if defined(SZ_EMU_SWITCH_STACK)
  void* main_sp = nullptr;
#else
  ucontext_t main;
#endif
  const void* main_stack = nullptr;  // the scheduler's stack (the thread's), as AddressSanitizer reports it
  size_t main_stack_size = 0;
  Fiber* cur = nullptr;
  const std::function<void()>* body = nullptr;
  std::string error;
  uint64_t idle = 0;
  uint64_t switches = 0;
  bool failed = false;
};

Sched* g_sched = nullptr;
thread_local std::string g_why;

// Fiber stacks are kept between launches (mapping and touching them again is most of a small launch's cost).
std::vector<void*> g_stacks;
void* take_stack() {
  if (!g_stacks.empty()) {
    void* s = g_stacks.back();
    g_stacks.pop_back();
    return s;
  }
  return mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
}

// Frames that never returned (fiber_main's of a finished fiber, every frame of a fiber an abandoned launch left)
// keep their redzones poisoned under AddressSanitizer: cleared before the stack serves another fiber. They all lie
// above the stack pointer the fiber last saved; the frames below it returned and cleared their own.
void release_stack(const Fiber& f) {
#if defined(SZ_EMU_ASAN)
  uint8_t* lo = (uint8_t*)f.stack;
#if defined(SZ_EMU_SWITCH_STACK)
  lo = (uint8_t*)f.sp;
#endif
  __asan_unpoison_memory_region(lo, (size_t)((uint8_t*)f.stack + kStack - lo));
#endif
  g_stacks.push_back(f.stack);
}

void fail(const std::string& msg) {
  if (!g_sched->failed) {
    g_sched->failed = true;
    g_sched->error = msg;
  }
}

// AddressSanitizer's fiber annotations: before a switch, the stack it goes to (fake: where to keep the leaving
// stack's fake frames, nullptr when it is left for good); after it, on the new stack, the one it came from.
void asan_leave(void** fake, const void* to, size_t to_size) {
#if defined(SZ_EMU_ASAN)
  __sanitizer_start_switch_fiber(fake, to, to_size);
#else
  (void)fake, (void)to, (void)to_size;
#endif
}
void asan_arrived(void* fake, const void** from, size_t* from_size) {
#if defined(SZ_EMU_ASAN)
  __sanitizer_finish_switch_fiber(fake, from, from_size);
#else
  (void)fake, (void)from, (void)from_size;
#endif
}

void switch_to_scheduler(Fiber* f) {
#if defined(SZ_EMU_SWITCH_STACK)
  simt_emu_switch_stack(&f->sp, g_sched->main_sp);
#else
  swapcontext(&f->uc, &g_sched->main);
#endif
}

// Back to the scheduler. After a failure the launch is abandoned: its fibers are never resumed.
void to_scheduler() {
  Fiber* f = g_sched->cur;
  asan_leave(&f->fake_stack, g_sched->main_stack, g_sched->main_stack_size);
  switch_to_scheduler(f);
  asan_arrived(f->fake_stack, nullptr, nullptr);
}

// From the scheduler into fiber f, until it switches back.
void resume(Fiber* f) {
  void* fake = nullptr;
  asan_leave(&fake, f->stack, kStack);
#if defined(SZ_EMU_SWITCH_STACK)
  simt_emu_switch_stack(&g_sched->main_sp, f->sp);
#else
  swapcontext(&g_sched->main, &f->uc);
#endif
  asan_arrived(fake, nullptr, nullptr);
}

void progress() { g_sched->idle = 0; }

void apply(std::vector<Copy>& group) {
  for (Copy& c : group) memcpy(c.dst, c.bytes.data(), c.bytes.size());
  group.clear();
}

void fiber_main() {
  Fiber* f = g_sched->cur;
  asan_arrived(nullptr, &g_sched->main_stack, &g_sched->main_stack_size);
  (*g_sched->body)();
  if (!f->open.empty() || !f->groups.empty())
    fail("thread " + std::to_string(f->c.tid) + " of block " + std::to_string(f->c.bid) +
         " exits with cp.async copies not waited for");
  if (f->warp->arrived > 0)
    fail("lane " + std::to_string(f->lane) + " exits while its warp waits at line " + std::to_string(f->warp->line));
  f->warp->exited++;
  f->block->exited++;
  f->done = true;
  progress();
  asan_leave(nullptr, g_sched->main_stack, g_sched->main_stack_size);
  switch_to_scheduler(f);  // never resumed
}

// A fiber that starts in fiber_main when first resumed.
void make_context(Fiber* f) {
#if defined(SZ_EMU_SWITCH_STACK)
  // The stack as simt_emu_switch_stack leaves it: six saved registers (zeros; rbp = 0 ends frame-pointer walks), the
  // address its ret goes to, and a null return address of fiber_main, which so starts with its stack pointer 8 past
  // a multiple of 16, as after a call.
  void** sp = (void**)(((uintptr_t)f->stack + kStack) & ~(uintptr_t)15) - 8;
  for (int i = 0; i < 6; ++i) sp[i] = nullptr;
  sp[6] = reinterpret_cast<void*>(&fiber_main);
  sp[7] = nullptr;
  f->sp = sp;
#else
  getcontext(&f->uc);
  f->uc.uc_stack.ss_sp = f->stack;
  f->uc.uc_stack.ss_size = kStack;
  f->uc.uc_link = nullptr;
  makecontext(&f->uc, fiber_main, 0);
#endif
}

}  // namespace

Ctx& ctx() { return g_sched->cur->c; }

void warp_exchange(uint64_t v, int line, uint64_t out[32]) {
  Fiber* f = g_sched->cur;
  Warp* w = f->warp;
  if (w->exited > 0) fail("warp collective at line " + std::to_string(line) + " after a lane of the warp exited");
  if (w->arrived == 0) {
    w->line = line;
  } else if (w->line != line) {
    fail("divergent warp collective: lane " + std::to_string(f->lane) + " at line " + std::to_string(line) +
         ", others at line " + std::to_string(w->line));
  }
  w->vals[f->lane] = v;
  const uint64_t g = w->gen;
  if (++w->arrived == 32) {
    memcpy(w->snap[g & 1], w->vals, sizeof w->vals);
    w->arrived = 0;
    w->gen++;
    progress();
  } else {
    while (w->gen == g && !g_sched->failed) to_scheduler();
  }
  memcpy(out, w->snap[g & 1], sizeof w->vals);
}

void block_barrier(int line) {
  Fiber* f = g_sched->cur;
  Block* b = f->block;
  if (b->exited > 0) fail("__syncthreads at line " + std::to_string(line) + " after a thread of the block exited");
  if (b->arrived == 0) {
    b->line = line;
  } else if (b->line != line) {
    fail("divergent __syncthreads at lines " + std::to_string(line) + " and " + std::to_string(b->line));
  }
  const uint64_t g = b->gen;
  if (++b->arrived == b->threads) {
    b->arrived = 0;
    b->gen++;
    progress();
  } else {
    while (b->gen == g && !g_sched->failed) to_scheduler();
  }
}

bool named_barrier_or(unsigned id, unsigned threads, bool p, int line) {
  Fiber* f = g_sched->cur;
  Block* b = f->block;
  if (id == 0 || id > 15 || threads == 0 || threads % 32 != 0 || threads > (unsigned)b->threads)
    fail("bad named barrier " + std::to_string(id) + " of " + std::to_string(threads) + " threads at line " +
         std::to_string(line));
  Named& nb = b->named[id];
  if (nb.arrived == 0) {
    nb.line = line;
    nb.threads = threads;
    nb.acc = false;
  } else if (nb.line != line || nb.threads != threads) {
    fail("divergent named barrier " + std::to_string(id) + " at lines " + std::to_string(line) + " and " +
         std::to_string(nb.line));
  }
  nb.acc = nb.acc || p;
  const uint64_t g = nb.gen;
  if (++nb.arrived == nb.threads) {
    nb.result[g & 1] = nb.acc;
    nb.arrived = 0;
    nb.gen++;
    progress();
  } else {
    while (nb.gen == g && !g_sched->failed) to_scheduler();
  }
  return nb.result[g & 1];
}

void yield() { to_scheduler(); }

void async_copy(void* dst, const void* src, size_t n) {
  Fiber* f = g_sched->cur;
  Copy c;
  c.dst = dst;
  c.bytes.assign((const uint8_t*)src, (const uint8_t*)src + n);
  f->open.push_back(std::move(c));
}
void async_commit() {
  Fiber* f = g_sched->cur;
  f->groups.push_back(std::move(f->open));
  f->open.clear();
}
void async_wait(int left) {
  Fiber* f = g_sched->cur;
  while ((int)f->groups.size() > left) {
    apply(f->groups.front());
    f->groups.erase(f->groups.begin());
  }
}

namespace {
Mbar* bar_of(void* m, const char* op) {
  auto it = g_sched->bars.find(m);
  if (it == g_sched->bars.end()) {
    fail(std::string(op) + " on an mbarrier that was never initialised");
    return nullptr;
  }
  return &it->second;
}
}  // namespace

void mbar_init(void* m, unsigned arrivals) {
  if ((uintptr_t)m % 8 != 0) fail("mbarrier not 8-byte aligned");
  Mbar& b = g_sched->bars[m];
  if (!b.copies.empty()) fail("mbarrier re-initialised with bulk copies in flight");
  b = Mbar{};
  b.arrivals = b.pending = arrivals;
}
void mbar_arrive_expect(void* m, uint32_t bytes) {
  Mbar* b = bar_of(m, "arrive");
  if (!b) return;
  if (b->pending == 0) fail("arrival on an mbarrier whose phase has all its arrivals");
  --b->pending;
  b->expected += bytes;
}
void bulk_copy(void* dst, const void* src, uint32_t n, void* m) {
  if ((uintptr_t)dst % 16 != 0 || (uintptr_t)src % 16 != 0 || n % 16 != 0 || n == 0)
    fail("bulk copy not in whole aligned 16-byte blocks");
  Mbar* b = bar_of(m, "bulk copy");
  if (!b) return;
  Copy c;
  c.dst = dst;
  c.bytes.assign((const uint8_t*)src, (const uint8_t*)src + n);
  b->copies.push_back(std::move(c));
  b->issued += n;
}
bool mbar_try_wait(void* m, uint32_t parity) {
  Mbar* b = bar_of(m, "wait");
  if (!b) return true;
  if ((b->phase & 1u) != (parity & 1u)) return true;  // that phase completed already
  if (b->issued > b->expected) fail("bulk copies deliver more bytes than their mbarrier phase announced");
  if (b->pending == 0 && b->issued == b->expected) {
    apply(b->copies);
    b->pending = b->arrivals;
    b->expected = b->issued = 0;
    ++b->phase;
    progress();
    return true;
  }
  to_scheduler();
  return false;
}

bool launch(unsigned grid, unsigned threads, size_t smem_bytes, const std::function<void()>& body, uint64_t seed,
            const char** why, LaunchStats* stats) {
  Sched s;
  s.body = &body;
  g_sched = &s;
  std::vector<std::unique_ptr<Block>> blocks(grid);
  std::vector<std::unique_ptr<Warp>> warps((size_t)grid * threads / 32);
  std::vector<std::unique_ptr<Fiber>> fibers((size_t)grid * threads);
  uint64_t fill = seed * 0xD1B54A32D192ED03ull + 7;
  for (unsigned b = 0; b < grid; ++b) {
    blocks[b] = std::make_unique<Block>();
    // Shared memory starts as garbage, as on the GPU: code that reads bytes nobody wrote must not pass.
    std::vector<uint8_t>& m = blocks[b]->smem;
    m.resize((smem_bytes + 16 + 7) / 8 * 8);
    for (size_t i = 0; i < m.size(); i += 8) {
      fill ^= fill << 13;
      fill ^= fill >> 7;
      fill ^= fill << 17;
      memcpy(&m[i], &fill, 8);
    }
    blocks[b]->threads = (int)threads;
  }
  for (auto& w : warps) w = std::make_unique<Warp>();
  for (size_t i = 0; i < fibers.size(); ++i) {
    auto f = std::make_unique<Fiber>();
    const unsigned b = (unsigned)(i / threads), t = (unsigned)(i % threads);
    f->c = Ctx{t, b, threads, grid, blocks[b]->smem.data()};
    f->block = blocks[b].get();
    f->warp = warps[i / 32].get();
    f->lane = t & 31u;
    f->stack = take_stack();
    make_context(f.get());
    fibers[i] = std::move(f);
  }
  uint64_t rng = seed * 0x9E3779B97F4A7C15ull + 1;
  std::vector<size_t> order(fibers.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  size_t live = fibers.size();
  while (live > 0 && !s.failed) {
    for (size_t i = order.size(); i > 1; --i) {  // a fresh random order every pass
      rng ^= rng << 13;
      rng ^= rng >> 7;
      rng ^= rng << 17;
      std::swap(order[i - 1], order[rng % i]);
    }
    for (size_t k = 0; k < order.size() && !s.failed; ++k) {
      Fiber* f = fibers[order[k]].get();
      if (f->done) continue;
      s.cur = f;
      ++s.switches;
      if (++s.idle > kMaxIdleSwitches) {
        fail("no fiber makes progress (deadlock or endless spin)");
        break;
      }
      resume(f);
      if (f->done) --live;
    }
  }
  for (auto& kv : s.bars)
    if (!kv.second.copies.empty()) fail("a block exits with bulk copies no wait received");
  for (auto& f : fibers) release_stack(*f);
  g_sched = nullptr;
  if (stats) stats->switches = s.switches;
  if (s.failed) {
    g_why = s.error;
    *why = g_why.c_str();
    return false;
  }
  return true;
}

}  // namespace simt_emu
