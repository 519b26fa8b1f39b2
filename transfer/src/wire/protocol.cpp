// protocol.cpp — encoding and checking of the messages of transfer/PROTOCOL.md.
#include "wire/protocol.h"

#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace splitzip {
namespace transfer {
namespace proto {

using layout::load_u16;
using layout::load_u32;
using layout::load_u64;
using layout::store_u16;
using layout::store_u32;
using layout::store_u64;

uint64_t h64(const void* data, size_t size) { return XXH3_64bits(data, size); }
uint32_t h32(const void* data, size_t size) { return (uint32_t)XXH3_64bits(data, size); }

// Header layout: 0 magic u32 | 4 type u8 | 5 flags u8 | 6 reserved u16 | 8 seq u64 | 16 tensor u32 |
// 20 reserved u32 | 24 chunk u64 | 32 payload_size u64 | 40 payload_hash u32 | 44 header_check u32 (H32 of 0..43)
void write_header(uint8_t* d, const Header& h) {
  memset(d, 0, kHeaderSize);
  store_u32(d + 0, kMsgMagic);
  d[4] = h.type;
  d[5] = h.flags;
  store_u64(d + 8, h.seq);
  store_u32(d + 16, h.tensor);
  store_u64(d + 24, h.chunk);
  store_u64(d + 32, h.payload_size);
  store_u32(d + 40, h.payload_hash);
  store_u32(d + 44, h32(d, 44));
}

sz_status read_header(const uint8_t* s, size_t size, Header* h) {
  if (size < kHeaderSize) return SZ_ERROR_SRC_TRUNCATED;
  if (load_u32(s) != kMsgMagic) return SZ_ERROR_BAD_MAGIC;
  if (load_u32(s + 44) != h32(s, 44)) return SZ_ERROR_CHECKSUM;
  if (load_u16(s + 6) != 0 || load_u32(s + 20) != 0) return SZ_ERROR_CORRUPT;
  h->type = s[4];
  h->flags = s[5];
  if (h->flags & ~kFlagPayloadHash) return SZ_ERROR_CORRUPT;
  h->seq = load_u64(s + 8);
  h->tensor = load_u32(s + 16);
  h->chunk = load_u64(s + 24);
  h->payload_size = load_u64(s + 32);
  h->payload_hash = load_u32(s + 40);
  return SZ_OK;
}

// Hello layout: 0 magic u32 | 4 protocol u16 | 6 format u8 | 7 mode u8 | 8 session u32 | 12 window u32 |
// 16 chunk_values u64 | 24 n_tensors u32 | 28 token_len u16 | 30 reserved u16 | token | tensor entries:
// name_len u16, dtype u8, reserved u8, size u64, codebook[32], name.
std::vector<uint8_t> encode_hello(const Hello& h) {
  size_t total = kHelloFixed + h.token.size();
  for (const auto& t : h.tensors) total += kTensorEntryFixed + t.name.size();
  std::vector<uint8_t> out(total, 0);
  uint8_t* d = out.data();
  store_u32(d, kHelloMagic);
  store_u16(d + 4, h.protocol_version);
  d[6] = h.format_version;
  d[7] = h.mode;
  store_u32(d + 8, h.session);
  store_u32(d + 12, h.window);
  store_u64(d + 16, h.chunk_values);
  store_u32(d + 24, (uint32_t)h.tensors.size());
  store_u16(d + 28, (uint16_t)h.token.size());
  size_t o = kHelloFixed;
  memcpy(d + o, h.token.data(), h.token.size());
  o += h.token.size();
  for (const auto& t : h.tensors) {
    store_u16(d + o, (uint16_t)t.name.size());
    d[o + 2] = t.dtype;
    store_u64(d + o + 4, t.size);
    memcpy(d + o + 12, t.codebook, SZ_CODEBOOK_FILE_SIZE);
    o += kTensorEntryFixed;
    memcpy(d + o, t.name.data(), t.name.size());
    o += t.name.size();
  }
  return out;
}

sz_status decode_hello(const uint8_t* p, size_t size, uint32_t max_tensors, Hello* h, std::string* why) {
  if (size < kHelloFixed) {
    *why = "handshake truncated";
    return SZ_ERROR_CORRUPT;
  }
  if (load_u32(p) != kHelloMagic) {
    *why = "handshake has a bad magic";
    return SZ_ERROR_BAD_MAGIC;
  }
  h->protocol_version = load_u16(p + 4);
  h->format_version = p[6];
  h->mode = p[7];
  h->session = load_u32(p + 8);
  h->window = load_u32(p + 12);
  h->chunk_values = load_u64(p + 16);
  const uint32_t n = load_u32(p + 24);
  const size_t token_len = load_u16(p + 28);
  if (h->protocol_version != kProtocolVersion) {
    *why = "protocol version " + std::to_string(h->protocol_version) + " not supported (this side speaks " +
           std::to_string(kProtocolVersion) + ")";
    return SZ_ERROR_UNSUPPORTED_VERSION;
  }
  if (load_u16(p + 30) != 0) {
    *why = "handshake reserved bytes not zero";
    return SZ_ERROR_CORRUPT;
  }
  if (token_len > kMaxToken || token_len > size - kHelloFixed) {
    *why = "handshake token length out of range";
    return SZ_ERROR_CORRUPT;
  }
  if (n > max_tensors) {
    *why = "peer announces " + std::to_string(n) + " tensors, the limit is " + std::to_string(max_tensors);
    return SZ_ERROR_INVALID_ARGUMENT;
  }
  // Every entry needs at least kTensorEntryFixed bytes: check the count against the bytes before reserving.
  size_t o = kHelloFixed;
  h->token.assign((const char*)p + o, token_len);
  o += token_len;
  if ((uint64_t)n * kTensorEntryFixed > size - o) {
    *why = "handshake tensor list truncated";
    return SZ_ERROR_CORRUPT;
  }
  h->tensors.clear();
  h->tensors.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    if (size - o < kTensorEntryFixed) {
      *why = "handshake tensor list truncated";
      return SZ_ERROR_CORRUPT;
    }
    TensorEntry t;
    const size_t name_len = load_u16(p + o);
    t.dtype = p[o + 2];
    if (p[o + 3] != 0) {
      *why = "handshake reserved bytes not zero";
      return SZ_ERROR_CORRUPT;
    }
    t.size = load_u64(p + o + 4);
    memcpy(t.codebook, p + o + 12, SZ_CODEBOOK_FILE_SIZE);
    o += kTensorEntryFixed;
    if (name_len > kMaxName) {
      *why = "tensor name longer than " + std::to_string(kMaxName) + " bytes";
      return SZ_ERROR_INVALID_ARGUMENT;
    }
    if (name_len > size - o) {
      *why = "handshake tensor list truncated";
      return SZ_ERROR_CORRUPT;
    }
    t.name.assign((const char*)p + o, name_len);
    o += name_len;
    h->tensors.push_back(std::move(t));
  }
  if (o != size) {
    *why = "handshake has trailing bytes";
    return SZ_ERROR_CORRUPT;
  }
  return SZ_OK;
}

std::vector<uint8_t> encode_status(uint32_t status, const std::string& text) {
  const size_t len = text.size() > kMaxText ? kMaxText : text.size();
  std::vector<uint8_t> out(8 + len);
  store_u32(out.data(), status);
  store_u32(out.data() + 4, (uint32_t)len);
  memcpy(out.data() + 8, text.data(), len);
  return out;
}

namespace {

// The status part shared by RESULT and HELLO_ACK; *used is the bytes it took.
sz_status decode_status_part(const uint8_t* p, size_t size, uint32_t* status, std::string* text, size_t* used) {
  if (size < 8) return SZ_ERROR_CORRUPT;
  const uint32_t len = load_u32(p + 4);
  if (len > kMaxText || len > size - 8) return SZ_ERROR_CORRUPT;
  *status = load_u32(p);
  text->clear();
  for (uint32_t i = 0; i < len; ++i) {
    const char c = (char)p[8 + i];
    text->push_back((c >= 0x20 && c < 0x7F) ? c : '?');  // never echo control bytes from a peer to a terminal
  }
  *used = 8 + (size_t)len;
  return SZ_OK;
}

}  // namespace

sz_status decode_status(const uint8_t* p, size_t size, uint32_t* status, std::string* text) {
  size_t used = 0;
  const sz_status st = decode_status_part(p, size, status, text, &used);
  if (st != SZ_OK) return st;
  return used == size ? SZ_OK : SZ_ERROR_CORRUPT;
}

std::vector<uint8_t> encode_ack(uint32_t status, const std::string& text, const std::vector<uint8_t>& address) {
  std::vector<uint8_t> out = encode_status(status, text);
  const size_t o = out.size();
  out.resize(o + 4 + address.size());
  store_u32(out.data() + o, (uint32_t)address.size());
  if (!address.empty()) memcpy(out.data() + o + 4, address.data(), address.size());
  return out;
}

sz_status decode_ack(const uint8_t* p, size_t size, uint32_t* status, std::string* text,
                     std::vector<uint8_t>* address) {
  size_t used = 0;
  const sz_status st = decode_status_part(p, size, status, text, &used);
  if (st != SZ_OK) return st;
  if (size - used < 4) return SZ_ERROR_CORRUPT;
  const uint32_t len = load_u32(p + used);
  if (len > kMaxAddress || len != size - used - 4) return SZ_ERROR_CORRUPT;
  if ((*status == SZ_OK) != (len > 0)) return SZ_ERROR_CORRUPT;  // an address exactly when accepted
  address->assign(p + used + 4, p + size);
  return SZ_OK;
}

std::vector<uint8_t> encode_message(uint8_t type, const std::vector<uint8_t>& payload, bool hashed, uint64_t chunk) {
  std::vector<uint8_t> out(kHeaderSize + payload.size());
  Header h;
  h.type = type;
  h.flags = hashed ? kFlagPayloadHash : 0;
  h.chunk = chunk;
  h.payload_size = payload.size();
  h.payload_hash = hashed ? h32(payload.data(), payload.size()) : 0;
  write_header(out.data(), h);
  if (!payload.empty()) memcpy(out.data() + kHeaderSize, payload.data(), payload.size());
  return out;
}

std::vector<uint8_t> encode_credit_load(const CreditLoad& c) {
  std::vector<uint8_t> p(kCreditPayload);
  store_u64(p.data(), c.frame_bytes);
  store_u64(p.data() + 8, c.frame_ns);
  store_u64(p.data() + 16, c.raw_bytes);
  store_u64(p.data() + 24, c.raw_ns);
  return p;
}

sz_status decode_credit_load(const uint8_t* p, size_t size, CreditLoad* c) {
  if (size != kCreditPayload) return SZ_ERROR_CORRUPT;
  c->frame_bytes = load_u64(p);
  c->frame_ns = load_u64(p + 8);
  c->raw_bytes = load_u64(p + 16);
  c->raw_ns = load_u64(p + 24);
  return SZ_OK;
}

size_t max_control_payload(uint8_t type) {
  switch (type) {
    case kHello:
      return kMaxHelloBytes;
    case kHelloAck:
      return 8 + kMaxText + 4 + kMaxAddress;
    case kResult:
      return 8 + kMaxText;
    case kCredit:
      return kCreditPayload;
    default:
      return 0;
  }
}

uint8_t* MessageReader::buffer(size_t* room) {
  if (complete_ || failed_) {
    *room = 0;
    return nullptr;
  }
  if (head_fill_ < kHeaderSize) {
    *room = kHeaderSize - head_fill_;
    return head_ + head_fill_;
  }
  const size_t want = (size_t)h_.payload_size - payload_fill_;
  const size_t step = want < ((size_t)64 << 10) ? want : ((size_t)64 << 10);
  if (payload_.size() < payload_fill_ + step) payload_.resize(payload_fill_ + step);
  *room = step;
  return payload_.data() + payload_fill_;
}

sz_status MessageReader::commit(size_t n, std::string* why) {
  if (complete_ || failed_) {
    *why = "message reader misused";
    return SZ_ERROR_INTERNAL;
  }
  if (head_fill_ < kHeaderSize) {
    if (n > kHeaderSize - head_fill_) {
      failed_ = true;
      *why = "message reader misused";
      return SZ_ERROR_INTERNAL;
    }
    head_fill_ += n;
    if (head_fill_ < kHeaderSize) return SZ_OK;
    const sz_status st = read_header(head_, kHeaderSize, &h_);
    if (st != SZ_OK) {
      failed_ = true;
      *why = st == SZ_ERROR_BAD_MAGIC ? "not a message of this protocol (bad magic)"
                                      : (st == SZ_ERROR_CHECKSUM ? "a message header failed its check"
                                                                 : "a message header has reserved bits set");
      return st;
    }
    if (h_.type >= 32 || !(allowed_ & type_bit(h_.type))) {
      failed_ = true;
      *why = "unexpected message type " + std::to_string(h_.type);
      return SZ_ERROR_CORRUPT;
    }
    if (h_.payload_size > max_control_payload(h_.type)) {
      failed_ = true;
      *why = "a message announces a payload of " + std::to_string(h_.payload_size) +
             " bytes, more than its type allows";
      return SZ_ERROR_CORRUPT;
    }
    if (!(h_.flags & kFlagPayloadHash)) {
      failed_ = true;
      *why = "a control message without its payload hash";
      return SZ_ERROR_CORRUPT;
    }
    payload_fill_ = 0;
    payload_.clear();
  } else {
    if (n > (size_t)h_.payload_size - payload_fill_ || payload_fill_ + n > payload_.size()) {
      failed_ = true;
      *why = "message reader misused";
      return SZ_ERROR_INTERNAL;
    }
    payload_fill_ += n;
  }
  if (payload_fill_ == h_.payload_size) {
    payload_.resize(payload_fill_);
    if ((h_.flags & kFlagPayloadHash) && h32(payload_.data(), payload_.size()) != h_.payload_hash) {
      failed_ = true;
      *why = "a message failed its payload check";
      return SZ_ERROR_CHECKSUM;
    }
    complete_ = true;
  }
  return SZ_OK;
}

void MessageReader::reset() {
  head_fill_ = 0;
  h_ = Header();
  std::vector<uint8_t>().swap(payload_);
  payload_fill_ = 0;
  complete_ = false;
  failed_ = false;
}

}  // namespace proto
}  // namespace transfer
}  // namespace splitzip
