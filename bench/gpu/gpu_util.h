// gpu_util.h — what the GPU benchmarks share: exit on a CUDA or splitzip error with the failing call, and reading
// a data file (empty when missing, so that a dataset is skipped).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "splitzip/splitzip.h"

#define CK(x)                                                                            \
  do {                                                                                   \
    cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) {                                                             \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)
#define SZ(x)                                                                        \
  do {                                                                               \
    sz_status s_ = (x);                                                              \
    if (s_ != SZ_OK) {                                                               \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, sz_status_name(s_)); \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)

namespace szbench {

inline std::vector<uint8_t> read_file(const std::string& path) {
  std::vector<uint8_t> v;
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) return v;
  fseek(f, 0, SEEK_END);
  v.resize((size_t)ftell(f));
  fseek(f, 0, SEEK_SET);
  if (fread(v.data(), 1, v.size(), f) != v.size()) v.clear();
  fclose(f);
  return v;
}

}  // namespace szbench
