// A C++ program that uses an installed splitzip transfer library (tests/install/run.sh): links it and calls it.
#include <cstdio>

#include <splitzip/transfer.hpp>

int main() {
  const bool ok = splitzip::transfer::valid_tensor_name("layers.0.k") && !splitzip::transfer::valid_tensor_name("..");
  std::printf("splitzip transfer protocol %u: %s\n", unsigned(splitzip::transfer::kProtocolVersion), ok ? "ok" : "bad");
  return ok ? 0 : 1;
}
