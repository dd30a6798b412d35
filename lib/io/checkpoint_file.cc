#include "lib/io/checkpoint_file.h"

#include <cstring>
#include <limits>
#include <optional>

#include "lib/config/validation.h"
#include "lib/core/errors.h"
#include "lib/io/record_file.h"

namespace cabert::io {
namespace {

constexpr const char* kType = "cabert.pb.CheckpointEntry";

const std::vector<std::pair<std::string, torch::ScalarType>>& dtype_names() {
  static const std::vector<std::pair<std::string, torch::ScalarType>> names = {
      {"float32", torch::kFloat32},   {"float64", torch::kFloat64}, {"float16", torch::kFloat16},
      {"bfloat16", torch::kBFloat16}, {"int64", torch::kInt64},     {"int32", torch::kInt32},
      {"uint8", torch::kUInt8},       {"bool", torch::kBool}};
  return names;
}

std::string dtype_name(torch::ScalarType type) {
  for (const auto& [name, t] : dtype_names()) {
    if (t == type) return name;
  }
  throw Error(str("internal: cannot store tensors of type ", c10::toString(type), " in a checkpoint"));
}

pb::TensorData to_proto(const std::string& name, const torch::Tensor& tensor) {
  torch::Tensor t = tensor.detach().to(torch::kCPU).contiguous();
  pb::TensorData data;
  data.set_name(name);
  data.set_dtype(dtype_name(t.scalar_type()));
  for (int64_t s : t.sizes()) data.add_shape(s);
  data.set_data(std::string(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size()));
  return data;
}

// The byte size a dtype and shape need, or nothing when a dimension is negative or the product overflows:
// computed from the record before anything is allocated, so a corrupted shape cannot ask for gigabytes.
std::optional<uint64_t> tensor_bytes(const google::protobuf::RepeatedField<int64_t>& shape, uint64_t element_size) {
  uint64_t bytes = element_size;
  for (int64_t dim : shape) {
    if (dim < 0) return std::nullopt;
    if (dim > 0 && bytes > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(dim)) return std::nullopt;
    bytes *= static_cast<uint64_t>(dim);
  }
  return bytes;
}

torch::Tensor from_proto(const pb::TensorData& data, const std::string& path) {
  torch::ScalarType type = torch::kFloat32;
  bool known = false;
  for (const auto& [name, t] : dtype_names()) {
    if (name == data.dtype()) type = t, known = true;
  }
  if (!known) throw DataError(str(path, ": tensor '", data.name(), "': unknown dtype '", data.dtype(), "'"));
  std::vector<int64_t> shape(data.shape().begin(), data.shape().end());
  const std::optional<uint64_t> expected = tensor_bytes(data.shape(), c10::elementSize(type));
  if (!expected || *expected != data.data().size()) {
    throw DataError(str(path, ": tensor '", data.name(), "': expected ",
                        expected ? str(*expected, " bytes") : std::string("a valid size"), " for shape ",
                        c10::IntArrayRef(shape), ", got ", data.data().size()));
  }
  torch::Tensor t = torch::empty(shape, torch::TensorOptions().dtype(type));
  if (*expected > 0) std::memcpy(t.data_ptr(), data.data().data(), *expected);
  return t;
}

}  // namespace

void save_checkpoint(const std::string& path, pb::CheckpointInfo info, const NamedTensors& tensors) {
  info.set_tensor_count(tensors.size());
  io::RecordWriter writer(path, kType, {{"kind", info.kind()}, {"step", std::to_string(info.step())}});
  pb::CheckpointEntry entry;
  *entry.mutable_info() = info;
  writer.write(entry);
  for (const auto& [name, tensor] : tensors) {
    pb::CheckpointEntry tensor_entry;
    *tensor_entry.mutable_tensor() = to_proto(name, tensor);
    writer.write(tensor_entry);
  }
  writer.close();
}

namespace {

pb::CheckpointInfo read_info(io::RecordReader& reader, const std::string& path) {
  reader.expect(kType);
  pb::CheckpointEntry entry;
  if (!reader.next(&entry) || !entry.has_info()) {
    throw DataError(str(path, ": expected the checkpoint info as the first record"));
  }
  if (entry.info().has_model()) config::validate_stored_model_config(entry.info().model(), path);
  return entry.info();
}

}  // namespace

pb::CheckpointInfo read_checkpoint_info(const std::string& path) {
  io::RecordReader reader(path);
  return read_info(reader, path);
}

Checkpoint load_checkpoint(const std::string& path) {
  Checkpoint checkpoint;
  checkpoint.path = path;
  io::RecordReader reader(path);
  checkpoint.info = read_info(reader, path);
  pb::CheckpointEntry entry;
  while (reader.next(&entry)) {
    if (!entry.has_tensor()) throw DataError(str(path, ": expected a tensor record, got another info record"));
    checkpoint.tensors[entry.tensor().name()] = from_proto(entry.tensor(), path);
  }
  if (checkpoint.tensors.size() != checkpoint.info.tensor_count()) {
    throw DataError(str(path, ": expected ", checkpoint.info.tensor_count(), " tensors, got ",
                        checkpoint.tensors.size(), " (incomplete checkpoint)"));
  }
  return checkpoint;
}

NamedTensors module_tensors(const torch::nn::Module& module, const std::string& prefix) {
  NamedTensors out;
  for (const auto& p : module.named_parameters(true)) out.emplace_back(prefix + p.key(), p.value());
  for (const auto& b : module.named_buffers(true)) out.emplace_back(prefix + b.key(), b.value());
  return out;
}

size_t restore_module(torch::nn::Module& module, const Checkpoint& checkpoint, const std::string& checkpoint_prefix,
                      const std::string& module_prefix) {
  torch::NoGradGuard no_grad;
  size_t copied = 0;
  for (auto& [name, tensor] : module_tensors(module, "")) {
    if (name.compare(0, module_prefix.size(), module_prefix) != 0) continue;
    const std::string source = checkpoint_prefix + name.substr(module_prefix.size());
    auto found = checkpoint.tensors.find(source);
    if (found == checkpoint.tensors.end()) {
      throw DataError(str(checkpoint.path, ": has no tensor '", source, "' for the module's '", name,
                          "' (a checkpoint of another architecture?)"));
    }
    if (found->second.sizes() != tensor.sizes()) {
      throw DataError(str(checkpoint.path, ": tensor '", source, "': expected shape ", tensor.sizes(), ", got ",
                          found->second.sizes()));
    }
    tensor.copy_(found->second);
    ++copied;
  }
  return copied;
}

std::map<std::string, torch::Tensor> tensors_with_prefix(const Checkpoint& checkpoint, const std::string& prefix) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, tensor] : checkpoint.tensors) {
    if (name.compare(0, prefix.size(), prefix) == 0) out[name.substr(prefix.size())] = tensor;
  }
  return out;
}

}  // namespace cabert::io
