// test_transfer.cpp — the transfer library over real UCX on loopback (UCX_TLS set by ctest): bit-exact transfer of
// several tensors in both modes, interoperation through the handshake, integrity, peers that die or stall, and the
// receiver's security checks (token, names, sizes).
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "session/adaptive.h"
#include "wire/protocol.h"
#include "splitzip/transfer.hpp"
#include "test_util.h"
#include "gpu.h"
#include "transport/net.h"
#include "transport/ucx.h"

extern char** environ;

namespace fs = std::filesystem;
namespace tr = splitzip::transfer;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "sz-transfer-XXXXXX").string();
    char* p = mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::vector<std::string> list() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

std::vector<uint8_t> read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

const std::vector<uint8_t>& kv_slice() {
  static const std::vector<uint8_t> data = read_file(fs::path(SPLITZIP_SOURCE_DIR) / "data" / "kv_code_bf16_slice.bin");
  return data;
}

struct Outcome {
  sz_status server = SZ_ERROR_INTERNAL, sender = SZ_ERROR_INTERNAL;
  std::string server_error, sender_error;
  tr::SessionStats session;
  tr::SendStats sent;
};

// A server opened with `so` serving one peer (serve_one) on its own thread while the test plays the peer; join()
// waits for that session (the destructor too, so a failed assertion never leaves the thread running).
struct ServingOne {
  tr::Server server;
  tr::SessionStats stats;
  sz_status status = SZ_ERROR_INTERNAL;
  std::string error;
  std::thread thread;
  explicit ServingOne(const tr::ServeOptions& so) {
    std::string err;
    const sz_status st = server.open(so, &err);
    EXPECT_EQ(st, SZ_OK) << err;
    if (st == SZ_OK) thread = std::thread([this] { status = server.serve_one(&stats, &error); });
  }
  ~ServingOne() { join(); }
  uint16_t port() const { return server.port(); }
  sz_status join() {
    if (thread.joinable()) thread.join();
    return status;
  }
};

// Runs one session: a Server on a free loopback port in a thread, the sender in this thread.
Outcome run_session(tr::ServeOptions so, const std::vector<tr::Tensor>& tensors, const tr::SendOptions& opt) {
  Outcome o;
  so.port = 0;
  so.accept_timeout_s = 20;
  ServingOne srv(so);
  o.sender = tr::send("127.0.0.1", srv.port(), tensors, opt, &o.sent, &o.sender_error);
  o.server = srv.join();
  o.server_error = srv.error;
  o.session = srv.stats;
  return o;
}

// Several tensors of several dtypes and sizes (including an empty one and one that is not a whole chunk).
struct Corpus {
  std::vector<uint8_t> kv, fp32, fp8, empty;
  std::vector<tr::Tensor> tensors;
  Corpus() {
    kv = kv_slice();
    fp32 = sztest::random_bytes(4 * 100003, 7);
    fp8 = sztest::random_bytes(12345, 8);
    tensors.push_back({"layer0.kv.bf16", SZ_DTYPE_BF16, kv.data(), kv.size()});
    tensors.push_back({"noise.fp32", SZ_DTYPE_FP32, fp32.data(), fp32.size()});
    tensors.push_back({"small.e4m3", SZ_DTYPE_FP8_E4M3, fp8.data(), fp8.size()});
    tensors.push_back({"empty.bf16", SZ_DTYPE_BF16, empty.data(), 0});
  }
  void expect_in(const TempDir& d) const {
    for (const auto& t : tensors) {
      const auto got = read_file(d.path / t.name);
      ASSERT_EQ(got.size(), t.size) << t.name;
      EXPECT_TRUE(t.size == 0 || memcmp(got.data(), t.data, t.size) == 0) << t.name << " differs";
    }
  }
};

tr::SendOptions small_chunks(bool raw) {
  tr::SendOptions o;
  o.raw = raw;
  o.chunk_values = 3 * 4096 + 5;  // many messages, the last one of each tensor short
  o.window = 3;
  o.threads = 2;
  o.timeout_s = 10;
  return o;
}

tr::ServeOptions to_dir(const TempDir& d) {
  tr::ServeOptions so;
  so.out_dir = d.path.string();
  so.threads = 2;
  so.timeout_s = 10;
  return so;
}

bool no_partial_files(const TempDir& d) {
  for (const auto& n : d.list())
    if (n.find(".sz-partial-") != std::string::npos) return false;
  return true;
}

pid_t spawn(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  return pid;
}

// Starts the peer program as a receiver that writes into out, and waits up to 20 s for the port it bound (written to
// a file in ctl). Returns the port, or -1; *pid is the receiver's process id (-1 if it did not start).
int spawn_receiver(const TempDir& out, const TempDir& ctl, pid_t* pid) {
  const fs::path port_file = ctl.path / "port";
  *pid = spawn({SPLITZIP_TRANSFER_PEER, "serve", port_file.string(), out.path.string(), "30"});
  if (*pid <= 0) return -1;
  const double t_wait = now_s();
  while (!fs::exists(port_file) && now_s() - t_wait < 20) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (!fs::exists(port_file)) return -1;
  const auto pf = read_file(port_file);
  return std::stoi(std::string(pf.begin(), pf.end()));
}

// A peer that speaks the control connection by hand: plain TCP to the server's port.
struct RawPeer {
  int fd = -1;
  explicit RawPeer(uint16_t port, const char* host = "127.0.0.1") {
    std::string err;
    if (tr::net::connect_tcp(host, port, 5, &fd, &err) != SZ_OK) fd = -1;
  }
  ~RawPeer() {
    if (fd >= 0) close(fd);
  }
  bool ok() const { return fd >= 0; }
  bool send_bytes(const std::vector<uint8_t>& b) {
    std::string why;
    return tr::net::write_all(fd, b.data(), b.size(), now_s() + 5, &why) == SZ_OK;
  }
  // Reads the HELLO_ACK: its status (SZ_ERROR_IO when none came) and the address.
  sz_status read_ack(std::vector<uint8_t>* address, std::string* text = nullptr) {
    tr::proto::MessageReader r(tr::proto::type_bit(tr::proto::kHelloAck));
    std::string why, t;
    if (tr::net::read_message(fd, &r, now_s() + 10, nullptr, &why) != SZ_OK) return SZ_ERROR_IO;
    uint32_t status = 0;
    if (tr::proto::decode_ack(r.payload().data(), r.payload().size(), &status, &t, address) != SZ_OK)
      return SZ_ERROR_CORRUPT;
    if (text != nullptr) *text = t;
    return (sz_status)status;
  }
};

// A complete, valid HELLO message for one tensor `name` of `size` bytes in messages of `chunk_values` values; in
// compressed mode with the default generic BF16 codebook (zeros in raw mode).
std::vector<uint8_t> hello_of(uint32_t session, uint8_t mode, uint64_t size, uint64_t chunk_values,
                              const std::string& token = "", const std::string& name = "t",
                              uint8_t dtype = SZ_DTYPE_BF16) {
  namespace proto = tr::proto;
  proto::Hello h;
  h.protocol_version = tr::kProtocolVersion;
  h.format_version = SZ_FORMAT_VERSION;
  h.mode = mode;
  h.session = session;
  h.chunk_values = chunk_values;
  h.window = 2;
  h.token = token;
  proto::TensorEntry e;
  e.name = name;
  e.dtype = dtype;
  e.size = size;
  if (mode == proto::kModeCompressed) {
    sz_codebook cb;
    EXPECT_EQ(sz_default_codebook(SZ_DTYPE_BF16, SZ_KIND_GENERIC, &cb), SZ_OK);
    EXPECT_EQ(sz_codebook_serialize(&cb, e.codebook, sizeof e.codebook), SZ_OK);
  }
  h.tensors.push_back(e);
  return proto::encode_message(proto::kHello, proto::encode_hello(h), true);
}

// A complete, valid HELLO message for one raw BF16 tensor "t" of 4096 bytes.
std::vector<uint8_t> hello_message(uint32_t session, const std::string& token, const std::string& name = "t",
                                   uint8_t dtype = SZ_DTYPE_BF16) {
  return hello_of(session, tr::proto::kModeRaw, 4096, 1024, token, name, dtype);
}

}  // namespace

// ---- bit-exact transfers -------------------------------------------------------------------------------------------

TEST(Transfer, CompressedIsBitExactForSeveralTensors) {
  TempDir d;
  Corpus c;
  Outcome o = run_session(to_dir(d), c.tensors, small_chunks(false));
  ASSERT_EQ(o.sender, SZ_OK) << o.sender_error;
  ASSERT_EQ(o.server, SZ_OK) << o.server_error;
  c.expect_in(d);
  EXPECT_EQ(o.session.tensors.size(), c.tensors.size());
  EXPECT_FALSE(o.session.raw);
  EXPECT_EQ(d.list().size(), c.tensors.size());  // no temporary files left
  // Real KV compresses: the wire carries fewer bytes than the tensors (the random fp32/fp8 parts do not).
  EXPECT_LT(o.sent.payload_bytes, o.sent.raw_bytes);
  EXPECT_EQ(o.sent.messages, o.session.messages);
}

TEST(Transfer, RawIsBitExactForSeveralTensors) {
  TempDir d;
  Corpus c;
  Outcome o = run_session(to_dir(d), c.tensors, small_chunks(true));
  ASSERT_EQ(o.sender, SZ_OK) << o.sender_error;
  ASSERT_EQ(o.server, SZ_OK) << o.server_error;
  c.expect_in(d);
  EXPECT_TRUE(o.session.raw);
  EXPECT_EQ(o.sent.payload_bytes, o.sent.raw_bytes);
}

TEST(Transfer, DiscardVerifiesWithoutWriting) {
  Corpus c;
  tr::ServeOptions so;
  so.discard = true;
  Outcome o = run_session(so, c.tensors, small_chunks(false));
  ASSERT_EQ(o.sender, SZ_OK) << o.sender_error;
  ASSERT_EQ(o.server, SZ_OK) << o.server_error;
  EXPECT_EQ(o.session.tensors.size(), c.tensors.size());
  EXPECT_EQ(o.session.raw_bytes, o.sent.raw_bytes);
}

// Each received file is the tensor and nothing more: its size is the tensor's (the temporary file is created at
// that size), whatever the chunking, in both modes; several tensors whose last chunk is short, one larger than a
// chunk of default size.
TEST(Transfer, ReceivedFilesHaveExactlyTheTensorsBytes) {
  const auto& kv = kv_slice();
  std::vector<uint8_t> big;
  for (size_t i = 0; i < 3; ++i) big.insert(big.end(), kv.begin(), kv.end());
  big.resize(big.size() - 2 * 777);  // not a whole number of chunks
  for (bool raw : {false, true}) {
    TempDir d;
    const std::vector<tr::Tensor> tensors = {{"big.bf16", SZ_DTYPE_BF16, big.data(), big.size()},
                                             {"odd.bf16", SZ_DTYPE_BF16, kv.data(), 2 * 4099}};
    tr::SendOptions o;
    o.raw = raw;
    o.timeout_s = 10;
    Outcome r = run_session(to_dir(d), tensors, o);
    ASSERT_EQ(r.server, SZ_OK) << r.server_error;
    ASSERT_EQ(r.sender, SZ_OK) << r.sender_error;
    for (const auto& t : tensors) {
      struct stat st;
      ASSERT_EQ(stat((d.path / t.name).c_str(), &st), 0) << t.name;
      EXPECT_EQ((uint64_t)st.st_size, t.size) << t.name;
      const auto got = read_file(d.path / t.name);
      ASSERT_EQ(got.size(), t.size);
      EXPECT_EQ(memcmp(got.data(), t.data, t.size), 0) << t.name << " differs, raw " << raw;
    }
    EXPECT_EQ(d.list().size(), tensors.size()) << "no temporary file may remain";
  }
}

// Direct I/O (ServeOptions::direct_io) writes the same bytes: in both modes, for dtypes of 1, 2 and 4 bytes, tensors
// whose last chunk is short or that are smaller than one block, and an empty one. It is used where every chunk
// starts at a multiple of 4096 bytes, and a chunk size that does not falls back to buffered writes.
TEST(Transfer, DirectIoWritesTheSameBytes) {
  const auto& kv = kv_slice();
  const std::vector<uint8_t> fp32 = sztest::random_bytes(4 * 100003, 7), fp8 = sztest::random_bytes(12345, 8);
  const std::vector<tr::Tensor> tensors = {{"kv.bf16", SZ_DTYPE_BF16, kv.data(), kv.size() - 2 * 1001},
                                           {"noise.fp32", SZ_DTYPE_FP32, fp32.data(), fp32.size()},
                                           {"small.e4m3", SZ_DTYPE_FP8_E4M3, fp8.data(), fp8.size()},
                                           {"tiny.bf16", SZ_DTYPE_BF16, kv.data(), 2 * 300},
                                           {"empty.bf16", SZ_DTYPE_BF16, kv.data(), 0}};
  bool fs_direct = false;  // does the temporary directory's file system take direct I/O at all?
  {
    TempDir probe;
    const int fd = open((probe.path / "p").c_str(), O_WRONLY | O_CREAT | O_DIRECT | O_CLOEXEC, 0644);
    fs_direct = fd >= 0;
    if (fd >= 0) close(fd);
  }
  for (const uint64_t chunk_values : {(uint64_t)4096, (uint64_t)3 * 4096 + 5}) {
    for (const bool raw : {false, true}) {
      TempDir d;
      tr::ServeOptions so = to_dir(d);
      so.direct_io = true;
      tr::SendOptions o = small_chunks(raw);
      o.chunk_values = chunk_values;
      Outcome r = run_session(so, tensors, o);
      ASSERT_EQ(r.server, SZ_OK) << r.server_error;
      ASSERT_EQ(r.sender, SZ_OK) << r.sender_error;
      for (const auto& t : tensors) {
        const auto got = read_file(d.path / t.name);
        ASSERT_EQ(got.size(), t.size) << t.name << ", raw " << raw << ", chunk " << chunk_values;
        EXPECT_TRUE(t.size == 0 || memcmp(got.data(), t.data, t.size) == 0) << t.name << " differs";
      }
      EXPECT_EQ(d.list().size(), tensors.size()) << "no temporary file may remain";
      ASSERT_EQ(r.session.tensors.size(), tensors.size());
      for (const auto& rt : r.session.tensors) {
        const bool expect = fs_direct && chunk_values == 4096 && rt.size > 0;
        EXPECT_EQ(rt.direct_io, expect) << rt.name << ", chunk " << chunk_values;
      }
    }
  }
}

// A tensor the output directory has no room for fails the session when its file is created, before its data is
// written (the file size limit of the process stands in for a full disk), and leaves no file behind, neither under
// its name nor a temporary one.
TEST(Transfer, TensorWithoutRoomFailsCleanlyAndLeavesNoFile) {
  // The limit holds for every file of the process, UCX's shared-memory segments included; only a TCP-only UCX is
  // left alone by it.
  const char* tls = getenv("UCX_TLS");
  if (tls == nullptr || std::string(tls) != "tcp") GTEST_SKIP() << "needs UCX_TLS=tcp (the file size limit would "
                                                                    "also bind UCX's shared memory)";
  TempDir d;
  const auto& kv = kv_slice();
  const std::vector<tr::Tensor> tensors = {{"fits.bf16", SZ_DTYPE_BF16, kv.data(), 64 << 10},
                                           {"too-big.bf16", SZ_DTYPE_BF16, kv.data(), kv.size()}};
  ASSERT_GT(kv.size(), (size_t)(1 << 20));
  rlimit old;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = 1 << 20;
  struct sigaction ignore = {}, old_action;
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGXFSZ, &ignore, &old_action), 0);  // so that passing the limit is an error, not a signal
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  tr::SendOptions o;
  o.chunk_values = 16 << 10;
  o.timeout_s = 10;
  Outcome r = run_session(to_dir(d), tensors, o);
  setrlimit(RLIMIT_FSIZE, &old);
  sigaction(SIGXFSZ, &old_action, nullptr);
  EXPECT_EQ(r.server, SZ_ERROR_IO) << r.server_error;
  EXPECT_NE(r.server_error.find("cannot reserve"), std::string::npos) << r.server_error;
  EXPECT_NE(r.server_error.find("too-big.bf16"), std::string::npos) << r.server_error;
  EXPECT_NE(r.sender, SZ_OK);
  // The tensor before it is there only if it was complete before the failure (the pipeline may still have been
  // decoding it), and then whole.
  for (const auto& n : d.list()) {
    ASSERT_EQ(n, "fits.bf16");
    EXPECT_EQ(read_file(d.path / n), std::vector<uint8_t>(kv.begin(), kv.begin() + (64 << 10)));
  }
}

TEST(Transfer, RawAndCompressedSendersInteroperateWithOneServer) {
  TempDir d;
  Corpus c;
  tr::ServeOptions so = to_dir(d);
  so.accept_timeout_s = 20;
  tr::Server server;
  std::string err;
  ASSERT_EQ(server.open(so, &err), SZ_OK) << err;
  for (bool raw : {true, false, true}) {  // one open server, three sessions in turn
    for (const auto& n : d.list()) fs::remove(d.path / n);
    tr::SessionStats s;
    sz_status ss = SZ_ERROR_INTERNAL;
    std::string serr, cerr;
    std::thread t([&] { ss = server.serve_one(&s, &serr); });
    const sz_status cs = tr::send("127.0.0.1", server.port(), c.tensors, small_chunks(raw), nullptr, &cerr);
    t.join();
    ASSERT_EQ(cs, SZ_OK) << cerr;
    ASSERT_EQ(ss, SZ_OK) << serr;
    EXPECT_EQ(s.raw, raw);
    c.expect_in(d);
  }
}

TEST(Transfer, UnknownProtocolVersionIsRefusedByTheHandshake) {
  TempDir d;
  Corpus c;
  tr::SendOptions o = small_chunks(false);
  o.faults.protocol_version = tr::kProtocolVersion + 1;
  Outcome r = run_session(to_dir(d), c.tensors, o);
  EXPECT_EQ(r.server, SZ_ERROR_UNSUPPORTED_VERSION) << r.server_error;
  EXPECT_EQ(r.sender, SZ_ERROR_UNSUPPORTED_VERSION) << r.sender_error;
  EXPECT_TRUE(d.list().empty());
}

// ---- integrity -----------------------------------------------------------------------------------------------------

TEST(Transfer, CorruptedCompressedChunkIsDetected) {
  TempDir d;
  Corpus c;
  tr::SendOptions o = small_chunks(false);
  // Flip one bit in the rest section of message 2 (past the frame header, index and checksums).
  o.faults.tamper = [](uint64_t seq, uint8_t* p, size_t n) {
    if (seq == 2 && n > 2000) p[n / 2] ^= 0x10;
  };
  Outcome r = run_session(to_dir(d), c.tensors, o);
  EXPECT_EQ(r.server, SZ_ERROR_CHECKSUM) << r.server_error;
  EXPECT_EQ(r.sender, SZ_ERROR_CHECKSUM) << r.sender_error;
  EXPECT_FALSE(fs::exists(d.path / "layer0.kv.bf16"));
  EXPECT_TRUE(no_partial_files(d));
}

TEST(Transfer, CorruptedRawChunkIsDetected) {
  TempDir d;
  Corpus c;
  tr::SendOptions o = small_chunks(true);
  o.faults.tamper = [](uint64_t seq, uint8_t* p, size_t n) {
    if (seq == 1) p[n - 1] ^= 0x01;
  };
  Outcome r = run_session(to_dir(d), c.tensors, o);
  EXPECT_EQ(r.server, SZ_ERROR_CHECKSUM) << r.server_error;
  EXPECT_NE(r.sender, SZ_OK);
  EXPECT_FALSE(fs::exists(d.path / "layer0.kv.bf16"));
  EXPECT_TRUE(no_partial_files(d));
}

// ---- adaptive sends: raw messages inside a compressed session ------------------------------------------------------

namespace {

// Host destinations the receiver decodes into, handed out by name, and what it released.
struct HostSink {
  std::mutex mu;
  std::map<std::string, std::vector<uint8_t>> mem;
  std::map<std::string, int> released;  // name -> times released
  std::map<std::string, bool> complete;
  bool bad_release = false;             // a pointer released that was not handed out
  void attach(tr::ServeOptions* so) {
    so->destination = [this](const std::string& name, sz_dtype, uint64_t size) -> void* {
      std::lock_guard<std::mutex> lock(mu);
      mem[name].assign(size, 0xEE);
      return mem[name].data();
    };
    so->release = [this](const std::string& name, void* data, bool done) {
      std::lock_guard<std::mutex> lock(mu);
      if (!mem.count(name) || mem[name].data() != data) bad_release = true;
      ++released[name];
      complete[name] = done;
    };
  }
};

uint64_t messages_of(const std::vector<tr::Tensor>& tensors, uint64_t chunk_values) {
  uint64_t n = 0;
  for (const auto& t : tensors) n += (t.size / sz_dtype_size(t.dtype) + chunk_values - 1) / chunk_values;
  return n;
}

}  // namespace

TEST(TransferAdaptive, MixedRawAndCompressedMessagesAreBitExact) {
  for (const bool direct_io : {false, true}) {
    TempDir d;
    Corpus c;
    tr::SendOptions o = small_chunks(false);
    o.adaptive = true;
    o.faults.send_raw = [](uint64_t seq) { return seq % 3 == 1; };
    tr::ServeOptions so = to_dir(d);
    so.direct_io = direct_io;
    Outcome r = run_session(so, c.tensors, o);
    ASSERT_EQ(r.sender, SZ_OK) << r.sender_error;
    ASSERT_EQ(r.server, SZ_OK) << r.server_error;
    c.expect_in(d);
    EXPECT_EQ(d.list().size(), c.tensors.size());
    const uint64_t n = messages_of(c.tensors, o.chunk_values);
    ASSERT_EQ(r.sent.messages, n);
    EXPECT_EQ(r.sent.raw_messages, (n + 1) / 3);
    EXPECT_EQ(r.session.raw_messages, r.sent.raw_messages);
    EXPECT_FALSE(r.session.raw);
  }
}

TEST(TransferAdaptive, MixedMessagesDecodeIntoHostDestinations) {
  Corpus c;
  tr::SendOptions o = small_chunks(false);
  o.adaptive = true;
  o.faults.send_raw = [](uint64_t seq) { return seq % 2 == 0; };
  tr::ServeOptions so;
  so.threads = 2;
  HostSink sink;
  sink.attach(&so);
  Outcome r = run_session(so, c.tensors, o);
  ASSERT_EQ(r.sender, SZ_OK) << r.sender_error;
  ASSERT_EQ(r.server, SZ_OK) << r.server_error;
  for (const auto& t : c.tensors) {
    if (t.size == 0) continue;
    ASSERT_EQ(sink.mem[t.name].size(), t.size) << t.name;
    EXPECT_EQ(memcmp(sink.mem[t.name].data(), t.data, t.size), 0) << t.name;
  }
  EXPECT_GT(r.session.raw_messages, 0u);
  EXPECT_LT(r.session.raw_messages, r.session.messages);
}

TEST(TransferAdaptive, ForcedChoiceGoesEitherWayForEveryMessage) {
  for (const bool all_raw : {true, false}) {
    TempDir d;
    Corpus c;
    tr::SendOptions o = small_chunks(false);
    o.adaptive = true;
    o.faults.send_raw = [all_raw](uint64_t) { return all_raw; };
    Outcome r = run_session(to_dir(d), c.tensors, o);
    ASSERT_EQ(r.sender, SZ_OK) << r.sender_error;
    ASSERT_EQ(r.server, SZ_OK) << r.server_error;
    c.expect_in(d);
    EXPECT_EQ(r.sent.raw_messages, all_raw ? r.sent.messages : 0u);
    EXPECT_EQ(r.session.raw_messages, r.sent.raw_messages);
    if (all_raw) {
      EXPECT_EQ(r.sent.payload_bytes, r.sent.raw_bytes);
    } else {
      EXPECT_LT(r.sent.payload_bytes, r.sent.raw_bytes);
    }
  }
}

TEST(TransferAdaptive, WithoutTheOptionEveryMessageOfACompressedSessionIsAFrame) {
  TempDir d;
  Corpus c;
  Outcome r = run_session(to_dir(d), c.tensors, small_chunks(false));
  ASSERT_EQ(r.sender, SZ_OK) << r.sender_error;
  EXPECT_EQ(r.sent.raw_messages, 0u);
  EXPECT_EQ(r.session.raw_messages, 0u);
  tr::SendOptions o = small_chunks(true);
  o.adaptive = true;
  tr::SendStats st;
  std::string err;
  EXPECT_EQ(tr::send("127.0.0.1", 1, c.tensors, o, &st, &err), SZ_ERROR_INVALID_ARGUMENT);
}

TEST(TransferAdaptive, RuleCompressesEveryMessageOnASlowLink) {
  const std::vector<uint8_t>& kv = kv_slice();
  std::vector<tr::Tensor> tensors = {{"kv", SZ_DTYPE_BF16, kv.data(), kv.size()}};
  tr::SendOptions o = small_chunks(false);
  o.adaptive = true;
  o.rate_bytes_per_s = 40e6;  // far below any codec thread's encode rate
  tr::ServeOptions so;
  so.discard = true;
  Outcome r = run_session(so, tensors, o);
  ASSERT_EQ(r.sender, SZ_OK) << r.sender_error;
  ASSERT_EQ(r.server, SZ_OK) << r.server_error;
  EXPECT_EQ(r.sent.raw_messages, 0u);
  EXPECT_LT(r.sent.payload_bytes, r.sent.raw_bytes);
}

TEST(TransferAdaptive, RuleSendsRawWhatDoesNotCompress) {
  const std::vector<uint8_t> noise = sztest::random_bytes(4 * 200000, 11);
  std::vector<tr::Tensor> tensors = {{"noise", SZ_DTYPE_FP32, noise.data(), noise.size()}};
  TempDir d;
  tr::SendOptions o = small_chunks(false);
  o.adaptive = true;
  o.rate_bytes_per_s = 1e9;
  Outcome r = run_session(to_dir(d), tensors, o);
  ASSERT_EQ(r.sender, SZ_OK) << r.sender_error;
  ASSERT_EQ(r.server, SZ_OK) << r.server_error;
  EXPECT_EQ(read_file(d.path / "noise"), noise);
  // The first message of each codec thread (at most) is compressed to measure; random values do not compress, so
  // the rest go raw.
  EXPECT_GE(r.sent.raw_messages, r.sent.messages - o.threads);
  EXPECT_LT(r.sent.raw_messages, r.sent.messages);
}

TEST(TransferAdaptive, CompressedFractionBalancesTheCodecAndTheLink) {
  // A codec that keeps up with a link of frames: compress everything.
  EXPECT_EQ(tr::compressed_fraction(1e9, 10e9, 100e6, 0.7, 1, 8), 1.0);
  EXPECT_EQ(tr::compressed_fraction(1e9, 10e9, 100e6, 0.7, 64, 1), 1.0);
  // Nothing saved, or the raw path alone slower than the link: never compress.
  EXPECT_EQ(tr::compressed_fraction(1e9, 10e9, 100e6, 1.0, 1, 8), 0.0);
  EXPECT_EQ(tr::compressed_fraction(1e9, 5e9, 6e9, 0.7, 1, 8), 0.0);
  EXPECT_EQ(tr::compressed_fraction(0, 5e9, 1e9, 0.7, 1, 8), 0.0);
  // One message's encode on one thread (1 / 0.25e9 per byte) outlasts the link's work ahead of it (8 / 3e9): a
  // compressed message among raw ones would idle the link.
  EXPECT_EQ(tr::compressed_fraction(0.25e9, 8e9, 3e9, 0.7, 1, 8), 0.0);
  EXPECT_GT(tr::compressed_fraction(0.25e9, 8e9, 3e9, 0.7, 1, 16), 0.0);
  // In between: the codec's and the link's time per raw byte meet, and the pipeline beats a raw send.
  for (const double E : {0.2e9, 0.5e9, 1e9, 2e9}) {
    const double H = 8e9, L = 3e9, r = 0.7;
    const double f = tr::compressed_fraction(E, H, L, r, 1, 64);
    ASSERT_GT(f, 0.0) << E;
    ASSERT_LE(f, 1.0) << E;
    const double codec = f / E + (1 - f) / H, link = (1 - f * (1 - r)) / L;
    if (f < 1) {
      EXPECT_NEAR(codec, link, 1e-6 * link) << E;
    }
    EXPECT_LT(std::max(codec, link), 1 / L) << E;  // raw bytes per second above L
  }
  // An unmeasured raw path costs nothing.
  EXPECT_GT(tr::compressed_fraction(1e9, 0, 2e9, 0.7, 1, 8), 0.0);
}

TEST(TransferAdaptive, ChoiceMeasuresFirstThenFollowsTheRule) {
  tr::AdaptiveChoice c(2, 8);
  c.set_link_rate(1e9);
  EXPECT_TRUE(c.compress());  // nothing measured yet: compressed, to measure
  EXPECT_TRUE(c.compress());
  c.encoded(false, 1000000, 700000, 0.001);  // 1 GB/s per thread, ratio 0.7
  c.set_link_rate(0);
  EXPECT_FALSE(c.compress());  // the link's rate not known: raw
  c.set_link_rate(100e6);      // a slow link
  int compressed = 0;
  for (int i = 0; i < 100; ++i) compressed += c.compress() ? 1 : 0;
  EXPECT_EQ(compressed, 100);
  compressed = 0;
  c.encoded(true, 1000000, 1000000, 0.0001);  // raw path 10 GB/s per thread
  c.set_link_rate(4e9);
  for (int i = 0; i < 1000; ++i) compressed += c.compress() ? 1 : 0;
  const double f = tr::compressed_fraction(2e9, 20e9, 4e9, 0.7, 2, 8);
  EXPECT_NEAR(compressed, 1000 * f, 2.0);
  EXPECT_GT(compressed, 0);
  EXPECT_LT(compressed, 1000);
}

TEST(TransferAdaptive, ReceiverSlowerThanTheLinkLowersTheFraction) {
  tr::AdaptiveChoice c(2, 8);
  c.set_link_rate(1e9);
  EXPECT_TRUE(c.compress());
  c.encoded(false, 1000000, 700000, 0.0001);  // the sender: 10 GB/s per thread, ratio 0.7
  c.encoded(true, 1000000, 1000000, 0.00005);
  int compressed = 0;
  for (int i = 0; i < 100; ++i) compressed += c.compress() ? 1 : 0;
  EXPECT_EQ(compressed, 100);  // a sender that keeps up with a 1 GB/s link of frames compresses all
  // The receiver decodes frames at 0.5 GB/s (its threads together) and verifies raw messages at 10 GB/s: slower
  // than the link for frames, so a share goes raw, where its time and the link's meet.
  c.received(1000000, 0.002, 1000000, 0.0001);
  compressed = 0;
  for (int i = 0; i < 1000; ++i) compressed += c.compress() ? 1 : 0;
  const double D = 0.5e9, G = 10e9, L = 1e9, r = 0.7;
  const double f = tr::compressed_fraction(D, G, L, r, 0, 1);
  EXPECT_NEAR(c.fraction(), f, 1e-9);
  EXPECT_NEAR(compressed, 1000 * f, 2.0);
  EXPECT_GT(f, 0.0);
  EXPECT_LT(f, 1.0);
  const double receiver = f / D + (1 - f) / G, link = (1 - f * (1 - r)) / L;
  EXPECT_NEAR(receiver, link, 1e-6 * link);
  EXPECT_LT(link, 1 / L);  // still faster than a raw send
  // Reports without bytes of a kind change nothing of it.
  c.received(0, 0, 0, 0);
  c.compress();
  EXPECT_NEAR(c.fraction(), f, 1e-9);
}

TEST(TransferWire, CreditCarriesTheReceiversLoad) {
  namespace proto = tr::proto;
  proto::CreditLoad in;
  in.frame_bytes = 123456789;
  in.frame_ns = 987654321;
  in.raw_bytes = 42;
  in.raw_ns = 7;
  const std::vector<uint8_t> p = proto::encode_credit_load(in);
  ASSERT_EQ(p.size(), proto::kCreditPayload);
  proto::CreditLoad out;
  ASSERT_EQ(proto::decode_credit_load(p.data(), p.size(), &out), SZ_OK);
  EXPECT_EQ(out.frame_bytes, in.frame_bytes);
  EXPECT_EQ(out.frame_ns, in.frame_ns);
  EXPECT_EQ(out.raw_bytes, in.raw_bytes);
  EXPECT_EQ(out.raw_ns, in.raw_ns);
  EXPECT_EQ(proto::decode_credit_load(p.data(), p.size() - 1, &out), SZ_ERROR_CORRUPT);
  // On the control stream a CREDIT is a hashed message whose payload is at most that size.
  auto feed = [](const std::vector<uint8_t>& m, std::string* why) {
    proto::MessageReader r(proto::type_bit(proto::kCredit));
    size_t at = 0;
    while (!r.complete() && at < m.size()) {
      size_t room = 0;
      uint8_t* b = r.buffer(&room);
      const size_t n = std::min(room, m.size() - at);
      memcpy(b, m.data() + at, n);
      at += n;
      const sz_status st = r.commit(n, why);
      if (st != SZ_OK) return st;
    }
    return r.complete() ? SZ_OK : SZ_ERROR_SRC_TRUNCATED;
  };
  std::string why;
  EXPECT_EQ(feed(proto::encode_message(proto::kCredit, p, true), &why), SZ_OK) << why;
  EXPECT_NE(feed(proto::encode_message(proto::kCredit, p, false), &why), SZ_OK);
  std::vector<uint8_t> longer = p;
  longer.push_back(0);
  EXPECT_NE(feed(proto::encode_message(proto::kCredit, longer, true), &why), SZ_OK);
}

namespace {

// Plays a compressed-mode sender by hand: the HELLO for a 4096-byte tensor in one message, then `chunk` as that
// message over UCX. Returns what the server's session ended with; the file, when it succeeded, in *out.
sz_status raw_in_compressed_session(const std::vector<uint8_t>& chunk, std::string* error, std::vector<uint8_t>* out) {
  TempDir d;
  tr::ServeOptions so = to_dir(d);
  so.timeout_s = 5;
  so.accept_timeout_s = 20;
  ServingOne srv(so);
  std::string err;
  {
    namespace proto = tr::proto;
    RawPeer peer(srv.port());
    EXPECT_TRUE(peer.ok());
    peer.send_bytes(hello_of(77, proto::kModeCompressed, 4096, 2048));
    std::vector<uint8_t> address;
    EXPECT_EQ(peer.read_ack(&address), SZ_OK);
    tr::Ucx ucx;
    EXPECT_EQ(ucx.init("lo", &err), SZ_OK) << err;
    EXPECT_EQ(ucx.connect(address, &err), SZ_OK) << err;
    tr::Op op;
    EXPECT_EQ(ucx.send(proto::tag_of(proto::kChunk, 77), chunk.data(), chunk.size(), nullptr, 0, &op), SZ_OK);
    const double t1 = now_s();
    while (!op.done && now_s() - t1 < 5) ucx.wait(0.01);
    ucx.reap(&op);
    srv.join();
  }
  *error = srv.error;
  if (srv.status == SZ_OK) *out = read_file(d.path / "t");
  EXPECT_TRUE(no_partial_files(d));
  return srv.status;
}

// A raw CHUNK message (seq 0 of tensor 0) with `payload`, its hash over `hashed`.
std::vector<uint8_t> raw_chunk(const std::vector<uint8_t>& payload, const std::vector<uint8_t>& hashed) {
  namespace proto = tr::proto;
  proto::Header h;
  h.type = proto::kChunk;
  h.flags = proto::kFlagPayloadHash;
  h.payload_size = payload.size();
  h.payload_hash = proto::h32(hashed.data(), hashed.size());
  std::vector<uint8_t> m(proto::kHeaderSize);
  proto::write_header(m.data(), h);
  m.insert(m.end(), payload.begin(), payload.end());
  return m;
}

}  // namespace

TEST(TransferAdaptive, HandMadeRawMessageInACompressedSessionIsAccepted) {
  const std::vector<uint8_t> values = sztest::random_bytes(4096, 21);
  std::string err;
  std::vector<uint8_t> got;
  EXPECT_EQ(raw_in_compressed_session(raw_chunk(values, values), &err, &got), SZ_OK) << err;
  EXPECT_EQ(got, values);
}

TEST(TransferAdaptive, RawMessageOfTheWrongSizeIsRejected) {
  std::string err;
  std::vector<uint8_t> got;
  for (const size_t n : {4094, 4098, 2048}) {
    const std::vector<uint8_t> values = sztest::random_bytes(n, 22);
    EXPECT_EQ(raw_in_compressed_session(raw_chunk(values, values), &err, &got), SZ_ERROR_CORRUPT) << n << ": " << err;
  }
}

TEST(TransferAdaptive, RawMessageWithAWrongHashIsRejected) {
  const std::vector<uint8_t> values = sztest::random_bytes(4096, 23);
  std::vector<uint8_t> other = values;
  other[100] ^= 1;
  std::string err;
  std::vector<uint8_t> got;
  EXPECT_EQ(raw_in_compressed_session(raw_chunk(values, other), &err, &got), SZ_ERROR_CHECKSUM) << err;
}

TEST(TransferAdaptive, TamperedRawMessageOfAnAdaptiveSendIsDetected) {
  TempDir d;
  Corpus c;
  tr::SendOptions o = small_chunks(false);
  o.adaptive = true;
  o.faults.send_raw = [](uint64_t seq) { return seq == 1; };
  o.faults.tamper = [](uint64_t seq, uint8_t* p, size_t n) {
    if (seq == 1) p[n - 1] ^= 0x01;
  };
  Outcome r = run_session(to_dir(d), c.tensors, o);
  EXPECT_EQ(r.server, SZ_ERROR_CHECKSUM) << r.server_error;
  EXPECT_NE(r.sender, SZ_OK);
  EXPECT_TRUE(no_partial_files(d));
}

// ---- host destinations, ready gates, the emulated link -------------------------------------------------------------

TEST(Transfer, HostDestinationsGetTheBytesAndAreReleasedOnce) {
  for (bool raw : {false, true}) {
    SCOPED_TRACE(raw ? "raw" : "compressed");
    Corpus c;
    HostSink sink;
    tr::ServeOptions so;
    so.threads = 2;
    sink.attach(&so);  // no out_dir, no discard: the destination is where the bytes go
    Outcome o = run_session(so, c.tensors, small_chunks(raw));
    ASSERT_EQ(o.sender, SZ_OK) << o.sender_error;
    ASSERT_EQ(o.server, SZ_OK) << o.server_error;
    EXPECT_FALSE(sink.bad_release);
    for (const auto& t : c.tensors) {
      if (t.size == 0) {
        EXPECT_FALSE(sink.mem.count(t.name)) << "an empty tensor gets no destination";
        continue;
      }
      ASSERT_TRUE(sink.mem.count(t.name)) << t.name;
      EXPECT_EQ(memcmp(sink.mem[t.name].data(), t.data, t.size), 0) << t.name << " differs";
      EXPECT_EQ(sink.released[t.name], 1) << t.name;
      EXPECT_TRUE(sink.complete[t.name]) << t.name;
    }
    ASSERT_EQ(o.session.tensors.size(), c.tensors.size());
    for (const auto& r : o.session.tensors) {
      EXPECT_TRUE(r.path.empty());
      EXPECT_EQ(r.data, r.size == 0 ? nullptr : (void*)sink.mem[r.name].data()) << r.name;
    }
  }
}

TEST(Transfer, DestinationsAreReleasedIncompleteWhenTheSessionFails) {
  Corpus c;
  HostSink sink;
  tr::ServeOptions so;
  sink.attach(&so);
  tr::SendOptions o = small_chunks(false);
  o.faults.tamper = [](uint64_t seq, uint8_t* p, size_t n) {
    if (seq == 2 && n > 2000) p[n / 2] ^= 0x10;
  };
  Outcome r = run_session(so, c.tensors, o);
  EXPECT_EQ(r.server, SZ_ERROR_CHECKSUM) << r.server_error;
  EXPECT_FALSE(sink.bad_release);
  ASSERT_TRUE(sink.mem.count("layer0.kv.bf16"));
  EXPECT_EQ(sink.released["layer0.kv.bf16"], 1);
  EXPECT_FALSE(sink.complete["layer0.kv.bf16"]);
  for (const auto& kv : sink.mem) EXPECT_EQ(sink.released[kv.first], 1) << kv.first << ": every destination handed out";
}

// The sender reads a tensor only after the gate marked it ready: each tensor's buffer holds other bytes until its
// producer writes the real ones just before ready(), so a sender that read early would deliver the wrong bytes.
TEST(Transfer, GatedTensorsAreSentOnlyOnceReady) {
  for (bool raw : {false, true}) {
    SCOPED_TRACE(raw ? "raw" : "compressed");
    Corpus c;
    std::vector<std::vector<uint8_t>> bufs;
    std::vector<tr::Tensor> tensors = c.tensors;
    for (auto& t : tensors) {
      bufs.emplace_back(t.size, 0x5A);
      t.data = bufs.back().data();
    }
    tr::ReadyGate gate(tensors.size());
    std::atomic<int> ready_count{0};
    std::atomic<bool> early{false};
    tr::SendOptions o = small_chunks(raw);
    o.gate = &gate;
    o.timeout_s = 1;  // shorter than the producer's pauses: waiting for it is not a stall
    o.faults.tamper = [&](uint64_t, uint8_t*, size_t) {
      if (ready_count.load() == 0) early = true;
    };
    std::thread producer([&] {
      for (size_t i = 0; i < tensors.size(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(i == 1 ? 1500 : 100));
        if (c.tensors[i].size) memcpy(bufs[i].data(), c.tensors[i].data, c.tensors[i].size);
        ++ready_count;
        EXPECT_EQ(gate.ready(i), SZ_OK);
      }
    });
    TempDir d;
    Outcome r = run_session(to_dir(d), tensors, o);
    producer.join();
    ASSERT_EQ(r.sender, SZ_OK) << r.sender_error;
    ASSERT_EQ(r.server, SZ_OK) << r.server_error;
    EXPECT_FALSE(early) << "a message went out before any tensor was ready";
    c.expect_in(d);
  }
  tr::ReadyGate g(2);
  EXPECT_EQ(g.ready(2), SZ_ERROR_INVALID_ARGUMENT);
}

TEST(Transfer, GateFailureEndsTheSendWithTheProducersReason) {
  Corpus c;
  tr::ReadyGate gate(c.tensors.size());
  tr::SendOptions o = small_chunks(false);
  o.gate = &gate;
  std::thread producer([&] {
    gate.ready(0);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    gate.fail("layer 3 ran out of memory");
  });
  tr::ServeOptions so;
  so.discard = true;
  Outcome r = run_session(so, c.tensors, o);
  producer.join();
  EXPECT_EQ(r.sender, SZ_ERROR_IO);
  EXPECT_NE(r.sender_error.find("the producer failed: layer 3 ran out of memory"), std::string::npos) << r.sender_error;
  EXPECT_NE(r.server, SZ_OK);
  tr::SendOptions wrong = small_chunks(false);
  tr::ReadyGate small(1);
  wrong.gate = &small;
  std::string err;
  EXPECT_EQ(tr::send("127.0.0.1", 9, c.tensors, wrong, nullptr, &err), SZ_ERROR_INVALID_ARGUMENT) << err;
}

// A link saves up nothing while idle: a tensor that becomes ready after a pause still takes its size / rate.
TEST(Transfer, EmulatedLinkPacesABurstAfterAnIdlePeriod) {
  const std::vector<uint8_t>& kv = kv_slice();
  std::vector<tr::Tensor> tensors = {{"first", SZ_DTYPE_BF16, kv.data(), 4096},
                                     {"burst", SZ_DTYPE_BF16, kv.data(), kv.size()}};
  tr::ReadyGate gate(tensors.size());
  tr::SendOptions o;
  o.raw = true;
  o.rate_bytes_per_s = 20e6;  // the 1.8 MB burst: 92 ms on such a link
  o.gate = &gate;
  double t_burst = 0;
  std::thread producer([&] {
    gate.ready(0);
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // idle: 20 MB of link time unused
    t_burst = now_s();
    gate.ready(1);
  });
  tr::ServeOptions so;
  so.discard = true;
  Outcome r = run_session(so, tensors, o);
  const double t_done = now_s();
  producer.join();
  ASSERT_EQ(r.sender, SZ_OK) << r.sender_error;
  ASSERT_EQ(r.server, SZ_OK) << r.server_error;
  const double ideal = (double)(kv.size() + 48) / o.rate_bytes_per_s;  // one message
  EXPECT_GE(t_done - t_burst, 0.95 * ideal);
  EXPECT_LT(t_done - t_burst, 0.95 * ideal + 1.0);  // paced, not stuck
}

TEST(Transfer, GarbageHandshakeIsRejected) {
  tr::ServeOptions so;
  so.discard = true;
  so.timeout_s = 5;
  so.accept_timeout_s = 20;
  ServingOne srv(so);
  {
    RawPeer peer(srv.port());
    ASSERT_TRUE(peer.ok());
    peer.send_bytes(sztest::random_bytes(1000, 99));
    srv.join();  // the server gives up on its own; the peer stays connected until here
  }
  EXPECT_EQ(srv.status, SZ_ERROR_BAD_MAGIC) << srv.error;
  EXPECT_NE(srv.error.find("refused a peer"), std::string::npos) << srv.error;
}

// ---- peers that die or stall ---------------------------------------------------------------------------------------

TEST(Transfer, SenderKilledMidTransferFailsTheReceiverWithinItsTimeout) {
  TempDir d;
  tr::ServeOptions so = to_dir(d);
  so.timeout_s = 3;
  so.accept_timeout_s = 20;
  tr::Server server;
  std::string err;
  ASSERT_EQ(server.open(so, &err), SZ_OK) << err;
  const fs::path src = fs::path(SPLITZIP_SOURCE_DIR) / "data" / "kv_code_bf16_slice.bin";
  // 56 messages of 32 KiB at 4 MB/s: about half a second; the child exits abruptly after 10 of them.
  const pid_t pid = spawn({SPLITZIP_TRANSFER_PEER, "send", std::to_string(server.port()), src.string(), "4e6", "10",
                           "10"});
  ASSERT_GT(pid, 0);
  tr::SessionStats s;
  const double t0 = now_s();
  const sz_status st = server.serve_one(&s, &err);
  const double elapsed = now_s() - t0;
  int wst = 0;
  waitpid(pid, &wst, 0);
  ASSERT_TRUE(WIFEXITED(wst));
  EXPECT_EQ(WEXITSTATUS(wst), 3) << "the child should have died on purpose";
  EXPECT_EQ(st, SZ_ERROR_IO) << err;
  EXPECT_LT(elapsed, so.timeout_s + 5.0);
  EXPECT_TRUE(s.tensors.empty());
  EXPECT_TRUE(d.list().empty()) << "nothing, not even a partial file, may remain";
}

TEST(Transfer, ReceiverKilledMidTransferFailsTheSenderWithinItsTimeout) {
  TempDir d, ctl;
  pid_t pid = -1;
  const int port = spawn_receiver(d, ctl, &pid);
  ASSERT_GT(pid, 0);
  ASSERT_GT(port, 0) << "the receiver did not report its port within 20 s";
  const auto& kv = kv_slice();
  tr::SendOptions o;
  o.chunk_values = 16384;
  o.window = 2;
  o.rate_bytes_per_s = 2e6;  // about a second for the 1.8 MB slice
  o.timeout_s = 3;
  std::thread killer([pid] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(pid, SIGKILL);
  });
  std::string err;
  const double t0 = now_s();
  const sz_status st =
      tr::send("127.0.0.1", (uint16_t)port, {{"victim.bin", SZ_DTYPE_BF16, kv.data(), kv.size()}}, o, nullptr, &err);
  const double elapsed = now_s() - t0;
  killer.join();
  int wst = 0;
  waitpid(pid, &wst, 0);
  EXPECT_TRUE(WIFSIGNALED(wst));
  EXPECT_EQ(st, SZ_ERROR_IO) << err;
  EXPECT_LT(elapsed, o.timeout_s + 5.0);
  EXPECT_FALSE(fs::exists(d.path / "victim.bin")) << "a killed receiver must not leave a file that looks complete";
}

TEST(Transfer, StalledReceiverTimesOutCleanly) {
  TempDir d, ctl;
  pid_t pid = -1;
  const int port = spawn_receiver(d, ctl, &pid);
  ASSERT_GT(pid, 0);
  ASSERT_GT(port, 0) << "the receiver did not report its port within 20 s";
  const auto& kv = kv_slice();
  tr::SendOptions o;
  o.chunk_values = 16384;
  o.window = 2;
  o.rate_bytes_per_s = 2e6;
  o.timeout_s = 1.5;
  std::thread freezer([pid] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(pid, SIGSTOP);  // alive, connected, and silent
  });
  std::string err;
  const double t0 = now_s();
  const sz_status st =
      tr::send("127.0.0.1", (uint16_t)port, {{"victim.bin", SZ_DTYPE_BF16, kv.data(), kv.size()}}, o, nullptr, &err);
  const double elapsed = now_s() - t0;
  freezer.join();
  kill(pid, SIGKILL);
  int wst = 0;
  waitpid(pid, &wst, 0);
  EXPECT_EQ(st, SZ_ERROR_IO) << err;
  EXPECT_NE(err.find("stalled"), std::string::npos) << err;
  EXPECT_LT(elapsed, o.timeout_s + 3.0);  // the timeout, not a hang on the frozen peer while cleaning up
  EXPECT_FALSE(fs::exists(d.path / "victim.bin"));
}

TEST(Transfer, GarbageChunkAfterAValidHandshakeIsRejected) {
  tr::ServeOptions so;
  so.discard = true;
  so.timeout_s = 5;
  so.accept_timeout_s = 20;
  ServingOne srv(so);
  std::string err;
  {
    namespace proto = tr::proto;
    RawPeer peer(srv.port());
    ASSERT_TRUE(peer.ok());
    peer.send_bytes(hello_message(42, ""));
    std::vector<uint8_t> address;
    ASSERT_EQ(peer.read_ack(&address), SZ_OK);
    ASSERT_FALSE(address.empty());
    tr::Ucx ucx;
    ASSERT_EQ(ucx.init("lo", &err), SZ_OK) << err;
    ASSERT_EQ(ucx.connect(address, &err), SZ_OK) << err;
    // Now a "chunk" of the right size that is not a message at all.
    const std::vector<uint8_t> junk = sztest::random_bytes(proto::kHeaderSize + 2048, 5);
    tr::Op junk_op;
    ASSERT_EQ(ucx.send(proto::tag_of(proto::kChunk, 42), junk.data(), junk.size(), nullptr, 0, &junk_op), SZ_OK);
    const double t1 = now_s();
    while (!junk_op.done && now_s() - t1 < 5) ucx.wait(0.01);
    ucx.reap(&junk_op);
    srv.join();
  }
  EXPECT_EQ(srv.status, SZ_ERROR_BAD_MAGIC) << srv.error;
}

TEST(Transfer, StalledSenderTimesOutCleanly) {
  TempDir d;
  Corpus c;
  tr::ServeOptions so = to_dir(d);
  so.timeout_s = 1.5;
  tr::SendOptions o = small_chunks(false);
  o.timeout_s = 20;
  o.faults.stall_after_chunks = 4;
  const double t0 = now_s();
  Outcome r = run_session(so, c.tensors, o);
  EXPECT_EQ(r.server, SZ_ERROR_IO) << r.server_error;
  EXPECT_NE(r.server_error.find("stalled"), std::string::npos) << r.server_error;
  EXPECT_NE(r.sender, SZ_OK);  // told by the receiver's result, or by the closed connection
  EXPECT_LT(now_s() - t0, 10.0);
  EXPECT_TRUE(no_partial_files(d));
  EXPECT_FALSE(fs::exists(d.path / "noise.fp32"));
}

TEST(Transfer, ConnectingToNobodyFailsCleanly) {
  // Bind a server to get a free port, then close it: nobody listens there any more.
  tr::ServeOptions so;
  so.discard = true;
  uint16_t port = 0;
  {
    tr::Server s;
    std::string e;
    ASSERT_EQ(s.open(so, &e), SZ_OK) << e;
    port = s.port();
  }
  Corpus c;
  tr::SendOptions o = small_chunks(false);
  o.timeout_s = 3;
  std::string err;
  const double t0 = now_s();
  EXPECT_EQ(tr::send("127.0.0.1", port, c.tensors, o, nullptr, &err), SZ_ERROR_IO);
  EXPECT_LT(now_s() - t0, 8.0);
}

// ---- security ------------------------------------------------------------------------------------------------------

TEST(TransferSecurity, ServerBindsToLoopbackByDefault) {
  tr::ServeOptions so;
  EXPECT_EQ(so.address, "127.0.0.1");
  // A peer that reaches this host through another interface must not get in.
  std::string other;
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) == 0) {
    for (ifaddrs* i = ifs; i != nullptr && other.empty(); i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK)) continue;
      char buf[INET_ADDRSTRLEN];
      if (inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf)) other = buf;
    }
    freeifaddrs(ifs);
  }
  if (other.empty()) GTEST_SKIP() << "no non-loopback IPv4 interface to try from";
  so.discard = true;
  so.accept_timeout_s = 3;
  ServingOne srv(so);
  const auto& kv = kv_slice();
  tr::SendOptions o;
  o.timeout_s = 2;
  std::string cerr;
  EXPECT_EQ(tr::send(other, srv.port(), {{"a", SZ_DTYPE_BF16, kv.data(), 64}}, o, nullptr, &cerr), SZ_ERROR_IO)
      << "reached the server through " << other;
  EXPECT_EQ(srv.join(), SZ_ERROR_IO) << "the server must not have accepted anyone: " << srv.error;
}

TEST(TransferSecurity, TokenMismatchIsRefused) {
  TempDir d;
  Corpus c;
  tr::ServeOptions so = to_dir(d);
  so.token = "correct horse battery staple";
  for (const std::string& bad : {std::string(""), std::string("wrong"), so.token + "x", so.token.substr(0, 5)}) {
    tr::SendOptions o = small_chunks(false);
    o.token = bad;
    Outcome r = run_session(so, c.tensors, o);
    EXPECT_EQ(r.server, SZ_ERROR_INVALID_ARGUMENT) << r.server_error;
    EXPECT_EQ(r.sender, SZ_ERROR_INVALID_ARGUMENT) << r.sender_error;
    EXPECT_NE(r.sender_error.find("token"), std::string::npos) << r.sender_error;
    EXPECT_TRUE(d.list().empty());
  }
  tr::SendOptions o = small_chunks(false);
  o.token = so.token;
  Outcome r = run_session(so, c.tensors, o);
  EXPECT_EQ(r.server, SZ_OK) << r.server_error;
  EXPECT_EQ(r.sender, SZ_OK) << r.sender_error;
  c.expect_in(d);
}

// A dtype byte that names no dtype is refused with SZ_ERROR_UNSUPPORTED_DTYPE, answered to the peer (the fuzzer
// found it being loaded into the enum before the check).
TEST(TransferSecurity, UnknownDtypeByteIsRefused) {
  tr::ServeOptions so;
  so.discard = true;
  so.accept_timeout_s = 10;
  ServingOne srv(so);
  {
    RawPeer peer(srv.port());
    ASSERT_TRUE(peer.ok());
    peer.send_bytes(hello_message(9, "", "t", 61));
    std::vector<uint8_t> address;
    std::string text;
    EXPECT_EQ(peer.read_ack(&address, &text), SZ_ERROR_UNSUPPORTED_DTYPE) << text;
    EXPECT_TRUE(address.empty());
  }
  EXPECT_EQ(srv.join(), SZ_ERROR_UNSUPPORTED_DTYPE) << srv.error;
}

TEST(TransferSecurity, TokenCompare) {
  EXPECT_TRUE(tr::token_equal("abc", "abc"));
  EXPECT_FALSE(tr::token_equal("abc", "abd"));
  EXPECT_FALSE(tr::token_equal("abc", "ab"));
  EXPECT_FALSE(tr::token_equal("abc", "abcd"));
  EXPECT_FALSE(tr::token_equal("abc", std::string("abc\0", 4)));
  EXPECT_TRUE(tr::token_equal("", ""));
}

TEST(TransferSecurity, NamesThatWouldEscapeTheOutputDirectoryAreRefused) {
  TempDir parent;
  const fs::path out = parent.path / "out";
  fs::create_directory(out);
  const std::vector<std::string> bad = {"../evil", "..", ".", "/tmp/evil", "a/b", "a\\b", std::string("a\0b", 3),
                                        "", ".hidden", std::string(300, 'x'), "tab\there"};
  const auto& kv = kv_slice();
  for (const auto& name : bad) {
    EXPECT_FALSE(tr::valid_tensor_name(name));
    tr::ServeOptions so;
    so.out_dir = out.string();
    tr::SendOptions o;
    o.faults.unchecked_names = true;  // the sender would refuse them itself; make the receiver decide
    o.timeout_s = 5;
    Outcome r = run_session(so, {{"fine.bin", SZ_DTYPE_BF16, kv.data(), 1024}, {name, SZ_DTYPE_BF16, kv.data(), 1024}},
                            o);
    EXPECT_EQ(r.server, SZ_ERROR_INVALID_ARGUMENT) << "name of " << name.size() << " bytes: " << r.server_error;
    EXPECT_NE(r.sender, SZ_OK);
    EXPECT_TRUE(fs::is_empty(out)) << "refused before anything was written";
    std::vector<std::string> in_parent;
    for (const auto& e : fs::directory_iterator(parent.path)) in_parent.push_back(e.path().filename().string());
    EXPECT_EQ(in_parent, std::vector<std::string>{"out"});
  }
  EXPECT_FALSE(fs::exists("/tmp/evil"));
  // And the sender refuses them by itself.
  tr::SendOptions o;
  std::string err;
  EXPECT_EQ(tr::send("127.0.0.1", 1, {{"../x", SZ_DTYPE_BF16, kv.data(), 2}}, o, nullptr, &err),
            SZ_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(tr::valid_tensor_name("model.layers.0.k_proj"));
}

TEST(TransferSecurity, OversizeClaimsAreRefusedBeforeAllocation) {
  TempDir d;
  const auto& kv = kv_slice();
  const std::vector<tr::Tensor> one = {{"t.bin", SZ_DTYPE_BF16, kv.data(), 4096}};
  struct Case {
    const char* what;
    std::function<void(tr::ServeOptions&, tr::SendOptions&)> set;
    std::vector<tr::Tensor> tensors;
  };
  const std::vector<Case> cases = {
      {"a tensor of 2^60 bytes", [](tr::ServeOptions&, tr::SendOptions& o) { o.faults.announce_size = 1ull << 60; },
       one},
      {"a tensor over max_tensor_bytes",
       [](tr::ServeOptions& s, tr::SendOptions&) { s.max_tensor_bytes = 1000; }, one},
      {"more tensors than max_tensors",
       [](tr::ServeOptions& s, tr::SendOptions&) { s.max_tensors = 1; },
       {{"a", SZ_DTYPE_BF16, kv.data(), 64}, {"b", SZ_DTYPE_BF16, kv.data(), 64}}},
      {"more bytes than max_total_bytes",
       [](tr::ServeOptions& s, tr::SendOptions&) { s.max_total_bytes = 100; },
       {{"a", SZ_DTYPE_BF16, kv.data(), 64}, {"b", SZ_DTYPE_BF16, kv.data(), 64}}},
      {"a window over max_window", [](tr::ServeOptions& s, tr::SendOptions& o) { s.max_window = 4; o.window = 5; },
       one},
      {"messages over max_message_bytes",  // a tensor long enough to fill messages of 2^26 values
       [](tr::ServeOptions&, tr::SendOptions& o) {
         o.chunk_values = 1u << 26;
         o.faults.announce_size = 1ull << 30;
       },
       one},
      {"buffers over max_session_bytes",  // 8 slots of 2^18-value messages: 4 MiB
       [](tr::ServeOptions& s, tr::SendOptions& o) {
         s.max_session_bytes = 1u << 20;
         o.chunk_values = 1u << 18;
         o.window = 8;
       },
       {{"a", SZ_DTYPE_BF16, kv.data(), kv.size()}}},
  };
  for (const auto& c : cases) {
    tr::ServeOptions so = to_dir(d);
    tr::SendOptions o;
    o.timeout_s = 5;
    c.set(so, o);
    Outcome r = run_session(so, c.tensors, o);
    EXPECT_EQ(r.server, SZ_ERROR_INVALID_ARGUMENT) << c.what << ": " << r.server_error;
    EXPECT_EQ(r.sender, SZ_ERROR_INVALID_ARGUMENT) << c.what << ": " << r.sender_error;
    EXPECT_TRUE(d.list().empty()) << c.what;
  }
}

// A peer that announces a large window and large messages for a small tensor gets buffers for that tensor only: the
// slots are no more than its messages and no larger than its values (a 125-byte handshake once made the receiver
// allocate window x the largest message, 4 GB).
TEST(TransferSecurity, SessionBuffersAreSizedByTheAnnouncedTensors) {
  TempDir d;
  const auto& kv = kv_slice();
  for (bool raw : {false, true}) {
    tr::SendOptions o;
    o.raw = raw;
    o.window = 64;
    o.chunk_values = 1u << 22;
    o.timeout_s = 10;
    const std::vector<tr::Tensor> one = {{raw ? "r.bin" : "c.bin", SZ_DTYPE_BF16, kv.data(), 4096}};
    Outcome r = run_session(to_dir(d), one, o);
    ASSERT_EQ(r.server, SZ_OK) << r.server_error;
    ASSERT_EQ(r.sender, SZ_OK) << r.sender_error;
    EXPECT_GT(r.session.buffer_bytes, 0u);
    EXPECT_LT(r.session.buffer_bytes, 64u << 10) << "raw " << raw << ": buffers for a 4 KiB tensor";
    EXPECT_EQ(read_file(d.path / one[0].name), std::vector<uint8_t>(kv.begin(), kv.begin() + 4096));
  }
}

// The receiver never replaces a file in its output directory unless told to (overwrite): the handshake is refused
// and the file is left as it was; with overwrite the tensor replaces it.
TEST(TransferSecurity, ExistingFilesAreNotOverwritten) {
  TempDir d;
  const auto& kv = kv_slice();
  {
    std::ofstream f(d.path / "t.bin", std::ios::binary);
    f << "keep me";
  }
  const std::vector<tr::Tensor> one = {{"t.bin", SZ_DTYPE_BF16, kv.data(), 8192}};
  tr::SendOptions o;
  o.timeout_s = 5;
  Outcome r = run_session(to_dir(d), one, o);
  EXPECT_EQ(r.server, SZ_ERROR_INVALID_ARGUMENT) << r.server_error;
  EXPECT_EQ(r.sender, SZ_ERROR_INVALID_ARGUMENT) << r.sender_error;
  const auto kept = read_file(d.path / "t.bin");
  EXPECT_EQ(std::string(kept.begin(), kept.end()), "keep me");
  EXPECT_TRUE(no_partial_files(d));
  tr::ServeOptions so = to_dir(d);
  so.overwrite = true;
  r = run_session(so, one, o);
  ASSERT_EQ(r.server, SZ_OK) << r.server_error;
  EXPECT_EQ(read_file(d.path / "t.bin"), std::vector<uint8_t>(kv.begin(), kv.begin() + 8192));
}

// ---- hardening: hostile bytes, interfaces, several sessions ----------------------------------------------------------

namespace {

// A listening TCP socket of this process, as /proc/net/tcp{,6} shows it.
struct Listening {
  bool v6 = false;
  std::string address_hex;  // e.g. 0100007F for 127.0.0.1
  uint16_t port = 0;
};

// Every listening TCP socket this process holds (matched by inode through /proc/self/fd); false when /proc cannot
// tell.
bool listening_sockets(std::vector<Listening>* out) {
  out->clear();
  std::set<std::string> inodes;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc/self/fd", ec)) {
    std::error_code lec;
    const std::string target = fs::read_symlink(e.path(), lec).string();
    if (!lec && target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  if (ec) return false;
  bool read_any = false;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    if (!in) continue;
    read_any = true;
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string sl, local, remote, state, queues, timer, retr, uid, timeout, inode;
      f >> sl >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
      if (state != "0A" || !inodes.count(inode)) continue;
      const size_t colon = local.find(':');
      Listening l;
      l.v6 = std::string(table).back() == '6';
      l.address_hex = local.substr(0, colon);
      l.port = (uint16_t)std::stoul(local.substr(colon + 1), nullptr, 16);
      out->push_back(l);
    }
  }
  return read_any;
}

// Connects to a listening socket of this process (loopback) and sends `bytes`, then closes. False if it could not
// connect.
bool throw_bytes(const Listening& l, const std::vector<uint8_t>& bytes) {
  const bool v6_loop = l.v6 && (l.address_hex == "00000000000000000000000001000000" ||
                                l.address_hex == "00000000000000000000000000000000");
  if (l.v6 && !v6_loop) return false;
  RawPeer peer(l.port, l.v6 ? "::1" : "127.0.0.1");
  if (!peer.ok()) return false;
  peer.send_bytes(bytes);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return true;
}

// What a hostile or careless peer might send: a header's worth of 0xff, a zero page and more, random bytes,
// truncated handshakes, a header that announces a huge payload, a message of the wrong type, a wrong token.
std::vector<std::vector<uint8_t>> hostile_inputs() {
  namespace proto = tr::proto;
  std::vector<std::vector<uint8_t>> in;
  in.push_back(std::vector<uint8_t>(16, 0xff));
  in.push_back(std::vector<uint8_t>(65536, 0));
  in.push_back(sztest::random_bytes(5000, 123));
  const std::vector<uint8_t> hello = hello_message(7, "not the token");
  in.push_back(std::vector<uint8_t>(hello.begin(), hello.begin() + 20));  // inside the header
  in.push_back(std::vector<uint8_t>(hello.begin(), hello.begin() + 60));  // inside the payload
  in.push_back(hello);                                                     // complete, wrong token
  {
    proto::Header h;
    h.type = proto::kHello;
    h.flags = proto::kFlagPayloadHash;
    h.payload_size = (uint64_t)1 << 40;
    std::vector<uint8_t> m(proto::kHeaderSize);
    proto::write_header(m.data(), h);
    in.push_back(m);
  }
  in.push_back(proto::encode_message(proto::kHelloAck, proto::encode_ack(0, "", {1, 2, 3}), true));
  {
    std::vector<uint8_t> flipped = hello;
    flipped[proto::kHeaderSize + 3] ^= 0x40;  // payload no longer matches its hash
    in.push_back(flipped);
  }
  return in;
}

// A server running serve() on its own thread; outcomes collected.
struct RunningServer {
  tr::Server server;
  std::thread thread;
  std::mutex mu;
  std::vector<tr::SessionOutcome> outcomes;
  sz_status result = SZ_ERROR_INTERNAL;
  explicit RunningServer(const tr::ServeOptions& so) {
    std::string err;
    EXPECT_EQ(server.open(so, &err), SZ_OK) << err;
    thread = std::thread([this] {
      std::string e;
      result = server.serve(
          [this](const tr::SessionOutcome& o) {
            std::lock_guard<std::mutex> lock(mu);
            outcomes.push_back(o);
          },
          &e);
    });
  }
  ~RunningServer() { finish(); }
  void finish() {
    if (!thread.joinable()) return;
    server.stop();
    thread.join();
  }
  size_t count(bool accepted, sz_status st) {
    std::lock_guard<std::mutex> lock(mu);
    size_t n = 0;
    for (const auto& o : outcomes) n += (o.accepted == accepted && o.status == st) ? 1 : 0;
    return n;
  }
};

}  // namespace

// Bytes thrown at every port this process listens on (the server's own, and the UCX transport's sockets of the
// session in progress and of its sender) neither crash the server nor disturb the session; afterwards it still
// serves a legitimate sender. A crash here fails the whole test binary.
TEST(TransferHardening, HostileBytesOnEveryListeningPortLeaveTheServerServing) {
  const auto& kv = kv_slice();
  tr::ServeOptions so;
  so.discard = true;
  so.token = "the token";
  so.max_sessions = 2;
  so.handshake_timeout_s = 1;
  so.timeout_s = 10;
  RunningServer rs(so);
  const uint16_t port = rs.server.port();
  tr::SendOptions o;
  o.token = so.token;
  o.timeout_s = 20;
  o.chunk_values = 1u << 15;
  o.window = 2;
  o.rate_bytes_per_s = 1.0e6;  // about 1.3 s: the session is running while the bytes fly
  sz_status slow = SZ_ERROR_INTERNAL;
  std::string slow_err;
  std::thread sender([&] { slow = tr::send("127.0.0.1", port, {{"slow", SZ_DTYPE_BF16, kv.data(), kv.size()}}, o,
                                           nullptr, &slow_err); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::vector<Listening> ls;
  const bool listed = listening_sockets(&ls);
  size_t hit = 0;
  const auto inputs = hostile_inputs();
  if (listed) {
    for (const auto& l : ls)
      for (const auto& b : inputs) {
        const double t0 = now_s();
        hit += throw_bytes(l, b) ? 1 : 0;
        if (now_s() - t0 > 0.2) fprintf(stderr, "slow: port %u, %zu bytes: %.2f s\n", l.port, b.size(), now_s() - t0);
      }
  } else {
    for (const auto& b : inputs) hit += throw_bytes({false, "0100007F", port}, b) ? 1 : 0;
  }
  fprintf(stderr, "[ info     ] %zu listening sockets in this process, %zu hostile connections\n", ls.size(), hit);
  EXPECT_GE(hit, inputs.size());
  sender.join();
  EXPECT_EQ(slow, SZ_OK) << slow_err;
  tr::SendOptions fast;
  fast.token = so.token;
  std::string err;
  EXPECT_EQ(tr::send("127.0.0.1", port, {{"after", SZ_DTYPE_BF16, kv.data(), kv.size()}}, fast, nullptr, &err), SZ_OK)
      << err;
  rs.finish();
  EXPECT_EQ(rs.result, SZ_OK);
  EXPECT_EQ(rs.count(true, SZ_OK), 2u);
  EXPECT_GE(rs.count(false, SZ_ERROR_INVALID_ARGUMENT), 1u);  // the wrong token was refused, said so
}

// With address 127.0.0.1 every socket the process listens on (the server's, the session's UCX worker's, the
// sender's) is bound to 127.0.0.1.
TEST(TransferHardening, ListensOnlyOnTheRequestedInterface) {
  std::vector<Listening> before;
  if (!listening_sockets(&before)) GTEST_SKIP() << "/proc does not show this process's sockets";
  const auto& kv = kv_slice();
  tr::ServeOptions so;
  so.discard = true;
  so.address = "127.0.0.1";
  RunningServer rs(so);
  tr::SendOptions o;
  o.rate_bytes_per_s = 2.0e6;
  o.chunk_values = 1u << 15;
  o.window = 2;
  sz_status st = SZ_ERROR_INTERNAL;
  std::string err;
  std::thread sender([&] { st = tr::send("127.0.0.1", rs.server.port(), {{"x", SZ_DTYPE_BF16, kv.data(), kv.size()}},
                                         o, nullptr, &err); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::vector<Listening> during;
  ASSERT_TRUE(listening_sockets(&during));
  sender.join();
  ASSERT_EQ(st, SZ_OK) << err;
  EXPECT_GE(during.size(), 1u);
  for (const auto& l : during) {
    EXPECT_FALSE(l.v6) << "an IPv6 socket on port " << l.port;
    EXPECT_EQ(l.address_hex, "0100007F") << "port " << l.port << " listens on " << l.address_hex;
  }
}

// Eight senders at once, each with its own tensors, all succeed and every file is bit-exact.
TEST(TransferSessions, EightConcurrentSendersAllSucceed) {
  TempDir d;
  const auto& kv = kv_slice();
  tr::ServeOptions so = to_dir(d);
  so.threads = 1;
  so.max_sessions = 8;
  RunningServer rs(so);
  const uint16_t port = rs.server.port();
  std::vector<sz_status> st(8, SZ_ERROR_INTERNAL);
  std::vector<std::string> err(8);
  std::vector<std::thread> senders;
  for (int i = 0; i < 8; ++i) {
    senders.emplace_back([&, i] {
      tr::SendOptions o;
      o.raw = i % 2 == 1;
      o.chunk_values = 1u << 16;
      o.window = 2;
      o.timeout_s = 30;
      st[i] = tr::send("127.0.0.1", port, {{"s" + std::to_string(i), SZ_DTYPE_BF16, kv.data(), kv.size()}}, o,
                       nullptr, &err[i]);
    });
  }
  for (auto& t : senders) t.join();
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(st[i], SZ_OK) << "sender " << i << ": " << err[i];
    EXPECT_EQ(read_file(d.path / ("s" + std::to_string(i))), kv) << "sender " << i;
  }
  rs.finish();
  EXPECT_EQ(rs.count(true, SZ_OK), 8u);
  EXPECT_TRUE(no_partial_files(d));
}

// With one session allowed and a peer holding it, another peer is refused at once with a message that says why,
// instead of waiting; once the slot is free, a peer gets in.
TEST(TransferSessions, PeersBeyondTheSessionLimitAreRefusedAsBusyNotHung) {
  const auto& kv = kv_slice();
  tr::ServeOptions so;
  so.discard = true;
  so.max_sessions = 1;
  so.timeout_s = 2;  // the stalled holder loses its session after this
  RunningServer rs(so);
  const uint16_t port = rs.server.port();
  tr::SendOptions holder = small_chunks(true);
  holder.faults.stall_after_chunks = 1;
  holder.timeout_s = 20;
  sz_status hs = SZ_ERROR_INTERNAL;
  std::string herr;
  std::thread h([&] { hs = tr::send("127.0.0.1", port, {{"held", SZ_DTYPE_BF16, kv.data(), kv.size()}}, holder,
                                    nullptr, &herr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  tr::SendOptions o;
  o.timeout_s = 10;
  std::string err;
  const double t0 = now_s();
  EXPECT_EQ(tr::send("127.0.0.1", port, {{"second", SZ_DTYPE_BF16, kv.data(), 4096}}, o, nullptr, &err),
            SZ_ERROR_IO);
  EXPECT_LT(now_s() - t0, 1.5) << "refused, not left waiting";
  EXPECT_NE(err.find("busy"), std::string::npos) << err;
  EXPECT_NE(err.find("sessions"), std::string::npos) << err;
  h.join();
  EXPECT_NE(hs, SZ_OK) << "the stalled holder lost its session";
  // the slot is free once the server has ended that session (it lingers briefly for the peer to hang up)
  for (double t1 = now_s(); rs.count(true, SZ_ERROR_IO) == 0 && now_s() - t1 < 5;)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(tr::send("127.0.0.1", port, {{"third", SZ_DTYPE_BF16, kv.data(), 4096}}, o, nullptr, &err), SZ_OK) << err;
}

// The buffers of all sessions together stay within max_server_bytes: a session that would pass it is refused as
// busy while another holds the memory.
TEST(TransferSessions, GlobalMemoryCapRefusesASessionThatWouldPassIt) {
  const auto& kv = kv_slice();
  tr::ServeOptions so;
  so.discard = true;
  so.max_sessions = 4;
  so.timeout_s = 2;
  // a raw session of 2 slots of 2^15 BF16 values holds 2 x (48 + 65536) bytes; two do not fit
  so.max_server_bytes = 200000;
  RunningServer rs(so);
  const uint16_t port = rs.server.port();
  tr::SendOptions holder;
  holder.raw = true;
  holder.chunk_values = 1u << 15;
  holder.window = 2;
  holder.faults.stall_after_chunks = 1;
  holder.timeout_s = 20;
  sz_status hs = SZ_ERROR_INTERNAL;
  std::string herr;
  std::thread h([&] { hs = tr::send("127.0.0.1", port, {{"held", SZ_DTYPE_BF16, kv.data(), kv.size()}}, holder,
                                    nullptr, &herr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  tr::SendOptions o = holder;
  o.faults = tr::SendFaults();
  o.timeout_s = 10;
  std::string err;
  EXPECT_EQ(tr::send("127.0.0.1", port, {{"second", SZ_DTYPE_BF16, kv.data(), kv.size()}}, o, nullptr, &err),
            SZ_ERROR_IO);
  EXPECT_NE(err.find("busy"), std::string::npos) << err;
  EXPECT_NE(err.find("bytes"), std::string::npos) << err;
  // a small session fits next to the holder
  EXPECT_EQ(tr::send("127.0.0.1", port, {{"small", SZ_DTYPE_BF16, kv.data(), 4096}}, o, nullptr, &err), SZ_OK) << err;
  h.join();
  EXPECT_NE(hs, SZ_OK);
}

// A peer that keeps sending, slowly enough never to stall, still loses its session at max_session_seconds.
TEST(TransferSessions, SessionTimeLimitEndsASteadySender) {
  const auto& kv = kv_slice();
  tr::ServeOptions so;
  so.discard = true;
  so.max_session_seconds = 1;
  so.accept_timeout_s = 20;
  ServingOne srv(so);
  std::string err;
  tr::SendOptions o;
  o.raw = true;
  o.chunk_values = 4096;
  o.window = 2;
  o.rate_bytes_per_s = 200e3;  // 1.8 MB in about 9 s, a message every 40 ms
  o.timeout_s = 10;
  const double t0 = now_s();
  const sz_status st = tr::send("127.0.0.1", srv.port(), {{"slow", SZ_DTYPE_BF16, kv.data(), kv.size()}}, o,
                                nullptr, &err);
  EXPECT_EQ(srv.join(), SZ_ERROR_IO) << srv.error;
  EXPECT_EQ(st, SZ_ERROR_IO) << err;
  EXPECT_NE(err.find("time limit"), std::string::npos) << err;
  EXPECT_LT(now_s() - t0, 4.0);
}

// A peer that connects and says nothing is dropped after the handshake timeout.
TEST(TransferSessions, SilentPeerIsDroppedAfterTheHandshakeTimeout) {
  tr::ServeOptions so;
  so.discard = true;
  so.handshake_timeout_s = 0.5;
  so.accept_timeout_s = 10;
  tr::Server server;
  std::string err;
  ASSERT_EQ(server.open(so, &err), SZ_OK) << err;
  RawPeer silent(server.port());
  ASSERT_TRUE(silent.ok());
  const double t0 = now_s();
  tr::SessionStats s;
  EXPECT_EQ(server.serve_one(&s, &err), SZ_ERROR_IO);
  EXPECT_NE(err.find("no complete handshake"), std::string::npos) << err;
  EXPECT_LT(now_s() - t0, 3.0);
}

// ---- GPU-resident tensors (skipped, saying so, where no CUDA device is visible) -------------------------------------

namespace {

#define SKIP_WITHOUT_GPU()                                                  \
  do {                                                                      \
    std::string why_;                                                       \
    if (!tr::gpu::available(&why_)) GTEST_SKIP() << "no GPU: " << why_;     \
  } while (0)

// The Corpus's tensors copied to device memory.
struct DeviceCorpus {
  Corpus host;
  std::vector<tr::gpu::Mem> mem;
  std::vector<tr::Tensor> tensors;
  DeviceCorpus() {
    mem.resize(host.tensors.size());
    for (size_t i = 0; i < host.tensors.size(); ++i) {
      const tr::Tensor& h = host.tensors[i];
      std::string why;
      EXPECT_EQ(mem[i].alloc(tr::gpu::Mem::kDevice, h.size, &why), SZ_OK) << why;
      EXPECT_EQ(tr::gpu::copy(mem[i].get(), h.data, h.size, &why), SZ_OK) << why;
      tr::Tensor d = h;
      d.data = mem[i].get();
      d.device = true;
      tensors.push_back(d);
    }
  }
};

// Device destinations the receiver decodes into, handed out by name; checked against the host corpus.
struct DeviceSink {
  std::map<std::string, tr::gpu::Mem> mem;
  std::function<void*(const std::string&, sz_dtype, uint64_t)> fn() {
    return [this](const std::string& name, sz_dtype, uint64_t size) -> void* {
      std::string why;
      if (mem[name].alloc(tr::gpu::Mem::kDevice, size, &why) != SZ_OK) return nullptr;
      return mem[name].get();
    };
  }
  void expect_equal(const Corpus& c) {
    for (const auto& t : c.tensors) {
      if (t.size == 0) continue;  // an empty tensor gets no destination
      ASSERT_TRUE(mem.count(t.name)) << t.name << " never got a destination";
      std::vector<uint8_t> back(t.size);
      std::string why;
      ASSERT_EQ(tr::gpu::copy(back.data(), mem[t.name].get(), t.size, &why), SZ_OK) << why;
      EXPECT_EQ(memcmp(back.data(), t.data, t.size), 0) << t.name << " differs after the GPU transfer";
    }
  }
};

std::vector<tr::GpuPath> gpu_paths() {
  std::vector<tr::GpuPath> p = {tr::GpuPath::kStaged};
  if (tr::Ucx::cuda_memory_supported()) p.push_back(tr::GpuPath::kDirect);
  static bool said = false;
  if (!said) {
    said = true;
    fprintf(stderr, "[ info     ] UCX %s CUDA memory: GPU paths tested: %s\n",
            p.size() > 1 ? "reports" : "does not report", p.size() > 1 ? "staged, direct" : "staged");
  }
  return p;
}

const char* path_name(tr::GpuPath p) { return p == tr::GpuPath::kDirect ? "direct" : "staged"; }

}  // namespace

TEST(TransferGpu, WithoutAGpuDeviceDataIsRefusedCleanly) {
  std::string why;
  if (tr::gpu::available(&why)) GTEST_SKIP() << "a GPU is present: this checks the refusal where there is none";
  Corpus c;
  std::vector<tr::Tensor> t = c.tensors;
  for (auto& x : t) x.device = true;
  std::string err;
  EXPECT_EQ(tr::send("127.0.0.1", 9, t, small_chunks(false), nullptr, &err), SZ_ERROR_NOT_SUPPORTED) << err;
  tr::ServeOptions so;
  so.discard = true;
  so.gpu = true;
  tr::Server server;
  EXPECT_EQ(server.open(so, &err), SZ_ERROR_NOT_SUPPORTED) << err;
}

TEST(TransferGpu, MixedHostAndDeviceTensorsAreRefused) {
  Corpus c;
  std::vector<tr::Tensor> t = c.tensors;
  t[0].device = true;
  std::string err;
  EXPECT_EQ(tr::send("127.0.0.1", 9, t, small_chunks(false), nullptr, &err), SZ_ERROR_INVALID_ARGUMENT) << err;
}

TEST(TransferGpu, DeviceToDeviceIsBitExactBothModesBothPaths) {
  SKIP_WITHOUT_GPU();
  DeviceCorpus dc;
  for (tr::GpuPath path : gpu_paths()) {
    for (bool raw : {false, true}) {
      SCOPED_TRACE(std::string(path_name(path)) + (raw ? " raw" : " compressed"));
      DeviceSink sink;
      tr::ServeOptions so;
      so.gpu = true;
      so.gpu_path = path;
      so.destination = sink.fn();
      so.threads = 2;
      so.timeout_s = 20;
      tr::SendOptions o = small_chunks(raw);
      o.gpu_path = path;
      o.timeout_s = 20;
      Outcome r = run_session(so, dc.tensors, o);
      ASSERT_EQ(r.sender, SZ_OK) << r.sender_error;
      ASSERT_EQ(r.server, SZ_OK) << r.server_error;
      EXPECT_TRUE(r.sent.gpu);
      EXPECT_EQ(r.sent.gpu_direct, path == tr::GpuPath::kDirect);
      EXPECT_TRUE(r.session.gpu);
      EXPECT_EQ(r.session.gpu_direct, path == tr::GpuPath::kDirect);
      EXPECT_EQ(r.session.tensors.size(), dc.tensors.size());
      if (!raw) {
        EXPECT_LT(r.sent.payload_bytes, r.sent.raw_bytes);
      }
      sink.expect_equal(dc.host);
    }
  }
}

TEST(TransferGpu, GpuAndCpuPeersInteroperateThroughFiles) {
  SKIP_WITHOUT_GPU();
  DeviceCorpus dc;
  for (tr::GpuPath path : gpu_paths()) {
    SCOPED_TRACE(path_name(path));
    {  // GPU sender -> CPU receiver
      TempDir d;
      tr::SendOptions o = small_chunks(false);
      o.gpu_path = path;
      Outcome r = run_session(to_dir(d), dc.tensors, o);
      ASSERT_EQ(r.sender, SZ_OK) << r.sender_error;
      ASSERT_EQ(r.server, SZ_OK) << r.server_error;
      dc.host.expect_in(d);
    }
    {  // CPU sender -> GPU receiver writing files from its own device buffers
      TempDir d;
      tr::ServeOptions so = to_dir(d);
      so.gpu = true;
      so.gpu_path = path;
      Outcome r = run_session(so, dc.host.tensors, small_chunks(false));
      ASSERT_EQ(r.sender, SZ_OK) << r.sender_error;
      ASSERT_EQ(r.server, SZ_OK) << r.server_error;
      dc.host.expect_in(d);
      EXPECT_EQ(d.list().size(), dc.host.tensors.size());
    }
  }
}

TEST(TransferGpu, CorruptedChunkIsDetectedOnTheGpu) {
  SKIP_WITHOUT_GPU();
  DeviceCorpus dc;
  for (tr::GpuPath path : gpu_paths()) {
    for (bool raw : {false, true}) {
      SCOPED_TRACE(std::string(path_name(path)) + (raw ? " raw" : " compressed"));
      TempDir d;
      tr::ServeOptions so = to_dir(d);
      so.gpu = true;
      so.gpu_path = path;
      tr::SendOptions o = small_chunks(raw);
      o.gpu_path = path;
      o.faults.tamper = [](uint64_t seq, uint8_t* p, size_t n) {
        if (seq == 2 && n > 2000) p[n / 2] ^= 0x10;
      };
      Outcome r = run_session(so, dc.tensors, o);
      EXPECT_EQ(r.server, SZ_ERROR_CHECKSUM) << r.server_error;
      EXPECT_NE(r.sender, SZ_OK);
      EXPECT_FALSE(fs::exists(d.path / "layer0.kv.bf16"));
      EXPECT_TRUE(no_partial_files(d));
    }
  }
}

TEST(TransferGpu, StalledSenderTimesOutTheGpuReceiverCleanly) {
  SKIP_WITHOUT_GPU();
  // The sender stalls after two messages (a peer that stops without closing): the GPU receiver must time out.
  DeviceCorpus dc;
  TempDir d;
  tr::ServeOptions so = to_dir(d);
  so.gpu = true;
  so.timeout_s = 2;
  tr::SendOptions o = small_chunks(false);
  o.faults.stall_after_chunks = 2;
  o.timeout_s = 4;
  const double t0 = now_s();
  Outcome r = run_session(so, dc.tensors, o);
  EXPECT_EQ(r.server, SZ_ERROR_IO) << r.server_error;
  EXPECT_NE(r.sender, SZ_OK);
  EXPECT_LT(now_s() - t0, 15.0);
  EXPECT_TRUE(no_partial_files(d));
}
