// cmd_transfer.cpp — `splitzip serve` and `splitzip send`: a thin client of transfer/transfer.hpp.
//
//   splitzip serve [--listen ADDR:PORT] [--out DIR [--direct-io] | --discard] [--token T] [--max-tensor-bytes N]
//                  [--timeout S] [--max-sessions N] [--max-server-bytes N] [--session-timeout S] [--handshake-timeout S]
//                  [--once] [--threads N] [--port-file FILE]
//   splitzip send FILE... --to HOST:PORT [--raw | --adaptive] [--rate GB/s] [--threads N] [--token T] [--dtype D]
//                  [--chunk-values N] [--window N] [--timeout S]
//
// Files are sent as raw little-endian arrays of --dtype, named by their base name. The token may also come from the
// environment (SPLITZIP_TOKEN) so that it does not show in the process list.
#include "cmd_transfer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "splitzip/splitzip.h"
#include "splitzip/transfer.hpp"

namespace splitzip_cli {

namespace {

namespace tr = splitzip::transfer;

struct ServeArgs {
  std::string listen = "127.0.0.1:13370";
  std::string out_dir;
  bool discard = false;
  std::string token;
  std::string max_tensor_bytes = "64G";
  std::string max_session_bytes = "1G";
  std::string max_server_bytes = "4G";
  unsigned max_sessions = 4;
  double session_timeout_s = 3600;
  double handshake_timeout_s = 5;
  bool force = false;
  bool direct_io = false;
  double timeout_s = 30;
  bool once = false;
  unsigned threads = 1;
  std::string port_file;
  bool gpu = false;
  std::string gpu_path = "auto";
};

struct SendArgs {
  std::vector<std::string> files;
  std::string to;
  bool raw = false;
  bool adaptive = false;
  double rate_gbs = 0;
  unsigned threads = 1;
  std::string token;
  std::string dtype = "bf16";
  uint64_t chunk_values = 1u << 20;
  unsigned window = 8;
  double timeout_s = 30;
};

ServeArgs g_serve;
SendArgs g_send;
CLI::App* g_serve_app = nullptr;
CLI::App* g_send_app = nullptr;

int error_out(const std::string& msg, int code = 1) {
  fflush(stdout);
  fprintf(stderr, "splitzip: error: %s\n", msg.c_str());
  return code;
}

// "HOST:PORT", "[V6]:PORT", "HOST" (port = default_port) or ":PORT" (host = default_host).
bool split_host_port(const std::string& s, const std::string& default_host, int default_port, std::string* host,
                     uint16_t* port) {
  std::string h = s, p;
  if (!s.empty() && s[0] == '[') {
    const size_t close = s.find(']');
    if (close == std::string::npos) return false;
    h = s.substr(1, close - 1);
    if (close + 1 < s.size()) {
      if (s[close + 1] != ':') return false;
      p = s.substr(close + 2);
    }
  } else {
    const size_t colon = s.rfind(':');
    if (colon != std::string::npos) {
      if (s.find(':') != colon) return false;  // bare IPv6 needs brackets
      h = s.substr(0, colon);
      p = s.substr(colon + 1);
    }
  }
  if (h.empty()) h = default_host;
  if (p.empty()) {
    if (default_port < 0) return false;
    *port = (uint16_t)default_port;
  } else {
    char* end = nullptr;
    errno = 0;
    const unsigned long v = strtoul(p.c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || v > 65535) return false;
    *port = (uint16_t)v;
  }
  *host = h;
  return true;
}

// A byte count: digits with an optional K, M, G or T (powers of 1024).
bool parse_bytes(const std::string& s, uint64_t* out) {
  if (s.empty() || s[0] < '0' || s[0] > '9') return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = strtoull(s.c_str(), &end, 10);
  if (errno != 0) return false;
  unsigned shift = 0;
  std::string suffix(end);
  if (suffix == "K" || suffix == "k") shift = 10;
  else if (suffix == "M") shift = 20;
  else if (suffix == "G") shift = 30;
  else if (suffix == "T") shift = 40;
  else if (!suffix.empty()) return false;
  if (shift != 0 && v > (~0ull >> shift)) return false;
  *out = (uint64_t)v << shift;
  return true;
}

int run_serve() {
  const ServeArgs& a = g_serve;
  tr::ServeOptions o;
  if (!split_host_port(a.listen, "127.0.0.1", 13370, &o.address, &o.port))
    return error_out("--listen: expected ADDR:PORT, got '" + a.listen + "'", 2);
  if (a.discard == !a.out_dir.empty()) return error_out("give exactly one of --out DIR and --discard", 2);
  o.out_dir = a.out_dir;
  o.discard = a.discard;
  o.token = a.token;
  if (!parse_bytes(a.max_tensor_bytes, &o.max_tensor_bytes))
    return error_out("--max-tensor-bytes: expected a byte count such as 1073741824 or 1G", 2);
  if (!parse_bytes(a.max_session_bytes, &o.max_session_bytes))
    return error_out("--max-session-bytes: expected a byte count such as 268435456 or 256M", 2);
  if (!parse_bytes(a.max_server_bytes, &o.max_server_bytes))
    return error_out("--max-server-bytes: expected a byte count such as 4294967296 or 4G", 2);
  o.max_sessions = a.max_sessions;
  o.max_session_seconds = a.session_timeout_s;
  o.handshake_timeout_s = a.handshake_timeout_s;
  o.overwrite = a.force;
  o.direct_io = a.direct_io;
  o.timeout_s = a.timeout_s;
  o.threads = a.threads;
  o.gpu = a.gpu;
  o.gpu_path = a.gpu_path == "direct" ? tr::GpuPath::kDirect
               : a.gpu_path == "staged" ? tr::GpuPath::kStaged
                                        : tr::GpuPath::kAuto;
  tr::Server server;
  std::string err;
  sz_status st = server.open(o, &err);
  if (st != SZ_OK) return error_out(err);
  if (!a.port_file.empty()) {
    const std::string tmp = a.port_file + ".tmp";
    FILE* f = fopen(tmp.c_str(), "w");
    if (f == nullptr || fprintf(f, "%u\n", (unsigned)server.port()) < 0 || fclose(f) != 0 ||
        rename(tmp.c_str(), a.port_file.c_str()) != 0)
      return error_out("cannot write --port-file " + a.port_file);
  }
  printf("listening on %s:%u\n", o.address.c_str(), (unsigned)server.port());
  fflush(stdout);
  auto report = [](sz_status status, const std::string& error, const tr::SessionStats& s) {
    if (status != SZ_OK) {
      fprintf(stderr, "splitzip: error: %s (%s)\n", error.c_str(), sz_status_name(status));
      return;
    }
    for (const auto& t : s.tensors)
      printf("received %s: %llu bytes %s%s\n", t.name.c_str(), (unsigned long long)t.size,
             t.path.empty() ? "(verified, discarded)" : "-> ", t.path.c_str());
    printf("session: %zu tensors, %llu bytes, %llu on the wire (%s), %.3f s, %.3f GB/s\n", s.tensors.size(),
           (unsigned long long)s.raw_bytes, (unsigned long long)s.wire_bytes, s.raw ? "raw" : "compressed",
           s.seconds, s.seconds > 0 ? (double)s.raw_bytes / s.seconds / 1e9 : 0.0);
    fflush(stdout);
  };
  if (a.once) {
    tr::SessionStats s;
    st = server.serve_one(&s, &err);
    report(st, err, s);
    return st == SZ_OK ? 0 : 1;
  }
  // Sessions run concurrently (--max-sessions); each outcome is reported as it ends. Runs until killed.
  st = server.serve([&](const tr::SessionOutcome& oc) { report(oc.status, oc.error, oc.stats); }, &err);
  if (st != SZ_OK) return error_out(err);
  return 0;
}

struct Mapped {
  void* p = nullptr;
  size_t n = 0;
  ~Mapped() {
    if (p != nullptr && p != MAP_FAILED) munmap(p, n);
  }
};

int run_send() {
  const SendArgs& a = g_send;
  std::string host;
  uint16_t port = 0;
  if (!split_host_port(a.to, "127.0.0.1", -1, &host, &port)) return error_out("--to: expected HOST:PORT", 2);
  sz_dtype dtype;
  if (sz_dtype_from_name(a.dtype.c_str(), &dtype) != SZ_OK) return error_out("--dtype: unknown dtype " + a.dtype, 2);
  if (a.rate_gbs < 0) return error_out("--rate must not be negative", 2);
  std::vector<Mapped> maps(a.files.size());
  std::vector<tr::Tensor> tensors;
  for (size_t i = 0; i < a.files.size(); ++i) {
    const std::string& f = a.files[i];
    const int fd = open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return error_out("cannot open " + f + ": " + strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      close(fd);
      return error_out(f + " is not a regular file");
    }
    maps[i].n = (size_t)st.st_size;
    if (maps[i].n > 0) {
      maps[i].p = mmap(nullptr, maps[i].n, PROT_READ, MAP_PRIVATE, fd, 0);
      if (maps[i].p == MAP_FAILED) {
        close(fd);
        return error_out("cannot map " + f + ": " + strerror(errno));
      }
      madvise(maps[i].p, maps[i].n, MADV_SEQUENTIAL);
    }
    close(fd);
    tr::Tensor t;
    const size_t slash = f.find_last_of('/');
    t.name = slash == std::string::npos ? f : f.substr(slash + 1);
    t.dtype = dtype;
    t.data = maps[i].p;
    t.size = maps[i].n;
    tensors.push_back(t);
  }
  tr::SendOptions o;
  o.raw = a.raw;
  o.adaptive = a.adaptive;
  o.rate_bytes_per_s = a.rate_gbs * 1e9;
  o.threads = a.threads;
  o.token = a.token;
  o.chunk_values = a.chunk_values;
  o.window = a.window;
  o.timeout_s = a.timeout_s;
  tr::SendStats s;
  std::string err;
  const sz_status st = tr::send(host, port, tensors, o, &s, &err);
  if (st != SZ_OK) return error_out(err + " (" + sz_status_name(st) + ")");
  const std::string mode = a.raw        ? std::string("raw")
                           : a.adaptive ? "adaptive, " + std::to_string(s.raw_messages) + " of " +
                                              std::to_string(s.messages) + " messages raw"
                                        : std::string("compressed");
  printf("sent %zu tensors, %llu bytes as %llu on the wire (%s, ratio %.4f) in %.3f s: %.3f GB/s of tensor data\n",
         tensors.size(), (unsigned long long)s.raw_bytes, (unsigned long long)s.wire_bytes,
         mode.c_str(), s.wire_bytes ? (double)s.raw_bytes / (double)s.wire_bytes : 0.0, s.seconds,
         s.seconds > 0 ? (double)s.raw_bytes / s.seconds / 1e9 : 0.0);
  return 0;
}

}  // namespace

void add_transfer_commands(CLI::App& app) {
  CLI::App* sv = app.add_subcommand("serve", "Receive tensors over UCX (binds to 127.0.0.1 unless --listen says otherwise)");
  sv->add_option("--listen", g_serve.listen, "ADDR:PORT to listen on (port 0 = any free port)")->capture_default_str();
  sv->add_option("--out", g_serve.out_dir, "Directory for received tensors (written only when complete)");
  sv->add_flag("--discard", g_serve.discard, "Verify received tensors, then drop them");
  sv->add_option("--token", g_serve.token, "Shared token that peers must present")->envname("SPLITZIP_TOKEN");
  sv->add_option("--max-tensor-bytes", g_serve.max_tensor_bytes, "Largest tensor a peer may announce (K/M/G/T)")
      ->capture_default_str();
  sv->add_option("--max-session-bytes", g_serve.max_session_bytes,
                 "Most a session may allocate for message buffers (K/M/G/T); larger handshakes are refused")
      ->capture_default_str();
  sv->add_option("--max-server-bytes", g_serve.max_server_bytes,
                 "Most all sessions together may allocate for message buffers (K/M/G/T); a peer that would pass it "
                 "is refused as busy")
      ->capture_default_str();
  sv->add_option("--max-sessions", g_serve.max_sessions, "Sessions at once; more peers are refused as busy")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  sv->add_option("--session-timeout", g_serve.session_timeout_s,
                 "Seconds a session may last in all, however steadily the peer sends (0 = no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sv->add_option("--handshake-timeout", g_serve.handshake_timeout_s,
                 "Seconds a peer has to send its handshake after connecting")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sv->add_flag("-f,--force", g_serve.force, "Replace files of the same name in --out (else such a peer is refused)");
  sv->add_flag("--direct-io", g_serve.direct_io,
               "Write --out files with direct I/O, past the page cache (where the file system and the chunk size "
               "allow; else buffered)");
  sv->add_option("--timeout", g_serve.timeout_s, "Seconds without progress before a session fails")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sv->add_flag("--once", g_serve.once, "Serve one session, then exit (status 0 only if it succeeded)");
  sv->add_option("--threads", g_serve.threads, "Codec threads (0 = one per hardware thread)")->capture_default_str();
  sv->add_option("--port-file", g_serve.port_file, "Write the bound port to this file once listening");
  sv->add_flag("--gpu", g_serve.gpu, "Receive into GPU memory and decode there (CUDA build and a GPU needed)");
  sv->add_option("--gpu-path", g_serve.gpu_path, "With --gpu: auto, direct (UCX into device memory) or staged")
      ->check(CLI::IsMember({"auto", "direct", "staged"}))
      ->capture_default_str();
  g_serve_app = sv;

  CLI::App* sd = app.add_subcommand("send", "Send raw tensor files to a 'splitzip serve' over UCX");
  sd->add_option("files", g_send.files, "Files of raw little-endian values (named by their base name)")
      ->required()
      ->check(CLI::ExistingFile);
  sd->add_option("--to", g_send.to, "HOST:PORT of the receiver")->required();
  sd->add_flag("--raw", g_send.raw, "Send uncompressed through the same pipeline");
  sd->add_flag("--adaptive", g_send.adaptive,
               "Compressed, but send a message raw where compressing it would not pay at this link's rate");
  sd->add_option("--rate", g_send.rate_gbs, "Emulate a link of this many GB/s of wire bytes (0 = no cap)")
      ->capture_default_str();
  sd->add_option("--threads", g_send.threads, "Codec threads (0 = one per hardware thread)")->capture_default_str();
  sd->add_option("--token", g_send.token, "Shared token for the receiver")->envname("SPLITZIP_TOKEN");
  sd->add_option("--dtype", g_send.dtype, "Value type of the files")->capture_default_str();
  sd->add_option("--chunk-values", g_send.chunk_values, "Values per message")->capture_default_str();
  sd->add_option("--window", g_send.window, "Messages in flight")->capture_default_str();
  sd->add_option("--timeout", g_send.timeout_s, "Seconds without progress before the transfer fails")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  g_send_app = sd;
}

bool run_transfer_command(CLI::App& app, int* exit_code) {
  (void)app;
  if (g_serve_app != nullptr && g_serve_app->parsed()) {
    *exit_code = run_serve();
    return true;
  }
  if (g_send_app != nullptr && g_send_app->parsed()) {
    *exit_code = run_send();
    return true;
  }
  return false;
}

}  // namespace splitzip_cli
