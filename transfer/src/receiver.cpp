// receiver.cpp — the receiving side of transfer/PROTOCOL.md.
//
// The UCX thread keeps `window` receives posted, one per slot. A completed receive is checked (header, sequence,
// tensor and chunk, sizes) and handed to a codec thread, which verifies the payload (the frame's checksums, or the
// message's XXH3 in raw mode), decodes it and writes it at its offset in the tensor's temporary file. When every
// chunk of a tensor verified, the file is renamed to its name; on any failure temporary files are removed. Every
// size the peer announces is checked against the ServeOptions limits before anything is allocated.
//
// With ServeOptions::gpu the slots are device buffers that UCX receives into (direct, when UCX reports CUDA memory
// support) or pinned host buffers (staged), and a codec thread decodes each message on its own CUDA stream
// (sz_cuda_decompress, status read back and checked) into the tensor's device destination; raw messages are
// hashed on the host (a staged message where it lies, a direct one after a copy) before they are copied in place.
// A tensor that goes to out_dir is copied back and written once all its chunks verified.
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <unordered_set>

#include "gpu.h"
#include "pool.h"
#include "protocol.h"
#include "splitzip/transfer.hpp"
#include "ucx.h"

namespace splitzip {
namespace transfer {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

sz_status fail(std::string* error, sz_status st, const std::string& msg) {
  if (error != nullptr) *error = msg;
  return st;
}

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
  std::string tmp_name;
  bool finished = false;
  uint8_t* dev = nullptr;  // GPU receive: the device destination
  gpu::Mem owned;          // ... when the library allocated it
};

struct Slot {
  enum State { kPosted, kDecoding, kIdle } state = kIdle;
  std::vector<uint8_t> buf;  // host receive buffer
  gpu::Mem mem;              // GPU receive: device (direct) or pinned host (staged) receive buffer
  uint8_t* rbuf = nullptr;   // where UCX receives: buf or mem
  size_t cap = 0;
  uint8_t hdr[proto::kHeaderSize] = {};  // a direct message's header, copied to the host
  Op op;
  proto::Header h;
  uint64_t n_values = 0;
  uint32_t tensor = 0;
  sz_status status = SZ_OK;
  std::string why;
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

}  // namespace

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

struct Server::Impl {
  ServeOptions opt;
  Ucx ucx;
  uint16_t port = 0;
  int dir_fd = -1;
  bool open = false;
  int cuda_device = 0;
  ~Impl() {
    if (dir_fd >= 0) ::close(dir_fd);
  }
};

Server::Server() : impl_(new Impl) {}
Server::~Server() { close(); }

uint16_t Server::port() const { return impl_->port; }

void Server::close() { impl_.reset(new Impl); }

sz_status Server::open(const ServeOptions& options, std::string* error) {
  std::string dummy;
  if (error == nullptr) error = &dummy;
  if (impl_->open) return fail(error, SZ_ERROR_INVALID_ARGUMENT, "server already open");
  Impl& s = *impl_;
  s.opt = options;
  if (s.opt.threads == 0) s.opt.threads = std::max(1u, std::thread::hardware_concurrency());
  if (s.opt.threads > 256) return fail(error, SZ_ERROR_INVALID_ARGUMENT, "threads must be at most 256");
  if (!(s.opt.timeout_s > 0)) return fail(error, SZ_ERROR_INVALID_ARGUMENT, "timeout must be positive");
  if (s.opt.max_window < 1 || s.opt.max_window > 1024)
    return fail(error, SZ_ERROR_INVALID_ARGUMENT, "max window must be 1..1024");
  if (s.opt.token.size() > proto::kMaxToken) return fail(error, SZ_ERROR_INVALID_ARGUMENT, "token longer than 256 bytes");
  if (s.opt.gpu) {
    std::string why;
    if (!gpu::available(&why)) return fail(error, SZ_ERROR_NOT_SUPPORTED, "GPU receive: " + why);
    s.cuda_device = gpu::current_device();
  }
  if (!s.opt.discard && !(s.opt.gpu && s.opt.device_destination)) {
    if (s.opt.out_dir.empty()) return fail(error, SZ_ERROR_INVALID_ARGUMENT, "an output directory or discard is needed");
    s.dir_fd = ::open(s.opt.out_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s.dir_fd < 0)
      return fail(error, SZ_ERROR_IO, "cannot open output directory " + s.opt.out_dir + ": " + strerror(errno));
  }
  sz_status st = s.ucx.init(error);
  if (st != SZ_OK) return st;
  if (s.opt.gpu && s.opt.gpu_path == GpuPath::kDirect && !s.ucx.cuda_memory())
    return fail(error, SZ_ERROR_NOT_SUPPORTED, "this UCX build does not report CUDA memory support (GpuPath::kDirect)");
  st = s.ucx.listen(s.opt.address, s.opt.port, &s.port, error);
  if (st != SZ_OK) return st;
  s.open = true;
  return SZ_OK;
}

sz_status Server::serve_one(SessionStats* stats_out, std::string* error) {
  std::string dummy;
  if (error == nullptr) error = &dummy;
  Impl& S = *impl_;
  if (!S.open) return fail(error, SZ_ERROR_INVALID_ARGUMENT, "server not open");
  Ucx& ucx = S.ucx;
  const ServeOptions& opt = S.opt;
  SessionStats stats;

  // ---- accept one peer ----
  {
    const double t0 = now_s();
    while (!ucx.has_conn_request()) {
      ucx.progress();
      if (ucx.has_conn_request()) break;
      if (opt.accept_timeout_s > 0 && now_s() - t0 > opt.accept_timeout_s)
        return fail(error, SZ_ERROR_IO, "no peer connected within " + std::to_string(opt.accept_timeout_s) + " s");
      ucx.wait(0.1);
    }
    sz_status st = ucx.accept(error);
    if (st != SZ_OK) return st;
  }

  // ---- handshake ----
  std::vector<uint8_t> hello_buf(proto::kHeaderSize + proto::kMaxHelloBytes);
  Op hello_op;
  uint8_t ack_header[proto::kHeaderSize];
  std::vector<uint8_t> ack_payload;
  Op ack_op;
  uint8_t credit_header[proto::kHeaderSize];
  Op credit_op;
  std::vector<Slot> slots;
  std::vector<TensorState> ts;
  std::vector<GpuWorker> gpu_workers;
  std::unique_ptr<CodecPool> pool;
  const bool use_gpu = opt.gpu;
  const bool direct = use_gpu && opt.gpu_path != GpuPath::kStaged && ucx.cuda_memory();
  const bool files = !opt.discard && !(use_gpu && opt.device_destination);  // tensors go to out_dir
  uint64_t ctrl_tag = 0;
  bool can_reply = false;

  // Sends a status message to the sender (best effort, bounded wait).
  auto reply = [&](uint8_t type, sz_status status, const std::string& text, bool wait) {
    if (!can_reply || ucx.ep_failed() || !ucx.has_ep()) return;
    ucx.cancel(&ack_op);
    ack_payload = proto::encode_status((uint32_t)status, text);
    proto::Header h;
    h.type = type;
    h.flags = proto::kFlagPayloadHash;
    h.payload_size = ack_payload.size();
    h.payload_hash = proto::h32(ack_payload.data(), ack_payload.size());
    proto::write_header(ack_header, h);
    if (ucx.send(ctrl_tag, ack_header, sizeof ack_header, ack_payload.data(), ack_payload.size(), &ack_op) != SZ_OK)
      return;
    if (!wait) return;
    const double deadline = now_s() + std::min(2.0, opt.timeout_s);
    while (!ack_op.done && !ucx.ep_failed() && now_s() < deadline) {
      if (!ucx.progress()) ucx.wait(0.01);
    }
  };
  // Tears the session down; removes every temporary file; renamed (complete) tensors stay.
  auto cleanup = [&](bool ok) {
    if (pool) pool->stop();
    for (auto& t : ts) {
      if (t.fd >= 0) {
        ::close(t.fd);
        t.fd = -1;
        unlinkat(S.dir_fd, t.tmp_name.c_str(), 0);
      }
    }
    ucx.close_ep(ok, ok ? 2.0 : 0.5);  // first: completes the endpoint's sends, so no cancel waits on the peer
    for (auto& sl : slots) ucx.cancel(&sl.op);
    ucx.cancel(&hello_op);
    ucx.cancel(&credit_op);
    ucx.cancel(&ack_op);
  };
  auto abort_session = [&](sz_status st, const std::string& msg) {
    reply(proto::kResult, st, msg, true);
    // Linger (bounded) until the sender has read the result and hung up: closing first would reset the connection
    // under a sender that is still sending, and it could lose the result and see only the reset.
    if (can_reply && ucx.has_ep()) {
      const double deadline = now_s() + std::min(0.5, opt.timeout_s);
      while (!ucx.ep_failed() && now_s() < deadline) {
        if (!ucx.progress()) ucx.wait(0.01);
      }
    }
    cleanup(false);
    return fail(error, st, msg);
  };
  auto peer_gone = [&]() {
    cleanup(false);
    return fail(error, SZ_ERROR_IO, "the sender disconnected: " + ucs_text(ucx.ep_status()));
  };

  if (ucx.recv(proto::tag_of(proto::kHello, 0), proto::kTagTypeMask, hello_buf.data(), hello_buf.size(),
               &hello_op) != SZ_OK) {
    cleanup(false);
    return fail(error, SZ_ERROR_IO, "cannot post a receive");
  }
  {
    const double t0 = now_s();
    while (!hello_op.done) {
      ucx.progress();
      if (hello_op.done) break;
      if (ucx.ep_failed()) return peer_gone();
      if (now_s() - t0 > opt.timeout_s) {
        cleanup(false);
        return fail(error, SZ_ERROR_IO, "no handshake within " + std::to_string(opt.timeout_s) + " s");
      }
      ucx.wait(0.05);
    }
  }
  const double t_session = now_s();
  const ucs_status_t hs = ucx.reap(&hello_op);
  if (hs != UCS_OK) {
    cleanup(false);
    return fail(error, hs == UCS_ERR_MESSAGE_TRUNCATED ? SZ_ERROR_INVALID_ARGUMENT : SZ_ERROR_IO,
                "receiving the handshake failed: " + ucs_text(hs));
  }
  proto::Header hh;
  sz_status st = proto::read_header(hello_buf.data(), hello_op.length, &hh);
  if (st != SZ_OK || hh.type != proto::kHello || hh.payload_size != hello_op.length - proto::kHeaderSize ||
      !(hh.flags & proto::kFlagPayloadHash) ||
      proto::h32(hello_buf.data() + proto::kHeaderSize, hh.payload_size) != hh.payload_hash) {
    cleanup(false);
    return fail(error, SZ_ERROR_CORRUPT, "the peer sent a malformed handshake");
  }
  stats.wire_bytes += hello_op.length;
  proto::Hello hello;
  std::string why;
  st = proto::decode_hello(hello_buf.data() + proto::kHeaderSize, hh.payload_size, opt.max_tensors, &hello, &why);
  // Once the fixed part parsed, the peer's session nonce is known and errors are reported to it.
  ctrl_tag = proto::tag_of(proto::kTagToSender, hello.session);
  can_reply = hh.payload_size >= proto::kHelloFixed && st != SZ_ERROR_BAD_MAGIC;
  auto refuse = [&](sz_status code, const std::string& msg) {
    reply(proto::kHelloAck, code, msg, true);
    cleanup(false);
    return fail(error, code, "refused a peer: " + msg);
  };
  if (st != SZ_OK) return refuse(st, why);
  hello_buf.clear();
  hello_buf.shrink_to_fit();

  if (!opt.token.empty() && !token_equal(opt.token, hello.token))
    return refuse(SZ_ERROR_INVALID_ARGUMENT, "token mismatch");
  if (hello.format_version != SZ_FORMAT_VERSION)
    return refuse(SZ_ERROR_UNSUPPORTED_VERSION, "format version " + std::to_string(hello.format_version) +
                                                    " not supported (this side reads " +
                                                    std::to_string(SZ_FORMAT_VERSION) + ")");
  if (hello.mode != proto::kModeCompressed && hello.mode != proto::kModeRaw)
    return refuse(SZ_ERROR_CORRUPT, "unknown transfer mode " + std::to_string(hello.mode));
  const bool raw = hello.mode == proto::kModeRaw;
  if (hello.window < 1 || hello.window > opt.max_window)
    return refuse(SZ_ERROR_INVALID_ARGUMENT, "window " + std::to_string(hello.window) + " outside 1.." +
                                                 std::to_string(opt.max_window));
  if (hello.chunk_values < 1 || hello.chunk_values > ((uint64_t)1 << 28))
    return refuse(SZ_ERROR_INVALID_ARGUMENT, "chunk of " + std::to_string(hello.chunk_values) + " values");
  size_t max_w = 1;
  uint64_t total_bytes = 0;
  std::vector<uint64_t> first_seq(1, 0);
  {
    std::unordered_set<std::string> names;
    ts.resize(hello.tensors.size());
    for (size_t i = 0; i < hello.tensors.size(); ++i) {
      const proto::TensorEntry& e = hello.tensors[i];
      TensorState& t = ts[i];
      if (!valid_tensor_name(e.name)) return refuse(SZ_ERROR_INVALID_ARGUMENT, "invalid tensor name");
      if (!names.insert(e.name).second) return refuse(SZ_ERROR_INVALID_ARGUMENT, "duplicate tensor name " + e.name);
      t.name = e.name;
      t.dtype = (sz_dtype)e.dtype;
      t.value_bytes = sz_dtype_size(t.dtype);
      if (t.value_bytes == 0) return refuse(SZ_ERROR_UNSUPPORTED_DTYPE, "tensor " + e.name + ": unknown dtype");
      if (e.size > opt.max_tensor_bytes)
        return refuse(SZ_ERROR_INVALID_ARGUMENT, "tensor " + e.name + " of " + std::to_string(e.size) +
                                                     " bytes exceeds the limit of " +
                                                     std::to_string(opt.max_tensor_bytes));
      if (e.size % t.value_bytes != 0)
        return refuse(SZ_ERROR_INVALID_ARGUMENT, "tensor " + e.name + ": size not a multiple of the dtype size");
      total_bytes += e.size;  // each term <= max_tensor_bytes, count <= max_tensors: no overflow for sane limits
      if (total_bytes > opt.max_total_bytes || total_bytes < e.size)
        return refuse(SZ_ERROR_INVALID_ARGUMENT, "the tensors exceed the limit of " +
                                                     std::to_string(opt.max_total_bytes) + " bytes in total");
      t.size = e.size;
      t.n_values = e.size / t.value_bytes;
      t.chunks = (t.n_values + hello.chunk_values - 1) / hello.chunk_values;
      first_seq.push_back(first_seq.back() + t.chunks);
      if (!raw) {
        sz_status cs = sz_codebook_deserialize(e.codebook, sizeof e.codebook, &t.codebook);
        if (cs != SZ_OK || t.codebook.dtype != e.dtype)
          return refuse(cs != SZ_OK ? cs : SZ_ERROR_BAD_CODEBOOK, "tensor " + e.name + ": invalid codebook");
      }
      max_w = std::max(max_w, t.value_bytes);
      t.tmp_name = "." + t.name + ".sz-partial-" + std::to_string(getpid()) + "-" + std::to_string(hello.session);
    }
  }
  // Buffers are sized by what the announced tensors need: a message holds at most the values of the longest
  // tensor, and no more slots are useful than there are messages (the sender never has more in flight).
  uint64_t longest = 0;
  for (const TensorState& t : ts) longest = std::max(longest, t.n_values);
  const uint64_t chunk_cap = std::max<uint64_t>(1, std::min<uint64_t>(hello.chunk_values, longest));
  const uint64_t max_payload = raw ? chunk_cap * max_w : SZ_COMPRESS_BOUND(chunk_cap, max_w);
  if (max_payload + proto::kHeaderSize > opt.max_message_bytes)
    return refuse(SZ_ERROR_INVALID_ARGUMENT, "messages of up to " + std::to_string(max_payload) +
                                                 " bytes exceed the limit of " + std::to_string(opt.max_message_bytes));
  const uint64_t total = first_seq.back();
  const uint32_t window = hello.window;
  const uint32_t n_slots = (uint32_t)std::max<uint64_t>(1, std::min<uint64_t>(window, total));
  const uint64_t buffer_bytes =
      n_slots * (proto::kHeaderSize + max_payload) + (raw ? 0 : (uint64_t)opt.threads * chunk_cap * max_w);
  if (buffer_bytes > opt.max_session_bytes)
    return refuse(SZ_ERROR_INVALID_ARGUMENT, "the session needs " + std::to_string(buffer_bytes) +
                                                 " bytes of buffers, more than the limit of " +
                                                 std::to_string(opt.max_session_bytes));
  if (files && !opt.overwrite) {
    for (const TensorState& t : ts) {
      struct stat st_existing;
      if (fstatat(S.dir_fd, t.name.c_str(), &st_existing, AT_SYMLINK_NOFOLLOW) == 0)
        return refuse(SZ_ERROR_INVALID_ARGUMENT, "tensor " + t.name + ": a file of that name exists in the output "
                                                 "directory (the receiver does not overwrite without being told to)");
    }
  }
  stats.raw = raw;
  stats.buffer_bytes = buffer_bytes;

  // ---- allocate (all sizes checked above) and accept ----
  const uint64_t data_tag = proto::tag_of(proto::kChunk, hello.session);
  slots.resize(n_slots);
  std::vector<std::vector<uint8_t>> scratch(opt.threads);
  stats.gpu = use_gpu;
  stats.gpu_direct = direct;
  if (!use_gpu) {
    for (auto& sl : slots) {
      sl.buf.resize((size_t)(proto::kHeaderSize + max_payload));
      sl.rbuf = sl.buf.data();
      sl.cap = sl.buf.size();
    }
    if (!raw)
      for (auto& b : scratch) b.resize((size_t)(chunk_cap * max_w));
  } else {
    std::string why;
    st = gpu::set_device(S.cuda_device, &why);
    for (auto& sl : slots) {
      if (st == SZ_OK)
        st = sl.mem.alloc(direct ? gpu::Mem::kDevice : gpu::Mem::kPinned, (size_t)(proto::kHeaderSize + max_payload),
                          &why);
      sl.rbuf = sl.mem.get();
      sl.cap = (size_t)(proto::kHeaderSize + max_payload);
    }
    size_t ws = 0;
    if (st == SZ_OK && !raw) {
      st = sz_cuda_decompress_workspace_size((size_t)max_payload, (size_t)(chunk_cap * max_w), &ws);
      if (st != SZ_OK) why = std::string("workspace size: ") + sz_status_name(st);
    }
    gpu_workers.resize(opt.threads);
    for (auto& g : gpu_workers) {
      if (st == SZ_OK) st = g.stream.create(&why);
      if (st == SZ_OK && ws > 0) st = g.workspace.alloc(gpu::Mem::kDevice, ws, &why);
      if (st == SZ_OK && !raw && !direct) st = g.d_frame.alloc(gpu::Mem::kDevice, (size_t)max_payload, &why);
      if (st == SZ_OK && direct)
        st = g.h_scratch.alloc(gpu::Mem::kPinned, raw ? (size_t)max_payload : (size_t)SZ_FRAME_HEADER_SIZE, &why);
      if (st == SZ_OK) st = g.d_result.alloc(gpu::Mem::kDevice, 16, &why);
      if (st == SZ_OK) st = g.h_result.alloc(gpu::Mem::kPinned, 16, &why);
    }
    if (st != SZ_OK) return refuse(st, "GPU receive buffers: " + why);
  }
  std::vector<uint8_t> seen(2 * (size_t)window, 0);  // ring over seqs [base, base + 2*window)
  uint64_t base = 0;

  reply(proto::kHelloAck, SZ_OK, "", false);

  // One message on codec thread `worker`'s stream, into the tensor's device destination.
  auto decode_gpu = [&](unsigned worker, Slot& sl) {
    TensorState& t = ts[sl.tensor];
    GpuWorker& g = gpu_workers[worker];
    const sz_cuda_stream stream = g.stream.get();
    const uint8_t* payload = sl.rbuf + proto::kHeaderSize;  // device memory when direct, else pinned host
    const size_t psize = (size_t)sl.h.payload_size;
    const size_t bytes = (size_t)(sl.n_values * t.value_bytes);
    uint8_t* const dst = t.dev + sl.h.chunk * hello.chunk_values * t.value_bytes;
    std::string why;
    sz_status e = gpu::set_device(S.cuda_device, &why);
    const std::string where = "chunk " + std::to_string(sl.h.chunk) + " of " + t.name;
    if (raw) {
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
  };
  auto decode = [&](unsigned worker, int si) {
    Slot& sl = slots[(size_t)si];
    TensorState& t = ts[sl.tensor];
    if (use_gpu) {
      sl.status = SZ_OK;
      decode_gpu(worker, sl);
      return;
    }
    const uint8_t* payload = sl.buf.data() + proto::kHeaderSize;
    const size_t psize = (size_t)sl.h.payload_size;
    const size_t bytes = (size_t)(sl.n_values * t.value_bytes);
    const uint8_t* out = payload;
    sl.status = SZ_OK;
    if (raw) {
      if (proto::h32(payload, psize) != sl.h.payload_hash) {
        sl.status = SZ_ERROR_CHECKSUM;
        sl.why = "chunk " + std::to_string(sl.h.chunk) + " of " + t.name + " failed its XXH3 check";
        return;
      }
    } else {
      sz_status fs = check_frame(payload, psize, t, sl.n_values, psize);
      size_t written = 0;
      if (fs == SZ_OK) fs = sz_decompress(payload, psize, scratch[worker].data(), scratch[worker].size(), &written, 1);
      if (fs == SZ_OK && written != bytes) fs = SZ_ERROR_CORRUPT;
      if (fs != SZ_OK) {
        sl.status = fs;
        sl.why = "chunk " + std::to_string(sl.h.chunk) + " of " + t.name + " failed verification: " +
                 sz_status_name(fs);
        return;
      }
      out = scratch[worker].data();
    }
    if (t.fd >= 0 && !write_all(t.fd, out, bytes, sl.h.chunk * hello.chunk_values * t.value_bytes)) {
      sl.status = SZ_ERROR_IO;
      sl.why = "cannot write " + t.name + ": " + strerror(errno);
    }
  };
  pool.reset(new CodecPool(opt.threads, decode, [&ucx] { ucx.wake(); }));

  // A GPU-received tensor that goes to a file: device -> host in pieces, written at its offsets.
  auto write_from_device = [&](TensorState& t) -> bool {
    if (t.dev == nullptr || t.size == 0) return true;
    std::vector<uint8_t> piece((size_t)std::min<uint64_t>(t.size, (uint64_t)64 << 20));
    std::string why;
    for (uint64_t off = 0; off < t.size; off += piece.size()) {
      const size_t n = (size_t)std::min<uint64_t>(piece.size(), t.size - off);
      if (gpu::copy(piece.data(), t.dev + off, n, &why) != SZ_OK) {
        errno = EIO;
        return false;
      }
      if (!write_all(t.fd, piece.data(), n, off)) return false;
    }
    return true;
  };
  auto finish_tensor = [&](TensorState& t) -> bool {
    if (files && use_gpu && t.fd >= 0 && !write_from_device(t)) return false;
    if (files) {
      if (t.fd < 0) {  // an empty tensor
        t.fd = openat(S.dir_fd, t.tmp_name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (t.fd < 0) return false;
      }
      const int fd = t.fd;
      t.fd = -1;
      struct stat stt;
      bool ok = fstat(fd, &stt) == 0;
      if (ok && (uint64_t)stt.st_size != t.size) ok = ftruncate(fd, (off_t)t.size) == 0;
      ok = (::close(fd) == 0) && ok;
      if (ok && opt.overwrite) {
        ok = renameat(S.dir_fd, t.tmp_name.c_str(), S.dir_fd, t.name.c_str()) == 0;
      } else if (ok) {  // link fails if a file of that name appeared since the handshake: nothing is replaced
        ok = linkat(S.dir_fd, t.tmp_name.c_str(), S.dir_fd, t.name.c_str(), 0) == 0;
        unlinkat(S.dir_fd, t.tmp_name.c_str(), 0);
      }
      if (!ok) {
        unlinkat(S.dir_fd, t.tmp_name.c_str(), 0);
        return false;
      }
    }
    t.finished = true;
    ReceivedTensor r;
    r.name = t.name;
    r.dtype = t.dtype;
    r.size = t.size;
    if (files) r.path = opt.out_dir + "/" + t.name;
    if (use_gpu && opt.device_destination) r.device_data = t.dev;
    t.owned.reset();
    stats.tensors.push_back(r);
    return true;
  };
  for (auto& t : ts) {
    if (t.chunks == 0 && !finish_tensor(t)) return abort_session(SZ_ERROR_IO, "cannot create " + t.name);
  }

  for (size_t i = 0; i < slots.size(); ++i) {
    if (ucx.recv(data_tag, proto::kTagFull, slots[i].rbuf, slots[i].cap, &slots[i].op, direct) != SZ_OK)
      return abort_session(SZ_ERROR_IO, "cannot post a receive");
    slots[i].state = Slot::kPosted;
  }

  // ---- the pipeline ----
  uint64_t consumed = 0, credited = 0, received = 0;
  double last_activity = now_s();
  bool result_sent = false;
  for (;;) {
    bool active = ucx.progress();
    if (ucx.ep_failed() && !result_sent) return peer_gone();
    for (size_t i = 0; i < slots.size(); ++i) {
      Slot& sl = slots[i];
      if (sl.state != Slot::kPosted || !sl.op.done) continue;
      active = true;
      const ucs_status_t us = ucx.reap(&sl.op);
      if (us == UCS_ERR_MESSAGE_TRUNCATED)
        return abort_session(SZ_ERROR_CORRUPT, "the sender sent a message larger than it announced");
      if (us != UCS_OK) {
        if (ucx.ep_failed()) return peer_gone();
        return abort_session(SZ_ERROR_IO, "receive failed: " + ucs_text(us));
      }
      const size_t len = sl.op.length;
      const uint8_t* hdr = sl.rbuf;
      if (direct) {  // the header is in device memory: bring it over
        std::string why;
        if (len >= proto::kHeaderSize && gpu::copy(sl.hdr, sl.rbuf, proto::kHeaderSize, &why) != SZ_OK)
          return abort_session(SZ_ERROR_CUDA, "reading a message header from the device: " + why);
        hdr = sl.hdr;
      }
      st = proto::read_header(hdr, len, &sl.h);
      if (st != SZ_OK) return abort_session(st, "a message header failed its check");
      if (sl.h.type != proto::kChunk || sl.h.payload_size != len - proto::kHeaderSize)
        return abort_session(SZ_ERROR_CORRUPT, "unexpected message");
      const uint64_t seq = sl.h.seq;
      if (seq >= total || seq < base || seq >= base + seen.size() || seen[seq % seen.size()])
        return abort_session(SZ_ERROR_CORRUPT, "message sequence number out of order or repeated");
      seen[seq % seen.size()] = 1;
      while (base < total && seen[base % seen.size()]) {
        seen[base % seen.size()] = 0;
        ++base;
      }
      const uint32_t ti = (uint32_t)(std::upper_bound(first_seq.begin(), first_seq.end(), seq) - first_seq.begin() - 1);
      TensorState& t = ts[ti];
      const uint64_t c = seq - first_seq[ti];
      if (sl.h.tensor != ti || sl.h.chunk != c)
        return abort_session(SZ_ERROR_CORRUPT, "message names the wrong tensor or chunk");
      sl.tensor = ti;
      sl.n_values = std::min<uint64_t>(hello.chunk_values, t.n_values - c * hello.chunk_values);
      const uint64_t bytes = sl.n_values * t.value_bytes;
      if (raw ? (sl.h.payload_size != bytes || !(sl.h.flags & proto::kFlagPayloadHash))
              : (sl.h.payload_size > SZ_COMPRESS_BOUND(sl.n_values, t.value_bytes)))
        return abort_session(SZ_ERROR_CORRUPT, "chunk " + std::to_string(c) + " of " + t.name + " has a wrong size");
      if (use_gpu && t.dev == nullptr) {
        if (opt.device_destination) {
          t.dev = static_cast<uint8_t*>(opt.device_destination(t.name, t.dtype, t.size));
          if (t.dev == nullptr) return abort_session(SZ_ERROR_IO, "no device destination for " + t.name);
        } else {
          std::string why;
          const sz_status as = t.owned.alloc(gpu::Mem::kDevice, (size_t)t.size, &why);
          if (as != SZ_OK) return abort_session(as, "device memory for " + t.name + ": " + why);
          t.dev = t.owned.get();
        }
      }
      if (files && t.fd < 0) {
        t.fd = openat(S.dir_fd, t.tmp_name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (t.fd < 0) return abort_session(SZ_ERROR_IO, "cannot create a file for " + t.name + ": " + strerror(errno));
      }
      stats.wire_bytes += len;
      ++stats.messages;
      ++received;
      sl.state = Slot::kDecoding;
      pool->submit((int)i);
    }
    int done;
    while (pool->pop_done(&done)) {
      active = true;
      Slot& sl = slots[(size_t)done];
      if (sl.status != SZ_OK) return abort_session(sl.status, sl.why);
      TensorState& t = ts[sl.tensor];
      ++t.chunks_done;
      ++consumed;
      if (t.chunks_done == t.chunks && !finish_tensor(t))
        return abort_session(SZ_ERROR_IO, "cannot finish " + t.name + ": " + strerror(errno));
      sl.state = Slot::kIdle;
      if (received + (uint64_t)std::count_if(slots.begin(), slots.end(),
                                             [](const Slot& x) { return x.state == Slot::kPosted; }) <
          total) {
        if (ucx.recv(data_tag, proto::kTagFull, sl.rbuf, sl.cap, &sl.op, direct) != SZ_OK)
          return abort_session(SZ_ERROR_IO, "cannot post a receive");
        sl.state = Slot::kPosted;
      }
    }
    if (credit_op.active && credit_op.done) {
      if (ucx.reap(&credit_op) != UCS_OK && !ucx.ep_failed()) return abort_session(SZ_ERROR_IO, "send failed");
    }
    if (consumed < total && consumed > credited && !credit_op.active) {
      proto::Header h;
      h.type = proto::kCredit;
      h.chunk = consumed;
      proto::write_header(credit_header, h);
      if (ucx.send(ctrl_tag, credit_header, sizeof credit_header, nullptr, 0, &credit_op) != SZ_OK) {
        if (ucx.ep_failed()) return peer_gone();
        return abort_session(SZ_ERROR_IO, "send failed");
      }
      credited = consumed;
      active = true;
    }
    if (consumed == total) {
      // every tensor verified and in place: tell the sender (the RESULT carries the final credit implicitly)
      proto::Header h;
      if (credit_op.active) {
        if (!credit_op.done) {
          ucx.wait(0.01);
          continue;
        }
      }
      if (consumed > credited) {
        h.type = proto::kCredit;
        h.chunk = consumed;
        proto::write_header(credit_header, h);
        if (credit_op.active) ucx.reap(&credit_op);
        if (ucx.send(ctrl_tag, credit_header, sizeof credit_header, nullptr, 0, &credit_op) != SZ_OK)
          return peer_gone();
        credited = consumed;
      }
      result_sent = true;
      reply(proto::kResult, SZ_OK, "", true);
      break;
    }
    const double t = now_s();
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
    ucx.wait(direct ? 0.001 : 0.05);  // device memory: see the sender
  }
  stats.seconds = now_s() - t_session;
  pool->stop();
  stats.codec_seconds = pool->cpu_seconds();
  stats.raw_bytes = total_bytes;
  // Let the sender read the result and close first; then close our side.
  {
    const double deadline = now_s() + std::min(2.0, opt.timeout_s);
    while (!ucx.ep_failed() && now_s() < deadline && (ack_op.active && !ack_op.done)) {
      if (!ucx.progress()) ucx.wait(0.01);
    }
  }
  cleanup(true);
  if (stats_out != nullptr) *stats_out = std::move(stats);
  return SZ_OK;
}

}  // namespace transfer
}  // namespace splitzip
