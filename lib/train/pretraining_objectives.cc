#include "lib/train/pretraining_objectives.h"

#include <algorithm>
#include <cmath>

#include "lib/core/errors.h"
#include "lib/train/losses.h"

namespace cabert::train {

Objective parse_objective(const std::string& name) {
  if (name == "mlm") return Objective::kMlm;
  if (name == "electra") return Objective::kElectra;
  throw UsageError(str("--objective: expected mlm or electra, got '", name, "'"));
}

Objectives::Objectives(const pb::ModelConfig& config, Objective objective, torch::Device device)
    : objective_(objective), device_(device), config_(config) {
  if (objective == Objective::kMlm) {
    mlm_ = models::MlmModel(config);
    module_ = mlm_.ptr();
  } else {
    electra_ = models::ElectraModel(config);
    module_ = electra_.ptr();
  }
  module_->to(device);
  masking_.vocab_size = config.vocab_size();
  if (objective == Objective::kMlm) {
    masking_.select = config.mask_probability();
    masking_.mask_token = config.mask_token_fraction();
    masking_.random_token = config.random_token_fraction();
  } else {
    masking_.select = config.electra().mask_probability();
    masking_.mask_token = config.electra().mask_token_fraction();
    masking_.random_token = 0;
    masking_.max_fraction = config.electra().max_predictions_fraction();
  }
}

StepOutput Objectives::compute(const data::Batch& batch, std::mt19937_64& rng) {
  data::MaskedBatch masked = data::mask_tokens(batch.ids, batch.mask, masking_, rng);
  torch::Tensor input = masked.input_ids.to(device_), segments = batch.segments.to(device_);
  torch::Tensor mask = batch.mask.to(device_), positions = masked.positions.to(device_);
  torch::Tensor labels = masked.labels.to(device_);
  StepOutput out;
  torch::Tensor logits = objective_ == Objective::kMlm ? mlm_(input, segments, mask, positions)
                                                       : electra_->generator_logits(input, segments, mask, positions);
  torch::Tensor generator_loss = mlm_loss(logits, labels);
  const double count = static_cast<double>(labels.size(0));
  out.sums["mlm_loss_sum"] = generator_loss.item<double>() * count;
  out.sums["mlm_count"] = count;
  out.sums["mlm_correct"] = logits.argmax(-1).eq(labels).sum().item<double>();
  if (objective_ == Objective::kMlm) {
    out.loss = generator_loss;
    return out;
  }
  // Replace the selected tokens with samples from the generator (no gradient through sampling).
  torch::Tensor sampled;
  {
    torch::NoGradGuard no_grad;
    sampled = torch::multinomial(torch::softmax(logits.detach().to(torch::kFloat), -1), 1).squeeze(-1);
  }
  torch::Tensor original = batch.ids.to(device_);
  torch::Tensor corrupted = original.index_put({positions}, sampled);
  torch::Tensor replaced = corrupted.ne(original).to(torch::kFloat);
  torch::Tensor rtd_logits = electra_->discriminator_logits(corrupted, segments, mask).to(torch::kFloat);
  torch::Tensor rtd_loss = replaced_token_detection_loss(rtd_logits, replaced, mask);
  const auto& e = config_.electra();
  out.loss = e.generator_weight() * generator_loss + e.discriminator_weight() * rtd_loss;
  torch::Tensor weights = mask.to(torch::kFloat);
  out.sums["rtd_loss_sum"] = rtd_loss.item<double>();
  out.sums["rtd_batches"] = 1;
  out.sums["rtd_correct"] =
      (rtd_logits.gt(0).to(torch::kFloat).eq(replaced).to(torch::kFloat) * weights).sum().item<double>();
  out.sums["rtd_count"] = weights.sum().item<double>();
  return out;
}

std::map<std::string, double> summarise(const std::map<std::string, double>& sums, Objective objective) {
  std::map<std::string, double> values;
  auto get = [&](const char* key) {
    auto found = sums.find(key);
    return found == sums.end() ? 0.0 : found->second;
  };
  if (get("mlm_count") > 0) {
    values["mlm_loss"] = get("mlm_loss_sum") / get("mlm_count");
    values["perplexity"] = std::exp(values["mlm_loss"]);
    values["mlm_accuracy"] = get("mlm_correct") / get("mlm_count");
  }
  if (objective == Objective::kElectra && get("rtd_count") > 0) {
    values["rtd_loss"] = get("rtd_loss_sum") / std::max(1.0, get("rtd_batches"));
    values["rtd_accuracy"] = get("rtd_correct") / get("rtd_count");
  }
  return values;
}

}  // namespace cabert::train
