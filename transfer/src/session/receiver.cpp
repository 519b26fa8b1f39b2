// receiver.cpp — the receiving side of transfer/PROTOCOL.md.
//
// The server listens on one TCP socket (the control connection, PROTOCOL.md §1). Each accepted connection gets a
// thread that reads the HELLO with the bounded reader of wire/protocol.h, admits it (session.h) and checks the
// session and memory limits; only then does the session open its own data endpoint (transport/transport.h: a UCX
// worker), restricted to the interface the connection arrived on, and answer with its address. So no transport code
// sees a byte from a peer that was not accepted, and idle, the server has no socket but its listener.
//
// In a session (run_session), the session's thread keeps `window` receives posted, one per slot (slot i is request
// i of the endpoint), and answers on the control connection (SenderLink: HELLO_ACK, CREDIT, RESULT). A completed
// receive is checked (header, then sequence, tensor, chunk and sizes by the ChunkTracker) and handed to a codec
// thread (Decoder), which verifies the payload (the frame's checksums, or the XXH3 of a raw message: every message of
// a raw session, those of a compressed session that carry the flag), decodes it and writes it at its offset in the
// tensor's temporary file (created at the tensor's first chunk with its final size and its blocks allocated, see
// preallocate()), or, with ServeOptions::destination, decodes it straight into the caller's memory (Outputs). When
// every chunk of a tensor verified, the file gets its name (linked, so that nothing is replaced, unless overwrite is
// set); on any failure temporary files are removed. The caller's destinations are released when the session ends,
// after the codec threads stopped. Every size the peer announces is checked against the ServeOptions limits
// (admit()) before anything is allocated.
//
// With ServeOptions::gpu the slots are device buffers that the transport receives into (direct, where
// Endpoint::device_memory()) or pinned host buffers (staged), and a codec thread decodes each message on its own CUDA
// stream (sz_cuda_decompress, status read back and checked) into the tensor's device destination; raw messages are
// hashed on the host (a staged message where it lies, a direct one after a copy) before they are copied in place.
// A tensor that goes to out_dir is copied back and written once all its chunks verified.
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include "gpu.h"
#include "transport/net.h"
#include "session/pool.h"
#include "wire/protocol.h"
#include "session/session.h"
#include "splitzip/transfer.hpp"
#include "transport/transport.h"

namespace splitzip {
namespace transfer {

namespace {

using net::now_s;

sz_status fail(std::string* error, sz_status st, const std::string& msg) {
  if (error != nullptr) *error = msg;
  return st;
}

// Connections whose handshake is still being read; one more is closed at once.
constexpr size_t kMaxPendingHandshakes = 16;

struct TensorState {
  std::string name;
  sz_dtype dtype = SZ_DTYPE_BF16;
  size_t value_bytes = 0;
  uint64_t size = 0;
  uint64_t n_values = 0;
  uint64_t chunks = 0;
  uint64_t chunks_done = 0;
  sz_codebook codebook{};
  int fd = -1;
  bool direct = false;  // fd writes with direct I/O
  std::string tmp_name;
  bool finished = false;
  uint8_t* dst = nullptr;  // where chunks are decoded to: the caller's destination, or (GPU) device memory
  bool given = false;      // dst came from ServeOptions::destination (and is released at the end)
  gpu::Mem owned;          // GPU receive: dst, when the library allocated it
};

// A host buffer of whole kBufferAlign blocks, starting at a multiple of kBufferAlign.
struct AlignedBuffer {
  std::unique_ptr<uint8_t, decltype(&free)> p{nullptr, &free};
  size_t size = 0;
  bool alloc(uint64_t n) {
    size = (size_t)align_up(std::max<uint64_t>(n, 1));
    p.reset(static_cast<uint8_t*>(aligned_alloc(kBufferAlign, size)));
    return p != nullptr;
  }
  uint8_t* data() const { return p.get(); }
};

struct Slot {
  enum State { kPosted, kDecoding, kIdle } state = kIdle;
  AlignedBuffer buf;         // host receive buffer: [pad | header | payload], the payload at kBufferAlign
  gpu::Mem mem;              // GPU receive: device (direct) or pinned host (staged) receive buffer
  uint8_t* rbuf = nullptr;   // where the transport receives: buf or mem
  size_t cap = 0;
  uint8_t hdr[proto::kHeaderSize] = {};  // a direct message's header, copied to the host
  proto::Header h;
  uint64_t n_values = 0;
  uint32_t tensor = 0;
  sz_status status = SZ_OK;
  std::string why;
  double busy_s = 0;  // the codec thread's time on the message (wall clock), for the sender's adaptive rule
};

// What a codec thread owns for the GPU decoder.
struct GpuWorker {
  gpu::Stream stream;
  gpu::Mem workspace;
  gpu::Mem d_frame;  // staged compressed messages are copied here first
  gpu::Mem h_scratch;  // pinned: a direct raw message for its hash, a direct frame's header
  gpu::Mem d_result;   // int32 status at 0, uint64 size at 8
  gpu::Mem h_result;
};

bool same_codebook(const sz_codebook& a, const sz_codebook& b) {
  return a.dtype == b.dtype && a.code_bits == b.code_bits && a.count == b.count &&
         memcmp(a.values, b.values, sizeof a.values) == 0;
}

// A compressed message's frame header (its first `avail` bytes) against what was announced: the tensor's dtype and
// codebook, n_values values, psize bytes in all, chunk checksums on. SZ_OK, or the reason to refuse it.
sz_status check_frame(const uint8_t* frame, size_t avail, const TensorState& t, uint64_t n_values, size_t psize) {
  sz_frame_info info;
  const sz_status fs = sz_frame_info_get(frame, avail, &info);
  if (fs != SZ_OK) return fs;
  if (info.dtype != (uint8_t)t.dtype || info.n_values != n_values || info.frame_size != psize ||
      !(info.flags & SZ_FLAG_CHECKSUMS) || !same_codebook(info.codebook, t.codebook))
    return SZ_ERROR_CORRUPT;
  return SZ_OK;
}

// Gives a tensor's temporary file its final size, its blocks allocated, before any chunk is written: a file system
// without room for the tensor fails the session before its data arrives, and writing into allocated blocks costs
// the file system less than allocating them write by write. Where fallocate() is not supported, the size only.
bool preallocate(int fd, uint64_t size) {
  if (size == 0) return true;
  for (;;) {
    if (fallocate(fd, 0, 0, (off_t)size) == 0) return true;
    if (errno != EINTR) break;
  }
  if (errno != EOPNOTSUPP && errno != ENOSYS) return false;
  return ftruncate(fd, (off_t)size) == 0;
}

bool write_all(int fd, const uint8_t* p, size_t n, uint64_t off) {
  while (n > 0) {
    const ssize_t w = pwrite(fd, p, n, (off_t)off);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= (size_t)w;
    off += (uint64_t)w;
  }
  return true;
}


// The control connection of an admitted session, on the receiver's side (PROTOCOL.md §1, §3, §4): HELLO_ACK, then
// CREDIT messages and one RESULT go out; nothing may come in but the sender's close.
class SenderLink {
 public:
  SenderLink(int fd, double timeout_s) : fd_(fd), timeout_s_(timeout_s) {}

  // HELLO_ACK (the first answer) or RESULT (any later one), written within min(2 s, the timeout).
  sz_status reply(sz_status status, const std::string& text, const std::vector<uint8_t>& address) {
    const std::vector<uint8_t> msg =
        answered_ ? proto::encode_message(proto::kResult, proto::encode_status((uint32_t)status, text), true)
                  : proto::encode_message(proto::kHelloAck, proto::encode_ack((uint32_t)status, text, address), true);
    answered_ = true;
    std::string ignored;
    return net::write_all(fd_, msg.data(), msg.size(), now_s() + std::min(2.0, timeout_s_), &ignored);
  }
  // CREDIT(consumed) with the codec threads' load since the previous one, written within the timeout.
  sz_status credit(uint64_t consumed, const proto::CreditLoad& load) {
    const std::vector<uint8_t> msg =
        proto::encode_message(proto::kCredit, proto::encode_credit_load(load), true, consumed);
    std::string ignored;
    return net::write_all(fd_, msg.data(), msg.size(), now_s() + timeout_s_, &ignored);
  }
  // True when the sender hung up or the connection failed; *extra is set when it sent bytes instead.
  bool closed(bool* extra) const { return net::peer_closed(fd_, extra); }
  // Half-closes the connection and waits (at most `seconds`) for the sender to hang up, progressing the data
  // endpoint `ep` (when open) meanwhile: the sender's endpoint close needs this side's to answer.
  void linger(double seconds, Endpoint* ep) {
    shutdown(fd_, SHUT_WR);
    const double deadline = now_s() + seconds;
    while (now_s() < deadline) {
      if (ep != nullptr) ep->progress();
      bool extra = false;
      if (net::peer_closed(fd_, &extra) || extra) break;
      if (ep != nullptr) {
        ep->wait(0.01);
      } else {
        pollfd p = {fd_, POLLIN, 0};
        poll(&p, 1, 10);
      }
    }
  }

 private:
  int fd_;
  double timeout_s_;
  bool answered_ = false;  // HELLO_ACK sent: later answers are RESULTs
};

// A session's buffers, every size checked by admit(): the receive slots (host: [pad | header | payload] with the
// payload at kBufferAlign; a GPU receive: device memory when direct, else pinned host memory), the codec threads'
// decode scratch, and for a GPU receive a stream, a workspace and staging buffers per codec thread. SZ_OK, or the
// status and *why.
sz_status allocate(const Plan& plan, const ServeOptions& opt, bool direct, int cuda_device, std::vector<Slot>* slots,
                   std::vector<AlignedBuffer>* scratch, std::vector<GpuWorker>* gpu_workers, std::string* why) {
  const bool raw = plan.raw;
  const uint64_t chunk_cap = plan.chunk_cap;
  const size_t max_w = plan.max_value_bytes;
  const uint64_t max_payload = plan.max_payload;
  slots->resize(plan.n_slots);
  scratch->resize(opt.threads);
  if (!opt.gpu) {
    for (auto& sl : *slots) {
      if (!sl.buf.alloc(kBufferAlign + max_payload)) return fail(why, SZ_ERROR_IO, "out of memory for receive slots");
      sl.rbuf = sl.buf.data() + kBufferAlign - proto::kHeaderSize;
      sl.cap = (size_t)(proto::kHeaderSize + max_payload);
    }
    if (!raw && !opt.destination)  // with a destination, frames decode in place
      for (auto& b : *scratch)
        if (!b.alloc(chunk_cap * max_w)) return fail(why, SZ_ERROR_IO, "out of memory for decode buffers");
    return SZ_OK;
  }
  std::string w;
  sz_status st = gpu::set_device(cuda_device, &w);
  for (auto& sl : *slots) {
    if (st == SZ_OK)
      st = sl.mem.alloc(direct ? gpu::Mem::kDevice : gpu::Mem::kPinned, (size_t)(proto::kHeaderSize + max_payload),
                        &w);
    sl.rbuf = sl.mem.get();
    sl.cap = (size_t)(proto::kHeaderSize + max_payload);
  }
  size_t ws = 0;
  if (st == SZ_OK && !raw) {
    st = sz_cuda_decompress_workspace_size((size_t)max_payload, (size_t)(chunk_cap * max_w), &ws);
    if (st != SZ_OK) w = std::string("workspace size: ") + sz_status_name(st);
  }
  gpu_workers->resize(opt.threads);
  for (auto& g : *gpu_workers) {
    if (st == SZ_OK) st = g.stream.create(&w);
    if (st == SZ_OK && ws > 0) st = g.workspace.alloc(gpu::Mem::kDevice, ws, &w);
    if (st == SZ_OK && !raw && !direct) st = g.d_frame.alloc(gpu::Mem::kDevice, (size_t)max_payload, &w);
    // Any message may be raw, and a direct raw message is hashed from here.
    if (st == SZ_OK && direct) st = g.h_scratch.alloc(gpu::Mem::kPinned, (size_t)max_payload, &w);
    if (st == SZ_OK) st = g.d_result.alloc(gpu::Mem::kDevice, 16, &w);
    if (st == SZ_OK) st = g.h_result.alloc(gpu::Mem::kPinned, 16, &w);
  }
  if (st != SZ_OK) return fail(why, st, "GPU receive buffers: " + w);
  return SZ_OK;
}

// The codec threads' job: verifies the message in slots[si] (the frame's checksums, or the XXH3 of a raw payload)
// and decodes it into its tensor's destination at its offset, or into the thread's scratch buffer and the tensor's
// file; a GPU receive on codec thread `worker`'s stream (sz_cuda_decompress). Leaves an error in sl.status, sl.why.
struct Decoder {
  std::vector<TensorState>& ts;
  std::vector<Slot>& slots;
  std::vector<AlignedBuffer>& scratch;
  std::vector<GpuWorker>& gpu_workers;
  uint64_t chunk_values = 0;
  bool use_gpu = false;
  bool direct = false;  // GPU receive: the slots are device memory
  int cuda_device = 0;

  void operator()(unsigned worker, int si) {
    const double t0 = now_s();
    verify(worker, si);
    slots[(size_t)si].busy_s = now_s() - t0;
  }

  void verify(unsigned worker, int si) {
    Slot& sl = slots[(size_t)si];
    TensorState& t = ts[sl.tensor];
    if (use_gpu) {
      sl.status = SZ_OK;
      gpu(worker, sl);
      return;
    }
    const uint8_t* payload = sl.rbuf + proto::kHeaderSize;
    const size_t psize = (size_t)sl.h.payload_size;
    const size_t bytes = (size_t)(sl.n_values * t.value_bytes);
    const uint8_t* out = payload;
    // With a destination, straight into the caller's memory at the chunk's offset; else into scratch for the file.
    uint8_t* const dst = t.dst != nullptr ? t.dst + sl.h.chunk * chunk_values * t.value_bytes : nullptr;
    sl.status = SZ_OK;
    // A raw message (the flag; every message of a raw session, some of a compressed one), its size checked by the
    // ChunkTracker to be exactly the values' bytes.
    if (sl.h.flags & proto::kFlagPayloadHash) {
      if (proto::h32(payload, psize) != sl.h.payload_hash) {
        sl.status = SZ_ERROR_CHECKSUM;
        sl.why = "chunk " + std::to_string(sl.h.chunk) + " of " + t.name + " failed its XXH3 check";
        return;
      }
      if (dst != nullptr) memcpy(dst, payload, bytes);
    } else {
      sz_status fs = check_frame(payload, psize, t, sl.n_values, psize);
      size_t written = 0;
      if (fs == SZ_OK && dst != nullptr) {
        fs = sz_decompress(payload, psize, dst, bytes, &written, 1);
      } else if (fs == SZ_OK) {
        fs = sz_decompress(payload, psize, scratch[worker].data(), scratch[worker].size, &written, 1);
      }
      if (fs == SZ_OK && written != bytes) fs = SZ_ERROR_CORRUPT;
      if (fs != SZ_OK) {
        sl.status = fs;
        sl.why = "chunk " + std::to_string(sl.h.chunk) + " of " + t.name + " failed verification: " +
                 sz_status_name(fs);
        return;
      }
      out = scratch[worker].data();
    }
    // Direct I/O writes whole blocks: a tensor's short last chunk is rounded up (into the buffer's slack) and the
    // bytes past the tensor's end are cut off when it is finished.
    const size_t n = t.direct ? (size_t)align_up(bytes) : bytes;
    if (t.fd >= 0 && !write_all(t.fd, out, n, sl.h.chunk * chunk_values * t.value_bytes)) {
      sl.status = SZ_ERROR_IO;
      sl.why = "cannot write " + t.name + ": " + strerror(errno);
    }
  }

  // One message on codec thread `worker`'s stream, into the tensor's device destination.
  void gpu(unsigned worker, Slot& sl) {
    TensorState& t = ts[sl.tensor];
    GpuWorker& g = gpu_workers[worker];
    const sz_cuda_stream stream = g.stream.get();
    const uint8_t* payload = sl.rbuf + proto::kHeaderSize;  // device memory when direct, else pinned host
    const size_t psize = (size_t)sl.h.payload_size;
    const size_t bytes = (size_t)(sl.n_values * t.value_bytes);
    uint8_t* const dst = t.dst + sl.h.chunk * chunk_values * t.value_bytes;
    std::string why;
    sz_status e = gpu::set_device(cuda_device, &why);
    const std::string where = "chunk " + std::to_string(sl.h.chunk) + " of " + t.name;
    if (sl.h.flags & proto::kFlagPayloadHash) {  // raw, as on the host
      const uint8_t* host = payload;
      if (e == SZ_OK && direct) {
        e = gpu::copy_async(g.h_scratch.get(), payload, psize, stream, &why);
        if (e == SZ_OK) e = gpu::sync(stream, &why);
        host = g.h_scratch.get();
      }
      if (e == SZ_OK && proto::h32(host, psize) != sl.h.payload_hash) {
        sl.status = SZ_ERROR_CHECKSUM;
        sl.why = where + " failed its XXH3 check";
        return;
      }
      if (e == SZ_OK) e = gpu::copy_async(dst, payload, bytes, stream, &why);
      if (e == SZ_OK) e = gpu::sync(stream, &why);
    } else {
      const size_t head = std::min(psize, (size_t)SZ_FRAME_HEADER_SIZE);
      const uint8_t* frame_header = payload;
      if (e == SZ_OK && direct) {
        e = gpu::copy_async(g.h_scratch.get(), payload, head, stream, &why);
        if (e == SZ_OK) e = gpu::sync(stream, &why);
        frame_header = g.h_scratch.get();
      }
      if (e == SZ_OK) {
        const sz_status fs = check_frame(frame_header, head, t, sl.n_values, psize);
        if (fs != SZ_OK) {
          sl.status = fs;
          sl.why = where + " failed verification: " + sz_status_name(fs);
          return;
        }
      }
      const uint8_t* src = payload;
      if (e == SZ_OK && !direct) {
        e = gpu::copy_async(g.d_frame.get(), payload, psize, stream, &why);
        src = g.d_frame.get();
      }
      int32_t* const d_status = reinterpret_cast<int32_t*>(g.d_result.get());
      uint64_t* const d_size = reinterpret_cast<uint64_t*>(g.d_result.get() + 8);
      if (e == SZ_OK) {
        e = sz_cuda_decompress(src, psize, dst, bytes, g.workspace.get(), g.workspace.size(), d_status, d_size,
                               stream);
        if (e != SZ_OK) why = std::string("sz_cuda_decompress: ") + sz_status_name(e);
      }
      if (e == SZ_OK) e = gpu::copy_async(g.h_result.get(), g.d_result.get(), 16, stream, &why);
      if (e == SZ_OK) e = gpu::sync(stream, &why);
      if (e == SZ_OK) {
        int32_t ds;
        uint64_t dn;
        memcpy(&ds, g.h_result.get(), sizeof ds);
        memcpy(&dn, g.h_result.get() + 8, sizeof dn);
        if (ds == SZ_OK && dn != bytes) ds = SZ_ERROR_CORRUPT;
        if (ds != SZ_OK) {
          sl.status = (ds > 0 && ds <= SZ_ERROR_INTERNAL) ? (sz_status)ds : SZ_ERROR_CORRUPT;
          sl.why = where + " failed verification on the GPU: " + sz_status_name(sl.status);
          return;
        }
      }
    }
    if (e != SZ_OK) {
      sl.status = e;
      sl.why = where + ": " + why;
    }
  }
};

// Where a session's tensors go: the caller's destinations (ServeOptions::destination), device memory the session
// allocates (a GPU receive), and temporary files in the output directory that get their names once complete.
struct Outputs {
  const ServeOptions& opt;
  int dir_fd = -1;
  bool files = false;  // tensors go to out_dir
  bool use_gpu = false;
  uint64_t chunk_values = 0;
  std::vector<ReceivedTensor>* done = nullptr;  // finished tensors are reported here

  // Before a chunk of t is decoded (does its work at the tensor's first chunk): t's destination, and its temporary
  // file, created at the tensor's size with its blocks allocated. SZ_OK, or the status and *why.
  sz_status open(TensorState& t, std::string* why) {
    if (t.dst == nullptr && opt.destination) {
      t.dst = static_cast<uint8_t*>(opt.destination(t.name, t.dtype, t.size));
      if (t.dst == nullptr) return fail(why, SZ_ERROR_IO, "no destination for " + t.name);
      t.given = true;
    } else if (t.dst == nullptr && use_gpu) {
      std::string w;
      const sz_status as = t.owned.alloc(gpu::Mem::kDevice, (size_t)t.size, &w);
      if (as != SZ_OK) return fail(why, as, "device memory for " + t.name + ": " + w);
      t.dst = t.owned.get();
    }
    if (files && t.fd < 0) {
      t.fd = openat(dir_fd, t.tmp_name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
      if (t.fd < 0) return fail(why, SZ_ERROR_IO, "cannot create a file for " + t.name + ": " + strerror(errno));
      if (!preallocate(t.fd, t.size))
        return fail(why, SZ_ERROR_IO, "cannot reserve " + std::to_string(t.size) + " bytes for " + t.name +
                                          " in the output directory: " + strerror(errno));
      if (opt.direct_io && !use_gpu && (chunk_values * t.value_bytes) % kBufferAlign == 0) {
        const int fl = fcntl(t.fd, F_GETFL);  // a file system without direct I/O refuses it: buffered writes then
        t.direct = fl >= 0 && fcntl(t.fd, F_SETFL, fl | O_DIRECT) == 0;
      }
    }
    return SZ_OK;
  }

  // A GPU-received tensor that goes to a file: device -> host in pieces, written at its offsets.
  bool write_from_device(TensorState& t) {
    if (t.dst == nullptr || t.size == 0) return true;
    std::vector<uint8_t> piece((size_t)std::min<uint64_t>(t.size, (uint64_t)64 << 20));
    std::string why;
    for (uint64_t off = 0; off < t.size; off += piece.size()) {
      const size_t n = (size_t)std::min<uint64_t>(piece.size(), t.size - off);
      if (gpu::copy(piece.data(), t.dst + off, n, &why) != SZ_OK) {
        errno = EIO;
        return false;
      }
      if (!write_all(t.fd, piece.data(), n, off)) return false;
    }
    return true;
  }

  // Once every chunk of t verified and was written: its file gets its name (linked, so that nothing is replaced,
  // unless overwrite is set) and the tensor is reported. False (errno set) when that failed.
  bool finish(TensorState& t) {
    if (files && use_gpu && t.fd >= 0 && !write_from_device(t)) return false;
    if (files) {
      if (t.fd < 0) {  // an empty tensor
        t.fd = openat(dir_fd, t.tmp_name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (t.fd < 0) return false;
      }
      const int tfd = t.fd;
      t.fd = -1;
      struct stat stt;
      bool ok = fstat(tfd, &stt) == 0;
      if (ok && (uint64_t)stt.st_size != t.size) ok = ftruncate(tfd, (off_t)t.size) == 0;
      ok = (::close(tfd) == 0) && ok;
      if (ok && opt.overwrite) {
        ok = renameat(dir_fd, t.tmp_name.c_str(), dir_fd, t.name.c_str()) == 0;
      } else if (ok) {  // link fails if a file of that name appeared since the handshake: nothing is replaced
        ok = linkat(dir_fd, t.tmp_name.c_str(), dir_fd, t.name.c_str(), 0) == 0;
        unlinkat(dir_fd, t.tmp_name.c_str(), 0);
      }
      if (!ok) {
        unlinkat(dir_fd, t.tmp_name.c_str(), 0);
        return false;
      }
    }
    t.finished = true;
    ReceivedTensor r;
    r.name = t.name;
    r.dtype = t.dtype;
    r.size = t.size;
    if (files) r.path = opt.out_dir + "/" + t.name;
    r.direct_io = t.direct;
    if (t.given) r.data = t.dst;
    t.owned.reset();
    done->push_back(r);
    return true;
  }

  // The session ends: removes every temporary file (linked, complete tensors stay) and releases the caller's
  // destinations. The codec threads must have stopped, so that nothing writes to a destination once released.
  void close(std::vector<TensorState>& ts) {
    for (auto& t : ts) {
      if (t.fd >= 0) {
        ::close(t.fd);
        t.fd = -1;
        unlinkat(dir_fd, t.tmp_name.c_str(), 0);
      }
      if (t.given && opt.release) opt.release(t.name, t.dst, t.finished);
      t.given = false;
    }
  }
};

}  // namespace

struct Server::Impl {
  ServeOptions opt;
  Limits limits;
  int listen_fd = -1;
  uint16_t port = 0;
  int dir_fd = -1;
  int notify_fd = -1;  // eventfd: a connection ended, or stop()
  bool open = false;
  int cuda_device = 0;
  std::atomic<bool> stopping{false};

  struct Conn {
    int fd = -1;  // owned by the connection's thread; -1 once closed (under mu)
    std::thread thread;
    bool done = false;
    bool admitted = false;
    SessionOutcome outcome;
  };
  std::mutex mu;  // guards what follows
  std::list<std::unique_ptr<Conn>> conns;
  std::list<SessionOutcome> outcomes;  // ended, not yet reported
  uint32_t sessions = 0;               // admitted and running
  uint64_t bytes = 0;                  // their buffers
  uint64_t serial = 0;                 // numbers the sessions (temporary file names)

  ~Impl() {
    stopping = true;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (auto& c : conns)
        if (c->fd >= 0) shutdown(c->fd, SHUT_RDWR);
    }
    for (auto& c : conns)
      if (c->thread.joinable()) c->thread.join();
    if (listen_fd >= 0) ::close(listen_fd);
    if (notify_fd >= 0) ::close(notify_fd);
    if (dir_fd >= 0) ::close(dir_fd);
  }
  void notify() {
    if (notify_fd < 0) return;
    const uint64_t one = 1;
    ssize_t r = write(notify_fd, &one, sizeof one);
    (void)r;
  }
  void close_conn(Conn& c) {
    std::lock_guard<std::mutex> lock(mu);
    if (c.fd >= 0) ::close(c.fd);
    c.fd = -1;
  }
  void handle(Conn& c);
  // The session of an admitted peer on control connection fd; hello_bytes: the size of its HELLO message.
  sz_status run_session(int fd, const Plan& plan, uint64_t serial, uint64_t hello_bytes, SessionStats* stats,
                        std::string* error);
  // Joins ended connections, accepts new ones; waits at most max_wait_s for something to happen.
  void pump(double max_wait_s);
};

Server::Server() : impl_(new Impl) {}
Server::~Server() { close(); }

uint16_t Server::port() const { return impl_->port; }

void Server::close() { impl_.reset(new Impl); }

void Server::stop() {
  impl_->stopping = true;
  impl_->notify();
}

sz_status Server::open(const ServeOptions& options, std::string* error) {
  std::string dummy;
  if (error == nullptr) error = &dummy;
  if (impl_->open) return fail(error, SZ_ERROR_INVALID_ARGUMENT, "server already open");
  Impl& s = *impl_;
  s.opt = options;
  if (s.opt.threads == 0) s.opt.threads = std::max(1u, std::thread::hardware_concurrency());
  if (s.opt.threads > 256) return fail(error, SZ_ERROR_INVALID_ARGUMENT, "threads must be at most 256");
  if (!(s.opt.timeout_s > 0)) return fail(error, SZ_ERROR_INVALID_ARGUMENT, "timeout must be positive");
  if (!(s.opt.handshake_timeout_s > 0))
    return fail(error, SZ_ERROR_INVALID_ARGUMENT, "handshake timeout must be positive");
  if (!(s.opt.max_session_seconds >= 0))
    return fail(error, SZ_ERROR_INVALID_ARGUMENT, "session time limit must not be negative");
  if (s.opt.max_sessions < 1 || s.opt.max_sessions > 1024)
    return fail(error, SZ_ERROR_INVALID_ARGUMENT, "max sessions must be 1..1024");
  if (s.opt.max_window < 1 || s.opt.max_window > 1024)
    return fail(error, SZ_ERROR_INVALID_ARGUMENT, "max window must be 1..1024");
  if (s.opt.token.size() > proto::kMaxToken) return fail(error, SZ_ERROR_INVALID_ARGUMENT, "token longer than 256 bytes");
  s.limits.token = s.opt.token;
  s.limits.max_tensor_bytes = s.opt.max_tensor_bytes;
  s.limits.max_total_bytes = s.opt.max_total_bytes;
  s.limits.max_message_bytes = s.opt.max_message_bytes;
  s.limits.max_session_bytes = std::min(s.opt.max_session_bytes, s.opt.max_server_bytes);
  s.limits.max_window = s.opt.max_window;
  s.limits.threads = s.opt.threads;
  if (s.opt.gpu) {
    std::string why;
    if (!gpu::available(&why)) return fail(error, SZ_ERROR_NOT_SUPPORTED, "GPU receive: " + why);
    s.cuda_device = gpu::current_device();
  }
  if (!s.opt.discard && !s.opt.destination) {
    if (s.opt.out_dir.empty()) return fail(error, SZ_ERROR_INVALID_ARGUMENT, "an output directory or discard is needed");
    s.dir_fd = ::open(s.opt.out_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s.dir_fd < 0)
      return fail(error, SZ_ERROR_IO, "cannot open output directory " + s.opt.out_dir + ": " + strerror(errno));
  }
  if (s.opt.gpu && s.opt.gpu_path == GpuPath::kDirect) {
    // Whether the transport can take device memory is a property of its build: ask now (without opening any socket),
    // so that the error comes at open() and not with the first peer.
    const Transport& transport = session_transport();
    if (!transport.device_memory_supported())
      return fail(error, SZ_ERROR_NOT_SUPPORTED, std::string("this ") + transport.name() +
                                                     " build does not report CUDA memory support (GpuPath::kDirect)");
  }
  s.notify_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s.notify_fd < 0) return fail(error, SZ_ERROR_IO, std::string("eventfd: ") + strerror(errno));
  sz_status st = net::listen_tcp(s.opt.address, s.opt.port, &s.listen_fd, &s.port, error);
  if (st != SZ_OK) return st;
  s.open = true;
  return SZ_OK;
}

void Server::Impl::handle(Conn& c) {
  SessionOutcome o;
  o.peer = net::peer_name(c.fd);
  const int fd = c.fd;
  auto refuse = [&](sz_status code, const std::string& msg, bool answer) {
    if (answer) {
      const std::vector<uint8_t> ack =
          proto::encode_message(proto::kHelloAck, proto::encode_ack((uint32_t)code, msg, {}), true);
      std::string ignored;
      net::write_all(fd, ack.data(), ack.size(), now_s() + 1.0, &ignored);
    }
    net::linger(fd, 0.5);  // so that the peer reads the answer rather than a reset
    o.status = code;
    o.error = "refused a peer (" + o.peer + "): " + msg;
  };
  [&] {
    proto::MessageReader reader(proto::type_bit(proto::kHello));
    std::string why;
    sz_status st = net::read_message(fd, &reader, now_s() + opt.handshake_timeout_s, &stopping, &why);
    if (st == SZ_ERROR_IO) return refuse(SZ_ERROR_IO, "no complete handshake: " + why, false);
    if (st != SZ_OK) return refuse(st, "malformed handshake: " + why, true);
    proto::Hello hello;
    st = proto::decode_hello(reader.payload().data(), reader.payload().size(), opt.max_tensors, &hello, &why);
    if (st != SZ_OK) return refuse(st, why, true);
    const uint64_t hello_bytes = proto::kHeaderSize + reader.payload().size();
    reader.reset();  // frees the payload: the session keeps only what admit() derives from it
    Plan plan;
    st = admit(limits, hello, &plan, &why);
    if (st != SZ_OK) return refuse(st, why, true);
    const bool files = !opt.discard && !opt.destination;
    if (files && !opt.overwrite) {
      for (const PlannedTensor& t : plan.tensors) {
        struct stat st_existing;
        if (fstatat(dir_fd, t.name.c_str(), &st_existing, AT_SYMLINK_NOFOLLOW) == 0)
          return refuse(SZ_ERROR_INVALID_ARGUMENT,
                        "tensor " + t.name + ": a file of that name exists in the output directory (the receiver does "
                        "not overwrite without being told to)", true);
      }
    }
    uint64_t number = 0;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (sessions >= opt.max_sessions)
        return refuse(SZ_ERROR_IO, "busy: " + std::to_string(sessions) + " sessions running, the limit is " +
                                       std::to_string(opt.max_sessions) + "; try again later", true);
      if (bytes + plan.buffer_bytes > opt.max_server_bytes)
        return refuse(SZ_ERROR_IO, "busy: the session needs " + std::to_string(plan.buffer_bytes) +
                                       " bytes of buffers and the running sessions hold " + std::to_string(bytes) +
                                       " of the server's " + std::to_string(opt.max_server_bytes) +
                                       "; try again later",
                    true);
      ++sessions;
      bytes += plan.buffer_bytes;
      number = ++serial;
      c.admitted = true;
    }
    o.accepted = true;
    o.status = run_session(fd, plan, number, hello_bytes, &o.stats, &o.error);
    {
      std::lock_guard<std::mutex> lock(mu);
      --sessions;
      bytes -= plan.buffer_bytes;
    }
  }();
  close_conn(c);
  {
    std::lock_guard<std::mutex> lock(mu);
    c.outcome = std::move(o);
    c.done = true;
  }
  notify();
}

void Server::Impl::pump(double max_wait_s) {
  // join the connections that ended
  std::vector<std::unique_ptr<Conn>> ended;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = conns.begin(); it != conns.end();) {
      if ((*it)->done) {
        outcomes.push_back(std::move((*it)->outcome));
        ended.push_back(std::move(*it));
        it = conns.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : ended) c->thread.join();
  if (!outcomes.empty()) return;
  pollfd fds[2] = {{listen_fd, POLLIN, 0}, {notify_fd, POLLIN, 0}};
  poll(fds, 2, (int)(std::max(0.0, max_wait_s) * 1000) + 1);
  uint64_t v;
  while (read(notify_fd, &v, sizeof v) == (ssize_t)sizeof v) {
  }
  if (!(fds[0].revents & POLLIN)) return;
  for (;;) {
    const int fd = net::accept_tcp(listen_fd);
    if (fd < 0) break;
    std::lock_guard<std::mutex> lock(mu);
    size_t pending = 0;
    for (const auto& c : conns) pending += (!c->admitted && !c->done) ? 1 : 0;
    if (pending >= kMaxPendingHandshakes || stopping) {
      ::close(fd);  // too many half-open handshakes: this one gets nothing
      continue;
    }
    conns.emplace_back(new Conn);
    Conn* c = conns.back().get();
    c->fd = fd;
    c->thread = std::thread([this, c] { handle(*c); });
  }
}

sz_status Server::serve_one(SessionStats* stats_out, std::string* error) {
  std::string dummy;
  if (error == nullptr) error = &dummy;
  Impl& S = *impl_;
  if (!S.open) return fail(error, SZ_ERROR_INVALID_ARGUMENT, "server not open");
  double t0 = now_s();
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(S.mu);
      if (!S.outcomes.empty()) {
        SessionOutcome o = std::move(S.outcomes.front());
        S.outcomes.pop_front();
        if (stats_out != nullptr) *stats_out = std::move(o.stats);
        *error = o.error;
        return o.status;
      }
      if (!S.conns.empty()) t0 = now_s();  // a peer is being served: its outcome is what we wait for
    }
    if (S.stopping) return fail(error, SZ_ERROR_IO, "the server was stopped");
    if (S.opt.accept_timeout_s > 0 && now_s() - t0 > S.opt.accept_timeout_s)
      return fail(error, SZ_ERROR_IO, "no peer connected within " + std::to_string(S.opt.accept_timeout_s) + " s");
    S.pump(0.2);
  }
}

sz_status Server::serve(const std::function<void(const SessionOutcome&)>& on_outcome, std::string* error) {
  std::string dummy;
  if (error == nullptr) error = &dummy;
  Impl& S = *impl_;
  if (!S.open) return fail(error, SZ_ERROR_INVALID_ARGUMENT, "server not open");
  for (;;) {
    S.pump(0.2);
    std::list<SessionOutcome> ready;
    bool idle = false;
    {
      std::lock_guard<std::mutex> lock(S.mu);
      ready.swap(S.outcomes);
      idle = S.conns.empty();
    }
    for (const auto& o : ready)
      if (on_outcome) on_outcome(o);
    if (S.stopping && idle && ready.empty()) return SZ_OK;  // every connection ended and was reported
    if (S.stopping) {  // wake the connections still reading a handshake
      std::lock_guard<std::mutex> lock(S.mu);
      for (auto& c : S.conns)
        if (c->fd >= 0 && !c->admitted) shutdown(c->fd, SHUT_RDWR);
    }
  }
}

sz_status Server::Impl::run_session(int fd, const Plan& plan, uint64_t number, uint64_t hello_bytes,
                                    SessionStats* stats_out, std::string* error) {
  Impl& S = *this;
  SessionStats stats;
  const double t_session = now_s();
  std::vector<Slot> slots;  // declared before the endpoint, so that the endpoint goes first
  std::vector<TensorState> ts;
  std::vector<GpuWorker> gpu_workers;
  std::vector<AlignedBuffer> scratch;
  std::unique_ptr<CodecPool> pool;
  const Transport& transport = session_transport();
  std::unique_ptr<Endpoint> endpoint;
  Endpoint* ep = nullptr;  // endpoint, once open
  const bool use_gpu = opt.gpu;
  const bool raw = plan.raw;
  bool direct = false;
  SenderLink link(fd, opt.timeout_s);
  Outputs outputs{opt};
  outputs.dir_fd = S.dir_fd;
  outputs.files = !opt.discard && !opt.destination;
  outputs.use_gpu = use_gpu;
  outputs.chunk_values = plan.chunk_values;
  outputs.done = &stats.tensors;

  // Tears the session down; the codec threads stop first, so that nothing writes to a destination once released.
  auto cleanup = [&]() {
    if (pool) pool->stop();
    outputs.close(ts);
    if (ep != nullptr)
      for (size_t i = 0; i < slots.size(); ++i) ep->cancel(i);
  };
  auto abort_session = [&](sz_status st, const std::string& msg) {
    link.reply(st, msg, {});
    // Linger (bounded) until the sender has read the result and hung up: closing first would reset the connection
    // under a sender that is still sending, and it could lose the result and see only the reset.
    link.linger(std::min(0.5, opt.timeout_s), ep);
    cleanup();
    return fail(error, st, msg);
  };
  auto peer_gone = [&]() {
    cleanup();
    return fail(error, SZ_ERROR_IO, "the sender disconnected");
  };

  // ---- the session's endpoint, restricted to the interface this connection arrived on; a request per slot ----
  {
    EndpointConfig config;
    std::string why;
    if (!net::local_interface(fd, &config.net_device, &why))
      return abort_session(SZ_ERROR_IO, "the network interface of the connection: " + why);
    config.watch_fd = fd;
    config.requests = plan.n_slots;
    std::string uerr;
    if (transport.open(config, &endpoint, &uerr) != SZ_OK) return abort_session(SZ_ERROR_IO, uerr);
    ep = endpoint.get();
  }
  direct = use_gpu && opt.gpu_path != GpuPath::kStaged && ep->device_memory();
  if (use_gpu && opt.gpu_path == GpuPath::kDirect && !direct)
    return abort_session(SZ_ERROR_NOT_SUPPORTED,
                         std::string("this ") + transport.name() + " build does not report CUDA memory support");
  const MemoryType rtype = direct ? MemoryType::kDevice : MemoryType::kHost;  // where the slots receive

  ts.resize(plan.tensors.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    const PlannedTensor& p = plan.tensors[i];
    TensorState& t = ts[i];
    t.name = p.name;
    t.dtype = p.dtype;
    t.value_bytes = p.value_bytes;
    t.size = p.size;
    t.n_values = p.n_values;
    t.chunks = p.chunks;
    t.codebook = p.codebook;
    t.tmp_name = "." + t.name + ".sz-partial-" + std::to_string(getpid()) + "-" + std::to_string(number);
  }
  const uint64_t total = plan.total_messages;
  stats.raw = raw;
  stats.buffer_bytes = plan.buffer_bytes;
  stats.wire_bytes = hello_bytes;  // what arrived: the HELLO, then the chunks
  stats.gpu = use_gpu;
  stats.gpu_direct = direct;

  // ---- allocate (all sizes checked by admit()) ----
  sz_status st = SZ_OK;
  const uint64_t data_tag = proto::tag_of(proto::kChunk, plan.session);
  {
    std::string why;
    st = allocate(plan, opt, direct, S.cuda_device, &slots, &scratch, &gpu_workers, &why);
    if (st != SZ_OK) return abort_session(st, why);
  }
  Decoder decoder{ts, slots, scratch, gpu_workers};
  decoder.chunk_values = plan.chunk_values;
  decoder.use_gpu = use_gpu;
  decoder.direct = direct;
  decoder.cuda_device = S.cuda_device;
  pool.reset(new CodecPool(opt.threads, decoder, [ep] { ep->wake(); }));

  for (auto& t : ts) {
    if (t.chunks == 0 && !outputs.finish(t)) return abort_session(SZ_ERROR_IO, "cannot create " + t.name);
  }

  for (size_t i = 0; i < slots.size(); ++i) {
    std::string why;
    if (ep->register_memory(slots[i].rbuf, slots[i].cap, rtype, &why) != SZ_OK)
      return abort_session(SZ_ERROR_IO, std::string("registering the receive buffers with ") + transport.name() +
                                            ": " + why);
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    if (ep->post_recv(i, data_tag, slots[i].rbuf, slots[i].cap, rtype, nullptr) != SZ_OK)
      return abort_session(SZ_ERROR_IO, "cannot post a receive");
    slots[i].state = Slot::kPosted;
  }
  // Receives are posted: hand the sender this endpoint's address.
  {
    std::vector<uint8_t> address;
    std::string why;
    if (ep->local_address(&address, &why) != SZ_OK) return abort_session(SZ_ERROR_IO, why);
    if (address.empty() || address.size() > proto::kMaxAddress)
      return abort_session(SZ_ERROR_IO, std::string("the ") + transport.name() + " address does not fit the handshake");
    if (link.reply(SZ_OK, "", address) != SZ_OK) return peer_gone();
  }

  // ---- the pipeline ----
  ChunkTracker tracker(plan);
  uint64_t consumed = 0, credited = 0, received = 0;
  double frame_s = 0, raw_s = 0;  // the codec threads' time since the last CREDIT, by kind
  proto::CreditLoad load;
  double last_activity = now_s();
  for (;;) {
    bool active = ep->progress();
    {
      bool extra = false;
      if (link.closed(&extra)) return peer_gone();
      if (extra)
        return abort_session(SZ_ERROR_CORRUPT, "the sender sent bytes on the control connection after its handshake");
    }
    if (S.stopping) return abort_session(SZ_ERROR_IO, "the server is closing");
    // Completed receives: checked (header, then sequence, tensor, chunk and sizes) and handed to a codec thread.
    for (size_t i = 0; i < slots.size(); ++i) {
      Slot& sl = slots[i];
      if (sl.state != Slot::kPosted) continue;
      size_t len = 0;
      std::string failure;
      const Completion c = ep->test(i, &len, &failure);
      if (c == Completion::kPending) continue;
      active = true;
      if (c == Completion::kTruncated)
        return abort_session(SZ_ERROR_CORRUPT, "the sender sent a message larger than it announced");
      if (c != Completion::kOk) return abort_session(SZ_ERROR_IO, "receive failed: " + failure);
      const uint8_t* hdr = sl.rbuf;
      if (direct) {  // the header is in device memory: bring it over
        std::string why;
        if (len >= proto::kHeaderSize && gpu::copy(sl.hdr, sl.rbuf, proto::kHeaderSize, &why) != SZ_OK)
          return abort_session(SZ_ERROR_CUDA, "reading a message header from the device: " + why);
        hdr = sl.hdr;
      }
      st = proto::read_header(hdr, len, &sl.h);
      if (st != SZ_OK) return abort_session(st, "a message header failed its check");
      ChunkRef ref;
      std::string why;
      st = tracker.accept(sl.h, len, &ref, &why);
      if (st != SZ_OK) return abort_session(st, why);
      sl.tensor = ref.tensor;
      sl.n_values = ref.n_values;
      st = outputs.open(ts[ref.tensor], &why);
      if (st != SZ_OK) return abort_session(st, why);
      stats.wire_bytes += len;
      ++stats.messages;
      if (sl.h.flags & proto::kFlagPayloadHash) ++stats.raw_messages;
      ++received;
      sl.state = Slot::kDecoding;
      pool->submit((int)i);
    }
    // Decoded messages: their tensors finish, their slots receive again while messages remain.
    int done;
    while (pool->pop_done(&done)) {
      active = true;
      Slot& sl = slots[(size_t)done];
      if (sl.status != SZ_OK) return abort_session(sl.status, sl.why);
      TensorState& t = ts[sl.tensor];
      ++t.chunks_done;
      ++consumed;
      const uint64_t raw_bytes = sl.n_values * t.value_bytes;
      if (sl.h.flags & proto::kFlagPayloadHash) {
        load.raw_bytes += raw_bytes;
        raw_s += sl.busy_s;
      } else {
        load.frame_bytes += raw_bytes;
        frame_s += sl.busy_s;
      }
      if (t.chunks_done == t.chunks && !outputs.finish(t))
        return abort_session(SZ_ERROR_IO, "cannot finish " + t.name + ": " + strerror(errno));
      sl.state = Slot::kIdle;
      if (received + (uint64_t)std::count_if(slots.begin(), slots.end(),
                                             [](const Slot& x) { return x.state == Slot::kPosted; }) <
          total) {
        if (ep->post_recv((size_t)done, data_tag, sl.rbuf, sl.cap, rtype, nullptr) != SZ_OK)
          return abort_session(SZ_ERROR_IO, "cannot post a receive");
        sl.state = Slot::kPosted;
      }
    }
    if (consumed > credited) {  // the last credit too, before the RESULT
      load.frame_ns = (uint64_t)(frame_s / opt.threads * 1e9);
      load.raw_ns = (uint64_t)(raw_s / opt.threads * 1e9);
      if (link.credit(consumed, load) != SZ_OK) return peer_gone();
      load = proto::CreditLoad();
      frame_s = raw_s = 0;
      credited = consumed;
      active = true;
    }
    if (consumed == total) {
      // every tensor verified and in place: tell the sender
      if (link.reply(SZ_OK, "", {}) != SZ_OK) return peer_gone();
      break;
    }
    const double t = now_s();
    if (opt.max_session_seconds > 0 && t - t_session > opt.max_session_seconds)
      return abort_session(SZ_ERROR_IO, "the session exceeded its time limit of " +
                                            std::to_string(opt.max_session_seconds) + " s (" +
                                            std::to_string(received) + " of " + std::to_string(total) + " messages)");
    bool busy = false;
    for (const auto& sl : slots) busy = busy || sl.state == Slot::kDecoding;
    if (active || busy) {
      last_activity = t;
      if (active) continue;
    }
    if (t - last_activity > opt.timeout_s)
      return abort_session(SZ_ERROR_IO, "the sender stalled: nothing arrived for " + std::to_string(opt.timeout_s) +
                                            " s (" + std::to_string(received) + " of " + std::to_string(total) +
                                            " messages)");
    ep->wait(direct && !ep->device_completions_signalled() ? 0.001 : 0.05);  // device memory: see the sender
  }
  stats.seconds = now_s() - t_session;
  pool->stop();
  stats.codec_seconds = pool->cpu_seconds();
  stats.raw_bytes = plan.total_bytes;
  // Let the sender read the result and close first; then close our side.
  link.linger(std::min(2.0, opt.timeout_s), ep);
  cleanup();
  if (stats_out != nullptr) *stats_out = std::move(stats);
  return SZ_OK;
}

}  // namespace transfer
}  // namespace splitzip
