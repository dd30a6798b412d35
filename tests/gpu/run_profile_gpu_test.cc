// `bench --profile` on a CUDA device (label gpu): Kineto's device activity reaches the summary (kernels with
// their time, launches on the host, the busy time within the wall time), and cabert's fused op is a named host
// range there too. Skips without CUDA kernels in the build or a CUDA device.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "lib/bench/run_profile.h"
#include "lib/ops/conv_ops.h"
#include "tests/gpu/gpu_test_util.h"

namespace cabert {
namespace {

TEST(CudaProfile, DeviceKernelsAndLaunchesReachTheSummary) {
  CABERT_REQUIRE_CUDA();
  const torch::Device cuda(torch::kCUDA, 0);
  torch::manual_seed(5);
  const torch::Tensor x = torch::randn({4, 256, 64}).to(cuda).requires_grad_();
  const torch::Tensor kernels = torch::randn({4, 256, 4, 7}).to(cuda).requires_grad_();
  ops::ScopedKernelPath fused(ops::KernelPath::kFused);
  const auto run = [&] {
    const torch::Tensor out = ops::dynamic_conv(x, kernels, 3);
    torch::autograd::grad({out}, {x, kernels}, {torch::ones_like(out)});
  };
  run();  // CUDA's and the kernels' first-call work outside the profile
  torch::cuda::synchronize(0);
  const bench::RunProfile profile = bench::profile_runs(run, /*runs=*/2, cuda, /*trace_path=*/"");
  EXPECT_TRUE(profile.cuda);
  ASSERT_FALSE(profile.device_work.empty()) << bench::profile_markdown(profile, "dynamic_conv on cuda:0");
  // The forward and two backward kernels of cabert's own, at least, per run; each launched from the host.
  EXPECT_GE(profile.kernels, 3) << bench::profile_markdown(profile, "dynamic_conv on cuda:0");
  EXPECT_GE(profile.runtime_launches + profile.driver_launches, profile.kernels)
      << bench::profile_markdown(profile, "dynamic_conv on cuda:0");
  EXPECT_GT(profile.device_busy_us, 0);
  EXPECT_LT(profile.device_busy_us, profile.wall_us);
  bool named = false;
  for (const auto& op : profile.host_ops) named |= op.name == "cabert::dynamic_conv" && op.calls == 1;
  EXPECT_TRUE(named) << bench::profile_markdown(profile, "dynamic_conv on cuda:0");
  const std::string text = bench::profile_markdown(profile, "dynamic_conv on cuda:0");
  EXPECT_NE(text.find("## Device work, by time"), std::string::npos) << text;
  EXPECT_EQ(text.find("no device activity was recorded"), std::string::npos) << text;
}

}  // namespace
}  // namespace cabert
