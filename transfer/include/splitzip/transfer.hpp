// transfer.hpp — moving tensors between processes over UCX, compressed with SplitZip on the way.
//
// A sender opens a TCP control connection to a listening receiver, offers a handshake there (protocol version,
// format version, mode, optional shared token, the tensor list with names, dtypes, sizes and codebooks) and, once
// the receiver accepted it and answered with the address of a UCX (ucp) worker created for this session, connects
// to that worker and streams every tensor as a sequence of messages of `chunk_values` values each; credits and the
// final result come back on the control connection. The receiver parses everything a peer sends before acceptance
// itself, with bounded sizes and timeouts; UCX sees nothing from a peer that was not accepted. In compressed
// mode a message carries one SplitZip frame (docs/FORMAT.md) with per-chunk checksums; in raw mode it carries the
// bytes as they are, with an XXH3 check. An adaptive sender (SendOptions::adaptive) sends a compressed session's
// message raw, in that form, where compressing it would not pay at the link's rate. Every message has a checked
// 48-byte header (transfer/PROTOCOL.md).
//
// The pipeline: the sender's codec threads encode message i+1.. while message i is on the wire, and the receiver's
// codec threads decode and verify message i-1 meanwhile. A credit window bounds the messages in flight, so memory
// is bounded on both sides whatever the tensor sizes. The sender can pace its messages as a link of a given rate
// would carry them, so that a loopback link can emulate a slower network.
//
// A send may begin before its tensors hold their data (ReadyGate): the handshake goes out at once and each tensor is
// encoded and sent as soon as its producer (a model computing one layer after another) marks it ready, so encoding
// and sending overlap the computation of the next tensors. A receiver can decode straight into memory the caller
// owns (ServeOptions::destination), host or device.
//
// GPU-resident tensors (Tensor::device, ServeOptions::gpu): the codec runs on CUDA streams (splitzip_cuda.h), one per
// codec thread, into device staging buffers of a bounded pool (one per window slot). Each message then goes to UCX
// straight from device memory when the UCX build reports CUDA memory support (ucp_context_query, memory types), or
// through pinned host staging buffers otherwise (GpuPath). Because a message owns its slot until UCX completed it,
// the device-to-host copy of message i+1 overlaps the send of message i. The wire protocol is the same either way:
// a CPU peer and a GPU peer interoperate. A build without CUDA, or a machine without a GPU, answers GPU requests with
// SZ_ERROR_NOT_SUPPORTED.
//
// Errors are sz_status codes plus a one-line message; nothing here throws, aborts or prints.
//   SZ_ERROR_IO               the network: cannot connect, peer gone, timeout, refused by the peer
//   SZ_ERROR_CORRUPT          the peer sent something that does not follow the protocol
//   SZ_ERROR_CHECKSUM         a message or chunk failed its integrity check
//   SZ_ERROR_INVALID_ARGUMENT a bad option, a name or size outside the configured limits, a token mismatch
//   SZ_ERROR_UNSUPPORTED_VERSION the peer speaks another protocol or format version
//   SZ_ERROR_NOT_SUPPORTED    GPU data asked for, but no CUDA in this build or no GPU visible
//   SZ_ERROR_CUDA             a CUDA runtime call failed
#pragma once

#include <stdint.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "splitzip/splitzip.h"

namespace splitzip {
namespace transfer {

/** Version of the transfer protocol (transfer/PROTOCOL.md), sent in the handshake. */
constexpr uint16_t kProtocolVersion = 4;

/** One tensor to send: `size` bytes of little-endian values of `dtype`, in host memory, or in CUDA device memory
 *  when `device` is set (then every tensor of the send must be on the device, of the current CUDA device). */
struct Tensor {
  std::string name;
  sz_dtype dtype = SZ_DTYPE_BF16;
  const void* data = nullptr;
  uint64_t size = 0;
  bool device = false;
};

/** How messages of GPU-resident data reach UCX. */
enum class GpuPath {
  kAuto,    // direct when UCX reports CUDA memory support, else staged
  kDirect,  // device buffers handed to UCX (SZ_ERROR_NOT_SUPPORTED if this UCX build cannot take them)
  kStaged,  // copied to pinned host buffers on the codec threads' streams, overlapped with the sends
};

/** Test hooks of the sender (fault injection). Empty in normal use. */
struct SendFaults {
  /** Called on each message payload (after encoding, before sending); may modify it. */
  std::function<void(uint64_t seq, uint8_t* payload, size_t size)> tamper;
  /** After this many chunk messages have been handed to UCX, call this (for example `_exit`). 0 = never. */
  uint64_t die_after_chunks = 0;
  std::function<void()> die;
  /** After this many chunk messages, stop sending but keep the connection open (a stalled peer). 0 = never. */
  uint64_t stall_after_chunks = 0;
  /** Override the protocol version sent in the handshake (0 = kProtocolVersion). */
  uint16_t protocol_version = 0;
  /** Announce names without checking them here (to test that the receiver refuses bad ones). */
  bool unchecked_names = false;
  /** Announce this size for the first tensor instead of its real size (0 = the real size); nothing is sent after
   *  a refusal, so this tests the receiver's limits. */
  uint64_t announce_size = 0;
  /** With SendOptions::adaptive: decides for each message (by sequence number) whether it goes raw (true) or
   *  compressed, in place of the sender's own choice. Called on the codec threads. */
  std::function<bool(uint64_t seq)> send_raw;
};

struct SendOptions;
struct SendStats;

/** Lets a send begin before its tensors hold their data. A producer calls ready(i) once tensor i's bytes are final;
 *  send() (with SendOptions::gate) makes its handshake at once and encodes a tensor's messages only after that.
 *  Messages go out in tensor order, so tensor i is sent once tensors 0..i are all ready. Every call is thread safe;
 *  a gate serves one send. While the sender waits for the producer it is not stalled (no timeout): a producer that
 *  gives up calls fail(), and send() then ends with SZ_ERROR_IO and that text. */
class ReadyGate {
 public:
  explicit ReadyGate(size_t n_tensors);
  ~ReadyGate();
  ReadyGate(const ReadyGate&) = delete;
  ReadyGate& operator=(const ReadyGate&) = delete;

  size_t size() const;
  /** Tensor `index`'s bytes are final; the sender reads them from now until send() returns. SZ_ERROR_INVALID_ARGUMENT
   *  when index >= size(). Marking a tensor twice is harmless. */
  sz_status ready(size_t index);
  /** The producer failed; the send stops with SZ_ERROR_IO and "the producer failed: <why>". */
  void fail(const std::string& why);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  friend sz_status send(const std::string&, uint16_t, const std::vector<Tensor>&, const SendOptions&, SendStats*,
                        std::string*);
};

struct SendOptions {
  bool raw = false;                  // send the bytes uncompressed through the same path
  /** Compressed mode only: send a message raw where compressing it does not pay, so that the send is not slower
   *  than a raw one. Per message, from running averages of the codec threads' encode rate, the frame size per raw
   *  byte and the link's rate (rate_bytes_per_s when given, else measured over the completed sends), the sender
   *  compresses the fraction of messages that the link and the codec threads together carry fastest (1 when the
   *  codec keeps up with the link, 0 when the link is at least as fast as the codec's raw path, when nothing
   *  compresses or when one message's encode outlasts the link's window) and sends the others raw; the first
   *  message of each codec thread is compressed to measure. The rule is in transfer/src/session/adaptive.h; the
   *  wire form in transfer/PROTOCOL.md §4. The model does not see the receiver: a receiver that cannot decode at
   *  the pace of the frames the sender chose slows the send. */
  bool adaptive = false;
  /** Emulated link rate in bytes per second of wire bytes (payload + headers); 0 = as fast as the transport goes.
   *  Each message occupies the link for its size / rate, after the message before it and no earlier than it could
   *  be sent, and is handed to the transport when its last byte would have left: an idle link saves up nothing, so
   *  a burst after a pause takes as long as it would on a real link of this rate. */
  double rate_bytes_per_s = 0;
  unsigned threads = 1;              // codec threads
  std::string token;                 // shared secret the receiver may require (at most 256 bytes)
  uint64_t chunk_values = 1u << 20;  // values per message
  unsigned window = 8;               // messages in flight (sent and not yet consumed by the receiver)
  double timeout_s = 10;             // a clean error when nothing happens for this long
  unsigned frame_chunk_log2 = SZ_DEFAULT_CHUNK_LOG2;  // chunk size inside each frame
  /** Codebook per dtype; NULL entries (or a short vector) pick sz_default_codebook(dtype, SZ_KIND_GENERIC).
   *  Indexed by dtype id. */
  std::vector<const sz_codebook*> codebooks;
  GpuPath gpu_path = GpuPath::kAuto;  // for device tensors
  /** When set (caller-owned, one entry per tensor, outliving the call): tensors are sent as the gate marks them
   *  ready; without it every tensor must hold its data when send() is called. */
  ReadyGate* gate = nullptr;
  SendFaults faults;
};

struct SendStats {
  uint64_t raw_bytes = 0;      // bytes of the tensors
  uint64_t payload_bytes = 0;  // bytes of message payloads (frames or raw chunks)
  uint64_t wire_bytes = 0;     // payload plus message headers, handshake included
  uint64_t messages = 0;       // chunk messages
  uint64_t raw_messages = 0;   // of which carried the values as they are (all in raw mode; adaptive's choice)
  double seconds = 0;          // from the end of the handshake until the receiver confirmed everything (with a
                               // gate, including the wait for the producer)
  double handshake_seconds = 0;
  double codec_seconds = 0;    // CPU time of the codec threads, summed (with the GPU: the time they waited on it)
  bool gpu = false;            // the GPU codec encoded the messages
  bool gpu_direct = false;     // ... and UCX took them from device memory (else pinned host staging)
};

/** Connects to host:port, sends the tensors and waits until the receiver confirms that every byte verified. */
sz_status send(const std::string& host, uint16_t port, const std::vector<Tensor>& tensors, const SendOptions& options,
               SendStats* stats, std::string* error);

struct ServeOptions {
  std::string address = "127.0.0.1";  // loopback unless told otherwise
  uint16_t port = 0;                  // 0 = any free port (see Server::port())
  std::string out_dir;                // where tensors are written (as out_dir/name); empty with discard
  bool discard = false;               // decode and verify, then drop the bytes
  std::string token;                  // when not empty, peers must present exactly this token
  uint64_t max_tensor_bytes = (uint64_t)64 << 30;
  uint64_t max_total_bytes = (uint64_t)1 << 40;
  uint32_t max_tensors = 4096;
  uint64_t max_message_bytes = (uint64_t)64 << 20;  // the largest chunk message a peer may announce
  uint32_t max_window = 64;
  /** The most a session may allocate for its message slots and decode scratch (sized by what the peer announced:
   *  window slots, but no more than its messages, each no larger than its largest message can be); a handshake that
   *  needs more is refused before anything is allocated. */
  uint64_t max_session_bytes = (uint64_t)1 << 30;
  bool overwrite = false;    // replace a file of the same name in out_dir (else the handshake is refused)
  /** Write tensors to out_dir with direct I/O (O_DIRECT): from the session's buffers to the device, past the page
   *  cache, so that writing costs no copy into it and takes none of its memory, at the rate of the device. Used for
   *  a tensor when its chunks start at multiples of 4096 bytes and the file system takes direct I/O; otherwise, and
   *  on the GPU path, writes are buffered. */
  bool direct_io = false;
  unsigned threads = 1;      // codec threads, per session
  double timeout_s = 10;     // stall timeout within a session
  double accept_timeout_s = 0;  // how long serve_one waits for a peer; 0 = forever
  /** Sessions that may run at once; a peer beyond that is refused (SZ_ERROR_IO, "busy") after its handshake. */
  uint32_t max_sessions = 4;
  /** What all sessions together may allocate for their buffers (each also within max_session_bytes); a peer whose
   *  session would pass it is refused like one beyond max_sessions. */
  uint64_t max_server_bytes = (uint64_t)4 << 30;
  /** A peer must send its complete handshake within this long after connecting. */
  double handshake_timeout_s = 5;
  /** A session that lasts longer fails with SZ_ERROR_IO, however steadily the peer sends; 0 = no limit. */
  double max_session_seconds = 3600;
  /** Decode on the GPU into device memory. Each tensor's destination is device memory from `destination`
   *  (caller-owned, at least `size` bytes, of the current CUDA device) or, without it, a buffer the library
   *  allocates, writes to out_dir once verified (unless discard) and frees. */
  bool gpu = false;
  GpuPath gpu_path = GpuPath::kAuto;  // receive into device buffers (direct) or pinned host buffers (staged)
  /** Where each tensor is decoded to, in memory the caller owns: host memory, or device memory with `gpu`. Called
   *  on the session's thread before a tensor's first chunk is decoded (several sessions may call it at once; an
   *  empty tensor gets no call); returns at least `size` bytes, or NULL to refuse the transfer. With it, nothing is
   *  written to out_dir, and out_dir and discard are ignored. */
  std::function<void*(const std::string& name, sz_dtype dtype, uint64_t size)> destination;
  /** Called on the session's thread, once for every pointer that `destination` returned, when the session has
   *  ended (verified or failed) and will write no more to it; `complete`: every byte of the tensor verified. */
  std::function<void(const std::string& name, void* data, bool complete)> release;
};

struct ReceivedTensor {
  std::string name;
  sz_dtype dtype = SZ_DTYPE_BF16;
  uint64_t size = 0;
  std::string path;  // empty when discarded or kept on the device
  bool direct_io = false;  // written with direct I/O (ServeOptions::direct_io)
  void* data = nullptr;  // where it was decoded to (ServeOptions::destination), else NULL
};

struct SessionStats {
  bool raw = false;
  uint64_t raw_bytes = 0;
  uint64_t wire_bytes = 0;
  uint64_t messages = 0;
  uint64_t raw_messages = 0;  // of which carried the values as they are (all of a raw session's)
  double seconds = 0;
  double codec_seconds = 0;
  bool gpu = false;         // decoded on the GPU
  bool gpu_direct = false;  // received into device memory (else pinned host staging)
  uint64_t buffer_bytes = 0;  // what the session allocated for message slots and decode scratch
  std::vector<ReceivedTensor> tensors;  // only tensors whose every byte verified and (unless discarded) is in place
};

/** How one peer's connection ended: a session that ran (accepted), or a peer refused at its handshake. */
struct SessionOutcome {
  sz_status status = SZ_OK;
  std::string error;   // empty on success
  std::string peer;    // "address:port" of the peer's control connection
  bool accepted = false;  // the handshake was accepted and a session ran
  SessionStats stats;
};

/** A receiver. open() binds the one listening socket (a plain TCP socket, transfer/PROTOCOL.md §1); each peer's
 *  connection gets its own thread, its handshake read and checked there; an accepted session gets its own UCX
 *  worker. serve_one() and serve() are not to be called at the same time; stop() may be called from any thread. */
class Server {
 public:
  Server();
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  sz_status open(const ServeOptions& options, std::string* error);
  /** The port actually bound (useful with port 0). */
  uint16_t port() const;
  /** Waits (accept_timeout_s) for the first peer whose connection ends, accepted or refused, and returns how it
   *  ended. Peers that arrive meanwhile are served as by serve() (and refused while max_sessions are running);
   *  their outcomes are returned by later calls. Tensors appear in out_dir only when complete. */
  sz_status serve_one(SessionStats* stats, std::string* error);
  /** Serves peers, up to max_sessions at once, until stop(); calls on_outcome on this thread for every peer whose
   *  connection ended. SZ_OK after stop(). */
  sz_status serve(const std::function<void(const SessionOutcome&)>& on_outcome, std::string* error);
  /** Makes serve() return and ends running sessions (with an error); thread safe. */
  void stop();
  /** Ends every session and closes the listener. */
  void close();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/** Is `name` acceptable as a tensor name (and so as a file name inside the output directory)?
 *  Rejects empty names, names over 255 bytes, "." and "..", a leading '.', '/', '\\', NUL and control bytes. */
bool valid_tensor_name(const std::string& name);

/** Constant-time comparison (its duration depends only on expected.size()). */
bool token_equal(const std::string& expected, const std::string& got);

}  // namespace transfer
}  // namespace splitzip
