// kernels_entropy_encode.cu — the encoder kernels of entropy-coded frames (version 3; agent/entropy_encode.cuh), one
// per dtype, see kernels.cuh.
#include "cuda/agent/entropy_encode.cuh"
#include "cuda/kernels.cuh"

namespace splitzip {
namespace cuda {

template <int DT>
__global__ void __launch_bounds__(EntropyEncodePolicy::kWarps * 32, EntropyEncodePolicy::kMinBlocks)
    entropy_encode_kernel(const __grid_constant__ EntropyEncodeArgs a) {
  entropy_encode_warps<DT>(a);
}
const void* entropy_encode_kernel_address(unsigned dtype) {
  switch (dtype) {
    case 1: return (const void*)entropy_encode_kernel<1>;
    case 2: return (const void*)entropy_encode_kernel<2>;
    case 3: return (const void*)entropy_encode_kernel<3>;
    case 4: return (const void*)entropy_encode_kernel<4>;
    case 5: return (const void*)entropy_encode_kernel<5>;
    default: return nullptr;
  }
}

}  // namespace cuda
}  // namespace splitzip
