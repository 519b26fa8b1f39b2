// kernels.h — launch interface between the host API (api.cu) and the kernels (encode.cu, decode.cu).
#pragma once

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "splitzip/splitzip.h"

namespace splitzip {
namespace cuda {

// Everything the encoder needs, resolved and checked on the host.
struct EncodeArgs {
  const uint8_t* src;        // contiguous input, or nullptr when pages is set
  const void* const* pages;  // device array of page pointers (paged API)
  uint64_t page_values;
  uint8_t* dst;
  uint64_t n;
  uint64_t n_chunks;
  uint64_t index_off, checksum_off, rest_off, exp_off;
  uint32_t flags;
  uint32_t chunk_log2;
  uint32_t code_bits;
  uint32_t count;
  uint32_t dtype;
  uint32_t raw_rec_max;     // bytes of a raw record of a full chunk = (S/8)*E
  uint32_t esc_cap_max;     // escapes a coded full chunk can hold = floor((S/8)*(E-k)/3)
  uint32_t stage_bytes;     // shared memory for the chunk's input when hashing (0: hash from global memory)
  uint8_t codebook[16];
  uint8_t table[256];       // exponent -> code, 0xFF = escape
  unsigned long long* tile_state;  // workspace: [0] chunk counter, [1 + c] look-back word of chunk c
  uint64_t* frame_size;
};

// Workspace bytes of the encoder for n_chunks chunks.
inline size_t encode_workspace_bytes(uint64_t n_chunks) { return (size_t)(8 * (n_chunks + 1) + 255) / 256 * 256; }

sz_status launch_encode(const EncodeArgs& a, cudaStream_t stream);

// Tuning knob for experiments, read once from the environment (never part of the format):
//   SPLITZIP_CUDA_KERNEL=general  the general kernels for every chunk size and dtype
//   SPLITZIP_CUDA_KERNEL=tile     no warp-per-chunk BF16 kernels: the tile kernels of chunk size 4096 (v6)
enum class KernelChoice { kAuto, kTile, kGeneral };
inline KernelChoice tune_kernel() {
  static const KernelChoice v = [] {
    const char* e = getenv("SPLITZIP_CUDA_KERNEL");
    if (e && strcmp(e, "general") == 0) return KernelChoice::kGeneral;
    if (e && strcmp(e, "tile") == 0) return KernelChoice::kTile;
    return KernelChoice::kAuto;
  }();
  return v;
}
struct DecodeArgs {
  const uint8_t* src;
  size_t src_size;
  uint8_t* dst;              // contiguous output, or nullptr when pages is set
  size_t dst_capacity;
  void* const* pages;
  uint32_t n_pages;
  uint64_t page_values;
  int32_t* status;
  uint64_t* dst_size;        // may be nullptr
  bool general;              // tune_kernel() == kGeneral: skip the fast paths
  bool tile;                 // tune_kernel() == kTile: skip the warp-per-chunk BF16 path
};

sz_status launch_decode(const DecodeArgs& a, cudaStream_t stream);

}  // namespace cuda
}  // namespace splitzip
