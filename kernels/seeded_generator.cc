#include "kernels/seeded_generator.h"

#include <ATen/Context.h>

#include <mutex>

namespace cabert::kernels {

SeededGenerator::SeededGenerator(const c10::Device& device, uint64_t seed)
    : generator_(at::globalContext().defaultGenerator(device)) {
  std::lock_guard<std::mutex> lock(generator_.mutex());
  saved_ = generator_.get_state();
  generator_.set_current_seed(seed);
}

SeededGenerator::~SeededGenerator() {
  std::lock_guard<std::mutex> lock(generator_.mutex());
  generator_.set_state(saved_);
}

SeededGenerators::SeededGenerators(uint64_t seed) {
  seeded_.push_back(std::make_unique<SeededGenerator>(c10::Device(c10::kCPU), seed));
  const int64_t gpus = at::hasCUDA() ? static_cast<int64_t>(at::getNumGPUs()) : 0;
  for (int64_t index = 0; index < gpus; ++index) {
    seeded_.push_back(
        std::make_unique<SeededGenerator>(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index)), seed));
  }
}

}  // namespace cabert::kernels
