// policy.cuh — the tuning of the CUDA codec, in one place: CTA shapes, pipeline depths, staging capacities.
// None of this enters the format (docs/FORMAT.md); changing it changes speed, never bytes.
#pragma once

#include <stdint.h>

namespace splitzip {
namespace cuda {

// Encoder: a warp per chunk; each warp streams its chunk through a ring of kRing rounds (2 KiB each) staged by
// cp.async, so up to kRing rounds of input are in flight per warp.
struct EncodePolicy {
  static constexpr int kWarps = 8;       // warps per CTA
  static constexpr int kMinBlocks = 2;   // CTAs per SM the register budget (128) and shared memory are cut for
  static constexpr int kRing = 3;        // staged rounds per warp
  // Chunks of up to kStagedValues values with up to kStagedEscapes escapes keep their whole coded record in shared
  // memory until its offset is known; others (larger chunks, more escapes, raw records) are emitted by a second
  // pass over the input. 4096 is the default chunk size; 1024 escapes are 25% of it (real KV: 1-4%).
  static constexpr uint32_t kStagedValues = 4096;
  static constexpr uint32_t kStagedEscapes = 1024;
  static constexpr uint32_t kRecordBytes = kStagedValues / 8 * 4 + 3 * kStagedEscapes + 64;  // codes (k <= 4), lists
};

// Decoder: chunks dealt to warps statically (c = warp, + all warps, ...); each warp streams the rounds of its chunks
// through a ring of kRing slots (a round's rest fields and codes), staging the next chunk's first rounds and its
// escape lists while it decodes the current one.
struct DecodePolicy {
  static constexpr int kWarps = 8;
  static constexpr int kMinBlocks = 2;
  static constexpr int kRing = 3;
  static constexpr uint32_t kEscapeCap = 512;  // escapes of a chunk staged in shared memory; more are read in place
};

}  // namespace cuda
}  // namespace splitzip
