// The encoder with a task head on top.
//   classification / regression: pooled hidden -> Dropout -> Linear(H->H) -> tanh -> Dropout -> Linear(H->C)
//     (a BERT-style pooler, trained from scratch since cabert pre-trains without next-sentence prediction);
//     C = number of labels, 1 for regression. Pooling: the [CLS] position's hidden state (BERT, Chang et al.:
//     the default), or the mean over the non-padding positions (Sentence-BERT's; masked-LM pre-training never
//     trains [CLS], and a small model's last layer often attends from [CLS] to its neighbours only).
//   span (SQuAD): Linear(H->2) on every position -> start and end logits.
// The encoder is registered as "encoder", like the pre-training models, so that "model/encoder.*" tensors of
// a pre-training (or another fine-tuning) checkpoint initialise it; the head ("head.*") starts fresh.
#pragma once

#include <string>

#include <torch/torch.h>

#include "formats/model.pb.h"
#include "lib/models/encoder.h"
#include "lib/tasks/task_definition.h"

namespace cabert::models {

enum class Pooling { kCls, kMean };
Pooling parse_pooling(const std::string& name);  // "cls" or "mean"; UsageError otherwise
const char* pooling_name(Pooling pooling);

class TaskModelImpl : public torch::nn::Module {
 public:
  TaskModelImpl(const pb::ModelConfig& config, tasks::TaskKind kind, int64_t num_labels,
                Pooling pooling = Pooling::kCls);
  // classification: logits [B, C]; regression: predictions [B]; span: logits [B, T, 2] (start, end).
  torch::Tensor forward(const torch::Tensor& ids, const torch::Tensor& segments, const torch::Tensor& mask);
  tasks::TaskKind kind() const { return kind_; }
  Pooling pooling() const { return pooling_; }

  models::Encoder encoder{nullptr};
  torch::nn::Sequential head{nullptr};

 private:
  tasks::TaskKind kind_;
  Pooling pooling_;
};
TORCH_MODULE(TaskModel);

}  // namespace cabert::models
