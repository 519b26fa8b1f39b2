// ucx.h — a small single-threaded wrapper over UCX ucp: one context, one worker, at most one endpoint, created from
// a peer's worker address (never through a sockaddr listener: transfer/PROTOCOL.md §1); tagged sends and receives
// tracked as Op objects; an event loop that sleeps on the worker's event fd, on an eventfd that other threads (the
// codec threads) use to wake it, and on the session's control connection.
//
// Only the thread that owns the Ucx object calls into UCX (UCS_THREAD_MODE_SINGLE); wake() is the one call that
// other threads may make.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <vector>

#include <ucp/api/ucp.h>

#include "splitzip/splitzip.h"

namespace splitzip {
namespace transfer {

struct Op {
  void* request = nullptr;   // UCX request handle while in flight
  bool active = false;       // posted and not yet reaped
  bool done = false;         // the completion callback ran
  ucs_status_t status = UCS_OK;
  size_t length = 0;         // received length (receives)
  uint64_t sender_tag = 0;   // tag of the matched message (receives)
  ucp_dt_iov_t iov[2] = {};  // a two-part send (header + payload) refers to this until it completes
};

class Ucx {
 public:
  Ucx() = default;
  ~Ucx();
  Ucx(const Ucx&) = delete;
  Ucx& operator=(const Ucx&) = delete;

  // `net_device`: the one network interface UCX may use ("lo", "eth0"; set as the NET_DEVICES of the context's
  // configuration, so the transports' own sockets listen there only); empty = UCX's choice.
  sz_status init(const std::string& net_device, std::string* error);
  // This worker's address, to hand to the peer.
  sz_status address(std::vector<uint8_t>* out, std::string* error);
  // Creates the endpoint to a peer's worker address (error handling mode PEER).
  sz_status connect(const std::vector<uint8_t>& peer_address, std::string* error);
  // wait() also returns when this fd (the control connection) is readable or closed; -1 = none.
  void watch(int fd) { watch_fd_ = fd; }

  // buffers must stay valid until the op is reaped (done and reap()ed) or cancelled. `device`: the buffer is CUDA
  // device memory (only when cuda_memory(); a two-part send must be host memory).
  sz_status send(uint64_t tag, const void* a, size_t a_size, const void* b, size_t b_size, Op* op,
                 bool device = false);
  sz_status recv(uint64_t tag, uint64_t mask, void* buffer, size_t capacity, Op* op, bool device = false);
  // Whether this UCX build and its loaded transports accept CUDA device memory (ucp_context_query memory types).
  bool cuda_memory() const { return cuda_memory_; }
  // The same question without a worker (so without opening any transport socket): a context, queried and released.
  static bool cuda_memory_supported();
  // Frees the request of a completed op; returns its status. Call only when op->done.
  ucs_status_t reap(Op* op);
  // Cancels an op in flight and progresses until its callback ran (bounded by a short time).
  void cancel(Op* op);

  // Progresses the worker until it has nothing more to do. Returns true if anything happened.
  bool progress();
  // Sleeps until UCX has an event, wake() was called, or max_seconds passed.
  void wait(double max_seconds);
  // Thread safe: wakes wait().
  void wake();

  bool ep_failed() const { return ep_failed_; }
  ucs_status_t ep_status() const { return ep_status_; }
  bool has_ep() const { return ep_ != nullptr; }
  // Closes the endpoint: flushes it when `flush` (bounded by timeout), otherwise forces it closed.
  void close_ep(bool flush, double timeout_s);

  // Called from UCX callbacks.
  void on_ep_error(ucs_status_t status);

 private:
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
  int ucx_fd_ = -1;
  int wake_fd_ = -1;
  int watch_fd_ = -1;
  bool ep_failed_ = false;
  bool cuda_memory_ = false;
  ucs_status_t ep_status_ = UCS_OK;
};

std::string ucs_text(ucs_status_t status);

}  // namespace transfer
}  // namespace splitzip
