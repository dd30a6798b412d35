#include "lib/io/safetensors_torch.h"

#include "lib/core/errors.h"

namespace cabert::io {

namespace {

struct DtypePair {
  SafeDtype safe;
  torch::ScalarType torch;
};

const std::vector<DtypePair>& dtype_pairs() {
  static const std::vector<DtypePair> pairs = {
      {SafeDtype::kF64, torch::kFloat64},   {SafeDtype::kF32, torch::kFloat32}, {SafeDtype::kF16, torch::kFloat16},
      {SafeDtype::kBF16, torch::kBFloat16}, {SafeDtype::kI64, torch::kInt64},   {SafeDtype::kI32, torch::kInt32},
      {SafeDtype::kI16, torch::kInt16},     {SafeDtype::kI8, torch::kInt8},     {SafeDtype::kU8, torch::kUInt8},
      {SafeDtype::kBool, torch::kBool},
  };
  return pairs;
}

}  // namespace

std::optional<torch::ScalarType> torch_dtype(SafeDtype dtype) {
  for (const auto& pair : dtype_pairs()) {
    if (pair.safe == dtype) return pair.torch;
  }
  return std::nullopt;
}

const char* torch_readable_dtypes() { return "F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL"; }

void write_tensors_safetensors(const std::string& path,
                               const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  std::vector<torch::Tensor> keep;  // contiguous CPU copies outlive the views
  std::vector<SafeTensorView> views;
  keep.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) {
    const DtypePair* pair = nullptr;
    for (const auto& p : dtype_pairs()) {
      if (p.torch == tensor.scalar_type()) pair = &p;
    }
    if (pair == nullptr)
      throw Error(str(path, ": tensor '", name, "' has dtype ", tensor.scalar_type(),
                      ", which safetensors export does not support"));
    keep.push_back(tensor.detach().to(torch::kCPU).contiguous());
    const torch::Tensor& t = keep.back();
    views.push_back({name, pair->safe, t.sizes().vec(), t.data_ptr(), static_cast<size_t>(t.nbytes())});
  }
  write_safetensors(path, views, metadata);
}

torch::Tensor read_tensor(const SafetensorsFile& file, const std::string& name) {
  const SafeTensorInfo& info = file.info(name);
  auto dtype = torch_dtype(info.dtype);
  if (!dtype) {
    throw DataError(str(file.path(), ": tensor '", name, "' has dtype ", safe_dtype_name(info.dtype),
                        ", which cabert cannot read (", torch_readable_dtypes(), ")"));
  }
  torch::Tensor tensor = torch::empty(info.shape, torch::TensorOptions().dtype(*dtype));
  file.read_into(name, tensor.data_ptr(), info.bytes());
  return tensor;
}

}  // namespace cabert::io
