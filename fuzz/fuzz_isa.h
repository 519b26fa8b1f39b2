// fuzz_isa.h — which CPU kernel set a fuzzer runs: SPLITZIP_FUZZ_ISA (portable | avx2 | avx512; on a CPU without
// it, the best set below) limits the library's choice through sz_set_cpu_isa for the whole run, so fuzz/run.sh can
// fuzz each set. A hook of the fuzzers only: the library reads no environment variable.
#pragma once

#include "splitzip/splitzip.h"

#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* isa = getenv("SPLITZIP_FUZZ_ISA");
  if (isa != nullptr && *isa != '\0' && sz_set_cpu_isa(isa) != SZ_OK) {
    fprintf(stderr, "SPLITZIP_FUZZ_ISA=%s: not a kernel set (portable, avx2, avx512)\n", isa);
    abort();
  }
  fprintf(stderr, "CPU kernels: %s\n", sz_cpu_isa());
  return 0;
}
