// Hugging Face's safetensors format, without torch (an adapter elsewhere maps SafeDtype to torch dtypes).
//
//   8 bytes   N, the header length, u64 little endian (at most 100,000,000: the reference limit)
//   N bytes   UTF-8 JSON object beginning with '{', possibly padded with trailing spaces:
//               {"__metadata__": {"key": "value", ...},        (optional, string values only)
//                "NAME": {"dtype": "F32", "shape": [2, 3], "data_offsets": [BEGIN, END]}, ...}
//   the rest  the data buffer: each tensor's bytes, little endian, row-major, at [BEGIN, END) of the buffer
//
// The rules follow the reference implementation (huggingface/safetensors, safetensors/src/tensor.rs):
// sorted by offset, the tensors cover the data buffer exactly, with no gap, no overlap and nothing after
// the last one; END - BEGIN equals the shape's element count times the dtype size; names are unique. The
// order of the keys in the header is free. Where the README is stricter than the reference reader (0.8),
// this reader follows the README: a header must begin with '{' and no object may repeat a key (the
// reference keeps the last of two tensors with one name). Like the reference, it ignores unknown fields
// in a tensor entry and reads "__metadata__": null as no metadata.
//
// The writer orders tensors as the reference writer does (descending dtype alignment, then name), emits
// "__metadata__" first (keys sorted; omitted when empty) and pads the header with spaces to a multiple of
// 8 bytes, so that for the same tensors and at most one metadata key it writes the same bytes as Python's
// safetensors.numpy.save_file. It writes atomically (temporary file, then rename).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cabert::io {

// In the reference's order, which is increasing alignment; the writer relies on it.
enum class SafeDtype {
  kBool,
  kF4,      // 4-bit OCP MX float; two per byte
  kF6E2M3,  // 6-bit OCP MX floats
  kF6E3M2,
  kU8,
  kI8,
  kF8E5M2,
  kF8E4M3,
  kF8E8M0,
  kF8E4M3Fnuz,
  kF8E5M2Fnuz,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kC64,
  kF64,
  kI64,
  kU64,
};

// "F32", "BF16", "F8_E4M3", ... as written in the header.
const char* safe_dtype_name(SafeDtype dtype);
// The dtype a header name stands for; nullopt for a name the format does not define.
std::optional<SafeDtype> parse_safe_dtype(std::string_view name);
// Bits per element: 4 and 6 for F4 and F6_*, else 8 times the byte size.
int safe_dtype_bits(SafeDtype dtype);
// Bytes per element; 0 for the sub-byte dtypes (F4, F6_*), whose sizes only whole tensors have.
size_t safe_dtype_size(SafeDtype dtype);
// Bytes of a tensor of `shape`; nullopt when a dimension is negative, the size overflows 64 bits, or a
// sub-byte dtype does not fill a whole number of bytes.
std::optional<uint64_t> safe_tensor_bytes(SafeDtype dtype, const std::vector<int64_t>& shape);
// "[5, 6]", as in the messages about tensors' shapes.
std::string shape_text(const std::vector<int64_t>& shape);

inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

struct SafeTensorInfo {
  std::string name;
  SafeDtype dtype = SafeDtype::kF32;
  std::vector<int64_t> shape;   // [] for a scalar
  uint64_t begin = 0, end = 0;  // offsets into the data buffer (not the file)
  uint64_t bytes() const { return end - begin; }
};

// One tensor to write; `data` holds `bytes` little-endian bytes, row-major (may be null when bytes == 0).
struct SafeTensorView {
  std::string name;
  SafeDtype dtype = SafeDtype::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t bytes = 0;
};

// Throws cabert::Error for an inconsistent view (duplicate or reserved name, bytes not matching the shape,
// header over the limit) and when the file cannot be written; nothing is left under `path` then.
void write_safetensors(const std::string& path, const std::vector<SafeTensorView>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Opens and validates a safetensors file; reads tensors on demand (pread), never the whole file.
// Anything malformed throws cabert::DataError naming the file, the tensor and, where one applies, the
// byte offset. Every size is checked against the real file size before anything is allocated from it.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(std::string path);
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // In data order (increasing offsets).
  const std::vector<SafeTensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Header length N as stored (padding included); the data buffer starts at byte 8 + N.
  uint64_t header_bytes() const { return header_bytes_; }
  uint64_t data_start() const { return 8 + header_bytes_; }

  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  // Throws DataError "FILE: no tensor named 'NAME'" when absent.
  const SafeTensorInfo& info(const std::string& name) const;

  std::vector<uint8_t> read(const std::string& name) const;
  // Reads the tensor into `buffer`, which must hold exactly its size (else cabert::Error).
  void read_into(const std::string& name, void* buffer, size_t bytes) const;

 private:
  void parse_header(const std::string& header);
  void check_layout(uint64_t file_size) const;
  void read_at(uint64_t offset, void* buffer, size_t bytes) const;

  std::string path_;
  int fd_ = -1;
  uint64_t header_bytes_ = 0;
  std::vector<SafeTensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace cabert::io
