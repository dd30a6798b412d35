#include "lib/train/encoder_learner.h"

#include <array>
#include <optional>
#include <vector>

#include "lib/core/log.h"
#include "lib/models/task_model.h"
#include "lib/tasks/features.h"
#include "lib/tasks/squad_features.h"
#include "lib/train/losses.h"

namespace cabert::train {
namespace {

using tasks::TaskKind;

// Training inputs: one sequence and one target row per feature.
struct TrainingSet {
  std::vector<tasks::Sequence> sequences;
  std::vector<int64_t> class_targets;         // classification
  std::vector<float> value_targets;           // regression
  std::vector<std::array<int64_t, 2>> spans;  // span: start, end
  std::optional<uint64_t> truncated;          // of the sequences kept (classification and regression)
};

TrainingSet training_set(const tasks::LoadedTask& task, const text::Tokenizer& tokenizer, int max_length,
                         const tasks::SquadOptions& squad, uint64_t limit) {
  TrainingSet set;
  if (task.definition.kind == TaskKind::kSpan) {
    tasks::SquadFeatures features = tasks::squad_features(task.train.squad, tokenizer, squad);
    if (features.answers_not_found > 0) {
      log_warning(task.train.path, ": ", features.answers_not_found,
                  " answers could not be located in the tokenised context (trained as no-answer windows)");
    }
    for (auto& window : features.windows) {
      if (limit > 0 && set.sequences.size() >= limit) break;
      set.spans.push_back({window.start_position, window.end_position});
      set.sequences.push_back(std::move(window.sequence));
    }
    return set;
  }
  tasks::FeatureStats stats;
  auto features = tasks::classification_features(task.train.data, task.definition, tokenizer, max_length, &stats);
  if (stats.truncated_examples > 0) {
    log_info("finetune: ", stats.truncated_examples, " of ", stats.examples, " training examples truncated to ",
             max_length, " tokens");
  }
  set.truncated = 0;
  for (auto& feature : features) {
    if (limit > 0 && set.sequences.size() >= limit) break;
    *set.truncated += feature.sequence.truncated > 0;
    set.class_targets.push_back(feature.label);
    set.value_targets.push_back(feature.target);
    set.sequences.push_back(std::move(feature.sequence));
  }
  return set;
}

struct TrainingBatch {
  torch::Tensor ids, segments, mask, targets;
};

TrainingBatch make_batch(const TrainingSet& set, TaskKind kind, const std::vector<size_t>& order, size_t begin,
                         size_t end) {
  TrainingBatch batch;
  std::vector<const tasks::Sequence*> sequences;
  for (size_t i = begin; i < end; ++i) sequences.push_back(&set.sequences[order[i]]);
  tasks::pad_sequences(sequences, &batch.ids, &batch.segments, &batch.mask);
  int64_t rows = static_cast<int64_t>(end - begin);
  if (kind == TaskKind::kSpan) {
    batch.targets = torch::empty({rows, 2}, torch::kInt64);
    auto access = batch.targets.accessor<int64_t, 2>();
    for (int64_t r = 0; r < rows; ++r) {
      access[r][0] = set.spans[order[begin + r]][0];
      access[r][1] = set.spans[order[begin + r]][1];
    }
  } else if (kind == TaskKind::kRegression) {
    batch.targets = torch::empty({rows}, torch::kFloat32);
    auto access = batch.targets.accessor<float, 1>();
    for (int64_t r = 0; r < rows; ++r) access[r] = set.value_targets[order[begin + r]];
  } else {
    batch.targets = torch::empty({rows}, torch::kInt64);
    auto access = batch.targets.accessor<int64_t, 1>();
    for (int64_t r = 0; r < rows; ++r) access[r] = set.class_targets[order[begin + r]];
  }
  return batch;
}

// An encoder with a task head (classification, regression, SQuAD spans): Chang et al.'s protocol.
class EncoderLearner : public FinetuneLearner {
 public:
  EncoderLearner(const pb::ModelConfig& config, const io::Checkpoint* init, const tasks::LoadedTask& task,
                 const text::Tokenizer& tokenizer, const eval::PredictOptions& predict, uint64_t max_train_examples,
                 models::Pooling pooling)
      : config_(config),
        init_(init),
        definition_(task.definition),
        tokenizer_(tokenizer),
        predict_(predict),
        pooling_(pooling) {
    train_ = training_set(task, tokenizer, predict.max_length, predict.squad, max_train_examples);
  }
  size_t examples() const override { return train_.sequences.size(); }
  std::optional<uint64_t> truncated_examples() const override { return train_.truncated; }
  torch::nn::Module& start_run() override {
    const int64_t labels =
        definition_.kind == TaskKind::kClassification ? static_cast<int64_t>(definition_.labels.size()) : 1;
    model_ = models::TaskModel(config_, definition_.kind, labels, pooling_);
    if (init_ != nullptr) {
      size_t copied = io::restore_module(*model_, *init_, "model/encoder.", "encoder.");
      log_debug("finetune: ", copied, " encoder tensors from ", init_->path);
    }
    model_->to(predict_.device);
    model_->train();
    return *model_;
  }
  torch::Tensor loss(const std::vector<size_t>& order, size_t begin, size_t end) override {
    TrainingBatch batch = make_batch(train_, definition_.kind, order, begin, end);
    const torch::Device device = predict_.device;
    torch::Tensor output = model_->forward(batch.ids.to(device), batch.segments.to(device), batch.mask.to(device));
    return task_loss(definition_.kind, output, batch.targets.to(device));
  }
  int64_t tokens(const std::vector<size_t>& order, size_t begin, size_t end) const override {
    int64_t count = 0;
    for (size_t i = begin; i < end; ++i) count += static_cast<int64_t>(train_.sequences[order[i]].ids.size());
    return count;
  }
  eval::SplitPredictions evaluate(const tasks::TaskSplit& split) override {
    return eval::predict_split(model_, definition_, split, tokenizer_, predict_);
  }
  void describe(pb::CheckpointInfo* info) const override {
    (*info->mutable_metadata())["pooling"] = models::pooling_name(pooling_);
  }

 private:
  pb::ModelConfig config_;
  const io::Checkpoint* init_;
  tasks::TaskDefinition definition_;
  const text::Tokenizer& tokenizer_;
  eval::PredictOptions predict_;
  models::Pooling pooling_;
  TrainingSet train_;
  models::TaskModel model_{nullptr};
};

}  // namespace

std::unique_ptr<FinetuneLearner> make_encoder_learner(const pb::ModelConfig& config, const io::Checkpoint* init,
                                                      const tasks::LoadedTask& task, const text::Tokenizer& tokenizer,
                                                      const eval::PredictOptions& predict, uint64_t max_train_examples,
                                                      models::Pooling pooling) {
  return std::make_unique<EncoderLearner>(config, init, task, tokenizer, predict, max_train_examples, pooling);
}

}  // namespace cabert::train
