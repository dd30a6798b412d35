// `cabert selftest`'s pieces that run anywhere: which compiled GPU code a device would run (CUDA's compatibility
// rules: SASS within a major version at an equal or higher minor, arch-specific "a" code on its own version
// only, family-specific "f" code within its major version, plain PTX on anything at least as new), the error
// measure, the device list, and a full run on the CPU.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/build_info.h"
#include "lib/bench/selftest.h"
#include "lib/core/errors.h"

namespace cabert {
namespace {

TEST(Selftest, CudaImageFollowsCudasCompatibilityRules) {
  const std::string built = "sm_80 sm_86 sm_89 sm_90 compute_90";
  EXPECT_EQ(kernels::cuda_image_for(built, 8, 6), "SASS sm_86");
  EXPECT_EQ(kernels::cuda_image_for(built, 8, 7), "SASS sm_86 (binary-compatible)");
  EXPECT_EQ(kernels::cuda_image_for(built, 9, 0), "SASS sm_90");
  EXPECT_EQ(kernels::cuda_image_for(built, 10, 0), "PTX compute_90 (JIT-compiled)");
  EXPECT_EQ(kernels::cuda_image_for(built, 12, 0), "PTX compute_90 (JIT-compiled)");
  EXPECT_EQ(kernels::cuda_image_for(built, 7, 5), "");          // older than everything built: no image
  EXPECT_EQ(kernels::cuda_image_for("sm_80 sm_86", 9, 0), "");  // newer, without PTX: the failure PTX prevents
  // Arch-specific code runs on its own version: an H200 (9.0) ran a build for "sm_90a compute_90a" (2026-11-26).
  EXPECT_EQ(kernels::cuda_image_for("sm_90a compute_90a", 9, 0), "SASS sm_90a");
  EXPECT_EQ(kernels::cuda_image_for("sm_90a compute_80", 9, 0), "SASS sm_90a");
  EXPECT_EQ(kernels::cuda_image_for("sm_90a compute_90a", 10, 0), "");  // on no other version, SASS nor PTX
  EXPECT_EQ(kernels::cuda_image_for("compute_90a", 9, 0), "PTX compute_90a (JIT-compiled)");
  EXPECT_EQ(kernels::cuda_image_for("sm_100a compute_80", 10, 3), "PTX compute_80 (JIT-compiled)");
  // Family-specific code runs within its major version, at an equal or higher minor.
  EXPECT_EQ(kernels::cuda_image_for("sm_100f", 10, 3), "SASS sm_100f (binary-compatible)");
  EXPECT_EQ(kernels::cuda_image_for("sm_103f compute_100f", 10, 0), "PTX compute_100f (JIT-compiled)");
  EXPECT_EQ(kernels::cuda_image_for("compute_100f", 12, 0), "");
}

TEST(Selftest, RelativeMaxErrorScalesByTheReferenceAndCatchesBadValues) {
  const auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  const torch::Tensor reference = torch::tensor({100.0, -50.0}, f64), off = torch::tensor({100.5, -50.0}, f64);
  EXPECT_DOUBLE_EQ(bench::relative_max_error({off}, {reference}), 0.5 / 100.0);
  const torch::Tensor small = torch::tensor({0.25}, f64), small_off = torch::tensor({0.5}, f64);
  EXPECT_DOUBLE_EQ(bench::relative_max_error({small_off}, {small}), 0.25);  // absolute below magnitude 1
  EXPECT_TRUE(std::isinf(bench::relative_max_error({torch::tensor({NAN})}, {torch::tensor({1.0})})));
  EXPECT_TRUE(std::isinf(bench::relative_max_error({torch::zeros({2})}, {torch::zeros({3})})));
  EXPECT_TRUE(std::isinf(bench::relative_max_error({reference}, {reference, reference})));
  EXPECT_EQ(bench::relative_max_error({reference}, {reference}), 0.0);
}

TEST(Selftest, DevicesAndTheirErrors) {
  const auto cpu = bench::selftest_devices("cpu");
  ASSERT_EQ(cpu.size(), 1u);
  EXPECT_TRUE(cpu.front().is_cpu());
  const auto all = bench::selftest_devices("all");
  EXPECT_EQ(all.size(), 1 + kernels::cuda_devices().size());
  if (kernels::cuda_devices().empty()) {
    try {
      bench::selftest_devices("cuda");
      ADD_FAILURE() << "--device cuda without a CUDA device was accepted";
    } catch (const UsageError& error) {
      EXPECT_EQ(std::string(error.what()), "--device cuda: this machine has no CUDA device");
    }
  }
  EXPECT_THROW(bench::selftest_devices("gpu"), UsageError);
}

// The composite attention's CUDA route in the listing is the one the checks take: --cuda-attention's, regions for
// auto (an H200 run under --cuda-attention tiles listed the regions, 2026-11-29).
TEST(Selftest, TheListingNamesTheCudaAttentionRouteTheChecksTake) {
  using kernels::CudaAttentionRoute;
  const torch::Device cuda(torch::kCUDA, 0);
  const struct {
    CudaAttentionRoute given, taken;
    const char* named;
  } cases[] = {{CudaAttentionRoute::kAuto, CudaAttentionRoute::kRegions, "kernels/regions/attention_regions"},
               {CudaAttentionRoute::kRegions, CudaAttentionRoute::kRegions, "kernels/regions/attention_regions"},
               {CudaAttentionRoute::kBlocks, CudaAttentionRoute::kBlocks, "in float and double blocks of query rows"},
               {CudaAttentionRoute::kTiles, CudaAttentionRoute::kTiles, "tiled online-softmax kernels (kernels/cuda/"}};
  for (const auto& c : cases) {
    const kernels::ScopedCudaAttentionRoute route(c.given);
    EXPECT_EQ(bench::selftest_attention_route(), c.taken);
    const std::string listed = bench::selftest_route("composite-attention", cuda);
    EXPECT_NE(listed.find(c.named), std::string::npos) << listed;
    EXPECT_EQ(listed.find("attention_regions") != std::string::npos, c.taken == CudaAttentionRoute::kRegions) << listed;
  }
  const kernels::ScopedCudaAttentionRoute tiles(CudaAttentionRoute::kTiles);  // the CPU's route whatever CUDA's is
  EXPECT_EQ(bench::selftest_route("composite-attention", torch::Device(torch::kCPU)),
            "the tiled online-softmax kernel (kernels/cpu/attention_cpu)");
}

TEST(Selftest, EveryFusedOpAgreesWithTheReferenceOnTheCpu) {
  std::vector<std::string> reported;
  const auto checks = bench::run_selftest({torch::Device(torch::kCPU)},
                                          [&](const bench::SelftestCheck& check) { reported.push_back(check.op); });
  ASSERT_EQ(checks.size(), 9u);  // the ops with a fused and a reference path
  EXPECT_EQ(reported.size(), checks.size());
  for (const auto& check : checks) {
    EXPECT_TRUE(check.ok) << check.op << ": " << check.max_error;
    EXPECT_EQ(check.device, "cpu");
    if (check.op == "dropout") {
      // One product per element on both paths, with the same mask and the same rounded factor: bitwise equal.
      EXPECT_EQ(check.max_error, 0.0) << "dropout: the paths disagree";
      continue;
    }
    EXPECT_GT(check.max_error, 0.0) << check.op
                                    << ": the fused and reference paths gave identical bits, so the "
                                       "check may compare a path with itself";
  }
}

}  // namespace
}  // namespace cabert
