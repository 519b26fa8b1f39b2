// kernels_fp32.cu — the encoder kernels of dtype fp32 (one per code width), see kernels.cuh.
#include "cuda/kernels.cuh"

namespace splitzip {
namespace cuda {
SZ_CUDA_INSTANTIATE_ENCODER(3, 1)
SZ_CUDA_INSTANTIATE_ENCODER(3, 2)
SZ_CUDA_INSTANTIATE_ENCODER(3, 3)
SZ_CUDA_INSTANTIATE_ENCODER(3, 4)
}  // namespace cuda
}  // namespace splitzip
