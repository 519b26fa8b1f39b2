// kernels.cuh — the __global__ entry points of the CUDA codec and how the host finds them. Each kernels_*.cu
// instantiates the kernels of some dtypes (so that they compile in parallel); api.cu launches them by address.
#pragma once

#include "cuda/dispatch.cuh"

namespace splitzip {
namespace cuda {

// Host address of the encoder kernel of (dtype DT, code width K) (teams: the one for calls with few chunks, see
// encode_team), and of the decoder kernel.
template <int DT, int K>
const void* encode_kernel_address(bool teams);
#define SZ_X(D, K) \
  template <>      \
  const void* encode_kernel_address<D, K>(bool teams);
SZ_CUDA_ENCODE_KERNELS(SZ_X)
#undef SZ_X
const void* decode_kernel_address();

#if defined(__CUDACC__)
template <int DT, int K, bool kTeams>
__global__ void __launch_bounds__(EncodePolicy::kWarps * 32, EncodePolicy::kMinBlocks)
    encode_kernel(const __grid_constant__ EncodeArgs a) {
  encode_warps<DT, K, kTeams>(a);
}
#define SZ_CUDA_INSTANTIATE_ENCODER(D, K)                                                              \
  template <>                                                                                          \
  const void* encode_kernel_address<D, K>(bool teams) {                                               \
    return teams ? (const void*)encode_kernel<D, K, true> : (const void*)encode_kernel<D, K, false>; \
  }
#endif

}  // namespace cuda
}  // namespace splitzip
