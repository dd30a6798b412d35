// PyTorch's default generators seeded for a scope and put back after it. cabert's own dropout draws its masks
// from Philox seeds taken from the CPU generator, whose state the checkpoints keep; what draws from PyTorch's
// generators instead (its fused attention kernels' dropout on CUDA, sampling on CUDA) is seeded from such a seed
// for the call, so that a run repeats and resumes exactly there too, and PyTorch's own streams are left as they
// were.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace cabert::kernels {

// `device`'s default generator (the CPU's, or a CUDA device's) seeded with `seed` while the object lives; its
// state before is restored by the destructor.
class SeededGenerator {
 public:
  SeededGenerator(const c10::Device& device, uint64_t seed);
  ~SeededGenerator();
  SeededGenerator(const SeededGenerator&) = delete;
  SeededGenerator& operator=(const SeededGenerator&) = delete;

 private:
  at::Generator generator_;
  at::Tensor saved_;
};

// Every default generator of the process, the CPU's and each CUDA device's (those torch::manual_seed seeds), seeded
// with `seed` while the object lives and restored after.
class SeededGenerators {
 public:
  explicit SeededGenerators(uint64_t seed);

 private:
  std::vector<std::unique_ptr<SeededGenerator>> seeded_;
};

}  // namespace cabert::kernels
