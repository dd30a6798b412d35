#include "lib/train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "lib/core/errors.h"

namespace cabert::train {

std::vector<std::string> weight_decay_exclusions(const torch::nn::Module& module) {
  std::vector<std::string> names;
  auto add = [&](const std::string& prefix, const torch::nn::Module& m) {
    const bool layer_norm = m.as<torch::nn::LayerNorm>() != nullptr;
    for (const auto& p : m.named_parameters(/*recurse=*/false)) {
      const std::string& key = p.key();
      const bool bias = key == "bias" || (key.size() > 5 && key.substr(key.size() - 5) == "_bias");
      if (layer_norm || bias) names.push_back(prefix.empty() ? key : prefix + "." + key);
    }
  };
  add("", module);
  for (const auto& item : module.named_modules("", /*include_self=*/false)) add(item.key(), *item.value());
  return names;
}

NamedTensors named_parameters(const torch::nn::Module& module) {
  NamedTensors list;
  for (const auto& p : module.named_parameters(true)) list.emplace_back(p.key(), p.value());
  return list;
}

torch::Tensor optimizer_state_tensor(const std::map<std::string, torch::Tensor>& state, const std::string& name,
                                     const torch::Tensor& like, const std::string& source) {
  auto found = state.find(name);
  if (found == state.end()) throw DataError(str(source, ": optimizer state has no tensor '", name, "'"));
  if (like.defined() && found->second.sizes() != like.sizes()) {
    throw DataError(str(source, ": optimizer tensor '", name, "': expected shape ", like.sizes(), ", got ",
                        found->second.sizes()));
  }
  return found->second;
}

AdamW::AdamW(NamedTensors parameters, const std::vector<std::string>& no_decay, AdamWOptions options)
    : Optimizer(options.lr), options_(options) {
  std::set<std::string> excluded(no_decay.begin(), no_decay.end());
  for (auto& [name, param] : parameters) {
    if (!param.requires_grad()) continue;
    slots_.push_back({name, param, torch::zeros_like(param), torch::zeros_like(param), excluded.count(name) == 0});
  }
}

AdamW::AdamW(const torch::nn::Module& module, AdamWOptions options)
    : AdamW(named_parameters(module), weight_decay_exclusions(module), options) {}

bool AdamW::decays(const std::string& name) const {
  for (const auto& slot : slots_) {
    if (slot.name == name) return slot.decay;
  }
  throw Error(str("internal: AdamW has no parameter ", name));
}

void AdamW::zero_grad() {
  for (auto& slot : slots_) slot.param.mutable_grad().reset();
}

namespace {

// The tensors of one call of PyTorch's fused AdamW: same device, dtype and weight decay.
struct FusedGroup {
  at::Device device;
  at::ScalarType dtype;
  bool decay;
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs;
};

bool fusable(const torch::Tensor& param, const torch::Tensor& grad, const torch::Tensor& exp_avg,
             const torch::Tensor& exp_avg_sq) {
  for (const torch::Tensor* t : {&param, &grad, &exp_avg, &exp_avg_sq}) {
    if (!t->is_contiguous() || t->is_sparse() || t->device() != param.device() || t->dtype() != param.dtype()) {
      return false;
    }
  }
  return param.is_floating_point() && (param.is_cpu() || param.is_cuda());
}

}  // namespace

// One pass over each parameter's four tensors (PyTorch's fused AdamW, CPU or CUDA) instead of nine ATen ops and
// two temporaries per parameter; parameters it cannot take (non-contiguous storage) take the same update op by op.
void AdamW::step() {
  torch::NoGradGuard no_grad;
  ++steps_;
  const double decay_factor = 1.0 - lr_ * options_.weight_decay;
  std::vector<FusedGroup> groups;
  for (auto& slot : slots_) {
    const torch::Tensor& grad = slot.param.grad();
    if (!grad.defined()) continue;
    const bool decay = slot.decay && options_.weight_decay != 0;
    if (!fusable(slot.param, grad, slot.exp_avg, slot.exp_avg_sq)) {
      step_op_by_op(slot.param, grad, slot.exp_avg, slot.exp_avg_sq, decay ? decay_factor : 1.0);
      continue;
    }
    auto group = std::find_if(groups.begin(), groups.end(), [&](const FusedGroup& g) {
      return g.device == slot.param.device() && g.dtype == slot.param.scalar_type() && g.decay == decay;
    });
    if (group == groups.end()) {
      groups.push_back(FusedGroup{slot.param.device(), slot.param.scalar_type(), decay, {}, {}, {}, {}});
      group = std::prev(groups.end());
    }
    group->params.push_back(slot.param);
    group->grads.push_back(grad);
    group->exp_avgs.push_back(slot.exp_avg);
    group->exp_avg_sqs.push_back(slot.exp_avg_sq);
  }
  for (const FusedGroup& group : groups) {
    // The kernel reads each parameter's step count (a float scalar on its device) and leaves it as it is.
    const at::Tensor step =
        at::full({}, static_cast<double>(steps_), at::TensorOptions(group.device).dtype(at::kFloat));
    const std::vector<at::Tensor> steps(group.params.size(), step);
    at::_fused_adamw_(group.params, group.grads, group.exp_avgs, group.exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps,
                      lr_, options_.beta1, options_.beta2, group.decay ? options_.weight_decay : 0.0,
                      options_.eps, /*amsgrad=*/false, /*maximize=*/false);
  }
}

void AdamW::step_op_by_op(torch::Tensor& param, const torch::Tensor& grad, torch::Tensor& exp_avg,
                          torch::Tensor& exp_avg_sq, double decay_factor) const {
  const double correction1 = 1.0 - std::pow(options_.beta1, static_cast<double>(steps_));
  const double correction2 = 1.0 - std::pow(options_.beta2, static_cast<double>(steps_));
  if (decay_factor != 1.0) param.mul_(decay_factor);
  exp_avg.mul_(options_.beta1).add_(grad, 1.0 - options_.beta1);
  exp_avg_sq.mul_(options_.beta2).addcmul_(grad, grad, 1.0 - options_.beta2);
  torch::Tensor denom = (exp_avg_sq.sqrt() / std::sqrt(correction2)).add_(options_.eps);
  param.addcdiv_(exp_avg, denom, -lr_ / correction1);
}

NamedTensors AdamW::state() const {
  NamedTensors out;
  out.emplace_back("step", torch::tensor(steps_, torch::kInt64));
  for (const auto& slot : slots_) {
    out.emplace_back("exp_avg/" + slot.name, slot.exp_avg);
    out.emplace_back("exp_avg_sq/" + slot.name, slot.exp_avg_sq);
  }
  return out;
}

void AdamW::load_state(const std::map<std::string, torch::Tensor>& state, const std::string& source) {
  auto get = [&](const std::string& name, const torch::Tensor& like) {
    return optimizer_state_tensor(state, name, like, source);
  };
  steps_ = get("step", {}).item<int64_t>();
  torch::NoGradGuard no_grad;
  for (auto& slot : slots_) {
    slot.exp_avg.copy_(get("exp_avg/" + slot.name, slot.exp_avg));
    slot.exp_avg_sq.copy_(get("exp_avg_sq/" + slot.name, slot.exp_avg_sq));
  }
}

}  // namespace cabert::train
