#include "lib/io/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "lib/core/errors.h"
#include "tests/test_paths.h"

namespace cabert::io {
namespace {

namespace fs = std::filesystem;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string u64_le(uint64_t value) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  return bytes;
}

// A file made by hand: length, `header` (padded with spaces to a multiple of 8 when `pad`), `data`.
std::string raw_file(std::string header, const std::string& data, bool pad = true) {
  if (pad) header.resize((header.size() + 7) / 8 * 8, ' ');
  return u64_le(header.size()) + header + data;
}

template <typename T>
std::string as_bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

std::string as_string(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }

uint64_t fnv1a(const std::string& bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char byte : bytes) hash = (hash ^ byte) * 0x100000001b3ULL;
  return hash;
}

// The message of the DataError that `action` throws; a test failure (and "") when it throws none.
std::string data_error(const std::function<void()>& action) {
  try {
    action();
  } catch (const DataError& error) {
    return error.what();
  } catch (const std::exception& error) {
    ADD_FAILURE() << "expected a DataError, got: " << error.what();
    return "";
  }
  ADD_FAILURE() << "expected a DataError, nothing thrown";
  return "";
}

struct Owned {
  std::string name;
  SafeDtype dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

std::vector<SafeTensorView> views(const std::vector<Owned>& tensors) {
  std::vector<SafeTensorView> result;
  for (const auto& t : tensors) {
    result.push_back({t.name, t.dtype, t.shape, t.bytes.empty() ? nullptr : t.bytes.data(), t.bytes.size()});
  }
  return result;
}

// Tensors of every common dtype, a scalar and empty ones; float values exact in binary.
std::vector<Owned> sample_tensors(bool with_bf16) {
  std::vector<Owned> tensors = {
      {"encoder.w", SafeDtype::kF32, {2, 3}, as_bytes(std::vector<float>{0.5f, -1.25f, 2.f, 3.f, 4.5f, -6.f})},
      {"scale", SafeDtype::kF64, {}, as_bytes(std::vector<double>{-2.5})},
      {"ids", SafeDtype::kI64, {3}, as_bytes(std::vector<int64_t>{-1, 1099511627776LL, 7})},
      {"i32", SafeDtype::kI32, {2, 2}, as_bytes(std::vector<int32_t>{1, -2, 3, -2147483647})},
      {"i16", SafeDtype::kI16, {3}, as_bytes(std::vector<int16_t>{-300, 0, 32767})},
      {"i8", SafeDtype::kI8, {2}, as_bytes(std::vector<int8_t>{-128, 127})},
      {"u8", SafeDtype::kU8, {4}, as_bytes(std::vector<uint8_t>{0, 1, 200, 255})},
      {"mask", SafeDtype::kBool, {3}, as_bytes(std::vector<uint8_t>{1, 0, 1})},
      {"half", SafeDtype::kF16, {2}, as_bytes(std::vector<uint16_t>{0x3E00, 0xB400})},  // 1.5, -0.25
      {"empty", SafeDtype::kF32, {0, 4}, ""},
      {"empty.u8", SafeDtype::kU8, {3, 0, 2}, ""},
  };
  if (with_bf16)
    tensors.push_back({"brain", SafeDtype::kBF16, {1, 2}, as_bytes(std::vector<uint16_t>{0x3FC0, 0xC020})});
  return tensors;
}

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("cabert_safetensors_" + std::to_string(getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  // The DataError message of opening a file holding `bytes`.
  std::string open_error(const std::string& bytes, const std::string& name = "bad.safetensors") {
    write_bytes(path(name), bytes);
    return data_error([&] { SafetensorsFile file(path(name)); });
  }

  std::string dir_;
};

TEST(SafeDtype, NamesSizesAndTensorBytes) {
  for (int i = 0; i <= static_cast<int>(SafeDtype::kU64); ++i) {
    auto dtype = static_cast<SafeDtype>(i);
    EXPECT_EQ(parse_safe_dtype(safe_dtype_name(dtype)), dtype) << safe_dtype_name(dtype);
  }
  EXPECT_STREQ(safe_dtype_name(SafeDtype::kBF16), "BF16");
  EXPECT_STREQ(safe_dtype_name(SafeDtype::kF8E4M3), "F8_E4M3");
  EXPECT_EQ(parse_safe_dtype("f32"), std::nullopt);
  EXPECT_EQ(safe_dtype_size(SafeDtype::kBool), 1u);
  EXPECT_EQ(safe_dtype_size(SafeDtype::kBF16), 2u);
  EXPECT_EQ(safe_dtype_size(SafeDtype::kC64), 8u);
  EXPECT_EQ(safe_dtype_size(SafeDtype::kF4), 0u);
  EXPECT_EQ(safe_dtype_bits(SafeDtype::kF6E2M3), 6);
  EXPECT_EQ(safe_tensor_bytes(SafeDtype::kF32, {}), 4u);
  EXPECT_EQ(safe_tensor_bytes(SafeDtype::kF32, {5, 6}), 120u);
  EXPECT_EQ(safe_tensor_bytes(SafeDtype::kF64, {0, 7}), 0u);
  EXPECT_EQ(safe_tensor_bytes(SafeDtype::kF4, {4}), 2u);
  EXPECT_EQ(safe_tensor_bytes(SafeDtype::kF4, {3}), std::nullopt);
  EXPECT_EQ(safe_tensor_bytes(SafeDtype::kF32, {-1}), std::nullopt);
  EXPECT_EQ(safe_tensor_bytes(SafeDtype::kU8, {1LL << 32, 1LL << 32}), std::nullopt);
}

TEST_F(Safetensors, RoundTripKeepsEveryDtypeShapeAndByte) {
  auto tensors = sample_tensors(true);
  std::map<std::string, std::string> metadata = {{"format", "pt"}, {"producer", "cabert"}, {"empty", ""}};
  write_safetensors(path("m.safetensors"), views(tensors), metadata);

  SafetensorsFile file(path("m.safetensors"));
  EXPECT_EQ(file.metadata(), metadata);
  ASSERT_EQ(file.tensors().size(), tensors.size());
  uint64_t total = 0;
  for (const auto& expected : tensors) {
    SCOPED_TRACE(expected.name);
    ASSERT_TRUE(file.contains(expected.name));
    const SafeTensorInfo& info = file.info(expected.name);
    EXPECT_EQ(info.dtype, expected.dtype);
    EXPECT_EQ(info.shape, expected.shape);
    EXPECT_EQ(info.bytes(), expected.bytes.size());
    EXPECT_EQ(as_string(file.read(expected.name)), expected.bytes);
    std::string buffer(expected.bytes.size(), '\0');
    file.read_into(expected.name, buffer.data(), buffer.size());
    EXPECT_EQ(buffer, expected.bytes);
    total += expected.bytes.size();
  }
  EXPECT_EQ(fs::file_size(path("m.safetensors")), file.data_start() + total);
  EXPECT_FALSE(file.contains("missing"));
  EXPECT_EQ(data_error([&] { file.read("missing"); }), path("m.safetensors") + ": no tensor named 'missing'");
  std::string small(3, '\0');
  EXPECT_THROW(file.read_into("encoder.w", small.data(), small.size()), Error);

  SafetensorsFile moved(std::move(file));
  EXPECT_EQ(as_string(moved.read("scale")), tensors[1].bytes);
  // Nothing but the file itself is left in the directory (the temporary file was renamed).
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(Safetensors, WriterOrdersLikeTheReferenceAndPadsTheHeaderWithSpaces) {
  std::vector<Owned> tensors = {
      {"b", SafeDtype::kF32, {2}, as_bytes(std::vector<float>{0, 0})}, {"a", SafeDtype::kU8, {3}, "\x01\x01\x01"},
      {"c", SafeDtype::kF64, {}, as_bytes(std::vector<double>{3.0})},  {"e", SafeDtype::kI16, {0, 4}, ""},
      {"d", SafeDtype::kF32, {1}, as_bytes(std::vector<float>{1})},
  };
  write_safetensors(path("o.safetensors"), views(tensors), {{"z", "1"}, {"format", "np"}});
  std::string bytes = read_bytes(path("o.safetensors"));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(n % 8, 0u);
  std::string json =
      R"({"__metadata__":{"format":"np","z":"1"},"c":{"dtype":"F64","shape":[],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},"d":{"dtype":"F32","shape":[1],"data_offsets":[16,20]},)"
      R"("e":{"dtype":"I16","shape":[0,4],"data_offsets":[20,20]},"a":{"dtype":"U8","shape":[3],"data_offsets":[20,23]}})";
  ASSERT_GE(n, json.size());
  EXPECT_EQ(bytes.substr(8, json.size()), json);
  EXPECT_EQ(bytes.substr(8 + json.size(), n - json.size()), std::string(n - json.size(), ' '));
  EXPECT_EQ(bytes.size(), 8 + n + 23);

  SafetensorsFile file(path("o.safetensors"));
  std::vector<std::string> names;
  for (const auto& info : file.tensors()) names.push_back(info.name);
  EXPECT_EQ(names, (std::vector<std::string>{"c", "b", "d", "e", "a"}));  // data order
}

TEST_F(Safetensors, NoMetadataWritesNoMetadataKey) {
  write_safetensors(path("n.safetensors"), views({{"x", SafeDtype::kI8, {1}, "\x05"}}), {});
  EXPECT_EQ(read_bytes(path("n.safetensors")).substr(8, 10), R"({"x":{"dty)");
  EXPECT_TRUE(SafetensorsFile(path("n.safetensors")).metadata().empty());
}

TEST_F(Safetensors, ReaderAcceptsAnyKeyOrderNoPaddingNullMetadataAndNoTensors) {
  std::string header = R"({"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]},"__metadata__":null,)"
                       R"("a":{"data_offsets":[0,1],"shape":[],"dtype":"I8","extra":"ignored"}})";
  write_bytes(path("k.safetensors"), raw_file(header, "\x09\x07\x08", /*pad=*/false));
  SafetensorsFile file(path("k.safetensors"));
  ASSERT_EQ(file.tensors().size(), 2u);
  EXPECT_EQ(file.tensors()[0].name, "a");
  EXPECT_EQ(as_string(file.read("b")), "\x07\x08");
  EXPECT_EQ(as_string(file.read("a")), "\x09");
  EXPECT_TRUE(file.metadata().empty());

  write_bytes(path("e.safetensors"), raw_file("{}", ""));
  EXPECT_TRUE(SafetensorsFile(path("e.safetensors")).tensors().empty());
  write_safetensors(path("w.safetensors"), {}, {{"k", "v"}});
  EXPECT_EQ(SafetensorsFile(path("w.safetensors")).metadata().at("k"), "v");
}

TEST_F(Safetensors, WriterRejectsInconsistentViewsAndLeavesNoFile) {
  std::string out = path("w.safetensors");
  float one = 1;
  EXPECT_THROW(write_safetensors(out, {{"a", SafeDtype::kF32, {2}, &one, 4}}), Error);
  EXPECT_THROW(write_safetensors(out, {{"a", SafeDtype::kF32, {1}, &one, 4}, {"a", SafeDtype::kF32, {1}, &one, 4}}),
               Error);
  EXPECT_THROW(write_safetensors(out, {{"__metadata__", SafeDtype::kF32, {1}, &one, 4}}), Error);
  EXPECT_THROW(write_safetensors(out, {{"a", SafeDtype::kF32, {-1}, &one, 4}}), Error);
  EXPECT_THROW(write_safetensors(out, {{"a", SafeDtype::kF32, {1}, nullptr, 4}}), Error);
  try {
    write_safetensors(out, {{"a", SafeDtype::kF32, {2}, &one, 4}});
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()), out + ": tensor 'a': 4 bytes given but F32 shape [2] needs 8");
  }
  EXPECT_FALSE(fs::exists(out));
}

// ------------------------------------------------------------------------------------------- bad input

TEST_F(Safetensors, ShortFileAndImpossibleHeaderLengthsFailBeforeAllocating) {
  std::string p = path("bad.safetensors");
  EXPECT_EQ(open_error("\x01\x02\x03"),
            p + ": at byte offset 0: file holds 3 bytes, too few for the 8-byte header length");
  // 100 bytes claiming a 1 TB header: refused from the numbers alone.
  EXPECT_EQ(open_error(u64_le(1'000'000'000'000ULL) + std::string(92, '{')),
            p + ": at byte offset 0: header length 1000000000000 runs past the end of the file (100 bytes): "
                "truncated or not a safetensors file");
  EXPECT_EQ(open_error(u64_le(~0ULL) + std::string(92, ' ')),
            p + ": at byte offset 0: header length 18446744073709551615 runs past the end of the file (100 "
                "bytes): truncated or not a safetensors file");
  EXPECT_EQ(open_error(u64_le(0)), p + ": at byte offset 8: the header must be a JSON object beginning with '{'");
}

TEST_F(Safetensors, HeaderOverTheLimitFails) {
  // A sparse file large enough to hold the claimed header: the limit, not the file size, refuses it.
  std::string p = path("big.safetensors");
  write_bytes(p, u64_le(kSafetensorsMaxHeaderBytes + 1) + "{");
  fs::resize_file(p, kSafetensorsMaxHeaderBytes + 16);
  EXPECT_EQ(data_error([&] { SafetensorsFile file(p); }),
            p + ": at byte offset 0: header length 100000001 exceeds the 100000000-byte limit of the format");
}

TEST_F(Safetensors, MalformedJsonHeadersNameTheProblem) {
  std::string p = path("bad.safetensors");
  EXPECT_EQ(open_error(raw_file("[1, 2]", "")),
            p + ": at byte offset 8: the header must be a JSON object beginning with '{'");
  EXPECT_EQ(open_error(raw_file("  {}", "")),
            p + ": at byte offset 8: the header must be a JSON object beginning with '{'");
  // nlohmann's own wording follows the prefix; the offset is that of the offending byte.
  std::string message = open_error(raw_file(R"({"a":{"dtype":x}})", ""));
  EXPECT_EQ(message.rfind(p + ": at byte offset 22: header is not valid JSON: syntax error", 0), 0u) << message;
  message = open_error(raw_file("{\"\xff\":1}", ""));
  EXPECT_EQ(message.rfind(p + ": at byte offset 10: header is not valid JSON: ", 0), 0u) << message;
  // Padding with NUL bytes instead of spaces (nlohmann alone would stop at the first NUL).
  EXPECT_EQ(open_error(raw_file(std::string("{}\0\0\0\0\0\0", 8), "", false)),
            p + ": at byte offset 10: header is not valid JSON: a NUL byte");

  const std::string entry = R"({"dtype":"U8","shape":[1],"data_offsets":[0,1]})";
  EXPECT_EQ(open_error(raw_file(R"({"a":)" + entry + R"(,"a":)" + entry + "}", "\x01")),
            p + ": header: duplicate key 'a'");
  EXPECT_EQ(open_error(raw_file(R"({"a":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}})", "\x01")),
            p + ": header: duplicate key 'dtype'");
  EXPECT_EQ(open_error(raw_file(R"({"__metadata__":["x"]})", "")),
            p + ": header: __metadata__ must be an object of strings, got array");
  EXPECT_EQ(open_error(raw_file(R"({"__metadata__":{"format":"pt","epoch":3}})", "")),
            p + ": header: __metadata__ value of 'epoch' must be a string, got number");
}

// Found by tests/fuzz/safetensors_fuzz: a number beyond double's range escaped as nlohmann's out_of_range
// (exit 1, no file named), and deep nesting parsed fine but overflowed the stack when the message printed it.
TEST_F(Safetensors, NumbersOutOfRangeAndDeepNestingAreDataErrors) {
  std::string p = path("bad.safetensors");
  EXPECT_EQ(open_error(raw_file(R"({"w":{"dtype":"F32","shape":[1e400],"data_offsets":[0,4]}})", "abcd")),
            p + ": at byte offset 8: header is not valid JSON: number overflow parsing '1e400'");
  const size_t depth = 200000;  // far past any stack when printed recursively
  const std::string deep = std::string(depth, '[') + std::string(depth, ']');
  EXPECT_EQ(open_error(raw_file(R"({"w":{"dtype":"F32","shape":)" + deep + R"(,"data_offsets":[0,0]}})", "")),
            p + ": header: arrays and objects nested deeper than 128 levels");
  // The format itself nests three levels; 128 is the reference reader's (serde_json's) limit.
  const std::string nested = std::string(126, '[') + std::string(126, ']');
  EXPECT_NE(open_error(raw_file(R"({"w":{"dtype":"F32","shape":)" + nested + R"(,"data_offsets":[0,0]}})", ""))
                .find("shape must be an array of non-negative integers"),
            std::string::npos);
}

TEST_F(Safetensors, MalformedTensorEntriesNameTheTensor) {
  std::string p = path("bad.safetensors");
  auto with = [&](const std::string& tensor_json) {
    return open_error(raw_file(R"({"t.w":)" + tensor_json + "}", ""));
  };
  EXPECT_EQ(with("[1]"), p + ": tensor 't.w': expected an object with dtype, shape and data_offsets, got array");
  EXPECT_EQ(with(R"({"dtype":"F32","shape":[]})"), p + ": tensor 't.w': missing \"data_offsets\"");
  EXPECT_EQ(with(R"({"dtype":"F128","shape":[],"data_offsets":[0,0]})"), p + ": tensor 't.w': unknown dtype \"F128\"");
  EXPECT_EQ(with(R"({"dtype":32,"shape":[],"data_offsets":[0,0]})"), p + ": tensor 't.w': unknown dtype 32");
  EXPECT_EQ(with(R"({"dtype":"F32","shape":[2,-1],"data_offsets":[0,0]})"),
            p + ": tensor 't.w': shape must be an array of non-negative integers, got [2,-1]");
  EXPECT_EQ(with(R"({"dtype":"F32","shape":[2.0],"data_offsets":[0,0]})"),
            p + ": tensor 't.w': shape must be an array of non-negative integers, got [2.0]");
  EXPECT_EQ(with(R"({"dtype":"F32","shape":[9223372036854775808,0],"data_offsets":[0,0]})"),
            p + ": tensor 't.w': shape must be an array of non-negative integers, got [9223372036854775808,0]");
  EXPECT_EQ(with(R"({"dtype":"F32","shape":[],"data_offsets":[0]})"),
            p + ": tensor 't.w': data_offsets must be [begin, end] with non-negative integers, got [0]");
  EXPECT_EQ(with(R"({"dtype":"F32","shape":[],"data_offsets":[8,4]})"),
            p + ": tensor 't.w': data_offsets [8, 4] end before they begin");
  EXPECT_EQ(with(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]})"),
            p + ": tensor 't.w': F32 shape [4294967296, 4294967296] has too many elements (its size overflows 64 "
                "bits)");
  EXPECT_EQ(with(R"({"dtype":"F4","shape":[3],"data_offsets":[0,1]})"),
            p + ": tensor 't.w': F4 shape [3] does not fill a whole number of bytes");

  std::string model = path("model.safetensors");
  EXPECT_EQ(open_error(raw_file(R"({"encoder.w":{"dtype":"F32","shape":[5,6],"data_offsets":[0,100]}})",
                                std::string(100, '\0')),
                       "model.safetensors"),
            model + ": tensor 'encoder.w': data_offsets [0, 100] hold 100 bytes but F32 shape [5, 6] needs 120");
}

TEST_F(Safetensors, OffsetsMustTileTheDataBufferExactly) {
  std::string p = path("bad.safetensors");
  // Headers of 112 bytes once padded, so the data buffer starts at byte 120.
  auto two = [](uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1) {
    return str(R"({"a":{"dtype":"U8","shape":[)", a1 - a0, R"(],"data_offsets":[)", a0, ",", a1, R"(]},)",
               R"("b":{"dtype":"U8","shape":[)", b1 - b0, R"(],"data_offsets":[)", b0, ",", b1, "]}}");
  };
  ASSERT_EQ((two(0, 16, 16, 24).size() + 7) / 8 * 8, 112u);
  EXPECT_EQ(open_error(raw_file(two(0, 16, 8, 24), std::string(24, 'x'))),
            p + ": tensor 'b': data_offsets [8, 24] overlap tensor 'a' at [0, 16]");
  EXPECT_EQ(open_error(raw_file(two(0, 16, 24, 32), std::string(32, 'x'))),
            p + ": at byte offset 136: tensor 'b': data_offsets [24, 32] leave bytes [16, 24) of the data buffer "
                "to no tensor");
  EXPECT_EQ(open_error(raw_file(two(8, 16, 16, 24), std::string(24, 'x'))),
            p + ": at byte offset 120: tensor 'a': data_offsets [8, 16] leave bytes [0, 8) of the data buffer to "
                "no tensor");
  EXPECT_EQ(open_error(raw_file(two(0, 16, 16, 24), std::string(20, 'x'))),
            p + ": at byte offset 136: tensor 'b': data_offsets [16, 24] run past the end of the data buffer (20 "
                "bytes): truncated file?");
  EXPECT_EQ(open_error(raw_file(two(0, 16, 16, 24), std::string(30, 'x'))),
            p + ": at byte offset 144: 6 bytes after the last tensor belong to no tensor");
  // An empty tensor inside another's range overlaps it too (the reference refuses it as well).
  EXPECT_EQ(open_error(raw_file(two(0, 16, 4, 4), std::string(16, 'x'))),
            p + ": tensor 'b': data_offsets [4, 4] overlap tensor 'a' at [0, 16]");
}

// ------------------------------------------------------------------- against the Python reference package

#define CABERT_REQUIRE_REFERENCE_PYTHON(python)                              \
  std::string python = ::cabert::testing::python_with("safetensors, numpy"); \
  if (python.empty()) GTEST_SKIP() << "CABERT_PYTHON unset or without safetensors+numpy: skipped"

using ::cabert::testing::run_python;

const char* kFnvPython = R"(
def fnv(data):
    h = 0xcbf29ce484222325
    for b in bytes(data):
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h
)";

TEST_F(Safetensors, PythonReadsWhatCabertWrites) {
  CABERT_REQUIRE_REFERENCE_PYTHON(python);
  auto all = sample_tensors(true);
  std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "caf\xc3\xa9 \"q\""}};
  write_safetensors(path("all.safetensors"), views(all), metadata);
  auto numpy_only = sample_tensors(false);
  write_safetensors(path("np.safetensors"), views(numpy_only), {});

  write_bytes(path("check.py"),
              str("import sys, json, safetensors\nfrom safetensors.numpy import load_file\n", kFnvPython, R"(
with open(sys.argv[1], 'rb') as f:
    raw = safetensors.deserialize(f.read())
for name, t in sorted(raw, key=lambda item: item[0]):
    print('raw', name, t['dtype'], json.dumps(t['shape']), fnv(t['data']))
with safetensors.safe_open(sys.argv[1], framework='np') as f:
    print('meta', json.dumps(f.metadata(), sort_keys=True))
arrays = load_file(sys.argv[2])
for name in sorted(arrays):
    a = arrays[name]
    print('np', name, a.dtype.name, json.dumps(list(a.shape)), json.dumps(a.tolist()))
)"));
  std::string output =
      run_python(python, path("check.py"), str("'", path("all.safetensors"), "' '", path("np.safetensors"), "'"));

  std::map<std::string, std::string> raw_lines;
  for (const auto& t : all) {
    std::string shape = "[";
    for (size_t i = 0; i < t.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(t.shape[i]);
    raw_lines[t.name] = str("raw ", t.name, " ", safe_dtype_name(t.dtype), " ", shape, "] ", fnv1a(t.bytes), "\n");
  }
  std::string expected;
  for (const auto& [name, line] : raw_lines) expected += line;
  expected += R"(meta {"format": "pt", "note": "caf\u00e9 \"q\""})"
              "\n";
  expected += "np empty float32 [0, 4] []\n"
              "np empty.u8 uint8 [3, 0, 2] [[], [], []]\n"
              "np encoder.w float32 [2, 3] [[0.5, -1.25, 2.0], [3.0, 4.5, -6.0]]\n"
              "np half float16 [2] [1.5, -0.25]\n"
              "np i16 int16 [3] [-300, 0, 32767]\n"
              "np i32 int32 [2, 2] [[1, -2], [3, -2147483647]]\n"
              "np i8 int8 [2] [-128, 127]\n"
              "np ids int64 [3] [-1, 1099511627776, 7]\n"
              "np mask bool [3] [true, false, true]\n"
              "np scale float64 [] -2.5\n"
              "np u8 uint8 [4] [0, 1, 200, 255]\n";
  EXPECT_EQ(output, expected);
}

TEST_F(Safetensors, CabertReadsWhatPythonWritesAndWritesTheSameBytes) {
  CABERT_REQUIRE_REFERENCE_PYTHON(python);
  write_bytes(path("make.py"), R"(import sys
import numpy as np
from safetensors.numpy import save_file
tensors = {
    'encoder.w': np.array([[0.5, -1.25, 2.0], [3.0, 4.5, -6.0]], dtype=np.float32),
    'scale': np.array(-2.5, dtype=np.float64),
    'ids': np.array([-1, 2**40, 7], dtype=np.int64),
    'i32': np.array([[1, -2], [3, -2147483647]], dtype=np.int32),
    'i16': np.array([-300, 0, 32767], dtype=np.int16),
    'i8': np.array([-128, 127], dtype=np.int8),
    'u8': np.array([0, 1, 200, 255], dtype=np.uint8),
    'mask': np.array([True, False, True]),
    'half': np.array([1.5, -0.25], dtype=np.float16),
    'empty': np.zeros((0, 4), dtype=np.float32),
    'empty.u8': np.zeros((3, 0, 2), dtype=np.uint8),
}
save_file(tensors, sys.argv[1], metadata={'format': 'np'})
)");
  run_python(python, path("make.py"), str("'", path("py.safetensors"), "'"));

  auto expected = sample_tensors(false);
  SafetensorsFile file(path("py.safetensors"));
  EXPECT_EQ(file.metadata(), (std::map<std::string, std::string>{{"format", "np"}}));
  EXPECT_EQ(file.header_bytes() % 8, 0u);
  ASSERT_EQ(file.tensors().size(), expected.size());
  for (const auto& t : expected) {
    SCOPED_TRACE(t.name);
    ASSERT_TRUE(file.contains(t.name));
    EXPECT_EQ(file.info(t.name).dtype, t.dtype);
    EXPECT_EQ(file.info(t.name).shape, t.shape);
    EXPECT_EQ(as_string(file.read(t.name)), t.bytes);
  }
  // Same tensors, one metadata key: the reference writer's layout byte for byte.
  write_safetensors(path("cabert.safetensors"), views(expected), {{"format", "np"}});
  EXPECT_EQ(read_bytes(path("cabert.safetensors")), read_bytes(path("py.safetensors")));
}

}  // namespace
}  // namespace cabert::io
