// A generator seeded for a scope draws what torch::manual_seed(seed) would, and the stream outside the scope
// goes on as if the scope had not been there.
#include "kernels/seeded_generator.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace cabert {
namespace {

at::Tensor cpu_state() { return at::Generator(at::detail::getDefaultCPUGenerator()).get_state(); }
void set_cpu_state(const at::Tensor& state) { at::Generator(at::detail::getDefaultCPUGenerator()).set_state(state); }

// What the CPU generator gives after manual_seed(seed), without disturbing its stream.
at::Tensor draws_after_seed(uint64_t seed) {
  const at::Tensor saved = cpu_state();
  torch::manual_seed(seed);
  at::Tensor draws = torch::rand({6});
  set_cpu_state(saved);
  return draws;
}

TEST(SeededGenerator, DrawsTheSeedsStreamAndPutsTheOldOneBack) {
  torch::manual_seed(11);
  const at::Tensor saved = cpu_state();
  const at::Tensor expected_after = torch::rand({6});  // the stream without the scope
  set_cpu_state(saved);
  const at::Tensor expected_inside = draws_after_seed(1234);
  {
    const kernels::SeededGenerator seeded(c10::Device(c10::kCPU), 1234);
    EXPECT_TRUE(torch::equal(torch::rand({6}), expected_inside));
  }
  EXPECT_TRUE(torch::equal(torch::rand({6}), expected_after));
  {
    const kernels::SeededGenerators all(1234);  // the CPU's, and every CUDA device's where there are any
    EXPECT_TRUE(torch::equal(torch::rand({6}), expected_inside));
  }
  set_cpu_state(saved);
  torch::rand({6});
  const at::Tensor second = torch::rand({6});
  set_cpu_state(saved);
  torch::rand({6});
  { const kernels::SeededGenerators all(99); }
  EXPECT_TRUE(torch::equal(torch::rand({6}), second)) << "an empty scope leaves the stream where it was";
}

}  // namespace
}  // namespace cabert
