// kernels_fp8_e5m2.cu — the encoder kernels of dtype fp8_e5m2 (one per code width), see kernels.cuh.
#include "cuda/kernels.cuh"

namespace splitzip {
namespace cuda {
SZ_CUDA_INSTANTIATE_ENCODER(5, 1)
SZ_CUDA_INSTANTIATE_ENCODER(5, 2)
SZ_CUDA_INSTANTIATE_ENCODER(5, 3)
SZ_CUDA_INSTANTIATE_ENCODER(5, 4)
}  // namespace cuda
}  // namespace splitzip
