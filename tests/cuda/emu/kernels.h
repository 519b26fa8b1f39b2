// kernels.h — the CUDA codec's kernel code compiled for the SIMT emulator, a TU per dtype (emu/kernels.cpp built once
// for each, as src/cuda/kernels_<dtype>.cu are on the GPU), so that a build compiles them in parallel rather than
// all in the test TU. Each (dtype, code width k) has its encoder and the decoder's chunk code (decode_chunks, which
// decode_warps calls by the frame's dtype and k); the declarations below keep every other TU from compiling them.
#pragma once

#include "cuda/dispatch.cuh"

namespace splitzip {
namespace cuda {

// The encoder of (dtype DT, code width K), what one thread of a launch runs.
// The launcher's choice of kernel (api.cu): teams of warps for few chunks, its own kernel for channel windows.
template <int DT, int K>
void emu_encode(const EncodeArgs& a) {
  if (a.ch.bases) {
    if (a.team > 1) encode_warps<DT, K, true, true>(a);
    else encode_warps<DT, K, false, true>(a);
  } else {
    if (a.team > 1) encode_warps<DT, K, true, false>(a);
    else encode_warps<DT, K, false, false>(a);
  }
}

#define SZ_X(D, K)                                                                                    \
  extern template void emu_encode<D, K>(const EncodeArgs&);                                           \
  extern template void decode_chunks<D, K, false, false>(const DecodeArgs&, uint8_t*); \
  extern template void decode_chunks<D, K, true, false>(const DecodeArgs&, uint8_t*);  \
  extern template void decode_chunks<D, K, false, true>(const DecodeArgs&, uint8_t*);  \
  extern template void decode_chunks<D, K, true, true>(const DecodeArgs&, uint8_t*);
SZ_CUDA_ENCODE_KERNELS(SZ_X)
#undef SZ_X

}  // namespace cuda
}  // namespace splitzip
