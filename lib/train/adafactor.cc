#include "lib/train/adafactor.h"

#include <cmath>
#include <set>

namespace cabert::train {

namespace {

// The root mean square, as a scalar tensor on t's device (no synchronisation with a GPU).
torch::Tensor rms(const torch::Tensor& t) { return t.norm() / std::sqrt(static_cast<double>(t.numel())); }

}  // namespace

Adafactor::Adafactor(NamedTensors parameters, const std::vector<std::string>& no_decay, AdafactorOptions options)
    : Optimizer(options.lr), options_(options) {
  std::set<std::string> excluded(no_decay.begin(), no_decay.end());
  for (auto& [name, param] : parameters) {
    if (!param.requires_grad()) continue;
    Slot slot{name, param, {}, {}, {}, {}, excluded.count(name) == 0};
    const auto like = param.options().requires_grad(false);
    if (param.dim() >= 2) {
      // Row means over the last dimension, column means over the one before it.
      const std::vector<int64_t> sizes = param.sizes().vec();
      std::vector<int64_t> row(sizes.begin(), sizes.end() - 1), column(sizes.begin(), sizes.end() - 2);
      column.push_back(sizes.back());
      slot.row = torch::zeros(row, like);
      slot.column = torch::zeros(column, like);
    } else {
      slot.second = torch::zeros(param.sizes(), like);
    }
    if (options_.beta1 > 0) slot.first = torch::zeros(param.sizes(), like);
    slots_.push_back(std::move(slot));
  }
}

Adafactor::Adafactor(const torch::nn::Module& module, AdafactorOptions options)
    : Adafactor(named_parameters(module), weight_decay_exclusions(module), options) {}

void Adafactor::zero_grad() {
  for (auto& slot : slots_) slot.param.mutable_grad().reset();
}

void Adafactor::step() {
  torch::NoGradGuard no_grad;
  ++steps_;
  const double beta2 = 1.0 - std::pow(static_cast<double>(steps_), options_.decay_rate);
  for (auto& slot : slots_) {
    const torch::Tensor& grad = slot.param.grad();
    if (grad.defined()) update(slot, grad, beta2);
  }
}

// transformers' Adafactor.step for one parameter: the second moment's estimate, the normalised and clipped
// update, the parameter-scaled step, the optional first moment, decay, then the step.
void Adafactor::update(Slot& slot, const torch::Tensor& grad, double beta2) const {
  const torch::Tensor step_size = options_.scale_parameter ? rms(slot.param).clamp_min(options_.eps_scale).mul_(lr_)
                                                           : torch::full({}, lr_, slot.param.options());
  torch::Tensor squared = grad.square().add_(options_.eps_gradient);
  torch::Tensor update;
  if (slot.row.defined()) {
    slot.row.mul_(beta2).add_(squared.mean(-1), 1.0 - beta2);
    slot.column.mul_(beta2).add_(squared.mean(-2), 1.0 - beta2);
    // The rank-1 estimate row x column / mean(row), as inverse square roots.
    torch::Tensor row_factor = (slot.row / slot.row.mean(-1, /*keepdim=*/true)).rsqrt_().unsqueeze(-1);
    torch::Tensor column_factor = slot.column.unsqueeze(-2).rsqrt();
    update = (row_factor * column_factor).mul_(grad);
  } else {
    slot.second.mul_(beta2).add_(squared, 1.0 - beta2);
    update = slot.second.rsqrt().mul_(grad);
  }
  update.div_(rms(update).div_(options_.clip_threshold).clamp_min_(1.0)).mul_(step_size);
  if (slot.first.defined()) {
    slot.first.mul_(options_.beta1).add_(update, 1.0 - options_.beta1);
    update = slot.first;
  }
  if (slot.decay && options_.weight_decay != 0) slot.param.mul_(step_size.mul(-options_.weight_decay).add_(1.0));
  slot.param.sub_(update);
}

NamedTensors Adafactor::state() const {
  NamedTensors out;
  out.emplace_back("step", torch::tensor(steps_, torch::kInt64));
  for (const auto& slot : slots_) {
    if (slot.row.defined()) {
      out.emplace_back("exp_avg_sq_row/" + slot.name, slot.row);
      out.emplace_back("exp_avg_sq_col/" + slot.name, slot.column);
    } else {
      out.emplace_back("exp_avg_sq/" + slot.name, slot.second);
    }
    if (slot.first.defined()) out.emplace_back("exp_avg/" + slot.name, slot.first);
  }
  return out;
}

void Adafactor::load_state(const std::map<std::string, torch::Tensor>& state, const std::string& source) {
  steps_ = optimizer_state_tensor(state, "step", {}, source).item<int64_t>();
  torch::NoGradGuard no_grad;
  for (auto& slot : slots_) {
    auto restore = [&](const std::string& kind, torch::Tensor& into) {
      into.copy_(optimizer_state_tensor(state, kind + "/" + slot.name, into, source));
    };
    if (slot.row.defined()) {
      restore("exp_avg_sq_row", slot.row);
      restore("exp_avg_sq_col", slot.column);
    } else {
      restore("exp_avg_sq", slot.second);
    }
    if (slot.first.defined()) restore("exp_avg", slot.first);
  }
}

}  // namespace cabert::train
