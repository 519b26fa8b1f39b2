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
  static constexpr int kMinBlocks = 2;   // CTAs per SM the register budget is cut for
  static constexpr int kRing = 3;        // staged rounds per warp
  // Chunks of up to this many values keep their whole coded record in shared memory until its offset is known;
  // larger chunks encode twice (count, then emit): 4096 is the default chunk size.
  static constexpr uint32_t kStagedValues = 4096;
  static constexpr uint32_t kRecordBytes = 4096 + 64;  // >= raw record of kStagedValues values (E <= 8), + slack
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
