// api.cu — the sz_cuda_* entry points of splitzip_cuda.h: host-side argument checks (nothing is enqueued when they
// fail), then one kernel launch on the caller's stream. Nothing here allocates, synchronises or touches device
// memory from the host; the per-device launch shapes are computed once and cached.
#include <cuda_runtime.h>

#include <atomic>

#include "cuda/agent/entropy_decode.cuh"
#include "cuda/agent/entropy_encode.cuh"
#include "cuda/dispatch.cuh"
#include "cuda/kernels.cuh"
#include "splitzip/splitzip_cuda.h"

using namespace splitzip;
using namespace splitzip::cuda;

namespace {

// The kernels live in kernels_*.cu, one translation unit per dtype (they compile in parallel).
const void* encode_kernel_ptr(int index, bool teams, bool ch) {
  int i = 0;
#define SZ_X(D, K)                                               \
  if (index == i) return encode_kernel_address<D, K>(teams, ch); \
  ++i;
  SZ_CUDA_ENCODE_KERNELS(SZ_X)
#undef SZ_X
  return nullptr;
}

// Resident CTAs per device of each kernel, computed at first use: encoder i's four kernels (team, channel windows) at
// v * kEncodeKernels + i (resident_slot), the decoder's at kDecoderSlot, the entropy coder's after it (the encoder
// of dtype d at kEntropyEncoderSlot + d - 1).
constexpr int kMaxDevices = 64;
constexpr int kDecoderSlot = 4 * kEncodeKernels, kEntropyDecoderSlot = kDecoderSlot + 1;
constexpr int kEntropyEncoderSlot = kEntropyDecoderSlot + 1;
std::atomic<int> g_resident[kMaxDevices][kEntropyEncoderSlot + 5];
int resident_slot(int index, bool teams, bool ch) { return (teams + 2 * ch) * kEncodeKernels + index; }

sz_status resident_ctas(const void* kernel, int index, size_t smem, int threads, int* ctas) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return SZ_ERROR_CUDA;
  if (dev < 0 || dev >= kMaxDevices) return SZ_ERROR_CUDA;
  int v = g_resident[dev][index].load(std::memory_order_relaxed);
  if (v == 0) {
    int sms = 0, per_sm = 0;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem) != cudaSuccess) {
      (void)cudaGetLastError();
      return SZ_ERROR_CUDA;
    }
    v = (per_sm < 1 ? 1 : per_sm) * sms;
    g_resident[dev][index].store(v, std::memory_order_relaxed);
  }
  *ctas = v;
  return SZ_OK;
}

// Launches `kernel` on `grid` CTAs of `threads` threads, capped at the `resident` CTAs that fit the device at once
// (and at least one). Every kernel is launched as a programmatic dependent of the stream's previous kernel: it may
// start (its CTAs resident, their parameter-only prologue run) while that kernel finishes, and waits for it with
// simt::grid_dependency_wait before touching global memory; a back-to-back call thereby hides its launch latency.
sz_status launch_capped(const void* kernel, uint64_t grid, int resident, int threads, void** args, size_t smem,
                        cudaStream_t stream) {
  if (grid > (uint64_t)resident) grid = (uint64_t)resident;
  if (grid < 1) grid = 1;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)grid);
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  if (cudaLaunchKernelExC(&cfg, kernel, args) != cudaSuccess) {
    (void)cudaGetLastError();
    return SZ_ERROR_CUDA;
  }
  return SZ_OK;
}

sz_status launch_encode(const EncodeArgs& a, cudaStream_t stream) {
  const int index = encode_kernel_index(a.dtype, a.k);
  if (index < 0) return SZ_ERROR_INTERNAL;
  const size_t smem = encode_kernel_smem(index);
  const bool ch = a.ch.bases != nullptr;
  const void* kernel = encode_kernel_ptr(index, false, ch);
  int resident = 0;
  sz_status s = resident_ctas(kernel, resident_slot(index, false, ch), smem, EncodePolicy::kWarps * 32, &resident);
  if (s != SZ_OK) return s;
  EncodeArgs b = a;
  b.team = encode_team(a.n_chunks, a.chunk_log2, layout::dtype_traits(a.dtype).value_bits / 8,
                       (uint64_t)resident * EncodePolicy::kWarps);
  if (b.team > 1) {  // the team kernel, when as many of its CTAs fit
    const void* tk = encode_kernel_ptr(index, true, ch);
    int tres = 0;
    s = resident_ctas(tk, resident_slot(index, true, ch), smem, EncodePolicy::kWarps * 32, &tres);
    if (s != SZ_OK) return s;
    if (tres >= resident) kernel = tk;
    else b.team = 1;
  }
  void* args[] = {&b};
  return launch_capped(kernel, (a.n_chunks * b.team + EncodePolicy::kWarps - 1) / EncodePolicy::kWarps, resident,
                       EncodePolicy::kWarps * 32, args, smem, stream);
}

sz_status launch_decode(const DecodeArgs& a, cudaStream_t stream) {
  const size_t smem = decode_smem_bytes();
  int resident = 0;
  const void* kernel = decode_kernel_address();
  const sz_status s = resident_ctas(kernel, kDecoderSlot, smem, DecodePolicy::kWarps * 32, &resident);
  if (s != SZ_OK) return s;
  // The chunk count is in the frame, which the host does not read: no more CTAs than chunks the frame can hold.
  void* args[] = {const_cast<DecodeArgs*>(&a)};
  return launch_capped(kernel, (max_chunks_of(a.src_size) + DecodePolicy::kWarps - 1) / DecodePolicy::kWarps,
                       resident, DecodePolicy::kWarps * 32, args, smem, stream);
}

sz_status launch_entropy_decode(const EntropyDecodeArgs& a, cudaStream_t stream) {
  const size_t smem = entropy_decode_smem_bytes();
  int resident = 0;
  const void* kernel = entropy_decode_kernel_address();
  const sz_status s =
      resident_ctas(kernel, kEntropyDecoderSlot, smem, EntropyDecodePolicy::kWarps * 32, &resident);
  if (s != SZ_OK) return s;
  void* args[] = {const_cast<EntropyDecodeArgs*>(&a)};
  return launch_capped(kernel, entropy_grid_of(a.src_size), resident, EntropyDecodePolicy::kWarps * 32, args, smem,
                       stream);
}

sz_status launch_entropy_encode(const EntropyEncodeArgs& a, cudaStream_t stream) {
  const size_t smem = entropy_encode_smem_bytes();
  const void* kernel = entropy_encode_kernel_address(a.dtype);
  if (!kernel) return SZ_ERROR_INTERNAL;
  int resident = 0;
  const sz_status s = resident_ctas(kernel, kEntropyEncoderSlot + (int)a.dtype - 1, smem,
                                    EntropyEncodePolicy::kWarps * 32, &resident);
  if (s != SZ_OK) return s;
  void* args[] = {const_cast<EntropyEncodeArgs*>(&a)};
  return launch_capped(kernel, entropy_encode_grid(a), resident, EntropyEncodePolicy::kWarps * 32, args, smem,
                       stream);
}

sz_status ws_query(uint64_t n, sz_dtype dtype, const sz_params* params, size_t* ws) {
  if (!ws) return SZ_ERROR_INVALID_ARGUMENT;
  *ws = 0;
  if (!layout::dtype_known((unsigned)dtype) || n >= layout::kMaxValues) return SZ_ERROR_INVALID_ARGUMENT;
  const sz_params p = params ? *params : sz_params_default();
  if (p.chunk_log2 < layout::kMinChunkLog2 || p.chunk_log2 > layout::kMaxChunkLog2) return SZ_ERROR_INVALID_ARGUMENT;
  if ((p.flags & ~layout::kKnownFlags) || p.reserved != 0) return SZ_ERROR_INVALID_ARGUMENT;
  *ws = encode_workspace_bytes(layout::n_chunks(n, p.chunk_log2));
  return SZ_OK;
}

sz_status compress(const void* d_src, const void* const* d_pages, uint64_t page_values, uint64_t n, sz_dtype dtype,
                   const sz_codebook* codebook, const sz_params* params, void* d_dst, size_t dst_capacity,
                   void* d_workspace, size_t ws_size, uint64_t* d_frame_size, uint64_t* h_frame_size,
                   cudaStream_t stream, const sz_channel_book* book = nullptr, uint32_t tensor = 0) {
  EncodeArgs a;
  sz_status s = make_encode_args(d_src, d_pages, page_values, n, dtype, codebook, params, d_dst, dst_capacity,
                                 d_workspace, ws_size, d_frame_size, &a, book, tensor);
  if (s != SZ_OK) return s;
  s = launch_encode(a, stream);
  if (s != SZ_OK) return s;
  if (h_frame_size &&
      cudaMemcpyAsync(h_frame_size, d_frame_size, sizeof(uint64_t), cudaMemcpyDeviceToHost, stream) != cudaSuccess)
    return SZ_ERROR_CUDA;
  return SZ_OK;
}

bool pages_too_many(uint32_t n_pages, uint64_t page_values) {
  return page_values != 0 && (uint64_t)n_pages > (layout::kMaxValues - 1) / page_values;
}

}  // namespace

extern "C" {

SZ_API int sz_cuda_available(void) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count > 0 ? 1 : 0;
}

SZ_API sz_status sz_cuda_compress_workspace_size(uint64_t n_values, sz_dtype dtype, const sz_params* params,
                                                 size_t* workspace_size) {
  return ws_query(n_values, dtype, params, workspace_size);
}

SZ_API sz_status sz_cuda_compress(const void* d_src, uint64_t n_values, sz_dtype dtype, const sz_codebook* codebook,
                                  const sz_params* params, void* d_dst, size_t dst_capacity, void* d_workspace,
                                  size_t workspace_size, uint64_t* d_frame_size, uint64_t* h_frame_size,
                                  sz_cuda_stream stream) {
  return compress(d_src, nullptr, 0, n_values, dtype, codebook, params, d_dst, dst_capacity, d_workspace,
                  workspace_size, d_frame_size, h_frame_size, (cudaStream_t)stream);
}

SZ_API sz_status sz_cuda_decompress_workspace_size(size_t, size_t, size_t* workspace_size) {
  if (!workspace_size) return SZ_ERROR_INVALID_ARGUMENT;
  *workspace_size = kDecodeWorkspaceBytes;
  return SZ_OK;
}

SZ_API sz_status sz_cuda_decompress(const void* d_src, size_t src_size, void* d_dst, size_t dst_capacity,
                                    void* d_workspace, size_t workspace_size, int32_t* d_status, uint64_t* d_dst_size,
                                    sz_cuda_stream stream) {
  DecodeArgs a;
  const sz_status s = make_decode_args(d_src, src_size, d_dst, dst_capacity, nullptr, 0, 0, d_workspace,
                                       workspace_size, d_status, d_dst_size, &a);
  if (s != SZ_OK) return s;
  return launch_decode(a, (cudaStream_t)stream);
}

SZ_API sz_status sz_cuda_compress_pages_workspace_size(uint32_t n_pages, uint64_t page_values, sz_dtype dtype,
                                                       const sz_params* params, size_t* workspace_size) {
  if (pages_too_many(n_pages, page_values)) {
    if (workspace_size) *workspace_size = 0;
    return SZ_ERROR_INVALID_ARGUMENT;
  }
  return ws_query(n_pages * page_values, dtype, params, workspace_size);
}

SZ_API sz_status sz_cuda_compress_pages(const void* const* d_pages, uint32_t n_pages, uint64_t page_values,
                                        sz_dtype dtype, const sz_codebook* codebook, const sz_params* params,
                                        void* d_dst, size_t dst_capacity, void* d_workspace, size_t workspace_size,
                                        uint64_t* d_frame_size, uint64_t* h_frame_size, sz_cuda_stream stream) {
  if (!d_pages && n_pages > 0) return SZ_ERROR_INVALID_ARGUMENT;
  if (pages_too_many(n_pages, page_values)) return SZ_ERROR_INVALID_ARGUMENT;
  const uint64_t n = (uint64_t)n_pages * page_values;
  static const void* const kNoPages[1] = {nullptr};
  return compress(nullptr, n ? d_pages : kNoPages, page_values ? page_values : 1, n, dtype, codebook, params, d_dst,
                  dst_capacity, d_workspace, workspace_size, d_frame_size, h_frame_size, (cudaStream_t)stream);
}

SZ_API sz_status sz_cuda_decompress_pages(const void* d_src, size_t src_size, void* const* d_pages, uint32_t n_pages,
                                          uint64_t page_values, void* d_workspace, size_t workspace_size,
                                          int32_t* d_status, sz_cuda_stream stream) {
  if (!d_pages && n_pages > 0) return SZ_ERROR_INVALID_ARGUMENT;
  if (pages_too_many(n_pages, page_values)) return SZ_ERROR_INVALID_ARGUMENT;
  static void* const kNoPages[1] = {nullptr};
  DecodeArgs a;
  const sz_status s = make_decode_args(d_src, src_size, nullptr, 0, d_pages ? d_pages : kNoPages, n_pages,
                                       page_values ? page_values : 1, d_workspace, workspace_size, d_status, nullptr,
                                       &a);
  if (s != SZ_OK) return s;
  return launch_decode(a, (cudaStream_t)stream);
}

SZ_API sz_status sz_cuda_compress_channels(const void* d_src, uint64_t n_values, sz_dtype dtype,
                                           const sz_channel_book* book, uint32_t tensor, const sz_params* params,
                                           void* d_dst, size_t dst_capacity, void* d_workspace, size_t workspace_size,
                                           uint64_t* d_frame_size, uint64_t* h_frame_size, sz_cuda_stream stream) {
  if (!book) return SZ_ERROR_INVALID_ARGUMENT;
  return compress(d_src, nullptr, 0, n_values, dtype, nullptr, params, d_dst, dst_capacity, d_workspace,
                  workspace_size, d_frame_size, h_frame_size, (cudaStream_t)stream, book, tensor);
}

SZ_API sz_status sz_cuda_compress_pages_channels(const void* const* d_pages, uint32_t n_pages, uint64_t page_values,
                                                 sz_dtype dtype, const sz_channel_book* book, uint32_t tensor,
                                                 const sz_params* params, void* d_dst, size_t dst_capacity,
                                                 void* d_workspace, size_t workspace_size, uint64_t* d_frame_size,
                                                 uint64_t* h_frame_size, sz_cuda_stream stream) {
  if (!book || (!d_pages && n_pages > 0)) return SZ_ERROR_INVALID_ARGUMENT;
  if (pages_too_many(n_pages, page_values)) return SZ_ERROR_INVALID_ARGUMENT;
  const uint64_t n = (uint64_t)n_pages * page_values;
  static const void* const kNoPages[1] = {nullptr};
  return compress(nullptr, n ? d_pages : kNoPages, page_values ? page_values : 1, n, dtype, nullptr, params, d_dst,
                  dst_capacity, d_workspace, workspace_size, d_frame_size, h_frame_size, (cudaStream_t)stream, book,
                  tensor);
}

SZ_API sz_status sz_cuda_decompress_book(const void* d_src, size_t src_size, const sz_channel_book* book, void* d_dst,
                                         size_t dst_capacity, void* d_workspace, size_t workspace_size,
                                         int32_t* d_status, uint64_t* d_dst_size, sz_cuda_stream stream) {
  DecodeArgs a;
  const sz_status s = make_decode_args(d_src, src_size, d_dst, dst_capacity, nullptr, 0, 0, d_workspace,
                                       workspace_size, d_status, d_dst_size, &a, book);
  if (s != SZ_OK) return s;
  return launch_decode(a, (cudaStream_t)stream);
}

SZ_API sz_status sz_cuda_decompress_pages_book(const void* d_src, size_t src_size, const sz_channel_book* book,
                                               void* const* d_pages, uint32_t n_pages, uint64_t page_values,
                                               void* d_workspace, size_t workspace_size, int32_t* d_status,
                                               sz_cuda_stream stream) {
  if (!d_src || !d_status || (!d_pages && n_pages > 0)) return SZ_ERROR_INVALID_ARGUMENT;
  if (pages_too_many(n_pages, page_values)) return SZ_ERROR_INVALID_ARGUMENT;
  static void* const kNoPages[1] = {nullptr};
  DecodeArgs a;
  const sz_status s = make_decode_args(d_src, src_size, nullptr, 0, d_pages ? d_pages : kNoPages, n_pages,
                                       page_values ? page_values : 1, d_workspace, workspace_size, d_status, nullptr,
                                       &a, book);
  if (s != SZ_OK) return s;
  return launch_decode(a, (cudaStream_t)stream);
}

SZ_API sz_status sz_cuda_decompress_entropy(const void* d_src, size_t src_size, const void* d_image,
                                            size_t image_size, void* d_dst, size_t dst_capacity, void* d_workspace,
                                            size_t workspace_size, int32_t* d_status, uint64_t* d_dst_size,
                                            sz_cuda_stream stream) {
  EntropyDecodeArgs a;
  const sz_status s = make_entropy_decode_args(d_src, src_size, d_image, image_size, d_dst, dst_capacity,
                                               d_workspace, workspace_size, d_status, d_dst_size, &a);
  if (s != SZ_OK) return s;
  return launch_entropy_decode(a, (cudaStream_t)stream);
}

SZ_API sz_status sz_cuda_compress_entropy_workspace_size(uint64_t n_values, sz_dtype dtype, const sz_params* params,
                                                         size_t* workspace_size) {
  return entropy_encode_workspace_query(n_values, dtype, params, workspace_size);
}

SZ_API sz_status sz_cuda_compress_entropy(const void* d_src, uint64_t n_values, sz_dtype dtype, const void* d_image,
                                          size_t image_size, uint32_t tensor, const sz_params* params, void* d_dst,
                                          size_t dst_capacity, void* d_workspace, size_t workspace_size,
                                          uint64_t* d_frame_size, uint64_t* h_frame_size, sz_cuda_stream stream) {
  EntropyEncodeArgs a;
  sz_status s = make_entropy_encode_args(d_src, n_values, dtype, d_image, image_size, tensor, params, d_dst,
                                         dst_capacity, d_workspace, workspace_size, d_frame_size, &a);
  if (s != SZ_OK) return s;
  s = launch_entropy_encode(a, (cudaStream_t)stream);
  if (s != SZ_OK) return s;
  if (h_frame_size && cudaMemcpyAsync(h_frame_size, d_frame_size, sizeof(uint64_t), cudaMemcpyDeviceToHost,
                                      (cudaStream_t)stream) != cudaSuccess)
    return SZ_ERROR_CUDA;
  return SZ_OK;
}

}  // extern "C"
