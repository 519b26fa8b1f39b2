// ucx_transport.cpp — the data transport (transport.h) over UCX's tag API: an endpoint is one Ucx (ucx.h: a context
// and a worker of the session's own, restricted to one network interface, and at most one ucp endpoint created
// from the peer's worker address), its requests are Ucx::Op objects, one per request number.
#include <memory>
#include <string>
#include <vector>

#include "transport/transport.h"
#include "transport/ucx.h"

namespace splitzip {
namespace transfer {

namespace {

constexpr uint64_t kFullTagMask = ~(uint64_t)0;  // a receive matches exactly its tag

class UcxEndpoint final : public Endpoint {
 public:
  explicit UcxEndpoint(size_t requests) : ops_(requests) {}

  sz_status init(const EndpointConfig& config, std::string* why) {
    const sz_status st = ucx_.init(config.net_device, why);
    if (st == SZ_OK) ucx_.watch(config.watch_fd);
    return st;
  }

  sz_status local_address(std::vector<uint8_t>* out, std::string* why) override { return ucx_.address(out, why); }
  sz_status connect(const std::vector<uint8_t>& peer_address, std::string* why) override {
    return ucx_.connect(peer_address, why);
  }
  void close(bool flush, double timeout_s) override { ucx_.close_ep(flush, timeout_s); }
  bool failed(std::string* why) const override {
    if (!ucx_.ep_failed()) return false;
    if (why != nullptr) *why = ucs_text(ucx_.ep_status());
    return true;
  }

  bool device_memory() const override { return ucx_.cuda_memory(); }
  // UCX may complete a CUDA copy without signalling its worker's event fd.
  bool device_completions_signalled() const override { return false; }
  // UCX registers memory itself as it is used (its registration cache).
  sz_status register_memory(void*, size_t, MemoryType, std::string*) override { return SZ_OK; }

  sz_status post_send(size_t id, uint64_t tag, const void* data, size_t size, MemoryType type,
                      std::string* why) override {
    Op* op = &ops_.at(id);
    const sz_status st = ucx_.send(tag, data, size, nullptr, 0, op, type == MemoryType::kDevice);
    if (st != SZ_OK && why != nullptr) *why = ucs_text(op->status);
    return st;
  }
  sz_status post_recv(size_t id, uint64_t tag, void* data, size_t capacity, MemoryType type,
                      std::string* why) override {
    Op* op = &ops_.at(id);
    const sz_status st = ucx_.recv(tag, kFullTagMask, data, capacity, op, type == MemoryType::kDevice);
    if (st != SZ_OK && why != nullptr) *why = ucs_text(op->status);
    return st;
  }
  Completion test(size_t id, size_t* length, std::string* why) override {
    Op* op = &ops_.at(id);
    if (!op->done) return Completion::kPending;
    const ucs_status_t us = ucx_.reap(op);
    if (us == UCS_OK) {
      if (length != nullptr) *length = op->length;
      return Completion::kOk;
    }
    if (why != nullptr) *why = ucs_text(us);
    return us == UCS_ERR_MESSAGE_TRUNCATED ? Completion::kTruncated : Completion::kFailed;
  }
  void cancel(size_t id) override { ucx_.cancel(&ops_.at(id)); }

  bool progress() override { return ucx_.progress(); }
  void wait(double max_seconds) override { ucx_.wait(max_seconds); }
  void wake() override { ucx_.wake(); }

 private:
  // Declared before the worker, so that they outlive it: a request UCX would not cancel still refers to its Op.
  std::vector<Op> ops_;
  Ucx ucx_;
};

class UcxTransport final : public Transport {
 public:
  const char* name() const override { return "UCX"; }
  bool device_memory_supported() const override { return Ucx::cuda_memory_supported(); }
  sz_status open(const EndpointConfig& config, std::unique_ptr<Endpoint>* out, std::string* why) const override {
    std::unique_ptr<UcxEndpoint> ep(new UcxEndpoint(config.requests));
    const sz_status st = ep->init(config, why);
    if (st != SZ_OK) return st;
    *out = std::move(ep);
    return SZ_OK;
  }
};

}  // namespace

const Transport& ucx_transport() {
  static const UcxTransport t;
  return t;
}

}  // namespace transfer
}  // namespace splitzip
