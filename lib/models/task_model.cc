#include "lib/models/task_model.h"

#include "lib/models/layers.h"

namespace cabert::models {

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

}  // namespace cabert::models
