#include "lib/train/finetune_model.h"

#include "lib/models/layers.h"

namespace cabert::train {

TaskModelImpl::TaskModelImpl(const pb::ModelConfig& config, tasks::TaskKind kind, int64_t num_labels)
    : kind_(kind) {
  encoder = register_module("encoder", models::Encoder(config));
  int64_t H = config.hidden_size();
  head = torch::nn::Sequential();
  if (kind == tasks::TaskKind::kSpan) {
    head->push_back(torch::nn::Linear(H, 2));
  } else {
    int64_t outputs = kind == tasks::TaskKind::kRegression ? 1 : num_labels;
    head->push_back(torch::nn::Dropout(config.dropout()));
    head->push_back(torch::nn::Linear(H, H));
    head->push_back(torch::nn::Functional(torch::tanh));
    head->push_back(torch::nn::Dropout(config.dropout()));
    head->push_back(torch::nn::Linear(H, outputs));
  }
  register_module("head", head);
  models::init_bert_weights(*head, config.initializer_range());
}

torch::Tensor TaskModelImpl::forward(const torch::Tensor& ids, const torch::Tensor& segments,
                                     const torch::Tensor& mask) {
  torch::Tensor hidden = encoder->forward(ids, segments, mask);
  if (kind_ == tasks::TaskKind::kSpan) {
    // Padding can never be a start or end.
    torch::Tensor logits = head->forward(hidden);
    return logits.masked_fill(~mask.unsqueeze(-1), -1e4);
  }
  torch::Tensor output = head->forward(hidden.select(1, 0));
  return kind_ == tasks::TaskKind::kRegression ? output.squeeze(-1) : output;
}

torch::Tensor task_loss(tasks::TaskKind kind, const torch::Tensor& output, const torch::Tensor& targets) {
  switch (kind) {
    case tasks::TaskKind::kClassification:
      return torch::nn::functional::cross_entropy(output, targets);
    case tasks::TaskKind::kRegression:
      return torch::mse_loss(output, targets.to(output.scalar_type()));
    case tasks::TaskKind::kSpan: {
      torch::Tensor start = torch::nn::functional::cross_entropy(output.select(2, 0), targets.select(1, 0));
      torch::Tensor end = torch::nn::functional::cross_entropy(output.select(2, 1), targets.select(1, 1));
      return (start + end) / 2;
    }
  }
  return {};
}

}  // namespace cabert::train
