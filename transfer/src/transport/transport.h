// transport.h — the data transport of a session (transfer/PROTOCOL.md §1 "Data", §4): what the sender and the
// receiver need to move CHUNK messages once the control connection (net.h) has accepted the peer. The sessions
// (src/session/) call only this interface; ucx_transport.cpp implements it over UCX's tag API (ucx.h).
//
// A session opens one Endpoint of its own, restricted to the network interface of its control connection:
//   receiver: open → post_recv × slots → local_address (sent in HELLO_ACK) → progress / test / wait ... → cancel
//   sender:   open → connect(the receiver's address from HELLO_ACK) → post_send ... → close → cancel
// Requests are numbered 0 .. EndpointConfig::requests-1 (one per slot of the session); a request is posted, then
// tested until it completed (test() then releases it), or cancelled. One thread (the session's) calls everything but
// wake(), which other threads (codec threads, a producer's ReadyGate) call to end a wait().
//
// What a second transport (one more file here, and a way to pick it in session_transport()) must provide:
//  - Two-sided messages: a send of `size` bytes with a 64-bit tag is delivered whole into one posted receive of the
//    same tag (any of them: the receiver takes messages in any order and derives each one's place from its header),
//    and that receive completes with the length; a message longer than the receive's capacity completes it as
//    kTruncated, never by writing past the buffer. A send completes once its buffer may be reused.
//    A transport with one-sided writes only builds this itself. NIXL, say (an agent per endpoint; registerMem of
//    descriptor lists; getLocalMD / loadRemoteMD; prepXferDlist, then makeXferReq by descriptor index, postXferReq,
//    getXferStatus; genNotif / getNotifs): the receiver's local_address carries its agent's metadata and the
//    descriptors of its registered receive buffers (request i = descriptor i); post_recv makes buffer i free for
//    the sender again, post_send writes into a buffer the receiver made free (waiting for one when none is: the
//    credit window bounds how many are needed) with a notification that carries the tag and the length, and the
//    receiver completes request i when that notification arrives. Telling the sender which buffers are free is
//    the part NIXL does not give: the receiver's notifications to the sender, or a protocol change (see Security).
//  - Memory: register_memory() is called for every buffer before it is posted (once, at allocation; UCX needs
//    nothing); device memory (MemoryType::kDevice, CUDA) is posted only where device_memory() says so.
//  - Security: an endpoint is opened only after the handshake was accepted (the token checked), so no transport
//    code parses a peer's bytes before that; the receiving side never calls connect() and never hands anything from
//    the peer to the transport other than the data messages it receives into its own buffers. A transport that
//    needs the receiver to load the sender's metadata (a notification channel back to the sender, say) changes
//    that property, and PROTOCOL.md must say so.
//  - Failure: a peer whose process dies fails its endpoint (failed() true) promptly, not after a timeout; a
//    cancelled request is no longer written to once cancel() returned (or, where the transport cannot stop it, its
//    buffers stay valid until the endpoint is destroyed: sessions destroy the endpoint before their buffers).
//  - Waiting: wait() sleeps until the transport may have progress to make, wake() was called, the watched control
//    connection is readable, or the time passed. Timeouts are the sessions' (no progress for timeout_s): a
//    transport adds none of its own, except short bounds on cancel() and close().
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <memory>
#include <string>
#include <vector>

#include "splitzip/splitzip.h"

namespace splitzip {
namespace transfer {

// Where a buffer lives.
enum class MemoryType : uint8_t { kHost, kDevice /* CUDA device memory of the current device */ };

// What test() says of a request.
enum class Completion : uint8_t {
  kPending,    // still in flight
  kOk,         // done (a receive: its length is set)
  kTruncated,  // a receive: the message was longer than the buffer
  kFailed,     // the operation failed (its reason is set)
};

struct EndpointConfig {
  std::string net_device;  // the one network interface the transport may use ("lo", "eth0"); "" = its choice
  int watch_fd = -1;       // wait() also returns when this fd (the control connection) is readable or closed
  size_t requests = 0;     // request numbers 0 .. requests-1
};

// One session's end of the data path.
class Endpoint {
 public:
  virtual ~Endpoint() = default;

  // This endpoint's address, for the peer (HELLO_ACK): opaque bytes, checked against the handshake's limit by the
  // caller.
  virtual sz_status local_address(std::vector<uint8_t>* out, std::string* why) = 0;
  // Connects to the peer's address (the sender only).
  virtual sz_status connect(const std::vector<uint8_t>& peer_address, std::string* why) = 0;
  // Closes the connection to the peer: completes what is in flight when `flush` (bounded by timeout_s), otherwise
  // fails it at once. Requests still to be cancelled afterwards complete with an error without waiting on the peer.
  virtual void close(bool flush, double timeout_s) = 0;
  // The connection to the peer failed (the peer's process died): *why says how.
  virtual bool failed(std::string* why) const = 0;

  // Whether device memory can be posted as it is (without staging through host memory).
  virtual bool device_memory() const = 0;
  // Whether wait() returns when an operation on device memory completed; where not, a session that posted device
  // memory polls instead (passes wait() a short time).
  virtual bool device_completions_signalled() const = 0;
  // Makes [data, data + size) usable by post_send / post_recv until the endpoint is destroyed.
  virtual sz_status register_memory(void* data, size_t size, MemoryType type, std::string* why) = 0;

  // Posts request `id` (not in flight): a send of `size` bytes with `tag`, or a receive of one message with `tag`
  // into at most `capacity` bytes. The buffer stays the transport's until test() reported the request's completion
  // or cancel() returned. On an error, *why has the transport's reason.
  virtual sz_status post_send(size_t id, uint64_t tag, const void* data, size_t size, MemoryType type,
                              std::string* why) = 0;
  virtual sz_status post_recv(size_t id, uint64_t tag, void* data, size_t capacity, MemoryType type,
                              std::string* why) = 0;
  // Whether request `id` completed (call only for a posted one). Anything but kPending releases it: *length (a
  // receive's message length) or *why (the reason of kFailed) are set.
  virtual Completion test(size_t id, size_t* length, std::string* why) = 0;
  // Stops request `id` if it is in flight (bounded by a short time) and releases it; nothing if it is not.
  virtual void cancel(size_t id) = 0;

  // Makes progress until there is nothing more to do at once; true if anything happened.
  virtual bool progress() = 0;
  // Sleeps until the transport has an event, wake() was called, the watched fd is readable, or max_seconds passed.
  virtual void wait(double max_seconds) = 0;
  // Thread safe: ends a wait().
  virtual void wake() = 0;
};

// A kind of data transport.
class Transport {
 public:
  virtual ~Transport() = default;
  // For messages ("UCX").
  virtual const char* name() const = 0;
  // Whether this transport can take device memory at all, asked without opening any socket.
  virtual bool device_memory_supported() const = 0;
  // A new endpoint for one session, on config.net_device.
  virtual sz_status open(const EndpointConfig& config, std::unique_ptr<Endpoint>* out, std::string* why) const = 0;
};

// UCX, tag API (ucx_transport.cpp).
const Transport& ucx_transport();
// The transport the sessions use.
inline const Transport& session_transport() { return ucx_transport(); }

}  // namespace transfer
}  // namespace splitzip
