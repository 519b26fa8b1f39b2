// measure_core.h — what the evaluation tools share: reading a slice of a raw tensor file, turning a codebook spec
// into a codebook, and compressing a slice with the public C API to get its exact frame size, escape count and
// chunk modes (with a round-trip check, so no number comes from a frame that does not decode to the input).
//
// Used by bench/measure.cpp (the tool bench/eval.py drives) and tests/regression/check_results.cpp (the CI test
// on bench/results.csv). Header-only on purpose: both are small programs over the public API.
#pragma once

#include <splitzip/splitzip.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace szbench {

// A file read whole into memory. ok = false when it could not be read (the caller decides whether that is a skip).
struct FileBytes {
  bool ok = false;
  std::vector<uint8_t> bytes;
};

inline FileBytes read_file(const std::string& path) {
  FileBytes f;
  std::FILE* fp = std::fopen(path.c_str(), "rb");
  if (!fp) return f;
  std::vector<uint8_t> buf;
  uint8_t tmp[1 << 16];
  size_t got;
  while ((got = std::fread(tmp, 1, sizeof tmp, fp)) > 0) buf.insert(buf.end(), tmp, tmp + got);
  const bool err = std::ferror(fp) != 0;
  std::fclose(fp);
  if (err) return f;
  f.ok = true;
  f.bytes.swap(buf);
  return f;
}

inline bool file_exists(const std::string& path) {
  std::FILE* fp = std::fopen(path.c_str(), "rb");
  if (!fp) return false;
  std::fclose(fp);
  return true;
}

// Splits "a:b:c" on ':' (no escaping; paths with ':' are not supported by the specs).
inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return out;
}

// Codebook specs, as written in bench/results.csv and passed by bench/eval.py:
//   default:generic | default:key | default:value     the library's shipped codebook for the dtype
//   self                                              calibrated (sz_calibrate) on the slice being compressed
//   calib:FILE:OFFSET:COUNT                           calibrated on COUNT values of FILE from value OFFSET
//   calib:FILE                                        calibrated on the whole FILE
//   file:PATH                                         a codebook file (docs/FORMAT.md §5)
//   k:K:E0,E1,...                                     explicit code width and exponent values
// Returns SZ_OK and fills *cb, or the library's status (SZ_ERROR_IO for an unreadable calibration file).
inline sz_status codebook_from_spec(const std::string& spec, sz_dtype dtype, const uint8_t* self, uint64_t self_n,
                                    sz_codebook* cb, std::string* err) {
  auto calibrate = [&](const uint8_t* p, uint64_t n) -> sz_status {
    sz_histogram h;
    sz_status st = sz_histogram_init(&h, dtype);
    if (st != SZ_OK) return st;
    st = sz_histogram_add(&h, p, (size_t)n);
    if (st != SZ_OK) return st;
    return sz_calibrate(&h, cb, nullptr);
  };
  std::vector<std::string> parts = split(spec, ':');
  if (parts[0] == "default" && parts.size() == 2) {
    sz_tensor_kind kind;
    if (parts[1] == "generic") kind = SZ_KIND_GENERIC;
    else if (parts[1] == "key") kind = SZ_KIND_KEY;
    else if (parts[1] == "value") kind = SZ_KIND_VALUE;
    else {
      *err = "unknown default codebook kind '" + parts[1] + "'";
      return SZ_ERROR_INVALID_ARGUMENT;
    }
    return sz_default_codebook(dtype, kind, cb);
  }
  if (parts[0] == "self" && parts.size() == 1) return calibrate(self, self_n);
  if (parts[0] == "calib" && (parts.size() == 2 || parts.size() == 4)) {
    FileBytes f = read_file(parts[1]);
    if (!f.ok) {
      *err = "cannot read calibration file " + parts[1];
      return SZ_ERROR_IO;
    }
    const size_t vs = sz_dtype_size(dtype);
    uint64_t off = 0, n = f.bytes.size() / vs;
    if (parts.size() == 4) {
      off = std::stoull(parts[2]);
      n = std::stoull(parts[3]);
    }
    if ((off + n) * vs > f.bytes.size() || n == 0) {
      *err = "calibration range outside " + parts[1];
      return SZ_ERROR_INVALID_ARGUMENT;
    }
    return calibrate(f.bytes.data() + off * vs, n);
  }
  if (parts[0] == "file" && parts.size() == 2) return sz_codebook_load(parts[1].c_str(), cb);
  if (parts[0] == "k" && parts.size() == 3) {
    std::memset(cb, 0, sizeof *cb);
    cb->dtype = (uint8_t)dtype;
    cb->code_bits = (uint8_t)std::stoul(parts[1]);
    std::vector<std::string> vals = split(parts[2], ',');
    if (vals.size() > SZ_MAX_CODEBOOK) return SZ_ERROR_BAD_CODEBOOK;
    cb->count = (uint8_t)vals.size();
    for (size_t i = 0; i < vals.size(); ++i) cb->values[i] = (uint8_t)std::stoul(vals[i]);
    return sz_codebook_validate(cb);
  }
  *err = "bad codebook spec '" + spec + "'";
  return SZ_ERROR_INVALID_ARGUMENT;
}

inline std::string codebook_string(const sz_codebook& cb) {
  std::string s = "k:" + std::to_string(cb.code_bits) + ":";
  for (unsigned i = 0; i < cb.count; ++i) s += (i ? "," : "") + std::to_string(cb.values[i]);
  return s;
}

// One compression of one slice.
struct Measurement {
  sz_status status = SZ_OK;
  std::string error;
  sz_codebook codebook{};
  uint64_t n_values = 0;
  uint64_t raw_bytes = 0;
  uint64_t frame_bytes = 0;
  uint64_t escapes = 0;
  uint64_t coded_chunks = 0;
  uint64_t raw_chunks = 0;
  bool round_trip_ok = false;
};

// Compresses n values at p with the codebook spec and frame parameters, reads the frame's statistics back with
// sz_frame_info_get, and decompresses to check the bytes. threads only changes speed, never the frame.
inline Measurement measure(const uint8_t* p, uint64_t n, sz_dtype dtype, const std::string& codebook_spec,
                           unsigned chunk_log2, bool checksums, unsigned threads = 1) {
  Measurement m;
  m.n_values = n;
  m.raw_bytes = n * sz_dtype_size(dtype);
  m.status = codebook_from_spec(codebook_spec, dtype, p, n, &m.codebook, &m.error);
  if (m.status != SZ_OK) {
    if (m.error.empty()) m.error = std::string("codebook: ") + sz_status_name(m.status);
    return m;
  }
  sz_params params = sz_params_default();
  params.chunk_log2 = chunk_log2;
  params.flags = checksums ? SZ_FLAG_CHECKSUMS : 0u;
  params.threads = threads;
  std::vector<uint8_t> frame((size_t)sz_compress_bound(n, dtype));
  size_t frame_size = 0;
  m.status = sz_compress(p, n, dtype, &m.codebook, &params, frame.data(), frame.size(), &frame_size);
  if (m.status != SZ_OK) {
    m.error = std::string("sz_compress: ") + sz_status_name(m.status);
    return m;
  }
  m.frame_bytes = frame_size;
  sz_frame_info info;
  m.status = sz_frame_info_get(frame.data(), frame_size, &info);
  if (m.status != SZ_OK) {
    m.error = std::string("sz_frame_info_get: ") + sz_status_name(m.status);
    return m;
  }
  m.escapes = info.escapes;
  m.coded_chunks = info.coded_chunks;
  m.raw_chunks = info.raw_chunks;
  std::vector<uint8_t> back((size_t)m.raw_bytes + 1);
  size_t back_size = 0;
  m.status = sz_decompress(frame.data(), frame_size, back.data(), back.size(), &back_size, threads);
  if (m.status != SZ_OK) {
    m.error = std::string("sz_decompress: ") + sz_status_name(m.status);
    return m;
  }
  m.round_trip_ok = back_size == m.raw_bytes && (m.raw_bytes == 0 || std::memcmp(back.data(), p, m.raw_bytes) == 0);
  if (!m.round_trip_ok) {
    m.status = SZ_ERROR_INTERNAL;
    m.error = "round trip differs from the input";
  }
  return m;
}

}  // namespace szbench
