// gpu.cpp — see gpu.h. With SPLITZIP_TRANSFER_CUDA the CUDA runtime; without it, stubs that fail cleanly.
#include "gpu.h"

#ifdef SPLITZIP_TRANSFER_CUDA
#include <cuda_runtime.h>
#endif

namespace splitzip {
namespace transfer {
namespace gpu {

Mem& Mem::operator=(Mem&& o) noexcept {
  if (this != &o) {
    reset();
    p_ = o.p_;
    n_ = o.n_;
    kind_ = o.kind_;
    o.p_ = nullptr;
    o.n_ = 0;
  }
  return *this;
}

#ifdef SPLITZIP_TRANSFER_CUDA

namespace {
sz_status cuda_fail(cudaError_t e, const char* what, std::string* why) {
  if (why != nullptr) *why = std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  return e == cudaErrorMemoryAllocation ? SZ_ERROR_OUT_OF_MEMORY : SZ_ERROR_CUDA;
}
}  // namespace

bool available(std::string* why) {
  if (sz_cuda_available() != 0) return true;
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (why != nullptr) {
    if (e != cudaSuccess)
      *why = std::string("no CUDA device: ") + cudaGetErrorString(e);
    else if (n == 0)
      *why = "no CUDA device visible";
    else
      *why = "the splitzip library was built without the CUDA codec (SPLITZIP_ENABLE_CUDA=OFF)";
  }
  return false;
}

bool is_device_pointer(const void* p) {
  if (p == nullptr) return false;
  cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

int current_device() {
  int d = 0;
  if (cudaGetDevice(&d) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return d;
}

sz_status set_device(int device, std::string* why) {
  const cudaError_t e = cudaSetDevice(device);
  return e == cudaSuccess ? SZ_OK : cuda_fail(e, "cudaSetDevice", why);
}

sz_status Mem::alloc(Kind kind, size_t n, std::string* why) {
  reset();
  kind_ = kind;
  if (n == 0) n = 1;
  const cudaError_t e = kind == kDevice ? cudaMalloc(&p_, n) : cudaMallocHost(&p_, n);
  if (e != cudaSuccess) {
    p_ = nullptr;
    (void)cudaGetLastError();
    return cuda_fail(e, kind == kDevice ? "cudaMalloc" : "cudaMallocHost", why);
  }
  n_ = n;
  // Device memory starts zero-filled: the codec's workspaces must be, before their first use.
  if (kind == kDevice) {
    const cudaError_t z = cudaMemset(p_, 0, n);
    if (z != cudaSuccess) {
      (void)cudaGetLastError();
      reset();
      return cuda_fail(z, "cudaMemset", why);
    }
  }
  return SZ_OK;
}

void Mem::reset() {
  if (p_ != nullptr) {
    if (kind_ == kDevice)
      cudaFree(p_);
    else
      cudaFreeHost(p_);
  }
  p_ = nullptr;
  n_ = 0;
}

sz_status Stream::create(std::string* why) {
  reset();
  cudaStream_t s = nullptr;
  const cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e != cudaSuccess) return cuda_fail(e, "cudaStreamCreate", why);
  s_ = reinterpret_cast<sz_cuda_stream>(s);
  return SZ_OK;
}

void Stream::reset() {
  if (s_ != nullptr) cudaStreamDestroy(reinterpret_cast<cudaStream_t>(s_));
  s_ = nullptr;
}

sz_status copy_async(void* dst, const void* src, size_t n, sz_cuda_stream stream, std::string* why) {
  if (n == 0) return SZ_OK;
  const cudaError_t e = cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, reinterpret_cast<cudaStream_t>(stream));
  return e == cudaSuccess ? SZ_OK : cuda_fail(e, "cudaMemcpyAsync", why);
}

sz_status sync(sz_cuda_stream stream, std::string* why) {
  const cudaError_t e = cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(stream));
  return e == cudaSuccess ? SZ_OK : cuda_fail(e, "cudaStreamSynchronize", why);
}

sz_status copy(void* dst, const void* src, size_t n, std::string* why) {
  thread_local Stream s;
  if (s.get() == nullptr) {
    const sz_status st = s.create(why);
    if (st != SZ_OK) return st;
  }
  sz_status st = copy_async(dst, src, n, s.get(), why);
  if (st == SZ_OK) st = sync(s.get(), why);
  return st;
}

#else  // no CUDA runtime in this build

namespace {
sz_status none(std::string* why) {
  if (why != nullptr) *why = "the transfer library was built without CUDA (SPLITZIP_ENABLE_CUDA=OFF)";
  return SZ_ERROR_NOT_SUPPORTED;
}
}  // namespace

bool available(std::string* why) {
  none(why);
  return false;
}
bool is_device_pointer(const void*) { return false; }
int current_device() { return 0; }
sz_status set_device(int, std::string* why) { return none(why); }
sz_status Mem::alloc(Kind, size_t, std::string* why) { return none(why); }
void Mem::reset() {
  p_ = nullptr;
  n_ = 0;
}
sz_status Stream::create(std::string* why) { return none(why); }
void Stream::reset() { s_ = nullptr; }
sz_status copy_async(void*, const void*, size_t, sz_cuda_stream, std::string* why) { return none(why); }
sz_status sync(sz_cuda_stream, std::string* why) { return none(why); }
sz_status copy(void*, const void*, size_t, std::string* why) { return none(why); }

#endif

}  // namespace gpu
}  // namespace transfer
}  // namespace splitzip
