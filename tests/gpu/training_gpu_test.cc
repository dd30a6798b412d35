// Reproducibility on CUDA (label gpu): what draws from PyTorch's CUDA generator (SDPA's attention dropout,
// ELECTRA's sampling) is seeded per call from the checkpointed CPU generator, so a resumed run on cuda continues
// as the uninterrupted one did; and a scope that seeds the generators puts every CUDA one back (the held-out
// evaluation used to restore the CPU's alone, leaving CUDA's restarting from its seed after each evaluation).
// Every test skips where the build has no CUDA kernels or the machine no CUDA device.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "kernels/seeded_generator.h"
#include "tests/gpu/gpu_test_util.h"

namespace cabert {
namespace {

TEST(CudaGenerators, ASeededScopePutsTheCudaStreamBack) {
  CABERT_REQUIRE_CUDA();
  const torch::TensorOptions cuda = torch::TensorOptions().device(torch::Device(torch::kCUDA, 0));
  torch::manual_seed(3);
  const torch::Tensor first = torch::rand({8}, cuda), second = torch::rand({8}, cuda);
  torch::manual_seed(3);
  torch::Tensor inside;
  EXPECT_TRUE(torch::equal(torch::rand({8}, cuda), first));
  {
    const kernels::SeededGenerators all(77);
    inside = torch::rand({8}, cuda);
  }
  EXPECT_TRUE(torch::equal(torch::rand({8}, cuda), second)) << "the stream goes on as without the scope";
  torch::manual_seed(77);
  EXPECT_TRUE(torch::equal(torch::rand({8}, cuda), inside)) << "the scope drew manual_seed(77)'s stream";
}

// ELECTRA with ConvBERT (SDPA attention with dropout, sampling on cuda), evaluated every step: 4 steps straight,
// and the same run resumed from its step-2 checkpoint, give the same losses at steps 3 and 4 (to 1e-4: cuBLAS and
// atomics may sum in another order; another dropout mask or sample moves them by 1e-2 and more).
TEST(CudaGenerators, ElectraResumedOnCudaContinuesAsTheUninterruptedRun) {
  CABERT_REQUIRE_CUDA();
  const std::string dir = testing::temp_dir(), binary = CABERT_BINARY;
  const std::string sample = std::string(CABERT_SOURCE_DIR) + "/recipes/quickstart/data";
  auto run = [&](const std::string& command) { ASSERT_TRUE(testing::runs(command)); };
  run(str(binary, " -q tokenize train -i ", sample, "/gutenberg/11-0.txt --input-format gutenberg --vocab-size 300 ",
          "--model-prefix ", dir, "/tok"));
  run(str(binary, " -q build-corpus -m ", dir, "/tok.model -i ", sample, "/gutenberg/11-0.txt --input-format ",
          "gutenberg --max-length 32 -o ", dir, "/corpus"));
  const std::string common =
      str(" pretrain --preset convbert-tiny --objective electra --corpus ", dir, "/corpus ",
          "--steps 4 --batch-size 8 --save-every 2 --eval-every 1 --eval-examples 16 ", "--device cuda");
  run(str(binary, " -q", common, " --model-dir ", dir, "/full"));
  run(str("mkdir -p ", dir, "/resumed && cp ", dir, "/full/checkpoint-00000002.cabert ", dir, "/resumed/"));
  run(str(binary, " -q", common, " --model-dir ", dir, "/resumed --resume"));
  const auto full = testing::train_losses(dir + "/full/metrics.cabert");
  const auto resumed = testing::train_losses(dir + "/resumed/metrics.cabert");
  ASSERT_EQ(full.size(), 4u);
  ASSERT_EQ(resumed.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(full[i + 2].first, resumed[i].first);
    EXPECT_NEAR(full[i + 2].second, resumed[i].second, 1e-4) << "step " << full[i + 2].first;
  }
}

}  // namespace
}  // namespace cabert
