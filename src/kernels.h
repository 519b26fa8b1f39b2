// kernels.h — the interface between the fast codec driver (fast.cpp) and its instruction-set specific kernels
// (fast_avx2.cpp, fast_avx512.cpp). Plain declarations and POD structs only: the AVX2 TU is compiled with -mavx2 and must not
// instantiate any inline function that code running on other CPUs could end up using.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace splitzip {
namespace kernels {

// Tables derived from a codebook once per call.
struct CodeTables {
  uint8_t code_of[256];  // exponent -> code, or 0xFF when the exponent is not in the codebook (an escape)
  uint8_t exp_of[16];    // code -> exponent (entries >= count are 0 and never used: such codes are rejected)
  uint8_t k;             // code bits
  uint8_t count;         // codebook entries
  // For the byte-shuffle lookup: the distinct high nibbles of the codebook's exponents, and for each a 16-entry
  // table indexed by the low nibble that holds code + 1 for codebook exponents and 0 for the others.
  uint8_t n_nibbles;
  uint8_t nibbles[16];
  uint8_t nibble_lut[16][16];
};

namespace avx2 {
// BF16, len a multiple of 32. Writes len rest bytes to rest, len*k/8 code bytes to codes, and for every value whose
// exponent is not in the codebook its chunk-relative position (pos_base + j) and exponent to pos / exps.
// Returns the number of escapes written.
size_t encode_bf16(const uint8_t* src, size_t len, uint8_t* rest, uint8_t* codes, const CodeTables& t,
                   uint16_t* pos, uint8_t* exps, uint32_t pos_base);
// BF16, len a multiple of 32: joins len rest bytes and codes (exponent = exp_of[code]) into out. Returns false if a
// code is >= count (nothing else is checked here). `readable` bytes from codes on may be read (>= len * k / 8).
bool decode_bf16(const uint8_t* rest, const uint8_t* codes, size_t readable, size_t len, const CodeTables& t,
                 uint8_t* out);
// FP8 (mantissa_bits 3 = E4M3, 2 = E5M2), len a multiple of 32: as the BF16 kernels, with rest fields packed to
// R = mantissa_bits + 1 bits. `rest_readable` / `readable`: bytes that may be read from rest / codes on.
size_t encode_fp8(unsigned mantissa_bits, const uint8_t* src, size_t len, uint8_t* rest, uint8_t* codes,
                  const CodeTables& t, uint16_t* pos, uint8_t* exps, uint32_t pos_base);
bool decode_fp8(unsigned mantissa_bits, const uint8_t* rest, size_t rest_readable, const uint8_t* codes,
                size_t readable, size_t len, const CodeTables& t, uint8_t* out);
// FP16, len a multiple of 32: as the FP8 kernels, with 11-bit rest fields.
size_t encode_fp16(const uint8_t* src, size_t len, uint8_t* rest, uint8_t* codes, const CodeTables& t,
                   uint16_t* pos, uint8_t* exps, uint32_t pos_base);
bool decode_fp16(const uint8_t* rest, size_t rest_readable, const uint8_t* codes, size_t readable, size_t len,
                 const CodeTables& t, uint8_t* out);
// XXH3-64 (low 32 bits) and LH32 compiled with AVX2.
uint32_t h32(const void* data, size_t size);
uint32_t lh32(const void* data, size_t size);
}  // namespace avx2

namespace avx512 {
// BF16 with AVX-512 BW + VBMI, len a multiple of 64; otherwise as avx2::encode_bf16 / decode_bf16 (the decoder
// reads exactly len * k / 8 code bytes and len rest bytes).
size_t encode_bf16(const uint8_t* src, size_t len, uint8_t* rest, uint8_t* codes, const CodeTables& t,
                   uint16_t* pos, uint8_t* exps, uint32_t pos_base);
bool decode_bf16(const uint8_t* rest, const uint8_t* codes, size_t len, const CodeTables& t, uint8_t* out);
uint32_t h32(const void* data, size_t size);
uint32_t lh32(const void* data, size_t size);
}  // namespace avx512

}  // namespace kernels
}  // namespace splitzip
