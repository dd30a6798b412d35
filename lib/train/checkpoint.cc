#include "lib/train/checkpoint.h"

#include <ATen/core/Generator.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cstring>
#include <filesystem>
#include <iomanip>
#include <mutex>
#include <regex>
#include <sstream>

#include "lib/core/errors.h"
#include "lib/io/record_file.h"

namespace cabert::train {
namespace {

constexpr const char* kType = "cabert.pb.CheckpointEntry";

const std::vector<std::pair<std::string, torch::ScalarType>>& dtype_names() {
  static const std::vector<std::pair<std::string, torch::ScalarType>> names = {
      {"float32", torch::kFloat32}, {"float64", torch::kFloat64}, {"float16", torch::kFloat16},
      {"bfloat16", torch::kBFloat16}, {"int64", torch::kInt64}, {"int32", torch::kInt32},
      {"uint8", torch::kUInt8}, {"bool", torch::kBool}};
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

torch::Tensor from_proto(const pb::TensorData& data, const std::string& path) {
  torch::ScalarType type = torch::kFloat32;
  bool known = false;
  for (const auto& [name, t] : dtype_names()) {
    if (name == data.dtype()) type = t, known = true;
  }
  if (!known) throw DataError(str(path, ": tensor '", data.name(), "': unknown dtype '", data.dtype(), "'"));
  std::vector<int64_t> shape(data.shape().begin(), data.shape().end());
  torch::Tensor t = torch::empty(shape, torch::TensorOptions().dtype(type));
  const size_t expected = static_cast<size_t>(t.numel()) * t.element_size();
  if (data.data().size() != expected) {
    throw DataError(str(path, ": tensor '", data.name(), "': expected ", expected, " bytes for shape ", t.sizes(),
                        ", got ", data.data().size()));
  }
  if (expected > 0) std::memcpy(t.data_ptr(), data.data().data(), expected);
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

Checkpoint load_checkpoint(const std::string& path) {
  Checkpoint checkpoint;
  checkpoint.path = path;
  io::RecordReader reader(path);
  reader.expect(kType);
  pb::CheckpointEntry entry;
  if (!reader.next(&entry) || !entry.has_info()) {
    throw DataError(str(path, ": expected the checkpoint info as the first record"));
  }
  checkpoint.info = entry.info();
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

std::string torch_cpu_rng_state() {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  torch::Tensor state = generator.get_state();
  return std::string(static_cast<const char*>(state.data_ptr()), state.numel());
}

void set_torch_cpu_rng_state(const std::string& bytes) {
  torch::Tensor state = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  std::memcpy(state.data_ptr(), bytes.data(), bytes.size());
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

std::string checkpoint_path(const std::string& dir, int64_t step) {
  std::ostringstream name;
  name << "checkpoint-" << std::setw(8) << std::setfill('0') << step << ".cabert";
  return (std::filesystem::path(dir) / name.str()).string();
}

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  if (!std::filesystem::is_directory(dir)) return found;
  static const std::regex pattern("checkpoint-([0-9]+)\\.cabert");
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::smatch match;
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, match, pattern)) found.emplace_back(std::stoll(match[1]), entry.path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace cabert::train
