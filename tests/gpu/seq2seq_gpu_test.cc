// The encoder-decoder paths on CUDA (label gpu), end to end through the binary: translation fine-tuning and
// beam search (Wu et al.), span-corruption pre-training and text-to-text fine-tuning (Tay et al.). The kernel
// tests cover the ops; these cover what the ops are wrapped in (batching, decoding state, search, predictions),
// where a tensor left on the CPU or a device compared by its index only shows up on a GPU: the second GPU run
// found beam search refusing its own model's answers ("expected a tensor on cuda, got cuda:0"). Every test skips
// where the build has no CUDA kernels or the machine no CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/gpu/gpu_test_util.h"

namespace cabert {
namespace {

using testing::lines_of;
using testing::runs;
using testing::train_losses;

// A translation model trained on cuda translates the test sentences with beam search on cuda as the same
// checkpoint does on the CPU: the same hypotheses, but for the few a near tie in float may turn.
TEST(CudaSeq2Seq, TranslationTrainsOnCudaAndTranslatesAsOnTheCpu) {
  CABERT_REQUIRE_CUDA();
  const std::string dir = testing::temp_dir(), binary = CABERT_BINARY;
  const std::string slice = std::string(CABERT_SOURCE_DIR) + "/tests/data/mt/multi30k-slice";
  ASSERT_TRUE(runs(str("cat ", slice, "/train.de ", slice, "/train.en | ", binary,
                       " -q tokenize train -i - --vocab-size 300 --sentinels 4 --model-prefix ", dir, "/joint")));
  ASSERT_TRUE(runs(str("paste ", slice, "/test.de ", slice, "/test.en | head -n 20 > ", dir, "/dev.tsv")));
  ASSERT_TRUE(runs(str(binary, " -q finetune --task translation --preset wu-lightconv-tiny --tokenizer ", dir,
                       "/joint.model --data ", slice, " --dev ", dir, "/dev.tsv --epochs 1 --lr 3e-3 ",
                       "--max-tokens 1500 --device cuda --model-dir ", dir, "/model")));
  const auto losses = train_losses(dir + "/model/metrics.cabert");
  ASSERT_FALSE(losses.empty());
  for (const auto& [step, loss] : losses)
    EXPECT_TRUE(std::isfinite(loss) && loss > 0) << "step " << step << ": " << loss;
  std::vector<std::string> hypotheses[2];
  int index = 0;
  for (const char* device : {"cuda", "cpu"}) {
    const std::string path = str(dir, "/hyp-", device, ".en");
    ASSERT_TRUE(runs(str(binary, " -q evaluate --model ", dir, "/model/best.cabert --data ", slice,
                         " --split test --beam 3 --max-examples 30 --device ", device, " --predictions ", path)));
    hypotheses[index++] = lines_of(path);
  }
  ASSERT_EQ(hypotheses[0].size(), 30u);
  ASSERT_EQ(hypotheses[1].size(), 30u);
  int same = 0;
  for (size_t i = 0; i < 30; ++i) same += hypotheses[0][i] == hypotheses[1][i];
  EXPECT_GE(same, 27) << "of 30 hypotheses the same on cuda and on the CPU";
}

// Span corruption pre-trains on cuda with both kernel paths alike (the dilated convolutions' and the dropouts'
// Philox masks are the same on both), and its checkpoint fine-tunes SST-2 as text to text and evaluates there.
TEST(CudaSeq2Seq, SpanCorruptionAndTextToTextRunOnCuda) {
  CABERT_REQUIRE_CUDA();
  const std::string dir = testing::temp_dir(), binary = CABERT_BINARY;
  const std::string sample = std::string(CABERT_SOURCE_DIR) + "/recipes/quickstart/data";
  ASSERT_TRUE(runs(str(binary, " -q tokenize train -i ", sample, "/gutenberg/11-0.txt --input-format gutenberg ",
                       "--vocab-size 500 --sentinels 4 --lowercase --byte-fallback --model-prefix ", dir, "/tok")));
  ASSERT_TRUE(runs(str(binary, " -q build-corpus -m ", dir, "/tok.model -i ", sample, "/gutenberg/11-0.txt ",
                       "--input-format gutenberg --max-length 48 -o ", dir, "/corpus")));
  std::vector<std::pair<int64_t, double>> losses[2];
  int index = 0;
  for (const char* kernels : {"fused", "reference"}) {
    const std::string model_dir = str(dir, "/pt-", kernels);
    ASSERT_TRUE(runs(str(binary, " -q pretrain --preset tay-dilatedconv-tiny --objective span-corruption ", "--corpus ",
                         dir, "/corpus --model-dir ", model_dir, " --steps 4 --batch-size 8 ",
                         "--save-every 4 --device cuda --kernels ", kernels)));
    losses[index++] = train_losses(model_dir + "/metrics.cabert");
  }
  ASSERT_FALSE(losses[0].empty());
  ASSERT_EQ(losses[0].size(), losses[1].size());
  for (size_t i = 0; i < losses[0].size(); ++i) {
    EXPECT_EQ(losses[0][i].first, losses[1][i].first);
    EXPECT_NEAR(losses[0][i].second, losses[1][i].second, 1e-4) << "step " << losses[0][i].first;
  }
  ASSERT_TRUE(runs(str("head -n 101 ", sample, "/SST-2/train.tsv > ", dir, "/train.tsv && head -n 41 ", sample,
                       "/SST-2/dev.tsv > ", dir, "/dev.tsv")));
  ASSERT_TRUE(runs(str(binary, " -q finetune --init ", dir, "/pt-fused/checkpoint-00000004.cabert --task SST-2 ",
                       "--train ", dir, "/train.tsv --dev ", dir, "/dev.tsv --epochs 1 --lr 1e-3 --device cuda ",
                       "--model-dir ", dir, "/ft")));
  ASSERT_TRUE(runs(str(binary, " -q evaluate --model ", dir, "/ft/best.cabert --data ", dir, "/dev.tsv ",
                       "--device cuda --predictions ", dir, "/pred.tsv")));
  EXPECT_EQ(lines_of(dir + "/pred.tsv").size(), 41u) << "40 predictions and the header";
}

}  // namespace
}  // namespace cabert
