// test_transfer.cpp — the transfer library over real UCX on loopback (UCX_TLS set by ctest): bit-exact transfer of
// several tensors in both modes, interoperation through the handshake, integrity, peers that die or stall, and the
// receiver's security checks (token, names, sizes).
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "protocol.h"
#include "splitzip/transfer.hpp"
#include "test_util.h"
#include "gpu.h"
#include "ucx.h"

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

// Runs one session: a Server on a free loopback port in a thread, the sender in this thread.
Outcome run_session(tr::ServeOptions so, const std::vector<tr::Tensor>& tensors, const tr::SendOptions& opt) {
  Outcome o;
  so.port = 0;
  so.accept_timeout_s = 20;
  tr::Server server;
  std::string err;
  EXPECT_EQ(server.open(so, &err), SZ_OK) << err;
  const uint16_t port = server.port();
  std::thread t([&] { o.server = server.serve_one(&o.session, &o.server_error); });
  o.sender = tr::send("127.0.0.1", port, tensors, opt, &o.sent, &o.sender_error);
  t.join();
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

TEST(Transfer, RawAndCompressedSendersInteroperateWithOneServer) {
  TempDir d;
  Corpus c;
  tr::ServeOptions so = to_dir(d);
  so.accept_timeout_s = 20;
  tr::Server server;
  std::string err;
  ASSERT_EQ(server.open(so, &err), SZ_OK) << err;
  for (bool raw : {true, false, true}) {
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

TEST(Transfer, GarbageHandshakeIsRejected) {
  tr::ServeOptions so;
  so.discard = true;
  so.timeout_s = 5;
  so.accept_timeout_s = 20;
  tr::Server server;
  std::string err;
  ASSERT_EQ(server.open(so, &err), SZ_OK) << err;
  sz_status ss = SZ_ERROR_INTERNAL;
  std::string serr;
  std::thread t([&] {
    tr::SessionStats s;
    ss = server.serve_one(&s, &serr);
  });
  {
    tr::Ucx peer;
    ASSERT_EQ(peer.init(&err), SZ_OK) << err;
    ASSERT_EQ(peer.connect("127.0.0.1", server.port(), &err), SZ_OK) << err;
    const std::vector<uint8_t> junk = sztest::random_bytes(1000, 99);
    tr::Op op;
    ASSERT_EQ(peer.send(tr::proto::tag_of(tr::proto::kHello, 1), junk.data(), junk.size(), nullptr, 0, &op), SZ_OK);
    const double t0 = now_s();
    while (!op.done && now_s() - t0 < 5) peer.wait(0.01);
    peer.reap(&op);
    t.join();  // the server gives up on its own; the peer stays connected until here
  }
  EXPECT_EQ(ss, SZ_ERROR_CORRUPT) << serr;
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
  tr::Server server;
  std::string err;
  ASSERT_EQ(server.open(so, &err), SZ_OK) << err;
  sz_status ss = SZ_ERROR_INTERNAL;
  std::string serr;
  std::thread t([&] {
    tr::SessionStats s;
    ss = server.serve_one(&s, &serr);
  });
  {
    namespace proto = tr::proto;
    tr::Ucx peer;
    ASSERT_EQ(peer.init(&err), SZ_OK) << err;
    ASSERT_EQ(peer.connect("127.0.0.1", server.port(), &err), SZ_OK) << err;
    proto::Hello h;
    h.protocol_version = tr::kProtocolVersion;
    h.format_version = SZ_FORMAT_VERSION;
    h.mode = proto::kModeRaw;
    h.session = 42;
    h.chunk_values = 1024;
    h.window = 2;
    proto::TensorEntry e;
    e.name = "t";
    e.dtype = SZ_DTYPE_BF16;
    e.size = 4096;
    h.tensors.push_back(e);
    const std::vector<uint8_t> payload = proto::encode_hello(h);
    proto::Header hh;
    hh.type = proto::kHello;
    hh.flags = proto::kFlagPayloadHash;
    hh.payload_size = payload.size();
    hh.payload_hash = proto::h32(payload.data(), payload.size());
    uint8_t header[proto::kHeaderSize];
    proto::write_header(header, hh);
    tr::Op hello, ack, junk_op;
    std::vector<uint8_t> ack_buf(4096);
    ASSERT_EQ(peer.send(proto::tag_of(proto::kHello, 42), header, sizeof header, payload.data(), payload.size(), &hello),
              SZ_OK);
    ASSERT_EQ(peer.recv(proto::tag_of(proto::kTagToSender, 42), proto::kTagFull, ack_buf.data(), ack_buf.size(), &ack),
              SZ_OK);
    const double t0 = now_s();
    while (!(hello.done && ack.done) && now_s() - t0 < 5) peer.wait(0.01);
    ASSERT_TRUE(ack.done);
    proto::Header got;
    ASSERT_EQ(proto::read_header(ack_buf.data(), ack.length, &got), SZ_OK);
    EXPECT_EQ(got.type, proto::kHelloAck);
    peer.reap(&hello);
    peer.reap(&ack);
    // Now a "chunk" of the right size that is not a message at all.
    const std::vector<uint8_t> junk = sztest::random_bytes(proto::kHeaderSize + 2048, 5);
    ASSERT_EQ(peer.send(proto::tag_of(proto::kChunk, 42), junk.data(), junk.size(), nullptr, 0, &junk_op), SZ_OK);
    const double t1 = now_s();
    while (!junk_op.done && now_s() - t1 < 5) peer.wait(0.01);
    peer.reap(&junk_op);
    t.join();
  }
  EXPECT_EQ(ss, SZ_ERROR_BAD_MAGIC) << serr;
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
  tr::Server server;
  std::string err;
  ASSERT_EQ(server.open(so, &err), SZ_OK) << err;
  sz_status ss = SZ_ERROR_INTERNAL;
  std::thread t([&] {
    tr::SessionStats st;
    ss = server.serve_one(&st, &err);
  });
  const auto& kv = kv_slice();
  tr::SendOptions o;
  o.timeout_s = 2;
  std::string cerr;
  EXPECT_EQ(tr::send(other, server.port(), {{"a", SZ_DTYPE_BF16, kv.data(), 64}}, o, nullptr, &cerr), SZ_ERROR_IO)
      << "reached the server through " << other;
  t.join();
  EXPECT_EQ(ss, SZ_ERROR_IO) << "the server must not have accepted anyone: " << err;
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
  splitzip::transfer::Ucx probe;
  std::string err;
  if (probe.init(&err) == SZ_OK && probe.cuda_memory()) p.push_back(tr::GpuPath::kDirect);
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
      so.device_destination = sink.fn();
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
