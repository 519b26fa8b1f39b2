// inputs.h — what an input file is made of: a raw tensor, an .npy file or a .safetensors file, cut into segments
// (byte ranges of the original file), each either a tensor to compress into a SplitZip frame or bytes to store as
// they are. compress turns the segments into a bare frame (raw input) or a container (npy, safetensors), and
// decompress puts every item back at its original offset, so the file is restored byte for byte.
#pragma once

#include <splitzip/splitzip.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace splitzip_cli {

enum class InputFormat { kAuto, kRaw, kNpy, kSafetensors };

// Parses "auto", "raw", "npy", "safetensors"; throws CliError otherwise.
InputFormat parse_format(const std::string& name);
const char* format_name(InputFormat format);

struct Segment {
  bool is_frame = false;         // true: compress as a frame of `dtype`; false: store verbatim
  sz_dtype dtype = SZ_DTYPE_BF16;  // meaningful when is_frame
  std::string name;
  bool has_shape = false;        // false: container ndim 0 (no shape or more than SZ_MAX_NDIM dimensions)
  std::vector<uint64_t> shape;
  uint64_t offset = 0;           // in the original file
  uint64_t size = 0;
};

struct InputPlan {
  InputFormat format = InputFormat::kRaw;
  std::vector<Segment> segments;  // ordered by offset, covering the file exactly
  bool container() const { return format != InputFormat::kRaw; }
};

// The format of an input from its path and its first bytes (`data`, `size`: a prefix of the file, or all of it):
// kAuto detects by extension (.npy, .safetensors), then by magic ("\x93NUMPY"), then by a safetensors header check
// (a header length of at most 100 MB, then a JSON object, all inside the prefix); anything else is raw. Other
// formats are returned as given.
InputFormat detect_format(const uint8_t* data, size_t size, const std::string& path, InputFormat format);
// The prefix that detect_format needs to see of a file that starts with `head` (its first 9 bytes or fewer): 8 bytes
// plus the safetensors header length when that is plausible (at most 100 MB, then a '{'), else 9.
size_t detect_prefix_size(const uint8_t* head, size_t size);
// The raw-input checks plan_input makes, on a file's first bytes and its size: not already SplitZip-compressed when
// the format was detected, a dtype given. Throws CliError.
void check_raw_input(const uint8_t* head, size_t head_size, const std::string& path, bool detected,
                     std::optional<sz_dtype> dtype);

// How many of a file's first bytes plan_input needs for `format` (npy, safetensors: the header; other formats:
// none beyond `head`), from its first 12 bytes or fewer (`head`); may exceed the file's size.
uint64_t plan_prefix_size(const uint8_t* head, size_t head_size, InputFormat format);

// Cuts a file of `size` bytes into segments, from its first head_size bytes (`data`: the whole file, or a prefix of
// at least min(size, plan_prefix_size(...)) bytes).
//   path:   used for detection by extension and in error messages ("-" for stdin).
//   format: kAuto detects by extension (.npy, .safetensors), then by magic ("\x93NUMPY"), then a safetensors
//           header check when no dtype was given; anything else is raw and needs a dtype.
//   dtype:  --dtype; required for raw files and for npy descrs that do not name a float type (<u2, |u1, <V2...).
// Throws CliError with a precise message for malformed npy/safetensors files.
InputPlan plan_input(const uint8_t* data, size_t head_size, uint64_t size, const std::string& path,
                     InputFormat format, std::optional<sz_dtype> dtype);

}  // namespace splitzip_cli
