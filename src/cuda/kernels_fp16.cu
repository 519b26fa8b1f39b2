// kernels_fp16.cu — the encoder kernels of dtype fp16 (one per code width), see kernels.cuh.
#include "cuda/kernels.cuh"

namespace splitzip {
namespace cuda {
SZ_CUDA_INSTANTIATE_ENCODER(2, 1)
SZ_CUDA_INSTANTIATE_ENCODER(2, 2)
SZ_CUDA_INSTANTIATE_ENCODER(2, 3)
SZ_CUDA_INSTANTIATE_ENCODER(2, 4)
}  // namespace cuda
}  // namespace splitzip
