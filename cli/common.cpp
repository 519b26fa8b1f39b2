// common.cpp — errors, buffers, input reading, atomic output files and the progress line (see common.h).
#include "common.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

namespace splitzip_cli {

// ---- errors ----------------------------------------------------------------------------------------------------

std::string status_text(sz_status status) {
  std::string s = sz_status_name(status);
  const char* message = sz_status_message(status);
  if (message != nullptr && message[0] != '\0') s += std::string(" (") + message + ")";
  return s;
}

void check_status(sz_status status, const std::string& context) {
  if (status != SZ_OK) throw CliError(context + ": " + status_text(status));
}

static std::string errno_text(int err) { return std::strerror(err); }

// ---- buffers ---------------------------------------------------------------------------------------------------

Buffer::Buffer(size_t size) : size_(size) {
  if (size != 0) {
    data_.reset(new (std::nothrow) uint8_t[size]);
    if (!data_) throw CliError("out of memory allocating " + format_bytes(size));
  }
}

void Buffer::shrink(size_t new_size) {
  if (new_size < size_) size_ = new_size;
}

// ---- input -----------------------------------------------------------------------------------------------------

std::string display_name(const std::string& path) { return path == "-" ? std::string("stdin") : printable_name(path); }

std::string printable_name(const std::string& name) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(name.size());
  auto escape = [&](unsigned char c) {
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  };
  const auto* p = reinterpret_cast<const unsigned char*>(name.data());
  const size_t n = name.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f || c == '\\') {
        escape(c);
      } else {
        out += char(c);
      }
      ++i;
      continue;
    }
    // A UTF-8 sequence: its length from the lead byte, then continuation bytes, no overlong forms, no surrogates,
    // nothing past U+10FFFF.
    size_t len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? (c <= 0xEF ? 3 : 0) : c >= 0xC2 ? 2 : 0;
    uint32_t cp = len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    bool ok = len != 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      ok = (p[i + k] & 0xC0) == 0x80;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (ok && len == 3) ok = cp >= 0x800 && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (ok && len == 4) ok = cp >= 0x10000 && cp <= 0x10FFFF;
    if (!ok || (cp >= 0x80 && cp <= 0x9F)) {  // invalid, or a C1 control (CSI, OSC, ...)
      for (size_t k = 0; k < (ok ? len : 1); ++k) escape(p[i + k]);
      i += ok ? len : 1;
      continue;
    }
    out.append(name, i, len);
    i += len;
  }
  return out;
}

static bool read_fd_all(int fd, Buffer* out, uint64_t size_hint, Progress* progress, int* err) {
  // Known size (a regular file): one buffer of exactly that size, plus a check that the file did not grow.
  if (size_hint != 0) {
    Buffer buf(size_hint);
    size_t got = 0;
    while (got < size_hint) {
      size_t want = std::min<size_t>(size_hint - got, size_t(1) << 24);
      ssize_t r = ::read(fd, buf.data() + got, want);
      if (r < 0) {
        if (errno == EINTR) continue;
        *err = errno;
        return false;
      }
      if (r == 0) break;
      got += size_t(r);
      if (progress) progress->advance(uint64_t(r));
    }
    buf.shrink(got);
    uint8_t probe;
    ssize_t extra = ::read(fd, &probe, 1);
    if (extra <= 0) {
      *out = std::move(buf);
      return true;
    }
    // The file grew while we read it: fall back to the growing reader below, keeping what we have.
    std::vector<uint8_t> rest(buf.data(), buf.data() + got);
    rest.push_back(probe);
    std::vector<uint8_t> block(size_t(1) << 20);
    for (;;) {
      ssize_t r = ::read(fd, block.data(), block.size());
      if (r < 0) {
        if (errno == EINTR) continue;
        *err = errno;
        return false;
      }
      if (r == 0) break;
      rest.insert(rest.end(), block.data(), block.data() + r);
    }
    Buffer all(rest.size());
    if (!rest.empty()) std::memcpy(all.data(), rest.data(), rest.size());
    *out = std::move(all);
    return true;
  }
  // Unknown size (a pipe): grow geometrically.
  std::vector<uint8_t> data;
  std::vector<uint8_t> block(size_t(1) << 20);
  for (;;) {
    ssize_t r = ::read(fd, block.data(), block.size());
    if (r < 0) {
      if (errno == EINTR) continue;
      *err = errno;
      return false;
    }
    if (r == 0) break;
    data.insert(data.end(), block.data(), block.data() + r);
    if (progress) progress->advance(uint64_t(r));
  }
  Buffer all(data.size());
  if (!data.empty()) std::memcpy(all.data(), data.data(), data.size());
  *out = std::move(all);
  return true;
}

Buffer read_input(const std::string& path, Progress* progress) {
  Buffer out;
  int err = 0;
  if (path == "-") {
    struct stat st;
    uint64_t hint = 0;
    if (fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode)) hint = uint64_t(st.st_size);
    if (progress) progress->phase("reading", "stdin", hint);
    if (!read_fd_all(STDIN_FILENO, &out, hint, progress, &err))
      throw CliError("cannot read stdin: " + errno_text(err));
    return out;
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw CliError("cannot open '" + path + "': " + errno_text(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    err = errno;
    ::close(fd);
    throw CliError("cannot stat '" + path + "': " + errno_text(err));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw CliError("'" + path + "' is a directory");
  }
  uint64_t hint = S_ISREG(st.st_mode) ? uint64_t(st.st_size) : 0;
  if (progress) progress->phase("reading", path, hint);
  bool ok = read_fd_all(fd, &out, hint, progress, &err);
  ::close(fd);
  if (!ok) throw CliError("cannot read '" + path + "': " + errno_text(err));
  return out;
}

InputFile::InputFile(const std::string& path) : path_(path) {
  if (path == "-") {
    fd_ = STDIN_FILENO;
  } else {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw CliError("cannot open '" + display_name(path) + "': " + errno_text(errno));
    owned_ = true;
  }
  struct stat st;
  if (fstat(fd_, &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      if (owned_) ::close(fd_);
      throw CliError("'" + display_name(path) + "' is a directory");
    }
    if (S_ISREG(st.st_mode)) size_hint_ = uint64_t(st.st_size);
  }
}

InputFile::~InputFile() {
  if (owned_) ::close(fd_);
}

size_t InputFile::read_fd(uint8_t* dst, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd_, dst + got, std::min<size_t>(n - got, size_t(1) << 24));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw CliError("cannot read " + (path_ == "-" ? std::string("stdin") : "'" + display_name(path_) + "'") +
                     ": " + errno_text(errno));
    }
    if (r == 0) break;
    got += size_t(r);
  }
  return got;
}

const std::vector<uint8_t>& InputFile::peek(size_t n) {
  if (ahead_.size() < n) {
    const size_t have = ahead_.size();
    ahead_.resize(n);
    ahead_.resize(have + read_fd(ahead_.data() + have, n - have));
  }
  return ahead_;
}

size_t InputFile::read(uint8_t* dst, size_t n, Progress* progress) {
  size_t got = std::min(n, ahead_.size());
  if (got) {
    std::memcpy(dst, ahead_.data(), got);
    ahead_.erase(ahead_.begin(), ahead_.begin() + std::ptrdiff_t(got));
  }
  got += read_fd(dst + got, n - got);
  if (progress) progress->advance(got);
  return got;
}

void InputFile::read_at(uint64_t offset, uint8_t* dst, size_t n) const {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd_, dst + got, std::min<size_t>(n - got, size_t(1) << 24), off_t(offset + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw CliError("cannot read '" + display_name(path_) + "': " + errno_text(errno));
    }
    if (r == 0) throw CliError("cannot read '" + display_name(path_) + "': the file ended early (did it shrink?)");
    got += size_t(r);
  }
}

Buffer InputFile::read_all(Progress* progress) {
  // A regular file: one buffer of its size (the peeked bytes are part of it); a pipe, or a file that grew: blocks.
  std::vector<Buffer> blocks;
  uint64_t total = 0;
  size_t block = size_hint_ ? size_t(size_hint_) + 1 : size_t(1) << 20;
  for (;;) {
    Buffer b(block);
    const size_t got = read(b.data(), b.size(), progress);
    b.shrink(got);
    total += got;
    const bool end = got < block;
    if (got) blocks.push_back(std::move(b));
    if (end) break;
    block = std::min<size_t>(block * 2, size_t(1) << 30);
  }
  if (blocks.size() == 1) return std::move(blocks[0]);
  Buffer all{size_t(total)};
  size_t pos = 0;
  for (const Buffer& b : blocks) {
    if (b.size()) std::memcpy(all.data() + pos, b.data(), b.size());
    pos += b.size();
  }
  return all;
}

bool copy_times(const std::string& from, const std::string& to) {
  struct stat st;
  if (stat(from.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  struct timespec times[2] = {st.st_atim, st.st_mtim};
  return utimensat(AT_FDCWD, to.c_str(), times, 0) == 0;
}

bool is_stdout_terminal() { return isatty(STDOUT_FILENO) == 1; }
bool is_stderr_terminal() { return isatty(STDERR_FILENO) == 1; }

bool path_exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  if (stat(a.c_str(), &sa) != 0 || stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// ---- atomic output ---------------------------------------------------------------------------------------------

// The temporary file that a signal must remove. Only async-signal-safe operations touch these from the handler.
static char g_tmp_path[4096];
static volatile sig_atomic_t g_tmp_active = 0;

static void on_signal(int sig) {
  if (g_tmp_active) unlink(g_tmp_path);
  signal(sig, SIG_DFL);
  raise(sig);
}

void install_signal_handlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
}

static void block_signals(sigset_t* old) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, old);
}
static void restore_signals(const sigset_t* old) { pthread_sigmask(SIG_SETMASK, old, nullptr); }

static std::string parent_dir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}
static std::string base_name(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

OutputFile::OutputFile(const std::string& path, bool force, const std::string& mode_from) : path_(path) {
  if (path == "-") {
    to_stdout_ = true;
    return;
  }
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (!force) throw CliError("'" + path + "' already exists (use -f to overwrite)");
    if (S_ISDIR(st.st_mode)) throw CliError("'" + path + "' is a directory");
  }
  mode_t mode;
  struct stat src;
  if (!mode_from.empty() && mode_from != "-" && stat(mode_from.c_str(), &src) == 0 && S_ISREG(src.st_mode)) {
    mode = src.st_mode & 0777;
  } else {
    mode_t mask = umask(0);
    umask(mask);
    mode = 0666 & ~mask;
  }
  std::string tmpl = parent_dir(path) + "/." + base_name(path) + ".tmp-XXXXXX";
  if (tmpl.size() >= sizeof g_tmp_path) throw CliError("output path too long: '" + path + "'");
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  sigset_t old;
  block_signals(&old);
  fd_ = mkstemp(name.data());
  int err = errno;
  if (fd_ >= 0) {
    tmp_path_ = name.data();
    std::memcpy(g_tmp_path, tmp_path_.c_str(), tmp_path_.size() + 1);
    g_tmp_active = 1;
  }
  restore_signals(&old);
  if (fd_ < 0) throw CliError("cannot create a file in '" + parent_dir(path) + "': " + errno_text(err));
  fchmod(fd_, mode);
}

OutputFile::~OutputFile() {
  if (!committed_) discard();
}

void OutputFile::discard() {
  if (to_stdout_) return;
  sigset_t old;
  block_signals(&old);
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (!tmp_path_.empty()) {
    unlink(tmp_path_.c_str());
    tmp_path_.clear();
  }
  g_tmp_active = 0;
  restore_signals(&old);
}

void OutputFile::write(const void* data, size_t size, Progress* progress) {
  int fd = to_stdout_ ? STDOUT_FILENO : fd_;
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    size_t want = std::min<size_t>(size, size_t(1) << 22);
    ssize_t w = ::write(fd, p, want);
    if (w < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      throw CliError("cannot write " + (to_stdout_ ? std::string("stdout") : "'" + path_ + "'") + ": " +
                     errno_text(err));
    }
    p += w;
    size -= size_t(w);
    if (progress) progress->advance(uint64_t(w));
  }
}

void OutputFile::write_at(uint64_t offset, const void* data, size_t size) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const ssize_t w = ::pwrite(fd_, p, std::min<size_t>(size, size_t(1) << 24), off_t(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      throw CliError("cannot write '" + path_ + "': " + errno_text(errno));
    }
    p += w;
    offset += uint64_t(w);
    size -= size_t(w);
  }
}

void OutputFile::commit() {
  if (to_stdout_) {
    committed_ = true;
    return;
  }
  if (::close(fd_) != 0) {
    int err = errno;
    fd_ = -1;
    throw CliError("cannot write '" + path_ + "': " + errno_text(err));
  }
  fd_ = -1;
  sigset_t old;
  block_signals(&old);
  int rc = rename(tmp_path_.c_str(), path_.c_str());
  int err = errno;
  if (rc == 0) {
    tmp_path_.clear();
    g_tmp_active = 0;
    committed_ = true;
  }
  restore_signals(&old);
  if (rc != 0) throw CliError("cannot rename the output onto '" + path_ + "': " + errno_text(err));
}

// ---- progress --------------------------------------------------------------------------------------------------

Progress::Progress(bool enabled) : enabled_(enabled && is_stderr_terminal()) {
  start_ = std::chrono::steady_clock::now();
  if (enabled_) thread_ = std::thread([this] { loop(); });
}

Progress::~Progress() { finish(); }

void Progress::phase(const std::string& label, const std::string& what, uint64_t total) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  text_ = label + " " + what;
  done_.store(0, std::memory_order_relaxed);
  total_.store(total, std::memory_order_relaxed);
}

void Progress::draw() {
  // Called with mutex_ held.
  uint64_t done = done_.load(std::memory_order_relaxed);
  uint64_t total = total_.load(std::memory_order_relaxed);
  std::string line = "splitzip: " + text_;
  if (total != 0) {
    double pct = 100.0 * double(std::min(done, total)) / double(total);
    line += "  " + format_fixed(pct, 0) + "%  " + format_bytes(done) + " / " + format_bytes(total);
  } else if (done != 0) {
    line += "  " + format_bytes(done);
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  line += "  " + format_fixed(secs, 1) + " s";
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
  shown_ = true;
}

void Progress::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::milliseconds(250));
    if (stop_) break;
    if (std::chrono::steady_clock::now() - start_ > std::chrono::seconds(1)) draw();
  }
}

void Progress::finish() {
  if (!enabled_) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_) return;
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (shown_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }
}

// ---- formatting ------------------------------------------------------------------------------------------------

std::string format_fixed(double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

std::string format_bytes(uint64_t bytes) {
  if (bytes < 1000) return std::to_string(bytes) + " B";
  const char* units[] = {"kB", "MB", "GB", "TB", "PB"};
  double v = double(bytes) / 1000.0;
  int u = 0;
  while (v >= 1000.0 && u < 4) {
    v /= 1000.0;
    ++u;
  }
  return format_fixed(v, 2) + " " + units[u];
}

sz_dtype parse_dtype(const std::string& name) {
  sz_dtype dtype;
  if (sz_dtype_from_name(name.c_str(), &dtype) != SZ_OK)
    throw CliError("unknown dtype '" + name + "' (use bf16, fp16, fp32, fp8_e4m3 or fp8_e5m2)");
  return dtype;
}

const char* const kChecksumHelp =
    "Chunk checksum kind: lh32 (the default: lane-parallel, fast on GPUs) or h32 (XXH3, what older readers know)";

uint32_t checksum_flags(const std::string& kind, bool none) {
  if (none) {
    if (!kind.empty()) throw CliError("--checksum and --no-checksum exclude each other");
    return 0;
  }
  if (kind.empty()) return sz_params_default().flags & (SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH);
  if (kind == "lh32") return SZ_FLAG_CHECKSUMS | SZ_FLAG_LANE_HASH;
  if (kind == "h32") return SZ_FLAG_CHECKSUMS;
  throw CliError("--checksum must be lh32 or h32, not '" + kind + "'");
}

void check_chunk_log2(unsigned chunk_log2) {
  if (chunk_log2 < SZ_MIN_CHUNK_LOG2 || chunk_log2 > SZ_MAX_CHUNK_LOG2)
    throw CliError("--chunk-log2 " + std::to_string(chunk_log2) + " is out of range (" +
                   std::to_string(SZ_MIN_CHUNK_LOG2) + ".." + std::to_string(SZ_MAX_CHUNK_LOG2) + ")");
}

}  // namespace splitzip_cli
