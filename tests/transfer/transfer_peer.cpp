// transfer_peer.cpp — a second process for the transfer tests: a receiver or a sender that can be killed, or kill
// itself, in the middle of a transfer.
//
//   transfer_peer serve PORT_FILE OUT_DIR TIMEOUT_S
//   transfer_peer send PORT FILE RATE_BYTES_PER_S TIMEOUT_S DIE_AFTER_CHUNKS
//
// serve writes the bound port to PORT_FILE (atomically), serves one session and exits 0 on success, 1 otherwise.
// send sends FILE (bf16) in chunks of 16384 values; with DIE_AFTER_CHUNKS > 0 it calls _exit(3) after handing that
// many chunks to UCX, as a crash would.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "splitzip/transfer.hpp"

namespace tr = splitzip::transfer;

int main(int argc, char** argv) {
  if (argc >= 5 && std::string(argv[1]) == "serve") {
    tr::ServeOptions o;
    o.out_dir = argv[3];
    o.timeout_s = atof(argv[4]);
    o.accept_timeout_s = 30;
    tr::Server server;
    std::string err;
    if (server.open(o, &err) != SZ_OK) {
      fprintf(stderr, "transfer_peer: %s\n", err.c_str());
      return 1;
    }
    const std::string tmp = std::string(argv[2]) + ".tmp";
    FILE* f = fopen(tmp.c_str(), "w");
    if (f == nullptr) return 1;
    fprintf(f, "%u\n", (unsigned)server.port());
    fclose(f);
    if (rename(tmp.c_str(), argv[2]) != 0) return 1;
    tr::SessionStats s;
    const sz_status st = server.serve_one(&s, &err);
    if (st != SZ_OK) fprintf(stderr, "transfer_peer: %s\n", err.c_str());
    return st == SZ_OK ? 0 : 1;
  }
  if (argc >= 7 && std::string(argv[1]) == "send") {
    std::ifstream in(argv[3], std::ios::binary);
    std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    tr::Tensor t;
    t.name = "victim.bin";
    t.dtype = SZ_DTYPE_BF16;
    t.data = data.data();
    t.size = data.size();
    tr::SendOptions o;
    o.chunk_values = 16384;
    o.window = 2;
    o.rate_bytes_per_s = atof(argv[4]);
    o.timeout_s = atof(argv[5]);
    o.faults.die_after_chunks = strtoull(argv[6], nullptr, 10);
    o.faults.die = [] { _exit(3); };
    std::string err;
    const sz_status st = tr::send("127.0.0.1", (uint16_t)atoi(argv[2]), {t}, o, nullptr, &err);
    if (st != SZ_OK) fprintf(stderr, "transfer_peer: %s\n", err.c_str());
    return st == SZ_OK ? 0 : 1;
  }
  fprintf(stderr, "usage: transfer_peer serve PORT_FILE OUT_DIR TIMEOUT_S | send PORT FILE RATE TIMEOUT DIE_AFTER\n");
  return 2;
}
