// inputs.cpp — detection and parsing of raw, .npy and .safetensors inputs (see inputs.h).
//
// .npy (NumPy format 1.0/2.0/3.0): "\x93NUMPY", major, minor, a u16 (1.0) or u32 (2.0, 3.0) header length, then a
// Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...)} padded with spaces and a newline; the array
// data follows. The header bytes become one stored segment and the data one frame segment; the element order
// (C or Fortran) does not matter to a lossless codec, so both are accepted.
//
// .safetensors: a u64 header length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, ...,
// "__metadata__": {...}}, then the data; offsets are relative to byte 8 + N.
#include "inputs.h"

#include "common.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

namespace splitzip_cli {

InputFormat parse_format(const std::string& name) {
  if (name == "auto") return InputFormat::kAuto;
  if (name == "raw") return InputFormat::kRaw;
  if (name == "npy") return InputFormat::kNpy;
  if (name == "safetensors") return InputFormat::kSafetensors;
  throw CliError("unknown format '" + name + "' (use auto, raw, npy or safetensors)");
}

const char* format_name(InputFormat format) {
  switch (format) {
    case InputFormat::kAuto: return "auto";
    case InputFormat::kRaw: return "raw";
    case InputFormat::kNpy: return "npy";
    case InputFormat::kSafetensors: return "safetensors";
  }
  return "?";
}

static bool ends_with(const std::string& s, const std::string& suffix) {
  if (s.size() < suffix.size()) return false;
  for (size_t i = 0; i < suffix.size(); ++i) {
    char a = s[s.size() - suffix.size() + i];
    if (a >= 'A' && a <= 'Z') a = char(a - 'A' + 'a');
    if (a != suffix[i]) return false;
  }
  return true;
}

static uint64_t load_le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

static const uint8_t kNpyMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

static bool looks_like_npy(const uint8_t* data, size_t size) {
  return size >= 6 && std::memcmp(data, kNpyMagic, 6) == 0;
}

// The safetensors format caps its header at 100 MB; a larger length means the file is something else.
constexpr uint64_t kMaxSafetensorsHeader = 100000000;

// A cheap structural test: a plausible header length, then a JSON object.
static bool looks_like_safetensors(const uint8_t* data, size_t size) {
  if (size < 10) return false;
  uint64_t n = load_le(data, 8);
  if (n < 2 || n > size - 8 || n > kMaxSafetensorsHeader) return false;
  if (data[8] != '{') return false;
  size_t end = size_t(8 + n);
  while (end > 9 && data[end - 1] == ' ') --end;
  if (data[end - 1] != '}') return false;
  return nlohmann::json::accept(data + 8, data + 8 + n);
}

// The byte size of a tensor of `shape` with `elem`-byte elements: false when the element count or the byte count
// exceeds 2^62 (no file holds that, and it keeps the products from wrapping). A zero dimension gives 0 bytes,
// whatever the others.
static bool shape_bytes(const std::vector<uint64_t>& shape, uint64_t elem, uint64_t* count, uint64_t* bytes) {
  const uint64_t limit = uint64_t(1) << 62;
  for (uint64_t d : shape) {
    if (d == 0) {
      *count = *bytes = 0;
      return true;
    }
  }
  uint64_t p = 1;
  for (uint64_t d : shape) {
    if (p > limit / d) return false;
    p *= d;
  }
  if (elem != 0 && p > limit / elem) return false;
  *count = p;
  *bytes = p * elem;
  return true;
}

// ---- npy -------------------------------------------------------------------------------------------------------

namespace {

// A tiny reader for the Python literal subset that NumPy writes in .npy headers.
class PyLiteral {
 public:
  PyLiteral(const std::string& text, const std::string& file) : s_(text), file_(file) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw CliError(file_ + ": malformed .npy header (" + what + ")");
  }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool eat(char c) {
    skip_ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  bool at_end() {
    skip_ws();
    return i_ >= s_.size();
  }
  char peek() {
    skip_ws();
    return i_ < s_.size() ? s_[i_] : '\0';
  }
  std::string string() {
    skip_ws();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) fail("expected a string");
    char q = s_[i_++];
    std::string out;
    while (i_ < s_.size() && s_[i_] != q) {
      if (s_[i_] == '\\') fail("escapes in strings are not supported");
      out += s_[i_++];
    }
    if (i_ >= s_.size()) fail("unterminated string");
    ++i_;
    return out;
  }
  bool boolean() {
    skip_ws();
    if (s_.compare(i_, 4, "True") == 0) {
      i_ += 4;
      return true;
    }
    if (s_.compare(i_, 5, "False") == 0) {
      i_ += 5;
      return false;
    }
    fail("expected True or False");
  }
  uint64_t integer() {
    skip_ws();
    if (i_ >= s_.size() || s_[i_] < '0' || s_[i_] > '9') fail("expected a non-negative integer");
    uint64_t v = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      if (v > (UINT64_MAX - 9) / 10) fail("integer too large");
      v = v * 10 + uint64_t(s_[i_++] - '0');
    }
    if (i_ < s_.size() && s_[i_] == 'L') ++i_;  // Python 2 longs
    return v;
  }
  std::vector<uint64_t> tuple() {
    expect('(');
    std::vector<uint64_t> out;
    if (eat(')')) return out;
    for (;;) {
      out.push_back(integer());
      if (eat(')')) return out;
      expect(',');
      if (eat(')')) return out;
    }
  }

 private:
  std::string s_;
  std::string file_;
  size_t i_ = 0;
};

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<uint64_t> shape;
  size_t data_offset = 0;
};

NpyHeader parse_npy_header(const uint8_t* data, size_t size, const std::string& file) {
  if (size < 10) throw CliError(file + ": truncated .npy header");
  unsigned major = data[6];
  size_t len_bytes;
  if (major == 1) {
    len_bytes = 2;
  } else if (major == 2 || major == 3) {
    len_bytes = 4;
  } else {
    throw CliError(file + ": unsupported .npy format version " + std::to_string(major) + "." +
                   std::to_string(data[7]));
  }
  size_t start = 8 + len_bytes;
  if (size < start) throw CliError(file + ": truncated .npy header");
  uint64_t hlen = load_le(data + 8, int(len_bytes));
  if (hlen > size - start) throw CliError(file + ": truncated .npy header");
  NpyHeader h;
  h.data_offset = size_t(start + hlen);
  PyLiteral lit(std::string(reinterpret_cast<const char*>(data + start), size_t(hlen)), file);
  bool have_descr = false, have_order = false, have_shape = false;
  lit.expect('{');
  while (!lit.eat('}')) {
    std::string key = lit.string();
    lit.expect(':');
    if (key == "descr") {
      if (lit.peek() == '[') throw CliError(file + ": structured .npy dtypes are not supported");
      h.descr = lit.string();
      have_descr = true;
    } else if (key == "fortran_order") {
      h.fortran_order = lit.boolean();
      have_order = true;
    } else if (key == "shape") {
      h.shape = lit.tuple();
      have_shape = true;
    } else {
      lit.fail("unexpected key '" + printable_name(key) + "'");
    }
    if (lit.eat('}')) break;
    lit.expect(',');
  }
  if (!have_descr || !have_order || !have_shape) lit.fail("needs the keys descr, fortran_order and shape");
  return h;
}

// Maps an npy descr (and --dtype) to a SplitZip dtype, or throws.
sz_dtype npy_dtype(const std::string& descr, std::optional<sz_dtype> user, const std::string& file) {
  const std::string shown = printable_name(descr);
  auto need_user = [&](size_t width) -> sz_dtype {
    if (!user)
      throw CliError(file + ": .npy dtype '" + shown + "' does not say which float format it holds (use --dtype)");
    if (sz_dtype_size(*user) != width)
      throw CliError(file + ": .npy dtype '" + shown + "' has " + std::to_string(width) +
                     "-byte elements but --dtype " + sz_dtype_name(*user) + " has " +
                     std::to_string(sz_dtype_size(*user)));
    return *user;
  };
  auto fixed = [&](sz_dtype d) -> sz_dtype {
    if (user && *user != d)
      throw CliError(file + ": .npy dtype '" + shown + "' is " + sz_dtype_name(d) + " but --dtype says " +
                     sz_dtype_name(*user));
    return d;
  };
  if (descr.size() >= 2 && (descr[0] == '<' || descr[0] == '>' || descr[0] == '|' || descr[0] == '=')) {
    char order = descr[0];
    std::string code = descr.substr(1);
    size_t width = 0;
    if (code.size() == 2 && code[1] >= '1' && code[1] <= '8') width = size_t(code[1] - '0');
    if (order == '>' && width > 1)
      throw CliError(file + ": big-endian .npy data ('" + shown + "') is not supported");
    if (code == "f2") return fixed(SZ_DTYPE_FP16);
    if (code == "f4") return fixed(SZ_DTYPE_FP32);
    if (code == "V2") return user ? need_user(2) : SZ_DTYPE_BF16;  // ml_dtypes.bfloat16 saves as <V2
    if (code == "f1") return user ? need_user(1) : SZ_DTYPE_FP8_E5M2;  // older ml_dtypes float8_e5m2
    if (code == "u2" || code == "i2") return need_user(2);
    if (code == "u1" || code == "i1" || code == "V1" || code == "b1") return need_user(1);
  } else {
    // ml_dtypes type names, as some writers put them in the header.
    sz_dtype d;
    if (sz_dtype_from_name(descr.c_str(), &d) == SZ_OK) return fixed(d);
  }
  throw CliError(file + ": .npy dtype '" + shown +
                 "' is not supported (floating types: <f2, <f4, bfloat16 (<V2), or <u2/|u1 with --dtype)");
}

InputPlan plan_npy(const uint8_t* data, size_t head_size, uint64_t size, const std::string& file,
                   std::optional<sz_dtype> user) {
  NpyHeader h = parse_npy_header(data, head_size, file);
  sz_dtype dtype = npy_dtype(h.descr, user, file);
  uint64_t n, bytes;
  if (!shape_bytes(h.shape, sz_dtype_size(dtype), &n, &bytes)) throw CliError(file + ": .npy shape is too large");
  if (bytes > size - h.data_offset)
    throw CliError(file + ": .npy data is truncated (" + std::to_string(size - h.data_offset) + " bytes, shape needs " +
                   std::to_string(bytes) + ")");
  InputPlan plan;
  plan.format = InputFormat::kNpy;
  Segment header;
  header.name = "npy_header";
  header.offset = 0;
  header.size = h.data_offset;
  plan.segments.push_back(header);
  Segment array;
  array.is_frame = true;
  array.dtype = dtype;
  array.name = "array";
  array.has_shape = h.shape.size() <= SZ_MAX_NDIM;
  if (array.has_shape) array.shape = h.shape;
  array.offset = h.data_offset;
  array.size = bytes;
  plan.segments.push_back(array);
  if (h.data_offset + bytes < size) {
    Segment trailer;
    trailer.name = "trailer";
    trailer.offset = h.data_offset + bytes;
    trailer.size = size - trailer.offset;
    plan.segments.push_back(trailer);
  }
  return plan;
}

// ---- safetensors -----------------------------------------------------------------------------------------------

// Element size of a safetensors dtype, 0 if unknown; *frame_dtype set for the types SplitZip compresses.
size_t safetensors_dtype(const std::string& name, std::optional<sz_dtype>* frame_dtype) {
  static const std::map<std::string, size_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I64", 8}, {"I32", 4},
      {"I16", 2}, {"I8", 1},  {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1}, {"BOOL", 1}};
  frame_dtype->reset();
  if (name == "BF16") *frame_dtype = SZ_DTYPE_BF16;
  if (name == "F16") *frame_dtype = SZ_DTYPE_FP16;
  if (name == "F32") *frame_dtype = SZ_DTYPE_FP32;
  if (name == "F8_E4M3") *frame_dtype = SZ_DTYPE_FP8_E4M3;
  if (name == "F8_E5M2") *frame_dtype = SZ_DTYPE_FP8_E5M2;
  auto it = sizes.find(name);
  return it == sizes.end() ? 0 : it->second;
}

InputPlan plan_safetensors(const uint8_t* data, size_t head_size, uint64_t size, const std::string& file) {
  if (size < 8 || head_size < 8) throw CliError(file + ": truncated .safetensors header");
  uint64_t n = load_le(data, 8);
  if (n > size - 8) throw CliError(file + ": .safetensors header length " + std::to_string(n) + " exceeds the file");
  if (n > head_size - 8) throw CliError(file + ": truncated .safetensors header");  // a caller's short prefix
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(data + 8, data + 8 + n);
  } catch (const nlohmann::json::parse_error& e) {
    throw CliError(file + ": .safetensors header is not valid JSON (syntax error at byte " +
                   std::to_string(8 + e.byte - 1) + ")");
  } catch (const nlohmann::json::exception&) {
    throw CliError(file + ": .safetensors header is not valid JSON");
  }
  if (!header.is_object()) throw CliError(file + ": .safetensors header is not a JSON object");
  uint64_t base = 8 + n;
  uint64_t data_size = size - base;
  InputPlan plan;
  plan.format = InputFormat::kSafetensors;
  Segment head;
  head.name = "__header__";
  head.offset = 0;
  head.size = base;
  std::vector<Segment> tensors;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const std::string& name = it.key();
    const nlohmann::json& t = it.value();
    auto bad = [&](const std::string& what) {
      return CliError(file + ": tensor '" + printable_name(name) + "': " + what);
    };
    if (!t.is_object() || !t.contains("dtype") || !t.contains("shape") || !t.contains("data_offsets"))
      throw bad("needs dtype, shape and data_offsets");
    if (!t["dtype"].is_string()) throw bad("dtype is not a string");
    const nlohmann::json& offs = t["data_offsets"];
    if (!offs.is_array() || offs.size() != 2 || !offs[0].is_number_unsigned() || !offs[1].is_number_unsigned())
      throw bad("data_offsets is not [begin, end]");
    uint64_t begin = offs[0].get<uint64_t>(), end = offs[1].get<uint64_t>();
    if (end < begin || end > data_size) throw bad("data_offsets [" + std::to_string(begin) + ", " +
                                                 std::to_string(end) + "] outside the data");
    const nlohmann::json& shp = t["shape"];
    if (!shp.is_array()) throw bad("shape is not a list");
    std::vector<uint64_t> shape;
    for (const auto& d : shp) {
      if (!d.is_number_unsigned()) throw bad("shape holds a non-integer");
      shape.push_back(d.get<uint64_t>());
    }
    std::string dt = t["dtype"].get<std::string>();
    std::optional<sz_dtype> frame_dtype;
    size_t elem = safetensors_dtype(dt, &frame_dtype);
    uint64_t count, bytes;
    if (!shape_bytes(shape, elem, &count, &bytes)) throw bad("shape is too large");
    if (elem != 0 && bytes != end - begin)
      throw bad("shape needs " + std::to_string(bytes) + " bytes but data_offsets span " +
                std::to_string(end - begin));
    Segment s;
    s.is_frame = frame_dtype.has_value();
    if (s.is_frame) s.dtype = *frame_dtype;
    s.name = name;
    s.has_shape = shape.size() <= SZ_MAX_NDIM;
    if (s.has_shape) s.shape = shape;
    s.offset = base + begin;
    s.size = end - begin;
    if (s.name.size() > SZ_MAX_NAME) throw bad("name longer than " + std::to_string(SZ_MAX_NAME) + " bytes");
    tensors.push_back(std::move(s));
  }
  std::stable_sort(tensors.begin(), tensors.end(),
                   [](const Segment& a, const Segment& b) {
                     return a.offset != b.offset ? a.offset < b.offset : a.size < b.size;  // empty tensors first
                   });
  plan.segments.push_back(head);
  uint64_t pos = base;
  std::set<std::string> names = {head.name};
  for (Segment& s : tensors) {
    if (s.offset < pos)
      throw CliError(file + ": tensor '" + printable_name(s.name) + "' overlaps the tensor before it");
    if (s.offset > pos) {
      Segment gap;
      gap.name = "__gap_" + std::to_string(pos) + "__";
      gap.offset = pos;
      gap.size = s.offset - pos;
      plan.segments.push_back(gap);
      names.insert(gap.name);
    }
    pos = s.offset + s.size;
    if (!names.insert(s.name).second)
      throw CliError(file + ": tensor name '" + printable_name(s.name) + "' is used twice");
    plan.segments.push_back(std::move(s));
  }
  if (pos < size) {
    Segment tail;
    tail.name = "__gap_" + std::to_string(pos) + "__";
    tail.offset = pos;
    tail.size = size - pos;
    if (!names.insert(tail.name).second)
      throw CliError(file + ": tensor name '" + printable_name(tail.name) + "' is used twice");
    plan.segments.push_back(tail);
  }
  return plan;
}

}  // namespace

InputFormat detect_format(const uint8_t* data, size_t size, const std::string& path, InputFormat format) {
  if (format != InputFormat::kAuto) return format;
  if (ends_with(path, ".npy")) return InputFormat::kNpy;
  if (ends_with(path, ".safetensors")) return InputFormat::kSafetensors;
  if (looks_like_npy(data, size)) return InputFormat::kNpy;
  if (looks_like_safetensors(data, size)) return InputFormat::kSafetensors;
  return InputFormat::kRaw;
}

size_t detect_prefix_size(const uint8_t* head, size_t size) {
  if (size < 9 || head[8] != '{') return 9;
  const uint64_t n = load_le(head, 8);
  return n >= 2 && n <= kMaxSafetensorsHeader ? size_t(8 + n) : 9;
}

void check_raw_input(const uint8_t* head, size_t head_size, const std::string& path, bool detected,
                     std::optional<sz_dtype> dtype) {
  const std::string file = display_name(path);
  if (detected && (sz_is_frame(head, head_size) || sz_is_container(head, head_size)))
    throw CliError(file + ": is already SplitZip-compressed (use --format raw to compress it anyway)");
  if (!dtype) throw CliError(file + ": raw input needs --dtype (bf16, fp16, fp32, fp8_e4m3 or fp8_e5m2)");
}

uint64_t plan_prefix_size(const uint8_t* head, size_t head_size, InputFormat format) {
  if (format == InputFormat::kNpy && head_size >= 12 && looks_like_npy(head, head_size)) {
    if (head[6] == 1) return 10 + load_le(head + 8, 2);
    if (head[6] == 2 || head[6] == 3) return 12 + load_le(head + 8, 4);
  }
  if (format == InputFormat::kSafetensors && head_size >= 8) {
    const uint64_t n = load_le(head, 8);
    return n > UINT64_MAX - 8 ? UINT64_MAX : 8 + n;
  }
  return head_size;
}

InputPlan plan_input(const uint8_t* data, size_t head_size, uint64_t size, const std::string& path,
                     InputFormat format, std::optional<sz_dtype> dtype) {
  std::string file = display_name(path);
  bool detected = format == InputFormat::kAuto;
  format = detect_format(data, head_size, path, format);
  if (format == InputFormat::kNpy) {
    if (!looks_like_npy(data, head_size)) throw CliError(file + ": not an .npy file (no \\x93NUMPY magic)");
    return plan_npy(data, head_size, size, file, dtype);
  }
  if (format == InputFormat::kSafetensors) return plan_safetensors(data, head_size, size, file);

  check_raw_input(data, head_size, path, detected, dtype);
  size_t width = sz_dtype_size(*dtype);
  if (size % width != 0)
    throw CliError(file + ": size " + std::to_string(size) + " is not a multiple of the " + sz_dtype_name(*dtype) +
                   " value size (" + std::to_string(width) + " bytes)");
  InputPlan plan;
  plan.format = InputFormat::kRaw;
  Segment s;
  s.is_frame = true;
  s.dtype = *dtype;
  s.name = "data";
  s.has_shape = true;
  s.shape = {uint64_t(size / width)};
  s.offset = 0;
  s.size = size;
  plan.segments.push_back(s);
  return plan;
}

}  // namespace splitzip_cli
