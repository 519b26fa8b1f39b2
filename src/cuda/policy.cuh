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
  // Chunks of up to kStagedValues values keep their whole coded record in shared memory until its offset is known,
  // if it fits; others (larger chunks, more escapes, raw records) are emitted by a second pass over the input. A
  // warp has two record areas: it encodes its next chunk while the previous one's record waits for its offset.
  // 4096 is the default chunk size; an area holds kStagedEscapes escapes besides 4-bit codes (5.9%) and more with
  // narrower codes (3-bit: 410, 10%; trained-d512's KV at k = 3 has at most 8.7% in a chunk): the most with which
  // two records per warp and two CTAs per SM fit every dtype's shared memory.
  static constexpr uint32_t kStagedValues = 4096;
  static constexpr uint32_t kStagedEscapes = 240;
  static constexpr uint32_t kRecordBytes = kStagedValues / 8 * 4 + 3 * kStagedEscapes + 64;  // codes (k <= 4), lists
  static constexpr uint32_t kRecords = 2;
  // A call with few chunks gives each chunk a team of up to kMaxTeam warps of one CTA (warp m of a team takes rounds
  // m, m + team, ...; at most kRing each, of chunks of kTeamMinRounds to kTeamRounds rounds), so that a small
  // message is not one warp's latency through a whole chunk. Fewer rounds (FP8's 2 in a 4096-value chunk) gain
  // less than a team's meetings cost.
  static constexpr uint32_t kMaxTeam = 4;
  static constexpr uint32_t kTeamMinRounds = 4;
  static constexpr uint32_t kTeamRounds = 8;
  // Dynamic shared memory of one CTA when kMinBlocks CTAs share an SM of 228 KiB (1 KiB of each is reserved).
  static constexpr uint32_t kCtaSmemLimit = (228u * 1024u - kMinBlocks * 1024u) / kMinBlocks;
};

// Decoder: chunks dealt to warps statically (c = warp, + all warps, ...); each warp streams the rounds of its chunks
// through a ring of kRing slots (a round's rest fields and codes), staging the next chunk's first rounds and its
// escape lists while it decodes the current one.
struct DecodePolicy {
  static constexpr int kWarps = 8;
  static constexpr int kMinBlocks = 2;
  static constexpr int kRing = 3;
  static constexpr uint32_t kEscapeCap = 512;  // escapes of a chunk staged in shared memory; more are read in place
  // A call with few chunks gives each chunk a team of up to kMaxTeam warps of one CTA (warp m of a team takes
  // rounds m, m + team, ...), so that a small message is not one warp's latency through a whole chunk; a team needs
  // chunks of kTeamMinRounds to kTeamRounds rounds (their checksum sums wait in shared memory for the chain).
  static constexpr uint32_t kMaxTeam = 4;
  static constexpr uint32_t kTeamMinRounds = 4;
  static constexpr uint32_t kTeamRounds = 8;
  static constexpr uint32_t kCtaSmemLimit = (228u * 1024u - kMinBlocks * 1024u) / kMinBlocks;
};

// Entropy-coded frames (version 3): a warp per chunk (the chunk's 32 rANS lanes), chunks dealt statically to the CTAs
// in turn; 24 warps a CTA (80 registers) keep more chunks' latency chains in flight. One CTA per SM holds the
// probability tables of the frame's tensor (about 2 KiB per group for 8-bit symbols) in shared memory beside the
// warps' word windows; tables that do not fit are read from the image in global memory.
struct EntropyDecodePolicy {
  static constexpr int kWarps = 24;
  static constexpr int kMinBlocks = 1;
  static constexpr uint32_t kWindowWords = 1024;  // a warp's window of its record's 16-bit words
  static constexpr uint32_t kCmapCap = 8192;      // channels per tensor whose group map fits in shared memory
  static constexpr uint32_t kSmemBytes = 227u * 1024u;
};
// Encoder of entropy-coded frames: a warp per chunk (the chunk's 32 rANS lanes), chunks taken in order from the
// workspace's ticket. One CTA per SM holds the encoder entries of the call's tensor (8 bytes per group and symbol:
// about 2 KiB per group for 8-bit symbols) in shared memory beside the warps' input blocks; entries that do not
// fit are read from the image in global memory. Each warp of a launch stages its chunk's record in a slot of the
// workspace: kMaxSlots slots (one wave of 16-warp CTAs on 132 SMs) bound the workspace of any call.
struct EntropyEncodePolicy {
  static constexpr int kWarps = 16;
  static constexpr int kMinBlocks = 1;
  static constexpr uint32_t kBlockValues = 512;  // values of a chunk staged at a time (16 steps)
  static constexpr uint32_t kCmapCap = 8192;     // channels per tensor whose group map fits in shared memory
  static constexpr uint32_t kSmemBytes = 227u * 1024u;
  static constexpr uint32_t kMaxSlots = 132 * kWarps;
};
}  // namespace cuda
}  // namespace splitzip
