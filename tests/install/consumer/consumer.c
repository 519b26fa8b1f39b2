/* A C program that uses an installed splitzip (tests/install/run.sh): compresses 1000 BF16 values and checks that
 * they come back bit-exact. Written in C and linked by the C compiler, so a static libsplitzip links only when the
 * package says what else it needs (the C++ runtime, threads). */
#include <stdio.h>
#include <string.h>

#include <splitzip/splitzip.h>

int main(void) {
  enum { N = 1000 };
  static uint16_t src[N], back[N];
  static uint8_t frame[SZ_COMPRESS_BOUND(N, 2)];
  for (unsigned i = 0; i < N; ++i) src[i] = (uint16_t)(0x3F80 + (i * 37u) % 200u);
  size_t size = 0, written = 0;
  sz_status s = sz_compress(src, N, SZ_DTYPE_BF16, NULL, NULL, frame, sizeof frame, &size);
  if (s == SZ_OK) s = sz_decompress(frame, size, back, sizeof back, &written, 2);
  if (s != SZ_OK || written != sizeof back || memcmp(src, back, sizeof src) != 0) {
    fprintf(stderr, "consumer: %s\n", sz_status_name(s));
    return 1;
  }
  printf("splitzip %s: %d values, %zu bytes -> %zu\n", sz_version_string(), N, sizeof src, size);
  return 0;
}
