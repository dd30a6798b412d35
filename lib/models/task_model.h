// The encoder with a task head on top.
//   classification / regression: [CLS] hidden -> Dropout -> Linear(H->H) -> tanh -> Dropout -> Linear(H->C)
//     (a BERT-style pooler, trained from scratch since cabert pre-trains without next-sentence prediction);
//     C = number of labels, 1 for regression.
//   span (SQuAD): Linear(H->2) on every position -> start and end logits.
// The encoder is registered as "encoder", like the pre-training models, so that "model/encoder.*" tensors of
// a pre-training (or another fine-tuning) checkpoint initialise it; the head ("head.*") starts fresh.
#pragma once

#include <torch/torch.h>

#include "formats/model.pb.h"
#include "lib/models/encoder.h"
#include "lib/tasks/task_definition.h"

namespace cabert::models {

class TaskModelImpl : public torch::nn::Module {
 public:
  TaskModelImpl(const pb::ModelConfig& config, tasks::TaskKind kind, int64_t num_labels);
  // classification: logits [B, C]; regression: predictions [B]; span: logits [B, T, 2] (start, end).
  torch::Tensor forward(const torch::Tensor& ids, const torch::Tensor& segments, const torch::Tensor& mask);
  tasks::TaskKind kind() const { return kind_; }

  models::Encoder encoder{nullptr};
  torch::nn::Sequential head{nullptr};

 private:
  tasks::TaskKind kind_;
};
TORCH_MODULE(TaskModel);

}  // namespace cabert::models
