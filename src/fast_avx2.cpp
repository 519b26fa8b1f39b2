// fast_avx2.cpp — AVX2 kernels of the fast CPU codec (filled in by the next step).
