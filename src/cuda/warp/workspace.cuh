// warp/workspace.cuh — the device workspace of the codec's calls, and the decoupled look-back that places each
// chunk's record in the exponent section (Merrill & Garland 2016) without a second pass or a host round trip.
//
// A workspace starts with a 64-byte header and, for the encoder, one 16-byte state word per chunk. It must be
// zero-filled once before its first use; every call leaves it ready for the next one, so calls need no memset and
// can be captured in a CUDA graph and replayed:
//   - epoch counts the calls made with the workspace; check = ws_check(epoch) guards against a workspace that was
//     never zero-filled (such a call reports an error and changes nothing);
//   - tickets hands out chunks in order (encoder warps) or, for the decoders, counts finished CTAs in its low half
//     and keeps the call's first error in its high half (ws_finish); whoever draws the last ticket of a call resets
//     it and advances epoch: every drawer read epoch before drawing its first ticket, and the last ticket is drawn
//     after all others.
// A state word is {tag, value} with tag = (epoch + 1) << 2 | flag, so words left by earlier calls never match: no
// clearing between calls. flag 1: value is the chunk's record size (aggregate); 2: the end of its record in the
// exponent section (inclusive prefix).
#pragma once

#include "cuda/simt.cuh"

namespace splitzip {
namespace cuda {

struct WsHeader {
  uint64_t epoch;
  uint64_t check;
  uint64_t tickets;
  uint64_t reserved[5];
};
static_assert(sizeof(WsHeader) == 64, "the workspace header is 64 bytes");

// The chunks' look-back state words, after the header.
SZ_DEV simt::Word128* ws_states(WsHeader* h) {
  return reinterpret_cast<simt::Word128*>(reinterpret_cast<uint8_t*>(h) + sizeof(WsHeader));
}

SZ_HD uint64_t ws_check(uint64_t epoch) {
  return epoch == 0 ? 0 : (epoch * 0x9E3779B97F4A7C15ull) ^ 0x5851F42D4C957F2Dull;
}
SZ_HD size_t encode_workspace_bytes(uint64_t n_chunks) { return (size_t)((64 + 16 * n_chunks + 255) / 256 * 256); }
constexpr size_t kDecodeWorkspaceBytes = 256;

constexpr uint64_t kFlagAggregate = 1, kFlagInclusive = 2;

// A call starts by reading the header's epoch and check words (every ticket drawer, before its first ticket; issued
// early, so that the round trip overlaps the call's set-up) and derives its tag base from them: 0 when the workspace
// is not valid.
struct WsWords {
  uint64_t epoch, check;
};
SZ_DEV WsWords ws_read(WsHeader* h) { return WsWords{simt::ld_relaxed(&h->epoch), simt::ld_relaxed(&h->check)}; }
SZ_HD uint64_t ws_tag(WsWords w) { return w.check == ws_check(w.epoch) ? (w.epoch + 1) << 2 : 0; }
// A warp's tag from its lane 0's words; the reads come before the warp's first ticket.
SZ_DEV uint64_t ws_begin(WsWords w) {
  const uint64_t tag = simt::shfl(simt::lane_id() == 0 ? ws_tag(w) : 0, 0);
  simt::fence();
  return tag;
}
// By the warp that drew a call's last ticket.
SZ_DEV void ws_end(WsHeader* h, uint64_t tag) {
  const uint64_t next = tag >> 2;  // this call's epoch + 1
  simt::st_relaxed(&h->tickets, 0);
  simt::st_relaxed(&h->epoch, next);
  simt::st_relaxed(&h->check, ws_check(next));
}
// A decoder CTA's end, by one thread: draws the CTA's ticket carrying its first error (0: none), which the ticket
// word keeps in its high half unless a CTA before it left one there. One atomic word both counts the CTAs and holds
// the call's first error, so no fence has to wait for the CTA's output stores (the end of the kernel makes them
// visible to what the stream runs next), and the acquire keeps the last CTA's status and ws_end after its ticket.
// Returns whether this CTA is the call's last (of ctas < 2^32), and then the call's first error in *err.
SZ_DEV bool ws_finish(WsHeader* h, uint64_t ctas, uint32_t cta_err, uint32_t* err) {
  uint64_t old;
  if (cta_err == 0) {
    old = simt::atomic_add_acquire(&h->tickets, 1);
  } else {
    old = simt::ld_relaxed(&h->tickets);
    for (;;) {
      const uint64_t want = (old + 1) | ((old >> 32) == 0 ? (uint64_t)cta_err << 32 : 0);
      const uint64_t seen = simt::atomic_cas_acquire(&h->tickets, old, want);
      if (seen == old) break;
      old = seen;
    }
  }
  *err = (uint32_t)(old >> 32) != 0 ? (uint32_t)(old >> 32) : cta_err;
  return (old & 0xFFFFFFFFull) == ctas - 1;
}

// Lane 0's ticket, broadcast to the warp.
SZ_DEV uint64_t ws_ticket(WsHeader* h) {
  uint64_t t = 0;
  if (simt::lane_id() == 0) t = simt::atomic_add(&h->tickets, 1);
  return simt::shfl(t, 0);
}

SZ_DEV void publish(simt::Word128* state, uint64_t c, uint64_t tag, uint64_t flag, uint64_t value) {
  if (simt::lane_id() == 0) simt::st_word128(state + c, simt::Word128{tag | flag, value});
}

// The exclusive prefix of chunk c's record size over chunks 0..c-1, by the whole warp: lane i reads the state of
// chunk c-1-i once; the walk stops at the nearest inclusive word if no unpublished word is nearer, else it adds the
// aggregates up to the unpublished one, waits for that one (one lane polls one word, so that a waiting warp takes
// few issue slots and little L2 bandwidth from the warps that work) and reads again from there.
SZ_DEV uint64_t look_back(const simt::Word128* state, uint64_t c, uint64_t tag) {
  const unsigned lane = simt::lane_id();
  uint64_t prefix = 0;
  int64_t end = (int64_t)c - 1;
  for (;;) {
    const int64_t idx = end - (int64_t)lane;
    uint64_t flag = kFlagInclusive, value = 0;
    if (idx >= 0) {
      const simt::Word128 w = simt::ld_word128(state + idx);
      flag = (w.a & ~3ull) == tag ? (w.a & 3u) : 0;
      value = w.b;
    }
    const unsigned inc = simt::ballot(flag == kFlagInclusive);
    const unsigned none = simt::ballot(flag == 0);
    const unsigned stop_inc = inc ? (unsigned)(simt::ffs(inc) - 1) : 32u;
    const unsigned stop_none = none ? (unsigned)(simt::ffs(none) - 1) : 32u;
    const unsigned take = stop_inc < stop_none ? stop_inc + 1 : stop_none;  // lanes [0, take) are summed
    uint64_t part = lane < take ? value : 0;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) part += simt::shfl_xor(part, o);
    prefix += part;
    if (stop_inc < stop_none) return prefix;
    end -= (int64_t)take;
    if (stop_none < 32) {  // chunk `end` has not published yet: lane 0 alone polls its word, backing off
      if (lane == 0) {
        unsigned ns = 32;
        while ((simt::ld_word128(state + end).a & ~3ull) != tag) {
          simt::nanosleep(ns);
          ns = ns < 256 ? 2 * ns : ns;
        }
      }
      simt::syncwarp();
    }
  }
}

}  // namespace cuda
}  // namespace splitzip
