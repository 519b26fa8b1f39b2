// common.h — pieces every splitzip subcommand shares: the error type that main() turns into
// "splitzip: error: ...", byte buffers, reading inputs (files or stdin), writing outputs atomically (a temporary file
// in the target directory, renamed on success, removed on failure or on SIGINT/SIGTERM), and the progress line.
//
// The CLI is a plain client of the public C API (splitzip.h); it never includes the library's private headers.
#pragma once

#include <splitzip/splitzip.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace splitzip_cli {

// An error to report to the user. main() prints "splitzip: error: <what()>" and exits with exit_code.
class CliError : public std::runtime_error {
 public:
  explicit CliError(const std::string& message, int exit_code = 1)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// Throws CliError("<context>: <status name> (<status message>)") unless status is SZ_OK.
void check_status(sz_status status, const std::string& context);
// "SZ_ERROR_CORRUPT (<message>)".
std::string status_text(sz_status status);

// An uninitialised heap byte buffer (std::vector would zero gigabytes for nothing).
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t size);
  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Keeps the first new_size bytes (new_size <= size()); does not reallocate.
  void shrink(size_t new_size);

 private:
  std::unique_ptr<uint8_t[]> data_;
  size_t size_ = 0;
};

class Progress;

// Reads a whole file, or stdin when path is "-". Errors name the path.
Buffer read_input(const std::string& path, Progress* progress = nullptr);

// An input read in pieces: a file, or stdin for "-". peek() looks ahead without consuming (what it returns is read
// again by read() and read_all()). Errors name the path.
class InputFile {
 public:
  explicit InputFile(const std::string& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  // Up to n bytes at the current position, not consumed; fewer only at the end of the input.
  const std::vector<uint8_t>& peek(size_t n);
  // Reads up to n bytes into dst, fewer only at the end of the input; returns the count. progress advances.
  size_t read(uint8_t* dst, size_t n, Progress* progress = nullptr);
  // The rest of the input in one buffer.
  Buffer read_all(Progress* progress = nullptr);
  // The size of a regular file, else 0 (unknown).
  uint64_t size_hint() const { return size_hint_; }
  // A regular file of at least one byte: read_at() may be used, at any offset, in any order.
  bool seekable() const { return size_hint_ != 0; }
  // Reads exactly n bytes at `offset` of a seekable input, whatever read() and peek() consumed; throws CliError when
  // the file ends first (it shrank).
  void read_at(uint64_t offset, uint8_t* dst, size_t n) const;
  const std::string& path() const { return path_; }

 private:
  size_t read_fd(uint8_t* dst, size_t n);
  std::string path_;
  int fd_ = -1;
  bool owned_ = false;
  uint64_t size_hint_ = 0;
  std::vector<uint8_t> ahead_;  // peeked bytes, consumed first
};

// Copies the access and modification times of `from` to `to` (both regular files), as zstd does; false if that
// failed.
bool copy_times(const std::string& from, const std::string& to);

// The display name of an input path ("stdin" for "-"), escaped as printable_name() does.
std::string display_name(const std::string& path);

// A name from a file (an item, a tensor, a path) made safe to print on a terminal: valid UTF-8 is kept except the
// C0 and C1 control characters and DEL; those, backslashes and bytes that are not valid UTF-8 become \xNN escapes,
// so no name can move the cursor, set a title or hide text.
std::string printable_name(const std::string& name);

bool is_stdout_terminal();
bool is_stderr_terminal();
bool path_exists(const std::string& path);
bool same_file(const std::string& a, const std::string& b);

// Writes an output file atomically. The constructor refuses an existing file unless force is set, and creates a
// temporary file next to the target; write() appends; commit() renames it onto the target. Destroying an
// uncommitted OutputFile removes the temporary file, so no partial output is ever left behind (SIGINT and SIGTERM
// remove it too). path "-" writes to stdout instead (nothing is written before commit()).
class OutputFile {
 public:
  // mode_from: a file whose permission bits the output copies ("" or "-": 0666 minus the umask).
  OutputFile(const std::string& path, bool force, const std::string& mode_from = "");
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const void* data, size_t size, Progress* progress = nullptr);
  // A file (not stdout): write_at() may be used instead of write().
  bool seekable() const { return !to_stdout_; }
  // Writes at `offset` of the file (pwrite); bytes never written before the end read as zeros.
  void write_at(uint64_t offset, const void* data, size_t size);
  void commit();
  const std::string& path() const { return path_; }

 private:
  void discard();
  std::string path_;
  std::string tmp_path_;
  int fd_ = -1;
  bool to_stdout_ = false;
  bool committed_ = false;
};

// Installs the SIGINT/SIGTERM handler that removes the current temporary output file.
void install_signal_handlers();

// A one-line progress report on stderr ("splitzip: compressing x.bin  42%  12.0 / 28.5 MB"), shown only when stderr
// is a terminal and the work has taken more than a second; redrawn a few times a second by a helper thread and
// erased when the work ends.
class Progress {
 public:
  explicit Progress(bool enabled);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  // Starts a phase: label ("reading", "compressing", ...), the file it is about, and its total in bytes (0: unknown).
  void phase(const std::string& label, const std::string& what, uint64_t total);
  void advance(uint64_t bytes) { done_.fetch_add(bytes, std::memory_order_relaxed); }
  // Stops the helper thread and erases the line.
  void finish();

 private:
  void loop();
  void draw();
  bool enabled_;
  bool stop_ = false;
  bool shown_ = false;
  std::atomic<uint64_t> done_{0};
  std::atomic<uint64_t> total_{0};
  std::string text_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread thread_;
};

// Human-readable byte count: "1.84 MB" (decimal units, like the GB/s figures).
std::string format_bytes(uint64_t bytes);
// Fixed-point formatting: format_fixed(1.2345, 3) == "1.234" (printf rounding).
std::string format_fixed(double value, int decimals);

// Parses a dtype name as the library does; throws CliError naming the accepted names otherwise.
sz_dtype parse_dtype(const std::string& name);

// Throws CliError unless SZ_MIN_CHUNK_LOG2 <= chunk_log2 <= SZ_MAX_CHUNK_LOG2.
void check_chunk_log2(unsigned chunk_log2);

// The frame flags of --checksum KIND (lh32 or h32; empty: the library's default) and --no-checksum.
uint32_t checksum_flags(const std::string& kind, bool none);
// Help text of --checksum.
extern const char* const kChecksumHelp;

}  // namespace splitzip_cli
