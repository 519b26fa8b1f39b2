// kernels.cpp — the kernel code of one dtype (SZ_EMU_DTYPE, set by tests/cuda/CMakeLists.txt, which builds this file
// once for each) on the SIMT emulator: the encoder and the decoder's chunk code of every code width (emu/kernels.h).
#include "emu/kernels.h"

#if !defined(SZ_EMU_DTYPE)
#error "SZ_EMU_DTYPE (the sz_dtype value of the kernels to build) is not set"
#endif

namespace splitzip {
namespace cuda {

#define SZ_EMU_INSTANTIATE(D, K)                                                               \
  template void emu_encode<D, K>(const EncodeArgs&);                                           \
  template void decode_chunks<D, K, false, false>(const DecodeArgs&, uint8_t*); \
  template void decode_chunks<D, K, true, false>(const DecodeArgs&, uint8_t*);  \
  template void decode_chunks<D, K, false, true>(const DecodeArgs&, uint8_t*);  \
  template void decode_chunks<D, K, true, true>(const DecodeArgs&, uint8_t*);
SZ_EMU_INSTANTIATE(SZ_EMU_DTYPE, 1)
SZ_EMU_INSTANTIATE(SZ_EMU_DTYPE, 2)
SZ_EMU_INSTANTIATE(SZ_EMU_DTYPE, 3)
#if SZ_EMU_DTYPE != 4  // FP8 E4M3 has 4 exponent bits: no 4-bit codes (SZ_CUDA_ENCODE_KERNELS)
SZ_EMU_INSTANTIATE(SZ_EMU_DTYPE, 4)
#endif

}  // namespace cuda
}  // namespace splitzip
