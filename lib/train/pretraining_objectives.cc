#include "lib/train/pretraining_objectives.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "kernels/seeded_generator.h"
#include "lib/core/errors.h"
#include "lib/data/seq2seq_batches.h"
#include "lib/ops/dropout_ops.h"
#include "lib/train/losses.h"

namespace cabert::train {

Objective parse_objective(const std::string& name) {
  if (name == "mlm") return Objective::kMlm;
  if (name == "electra") return Objective::kElectra;
  if (name == "span-corruption") return Objective::kSpanCorruption;
  throw UsageError(str("--objective: expected mlm, electra or span-corruption, got '", name, "'"));
}

const char* objective_name(Objective objective) {
  switch (objective) {
    case Objective::kMlm: return "mlm";
    case Objective::kElectra: return "electra";
    case Objective::kSpanCorruption: return "span-corruption";
  }
  return "?";
}

void check_objective_fits(const pb::ModelConfig& config, Objective objective) {
  if (config.has_seq2seq() && objective != Objective::kSpanCorruption) {
    throw UsageError(str("pretrain: '", config.name(), "' is an encoder-decoder; ", objective_name(objective),
                         " pre-trains encoders. Use --objective span-corruption (Tay et al.), or train it on parallel "
                         "text with `cabert finetune --task translation`"));
  }
  if (!config.has_seq2seq() && objective == Objective::kSpanCorruption) {
    throw UsageError(str("pretrain: span corruption trains an encoder-decoder; '", config.name(),
                         "' is an encoder (use --objective mlm or electra, or a tay-*, wu-* or transformer-* preset)"));
  }
}

Objectives::Objectives(const pb::ModelConfig& config, Objective objective, torch::Device device)
    : objective_(objective), device_(device), config_(config) {
  check_objective_fits(config, objective);
  if (objective == Objective::kSpanCorruption) {
    seq2seq_ = models::Seq2SeqModel(config);
    module_ = seq2seq_.ptr();
    module_->to(device);
    return;
  }
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

void Objectives::set_first_regular_id(int64_t id) {
  masking_.first_regular_id = id;
  span_.first_sentinel_id = 5;
  span_.num_sentinels = static_cast<int32_t>(id - 5);
}

void Objectives::set_span_corruption(double noise_density, double mean_noise_span_length) {
  span_.noise_density = noise_density;
  span_.mean_noise_span_length = mean_noise_span_length;
  data::check_options(span_);
}

StepOutput Objectives::compute_span_corruption(const data::Batch& batch, std::mt19937_64& rng) {
  RowRandom row_random = batch.row_seeds.empty() ? RowRandom(rng) : RowRandom(batch.row_seeds);
  data::CorruptedRows corrupted = data::corrupt_rows(batch.ids, batch.mask, span_, row_random);
  const std::vector<data::Seq2SeqExample>& examples = corrupted.examples;
  if (examples.empty()) {
    throw DataError(
        "span corruption: expected corpus examples with at least 2 regular tokens, got a batch without any");
  }
  std::vector<size_t> rows(examples.size());
  std::iota(rows.begin(), rows.end(), size_t{0});
  data::Seq2SeqBatch s2s = data::make_seq2seq_batch(examples, rows);
  torch::Tensor target_out = s2s.target_out.to(device_);
  torch::Tensor logits = seq2seq_->forward(s2s.source.to(device_), s2s.source_mask.to(device_),
                                           s2s.target_in.to(device_), s2s.target_mask.to(device_));
  SmoothedLoss loss = label_smoothed_cross_entropy(logits, target_out, 0.0);
  const double tokens = static_cast<double>(s2s.target_tokens);
  StepOutput out;
  out.loss = loss.loss / tokens;
  out.terms.push_back({out.loss, 1.0, tokens});
  out.sums.add("span_loss_sum", loss.nll);
  out.sums.add("span_tokens", tokens);
  out.sums.add("span_correct", logits.argmax(-1).eq(target_out).logical_and(s2s.target_mask.to(device_)).sum());
  // The targets' structure: the sentinels and the EOS (span_accuracy's trivial part, see summarise).
  const int64_t eos = 3;  // make_seq2seq_batch's default EOS, [SEP]
  torch::Tensor sentinel = target_out.ge(span_.first_sentinel_id)
                               .logical_and(target_out.lt(span_.first_sentinel_id + span_.num_sentinels));
  out.sums.add("span_structure_tokens",
               sentinel.logical_or(target_out.eq(eos)).logical_and(s2s.target_mask.to(device_)).sum());
  out.sums.add("noise_tokens", static_cast<double>(corrupted.noise_tokens));
  out.sums.add("chunk_tokens", static_cast<double>(corrupted.chunk_tokens));
  return out;
}

StepOutput Objectives::compute(const data::Batch& batch, std::mt19937_64& rng) {
  if (objective_ == Objective::kSpanCorruption) return compute_span_corruption(batch, rng);
  RowRandom rows = batch.row_seeds.empty() ? RowRandom(rng) : RowRandom(batch.row_seeds);
  data::MaskedBatch masked = data::mask_tokens(batch.ids, batch.mask, masking_, rows);
  torch::Tensor input = masked.input_ids.to(device_), segments = batch.segments.to(device_);
  torch::Tensor mask = batch.mask.to(device_), positions = masked.positions.to(device_);
  torch::Tensor labels = masked.labels.to(device_);
  StepOutput out;
  torch::Tensor logits = objective_ == Objective::kMlm ? mlm_(input, segments, mask, positions)
                                                       : electra_->generator_logits(input, segments, mask, positions);
  torch::Tensor generator_loss = mlm_loss(logits, labels);
  const double count = static_cast<double>(labels.size(0));
  out.sums.add("mlm_loss_sum", generator_loss.detach().to(torch::kDouble) * count);
  out.sums.add("mlm_count", count);
  out.sums.add("mlm_correct", logits.argmax(-1).eq(labels).sum());
  if (objective_ == Objective::kMlm) {
    out.loss = generator_loss;
    out.terms.push_back({generator_loss, 1.0, count});
    return out;
  }
  // Replace the selected tokens with samples from the generator (no gradient through sampling).
  torch::Tensor sampled;
  {
    torch::NoGradGuard no_grad;
    // On CUDA the samples come from the device's generator, which no checkpoint keeps: seeded for the call from
    // the CPU generator (which they keep), they repeat and resume with the run. The CPU samples as it always did.
    std::optional<kernels::SeededGenerator> seeded;
    if (logits.is_cuda()) seeded.emplace(logits.device(), ops::draw_seed());
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
  out.terms.push_back({generator_loss, e.generator_weight(), count});
  out.terms.push_back({rtd_loss, e.discriminator_weight(), static_cast<double>(batch.tokens)});
  out.sums.add("rtd_loss_sum", rtd_loss);
  out.sums.add("rtd_batches", 1.0);
  out.sums.add("rtd_correct", (rtd_logits.gt(0).to(torch::kFloat).eq(replaced).to(torch::kFloat) * weights).sum());
  out.sums.add("rtd_count", weights.sum());
  out.sums.add("rtd_replaced", (replaced * weights).sum());
  return out;
}

torch::Tensor joint_batch_loss(const StepOutput& out, const std::vector<double>& total_counts, int world_size) {
  if (world_size == 1) return out.loss;
  if (total_counts.size() != out.terms.size()) {
    throw Error(str("internal: ", out.terms.size(), " loss terms, ", total_counts.size(), " counts"));
  }
  torch::Tensor loss;
  for (size_t i = 0; i < out.terms.size(); ++i) {
    const auto& term = out.terms[i];
    const double scale = total_counts[i] > 0 ? term.weight * term.count / total_counts[i] * world_size : 0.0;
    torch::Tensor part = term.mean * scale;
    loss = loss.defined() ? loss + part : part;
  }
  return loss;
}

std::vector<std::string> metric_sum_names(Objective objective) {
  switch (objective) {
    case Objective::kMlm: return {"mlm_loss_sum", "mlm_count", "mlm_correct"};
    case Objective::kElectra:
      return {"mlm_loss_sum", "mlm_count", "mlm_correct", "rtd_loss_sum", "rtd_batches", "rtd_correct", "rtd_count",
              "rtd_replaced"};
    case Objective::kSpanCorruption:
      return {"span_loss_sum", "span_tokens", "span_correct", "noise_tokens", "chunk_tokens", "span_structure_tokens"};
  }
  return {};
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
  if (get("span_tokens") > 0) {
    values["span_loss"] = get("span_loss_sum") / get("span_tokens");
    values["perplexity"] = std::exp(values["span_loss"]);
    values["span_accuracy"] = get("span_correct") / get("span_tokens");
    // The accuracy of a model right on every sentinel and EOS and wrong on every span token: the part of
    // span_accuracy the targets' format gives away, which a model must pass to have learned the text.
    values["span_structure_fraction"] = get("span_structure_tokens") / get("span_tokens");
  }
  if (get("chunk_tokens") > 0) values["noise_fraction"] = get("noise_tokens") / get("chunk_tokens");
  if (objective == Objective::kElectra && get("rtd_count") > 0) {
    values["rtd_loss"] = get("rtd_loss_sum") / std::max(1.0, get("rtd_batches"));
    values["rtd_accuracy"] = get("rtd_correct") / get("rtd_count");
    // The control: predicting "original" everywhere is right on every token the generator did not replace.
    values["rtd_trivial_accuracy"] = 1.0 - get("rtd_replaced") / get("rtd_count");
  }
  return values;
}

}  // namespace cabert::train
