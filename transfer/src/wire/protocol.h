// protocol.h — the wire protocol of transfer/PROTOCOL.md: message header, handshake, tags.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <vector>

#include "layout.h"
#include "splitzip/splitzip.h"
#include "splitzip/transfer.hpp"

namespace splitzip {
namespace transfer {
namespace proto {

constexpr uint32_t kMsgMagic = 0x4D5A5053u;    // "SPZM"
constexpr uint32_t kHelloMagic = 0x485A5053u;  // "SPZH"
constexpr size_t kHeaderSize = 48;

enum MsgType : uint8_t { kHello = 1, kHelloAck = 2, kChunk = 3, kCredit = 4, kResult = 5 };
// payload_hash is H32 of the payload and must be checked. On a CHUNK it also means that the payload is the values'
// bytes as they are: every CHUNK of a raw-mode session, and the messages a compressed-mode session sends raw.
constexpr uint8_t kFlagPayloadHash = 1;

enum Mode : uint8_t { kModeCompressed = 0, kModeRaw = 1 };

// The UCX tag of CHUNK messages (the only messages on UCX): type in the top byte, the sender's session nonce in the
// low 32 bits; receives match all 64 bits.
inline uint64_t tag_of(uint8_t type, uint32_t session) { return ((uint64_t)type << 56) | session; }
constexpr uint64_t kTagFull = ~(uint64_t)0;

struct Header {
  uint8_t type = 0;
  uint8_t flags = 0;
  uint64_t seq = 0;
  uint32_t tensor = 0;
  uint64_t chunk = 0;
  uint64_t payload_size = 0;
  uint32_t payload_hash = 0;
};

uint32_t h32(const void* data, size_t size);
uint64_t h64(const void* data, size_t size);

void write_header(uint8_t* dst, const Header& h);
// Checks magic, header checksum and reserved bytes. SZ_ERROR_BAD_MAGIC / SZ_ERROR_CHECKSUM / SZ_ERROR_CORRUPT.
sz_status read_header(const uint8_t* src, size_t size, Header* h);

struct TensorEntry {
  std::string name;
  uint8_t dtype = 0;
  uint64_t size = 0;
  uint8_t codebook[SZ_CODEBOOK_FILE_SIZE] = {};  // serialised codebook (compressed mode), zeros in raw mode
};

struct Hello {
  uint16_t protocol_version = 0;
  uint8_t format_version = 0;
  uint8_t mode = 0;
  uint32_t session = 0;
  uint64_t chunk_values = 0;
  uint32_t window = 0;
  std::string token;
  std::vector<TensorEntry> tensors;
};

constexpr size_t kMaxToken = 256;
constexpr size_t kMaxName = 255;
constexpr size_t kHelloFixed = 32;
constexpr size_t kTensorEntryFixed = 2 + 1 + 1 + 8 + SZ_CODEBOOK_FILE_SIZE;
constexpr size_t kMaxHelloBytes = (size_t)4 << 20;  // the receiver's buffer for the handshake

std::vector<uint8_t> encode_hello(const Hello& h);
// Parses without trusting any count: every length is checked against the bytes present and the limits given
// before anything is allocated.
sz_status decode_hello(const uint8_t* p, size_t size, uint32_t max_tensors, Hello* h, std::string* why);

// RESULT payload: u32 status, u32 text length, text.
constexpr size_t kMaxText = 1024;
std::vector<uint8_t> encode_status(uint32_t status, const std::string& text);
sz_status decode_status(const uint8_t* p, size_t size, uint32_t* status, std::string* text);

// HELLO_ACK payload: the status payload above, then u32 address length and the receiver's UCX worker address.
constexpr size_t kMaxAddress = 65536;
std::vector<uint8_t> encode_ack(uint32_t status, const std::string& text, const std::vector<uint8_t>& address);
sz_status decode_ack(const uint8_t* p, size_t size, uint32_t* status, std::string* text,
                     std::vector<uint8_t>* address);

// CREDIT payload: what the receiver's codec threads spent on the messages they finished since its previous CREDIT,
// by kind (frames, raw messages): their values' bytes and the threads' busy time divided by their number, in
// nanoseconds (so that bytes / time is the rate of all the threads together). Four u64.
struct CreditLoad {
  uint64_t frame_bytes = 0, frame_ns = 0, raw_bytes = 0, raw_ns = 0;
};
constexpr size_t kCreditPayload = 32;
std::vector<uint8_t> encode_credit_load(const CreditLoad& c);
sz_status decode_credit_load(const uint8_t* p, size_t size, CreditLoad* c);

// A whole message (header and payload) in one buffer, payload_hash set when `hashed`; `chunk` is the header's chunk
// field (a CREDIT's consumed count).
std::vector<uint8_t> encode_message(uint8_t type, const std::vector<uint8_t>& payload, bool hashed,
                                    uint64_t chunk = 0);

// The largest payload a message of `type` may carry on the control connection (PROTOCOL.md §2); 0 for types that
// never travel there.
size_t max_control_payload(uint8_t type);

// Reads messages of the control connection, a byte stream, one at a time: the caller asks where the next bytes go
// (never more than the current message still needs, so nothing of a following message is consumed), reads them
// from the socket and commits them. The header is checked as soon as it is complete (magic, check, reserved bytes,
// a type among `allowed_types`, payload_size within max_control_payload), the payload hash once the payload is.
// The payload buffer grows with the bytes that arrived, never ahead of them by more than 64 KiB.
class MessageReader {
 public:
  explicit MessageReader(uint32_t allowed_types) : allowed_(allowed_types) {}
  // Where the next bytes go and how many at most (> 0 unless complete()).
  uint8_t* buffer(size_t* room);
  // n (<= room) bytes were written at buffer(). SZ_OK, or the reason the stream cannot be a valid message.
  sz_status commit(size_t n, std::string* why);
  bool complete() const { return complete_; }
  const Header& header() const { return h_; }
  const std::vector<uint8_t>& payload() const { return payload_; }
  // Ready for the next message.
  void reset();

 private:
  uint32_t allowed_;
  uint8_t head_[kHeaderSize] = {};
  size_t head_fill_ = 0;
  Header h_;
  std::vector<uint8_t> payload_;
  size_t payload_fill_ = 0;
  bool complete_ = false;
  bool failed_ = false;
};
constexpr uint32_t type_bit(uint8_t type) { return 1u << type; }

}  // namespace proto
}  // namespace transfer
}  // namespace splitzip
