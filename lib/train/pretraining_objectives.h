// The encoder pre-training objectives as "a model plus how a batch becomes a loss": MLM (BERT; Chang et
// al.) and ELECTRA replaced-token detection (ConvBERT), with the metric sums the loop reports. Masks are
// drawn by lib/data/masking.h, losses computed by lib/train/losses.h.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <random>
#include <string>

#include "formats/model.pb.h"
#include "lib/data/masking.h"
#include "lib/data/pretraining_batches.h"
#include "lib/models/pretraining_models.h"

namespace cabert::train {

enum class Objective { kMlm, kElectra };
Objective parse_objective(const std::string& name);  // "mlm" | "electra"

struct StepOutput {
  torch::Tensor loss;                   // what backward() sees
  std::map<std::string, double> sums;   // metric sums (divided by counts at report time)
};

// Metric sums: "mlm_loss_sum", "mlm_count", "mlm_correct", "rtd_correct", "rtd_count", "rtd_loss_sum",
// "rtd_batches".
class Objectives {
 public:
  Objectives(const pb::ModelConfig& config, Objective objective, torch::Device device);

  void set_first_regular_id(int64_t id) { masking_.first_regular_id = id; }
  torch::nn::Module& module() { return *module_; }
  // Masks the batch (drawing from rng), runs the model and returns the loss and the metric sums.
  StepOutput compute(const data::Batch& batch, std::mt19937_64& rng);

 private:
  Objective objective_;
  torch::Device device_;
  pb::ModelConfig config_;
  models::MlmModel mlm_{nullptr};
  models::ElectraModel electra_{nullptr};
  std::shared_ptr<torch::nn::Module> module_;
  data::MaskingOptions masking_;
};

// Per-token means of the sums: mlm_loss, perplexity, mlm_accuracy (+ rtd_loss, rtd_accuracy for ELECTRA).
std::map<std::string, double> summarise(const std::map<std::string, double>& sums, Objective objective);

}  // namespace cabert::train
