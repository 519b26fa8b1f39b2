// sender.cpp — the sending side of transfer/PROTOCOL.md.
//
// The handshake goes over a TCP control connection (HELLO out, HELLO_ACK back with the address of the receiver's
// data endpoint: handshake()); then the caller's thread opens the session's data endpoint (transport/transport.h),
// restricted to the interface of the control connection, connects it to that address and runs the pipeline, while
// CREDIT and RESULT messages keep arriving on the control connection (Answers). `threads` codec threads encode
// messages into slots (Encoder). Slots move Free -> Encoding -> Ready -> Sending -> Free; slot i sends as request i
// of the endpoint. Messages go out strictly in sequence order, only while fewer than `window` messages are
// unconsumed by the receiver (its CREDIT messages), and, with a rate, when the emulated link would have carried
// them. With a ReadyGate, a tensor's messages are handed to the codec threads only once the gate marks it ready
// (the handshake and the tensors before it do not wait). With SendOptions::adaptive, each message of a compressed
// session is compressed or sent raw as it is handed to a codec thread (AdaptiveChoice, session/adaptive.h, fed with
// the codec threads' measured times and frame sizes and with the link's rate: the given rate, else the bytes of
// completed sends over the time some send was in flight).
//
// Device tensors (Tensor::device): each codec thread owns a CUDA stream and a codec workspace; a slot owns a device
// buffer [header | frame] and a pinned host buffer of the same size. A job compresses into the device buffer
// (sz_cuda_compress, frame size to pinned host), then either writes the header into the device buffer, which the
// transport sends as device memory (direct, where Endpoint::device_memory()), or copies the message to the pinned
// buffer, which it sends as host memory (staged). The codec thread waits on its own stream, so while it copies
// message i+1 the session's thread sends message i.
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <random>
#include <unordered_set>

#include "gpu.h"
#include "transport/net.h"
#include "session/adaptive.h"
#include "session/pool.h"
#include "wire/protocol.h"
#include "splitzip/transfer.hpp"
#include "transport/transport.h"

namespace splitzip {
namespace transfer {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Job {
  uint32_t tensor = 0;
  uint64_t chunk = 0;
  const uint8_t* src = nullptr;
  uint64_t n_values = 0;
  size_t bytes = 0;
  bool raw = false;  // the values as they are (a raw session, or the adaptive choice), else a frame
};

struct Slot {
  enum State { kFree, kEncoding, kReady, kSending } state = kFree;
  uint64_t seq = 0;
  Job job;
  std::vector<uint8_t> buf;  // host tensors: [header | payload]
  gpu::Mem d_buf;            // device tensors: [header | frame] on the device
  gpu::Mem h_buf;            // device tensors: [header | payload] in pinned host memory
  gpu::Mem d_size;           // device tensors: the frame size, on the device
  gpu::Mem h_size;           // ... and in pinned host memory
  uint8_t* msg = nullptr;    // the message the transport sends: [header | payload]
  bool msg_device = false;   // msg is device memory
  const uint8_t* payload = nullptr;
  size_t payload_size = 0;
  double encode_s = 0;  // wall time of the job on its codec thread
  sz_status status = SZ_OK;
  std::string why;
};

// What a codec thread owns for the GPU codec.
struct GpuWorker {
  gpu::Stream stream;
  gpu::Mem workspace;
};

sz_status fail(std::string* error, sz_status st, const std::string& msg) {
  if (error != nullptr) *error = msg;
  return st;
}

// What the handshake announces and the pipeline follows, derived from the arguments before any connection.
struct SendPlan {
  proto::Hello hello;
  std::vector<uint8_t> hello_bytes;    // the HELLO payload
  std::vector<sz_codebook> codebooks;  // per tensor (compressed mode)
  std::vector<uint64_t> first_seq;     // tensors.size() + 1 entries; first_seq.back() = messages in all
  size_t max_value_bytes = 1;
  uint64_t total = 0;                  // messages in all
  uint64_t raw_bytes = 0;
};

// Checks every tensor (name, dtype, size, codebook) and builds the HELLO (PROTOCOL.md §3). SZ_OK, or the error.
sz_status plan_send(const std::vector<Tensor>& tensors, const SendOptions& opt, SendPlan* plan, std::string* error) {
  const bool raw = opt.raw;
  proto::Hello& hello = plan->hello;
  std::vector<sz_codebook>& codebooks = plan->codebooks;
  std::vector<uint64_t>& first_seq = plan->first_seq;
  size_t& max_value_bytes = plan->max_value_bytes;
  hello.protocol_version = opt.faults.protocol_version ? opt.faults.protocol_version : kProtocolVersion;
  hello.format_version = SZ_FORMAT_VERSION;
  hello.mode = raw ? proto::kModeRaw : proto::kModeCompressed;
  hello.chunk_values = opt.chunk_values;
  hello.window = opt.window;
  hello.token = opt.token;
  {
    std::random_device rd;
    hello.session = rd();
  }
  codebooks.assign(tensors.size(), sz_codebook{});
  first_seq.assign(tensors.size() + 1, 0);
  max_value_bytes = 1;
  std::unordered_set<std::string> names;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (!opt.faults.unchecked_names && !valid_tensor_name(t.name)) return fail(error, SZ_ERROR_INVALID_ARGUMENT, "invalid tensor name '" + t.name + "'");
    if (!names.insert(t.name).second) return fail(error, SZ_ERROR_INVALID_ARGUMENT, "duplicate tensor name " + t.name);
    const size_t w = sz_dtype_size(t.dtype);
    if (w == 0) return fail(error, SZ_ERROR_UNSUPPORTED_DTYPE, "tensor " + t.name + ": unknown dtype");
    if (t.size % w != 0)
      return fail(error, SZ_ERROR_INVALID_ARGUMENT,
                  "tensor " + t.name + ": size " + std::to_string(t.size) + " is not a multiple of the dtype size");
    if (t.size > 0 && t.data == nullptr) return fail(error, SZ_ERROR_INVALID_ARGUMENT, "tensor " + t.name + ": no data");
    max_value_bytes = std::max(max_value_bytes, w);
    proto::TensorEntry e;
    e.name = t.name;
    e.dtype = (uint8_t)t.dtype;
    e.size = (i == 0 && opt.faults.announce_size != 0) ? opt.faults.announce_size : t.size;
    if (!raw) {
      const sz_codebook* given =
          (size_t)t.dtype < opt.codebooks.size() ? opt.codebooks[(size_t)t.dtype] : nullptr;
      sz_status st = SZ_OK;
      if (given != nullptr) {
        codebooks[i] = *given;
        st = sz_codebook_validate(&codebooks[i]);
        if (st == SZ_OK && codebooks[i].dtype != (uint8_t)t.dtype) st = SZ_ERROR_BAD_CODEBOOK;
      } else {
        st = sz_default_codebook(t.dtype, SZ_KIND_GENERIC, &codebooks[i]);
      }
      if (st == SZ_OK) st = sz_codebook_serialize(&codebooks[i], e.codebook, sizeof e.codebook);
      if (st != SZ_OK) return fail(error, st, "tensor " + t.name + ": codebook: " + sz_status_name(st));
    }
    hello.tensors.push_back(std::move(e));
    const uint64_t n = t.size / w;
    first_seq[i + 1] = first_seq[i] + (n + opt.chunk_values - 1) / opt.chunk_values;
    plan->raw_bytes += t.size;
  }
  if (hello.tensors.size() > 0xFFFFFFFFu) return fail(error, SZ_ERROR_INVALID_ARGUMENT, "too many tensors");
  plan->total = first_seq[tensors.size()];
  plan->hello_bytes = proto::encode_hello(hello);
  if (plan->hello_bytes.size() > proto::kMaxHelloBytes)
    return fail(error, SZ_ERROR_INVALID_ARGUMENT, "tensor list too long for one handshake");
  return SZ_OK;
}

// PROTOCOL.md §1, §3 on the control connection `fd` to `where`: the HELLO out, the HELLO_ACK back. SZ_OK with the
// receiver's data address in *address, or the error (a refusal: the receiver's status and text).
sz_status handshake(int fd, const std::string& where, const std::vector<uint8_t>& hello_bytes, double timeout_s,
                    uint64_t* wire_bytes, std::vector<uint8_t>* address, std::string* error) {
  std::string why;
  {
    const std::vector<uint8_t> msg = proto::encode_message(proto::kHello, hello_bytes, true);
    const sz_status st = net::write_all(fd, msg.data(), msg.size(), now_s() + timeout_s, &why);
    if (st != SZ_OK) return fail(error, SZ_ERROR_IO, "cannot send the handshake to " + where + ": " + why);
    *wire_bytes += msg.size();
  }
  proto::MessageReader ack(proto::type_bit(proto::kHelloAck));
  const sz_status st = net::read_message(fd, &ack, now_s() + timeout_s, nullptr, &why);
  if (st == SZ_ERROR_IO) return fail(error, SZ_ERROR_IO, "no answer to the handshake from " + where + ": " + why);
  if (st != SZ_OK) return fail(error, SZ_ERROR_CORRUPT, "the receiver answered the handshake with " + why);
  uint32_t status = 0;
  std::string text;
  if (proto::decode_ack(ack.payload().data(), ack.payload().size(), &status, &text, address) != SZ_OK)
    return fail(error, SZ_ERROR_CORRUPT, "the receiver sent a malformed handshake answer");
  if (status != SZ_OK) {
    const sz_status ps = (status > 0 && status <= SZ_ERROR_INTERNAL) ? (sz_status)status : SZ_ERROR_IO;
    return fail(error, ps, "the receiver refused the transfer: " + text);
  }
  return SZ_OK;
}

sz_status peer_status(uint32_t s) { return (s > 0 && s <= SZ_ERROR_INTERNAL) ? (sz_status)s : SZ_ERROR_IO; }

// The receiver's messages during the transfer, on the control connection, in order (PROTOCOL.md §4): CREDIT (the
// messages it consumed so far) and one RESULT.
class Answers {
 public:
  Answers(int fd, uint64_t total) : fd_(fd), total_(total) {}

  // Takes every complete message that is there; SZ_OK, or an error with *error set. A closed connection is noted
  // in `closed` (what came before it is still read).
  sz_status take(std::string* error) {
    while (!got_result && !closed) {
      bool complete = false;
      const sz_status rs = net::read_available(fd_, &reader_, &complete, &why);
      if (rs == SZ_ERROR_IO) {
        closed = true;
        break;
      }
      if (rs != SZ_OK) return fail(error, rs, "the receiver sent an invalid message: " + why);
      if (!complete) break;
      const proto::Header& h = reader_.header();
      if (h.type == proto::kCredit) {
        proto::CreditLoad l;
        if (h.chunk < consumed || h.chunk > total_ ||
            proto::decode_credit_load(reader_.payload().data(), reader_.payload().size(), &l) != SZ_OK)
          return fail(error, SZ_ERROR_CORRUPT, "the receiver sent an impossible credit");
        consumed = h.chunk;
        load_.frame_bytes += l.frame_bytes;
        load_.frame_ns += l.frame_ns;
        load_.raw_bytes += l.raw_bytes;
        load_.raw_ns += l.raw_ns;
      } else {
        std::string text;
        if (proto::decode_status(reader_.payload().data(), reader_.payload().size(), &result_status, &text) !=
            SZ_OK)
          return fail(error, SZ_ERROR_CORRUPT, "the receiver sent a malformed status");
        result_text = text;
        got_result = true;
      }
      reader_.reset();
    }
    return SZ_OK;
  }
  // After the data path failed: a receiver that rejects the transfer sends its result and then hangs up, so the
  // result may be on its way. Reads (for at most `seconds`) until it or the close arrived, or a message is invalid.
  void await_result(double seconds) {
    const double deadline = now_s() + seconds;
    std::string ignored;
    while (!got_result && !closed && now_s() < deadline) {
      if (take(&ignored) != SZ_OK) break;
      if (got_result || closed) break;
      pollfd p = {fd_, POLLIN, 0};
      poll(&p, 1, 20);
    }
  }

  // The receiver's codec load reported since the last call (its CREDIT payloads, summed).
  proto::CreditLoad take_load() {
    const proto::CreditLoad l = load_;
    load_ = proto::CreditLoad();
    return l;
  }

  uint64_t consumed = 0;
  bool got_result = false;
  uint32_t result_status = 0;
  std::string result_text;
  bool closed = false;
  std::string why;  // why the connection closed, or what was invalid

 private:
  int fd_;
  uint64_t total_;
  proto::MessageReader reader_{proto::type_bit(proto::kCredit) | proto::type_bit(proto::kResult)};
  proto::CreditLoad load_;
};

// The slots' buffers and, for device tensors, a stream and a codec workspace per codec thread. A slot holds
// [header | payload] contiguously, so that a message is one contiguous send. SZ_OK, or the status and *why.
sz_status allocate(const std::vector<Tensor>& tensors, const SendOptions& opt, const SendPlan& plan, bool use_gpu,
                   unsigned threads, std::vector<Slot>* slots, std::vector<GpuWorker>* gpu_workers,
                   std::string* why) {
  const bool raw = opt.raw;
  // Raw mode copies each message into its slot too: UCX 1.13 over TCP sends one contiguous buffer about 3x faster
  // than a two-part (header, data) iov on this machine, far more than the copy costs (bench/results/transfer.md).
  const size_t slot_capacity = raw ? (size_t)(opt.chunk_values * plan.max_value_bytes)
                                   : (size_t)SZ_COMPRESS_BOUND(opt.chunk_values, plan.max_value_bytes);
  if (!use_gpu) {
    for (auto& s : *slots) s.buf.resize(proto::kHeaderSize + slot_capacity);
    return SZ_OK;
  }
  // Device and pinned buffers of the bounded pool; a workspace and a stream per codec thread.
  const size_t cap = proto::kHeaderSize + (size_t)SZ_COMPRESS_BOUND(opt.chunk_values, plan.max_value_bytes);
  sz_status st = SZ_OK;
  std::string w;
  for (auto& s : *slots) {
    st = s.d_buf.alloc(gpu::Mem::kDevice, cap, &w);
    if (st == SZ_OK) st = s.h_buf.alloc(gpu::Mem::kPinned, cap, &w);
    if (st == SZ_OK) st = s.d_size.alloc(gpu::Mem::kDevice, sizeof(uint64_t), &w);
    if (st == SZ_OK) st = s.h_size.alloc(gpu::Mem::kPinned, sizeof(uint64_t), &w);
    if (st != SZ_OK) return fail(why, st, "GPU staging buffers: " + w);
  }
  size_t ws = 0;
  if (!raw) {
    sz_params p = sz_params_default();
    p.chunk_log2 = opt.frame_chunk_log2;
    p.flags = SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH;  // the receiver verifies every chunk
    for (const Tensor& t : tensors) {
      size_t n = 0;
      st = sz_cuda_compress_workspace_size(opt.chunk_values, t.dtype, &p, &n);
      if (st != SZ_OK) return fail(why, st, std::string("GPU workspace size: ") + sz_status_name(st));
      ws = std::max(ws, n);
    }
  }
  gpu_workers->resize(threads);
  for (auto& g : *gpu_workers) {
    st = g.stream.create(&w);
    if (st == SZ_OK && ws > 0) st = g.workspace.alloc(gpu::Mem::kDevice, ws, &w);
    if (st != SZ_OK) return fail(why, st, "GPU codec resources: " + w);
  }
  return SZ_OK;
}

// The codec threads' job: message slots[si].seq into its slot as [header | payload], from host memory (sz_compress)
// or from device memory (sz_cuda_compress on codec thread `worker`'s stream). Leaves s.msg and s.payload_size, or
// an error in s.status and s.why.
struct Encoder {
  const std::vector<Tensor>& tensors;
  const std::vector<sz_codebook>& codebooks;
  std::vector<Slot>& slots;
  std::vector<GpuWorker>& gpu_workers;
  bool use_gpu = false;
  bool direct = false;  // device tensors: the message goes from device memory
  int cuda_device = 0;
  sz_params params = sz_params_default();
  AdaptiveChoice* adaptive = nullptr;  // SendOptions::adaptive: each message compressed or raw, chosen here
  std::function<bool(uint64_t)> force_raw = nullptr;  // SendFaults::send_raw

  void operator()(unsigned worker, int si) {
    Slot& s = slots[(size_t)si];
    if (adaptive != nullptr) s.job.raw = force_raw ? force_raw(s.seq) : !adaptive->compress();
    const double t0 = now_s();
    encode(worker, s);
    s.encode_s = now_s() - t0;
    if (adaptive != nullptr && s.status == SZ_OK)
      adaptive->encoded(s.job.raw, s.job.bytes, s.payload_size, s.encode_s);
  }

  void encode(unsigned worker, Slot& s) {
    const Job& j = s.job;
    const bool raw = j.raw;
    s.status = SZ_OK;
    if (use_gpu) {
      gpu(worker, s);
      return;
    }
    if (raw) {
      memcpy(s.buf.data() + proto::kHeaderSize, j.src, j.bytes);
      s.payload = s.buf.data() + proto::kHeaderSize;
      s.payload_size = j.bytes;
    } else {
      size_t out = 0;
      s.status = sz_compress(j.src, j.n_values, tensors[j.tensor].dtype, &codebooks[j.tensor], &params,
                             s.buf.data() + proto::kHeaderSize, s.buf.size() - proto::kHeaderSize, &out);
      s.payload = s.buf.data() + proto::kHeaderSize;
      s.payload_size = out;
    }
    proto::Header h;
    h.type = proto::kChunk;
    h.flags = raw ? proto::kFlagPayloadHash : 0;
    h.seq = s.seq;
    h.tensor = j.tensor;
    h.chunk = j.chunk;
    h.payload_size = s.payload_size;
    h.payload_hash = raw ? proto::h32(s.payload, s.payload_size) : 0;
    proto::write_header(s.buf.data(), h);
    s.msg = s.buf.data();
    s.msg_device = false;
  }

  void gpu(unsigned worker, Slot& s) {
    const Job& j = s.job;
    GpuWorker& g = gpu_workers[worker];
    const sz_cuda_stream stream = g.stream.get();
    std::string why;
    sz_status e = gpu::set_device(cuda_device, &why);
    uint8_t* const h = s.h_buf.get();
    uint8_t* const d = s.d_buf.get();
    proto::Header hd;
    hd.type = proto::kChunk;
    hd.seq = s.seq;
    hd.tensor = j.tensor;
    hd.chunk = j.chunk;
    if (j.raw) {
      // The XXH3 of a raw message is computed on the host, so the bytes come to the pinned buffer either way.
      if (e == SZ_OK) e = gpu::copy_async(h + proto::kHeaderSize, j.src, j.bytes, stream, &why);
      if (e == SZ_OK) e = gpu::sync(stream, &why);
      s.payload_size = j.bytes;
      hd.flags = proto::kFlagPayloadHash;
      hd.payload_size = j.bytes;
      if (e == SZ_OK) hd.payload_hash = proto::h32(h + proto::kHeaderSize, j.bytes);
      if (e == SZ_OK) proto::write_header(h, hd);
      if (e == SZ_OK && direct) {
        e = gpu::copy_async(d, h, proto::kHeaderSize, stream, &why);
        if (e == SZ_OK) e = gpu::copy_async(d + proto::kHeaderSize, j.src, j.bytes, stream, &why);
        if (e == SZ_OK) e = gpu::sync(stream, &why);
      }
    } else {
      uint64_t* const hsize = reinterpret_cast<uint64_t*>(s.h_size.get());
      *hsize = 0;
      if (e == SZ_OK) {
        e = sz_cuda_compress(j.src, j.n_values, tensors[j.tensor].dtype, &codebooks[j.tensor], &params,
                             d + proto::kHeaderSize, s.d_buf.size() - proto::kHeaderSize, g.workspace.get(),
                             g.workspace.size(), reinterpret_cast<uint64_t*>(s.d_size.get()), hsize, stream);
        if (e != SZ_OK) why = std::string("sz_cuda_compress: ") + sz_status_name(e);
      }
      if (e == SZ_OK) e = gpu::sync(stream, &why);
      if (e == SZ_OK && (*hsize == 0 || *hsize > s.d_buf.size() - proto::kHeaderSize)) {
        e = SZ_ERROR_INTERNAL;
        why = "the GPU encoder reported an impossible frame size " + std::to_string(*hsize);
      }
      if (e == SZ_OK) {
        s.payload_size = (size_t)*hsize;
        hd.flags = 0;
        hd.payload_size = s.payload_size;
        proto::write_header(h, hd);
        if (direct) {
          e = gpu::copy_async(d, h, proto::kHeaderSize, stream, &why);
        } else {
          e = gpu::copy_async(h + proto::kHeaderSize, d + proto::kHeaderSize, s.payload_size, stream, &why);
        }
        if (e == SZ_OK) e = gpu::sync(stream, &why);
      }
    }
    s.status = e;
    if (e != SZ_OK) s.why = "GPU encode of message " + std::to_string(s.seq) + ": " + why;
    s.msg = direct ? d : h;
    s.msg_device = direct;
    s.payload = s.msg + proto::kHeaderSize;
  }
};

}  // namespace

struct ReadyGate::Impl {
  std::mutex mu;  // guards what follows
  std::vector<bool> ready;
  size_t prefix = 0;  // tensors 0..prefix-1 are all ready
  bool failed = false;
  std::string why;
  std::function<void()> wake;  // the running send's, while it runs
};

ReadyGate::ReadyGate(size_t n_tensors) : impl_(new Impl) { impl_->ready.assign(n_tensors, false); }
ReadyGate::~ReadyGate() = default;

size_t ReadyGate::size() const { return impl_->ready.size(); }

sz_status ReadyGate::ready(size_t index) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (index >= impl_->ready.size()) return SZ_ERROR_INVALID_ARGUMENT;
  impl_->ready[index] = true;
  while (impl_->prefix < impl_->ready.size() && impl_->ready[impl_->prefix]) ++impl_->prefix;
  if (impl_->wake) impl_->wake();
  return SZ_OK;
}

void ReadyGate::fail(const std::string& why) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->failed) impl_->why = why;
  impl_->failed = true;
  if (impl_->wake) impl_->wake();
}

sz_status send(const std::string& host, uint16_t port, const std::vector<Tensor>& tensors, const SendOptions& opt,
               SendStats* stats_out, std::string* error) {
  SendStats stats;
  std::string dummy;
  if (error == nullptr) error = &dummy;

  // ---- arguments ----
  const bool raw = opt.raw;
  unsigned threads = opt.threads == 0 ? std::max(1u, std::thread::hardware_concurrency()) : opt.threads;
  if (threads > 256) return fail(error, SZ_ERROR_INVALID_ARGUMENT, "--threads must be at most 256");
  if (opt.window < 1 || opt.window > 1024) return fail(error, SZ_ERROR_INVALID_ARGUMENT, "window must be 1..1024");
  if (opt.chunk_values < 1 || opt.chunk_values > ((uint64_t)1 << 28))
    return fail(error, SZ_ERROR_INVALID_ARGUMENT, "chunk values must be 1..2^28");
  if (opt.token.size() > proto::kMaxToken) return fail(error, SZ_ERROR_INVALID_ARGUMENT, "token longer than 256 bytes");
  if (opt.frame_chunk_log2 < SZ_MIN_CHUNK_LOG2 || opt.frame_chunk_log2 > SZ_MAX_CHUNK_LOG2)
    return fail(error, SZ_ERROR_INVALID_ARGUMENT, "frame chunk_log2 out of range");
  if (!(opt.timeout_s > 0)) return fail(error, SZ_ERROR_INVALID_ARGUMENT, "timeout must be positive");
  if (opt.rate_bytes_per_s < 0) return fail(error, SZ_ERROR_INVALID_ARGUMENT, "rate must not be negative");
  if (opt.adaptive && raw) return fail(error, SZ_ERROR_INVALID_ARGUMENT, "adaptive applies to compressed sends only");
  ReadyGate::Impl* const gate = opt.gate != nullptr ? opt.gate->impl_.get() : nullptr;
  if (gate != nullptr && opt.gate->size() != tensors.size())
    return fail(error, SZ_ERROR_INVALID_ARGUMENT, "the ready gate has " + std::to_string(opt.gate->size()) +
                                                      " entries for " + std::to_string(tensors.size()) + " tensors");
  size_t n_device = 0;
  for (const Tensor& t : tensors) n_device += t.device ? 1 : 0;
  const bool use_gpu = n_device > 0;
  if (use_gpu && n_device != tensors.size())
    return fail(error, SZ_ERROR_INVALID_ARGUMENT, "tensors of one send must all be on the device or all on the host");
  std::string gpu_why;
  if (use_gpu && !gpu::available(&gpu_why))
    return fail(error, SZ_ERROR_NOT_SUPPORTED, "device tensors need the GPU codec: " + gpu_why);
  const int cuda_device = use_gpu ? gpu::current_device() : 0;

  SendPlan plan;
  sz_status st = plan_send(tensors, opt, &plan, error);
  if (st != SZ_OK) return st;
  const uint64_t total = plan.total;
  stats.raw_bytes = plan.raw_bytes;

  const Transport& transport = session_transport();
  const std::string no_device_memory =
      std::string("this ") + transport.name() + " build does not report CUDA memory support (GpuPath::kDirect)";
  if (use_gpu && opt.gpu_path == GpuPath::kDirect && !transport.device_memory_supported())
    return fail(error, SZ_ERROR_NOT_SUPPORTED, no_device_memory);

  // ---- connect and handshake (PROTOCOL.md §1, §3): HELLO on the control connection, then the data endpoint ----
  const double t_start = now_s();
  int ctrl_fd = -1;
  st = net::connect_tcp(host, port, opt.timeout_s, &ctrl_fd, error);
  if (st != SZ_OK) return st;
  struct FdCloser {
    int* fd;
    ~FdCloser() {
      if (*fd >= 0) ::close(*fd);
    }
  } ctrl_closer{&ctrl_fd};
  const std::string where = host + ":" + std::to_string(port);
  std::vector<uint8_t> receiver_address;
  st = handshake(ctrl_fd, where, plan.hello_bytes, opt.timeout_s, &stats.wire_bytes, &receiver_address, error);
  if (st != SZ_OK) return st;
  // The data endpoint only now, restricted to the interface this end of the control connection uses; a request per
  // slot.
  const size_t nslots = (size_t)opt.window + threads;
  std::unique_ptr<Endpoint> endpoint;
  {
    EndpointConfig config;
    std::string why;
    if (!net::local_interface(ctrl_fd, &config.net_device, &why))
      return fail(error, SZ_ERROR_IO, "the network interface of the connection to " + where + ": " + why);
    config.watch_fd = ctrl_fd;
    config.requests = nslots;
    st = transport.open(config, &endpoint, error);
    if (st != SZ_OK) return st;
  }
  Endpoint* const ep = endpoint.get();
  // The producer's ready() and fail() wake this thread while the send runs (and no longer once it returned).
  struct GateHook {
    ReadyGate::Impl* gate;
    ~GateHook() {
      if (gate == nullptr) return;
      std::lock_guard<std::mutex> lock(gate->mu);
      gate->wake = nullptr;
    }
  } gate_hook{nullptr};
  if (gate != nullptr) {
    std::lock_guard<std::mutex> lock(gate->mu);
    if (gate->wake) return fail(error, SZ_ERROR_INVALID_ARGUMENT, "the ready gate is in use by another send");
    gate->wake = [ep] { ep->wake(); };
    gate_hook.gate = gate;
  }
  const bool direct = use_gpu && opt.gpu_path != GpuPath::kStaged && ep->device_memory();
  if (use_gpu && opt.gpu_path == GpuPath::kDirect && !direct)
    return fail(error, SZ_ERROR_NOT_SUPPORTED, no_device_memory);
  stats.gpu = use_gpu;
  stats.gpu_direct = direct;
  st = ep->connect(receiver_address, error);
  if (st != SZ_OK) return st;
  const uint64_t data_tag = proto::tag_of(proto::kChunk, plan.hello.session);

  // Everything below that is in flight is cancelled by this before the buffers go away.
  std::vector<Slot> slots;
  std::vector<GpuWorker> gpu_workers;
  std::unique_ptr<CodecPool> pool;
  auto cleanup = [&](bool flush) {
    if (pool) pool->stop();
    // Closing the endpoint first completes its sends (forced: with an error), so that no cancel below waits on a
    // peer that does not answer.
    ep->close(flush, flush ? 2.0 : 0.5);
    for (size_t i = 0; i < slots.size(); ++i) ep->cancel(i);
  };
  Answers answers(ctrl_fd, total);
  // The data path failed or a send failed: the receiver's reason when it sent one, else what failed.
  auto peer_failed = [&](const std::string& what) -> sz_status {
    answers.await_result(0.5);
    cleanup(false);
    if (answers.got_result && answers.result_status != SZ_OK)
      return fail(error, peer_status(answers.result_status), "the receiver failed: " + answers.result_text);
    if (!what.empty()) return fail(error, SZ_ERROR_IO, what);
    std::string ep_why;
    if (ep->failed(&ep_why)) return fail(error, SZ_ERROR_IO, "connection to " + where + " failed: " + ep_why);
    return fail(error, SZ_ERROR_IO, "connection to " + where + " failed: " + answers.why);
  };
  stats.handshake_seconds = now_s() - t_start;

  // ---- the pipeline ----
  slots.resize(nslots);
  {
    std::string why;
    st = allocate(tensors, opt, plan, use_gpu, threads, &slots, &gpu_workers, &why);
    if (st != SZ_OK) {
      cleanup(false);
      return fail(error, st, why);
    }
  }
  // The message buffers, to the transport (the one a slot sends from: host, device when direct, else pinned host).
  for (auto& s : slots) {
    std::string why;
    if (!use_gpu) {
      st = ep->register_memory(s.buf.data(), s.buf.size(), MemoryType::kHost, &why);
    } else if (direct) {
      st = ep->register_memory(s.d_buf.get(), s.d_buf.size(), MemoryType::kDevice, &why);
    } else {
      st = ep->register_memory(s.h_buf.get(), s.h_buf.size(), MemoryType::kHost, &why);
    }
    if (st != SZ_OK) {
      cleanup(false);
      return fail(error, st, std::string("registering the message buffers with ") + transport.name() + ": " + why);
    }
  }
  std::vector<int> slot_of_seq(nslots, -1);  // ring: seq % nslots -> slot, for seqs assigned and not yet sent
  const std::vector<uint64_t>& first_seq = plan.first_seq;

  Encoder encoder{tensors, plan.codebooks, slots, gpu_workers};
  encoder.use_gpu = use_gpu;
  encoder.direct = direct;
  encoder.cuda_device = cuda_device;
  encoder.params.threads = 1;
  encoder.params.chunk_log2 = opt.frame_chunk_log2;
  encoder.params.flags = SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH;  // the receiver verifies every chunk
  AdaptiveChoice choice(threads, opt.window);
  if (opt.adaptive) {
    encoder.adaptive = &choice;
    encoder.force_raw = opt.faults.send_raw;
  }
  pool.reset(new CodecPool(threads, encoder, [ep] { ep->wake(); }));

  uint64_t next_job = 0;   // next seq to hand to a codec thread
  uint64_t next_send = 0;  // next seq to hand to the transport
  uint32_t job_tensor = 0;
  // The emulated link: message next_send, once it could go (encoded, within the window), occupies it from
  // max(link_free, that moment) for its size / rate, and goes to the transport at the end of that (head_due). Times
  // come from link_free rather than from when this thread woke up, so waking up late (timer slack, a busy machine)
  // delays one message, not the rate.
  const double rate = opt.rate_bytes_per_s;
  double link_free = 0;
  uint64_t head_seq = UINT64_MAX;  // the message whose link time is set
  double head_due = 0;
  double last_activity = now_s();
  const double t_data = now_s();
  bool stalled = false;
  // Adaptive sends: the link's rate for the choice (session/adaptive.h) where no rate is given: the bytes of
  // completed sends over the time at least one send was in flight.
  size_t in_flight = 0;
  double busy_since = 0, busy_s = 0, sent_bytes = 0;
  auto link_rate = [&]() -> double {
    if (rate > 0) return rate;
    const double busy = busy_s + (in_flight > 0 ? now_s() - busy_since : 0);
    return sent_bytes > 0 && busy > 0 ? sent_bytes / busy : 0;
  };

  for (;;) {
    bool active = ep->progress();
    {
      const bool had_result = answers.got_result;
      const uint64_t had_consumed = answers.consumed;
      st = answers.take(error);
      if (st != SZ_OK) {
        cleanup(false);
        return st;
      }
      if (answers.got_result != had_result || answers.consumed != had_consumed) active = true;
      const proto::CreditLoad l = answers.take_load();
      if (opt.adaptive) choice.received(l.frame_bytes, l.frame_ns * 1e-9, l.raw_bytes, l.raw_ns * 1e-9);
    }
    const uint64_t consumed = answers.consumed;
    if (!answers.got_result && (ep->failed(nullptr) || answers.closed)) return peer_failed("");
    if (consumed > next_send) {
      cleanup(false);
      return fail(error, SZ_ERROR_CORRUPT, "the receiver sent an impossible credit");
    }
    if (answers.got_result) {
      if (answers.result_status != SZ_OK) {
        cleanup(false);
        return fail(error, peer_status(answers.result_status), "the receiver failed: " + answers.result_text);
      }
      if (consumed != total || next_send != total) {
        cleanup(false);
        return fail(error, SZ_ERROR_CORRUPT, "the receiver reported success before receiving everything");
      }
      break;
    }
    // completed sends free their slots
    for (size_t i = 0; i < nslots; ++i) {
      Slot& s = slots[i];
      if (s.state != Slot::kSending) continue;
      std::string why;
      const Completion c = ep->test(i, nullptr, &why);
      if (c == Completion::kPending) continue;
      if (c != Completion::kOk) return peer_failed("send failed: " + why);
      s.state = Slot::kFree;
      active = true;
      sent_bytes += (double)(proto::kHeaderSize + s.payload_size);
      if (--in_flight == 0) busy_s += now_s() - busy_since;
    }
    // finished encodes
    int done_slot;
    while (pool->pop_done(&done_slot)) {
      Slot& s = slots[(size_t)done_slot];
      if (s.status != SZ_OK) {
        cleanup(false);
        return fail(error, s.status,
                    s.why.empty() ? std::string("compression failed: ") + sz_status_name(s.status) : s.why);
      }
      s.state = Slot::kReady;
      active = true;
    }
    if (opt.adaptive) choice.set_link_rate(link_rate());
    // The messages whose tensors hold their data (all of them without a gate).
    uint64_t ready_seq = total;
    if (gate != nullptr) {
      std::lock_guard<std::mutex> lock(gate->mu);
      if (gate->failed) {
        const std::string why = gate->why;
        cleanup(false);
        return fail(error, SZ_ERROR_IO, "the producer failed: " + why);
      }
      ready_seq = first_seq[gate->prefix];
    }
    // hand new jobs to free slots
    for (size_t i = 0; i < nslots && next_job < ready_seq && next_job < next_send + nslots; ++i) {
      Slot& s = slots[i];
      if (s.state != Slot::kFree) continue;
      while (first_seq[job_tensor + 1] <= next_job) ++job_tensor;
      const Tensor& t = tensors[job_tensor];
      const size_t w = sz_dtype_size(t.dtype);
      const uint64_t c = next_job - first_seq[job_tensor];
      const uint64_t n_total = t.size / w;
      const uint64_t begin = c * opt.chunk_values;
      s.job.tensor = job_tensor;
      s.job.chunk = c;
      s.job.n_values = std::min<uint64_t>(opt.chunk_values, n_total - begin);
      s.job.src = static_cast<const uint8_t*>(t.data) + begin * w;
      s.job.bytes = (size_t)(s.job.n_values * w);
      s.job.raw = raw;  // adaptive: chosen by the codec thread that encodes it
      s.seq = next_job;
      s.state = Slot::kEncoding;
      slot_of_seq[next_job % nslots] = (int)i;
      pool->submit((int)i);
      ++next_job;
      active = true;
    }
    // send in order, within the window and the emulated link
    double wait_s = 0.05;
    bool throttled = next_job < total && next_job >= ready_seq;  // waiting for the producer: not a stalled peer
    while (!stalled && next_send < next_job && next_send < consumed + opt.window) {
      const int si = slot_of_seq[next_send % nslots];
      Slot& s = slots[(size_t)si];
      if (s.state != Slot::kReady) break;
      const size_t msg = proto::kHeaderSize + s.payload_size;
      if (rate > 0) {
        const double t = now_s();
        if (head_seq != next_send) {
          head_seq = next_send;
          head_due = std::max(link_free, t) + (double)msg / rate;
          link_free = head_due;
        }
        if (t < head_due) {
          wait_s = std::min(wait_s, head_due - t);
          throttled = true;
          break;
        }
      }
      if (opt.faults.tamper) {
        if (!s.msg_device) {
          opt.faults.tamper(s.seq, s.msg + proto::kHeaderSize, s.payload_size);
        } else {  // a test hook: through the host and back
          std::vector<uint8_t> tmp(s.payload_size);
          std::string why;
          if (gpu::copy(tmp.data(), s.payload, s.payload_size, &why) == SZ_OK) {
            opt.faults.tamper(s.seq, tmp.data(), tmp.size());
            gpu::copy(s.msg + proto::kHeaderSize, tmp.data(), tmp.size(), &why);
          }
        }
      }
      std::string why;
      if (ep->post_send((size_t)si, data_tag, s.msg, msg, s.msg_device ? MemoryType::kDevice : MemoryType::kHost,
                        &why) != SZ_OK)
        return peer_failed(ep->failed(nullptr) ? std::string() : "send failed: " + why);
      s.state = Slot::kSending;
      if (in_flight++ == 0) busy_since = now_s();
      if (s.job.raw) ++stats.raw_messages;
      stats.payload_bytes += s.payload_size;
      stats.wire_bytes += msg;
      ++stats.messages;
      ++next_send;
      active = true;
      if (opt.faults.die_after_chunks != 0 && next_send == opt.faults.die_after_chunks && opt.faults.die) {
        ep->progress();
        opt.faults.die();
      }
      if (opt.faults.stall_after_chunks != 0 && next_send == opt.faults.stall_after_chunks) stalled = true;
    }
    const double t = now_s();
    for (const auto& s : slots) {
      if (s.state == Slot::kEncoding) throttled = true;  // our own codec is busy: not a stalled peer
    }
    if (active || throttled) last_activity = t;
    if (active) continue;
    if (t - last_activity > opt.timeout_s) {
      cleanup(false);
      return fail(error, SZ_ERROR_IO,
                  "transfer stalled: nothing happened for " + std::to_string(opt.timeout_s) + " s (sent " +
                      std::to_string(next_send) + " of " + std::to_string(total) + " messages, " +
                      std::to_string(consumed) + " confirmed)");
    }
    // Device memory, where the transport does not signal its completions: poll at 1 ms at most.
    ep->wait(direct && !ep->device_completions_signalled() ? std::min(wait_s, 0.001) : wait_s);
  }
  stats.seconds = now_s() - t_data;
  pool->stop();
  stats.codec_seconds = pool->cpu_seconds();
  cleanup(true);
  if (stats_out != nullptr) *stats_out = stats;
  return SZ_OK;
}

}  // namespace transfer
}  // namespace splitzip
