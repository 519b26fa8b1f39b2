// handoff.cu — sz_cuda_signal, sz_cuda_wait and sz_cuda_enable_peer_access of splitzip_cuda.h: stream-ordered flags
// for a GPU-to-GPU hand-off in one node (a sender encodes into a slot in the receiver's memory, then signals; the
// receiver's stream waits, then decodes), so that no size or completion ever goes through the host.
//
// Why one-thread kernels and not the driver's stream memory operations (cuStreamWaitValue64 /
// cuStreamWriteValue64, which wait in the stream's front end and hold no SM):
//   - Ordering of the data, not only of the flag: a wait in the front end that is satisfied by a flag written over
//     NVLink does not by itself make the peer's earlier writes (the frame) visible to the kernels after it; that
//     takes CU_STREAM_WAIT_VALUE_FLUSH, which the driver supports only on some platforms
//     (CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES). A kernel's system-scope release store and acquire load give that
//     ordering on every platform by the PTX memory model.
//   - Memory: the wait works on any address a kernel can load (own, peer, CUDA IPC imports, mapped host memory); the
//     stream memory operations document device and registered host memory, and their support for peer and imported
//     memory is a per-device capability the caller would have to query.
//   - Linking: the library links only the CUDA runtime (cudart_static); the driver entry points would have to come
//     through cudaGetDriverEntryPoint(ByVersion), whose signature changed between CUDA 12 and 13.
// The cost: while it waits, the kernel holds one thread slot of one SM (the codec's kernels take their chunks from
// tickets or a static deal with no waiting between CTAs, so a CTA that starts late delays a call but cannot
// deadlock it), and each call is a kernel launch (a few microseconds; a graph node when captured).
//
// Both kernels are launched as ordinary kernels (no programmatic dependent launch): the signal starts only once every
// earlier kernel of the stream has completed, even one that released its dependents early
// (griddepcontrol.launch_dependents), and the wait never releases its dependents early, so a programmatic dependent
// launched after it (the decoder) waits in griddepcontrol.wait until the wait kernel has completed.
#include <cuda_runtime.h>

#include <cstdint>

#include "splitzip/splitzip_cuda.h"

namespace {

// Everything the stream wrote before this kernel (earlier kernels have completed; their writes, also those into a
// peer's memory, are made visible system-wide by the fence), then the flag, with release semantics at system scope.
__global__ void signal_kernel(uint64_t* flag, uint64_t value) {
  __threadfence_system();
  asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(flag), "l"(value) : "memory");
}

// Polls until *flag >= value; the acquire load that sees it orders everything after (the next kernels start after
// this one has completed) behind what the signalling side wrote before its release store.
__global__ void wait_kernel(const uint64_t* flag, uint64_t value) {
  unsigned backoff = 32;
  for (;;) {
    uint64_t v;
    asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(flag) : "memory");
    if (v >= value) break;
    __nanosleep(backoff);
    if (backoff < 1024) backoff *= 2;
  }
}

bool flag_ok(const void* p) { return p != nullptr && ((uintptr_t)p & 7u) == 0; }

// One CTA of one thread on the stream; the launch's own error, not an earlier call's.
sz_status launch_one(const void* kernel, void** args, cudaStream_t stream) {
  if (cudaLaunchKernel(kernel, dim3(1), dim3(1), args, 0, stream) != cudaSuccess) {
    (void)cudaGetLastError();
    return SZ_ERROR_CUDA;
  }
  return SZ_OK;
}

}  // namespace

extern "C" {

SZ_API sz_status sz_cuda_signal(uint64_t* d_flag, uint64_t value, sz_cuda_stream stream) {
  if (!flag_ok(d_flag)) return SZ_ERROR_INVALID_ARGUMENT;
  void* args[] = {&d_flag, &value};
  return launch_one(reinterpret_cast<const void*>(&signal_kernel), args, (cudaStream_t)stream);
}

SZ_API sz_status sz_cuda_wait(const uint64_t* d_flag, uint64_t value, sz_cuda_stream stream) {
  if (!flag_ok(d_flag)) return SZ_ERROR_INVALID_ARGUMENT;
  void* args[] = {(void*)&d_flag, &value};
  return launch_one(reinterpret_cast<const void*>(&wait_kernel), args, (cudaStream_t)stream);
}

SZ_API sz_status sz_cuda_enable_peer_access(int peer_device) {
  int dev = 0, count = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return SZ_ERROR_CUDA;
  }
  if (peer_device < 0 || peer_device >= count) return SZ_ERROR_INVALID_ARGUMENT;
  if (peer_device == dev) return SZ_OK;
  int can = 0;
  if (cudaDeviceCanAccessPeer(&can, dev, peer_device) != cudaSuccess) {
    (void)cudaGetLastError();
    return SZ_ERROR_CUDA;
  }
  if (!can) return SZ_ERROR_NOT_SUPPORTED;
  const cudaError_t e = cudaDeviceEnablePeerAccess(peer_device, 0);
  if (e == cudaSuccess) return SZ_OK;
  (void)cudaGetLastError();  // also cudaErrorPeerAccessAlreadyEnabled is recorded as the thread's last error
  return e == cudaErrorPeerAccessAlreadyEnabled ? SZ_OK : SZ_ERROR_CUDA;
}

}  // extern "C"
