// api.cu — the sz_cuda_* entry points of splitzip_cuda.h: host-side argument checks (nothing is enqueued when they
// fail), then the kernels of encode.cu / decode.cu on the caller's stream. Nothing here allocates or synchronises.
#include <cuda_runtime.h>

#include "cuda/kernels.h"
#include "internal.h"
#include "layout.h"
#include "splitzip/splitzip_cuda.h"

using namespace splitzip;

namespace {

bool chunk_params_ok(const sz_params* params, sz_params* out) {
  const sz_params p = params ? *params : sz_params_default();
  if (p.chunk_log2 < layout::kMinChunkLog2 || p.chunk_log2 > layout::kMaxChunkLog2) return false;
  if ((p.flags & ~layout::kKnownFlags) || p.reserved != 0) return false;
  *out = p;
  return true;
}

sz_status ws_query(uint64_t n, sz_dtype dtype, const sz_params* params, size_t* ws) {
  if (!ws) return SZ_ERROR_INVALID_ARGUMENT;
  *ws = 0;
  if (!layout::dtype_known((unsigned)dtype) || n >= layout::kMaxValues) return SZ_ERROR_INVALID_ARGUMENT;
  sz_params p;
  if (!chunk_params_ok(params, &p)) return SZ_ERROR_INVALID_ARGUMENT;
  *ws = cuda::encode_workspace_bytes(layout::n_chunks(n, p.chunk_log2));
  return SZ_OK;
}

sz_status compress(const void* d_src, const void* const* d_pages, uint64_t page_values, uint64_t n, sz_dtype dtype,
                   const sz_codebook* codebook, const sz_params* params, void* d_dst, size_t dst_capacity,
                   void* d_workspace, size_t ws_size, uint64_t* d_frame_size, uint64_t* h_frame_size,
                   cudaStream_t stream) {
  sz_codebook cb;
  sz_params p;
  const size_t dummy = 0;
  const void* src_check = d_pages ? (const void*)d_pages : d_src;
  sz_status s = detail::check_compress_args(src_check, n, dtype, codebook, params, d_dst, &dummy, &cb, &p);
  if (s != SZ_OK) return s;
  if (!d_frame_size) return SZ_ERROR_INVALID_ARGUMENT;
  if (dst_capacity < sz_compress_bound(n, dtype)) return SZ_ERROR_DST_TOO_SMALL;
  const uint64_t chunks = layout::n_chunks(n, p.chunk_log2);
  const size_t need = cuda::encode_workspace_bytes(chunks);
  if (ws_size < need) return SZ_ERROR_WORKSPACE_TOO_SMALL;
  if (!d_workspace) return SZ_ERROR_INVALID_ARGUMENT;

  const layout::DtypeTraits t = layout::dtype_traits((unsigned)dtype);
  const bool checksums = (p.flags & layout::kFlagChecksums) != 0;
  const layout::FrameOffsets o = layout::frame_offsets(n, p.chunk_log2, checksums, t, 0);
  cuda::EncodeArgs a{};
  a.src = (const uint8_t*)d_src;
  a.pages = d_pages;
  a.page_values = page_values;
  a.dst = (uint8_t*)d_dst;
  a.n = n;
  a.n_chunks = chunks;
  a.index_off = o.index;
  a.checksum_off = o.checksums;
  a.rest_off = o.rest;
  a.exp_off = o.exponents;
  a.flags = p.flags;
  a.chunk_log2 = p.chunk_log2;
  a.code_bits = cb.code_bits;
  a.count = cb.count;
  a.dtype = (uint32_t)dtype;
  const uint32_t groups = (1u << p.chunk_log2) / 8;
  a.raw_rec_max = groups * t.exponent_bits;
  a.esc_cap_max = groups * (t.exponent_bits - cb.code_bits) / 3;
  // Chunks of up to 16 KiB are staged in shared memory for the checksum; larger ones are hashed from global memory.
  const uint64_t chunk_bytes = (uint64_t)(1u << p.chunk_log2) * (t.value_bits / 8);
  a.stage_bytes = (checksums && chunk_bytes <= 16384) ? (uint32_t)chunk_bytes : 0;
  for (int i = 0; i < 16; ++i) a.codebook[i] = i < cb.count ? cb.values[i] : 0;
  detail::build_encode_table(cb, a.table);
  a.tile_state = (unsigned long long*)d_workspace;
  a.frame_size = d_frame_size;
  s = cuda::launch_encode(a, stream);
  if (s != SZ_OK) return s;
  if (h_frame_size &&
      cudaMemcpyAsync(h_frame_size, d_frame_size, sizeof(uint64_t), cudaMemcpyDeviceToHost, stream) != cudaSuccess)
    return SZ_ERROR_CUDA;
  return SZ_OK;
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
  *workspace_size = 0;
  return SZ_OK;
}

SZ_API sz_status sz_cuda_decompress(const void* d_src, size_t src_size, void* d_dst, size_t dst_capacity, void*,
                                    size_t, int32_t* d_status, uint64_t* d_dst_size, sz_cuda_stream stream) {
  if (!d_src || !d_status || (!d_dst && dst_capacity > 0)) return SZ_ERROR_INVALID_ARGUMENT;
  cuda::DecodeArgs a{};
  a.src = (const uint8_t*)d_src;
  a.src_size = src_size;
  a.dst = (uint8_t*)d_dst;
  a.dst_capacity = dst_capacity;
  a.status = d_status;
  a.dst_size = d_dst_size;
  a.general = cuda::tune_kernel() == cuda::KernelChoice::kGeneral;
  a.tile = cuda::tune_kernel() == cuda::KernelChoice::kTile;
  return cuda::launch_decode(a, (cudaStream_t)stream);
}

SZ_API sz_status sz_cuda_compress_pages_workspace_size(uint32_t n_pages, uint64_t page_values, sz_dtype dtype,
                                                       const sz_params* params, size_t* workspace_size) {
  if (page_values != 0 && (uint64_t)n_pages > (layout::kMaxValues - 1) / page_values) {
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
  if (page_values != 0 && (uint64_t)n_pages > (layout::kMaxValues - 1) / page_values) return SZ_ERROR_INVALID_ARGUMENT;
  const uint64_t n = (uint64_t)n_pages * page_values;
  static const void* const kNoPages[1] = {nullptr};
  return compress(nullptr, n ? d_pages : kNoPages, page_values ? page_values : 1, n, dtype, codebook, params, d_dst,
                  dst_capacity, d_workspace, workspace_size, d_frame_size, h_frame_size, (cudaStream_t)stream);
}

SZ_API sz_status sz_cuda_decompress_pages(const void* d_src, size_t src_size, void* const* d_pages, uint32_t n_pages,
                                          uint64_t page_values, void*, size_t, int32_t* d_status,
                                          sz_cuda_stream stream) {
  if (!d_src || !d_status || (!d_pages && n_pages > 0)) return SZ_ERROR_INVALID_ARGUMENT;
  if (page_values != 0 && (uint64_t)n_pages > (layout::kMaxValues - 1) / page_values) return SZ_ERROR_INVALID_ARGUMENT;
  cuda::DecodeArgs a{};
  a.src = (const uint8_t*)d_src;
  a.src_size = src_size;
  a.pages = d_pages;
  a.n_pages = n_pages;
  a.page_values = page_values ? page_values : 1;
  a.status = d_status;
  a.dst_size = nullptr;
  a.general = cuda::tune_kernel() == cuda::KernelChoice::kGeneral;
  a.tile = cuda::tune_kernel() == cuda::KernelChoice::kTile;
  static void* const kNoPages[1] = {nullptr};
  if (!a.pages) a.pages = kNoPages;
  return cuda::launch_decode(a, (cudaStream_t)stream);
}

}  // extern "C"
