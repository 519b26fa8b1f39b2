// session.h — the receiver's session logic that does not depend on a transport (transfer/PROTOCOL.md §3, §4):
// admission of a handshake against the server's limits, and the checks on each CHUNK message's header.
//
// Both are pure functions of their inputs, so that they can be fuzzed without a network (fuzz/fuzz_transfer.cpp).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <vector>

#include "wire/protocol.h"
#include "splitzip/splitzip.h"
#include "splitzip/transfer.hpp"

namespace splitzip {
namespace transfer {

// Host receive buffers put each message's payload, and decoded values, at a multiple of this many bytes, with room
// to round a write up to one: what direct I/O needs of a buffer (ServeOptions::direct_io).
constexpr size_t kBufferAlign = 4096;

inline uint64_t align_up(uint64_t n) { return (n + kBufferAlign - 1) / kBufferAlign * kBufferAlign; }

// The limits of ServeOptions that admission applies.
struct Limits {
  std::string token;
  uint64_t max_tensor_bytes = 0;
  uint64_t max_total_bytes = 0;
  uint64_t max_message_bytes = 0;
  uint64_t max_session_bytes = 0;
  uint32_t max_window = 0;
  unsigned threads = 1;  // codec threads (decode scratch is per thread)
};

struct PlannedTensor {
  std::string name;
  sz_dtype dtype = SZ_DTYPE_BF16;
  size_t value_bytes = 0;
  uint64_t size = 0;
  uint64_t n_values = 0;
  uint64_t chunks = 0;
  sz_codebook codebook{};
};

// What an accepted handshake sets up; every size is checked against the limits.
struct Plan {
  bool raw = false;
  uint32_t session = 0;
  uint32_t window = 0;
  uint64_t chunk_values = 0;
  std::vector<PlannedTensor> tensors;
  std::vector<uint64_t> first_seq;  // tensors.size() + 1 entries; first_seq.back() = messages in all
  uint64_t total_messages = 0;
  uint64_t total_bytes = 0;
  uint64_t chunk_cap = 0;    // the most values one message can hold
  size_t max_value_bytes = 1;
  uint64_t max_payload = 0;  // the largest payload one message can have
  uint32_t n_slots = 0;      // receive slots worth allocating
  uint64_t buffer_bytes = 0; // slots and decode scratch, each aligned (kBufferAlign)
};

// Checks a decoded handshake against the limits: token first, then format version, mode, window, chunk size, each
// tensor (name, uniqueness, dtype, size, codebook), the largest message and the session's buffers. SZ_OK with *plan
// filled, or the status to refuse the peer with and *why.
sz_status admit(const Limits& limits, const proto::Hello& hello, Plan* plan, std::string* why);

// One accepted CHUNK message: which tensor, which chunk, how many values.
struct ChunkRef {
  uint32_t tensor = 0;
  uint64_t chunk = 0;
  uint64_t n_values = 0;
};

// The sequence checks of PROTOCOL.md §4 on the headers of received CHUNK messages (window ring, tensor and chunk
// derived from seq, sizes). accept() is given a header that read_header() accepted and the received length.
class ChunkTracker {
 public:
  explicit ChunkTracker(const Plan& plan);
  sz_status accept(const proto::Header& h, size_t length, ChunkRef* out, std::string* why);
  uint64_t accepted() const { return accepted_; }

 private:
  const Plan& plan_;
  std::vector<uint8_t> seen_;  // ring over seqs [base, base + 2 * window)
  uint64_t base_ = 0;
  uint64_t accepted_ = 0;
};

}  // namespace transfer
}  // namespace splitzip
