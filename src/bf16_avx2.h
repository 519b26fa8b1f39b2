// bf16_avx2.h — BF16 value splitting shared by the AVX2 translation units (fast_avx2.cpp, entropy_avx2.cpp), which
// are compiled for AVX2; include it nowhere else.
#pragma once

#include <immintrin.h>
#include <stdint.h>

namespace splitzip {
namespace kernels {
namespace avx2 {
namespace {

// 32 BF16 values at src (64 bytes) -> their exponent bytes (*e) and rest bytes (*r: sign << 7 | mantissa), each
// in value order.
inline void split_bf16_32(const uint8_t* src, __m256i* e, __m256i* r) {
  const __m256i m00ff = _mm256_set1_epi16(0x00FF);
  const __m256i m007f = _mm256_set1_epi16(0x007F);
  const __m256i m0080 = _mm256_set1_epi16(0x0080);
  const __m256i a = _mm256_loadu_si256((const __m256i*)src);
  const __m256i b = _mm256_loadu_si256((const __m256i*)(src + 32));
  const __m256i ea = _mm256_and_si256(_mm256_srli_epi16(a, 7), m00ff);
  const __m256i eb = _mm256_and_si256(_mm256_srli_epi16(b, 7), m00ff);
  const __m256i ra = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 8), m0080), _mm256_and_si256(a, m007f));
  const __m256i rb = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 8), m0080), _mm256_and_si256(b, m007f));
  *e = _mm256_permute4x64_epi64(_mm256_packus_epi16(ea, eb), 0xD8);
  *r = _mm256_permute4x64_epi64(_mm256_packus_epi16(ra, rb), 0xD8);
}

}  // namespace
}  // namespace avx2
}  // namespace kernels
}  // namespace splitzip
