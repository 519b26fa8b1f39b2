// kernels.cuh — the __global__ entry points of the CUDA codec and how the host finds them. Each kernels_*.cu
// instantiates the kernels of some dtypes (so that they compile in parallel); api.cu launches them by address.
#pragma once

#include "cuda/dispatch.cuh"

namespace splitzip {
namespace cuda {

// Host address of the encoder kernel of (dtype DT, code width K) (teams: the one for calls with few chunks, see
// encode_team; ch: the one for frames with channel windows), and of the decoder kernel.
template <int DT, int K>
const void* encode_kernel_address(bool teams, bool ch);
#define SZ_X(D, K) \
  template <>      \
  const void* encode_kernel_address<D, K>(bool teams, bool ch);
SZ_CUDA_ENCODE_KERNELS(SZ_X)
#undef SZ_X
const void* decode_kernel_address();
const void* entropy_decode_kernel_address();  // version 3 frames
const void* entropy_encode_kernel_address(unsigned dtype);  // version 3 frames of a dtype (nullptr: none)

#if defined(__CUDACC__)
template <int DT, int K, bool kTeams, bool kCh>
__global__ void __launch_bounds__(EncodePolicy::kWarps * 32, EncodePolicy::kMinBlocks)
    encode_kernel(const __grid_constant__ EncodeArgs a) {
  encode_warps<DT, K, kTeams, kCh>(a);
}
#define SZ_CUDA_INSTANTIATE_ENCODER(D, K)                                                                \
  template <>                                                                                            \
  const void* encode_kernel_address<D, K>(bool teams, bool ch) {                                         \
    const void* const kernels[2][2] = {                                                                  \
        {(const void*)encode_kernel<D, K, false, false>, (const void*)encode_kernel<D, K, true, false>}, \
        {(const void*)encode_kernel<D, K, false, true>, (const void*)encode_kernel<D, K, true, true>}};  \
    return kernels[ch][teams];                                                                           \
  }
#endif

}  // namespace cuda
}  // namespace splitzip
