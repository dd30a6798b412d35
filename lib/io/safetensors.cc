#include "lib/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <utility>

#include "lib/core/errors.h"
#include "lib/core/files.h"
#include "lib/core/json_input.h"

// Tensor bytes are copied as they lie in memory, and the format is little endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes a little-endian host");

namespace cabert::io {
namespace {

using Json = nlohmann::json;

struct DtypeEntry {
  SafeDtype dtype;
  const char* name;
  int bits;
};

// In enum order, so that kDtypes[int(dtype)] is that dtype's entry.
constexpr DtypeEntry kDtypes[] = {
    {SafeDtype::kBool, "BOOL", 8},
    {SafeDtype::kF4, "F4", 4},
    {SafeDtype::kF6E2M3, "F6_E2M3", 6},
    {SafeDtype::kF6E3M2, "F6_E3M2", 6},
    {SafeDtype::kU8, "U8", 8},
    {SafeDtype::kI8, "I8", 8},
    {SafeDtype::kF8E5M2, "F8_E5M2", 8},
    {SafeDtype::kF8E4M3, "F8_E4M3", 8},
    {SafeDtype::kF8E8M0, "F8_E8M0", 8},
    {SafeDtype::kF8E4M3Fnuz, "F8_E4M3FNUZ", 8},
    {SafeDtype::kF8E5M2Fnuz, "F8_E5M2FNUZ", 8},
    {SafeDtype::kI16, "I16", 16},
    {SafeDtype::kU16, "U16", 16},
    {SafeDtype::kF16, "F16", 16},
    {SafeDtype::kBF16, "BF16", 16},
    {SafeDtype::kI32, "I32", 32},
    {SafeDtype::kU32, "U32", 32},
    {SafeDtype::kF32, "F32", 32},
    {SafeDtype::kC64, "C64", 64},
    {SafeDtype::kF64, "F64", 64},
    {SafeDtype::kI64, "I64", 64},
    {SafeDtype::kU64, "U64", 64},
};

const DtypeEntry& entry(SafeDtype dtype) { return kDtypes[static_cast<size_t>(dtype)]; }

std::string range_text(uint64_t begin, uint64_t end) { return str("[", begin, ", ", end, "]"); }

std::string encode_u64(uint64_t value) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  return bytes;
}

uint64_t decode_u64(const unsigned char* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

// ---------------------------------------------------------------------------------------------- writer

std::vector<const SafeTensorView*> checked_write_order(const std::string& path,
                                                       const std::vector<SafeTensorView>& tensors) {
  std::set<std::string> names;
  std::vector<const SafeTensorView*> order;
  for (const auto& tensor : tensors) {
    if (tensor.name == "__metadata__") throw Error(str(path, ": '__metadata__' cannot name a tensor"));
    if (!names.insert(tensor.name).second) throw Error(str(path, ": tensor '", tensor.name, "' given twice"));
    auto needed = safe_tensor_bytes(tensor.dtype, tensor.shape);
    if (!needed || *needed != tensor.bytes) {
      throw Error(str(path, ": tensor '", tensor.name, "': ", tensor.bytes, " bytes given but ",
                      safe_dtype_name(tensor.dtype), " shape ", shape_text(tensor.shape), " needs ",
                      needed ? std::to_string(*needed) : std::string("an impossible size")));
    }
    if (tensor.bytes > 0 && tensor.data == nullptr) {
      throw Error(str(path, ": tensor '", tensor.name, "': null data for ", tensor.bytes, " bytes"));
    }
    order.push_back(&tensor);
  }
  // The reference writer's order: the most aligned dtypes first, then by name.
  std::sort(order.begin(), order.end(), [](const SafeTensorView* a, const SafeTensorView* b) {
    if (a->dtype != b->dtype) return a->dtype > b->dtype;
    return a->name < b->name;
  });
  return order;
}

std::string padded_header(const std::string& path, const std::vector<const SafeTensorView*>& order,
                          const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json values = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) values[key] = value;
    header["__metadata__"] = std::move(values);
  }
  uint64_t offset = 0;
  for (const SafeTensorView* tensor : order) {
    nlohmann::ordered_json info = nlohmann::ordered_json::object();
    info["dtype"] = safe_dtype_name(tensor->dtype);
    info["shape"] = tensor->shape;
    info["data_offsets"] = {offset, offset + tensor->bytes};
    header[tensor->name] = std::move(info);
    offset += tensor->bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::type_error& error) {
    throw Error(str(path, ": a tensor name or metadata string is not valid UTF-8 (", error.what(), ")"));
  }
  text.resize((text.size() + 7) / 8 * 8, ' ');
  if (text.size() > kSafetensorsMaxHeaderBytes) {
    throw Error(str(path, ": the header would take ", text.size(), " bytes, over the ", kSafetensorsMaxHeaderBytes,
                    "-byte limit of the format"));
  }
  return text;
}

// ---------------------------------------------------------------------------------------------- reader

struct DuplicateKey {
  std::string key;
};
struct HeaderTooDeep {};

// Parses with a callback that rejects duplicate keys in any object (nlohmann would keep the last one) and
// nesting deeper than the reference reader's limit (a header's values are printed in messages, and
// nlohmann prints recursively: 100 MB of '[' would overflow the stack).
Json parse_unique_keys(const std::string& text) {
  std::vector<std::set<std::string>> open_objects;
  auto callback = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth) {
      throw HeaderTooDeep{};
    }
    if (event == Json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == Json::parse_event_t::object_end) {
      open_objects.pop_back();
    } else if (event == Json::parse_event_t::key) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second) throw DuplicateKey{key};
    }
    return true;
  };
  return Json::parse(text, callback);
}

// nlohmann's "... parse error at line 1, column 9: syntax error ..." without its prefix.
std::string parse_error_detail(const nlohmann::json::parse_error& error) {
  std::string what = error.what();
  auto column = what.find("column ");
  auto colon = column == std::string::npos ? std::string::npos : what.find(": ", column);
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

uint64_t get_u64(const Json& value, bool* ok) {
  if (!value.is_number_unsigned()) {
    *ok = false;
    return 0;
  }
  return value.get<uint64_t>();
}

// Whether the element count or the bit count of a tensor of non-negative `shape` overflows 64 bits.
bool overflows(SafeDtype dtype, const std::vector<int64_t>& shape) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  uint64_t elements = 1;
  for (int64_t dim : shape) {
    if (dim != 0 && elements > kMax / static_cast<uint64_t>(dim)) return true;
    elements *= static_cast<uint64_t>(dim);
  }
  return elements > kMax / static_cast<uint64_t>(safe_dtype_bits(dtype));
}

}  // namespace

const char* safe_dtype_name(SafeDtype dtype) { return entry(dtype).name; }

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::optional<SafeDtype> parse_safe_dtype(std::string_view name) {
  for (const auto& candidate : kDtypes) {
    if (name == candidate.name) return candidate.dtype;
  }
  return std::nullopt;
}

int safe_dtype_bits(SafeDtype dtype) { return entry(dtype).bits; }

size_t safe_dtype_size(SafeDtype dtype) {
  int bits = entry(dtype).bits;
  return bits % 8 == 0 ? static_cast<size_t>(bits / 8) : 0;
}

std::optional<uint64_t> safe_tensor_bytes(SafeDtype dtype, const std::vector<int64_t>& shape) {
  if (std::any_of(shape.begin(), shape.end(), [](int64_t dim) { return dim < 0; })) return std::nullopt;
  if (overflows(dtype, shape)) return std::nullopt;
  uint64_t total_bits = static_cast<uint64_t>(safe_dtype_bits(dtype));
  for (int64_t dim : shape) total_bits *= static_cast<uint64_t>(dim);
  if (total_bits % 8 != 0) return std::nullopt;
  return total_bits / 8;
}

void write_safetensors(const std::string& path, const std::vector<SafeTensorView>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  auto order = checked_write_order(path, tensors);
  std::string header = padded_header(path, order, metadata);
  AtomicOutput out(path);
  std::ostream& stream = out.stream();
  stream.write(encode_u64(header.size()).data(), 8);
  stream.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (const SafeTensorView* tensor : order) {
    stream.write(static_cast<const char*>(tensor->data), static_cast<std::streamsize>(tensor->bytes));
  }
  out.commit();
}

SafetensorsFile::SafetensorsFile(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw Error(str("cannot open ", path_, ": ", std::strerror(errno)));
  struct stat status {};
  if (::fstat(fd_, &status) != 0 || !S_ISREG(status.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    throw Error(str(path_, ": not a regular file"));
  }
  try {
    const auto file_size = static_cast<uint64_t>(status.st_size);
    if (file_size < 8) {
      throw DataError(
          at_offset(path_, 0, str("file holds ", file_size, " bytes, too few for the 8-byte header length")));
    }
    unsigned char length[8];
    read_at(0, length, 8);
    header_bytes_ = decode_u64(length);
    // Both checks come before the header buffer is allocated.
    if (header_bytes_ > file_size - 8) {
      throw DataError(at_offset(path_, 0,
                                str("header length ", header_bytes_, " runs past the end of the file (", file_size,
                                    " bytes): truncated or not a safetensors file")));
    }
    if (header_bytes_ > kSafetensorsMaxHeaderBytes) {
      throw DataError(at_offset(path_, 0,
                                str("header length ", header_bytes_, " exceeds the ", kSafetensorsMaxHeaderBytes,
                                    "-byte limit of the format")));
    }
    std::string header(header_bytes_, '\0');
    read_at(8, header.data(), header.size());
    parse_header(header);
    check_layout(file_size);
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0) ::close(fd_);
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      header_bytes_(other.header_bytes_),
      tensors_(std::move(other.tensors_)),
      index_(std::move(other.index_)),
      metadata_(std::move(other.metadata_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    header_bytes_ = other.header_bytes_;
    tensors_ = std::move(other.tensors_);
    index_ = std::move(other.index_);
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

void SafetensorsFile::parse_header(const std::string& header) {
  if (header.empty() || header[0] != '{') {
    throw DataError(at_offset(path_, 8, "the header must be a JSON object beginning with '{'"));
  }
  // nlohmann stops at a NUL byte as at the end of the input; JSON allows none outside \u0000 escapes.
  if (auto nul = header.find('\0'); nul != std::string::npos) {
    throw DataError(at_offset(path_, 8 + nul, "header is not valid JSON: a NUL byte"));
  }
  Json json;
  try {
    json = parse_unique_keys(header);
  } catch (const DuplicateKey& duplicate) {
    throw DataError(str(path_, ": header: duplicate key '", duplicate.key, "'"));
  } catch (const HeaderTooDeep&) {
    throw DataError(str(path_, ": header: arrays and objects nested deeper than ", kMaxJsonDepth, " levels"));
  } catch (const nlohmann::json::parse_error& error) {
    uint64_t position = error.byte > 0 ? error.byte - 1 : 0;
    throw DataError(at_offset(path_, 8 + position, str("header is not valid JSON: ", parse_error_detail(error))));
  } catch (const nlohmann::json::out_of_range& error) {
    // A number beyond double's range ("1e400"): nlohmann refuses it without a position.
    throw DataError(at_offset(path_, 8, str("header is not valid JSON: ", json_error_detail(error))));
  }
  if (!json.is_object()) {
    throw DataError(at_offset(path_, 8, "the header must be a JSON object beginning with '{'"));
  }
  for (const auto& [name, value] : json.items()) {
    if (name == "__metadata__") {
      if (value.is_null()) continue;  // the reference reads null as "no metadata"
      if (!value.is_object()) {
        throw DataError(str(path_, ": header: __metadata__ must be an object of strings, got ", value.type_name()));
      }
      for (const auto& [key, text] : value.items()) {
        if (!text.is_string()) {
          throw DataError(
              str(path_, ": header: __metadata__ value of '", key, "' must be a string, got ", text.type_name()));
        }
        metadata_[key] = text.get<std::string>();
      }
      continue;
    }
    const std::string where = str(path_, ": tensor '", name, "': ");
    if (!value.is_object()) {
      throw DataError(str(where, "expected an object with dtype, shape and data_offsets, got ", value.type_name()));
    }
    for (const char* field : {"dtype", "shape", "data_offsets"}) {
      if (!value.contains(field)) throw DataError(str(where, "missing \"", field, "\""));
    }
    SafeTensorInfo info;
    info.name = name;
    const Json& dtype = value["dtype"];
    auto parsed_dtype = dtype.is_string() ? parse_safe_dtype(dtype.get_ref<const std::string&>()) : std::nullopt;
    if (!parsed_dtype) throw DataError(str(where, "unknown dtype ", dtype.dump()));
    info.dtype = *parsed_dtype;

    const Json& shape = value["shape"];
    bool ok = shape.is_array();
    for (size_t i = 0; ok && i < shape.size(); ++i) {
      uint64_t dim = get_u64(shape[i], &ok);
      ok = ok && dim <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
      info.shape.push_back(static_cast<int64_t>(dim));
    }
    if (!ok) throw DataError(str(where, "shape must be an array of non-negative integers, got ", shape.dump()));

    const Json& offsets = value["data_offsets"];
    ok = offsets.is_array() && offsets.size() == 2;
    if (ok) {
      info.begin = get_u64(offsets[0], &ok);
      if (ok) info.end = get_u64(offsets[1], &ok);
    }
    if (!ok) {
      throw DataError(str(where, "data_offsets must be [begin, end] with non-negative integers, got ", offsets.dump()));
    }
    const std::string offsets_text = str("data_offsets ", range_text(info.begin, info.end));
    if (info.end < info.begin) throw DataError(str(where, offsets_text, " end before they begin"));

    const std::string dtype_shape = str(safe_dtype_name(info.dtype), " shape ", shape_text(info.shape));
    auto needed = safe_tensor_bytes(info.dtype, info.shape);
    if (!needed) {
      bool partial_byte = !overflows(info.dtype, info.shape);
      throw DataError(str(where, dtype_shape,
                          partial_byte ? " does not fill a whole number of bytes"
                                       : " has too many elements (its size overflows 64 bits)"));
    }
    if (*needed != info.bytes()) {
      throw DataError(str(where, offsets_text, " hold ", info.bytes(), " bytes but ", dtype_shape, " needs ", *needed));
    }
    tensors_.push_back(std::move(info));
  }
  // The reference reader sorts by offsets too: any key order is valid.
  std::sort(tensors_.begin(), tensors_.end(), [](const SafeTensorInfo& a, const SafeTensorInfo& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
}

void SafetensorsFile::check_layout(uint64_t file_size) const {
  const uint64_t buffer_size = file_size - data_start();
  uint64_t covered = 0;  // the buffer is covered up to here
  const SafeTensorInfo* previous = nullptr;
  for (const auto& info : tensors_) {
    const std::string where = str("tensor '", info.name, "': data_offsets ", range_text(info.begin, info.end));
    if (info.begin < covered) {
      throw DataError(str(path_, ": ", where, " overlap tensor '", previous->name, "' at ",
                          range_text(previous->begin, previous->end)));
    }
    if (info.begin > covered) {
      throw DataError(
          at_offset(path_, data_start() + covered,
                    str(where, " leave bytes [", covered, ", ", info.begin, ") of the data buffer to no tensor")));
    }
    if (info.end > buffer_size) {
      throw DataError(
          at_offset(path_, data_start() + info.begin,
                    str(where, " run past the end of the data buffer (", buffer_size, " bytes): truncated file?")));
    }
    covered = info.end;
    previous = &info;
  }
  if (covered != buffer_size) {
    throw DataError(at_offset(path_, data_start() + covered,
                              str(buffer_size - covered, " bytes after the last tensor belong to no tensor")));
  }
}

const SafeTensorInfo& SafetensorsFile::info(const std::string& name) const {
  auto found = index_.find(name);
  if (found == index_.end()) throw DataError(str(path_, ": no tensor named '", name, "'"));
  return tensors_[found->second];
}

std::vector<uint8_t> SafetensorsFile::read(const std::string& name) const {
  const SafeTensorInfo& tensor = info(name);
  std::vector<uint8_t> bytes(tensor.bytes());
  read_at(data_start() + tensor.begin, bytes.data(), bytes.size());
  return bytes;
}

void SafetensorsFile::read_into(const std::string& name, void* buffer, size_t bytes) const {
  const SafeTensorInfo& tensor = info(name);
  if (bytes != tensor.bytes()) {
    throw Error(str(path_, ": tensor '", name, "' holds ", tensor.bytes(), " bytes, the buffer ", bytes));
  }
  read_at(data_start() + tensor.begin, buffer, bytes);
}

void SafetensorsFile::read_at(uint64_t offset, void* buffer, size_t bytes) const {
  auto* out = static_cast<char*>(buffer);
  while (bytes > 0) {
    ssize_t got = ::pread(fd_, out, bytes, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw Error(str("error reading ", path_, ": ", std::strerror(errno)));
    if (got == 0) throw DataError(at_offset(path_, offset, "unexpected end of file (was it truncated?)"));
    out += got;
    offset += static_cast<uint64_t>(got);
    bytes -= static_cast<size_t>(got);
  }
}

}  // namespace cabert::io
