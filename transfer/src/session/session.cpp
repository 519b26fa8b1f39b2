// session.cpp — see session.h.
#include "session/session.h"

#include <string.h>

#include <algorithm>
#include <unordered_set>

namespace splitzip {
namespace transfer {

bool valid_tensor_name(const std::string& name) {
  if (name.empty() || name.size() > proto::kMaxName) return false;
  if (name == "." || name == ".." || name[0] == '.') return false;
  for (unsigned char c : name) {
    if (c == '/' || c == '\\' || c < 0x20 || c == 0x7F) return false;
  }
  return true;
}

bool token_equal(const std::string& expected, const std::string& got) {
  unsigned char diff = (unsigned char)(expected.size() != got.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = i < got.size() ? (unsigned char)got[i] : 0;
    diff |= (unsigned char)((unsigned char)expected[i] ^ g);
  }
  volatile unsigned char sink = diff;
  return sink == 0;
}

namespace {

sz_status refuse(std::string* why, sz_status st, const std::string& msg) {
  *why = msg;
  return st;
}

}  // namespace

sz_status admit(const Limits& opt, const proto::Hello& hello, Plan* plan, std::string* why) {
  if (!opt.token.empty() && !token_equal(opt.token, hello.token))
    return refuse(why, SZ_ERROR_INVALID_ARGUMENT, "token mismatch");
  if (hello.format_version != SZ_FORMAT_VERSION)
    return refuse(why, SZ_ERROR_UNSUPPORTED_VERSION,
                  "format version " + std::to_string(hello.format_version) + " not supported (this side reads " +
                      std::to_string(SZ_FORMAT_VERSION) + ")");
  if (hello.mode != proto::kModeCompressed && hello.mode != proto::kModeRaw)
    return refuse(why, SZ_ERROR_CORRUPT, "unknown transfer mode " + std::to_string(hello.mode));
  Plan p;
  p.raw = hello.mode == proto::kModeRaw;
  p.session = hello.session;
  if (hello.window < 1 || hello.window > opt.max_window)
    return refuse(why, SZ_ERROR_INVALID_ARGUMENT,
                  "window " + std::to_string(hello.window) + " outside 1.." + std::to_string(opt.max_window));
  if (hello.chunk_values < 1 || hello.chunk_values > ((uint64_t)1 << 28))
    return refuse(why, SZ_ERROR_INVALID_ARGUMENT, "chunk of " + std::to_string(hello.chunk_values) + " values");
  p.window = hello.window;
  p.chunk_values = hello.chunk_values;
  p.first_seq.assign(1, 0);
  std::unordered_set<std::string> names;
  p.tensors.resize(hello.tensors.size());
  for (size_t i = 0; i < hello.tensors.size(); ++i) {
    const proto::TensorEntry& e = hello.tensors[i];
    PlannedTensor& t = p.tensors[i];
    if (!valid_tensor_name(e.name)) return refuse(why, SZ_ERROR_INVALID_ARGUMENT, "invalid tensor name");
    if (!names.insert(e.name).second) return refuse(why, SZ_ERROR_INVALID_ARGUMENT, "duplicate tensor name " + e.name);
    t.name = e.name;
    // The peer's byte becomes an sz_dtype only once it is one of the enumerators (a load of any other value into
    // the enum is undefined).
    if (e.dtype < SZ_DTYPE_BF16 || e.dtype > SZ_DTYPE_FP8_E5M2)
      return refuse(why, SZ_ERROR_UNSUPPORTED_DTYPE, "tensor " + e.name + ": unknown dtype");
    t.dtype = (sz_dtype)e.dtype;
    t.value_bytes = sz_dtype_size(t.dtype);
    if (t.value_bytes == 0) return refuse(why, SZ_ERROR_UNSUPPORTED_DTYPE, "tensor " + e.name + ": unknown dtype");
    if (e.size > opt.max_tensor_bytes)
      return refuse(why, SZ_ERROR_INVALID_ARGUMENT,
                    "tensor " + e.name + " of " + std::to_string(e.size) + " bytes exceeds the limit of " +
                        std::to_string(opt.max_tensor_bytes));
    if (e.size % t.value_bytes != 0)
      return refuse(why, SZ_ERROR_INVALID_ARGUMENT, "tensor " + e.name + ": size not a multiple of the dtype size");
    p.total_bytes += e.size;
    if (p.total_bytes > opt.max_total_bytes || p.total_bytes < e.size)
      return refuse(why, SZ_ERROR_INVALID_ARGUMENT,
                    "the tensors exceed the limit of " + std::to_string(opt.max_total_bytes) + " bytes in total");
    t.size = e.size;
    t.n_values = e.size / t.value_bytes;
    t.chunks = (t.n_values + hello.chunk_values - 1) / hello.chunk_values;
    p.first_seq.push_back(p.first_seq.back() + t.chunks);
    if (!p.raw) {
      const sz_status cs = sz_codebook_deserialize(e.codebook, sizeof e.codebook, &t.codebook);
      if (cs != SZ_OK || t.codebook.dtype != e.dtype)
        return refuse(why, cs != SZ_OK ? cs : SZ_ERROR_BAD_CODEBOOK, "tensor " + e.name + ": invalid codebook");
    }
    p.max_value_bytes = std::max(p.max_value_bytes, t.value_bytes);
  }
  // Buffers are sized by what the announced tensors need: a message holds at most the values of the longest
  // tensor, and no more slots are useful than there are messages (the sender never has more in flight).
  uint64_t longest = 0;
  for (const PlannedTensor& t : p.tensors) longest = std::max(longest, t.n_values);
  p.chunk_cap = std::max<uint64_t>(1, std::min<uint64_t>(hello.chunk_values, longest));
  const size_t w = p.max_value_bytes;
  // A compressed session's messages may also be raw (PROTOCOL.md §4): the bound of a frame is above the values'
  // bytes, so its slots hold either.
  p.max_payload = p.raw ? p.chunk_cap * w : std::max<uint64_t>(SZ_COMPRESS_BOUND(p.chunk_cap, w), p.chunk_cap * w);
  if (p.max_payload + proto::kHeaderSize > opt.max_message_bytes)
    return refuse(why, SZ_ERROR_INVALID_ARGUMENT,
                  "messages of up to " + std::to_string(p.max_payload) + " bytes exceed the limit of " +
                      std::to_string(opt.max_message_bytes));
  p.total_messages = p.first_seq.back();
  p.n_slots = (uint32_t)std::max<uint64_t>(1, std::min<uint64_t>(p.window, p.total_messages));
  p.buffer_bytes = p.n_slots * (kBufferAlign + align_up(p.max_payload)) +
                   (p.raw ? 0 : (uint64_t)opt.threads * align_up(p.chunk_cap * w));
  if (p.buffer_bytes > opt.max_session_bytes)
    return refuse(why, SZ_ERROR_INVALID_ARGUMENT,
                  "the session needs " + std::to_string(p.buffer_bytes) +
                      " bytes of buffers, more than the limit of " + std::to_string(opt.max_session_bytes));
  *plan = std::move(p);
  return SZ_OK;
}

ChunkTracker::ChunkTracker(const Plan& plan) : plan_(plan), seen_(2 * (size_t)plan.window, 0) {}

sz_status ChunkTracker::accept(const proto::Header& h, size_t len, ChunkRef* out, std::string* why) {
  if (len < proto::kHeaderSize || h.type != proto::kChunk || h.payload_size != len - proto::kHeaderSize)
    return refuse(why, SZ_ERROR_CORRUPT, "unexpected message");
  const uint64_t total = plan_.total_messages;
  const uint64_t seq = h.seq;
  if (seen_.empty() || seq >= total || seq < base_ || seq >= base_ + seen_.size() || seen_[seq % seen_.size()])
    return refuse(why, SZ_ERROR_CORRUPT, "message sequence number out of order or repeated");
  const uint32_t ti =
      (uint32_t)(std::upper_bound(plan_.first_seq.begin(), plan_.first_seq.end(), seq) - plan_.first_seq.begin() - 1);
  const PlannedTensor& t = plan_.tensors[ti];
  const uint64_t c = seq - plan_.first_seq[ti];
  if (h.tensor != ti || h.chunk != c) return refuse(why, SZ_ERROR_CORRUPT, "message names the wrong tensor or chunk");
  const uint64_t n_values = std::min<uint64_t>(plan_.chunk_values, t.n_values - c * plan_.chunk_values);
  const uint64_t bytes = n_values * t.value_bytes;
  // A raw payload (flag set; every message of a raw session) is exactly the values' bytes; a frame is at most
  // the bound of its values.
  const bool raw = (h.flags & proto::kFlagPayloadHash) != 0;
  if ((plan_.raw && !raw) ||
      (raw ? h.payload_size != bytes : h.payload_size > SZ_COMPRESS_BOUND(n_values, t.value_bytes)))
    return refuse(why, SZ_ERROR_CORRUPT, "chunk " + std::to_string(c) + " of " + t.name + " has a wrong size");
  seen_[seq % seen_.size()] = 1;
  while (base_ < total && seen_[base_ % seen_.size()]) {
    seen_[base_ % seen_.size()] = 0;
    ++base_;
  }
  ++accepted_;
  out->tensor = ti;
  out->chunk = c;
  out->n_values = n_values;
  return SZ_OK;
}

}  // namespace transfer
}  // namespace splitzip
