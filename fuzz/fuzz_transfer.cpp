// fuzz_transfer — the receiver's side of transfer/PROTOCOL.md without a network: bytes as a control-connection
// stream through the message reader (in pieces of varying size), its HELLO through decode_hello() and admit(), and
// the bytes after it as a series of CHUNK message headers through the receiver's chunk checks (ChunkTracker).
// Also decode_ack() and decode_status() on the raw bytes.
//
// Input: byte 0 picks the limits (token or none, small or large caps) and byte 1 the piece sizes (low 7 bits) and
// whether the harness repairs checksums (bit 7); then the stream. After a complete HELLO, each record of 52 bytes is
// a 48-byte message header and a u32 that sets the received length. With repair on, the harness first rewrites the
// HELLO's header check and payload hash, and each record's header check, to match their bytes, so that mutations
// reach the handshake decoder, admission and the chunk checks instead of stopping at a checksum. Nothing may crash or touch memory outside its buffers (ASan/UBSan); properties checked:
//   - the reader never asks for more than the message still needs, and a complete message is exactly what was fed;
//   - a HELLO that decodes re-encodes to the same bytes;
//   - an admitted plan respects every limit (tensors, total, message size, session buffers);
//   - the tracker accepts each sequence number at most once, only inside the plan, with the tensor, chunk and value
//     count that the sequence number implies; a raw message (flag payload_hash: all of a raw session's, any of a
//     compressed session's) only with exactly the bytes of its values.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <set>
#include <string>
#include <vector>

#include "wire/protocol.h"
#include "session/session.h"

namespace tr = splitzip::transfer;
namespace proto = splitzip::transfer::proto;

namespace {

[[noreturn]] void fail(const char* what) {
  fprintf(stderr, "fuzz_transfer: property violated: %s\n", what);
  abort();
}

uint32_t load_u32(const uint8_t* p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

tr::Limits limits_for(uint8_t k) {
  tr::Limits l;
  l.token = (k & 1) ? "secret" : "";
  const bool small = (k & 2) != 0;
  l.max_tensor_bytes = small ? 1 << 20 : (uint64_t)64 << 30;
  l.max_total_bytes = small ? 4 << 20 : (uint64_t)1 << 40;
  l.max_message_bytes = small ? 1 << 16 : (uint64_t)64 << 20;
  l.max_session_bytes = small ? 1 << 20 : (uint64_t)1 << 30;
  l.max_window = small ? 4 : 64;
  l.threads = 1 + ((k >> 2) & 3);
  return l;
}

void check_plan(const tr::Limits& l, const tr::Plan& p) {
  uint64_t total = 0, messages = 0;
  if (p.first_seq.size() != p.tensors.size() + 1) fail("first_seq size");
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    const tr::PlannedTensor& t = p.tensors[i];
    if (t.size > l.max_tensor_bytes || t.value_bytes == 0 || t.size % t.value_bytes != 0) fail("tensor size");
    if (!tr::valid_tensor_name(t.name)) fail("tensor name");
    if (p.first_seq[i + 1] - p.first_seq[i] != t.chunks) fail("first_seq");
    total += t.size;
    messages += t.chunks;
  }
  if (total != p.total_bytes || total > l.max_total_bytes) fail("total bytes");
  if (messages != p.total_messages) fail("message count");
  if (p.max_payload + proto::kHeaderSize > l.max_message_bytes) fail("message size");
  if (p.buffer_bytes > l.max_session_bytes) fail("session buffers");
  if (p.window < 1 || p.window > l.max_window || p.n_slots < 1 || p.n_slots > p.window) fail("window");
}

// Rewrites the header check (bytes 44..47, the low 32 bits of XXH3 of bytes 0..43) of a 48-byte header.
void repair_header(uint8_t* h) {
  const uint32_t c = proto::h32(h, 44);
  for (int i = 0; i < 4; ++i) h[44 + i] = (uint8_t)(c >> (8 * i));
}

void run_chunks(const tr::Plan& plan, const uint8_t* p, size_t n, bool repair) {
  tr::ChunkTracker tracker(plan);
  std::set<uint64_t> seen;
  for (; n >= proto::kHeaderSize + 4; p += proto::kHeaderSize + 4, n -= proto::kHeaderSize + 4) {
    proto::Header h;
    uint8_t head[proto::kHeaderSize];
    memcpy(head, p, sizeof head);
    if (repair) repair_header(head);
    if (proto::read_header(head, proto::kHeaderSize, &h) != SZ_OK) break;  // the receiver ends the session here
    const size_t len = proto::kHeaderSize + load_u32(p + proto::kHeaderSize) % (plan.max_payload + 64);
    tr::ChunkRef ref;
    std::string why;
    if (tracker.accept(h, len, &ref, &why) != SZ_OK) {
      if (why.empty()) fail("a refusal without a reason");
      break;  // the receiver ends the session at the first refusal
    }
    if (h.seq >= plan.total_messages || !seen.insert(h.seq).second) fail("sequence number accepted twice or outside");
    if (ref.tensor >= plan.tensors.size()) fail("tensor index");
    const tr::PlannedTensor& t = plan.tensors[ref.tensor];
    if (h.seq < plan.first_seq[ref.tensor] || h.seq >= plan.first_seq[ref.tensor + 1]) fail("tensor of seq");
    if (ref.chunk != h.seq - plan.first_seq[ref.tensor] || ref.chunk >= t.chunks) fail("chunk of seq");
    if (ref.n_values == 0 || ref.n_values > plan.chunk_values || ref.n_values > plan.chunk_cap) fail("value count");
    if ((ref.chunk * plan.chunk_values + ref.n_values) > t.n_values) fail("chunk past the tensor");
    if (len - proto::kHeaderSize > plan.max_payload) fail("payload larger than the slots");
    const bool raw = (h.flags & proto::kFlagPayloadHash) != 0;
    if (plan.raw && !raw) fail("a raw session's message without its hash");
    if (raw && h.payload_size != ref.n_values * t.value_bytes) fail("a raw payload that is not the values' bytes");
  }
  if (tracker.accepted() != seen.size()) fail("accepted count");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {  // the status decoders on the raw bytes
    uint32_t status = 0;
    std::string text;
    std::vector<uint8_t> address;
    if (proto::decode_ack(data, size, &status, &text, &address) == SZ_OK &&
        (address.size() > proto::kMaxAddress || text.size() > proto::kMaxText))
      fail("ack sizes");
    proto::decode_status(data, size, &status, &text);
  }
  if (size < 2) return 0;
  const tr::Limits limits = limits_for(data[0]);
  const uint8_t piece_seed = data[1] & 0x7f;
  const bool repair = (data[1] & 0x80) != 0;
  std::vector<uint8_t> stream(data + 2, data + size);
  if (repair && stream.size() >= proto::kHeaderSize) {
    uint64_t ps = 0;
    for (int i = 0; i < 8; ++i) ps |= (uint64_t)stream[32 + i] << (8 * i);
    if (ps <= stream.size() - proto::kHeaderSize) {
      const uint32_t hash = proto::h32(stream.data() + proto::kHeaderSize, (size_t)ps);
      for (int i = 0; i < 4; ++i) stream[40 + i] = (uint8_t)(hash >> (8 * i));
    }
    repair_header(stream.data());
  }
  const uint8_t* p = stream.data();
  size_t n = stream.size();

  proto::MessageReader reader(proto::type_bit(proto::kHello));
  size_t fed = 0;
  unsigned step = 0;
  while (!reader.complete() && n > 0) {
    size_t room = 0;
    uint8_t* dst = reader.buffer(&room);
    if (dst == nullptr || room == 0) fail("reader asks for nothing before the message is complete");
    size_t piece = 1 + (size_t)((piece_seed * 37u + step * 11u) % 97u);
    ++step;
    if (piece > room) piece = room;
    if (piece > n) piece = n;
    memcpy(dst, p, piece);
    p += piece;
    n -= piece;
    fed += piece;
    std::string why;
    if (reader.commit(piece, &why) != SZ_OK) {
      if (why.empty()) fail("a stream error without a reason");
      return 0;  // the receiver closes the connection
    }
  }
  if (!reader.complete()) return 0;
  if (fed != proto::kHeaderSize + reader.payload().size()) fail("a complete message is not what was fed");
  const std::vector<uint8_t>& payload = reader.payload();
  proto::Hello hello;
  std::string why;
  if (proto::decode_hello(payload.data(), payload.size(), 4096, &hello, &why) != SZ_OK) return 0;
  if (proto::encode_hello(hello) != payload) fail("HELLO does not re-encode to its bytes");
  tr::Plan plan;
  if (tr::admit(limits, hello, &plan, &why) != SZ_OK) {
    if (why.empty()) fail("a refusal without a reason");
    return 0;
  }
  if (!limits.token.empty() && hello.token != limits.token) fail("admitted without the token");
  check_plan(limits, plan);
  run_chunks(plan, p, n, repair);
  return 0;
}
