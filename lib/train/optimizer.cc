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

AdamW::AdamW(NamedTensors parameters, const std::vector<std::string>& no_decay, AdamWOptions options)
    : options_(options) {
  std::set<std::string> excluded(no_decay.begin(), no_decay.end());
  for (auto& [name, param] : parameters) {
    if (!param.requires_grad()) continue;
    slots_.push_back({name, param, torch::zeros_like(param), torch::zeros_like(param), excluded.count(name) == 0});
  }
}

AdamW::AdamW(const torch::nn::Module& module, AdamWOptions options)
    : AdamW(
          [&] {
            NamedTensors list;
            for (const auto& p : module.named_parameters(true)) list.emplace_back(p.key(), p.value());
            return list;
          }(),
          weight_decay_exclusions(module), options) {}

bool AdamW::decays(const std::string& name) const {
  for (const auto& slot : slots_) {
    if (slot.name == name) return slot.decay;
  }
  throw Error(str("internal: AdamW has no parameter ", name));
}

void AdamW::zero_grad() {
  for (auto& slot : slots_) {
    if (slot.param.grad().defined()) slot.param.mutable_grad().zero_();
  }
}

void AdamW::step() {
  torch::NoGradGuard no_grad;
  ++steps_;
  const double correction1 = 1.0 - std::pow(options_.beta1, static_cast<double>(steps_));
  const double correction2 = 1.0 - std::pow(options_.beta2, static_cast<double>(steps_));
  const double step_size = options_.lr / correction1;
  const double correction2_sqrt = std::sqrt(correction2);
  for (auto& slot : slots_) {
    const torch::Tensor& grad = slot.param.grad();
    if (!grad.defined()) continue;
    if (slot.decay && options_.weight_decay != 0) slot.param.mul_(1.0 - options_.lr * options_.weight_decay);
    slot.exp_avg.mul_(options_.beta1).add_(grad, 1.0 - options_.beta1);
    slot.exp_avg_sq.mul_(options_.beta2).addcmul_(grad, grad, 1.0 - options_.beta2);
    torch::Tensor denom = (slot.exp_avg_sq.sqrt() / correction2_sqrt).add_(options_.eps);
    slot.param.addcdiv_(slot.exp_avg, denom, -step_size);
  }
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
    auto found = state.find(name);
    if (found == state.end()) throw DataError(str(source, ": optimizer state has no tensor '", name, "'"));
    if (like.defined() && found->second.sizes() != like.sizes()) {
      throw DataError(str(source, ": optimizer tensor '", name, "': expected shape ", like.sizes(), ", got ",
                          found->second.sizes()));
    }
    return found->second;
  };
  steps_ = get("step", {}).item<int64_t>();
  torch::NoGradGuard no_grad;
  for (auto& slot : slots_) {
    slot.exp_avg.copy_(get("exp_avg/" + slot.name, slot.exp_avg));
    slot.exp_avg_sq.copy_(get("exp_avg_sq/" + slot.name, slot.exp_avg_sq));
  }
}

}  // namespace cabert::train
