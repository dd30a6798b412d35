#include "lib/models/task_model.h"

#include "lib/core/errors.h"
#include "lib/models/layers.h"

namespace cabert::models {

Pooling parse_pooling(const std::string& name) {
  if (name == "cls") return Pooling::kCls;
  if (name == "mean") return Pooling::kMean;
  throw UsageError(str("--pooling: expected cls or mean, got '", name, "'"));
}

const char* pooling_name(Pooling pooling) { return pooling == Pooling::kMean ? "mean" : "cls"; }

TaskModelImpl::TaskModelImpl(const pb::ModelConfig& config, tasks::TaskKind kind, int64_t num_labels, Pooling pooling)
    : kind_(kind), pooling_(pooling) {
  encoder = register_module("encoder", models::Encoder(config));
  int64_t H = config.hidden_size();
  head = torch::nn::Sequential();
  if (kind == tasks::TaskKind::kSpan) {
    head->push_back(torch::nn::Linear(H, 2));
  } else {
    int64_t outputs = kind == tasks::TaskKind::kRegression ? 1 : num_labels;
    head->push_back(Dropout(config.dropout()));
    head->push_back(torch::nn::Linear(H, H));
    head->push_back(torch::nn::Functional(torch::tanh));
    head->push_back(Dropout(config.dropout()));
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
  torch::Tensor pooled;
  if (pooling_ == Pooling::kMean) {
    torch::Tensor weights = mask.unsqueeze(-1).to(hidden.scalar_type());
    pooled = (hidden * weights).sum(1) / weights.sum(1).clamp_min(1);
  } else {
    pooled = hidden.select(1, 0);
  }
  torch::Tensor output = head->forward(pooled);
  return kind_ == tasks::TaskKind::kRegression ? output.squeeze(-1) : output;
}

}  // namespace cabert::models
