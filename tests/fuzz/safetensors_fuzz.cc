// The safetensors reader (lib/io/safetensors.h): header length, JSON header, layout of the data buffer;
// then every tensor read back, and the bytes a tensor's dtype and shape imply checked against them.
#include <string>
#include <vector>

#include "lib/io/safetensors.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = cabert::fuzz::input_file(data, size, ".safetensors");
  cabert::fuzz::expect_only<cabert::DataError>("safetensors", [&] {
    cabert::io::SafetensorsFile file(path);
    uint64_t total = 0;
    for (const auto& tensor : file.tensors()) {
      std::vector<uint8_t> bytes = file.read(tensor.name);
      auto needed = cabert::io::safe_tensor_bytes(tensor.dtype, tensor.shape);
      if (!needed || *needed != bytes.size()) __builtin_trap();  // validated, yet inconsistent
      total += bytes.size();
      (void)cabert::io::safe_dtype_name(tensor.dtype);
    }
    if (file.data_start() + total != size) __builtin_trap();  // the tensors must cover the buffer exactly
    (void)file.info("no such tensor, surely");
  });
  return 0;
}
