// gpu.h — the few CUDA runtime calls the transfer pipeline needs (device and pinned host memory, streams, copies),
// behind an interface that does not include cuda_runtime.h. gpu.cpp implements it with the CUDA runtime when the
// library is built with SPLITZIP_TRANSFER_CUDA; otherwise every call fails with SZ_ERROR_NOT_SUPPORTED and
// available() says why, so that the sender and receiver compile the same in both builds.
//
// Errors are sz_status codes plus text; nothing here aborts, throws or prints.
#pragma once

#include <stddef.h>

#include <string>

#include "splitzip/splitzip.h"
#include "splitzip/splitzip_cuda.h"

namespace splitzip {
namespace transfer {
namespace gpu {

/** True when the CUDA runtime is linked in and sz_cuda_available() says a device is visible; else *why says why. */
bool available(std::string* why);
/** Where a pointer lives: true for device (or managed) memory. False for host memory or in a build without CUDA. */
bool is_device_pointer(const void* p);
/** The calling thread's current device (0 without CUDA), and setting it on another thread. */
int current_device();
sz_status set_device(int device, std::string* why);

/** Owned device memory (cudaMalloc) or pinned host memory (cudaMallocHost); freed by the destructor. */
class Mem {
 public:
  enum Kind { kDevice, kPinned };
  Mem() = default;
  ~Mem() { reset(); }
  Mem(Mem&& o) noexcept : p_(o.p_), n_(o.n_), kind_(o.kind_) { o.p_ = nullptr; o.n_ = 0; }
  Mem& operator=(Mem&& o) noexcept;
  Mem(const Mem&) = delete;
  Mem& operator=(const Mem&) = delete;
  sz_status alloc(Kind kind, size_t n, std::string* why);
  void reset();
  uint8_t* get() const { return static_cast<uint8_t*>(p_); }
  size_t size() const { return n_; }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
  Kind kind_ = kDevice;
};

/** A non-blocking stream (it never waits on the legacy default stream). */
class Stream {
 public:
  Stream() = default;
  ~Stream() { reset(); }
  Stream(Stream&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  sz_status create(std::string* why);
  void reset();
  sz_cuda_stream get() const { return s_; }

 private:
  sz_cuda_stream s_ = nullptr;
};

/** cudaMemcpyAsync with the direction taken from the pointers (cudaMemcpyDefault). */
sz_status copy_async(void* dst, const void* src, size_t n, sz_cuda_stream stream, std::string* why);
/** Waits for the stream; reports an asynchronous error of the stream's work. */
sz_status sync(sz_cuda_stream stream, std::string* why);
/** A synchronous copy on a private stream of the calling thread (for small or rare copies). */
sz_status copy(void* dst, const void* src, size_t n, std::string* why);

}  // namespace gpu
}  // namespace transfer
}  // namespace splitzip
