// kernels_decode.cu — the decoder kernel (one for every frame: it reads the frame's dtype and code width on the
// device), see kernels.cuh.
#include "cuda/kernels.cuh"

namespace splitzip {
namespace cuda {

__global__ void __launch_bounds__(DecodePolicy::kWarps * 32, DecodePolicy::kMinBlocks)
    decode_kernel(const __grid_constant__ DecodeArgs a) {
  decode_warps(a);
}
const void* decode_kernel_address() { return (const void*)decode_kernel; }

}  // namespace cuda
}  // namespace splitzip
