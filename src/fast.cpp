// fast.cpp — the fast CPU codec (first version: forwards to the reference codec; the vectorised path follows).
#include <stdlib.h>
#include <string.h>

#include "internal.h"

namespace splitzip {
namespace detail {

static bool cpu_has_avx2() {
#if defined(SPLITZIP_HAVE_AVX2_TU) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2");
#else
  return false;
#endif
}

Isa selected_isa() {
  const char* env = getenv("SPLITZIP_CPU_ISA");
  const bool avx2 = cpu_has_avx2();
  if (env != nullptr && strcmp(env, "portable") == 0) return Isa::kPortable;
  return avx2 ? Isa::kAvx2 : Isa::kPortable;
}

const char* isa_name(Isa isa) { return isa == Isa::kAvx2 ? "avx2" : "portable"; }

}  // namespace detail
}  // namespace splitzip

extern "C" {

SZ_API sz_status sz_compress(const void* src, uint64_t n, sz_dtype dtype, const sz_codebook* codebook,
                             const sz_params* params, void* dst, size_t dst_capacity, size_t* dst_size) {
  return sz_compress_reference(src, n, dtype, codebook, params, dst, dst_capacity, dst_size);
}

SZ_API sz_status sz_decompress(const void* src, size_t src_size, void* dst, size_t dst_capacity, size_t* dst_size,
                               unsigned threads) {
  (void)threads;
  return sz_decompress_reference(src, src_size, dst, dst_capacity, dst_size);
}

}  // extern "C"
