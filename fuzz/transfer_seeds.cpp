// transfer_seeds DIR — writes the seeds of fuzz_transfer (fuzz/seeds/transfer): valid handshakes in both modes,
// with and without the token of the fuzzer's token limits, each followed by the CHUNK headers of a correct session
// (in order and out of order within the window; a compressed session also with raw messages among its frames), and
// a few broken variants. Built with the fuzzers.
#include <stdio.h>

#include <string>
#include <vector>

#include "wire/protocol.h"

namespace proto = splitzip::transfer::proto;

namespace {

void put_u32(std::vector<uint8_t>* v, uint32_t x) {
  for (int i = 0; i < 4; ++i) v->push_back((uint8_t)(x >> (8 * i)));
}

// limits byte, piece byte, HELLO message, chunk records; `mixed`: a compressed session whose odd messages are raw
std::vector<uint8_t> seed(uint8_t limits, bool raw, const std::string& token, bool reorder, bool mixed = false) {
  proto::Hello h;
  h.protocol_version = splitzip::transfer::kProtocolVersion;
  h.format_version = SZ_FORMAT_VERSION;
  h.mode = raw ? proto::kModeRaw : proto::kModeCompressed;
  h.session = 77;
  h.chunk_values = 1000;
  h.window = 3;
  h.token = token;
  const uint64_t sizes[2] = {2 * 2500, 4 * 1000};
  const sz_dtype dtypes[2] = {SZ_DTYPE_BF16, SZ_DTYPE_FP32};
  const char* names[2] = {"k.bf16", "v.fp32"};
  for (int i = 0; i < 2; ++i) {
    proto::TensorEntry e;
    e.name = names[i];
    e.dtype = (uint8_t)dtypes[i];
    e.size = sizes[i];
    if (!raw) {
      sz_codebook cb;
      sz_default_codebook(dtypes[i], SZ_KIND_GENERIC, &cb);
      sz_codebook_serialize(&cb, e.codebook, sizeof e.codebook);
    }
    h.tensors.push_back(e);
  }
  std::vector<uint8_t> out = {limits, 5};
  const std::vector<uint8_t> msg = proto::encode_message(proto::kHello, proto::encode_hello(h), true);
  out.insert(out.end(), msg.begin(), msg.end());
  // seqs: tensor 0 has 3 chunks (1000, 1000, 500 values), tensor 1 one chunk of 1000
  struct C { uint64_t seq; uint32_t tensor; uint64_t chunk; uint64_t values; size_t w; };
  std::vector<C> chunks = {{0, 0, 0, 1000, 2}, {1, 0, 1, 1000, 2}, {2, 0, 2, 500, 2}, {3, 1, 0, 1000, 4}};
  if (reorder) std::swap(chunks[0], chunks[2]);
  for (const C& c : chunks) {
    const bool raw_msg = raw || (mixed && c.seq % 2 == 1);
    proto::Header hd;
    hd.type = proto::kChunk;
    hd.flags = raw_msg ? proto::kFlagPayloadHash : 0;
    hd.seq = c.seq;
    hd.tensor = c.tensor;
    hd.chunk = c.chunk;
    hd.payload_size = raw_msg ? c.values * c.w : c.values;  // a compressed frame of any size up to the bound
    uint8_t b[proto::kHeaderSize];
    proto::write_header(b, hd);
    out.insert(out.end(), b, b + sizeof b);
    put_u32(&out, (uint32_t)hd.payload_size);
  }
  return out;
}

bool write(const std::string& path, const std::vector<uint8_t>& b) {
  FILE* f = fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = fwrite(b.data(), 1, b.size(), f) == b.size();
  return fclose(f) == 0 && ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: transfer_seeds DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  bool ok = true;
  ok &= write(dir + "/raw_in_order.bin", seed(0, true, "", false));
  {
    std::vector<uint8_t> r = seed(0, false, "", false);
    r[1] |= 0x80;  // the harness repairs checksums
    ok &= write(dir + "/compressed_repair.bin", r);
    r = seed(3, true, "secret", true);
    r[1] |= 0x80;
    ok &= write(dir + "/raw_repair_small_limits.bin", r);
  }
  ok &= write(dir + "/compressed_reordered.bin", seed(0, false, "", true));
  ok &= write(dir + "/compressed_with_raw_messages.bin", seed(0, false, "", false, true));
  {
    std::vector<uint8_t> r = seed(0, false, "", true, true);
    r[1] |= 0x80;
    ok &= write(dir + "/compressed_with_raw_messages_repair.bin", r);
  }
  ok &= write(dir + "/token_small_limits.bin", seed(3, true, "secret", false));
  ok &= write(dir + "/wrong_token.bin", seed(1, true, "guess", false));
  std::vector<uint8_t> cut = seed(0, true, "", false);
  cut.resize(2 + 60);
  ok &= write(dir + "/truncated_hello.bin", cut);
  std::vector<uint8_t> ff(2 + 16, 0xff);
  ok &= write(dir + "/ff16.bin", ff);
  std::vector<uint8_t> repeat = seed(0, true, "", false);
  repeat.insert(repeat.end(), repeat.end() - 52, repeat.end());  // the last chunk twice
  ok &= write(dir + "/repeated_chunk.bin", repeat);
  {
    std::vector<uint8_t> ack = proto::encode_ack(0, "ok", {1, 2, 3, 4});
    ok &= write(dir + "/ack_payload.bin", ack);
  }
  if (!ok) {
    fprintf(stderr, "transfer_seeds: cannot write into %s\n", dir.c_str());
    return 1;
  }
  return 0;
}
