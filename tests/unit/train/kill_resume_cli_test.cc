// kill -9 at arbitrary moments of a pre-training that saves every step, then --resume: every time, the run
// continues from a complete checkpoint (checkpoints are synced before they are renamed into place), and the
// temporary file the killed writer may have left is cleaned up. Bounded: 12 kills, about 20 s.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "lib/io/checkpoint_lookup.h"
#include "tests/test_paths.h"

namespace cabert {
namespace {

namespace fs = std::filesystem;
using testing::cabert_binary;
using testing::run_command;

TEST(KillAndResume, EveryKillLeavesACompleteCheckpointToResumeFrom) {
  const std::string root = (fs::temp_directory_path() / ("cabert_kill_" + std::to_string(getpid()))).string();
  fs::remove_all(root);
  fs::create_directories(root);
  auto built = run_command(cabert_binary() + " -q build-corpus -m " + testing::alice_tokenizer() + " -i " +
                           testing::source_dir() +
                           "/recipes/quickstart/data/gutenberg/11-0.txt --input-format "
                           "gutenberg --max-length 32 -o " +
                           root + "/corpus");
  ASSERT_EQ(built.exit_code, 0) << built.err;
  const std::string model = root + "/model";
  const std::string pretrain =
      cabert_binary() +
      " --threads 1 pretrain --preset bert-tiny-composite --set hidden_size=32"
      " --set embedding_size=32 --set num_layers=1 --set num_heads=2 --set intermediate_size=64"
      " --corpus " +
      root + "/corpus --model-dir " + model + " --batch-size 4 --eval-examples 0 --save-every 1 --keep-checkpoints 2 ";
  int64_t last = 0;
  for (int kill = 0; kill < 12; ++kill) {
    // Kill after 0.3 .. 1.4 s: at start-up, mid-step, or while a checkpoint is being written.
    const std::string delay = std::to_string(0.3 + 0.1 * ((kill * 7) % 12));
    auto killed = run_command(pretrain + "--steps 100000 --resume 2> " + root + "/run.err & pid=$!; sleep " + delay +
                              "; kill -9 $pid; wait $pid; echo rc=$?");
    EXPECT_NE(killed.out.find("rc=137"), std::string::npos) << killed.out << testing::read_text(root + "/run.err");
    auto saved = io::list_checkpoints(model);
    const int64_t newest = saved.empty() ? 0 : saved.back().first;
    EXPECT_GE(newest, last) << "kill " << kill << " lost a checkpoint";
    // One more step from the newest checkpoint: it must read back whole.
    auto resumed = run_command(pretrain + "--steps " + std::to_string(newest + 1) + " --resume");
    ASSERT_EQ(resumed.exit_code, 0) << "kill " << kill << " after " << delay << " s: " << resumed.err;
    EXPECT_EQ(resumed.err.find("skipping"), std::string::npos) << resumed.err;
    if (newest > 0) {
      EXPECT_NE(resumed.err.find("resuming from " + io::checkpoint_path(model, newest)), std::string::npos)
          << resumed.err;
    }
    ASSERT_TRUE(fs::exists(io::checkpoint_path(model, newest + 1))) << resumed.err;
    last = newest + 1;
    for (const auto& entry : fs::directory_iterator(model)) {
      EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos)
          << entry.path() << " left behind after kill " << kill;
    }
  }
  EXPECT_GT(last, 12) << "the runs made progress between kills";
  fs::remove_all(root);
}

}  // namespace
}  // namespace cabert
