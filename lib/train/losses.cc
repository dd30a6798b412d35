#include "lib/train/losses.h"

namespace cabert::train {

torch::Tensor mlm_loss(const torch::Tensor& logits, const torch::Tensor& labels) {
  return torch::nn::functional::cross_entropy(logits.to(torch::kFloat), labels);
}

torch::Tensor replaced_token_detection_loss(const torch::Tensor& logits, const torch::Tensor& replaced,
                                            const torch::Tensor& mask) {
  namespace F = torch::nn::functional;
  torch::Tensor weights = mask.to(torch::kFloat);
  torch::Tensor per_token = F::binary_cross_entropy_with_logits(
      logits.to(torch::kFloat), replaced, F::BinaryCrossEntropyWithLogitsFuncOptions().reduction(torch::kNone));
  return (per_token * weights).sum() / weights.sum();
}

torch::Tensor task_loss(tasks::TaskKind kind, const torch::Tensor& output, const torch::Tensor& targets) {
  switch (kind) {
    case tasks::TaskKind::kClassification: return torch::nn::functional::cross_entropy(output, targets);
    case tasks::TaskKind::kRegression: return torch::mse_loss(output, targets.to(output.scalar_type()));
    case tasks::TaskKind::kSpan: {
      torch::Tensor start = torch::nn::functional::cross_entropy(output.select(2, 0), targets.select(1, 0));
      torch::Tensor end = torch::nn::functional::cross_entropy(output.select(2, 1), targets.select(1, 1));
      return (start + end) / 2;
    }
  }
  return {};
}

SmoothedLoss label_smoothed_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets, double epsilon) {
  torch::Tensor log_probs = torch::log_softmax(logits.to(torch::kFloat), -1);
  torch::Tensor real = targets.ne(0).to(torch::kFloat);
  torch::Tensor nll = -log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1);
  torch::Tensor smooth = -log_probs.sum(-1);
  const double off_target = epsilon / static_cast<double>(logits.size(-1) - 1);
  torch::Tensor loss = (1.0 - epsilon - off_target) * nll + off_target * smooth;
  return {(loss * real).sum(), (nll * real).sum()};
}

}  // namespace cabert::train
