#include "lib/train/schedule.h"

#include <algorithm>
#include <cmath>

namespace cabert::train {

double linear_warmup_decay(double peak, int64_t update, int64_t warmup, int64_t total) {
  if (warmup > 0 && update <= warmup) return peak * static_cast<double>(update) / static_cast<double>(warmup);
  if (total <= warmup) return peak;
  double remaining = static_cast<double>(total - update) / static_cast<double>(total - warmup);
  return peak * std::max(0.0, remaining);
}

double warmup_then_constant(double peak, int64_t update, int64_t warmup) {
  return linear_warmup_decay(peak, update, warmup, warmup);
}

double inverse_sqrt(double peak, int64_t update, int64_t warmup) {
  if (warmup > 0 && update < warmup) return peak * static_cast<double>(update) / static_cast<double>(warmup);
  const double steady = static_cast<double>(std::max<int64_t>(warmup, 1));
  return peak * std::sqrt(steady / static_cast<double>(std::max<int64_t>(update, 1)));
}

double cosine(double peak, int64_t update, int64_t warmup, int64_t period, double min_lr) {
  if (warmup > 0 && update <= warmup) return peak * static_cast<double>(update) / static_cast<double>(warmup);
  const int64_t t = (update - std::max<int64_t>(warmup, 0)) % std::max<int64_t>(period, 1);
  const double pi = std::acos(-1.0);
  return min_lr + (peak - min_lr) * (1 + std::cos(pi * static_cast<double>(t) / static_cast<double>(period))) / 2;
}

Warmup translation_warmup(int64_t given, int64_t total_updates, int64_t recorded, bool resuming) {
  if (given >= 0) return {given, "given (--warmup-steps)"};
  if (recorded >= 0) return {recorded, "the resumed run's"};
  if (resuming) {
    return {std::min<int64_t>(4000, std::llround(0.1 * static_cast<double>(total_updates))),
            "min(4000, 10% of the updates): the rule of the cabert that started this run"};
  }
  return {std::min<int64_t>(4000, total_updates / 2), "min(4000, half the updates)"};
}

double clip_gradients(const std::vector<torch::Tensor>& parameters, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (const auto& p : parameters) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return 0.0;
  // Multi-tensor ops: on CUDA a few launches for all the gradients instead of two per gradient.
  const double total = torch::stack(at::_foreach_norm(grads, 2)).to(torch::kDouble).norm(2).item<double>();
  if (max_norm > 0 && std::isfinite(total) && total > max_norm) at::_foreach_mul_(grads, max_norm / (total + 1e-6));
  return total;
}

}  // namespace cabert::train
