#include "lib/train/checkpoint.h"

#include <ATen/core/Generator.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cstring>
#include <filesystem>
#include <mutex>

#include "lib/text/tokenizer.h"

namespace cabert::train {

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

pb::CheckpointInfo fine_tuned_info(const pb::ModelConfig& config, const text::Tokenizer& tokenizer, int64_t update) {
  pb::CheckpointInfo info;
  info.set_kind("finetune");
  *info.mutable_model() = config;
  info.set_tokenizer(std::filesystem::absolute(tokenizer.path()).string());
  info.set_tokenizer_checksum(tokenizer.checksum());
  info.set_step(static_cast<uint64_t>(update));
  return info;
}

}  // namespace cabert::train
