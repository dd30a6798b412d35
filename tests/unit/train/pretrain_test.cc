// Pre-training end to end on a tiny synthetic corpus: the loss falls for every preset family and both
// objectives, resume is exact (bitwise on CPU), an interrupted run resumes to the same weights, broken
// checkpoints are refused, a non-finite loss stops with the step named.
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "formats/corpus.pb.h"
#include "formats/metrics.pb.h"
#include "lib/config/model_config_text.h"
#include "lib/config/presets.h"
#include "lib/config/validation.h"
#include "lib/core/errors.h"
#include "lib/core/interrupt.h"
#include "lib/core/log.h"
#include "lib/io/checkpoint_lookup.h"
#include "lib/io/record_file.h"
#include "lib/models/encoder.h"
#include "lib/train/checkpoint.h"
#include "lib/train/pretrainer.h"
#include "lib/train/update_guard.h"
#include "tests/test_paths.h"

namespace cabert::train {
namespace {

namespace fs = std::filesystem;
using io::Checkpoint;
using io::checkpoint_path;
using io::list_checkpoints;
using io::load_checkpoint;
using io::restore_module;

// Examples [CLS] a [SEP] b [SEP] whose regular tokens are all one id drawn from 40: the unigram
// distribution gives log(40) = 3.69, copying a neighbour gives ~0, so a loss well below 3.69 shows that the
// model uses its context (attention, convolutions) and not only the output bias.
// first_id: the lowest regular id (span corruption needs sentinel ids below it).
std::string write_corpus(const std::string& dir, int examples = 120, int first_id = 5) {
  const std::string path = dir + "/corpus-" + std::to_string(first_id) + ".cabert";
  io::RecordWriter writer(path, "cabert.pb.PretrainingExample", {{"vocab_size", "1000"}});
  std::mt19937_64 rng(7);
  for (int e = 0; e < examples; ++e) {
    pb::PretrainingExample example;
    const int length_a = 4 + static_cast<int>(rng() % 6), length_b = 4 + static_cast<int>(rng() % 8);
    const int value = static_cast<int>(rng() % 40);
    example.add_token_ids(2);
    for (int i = 0; i < length_a; ++i) example.add_token_ids(first_id + value % 40);
    example.add_token_ids(3);
    example.set_segment_a_length(length_a + 2);
    for (int i = 0; i < length_b; ++i) example.add_token_ids(first_id + value % 40);
    example.add_token_ids(3);
    writer.write(example);
  }
  writer.close();
  return path;
}

PretrainOptions tiny_options(const std::string& preset, const std::string& dir, const std::string& corpus) {
  PretrainOptions o;
  o.model = config::preset_config(preset);
  o.corpus = {corpus};
  o.model_dir = dir;
  o.steps = 12;
  o.batch_size = 8;
  o.lr = 2e-3;
  o.warmup_steps = 2;
  o.eval_examples = 16;
  o.save_every = 0;
  o.quiet_progress = true;
  o.seed = 11;
  return o;
}

std::vector<pb::MetricsRecord> read_metrics(const std::string& dir) {
  return testing::read_records<pb::MetricsRecord>(dir + "/metrics.cabert", "cabert.pb.MetricsRecord");
}

class PretrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One intra-op thread: deterministic, and fast on a shared machine (idle OpenMP threads spin).
    threads_ = at::get_num_threads();
    at::set_num_threads(1);
    set_quiet(true);
    dir_ = testing::temp_dir();
    corpus_ = write_corpus(dir_);
  }
  void TearDown() override {
    at::set_num_threads(threads_);
    set_interrupt_for_testing(0);
    set_quiet(false);
  }
  std::string fresh(const std::string& name) {
    std::string d = dir_ + "/" + name;
    fs::create_directories(d);
    return d;
  }
  std::string dir_, corpus_;
  int threads_ = 1;
};

struct FamilyCase {
  std::string preset;
  Objective objective;
};

class PretrainFamily : public PretrainTest, public ::testing::WithParamInterface<FamilyCase> {};

TEST_P(PretrainFamily, LossFalls) {
  const std::string dir = fresh("run");
  PretrainOptions o = tiny_options(GetParam().preset, dir, corpus_);
  o.objective = GetParam().objective;
  o.steps = 150;
  o.lr = 3e-3;
  o.eval_examples = 32;
  o.eval_every = 150;
  PretrainResult result = run_pretraining(o);
  EXPECT_EQ(result.final_step, 150);
  auto metrics = read_metrics(dir);
  ASSERT_FALSE(metrics.empty());
  const double first_mlm = metrics.front().values().at("mlm_loss");
  // log(1000) = 6.9 at the start; the 40-token pattern is learnt quickly.
  EXPECT_GT(first_mlm, 5.5);
  ASSERT_TRUE(result.last_eval.count("mlm_loss"));
  EXPECT_LT(result.last_eval.at("mlm_loss"), first_mlm - 2.0) << GetParam().preset;
  EXPECT_GE(result.last_eval.at("mlm_accuracy"), 0.0);
  EXPECT_LE(result.last_eval.at("mlm_accuracy"), 1.0);
  EXPECT_NEAR(result.last_eval.at("perplexity"), std::exp(result.last_eval.at("mlm_loss")), 1e-6);
  if (GetParam().objective == Objective::kElectra) {
    ASSERT_TRUE(result.last_eval.count("rtd_accuracy"));
    EXPECT_GT(result.last_eval.at("rtd_accuracy"), 0.8);  // most tokens are original; 0.5 = coin
  }
  EXPECT_EQ(list_checkpoints(dir).size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(
    EveryFamily, PretrainFamily,
    ::testing::Values(FamilyCase{"bert-tiny-absolute", Objective::kMlm},
                      FamilyCase{"bert-tiny-composite", Objective::kMlm},
                      FamilyCase{"bert-tiny-composite-depthwise", Objective::kMlm},
                      FamilyCase{"bert-tiny-composite-conv-qkv", Objective::kMlm},
                      FamilyCase{"convbert-tiny", Objective::kMlm}, FamilyCase{"convbert-tiny", Objective::kElectra},
                      FamilyCase{"lightconv-tiny", Objective::kMlm}, FamilyCase{"dynamicconv-tiny", Objective::kMlm}),
    [](const auto& info) {
      std::string name = info.param.preset + (info.param.objective == Objective::kMlm ? "_mlm" : "_electra");
      for (auto& ch : name) ch = ch == '-' ? '_' : ch;
      return name;
    });

void expect_same_model(const std::string& a, const std::string& b) {
  Checkpoint x = load_checkpoint(a), y = load_checkpoint(b);
  ASSERT_EQ(x.tensors.size(), y.tensors.size());
  for (const auto& [name, tensor] : x.tensors) {
    ASSERT_TRUE(y.tensors.count(name)) << name;
    EXPECT_TRUE(torch::equal(tensor, y.tensors.at(name))) << name << " differs";
  }
  EXPECT_EQ(x.info.data().DebugString(), y.info.data().DebugString());
  EXPECT_EQ(x.info.std_rng_state(), y.info.std_rng_state());
}

class ResumeTest : public PretrainTest, public ::testing::WithParamInterface<FamilyCase> {};

// 6 steps + resume + 6 steps == 12 steps, bitwise (dropout, masking and ELECTRA sampling RNGs restored).
// `o` for 12 steps (checkpoints at 6 and 12) in its model_dir; then a copy of step 6 in `resumed` resumed to
// 12, which must give bitwise the same checkpoint. `resume_model`, when set, is what the resumed run is given
// as its model (the checkpoint's config must win).
void expect_resume_is_exact(PretrainOptions o, const std::string& resumed,
                            const pb::ModelConfig* resume_model = nullptr) {
  const std::string full = o.model_dir;
  o.save_every = 6;
  o.eval_every = 4;
  o.keep_checkpoints = 5;
  run_pretraining(o);
  auto saved = list_checkpoints(full);
  ASSERT_EQ(saved.size(), 2u);
  fs::copy_file(saved[0].second, checkpoint_path(resumed, 6));
  o.model_dir = resumed;
  o.resume = true;
  if (resume_model != nullptr) o.model = *resume_model;
  PretrainResult result = run_pretraining(o);
  EXPECT_EQ(result.steps_done, 6);
  expect_same_model(checkpoint_path(full, 12), checkpoint_path(resumed, 12));
}

TEST_P(ResumeTest, ResumeIsExact) {
  PretrainOptions o = tiny_options(GetParam().preset, fresh("full"), corpus_);
  o.objective = GetParam().objective;
  const pb::ModelConfig other = config::preset_config("bert-tiny-none");  // ignored: the checkpoint's config wins
  expect_resume_is_exact(o, fresh("resumed"), &other);
}

INSTANTIATE_TEST_SUITE_P(Objectives, ResumeTest,
                         ::testing::Values(FamilyCase{"bert-tiny-composite", Objective::kMlm},
                                           FamilyCase{"convbert-tiny", Objective::kElectra}),
                         [](const auto& info) {
                           return std::string(info.param.objective == Objective::kMlm ? "mlm" : "electra");
                         });

// Span corruption (Tay et al.) on the same kind of corpus, with ids 5..24 as the tokenizer's 20 sentinels.
constexpr int kFirstRegular = 25;

PretrainOptions span_options(const std::string& preset, const std::string& dir, const std::string& corpus) {
  PretrainOptions o = tiny_options(preset, dir, corpus);
  o.objective = Objective::kSpanCorruption;
  o.first_regular_id = kFirstRegular;
  o.model.set_vocab_size(1000);
  return o;
}

class SpanCorruptionFamily : public PretrainTest, public ::testing::WithParamInterface<std::string> {};

// Every noise span repeats the row's one token, so the targets become predictable: the per-token loss starts
// near log(1000) = 6.9 and falls well below the 40-way guess (3.7); the noise fraction is T5's 0.15 up to
// the rounding of n = round(0.15 L) on these short rows (L = 8..20).
TEST_P(SpanCorruptionFamily, LossFallsAndTheNoiseIsT5s) {
  const std::string dir = fresh("run");
  const std::string corpus = write_corpus(dir_, 120, kFirstRegular);
  PretrainOptions o = span_options(GetParam(), dir, corpus);
  o.steps = 120;
  o.lr = 3e-3;
  o.eval_examples = 32;
  o.eval_every = 120;
  PretrainResult result = run_pretraining(o);
  EXPECT_EQ(result.final_step, 120);
  auto metrics = read_metrics(dir);
  ASSERT_FALSE(metrics.empty());
  const double first = metrics.front().values().at("span_loss");
  EXPECT_GT(first, 5.0);
  ASSERT_TRUE(result.last_eval.count("span_loss"));
  EXPECT_LT(result.last_eval.at("span_loss"), 2.5) << GetParam();
  EXPECT_NEAR(result.last_eval.at("perplexity"), std::exp(result.last_eval.at("span_loss")), 1e-6);
  EXPECT_GT(result.last_eval.at("span_accuracy"), 0.4);
  // The sentinels and EOS are a large part of these short targets (1 + s sentinels and an EOS beside n noise
  // tokens); the model predicts beyond them, the spans' repeated token too.
  ASSERT_TRUE(result.last_eval.count("span_structure_fraction"));
  EXPECT_GT(result.last_eval.at("span_structure_fraction"), 0.2);
  EXPECT_LT(result.last_eval.at("span_structure_fraction"), result.last_eval.at("span_accuracy")) << GetParam();
  EXPECT_NEAR(result.last_eval.at("noise_fraction"), 0.15, 0.03);
  // The checkpoint holds the whole encoder-decoder and says how it was pre-trained.
  Checkpoint checkpoint = load_checkpoint(list_checkpoints(dir).back().second);
  EXPECT_TRUE(checkpoint.info.model().has_seq2seq());
  EXPECT_EQ(checkpoint.info.metadata().at("objective"), "span-corruption");
  EXPECT_EQ(checkpoint.info.metadata().at("noise_density"), "0.15");
  bool decoder = false;
  for (const auto& [name, tensor] : checkpoint.tensors) decoder = decoder || name.rfind("model/decoder.", 0) == 0;
  EXPECT_TRUE(decoder) << "no model/decoder.* tensors";
}

INSTANTIATE_TEST_SUITE_P(EverySeq2SeqFamily, SpanCorruptionFamily,
                         ::testing::Values("tay-lightconv-tiny", "tay-dynamicconv-tiny", "tay-dilatedconv-tiny",
                                           "transformer-tiny"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (auto& ch : name) ch = ch == '-' ? '_' : ch;
                           return name;
                         });

// 6 steps + resume + 6 steps == 12 steps, bitwise: the noise spans come from the checkpointed RNG.
TEST_F(PretrainTest, SpanCorruptionResumeIsExact) {
  const std::string full = fresh("full"), resumed = fresh("resumed");
  const std::string corpus = write_corpus(dir_, 120, kFirstRegular);
  expect_resume_is_exact(span_options("tay-dilatedconv-tiny", full, corpus), resumed);
  // The held-out loss of the resumed run is the uninterrupted run's (same fixed evaluation noise).
  // (The resumed directory got only the checkpoint, so its metrics start at step 7.)
  auto a = read_metrics(full), b = read_metrics(resumed);
  ASSERT_EQ(a.back().phase(), "eval");
  ASSERT_EQ(b.back().phase(), "eval");
  EXPECT_EQ(a.back().step(), b.back().step());
  std::map<std::string, double> va(a.back().values().begin(), a.back().values().end());
  std::map<std::string, double> vb(b.back().values().begin(), b.back().values().end());
  EXPECT_EQ(va, vb);
  EXPECT_TRUE(va.count("span_loss"));
}

TEST_F(PretrainTest, ObjectiveMustFitTheModel) {
  PretrainOptions o = tiny_options("bert-tiny-none", fresh("a"), corpus_);
  o.objective = Objective::kSpanCorruption;
  try {
    run_pretraining(o);
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'bert-tiny-none' is an encoder"), std::string::npos) << e.what();
  }
  o = tiny_options("tay-lightconv-tiny", fresh("b"), corpus_);
  o.objective = Objective::kMlm;
  try {
    run_pretraining(o);
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("Use --objective span-corruption"), std::string::npos) << e.what();
  }
  // A tokenizer without sentinels cannot mark noise spans.
  o = span_options("tay-lightconv-tiny", fresh("c"), corpus_);
  o.first_regular_id = 5;
  try {
    run_pretraining(o);
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("needs the tokenizer's sentinels"), std::string::npos) << e.what();
  }
}

TEST_F(PretrainTest, InterruptSavesAndResumesToTheSameWeights) {
  const std::string full = fresh("full"), interrupted = fresh("interrupted");
  PretrainOptions o = tiny_options("lightconv-tiny", full, corpus_);
  o.keep_checkpoints = 2;
  run_pretraining(o);

  o.model_dir = interrupted;
  o.after_step = [](int64_t step) {
    if (step == 5) set_interrupt_for_testing(SIGTERM);
  };
  try {
    run_pretraining(o);
    FAIL() << "expected Interrupted";
  } catch (const Interrupted& e) {
    EXPECT_EQ(e.exit_code(), 128 + SIGTERM);
  }
  set_interrupt_for_testing(0);
  auto saved = list_checkpoints(interrupted);
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].first, 5);
  // The metrics stream was flushed with the checkpoint: 5 train records.
  EXPECT_EQ(read_metrics(interrupted).size(), 5u);
  o.after_step = nullptr;
  o.resume = true;
  run_pretraining(o);
  expect_same_model(checkpoint_path(full, 12), checkpoint_path(interrupted, 12));
  // 12 train records + 1 eval, the 5 of the interrupted run kept once.
  EXPECT_EQ(read_metrics(interrupted).size(), 13u);
}

TEST_F(PretrainTest, KeepsTheLastKCheckpoints) {
  const std::string dir = fresh("keep");
  PretrainOptions o = tiny_options("bert-tiny-none", dir, corpus_);
  o.steps = 8;
  o.save_every = 2;
  o.keep_checkpoints = 2;
  run_pretraining(o);
  auto saved = list_checkpoints(dir);
  ASSERT_EQ(saved.size(), 2u);
  EXPECT_EQ(saved[0].first, 6);
  EXPECT_EQ(saved[1].first, 8);
  Checkpoint c = load_checkpoint(saved[1].second);
  EXPECT_EQ(c.info.kind(), "pretrain");
  EXPECT_EQ(c.info.step(), 8u);
  EXPECT_EQ(c.info.model().name(), "bert-tiny-none");
  EXPECT_EQ(c.info.metadata().at("objective"), "mlm");
  EXPECT_TRUE(c.tensors.count("model/encoder.embeddings.token.weight"));
  EXPECT_TRUE(c.tensors.count("optimizer/exp_avg/encoder.embeddings.token.weight"));
  // The resolved config beside the checkpoints loads back as --preset FILE.
  EXPECT_EQ(config::load_model_config(dir + "/config.textproto").DebugString(), c.info.model().DebugString());
}

// A fresh run into a directory that holds an earlier run is refused before it touches anything: it would have
// replaced metrics.cabert and pruned its own checkpoints while keeping the earlier run's later ones.
TEST_F(PretrainTest, AFreshRunIntoADirectoryWithAnEarlierRunIsRefused) {
  const std::string dir = fresh("earlier");
  PretrainOptions o = tiny_options("bert-tiny-none", dir, corpus_);
  o.steps = 6;
  o.save_every = 2;
  o.keep_checkpoints = 2;
  run_pretraining(o);
  const std::string metrics_before = testing::read_text(dir + "/metrics.cabert");
  const auto checkpoints_before = list_checkpoints(dir);
  ASSERT_EQ(checkpoints_before.size(), 2u);

  o.steps = 4;
  EXPECT_EQ(testing::usage_error_message([&] { run_pretraining(o); }),
            "--model-dir " + dir +
                ": holds an earlier run (checkpoint-00000004.cabert, ..., metrics.cabert); continue "
                "it with --resume, or give a new or empty directory");
  EXPECT_EQ(testing::read_text(dir + "/metrics.cabert"), metrics_before);
  EXPECT_EQ(list_checkpoints(dir), checkpoints_before);

  // metrics.cabert alone (a run stopped before its first checkpoint) is an earlier run too.
  const std::string metrics_only = fresh("metrics-only");
  fs::copy_file(dir + "/metrics.cabert", metrics_only + "/metrics.cabert");
  o.model_dir = metrics_only;
  EXPECT_EQ(testing::usage_error_message([&] { run_pretraining(o); }),
            "--model-dir " + metrics_only +
                ": holds an earlier run (metrics.cabert); continue it with --resume, or give a new or empty directory");

  // --resume continues the earlier run.
  o.model_dir = dir;
  o.resume = true;
  o.steps = 8;
  EXPECT_EQ(run_pretraining(o).steps_done, 2);
  EXPECT_EQ(list_checkpoints(dir).back().first, 8);
}

TEST_F(PretrainTest, CorruptedCheckpointIsRefused) {
  const std::string dir = fresh("corrupt");
  PretrainOptions o = tiny_options("bert-tiny-none", dir, corpus_);
  o.steps = 2;
  run_pretraining(o);
  const std::string path = checkpoint_path(dir, 2);
  std::string bytes = testing::read_text(path);
  std::string flipped = bytes;
  flipped[bytes.size() / 2] = static_cast<char>(flipped[bytes.size() / 2] ^ 0x5a);
  testing::write_text(path, flipped);
  try {
    load_checkpoint(path);
    FAIL() << "a corrupted checkpoint was accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  o.resume = true;
  o.steps = 4;
  EXPECT_THROW(run_pretraining(o), DataError);
  testing::write_text(path, bytes.substr(0, bytes.size() * 2 / 3));  // truncated
  EXPECT_THROW(load_checkpoint(path), DataError);
}

TEST_F(PretrainTest, NonFiniteLossStopsNamingTheStep) {
  const std::string dir = fresh("nan");
  PretrainOptions o = tiny_options("bert-tiny-none", dir, corpus_);
  o.model.set_initializer_range(std::numeric_limits<float>::infinity());
  try {
    run_pretraining(o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("non-finite loss"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("at step 1"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(list_checkpoints(dir).empty());
}

TEST_F(PretrainTest, RestoresEncoderWeightsByPrefix) {
  const std::string dir = fresh("prefix");
  PretrainOptions o = tiny_options("convbert-tiny", dir, corpus_);
  o.objective = Objective::kElectra;
  o.steps = 2;
  run_pretraining(o);
  Checkpoint c = load_checkpoint(checkpoint_path(dir, 2));
  models::Encoder encoder(c.info.model());
  EXPECT_EQ(restore_module(*encoder, c, "model/encoder.", ""), encoder->named_parameters().size());
  EXPECT_TRUE(torch::equal(encoder->embeddings->token->weight, c.tensors.at("model/encoder.embeddings.token.weight")));
  models::Encoder other(config::preset_config("bert-tiny-composite"));
  EXPECT_THROW(restore_module(*other, c, "model/encoder.", ""), DataError);
}

}  // namespace
}  // namespace cabert::train

namespace cabert::train {
namespace {

// A crash can leave a broken newest checkpoint (a disk that filled, a file cut short by hand): --resume skips
// it with a warning and continues exactly from the newest one that reads back whole.
TEST_F(PretrainTest, ResumeFallsBackToTheNewestCheckpointThatReadsBack) {
  const std::string full = fresh("full"), broken = fresh("broken");
  PretrainOptions o = tiny_options("bert-tiny-none", full, corpus_);
  o.steps = 8;
  o.save_every = 2;
  o.keep_checkpoints = 5;
  run_pretraining(o);

  o.model_dir = broken;
  // Stopped after step 6 (same schedule as the full run), then its step-6 file is cut short.
  o.after_step = [](int64_t step) {
    if (step == 6) set_interrupt_for_testing(SIGTERM);
  };
  EXPECT_THROW(run_pretraining(o), Interrupted);
  set_interrupt_for_testing(0);
  const std::string newest = checkpoint_path(broken, 6);
  ASSERT_TRUE(fs::exists(newest));
  const auto size = fs::file_size(newest);
  fs::resize_file(newest, size / 2);
  o.after_step = nullptr;
  o.resume = true;
  PretrainResult result = run_pretraining(o);
  EXPECT_EQ(result.steps_done, 4) << "resumed from step 4, the newest checkpoint that reads back";
  expect_same_model(checkpoint_path(full, 8), checkpoint_path(broken, 8));

  // When none reads back, resuming stops and says so instead of starting afresh.
  const std::string none = fresh("none");
  fs::copy_file(checkpoint_path(full, 2), checkpoint_path(none, 2));
  fs::resize_file(checkpoint_path(none, 2), 100);
  o.model_dir = none;
  std::string message = testing::data_error_message([&] { run_pretraining(o); });
  EXPECT_EQ(message, "--resume: none of the 1 checkpoints in " + none +
                         " reads back whole (see the warnings above); move them away to start afresh");
}

// A corpus is input like any other: ids are checked against the model's vocabulary before an embedding
// sees them (on any device), and every shard must come from one tokenizer.
std::string write_shard(const std::string& path, const std::map<std::string, std::string>& metadata, int examples,
                        int largest_id) {
  io::RecordWriter writer(path, "cabert.pb.PretrainingExample", metadata);
  for (int e = 0; e < examples; ++e) {
    pb::PretrainingExample example;
    for (int id : {2, 5, 6, 3, 7, e == examples - 1 ? largest_id : 8, 3}) example.add_token_ids(id);
    example.set_segment_a_length(4);
    writer.write(example);
  }
  writer.close();
  return path;
}

TEST_F(PretrainTest, TokenIdsOutsideTheVocabularyAreRefusedWithShardAndRecord) {
  const std::string shard = write_shard(dir_ + "/big-ids.cabert", {{"vocab_size", "30"}}, 40, 31);
  PretrainOptions o = tiny_options("bert-tiny-none", fresh("ids"), shard);
  o.steps = 20;
  o.batch_size = 4;
  o.eval_examples = 4;
  EXPECT_EQ(testing::data_error_message([&] { run_pretraining(o); }),
            shard + ": record 40: token id 31 is outside the model's vocabulary of 30 ids (a corpus built with "
                    "another tokenizer?)");
}

// An example longer than the model's max_length (a corpus built with a larger --max-length) is refused naming
// its shard and record when it is read, not as a bare length error from the embedding after many steps.
TEST_F(PretrainTest, ExamplesLongerThanTheModelsMaxLengthAreRefusedWithShardAndRecord) {
  const std::string shard = write_shard(dir_ + "/long.cabert", {{"vocab_size", "1000"}}, 40, 9);
  PretrainOptions o = tiny_options("bert-tiny-none", fresh("long"), shard);
  o.model.set_max_length(6);  // write_shard's examples have 7 tokens
  o.batch_size = 4;
  o.eval_examples = 0;
  EXPECT_EQ(testing::data_error_message([&] { run_pretraining(o); }),
            shard + ": record 1: 7 tokens, more than the model's max_length of 6 (a corpus built with a larger "
                    "--max-length: rebuild it with `cabert build-corpus --max-length 6`, or give the model --set "
                    "max_length=7 or more)");
  o.model.set_max_length(7);
  o.model_dir = fresh("long-fits");
  o.steps = 2;
  EXPECT_EQ(run_pretraining(o).steps_done, 2);
}

// Two shard sets under one name (a rebuild with another --shards left the old set, and corpus-* matches both) or
// one shard given twice would repeat examples and leak held-out ones: refused. Sets under two names are fine.
TEST_F(PretrainTest, ShardsOfTwoRunsUnderOneNameOrGivenTwiceAreRefused) {
  const std::map<std::string, std::string> meta = {{"vocab_size", "30"}};
  const std::string a0 = write_shard(dir_ + "/corp-00000-of-00002", meta, 8, 9);
  const std::string a1 = write_shard(dir_ + "/corp-00001-of-00002", meta, 8, 9);
  const std::string b0 = write_shard(dir_ + "/corp-00000-of-00003", meta, 8, 9);
  const std::string other = write_shard(dir_ + "/books-00000-of-00003", meta, 8, 9);
  PretrainOptions o = tiny_options("bert-tiny-none", fresh("sets"), a0);
  o.corpus = {a0, b0, a1};
  EXPECT_EQ(testing::usage_error_message([&] { run_pretraining(o); }),
            "--corpus: " + b0 + " and " + a0 +
                " are shards of two build-corpus runs under one name (3 and 2 shards; a "
                "rebuild that left the old set?): give the shards of one run");
  o.corpus = {a0, a1, "./" + a0.substr(a0.find_last_of('/') + 1)};
  const std::string cwd = fs::current_path().string();
  fs::current_path(dir_);
  const std::string twice = testing::usage_error_message([&] { run_pretraining(o); });
  fs::current_path(cwd);
  EXPECT_EQ(twice,
            "--corpus: ./corp-00000-of-00002 is given twice (also as " + a0 + "); each shard must be given once");
  o.corpus = {"-"};
  EXPECT_EQ(testing::usage_error_message([&] { run_pretraining(o); }),
            "--corpus -: pre-training reads its corpus more than once (the held-out examples, then every epoch), "
            "which a pipe cannot give: write it to a file (build-corpus -o FILE)");
  // Two corpora built apart: one set each, used together.
  o.corpus = {a0, a1, other};
  o.steps = 2;
  o.batch_size = 4;
  o.eval_examples = 4;
  EXPECT_EQ(run_pretraining(o).steps_done, 2);
}

TEST_F(PretrainTest, ShardsOfDifferentTokenizersAreRefused) {
  const std::string a = write_shard(
      dir_ + "/a.cabert", {{"vocab_size", "30"}, {"tokenizer", "a.model"}, {"tokenizer_checksum", "00aa"}}, 8, 9);
  const std::string b = write_shard(
      dir_ + "/b.cabert", {{"vocab_size", "30"}, {"tokenizer", "b.model"}, {"tokenizer_checksum", "00bb"}}, 8, 9);
  PretrainOptions o = tiny_options("bert-tiny-none", fresh("shards"), a);
  o.corpus = {a, b};
  EXPECT_EQ(testing::data_error_message([&] { run_pretraining(o); }),
            b + ": built with tokenizer b.model (checksum 00bb, vocab_size 30), but " + a +
                " with a.model (checksum 00aa, vocab_size 30); every --corpus shard must come from one tokenizer");
  const std::string c = write_shard(dir_ + "/c.cabert", {{"vocab_size", "3O"}}, 8, 9);
  o.corpus = {c};
  EXPECT_EQ(testing::data_error_message([&] { run_pretraining(o); }),
            c + ": header metadata vocab_size '3O': expected a positive 32-bit integer");
}

// Numeric faults: a non-finite gradient norm never reaches the optimiser (the update is skipped, and the
// run stops after --max-skipped-updates in a row), and no checkpoint is written with non-finite weights.
TEST_F(PretrainTest, NonFiniteGradientSkipsTheUpdateAndStopsAfterTooManyInARow) {
  auto poison_at = [](std::set<int64_t> steps) {
    return [steps](int64_t step, const std::vector<torch::Tensor>& parameters) {
      torch::NoGradGuard no_grad;
      if (steps.count(step)) parameters.front().grad().view(-1)[0] = std::numeric_limits<float>::infinity();
    };
  };
  // Step 3 poisoned: its update is skipped, so the weights after step 3 are those after step 2.
  const std::string skipped = fresh("skipped"), plain = fresh("plain");
  PretrainOptions o = tiny_options("bert-tiny-none", plain, corpus_);
  o.steps = 2;
  run_pretraining(o);
  o.model_dir = skipped;
  o.steps = 3;
  o.before_update = poison_at({3});
  PretrainResult result = run_pretraining(o);
  EXPECT_EQ(result.final_step, 3);
  Checkpoint after_two = load_checkpoint(checkpoint_path(plain, 2)),
             after_three = load_checkpoint(checkpoint_path(skipped, 3));
  for (const auto& [name, tensor] : after_two.tensors) {
    if (name.rfind("model/", 0) == 0) {
      EXPECT_TRUE(torch::equal(tensor, after_three.tensors.at(name))) << name;
    }
  }
  int recorded = 0;
  for (const auto& record : read_metrics(skipped)) {
    if (record.values().count("skipped_updates")) {
      EXPECT_EQ(record.step(), 3u);
      EXPECT_EQ(record.values().at("skipped_updates"), 1.0);
      ++recorded;
    }
  }
  EXPECT_EQ(recorded, 1);

  // Three in a row with --max-skipped-updates 3: the run stops naming the step and writes nothing broken.
  const std::string stopped = fresh("stopped");
  o.model_dir = stopped;
  o.steps = 8;
  o.max_skipped_updates = 3;
  o.before_update = poison_at({2, 4, 5, 6});
  try {
    run_pretraining(o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "pretrain: the gradient norm was inf at step 6, 3 steps in a row; stopping "
                                     "(lower --lr, or look at the data of these steps)");
  }
}

TEST_F(PretrainTest, NoCheckpointIsWrittenWithNonFiniteWeights) {
  const std::string dir = fresh("nan-weights");
  PretrainOptions o = tiny_options("bert-tiny-none", dir, corpus_);
  o.steps = 4;
  o.save_every = 2;
  o.before_update = [](int64_t step, const std::vector<torch::Tensor>& parameters) {
    torch::NoGradGuard no_grad;
    // The step-4 update leaves a NaN in the first parameter (as a diverged optimiser would).
    if (step == 4) {
      parameters.front().grad().zero_();
      parameters.front().view(-1)[0] = std::numeric_limits<float>::quiet_NaN();
    }
  };
  std::string message;
  try {
    run_pretraining(o);
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("pretrain: parameter model/"), std::string::npos) << message;
  EXPECT_NE(message.find(" holds non-finite values at step 4; not saving a broken model"), std::string::npos)
      << message;
  auto saved = list_checkpoints(dir);
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved.back().first, 2);
}

TEST(UpdateGuard, SkipsNonFiniteNormsAndResetsOnAFiniteOne) {
  UpdateGuard guard("finetune", "step", 2);
  EXPECT_TRUE(guard.allow(1.5, 1));
  EXPECT_FALSE(guard.allow(std::numeric_limits<double>::quiet_NaN(), 2));
  EXPECT_TRUE(guard.allow(0.5, 3));
  EXPECT_FALSE(guard.allow(std::numeric_limits<double>::infinity(), 4));
  EXPECT_EQ(guard.skipped(), 2);
  try {
    guard.allow(-std::numeric_limits<double>::infinity(), 5);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "finetune: the gradient norm was -inf at step 5, 2 steps in a row; stopping "
                                     "(lower --lr, or look at the data of these steps)");
  }
  EXPECT_THROW(UpdateGuard("pretrain", "step", 0), UsageError);
}

// --amp (bfloat16 autocast) runs on CPU for every tiny preset, on both kernel paths' default (fused): the first
// step's loss is finite and within bf16 rounding of the float32 step's.
TEST_F(PretrainTest, AmpRunsEveryTinyPresetOnCpu) {
  const std::string span_corpus = write_corpus(dir_, 120, 25);
  int presets = 0;
  for (const std::string& preset : config::preset_names()) {
    if (preset.find("tiny") == std::string::npos) continue;
    ++presets;
    auto first_loss = [&](bool amp, Objective objective) {
      PretrainOptions o = tiny_options(preset, fresh(preset + (amp ? "-amp" : "-f32")), corpus_);
      o.objective = objective;
      if (objective == Objective::kSpanCorruption) o.corpus = {span_corpus}, o.first_regular_id = 25;
      o.steps = 1;
      o.eval_examples = 0;
      o.amp = amp;
      return run_pretraining(o).last_loss;
    };
    Objective objective = Objective::kMlm;
    try {
      check_objective_fits(config::preset_config(preset), objective);
    } catch (const UsageError&) {
      objective = Objective::kSpanCorruption;
    }
    const double f32 = first_loss(false, objective), bf16 = first_loss(true, objective);
    EXPECT_TRUE(std::isfinite(bf16)) << preset;
    EXPECT_NEAR(bf16, f32, 0.05 * f32) << preset;
    EXPECT_NE(bf16, f32) << preset << ": autocast changed nothing";
  }
  EXPECT_GE(presets, 20);
}

}  // namespace
}  // namespace cabert::train
