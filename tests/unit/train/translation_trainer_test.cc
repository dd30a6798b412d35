// Training an encoder-decoder on the shipped Multi30k slice: a run stopped by SIGTERM in the middle of an
// epoch and resumed ends with exactly the weights of an uninterrupted run; the metrics keep one record per
// epoch; averaging epochs gives the parameter mean.
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <string>

#include "formats/task.pb.h"
#include "lib/core/errors.h"
#include "lib/core/interrupt.h"
#include "lib/io/checkpoint_file.h"
#include "lib/io/record_file.h"
#include "lib/text/tokenizer.h"
#include "lib/train/translation_trainer.h"
#include "tests/test_paths.h"

namespace cabert::train {
namespace {

namespace fs = std::filesystem;

class TranslationTrainerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string slice = testing::source_dir() + "/tests/data/mt/multi30k-slice";
    dir_ = new std::string(testing::temp_dir());
    const std::string joint = *dir_ + "/joint.txt";
    testing::write_text(joint, testing::read_text(slice + "/train.de") + testing::read_text(slice + "/train.en"));
    text::TokenizerTrainOptions t;
    t.inputs = {joint};
    t.vocab_size = 300;
    t.num_sentinels = 4;
    t.model_prefix = *dir_ + "/joint";
    text::train_tokenizer(t);
  }
  static void TearDownTestSuite() { delete dir_; }

  TranslationTrainOptions options(const std::string& name) {
    TranslationTrainOptions o;
    o.preset = "wu-dynamicconv-tiny";
    o.tokenizer = *dir_ + "/joint.model";
    o.data = testing::source_dir() + "/tests/data/mt/multi30k-slice";
    o.dev_split = "test";
    o.max_dev_examples = 10;
    o.epochs = 2;
    o.lr = 3e-3;
    o.max_tokens = 1200;
    o.model_dir = *dir_ + "/" + name;
    return o;
  }
  static std::string* dir_;
};
std::string* TranslationTrainerTest::dir_ = nullptr;

void expect_same_model_weights(const std::string& a, const std::string& b) {
  io::Checkpoint x = io::load_checkpoint(a), y = io::load_checkpoint(b);
  ASSERT_EQ(x.tensors.size(), y.tensors.size());
  for (const auto& [name, tensor] : x.tensors) {
    if (name.rfind("model/", 0) != 0) continue;
    ASSERT_TRUE(y.tensors.count(name)) << name;
    EXPECT_TRUE(torch::equal(tensor, y.tensors.at(name))) << name;
  }
}

// Runs `o` until a SIGTERM right after update `update` (the run ends with Interrupted, having saved last.cabert)
// and leaves `o` set to resume it.
void stop_after_update(TranslationTrainOptions& o, int64_t update) {
  o.after_step = [update](int64_t done) {
    if (done == update) set_interrupt_for_testing(SIGTERM);
  };
  EXPECT_THROW(run_translation_training(o), Interrupted);
  set_interrupt_for_testing(0);
  o.after_step = nullptr;
  o.resume = true;
}

// Every floating-point tensor of the averaged checkpoint is the mean of the two epoch checkpoints' (in double).
void expect_mean_of(const std::string& averaged, const std::string& first, const std::string& second) {
  io::Checkpoint a = io::load_checkpoint(first), b = io::load_checkpoint(second), mean = io::load_checkpoint(averaged);
  for (const auto& [name, tensor] : mean.tensors) {
    if (!tensor.is_floating_point()) continue;
    torch::Tensor expected = (a.tensors.at(name).to(torch::kDouble) + b.tensors.at(name).to(torch::kDouble)) / 2;
    EXPECT_TRUE(torch::allclose(tensor.to(torch::kDouble), expected, 1e-6, 1e-7)) << name;
  }
}

TEST_F(TranslationTrainerTest, InterruptedMidEpochAndResumedEqualsAnUninterruptedRun) {
  TranslationTrainOptions full = options("full");
  full.average_last = 2;
  full.log_every = 2;  // the window of updates 3 and 4 spans the interruption
  TranslationTrainSummary reference = run_translation_training(full);
  ASSERT_EQ(reference.epochs.size(), 2u);

  TranslationTrainOptions stopped = options("stopped");
  stopped.average_last = 2;
  stopped.log_every = 2;
  stop_after_update(stopped, 3);
  ASSERT_TRUE(fs::exists(stopped.model_dir + "/last.cabert"));
  EXPECT_EQ(io::read_checkpoint_info(stopped.model_dir + "/last.cabert").position().batch(), 3u);
  run_translation_training(stopped);
  expect_same_model_weights(full.model_dir + "/last.cabert", stopped.model_dir + "/last.cabert");
  expect_same_model_weights(full.model_dir + "/averaged.cabert", stopped.model_dir + "/averaged.cabert");
  // One EPOCH record per epoch, as in the uninterrupted run.
  auto records = testing::read_records<pb::TaskMetrics>(stopped.model_dir + "/metrics.cabert", "cabert.pb.TaskMetrics");
  int epochs = 0;
  for (const auto& record : records) epochs += record.kind() == pb::TaskMetrics::EPOCH;
  EXPECT_EQ(epochs, 2);
  // The records are the uninterrupted run's too: the TRAIN window spanning the stop and each epoch's mean loss
  // (their sums are in last.cabert to the last bit).
  auto expected = testing::read_records<pb::TaskMetrics>(full.model_dir + "/metrics.cabert", "cabert.pb.TaskMetrics");
  ASSERT_EQ(records.size(), expected.size());
  int trains = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i].kind(), expected[i].kind()) << i;
    EXPECT_EQ(records[i].step(), expected[i].step()) << i;
    EXPECT_EQ(records[i].train_loss(), expected[i].train_loss()) << "record " << i << ", step " << records[i].step();
    trains += records[i].kind() == pb::TaskMetrics::TRAIN;
  }
  EXPECT_GE(trains, 2);

  // Stopped in the last epoch: the average still takes the epoch before the stop, whose checkpoint is on disk
  // (a resumed run used to average only the epochs after it, and wrote no average when one was left).
  TranslationTrainOptions late = options("stopped-late");
  late.average_last = 2;
  late.log_every = 2;
  stop_after_update(late, static_cast<int64_t>(reference.epochs[0].step()) + 1);
  EXPECT_EQ(io::read_checkpoint_info(late.model_dir + "/last.cabert").position().epoch(), 2u);
  TranslationTrainSummary resumed = run_translation_training(late);
  EXPECT_EQ(resumed.averaged_checkpoint, late.model_dir + "/averaged.cabert");
  expect_same_model_weights(full.model_dir + "/averaged.cabert", late.model_dir + "/averaged.cabert");
}

// The default warm-up is half of a short run; the metrics header and every checkpoint record it, and a run
// resumed with more epochs keeps it (the length changes, the warm-up does not).
TEST_F(TranslationTrainerTest, AResumedRunKeepsTheWarmupItStartedWith) {
  TranslationTrainOptions o = options("warmup");
  o.epochs = 1;
  TranslationTrainSummary first = run_translation_training(o);
  const int64_t updates = static_cast<int64_t>(first.epochs.at(0).step());
  ASSERT_GE(updates, 2);
  const std::string warmup = std::to_string(updates / 2);
  EXPECT_EQ(io::read_checkpoint_info(o.model_dir + "/last.cabert").metadata().at("warmup_updates"), warmup);
  {
    io::RecordReader reader(o.model_dir + "/metrics.cabert");
    EXPECT_EQ(reader.header().metadata().at("warmup_updates"), warmup);
    EXPECT_EQ(reader.header().metadata().at("warmup_rule"), "min(4000, half the updates)");
    EXPECT_EQ(reader.header().metadata().at("total_updates"), std::to_string(updates));
  }
  o.epochs = 3;
  o.resume = true;
  run_translation_training(o);
  EXPECT_EQ(io::read_checkpoint_info(o.model_dir + "/last.cabert").metadata().at("warmup_updates"), warmup);
  io::RecordReader reader(o.model_dir + "/metrics.cabert");
  EXPECT_EQ(reader.header().metadata().at("warmup_updates"), warmup);
  EXPECT_EQ(reader.header().metadata().at("warmup_rule"), "the resumed run's");
  EXPECT_EQ(reader.header().metadata().at("total_updates"), std::to_string(3 * updates));
}

// The model directory: a fresh run over an earlier one is refused (only --resume continues it), and so is a
// directory with another kind of run in it; --resume with no last.cabert starts from scratch and removes what an
// earlier start left, so that no checkpoint of it is taken for this run's.
TEST_F(TranslationTrainerTest, AFreshRunOverAnEarlierOneOrAnotherKindOfRunIsRefused) {
  TranslationTrainOptions o = options("directory");
  o.epochs = 1;
  o.max_train_examples = 40;
  run_translation_training(o);
  const std::string best_before = testing::read_text(o.model_dir + "/best.cabert");
  EXPECT_EQ(testing::usage_error_message([&] { run_translation_training(o); }),
            "--model-dir " + o.model_dir +
                ": holds an earlier run (best.cabert, ..., metrics.cabert); continue it with --resume, or give a new "
                "or empty directory");
  EXPECT_EQ(testing::read_text(o.model_dir + "/best.cabert"), best_before);

  // Without last.cabert (it stopped between its best and last checkpoints), best.cabert still says translation.
  fs::remove(o.model_dir + "/last.cabert");
  EXPECT_THROW(run_translation_training(o), UsageError);  // still an earlier run: only --resume goes on
  o.resume = true;
  fs::copy_file(o.model_dir + "/best.cabert", o.model_dir + "/epoch-7.cabert");
  run_translation_training(o);
  EXPECT_FALSE(fs::exists(o.model_dir + "/epoch-7.cabert"));  // an earlier start's, removed
  EXPECT_TRUE(fs::exists(o.model_dir + "/last.cabert") && fs::exists(o.model_dir + "/best.cabert"));

  // A fine-tuning's directory (best.cabert of a classification task) is not a translation's.
  const std::string glue = *dir_ + "/glue";
  fs::create_directories(glue + "/run-1");
  testing::write_text(glue + "/run-1/best.cabert", "a fine-tuning's checkpoint");
  o = options("unused");
  o.model_dir = glue;
  EXPECT_EQ(testing::usage_error_message([&] { run_translation_training(o); }),
            "--model-dir " + glue +
                ": holds a fine-tuning (run-1/best.cabert) whose metrics.cabert this translation fine-tuning would "
                "replace; give it its own directory");
}

TEST_F(TranslationTrainerTest, AveragedCheckpointIsTheMeanOfTheLastEpochs) {
  TranslationTrainOptions o = options("average");
  o.epochs = 3;
  o.average_last = 2;
  run_translation_training(o);
  EXPECT_FALSE(fs::exists(o.model_dir + "/epoch-1.cabert"));  // only the last 2 are kept
  expect_mean_of(o.model_dir + "/averaged.cabert", o.model_dir + "/epoch-2.cabert", o.model_dir + "/epoch-3.cabert");
}

int count_records(const std::string& metrics_path, pb::TaskMetrics::Kind kind) {
  int count = 0;
  for (const auto& record : testing::read_records<pb::TaskMetrics>(metrics_path, "cabert.pb.TaskMetrics")) {
    count += record.kind() == kind;
  }
  return count;
}

// A resume with nothing left to train still ends with the average of the last epochs and its one dev record: of
// a run that had ended, the same average; of a run stopped in epoch 3 and resumed with --epochs 1, the average of
// the last epochs before the stop (1 and 2), which says epoch 2.
TEST_F(TranslationTrainerTest, AResumeWithNothingLeftToTrainAveragesTheLastEpochsBeforeTheStop) {
  TranslationTrainOptions o = options("ended");
  o.epochs = 2;
  o.average_last = 2;
  o.max_train_examples = 40;
  TranslationTrainSummary ended = run_translation_training(o);
  ASSERT_EQ(ended.epochs.size(), 2u);
  fs::copy_file(o.model_dir + "/averaged.cabert", o.model_dir + "/averaged-before.cabert");
  o.resume = true;
  TranslationTrainSummary again = run_translation_training(o);
  EXPECT_TRUE(again.epochs.empty());
  ASSERT_EQ(again.averaged_checkpoint, o.model_dir + "/averaged.cabert");
  expect_same_model_weights(o.model_dir + "/averaged-before.cabert", again.averaged_checkpoint);
  EXPECT_EQ(again.averaged.score(), ended.averaged.score());
  EXPECT_EQ(count_records(o.model_dir + "/metrics.cabert", pb::TaskMetrics::EVALUATION), 1);
  EXPECT_EQ(count_records(o.model_dir + "/metrics.cabert", pb::TaskMetrics::EPOCH), 2);

  TranslationTrainOptions lowered = options("lowered");
  lowered.epochs = 3;
  lowered.average_last = 2;
  lowered.max_train_examples = 40;
  stop_after_update(lowered, static_cast<int64_t>(ended.epochs[1].step()) + 1);
  ASSERT_EQ(io::read_checkpoint_info(lowered.model_dir + "/last.cabert").position().epoch(), 3u);
  EXPECT_FALSE(fs::exists(lowered.model_dir + "/averaged.cabert"));
  lowered.epochs = 1;
  TranslationTrainSummary resumed = run_translation_training(lowered);
  EXPECT_TRUE(resumed.epochs.empty());
  ASSERT_EQ(resumed.averaged_checkpoint, lowered.model_dir + "/averaged.cabert");
  EXPECT_EQ(resumed.averaged.epoch(), 2u);
  EXPECT_EQ(io::read_checkpoint_info(resumed.averaged_checkpoint).metadata().at("epoch"), "2");
  expect_mean_of(resumed.averaged_checkpoint, lowered.model_dir + "/epoch-1.cabert",
                 lowered.model_dir + "/epoch-2.cabert");
}

// fairseq's token count (the longer side) fits about twice the sentences in the same budget, so an epoch has
// fewer updates; the cosine schedule trains.
TEST_F(TranslationTrainerTest, CountingTheLongerSideMakesFewerBatchesAndTheCosineScheduleTrains) {
  TranslationTrainOptions sum = options("sum");
  sum.epochs = 1;
  TranslationTrainOptions longer = options("longer");
  longer.epochs = 1;
  longer.count_tokens = "longer-side";
  longer.schedule = "cosine";
  longer.min_lr = 1e-5;
  const uint64_t sum_updates = run_translation_training(sum).epochs.at(0).step();
  TranslationTrainSummary summary = run_translation_training(longer);
  const uint64_t longer_updates = summary.epochs.at(0).step();
  EXPECT_LT(longer_updates, sum_updates);
  EXPECT_GE(2 * longer_updates, sum_updates - 1);
  EXPECT_TRUE(std::isfinite(summary.epochs.at(0).train_loss()));
}

TEST_F(TranslationTrainerTest, RefusesAnEncoderPresetAndABadSchedule) {
  TranslationTrainOptions o = options("refused");
  o.preset = "bert-tiny-none";
  EXPECT_THROW(run_translation_training(o), UsageError);
  o = options("refused");
  o.schedule = "polynomial_decay";
  EXPECT_THROW(run_translation_training(o), UsageError);
  o = options("refused");
  o.count_tokens = "source";
  EXPECT_THROW(run_translation_training(o), UsageError);
  o = options("refused");
  o.min_lr = 2 * o.lr;
  EXPECT_THROW(run_translation_training(o), UsageError);
}

}  // namespace
}  // namespace cabert::train
