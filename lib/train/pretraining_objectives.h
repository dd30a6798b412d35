// The pre-training objectives as "a model plus how a batch becomes a loss": MLM (BERT; Chang et al.) and
// ELECTRA replaced-token detection (ConvBERT) for encoders, T5 span corruption (Tay et al.) for
// encoder-decoders, with the metric sums the loop reports. Masks are drawn by lib/data/masking.h, noise spans
// by lib/data/span_corruption.h, losses computed by lib/train/losses.h.
//
// Span corruption is drawn here, at training time, from the same corpus shards MLM reads (as MLM masks are):
// each corpus example's regular tokens ([CLS]/[SEP]/[PAD] framing removed, [UNK] kept) are one T5 chunk, so
// a corpus serves every objective, every pass over it sees fresh noise (T5 corrupts in its input pipeline
// too), and exact resume only needs the checkpointed RNG. Input = the chunk with each noise span replaced by
// <extra_id_i>, then EOS; target = <extra_id_0> span0 ... <extra_id_s>, then EOS. Both are bounded by the
// corpus's max_seq_length: input <= L - n + s + 1 <= L, target <= n + s + 2 (n = round(0.15 L)).
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "formats/model.pb.h"
#include "lib/data/masking.h"
#include "lib/data/span_corruption.h"
#include "lib/data/pretraining_batches.h"
#include "lib/models/pretraining_models.h"
#include "lib/models/seq2seq_model.h"
#include "lib/train/metric_sums.h"

namespace cabert::train {

enum class Objective { kMlm, kElectra, kSpanCorruption };
Objective parse_objective(const std::string& name);  // "mlm" | "electra" | "span-corruption"
const char* objective_name(Objective objective);

// UsageError when the objective does not fit the model: MLM/ELECTRA need an encoder, span corruption an
// encoder-decoder (a config with seq2seq).
void check_objective_fits(const pb::ModelConfig& config, Objective objective);

struct StepOutput {
  torch::Tensor loss;  // what backward() sees
  MetricSums sums;     // metric sums (divided by counts at report time)
  // The loss as weighted means, loss = sum_i weight_i * mean_i, mean i over count_i items (masked tokens,
  // real tokens, target tokens): what a data-parallel step renormalises over the ranks' joint batch.
  struct Term {
    torch::Tensor mean;
    double weight = 1;
    double count = 0;
  };
  std::vector<Term> terms;
};

// This rank's part of the loss of the joint batch of all ranks: sum_i weight_i * mean_i * count_i /
// total_counts[i] * world_size, total_counts[i] = count_i summed over the ranks. The gradient all-reduce
// averages over the ranks, so the update is that of one process holding the joint batch. With one process
// (total = count) it is the loss itself.
torch::Tensor joint_batch_loss(const StepOutput& out, const std::vector<double>& total_counts, int world_size);

// Metric sums: "mlm_loss_sum", "mlm_count", "mlm_correct", "rtd_correct", "rtd_count", "rtd_loss_sum",
// "rtd_batches"; span corruption: "span_loss_sum", "span_tokens", "span_correct" (target tokens, EOS
// included), "noise_tokens", "chunk_tokens" (the regular tokens corrupted).
class Objectives {
 public:
  Objectives(const pb::ModelConfig& config, Objective objective, torch::Device device);

  // Ids below are special; ids 5 .. id - 1 are the tokenizer's sentinels <extra_id_k>.
  void set_first_regular_id(int64_t id);
  void set_span_corruption(double noise_density, double mean_noise_span_length);
  torch::nn::Module& module() { return *module_; }
  // Masks the batch (each row drawing from its own seed in batch.row_seeds, else from rng), runs the model
  // and returns the loss and the metric sums.
  StepOutput compute(const data::Batch& batch, std::mt19937_64& rng);

 private:
  StepOutput compute_span_corruption(const data::Batch& batch, std::mt19937_64& rng);
  Objective objective_;
  torch::Device device_;
  pb::ModelConfig config_;
  models::MlmModel mlm_{nullptr};
  models::ElectraModel electra_{nullptr};
  models::Seq2SeqModel seq2seq_{nullptr};
  data::SpanCorruptionOptions span_;
  std::shared_ptr<torch::nn::Module> module_;
  data::MaskingOptions masking_;
};

// The names of the metric sums `objective` reports (every rank adds the same names in a data-parallel run).
std::vector<std::string> metric_sum_names(Objective objective);

// Per-token means of the sums: mlm_loss, perplexity, mlm_accuracy (+ rtd_loss, rtd_accuracy for ELECTRA);
// span corruption: span_loss (per target token), perplexity, span_accuracy, noise_fraction.
std::map<std::string, double> summarise(const std::map<std::string, double>& sums, Objective objective);

}  // namespace cabert::train
