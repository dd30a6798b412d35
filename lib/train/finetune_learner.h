// What `run_finetune` needs from a model family, so that one loop (epochs, schedule, dev evaluation, best
// epoch, --runs N and their summaries) serves encoders with a task head (finetune.cc) and encoder-decoders
// fine-tuned text-to-text (text_to_text_learner.h).
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "formats/checkpoint.pb.h"
#include "lib/eval/predict_split.h"
#include "lib/tasks/task_inputs.h"

namespace cabert::train {

class FinetuneLearner {
 public:
  virtual ~FinetuneLearner() = default;
  // Training examples (SQuAD: windows).
  virtual size_t examples() const = 0;
  // How many of them were longer than the maximum length before truncation; nullopt where not counted.
  virtual std::optional<uint64_t> truncated_examples() const { return std::nullopt; }
  // A fresh model for the next run (the caller has seeded torch), initialised from the starting checkpoint
  // when there is one, on the device and in training mode.
  virtual torch::nn::Module& start_run() = 0;
  // The mean loss of the training examples order[begin, end) under the current model.
  virtual torch::Tensor loss(const std::vector<size_t>& order, size_t begin, size_t end) = 0;
  // The real (unpadded) tokens those examples feed the model, for the tokens/s of the log and the EPOCH records
  // (text-to-text: source and target).
  virtual int64_t tokens(const std::vector<size_t>& order, size_t begin, size_t end) const = 0;
  // Predictions and metrics on a dev split (the model is left in training mode).
  virtual eval::SplitPredictions evaluate(const tasks::TaskSplit& split) = 0;
  // Checkpoint metadata beyond the task's (how to read the model back).
  virtual void describe(pb::CheckpointInfo* /*info*/) const {}
  // Metrics of the model on (a fixed part of) its own training examples, "train_"-prefixed, added to every
  // epoch's records beside dev (text-to-text: teacher-forced and generated accuracy); none by default.
  virtual eval::MetricMap training_diagnostics() { return {}; }
};

}  // namespace cabert::train
