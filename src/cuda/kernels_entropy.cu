// kernels_entropy.cu — the decoder kernel of entropy-coded frames (version 3; agent/entropy_decode.cuh), see
// kernels.cuh.
#include "cuda/agent/entropy_decode.cuh"
#include "cuda/kernels.cuh"

namespace splitzip {
namespace cuda {

__global__ void __launch_bounds__(EntropyDecodePolicy::kWarps * 32, EntropyDecodePolicy::kMinBlocks)
    entropy_decode_kernel(const __grid_constant__ EntropyDecodeArgs a) {
  entropy_decode_warps(a);
}
const void* entropy_decode_kernel_address() { return (const void*)entropy_decode_kernel; }

}  // namespace cuda
}  // namespace splitzip
