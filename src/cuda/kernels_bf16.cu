// kernels_bf16.cu — the encoder kernels of dtype bf16 (one per code width), see kernels.cuh.
#include "cuda/kernels.cuh"

namespace splitzip {
namespace cuda {
SZ_CUDA_INSTANTIATE_ENCODER(1, 1)
SZ_CUDA_INSTANTIATE_ENCODER(1, 2)
SZ_CUDA_INSTANTIATE_ENCODER(1, 3)
SZ_CUDA_INSTANTIATE_ENCODER(1, 4)
}  // namespace cuda
}  // namespace splitzip
