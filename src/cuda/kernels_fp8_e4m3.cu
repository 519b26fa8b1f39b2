// kernels_fp8_e4m3.cu — the encoder kernels of dtype fp8_e4m3 (one per code width), see kernels.cuh.
#include "cuda/kernels.cuh"

namespace splitzip {
namespace cuda {
SZ_CUDA_INSTANTIATE_ENCODER(4, 1)
SZ_CUDA_INSTANTIATE_ENCODER(4, 2)
SZ_CUDA_INSTANTIATE_ENCODER(4, 3)
}  // namespace cuda
}  // namespace splitzip
