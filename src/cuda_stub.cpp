// cuda_stub.cpp — the CUDA entry points of splitzip_cuda.h in a build without CUDA: every call reports
// SZ_ERROR_NOT_SUPPORTED and sz_cuda_available() is 0.
#include "splitzip/splitzip_cuda.h"

extern "C" {

SZ_API int sz_cuda_available(void) { return 0; }

SZ_API sz_status sz_cuda_compress_workspace_size(uint64_t, sz_dtype, const sz_params*, size_t* workspace_size) {
  if (workspace_size) *workspace_size = 0;
  return SZ_ERROR_NOT_SUPPORTED;
}

SZ_API sz_status sz_cuda_compress(const void*, uint64_t, sz_dtype, const sz_codebook*, const sz_params*, void*, size_t,
                                  void*, size_t, uint64_t*, uint64_t*, sz_cuda_stream) {
  return SZ_ERROR_NOT_SUPPORTED;
}

SZ_API sz_status sz_cuda_decompress_workspace_size(size_t, size_t, size_t* workspace_size) {
  if (workspace_size) *workspace_size = 0;
  return SZ_ERROR_NOT_SUPPORTED;
}

SZ_API sz_status sz_cuda_decompress(const void*, size_t, void*, size_t, void*, size_t, int32_t*, uint64_t*,
                                    sz_cuda_stream) {
  return SZ_ERROR_NOT_SUPPORTED;
}

SZ_API sz_status sz_cuda_compress_pages_workspace_size(uint32_t, uint64_t, sz_dtype, const sz_params*,
                                                       size_t* workspace_size) {
  if (workspace_size) *workspace_size = 0;
  return SZ_ERROR_NOT_SUPPORTED;
}

SZ_API sz_status sz_cuda_compress_pages(const void* const*, uint32_t, uint64_t, sz_dtype, const sz_codebook*,
                                        const sz_params*, void*, size_t, void*, size_t, uint64_t*, uint64_t*,
                                        sz_cuda_stream) {
  return SZ_ERROR_NOT_SUPPORTED;
}

SZ_API sz_status sz_cuda_decompress_pages(const void*, size_t, void* const*, uint32_t, uint64_t, void*, size_t,
                                          int32_t*, sz_cuda_stream) {
  return SZ_ERROR_NOT_SUPPORTED;
}

SZ_API sz_status sz_cuda_compress_channels(const void*, uint64_t, sz_dtype, const sz_channel_book*, uint32_t,
                                           const sz_params*, void*, size_t, void*, size_t, uint64_t*, uint64_t*,
                                           sz_cuda_stream) {
  return SZ_ERROR_NOT_SUPPORTED;
}

SZ_API sz_status sz_cuda_compress_pages_channels(const void* const*, uint32_t, uint64_t, sz_dtype,
                                                 const sz_channel_book*, uint32_t, const sz_params*, void*, size_t,
                                                 void*, size_t, uint64_t*, uint64_t*, sz_cuda_stream) {
  return SZ_ERROR_NOT_SUPPORTED;
}

SZ_API sz_status sz_cuda_decompress_book(const void*, size_t, const sz_channel_book*, void*, size_t, void*, size_t,
                                         int32_t*, uint64_t*, sz_cuda_stream) {
  return SZ_ERROR_NOT_SUPPORTED;
}

SZ_API sz_status sz_cuda_decompress_pages_book(const void*, size_t, const sz_channel_book*, void* const*, uint32_t,
                                               uint64_t, void*, size_t, int32_t*, sz_cuda_stream) {
  return SZ_ERROR_NOT_SUPPORTED;
}

SZ_API sz_status sz_cuda_decompress_entropy(const void*, size_t, const void*, size_t, void*, size_t, void*, size_t,
                                            int32_t*, uint64_t*, sz_cuda_stream) {
  return SZ_ERROR_NOT_SUPPORTED;
}

SZ_API sz_status sz_cuda_compress_entropy_workspace_size(uint64_t, sz_dtype, const sz_params*,
                                                         size_t* workspace_size) {
  if (workspace_size) *workspace_size = 0;
  return SZ_ERROR_NOT_SUPPORTED;
}

SZ_API sz_status sz_cuda_compress_entropy(const void*, uint64_t, sz_dtype, const void*, size_t, uint32_t,
                                          const sz_params*, void*, size_t, void*, size_t, uint64_t*, uint64_t*,
                                          sz_cuda_stream) {
  return SZ_ERROR_NOT_SUPPORTED;
}

SZ_API sz_status sz_cuda_signal(uint64_t*, uint64_t, sz_cuda_stream) { return SZ_ERROR_NOT_SUPPORTED; }

SZ_API sz_status sz_cuda_wait(const uint64_t*, uint64_t, sz_cuda_stream) { return SZ_ERROR_NOT_SUPPORTED; }

SZ_API sz_status sz_cuda_enable_peer_access(int) { return SZ_ERROR_NOT_SUPPORTED; }

}  // extern "C"
